"""Topic statistics of learned objects (embeddings, value matrices, attention).

Each block of functions below belongs to one object and is self-contained (its own imports and
``__all__ +=`` line), so blocks from different contributors can simply be concatenated.
Statistics take arrays (and the token layout of a :class:`~theorycheck.config.TopicModel`) and
return small dataclasses or arrays. No optimisation happens here.
"""

from __future__ import annotations

__all__: list[str] = []


# ============================================================================= embedding statistics
# (PAPER_SPEC §4.1, §5.4, §6 items 11-14; issue #3). Pair classes follow the paper's code
# (``inspect_result.py``): same token, same topic (distinct tokens), different topic; the
# [MASK] token (index 0) is excluded from every class.
from dataclasses import asdict, dataclass  # noqa: E402

import numpy as np  # noqa: E402

from ._validate import check_array  # noqa: E402
from .config import TopicModel  # noqa: E402

__all__ += ["EmbeddingTopicStats", "embedding_topic_stats", "topic_block_sums", "own_minus_other_block_sums"]


@dataclass(frozen=True)
class EmbeddingTopicStats:
    """Mean inner products / cosine similarities of word embeddings by pair class.

    Means are over ordered pairs ``(i, j)`` of words (``1 .. T v``; [MASK] excluded):
    ``same_token`` (``i = j``), ``same_topic`` (``i != j``, ``t(i) = t(j)``), ``diff_topic``
    (``t(i) != t(j)``). ``gap_dot = same_topic_dot - diff_topic_dot`` and
    ``gap_cos = same_topic_cos - diff_topic_cos`` are the paper's headline quantities (§5.4).
    ``n_same_token, n_same_topic, n_diff_topic`` are the pair counts.
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
        return asdict(self)


def _check_embedding(W_E, tm, where):
    if not isinstance(tm, TopicModel):
        raise TypeError(f"tm must be a TopicModel, got {type(tm).__name__}")
    W_E = check_array("W_E", W_E, ndim=2)
    if W_E.shape[1] != tm.V1 or W_E.shape[0] < 1:
        raise ValueError(f"W_E must have shape (d, V1) = (d >= 1, {tm.V1}), got {W_E.shape}")
    return W_E


def _class_sums(X, T, v):
    """Sums of <X_i, X_j> over same-token, same-topic (incl. i = j) and all ordered word pairs."""
    words = X[:, 1:]
    same_token = float(np.sum(words * words))
    topic_sums = words.reshape(X.shape[0], T, v).sum(axis=2)  # (d, T)
    same_topic_incl = float(np.sum(topic_sums * topic_sums))
    tot = topic_sums.sum(axis=1)
    all_pairs = float(tot @ tot)
    return same_token, same_topic_incl, all_pairs


def embedding_topic_stats(W_E, tm: TopicModel) -> EmbeddingTopicStats:
    """Same-topic vs different-topic mean inner product and cosine similarity of embeddings.

    .. math::
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{same}} =
        \\frac{\\sum_t \\|\\sum_{i\\in t} E_i\\|^2 - \\sum_i \\|E_i\\|^2}{T v (v-1)},\\qquad
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{diff}} =
        \\frac{\\|\\sum_i E_i\\|^2 - \\sum_t \\|\\sum_{i\\in t} E_i\\|^2}{T (T-1) v^2},

    and the same with unit-normalised embeddings for the cosine. Cost ``O(d V1)``.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i`` (column 0, [MASK], is ignored).
    tm : TopicModel
        Token layout (T topics of v words).

    Raises
    ------
    ValueError
        ``T < 2`` or ``v < 2`` (a pair class would be empty), a zero word embedding (cosine
        undefined), wrong shape or non-finite entries.
    """
    W_E = _check_embedding(W_E, tm, "embedding_topic_stats")
    T, v = tm.T, tm.v
    if T < 2 or v < 2:
        raise ValueError(
            f"embedding_topic_stats needs T >= 2 and v >= 2 (otherwise the different-topic or the "
            f"same-topic distinct-token class is empty), got T={T}, v={v}"
        )
    norms = np.linalg.norm(W_E[:, 1:], axis=0)
    if np.any(norms == 0):
        i = int(np.argmax(norms == 0)) + 1
        raise ValueError(f"W_E has a zero embedding for word {i}; cosine similarity is undefined")
    n_tok, n_same, n_diff = T * v, T * v * (v - 1), T * (T - 1) * v * v
    st, si, al = _class_sums(W_E, T, v)
    U = W_E.copy()
    U[:, 1:] /= norms
    cst, csi, cal = _class_sums(U, T, v)
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


def topic_block_sums(W_E, tm: TopicModel) -> np.ndarray:
    """Block sums ``Y[i, t] = sum_{j in topic t} <E_i, E_j>``, shape ``(V1, T)`` (row 0 = [MASK]).

    Computed as ``W_E^T (W_E [1_1 .. 1_T])`` in ``O(d V1 T)`` without forming the Gram matrix.
    """
    W_E = _check_embedding(W_E, tm, "topic_block_sums")
    topic_vecs = W_E[:, 1:].reshape(W_E.shape[0], tm.T, tm.v).sum(axis=2)  # (d, T)
    return W_E.T @ topic_vecs


def own_minus_other_block_sums(W_E, tm: TopicModel) -> np.ndarray:
    """Per word ``i`` and other topic ``t' != t(i)``: ``sum_{j in t(i)} <E_i,E_j> - sum_{j in t'} <E_i,E_j>``.

    Returns
    -------
    ndarray, shape (T v, T - 1)
        Row ``i - 1`` is word ``i``; columns are the other topics in increasing order. For every
        tied population minimiser all entries equal ``1/a`` (PAPER_SPEC §4.1 D2).

    Raises
    ------
    ValueError
        ``T < 2`` (no other topic), wrong shape or non-finite entries.
    """
    W_E = _check_embedding(W_E, tm, "own_minus_other_block_sums")
    if tm.T < 2:
        raise ValueError(f"own_minus_other_block_sums needs T >= 2 (an other topic), got T={tm.T}")
    Y = topic_block_sums(W_E, tm)[1:]  # (Tv, T)
    own_topic = np.arange(tm.n_words) // tm.v
    own = Y[np.arange(tm.n_words), own_topic]
    mask = np.ones_like(Y, dtype=bool)
    mask[np.arange(tm.n_words), own_topic] = False
    other = Y[mask].reshape(tm.n_words, tm.T - 1)
    return own[:, None] - other


# ============================================================================= end of embedding statistics
