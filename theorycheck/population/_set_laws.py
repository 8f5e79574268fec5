"""The squared loss of a score family over topic-set laws from per-query tables, with its ``alpha``-derivatives to
second order (SPEC §11.8(a)).

For a uniform-tau law ``theta = 1_S / tau`` every ``theta``-contraction of the tables of
:class:`._attention_tables.Tables` is a sum over the ``tau`` members of ``S`` (linear tables) or the ``tau^2`` pairs
(quadratic tables), so a (query, set) pair costs ``O(tau^2)`` table reads instead of the ``O(T^2)`` of a dense law.
``alpha`` enters only through the own word's weight ``g = e^alpha e^{beta B_xx} m_theta(x)`` (blocked and pair-sum
tables; ``(e^alpha - 1) ...`` for the label tables), so one pass over the pairs evaluates several ``alpha`` at the
same tables (a grid column) and, with ``ell = omega A / Z^2 + H / Z + const`` (``Z = Z0 + g``,
``A = A0 + 2 c g + w2 g^2``, ``H = H0 + H1 g``), the derivatives in ``g``

.. math::
    \\ell_g = \\omega (A'/Z^2 - 2A/Z^3) + H_1/Z - H/Z^2,\\qquad
    \\ell_{gg} = \\omega (2 w_2/Z^2 - 4A'/Z^3 + 6A/Z^4) - 2H_1/Z^2 + 2H/Z^3,

give ``dl/dalpha = g_a l_g`` and ``d2l/dalpha2 = g_a l_g + g_a^2 l_gg`` with ``g_a = e^alpha e^{beta B_xx}
m_theta(x)``, evaluated through ``A/Z^2``, ``H/Z``, ``A'/Z`` and ``g_a/Z``, which stay O(1) where ``Z`` is as small
as ``e^-300`` (so that a one-dimensional Newton search over ``alpha`` needs no new tables). The ``beta``-derivative
is the chain rule of :func:`theorycheck.population._attention_structured._sq_kernel`.

:func:`set_laws` runs the Numba kernel (parallel over blocks of queries, a fixed block size: the same bits on any
thread count); :func:`set_laws_reference` is the numpy reference over dense ``theta``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._threads import numba_threads

__all__ = ["set_laws", "set_laws_reference", "sets_of", "pass_cost"]

#: Query blocks per chunk of the kernel (one chunk's per-law partial sums per thread, added in chunk order).
_BLOCKS = 8


def pass_cost(n: int, T: int, n_sets: int, tau: int, n_alpha: int, want_beta: bool) -> dict:
    """The cost model of one pass of :func:`set_laws` (SPEC §11.8(a)): ``pairs`` (query, set), ``flops`` (the member
    sums of the set's last member, as in a lexicographic enumeration where the prefix sums carry over, plus 96 flops
    per ``alpha`` and 84 more for ``dL/dbeta``: the kernel's arithmetic per query, products of loop constants left
    out), ``bytes`` read from memory (the tables once) and ``cache_bytes`` (the table rows the member sums read, from
    the block resident in L2)."""
    n_lin, n_q = (11, 4) if want_beta else (7, 2)
    reads = n_lin + n_q * (2 * tau - 1)  # rows read per (query, set): the last member's
    pairs = n * n_sets
    flops = pairs * (reads + n_alpha * (96 + (84 if want_beta else 0)))
    return {"pairs": pairs, "flops": flops, "bytes": 8 * n * (11 * T + n_q * T * T + 6),
            "cache_bytes": 8 * pairs * reads}  # fmt: skip


def sets_of(theta, tau: int):
    """``(n, tau)`` member indices of uniform-tau laws ``theta = 1_S / tau`` (rows of ``theta``), or ``None`` when
    some row is not of that form."""
    nz = theta > 0.0
    if not np.all(nz.sum(axis=1) == tau) or not np.all(theta[nz] == 1.0 / tau):
        return None
    return np.ascontiguousarray(np.nonzero(nz)[1].reshape(len(theta), tau), dtype=np.int64)


def _consts(tb, alphas, mk, n):
    ea_g = np.array([math.exp(a) if tb.diag_in == 0.0 else math.expm1(a) for a in alphas])
    ea_d = np.exp(np.asarray(alphas, dtype=float))
    return ea_g, ea_d, np.array([mk.p_c, mk.p_r / n])


def _mask_term(theta, st, mk):
    """The [MASK] query's loss per law (score-free): ``p_mask (||W m + b||^2 - 2 p . (W m + b) + 1)``."""
    TT = np.einsum("it,is->its", theta, theta)
    pb = theta @ st.pb
    mask = np.einsum("its,ts->i", TT, st.Gm0) + 2.0 * (theta @ st.bm0) + st.bn2
    mask -= 2.0 * (np.einsum("its,ts->i", TT, st.Fm0) + pb)
    return mk.p_mask * (mask + 1.0), pb


