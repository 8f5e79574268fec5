"""Numba kernels over rows, with numpy references: the layer norm and the row-parallel matrix
products of the position path (:mod:`theorycheck.nn.layers`, :mod:`theorycheck.nn.rowwise`).

The products split their rows into fixed blocks (:func:`row_blocks`, a function of the row count
only), one single-threaded BLAS call per block, the blocks in parallel over Numba's threads: both
cores busy without a second thread pool (a multi-threaded BLAS next to Numba's threads fights them
for the cores), and the same bits on any number of threads.
"""

from __future__ import annotations

import numba
import numpy as np

from .._threads import kernel_blas_serial

__all__ = [
    "layer_norm_rows",
    "layer_norm_rows_backward",
    "MIN_BLOCK_ROWS",
    "row_blocks",
    "matmul_rows",
    "matmul_tn",
    "matmul_rows_tn",
    "matmul_rows_ref",
    "matmul_tn_ref",
]


# ---------------------------------------------------------------------------- layer norm
@numba.njit(cache=True, fastmath=False)
def _layer_norm_rows(R, eps, Y, inv):
    n, d = R.shape
    for i in range(n):
        r = R[i]
        mu = 0.0
        for k in range(d):
            mu += r[k]
        mu /= d
        var = 0.0
        for k in range(d):
            x = r[k] - mu
            var += x * x
        iv = 1.0 / np.sqrt(var / d + eps)
        inv[i] = iv
        y = Y[i]
        for k in range(d):
            y[k] = (r[k] - mu) * iv


@numba.njit(cache=True, fastmath=False)
def _layer_norm_rows_bwd(Y, inv, dY, dR):
    n, d = Y.shape
    for i in range(n):
        y = Y[i]
        g = dY[i]
        m1 = 0.0
        m2 = 0.0
        for k in range(d):
            m1 += g[k]
            m2 += g[k] * y[k]
        m1 /= d
        m2 /= d
        iv = inv[i]
        o = dR[i]
        for k in range(d):
            o[k] = iv * (g[k] - m1 - y[k] * m2)


def layer_norm_rows(R, eps: float):
    """Post-LN without gain/bias over the last axis, one fused pass per row (Numba, serial: a few
    microseconds per hundred rows, less than a parallel region's start-up):
    ``y = (r - mean r) / sqrt(var r + eps)``. Returns ``(y, inv)`` with ``inv`` of shape
    ``R.shape[:-1] + (1,)``; the numpy reference is :func:`theorycheck.nn.rowwise.layer_norm_ref`."""
    R = np.asarray(R, dtype=np.float64)
    R2 = np.ascontiguousarray(R.reshape(-1, R.shape[-1]))
    Y = np.empty(R2.shape)
    inv = np.empty(R2.shape[0])
    _layer_norm_rows(R2, float(eps), Y, inv)
    return Y.reshape(R.shape), inv.reshape(R.shape[:-1] + (1,))


def layer_norm_rows_backward(Y, inv, dY):
    """Backward of :func:`layer_norm_rows`: ``dL/dr = inv (dy - mean(dy) - y mean(dy * y))`` per row
    (reference :func:`theorycheck.nn.rowwise.layer_norm_backward_ref`)."""
    d = Y.shape[-1]
    Y2 = np.ascontiguousarray(Y.reshape(-1, d), dtype=np.float64)
    dY2 = np.ascontiguousarray(np.asarray(dY, dtype=np.float64).reshape(-1, d))
    inv2 = np.ascontiguousarray(np.asarray(inv, dtype=np.float64).reshape(-1))
    dR = np.empty(Y2.shape)
    _layer_norm_rows_bwd(Y2, inv2, dY2, dR)
    return dR.reshape(Y.shape)


# ---------------------------------------------------------------------------- row-parallel products
#: Below this many rows :func:`matmul_rows` and :func:`matmul_tn` make one BLAS call.
MIN_BLOCK_ROWS = 128


