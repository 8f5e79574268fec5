"""Rigorous enclosure of the label family's structured loss on boxes of (alpha, beta) (SPEC §7, §11.8).

For a general topic model (uniform-tau prior, squared loss, no bias) and ``S = alpha I_w + beta Z`` (``Z`` the
same-label indicator of the SPEC §11.6 labels) a word query ``x`` of label ``l`` gives its keys three weights:
its own word ``e^{alpha + beta}``, the other words of ``l`` ``e^beta``, all other keys (other labels, [MASK]) 1.
With the key classes' masses ``m_1 = m_Theta(x)``, ``m_2 = M_l - m_1``, ``m_3 = M - M_l`` and their output
numerators ``e_1 = m_1 W e_x``, ``e_2 = W r_{Theta l} - e_1``, ``e_3 = W m'_Theta - W r_{Theta l}`` (SPEC §11.8;
``Theta = 1_S``, the law ``theta = Theta / tau``) the loss of the query depends on the scores only through the
weight vector ``w = (w_1, w_2, w_3)``, through the classes' attention masses ``h_i = w_i m_i / (m . w)``
(``h`` on the simplex), and is a quadratic in ``h``:

.. math::
    \\ell_x = \\omega \\big(h^T \\bar G h + 1\\big) - \\bar E \\cdot h,\\quad
    \\bar G_{ij} = \\frac{e_i \\cdot e_j}{m_i m_j},\\quad \\bar E_i = \\frac{2}{\\tau m_i}\\big(p_c p_\\Theta(x)\\,
    e_x \\cdot e_i + \\tfrac{p_r}{n}\\, p_\\Theta \\cdot e_i\\big),\\quad \\omega = \\frac{p_c p_\\Theta(x)}{\\tau}
    + \\frac{p_r}{n}

(the squared loss of SPEC §11.8 with ``b = 0``; a class of zero mass has ``h_i = 0``; the [MASK] query's term does
not depend on the scores). So the coefficients of every (law, word) pair are computed once, rigorously, and a box
costs ``O(C(T, tau) V1)`` interval operations, never a ``V1 x V1`` array:

- **coefficients**: from the float inputs (``phi`` as stored, ``W = U V^T`` as given, the masking
  probabilities ``Fraction(repr(p))``) by outward-rounded interval arithmetic: elementwise operations as in
  :class:`._interval_vec.IVec`, matrix products and sums in midpoint-radius form with the a priori bound
  ``|fl(sum a_i b_i) - sum a_i b_i| <= gamma_n sum |a_i b_i|`` (``gamma_n = n u / (1 - n u)``, any summation
  order, FMA included; Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), widened to
  ``2 (n + 4) u`` and by ``(n + 4) 2^-1021`` for underflow (:func:`imatmul`, :func:`isum`);
- **masses** ``h``: on a box of ``(alpha, beta)``: ``h_1 = 1/(1 + r_12 e^-alpha + r_13 e^-(alpha+beta))`` etc.
  (``r_ij = m_j / m_i``; each variable enters once per exponential, with a fixed direction: tight), with the
  numpy engine's ``exp`` enclosure (:mod:`._interval_vec`); on the compact chart ``(u, w) in [0, 1]^2``:
  ``w = (u, (1 - u) w, (1 - u)(1 - w))`` (only ``+ - * /``), the image of ``(alpha, beta) in R^2`` being the open
  square (``e^beta = w/(1 - w)``, ``e^alpha = u/((1 - u) w)``); each ``h_i`` is monotone in ``u`` and in ``w``, so
  its range on a box is the hull of its corner values. Every ``h_i`` is intersected with ``[0, 1]``, so the
  enclosures are finite even where the chart is singular: with every class non-empty the loss is continuous on
  the closed square (``m . w >= min m > 0``) and ``inf`` over ``R^2`` is its ``min`` there; a label of a single
  word empties its class, and the corner ``(u, w) = (0, 1)`` (``alpha -> -inf``, ``beta -> +inf`` along each line
  ``alpha + beta = s``) is then a discontinuity: the enclosures stay valid but do not shrink there.

The branch and bound is that of :mod:`._interval_vec` (natural, mean-value and second-order forms on arrays of
boxes; :func:`._interval_vec.branch_and_bound`) with this loss as its evaluator.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from ..._memory import check_alloc
from .._rational import rational_masking
from ._interval_vec import T2, IVec, ivec_exact

__all__ = ["LabelLoss", "imatmul", "isum"]

_U = 2.0**-53
_TINY = 2.0**-1021
_INF = np.inf
#: Interval elements per evaluation block (boxes x (law, word) pairs), and (law, word) pairs per coefficient chunk.
_BLOCK = 60_000
_PAIRS = 200_000
#: Largest number of cached coefficients (13 intervals per (law, word) pair).
_CACHE_PAIRS = 2_000_000


def _dn(x):
    return np.nextafter(x, -_INF)


def _up(x):
    return np.nextafter(x, _INF)


def _exact(x) -> IVec:
    return IVec(np.asarray(x, dtype=float))


def _midrad(a: IVec):
    with np.errstate(all="ignore"):
        m = 0.5 * a.lo + 0.5 * a.hi
        r = _up(np.maximum(_up(a.hi - m), _up(m - a.lo)))
    return np.where(np.isfinite(m), m, 0.0), np.where(np.isfinite(m), r, _INF)


def _widen(c, rad):
    """``[c - rad, c + rad]`` outward (NaN endpoints become infinite)."""
    with np.errstate(all="ignore"):
        lo, hi = _dn(c - rad), _up(c + rad)
    return IVec(np.where(np.isnan(lo), -_INF, lo), np.where(np.isnan(hi), _INF, hi))


def imatmul(a: IVec, b: IVec) -> IVec:
    """An interval enclosing ``{A B : A in a, B in b}`` (midpoint-radius, module docstring)."""
    ma, ra = _midrad(a)
    mb, rb = _midrad(b)
    n = ma.shape[-1]
    f = 2.0 * (n + 4) * _U
    with np.errstate(all="ignore"):
        c = ma @ mb
        aa, ab = np.abs(ma), np.abs(mb)
        rad = aa @ rb + ra @ (ab + rb) + f * (aa @ ab)
        rad = _up(rad * (1.0 + f) + (n + 4) * _TINY)
    return _widen(c, rad)


def isum(a: IVec, axis) -> IVec:
    """An interval enclosing the exact sum of ``a`` over ``axis`` (int or tuple)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = int(np.prod([a.lo.shape[i] for i in axes])) if a.lo.ndim else 1
    f = 2.0 * (n + 4) * _U
    with np.errstate(all="ignore"):
        lo, hi = np.sum(a.lo, axis=axes), np.sum(a.hi, axis=axes)
        elo = _up(f * np.sum(np.abs(a.lo), axis=axes) + (n + 4) * _TINY)
        ehi = _up(f * np.sum(np.abs(a.hi), axis=axes) + (n + 4) * _TINY)
        lo, hi = _dn(lo - elo), _up(hi + ehi)
    return IVec(np.where(np.isnan(lo), -_INF, lo), np.where(np.isnan(hi), _INF, hi))