def set_laws(sets, theta, pt, st, mk, alphas, want_beta: bool):
    """Per-law loss and derivatives over topic sets: ``out[a, j, i]`` for ``alphas[a]``, ``j`` = value,
    ``dL/dalpha``, ``d2L/dalpha2``, ``dL/dbeta`` (0 without ``want_beta``), law ``i`` (rows of ``sets``).

    ``pt``: :class:`._cotopic_pairs.PairTables` (with the ``beta``-derivative tables when ``want_beta``); ``st``: the
    :class:`._attention_tables.Static` of the same ``W``; ``theta``: the laws as rows (for the [MASK] term).
    """
    n = pt.n
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    ea_g, ea_d, consts = _consts(pt, alphas, mk, n)
    mask, pb = _mask_term(theta, st, mk)
    nb = pt.lin.shape[0]
    n_chunks = (nb + _BLOCKS - 1) // _BLOCKS
    part = np.zeros((n_chunks, len(alphas), 4, len(sets)))
    with numba_threads():
        _set_kernel(sets, pt.lin, pt.quad, pt.scal, n, ea_g, ea_d, consts, pb, st.bn2, bool(want_beta), part)
    out = np.zeros((len(alphas), 4, len(sets)))
    for c in range(n_chunks):  # chunk order: the same bits on any thread count
        out += part[c]
    out[:, 0, :] += mask[None, :]
    return out


