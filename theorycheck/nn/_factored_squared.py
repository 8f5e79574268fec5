"""The squared loss of the fused route as Gram forms over the factor coefficients: one serial Numba
kernel per step whose work is dense products over (token, context) grids, no loop over loss entries.

Notation of :mod:`theorycheck.nn._factored_kernels`: ``K = U R`` (``U`` (G, r) the context
coefficients, ``R`` (r, V1) the key basis), ``E[a, b] = exp(S[a, b] - m_a)`` on the key columns,
``F_j[a] = sum_b R[j, b] E[a, b] v_b``, ``ER_j[a] = sum_b R[j, b] E[a, b]``, and the targets
factored as ``Y_e = sum_t Theta[g, t] B[a, t]`` (SPEC §11.5). A loss entry ``e`` is a pair
(context ``g``, query token ``a``) with weight ``w_e``; ``Z_e = U[g] . ER[a]``, ``z = U[g] / Z_e``,
``u_e = sum_j z_j F_j[a]`` (SPEC §3.1 with identical keys merged). The squared loss of an entry,
``w ||u + b||^2 - 2 Y.(u + b) + w`` (SPEC §2.2), is a quadratic form in ``z`` whose matrices depend on
the token only:

.. math::
    ||u||^2 = z^T \\Gamma[a] z,\\quad \\Gamma_{jk}[a] = F_j[a] \\cdot F_k[a],\\qquad
    u \\cdot b = z \\cdot (F[a] b),\\qquad
    Y \\cdot u = \\sum_{t, j} \\Theta_{gt} z_j M_{tj}[a],\\quad M_{tj}[a] = B[a, t] \\cdot F_j[a],

so every term over all (context, token) pairs is one product of a per-context coefficient matrix
(``U``, the pair products ``U_j U_k`` over ``j <= k``, ``Theta_t U_j``) with a per-token matrix
(``ER``, ``Gamma``, ``F b``, ``M``, ``B b``): ``N[g, a]`` entries of weight sum ``W[g, a]`` at each
pair (both zero for pairs that are no loss entry). The backward pass is the transpose of the same
products: with ``tt = 2 W (||u||^2 + u.b) - 2 N Y.u`` and ``iz = 1 / Z`` (0 where ``Z <= 0``: no
key, ``u = 0``)

.. math::
    h_j[a] = \\sum_g U_{gj}\\, tt\\, iz,\\quad \\beta_j[a] = \\sum_g U_{gj} W iz,\\quad
    G_{jk}[a] = \\sum_g U_{gj} U_{gk} W iz^2,\\quad \\Pi_{tj}[a] = \\sum_g \\Theta_{gt} U_{gj} N iz,

``H_j[a] = 2 sum_k G_jk F_k + 2 beta_j b - 2 sum_t Pi_tj B[a, t]`` (``dL/dF_j[a]``), and then, as in
the per-token kernel, ``dL/dS[a, b] = E[a, b] sum_j R[j, b] (H_j[a] . v_b - h_j[a])``,
``dL/dv_b = sum_j R[j, b] sum_a E[a, b] H_j[a]``, ``dL/db = 2 (sum W) b + 2 sum_{a,j} beta_j F_j
- 2 sum_{a,t} (sum_g N Theta_gt) B[a, t]``.

Arrays are stored token-last (``FT[j, i, a] = F_j[a]_i``) so the per-token loops run over
contiguous token rows; the products go to BLAS (SciPy's, serial inside the kernel). The kernel is
serial: its result does not depend on any thread count. Per step it costs ``O(V1 nnz(R) d)`` for
``F``, ``H . v`` and ``dL/dv``, ``O(V1 r^2 d)`` for ``Gamma`` and ``H``, and ``O(G V1 r (r + s))`` for
the grid products (``G`` contexts, ``s`` target topics).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["SquaredGrid", "squared_loss_grad"]


@dataclass(frozen=True)
class SquaredGrid:
    """Per-batch constants of :func:`squared_loss_grad` (built once per batch, from the factors).

    ``N``, ``W`` (G, V1): count and weight sum of the loss entries at each (context, token) pair;
    ``present``: ``N > 0``; ``Theta`` (G, s) dense; ``UUw`` / ``UU`` (G, r (r + 1) / 2): the pair
    products ``U_j U_k`` (``j <= k``), with weight 2 off the diagonal (``UUw``, for ``z^T Gamma z``)
    or 1 (``UU``); ``pj``, ``pk``: the pairs; ``TU`` (G, s r): ``Theta_t U_j`` at column ``t r + j``;
    the targets' basis token-last by topic: for topic ``t`` the output coordinates ``x`` where some
    ``B[a, t, x] != 0`` are ``xidx[xptr[t]:xptr[t + 1]]`` and row ``k`` of ``BX`` is ``B[:, t, x_k]``;
    ``sumw``: ``sum W``; ``db_targets`` (V1,): ``-2 sum_{a,t} (sum_g N Theta_gt) B[a, t]``."""

    N: np.ndarray
    W: np.ndarray
    present: np.ndarray
    Theta: np.ndarray
    UUw: np.ndarray
    UU: np.ndarray
    pj: np.ndarray
    pk: np.ndarray
    TU: np.ndarray
    xptr: np.ndarray
    xidx: np.ndarray
    BX: np.ndarray
    sumw: float
    db_targets: np.ndarray

    @classmethod
    def build(cls, U, ctx, qtok, weight, Theta, B) -> SquaredGrid:
        U = np.asarray(U, dtype=np.float64)
        Theta = np.ascontiguousarray(Theta, dtype=np.float64)
        B = np.asarray(B, dtype=np.float64)
        G, r = U.shape
        V1, s = B.shape[0], Theta.shape[1]
        N = np.zeros((G, V1))
        W = np.zeros((G, V1))
        np.add.at(N, (ctx, qtok), 1.0)
        np.add.at(W, (ctx, qtok), np.asarray(weight, dtype=np.float64))
        pj, pk = np.triu_indices(r)
        UU = np.ascontiguousarray(U[:, pj] * U[:, pk])
        UUw = np.ascontiguousarray(UU * np.where(pj == pk, 1.0, 2.0))
        TU = np.ascontiguousarray((Theta[:, :, None] * U[:, None, :]).reshape(G, s * r))
        cols = [np.flatnonzero(np.any(B[:, t, :] != 0.0, axis=0)) for t in range(s)]
        xptr = np.concatenate([[0], np.cumsum([c.size for c in cols])]).astype(np.int64)
        xidx = np.concatenate(cols + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        tk = np.repeat(np.arange(s), np.diff(xptr))
        BX = np.ascontiguousarray(B[:, tk, xidx].T) if xidx.size else np.zeros((0, V1))
        sumt = Theta.T @ N  # (s, V1): sum over the entries of token a of Theta[g, t]
        db_t = np.zeros(V1)
        np.add.at(db_t, xidx, -2.0 * np.einsum("ka,ka->k", BX, sumt[tk]))
        return cls(
            N=N,
            W=W,
            present=N > 0,
            Theta=Theta,
            UUw=UUw,
            UU=UU,
            pj=pj.astype(np.int64),
            pk=pk.astype(np.int64),
            TU=TU,
            xptr=xptr,
            xidx=xidx,
            BX=BX,
            sumw=float(W.sum()),
            db_targets=db_t,
        )


@numba.njit(cache=True, fastmath=False)
def _forward_tables(ST, Vcat, bias, rptr, ridx, rval, support, xptr, xidx, BX, pj, pk):  # pragma: no cover
    """Token-last tables: ``EcT[k, a] = R[j, b_k] E[a, b_k]`` (``k`` a nonzero of ``R``), ``FT``,
    ``ERT``, the packed Gram ``GmT[p, a] = F_pj[a] . F_pk[a]``, ``FbT[j, a] = F_j[a] . b``,
    ``MT[t r + j, a] = B[a, t] . F_j[a]`` and ``BbT[t, a] = B[a, t] . b``."""
    V1 = ST.shape[1]
    d = Vcat.shape[1]
    r = rptr.shape[0] - 1
    s = xptr.shape[0] - 1
    m = np.full(V1, -np.inf)
    for q in range(support.shape[0]):
        row = ST[support[q]]
        for a in range(V1):
            if row[a] > m[a]:
                m[a] = row[a]
    ES = np.empty((support.shape[0], V1))  # exp(S[a, b] - m_a) for the key columns b, once each
    spos = np.full(V1, -1)
    for q in range(support.shape[0]):
        row, out = ST[support[q]], ES[q]
        spos[support[q]] = q
        for a in range(V1):
            out[a] = np.exp(row[a] - m[a])
    nnz = ridx.shape[0]
    EcT = np.empty((nnz, V1))
    for k in range(nnz):
        e, out, v = ES[spos[ridx[k]]], EcT[k], rval[k]
        for a in range(V1):
            out[a] = v * e[a]
    FT = np.empty((r, d, V1))
    ERT = np.zeros((r, V1))
    for j in range(r):
        k0, k1 = rptr[j], rptr[j + 1]
        if k1 > k0:
            FT[j] = np.dot(Vcat[k0:k1].T, EcT[k0:k1])
        else:
            FT[j] = 0.0
        acc = ERT[j]
        for k in range(k0, k1):
            e = EcT[k]
            for a in range(V1):
                acc[a] += e[a]
    npair = pj.shape[0]
    GmT = np.zeros((npair, V1))
    for p in range(npair):
        Fj, Fk, out = FT[pj[p]], FT[pk[p]], GmT[p]
        for i in range(d):
            x, y = Fj[i], Fk[i]
            for a in range(V1):
                out[a] += x[a] * y[a]
    FbT = np.zeros((r, V1))
    for j in range(r):
        out = FbT[j]
        Fj = FT[j]
        for i in range(d):
            bi = bias[i]
            x = Fj[i]
            for a in range(V1):
                out[a] += bi * x[a]
    MT = np.zeros((s * r, V1))
    BbT = np.zeros((s, V1))
    for t in range(s):
        bb = BbT[t]
        for k in range(xptr[t], xptr[t + 1]):
            x, bx = xidx[k], BX[k]
            bi = bias[x]
            for a in range(V1):
                bb[a] += bx[a] * bi
            for j in range(r):
                Fjx, out = FT[j, x], MT[t * r + j]
                for a in range(V1):
                    out[a] += bx[a] * Fjx[a]
    return EcT, FT, ERT, GmT, FbT, MT, BbT


@numba.njit(cache=True, fastmath=False)
def _squared_step(
    ST, Vcat, bias, c, rptr, ridx, rval, support, xptr, xidx, BX, U, UUw, UU, pj, pk, TU, Theta, N, W, present,
    sumw, db_targets, dST, dVtT, db,
):  # fmt: skip  # pragma: no cover - compiled
    """Loss, ``dL/dS^T`` (into ``dST``), ``dL/dv`` (into ``dVtT``), ``dL/db`` (into ``db``); returns
    ``(loss, min Z over the loss entries)`` (see the module docstring)."""
    V1 = ST.shape[1]
    d = Vcat.shape[1]
    r = rptr.shape[0] - 1
    s = Theta.shape[1]
    G = U.shape[0]
    EcT, FT, ERT, GmT, FbT, MT, BbT = _forward_tables(ST, Vcat, bias, rptr, ridx, rval, support, xptr, xidx, BX, pj, pk)
    Z = np.dot(U, ERT)
    uu = np.dot(UUw, GmT)
    ub = np.dot(U, FbT)
    Yu = np.dot(TU, MT)
    Yb = np.dot(Theta, BbT)
    bb = 0.0
    for i in range(d):
        bb += bias[i] * bias[i]
    loss = 0.0
    zmin = np.inf
    Ah = np.empty((G, V1))
    Ab = np.empty((G, V1))
    Ag = np.empty((G, V1))
    Ap = np.empty((G, V1))
    for g in range(G):
        for a in range(V1):
            w, n, z = W[g, a], N[g, a], Z[g, a]
            if present[g, a] and z < zmin:
                zmin = z
            iz = 1.0 / z if z > 0.0 else 0.0
            iz2 = iz * iz
            q_uu, q_ub, q_yu = uu[g, a] * iz2, ub[g, a] * iz, Yu[g, a] * iz
            loss += w * (q_uu + 2.0 * q_ub + bb + 1.0) - 2.0 * n * (q_yu + Yb[g, a])
            Ah[g, a] = (2.0 * w * (q_uu + q_ub) - 2.0 * n * q_yu) * iz
            Ab[g, a] = w * iz
            Ag[g, a] = w * iz2
            Ap[g, a] = n * iz
    hT = np.dot(U.T, Ah)  # (r, V1)
    betaT = np.dot(U.T, Ab)
    GamT = np.dot(UU.T, Ag)  # (pairs, V1)
    PiT = np.dot(TU.T, Ap)  # (s r, V1)
    HT = np.empty((r, d, V1))
    for j in range(r):
        Hj, bj = HT[j], betaT[j]
        for i in range(d):
            bi = 2.0 * bias[i]
            out = Hj[i]
            for a in range(V1):
                out[a] = bi * bj[a]
    G2 = np.empty((r, r, V1))  # 2 G_jk[a], both triangles
    for p in range(pj.shape[0]):
        j, k = pj[p], pk[p]
        for a in range(V1):
            G2[j, k, a] = 2.0 * GamT[p, a]
            G2[k, j, a] = 2.0 * GamT[p, a]
    for j in range(r):
        for i in range(d):
            out = HT[j, i]
            for k in range(r):
                gk, Fk = G2[j, k], FT[k, i]
                for a in range(V1):
                    out[a] += gk[a] * Fk[a]
    for t in range(s):
        for k in range(xptr[t], xptr[t + 1]):
            x, bx = xidx[k], BX[k]
            for j in range(r):
                pv, out = PiT[t * r + j], HT[j, x]
                for a in range(V1):
                    out[a] -= 2.0 * pv[a] * bx[a]
    for i in range(d):
        db[i] = 2.0 * sumw * bias[i] + db_targets[i]
    for j in range(r):
        fb = np.dot(FT[j], betaT[j])
        for i in range(d):
            db[i] += 2.0 * fb[i]
    dST[:, :] = 0.0
    dVtT[:, :] = 0.0
    for j in range(r):
        k0, k1 = rptr[j], rptr[j + 1]
        if k1 == k0:
            continue
        HV = np.dot(Vcat[k0:k1], HT[j])  # (n_j, V1): H_j[a] . v_b
        dV = np.dot(EcT[k0:k1], HT[j].T)  # (n_j, d)
        hj = hT[j]
        for k in range(k0, k1):
            b = ridx[k]
            e, hv, out = EcT[k], HV[k - k0], dST[b]
            for a in range(V1):
                out[a] += c * e[a] * (hv[a] - hj[a])
            dv, outv = dV[k - k0], dVtT[b]
            for i in range(d):
                outv[i] += dv[i]
    return loss, zmin


def squared_loss_grad(S, VtT, bias, c: float, fk, grid: SquaredGrid):
    """Squared loss and gradients of the fused route, ``(loss, dS, dVtT, db, Zmin)`` as
    :func:`theorycheck.nn._factored_kernels.factored_loss_grad` returns them (see the module docstring)."""
    V1, d = VtT.shape
    ST = np.ascontiguousarray(np.asarray(S, dtype=np.float64).T)
    Vcat = np.ascontiguousarray(np.asarray(VtT, dtype=np.float64)[fk.ridx])
    bias = np.ascontiguousarray(bias, dtype=np.float64)
    dST = np.empty((V1, V1))
    dVtT = np.empty((V1, d))
    db = np.empty(d)
    g = grid
    loss, zmin = _squared_step(
        ST, Vcat, bias, float(c), fk.rptr, fk.ridx, fk.rval, fk.support, g.xptr, g.xidx, g.BX,
        fk.U, g.UUw, g.UU, g.pj, g.pk, g.TU, g.Theta, g.N, g.W, g.present, g.sumw, g.db_targets, dST, dVtT, db,
    )  # fmt: skip
    return float(loss), dST.T, dVtT, db, float(zmin)
