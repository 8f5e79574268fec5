"""Per-``beta`` tables of the co-topic family from pair sums over the keys (SPEC §11.8(a)).

For ``S = alpha I_w + beta G`` (``G`` the co-topic cosine, rank ``<= T``) and a factored ``W = U V^T`` whose right
factor is linear in the key features ``f(y) = (phi_1(y), ..., phi_T(y), 1)`` on words (``V[1:] = F M``; the
stage-1 ``W^V`` of SPEC §11.5 is, since its right factor spans the pure-topic contexts ``m'_t = a phi_t + c``),
every table of :mod:`._attention_tables` is a contraction of the **pair sums**

.. math::  P_x = \\sum_{y \\ne x} e^{\\beta G_{xy}} f(y) f(y)^\\top,\\qquad
           \\partial_\\beta P_x = \\sum_{y \\ne x} G_{xy} e^{\\beta G_{xy}} f(y) f(y)^\\top,

``(T + 1)(T + 2) / 2`` numbers per query: with ``m'_t(y) = f(y) . A[:, t]`` on words,
``K[x, t] = V^T (m'_t e^{beta G[x, :]}) = M^T P_x A[:, t] + m'_t(0) V[0]`` and ``s[x, t] = (P_x A)[T, t] + m'_t(0)``
(the last feature is 1). The pair sums of all queries are one product ``e^{beta G} F2`` (``F2[y] = f(y) f(y)^T``,
upper triangle), computed by BLAS in row blocks of queries (:func:`pair_sums`, threads over blocks), never holding
``e^{beta G}`` whole; the per-query contractions (``O(T^3)`` each) are the Numba kernel :func:`_contract_kernel`
(parallel over queries) beside its numpy reference :func:`contract_reference`. The features are non-negative, so
``P_x`` and the normaliser ``s`` are sums of non-negative terms (no cancellation, whatever the weights).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from .._memory import check_alloc
from .._threads import blas_serial, numba_threads, requested
from ._attention_tables import Static, Tables, ValueOperator

__all__ = ["PairBasis", "PairTables", "build_cost", "pair_basis", "pair_sums", "pair_sums_reference", "pair_tables",
           "contract_reference", "SPAN_TOL", "AMP_MAX", "XB", "LIN_ROWS"]  # fmt: skip

#: Largest relative residual ``||V[1:] - F M||_F / ||V[1:]||_F`` for which ``W``'s right factor counts as linear in
#: the key features (the stage-1 ``W^V``: ~1e-16).
SPAN_TOL = 1e-12
#: Largest amplification ``|| |F| |M| ||_F / ||V[1:]||_F`` of the feature coefficients: beyond it the contraction
#: ``M^T P_x`` could lose more than ``AMP_MAX eps`` of relative accuracy (near-dependent features), and the blocked
#: tables of :mod:`._attention_tables` are used instead.
AMP_MAX = 1e4
#: Query rows per block of the pair-sum product (``e^{beta G}`` of a block: ``rows x n`` floats).
_ROWS = 128


class PairBasis:
    """The ``beta``-independent pieces of the pair-sum route (SPEC §11.8(a)).

    ``u`` ``(n, T)``: unit word columns of ``phi`` (``G = u u^T``); ``F2`` ``(n, q)``: ``f_i(y) f_j(y)`` for
    ``i <= j`` (``q = (T + 1)(T + 2) / 2``); ``A`` ``(T + 1, T)``: context rows on words; ``M`` ``(T + 1, k)``:
    ``V[1:] = F M``; ``mu0`` ``(T,)``: ``m'_t([MASK])``; ``v0``: ``V[0]``; ``residual``, ``amplification``: the
    checks of :func:`pair_basis`.
    """

    def __init__(self, u, F2, A, M, mu0, v0, iu, residual, amplification):
        self.u, self.F2, self.A, self.M, self.mu0, self.v0 = u, F2, A, M, mu0, v0
        self.uT = np.ascontiguousarray(u.T)
        self.iu = iu
        self.residual, self.amplification = residual, amplification
        p = A.shape[0]
        self.unpack = np.zeros((p, p), dtype=np.int64)  # full (i, j) -> packed column
        self.unpack[iu[0], iu[1]] = np.arange(len(iu[0]))
        self.unpack[iu[1], iu[0]] = np.arange(len(iu[0]))


def pair_basis(op: ValueOperator, st: Static, phi, mask_keys: bool, a: float, r: float):
    """The :class:`PairBasis` of a factored ``W`` (``None`` when the right factor is not linear in the key features
    to :data:`SPAN_TOL`, or the coefficients amplify rounding beyond :data:`AMP_MAX`), and the checks as a dict.

    ``a``, ``r``: the masking's ``a`` and ``r`` (SPEC §2.1): ``m'_t(y) = a phi_t(y) + r / n`` on words (``phi_t(y)``
    with ``mask_keys``). ``O(n T^2)``.
    """
    T, n = phi.shape
    info: dict = {"applies": False, "residual": None, "amplification": None}
    if not op.factored:
        info["reason"] = "a dense W^V"
        return None, info
    F = np.empty((n, T + 1))
    F[:, :T] = phi.T
    F[:, T] = 1.0
    Vw = op.V[1:]
    M, *_ = np.linalg.lstsq(F, Vw, rcond=None)
    scale = float(np.linalg.norm(Vw))
    resid = float(np.linalg.norm(Vw - F @ M)) / scale if scale > 0 else 0.0
    amp = float(np.linalg.norm(np.abs(F) @ np.abs(M))) / scale if scale > 0 else 1.0
    info.update(residual=resid, amplification=amp)
    if not (resid <= SPAN_TOL and amp <= AMP_MAX):
        info["reason"] = f"right factor residual {resid:.1e} (<= {SPAN_TOL:g}) or amplification {amp:.1e} " \
                         f"(<= {AMP_MAX:g})"  # fmt: skip
        return None, info
    A = np.zeros((T + 1, T))
    A[np.arange(T), np.arange(T)] = 1.0 if mask_keys else a
    A[T, :] = 0.0 if mask_keys else r / n
    iu = np.triu_indices(T + 1)
    F2 = np.ascontiguousarray(F[:, iu[0]] * F[:, iu[1]])
    norms = np.sqrt(np.einsum("tw,tw->w", phi, phi))
    u = np.ascontiguousarray((phi / norms).T)
    info["applies"] = True
    return PairBasis(u, F2, A, np.ascontiguousarray(M), st.Mp[:, 0].copy(), op.V[0].copy(), iu, resid, amp), info


def build_cost(n: int, T: int, k: int, want_d: bool, rows: int | None = None) -> dict:
    """The cost model of one table build (SPEC §11.8(a)): ``flops`` (the blocks of ``G``, ``beta G``, the pair-sum
    products, of which ``gemm_flops``, and the per-query contractions), ``exps`` (exponentials) and ``bytes`` moved
    through the caches (``F2`` and ``u`` read once per block of ``rows`` queries, the ``G`` and ``E`` blocks written
    and read, the pair sums written), for ``n`` words, ``T`` topics and a rank-``k`` ``W``; ``p = T + 1`` features,
    ``q = p (p + 1) / 2`` pair columns."""
    rows = _ROWS if rows is None else rows
    p = T + 1
    q = p * (p + 1) // 2
    nd = 2 if want_d else 1
    per_query = 2 * p * p * T + 2 * p * k * T + 2 * k * k * T + 6 * k * T  # B, K, KG and c, d, b . N per table
    gemm = 2 * n * n * q * nd
    flops = 2 * n * n * T + n * n + gemm + n * (nd * per_query + 4 * k * T * T)  # G, beta G, the products, contractions
    flops += n * n + n * 6 * k * T * T if want_d else 0  # G o E and the derivative contractions
    blocks = -(-n // rows)
    moved = 8 * (blocks * n * (q + T) + (4 + 2 * (nd - 1)) * n * n + nd * n * q)
    return {"flops": flops, "gemm_flops": gemm, "exps": n * n, "bytes": moved}


# ----------------------------------------------------------------------------- pair sums
def _block(pb: PairBasis, beta, want_d, x0, x1, P, dP, ed, ded):
    """Rows ``x0:x1`` (word indices) of the pair sums: ``E = e^{beta G}`` of the block with the own word set to 0
    (it is carried by ``g``, SPEC §11.8), then ``P = E F2`` and ``dP = (G o E) F2``."""
    G = pb.u[x0:x1] @ pb.uT
    E = np.multiply(G, beta)
    np.exp(E, out=E)
    idx = (np.arange(x1 - x0), np.arange(x0, x1))
    ed[x0:x1] = E[idx]
    ded[x0:x1] = G[idx] * E[idx]
    E[idx] = 0.0
    np.matmul(E, pb.F2, out=P[x0:x1])
    if want_d:
        np.multiply(E, G, out=E)
        np.matmul(E, pb.F2, out=dP[x0:x1])


def _beta_zero(pb: PairBasis, want_d, P, dP, ed, ded):
    """``beta = 0``: every key weighs 1, so ``P_x = sum_{y < x} F2[y] + sum_{y > x} F2[y]`` (cumulative sums from
    both ends: non-negative terms, no cancellation) and ``dP_x = (G F2)[x] - G_xx F2[x]`` with ``G F2 = u (u^T F2)``
    (rank ``T``): ``O(n T q)``, no ``n x n`` product."""
    F2 = pb.F2
    P[0] = 0.0
    np.cumsum(F2[:-1], axis=0, out=P[1:])  # sum over y < x
    suffix = np.zeros_like(F2)
    np.cumsum(F2[:0:-1], axis=0, out=suffix[-2::-1])  # sum over y > x
    P += suffix
    Gdiag = np.einsum("xt,xt->x", pb.u, pb.u)
    ed[:] = 1.0
    ded[:] = Gdiag
    if want_d:
        dP[:] = pb.u @ (pb.uT @ pb.F2) - Gdiag[:, None] * pb.F2


def pair_sums(pb: PairBasis, beta: float, want_d: bool, *, threads: int | None = None):
    """``(P, dP, ed, ded)``: the packed pair sums ``(n, q)`` of every word query and their ``beta``-derivatives
    (``None`` without ``want_d``), ``ed = e^{beta G_xx}``, ``ded = G_xx e^{beta G_xx}``.

    Row blocks of :data:`_ROWS` queries, each ``2 rows n (T + q)`` flops of BLAS (one thread per block) and ``rows n``
    exponentials (numpy's), the blocks on ``threads`` threads (default: the user's ``--threads``, else 1). Each row
    is computed by the same calls whatever the thread count (the same bits).
    """
    n, q = pb.F2.shape
    P = np.empty((n, q))
    dP = np.empty((n, q)) if want_d else None
    ed, ded = np.empty(n), np.empty(n)
    if beta == 0.0:
        _beta_zero(pb, want_d, P, dP, ed, ded)
        return P, dP, ed, ded
    nt = threads if threads is not None else (requested() or 1)
    starts = range(0, n, _ROWS)
    with blas_serial():
        if nt <= 1:
            for x0 in starts:
                _block(pb, beta, want_d, x0, min(n, x0 + _ROWS), P, dP, ed, ded)
        else:
            with ThreadPoolExecutor(nt) as ex:
                list(ex.map(lambda x0: _block(pb, beta, want_d, x0, min(n, x0 + _ROWS), P, dP, ed, ded), starts))
    return P, dP, ed, ded


def pair_sums_reference(pb: PairBasis, beta: float):
    """The pair sums and their derivative by their definition over every (query, key) pair (small models; tests)."""
    G = pb.u @ pb.uT
    E = np.exp(beta * G)
    np.fill_diagonal(E, 0.0)
    return E @ pb.F2, (G * E) @ pb.F2


# ----------------------------------------------------------------------------- contractions
def contract_reference(pb: PairBasis, st: Static, op: ValueOperator, P, dP, bvec):
    """Numpy reference of :func:`_contract_kernel`: ``(c, d, dc, dd, group, quad)`` as in :func:`pair_tables`."""
    n = P.shape[0]
    p = pb.A.shape[0]
    full = P[:, pb.unpack.ravel()].reshape(n, p, p)
    U, V, Gu = op.U, op.V, op.Gu
    Ub, PU = U.T @ bvec, st.Phi @ U  # (k,), (T, k)
    Ux, Vx = U[1:], V[1:]

    def parts(Pf, with_mask):
        B = Pf @ pb.A  # (n, p, T)
        K = np.einsum("ik,xit->xkt", pb.M, B) + (np.outer(pb.v0, pb.mu0)[None] if with_mask else 0.0)
        s = B[:, -1, :] + (pb.mu0[None] if with_mask else 0.0)
        return K, s

    K, s = parts(full, True)
    KG = np.einsum("kl,xlt->xkt", Gu, K)
    quad = [np.einsum("xkt,xks->xts", K, KG), np.einsum("xkt,sk->xts", K, PU)]
    group = [s, np.einsum("k,xkt->xt", Ub, K)]
    c, d = np.einsum("xk,xkt->xt", Vx, KG), np.einsum("xk,xkt->xt", Ux, K)
    if dP is None:
        return c, d, None, None, np.stack(group, axis=1), np.stack(quad, axis=1)
    dK, ds = parts(dP[:, pb.unpack.ravel()].reshape(n, p, p), False)
    dKG = np.einsum("kl,xlt->xkt", Gu, dK)
    dG = np.einsum("xkt,xks->xts", dK, KG)
    quad += [dG + dG.transpose(0, 2, 1), np.einsum("xkt,sk->xts", dK, PU)]
    group += [ds, np.einsum("k,xkt->xt", Ub, dK)]
    dc, dd = np.einsum("xk,xkt->xt", Vx, dKG), np.einsum("xk,xkt->xt", Ux, dK)
    return c, d, dc, dd, np.stack(group, axis=1), np.stack(quad, axis=1)


@numba.njit(cache=True, parallel=True, fastmath=False)
def _contract_kernel(P, dP, want_d, unpack, A, M, mu0, v0, Gu, Ub, PU, Ux, Vx, lin, quad):  # pragma: no cover
    """Per word query ``x`` (blocks of queries in parallel): ``B = P_x A``, ``K = M^T B + v0 mu0^T``,
    ``s = B[T] + mu0``, ``Gamma = K^T Gu K``, ``F = K^T PU^T``, ``b . N = Ub^T K``, ``c = Vx[x]^T Gu K``,
    ``d = Ux[x]^T K`` and, with ``want_d``, the same for ``dP`` (``dGamma = dK^T Gu K + K^T Gu dK``); ``O(T^3)`` per
    query. Written into the query-blocked layout of :class:`PairTables` (rows ``2, 3, 7, 8`` of ``lin`` and
    ``5, 6, 9, 10`` with ``want_d``; ``quad[:, 0:2]`` and ``2:4``)."""
    n = P.shape[0]
    p, T = A.shape
    k = M.shape[1]
    XB = lin.shape[3]
    nd = 2 if want_d else 1
    rows_lin = np.array([[2, 3, 7, 8], [5, 6, 9, 10]])
    for blk in numba.prange(lin.shape[0]):
        Pf = np.empty((p, p))
        B = np.empty((p, T))
        Ks = np.empty((2, k, T))
        KGs = np.empty((2, k, T))
        for xl in range(min(XB, n - blk * XB)):
            x = blk * XB + xl
            for h in range(nd):
                src = P if h == 0 else dP
                for i in range(p):
                    for j in range(p):
                        Pf[i, j] = src[x, unpack[i, j]]
                B[:, :] = 0.0
                for i in range(p):
                    for j in range(p):
                        pij = Pf[i, j]
                        for t in range(T):
                            B[i, t] += pij * A[j, t]
                K = Ks[h]
                K[:, :] = 0.0
                for i in range(p):
                    for kk in range(k):
                        mik = M[i, kk]
                        for t in range(T):
                            K[kk, t] += mik * B[i, t]
                if h == 0:
                    for kk in range(k):
                        for t in range(T):
                            K[kk, t] += v0[kk] * mu0[t]
                KG = KGs[h]
                KG[:, :] = 0.0
                for kk in range(k):
                    for ll in range(k):
                        g = Gu[kk, ll]
                        for t in range(T):
                            KG[kk, t] += g * K[ll, t]
                rc, rd, rs, rb = rows_lin[h, 0], rows_lin[h, 1], rows_lin[h, 2], rows_lin[h, 3]
                for t in range(T):  # c, d, s, b . N
                    bb = 0.0
                    cc = 0.0
                    dd = 0.0
                    for kk in range(k):
                        bb += Ub[kk] * K[kk, t]
                        cc += Vx[x, kk] * KG[kk, t]
                        dd += Ux[x, kk] * K[kk, t]
                    lin[blk, rc, t, xl] = cc
                    lin[blk, rd, t, xl] = dd
                    lin[blk, rs, t, xl] = B[p - 1, t] + (mu0[t] if h == 0 else 0.0)
                    lin[blk, rb, t, xl] = bb
            K, KG = Ks[0], KGs[0]
            for t in range(T):
                for s in range(T):
                    gam = 0.0
                    fq = 0.0
                    for kk in range(k):
                        gam += K[kk, t] * KG[kk, s]
                        fq += K[kk, t] * PU[s, kk]
                    quad[blk, 0, t, s, xl] = gam
                    quad[blk, 1, t, s, xl] = fq
            if want_d:
                dK = Ks[1]
                for t in range(T):
                    for s in range(T):
                        dg = 0.0
                        fq = 0.0
                        for kk in range(k):
                            dg += dK[kk, t] * KG[kk, s] + KG[kk, t] * dK[kk, s]
                            fq += dK[kk, t] * PU[s, kk]
                        quad[blk, 2, t, s, xl] = dg
                        quad[blk, 3, t, s, xl] = fq


#: Word queries per block of :class:`PairTables` (the query index runs fastest: the kernels vectorise over it).
XB = 64
#: Rows of :attr:`PairTables.lin`: the ``word`` rows of :class:`._attention_tables.Tables`, then its ``group`` rows.
LIN_ROWS = ("mp", "ph", "c", "d", "pw", "dc", "dd", "s", "bb", "ds", "dbb")


@dataclass
class PairTables:
    """Tables of the pair-sum route in a query-blocked layout (the query index fastest, blocks of :data:`XB`):
    ``lin`` ``(nb, 11, T, XB)`` (rows :data:`LIN_ROWS`), ``quad`` ``(nb, 2|4, T, T, XB)`` (``Gamma``, ``F`` and, with
    ``has_d``, their ``beta``-derivatives), ``scal`` ``(nb, 6, XB)`` (``e^{beta G_xx}``, its derivative,
    ``||W e_x||^2``, ``W_xx``, ``b . W e_x``, ``b_x``); ``n`` words, the padding queries of the last block have
    ``s = 1`` and every other table 0 (finite, and left out of every sum). ``diag_in = 0``: the own word is carried by
    ``g`` (SPEC §11.8)."""

    lin: np.ndarray
    quad: np.ndarray
    scal: np.ndarray
    n: int
    has_d: bool
    diag_in: float = 0.0
    _word_major: Tables | None = None

    def as_tables(self) -> Tables:
        """The same tables in the word-major layout of :class:`._attention_tables.Tables` (for a dense law; made once
        per object)."""
        if self._word_major is None:
            self._word_major = self._to_word_major()
        return self._word_major

    def _to_word_major(self) -> Tables:
        nb, _, T, xb = self.lin.shape
        n = self.n
        lin = self.lin.transpose(1, 0, 3, 2).reshape(11, nb * xb, T)[:, :n]
        quad = self.quad.transpose(0, 4, 1, 2, 3).reshape(nb * xb, -1, T, T)[:n]
        if not self.has_d:  # the derivative tables are zero-filled placeholders
            quad = np.concatenate([quad, np.zeros_like(quad)], axis=1)
        scal = self.scal.transpose(1, 0, 2).reshape(6, nb * xb)[:, :n]
        word, group = np.ascontiguousarray(lin[:7]), np.ascontiguousarray(lin[7:].transpose(1, 0, 2))
        return Tables(word=word, group=group, quad=np.ascontiguousarray(quad), grp=np.arange(n, dtype=np.int64),
                      scal=np.ascontiguousarray(scal), diag_in=0.0)  # fmt: skip


def _blocked(a, n, nb):
    """Word-major ``(rows, n, T)`` or ``(rows, n)`` -> query-blocked ``(nb, rows, T, XB)`` / ``(nb, rows, XB)``
    (padding 0)."""
    full = np.zeros((a.shape[0], nb * XB) + a.shape[2:])
    full[:, :n] = a
    full = full.reshape((a.shape[0], nb, XB) + a.shape[2:])
    return np.ascontiguousarray(full.transpose(1, 0, 3, 2) if a.ndim == 3 else full.transpose(1, 0, 2))


def contract(pb: PairBasis, st: Static, op: ValueOperator, P, dP, bvec, ed, ded) -> PairTables:
    """The Numba contractions (:func:`_contract_kernel`) into a :class:`PairTables`."""
    n = P.shape[0]
    T = pb.A.shape[1]
    want_d = dP is not None
    nb = (n + XB - 1) // XB
    lin = np.zeros((nb, 11, T, XB))
    lin[:, [0, 1, 4]] = _blocked(np.stack([st.mp, st.ph, st.pw]), n, nb)
    lin[-1, 7, :, n - (nb - 1) * XB :] = 1.0  # padding: s = 1 (Z = 1), every other table 0
    quad = np.zeros((nb, 4 if want_d else 2, T, T, XB))
    scal = _blocked(np.stack([ed, ded, st.w2, st.wxx, st.bw, st.bx]), n, nb)
    U, V = op.U, op.V
    args = (np.ascontiguousarray(op.Gu), np.ascontiguousarray(U.T @ bvec), np.ascontiguousarray(st.Phi @ U),
            np.ascontiguousarray(U[1:]), np.ascontiguousarray(V[1:]))  # fmt: skip
    with numba_threads():
        _contract_kernel(P, P if dP is None else dP, want_d, pb.unpack, pb.A, pb.M, pb.mu0, pb.v0, *args, lin, quad)
    return PairTables(lin=lin, quad=quad, scal=scal, n=n, has_d=want_d)


def pair_tables(pb: PairBasis, st: Static, op: ValueOperator, beta: float, b, want_d: bool, *, reference=False):
    """The tables of ``S = alpha I_w + beta G`` from the pair sums (SPEC §11.8(a)), the own word excluded
    (``diag_in = 0``): a :class:`PairTables` (the ``beta``-derivative tables only with ``want_d``), or with
    ``reference`` the word-major :class:`._attention_tables.Tables` of the numpy pair sums and contractions
    (:func:`pair_sums_reference`, :func:`contract_reference`; small models)."""
    n, q = pb.F2.shape
    T = pb.A.shape[1]
    nd = 2 if want_d else 1
    check_alloc("co-topic pair-sum tables", (n, nd * (q + 2 * T * T + 4 * T) + 3 * T + 16),
                alternative="family='label' (O(V1 T) tables) or a smaller model")  # fmt: skip
    if not reference:
        P, dP, ed, ded = pair_sums(pb, beta, want_d)
        return contract(pb, st, op, P, dP, st.bvec, ed, ded)
    P, dP = pair_sums_reference(pb, beta)
    G = np.einsum("xt,xt->x", pb.u, pb.u)
    ed, ded = np.exp(beta * G), G * np.exp(beta * G)
    c, d, dc, dd, group, quad = contract_reference(pb, st, op, P, dP if want_d else None, st.bvec)
    zero = np.zeros((n, T))
    word = np.stack([st.mp, st.ph, c, d, st.pw, zero if dc is None else dc, zero if dd is None else dd])
    if not want_d:
        group = np.concatenate([group, np.zeros_like(group)], axis=1)
        quad = np.concatenate([quad, np.zeros_like(quad)], axis=1)
    scal = np.stack([ed, ded, st.w2, st.wxx, st.bw, st.bx])
    return Tables(word=word, group=group, quad=quad, grp=np.arange(n, dtype=np.int64), scal=scal, diag_in=0.0)
