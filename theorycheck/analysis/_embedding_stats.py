"""Embedding statistics by pair class (SPEC §4.1, §5.4): re-exported by :mod:`theorycheck.analysis.stats`."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from .._validate import check_array
from ..models import GeneralTopicModel, TopicModel, check_models

__all__ = ["EmbeddingTopicStats", "embedding_topic_stats", "topic_block_sums", "own_minus_other_block_sums"]


# ============================================================================= embedding statistics
# (SPEC §4.1, §5.4, §6 items 11-14; issue #3). Pair classes follow the paper's code
# (``inspect_result.py``): same token, same topic (distinct tokens), different topic; the
# [MASK] token (index 0) is excluded from every class. A word's topic is its topic in the paper's
# model and its dominant topic in a general model (``dominant_topic()``, SPEC §11.1); the per-topic
# sums of embedding columns are the one model-specific step (:func:`_topic_sums`).


@dataclass(frozen=True)
class EmbeddingTopicStats:
    """Mean inner products / cosine similarities of word embeddings by pair class.

    Means are over ordered pairs ``(i, j)`` of words (``1 .. T v``; [MASK] excluded):
    ``same_token`` (``i = j``), ``same_topic`` (``i != j``, ``t(i) = t(j)``), ``diff_topic``
    (``t(i) != t(j)``). ``gap_dot = same_topic_dot - diff_topic_dot`` and
    ``gap_cos = same_topic_cos - diff_topic_cos`` are the paper's headline quantities (§5.4).
    ``n_same_token, n_same_topic, n_diff_topic`` are the pair counts.

    Parameters
    ----------
    same_token_dot : float
        ``mean_i ||E_i||^2`` over the words.
    same_topic_dot, diff_topic_dot : float
        Mean ``<E_i, E_j>`` over the same-topic (``i != j``) and the different-topic pairs.
    same_topic_cos, diff_topic_cos : float
        The same means of the cosine similarity, each in ``[-1, 1]``.
    gap_dot : float
        ``same_topic_dot - diff_topic_dot``.
    gap_cos : float
        ``same_topic_cos - diff_topic_cos``, in ``[-2, 2]``.
    n_same_token, n_same_topic, n_diff_topic : int
        The pair counts: ``n``, ``sum_t n_t (n_t - 1)`` and ``n^2 - sum_t n_t^2`` (``n`` words, ``n_t`` in
        topic ``t``).

    See Also
    --------
    embedding_topic_stats : Computes it.
    theorycheck.analysis.matrix_topic_stats : The same gap for any token matrix (here the Gram ``W_E^T W_E``).

    References
    ----------
    SPEC §4.1 (embedding optima), §5.4 (the paper's embedding statistics).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import EmbeddingTopicStats, embedding_topic_stats
    >>> st = embedding_topic_stats(W_E, tm)
    >>> isinstance(st, EmbeddingTopicStats), st.gap_dot, st.gap_cos, st.n_same_topic, st.n_diff_topic
    (True, 1.0, 1.0, 6, 24)
    >>> sorted(st.to_dict())[:3]
    ['diff_topic_cos', 'diff_topic_dot', 'gap_cos']
    """

    same_token_dot: float
    same_topic_dot: float
    diff_topic_dot: float
    same_topic_cos: float
    diff_topic_cos: float
    gap_dot: float
    gap_cos: float
    n_same_token: int
    n_same_topic: int
    n_diff_topic: int

    def to_dict(self) -> dict:
        """The fields as a plain dict (JSON-ready)."""
        return asdict(self)


def _check_embedding(W_E, tm):
    check_models(tm, general=True)
    W_E = check_array("W_E", W_E, ndim=2)
    if W_E.shape[1] != tm.V1 or W_E.shape[0] < 1:
        raise ValueError(f"W_E must have shape (d, V1) = (d >= 1, {tm.V1}), got {W_E.shape}")
    return W_E


@functools.singledispatch
def _topic_sums(tm: GeneralTopicModel, X) -> np.ndarray:
    """``(d, T)``: column ``t`` is the sum of the word columns of ``X`` whose dominant topic is ``t``
    (generic route, SPEC §11.1)."""
    Z = np.zeros((tm.n_words, tm.T))
    Z[np.arange(tm.n_words), tm.dominant_topic()] = 1.0
    return X[:, 1:] @ Z


@_topic_sums.register
def _(tm: TopicModel, X) -> np.ndarray:
    """The paper's layout: topic ``t`` is the words ``1 + t v .. (t + 1) v`` (a reshape, O(d V1))."""
    return X[:, 1:].reshape(X.shape[0], tm.T, tm.v).sum(axis=2)


def _class_sums(X, tm):
    """Sums of <X_i, X_j> over same-token, same-topic (incl. i = j) and all ordered word pairs."""
    words = X[:, 1:]
    same_token = float(np.sum(words * words))
    topic_sums = _topic_sums(tm, X)  # (d, T)
    same_topic_incl = float(np.sum(topic_sums * topic_sums))
    tot = topic_sums.sum(axis=1)
    all_pairs = float(tot @ tot)
    return same_token, same_topic_incl, all_pairs


def embedding_topic_stats(W_E, tm: GeneralTopicModel) -> EmbeddingTopicStats:
    """Same-topic vs different-topic mean inner product and cosine similarity of embeddings.

    .. math::
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{same}} =
        \\frac{\\sum_t \\|\\sum_{i\\in t} E_i\\|^2 - \\sum_i \\|E_i\\|^2}{\\sum_t n_t (n_t - 1)},\\qquad
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{diff}} =
        \\frac{\\|\\sum_i E_i\\|^2 - \\sum_t \\|\\sum_{i\\in t} E_i\\|^2}{n^2 - \\sum_t n_t^2},

    (``n_t`` words in topic ``t``, ``n`` words; ``T v (v-1)`` and ``T (T-1) v^2`` for the paper's
    model), and the same with unit-normalised embeddings for the cosine. Cost ``O(d V1)`` for the
    paper's model, ``O(d V1 T)`` for a general one (topics: dominant topics, SPEC §11.1). Equals
    :func:`theorycheck.analysis.topic_structure.matrix_topic_stats` of the Gram ``W_E^T W_E``
    (off-diagonal pairs) without forming it.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i`` (column 0, [MASK], is ignored).
    tm : GeneralTopicModel
        Any topic model (the paper's: T topics of v words; a general one: dominant topics).

    Returns
    -------
    EmbeddingTopicStats
        The class means above (inner product and cosine), their gaps and the pair counts.

    Raises
    ------
    ValueError
        A pair class is empty (the paper's model: ``T < 2`` or ``v < 2``), a zero word embedding
        (cosine undefined), wrong shape or non-finite entries.

    See Also
    --------
    topic_block_sums : The per-word, per-topic sums of inner products.
    own_minus_other_block_sums : The block-sum identity of the tied optima (SPEC §4.1 D2).
    theorycheck.analysis.matrix_topic_stats : The same gap from the Gram matrix.

    References
    ----------
    SPEC §4.1 (embedding optima), §5.4 (the paper's pair classes, official ``inspect_result.py``),
    §11.1 (dominant topics).

    Examples
    --------
    Topic-indicator embeddings: same-topic words coincide (dot 1, cosine 1), different topics are
    orthogonal:

    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import embedding_topic_stats
    >>> st = embedding_topic_stats(W_E, tm)
    >>> st.same_topic_dot, st.diff_topic_dot, st.same_topic_cos, st.diff_topic_cos, st.gap_dot
    (1.0, 0.0, 1.0, 0.0, 1.0)

    The gap equals that of the Gram ``W_E^T W_E`` over off-diagonal pairs:

    >>> from theorycheck.analysis import topic_gap
    >>> E = np.random.default_rng(0).standard_normal((4, tm.V1))
    >>> round(embedding_topic_stats(E, tm).gap_dot, 12) == round(topic_gap(E.T @ E, tm), 12)
    True
    """
    W_E = _check_embedding(W_E, tm)
    sizes = np.bincount(tm.dominant_topic(), minlength=tm.T).astype(np.int64)
    n_tok = tm.n_words
    n_same, n_diff = int(np.sum(sizes * (sizes - 1))), int(n_tok * n_tok - np.sum(sizes * sizes))
    if n_same == 0 or n_diff == 0:
        raise ValueError(
            f"embedding_topic_stats needs T >= 2 and v >= 2 (two topics, a topic of two words; otherwise the "
            f"different-topic or the same-topic distinct-token class is empty), got T={tm.T}, "
            f"topic sizes {sizes.tolist()}"
        )
    norms = np.linalg.norm(W_E[:, 1:], axis=0)
    if np.any(norms == 0):
        i = int(np.argmax(norms == 0)) + 1
        raise ValueError(f"W_E has a zero embedding for word {i}; cosine similarity is undefined")
    st, si, al = _class_sums(W_E, tm)
    U = W_E.copy()
    U[:, 1:] /= norms
    cst, csi, cal = _class_sums(U, tm)
    same_dot, diff_dot = (si - st) / n_same, (al - si) / n_diff
    same_cos, diff_cos = (csi - cst) / n_same, (cal - csi) / n_diff
    return EmbeddingTopicStats(
        same_token_dot=st / n_tok,
        same_topic_dot=same_dot,
        diff_topic_dot=diff_dot,
        same_topic_cos=same_cos,
        diff_topic_cos=diff_cos,
        gap_dot=same_dot - diff_dot,
        gap_cos=same_cos - diff_cos,
        n_same_token=n_tok,
        n_same_topic=n_same,
        n_diff_topic=n_diff,
    )


def topic_block_sums(W_E, tm: GeneralTopicModel) -> np.ndarray:
    """Block sums ``Y[i, t] = sum_{j in topic t} <E_i, E_j>``, shape ``(V1, T)`` (row 0 = [MASK]).

    Computed as ``W_E^T (W_E [1_1 .. 1_T])`` in ``O(d V1 T)`` without forming the Gram matrix. Any
    topic model (a general one: dominant topics, SPEC §11.1).

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i``, finite, ``d >= 1``.
    tm : GeneralTopicModel
        Any topic model (the paper's: T topics of v words; a general one: dominant topics).

    Returns
    -------
    ndarray, shape (V1, T)
        ``Y[i, t] = sum_{j in topic t} <E_i, E_j>`` (row 0 is [MASK]'s).

    Raises
    ------
    ValueError
        ``W_E`` not of shape ``(d, V1)`` with ``d >= 1``, or non-finite entries.

    See Also
    --------
    own_minus_other_block_sums : Own-topic minus other-topic block sums.
    embedding_topic_stats : The pair-class means.

    References
    ----------
    SPEC §4.1 D1/D2 (block-sum identities of the optima), §11.1 (dominant topics).

    Examples
    --------
    Topic-indicator embeddings: each word's own topic sums to ``v``, the others to 0:

    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import topic_block_sums
    >>> topic_block_sums(W_E, tm)
    array([[0., 0., 0.],
           [2., 0., 0.],
           [2., 0., 0.],
           [0., 2., 0.],
           [0., 2., 0.],
           [0., 0., 2.],
           [0., 0., 2.]])
    """
    return _topic_block_sums(_check_embedding(W_E, tm), tm)


def _topic_block_sums(W_E, tm):
    return W_E.T @ _topic_sums(tm, W_E)


def own_minus_other_block_sums(W_E, tm: GeneralTopicModel) -> np.ndarray:
    """Per word ``i`` and other topic ``t' != t(i)``: ``sum_{j in t(i)} <E_i,E_j> - sum_{j in t'} <E_i,E_j>``.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i``, finite, ``d >= 1``.
    tm : GeneralTopicModel
        Any topic model with ``T >= 2``.

    Returns
    -------
    ndarray, shape (T v, T - 1)
        Row ``i - 1`` is word ``i``; columns are the other topics in increasing order. For every
        tied population minimiser of the paper's model all entries equal ``1/a`` (SPEC §4.1 D2).
        Any topic model (a general one: a word's own topic is its dominant topic, SPEC §11.1).

    Raises
    ------
    ValueError
        ``T < 2`` (no other topic), wrong shape or non-finite entries.

    See Also
    --------
    topic_block_sums : The block sums themselves.
    theorycheck.solvers.closed_form_gram : The minimum-norm tied optimum (SPEC §4.1 D3).

    References
    ----------
    SPEC §4.1 D2 (own minus other block sum ``= 1/a`` at every tied minimiser), §11.1.

    Examples
    --------
    Factor the minimum-norm tied optimum ``G = W_E^T W_E``: every entry is ``1/a``:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.stats import own_minus_other_block_sums
    >>> from theorycheck.solvers import closed_form_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> lam, U = np.linalg.eigh(closed_form_gram(tm, mk).toarray())
    >>> W_E = (U * np.sqrt(np.clip(lam, 0, None))).T
    >>> D = own_minus_other_block_sums(W_E, tm)
    >>> D.shape, bool(np.allclose(D, 1 / mk.a, rtol=1e-12))
    ((6, 2), True)
    """
    W_E = _check_embedding(W_E, tm)
    if tm.T < 2:
        raise ValueError(f"own_minus_other_block_sums needs T >= 2 (an other topic), got T={tm.T}")
    Y = _topic_block_sums(W_E, tm)[1:]  # (Tv, T)
    own_topic = tm.dominant_topic()
    own = Y[np.arange(tm.n_words), own_topic]
    mask = np.ones_like(Y, dtype=bool)
    mask[np.arange(tm.n_words), own_topic] = False
    other = Y[mask].reshape(tm.n_words, tm.T - 1)
    return own[:, None] - other
