"""The fixed token layout (DESIGN.md): index 0 is ``[MASK]``; words are ``1 .. n_words``.

For the paper's model ``topic(w) = (w - 1) // v`` (0-based topics) and ``V1 = T*v + 1``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["PRIORS", "token_topic", "MAX_TOKENS", "MAX_ENUMERATED_SETS"]

#: The two document laws (SPEC §1, §1.2, §11.1).
PRIORS = ("uniform-tau", "dirichlet")

#: Token indices are int32 in the kernels: ``V1 = n_words + 1`` must stay below this.
MAX_TOKENS = 2**31 - 1

#: Largest number of uniform-tau topic sets ``C(T, tau)`` enumerated by default
#: (:func:`theorycheck.population.topic_sets`, the exact general-model losses of SPEC §11.4). It lives with the
#: model (``n_topic_sets`` is the model's) so that the CLI can check a model against it without importing the
#: population kernels.
MAX_ENUMERATED_SETS = 200_000


def token_topic(tokens: ArrayLike, v: int) -> np.ndarray:
    """Topic (0-based) of each token of the paper's layout, ``(w - 1) // v``; ``-1`` for [MASK] (token 0).

    The one place the layout's topic rule is written; :meth:`TopicModel.topic_of` calls it. For
    callers that know only ``v`` (matrices indexed by tokens). No validation (hot paths).
    """
    tokens = np.asarray(tokens)
    return np.where(tokens == 0, -1, (tokens - 1) // v)
