"""Numba kernels of the structured squared attention loss (SPEC §4.3), beside their numpy references.

Used by :func:`theorycheck.population.attention_loss` for the squared loss. The context density
of a masked document with topic set ``S`` takes three values (in-document word ``rho``,
out-of-document word ``eta``, [MASK] ``q``), so per query token ``x`` everything reduces to group
sums over the ``T + 1`` token groups ([MASK], topic 1..T):

- ``Q[x, k, l] = e_k(x)^T (W^T W)_{kl} e_l(x)`` with ``E[x, y] = e^{S[x, y] - s_{g(y)}(x)}``
  (``s_k(x)`` the group maximum of the scores): :func:`_group_quad_nb`, about ``V1^3 / 2``
  multiply-adds (``M = W^T W`` is symmetric, so only ``l >= k`` is computed and mirrored), as
  vectorised axpys over blocks of key columns; reference :func:`_group_quad_ref`;
- ``Lin[x, k, t] = sum_{y in G_k} (1_t^T W)_y E[x, y]``: :func:`_group_lin_nb`; reference
  :func:`_group_lin_ref`;
- then per (topic set S, query x) the group weights
  ``c_k = gamma lam_k + delta_k [k in S] + beta_0 [k = 0]`` with ``lam_k = e^{s_k(x) - max_t s_t(x)}``
  and ``gamma, delta_k, beta_0 <= 1`` taken relative to the largest log-weight
  ``mu = max(log rho + max_{t in S} s_t, log eta + max_t s_t, log q + s_0)``, so every exponential
  lies in ``[0, 1]``, the normaliser is ``>= 1`` and scores of any size are safe:
  :func:`_structured_sq_nb`, ``O(V1 tau^2)`` per set. Its reference is the dense path
  ``_dense_sets`` and the plain loop ``_attention_loss_ref`` of
  :mod:`theorycheck.population._attention_loss`.

Kernels never validate: the public wrapper did.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._memory import check_alloc

__all__ = ["structured_sq", "structured_bytes", "STRUCTURED_MAX_ENTRIES", "PARALLEL_THRESHOLD"]

_QTILE = 16  # query tokens sharing one pass over the rows of M (cache reuse)
_JBLOCK = 512  # key columns per block: v rows of M and one row of the tile stay in L1


@numba.njit(cache=True, fastmath=False)
def _group_quad_tile(x0, x1, E, M, T, v, Q, u):
    """``Q[x, k, l] = sum_{i in G_k, j in G_l} E[x, i] M[i, j] E[x, j]`` for query tokens x0..x1-1.

    Upper triangle ``l >= k`` only (``M = W^T W`` is symmetric, so ``Q[x]`` is too: half the
    multiply-adds), mirrored into ``l < k``. Per group ``k``: ``u[x, j] = sum_{i in G_k} E[x, i] M[i, j]``
    for ``j >= min G_k`` by contiguous axpys on 1-d row views (vectorised; :func:`_axpy_rows`: four
    rows of ``M`` per pass over ``u``, two query rows per pass over ``M``, the same bits as one axpy
    per row), blocked over ``j`` so that the ``v`` rows of ``M`` and the rows of ``u`` stay in L1;
    then ``u *= E[x]`` and group sums.
    """
    V1 = E.shape[0]
    nx = x1 - x0
    for k in range(T + 1):
        lo = 0 if k == 0 else 1 + (k - 1) * v
        hi = 1 if k == 0 else lo + v
        n = V1 - lo  # columns lo..V1-1: the groups l >= k
        for xx in range(nx):
            ur = u[xx, :n]
            for j in range(n):
                ur[j] = 0.0
        for j0 in range(0, n, _JBLOCK):
            nb = min(_JBLOCK, n - j0)
            for xx in range(0, nx - 1, 2):  # two query rows share each load of M's rows
                _axpy_rows(u[xx, j0 : j0 + nb], u[xx + 1, j0 : j0 + nb], E[x0 + xx], E[x0 + xx + 1], M, lo, hi, lo + j0)
            if nx % 2:
                xx = nx - 1
                _axpy_rows(u[xx, j0 : j0 + nb], u[xx, :0], E[x0 + xx], E[x0 + xx], M, lo, hi, lo + j0)
        for xx in range(nx):
            _group_quad_finish(x0 + xx, k, lo, u[xx, :n], E, T, v, Q)


@numba.njit(cache=True, fastmath=False)
def _axpy_rows(ua, ub, ea, eb, M, lo, hi, c0):
    """``ua[j] += sum_{i = lo}^{hi - 1} ea[i] M[i, c0 + j]`` (and the same for ``ub``, ``eb`` unless ``ub``
    is empty), added one ``i`` after the other as plain axpys would, four rows of ``M`` per pass
    over ``u`` (register blocking: a quarter of the loads and stores of ``u``; the same bits)."""
    nb = ua.shape[0]
    two = ub.shape[0] > 0
    i = lo
    while i + 4 <= hi:
        m0 = M[i, c0 : c0 + nb]
        m1 = M[i + 1, c0 : c0 + nb]
        m2 = M[i + 2, c0 : c0 + nb]
        m3 = M[i + 3, c0 : c0 + nb]
        a0, a1, a2, a3 = ea[i], ea[i + 1], ea[i + 2], ea[i + 3]
        for j in range(nb):
            ua[j] = (((ua[j] + a0 * m0[j]) + a1 * m1[j]) + a2 * m2[j]) + a3 * m3[j]
        if two:
            b0, b1, b2, b3 = eb[i], eb[i + 1], eb[i + 2], eb[i + 3]
            for j in range(nb):
                ub[j] = (((ub[j] + b0 * m0[j]) + b1 * m1[j]) + b2 * m2[j]) + b3 * m3[j]
        i += 4
    while i < hi:
        mr = M[i, c0 : c0 + nb]
        a = ea[i]
        for j in range(nb):
            ua[j] += a * mr[j]
        if two:
            b = eb[i]
            for j in range(nb):
                ub[j] += b * mr[j]
        i += 1


@numba.njit(cache=True, fastmath=False)
def _group_quad_finish(x, k, lo, ur, E, T, v, Q):
    """``Q[x, k, l] = sum_{j in G_l} ur[j - lo] E[x, j]`` for ``l >= k``, mirrored to ``Q[x, l, k]``."""
    er = E[x, lo:]
    for j in range(ur.shape[0]):
        ur[j] *= er[j]
    qr = Q[x, k]
    if k == 0:
        qr[0] = ur[0]
    off = 1 - lo  # index in ur of token 1 (k = 0), or of the first token of group k (k > 0)
    for t in range(max(k - 1, 0), T):
        base = off + t * v
        acc = 0.0
        for jj in range(v):
            acc += ur[base + jj]
        qr[1 + t] = acc
    for l in range(k + 1, T + 1):
        Q[x, l, k] = qr[l]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _group_quad_nb(E, M, T, v):
    """Group quadratic forms for every query token (parallel over tiles of tokens); V1^3 multiply-adds."""
    V1 = E.shape[0]
    Q = np.empty((V1, T + 1, T + 1))
    n_tiles = (V1 + _QTILE - 1) // _QTILE
    for it in numba.prange(n_tiles):
        x0 = it * _QTILE
        x1 = min(V1, x0 + _QTILE)
        u = np.empty((_QTILE, V1))
        _group_quad_tile(x0, x1, E, M, T, v, Q, u)
    return Q


@numba.njit(cache=True, fastmath=False)
def _group_quad_serial_nb(E, M, T, v):
    """Serial twin of :func:`_group_quad_nb` for small V1."""
    V1 = E.shape[0]
    Q = np.empty((V1, T + 1, T + 1))
    u = np.empty((_QTILE, V1))
    for x0 in range(0, V1, _QTILE):
        _group_quad_tile(x0, min(V1, x0 + _QTILE), E, M, T, v, Q, u)
    return Q


@numba.njit(cache=True, fastmath=False)
def _group_lin_row(x, E, WbT, lam, T, v, Lin, LinL):
    """``Lin[x, k, t] = sum_{y in G_k} Wb[t, y] E[x, y]``, ``LinL[x, t] = sum_k lam[x, k] Lin[x, k, t]``.

    Vectorised over the topic row ``t`` (``WbT = Wb^T``, contiguous): independent accumulators instead
    of a reduction chain per ``(k, t)``; the summation order over ``y`` and ``k`` is unchanged."""
    for k in range(T + 1):
        lo = 0 if k == 0 else 1 + (k - 1) * v
        hi = 1 if k == 0 else lo + v
        lk = Lin[x, k]
        for t in range(T):
            lk[t] = 0.0
        for y in range(lo, hi):
            e = E[x, y]
            wr = WbT[y]
            for t in range(T):
                lk[t] += wr[t] * e
    lr = LinL[x]
    l0 = lam[x, 0]
    r0 = Lin[x, 0]
    for t in range(T):
        lr[t] = l0 * r0[t]
    for k in range(1, T + 1):
        lk = lam[x, k]
        rk = Lin[x, k]
        for t in range(T):
            lr[t] += lk * rk[t]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _group_lin_nb(E, Wb, lam, T, v):
    """Topic-row group sums for every query token (parallel over tokens)."""
    V1 = E.shape[0]
    WbT = np.ascontiguousarray(Wb.T)
    Lin = np.empty((V1, T + 1, T))
    LinL = np.empty((V1, T))
    for x in numba.prange(V1):
        _group_lin_row(x, E, WbT, lam, T, v, Lin, LinL)
    return Lin, LinL


@numba.njit(cache=True, fastmath=False)
def _group_lin_serial_nb(E, Wb, lam, T, v):
    """Serial twin of :func:`_group_lin_nb`."""
    V1 = E.shape[0]
    WbT = np.ascontiguousarray(Wb.T)
    Lin = np.empty((V1, T + 1, T))
    LinL = np.empty((V1, T))
    for x in range(V1):
        _group_lin_row(x, E, WbT, lam, T, v, Lin, LinL)
    return Lin, LinL


def _group_sum(X, T, v):
    """Sum the columns of ``X`` (shape ``(n, V1)``) over the ``T + 1`` token groups: ``(n, T + 1)``."""
    out = np.empty((X.shape[0], T + 1))
    out[:, 0] = X[:, 0]
    out[:, 1:] = X[:, 1:].reshape(X.shape[0], T, v).sum(axis=2)
    return out


def _group_quad_ref(E, M, T, v):
    """Numpy reference of :func:`_group_quad_nb` via per-topic products ``E_k M_{k,:}``."""
    V1 = E.shape[0]
    Q = np.empty((V1, T + 1, T + 1))
    Q[:, 0, :] = _group_sum(E[:, :1] * M[0][None, :] * E, T, v)
    for k in range(T):
        cols = slice(1 + k * v, 1 + (k + 1) * v)
        Q[:, 1 + k, :] = _group_sum((E[:, cols] @ M[cols, :]) * E, T, v)
    return Q


def _group_lin_ref(E, Wb, lam, T, v):
    """Numpy reference of :func:`_group_lin_nb`: ``Lin[x, k, t]`` by group sums of ``E[x] * Wb[t]``."""
    Lin = np.stack([_group_sum(E * Wb[t][None, :], T, v) for t in range(T)], axis=2)
    return Lin, np.einsum("xk,xkt->xt", lam, Lin)


def _score_tables(S, T, v):
    """Score quantities per query token (groups: 0 = [MASK], 1..T = topics).

    ``s[x, k]``: group maxima of ``S[x]``; ``E[x, y] = e^{S[x, y] - s[x, g(y)]}`` (in ``(0, 1]``,
    ``E[:, 0] = 1``); ``lam[x, k] = e^{s[x, k] - max_t s[x, t]}`` on topics (0 on [MASK]);
    ``Ez``: group sums of ``E``; ``lamg``: group maxima relative to the row maximum.
    """
    V1 = S.shape[0]
    Sw = S[:, 1:].reshape(V1, T, v)
    s = np.empty((V1, T + 1))
    s[:, 0] = S[:, 0]
    s[:, 1:] = Sw.max(axis=2)
    smax = s[:, 1:].max(axis=1)
    E = np.empty((V1, V1))
    E[:, 0] = 1.0
    Ew = np.exp(Sw - s[:, 1:, None])  # (V1, T, v), entries in (0, 1]
    E[:, 1:] = Ew.reshape(V1, T * v)
    lam = np.zeros((V1, T + 1))
    lam[:, 1:] = np.exp(s[:, 1:] - smax[:, None])
    Ez = np.empty((V1, T + 1))
    Ez[:, 0] = 1.0
    Ez[:, 1:] = Ew.sum(axis=2)
    gmax = np.maximum(smax, s[:, 0])
    lamg = np.exp(s - gmax[:, None])
    return dict(s=s, smax=smax, E=E, lam=lam, Ez=Ez, lamg=lamg, maxlamw=np.exp(smax - gmax))


def _precompute(S, W, b, T, v):
    """All group tables of :func:`_x_partials_nb` for scores ``S``, value ``W`` and bias ``b``.

    ``M = W^T W`` by one GEMM; the group quadratic forms ``Q`` (``V1^3`` multiply-adds) by a Numba
    kernel that streams rows of ``M`` without materialising the ``T`` products ``E_k M_{k,:}``.
    """
    V1 = S.shape[0]
    sc = _score_tables(S, T, v)
    E, lam = sc.pop("E"), sc["lam"]
    Q = (_group_quad_nb if V1**3 >= PARALLEL_THRESHOLD else _group_quad_serial_nb)(E, W.T @ W, T, v)
    Qlam = np.einsum("xkl,xl->xk", Q, lam)
    Wb = W[1:, :].reshape(T, v, V1).sum(axis=1)  # (T, V1) topic-row sums of W
    # Numba (stacked small GEMMs are slow with threaded BLAS); threads only when the work pays for them
    Lin, LinL = (_group_lin_nb if V1 * V1 * T >= PARALLEL_THRESHOLD else _group_lin_serial_nb)(E, Wb, lam, T, v)
    Dg = _group_sum(W * E, T, v)
    bvec = np.zeros(V1) if b is None else b
    Bl = _group_sum(E * (W.T @ bvec)[None, :], T, v)
    return dict(
        sc,
        Ezl=(sc["Ez"] * lam).sum(1),
        Q=Q,
        Qlam=Qlam,
        qll=np.einsum("xk,xk->x", Qlam, lam),
        Lin=Lin,
        LinL=LinL,
        Dg=Dg,
        Dgl=(Dg * lam).sum(1),
        Bl=Bl,
        Bll=(Bl * lam).sum(1),
        bvec=bvec,
        bsum=bvec[1:].reshape(T, v).sum(axis=1),
        bb=float(bvec @ bvec),
    )


@numba.njit(cache=True, fastmath=False)
def _x_partials_nb(x0, x1, sets, topic, tables, rho, eta, q, v, acc):
    """Add the contributions of query tokens ``x0 .. x1-1`` to ``acc[i] = (l_mask, sum_keep, sum_rand)``
    of every topic set ``sets[i]``. Query tokens are the outer loop so that the group tables of one
    token (``Q[x]``: ``(T+1)^2`` entries) stay in cache across all sets. ``tables``: the tuple of
    :data:`_TABLES` from :func:`_precompute`. Kernels never validate."""
    s, smax, lamg, maxlamw, fast, Ez, Ezl, Q, Qlam, qll, Lin, LinL, Dg, Dgl, Bl, Bll, bvec, bsum, bb = tables
    n, tau = sets.shape
    lrho = math.log(rho) if rho > 0 else -np.inf
    leta = math.log(eta) if eta > 0 else -np.inf
    lq = math.log(q) if q > 0 else -np.inf
    tv = tau * v
    ks = np.empty(tau, np.int64)
    delta = np.empty(tau)
    for x in range(x0, x1):
        tx = topic[x]  # -1 for [MASK]
        for i in range(n):
            inset = False
            pb = 0.0
            for j in range(tau):
                ks[j] = sets[i, j] + 1
                pb += bsum[sets[i, j]]
                if sets[i, j] == tx:
                    inset = True
            pb /= tv
            if fast:  # eta, q > 0: weights relative to the row maximum, no exponentials here
                mx = 0.0
                for j in range(tau):
                    if lamg[x, ks[j]] > mx:
                        mx = lamg[x, ks[j]]
                m = max(rho * mx, max(eta * maxlamw[x], q * lamg[x, 0]))  # >= min(eta, q) > 0
                im = 1.0 / m
                gam = eta * maxlamw[x] * im
                b0 = q * lamg[x, 0] * im
                for j in range(tau):
                    delta[j] = (rho - eta) * lamg[x, ks[j]] * im
            else:
                mx = -np.inf
                for j in range(tau):
                    if s[x, ks[j]] > mx:
                        mx = s[x, ks[j]]
                mu = lrho + mx
                if eta > 0 and leta + smax[x] > mu:
                    mu = leta + smax[x]
                if q > 0 and lq + s[x, 0] > mu:
                    mu = lq + s[x, 0]
                gam = math.exp(leta + smax[x] - mu) if eta > 0 else 0.0
                b0 = math.exp(lq + s[x, 0] - mu) if q > 0 else 0.0
                for j in range(tau):
                    delta[j] = (rho - eta) * math.exp(s[x, ks[j]] - mu)
            z = gam * Ezl[x] + b0 * Ez[x, 0]
            nq = gam * gam * qll[x] + 2.0 * b0 * gam * Qlam[x, 0] + b0 * b0 * Q[x, 0, 0]
            bw = gam * Bll[x] + b0 * Bl[x, 0]
            for j in range(tau):
                kj = ks[j]
                dj = delta[j]
                z += dj * Ez[x, kj]
                bw += dj * Bl[x, kj]
                nq += 2.0 * dj * (gam * Qlam[x, kj] + b0 * Q[x, 0, kj])
                for l in range(tau):
                    nq += dj * delta[l] * Q[x, kj, ks[l]]
            plin = 0.0
            for jj in range(tau):
                tp = sets[i, jj]
                a_ = gam * LinL[x, tp] + b0 * Lin[x, 0, tp]
                for j in range(tau):
                    a_ += delta[j] * Lin[x, ks[j], tp]
                plin += a_
            iz = 1.0 / z
            nx = nq * iz * iz + 2.0 * bw * iz + bb
            po = plin * iz / tv + pb
            if x == 0:
                acc[i, 0] = nx - 2.0 * po + 1.0
            else:
                acc[i, 2] += nx - 2.0 * po
                if inset:
                    dg = gam * Dgl[x] + b0 * Dg[x, 0]
                    for j in range(tau):
                        dg += delta[j] * Dg[x, ks[j]]
                    acc[i, 1] += nx - 2.0 * dg * iz - 2.0 * bvec[x]


@numba.njit(cache=True, parallel=True, fastmath=False)
def _structured_sq_nb(sets, topic, tables, rho, eta, q, p_mask, p_c, p_r, T, v, n_chunks=16):
    """Per-set squared losses; query tokens split into ``n_chunks`` chunks processed in parallel."""
    n, tau = sets.shape
    V1 = topic.shape[0]
    n_chunks = min(V1, n_chunks)
    accs = np.zeros((n_chunks, n, 3))
    for c in numba.prange(n_chunks):
        x0 = (c * V1) // n_chunks
        x1 = ((c + 1) * V1) // n_chunks
        _x_partials_nb(x0, x1, sets, topic, tables, rho, eta, q, v, accs[c])
    acc = np.zeros((n, 3))
    for c in range(n_chunks):  # fixed chunks and order: bit-identical results whatever the thread count
        acc += accs[c]
    tv = tau * v
    return p_mask * acc[:, 0] + p_c * (acc[:, 1] / tv + 1.0) + p_r * (acc[:, 2] / (T * v) + 1.0)


@numba.njit(cache=True, fastmath=False)
def _structured_sq_serial_nb(sets, topic, tables, rho, eta, q, p_mask, p_c, p_r, T, v):
    """Per-set squared losses, one thread (small problems: thread start-up would dominate)."""
    n, tau = sets.shape
    acc = np.zeros((n, 3))
    _x_partials_nb(0, topic.shape[0], sets, topic, tables, rho, eta, q, v, acc)
    tv = tau * v
    return p_mask * acc[:, 0] + p_c * (acc[:, 1] / tv + 1.0) + p_r * (acc[:, 2] / (T * v) + 1.0)


#: Largest ``V1 (T + 1)^2`` for which the structured path materialises its group tables
#: (``Q`` and ``Lin``, 8 bytes per entry each); above it the chunked dense path is used.
STRUCTURED_MAX_ENTRIES = 40_000_000

#: Below this many inner iterations (sets x V1 x (tau^2 + 4 tau)) the serial kernel is used.
PARALLEL_THRESHOLD = 2_000_000


#: The exp-free weights of the per-set kernel divide by ``m >= min(eta, q)``: below this density the
#: log-sum-exp path runs instead (``1 / m`` would overflow for a subnormal ``eta``, e.g. ``p_r ~ 1e-308``).
FAST_MIN_DENSITY = 1e-290

#: The tables of :func:`_precompute`, in the argument order of :func:`_x_partials_nb`.
_TABLES = (
    "s", "smax", "lamg", "maxlamw", "fast", "Ez", "Ezl", "Q", "Qlam", "qll", "Lin", "LinL",
    "Dg", "Dgl", "Bl", "Bll", "bvec", "bsum", "bb",
)  # fmt: skip


def structured_bytes(V1: int, T: int) -> int:
    """Peak extra memory of :func:`structured_sq`: ``E`` and ``W^T W`` (``V1 x V1``), ``Q`` and ``Lin``."""
    return 8 * (2 * V1 * V1 + V1 * (T + 1) * (2 * T + 1))


def structured_sq(S, W, b, sets, topic, context, masking, T, v, *, fast=True, max_bytes=None):
    """Per-set squared losses (shape ``(len(sets),)``) by the structured kernels.

    ``topic``: the topic of every token (``TopicModel.token_topics()``, -1 for [MASK]);
    ``context = (rho, eta, q)``: the context density on in-document words, out-of-document words
    and [MASK]; ``masking = (p_mask, p_c, p_r)``. ``fast`` uses weights relative to the row
    maximum without exponentials in the inner loop (needs ``eta, q > FAST_MIN_DENSITY``).
    """
    V1 = S.shape[0]
    check_alloc(
        "attention_loss (structured squared loss): group tables",
        (structured_bytes(V1, T) // 8,),
        max_bytes=max_bytes,
        alternative="alpha_beta_loss (closed form for the (alpha, beta) family) or a smaller vocabulary",
    )
    rho, eta, q = context
    pc = _precompute(S, W, b, T, v)
    pc["fast"] = bool(fast and eta > FAST_MIN_DENSITY and q > FAST_MIN_DENSITY)
    work = len(sets) * V1 * (sets.shape[1] ** 2 + 4 * sets.shape[1])
    kernel = _structured_sq_nb if work >= PARALLEL_THRESHOLD else _structured_sq_serial_nb
    p_mask, p_c, p_r = masking
    return kernel(sets, topic, tuple(pc[k] for k in _TABLES), rho, eta, q, p_mask, p_c, p_r, T, v)
