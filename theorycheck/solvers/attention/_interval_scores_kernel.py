"""Numba kernel of the score-coordinate interval evaluator (SPEC §7, §11.8): :func:`score_sums`.

The same formulas as the numpy engine of :mod:`._interval_scores` (``_ranges``: the class masses' ranges ``[h_i]``
from their corner values, clipped to ``[0, 1]``, times the class indicators; ``_pair_terms``: the loss
``omega (h^T G h + 1) - E . h``, its gradient ``h_j (r_j - rho)`` and Hessian in ``(s, beta)``, ``h (1 - h)`` with
its exact range), evaluated per (box, pair) in compiled code and summed over the pairs per box; the numpy engine is
the reference the tests compare with. Two shortcuts give the same ranges up to rounding: each ``h_i`` is monotone
in ``s`` and in ``beta`` (the reason its range is the hull of the corner values), so its lower end is taken from the
enclosure at the corner of its least value and its upper end from the one at the corner of its largest
(:func:`_ranges`: two corner evaluations instead of four); and a product with a non-negative factor (a class mass,
an exponential, an indicator, ``2``) takes two end products instead of four (:func:`_mulh`).

**Rounding.** Every ``+ - * /`` is IEEE-754 correctly rounded to nearest (Numba's ``fastmath=False``: no
contraction into FMA, no reassociation). Let ``x = fl(y)`` be the float of one such operation, ``y`` exact and in
the float range. ``x`` is a nearest float of ``y``, so ``pred(x) <= y <= succ(x)``. The gap from ``x`` to either
neighbour is ``<= g(x)``: ``g = 2^-1074`` for ``|x| < 2^-1021``, else ``g = 2^(e-52) <= 2^-52 |x|`` for ``2^e <=
|x| < 2^(e+1)`` (the spacing away from zero; towards zero it is the same or half). The computed ``d = fl(fl(2^-52
|x|) + 2^-1074)`` is ``>= g``: below ``2^-1021`` because ``fl(a + 2^-1074) >= 2^-1074`` for ``a >= 0``; above,
because ``2^-52 |x| >= g``, ``g`` is a float (``e - 52 >= -1073``) and rounding is monotone, so ``fl(2^-52 |x|) >=
g``, and adding ``2^-1074`` rounds to ``>=`` its float operand. Hence ``x - d <= pred(x)`` exactly, and as
``pred(x)`` is a float and rounding is monotone the computed ``fl(x - d) <= pred(x) <= y``: :func:`_dn` is a lower
bound of ``y`` and likewise :func:`_up` (``fl(x + d) >= succ(x) >= y``) an upper bound (``_up`` of the largest
float overflows to ``+inf``). Beyond the float range ``x`` is infinite: an infinite end on its own side stays, a
lower end ``+inf`` becomes ``inf - inf`` = NaN, and a NaN (also ``0 * inf``) becomes ``-inf`` in a lower end and
``+inf`` in an upper end (the whole line: always an enclosure); ``1/x`` of an interval holding 0 is the whole line.
The sums over pairs use the same rule at every addition, pairwise in two levels (tiles of :data:`TILE` pairs, then
the tiles of a block, then the blocks), so the accumulated widening stays near ``(TILE + n_tiles) 2^-52`` relative
instead of ``n_pairs 2^-52``. The ``exp`` enclosures of the box corners are computed outside by
:meth:`._interval_vec.IVec.exp` (as in the numpy engine) and passed in.

**Threads.** The pairs are cut into at most :data:`BLOCKS` blocks of whole tiles, fixed by the number of pairs only;
the blocks run in parallel (``prange``), each with its own partial sums, combined in block order at the end: the
result is the same bit for bit on any number of threads.

Kernels never validate: the caller (:func:`._interval_scores.score_loss`) did.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["score_sums", "pack_coefficients", "N_COEF", "TILE", "BLOCKS", "LOW_CORNER", "HIGH_CORNER"]

#: Intervals per (law, word) pair in the packed layout: ``r`` (6), ``ind`` (3), ``Gb`` (6), ``Eb`` (3), ``omega``.
N_COEF = 19
#: Pairs per tile (the inner level of the pairwise sums).
TILE = 256
#: Largest number of blocks (parallel units with their own partial sums).
BLOCKS = 64

_EPS = 2.0**-52
_ETA = 2.0**-1074
_INF = np.inf


def pack_coefficients(c) -> np.ndarray:
    """The pair coefficients ``c`` (22 :class:`IVec` of shape ``(P,)``, layout of :mod:`._interval_label`) as one
    ``(P, 38)`` array: columns ``2 k``, ``2 k + 1`` the ends of the ``k``-th of ``r, ind, Gb, Eb, omega``."""
    P = c[0].lo.shape[0]
    out = np.empty((P, 2 * N_COEF))
    for k, x in enumerate(c[3:22]):
        out[:, 2 * k] = np.broadcast_to(x.lo, (P,))
        out[:, 2 * k + 1] = np.broadcast_to(x.hi, (P,))
    return out


# ------------------------------------------------------------------ outward-rounded scalar interval operations
@numba.njit(cache=True, fastmath=False)
def _dn(x):
    y = x - (abs(x) * _EPS + _ETA)
    return y if y == y else -_INF


@numba.njit(cache=True, fastmath=False)
def _up(x):
    y = x + (abs(x) * _EPS + _ETA)
    return y if y == y else _INF


@numba.njit(cache=True, fastmath=False)
def _add(al, ah, bl, bh):
    return _dn(al + bl), _up(ah + bh)


@numba.njit(cache=True, fastmath=False)
def _sub(al, ah, bl, bh):
    return _dn(al - bh), _up(ah - bl)


@numba.njit(cache=True, fastmath=False)
def _mul(al, ah, bl, bh):
    a, b, c, d = al * bl, al * bh, ah * bl, ah * bh
    if a != a or b != b or c != c or d != d:
        return -_INF, _INF
    return _dn(min(min(a, b), min(c, d))), _up(max(max(a, b), max(c, d)))


@numba.njit(cache=True, fastmath=False)
def _mulh(al, ah, bl, bh):
    """Product with a non-negative interval ``[al, ah]`` (``al >= 0``): for ``a`` in it and ``b`` in ``[bl, bh]``,
    ``a b >= a bl >= al bl`` when ``bl >= 0`` and ``>= ah bl`` otherwise (the upper end likewise); a NaN end
    (``0 * inf``) becomes infinite in :func:`_dn`, :func:`_up`."""
    return _dn(al * bl if bl >= 0.0 else ah * bl), _up(ah * bh if bh >= 0.0 else al * bh)


@numba.njit(cache=True, fastmath=False)
def _mulr(al, ah, bl, bh):
    """:func:`_mulh` with ``[bl, bh] = [0, 0]`` giving exactly 0 (also for an infinite ``ah``)."""
    if bl == 0.0 and bh == 0.0:
        return 0.0, 0.0
    return _mulh(al, ah, bl, bh)


@numba.njit(cache=True, fastmath=False)
def _mulh2(a, bl, bh):
    """:func:`_mulh` with the non-negative interval as a pair ``a``."""
    return _mulh(a[0], a[1], bl, bh)


@numba.njit(cache=True, fastmath=False)
def _mulp(al, ah, bl, bh):
    """Product of two intervals in ``[0, 1]`` (class masses): the ends multiply."""
    return _dn(al * bl), _up(ah * bh)


@numba.njit(cache=True, fastmath=False)
def _sq(lo, hi):
    l2, h2 = lo * lo, hi * hi
    m = l2 if lo >= 0.0 else (h2 if hi <= 0.0 else 0.0)
    return max(_dn(m), 0.0), _up(max(l2, h2))


@numba.njit(cache=True, fastmath=False)
def _recip(lo, hi):
    if lo > 0.0 or hi < 0.0:
        return _dn(1.0 / hi), _up(1.0 / lo)
    return -_INF, _INF


@numba.njit(cache=True, fastmath=False)
def _omx(lo, hi):
    """``x (1 - x)`` with its exact range for ``x`` in ``[lo, hi]`` within ``[0, 1]``."""
    al, ah = _mulh(lo, lo, *_sub(1.0, 1.0, lo, lo))
    bl, bh = _mulh(hi, hi, *_sub(1.0, 1.0, hi, hi))
    rlo = max(min(al, bl), 0.0)
    rhi = 0.25 if (lo <= 0.5 and hi >= 0.5) else max(ah, bh)
    return rlo, rhi


@numba.njit(cache=True, fastmath=False)
def _neg(lo, hi):
    return -hi, -lo


@numba.njit(cache=True, fastmath=False)
def _acc(s, k, lo, hi):
    s[2 * k] = _dn(s[2 * k] + lo)
    s[2 * k + 1] = _up(s[2 * k + 1] + hi)


# ------------------------------------------------------------------ per (box, pair)
@numba.njit(cache=True, fastmath=False)
def _mass(cf, ex, c, i, ia, ib):
    """``h_i = clip01(1 / (e_a r_(2i) + e_b r_(2i+1) + 1) ind_i)`` at corner ``c`` (``ia``, ``ib``: its exps); a ratio
    ``r = 0`` (an empty class) makes its term 0 even where the exponential is infinite (a box's infinite end)."""
    xl, xh = _mulr(ex[c, ia, 0], ex[c, ia, 1], cf[4 * i], cf[4 * i + 1])
    yl, yh = _mulr(ex[c, ib, 0], ex[c, ib, 1], cf[4 * i + 2], cf[4 * i + 3])
    zl, zh = _add(xl, xh, yl, yh)
    zl, zh = _add(zl, zh, 1.0, 1.0)
    ql, qh = _recip(zl, zh)
    hl, hh = _mulh(cf[12 + 2 * i], cf[13 + 2 * i], ql, qh)
    return min(max(hl, 0.0), 1.0), min(max(hh, 0.0), 1.0)


#: Per class mass ``h_i``: the slots of ``ex`` holding its exponentials at the box corner of its least and of its
#: largest value (:func:`._interval_scores._corner_exps` fills them; at a point, ``nc == 1``, slot 0).
LOW_CORNER = (1, 2, 3)
HIGH_CORNER = (2, 1, 0)


@numba.njit(cache=True, fastmath=False)
def _ranges(cf, ex, nc, h):
    """``h[i] = (lo, hi)`` of the class masses on a box: the lower end of the enclosure at the corner of the least
    value, the upper end of the one at the corner of the largest (a subset of the hull of the four corners' values,
    by the monotonicity in ``s`` and in ``beta``; the same range up to rounding); at a point (``nc == 1``) its one
    corner."""
    for i in range(3):
        if nc == 1:
            h[i, 0], h[i, 1] = _mass(cf, ex, 0, i, 2 * i, 2 * i + 1)
        else:
            h[i, 0] = _mass(cf, ex, LOW_CORNER[i], i, 2 * i, 2 * i + 1)[0]
            h[i, 1] = _mass(cf, ex, HIGH_CORNER[i], i, 2 * i, 2 * i + 1)[1]


@numba.njit(cache=True, fastmath=False)
def _g(cf, a, b):
    """``Gb[a][b]`` (symmetric; packed ``11, 12, 13, 22, 23, 33`` from interval 9)."""
    i, j = (a, b) if a <= b else (b, a)
    k = 9 + (i * (5 - i)) // 2 + j
    return cf[2 * k], cf[2 * k + 1]


@numba.njit(cache=True, fastmath=False)
def _dot3(cf, a, x):
    """``G[a][0] x_0 + G[a][1] x_1 + G[a][2] x_2`` (left to right, as the numpy engine)."""
    sl, sh = _mulh(x[0, 0], x[0, 1], *_g(cf, a, 0))
    tl, th = _mulh(x[1, 0], x[1, 1], *_g(cf, a, 1))
    sl, sh = _add(sl, sh, tl, th)
    tl, th = _mulh(x[2, 0], x[2, 1], *_g(cf, a, 2))
    return _add(sl, sh, tl, th)


@numba.njit(cache=True, fastmath=False)
def _value(cf, h):
    """``omega (h^T G h + 1) - E . h``."""
    ql, qh = _mulh2(_sq(h[0, 0], h[0, 1]), cf[18], cf[19])
    tl, th = _mulh2(_sq(h[1, 0], h[1, 1]), cf[24], cf[25])
    ql, qh = _add(ql, qh, tl, th)
    tl, th = _mulh2(_sq(h[2, 0], h[2, 1]), cf[28], cf[29])
    ql, qh = _add(ql, qh, tl, th)
    cl, ch = _mulh2(_mulp(h[0, 0], h[0, 1], h[1, 0], h[1, 1]), cf[20], cf[21])
    tl, th = _mulh2(_mulp(h[0, 0], h[0, 1], h[2, 0], h[2, 1]), cf[22], cf[23])
    cl, ch = _add(cl, ch, tl, th)
    tl, th = _mulh2(_mulp(h[1, 0], h[1, 1], h[2, 0], h[2, 1]), cf[26], cf[27])
    cl, ch = _add(cl, ch, tl, th)
    cl, ch = _mulh(2.0, 2.0, cl, ch)
    ql, qh = _add(ql, qh, cl, ch)
    ql, qh = _add(ql, qh, 1.0, 1.0)
    vl, vh = _mul(ql, qh, cf[36], cf[37])
    el, eh = _mulh(h[0, 0], h[0, 1], cf[30], cf[31])
    tl, th = _mulh(h[1, 0], h[1, 1], cf[32], cf[33])
    el, eh = _add(el, eh, tl, th)
    tl, th = _mulh(h[2, 0], h[2, 1], cf[34], cf[35])
    el, eh = _add(el, eh, tl, th)
    return _sub(vl, vh, el, eh)


@numba.njit(cache=True, fastmath=False)
def _gradient(cf, h, r, g, second):
    """``r_a = 2 omega (G h)_a - E_a``, ``rho = h . r`` (returned), ``g_j = h_c (r_c - rho)`` for the classes
    ``c = 0, second`` of the two variables (``second = 1``: ``(s, beta)``; 2: ``(alpha, -beta)``, the scores
    ``(alpha, 0, -beta)`` of the same softmax)."""
    o2l, o2h = _mulh(2.0, 2.0, cf[36], cf[37])
    for a in range(3):
        dl, dh = _dot3(cf, a, h)
        dl, dh = _mul(o2l, o2h, dl, dh)
        r[a, 0], r[a, 1] = _sub(dl, dh, cf[30 + 2 * a], cf[31 + 2 * a])
    pl, ph = _mulh(h[0, 0], h[0, 1], r[0, 0], r[0, 1])
    tl, th = _mulh(h[1, 0], h[1, 1], r[1, 0], r[1, 1])
    pl, ph = _add(pl, ph, tl, th)
    tl, th = _mulh(h[2, 0], h[2, 1], r[2, 0], r[2, 1])
    pl, ph = _add(pl, ph, tl, th)
    for j in range(2):
        c = 0 if j == 0 else second
        g[j, 0], g[j, 1] = _mulh(h[c, 0], h[c, 1], *_sub(r[c, 0], r[c, 1], pl, ph))
    return pl, ph, o2l, o2h


@numba.njit(cache=True, fastmath=False)
def _hessian(cf, h, r, g, rho, o2, D, GD, out, second):
    """The Hessian's ``(11, 12, 22)`` entries in the variables of the classes ``0, second`` (:func:`_gradient`) into
    ``out[0:3]`` (the numpy engine's ``_pair_terms``, order 2); ``D_aj = h_a (delta_ac - h_c)``, ``c`` the class of
    variable ``j``."""
    for j in range(2):
        c = 0 if j == 0 else second
        for a in range(3):
            if a == c:
                D[a, j, 0], D[a, j, 1] = _omx(h[a, 0], h[a, 1])
            else:
                D[a, j, 0], D[a, j, 1] = _neg(*_mulp(h[a, 0], h[a, 1], h[c, 0], h[c, 1]))
    for a in range(3):
        for j in range(2):
            sl, sh = _mul(D[0, j, 0], D[0, j, 1], *_g(cf, a, 0))
            tl, th = _mul(D[1, j, 0], D[1, j, 1], *_g(cf, a, 1))
            sl, sh = _add(sl, sh, tl, th)
            tl, th = _mul(D[2, j, 0], D[2, j, 1], *_g(cf, a, 2))
            sl, sh = _add(sl, sh, tl, th)
            GD[a, j, 0], GD[a, j, 1] = _mul(o2[0], o2[1], sl, sh)
    rho2 = _mulh(2.0, 2.0, rho[0], rho[1])
    for m in range(3):
        j, k = (0, 0) if m == 0 else ((0, 1) if m == 1 else (1, 1))
        cj, ck = (0 if j == 0 else second), (0 if k == 0 else second)
        sl, sh = _mul(D[0, j, 0], D[0, j, 1], GD[0, k, 0], GD[0, k, 1])
        tl, th = _mul(D[1, j, 0], D[1, j, 1], GD[1, k, 0], GD[1, k, 1])
        sl, sh = _add(sl, sh, tl, th)
        tl, th = _mul(D[2, j, 0], D[2, j, 1], GD[2, k, 0], GD[2, k, 1])
        sl, sh = _add(sl, sh, tl, th)
        ul, uh = _add(r[cj, 0], r[cj, 1], r[ck, 0], r[ck, 1])
        ul, uh = _sub(ul, uh, *rho2)
        ul, uh = _mulh2(_mulp(h[cj, 0], h[cj, 1], h[ck, 0], h[ck, 1]), ul, uh)
        sl, sh = _sub(sl, sh, ul, uh)
        if j == k:
            sl, sh = _add(sl, sh, g[j, 0], g[j, 1])
        out[m, 0], out[m, 1] = sl, sh


@numba.njit(cache=True, fastmath=False)
def _tile(coef, p0, p1, ex, nc, order, s, second):
    """Interval sums over the pairs ``p0 .. p1 - 1`` into ``s[box, 2 q + (0, 1)]`` (``q``: value, 2 gradient,
    3 Hessian entries; ``s`` zeroed here)."""
    N = ex.shape[0]
    nq = 1 if order == 0 else (3 if order == 1 else 6)
    h = np.empty((3, 2))
    r = np.empty((3, 2))
    g = np.empty((2, 2))
    D = np.empty((3, 2, 2))
    GD = np.empty((3, 2, 2))
    hs = np.empty((3, 2))
    rho = np.empty(2)
    o2 = np.empty(2)
    s[:, :] = 0.0
    for n in range(N):
        sn = s[n]
        exn = ex[n]
        for p in range(p0, p1):
            cf = coef[p]
            _ranges(cf, exn, nc[n], h)
            vl, vh = _value(cf, h)
            _acc(sn, 0, vl, vh)
            if nq == 1:
                continue
            rho[0], rho[1], o2[0], o2[1] = _gradient(cf, h, r, g, second)
            _acc(sn, 1, g[0, 0], g[0, 1])
            _acc(sn, 2, g[1, 0], g[1, 1])
            if nq == 3:
                continue
            _hessian(cf, h, r, g, rho, o2, D, GD, hs, second)
            for m in range(3):
                _acc(sn, 3 + m, hs[m, 0], hs[m, 1])


@numba.njit(cache=True, fastmath=False, parallel=True)
def _score_sums_nb(coef, ex, nc, order, nblk, second):
    P, N = coef.shape[0], ex.shape[0]
    ntile = (P + TILE - 1) // TILE
    part = np.zeros((nblk, N, 12))
    for b in numba.prange(nblk):
        t0, t1 = (b * ntile) // nblk, ((b + 1) * ntile) // nblk
        tile = np.empty((N, 12))
        pb = part[b]
        for t in range(t0, t1):
            _tile(coef, t * TILE, min(P, (t + 1) * TILE), ex, nc, order, tile, second)
            for n in range(N):
                for k in range(12):
                    v = pb[n, k] + tile[n, k]
                    pb[n, k] = _dn(v) if k % 2 == 0 else _up(v)
    out = np.zeros((N, 12))
    for b in range(nblk):
        for n in range(N):
            for k in range(12):
                v = out[n, k] + part[b, n, k]
                out[n, k] = _dn(v) if k % 2 == 0 else _up(v)
    return out


def score_sums(coef: np.ndarray, ex: np.ndarray, nc: np.ndarray, order: int, second: int = 1) -> np.ndarray:
    """Per box the interval sums over the pairs of ``coef`` (:func:`pack_coefficients`) of the value, gradient
    (``order >= 1``) and Hessian (``order == 2``) in ``(s, beta)``: an ``(N, 12)`` array, columns ``2 q``, ``2 q + 1``
    the ends of quantity ``q`` (unused quantities 0). ``ex``: ``(N, 4, 6, 2)`` the corners' exponential
    enclosures (``e^(beta - s), e^-s, e^(s - beta), e^-beta, e^s, e^beta``); ``nc``: ``(N,)`` corners to use (1 for
    a point); ``second``: the class of the second variable (1: derivatives in ``(s, beta)``; 2: in ``(alpha, -beta)``,
    :func:`_gradient`)."""
    P = coef.shape[0]
    nblk = max(1, min(BLOCKS, (P + TILE - 1) // TILE))
    return _score_sums_nb(coef, ex, nc, int(order), nblk, int(second))
