"""Exact N -> inf MLM loss of the one-layer one-hot attention model for ANY scores (SPEC §4.3).

Model (one-hot ``W^E = I``, ``W^dec = I``): a query position showing token ``x'`` attends to the
context of its masked document with

.. math::  h(x')_y \\propto m(y)\\, e^{S[x', y]},\\qquad o(x') = W h(x') + b,

where, as N -> inf, the context law is ``m = m_S = a p_S + r u + q e_0`` (theory: every position
is a key) or ``m = p_S`` (``mask_keys=True``, the official code: selected positions are hidden).
The query at a selected position shows the original word ``w ~ p_S`` w.p. ``p_c``, a uniformly
random word w.p. ``p_r`` and [MASK] otherwise; the target is ``w``. Hence, with
``omega_S(x)`` = probability that the query shows ``x`` and ``omega t_S(x)`` = the
corresponding joint law of the target,

.. math::
    L = \\frac{1}{\\binom{T}{\\tau}} \\sum_S \\sum_{x} \\Big[\\omega_S(x) \\|o_S(x)\\|^2
        - 2\\, (\\omega t)_S(x)^T o_S(x) + \\omega_S(x)\\Big],

``omega_S(0) = 1 - p_c - p_r``, ``(omega t)_S(0) = (1 - p_c - p_r) p_S``; for a word x,
``omega_S(x) = p_c p_S(x) + p_r/(T v)`` and ``(omega t)_S(x) = p_c p_S(x) e_x + (p_r/(Tv)) p_S``.

Three implementations, tested against each other:

- ``_structured_sq_nb`` (the default squared loss): the context density takes only three
  values (in-document word ``rho``, out-of-document word ``eta``, [MASK] ``q``), so per query token
  everything reduces to group sums over the ``T + 1`` token groups ([MASK], topic 1..T):
  ``Q[x, k, l] = e_k(x)^T (W^T W)_{kl} e_l(x)`` etc., computed once (``O(V1^3)``: one GEMM for
  ``W^T W`` and a streaming Numba kernel for ``Q``), after which each topic set costs
  ``O(V1 tau^2)`` in a Numba kernel. Per (set S, query x) the group weights are
  ``c_k = gamma lam_k + delta_k [k in S] + beta_0 [k = 0]`` with ``lam_k = e^{s_k(x) - max_t s_t(x)}``,
  ``s_k(x)`` the group maximum of the scores, and ``gamma, delta_k, beta_0 <= 1`` taken relative to
  the largest log-weight ``mu = max(log rho + max_{t in S} s_t, log eta + max_t s_t, log q + s_0)``;
  so every exponential lies in ``[0, 1]``, the normaliser is ``>= 1``, and scores up to 1e4 and
  beyond are safe (log-sum-exp).
- ``_dense_sets``: stacks the attention matrices ``H_S`` of a chunk of topic sets and forms
  ``O = H W^T`` with one large GEMM; it also gives the cross-entropy loss and the exact gradients
  with respect to ``S``, ``W`` and ``b`` (used by :func:`attention_loss_grad`).
- ``_attention_loss_ref``: a plain loop over topic sets, query tokens and targets.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from .._validate import check_array, check_choice, check_int, check_rng
from ..config import Masking, TopicModel, check_models
from ._moments import MAX_ENUMERATED_SETS, topic_sets

__all__ = ["attention_loss", "attention_loss_grad", "SetSampledLoss", "LOSSES"]

LOSSES = ("sq", "ce")
_CHUNK_BYTES = 48 * 2**20


class SetSampledLoss(NamedTuple):
    """Loss averaged over ``n_sets`` uniformly sampled topic sets (exact in every other respect).

    ``mean`` is unbiased for the exact loss, ``stderr`` its standard error
    (sample standard deviation of the per-set losses over ``sqrt(n_sets)``).
    """

    mean: float
    stderr: float
    n_sets: int


# ----------------------------------------------------------------------------- validation
def _validate(S, W, tm, mk, b, mask_keys, n_sets, loss):
    check_models(tm, mk)
    if tm.prior != "uniform-tau":
        raise ValueError("attention_loss needs prior='uniform-tau' (it averages over tau-topic sets)")
    mk.require_masked_positions("attention_loss")
    check_choice("loss", loss, LOSSES)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    S = check_array("S", S, shape=(tm.V1, tm.V1))
    W = check_array("W", W, shape=(tm.V1, tm.V1))
    b = None if b is None else check_array("b", b, shape=(tm.V1,))
    if n_sets is not None:
        n_sets = check_int("n_sets", n_sets, low=2)
    elif tm.n_topic_sets > MAX_ENUMERATED_SETS:
        raise ValueError(
            f"C(T={tm.T}, tau={tm.tau}) = {tm.n_topic_sets} topic sets exceeds {MAX_ENUMERATED_SETS}; "
            "pass n_sets to sample topic sets"
        )
    rho, eta, q = _context(tm, mk, bool(mask_keys))
    if rho <= 0 and q <= 0:  # pragma: no cover - excluded by a + r + q = 1
        raise ValueError("the context is empty")
    return S, W, b, bool(mask_keys), n_sets


def _context(tm, mk, mask_keys):
    """Context densities ``(rho, eta, q)``: in-document word, out-of-document word, [MASK]."""
    T, v, tau = tm.T, tm.v, tm.tau
    if mask_keys:
        return 1.0 / (tau * v), 0.0, 0.0
    return mk.a / (tau * v) + mk.r / (T * v), mk.r / (T * v), mk.q


def _sample_sets(tm, n, rng):
    keys = rng.random((n, tm.T))
    sets = np.argpartition(keys, tm.tau - 1, axis=1)[:, : tm.tau] if tm.tau < tm.T else np.tile(np.arange(tm.T), (n, 1))
    return np.sort(sets, axis=1).astype(np.int64)


def _get_sets(tm, n_sets, rng, seed):
    if n_sets is None:
        if rng is not None or seed is not None:
            raise ValueError("rng/seed are only used with n_sets (sampled topic sets); pass n_sets or drop rng/seed")
        return topic_sets(tm)
    return _sample_sets(tm, n_sets, check_rng(rng, seed))


def _finish(per_set, n_sets):
    if n_sets is None:
        return float(per_set.mean())
    return SetSampledLoss(float(per_set.mean()), float(per_set.std(ddof=1) / math.sqrt(len(per_set))), len(per_set))


# ----------------------------------------------------------------------------- structured kernel
def _log(x):
    return math.log(x) if x > 0 else -math.inf


_QTILE = 16  # query tokens sharing one pass over the rows of M (cache reuse)


@numba.njit(cache=True, fastmath=False)
def _group_quad_tile(x0, x1, E, M, T, v, Q, u):
    """``Q[x, k, l] = sum_{i in G_k, j in G_l} E[x, i] M[i, j] E[x, j]`` for query tokens x0..x1-1."""
    V1 = E.shape[0]
    nx = x1 - x0
    for k in range(T + 1):
        lo = 0 if k == 0 else 1 + (k - 1) * v
        hi = 1 if k == 0 else lo + v
        for xx in range(nx):
            for j in range(V1):
                u[xx, j] = 0.0
        for i in range(lo, hi):  # u[x] = sum_{i in G_k} E[x, i] M[i, :]; row i of M reused nx times
            for xx in range(nx):
                e = E[x0 + xx, i]
                for j in range(V1):
                    u[xx, j] += e * M[i, j]
        for xx in range(nx):
            x = x0 + xx
            Q[x, k, 0] = u[xx, 0] * E[x, 0]
            for t in range(T):
                base = 1 + t * v
                acc = 0.0
                for jj in range(v):
                    acc += u[xx, base + jj] * E[x, base + jj]
                Q[x, k, 1 + t] = acc


@numba.njit(cache=True, parallel=True, fastmath=False)
def _group_quad_nb(E, M, T, v):
    """Group quadratic forms for every query token (parallel over tiles of tokens); O(V1^3) multiply-adds."""
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
def _group_lin_row(x, E, Wb, lam, T, v, Lin, LinL):
    """``Lin[x, k, t] = sum_{y in G_k} Wb[t, y] E[x, y]``, ``LinL[x, t] = sum_k lam[x, k] Lin[x, k, t]``."""
    for t in range(T):
        Lin[x, 0, t] = Wb[t, 0] * E[x, 0]
        accl = lam[x, 0] * Lin[x, 0, t]
        for k in range(T):
            base = 1 + k * v
            acc = 0.0
            for jj in range(v):
                acc += Wb[t, base + jj] * E[x, base + jj]
            Lin[x, 1 + k, t] = acc
            accl += lam[x, 1 + k] * acc
        LinL[x, t] = accl


@numba.njit(cache=True, parallel=True, fastmath=False)
def _group_lin_nb(E, Wb, lam, T, v):
    """Topic-row group sums for every query token (parallel over tokens)."""
    V1 = E.shape[0]
    Lin = np.empty((V1, T + 1, T))
    LinL = np.empty((V1, T))
    for x in numba.prange(V1):
        _group_lin_row(x, E, Wb, lam, T, v, Lin, LinL)
    return Lin, LinL


@numba.njit(cache=True, fastmath=False)
def _group_lin_serial_nb(E, Wb, lam, T, v):
    """Serial twin of :func:`_group_lin_nb`."""
    V1 = E.shape[0]
    Lin = np.empty((V1, T + 1, T))
    LinL = np.empty((V1, T))
    for x in range(V1):
        _group_lin_row(x, E, Wb, lam, T, v, Lin, LinL)
    return Lin, LinL


def _group_quad_ref(E, M, T, v):
    """Numpy reference of :func:`_group_quad_nb` via per-topic products ``E_k M_{k,:}``."""
    V1 = E.shape[0]
    G = T + 1

    def group_sum(X):
        out = np.empty((X.shape[0], G))
        out[:, 0] = X[:, 0]
        out[:, 1:] = X[:, 1:].reshape(X.shape[0], T, v).sum(axis=2)
        return out

    Q = np.empty((V1, G, G))
    Q[:, 0, :] = group_sum(E[:, :1] * M[0][None, :] * E)
    for k in range(T):
        cols = slice(1 + k * v, 1 + (k + 1) * v)
        Q[:, 1 + k, :] = group_sum((E[:, cols] @ M[cols, :]) * E)
    return Q


def _precompute(S, W, b, tm):
    """Group quantities per query token (groups: 0 = [MASK], 1..T = topics).

    ``M = W^T W`` by one GEMM; the group quadratic forms ``Q`` (``V1^3`` multiply-adds) by a Numba
    kernel that streams rows of ``M`` without materialising the ``T`` products ``E_k M_{k,:}``
    (which made a memory-bound, page-faulting numpy version ~15x slower at V1 = 1001).
    """
    V1, T, v = tm.V1, tm.T, tm.v
    G = T + 1
    Sw = S[:, 1:].reshape(V1, T, v)
    s = np.empty((V1, G))
    s[:, 0] = S[:, 0]
    s[:, 1:] = Sw.max(axis=2)
    smax = s[:, 1:].max(axis=1)
    E = np.empty((V1, V1))
    E[:, 0] = 1.0
    Ew = np.exp(Sw - s[:, 1:, None])  # (V1, T, v), entries in (0, 1]
    E[:, 1:] = Ew.reshape(V1, T * v)
    lam = np.zeros((V1, G))
    lam[:, 1:] = np.exp(s[:, 1:] - smax[:, None])
    Ez = np.empty((V1, G))
    Ez[:, 0] = 1.0
    Ez[:, 1:] = Ew.sum(axis=2)

    def group_sum(X):  # (V1, V1) -> (V1, G)
        out = np.empty((X.shape[0], G))
        out[:, 0] = X[:, 0]
        out[:, 1:] = X[:, 1:].reshape(X.shape[0], T, v).sum(axis=2)
        return out

    M = W.T @ W
    Q = (_group_quad_nb if V1**3 >= PARALLEL_THRESHOLD else _group_quad_serial_nb)(E, M, T, v)
    Qlam = np.einsum("xkl,xl->xk", Q, lam)
    qll = np.einsum("xk,xk->x", Qlam, lam)
    # Lin[x, k, t] = sum_{y in G_k} Wb[t, y] E[x, y], Wb = topic-row sums of W
    Wb = W[1:, :].reshape(T, v, V1).sum(axis=1)  # (T, V1)
    # Numba (stacked small GEMMs are slow with threaded BLAS); threads only when the work pays for them
    Lin, LinL = (_group_lin_nb if V1 * V1 * T >= PARALLEL_THRESHOLD else _group_lin_serial_nb)(E, Wb, lam, T, v)
    Dg = group_sum(W * E)
    bvec = np.zeros(V1) if b is None else b
    Bl = group_sum(E * (W.T @ bvec)[None, :])
    bsum = bvec[1:].reshape(T, v).sum(axis=1)
    gmax = np.maximum(smax, s[:, 0])
    lamg = np.exp(s - gmax[:, None])  # group maxima relative to the row maximum, in [0, 1]
    return dict(
        lamg=lamg,
        maxlamw=np.exp(smax - gmax),
        s=s,
        smax=smax,
        lam=lam,
        Ez=Ez,
        Ezl=(Ez * lam).sum(1),
        Q=Q,
        Qlam=Qlam,
        qll=qll,
        Lin=Lin,
        LinL=LinL,
        Dg=Dg,
        Dgl=(Dg * lam).sum(1),
        Bl=Bl,
        Bll=(Bl * lam).sum(1),
        bvec=bvec,
        bsum=bsum,
        bb=float(bvec @ bvec),
    )


@numba.njit(cache=True, fastmath=False)
def _x_partials_nb(
    x0,
    x1,
    sets,
    s,
    smax,
    lamg,
    maxlamw,
    fast,
    Ez,
    Ezl,
    Q,
    Qlam,
    qll,
    Lin,
    LinL,
    Dg,
    Dgl,
    Bl,
    Bll,
    bvec,
    bsum,
    bb,
    rho,
    eta,
    q,
    v,
    acc,
):
    """Add the contributions of query tokens ``x0 .. x1-1`` to ``acc[i] = (l_mask, sum_keep, sum_rand)``
    of every topic set ``sets[i]``. Query tokens are the outer loop so that the group tables of one
    token (``Q[x]``: ``(T+1)^2`` entries) stay in cache across all sets. Kernels never validate."""
    n, tau = sets.shape
    lrho = math.log(rho) if rho > 0 else -np.inf
    leta = math.log(eta) if eta > 0 else -np.inf
    lq = math.log(q) if q > 0 else -np.inf
    tv = tau * v
    ks = np.empty(tau, np.int64)
    delta = np.empty(tau)
    for x in range(x0, x1):
        tx = (x - 1) // v if x > 0 else -1
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
def _structured_sq_nb(
    sets,
    s,
    smax,
    lamg,
    maxlamw,
    fast,
    Ez,
    Ezl,
    Q,
    Qlam,
    qll,
    Lin,
    LinL,
    Dg,
    Dgl,
    Bl,
    Bll,
    bvec,
    bsum,
    bb,
    rho,
    eta,
    q,
    p_mask,
    p_c,
    p_r,
    T,
    v,
    n_chunks=16,
):
    """Per-set squared losses; query tokens split into ``n_chunks`` chunks processed in parallel."""
    n, tau = sets.shape
    V1 = s.shape[0]
    n_chunks = min(V1, n_chunks)
    accs = np.zeros((n_chunks, n, 3))
    for c in numba.prange(n_chunks):
        x0 = (c * V1) // n_chunks
        x1 = ((c + 1) * V1) // n_chunks
        _x_partials_nb(
            x0,
            x1,
            sets,
            s,
            smax,
            lamg,
            maxlamw,
            fast,
            Ez,
            Ezl,
            Q,
            Qlam,
            qll,
            Lin,
            LinL,
            Dg,
            Dgl,
            Bl,
            Bll,
            bvec,
            bsum,
            bb,
            rho,
            eta,
            q,
            v,
            accs[c],
        )
    acc = np.zeros((n, 3))
    for c in range(n_chunks):  # fixed chunks and order: bit-identical results whatever the thread count
        acc += accs[c]
    tv = tau * v
    return p_mask * acc[:, 0] + p_c * (acc[:, 1] / tv + 1.0) + p_r * (acc[:, 2] / (T * v) + 1.0)


@numba.njit(cache=True, fastmath=False)
def _structured_sq_serial_nb(
    sets,
    s,
    smax,
    lamg,
    maxlamw,
    fast,
    Ez,
    Ezl,
    Q,
    Qlam,
    qll,
    Lin,
    LinL,
    Dg,
    Dgl,
    Bl,
    Bll,
    bvec,
    bsum,
    bb,
    rho,
    eta,
    q,
    p_mask,
    p_c,
    p_r,
    T,
    v,
):
    """Per-set squared losses, one thread (small problems: thread start-up would dominate)."""
    n, tau = sets.shape
    acc = np.zeros((n, 3))
    _x_partials_nb(
        0,
        s.shape[0],
        sets,
        s,
        smax,
        lamg,
        maxlamw,
        fast,
        Ez,
        Ezl,
        Q,
        Qlam,
        qll,
        Lin,
        LinL,
        Dg,
        Dgl,
        Bl,
        Bll,
        bvec,
        bsum,
        bb,
        rho,
        eta,
        q,
        v,
        acc,
    )
    tv = tau * v
    return p_mask * acc[:, 0] + p_c * (acc[:, 1] / tv + 1.0) + p_r * (acc[:, 2] / (T * v) + 1.0)


#: Largest ``V1 (T + 1)^2`` for which the structured path materialises its group tables
#: (``Q`` and ``Lin``, 8 bytes per entry each); above it the chunked dense path is used.
STRUCTURED_MAX_ENTRIES = 40_000_000

#: Below this many inner iterations (sets x V1 x (tau^2 + 4 tau)) the serial kernel is used.
PARALLEL_THRESHOLD = 2_000_000


def _structured_sq(S, W, b, sets, tm, mk, mask_keys, fast=True):
    rho, eta, q = _context(tm, mk, mask_keys)
    pc = _precompute(S, W, b, tm)
    fast = bool(fast and eta > 0 and q > 0)
    work = len(sets) * tm.V1 * (tm.tau**2 + 4 * tm.tau)
    kernel = _structured_sq_nb if work >= PARALLEL_THRESHOLD else _structured_sq_serial_nb
    return kernel(
        sets,
        pc["s"],
        pc["smax"],
        pc["lamg"],
        pc["maxlamw"],
        fast,
        pc["Ez"],
        pc["Ezl"],
        pc["Q"],
        pc["Qlam"],
        pc["qll"],
        pc["Lin"],
        pc["LinL"],
        pc["Dg"],
        pc["Dgl"],
        pc["Bl"],
        pc["Bll"],
        pc["bvec"],
        pc["bsum"],
        pc["bb"],
        rho,
        eta,
        q,
        mk.p_mask,
        mk.p_c,
        mk.p_r,
        tm.T,
        tm.v,
    )


# ----------------------------------------------------------------------------- dense batched
#: The dense path holds several ``V1 x V1`` arrays per topic set.
DENSE_MAX_V1 = 6001


def _check_dense(tm, what):
    if tm.V1 > DENSE_MAX_V1:
        raise ValueError(
            f"{what} materialises several V1 x V1 arrays per topic set; V1={tm.V1} exceeds {DENSE_MAX_V1} "
            "(the squared loss without gradients has a structured path for moderate T)"
        )


def _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss="sq", want_grad=False):
    """Per-set losses (and summed gradients) by stacking ``H_S`` for chunks of sets (GEMM-bound).

    Returns ``(per_set (n,), dS, dW, db)`` where the gradients are sums over the given sets
    (``None`` unless ``want_grad``).
    """
    V1, T, v, tau = tm.V1, tm.T, tm.v, tm.tau
    rho, eta, q = _context(tm, mk, mask_keys)
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    bvec = np.zeros(V1) if b is None else b
    n = len(sets)
    per_set = np.empty(n)
    if want_grad:
        dS = np.zeros((V1, V1))
        dW = np.zeros((V1, V1))
        db = np.zeros(V1)
    chunk = max(1, _CHUNK_BYTES // (8 * V1 * V1))
    words = np.arange(1, V1)
    for c0 in range(0, n, chunk):
        st = sets[c0 : c0 + chunk]
        nc = len(st)
        inset = np.zeros((nc, T), bool)
        inset[np.arange(nc)[:, None], st] = True
        inword = np.repeat(inset, v, axis=1)  # (nc, Tv)
        pS = np.zeros((nc, V1))
        pS[:, 1:] = inword / (tau * v)
        with np.errstate(divide="ignore"):
            logm = np.empty((nc, V1))
            logm[:, 0] = _log(q)
            logm[:, 1:] = np.where(inword, _log(rho), _log(eta))
        H = S[None, :, :] + logm[:, None, :]
        H -= H.max(axis=2, keepdims=True)
        np.exp(H, out=H)
        H /= H.sum(axis=2, keepdims=True)
        O = (H.reshape(nc * V1, V1) @ W.T).reshape(nc, V1, V1) + bvec
        omega = np.empty((nc, V1))
        omega[:, 0] = p_mask
        omega[:, 1:] = p_c * pS[:, 1:] + p_r / (T * v)
        OT = np.empty((nc, V1, V1))
        OT[:, 0, :] = p_mask * pS
        OT[:, 1:, :] = (p_r / (T * v)) * pS[:, None, :]
        OT[:, words, words] += p_c * pS[:, 1:]
        if loss == "sq":
            per_set[c0 : c0 + nc] = np.einsum("nx,nxy,nxy->n", omega, O, O) - 2.0 * np.einsum("nxy,nxy->n", OT, O) + 1.0
        else:
            omax = O.max(axis=2, keepdims=True)
            P = np.exp(O - omax)
            ssum = P.sum(axis=2, keepdims=True)
            lse = (np.log(ssum) + omax)[:, :, 0]
            per_set[c0 : c0 + nc] = np.einsum("nx,nx->n", omega, lse) - np.einsum("nxy,nxy->n", OT, O)
        if want_grad:
            if loss == "sq":
                Gr = 2.0 * (omega[:, :, None] * O - OT)
            else:
                Gr = omega[:, :, None] * (P / ssum) - OT
            Hf = H.reshape(nc * V1, V1)
            Gf = Gr.reshape(nc * V1, V1)
            dW += Gf.T @ Hf
            db += Gf.sum(axis=0)
            dH = (Gf @ W).reshape(nc, V1, V1)
            dS += (H * (dH - np.einsum("nxy,nxy->nx", H, dH)[:, :, None])).sum(axis=0)
    if want_grad:
        return per_set, dS, dW, db
    return per_set, None, None, None


# ----------------------------------------------------------------------------- public
def attention_loss(
    S,
    W,
    tm: TopicModel,
    mk: Masking,
    b=None,
    *,
    mask_keys: bool = False,
    n_sets=None,
    rng=None,
    seed=None,
    loss: str = "sq",
):
    """Exact infinite-document MLM loss of the one-layer one-hot attention model (SPEC §4.3).

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Scores; ``S[x, y]`` is the score of key token ``y`` for query token ``x`` (row 0: a
        [MASK] query). Any finite values (log-sum-exp inside).
    W : array_like, shape (V1, V1)
        Value matrix ``W^V`` (decoder ``W^dec = I``).
    tm, mk : TopicModel, Masking
        uniform-tau prior, ``p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    mask_keys : bool
        False (theory): the context is ``m_S = a p_S + r u + q e_0``. True (official code):
        selected positions are hidden as keys, so the context is ``p_S``; queries still show
        kept / random / [MASK] tokens.
    n_sets : int, optional
        Average over ``n_sets`` uniformly sampled topic sets instead of enumerating all
        ``C(T, tau)`` (required when that exceeds 200000).
    rng, seed
        Randomness for ``n_sets`` (only).
    loss : {"sq", "ce"}
        Squared loss ``||o - e_w||^2`` over all V1 outputs, or cross-entropy ``-log softmax(o)_w``.

    Returns
    -------
    float, or :class:`SetSampledLoss` ``(mean, stderr, n_sets)`` when ``n_sets`` is given.

    Notes
    -----
    See the module docstring for the formula. Squared loss: ``O(V1^3)`` dense products once, then
    ``O(V1 tau^2)`` per topic set (Numba); its group tables hold ``V1 (T+1)^2`` entries, and above
    :data:`STRUCTURED_MAX_ENTRIES` the dense path is used instead. Cross-entropy needs every output coordinate:
    ``O(V1^3)`` per topic set (stacked GEMMs).
    """
    S, W, b, mask_keys, n_sets = _validate(S, W, tm, mk, b, mask_keys, n_sets, loss)
    sets = _get_sets(tm, n_sets, rng, seed)
    if loss == "sq" and tm.V1 * (tm.T + 1) ** 2 <= STRUCTURED_MAX_ENTRIES:
        per_set = _structured_sq(S, W, b, sets, tm, mk, mask_keys)
    elif loss == "sq":  # group tables would not fit: memory-bounded dense path (O(V1^3) per set)
        _check_dense(tm, "attention_loss (dense path)")
        per_set = _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss="sq")[0]
    else:
        _check_dense(tm, "attention_loss(loss='ce')")
        per_set = _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss="ce")[0]
    return _finish(per_set, n_sets)


def attention_loss_grad(
    S,
    W,
    tm: TopicModel,
    mk: Masking,
    b=None,
    *,
    mask_keys: bool = False,
    n_sets=None,
    rng=None,
    seed=None,
    loss: str = "sq",
):
    """Loss and exact gradients ``(L, dL/dS, dL/dW, dL/db)`` of :func:`attention_loss`.

    .. math::
        \\partial_{o_S(x)} L = 2(\\omega_S(x) o_S(x) - (\\omega t)_S(x)) \\ \\text{(sq)},\\quad
        \\partial_W L = \\sum G^T H,\\quad \\partial_b L = \\sum G,\\quad
        \\partial_{S[x,:]} L = \\sum_S h \\odot (W^T g - (h^T W^T g) 1),

    averaged over topic sets (stacked GEMMs, ``O(V1^3)`` per set). With ``n_sets`` the returned
    loss is a :class:`SetSampledLoss` and the gradients are the unbiased sample averages.
    ``dL/db`` is returned even when ``b is None`` (then at ``b = 0``).
    """
    S, W, b, mask_keys, n_sets = _validate(S, W, tm, mk, b, mask_keys, n_sets, loss)
    _check_dense(tm, "attention_loss_grad")
    sets = _get_sets(tm, n_sets, rng, seed)
    per_set, dS, dW, db = _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss=loss, want_grad=True)
    n = len(sets)
    return _finish(per_set, n_sets), dS / n, dW / n, db / n


def _attention_loss_ref(S, W, tm: TopicModel, mk: Masking, b=None, *, mask_keys=False, loss="sq", sets=None):
    """Plain numpy reference: loop over topic sets, query tokens x' and targets w.

    ``L = mean_S sum_{x', w} P(x', w | S) ell(W h(x') + b, w)`` with
    ``P(0, w) = p_mask p_S(w)``, ``P(w, w) += p_c p_S(w)``, ``P(x', w) += p_r p_S(w) / (T v)``.
    """
    from ._moments import masked_density, topic_density

    S = np.asarray(S, float)
    W = np.asarray(W, float)
    bvec = np.zeros(tm.V1) if b is None else np.asarray(b, float)
    sets = topic_sets(tm) if sets is None else sets
    n_words = tm.n_words
    vals = []
    for st in sets:
        p = topic_density(tm, st)
        m = p.copy() if mask_keys else masked_density(tm, mk, st)
        with np.errstate(divide="ignore"):
            logits = S + np.log(m)[None, :]
        H = np.exp(logits - logits.max(axis=1, keepdims=True))
        H /= H.sum(axis=1, keepdims=True)
        O = H @ W.T + bvec
        P = np.zeros((tm.V1, tm.V1))  # P[x', w]
        P[0, :] = mk.p_mask * p
        P[1:, :] += mk.p_r * p[None, :] / n_words
        P[np.arange(1, tm.V1), np.arange(1, tm.V1)] += mk.p_c * p[1:]
        tot = 0.0
        for x in range(tm.V1):
            o = O[x]
            for w in np.nonzero(P[x])[0]:
                if loss == "sq":
                    e = np.zeros(tm.V1)
                    e[w] = 1.0
                    ell = np.sum((o - e) ** 2)
                else:
                    mx = o.max()
                    ell = mx + np.log(np.sum(np.exp(o - mx))) - o[w]
                tot += P[x, w] * ell
        vals.append(tot)
    return float(np.mean(vals))