@numba.njit(cache=True, parallel=True, fastmath=False)
def _set_kernel(sets, lin, quad, scal, n, ea_g, ea_d, consts, pb, bn2, want_b, part):  # pragma: no cover
    """``part[c, a, :, i]``: the sum over the word queries of chunk ``c`` (``_BLOCKS`` query blocks) of ``ell_x``
    and its derivatives for law ``i`` at ``alpha_a`` (module docstring). The innermost loops run over the queries of
    a block (contiguous: vectorised); the sums over them are separate loops in a fixed order."""
    n_sets, tau = sets.shape
    nb, _, T, xb = lin.shape
    n_a = ea_g.shape[0]
    p_c, prn = consts[0], consts[1]
    th = 1.0 / tau
    th2 = th * th
    n_lin = 11 if want_b else 7
    n_q = 4 if want_b else 2
    lin_rows = np.array([0, 1, 2, 3, 4, 7, 8, 5, 6, 9, 10])  # value rows first
    for c in numba.prange(part.shape[0]):
        accd = np.zeros((tau, 11, xb))  # prefix sums: members 0..d of the current set
        qd = np.zeros((tau, 4, xb))
        tmp = np.empty(xb)
        res = np.empty((4, xb))
        prev = np.empty(tau, dtype=np.int64)
        for blk in range(c * _BLOCKS, min(nb, (c + 1) * _BLOCKS)):
            nv = min(xb, n - blk * xb)
            ed, ded, w2 = scal[blk, 0], scal[blk, 1], scal[blk, 2]
            wxx, bw, bx = scal[blk, 3], scal[blk, 4], scal[blk, 5]
            prev[:] = -1
            for i in range(n_sets):
                d0 = 0  # the members shared with the previous set keep their prefix sums
                while d0 < tau and sets[i, d0] == prev[d0]:
                    d0 += 1
                for d in range(d0, tau):
                    t = sets[i, d]
                    prev[d] = t
                    for jj in range(n_lin):
                        j = lin_rows[jj]
                        if d == 0:
                            for x in range(xb):
                                accd[0, j, x] = lin[blk, j, t, x]
                        else:
                            for x in range(xb):
                                accd[d, j, x] = accd[d - 1, j, x] + lin[blk, j, t, x]
                    for j in range(n_q):  # theta^T Q theta gains Q[t, t] + sum_{e < d} (Q[e, t] + Q[t, e])
                        for x in range(xb):
                            tmp[x] = quad[blk, j, t, t, x]
                        for e in range(d):
                            te = sets[i, e]
                            for x in range(xb):
                                tmp[x] += quad[blk, j, te, t, x] + quad[blk, j, t, te, x]
                        if d == 0:
                            for x in range(xb):
                                qd[0, j, x] = tmp[x]
                        else:
                            for x in range(xb):
                                qd[d, j, x] = qd[d - 1, j, x] + tmp[x]
                    if d + 1 < tau:
                        prev[d + 1] = -1
                acc = accd[tau - 1]
                q = qd[tau - 1]
                for ia in range(n_a):
                    eg, ex = ea_g[ia], ea_d[ia]
                    for x in range(xb):
                        mx = acc[0, x] * th
                        px = acc[1, x] * th
                        thc = acc[2, x] * th
                        thd = acc[3, x] * th
                        thpw = acc[4, x] * th
                        ths = acc[7, x] * th
                        thbb = acc[8, x] * th
                        qG = q[0, x] * th2
                        qF = q[1, x] * th2
                        om = p_c * px + prn
                        H1 = 2.0 * om * bw[x] - 2.0 * p_c * px * wxx[x] - 2.0 * prn * thpw
                        g = eg * ed[x] * mx
                        ga = ex * ed[x] * mx
                        Z = ths + g
                        A = qG + 2.0 * g * thc + g * g * w2[x]
                        Bq = thbb + g * bw[x]
                        D = thd + g * wxx[x]
                        F = qF + g * thpw
                        iz = 1.0 / Z
                        H = 2.0 * om * Bq - 2.0 * p_c * px * D - 2.0 * prn * F
                        a2 = (A * iz) * iz  # A / Z^2, H / Z, A' / Z and g_a / Z are O(1) (Z may be ~e^-300)
                        h1 = H * iz
                        ap1 = (2.0 * thc + 2.0 * g * w2[x]) * iz
                        ra = ga * iz
                        val = om * (a2 + 2.0 * Bq * iz + bn2) - 2.0 * p_c * px * (D * iz + bx[x])
                        res[0, x] = val + om - 2.0 * prn * (F * iz + pb[i])
                        dla = om * (ra * ap1 - 2.0 * ra * a2) + ra * H1 - ra * h1  # g_a l_g
                        ra2 = ra * ra
                        dlaa = (
                            om * (2.0 * w2[x] * ra2 - 4.0 * ra2 * ap1 + 6.0 * ra2 * a2)
                            - 2.0 * ra2 * H1
                            + 2.0 * ra2 * h1
                        )
                        res[1, x] = dla
                        res[2, x] = dla + dlaa
                    if want_b:
                        for x in range(xb):
                            mx = acc[0, x] * th
                            px = acc[1, x] * th
                            thc = acc[2, x] * th
                            thd = acc[3, x] * th
                            thpw = acc[4, x] * th
                            om = p_c * px + prn
                            g = eg * ed[x] * mx
                            Z = acc[7, x] * th + g
                            A = q[0, x] * th2 + 2.0 * g * thc + g * g * w2[x]
                            Bq = acc[8, x] * th + g * bw[x]
                            D = thd + g * wxx[x]
                            F = q[1, x] * th2 + g * thpw
                            iz = 1.0 / Z
                            H = 2.0 * om * Bq - 2.0 * p_c * px * D - 2.0 * prn * F
                            lZ = -2.0 * om * A * iz * iz * iz - H * iz * iz
                            gb = eg * ded[x] * mx
                            dZ = acc[9, x] * th + gb
                            dA = q[2, x] * th2 + 2.0 * gb * thc + 2.0 * g * acc[5, x] * th + 2.0 * g * gb * w2[x]
                            dB = acc[10, x] * th + gb * bw[x]
                            dD = acc[6, x] * th + gb * wxx[x]
                            dF = q[3, x] * th2 + gb * thpw
                            lA, lB, lD, lF = om * iz * iz, 2.0 * om * iz, -2.0 * p_c * px * iz, -2.0 * prn * iz
                            res[3, x] = lZ * dZ + lA * dA + lB * dB + lD * dD + lF * dF
                    for j in range(4 if want_b else 3):
                        sv = 0.0
                        for x in range(nv):
                            sv += res[j, x]
                        part[c, ia, j, i] += sv


