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

    Parameters
    ----------
    tokens : array_like of int
        Token indices, ``0 <= tokens <= T*v`` (0 is [MASK], words are ``1 .. T*v``); any shape.
    v : int, v >= 1
        Words per topic.

    Returns
    -------
    topics : ndarray of int, same shape as ``tokens``
        ``(w - 1) // v`` for a word ``w``, ``-1`` for [MASK].

    See Also
    --------
    TopicModel.topic_of : The same rule as a method of the model.
    TopicModel.token_topics : The topic of every token ``0 .. V1-1``.
    GeneralTopicModel.token_topics : The dominant topic of every token of a general model.

    References
    ----------
    SPEC §1.1 (the token layout); DESIGN.md (the fixed layout, index 0 is [MASK]).

    Examples
    --------
    >>> from theorycheck.models import token_topic
    >>> token_topic([0, 1, 2, 3, 4, 6], v=3)
    array([-1,  0,  0,  0,  1,  1])
    >>> token_topic(np.arange(7).reshape(1, 7), v=2)
    array([[-1,  0,  0,  1,  1,  2,  2]])
    """
    tokens = np.asarray(tokens)
    return np.where(tokens == 0, -1, (tokens - 1) // v)
