"""Shared helpers of the stage-1 claims (not a claim module: the name starts with ``_``)."""

from __future__ import annotations

import numpy as np

from theorycheck import Masking, TopicModel
from theorycheck._threads import numba_threads
from theorycheck.report.claims import compare_close

SPEC_MASKING = dict(p_m=0.15, p_c=0.1, p_r=0.1)


def models(params: dict) -> tuple[TopicModel, Masking]:
    """``(TopicModel, Masking)`` from a claim parameter dict."""
    if params.get("prior", "uniform-tau") == "dirichlet":
        tm = TopicModel(T=params["T"], v=params["v"], prior="dirichlet", alpha=params["alpha"])
    else:
        tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    return tm, Masking(params["p_m"], params["p_c"], params["p_r"])


def entry_classes(W: np.ndarray, tm: TopicModel) -> dict:
    """Entries of a ``(V1, V1)`` matrix by class: same-topic words, different-topic words, mask column, row 0."""
    topics = tm.token_topics()[1:]
    same = topics[:, None] == topics[None, :]
    words = W[1:, 1:]
    return {"same": words[same], "diff": words[~same], "mask_col": W[1:, 0], "row0": W[0, :]}


def spread(x: np.ndarray) -> float:
    """``max - min`` (0 for an empty array)."""
    return float(x.max() - x.min()) if x.size else 0.0


def single_numba_thread():
    """Numba kernels on one thread inside the block: the stage-1 descent calls a parallel kernel
    hundreds of times on a small matrix, where thread start-up dominates."""
    return numba_threads(1)


#: below this binomial variance ``n p (1 - p)`` the normal approximation of a count is not used
RARE_VARIANCE = 25.0


def binomial_z(counts, n, p) -> np.ndarray:
    """|z|-scores of binomial counts (``counts ~ Binomial(n, p)``, elementwise).

    ``|count - n p| / sqrt(n p (1 - p))`` where ``n p (1 - p) >= RARE_VARIANCE``; below (rare
    events, e.g. a replacement word of probability ``p_r p_m / (T v)`` with ``p_r`` tiny) the normal
    approximation fails (one occurrence of an event of expected count 0.01 would read as z = 10), so
    there the score is the normal quantile of the exact two-sided binomial tail probability
    ``min(1, 2 min(P(X >= count), P(X <= count)))``: the same false-alarm level. ``p = 0`` with a
    positive count gives ``inf``.
    """
    from scipy import stats

    shape = np.broadcast_shapes(np.shape(counts), np.shape(p))
    k = np.broadcast_to(np.asarray(counts, dtype=float), shape).ravel()
    p = np.broadcast_to(np.asarray(p, dtype=float), shape).ravel()
    var = n * p * (1.0 - p)
    z = np.abs(k - n * p) / np.sqrt(np.maximum(var, 1e-300))
    rare = var < RARE_VARIANCE
    if np.any(rare):
        kr, pr = k[rare], p[rare]
        tail = 2.0 * np.minimum(stats.binom.sf(kr - 1, n, pr), stats.binom.cdf(kr, n, pr))
        z[rare] = stats.norm.isf(np.minimum(1.0, tail) / 2.0)
    return z.reshape(shape)


def compare_worst(measured, expected, tol: float, *, label: str = "", **kw):
    """:func:`compare_close` judged on the entry farthest from its expected value, so the row is numbers.

    For arrays, ``i = argmax |measured - expected|`` (after broadcasting) and the result compares
    ``measured[i]`` with ``expected[i]``: its margin ``tol - |measured[i] - expected[i]|`` is bit-identical
    to :func:`compare_close` on the whole arrays (the same maximum), but ``expected`` and ``measured``
    are the deciding entry's numbers instead of ``"array(shape)"``; the label gains ``" (worst entry)"``.
    Empty arrays and arrays with a non-finite entry (a failure either way) go to :func:`compare_close` unchanged.
    """
    m, e = np.broadcast_arrays(np.asarray(measured, dtype=float), np.asarray(expected, dtype=float))
    if m.size == 0 or not (np.all(np.isfinite(m)) and np.all(np.isfinite(e))):
        return compare_close(measured, expected, tol, label=label, **kw)
    i = int(np.argmax(np.abs(m - e)))
    if m.size > 1:
        label = f"{label} (worst entry)" if label else "worst entry"
    return compare_close(float(m.flat[i]), float(e.flat[i]), tol, label=label, **kw)