def set_laws_reference(theta, tb, st, mk, alphas, want_beta: bool):
    """Numpy reference of :func:`set_laws` over dense laws ``theta`` (any rows; small models), from word-major
    :class:`._attention_tables.Tables` (e.g. :meth:`._cotopic_pairs.PairTables.as_tables`)."""
    n = tb.word.shape[1]
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    ea_g, ea_d, (p_c, prn) = _consts(tb, alphas, mk, n)
    mask, pb = _mask_term(theta, st, mk)
    Dw = np.einsum("it,jxt->jix", theta, tb.word)
    grp = tb.grp
    Dg = np.einsum("it,xjt->jix", theta, tb.group[grp])
    Dq = np.einsum("it,xjts,is->jix", theta, tb.quad[grp], theta)
    mx, px, thc, thd, thpw = Dw[:5]
    ed, ded, w2, wxx, bw, bx = tb.scal
    om = p_c * px + prn
    H1 = 2.0 * om * bw - 2.0 * p_c * px * wxx - 2.0 * prn * thpw
    out = np.zeros((len(alphas), 4, len(theta)))
    for ia in range(len(alphas)):
        g, ga = ea_g[ia] * ed * mx, ea_d[ia] * ed * mx
        Z = Dg[0] + g
        A = Dq[0] + 2.0 * g * thc + g * g * w2
        Bq, D, F = Dg[1] + g * bw, thd + g * wxx, Dq[1] + g * thpw
        H = 2.0 * om * Bq - 2.0 * p_c * px * D - 2.0 * prn * F
        val = om * (A / Z / Z + 2.0 * Bq / Z + st.bn2) - 2.0 * p_c * px * (D / Z + bx)
        val += om - 2.0 * prn * (F / Z + pb[:, None])
        a2, h1, ap1, ra = A / Z / Z, H / Z, (2.0 * thc + 2.0 * g * w2) / Z, ga / Z
        dla = om * (ra * ap1 - 2.0 * ra * a2) + ra * H1 - ra * h1
        dlaa = om * ra**2 * (2.0 * w2 - 4.0 * ap1 + 6.0 * a2) - 2.0 * ra**2 * H1 + 2.0 * ra**2 * h1
        out[ia, 0] = val.sum(axis=1) + mask
        out[ia, 1] = dla.sum(axis=1)
        out[ia, 2] = (dla + dlaa).sum(axis=1)
        if want_beta:
            lZ = -2.0 * om * A / Z / Z / Z - H / Z / Z
            gb = ea_g[ia] * ded * mx
            dZ, dB = Dg[2] + gb, Dg[3] + gb * bw
            dA = Dq[2] + 2.0 * gb * thc + 2.0 * g * Dw[5] + 2.0 * g * gb * w2
            dD, dF = Dw[6] + gb * wxx, Dq[3] + gb * thpw
            out[ia, 3] = (lZ * dZ + om / Z / Z * dA + 2.0 * om / Z * dB - 2.0 * p_c * px / Z * dD
                          - 2.0 * prn / Z * dF).sum(axis=1)  # fmt: skip
    return out
