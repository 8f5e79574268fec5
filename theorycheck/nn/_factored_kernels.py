"""Fused loss and gradient of a one-layer, one-head count-path model on a batch whose key weights are
factored, ``K = U R`` (Numba kernel, parallel over query tokens, with a pure numpy reference).

The exact population (SPEC §4.0) has one context per topic set ``S`` and key density
``m_S = a Phi^T theta_S + c`` (SPEC §2.1, §11.5), linear in the topic mixture ``theta_S``: with
``U = [theta_S^T, 1]`` (G x r) and ``R = [a Phi; c]`` (r x V1, sparse rows for the paper's model)
``K = U R`` exactly, ``r = T + 1``. For query group ``e`` (context ``g``, query token ``a``) and
``E[a, b] = exp(S[a, b] - m_a)`` (``m_a`` the row maximum over the key columns) the attention of
SPEC §3.1 with identical keys merged is ``A[e, b] = K[g, b] E[a, b] / Z_e``,
``Z_e = sum_j U[g, j] (E R^T)[a, j]``, so the value output

.. math::
    u_e = \\frac{1}{Z_e} \\sum_j U[g, j]\\, F_j[a], \\qquad F_j[a] = \\sum_b R[j, b]\\, E[a, b]\\, v_b,

needs the ``r`` per-query-token vectors ``F_j[a]`` once per step, shared by every context (instead
of one ``V1 x V1`` attention per context). The decoder is the identity plus the bias ``b^dec``,
``y_e = u_e + b``, and the loss head squared (``w ||y||^2 - 2 Y.y + w``) or cross-entropy
(``w lse(y) - Y.y``) with ``g_e = dL/dy_e`` (SPEC §2.2). Backward, with
``H_j[a] = sum_{e: q_e = a} (U[g, j] / Z_e) g_e``, ``h_j[a] = sum_{e: q_e = a} (U[g, j] / Z_e) g_e . u_e``:

.. math::
    \\frac{\\partial L}{\\partial v_b} = \\sum_j R[j, b] \\sum_a E[a, b]\\, H_j[a], \\qquad
    \\frac{\\partial L}{\\partial S[a, b]} = E[a, b] \\sum_j R[j, b]\\,(H_j[a] \\cdot v_b - h_j[a])

(the softmax Jacobian ``A (dA - A . dA)`` with ``A . dA = g_e . u_e``). The squared loss is a
quadratic form in ``U[g] / Z_e`` and goes by products over (context, token) grids
(:mod:`theorycheck.nn._factored_squared`, serial). Cross-entropy runs here, one output row per loss
entry; all its work is per query token
``a``, in a fixed number of blocks of tokens (one parallel task each, :data:`TOKEN_BLOCKS`); each
token writes its own rows, and the value gradient's per-block partial sums, the partial losses and
bias gradients are added in a fixed order, so the result is the same bits on any thread count.
:func:`factored_loss_grad_ref` is the vectorised numpy reference of the same formulas; the
generic count path of :mod:`theorycheck.nn.layers` (dense ``E x V1`` attention) is the
independent route both are tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from .._threads import kernel_blas_serial, numba_threads
from ._factored_squared import SquaredGrid, squared_loss_grad

__all__ = ["KeyFactors", "LOSS_CODES", "TOKEN_BLOCKS", "factored_loss_grad", "factored_loss_grad_ref"]

#: the loss heads of the fused route and their kernel codes (squared: :mod:`._factored_squared`)
LOSS_CODES = {"squared": 0, "ce": 1}


@dataclass(frozen=True)
class KeyFactors:
    """Index of a count batch with ``K = U R`` for :func:`factored_loss_grad` (built once per batch).

    ``U`` (G, r) and ``R`` (r, V1) dense; their nonzeros as CSR; the loss entries grouped by query
    token (``order``, ``qstart``); the targets ``Y`` as CSR; ``support``: the key columns (some
    ``R[j, b] != 0``); ``grid``: the constants of the squared loss's Gram route, with the targets
    factored as ``Y[e] = sum_t Theta[ctx[e], t] B[qtok[e], t]`` (``Theta`` (G, s), ``B`` (V1, s, V1))."""

    U: np.ndarray
    R: np.ndarray
    uptr: np.ndarray
    uidx: np.ndarray
    uval: np.ndarray
    rptr: np.ndarray
    ridx: np.ndarray
    rval: np.ndarray
    support: np.ndarray
    ctx: np.ndarray
    order: np.ndarray
    qstart: np.ndarray
    yptr: np.ndarray
    yidx: np.ndarray
    yval: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    grid: SquaredGrid

    @classmethod
    def build(cls, U, R, ctx, qtok, Y, weight, Theta, B) -> KeyFactors:
        U = np.ascontiguousarray(U, dtype=np.float64)
        R = np.ascontiguousarray(R, dtype=np.float64)
        V1 = R.shape[1]
        Uc, Rr, Yc = sp.csr_matrix(U), sp.csr_matrix(R), sp.csr_matrix(Y)
        for m in (Uc, Rr, Yc):
            m.sort_indices()
        qtok = np.asarray(qtok, dtype=np.int64)
        order = np.argsort(qtok, kind="stable").astype(np.int64)
        qstart = np.searchsorted(qtok[order], np.arange(V1 + 1)).astype(np.int64)
        i64 = np.int64
        return cls(
            U=U,
            R=R,
            uptr=Uc.indptr.astype(i64),
            uidx=Uc.indices.astype(i64),
            uval=Uc.data.astype(np.float64),
            rptr=Rr.indptr.astype(i64),
            ridx=Rr.indices.astype(i64),
            rval=Rr.data.astype(np.float64),
            support=np.flatnonzero(np.any(R != 0.0, axis=0)).astype(i64),
            ctx=np.ascontiguousarray(ctx, dtype=i64),
            order=order,
            qstart=qstart,
            yptr=Yc.indptr.astype(i64),
            yidx=Yc.indices.astype(i64),
            yval=Yc.data.astype(np.float64),
            weight=np.ascontiguousarray(weight, dtype=np.float64),
            Y=np.asarray(Y),
            grid=SquaredGrid.build(U, ctx, qtok, weight, Theta, B),
        )

    @property
    def rank(self) -> int:
        return self.R.shape[0]


@numba.njit(cache=True, fastmath=False)
def _token_setup(a, S, VtT, rptr, ridx, rval, support, Erow, F, ER):  # pragma: no cover - compiled
    """Row ``a`` of ``E`` (``exp(S[a, b] - m_a)`` on the key columns, 0 elsewhere), the vectors
    ``F_j[a] = sum_b R[j, b] E[a, b] v_b`` and the sums ``ER_j = sum_b R[j, b] E[a, b]``."""
    d = VtT.shape[1]
    m = -np.inf
    for k in range(support.shape[0]):
        s = S[a, support[k]]
        if s > m:
            m = s
    for k in range(support.shape[0]):
        b = support[k]
        Erow[b] = np.exp(S[a, b] - m)
    for j in range(rptr.shape[0] - 1):
        Fj = F[j]
        for i in range(d):
            Fj[i] = 0.0
        acc = 0.0
        for k in range(rptr[j], rptr[j + 1]):
            b = ridx[k]
            coef = rval[k] * Erow[b]
            acc += coef
            vb = VtT[b]
            for i in range(d):
                Fj[i] += coef * vb[i]
        ER[j] = acc


@numba.njit(cache=True, fastmath=False)
def _normaliser(gc, uptr, uidx, uval, ER):  # pragma: no cover - compiled
    Z = 0.0
    for k in range(uptr[gc], uptr[gc + 1]):
        Z += uval[k] * ER[uidx[k]]
    return Z


@numba.njit(cache=True, fastmath=False)
def _rows_ce(a, bias, f, F, ER, H, h, dba, y, g, u):  # pragma: no cover - compiled
    """Cross-entropy rows of query token ``a``, one output row at a time: ``y = u + b``,
    ``g = w softmax(y) - Y``, ``H_j += (U[g, j] / Z) g``, ``h_j += (U[g, j] / Z) g . u``. Returns
    ``(loss, min Z)``."""
    (uptr, uidx, uval, rptr, ridx, rval, support, ctx, order, qstart, yptr, yidx, yval, weight) = f
    r, d = F.shape
    for j in range(r):
        h[j] = 0.0
        Hj = H[j]
        for i in range(d):
            Hj[i] = 0.0
    for i in range(d):
        dba[i] = 0.0
    loss = 0.0
    zmin = np.inf
    for q in range(qstart[a], qstart[a + 1]):
        e = order[q]
        gc = ctx[e]
        Z = _normaliser(gc, uptr, uidx, uval, ER)
        if Z < zmin:
            zmin = Z
        for i in range(d):
            u[i] = 0.0
        if Z > 0.0:
            for k in range(uptr[gc], uptr[gc + 1]):
                Fj = F[uidx[k]]
                cu = uval[k]
                for i in range(d):
                    u[i] += cu * Fj[i]
            iz = 1.0 / Z
            for i in range(d):
                u[i] *= iz
        for i in range(d):
            y[i] = u[i] + bias[i]
        w = weight[e]
        yy = 0.0
        for k in range(yptr[e], yptr[e + 1]):
            yy += yval[k] * y[yidx[k]]
        my = -np.inf
        for i in range(d):
            if y[i] > my:
                my = y[i]
        s = 0.0
        for i in range(d):
            g[i] = np.exp(y[i] - my)
            s += g[i]
        loss += w * (np.log(s) + my) - yy
        ws = w / s
        for i in range(d):
            g[i] *= ws
        for k in range(yptr[e], yptr[e + 1]):
            g[yidx[k]] -= yval[k]
        for i in range(d):
            dba[i] += g[i]
        if Z > 0.0:
            t = 0.0
            for i in range(d):
                t += g[i] * u[i]
            for k in range(uptr[gc], uptr[gc + 1]):
                j = uidx[k]
                cz = uval[k] / Z
                Hj = H[j]
                for i in range(d):
                    Hj[i] += cz * g[i]
                h[j] += cz * t
    return loss, zmin


@numba.njit(cache=True, fastmath=False)
def _token_finish(a, Vt, c, rptr, ridx, rval, Erow, H, h, dSa, dVpart):  # pragma: no cover - compiled
    """``dS[a, b] = c E[a, b] sum_j R[j, b] (H_j . v_b - h_j)`` and the token's share of the value
    gradient, ``dL/dv_b += sum_j R[j, b] E[a, b] H_j`` (into its block's partial sum ``dVpart``)."""
    d = Vt.shape[0]
    HV = np.dot(H, Vt)  # (r, V1): H_j . v_b (BLAS, serial inside the kernel)
    for j in range(rptr.shape[0] - 1):
        Hj = H[j]
        for k in range(rptr[j], rptr[j + 1]):
            b = ridx[k]
            dSa[b] += c * Erow[b] * (rval[k] * (HV[j, b] - h[j]))
            coef = rval[k] * Erow[b]
            out = dVpart[b]
            for i in range(d):
                out[i] += coef * Hj[i]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _factored_tokens(
    S, VtT, Vt, bias, c, f, bounds, E_all, dS, loss_a, db_a, Zmin_a, dVparts, dVtT
):  # pragma: no cover - compiled
    """One task per block of query tokens ``bounds[k]:bounds[k+1]`` (tokens in order within a block);
    the blocks' value-gradient partial sums are added in block order (see the module docstring)."""
    rptr, ridx, rval, support = f[3], f[4], f[5], f[6]
    r = rptr.shape[0] - 1
    d = VtT.shape[1]
    nb = bounds.shape[0] - 1
    for blk in numba.prange(nb):
        F = np.empty((r, d))
        H = np.empty((r, d))
        ER = np.empty(r)
        h = np.empty(r)
        part = dVparts[blk]
        part[:, :] = 0.0
        for a in range(bounds[blk], bounds[blk + 1]):
            _token_setup(a, S, VtT, rptr, ridx, rval, support, E_all[a], F, ER)
            la, za = _rows_ce(a, bias, f, F, ER, H, h, db_a[a], np.empty(d), np.empty(d), np.empty(d))
            loss_a[a] = la
            Zmin_a[a] = za
            _token_finish(a, Vt, c, rptr, ridx, rval, E_all[a], H, h, dS[a], part)
    dVtT[:, :] = 0.0
    for blk in range(nb):  # fixed order: the same sum on any thread count
        dVtT += dVparts[blk]


#: blocks of query tokens of the kernel (a constant: the result does not depend on the thread count)
TOKEN_BLOCKS = 4


def factored_loss_grad(S, VtT, bias, c: float, fk: KeyFactors, loss: str, threads: int | None = None):
    """Loss and gradients of the fused route (Numba; see the module docstring): the squared loss by the
    Gram forms of :func:`theorycheck.nn._factored_squared.squared_loss_grad` (serial), cross-entropy
    by the per-token kernel here.

    ``S`` (V1, V1): the scores ``c Q_t^T K_t``; ``VtT`` (V1, d): the value vector ``v_b`` of every
    token (``d = V1``, identity decoder); ``bias``: ``b^dec``; ``c``: the score factor (the
    returned ``dS`` is the gradient w.r.t. ``Q_t^T K_t``, i.e. ``c`` times that w.r.t. ``S``).
    Returns ``(loss, dS, dVtT, db, Zmin)`` with ``Zmin`` the smallest normaliser ``Z_e`` (the
    caller falls back to the dense route when it is not safely positive). ``threads``: Numba threads
    (default: the user's choice, else 1; :func:`theorycheck._threads.numba_threads`): a step is a few
    milliseconds of work, which a second thread speeds up on an idle machine but stalls at its
    barrier on a loaded one; the result is the same bits on any count."""
    if loss not in LOSS_CODES:
        raise ValueError(f"loss must be one of {sorted(LOSS_CODES)}, got {loss!r}")
    if loss == "squared":
        with kernel_blas_serial():
            return squared_loss_grad(S, VtT, bias, c, fk, fk.grid)
    V1, d = VtT.shape
    S = np.ascontiguousarray(S, dtype=np.float64)
    VtT = np.ascontiguousarray(VtT, dtype=np.float64)
    bias = np.ascontiguousarray(bias, dtype=np.float64)
    f = (
        fk.uptr, fk.uidx, fk.uval, fk.rptr, fk.ridx, fk.rval, fk.support,
        fk.ctx, fk.order, fk.qstart, fk.yptr, fk.yidx, fk.yval, fk.weight,
    )  # fmt: skip
    E_all = np.zeros((V1, V1))
    dS = np.zeros((V1, V1))
    loss_a = np.empty(V1)
    db_a = np.empty((V1, d))
    Zmin_a = np.empty(V1)
    nb = max(1, min(TOKEN_BLOCKS, V1))
    bounds = (np.arange(nb + 1, dtype=np.int64) * V1) // nb
    dVparts = np.empty((nb, V1, d))
    dVtT = np.empty((V1, d))
    Vt = np.ascontiguousarray(VtT.T)
    with kernel_blas_serial(), numba_threads(threads):
        _factored_tokens(S, VtT, Vt, bias, float(c), f, bounds, E_all, dS, loss_a, db_a, Zmin_a, dVparts, dVtT)
    total = 0.0
    for a in range(V1):  # fixed order: the same sum on any thread count
        total += loss_a[a]
    return total, dS, dVtT, db_a.sum(axis=0), float(Zmin_a.min()) if V1 else np.inf


def factored_loss_grad_ref(S, VtT, bias, c: float, fk: KeyFactors, loss: str):
    """Pure numpy reference of :func:`factored_loss_grad` (dense ``U``, ``R``, ``Y``; the same formulas)."""
    U, R = fk.U, fk.R
    V1 = S.shape[0]
    cols = np.zeros(V1, dtype=bool)
    cols[fk.support] = True
    m = np.where(cols[None, :], S, -np.inf).max(axis=1, keepdims=True)
    E = np.where(cols[None, :], np.exp(S - m), 0.0)  # (V1, V1)
    ER = E @ R.T  # (V1, r)
    F = np.einsum("ab,jb,bd->ajd", E, R, VtT)  # (V1, r, d)
    ctx = fk.ctx
    qtok = np.empty_like(ctx)
    qtok[fk.order] = np.repeat(np.arange(V1), np.diff(fk.qstart))
    Z = np.einsum("ej,ej->e", U[ctx], ER[qtok])
    safe = np.where(Z > 0, Z, 1.0)
    u = np.einsum("ej,ejd->ed", U[ctx], F[qtok]) / safe[:, None] * (Z > 0)[:, None]
    y = u + bias
    Y, w = np.asarray(fk.Y.toarray() if hasattr(fk.Y, "toarray") else fk.Y), fk.weight
    if loss == "squared":
        val = float(np.sum(w * (np.sum(y * y, axis=1) + 1.0)) - 2.0 * np.sum(y * Y))
        g = 2.0 * w[:, None] * y - 2.0 * Y
    else:
        my = y.max(axis=1, keepdims=True)
        ex = np.exp(y - my)
        s = ex.sum(axis=1)
        val = float(np.sum(w * (np.log(s) + my[:, 0])) - np.sum(y * Y))
        g = w[:, None] * ex / s[:, None] - Y
    cz = U[ctx] / safe[:, None] * (Z > 0)[:, None]  # (E, r)
    t = np.sum(g * u, axis=1)
    H = np.zeros((V1, U.shape[1], VtT.shape[1]))
    np.add.at(H, qtok, cz[:, :, None] * g[:, None, :])
    h = np.zeros((V1, U.shape[1]))
    np.add.at(h, qtok, cz * t[:, None])
    HV = np.einsum("ajd,bd->ajb", H, VtT)
    dS = c * E * np.einsum("jb,ajb->ab", R, HV - h[:, :, None])
    dVtT = np.einsum("jb,ab,ajd->bd", R, E, H)
    Zmin = float(Z.min()) if Z.size else np.inf
    return val, dS, dVtT, g.sum(axis=0), Zmin
