"""Finite documents from the topic model and BERT-style masking (SPEC §1, §2.1).

Every sampler takes ``rng`` (a ``numpy.random.Generator``) or ``seed``; the same seed gives
bit-identical output. Documents are stored as padded ``int64`` arrays: words are ``1 .. T*v``,
padding is ``-1``, [MASK] (after masking) is ``0``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._general_sampling import sample_general_documents
from ._memory import check_alloc, resolve_max_bytes
from ._validate import check_int, check_rng
from .models import Masking, TopicModel, check_models, is_general

__all__ = [
    "Documents",
    "MaskedBatch",
    "sample_documents",
    "mask_documents",
    "token_counts",
    "check_sample_size",
    "PAD",
]

#: Padding value in token arrays.
PAD = -1

#: ``(n_docs, N_max)`` 8-byte arrays alive at once while sampling (draws, topics, words, output)
#: and while masking (uniforms, random words, inputs, the boolean masks).
SAMPLE_ARRAYS = 5
MASK_ARRAYS = 4
_SIZE_HINT = "fewer documents per call (a loop over batches) or a shorter N"


class Documents(NamedTuple):
    """A batch of documents.

    Attributes
    ----------
    tokens : ndarray of int64, shape (n_docs, N_max)
        Words ``1 .. T*v``; positions ``>= lengths[i]`` hold :data:`PAD`.
    lengths : ndarray of int64, shape (n_docs,)
    topics : ndarray of int64, shape (n_docs, tau), or None
        Sorted topic set of each document (uniform-tau prior).
    theta : ndarray of float64, shape (n_docs, T), or None
        Topic proportions of each document (Dirichlet prior).
    """

    tokens: np.ndarray
    lengths: np.ndarray
    topics: np.ndarray | None
    theta: np.ndarray | None


class MaskedBatch(NamedTuple):
    """Masked documents.

    Attributes
    ----------
    inputs : ndarray of int64, shape (n_docs, N_max)
        What the model sees: original word, a random word, or 0 ([MASK]); :data:`PAD` padding.
    selected : ndarray of bool, shape (n_docs, N_max)
        Positions selected for prediction (the loss is averaged over these).
    targets : ndarray of int64, shape (n_docs, N_max)
        The original words (``Documents.tokens``).
    lengths : ndarray of int64, shape (n_docs,)
    """

    inputs: np.ndarray
    selected: np.ndarray
    targets: np.ndarray
    lengths: np.ndarray


def _check_length(N):
    if isinstance(N, (tuple, list)):
        if len(N) != 2:
            raise ValueError(f"N must be an int or a (lo, hi) pair, got {N!r}")
        lo = check_int("N[0]", N[0], low=1)
        hi = check_int("N[1]", N[1], low=1)
        if hi < lo:
            raise ValueError(f"N = (lo, hi) needs lo <= hi, got {N!r}")
        return lo, hi
    n = check_int("N", N, low=1)
    return n, n


def sample_documents(
    tm: TopicModel, n_docs: int, N, *, rng=None, seed=None, topic_sets=None, max_bytes=None
) -> Documents:
    """Sample ``n_docs`` documents from the topic model.

    Parameters
    ----------
    tm : TopicModel
        Uniform-tau: a uniformly random ``tau``-subset ``S`` per document, words i.i.d. uniform
        over the ``tau v`` words of ``S``. Dirichlet: ``theta ~ Dir(alpha 1_T)``, each word's topic
        ``~ Cat(theta)``, the word uniform in that topic (SPEC §1.2).
    n_docs : int
        Number of documents, ``>= 1``.
    N : int or (int, int)
        Document length, or an inclusive range ``(lo, hi)`` drawn uniformly per document
        (the paper's experiments use ``(100, 150)``).
    rng, seed
        Randomness (see :func:`theorycheck._validate.check_rng`).
    topic_sets : array_like of int, shape (n_docs, tau), optional
        Fix the topic set of every document (stratified sampling); uniform-tau prior only.
    max_bytes : int, optional
        Memory limit for the ``(n_docs, N_max)`` arrays (default ``$THEORYCHECK_MAX_BYTES`` or half
        the available memory); above it a ``ValueError`` before any draw.

    Returns
    -------
    Documents

    A :class:`~theorycheck.models.GeneralTopicModel` is sampled by
    :func:`theorycheck._general_sampling.sample_general_documents` (SPEC §11.1; words ``1 .. n_words``).
    """
    if is_general(tm):
        return sample_general_documents(tm, n_docs, N, rng=rng, seed=seed, topic_sets=topic_sets, max_bytes=max_bytes)
    check_models(tm)
    n_docs = check_int("n_docs", n_docs, low=1)
    lo, hi = _check_length(N)
    check_sample_size("sample_documents", tm, n_docs, hi, max_bytes)
    if topic_sets is not None:
        if tm.prior != "uniform-tau":
            raise ValueError("topic_sets can only be given for prior='uniform-tau'")
        topic_sets = np.asarray(topic_sets)
        if topic_sets.shape != (n_docs, tm.tau) or not np.issubdtype(topic_sets.dtype, np.integer):
            raise ValueError(
                f"topic_sets must be an integer array of shape ({n_docs}, {tm.tau}), got {topic_sets.shape}"
            )
        if topic_sets.min() < 0 or topic_sets.max() >= tm.T:
            raise ValueError(f"topic_sets entries must lie in [0, {tm.T - 1}]")
        srt = np.sort(topic_sets, axis=1)
        if tm.tau > 1 and np.any(np.diff(srt, axis=1) == 0):
            raise ValueError("topic_sets rows must hold distinct topics")
    rng = check_rng(rng, seed)

    lengths = rng.integers(lo, hi + 1, size=n_docs) if hi > lo else np.full(n_docs, lo, dtype=np.int64)
    lengths = lengths.astype(np.int64)
    shape = (n_docs, hi)
    if tm.prior == "uniform-tau":
        if topic_sets is None:
            keys = rng.random((n_docs, tm.T))
            sets = np.sort(np.argpartition(keys, tm.tau - 1, axis=1)[:, : tm.tau], axis=1)
        else:
            sets = np.sort(topic_sets, axis=1).astype(np.int64)
        which = rng.integers(0, tm.tau, size=shape)
        topic = np.take_along_axis(sets, which, axis=1)
        theta = None
    else:
        theta = rng.dirichlet(np.full(tm.T, tm.alpha), size=n_docs)
        cdf = np.cumsum(theta, axis=1)
        cdf[:, -1] = 1.0
        offs = np.arange(n_docs)[:, None]
        u = rng.random(shape)
        flat = np.searchsorted((cdf + offs).ravel(), (u + offs).ravel(), side="right")
        topic = np.minimum(flat.reshape(shape) - offs * tm.T, tm.T - 1)
        sets = None
    words = 1 + topic * tm.v + rng.integers(0, tm.v, size=shape)
    words[np.arange(hi)[None, :] >= lengths[:, None]] = PAD
    return Documents(words.astype(np.int64), lengths, sets, theta)


def check_sample_size(
    what: str, tm: TopicModel, n_docs: int, N_max: int, max_bytes=None, *, masked=False, alternative=_SIZE_HINT
) -> int:
    """Refuse (``ValueError``) a batch of ``n_docs`` documents of length ``N_max`` that would not fit.

    Counts the arrays of :func:`sample_documents` (and of :func:`mask_documents` with ``masked``)
    and the ``(n_docs, T)`` topic-set draws; returns the bytes needed.
    """
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    per_row = (SAMPLE_ARRAYS + (MASK_ARRAYS if masked else 0)) * N_max + tm.T
    return check_alloc(what, (n_docs, per_row), max_bytes=max_bytes, alternative=alternative)


def mask_documents(
    docs: Documents,
    tm: TopicModel,
    mk: Masking,
    *,
    rng=None,
    seed=None,
    at_least_one: bool = True,
    max_bytes=None,
) -> MaskedBatch:
    """Apply BERT-style masking (SPEC §2.1).

    Each position is selected with probability ``p_m``. A selected position keeps its word with
    probability ``p_c``, shows a uniformly random word (``1 .. T*v``) with probability ``p_r``,
    and shows [MASK] (0) otherwise.

    Parameters
    ----------
    at_least_one : bool
        Resample the selection of a document until at least one position is selected (as the
        official code does), i.e. condition on ``|M| >= 1``. Requires ``p_m > 0``.
    max_bytes : int, optional
        Memory limit for the new ``(n_docs, N_max)`` arrays (see :func:`sample_documents`).
    """
    if not isinstance(docs, Documents):
        raise TypeError(f"docs must be a Documents tuple, got {type(docs).__name__}")
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    if at_least_one:
        mk.require_masked_positions("mask_documents(at_least_one=True)")
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    check_alloc("mask_documents", (MASK_ARRAYS, *docs.tokens.shape), max_bytes=max_bytes, alternative=_SIZE_HINT)
    rng = check_rng(rng, seed)
    tokens = docs.tokens
    valid = tokens != PAD
    selected = (rng.random(tokens.shape) < mk.p_m) & valid
    if at_least_one:
        todo = np.flatnonzero(~selected.any(axis=1))
        while todo.size:
            redraw = (rng.random((todo.size, tokens.shape[1])) < mk.p_m) & valid[todo]
            selected[todo] = redraw
            todo = todo[~redraw.any(axis=1)]
    u = rng.random(tokens.shape)
    rand_words = rng.integers(1, tm.n_words + 1, size=tokens.shape)
    inputs = tokens.copy()
    is_rand = selected & (u >= mk.p_c) & (u < mk.p_c + mk.p_r)
    is_mask = selected & (u >= mk.p_c + mk.p_r)
    inputs[is_rand] = rand_words[is_rand]
    inputs[is_mask] = 0
    return MaskedBatch(inputs, selected, tokens, docs.lengths)


def token_counts(tokens, V1: int, *, max_bytes=None) -> np.ndarray:
    """Count tokens per document ignoring padding: shape ``(n_docs, V1)`` float64.

    The dense count matrix (and the integer counts it is made from) are checked against
    ``max_bytes`` first (default ``$THEORYCHECK_MAX_BYTES`` or half the available memory).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be 2-d (n_docs, N), got shape {tokens.shape}")
    V1 = check_int("V1", V1, low=1)
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    check_alloc("token_counts", (2, tokens.shape[0], V1), max_bytes=max_bytes,
                alternative="per-document sparse counts (np.unique per row) or fewer documents per call")  # fmt: skip
    valid = tokens != PAD
    if np.any(tokens[valid] < 0) or np.any(tokens[valid] >= V1):
        raise ValueError(f"tokens must lie in [0, {V1 - 1}] (or be PAD={PAD})")
    n = tokens.shape[0]
    flat = (tokens + np.arange(n)[:, None] * V1)[valid]
    return np.bincount(flat, minlength=n * V1).reshape(n, V1).astype(np.float64)
