"""Finite documents from a topic model (SPEC §1, §1.2, §11.1).

A document draws its topic proportions ``theta`` from the document law (``theta = 1_S / tau`` for a
uniformly random ``tau``-subset ``S``, or ``theta ~ Dir(alpha)``), then each of its ``N`` words
i.i.d. from ``p_theta = phi^T theta``.

Two routes, chosen by the model's type (:func:`_draw`, one ``functools.singledispatch``):

- the generic route, any :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.1): a topic
  ``z ~ Cat(theta)`` per position (:func:`draw_topics`), then the word ``w ~ phi[z]`` by inverse-CDF
  look-up in the row CDFs of ``phi`` (:func:`draw_words`, one ``searchsorted`` over all positions);
  words of zero probability in a topic are never drawn;
- the paper's :class:`~theorycheck.models.TopicModel` (SPEC §1.2), O(1) storage (no ``phi``): the
  topic as above, then the word uniform in that topic's block, ``1 + z v + U{0, .., v - 1}``.

Both routes have the same law on the paper's model (tested); their draws differ (other RNG calls).
Every sampler takes ``rng`` (a ``numpy.random.Generator``) or ``seed``; the same seed gives
bit-identical output. Documents are stored as padded ``int64`` arrays: words are ``1 .. n_words``,
padding is ``-1``, [MASK] (after masking, :mod:`theorycheck.sampling.masking`) is ``0``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_int, check_rng
from ..models import GeneralTopicModel, TopicModel, check_models

__all__ = [
    "Documents",
    "sample_documents",
    "token_counts",
    "check_sample_size",
    "draw_theta",
    "draw_topics",
    "draw_words",
    "PAD",
]

#: Padding value in token arrays.
PAD = -1

#: ``(n_docs, N_max)`` 8-byte arrays alive at once while sampling (draws, topics, words, output)
#: and while masking (uniforms, random words, inputs, the boolean masks).
SAMPLE_ARRAYS = 5
MASK_ARRAYS = 4
SIZE_HINT = "fewer documents per call (a loop over batches) or a shorter N"


class Documents(NamedTuple):
    """A batch of documents.

    Parameters
    ----------
    tokens : ndarray of int64, shape (n_docs, N_max)
        Words ``1 .. n_words``; positions ``>= lengths[i]`` hold :data:`PAD`.
    lengths : ndarray of int64, shape (n_docs,)
        Length of each document, ``1 <= lengths[i] <= N_max``.
    topics : ndarray of int64, shape (n_docs, tau), or None
        Sorted topic set of each document (uniform-tau prior).
    theta : ndarray of float64, shape (n_docs, T), or None
        Topic proportions of each document (Dirichlet prior; every law for a general model).

    See Also
    --------
    sample_documents : Draws a batch.
    mask_documents : Masks a batch (BERT-style).
    token_counts : Per-document token counts.

    References
    ----------
    SPEC §1.1, §1.2 (the document laws), §11.1 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.sampling import sample_documents
    >>> docs = sample_documents(TopicModel(T=3, v=2, tau=2), n_docs=3, N=(3, 5), seed=0)
    >>> docs._fields
    ('tokens', 'lengths', 'topics', 'theta')
    >>> docs.tokens.shape, docs.topics.shape, docs.theta is None
    ((3, 5), (3, 2), True)
    >>> bool(np.all((docs.tokens == -1) == (np.arange(5) >= docs.lengths[:, None])))  # PAD after the end
    True
    """

    tokens: np.ndarray
    lengths: np.ndarray
    topics: np.ndarray | None
    theta: np.ndarray | None


def check_length(N) -> tuple[int, int]:
    """``N`` (an int, or an inclusive ``(lo, hi)`` pair) validated, as ``(lo, hi)``."""
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


def _check_topic_sets(tm, topic_sets, n_docs) -> np.ndarray:
    if tm.prior != "uniform-tau":
        raise ValueError("topic_sets can only be given for prior='uniform-tau'")
    ts = np.asarray(topic_sets)
    if ts.shape != (n_docs, tm.tau) or not np.issubdtype(ts.dtype, np.integer):
        raise ValueError(f"topic_sets must be an integer array of shape ({n_docs}, {tm.tau}), got {ts.shape}")
    if ts.min() < 0 or ts.max() >= tm.T:
        raise ValueError(f"topic_sets entries must lie in [0, {tm.T - 1}]")
    if tm.tau > 1 and np.any(np.diff(np.sort(ts, axis=1), axis=1) == 0):
        raise ValueError("topic_sets rows must hold distinct topics")
    return ts


def sample_documents(
    tm: GeneralTopicModel,
    n_docs: int,
    N: int | Sequence[int],
    *,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    topic_sets: ArrayLike | None = None,
    max_bytes: int | None = None,
) -> Documents:
    """Sample ``n_docs`` documents from the topic model (module docstring).

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        Uniform-tau: a uniformly random ``tau``-subset ``S`` per document, words i.i.d. from
        ``p_S`` (for the paper's model uniform over the ``tau v`` words of ``S``). Dirichlet:
        ``theta ~ Dir(alpha)``, each word's topic ``~ Cat(theta)``, the word from that topic's row
        of ``phi`` (SPEC §1.2, §11.1).
    n_docs : int
        Number of documents, ``>= 1``.
    N : int or (int, int)
        Document length, or an inclusive range ``(lo, hi)`` drawn uniformly per document
        (the paper's experiments use ``(100, 150)``).
    rng : numpy.random.Generator, optional
        Randomness (see ``theorycheck._validate.check_rng``).
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``; the same seed gives bit-identical output.
    topic_sets : array_like of int, shape (n_docs, tau), optional
        Fix the topic set of every document (stratified sampling); uniform-tau prior only.
    max_bytes : int, optional
        Memory limit for the ``(n_docs, N_max)`` arrays (default ``$THEORYCHECK_MAX_BYTES`` or half
        the available memory); above it a ``ValueError`` before any draw.

    Returns
    -------
    Documents
        ``theta`` holds every document's proportions for a general model (both laws) and for the
        paper's Dirichlet law; ``topics`` the topic sets (uniform-tau).

    Raises
    ------
    ValueError
        If ``n_docs < 1``, ``N`` is not a positive int or an ordered pair, ``topic_sets`` has the wrong
        shape, repeated or out-of-range topics or is given for the Dirichlet prior, both ``rng`` and
        ``seed`` are given, or the arrays exceed ``max_bytes``.
    TypeError
        If ``tm`` is not a topic model, ``n_docs`` or ``N`` is not an integer, or ``rng`` / ``seed`` has
        the wrong type.

    See Also
    --------
    Documents : The result.
    mask_documents : The masking step that follows.
    theorycheck.population.topic_density : The word law ``p_S`` the words are drawn from.

    References
    ----------
    SPEC §1.1, §1.2 (the document laws), §5.1 (the paper's lengths 100-150), §11.1 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, TopicModel
    >>> from theorycheck.sampling import sample_documents
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> docs = sample_documents(tm, n_docs=4, N=6, seed=0)
    >>> docs.tokens.shape, docs.lengths
    ((4, 6), array([6, 6, 6, 6]))

    Every word belongs to a topic of its document's set:

    >>> bool(all(set(tm.topic_of(row)) <= set(S) for row, S in zip(docs.tokens, docs.topics)))
    True

    The same seed gives the same documents; the Dirichlet law records ``theta``:

    >>> bool(np.array_equal(docs.tokens, sample_documents(tm, n_docs=4, N=6, seed=0).tokens))
    True
    >>> g = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, prior="dirichlet", alpha=0.5)
    >>> d = sample_documents(g, n_docs=2, N=4, seed=0)
    >>> d.topics is None, d.theta.shape, bool(np.allclose(d.theta.sum(axis=1), 1.0))
    (True, (2, 3), True)
    """
    check_models(tm, general=True)
    n_docs = check_int("n_docs", n_docs, low=1)
    lo, hi = check_length(N)
    check_sample_size("sample_documents", tm, n_docs, hi, max_bytes)
    if topic_sets is not None:
        topic_sets = _check_topic_sets(tm, topic_sets, n_docs)
    return sample_unchecked(tm, n_docs, lo, hi, check_rng(rng, seed), topic_sets)


def sample_unchecked(tm, n_docs: int, lo: int, hi: int, rng, topic_sets=None) -> Documents:
    """:func:`sample_documents` on validated arguments (lengths ``lo .. hi``, a ``Generator``)."""
    lengths = rng.integers(lo, hi + 1, size=n_docs) if hi > lo else np.full(n_docs, lo, dtype=np.int64)
    lengths = lengths.astype(np.int64)
    words, sets, theta = _draw(tm, (n_docs, hi), rng, topic_sets)
    words[np.arange(hi)[None, :] >= lengths[:, None]] = PAD
    return Documents(words.astype(np.int64), lengths, sets, theta)


@functools.singledispatch
def _draw(tm: GeneralTopicModel, shape, rng, topic_sets):
    """Words (``shape``), topic sets and ``theta`` of ``shape[0]`` documents: the generic route (SPEC §11.1)."""
    sets, theta = draw_theta(tm, shape[0], rng, topic_sets)
    topic = draw_topics(theta, shape, rng, sets)
    return draw_words(tm.phi, topic, rng), sets, theta


@_draw.register
def _(tm: TopicModel, shape, rng, topic_sets):
    """The paper's model (SPEC §1.2): a topic per position as in the generic route, the word uniform in
    its block (``1 + z v + U{0, .., v - 1}``); ``theta`` only for the Dirichlet law."""
    n_docs = shape[0]
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
    return words, sets, theta


def draw_theta(g, n_docs: int, rng, topic_sets=None):
    """Topic sets (uniform-tau; ``None`` for Dirichlet) and proportions ``theta`` of ``n_docs`` documents.

    Uniform-tau: ``S`` is the first ``tau`` entries of a uniformly random ranking of the topics,
    ``theta = 1_S / tau``. Dirichlet: ``theta ~ Dir(g.concentration)`` (SPEC §11.1).
    """
    T = g.T
    if g.prior == "uniform-tau":
        if topic_sets is None:
            keys = rng.random((n_docs, T))
            sets = np.sort(np.argpartition(keys, g.tau - 1, axis=1)[:, : g.tau], axis=1)
        else:
            sets = np.sort(topic_sets, axis=1).astype(np.int64)
        theta = np.zeros((n_docs, T))
        np.put_along_axis(theta, sets, 1.0 / g.tau, axis=1)
        return sets.astype(np.int64), theta
    return None, rng.dirichlet(np.asarray(g.concentration), size=n_docs)


def draw_topics(theta, shape, rng, sets=None) -> np.ndarray:
    """A topic ``z ~ Cat(theta[i])`` for every position of ``shape = (n_docs, L)``.

    With ``sets`` (uniform-tau) ``z`` is uniform over the row's set; otherwise inverse CDF of each
    row of ``theta`` (offset by the row index so one ``searchsorted`` serves every document).
    """
    n_docs, T = theta.shape
    if sets is not None:
        which = rng.integers(0, sets.shape[1], size=shape)
        return np.take_along_axis(sets, which, axis=1)
    cdf = np.cumsum(theta, axis=1)
    cdf[:, -1] = 1.0
    offs = np.arange(n_docs)[:, None]
    u = rng.random(shape)
    flat = np.searchsorted((cdf + offs).ravel(), (u + offs).ravel(), side="right")
    return np.minimum(flat.reshape(shape) - offs * T, _last_positive(theta)[:, None])


def draw_words(phi, topic, rng) -> np.ndarray:
    """A word ``w ~ phi[z]`` (tokens ``1 .. n_words``) for every topic ``z`` in ``topic``.

    Inverse CDF: ``w - 1 = #{k : F_z(k) <= u}`` with ``F_z`` the row CDF of ``phi[z]`` (last entry set
    to 1 exactly); rows are offset by ``z`` so one sorted array serves every topic. Zero-probability
    words are never drawn (equal consecutive CDF values).
    """
    T, n = phi.shape
    cdf = np.cumsum(phi, axis=1)
    cdf[:, -1] = 1.0
    cdf += np.arange(T)[:, None]
    u = rng.random(topic.shape)
    idx = np.searchsorted(cdf.ravel(), (u + topic).ravel(), side="right").reshape(topic.shape)
    return 1 + np.clip(idx - topic * n, 0, _last_positive(phi)[topic])


def _last_positive(P) -> np.ndarray:
    """Index of the last positive entry of every row: the clip that keeps ``u + offset`` rounded up to
    the next row's start (``u`` within 2^-53 of 1) inside the row's support."""
    return P.shape[1] - 1 - np.argmax(P[:, ::-1] > 0, axis=1)


def check_sample_size(
    what: str,
    tm: GeneralTopicModel,
    n_docs: int,
    N_max: int,
    max_bytes: int | None = None,
    *,
    masked: bool = False,
    alternative: str = SIZE_HINT,
) -> int:
    """Refuse (``ValueError``) a batch of ``n_docs`` documents of length ``N_max`` that would not fit.

    Counts the arrays of :func:`sample_documents` (and of
    :func:`~theorycheck.sampling.masking.mask_documents` with ``masked``) and the ``(n_docs, T)``
    topic-set draws; returns the bytes needed.

    Parameters
    ----------
    what : str
        The caller, named in the message.
    tm : GeneralTopicModel or TopicModel
        The model (its ``T`` counts).
    n_docs : int, n_docs >= 1
        Documents in the batch.
    N_max : int, N_max >= 1
        Longest document length.
    max_bytes : int, optional
        Memory limit; default ``$THEORYCHECK_MAX_BYTES`` or half the available memory.
    masked : bool, default False
        Count the masking arrays too.
    alternative : str, optional
        What to do instead, named in the message.

    Returns
    -------
    int
        Bytes needed: ``8 n_docs ((5 + 4 [masked]) N_max + T)``.

    Raises
    ------
    ValueError
        If the bytes needed exceed the limit, or ``max_bytes`` is invalid.

    See Also
    --------
    sample_documents : Calls it before any draw.
    mask_documents : Its masking arrays are counted with ``masked=True``.
    theorycheck.sampling.mc_attention_loss : Checks one batch with it before sampling.

    References
    ----------
    DESIGN.md (memory guards: refuse before allocating); SPEC §1.1 (the documents).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.sampling import check_sample_size
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> check_sample_size("demo", tm, 1000, 150)  # 8 * 1000 * (5 * 150 + 3) bytes
    6024000
    >>> check_sample_size("demo", tm, 10**6, 150, max_bytes=10**8)
    Traceback (most recent call last):
    ...
    ValueError: demo: a dense 1,000,000 x 753 array needs 5.6 GiB, above the memory limit 95.4 MiB ...
    """
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    per_row = (SAMPLE_ARRAYS + (MASK_ARRAYS if masked else 0)) * N_max + tm.T
    return check_alloc(what, (n_docs, per_row), max_bytes=max_bytes, alternative=alternative)


def token_counts(tokens: ArrayLike, V1: int, *, max_bytes: int | None = None) -> np.ndarray:
    """Count tokens per document ignoring padding: shape ``(n_docs, V1)`` float64.

    The dense count matrix (and the integer counts it is made from) are checked against
    ``max_bytes`` first (default ``$THEORYCHECK_MAX_BYTES`` or half the available memory).

    Parameters
    ----------
    tokens : array_like of int, shape (n_docs, N)
        Tokens ``0 .. V1-1`` (0 is [MASK]) or :data:`PAD` (-1), e.g. ``Documents.tokens`` or
        ``MaskedBatch.inputs``.
    V1 : int, V1 >= 1
        Number of tokens including [MASK].
    max_bytes : int, optional
        Memory limit of the count matrix.

    Returns
    -------
    counts : ndarray of float64, shape (n_docs, V1)
        ``counts[i, w]`` = occurrences of token ``w`` in document ``i``; row sums are the lengths.

    Raises
    ------
    ValueError
        If ``tokens`` is not 2-D, a token is outside ``[0, V1)`` and not PAD, ``V1 < 1``, or the
        matrix exceeds ``max_bytes``.

    See Also
    --------
    sample_documents : Documents to count.
    mask_documents : Masked inputs to count.
    theorycheck.population.masked_density : The limit of ``counts / N`` for masked documents.

    References
    ----------
    SPEC §2.1 (the empirical context of a masked document).

    Examples
    --------
    >>> from theorycheck.sampling import token_counts
    >>> token_counts([[1, 1, 3, -1], [0, 2, 2, 2]], V1=4)
    array([[0., 2., 0., 1.],
           [1., 0., 3., 0.]])
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
