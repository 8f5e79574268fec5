"""Rigorous enclosure of the co-topic family's structured loss on boxes of (alpha, beta) (SPEC §7, §11.8).

For a general topic model (uniform-tau prior, squared loss, no bias) and ``S = alpha I_w + beta G`` (``G`` the
co-topic cosine of SPEC §11.4, taken as the given float matrix, as :func:`theorycheck.solvers.cotopic_matrix`
computes it: ``G >= 0``, diagonal 1 up to rounding, 0 in the [MASK] row and column) a word query ``x`` of the topic
set ``S`` (``Theta = 1_S``, the law ``theta = Theta / tau``, context masses ``m_y = m_Theta(y) = sum_{t in S}
m'_t(y)``, SPEC §11.5) attends to the key ``y`` with ``a_y = m_y e^{s_xy} / sum_z m_z e^{s_xz}``,
``s_xy = alpha [x = y] + beta G_xy`` ([MASK] key: score 0). Split off the own word: with

.. math::
    R'(\\beta) = \\sum_{y \\ne x} m_y e^{\\beta (G_{xy} - G_{xx} + \\sigma)},\\quad
    R(\\beta) = \\sum_{y \\ne x} m_y e^{\\beta G_{xy}},\\quad P(\\beta) = \\sum_{y \\ne x} m_y e^{\\beta G_{xy}} V^T e_y

the own word's mass is ``h = a_x = 1 / (1 + e^{-v} R'(beta) / m_x)`` (0 when ``m_x = 0``, 1 when no other key has
mass) with ``(v, sigma) = (alpha, 0)`` (``coords="original"``) or ``(alpha + beta, 1)`` (``coords="sum"``, the
certificate's coordinates: :mod:`._interval_general`); the other keys share ``1 - h`` in proportion to
``m_y e^{beta G_xy}``, so with ``W = U V^T`` the output is ``o = W a = U z``, ``z = z-bar + h d``,
``z-bar = P(beta) / R(beta)``, ``d = V^T e_x - z-bar``, and the squared loss of the query (SPEC §11.8 with
``b = 0``: ``omega ||o||^2 - 2 (omega t) . o + omega``) is a quadratic in ``h`` with coefficients in ``beta`` only:

.. math::
    \\ell_x = B_0 + B_1 h + B_2 h^2,\\quad B_0 = \\omega (\\bar z^T U^T U \\bar z + 1) - 2 c_x \\cdot \\bar z,\\quad
    B_1 = 2 (\\omega\\, d^T U^T U \\bar z - c_x \\cdot d),\\quad B_2 = \\omega\\, d^T U^T U d,

``c_x = (p_c p_Theta(x) / tau) U^T e_x + (p_r / (n tau)) U^T p_Theta``, ``omega = p_c p_Theta(x) / tau + p_r / n``
(``p_Theta = sum_{t in S} phi_t``). The [MASK] query attends by the context alone (score-free; shared with
:class:`._interval_label.LabelLoss`). The loss is the average over the ``C(T, tau)`` sets of the sum over queries.

Why this form (tightness): ``h`` is monotone in each variable (``e^{-v}`` decreasing; in ``coords="sum"`` each
exponent ``beta G_xy`` (``G_xx = 1``) increases with ``beta``, in ``"original"`` each ``beta (G_xy - G_xx)`` decreases),
each entering once, so its interval is its exact range up to rounding. ``z-bar`` is a ratio of sums that move
together with ``beta``; its natural extension loses that dependency, so ``z-bar`` and the ``B_i`` are enclosed by
their second-order Taylor form about the box's centre ``c`` (``f(c) + f'(c) d + f''(X) d^2 / 2`` and
``f'(c) + f''(X) d``, ``d = beta - c``; ``f(c)``, ``f'(c)`` point enclosures), intersected with the natural
extension (``z-bar`` also with the hull of the rows of ``V``: it is a convex combination of them). ``R'``, ``R``,
``P`` are linear in ``Theta``: per ``beta`` interval the tables ``sum_{y != x} m'_t(y) e^{...} (1, V^T e_y)`` with
their ``beta``-derivatives (times ``G_xy`` or ``G_xy - G_xx + sigma``) are ``O(n V1 T k)``
(:mod:`._interval_cotopic_tables`: a compiled exponential pass and BLAS products, cached per ``beta`` interval;
``tables="numpy"``: the dense interval reference :meth:`CotopicLoss._tables_reference`), a set adds ``tau`` of them
and the assembly costs ``O(C(T, tau) n k^2)`` per box. Every key carries its own weight, so the ``V1``-sized work is
redone per ``beta`` interval: :func:`check_cotopic_size` bounds the model (SPEC §11.8, cost model).

Rigour: ``phi`` as stored, ``W = U V^T`` as given and ``G`` as given are float numbers taken as exact; the masking
probabilities are ``Fraction(repr(p))``. Elementwise operations round outward (:class:`._interval_vec.IVec`, its
``exp`` enclosure), matrix products and sums use :func:`._interval_label.imatmul` / :func:`._interval_label.isum`
(a priori error bound, Higham §3.1). The derivatives are forward-mode :class:`._interval_vec.T2` objects, so
:func:`._interval_vec.evaluate`, ``box_bounds`` and ``branch_and_bound`` run on :meth:`CotopicLoss.original`.
"""

