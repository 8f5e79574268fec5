"""Topic labels of words and tokens, for any topic labelling (SPEC §11.1, §11.6).

The labels every statistic of :mod:`theorycheck.analysis.topic_structure` reads (and re-exports):
the paper's topics ``(w - 1) // v``, a general model's dominant topics, or labels the caller passes.
"""

from __future__ import annotations

import numpy as np

from .._validate import check_int
from ..models import check_models, token_topic

__all__ = ["word_topics", "token_labels"]


def word_topics(g, topics=None) -> np.ndarray:
    """The word labels ``z`` (shape ``(n_words,)``) of any topic model ``g``: ``topics`` validated, or
    ``g.dominant_topic()`` (for the paper's model its topics ``(w - 1) // v``).

    Parameters
    ----------
    g : TopicModel or GeneralTopicModel
        The topic model (its vocabulary size ``n_words`` and its dominant topics).
    topics : array_like of int, shape (n_words,), optional
        Non-negative integer word labels (integral floats are accepted); default ``g.dominant_topic()``.

    Returns
    -------
    ndarray of int64, shape (n_words,)
        ``z[w - 1]``, the label of word ``w = 1 .. n_words``.

    Raises
    ------
    ValueError
        ``topics`` of the wrong shape, not integral, or with a negative label.

    See Also
    --------
    token_labels : The labels of every token, [MASK] included.
    matrix_topic_stats : The statistics computed over these labels.
    theorycheck.models.GeneralTopicModel.token_topics : A general model's dominant topics (SPEC §11.1).

    References
    ----------
    SPEC §11.6 (statistics under any labelling), §11.1 (dominant topics).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis.topic_structure import word_topics
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> word_topics(tm)  # the paper's topics (w - 1) // v
    array([0, 0, 1, 1, 2, 2])
    >>> word_topics(tm, [1, 1, 0, 0, 2, 2])
    array([1, 1, 0, 0, 2, 2])
    >>> word_topics(tm, [0, 1, 2])
    Traceback (most recent call last):
    ...
    ValueError: topics must have shape (n_words,) = (6,), got (3,)
    """
    check_models(g, general=True)
    return _word_topics(g, topics)


def _word_topics(g, topics) -> np.ndarray:
    if topics is None:
        return np.asarray(g.dominant_topic(), dtype=np.int64)
    z = np.asarray(topics)
    if z.shape != (g.n_words,):
        raise ValueError(f"topics must have shape (n_words,) = ({g.n_words},), got {z.shape}")
    if not np.issubdtype(z.dtype, np.integer):
        if z.dtype == bool or not np.all(np.isfinite(z)) or np.any(z != np.round(z)):
            raise ValueError("topics must be integer topic labels")
        z = z.astype(np.int64)
    if z.min() < 0:
        raise ValueError(f"topics must be non-negative integer labels, got min {int(z.min())}")
    return z.astype(np.int64)


def token_labels(topics, V1: int) -> np.ndarray:
    """Topic label of every token ``t`` in ``range(V1)`` (entry 0, [MASK], is never read), shape ``(V1,)``.

    ``topics`` is either ``v``, the words per topic of the paper's layout (label ``(w - 1) // v``;
    ``V1 - 1`` must be a multiple of ``v``), or the labels themselves, shape ``(V1,)``: a model's
    ``token_topics()`` (the paper's topics, or a general model's dominant topics, SPEC §11.1).

    Parameters
    ----------
    topics : int or array_like, shape (V1,)
        ``v >= 1`` (words per topic, with ``(V1 - 1) % v == 0``) or the token labels themselves.
    V1 : int
        The number of tokens, ``T v + 1`` for the paper's model ([MASK] is token 0).

    Returns
    -------
    ndarray, shape (V1,)
        The label of each token: ``(t - 1) // v`` when ``topics = v`` (``-1`` for [MASK]), else ``topics``.

    Raises
    ------
    ValueError
        ``v < 1``, ``V1 - 1`` not a multiple of ``v``, or labels not of shape ``(V1,)``.

    See Also
    --------
    word_topics : The validated word labels of a topic model.
    block_contrast : Reads labels given this way.
    effective_K : Reads labels given this way.

    References
    ----------
    SPEC §11.6 (any labelling), §11.1 (a general model's dominant topics).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis.topic_structure import token_labels
    >>> token_labels(2, 7)  # T = 3 topics of v = 2 words, token 0 is [MASK]
    array([-1,  0,  0,  1,  1,  2,  2])
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> bool(np.array_equal(token_labels(tm.token_topics(), tm.V1), token_labels(tm.v, tm.V1)))
    True
    >>> token_labels(4, 7)
    Traceback (most recent call last):
    ...
    ValueError: M must be a (T v + 1, T v + 1) token matrix with v=4, got V1=7
    """
    if np.ndim(topics) == 0:
        v = check_int("v", topics, low=1)
        if (V1 - 1) % v:
            raise ValueError(f"M must be a (T v + 1, T v + 1) token matrix with v={v}, got V1={V1}")
        return token_topic(np.arange(V1), v)
    lab = np.asarray(topics)
    if lab.shape != (V1,):
        raise ValueError(f"topics must be v (words per topic) or labels of shape (V1,) = ({V1},), got {lab.shape}")
    return lab


def _token_word_block(M, topics):
    """``(M[1:, 1:], same)`` of a square token matrix: ``same[w, w']`` iff words ``w, w'`` share a label."""
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < 2:
        raise ValueError(f"M must be a square (V1, V1) token matrix, got shape {M.shape}")
    lab = token_labels(topics, M.shape[0])[1:]
    return M[1:, 1:], lab[:, None] == lab[None, :], lab
