"""Numba kernels of the attention layers (:mod:`theorycheck.nn.layers`), with numpy references.

The count path of a one-layer model evaluates, for every query group ``e`` (context ``g = ctx[e]``,
query token ``a = qtok[e]``), the attention over key tokens

.. math::
    A[e, b] = \\frac{K[g, b]\\, e^{S[a, b]}}{\\sum_{b'} K[g, b']\\, e^{S[a, b']}}
            = \\mathrm{softmax}_b\\big(S[a, b] + \\log K[g, b]\\big),

(SPEC §3.1 with identical keys merged) and, in the backward pass, the softmax Jacobian
product ``A * (dA - sum_b dA A)``. In numpy these take a gather of ``S`` and ``log K`` rows and
about ten passes over ``E x V1`` arrays; the kernels below do one fused pass per row, in float64,
with the max-shift of log-sum-exp (no ``fastmath``), parallel over rows. Rows without any key
(``K[g] == 0`` everywhere) give all-zero attention, like the reference. The position path uses
the same fused row softmax on ``c S + log w`` (:func:`bias_softmax`, ``S`` per document and head),
and the weight gradient of one-hot rows ``dW^T = X^T dP`` is a row scatter (:func:`scatter_rows`).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "gather_softmax",
    "gather_softmax_ref",
    "bias_softmax",
    "bias_softmax_ref",
    "softmax_bwd",
    "softmax_bwd_ref",
    "scatter_rows",
    "scatter_rows_ref",
]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _gather_softmax(S, logK, qtok, ctx, out):
    E, V1 = out.shape
    for e in numba.prange(E):
        srow = S[qtok[e]]
        krow = logK[ctx[e]]
        m = -np.inf
        for b in range(V1):
            x = srow[b] + krow[b]
            out[e, b] = x
            if x > m:
                m = x
        if m == -np.inf:
            for b in range(V1):
                out[e, b] = 0.0
            continue
        s = 0.0
        for b in range(V1):
            y = np.exp(out[e, b] - m)
            out[e, b] = y
            s += y
        inv = 1.0 / s
        for b in range(V1):
            out[e, b] *= inv


@numba.njit(cache=True, fastmath=False)
def _softmax_row(z, out):
    """``out = softmax(z)`` in place of ``out`` (``z`` may alias it); all ``-inf``: zeros."""
    n = z.shape[0]
    m = -np.inf
    for b in range(n):
        if z[b] > m:
            m = z[b]
    if m == -np.inf:
        for b in range(n):
            out[b] = 0.0
        return
    s = 0.0
    for b in range(n):
        y = np.exp(z[b] - m)
        out[b] = y
        s += y
    inv = 1.0 / s
    for b in range(n):
        out[b] *= inv


@numba.njit(cache=True, parallel=True, fastmath=False)
def _bias_softmax(S, logw, c, nk, out):
    B, Nq, Nk = S.shape
    for i in numba.prange(B * Nq):
        d = i // Nq
        q = i - d * Nq
        row = out[d, q]
        n = nk[d]  # keys past the last finite log-weight get weight exactly 0: skipped
        for b in range(n):
            row[b] = c * S[d, q, b] + logw[d, b]
        _softmax_row(row[:n], row[:n])
        for b in range(n, Nk):
            row[b] = 0.0


@numba.njit(cache=True, parallel=True, fastmath=False)
def _softmax_bwd(A, dA, scale, out):
    E, V1 = A.shape
    for e in numba.prange(E):
        t = 0.0
        for b in range(V1):
            t += dA[e, b] * A[e, b]
        for b in range(V1):
            out[e, b] = scale * (A[e, b] * (dA[e, b] - t))


def gather_softmax(S, logK, qtok, ctx):
    """``A[e] = softmax(S[qtok[e]] + logK[ctx[e]])`` (E, V1); ``-inf`` entries of ``logK`` get weight 0."""
    out = np.empty((qtok.shape[0], S.shape[1]))
    _gather_softmax(
        np.ascontiguousarray(S, dtype=np.float64),
        np.ascontiguousarray(logK, dtype=np.float64),
        np.ascontiguousarray(qtok, dtype=np.int64),
        np.ascontiguousarray(ctx, dtype=np.int64),
        out,
    )
    return out


def gather_softmax_ref(S, logK, qtok, ctx):
    """Pure numpy reference of :func:`gather_softmax`."""
    z = S[qtok] + logK[ctx]
    m = z.max(axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    return e / np.where(s > 0, s, 1.0)


def bias_softmax(S, logw, c):
    """Position-path attention ``A[d, q] = softmax(c S[d, q] + logw[d])`` (B, Nq, Nk) in one fused pass
        per row (``logw`` (B, Nk) key log-multiplicities; rows without a key give 0). Keys after a document's
    last finite ``logw`` are skipped (their weight is exactly 0: the same numbers, less work on padding)."""
    logw = np.ascontiguousarray(logw, dtype=np.float64)
    finite = np.isfinite(logw)
    nk = np.where(finite.any(axis=1), logw.shape[1] - np.argmax(finite[:, ::-1], axis=1), 0).astype(np.int64)
    out = np.empty(S.shape)
    _bias_softmax(np.ascontiguousarray(S, dtype=np.float64), logw, float(c), nk, out)
    return out


def bias_softmax_ref(S, logw, c):
    """Pure numpy reference of :func:`bias_softmax`."""
    z = c * S + logw[:, None, :]
    m = z.max(axis=-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0)


def softmax_bwd(A, dA, out=None, scale: float = 1.0):
    """Logit gradient ``scale * (A * (dA - sum_b dA A))`` of a row softmax given ``dL/dA`` (may write
    into ``out``; ``scale`` is e.g. the score factor ``c`` of ``softmax(c S)``)."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    dA = np.ascontiguousarray(dA, dtype=np.float64)
    if out is None:
        out = np.empty_like(A)
    _softmax_bwd(A, dA, float(scale), out)
    return out


def softmax_bwd_ref(A, dA):
    """Pure numpy reference of :func:`softmax_bwd`."""
    return A * (dA - np.sum(dA * A, axis=-1, keepdims=True))


@numba.njit(cache=True, fastmath=False)
def _scatter_rows(idx, valid, M, out):
    for r in range(M.shape[0]):
        if valid[r]:
            o = out[idx[r]]
            m = M[r]
            for j in range(M.shape[1]):
                o[j] += m[j]


def scatter_rows(idx, valid, M, n: int):
    """``out[t] = sum_{r: valid[r], idx[r] = t} M[r]`` (n, k), summed in increasing ``r``: ``X^T M`` for
    rows ``X[r] = e_{idx[r]}`` (zero where not ``valid``), e.g. the weight gradient of one-hot inputs."""
    out = np.zeros((n, M.shape[1]))
    _scatter_rows(
        np.ascontiguousarray(idx, dtype=np.int64),
        np.ascontiguousarray(valid, dtype=np.bool_),
        np.ascontiguousarray(M, dtype=np.float64),
        out,
    )
    return out


def scatter_rows_ref(idx, valid, M, n: int):
    """Pure numpy reference of :func:`scatter_rows`."""
    out = np.zeros((n, M.shape[1]))
    np.add.at(out, idx[valid], M[valid])
    return out