def _take(a: IVec, idx, axis) -> IVec:
    return IVec(np.take(a.lo, idx, axis=axis), np.take(a.hi, idx, axis=axis))


def _t2_map(t, fn):
    """Apply ``fn`` to every :class:`IVec` entry of a :class:`T2` or an :class:`IVec`."""
    if isinstance(t, IVec):
        return fn(t)
    g = [None if x is None else fn(x) for x in t.g]
    h = None if t.h is None else [None if x is None else fn(x) for x in t.h]
    return T2(fn(t.v), g, h)


def _reshape(x: IVec, shape) -> IVec:
    return IVec(np.broadcast_to(x.lo, x.lo.shape).reshape(shape), np.broadcast_to(x.hi, x.hi.shape).reshape(shape))


class SetsLoss:
    """What the interval losses of the (alpha, beta) families share (SPEC §11.8): the ``C(T, tau)`` topic sets, the
    context rows ``m'_t``, the Gram ``U^T U`` of ``W = U V^T``, the [MASK] query's score-free term and the sums over
    a set's topics (:class:`LabelLoss`, :class:`._interval_cotopic.CotopicLoss`)."""

    def _common(self, g, mk, U, V, mask_keys, what):
        """Set the shared tables; return ``(masking fractions, Phi, Mp, Gu, K0, PU, GK0)`` (interval arrays)."""
        V1, T, tau = g.V1, g.T, g.tau
        n = V1 - 1
        e = rational_masking(mk)
        self.n_laws = math.comb(T, tau)
        self.pairs = self.n_laws * n
        check_alloc(f"interval certificate ({what}): interval tables", (V1, 6 * T + 4 * U.shape[1] + 16),
                    alternative="a smaller model")  # fmt: skip
        self.sets = np.array(list(itertools.combinations(range(T), tau)), dtype=np.int64).reshape(-1, tau)
        Phi = _exact(g.topic_token_matrix())
        Mp = Phi if mask_keys else _contexts(Phi, e, n)
        Ue = _exact(U)
        Gu = imatmul(_exact(U.T), Ue)  # (k, k)
        K0 = imatmul(_exact(V.T), IVec(Mp.lo.T, Mp.hi.T))  # (k, T): V^T m'_t
        PU = imatmul(Phi, Ue)  # (T, k)
        GK0 = imatmul(Gu, K0)  # (k, T)
        self.Gm0 = imatmul(IVec(K0.lo.T, K0.hi.T), GK0)  # (T, T)
        self.Fm0 = _transpose(imatmul(PU, K0))  # [t, s] = phi_s . W m'_t
        self.mp = IVec(Mp.lo[:, 1:].T, Mp.hi[:, 1:].T)  # (n, T)
        self.ph = _exact(Phi.lo[:, 1:].T)
        # (T, V1): key tokens of positive mass per topic (exactly: phi > 0, or the r / q terms of the masking)
        self.nz = g.topic_token_matrix() > 0
        if not mask_keys:
            self.nz[:, 1:] |= e["r"] > 0
            self.nz[:, 0] |= e["q"] > 0
        self.tau_inv = ivec_exact(Fraction(1, tau))
        self.p_c, self.p_r_n = ivec_exact(e["p_c"]), ivec_exact(e["p_r"] / n)
        self.p_mask = ivec_exact(1 - e["p_c"] - e["p_r"])
        self._cache: list | None = None
        return e, Phi, Mp, Gu, K0, PU, GK0

    def _tsum(self, X: IVec, S) -> IVec:
        """``sum_{t in S_i} X[..., t]`` for each set: ``(..., T) -> (len(S), ...)``."""
        out: IVec | None = None
        for j in range(S.shape[1]):
            part = _take(X, S[:, j], X.lo.ndim - 1)
            part = IVec(np.moveaxis(part.lo, -1, 0), np.moveaxis(part.hi, -1, 0))
            out = part if out is None else out + part
        assert out is not None
        return out

    def _ttsum(self, X: IVec, S) -> IVec:
        """``sum_{t, s in S_i} X[..., t, s]``: ``(..., T, T) -> (len(S), ...)``."""
        out: IVec | None = None
        for j in range(S.shape[1]):
            row = _take(X, S[:, j], X.lo.ndim - 2)  # (..., nS, T)
            part: IVec | None = None
            for kk in range(S.shape[1]):
                lo = np.take_along_axis(row.lo, S[:, kk].reshape((1,) * (row.lo.ndim - 2) + (-1, 1)), -1)[..., 0]
                hi = np.take_along_axis(row.hi, S[:, kk].reshape((1,) * (row.hi.ndim - 2) + (-1, 1)), -1)[..., 0]
                term = IVec(lo, hi)
                part = term if part is None else part + term
            assert part is not None
            part = IVec(np.moveaxis(part.lo, -1, 0), np.moveaxis(part.hi, -1, 0))
            out = part if out is None else out + part
        assert out is not None
        return out

    def _mask_term(self) -> IVec:
        """``(1/n_laws) sum_laws p_mask (||W m_theta - p_theta||^2 + ... )``: the [MASK] query (score-free)."""
        t2 = self.tau_inv * self.tau_inv
        total = IVec(0.0)
        for i0 in range(0, self.n_laws, 4096):
            S = self.sets[i0 : i0 + 4096]
            term = (self._ttsum(self.Gm0, S) - self._ttsum(self.Fm0, S) * 2) * t2 + 1
            total = total + isum(term * self.p_mask, 0)
        return total