from __future__ import annotations

import functools
import math
import operator
from fractions import Fraction

import numpy as np

from ._interval_cotopic_tables import TableCache, beta_tables, split_columns
from ._interval_label import SetsLoss, _clip01, _dn, _exact, _intersect, _reshape, _t2_map, _up, imatmul, isum
from ._interval_vec import T2, IVec, ivec_exact

__all__ = ["CotopicLoss", "check_cotopic_size", "COTOPIC_MAX_V1", "COTOPIC_MAX_PAIRS"]

#: Largest vocabulary (with [MASK]) and largest number of (topic set, word) pairs of the co-topic certificate: each
#: box costs ``O(n V1 T k)`` for its tables (:mod:`._interval_cotopic_tables`, ``V1^2`` exponentials and BLAS products)
#: and ``O(C(T, tau) n k^2)`` interval operations for the pairs; ``G`` is held as a dense ``V1 x V1`` float matrix.
COTOPIC_MAX_V1 = 5_000
COTOPIC_MAX_PAIRS = 250_000
#: Interval elements per block: boxes x words x table columns, boxes x sets x words x k (assembly).
_TABLE_BLOCK = 400_000
_PAIR_BLOCK = 120_000
#: Bytes of the cached tables (:class:`._interval_cotopic_tables.TableCache`).
CACHE_BYTES = 256e6


def check_cotopic_size(g) -> None:
    """Refuse (``ValueError``), before any work, a model too big for the co-topic certificate."""
    pairs = math.comb(g.T, g.tau) * g.n_words
    if g.V1 > COTOPIC_MAX_V1 or pairs > COTOPIC_MAX_PAIRS:
        raise ValueError(
            f"options.certify='interval' with the co-topic family needs V1 <= {COTOPIC_MAX_V1} and "
            f"C(T, tau) * n <= {COTOPIC_MAX_PAIRS}, got V1={g.V1}, C(T, tau) * n={pairs} (every key has its own "
            "weight e^(beta G_xy), so each box costs O(n V1 T k) for its tables (V1^2 exponentials, G held dense) and "
            "O(C(T, tau) n k^2) interval operations for the (topic set, word) pairs, hundreds to thousands of boxes "
            "per certificate)"
        )


def _beta_t2(parts, order):
    """A function of ``beta`` only as the evaluator's object: ``parts = (f, f', f'')`` (order 0: ``f``)."""
    if order == 0:
        return parts[0]
    return T2(parts[0], [None, parts[1]], [None, None, parts[2]] if order >= 2 else None)


