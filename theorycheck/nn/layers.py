"""Pure forward/backward pairs of the embedding and attention layers (arrays in; arrays and a cache out).

Activations are stored row-wise (one row per position, or per token in the count path), i.e. the
transpose of the paper's column convention (SPEC §3.1):

.. math::
    A(Z) = \\mathrm{softmax}_{col}\\big(c\\,(W^K Z)^T (W^Q Z)\\big),\\qquad
    \\mathrm{Attn}(Z) = \\sum_h W^V_h Z A_h(Z),\\qquad
    f = W^{dec}\\,\\mathrm{LN}(Z + \\mathrm{Attn}(Z)) + b^{dec} 1^T .

In rows, with ``X = Z^T``: ``Q = X W_Q^T``, ``K = X W_K^T``, ``V = X W_V^T``, logits
``c Q K^T + log w`` (``w`` the key multiplicities: a key of weight ``k`` acts as ``k`` identical
keys, weight 0 is no key), ``A = softmax_rows(logits)`` and ``out = A V``.

The same functions serve both evaluation paths of :class:`theorycheck.nn.Transformer`:

- **position path**: ``X`` has shape ``(B, N, d)`` and each document has its own ``(N, N)``
  attention; the projections of all heads are one GEMM ``X W_cat^T`` (a row gather when the rows
  of ``X`` are one-hot), the heads' attention rows are stored side by side ``[A_1 | ... | A_H]``
  so that ``sum_h A_h V_h`` is one product per document, and the backward collects ``dQ, dK, dV``
  of all heads in ``dP`` (``dW_cat = dP^T X``, ``dX = dP W_cat``: one GEMM each); on packed rows
  the per-document part (scores, softmax, ``A V``, and their backward) is one Numba kernel parallel
  over documents (:func:`~theorycheck.nn._kernels.doc_attention`; ``fused=False`` keeps the padded
  numpy products as its reference), and when only some rows attend (``queries``, the last layer)
  ``W^V`` is applied after the attention, to those rows only;
- **count path** (one-layer, no positional encoding): ``X`` is the token table ``(W^E)^T``,
  shape ``(V1, d)``; the token scores ``S = c Q K^T`` are computed once and a query group
  ``e`` (context ``ctx[e]``, query token ``qtok[e]``) attends with
  ``softmax_b(S[qtok[e], b] + log K[ctx[e], b])`` (SPEC §3.1 with identical keys merged;
  :class:`Groups` and the Numba kernels of :mod:`theorycheck.nn._kernels`).

The row-wise maps after the attention (layer norm, decoder, loss heads) are in
:mod:`theorycheck.nn.rowwise`. Every backward returns the input gradient and a dict of parameter gradients; nothing is
accumulated here (the layer objects of :mod:`theorycheck.nn.model` do that).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from ._dense_kernels import matmul_rows, matmul_rows_tn, matmul_tn
from ._kernels import (
    bias_softmax,
    doc_attention,
    doc_attention_backward,
    gather_softmax,
    scatter_rows,
    softmax_bwd,
    softmax_bwd_ref,
)

__all__ = [
    "Groups",
    "log_weights",
    "key_distribution",
    "softmax_rows",
    "softmax_rows_backward",
    "embedding_forward",
    "embedding_backward",
    "attention_forward",
    "attention_backward",
    "uniform_attention_forward",
    "uniform_attention_backward",
]


@dataclass(frozen=True)
class Groups:
    """Query groups of the count path: ``qtok``, ``ctx`` (E,) and the sparse ``(V1, E)`` scatter
    matrix ``P_q`` with ``P_q[qtok[e], e] = 1`` (sums a per-group array over query tokens).

    A :class:`CountBatch` gives its groups as :attr:`CountBatch.groups`; the count path of
    ``theorycheck.nn.layers.attention_forward`` reads them (SPEC §11.5).

    Parameters
    ----------
    qtok : numpy.ndarray of int, shape (E,)
        The query token of each group.
    ctx : numpy.ndarray of int, shape (E,)
        The context (document) of each group.
    P_q : scipy.sparse matrix, shape (V1, E)
        ``P_q[qtok[e], e] = 1``, zero elsewhere.

    See Also
    --------
    CountBatch : The batch the groups belong to.
    count_batch : Builds a count batch.

    References
    ----------
    SPEC §11.5 (the population and its factors).

    Examples
    --------
    >>> from theorycheck.nn import count_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])
    >>> g = count_batch(inputs, selected, targets, V1=7).groups
    >>> g.ctx, g.qtok  # groups (document 0, [MASK]), (document 0, word 1), (document 1, word 3)
    (array([0, 0, 1]), array([0, 1, 3]))
    >>> g.P_q @ np.array([10.0, 20.0, 30.0])  # a per-group array summed per query token
    array([10., 20.,  0., 30.,  0.,  0.,  0.])
    """

    qtok: np.ndarray
    ctx: np.ndarray
    P_q: object


# ---------------------------------------------------------------------------- softmax helpers
def log_weights(w):
    """``log w`` with ``-inf`` where ``w == 0`` (the softmax bias of key multiplicities)."""
    out = np.full(w.shape, -np.inf)
    np.log(w, out=out, where=w > 0)
    return out


def key_distribution(w):
    """Rows of ``w`` normalised to sum 1 (uniform attention over weighted keys); empty rows give 0."""
    s = w.sum(axis=-1, keepdims=True)
    return w / np.where(s > 0, s, 1.0)


def softmax_rows(logits):
    """``scipy.special.softmax`` over the last axis; rows that are entirely ``-inf`` (no key) give 0."""
    empty = np.isneginf(logits.max(axis=-1, keepdims=True))
    if not empty.any():
        return softmax(logits, axis=-1)
    return np.where(empty, 0.0, softmax(np.where(empty, 0.0, logits), axis=-1))


def softmax_rows_backward(A, dA, scale: float = 1.0):
    """Logit gradient ``scale * A * (dA - sum_b dA A)`` of a row softmax (Numba kernel, rows of any stack)."""
    if A.ndim < 2 or A.shape != dA.shape:
        return scale * softmax_bwd_ref(A, dA)
    n = A.shape[-1]
    return softmax_bwd(A.reshape(-1, n), dA.reshape(-1, n), scale=scale).reshape(A.shape)


# ---------------------------------------------------------------------------- embedding
def embedding_forward(table, tokens):
    """``X[b, i] = W^E e_{tokens[b, i]}`` (rows, shape ``tokens.shape + (d,)``); padding ``-1`` gives 0.

    ``table`` is ``W^E`` (``d x V1``, SPEC §3.1)."""
    if tokens.size and tokens.min() >= 0:  # no padding (e.g. packed rows): a plain row gather
        return table.T[tokens]
    return np.where((tokens >= 0)[..., None], table.T[np.maximum(tokens, 0)], 0.0)


def embedding_backward(tokens, dX, V1: int):
    """``dL/dW^E`` (``d x V1``): the row gradients ``dX`` summed per token (padding ignored)."""
    ok = tokens >= 0
    dtabT = np.zeros((V1, dX.shape[-1]))
    np.add.at(dtabT, tokens[ok], dX[ok])
    return dtabT.T


# ---------------------------------------------------------------------------- attention
def _swap(a):
    return np.swapaxes(a, -1, -2)


def _head_tables(X, W_Q, W_K, W_V, h):
    """Count path: the token tables of head ``h`` in the paper's column orientation ``W W^E``
    (``W^E = X^T``; ``d_a x V1``)."""
    tab = X.T
    return W_K[h] @ tab, W_Q[h] @ tab, W_V[h] @ tab


def _stacked(W_Q, W_K, W_V):
    """``[W_Q[0]; ...; W_Q[H-1]; W_K[0]; ...; W_V[H-1]]`` (``H (2 d_a + d_v) x d``): every head's
    projections as the rows of one matrix, so that ``P = X W_cat^T`` is one GEMM."""
    d = W_Q.shape[-1]
    return np.concatenate([W_Q.reshape(-1, d), W_K.reshape(-1, d), W_V.reshape(-1, d)])


def _one_hot_rows(X2):
    """``(index, valid)`` if every row of ``X2`` is a unit vector or zero (one-hot embeddings), else ``None``."""
    if X2.shape[0] and np.count_nonzero(X2[0]) > 1:  # quick reject (dense rows, e.g. after a layer norm)
        return None
    idx = X2.argmax(axis=1)
    val = X2[np.arange(X2.shape[0]), idx]
    if not np.all((val == 1.0) | (val == 0.0)) or np.count_nonzero(X2) != np.count_nonzero(val):
        return None
    return idx, val == 1.0


def _project(X2, Wcat, tokens=None):
    """``P = X2 W_cat^T`` (one row-parallel GEMM, :func:`~theorycheck.nn._dense_kernels.matmul_rows`); for
    one-hot rows the same numbers as a row gather of ``W_cat^T``. ``tokens`` (the caller knows that
    row ``r`` of ``X2`` is ``e_{tokens[r]}``, 0 for ``-1``) replaces the one-hot test."""
    oh = _one_hot_rows(X2) if tokens is None else (np.maximum(tokens, 0), tokens >= 0)
    if oh is None:
        return matmul_rows(X2, Wcat.T), None
    idx, valid = oh
    P = np.ascontiguousarray(Wcat.T)[idx]
    P[~valid] = 0.0
    return P, oh


class _Rows:
    """Packed rows at flat positions ``rows`` (sorted) of a padded ``(B, N)`` layout (``rows=None``:
    all ``B N`` rows); ``pad`` places packed rows in a zero ``(B, N, k)`` array, ``take`` reads them back."""

    def __init__(self, B: int, N: int, rows=None):
        self.B, self.N, self.rows = B, N, rows
        flat = np.arange(B * N) if rows is None else rows
        self.bi, self.ni = flat // N, flat % N

    def pad(self, M):
        if self.rows is None:
            return M.reshape(self.B, self.N, M.shape[1])
        out = np.zeros((self.B * self.N, M.shape[1]))
        out[self.rows] = M
        return out.reshape(self.B, self.N, M.shape[1])

    def take(self, M3):
        M2 = M3.reshape(self.B * self.N, M3.shape[-1])
        return M2 if self.rows is None else M2[self.rows]

    def subset(self, idx):
        """The rows ``idx`` (sorted packed indices) in their own padded layout ``(B, max per document)``."""
        b = self.bi[idx]
        counts = np.bincount(b, minlength=self.B)
        n = int(counts.max()) if counts.size else 0
        slot = np.arange(b.size) - (np.cumsum(counts) - counts)[b]
        return _Rows(self.B, n, b * n + slot)


def _head_rows(V, H: int, lay: _Rows):
    """Packed value rows ``V`` (R, H d_v), head-major columns -> ``(B, H N, d_v)``: per document the
    rows of ``V_1``, then ``V_2``, ... (zero rows at padding)."""
    dv = V.shape[1] // H
    out = np.zeros((lay.B, H, lay.N, dv))
    out[lay.bi, :, lay.ni, :] = V.reshape(-1, H, dv)
    return out.reshape(lay.B, H * lay.N, dv)


def _fused_forward(X, log_w, W_Q, W_K, W_V, c, rows, queries, cache, tokens=None, W_cat=None):
    """Position path through the per-document Numba kernel :func:`~theorycheck.nn._kernels.doc_attention`
    (no padded copies; the numpy route below is its reference). With ``queries`` (fewer query rows
    than keys) the values are applied after the attention, ``out = sum_h (A_h X) W_V[h]^T``: the
    ``W^V`` products then run over the query rows only, not over every key row."""
    B, N = log_w.shape
    H, da = W_Q.shape[:2]
    X2 = X.reshape(-1, X.shape[-1])
    late = queries is not None
    if W_cat is None:
        Wst = _stacked(W_Q, W_K, W_V[:0] if late else W_V)
    else:
        Wst = W_cat[: 2 * H * da] if late else W_cat
    P, cache["one_hot"] = _project(X2, Wst, tokens)
    if late:
        P = np.concatenate([P, X2], axis=1)  # [Q | K | X]: X is the one value block of every head
    flat = np.arange(B * N) if rows is None else rows
    start = np.searchsorted(flat // N, np.arange(B + 1))
    out, A, idx = doc_attention(P, log_w.reshape(-1)[flat], start, H, da, c, queries=queries, shared_values=late)
    Y = None
    if late:  # out = [A_1 X | .. | A_H X] (Rq, H d) -> sum_h (A_h X) W_V[h]^T
        Y, out = out, out @ np.swapaxes(W_V, 1, 2).reshape(-1, W_V.shape[1])
    if rows is None and queries is None:
        out = out.reshape(X.shape)
    return out, dict(cache, fused=(P, A, idx, Y), queries=queries, Wst=Wst)


def _fused_backward(dout, cache, need_dX, dX_in, dX_in_rows):
    """Backward of :func:`_fused_forward` (``Y = [A_1 X | .. | A_H X]`` when the values came after:
    ``dW_V[h] = dout^T Y_h``, the kernel gets ``dY_h = dout W_V[h]`` and returns ``dX`` in its value
    columns)."""
    W_Q, W_K, W_V = cache["W"]
    P, A, idx, Y = cache["fused"]
    X = cache["X"]
    X2 = X.reshape(-1, X.shape[-1])
    nq, d = W_Q.shape[0] * W_Q.shape[1], W_V.shape[1]
    dout = dout.reshape(-1, d)
    if Y is not None:
        dW_V = (dout.T @ Y).reshape(d, -1, d).swapaxes(0, 1)
        dout = dout @ np.concatenate(list(W_V), axis=1)  # [dout W_V[0] | .. | dout W_V[H-1]]
    dP = doc_attention_backward(P, A, idx, dout, W_Q.shape[1], cache["c"])
    dPw = dP if Y is None else np.ascontiguousarray(dP[:, : 2 * nq])
    one_pass = need_dX and cache["one_hot"] is None  # dX = dP W_cat and dW_cat = dP^T X together
    dX, G = matmul_rows_tn(dPw, cache["Wst"], X2) if one_pass else (None, _weight_grads(dPw, X2, cache["one_hot"]))
    grads = _split_grads(G, W_Q, W_K, W_V if Y is None else None)
    if Y is not None:
        grads["W_V"] = dW_V
    if not need_dX:
        return None, grads
    dX = (matmul_rows(dPw, cache["Wst"]) if dX is None else dX).reshape(X.shape)
    _add_in(dX, dX_in, dX_in_rows)
    if Y is not None:
        dX += dP[:, 2 * nq :].reshape(X.shape)
    return dX, grads


def _split_grads(G, W_Q, W_K, W_V=None):
    """``dW_cat`` (rows as :func:`_stacked`) split into ``{"W_Q", "W_K", "W_V"}`` (views of ``G``
    when it is contiguous; ``W_V=None``: no value block)."""
    nq = W_Q.shape[0] * W_Q.shape[1]
    grads = {"W_Q": G[:nq].reshape(W_Q.shape), "W_K": G[nq : 2 * nq].reshape(W_K.shape)}
    if W_V is not None:
        grads["W_V"] = G[2 * nq :].reshape(W_V.shape)
    return grads


def _add_in(dX, dX_in, dX_in_rows=None):
    """``dX += dX_in`` in place (into the rows ``dX_in_rows`` of ``dX`` viewed as ``(R, d)`` when
    given: sorted distinct indices); ``dX_in=None`` adds nothing. ``M + dX_in`` rounds as
    ``dX_in + M``, so adding the upstream gradient after a product gives the same bits as before it."""
    if dX_in is None:
        return dX
    if dX_in_rows is None:
        dX += dX_in
    else:
        dX.reshape(-1, dX.shape[-1])[dX_in_rows] += dX_in
    return dX


def _full_in(X, dX_in, dX_in_rows):
    """``dX_in`` given at the rows ``dX_in_rows`` as a full array shaped like ``X`` (zeros elsewhere)."""
    if dX_in is None or dX_in_rows is None:
        return dX_in
    full = np.zeros(X.shape)
    full.reshape(-1, X.shape[-1])[dX_in_rows] = dX_in
    return full


def attention_forward(
    X,
    log_w,
    W_Q,
    W_K,
    W_V,
    c: float,
    groups: Groups | None = None,
    rows=None,
    queries=None,
    fused=None,
    tokens=None,
    W_cat=None,
):
    """Softmax attention summed over heads (SPEC §3.1): ``out = sum_h A_h V_h``.

    Position path (``groups=None``): ``X`` (B, N, d), ``log_w`` (B, N) key log-multiplicities,
    ``A_h = softmax_rows(c Q_h K_h^T + log_w)`` per document with ``Q_h = X W_Q[h]^T`` etc.,
    ``out`` (B, N, d); the projections of all heads are one GEMM ``X W_cat^T`` (a row gather when
    the rows of ``X`` are one-hot). Packed rows: with ``rows`` (R,) (sorted flat indices into the
    ``(B, N)`` layout of ``log_w``), ``X`` is ``(R, d)`` and holds only those rows (padding left out
    of the projections and of the backward's GEMMs; a left-out row must not be a key, i.e.
    ``log_w = -inf`` there) and ``out`` is ``(R, d)``. Queries: with ``queries`` (sorted indices into
    the rows of ``X``) only those rows attend (e.g. the last layer, whose output is read at the loss
    entries only) and ``out`` is ``(len(queries), d)``; every row stays a key and a value.
    Count path: ``X = (W^E)^T`` (V1, d), ``log_w = log K`` (G, V1); with the token tables
    ``K_t = W_K[h] W^E`` (paper orientation) the token scores ``S_h = c Q_t^T K_t`` (V1, V1) are
    gathered per query group, ``A_h`` (E, V1), ``out = sum_h A_h V_t^T`` (E, d).
    ``W_Q, W_K`` have shape ``(H, d_a, d)``, ``W_V`` ``(H, d, d)``.
    ``fused`` (position path): the per-document Numba kernel (default when ``rows`` is given) or the
    padded numpy route (``False``; the reference, and the one that keeps per-head maps in the cache).
    ``tokens`` (position path, optional): the rows of ``X`` are the unit vectors ``e_{tokens[r]}``
    (0 for ``-1``; a one-hot embedding), which spares the test for one-hot rows. ``W_cat`` (position
    path, optional): the caller's array of the rows ``[W_Q; W_K; W_V]`` (``H (2 d_a + d) x d``, the
    values of ``_stacked(W_Q, W_K, W_V)``), used without a copy.
    Returns ``(out, cache)``.
    """
    cache = dict(X=X, c=c, groups=groups, W=(W_Q, W_K, W_V), rows=rows, fused=None)
    if groups is None and (rows is not None if fused is None else fused):
        return _fused_forward(X, log_w, W_Q, W_K, W_V, c, rows, queries, cache, tokens, W_cat)
    heads = []
    out = 0.0
    if groups is not None:
        for h in range(W_V.shape[0]):
            Kx, Qx, Vx = _head_tables(X, W_Q, W_K, W_V, h)
            A = gather_softmax(c * (Qx.T @ Kx), log_w, groups.qtok, groups.ctx)  # fused Numba kernel
            out = out + A @ Vx.T
            heads.append((Kx, Qx, Vx, A))
        return out, dict(cache, heads=heads)
    B, N = log_w.shape
    H, da = W_Q.shape[:2]
    nq = H * da
    Wst = _stacked(W_Q, W_K, W_V) if W_cat is None else W_cat
    P, cache["one_hot"] = _project(X.reshape(-1, X.shape[-1]), Wst, tokens)
    kl = _Rows(B, N, rows)  # key / value rows: every row of X
    ql = kl if queries is None else kl.subset(queries)  # query rows
    Qp = ql.pad(P[:, :nq] if queries is None else P[queries, :nq])
    Kp = kl.pad(P[:, nq : 2 * nq])
    S = np.empty((B, ql.N, H, N))
    for h in range(H):
        np.matmul(Qp[..., h * da : (h + 1) * da], _swap(Kp[..., h * da : (h + 1) * da]), out=S[:, :, h, :])
    # softmax_rows(c Q_h K_h^T + log_w) of every head, fused; per query row [A_1 | ... | A_H] (B, Nq, H N)
    A = bias_softmax(S.reshape(B, ql.N * H, N), log_w, c).reshape(B, ql.N, H * N)
    Vst = _head_rows(P[:, 2 * nq :], H, kl)  # (B, H N, d_v): the rows of V_1, then of V_2, ...
    A4 = A.reshape(B, ql.N, H, N)
    for h in range(H):
        hs = slice(h * da, (h + 1) * da)
        heads.append((Kp[..., hs], Qp[..., hs], Vst[:, h * N : (h + 1) * N], A4[:, :, h, :]))
    out = ql.take(A @ Vst)  # sum_h A_h V_h as one product per document
    out = out.reshape(X.shape) if rows is None and queries is None else out
    return out, dict(cache, heads=heads, A=A, Vst=Vst, kl=kl, ql=ql, queries=queries)


def _start(X, dX_in, need_dX):
    if not need_dX:
        return None
    return np.zeros_like(X) if dX_in is None else np.array(dX_in, dtype=np.float64)


def _count_head_backward(dout, Kt, Qt, Vt, A, c, groups):
    """Count path, one head, paper orientation: ``(dK_t, dQ_t, dV_t)`` (``d_a x V1``, ``d x V1``)."""
    dVt = dout.T @ A
    dS = c * (groups.P_q @ softmax_rows_backward(A, dout @ Vt))  # (V1, V1), summed per query token
    return Qt @ dS, Kt @ dS.T, dVt


def _count_backward(dout, cache, need_dX, dX_in, grads):
    X, c, groups = cache["X"], cache["c"], cache["groups"]
    W_Q, W_K, W_V = cache["W"]
    dtab = _start(X.T, None if dX_in is None else dX_in.T, need_dX)
    for h, (Kt, Qt, Vt, A) in enumerate(cache["heads"]):
        dKt, dQt, dVt = _count_head_backward(dout, Kt, Qt, Vt, A, c, groups)
        grads["W_V"][h], grads["W_Q"][h], grads["W_K"][h] = dVt @ X, dQt @ X, dKt @ X
        if need_dX:
            dtab += W_V[h].T @ dVt + W_Q[h].T @ dQt + W_K[h].T @ dKt
    return (dtab.T if need_dX else None), grads


def _weight_grads(dP, X2, one_hot):
    """``dW_cat = dP^T X2`` (:func:`~theorycheck.nn._dense_kernels.matmul_tn`; one-hot ``X2``: a scatter)."""
    if one_hot is None:
        return matmul_tn(dP, X2)
    idx, valid = one_hot
    return scatter_rows(idx, valid, dP, X2.shape[1]).T


def _position_dP(dout, cache):
    """Position path: ``dP = [dQ_1 .. dQ_H | dK_1 .. dK_H | dV_1 .. dV_H]`` (R, H (2 d_a + d_v)),
    the gradient of the fused projections ``P = X W_cat^T`` at the (packed) rows."""
    W_Q, W_V = cache["W"][0], cache["W"][2]
    kl, ql, queries = cache["kl"], cache["ql"], cache["queries"]
    A, Vst = cache["A"], cache["Vst"]  # (B, Nq, H N), (B, H N, d_v)
    B, N, Nq = kl.B, kl.N, ql.N
    H, da = W_Q.shape[:2]
    dv, nq = W_V.shape[1], H * da
    G = ql.pad(dout.reshape(-1, dv))
    dS = softmax_rows_backward(A.reshape(B, Nq * H, N), (G @ _swap(Vst)).reshape(B, Nq * H, N), cache["c"])
    dS = dS.reshape(B, Nq, H, N)
    dQ, dK = np.empty((B, Nq, nq)), np.empty((B, N, nq))
    for h, (Kx, Qx, _, _) in enumerate(cache["heads"]):
        hs = slice(h * da, (h + 1) * da)
        np.matmul(dS[:, :, h, :], Kx, out=dQ[..., hs])
        np.matmul(_swap(dS[:, :, h, :]), Qx, out=dK[..., hs])
    dV = (_swap(A) @ G).reshape(B, H, N, dv)  # dV_h = A_h^T dout per document
    R = kl.bi.size
    dP = np.empty((R, 2 * nq + H * dv))
    if queries is None:
        dP[:, :nq] = ql.take(dQ)
    else:
        dP[:, :nq] = 0.0
        dP[queries, :nq] = ql.take(dQ)
    dP[:, nq : 2 * nq] = kl.take(dK)
    dP[:, 2 * nq :].reshape(R, H, dv)[...] = dV[kl.bi, :, kl.ni, :]
    return dP


def attention_backward(dout, cache, need_dX: bool = True, dX_in=None, dX_in_rows=None):
    """Gradients of :func:`attention_forward`: ``(dX, {"W_Q", "W_K", "W_V"})``, each ``(H, ...)``.

    Per head, with ``dS`` the logit gradient (summed over query groups of one token on the count
    path): ``dV = A^T dout``, ``dQ = dS K``, ``dK = dS^T Q``, ``dW_* = d*^T X`` and
    ``dX = dX_in + sum_h (dV W_V + dQ W_Q + dK W_K)`` (``None`` unless ``need_dX``; ``dX_in``,
    e.g. the residual branch, defaults to 0; with ``dX_in_rows`` (sorted distinct indices into the
    rows of ``X``) ``dX_in`` holds those rows only, e.g. the residual of the query rows). The
    position path collects ``dQ, dK, dV`` of all heads in the columns of ``dP`` so that
    ``dW_cat = dP^T X`` and ``dX = dP W_cat`` are one GEMM each (over the packed rows only, when
    the forward had ``rows``; ``dout``, ``dX`` then have the packed shape ``(R, d)``). The count
    path computes the same in the paper's column orientation (``dW_* = d*_t W^E^T``).
    """
    W_Q, W_K, W_V = cache["W"]
    if cache["groups"] is not None:
        grads = {k: np.zeros_like(W) for k, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V))}
        return _count_backward(dout, cache, need_dX, _full_in(cache["X"], dX_in, dX_in_rows), grads)
    if cache["fused"] is not None:
        return _fused_backward(dout, cache, need_dX, dX_in, dX_in_rows)
    X = cache["X"]
    dP = _position_dP(dout, cache)
    grads = _split_grads(_weight_grads(dP, X.reshape(-1, X.shape[-1]), cache["one_hot"]), W_Q, W_K, W_V)
    if not need_dX:
        return None, grads
    dX = (dP @ _stacked(W_Q, W_K, W_V)).reshape(X.shape)
    return _add_in(dX, dX_in, dX_in_rows), grads


def uniform_attention_forward(X, w, W_V):
    """Uniform attention over weighted keys: one output row per context, ``sum_h W_V[h] xbar``.

    ``xbar = sum_j w_j x_j / sum_j w_j`` (empty contexts: 0). Position path: ``X`` (B, N, d),
    ``w`` (B, N); count path: ``X = (W^E)^T`` (V1, d), ``w = K`` (G, V1), computed as
    ``hbar (sum_h W_V[h] W^E)^T``. Returns the per-context output ``(G or B, d)`` (every query
    of a context gets it) and a cache.
    """
    hbar = key_distribution(w)
    cache = dict(X=X, hbar=hbar, W_V=W_V)
    if X.ndim == 2:
        Vt = sum(W_V[h] @ X.T for h in range(W_V.shape[0]))  # summed token values (d, V1)
        return hbar @ Vt.T, cache
    Xbar = np.einsum("bj,bjd->bd", hbar, X)
    cache["Xbar"] = Xbar
    return Xbar @ W_V.sum(axis=0).T, cache


def uniform_attention_backward(dUc, cache, need_dX: bool = True, dX_in=None):
    """Gradients of :func:`uniform_attention_forward` given ``dUc`` (per-context output gradient):
    ``dW_V[h] = dUc^T xbar`` for every head and ``dX = dX_in + hbar^T (dUc sum_h W_V[h])``."""
    X, hbar, W_V = cache["X"], cache["hbar"], cache["W_V"]
    H = W_V.shape[0]
    if X.ndim == 2:  # count path, paper orientation: dV_t = dUc^T hbar (d, V1)
        dVt = dUc.T @ hbar
        grads = {"W_V": np.repeat((dVt @ X)[None], H, axis=0)}
        if not need_dX:
            return None, grads
        dtab = _start(X.T, None if dX_in is None else dX_in.T, True)
        for h in range(H):
            dtab += W_V[h].T @ dVt
        return dtab.T, grads
    grads = {"W_V": np.repeat((dUc.T @ cache["Xbar"])[None], H, axis=0)}
    if not need_dX:
        return None, grads
    dX = _start(X, dX_in, True)
    dX += hbar[:, :, None] * (dUc @ W_V.sum(axis=0))[:, None, :]
    return dX, grads
