"""Finite documents from a :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.1).

A document draws its topic proportions ``theta`` from the document law (``theta = 1_S / tau`` for a
uniformly random ``tau``-subset ``S``, or ``theta ~ Dir(alpha)``), then each of its ``N`` words
i.i.d. from ``p_theta = phi^T theta``. Sampling is vectorised in two steps with the same marginal
law: a topic ``z ~ Cat(theta)`` per position, then the word ``w ~ phi[z]`` by inverse-CDF look-up in
the row CDFs of ``phi`` (one ``searchsorted`` over all positions). Words of zero probability in a
topic are never drawn. :func:`theorycheck.sampling.mask_documents` masks these documents unchanged
(random replacement words are uniform over the ``n_words`` words, SPEC §11.1).

:func:`theorycheck.sampling.sample_documents` dispatches here for a general model.
"""

from __future__ import annotations

import numpy as np

from ._validate import check_int, check_rng

__all__ = ["sample_general_documents", "draw_theta", "draw_topics", "draw_words"]


def draw_theta(g, n_docs: int, rng, topic_sets=None):
    """Topic sets (uniform-tau; ``None`` for Dirichlet) and proportions ``theta`` of ``n_docs`` documents.

    Uniform-tau: ``S`` is the first ``tau`` entries of a uniformly random ranking of the topics,
    ``theta = 1_S / tau``. Dirichlet: ``theta ~ Dir(g.alpha)`` (vector ``alpha``).
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
    return None, rng.dirichlet(np.asarray(g.alpha), size=n_docs)


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


def _check_topic_sets(g, topic_sets, n_docs):
    if g.prior != "uniform-tau":
        raise ValueError("topic_sets can only be given for prior='uniform-tau'")
    ts = np.asarray(topic_sets)
    if ts.shape != (n_docs, g.tau) or not np.issubdtype(ts.dtype, np.integer):
        raise ValueError(f"topic_sets must be an integer array of shape ({n_docs}, {g.tau}), got {ts.shape}")
    if ts.min() < 0 or ts.max() >= g.T:
        raise ValueError(f"topic_sets entries must lie in [0, {g.T - 1}]")
    if g.tau > 1 and np.any(np.diff(np.sort(ts, axis=1), axis=1) == 0):
        raise ValueError("topic_sets rows must hold distinct topics")
    return ts


def sample_general_documents(g, n_docs, N, *, rng=None, seed=None, topic_sets=None, max_bytes=None):
    """``n_docs`` documents of a general model (the module docstring); arguments as
    :func:`theorycheck.sampling.sample_documents`. ``Documents.theta`` holds every document's
    ``theta`` (both laws), ``Documents.topics`` its topic set (uniform-tau)."""
    from .sampling import PAD, Documents, _check_length, check_sample_size

    n_docs = check_int("n_docs", n_docs, low=1)
    lo, hi = _check_length(N)
    check_sample_size("sample_documents", g, n_docs, hi, max_bytes)
    if topic_sets is not None:
        topic_sets = _check_topic_sets(g, topic_sets, n_docs)
    rng = check_rng(rng, seed)
    lengths = rng.integers(lo, hi + 1, size=n_docs) if hi > lo else np.full(n_docs, lo, dtype=np.int64)
    lengths = lengths.astype(np.int64)
    shape = (n_docs, hi)
    sets, theta = draw_theta(g, n_docs, rng, topic_sets)
    topic = draw_topics(theta, shape, rng, sets)
    words = draw_words(g.phi, topic, rng)
    words[np.arange(hi)[None, :] >= lengths[:, None]] = PAD
    return Documents(words.astype(np.int64), lengths, sets, theta)