class LabelLoss(SetsLoss):
    """The label family's exact squared loss on arrays of boxes, rigorous (module docstring).

    ``LabelLoss(g, mk, U, V, mask_keys)``: a general topic model (uniform-tau prior), the masking, ``W^V = U V^T``
    (factors ``(V1, k)``; a dense ``W`` is ``(W, I)``). :meth:`on_boxes` is the evaluator of
    :func:`._interval_vec.evaluate` (``value=`` this object's :meth:`original` or :meth:`chart`).
    """

    def __init__(self, g, mk, U, V, mask_keys=False):
        V1, T = g.V1, g.T
        e, Phi, Mp, Gu, K0, PU, GK0 = self._common(g, mk, U, V, mask_keys, "label family")
        labels = np.asarray(g.dominant_topic())
        present = np.unique(labels)
        self.grp = np.searchsorted(present, labels)  # (n,) label index of each word
        single = np.bincount(self.grp) == 1
        #: some label holds a single word (its own-label class is empty: the chart corner (0, 1) is a discontinuity)
        self.single_word_labels = bool(single.any())
        #: every label a single word: no pair has an own-label class, the loss depends on ``alpha + beta`` only
        self.every_label_single = bool(single.all())
        L = len(present)
        onehot = np.zeros((L, V1))
        onehot[self.grp, np.arange(1, V1)] = 1.0
        Ve = _exact(V)
        k = U.shape[1]
        X = _exact(V[:, :, None]) * IVec(Mp.lo.T[:, None, :], Mp.hi.T[:, None, :])  # (V1, k, T) outward
        Kl = imatmul(_exact(onehot), _reshape(X, (V1, k * T)))  # (L, k T)
        Kl = _reshape(Kl, (L, k, T))
        VG = imatmul(Ve, Gu)  # (V1, k): rows G_u V[x]
        words = slice(1, V1)
        vg = IVec(VG.lo[words], VG.hi[words])
        self.w2 = isum(vg * _exact(V[words]), 1)  # ||W e_x||^2
        self.wxx = isum(_exact(U[words]) * _exact(V[words]), 1)  # W_xx
        self.C0 = imatmul(vg, K0)  # (n, T)
        self.D0 = imatmul(_exact(U[words]), K0)
        self.pw = imatmul(_exact(V[words]), IVec(PU.lo.T, PU.hi.T))  # (n, T): phi_s . W e_x
        self._label_tables(Kl, Gu, GK0, PU, vg, U)
        ML = imatmul(Mp, _exact(onehot.T))  # (T, L)
        self.ML = IVec(ML.lo.T, ML.hi.T)  # (L, T)
        self.s0 = isum(Mp, 1)  # (T,)
        self.onehot = onehot
        self._const = self._mask_term()

    def _label_tables(self, Kl, Gu, GK0, PU, vg, U):
        """Per label ``l``: ``(W r_{t l}).(W m'_s)``, ``(W r_{t l}).(W r_{s l})``, ``phi_s . W r_{t l}`` ``(L, T, T)``;
        per word ``x``: ``(W^T W r_{t, z_x})_x``, ``(W r_{t, z_x})_x`` ``(n, T)``."""
        n, T = vg.lo.shape[0], Kl.lo.shape[2]
        self.C1, self.D1 = IVec(np.zeros((n, T))), IVec(np.zeros((n, T)))
        Grm, Grr, Fr = [], [], []
        for li in range(Kl.lo.shape[0]):
            Kli = _take(Kl, li, 0)  # (k, T)
            KliT = IVec(Kli.lo.T, Kli.hi.T)
            Grm.append(imatmul(KliT, GK0))
            Grr.append(imatmul(KliT, imatmul(Gu, Kli)))
            Fr.append(_transpose(imatmul(PU, Kli)))
            rows = np.flatnonzero(self.grp == li)
            c1, d1 = imatmul(_take(vg, rows, 0), Kli), imatmul(_exact(U[rows + 1]), Kli)
            for tgt, src in ((self.C1, c1), (self.D1, d1)):
                tgt.lo[rows], tgt.hi[rows] = src.lo, src.hi
        self.Grm, self.Grr, self.Fr = (_stack(x) for x in (Grm, Grr, Fr))  # (L, T, T)

    # ------------------------------------------------------------------ coefficients per (law, word)
    def _chunk_coeffs(self, S):
        """The 13 coefficients ``(m1, m2, m3, G11, G12, G13, G22, G23, G33, E1, E2, E3, omega)`` of the laws ``S``
        and every word, each an :class:`IVec` flattened to ``(len(S) * n,)``."""
        grp = self.grp
        mx = self._tsum(self.mp, S)  # (nS, n)
        px = self._tsum(self.ph, S)
        MLs = _take(self._tsum(self.ML, S), grp, 1)  # (nS, n)
        Mtot = self._tsum(self.s0, S)  # (nS,)
        Mtot = IVec(Mtot.lo[:, None], Mtot.hi[:, None])
        C0s, C1s = self._tsum(self.C0, S), self._tsum(self.C1, S)
        D0s, D1s = self._tsum(self.D0, S), self._tsum(self.D1, S)
        pws = self._tsum(self.pw, S)
        Gm0s, Fm0s = self._ttsum(self.Gm0, S), self._ttsum(self.Fm0, S)
        Gm0s, Fm0s = IVec(Gm0s.lo[:, None], Gm0s.hi[:, None]), IVec(Fm0s.lo[:, None], Fm0s.hi[:, None])
        Grm = _take(self._ttsum(self.Grm, S), grp, 1)
        Grr = _take(self._ttsum(self.Grr, S), grp, 1)
        Fr = _take(self._ttsum(self.Fr, S), grp, 1)
        w2, wxx = self.w2, self.wxx
        mx2w2 = mx.sq() * w2
        m = [mx, MLs - mx, Mtot - MLs]
        G = [
            mx2w2,  # 11
            mx * C1s - mx2w2,  # 12
            mx * (C0s - C1s),  # 13
            Grr - mx * C1s * 2 + mx2w2,  # 22
            Grm - Grr - mx * C0s + mx * C1s,  # 23
            Gm0s - Grm * 2 + Grr,  # 33
        ]
        d1 = mx * wxx
        D = [d1, D1s - d1, D0s - D1s]
        f1 = mx * pws
        F = [f1, Fr - f1, Fm0s - Fr]
        pcx = self.p_c * px
        two_tau = self.tau_inv * 2
        E = [(pcx * Di + self.p_r_n * Fi) * two_tau for Di, Fi in zip(D, F)]
        om = pcx * self.tau_inv + self.p_r_n
        zero = self._zero_classes(S)
        ind = [_exact((~z).astype(float)) for z in zero]
        m = [_nonneg(x) * i for x, i in zip(m, ind)]  # masses >= 0 (Mp >= 0), exactly 0 for an empty class
        safe = [IVec(np.where(z, 1.0, x.lo), np.where(z, 1.0, x.hi)) for x, z in zip(m, zero)]
        r = [m[j] / safe[i] for i, j in _OFF]  # r_ij = m_j / m_i
        # G_ij / m_i / m_j one division at a time: the product m_i m_j of two tiny masses would underflow to 0
        Gb = [G[k] / safe[i] / safe[j] * (ind[i] * ind[j]) for k, (i, j) in enumerate(_PAIRS_IJ)]
        Eb = [E[i] / safe[i] * ind[i] for i in range(3)]
        return [_reshape(x, (-1,)) for x in (*m, *r, *ind, *Gb, *Eb, om)]

    def _zero_classes(self, S):
        """Boolean ``(nS, n)`` arrays: the own word, the rest of its label, all other keys hold no mass (exactly)."""
        anyS = np.zeros((len(S), self.nz.shape[1]), bool)
        for j in range(S.shape[1]):
            anyS |= self.nz[S[:, j]]
        own = anyS[:, 1:]
        lab = (anyS.astype(np.int64) @ self.onehot.T.astype(np.int64))[:, self.grp]  # positive-mass words of the label
        tot = anyS.sum(axis=1)[:, None]
        return [~own, (lab - own) == 0, (tot - lab) == 0]

    def _chunks(self):
        """The coefficient chunks (kept after a complete pass when they fit :data:`_CACHE_PAIRS`)."""
        if self._cache is not None:
            yield from self._cache
            return
        step = max(1, _PAIRS // max(1, len(self.grp)))
        keep: list | None = [] if self.pairs <= _CACHE_PAIRS else None
        for i0 in range(0, self.n_laws, step):
            c = self._chunk_coeffs(self.sets[i0 : i0 + step])
            if keep is not None:
                keep.append(c)
            yield c
        self._cache = keep

    # ------------------------------------------------------------------ the loss on boxes
    def _sum(self, weights):
        """``(1/n_laws) (sum_{laws, words} ell + mask term)``; ``weights(c)`` returns the class masses ``h``
        of the (law, word) pairs of the coefficient slice ``c`` (T2/IVec of shape ``(N, pairs)``)."""
        total = None
        for c in self._chunks():
            P = c[0].lo.shape[0]
            for p0 in range(0, P, self._per):
                sl = slice(p0, min(P, p0 + self._per))
                cf = [IVec(x.lo[None, sl], x.hi[None, sl]) for x in c]
                Gb, Eb, om = cf[12:18], cf[18:21], cf[21]
                h = weights(cf)
                q = (h[0].sq() * Gb[0] + h[1].sq() * Gb[3] + h[2].sq() * Gb[5]
                     + (h[0] * h[1] * Gb[1] + h[0] * h[2] * Gb[2] + h[1] * h[2] * Gb[4]) * 2)  # fmt: skip
                ell = (q + 1) * om - (h[0] * Eb[0] + h[1] * Eb[1] + h[2] * Eb[2])
                s = _t2_map(ell, functools.partial(_row_sum, shape=(self._N, sl.stop - sl.start)))
                total = s if total is None else total + s
        return (total + self._const) * ivec_exact(Fraction(1, self.n_laws))

    def _prepare(self, xs):
        N = (xs[0].v if isinstance(xs[0], T2) else xs[0]).lo.shape[0]
        self._N, self._per = N, max(1, _BLOCK // max(1, N))
        return [_t2_map(x, lambda a: a if a.lo.ndim == 0 else _reshape(a, (N, 1))) for x in xs]

    def original(self, xs):
        """Loss on ``(alpha, beta)`` boxes: ``h_1 = 1/(1 + r_12 e^-alpha + r_13 e^-(alpha+beta))``,
        ``h_2 = 1/(1 + r_21 e^alpha + r_23 e^-beta)``, ``h_3 = 1/(1 + r_31 e^(alpha+beta) + r_32 e^beta)``
        (``r_ij = m_j / m_i``; each variable's sign of influence fixed: tight on boxes)."""
        a, b = self._prepare(xs)
        ab = a + b
        e = {k: v.exp() for k, v in (("-a", -a), ("-ab", -ab), ("a", a), ("-b", -b), ("ab", ab), ("b", b))}

        def weights(cf):
            r, ind = cf[3:9], cf[9:12]  # r12, r13, r21, r23, r31, r32
            h1 = (e["-a"] * r[0] + e["-ab"] * r[1] + 1).recip() * ind[0]
            h2 = (e["a"] * r[2] + e["-b"] * r[3] + 1).recip() * ind[1]
            h3 = (e["ab"] * r[4] + e["b"] * r[5] + 1).recip() * ind[2]
            return [_clip01(h) for h in (h1, h2, h3)]

        return self._sum(weights)

    def chart(self, xs):
        """Loss on chart boxes ``(u, w) in [0, 1]^2``: weights ``(u, (1 - u) w, (1 - u)(1 - w))``,
        ``h_i = w_i m_i / sum_j w_j m_j``. Each ``h_i`` is monotone in ``u`` and in ``w`` separately (``h_1``
        increases in ``u``, ``h_2``, ``h_3`` decrease; ``h_2`` increases in ``w``, ``h_3`` decreases, ``h_1`` moves
        with the sign of ``m_3 - m_2``), so its range over a box is the hull of its values at the four corners; the
        natural extension (used for the derivatives) is intersected with that hull and with ``[0, 1]``."""
        u, w = self._prepare(xs)
        one_u = 1 - u
        ws = [u, one_u * w, one_u * (1 - w)]
        U0, W0 = (x.v if isinstance(x, T2) else x for x in (u, w))
        corners = [(IVec(a), IVec(b)) for a in (U0.lo, U0.hi) for b in (W0.lo, W0.hi)]

        def weights(cf):
            m = cf[0:3]
            num = [wi * mi for wi, mi in zip(ws, m)]
            iz = (num[0] + one_u * (w * (m[1] - m[2]) + m[2])).recip()  # w once: Z >= (1 - u) min(m_2, m_3)
            lo, hi = [np.inf] * 3, [-np.inf] * 3
            for uc, wc in corners:
                nc = [uc * m[0], (1 - uc) * wc * m[1], (1 - uc) * (1 - wc) * m[2]]
                izc = (nc[0] + nc[1] + nc[2]).recip()
                for i in range(3):
                    hc = _clip01(nc[i] * izc)
                    lo[i], hi[i] = np.minimum(lo[i], hc.lo), np.maximum(hi[i], hc.hi)
            return [_intersect(_clip01(x * iz), lo[i], hi[i]) for i, x in enumerate(num)]

        return self._sum(weights)


def _intersect(t, lo, hi):
    """``t`` with its value intersected with ``[lo, hi]`` (another enclosure of the same quantity)."""
    v = t.v if isinstance(t, T2) else t
    a, b = np.maximum(v.lo, lo), np.minimum(v.hi, hi)
    bad = a > b  # cannot happen for two enclosures of one number; keep the hull then
    c = IVec(np.where(bad, np.minimum(v.lo, lo), a), np.where(bad, np.maximum(v.hi, hi), b))
    return T2(c, t.g, t.h) if isinstance(t, T2) else c


def _contexts(Phi: IVec, e, n) -> IVec:
    """``m'_t = a phi_t + r/n`` on words, ``q`` on [MASK] (SPEC §11.5), outward."""
    Mp = Phi * ivec_exact(e["a"])
    words, mask = Mp + ivec_exact(e["r"] / n), Mp + ivec_exact(e["q"])
    col = np.arange(Phi.lo.shape[1]) > 0
    return IVec(np.where(col, words.lo, mask.lo), np.where(col, words.hi, mask.hi))


def _row_sum(a: IVec, shape) -> IVec:
    return isum(IVec(np.broadcast_to(a.lo, shape), np.broadcast_to(a.hi, shape)), 1)


def _clip01(t):
    """``t`` with its value intersected with ``[0, 1]`` (a class mass)."""
    v = t.v if isinstance(t, T2) else t
    c = IVec(np.clip(v.lo, 0.0, 1.0), np.clip(v.hi, 0.0, 1.0))
    return T2(c, t.g, t.h) if isinstance(t, T2) else c


_OFF = [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
_PAIRS_IJ = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]


def _nonneg(x: IVec) -> IVec:
    return IVec(np.maximum(x.lo, 0.0), np.maximum(x.hi, 0.0))


def _transpose(a: IVec) -> IVec:
    return IVec(a.lo.T, a.hi.T)


def _stack(xs) -> IVec:
    return IVec(np.stack([x.lo for x in xs]), np.stack([x.hi for x in xs]))
