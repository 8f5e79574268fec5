"""Topic models and masking: one model abstraction (SPEC §1, §2.1, §11).

:class:`GeneralTopicModel` is *the* topic model: any row-stochastic topic-word matrix ``phi`` and
either document law (a uniform random ``tau``-subset of topics, or Dirichlet topic proportions).
The paper's symmetric model, :class:`TopicModel` (``T`` disjoint topics of ``v`` equally likely
words), is its special case: a subclass that stores O(1) numbers (``phi`` is materialised only
when a generic route asks for it) and whose closed forms are registered as fast paths of the
generic functions (``functools.singledispatch`` on the model type, one registration per formula;
see SPEC §11 and the architecture section of the README). Both are immutable and validated at
construction, so functions trust them once :func:`check_models` has checked the types at the
public entry.

This module only re-exports.
"""

from .checks import check_models, require_symmetric
from .general import ROW_SUM_TOL, GeneralTopicModel
from .layout import PRIORS, token_topic
from .masking import Masking
from .paper import TopicModel

__all__ = [
    "GeneralTopicModel",
    "TopicModel",
    "Masking",
    "PRIORS",
    "ROW_SUM_TOL",
    "token_topic",
    "check_models",
    "require_symmetric",
]
