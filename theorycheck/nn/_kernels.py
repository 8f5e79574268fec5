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
On packed rows (documents contiguous, no padding) :func:`doc_attention` and
:func:`doc_attention_backward` do a whole document's attention in one task, parallel over
documents: scores, softmax and ``[A_1 .. A_H] [V_1; ..; V_H]`` forward, and ``dA``, the softmax
backward, ``dQ, dK, dV`` backward, with the products as small BLAS calls on contiguous per-document
blocks (the padded numpy route of :func:`theorycheck.nn.layers.attention_forward` is the reference).
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

from .._threads import kernel_blas_serial

__all__ = [
    "gather_softmax",
    "gather_softmax_ref",
    "bias_softmax",
    "bias_softmax_ref",
    "softmax_bwd",
    "softmax_bwd_ref",
    "scatter_rows",
    "scatter_rows_ref",
    "DocAttention",
    "balanced_groups",
    "doc_attention",
    "doc_attention_backward",
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


# ---------------------------------------------------------------------------- per-document attention
@numba.njit(cache=True, fastmath=False)
def _doc_values(P, r0, n, H, vo0, dv):
    """The values of one document's rows stacked by head, ``[V_1; ...; V_H]`` (H n, d_v), contiguous."""
    Vst = np.empty((H * n, dv))
    for h in range(H):
        for j in range(n):
            src = P[r0 + j]
            dst = Vst[h * n + j]
            for k in range(dv):
                dst[k] = src[vo0 + h * dv + k]
    return Vst


@numba.njit(cache=True, fastmath=False)
def _cols(M, c0, k):
    """``M[:, c0 : c0 + k]`` as a contiguous array (explicit loops: Numba compiles array-slice
    assignment and ``ascontiguousarray`` of 2-d slices slowly, seconds per call site)."""
    out = np.empty((M.shape[0], k))
    for i in range(M.shape[0]):
        for j in range(k):
            out[i, j] = M[i, c0 + j]
    return out


@numba.njit(cache=True, fastmath=False)
def _put(dst, r0, c0, src, add):
    """``dst[r0 : r0 + m, c0 : c0 + k] = src`` (``add``: ``+=``), ``src`` (m, k), in loops."""
    for i in range(src.shape[0]):
        d = dst[r0 + i]
        s = src[i]
        if add:
            for j in range(src.shape[1]):
                d[c0 + j] += s[j]
        else:
            for j in range(src.shape[1]):
                d[c0 + j] = s[j]


@numba.njit(cache=True, fastmath=False)
def _values_fwd(Ad, P, r0, n, H, vo, dv, shared, out):
    """``out = [A_1 .. A_H] [V_1; ..; V_H]`` (summed heads), or with ``shared`` (one value block
    ``V = P[:, vo : vo + d_v]`` for every head) the heads side by side ``out = [A_1 V | .. | A_H V]``."""
    if n == 0:
        out[:] = 0.0
        return
    if not shared:
        np.dot(Ad, _doc_values(P, r0, n, H, vo, dv), out)
        return
    V = _doc_values(P, r0, n, 1, vo, dv)
    for h in range(H):
        _put(out, 0, h * dv, np.dot(_cols(Ad, h * n, n), V), False)


@numba.njit(cache=True, fastmath=False)
def _values_bwd(Ad, Gd, P, r0, n, H, vo, dv, shared, dP):
    """Backward of :func:`_values_fwd`: writes (``shared``: accumulates over heads) ``dV`` into the
    value columns of ``dP`` and returns ``dA = [G V_1^T | .. | G V_H^T]`` (``shared``: ``G_h V^T``)."""
    if not shared:
        dA = np.dot(Gd, _doc_values(P, r0, n, H, vo, dv).T)
        dV = np.dot(Ad.T, Gd)  # (H n, d_v)
        for h in range(H):
            _put(dP, r0, vo + h * dv, dV[h * n : (h + 1) * n], False)
        return dA
    V = _doc_values(P, r0, n, 1, vo, dv)
    dA = np.empty((Ad.shape[0], H * n))
    for h in range(H):
        Gh = _cols(Gd, h * dv, dv)
        _put(dA, 0, h * n, np.dot(Gh, V.T), False)
        _put(dP, r0, vo, np.dot(_cols(Ad, h * n, n).T, Gh), True)
    return dA


@numba.njit(cache=True, fastmath=False)
def _rows_block(P, rows, col0, width):
    """``P[rows, col0 : col0 + width]`` as a contiguous array."""
    out = np.empty((rows.shape[0], width))
    for i in range(rows.shape[0]):
        src = P[rows[i]]
        dst = out[i]
        for k in range(width):
            dst[k] = src[col0 + k]
    return out


@numba.njit(cache=True, fastmath=False)
def _doc_fwd(d, P, logw, start, qrows, qstart, aoff, H, da, dv, shared, c, Aflat, out):
    """Forward of document ``d`` (see :func:`doc_attention`)."""
    nq = H * da
    r0 = start[d]
    n = start[d + 1] - r0
    q0, q1 = qstart[d], qstart[d + 1]
    if q1 == q0:
        return
    Ad = Aflat[aoff[d] : aoff[d + 1]].reshape((q1 - q0, H * n))
    keys = np.arange(r0, r0 + n)
    lw = logw[r0 : r0 + n]
    for h in range(H):
        S = np.dot(_rows_block(P, qrows[q0:q1], h * da, da), _rows_block(P, keys, nq + h * da, da).T)
        for i in range(q1 - q0):
            a = Ad[i, h * n : (h + 1) * n]
            s = S[i]
            for j in range(n):
                a[j] = c * s[j] + lw[j]  # -inf log-weight: not a key, weight exactly 0
            _softmax_row(a, a)
    _values_fwd(Ad, P, r0, n, H, 2 * nq, dv, shared, out[q0:q1])


@numba.njit(cache=True, parallel=True, fastmath=False)
def _doc_attention_fwd(P, logw, start, qrows, qstart, aoff, order, gstart, H, da, dv, shared, c, Aflat, out):
    for g in numba.prange(gstart.shape[0] - 1):  # one task per balanced group of documents
        for k in range(gstart[g], gstart[g + 1]):
            _doc_fwd(order[k], P, logw, start, qrows, qstart, aoff, H, da, dv, shared, c, Aflat, out)


@numba.njit(cache=True, fastmath=False)
def _doc_bwd(d, P, Aflat, G, start, qrows, qstart, aoff, H, da, dv, shared, c, dP):
    """Backward of document ``d`` (see :func:`doc_attention_backward`)."""
    nq = H * da
    r0 = start[d]
    n = start[d + 1] - r0
    q0, q1 = qstart[d], qstart[d + 1]
    dP[r0 : r0 + n] = 0.0  # the document's rows of dP (every row of P belongs to one document)
    if q1 == q0 or n == 0:
        return
    Ad = Aflat[aoff[d] : aoff[d + 1]].reshape((q1 - q0, H * n))
    dA = _values_bwd(Ad, G[q0:q1], P, r0, n, H, 2 * nq, dv, shared, dP)  # (nq_d, H n)
    keys = np.arange(r0, r0 + n)
    for h in range(H):
        dS = np.empty((q1 - q0, n))
        for i in range(q1 - q0):
            a = Ad[i, h * n : (h + 1) * n]
            x = dA[i, h * n : (h + 1) * n]
            t = 0.0
            for j in range(n):
                t += x[j] * a[j]
            for j in range(n):
                dS[i, j] = c * (a[j] * (x[j] - t))
        Qh = _rows_block(P, qrows[q0:q1], h * da, da)
        dQ = np.dot(dS, _rows_block(P, keys, nq + h * da, da))
        dK = np.dot(dS.T, Qh)
        for i in range(q1 - q0):
            dst = dP[qrows[q0 + i]]
            for k in range(da):
                dst[h * da + k] += dQ[i, k]
        for j in range(n):
            dst = dP[r0 + j]
            for k in range(da):
                dst[nq + h * da + k] += dK[j, k]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _doc_attention_bwd(P, Aflat, G, start, qrows, qstart, aoff, order, gstart, H, da, dv, shared, c, dP):
    for g in numba.prange(gstart.shape[0] - 1):
        for k in range(gstart[g], gstart[g + 1]):
            _doc_bwd(order[k], P, Aflat, G, start, qrows, qstart, aoff, H, da, dv, shared, c, dP)


def balanced_groups(cost, n_groups: int):
    """Split documents into ``n_groups`` groups of about equal total ``cost`` (longest-processing-
    time first: by decreasing cost, each to the currently lightest group). Returns ``(order,
    gstart)``: group ``g`` holds the documents ``order[gstart[g]:gstart[g+1]]``. Each parallel task
    of the document kernels runs one group, so two threads get equal work even when document
    sizes differ (the cost of a document grows like its rows squared); which thread computes a
    document does not change its numbers."""
    cost = np.asarray(cost, dtype=np.float64).tolist()  # plain floats: a few microseconds per call
    n_groups = max(1, min(int(n_groups), len(cost)))
    heap = [(0.0, g) for g in range(n_groups)]  # (load, group): the lightest on top, ties by index
    members: list[list[int]] = [[] for _ in range(n_groups)]
    for d in sorted(range(len(cost)), key=lambda i: -cost[i]):  # stable: equal costs keep their order
        load, g = heapq.heappop(heap)
        members[g].append(d)
        heapq.heappush(heap, (load + cost[d], g))
    order = np.array([d for m in members for d in m], dtype=np.int64)
    gstart = np.zeros(n_groups + 1, dtype=np.int64)
    np.cumsum([len(m) for m in members], out=gstart[1:])
    return order, gstart


class DocAttention:
    """Index of packed documents for :func:`doc_attention`: ``start`` (B + 1,) row offsets, the query
    rows ``qrows`` (every row, or the sorted ``queries``) with per-document offsets ``qstart`` and the
    offsets ``aoff`` of each document's attention block ``(n_queries, H n)`` in the flat store."""

    def __init__(self, start, H: int, queries=None):
        self.start = np.ascontiguousarray(start, dtype=np.int64)
        if queries is None:
            self.qrows, self.qstart = np.arange(self.start[-1], dtype=np.int64), self.start
        else:
            self.qrows = np.ascontiguousarray(queries, dtype=np.int64)
            self.qstart = np.searchsorted(self.qrows, self.start).astype(np.int64)
        self.H, self.shared = H, False
        sizes = np.diff(self.qstart) * H * np.diff(self.start)
        self.aoff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # the work of a document ~ (queries + 1) x (keys + 1): balanced over the Numba threads
        cost = (np.diff(self.qstart) + 1.0) * (np.diff(self.start) + 1.0)
        self.order, self.gstart = balanced_groups(cost, numba.get_num_threads())

    def maps(self, Aflat):
        """The attention ``(Rq, H, n_max)`` (``[q, h, j]``: key ``start[d] + j`` of the query's document)."""
        n = np.diff(self.start)
        out = np.zeros((self.qrows.size, self.H, int(n.max()) if n.size else 0))
        for d in range(n.size):
            q0, q1 = self.qstart[d], self.qstart[d + 1]
            out[q0:q1, :, : n[d]] = Aflat[self.aoff[d] : self.aoff[d + 1]].reshape(q1 - q0, self.H, n[d])
        return out


def doc_attention(P, logw, start, H: int, da: int, c: float, queries=None, shared_values: bool = False):
    """Softmax attention of packed documents, fused per document (Numba, parallel over documents).

    ``P`` (R, H (2 d_a + d_v)) holds the projections ``[Q_1 .. Q_H | K_1 .. K_H | V_1 .. V_H]`` of the
    packed rows; document ``d`` owns rows ``start[d]:start[d+1]``; ``logw`` (R,) the rows'
    key log-multiplicities (``-inf``: not a key). For each query row ``q`` (every row, or the sorted
    ``queries``) of document ``d`` and head ``h`` (SPEC §3.1, row form):
    ``A_h[q, j] = softmax_j(c Q_h[q] . K_h[j] + logw[j])`` over the rows ``j`` of ``d`` and
    ``out[q] = sum_h sum_j A_h[q, j] V_h[j]`` (one product ``[A_1 .. A_H] [V_1; ..; V_H]`` per
    document). With ``shared_values`` the last ``d_v`` columns of ``P`` are one value block ``V`` for
    every head and the heads are not summed: ``out[q] = [sum_j A_1[q, j] V[j] | .. | A_H ..]`` (Rq, H d_v)
    (e.g. ``V = X``, the projection by ``W^V_h`` applied afterwards, to the query rows only).
    Returns ``(out, Aflat, index)`` (:class:`DocAttention`; ``index.maps(Aflat)`` unpacks the attention)."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    idx = DocAttention(start, H, queries)
    dv = _value_width(P, H, da, shared_values)
    Aflat = np.empty(int(idx.aoff[-1]))
    out = np.empty((idx.qrows.size, dv * (H if shared_values else 1)))
    lw = np.ascontiguousarray(logw, dtype=np.float64)
    args = (H, da, dv, bool(shared_values), float(c))
    with kernel_blas_serial():
        _doc_attention_fwd(P, lw, idx.start, idx.qrows, idx.qstart, idx.aoff, idx.order, idx.gstart, *args, Aflat, out)
    idx.shared = bool(shared_values)
    return out, Aflat, idx


def _value_width(P, H, da, shared):
    return P.shape[1] - 2 * H * da if shared else (P.shape[1] - 2 * H * da) // H


def doc_attention_backward(P, Aflat, idx, G, da: int, c: float):
    """Gradient of :func:`doc_attention` w.r.t. ``P`` given ``G = dL/dout`` (Rq, d_v): with
    ``dA_h[q, j] = G[q] . V_h[j]`` and ``dS = c A_h (dA_h - sum_j A_h dA_h)``,
    ``dQ_h[q] = sum_j dS[q, j] K_h[j]``, ``dK_h[j] = sum_q dS[q, j] Q_h[q]``,
    ``dV_h[j] = sum_q A_h[q, j] G[q]``, laid out like ``P`` (R, H (2 d_a + d_v)); with shared values
    (``G`` (Rq, H d_v) per head) ``dV[j] = sum_h sum_q A_h[q, j] G_h[q]``."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    H = idx.H
    dv = _value_width(P, H, da, idx.shared)
    dP = np.empty(P.shape)  # zeroed per document by the kernel
    dP[: idx.start[0]] = 0.0
    dP[idx.start[-1] :] = 0.0
    G = np.ascontiguousarray(G, dtype=np.float64)
    args = (H, da, dv, idx.shared, float(c))
    with kernel_blas_serial():
        _doc_attention_bwd(P, Aflat, G, idx.start, idx.qrows, idx.qstart, idx.aoff, idx.order, idx.gstart, *args, dP)
    return dP