class CotopicLoss(SetsLoss):
    """The co-topic family's exact squared loss on arrays of boxes of ``(alpha, beta)``, rigorous (module docstring).

    ``CotopicLoss(g, mk, U, V, mask_keys)``: a general topic model (uniform-tau prior, within
    :func:`check_cotopic_size`), the masking, ``W^V = U V^T`` (factors ``(V1, k)``; a dense ``W`` is ``(W, I)``);
    ``tables``: ``"compiled"`` or ``"numpy"`` (the reference; :meth:`_tables`).
    :meth:`original` is the evaluator of :func:`._interval_vec.evaluate`.
    """

    def __init__(self, g, mk, U, V, mask_keys=False, G=None, coords="sum", tables="compiled"):
        if tables not in ("compiled", "numpy"):
            raise ValueError(f"tables must be 'compiled' or 'numpy', got {tables!r}")
        check_cotopic_size(g)
        V1, T = g.V1, g.T
        n, k = V1 - 1, U.shape[1]
        e, Phi, Mp, Gu, K0, PU, GK0 = self._common(g, mk, U, V, mask_keys, "co-topic family")
        if G is None:
            P = g.phi.T @ g.phi
            d = np.sqrt(np.diag(P))
            G = np.zeros((V1, V1))
            G[1:, 1:] = P / np.outer(d, d)
        self.Gf = np.ascontiguousarray(np.asarray(G, float)[1:])  # (n, V1): word rows (the [MASK] column is 0)
        diag = self.Gf[np.arange(n), np.arange(1, V1)]  # G_xx (1 up to the float rounding of the cosine)
        #: the own word's exponent relative to the other keys': ``alpha + beta (G_xx - G_xy)`` (``coords="original"``)
        #: or ``u - beta (1 - G_xx + G_xy)`` with ``u = alpha + beta`` (``coords="sum"``)
        self.coords = coords
        #: ``(a0, a1)``: the ``alpha`` range of the certificate's box (``coords="sum"``; :meth:`original`)
        self.alpha_range: tuple[float, float] | None = None
        self.shift = 1.0 if coords == "sum" else 0.0
        #: ``delta_x = sigma - G_xx``: ``R' = e^{beta delta_x} R`` (:mod:`._interval_cotopic_tables`)
        self.delta = _exact(np.full(n, self.shift)) - _exact(diag)
        self.MpT = IVec(Mp.lo.T, Mp.hi.T)  # (V1, T)
        X = _exact(V[:, :, None]) * IVec(Mp.lo.T[:, None, :], Mp.hi.T[:, None, :])  # (V1, k, T) outward
        self.X = _reshape(X, (V1, k * T))
        #: ``"compiled"`` (:mod:`._interval_cotopic_tables`, cached per ``beta`` interval) or ``"numpy"`` (the
        #: reference: :meth:`_tables_reference`)
        self.tables = tables
        B = IVec(np.hstack([self.MpT.lo, self.X.lo]), np.hstack([self.MpT.hi, self.X.hi]))  # (V1, T (1 + k))
        self._split = split_columns(B)
        entry = 3 * n * T * (k + 1) * 16  # bytes of one cached beta interval at order 2
        self.cache = TableCache(lambda b0, b1, o: beta_tables(self.Gf, B, b0, b1, o, split=self._split),
                                max(4, min(64, int(CACHE_BYTES // entry))))  # fmt: skip
        shift = (self.delta.lo, self.delta.hi)
        self.cache_p = TableCache(lambda b0, b1, o: beta_tables(self.Gf, self.MpT, b0, b1, o, shift=shift))
        self.k, self.n, self.T = k, n, T
        self.Vw = _exact(V[1:])  # (n, k): V^T e_x
        self.Uw = _exact(U[1:])
        self.vhull = (V.min(axis=0), V.max(axis=0))  # z-bar is a convex combination of the rows of V
        self.Gu = Gu
        self.UpT = IVec(PU.lo.T, PU.hi.T)  # (k, T): U^T phi_t
        self._const = self._mask_term()

    # ------------------------------------------------------------------ per set chunk (box-free)
    def _set_coeffs(self, S):
        """``(m_x, ind_own, ind_other, omega, c_x)`` of the sets ``S`` and every word: ``(nS, 1, n)`` and
        ``(nS, 1, n, k)``."""
        mx = self._tsum(self.mp, S)  # (nS, n)
        px = self._tsum(self.ph, S)
        UpS = self._tsum(self.UpT, S)  # (nS, k)
        anyS = np.zeros((len(S), self.nz.shape[1]), bool)
        for j in range(S.shape[1]):
            anyS |= self.nz[S[:, j]]
        own = anyS[:, 1:]  # (nS, n): the query's own word has mass
        other = (anyS.sum(axis=1)[:, None] - own) > 0  # some other key has mass
        pcx = self.p_c * px * self.tau_inv
        om = pcx + self.p_r_n
        c = IVec(pcx.lo[:, :, None], pcx.hi[:, :, None]) * IVec(self.Uw.lo[None], self.Uw.hi[None])
        c = c + IVec(UpS.lo[:, None, :], UpS.hi[:, None, :]) * (self.p_r_n * self.tau_inv)
        mx = IVec(np.where(own, np.maximum(mx.lo, 0.0), 1.0), np.where(own, mx.hi, 1.0))  # 1: unused (h = 0)

        def ax(a, *shape):
            return _reshape(a, shape) if isinstance(a, IVec) else a.reshape(shape)

        nS, n, k = len(S), self.n, self.k
        return (ax(mx, nS, 1, n), own.reshape(nS, 1, n), other.reshape(nS, 1, n), ax(om, nS, 1, n),
                ax(c, nS, 1, n, k))  # fmt: skip

    def _zbar(self, R, P, other):
        """``[z-bar, z-bar', z-bar'']`` (``beta``-derivatives) from the set sums of ``R`` and ``P`` (lists ``[f, f',
        f'']``): ``z = P/R``, ``z' = (P' - z R')/R``, ``z'' = (P'' - 2 z' R' - z R'')/R``; ``z`` intersected with
        the hull of the rows of ``V`` (a convex combination of them)."""
        col = [IVec(x.lo[..., None], x.hi[..., None]) for x in R]
        zero = ~other[..., None]
        iR = IVec(np.where(zero, 1.0, col[0].lo), np.where(zero, 1.0, col[0].hi)).recip()
        z = _intersect(P[0] * iR, *self.vhull)
        out = [z]
        if len(P) > 1:
            z1 = (P[1] - z * col[1]) * iR
            out.append(z1)
            if len(P) > 2:
                out.append((P[2] - z1 * col[1] * 2 - z * col[2]) * iR)
        return [IVec(np.where(zero, 0.0, x.lo), np.where(zero, 0.0, x.hi)) for x in out]

    def _coeffs(self, zs, om, c):
        """The query's loss as a quadratic in the own word's mass ``h``, ``ell = B_0 + B_1 h + B_2 h^2``, from
        ``z = z-bar + h d``, ``d = V^T e_x - z-bar``: ``B_0 = omega (z-bar^T U^T U z-bar + 1) - 2 c_x . z-bar``,
        ``B_1 = 2 (omega d^T U^T U z-bar - c_x . d)``, ``B_2 = omega d^T U^T U d``; each ``[f, f', f'']``
        in ``beta``."""
        nd = len(zs)  # 1 + the derivatives carried (a point of order 0, a box's centre, a box)
        zb = zs[0] if nd == 1 else T2(zs[0], [None, zs[1]], [None, None, zs[2]] if nd > 2 else None)
        d = zb * -1 + IVec(self.Vw.lo[None, None], self.Vw.hi[None, None])

        def gu(x):  # U^T U x along the last axis (U^T U symmetric)
            return _t2_map(x, lambda a: imatmul(a, self.Gu))

        gz, full = gu(zb), zs[0].lo.shape

        def dot(x, y):
            return _t2_map(x * y, lambda a: isum(IVec(np.broadcast_to(a.lo, full), np.broadcast_to(a.hi, full)), -1))

        b0 = (dot(zb, gz) + 1) * om - dot(zb, c) * 2
        b1 = (dot(d, gz) * om - dot(d, c)) * 2
        b2 = dot(d, gu(d)) * om
        return [[b] if nd == 1 else [b.v, b.g[1]] if nd == 2 else [b.v, b.g[1], b.h[2]] for b in (b0, b1, b2)]

    # ------------------------------------------------------------------ per box block (set-free)
    def _tables(self, blo, bhi, order, order_p=None):
        """``beta``-tables of a block of boxes: ``R' (Nb, n, T)`` (up to ``order_p``, default ``order``; none for
        ``-1``), ``R (Nb, n, T)``, ``P (Nb, n, k, T)``, each a list ``[f, f', f'']`` (up to ``order``); by
        :mod:`._interval_cotopic_tables` (``R' = e^{beta delta_x} R``) or :meth:`_tables_reference`."""
        if self.tables == "numpy":
            return self._tables_reference(blo, bhi, order, order_p)
        Nb, n, k, T = len(blo), self.n, self.k, self.T
        order_p = order if order_p is None else order_p
        got = [self.cache.get(b0, b1, order) for b0, b1 in zip(blo, bhi)]
        lo, hi = (np.stack([x[j][: order + 1] for x in got], axis=1) for j in (0, 1))  # (order + 1, Nb, n, cols)
        R = [IVec(lo[o, ..., :T], hi[o, ..., :T]) for o in range(order + 1)]
        P = [IVec(lo[o, ..., T:].reshape(Nb, n, k, T), hi[o, ..., T:].reshape(Nb, n, k, T)) for o in range(order + 1)]
        if order_p < 0:
            return [], R, P
        if self.coords == "original":  # delta_x = -G_xx: its own pass (the product below would lose the dependency)
            got = [self.cache_p.get(b0, b1, order_p) for b0, b1 in zip(blo, bhi)]
            lo, hi = (np.stack([x[j][: order_p + 1] for x in got], axis=1) for j in (0, 1))
            return [IVec(lo[o], hi[o]) for o in range(order_p + 1)], R, P
        d = IVec(self.delta.lo[None, :, None], self.delta.hi[None, :, None])
        c = (IVec(blo[:, None, None], bhi[:, None, None]) * d).exp()  # e^{beta delta_x}, |delta_x| ~ 1e-16
        Rp = [c * R[0]]
        if order_p >= 1:
            Rp.append(c * (d * R[0] + R[1]))
        if order_p >= 2:
            Rp.append(c * (d.sq() * R[0] + d * R[1] * 2 + R[2]))
        return Rp, R, P

    def _tables_reference(self, blo, bhi, order, order_p=None):
        """The numpy reference of :meth:`_tables` (dense ``(Nb, n, V1)`` interval arrays, :func:`.imatmul`)."""
        Nb, n, V1 = len(blo), self.n, self.n + 1
        order_p = order if order_p is None else order_p
        beta = IVec(blo[:, None, None], bhi[:, None, None])
        keys = np.ones((n, V1))
        keys[np.arange(n), np.arange(1, V1)] = 0.0  # the keys y != x
        off = _exact(keys[None])
        Gw = _exact(self.Gf)
        Gm1 = Gw + IVec(self.delta.lo[:, None], self.delta.hi[:, None])  # G_xy - G_xx + sigma
        Es = [(beta * Gw).exp() * off]  # (Nb, n, V1): e^{beta G_xy}, 0 on the own key
        for _ in range(order):
            Es.append(Es[-1] * Gw)
        Eps = [(beta * Gm1).exp() * off] if order_p >= 0 else []  # e^{beta (G_xy - G_xx + sigma)}
        for _ in range(order_p):
            Eps.append(Eps[-1] * Gm1)
        Rp = [imatmul(x, self.MpT) for x in Eps]
        R = [imatmul(x, self.MpT) for x in Es]
        P = [_reshape(imatmul(x, self.X), (Nb, self.n, self.k, self.T)) for x in Es]
        return Rp, R, P

    def original(self, xs):
        """Loss on boxes of ``(alpha, beta)`` (``coords="original"``) or ``(alpha + beta, beta)`` (``"sum"``): an
        :class:`IVec` ``(N,)`` or a :class:`T2` (module docstring). With :attr:`alpha_range` set (``"sum"``), a box
        of positive width holding no point with ``alpha`` in that range gets the value ``+inf`` (derivatives 0):
        the branch and bound discards it (the loss is not needed there; points keep their value, which the
        second-order form at a box's expansion point relies on)."""
        t = xs[0]
        order = 0 if isinstance(t, IVec) else (2 if t.h is not None else 1)
        A, B = (x.v if isinstance(x, T2) else x for x in xs)
        N = A.lo.shape[0]
        out = np.zeros(N, bool)
        if self.alpha_range is not None:
            with np.errstate(all="ignore"):
                a_lo, a_hi = _dn(A.lo - B.hi), _up(A.hi - B.lo)
            out = ((A.hi > A.lo) | (B.hi > B.lo)) & ((a_hi < self.alpha_range[0]) | (a_lo > self.alpha_range[1]))
        keep = np.flatnonzero(~out)
        width = self.X.lo.shape[1] if self.tables == "compiled" else max(self.X.lo.shape[1], self.n + 1)
        step = max(1, _TABLE_BLOCK // (self.n * width))
        parts = [self._block(A.lo[i], A.hi[i], B.lo[i], B.hi[i], order)
                 for i in (keep[j : j + step] for j in range(0, len(keep), step))]  # fmt: skip
        return _scatter(parts, keep, N, order)

    def _block(self, alo, ahi, blo, bhi, order):
        Nb, n, k = len(alo), self.n, self.k
        wide = bool(np.any(bhi > blo))
        # z-bar's second derivative on a box: for its Taylor form (wide boxes) or the Hessian (order 2)
        Rp, R, P = self._tables(blo, bhi, 2 if (wide or order == 2) else order, order)
        if wide:  # the Taylor forms about the centres (below)
            bc = 0.5 * blo + 0.5 * bhi
            _, Rc, Pc = self._tables(bc, bc, 1, -1)
            delta = IVec(_dn(blo - bc), _up(bhi - bc))
            delta = IVec(delta.lo[None, :, None, None], delta.hi[None, :, None, None])
        a = IVec(alo[None, :, None], ahi[None, :, None])
        alpha = a if order == 0 else T2.variable(a, 0, 2, order)
        ema = (-alpha).exp()  # (1, Nb, 1)
        nS = max(1, _PAIR_BLOCK // max(1, Nb * n * k))
        total = None
        for i0 in range(0, self.n_laws, nS):
            S = self.sets[i0 : i0 + nS]
            mx, own, other, om, c = self._set_coeffs(S)
            rp = _beta_t2([self._tsum(x, S) for x in Rp], order)  # (nS, Nb, n)
            h = (ema * rp / mx + 1).recip()
            ind_own, ind_oth = _exact(own.astype(float)), _exact(other.astype(float))
            h = _clip01(h * ind_own * ind_oth + (1 - ind_oth))  # no other key: h = 1; no own mass: h = 0
            bs = self._coeffs(self._zbar([self._tsum(x, S) for x in R], [self._tsum(x, S) for x in P], other), om, c)
            if wide:
                zc = self._zbar([self._tsum(x, S) for x in Rc[:2]], [self._tsum(x, S) for x in Pc[:2]], other)
                dd = IVec(delta.lo[..., 0], delta.hi[..., 0])
                bs = [_taylor(b, bc_, dd) for b, bc_ in zip(bs, self._coeffs(zc, om, c))]
            b0, b1, b2 = (_beta_t2(b, order) for b in bs)
            ell = b0 + h * (b1 + h * b2)  # (nS, Nb, n)
            s = _t2_map(ell, functools.partial(_pair_sum, full=(len(S), Nb, n)))
            total = s if total is None else total + s
        return (total + self._const) * ivec_exact(Fraction(1, self.n_laws))


def _total(terms):
    """The sum of an iterable of :class:`T2` / :class:`IVec` (outward at each addition)."""
    return functools.reduce(operator.add, terms)


def _pair_sum(x: IVec, full) -> IVec:
    """The sum over the sets and words of a ``(nS, Nb, n)`` array (broadcast first): ``(Nb,)``."""
    return isum(IVec(np.broadcast_to(x.lo, full), np.broadcast_to(x.hi, full)), (0, 2))


def _taylor(zs, zc, d):
    """``[f, f', f'']`` on a box intersected with the Taylor forms ``f(c) + f'(c) d + f''(X) d^2/2`` and
    ``f'(c) + f''(X) d`` about its centre ``c`` (``d = x - c``): first-order tight (second order for ``f``)."""
    f, f1, f2 = zs
    f1 = _intersect(f1, *_ends(zc[1] + f2 * d))
    f = _intersect(f, *_ends(zc[0] + zc[1] * d + f2 * d.sq() * 0.5))
    return [f, f1, f2]


def _ends(x: IVec):
    return x.lo, x.hi


def _scatter(parts, keep, N, order):
    """The box blocks' results placed at the boxes ``keep`` of ``N``; the others: value ``+inf``, derivatives 0."""

    def cat(xs, fill):
        lo, hi = np.full(N, fill), np.full(N, fill)
        if len(keep):
            lo[keep] = np.concatenate([np.broadcast_to(x.lo, x.lo.shape[-1:]) for x in xs])
            hi[keep] = np.concatenate([np.broadcast_to(x.hi, x.hi.shape[-1:]) for x in xs])
        return IVec(lo, hi)

    if order == 0:
        return cat(parts, np.inf)
    g = [cat([p.g[i] for p in parts], 0.0) for i in range(2)]
    h = None if order < 2 else [cat([p.h[i] for p in parts], 0.0) for i in range(3)]
    return T2(cat([p.v for p in parts], np.inf), g, h)