def row_blocks(R: int) -> np.ndarray:
    """Row boundaries of the tasks of :func:`matmul_rows` and :func:`matmul_tn`: one block below
    :data:`MIN_BLOCK_ROWS` rows, else ``2 ceil(R / 512)`` blocks of equal size (+-1): about 250
    rows per BLAS call, an even number of tasks for two or four threads. A function of ``R``
    only, never of the thread count, so every result is the same bits on any number of threads."""
    R = int(R)
    n = 1 if R < MIN_BLOCK_ROWS else 2 * ((R + 511) // 512)
    return (np.arange(n + 1, dtype=np.int64) * R) // n


@numba.njit(cache=True, parallel=True, fastmath=False)
def _matmul_rows(A, B, bounds, out):
    for t in numba.prange(bounds.shape[0] - 1):
        r0, r1 = bounds[t], bounds[t + 1]
        np.dot(A[r0:r1], B, out[r0:r1])


@numba.njit(cache=True, parallel=True, fastmath=False)
def _matmul_tn(A, B, bounds, out):
    nb = bounds.shape[0] - 1
    parts = np.empty((nb, A.shape[1], B.shape[1]))
    for t in numba.prange(nb):
        r0, r1 = bounds[t], bounds[t + 1]
        np.dot(A[r0:r1].T, B[r0:r1], parts[t])
    out[:] = 0.0
    for t in range(nb):  # fixed order: the same sum on any thread count
        out += parts[t]


def _f64(M):
    """``M`` as float64, C- or F-contiguous (a copy only when it is neither)."""
    M = np.asarray(M, dtype=np.float64)
    return M if (M.flags.c_contiguous or M.flags.f_contiguous) else np.ascontiguousarray(M)


def matmul_rows(A, B):
    """``A @ B`` (R, n) with the rows of ``A`` in the blocks of :func:`row_blocks`, one single-threaded
    BLAS call per block, the blocks in parallel (Numba threads; BLAS serial inside them).

    Row ``r`` of the result is always computed by the same BLAS call on the same block, so the
    result does not depend on the thread count. ``B`` may be a transposed view (no copy);
    :func:`matmul_rows_ref` is the numpy reference."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = _f64(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul_rows needs (R, k) @ (k, n) arrays, got {A.shape} and {B.shape}")
    out = np.empty((A.shape[0], B.shape[1]))
    if A.shape[0] == 0 or A.shape[1] == 0 or B.shape[1] == 0:
        out[...] = 0.0
        return out
    with kernel_blas_serial():
        _matmul_rows(A, B, row_blocks(A.shape[0]), out)
    return out


def matmul_tn(A, B):
    """``A^T @ B`` (k, n) for ``A`` (R, k), ``B`` (R, n): the sum over rows split into the blocks of
    :func:`row_blocks`, one BLAS call per block in parallel (Numba threads), the partial
    products added in block order (the same bits on any thread count). E.g. a weight gradient
    ``dW = dP^T X`` over many rows. :func:`matmul_tn_ref` is the numpy reference."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
        raise ValueError(f"matmul_tn needs (R, k) and (R, n) arrays, got {A.shape} and {B.shape}")
    out = np.zeros((A.shape[1], B.shape[1]))
    if A.shape[0] == 0 or A.shape[1] == 0 or B.shape[1] == 0:
        return out
    with kernel_blas_serial():
        _matmul_tn(A, B, row_blocks(A.shape[0]), out)
    return out


@numba.njit(cache=True, parallel=True, fastmath=False)
def _matmul_rows_tn(A, B, C, bounds, out, out_tn):
    nb = bounds.shape[0] - 1
    parts = np.empty((nb, A.shape[1], C.shape[1]))
    for t in numba.prange(nb):
        r0, r1 = bounds[t], bounds[t + 1]
        np.dot(A[r0:r1], B, out[r0:r1])
        np.dot(A[r0:r1].T, C[r0:r1], parts[t])
    out_tn[:] = 0.0
    for t in range(nb):  # fixed order, as in _matmul_tn
        out_tn += parts[t]


def matmul_rows_tn(A, B, C):
    """``(A @ B, A^T @ C)`` for ``A`` (R, k), ``B`` (k, n), ``C`` (R, m) in one parallel pass over the
    row blocks of ``A`` (:func:`row_blocks`): each block is read once, while it is in cache, by the
    same two BLAS calls that :func:`matmul_rows` and :func:`matmul_tn` make on it, so the results
    are the same bits as theirs (and as on any thread count); one parallel region instead of two.
    E.g. a backward pass: ``dX = dP W_cat`` and ``dW_cat = dP^T X``."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = _f64(B)
    C = np.ascontiguousarray(C, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2 or A.shape[1] != B.shape[0] or A.shape[0] != C.shape[0]:
        raise ValueError(
            f"matmul_rows_tn needs (R, k), (k, n) and (R, m) arrays, got {A.shape}, {B.shape} and {C.shape}"
        )
    if 0 in (A.shape[0], A.shape[1], B.shape[1], C.shape[1]):  # empty products: nothing to fuse
        return matmul_rows(A, B), matmul_tn(A, C)
    out = np.empty((A.shape[0], B.shape[1]))
    out_tn = np.empty((A.shape[1], C.shape[1]))
    with kernel_blas_serial():
        _matmul_rows_tn(A, B, C, row_blocks(A.shape[0]), out, out_tn)
    return out, out_tn


def matmul_rows_ref(A, B):
    """Pure numpy reference of :func:`matmul_rows`."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64)


def matmul_tn_ref(A, B):
    """Pure numpy reference of :func:`matmul_tn`."""
    return np.asarray(A, dtype=np.float64).T @ np.asarray(B, dtype=np.float64)
