r"""Trace-limited embedding Gram: ``min L(G)`` over ``G`` PSD with ``tr G <= c`` (SPEC §4.1, §4.6(a)).

The tied-embedding loss ``L(G) = E||G m_S - e_x||^2`` of ``gram/sdp`` with the norm budget
``||W^E||_F^2 = tr G <= c``, ``c = frac * tr G*`` below the trace of the minimum-norm optimum
``G*`` (SPEC §4.1 D3: ``tr G* = (T-1)/a + 1/(a+r)``). No minimiser of ``L`` is feasible, so the
optimum lies on the boundary: ``tr G = c`` and ``G`` has rank ``T`` (the PSD constraint binds too).

Reduction (paper's model, uniform-``tau`` prior, ``1 <= tau < T``; SPEC §4.6(a)). The problem is convex
and invariant under topic and within-topic word permutations, and its minimiser is unique, so it is
symmetric: ``G = lam P_c + B`` with ``P_c`` the projector onto the ``T - 1`` topic contrasts, ``0`` on
the within-topic zero-mean vectors and a ``2 x 2`` PSD block ``B`` on ``span{e_0, 1_W}``. With
``z = E[m_S] = (a + r) u + q e_0`` and ``kappa = E||p_S - u||^2 = E||p||^2 - 1/(T v)``,

.. math::
    L(G) = \kappa (a\lambda - 1)^2 + \|B z - u\|^2 + 1 - E\|p\|^2, \qquad
    \mathrm{tr}\, G = (T - 1)\lambda + \mathrm{tr}\, B.

For a given ``w = B z`` the least trace is ``||w||^2 / (w . z)`` (``B = w w^T / (w . z)``), so the
problem is three scalars ``(lam, w)`` and one multiplier ``nu`` of the trace: the KKT system
``2 a kappa (a lam - 1) + nu (T - 1) = 0``, ``grad_w [||w - u||^2 + nu ||w||^2 / (w . z)] = 0``,
``(T - 1) lam + ||w||^2 / (w . z) = c`` (with ``lam = 0`` when that bound is active). Coordinates
``w = (w_1, omega / sqrt(n))`` in the orthonormal basis ``(e_0, 1_W / sqrt(n))``, ``n = T v``, keep
every quantity rational.

Certificate (duality). ``upper``: ``L`` at a primal point that is feasible in exact rational
arithmetic (the KKT solution to 60 digits, rescaled into ``tr G <= c`` if needed). ``lower``: the
Fenchel (Frank-Wolfe) dual bound at the same point, ``S = grad L(G_p)``:
``f* >= L(G_p) - <S, G_p> + c min(0, lambda_min(S))`` (``min_{G in K} <S, G> = c min(0, lambda_min S)``
over ``K = {G PSD, tr G <= c}``). By symmetry ``S`` has the eigenvalues ``0`` (within-topic),
``2 a kappa (a lam - 1)/(T - 1)`` (contrasts) and ``e . z -+ ||e|| ||z||`` (``e = w - u``, the block
``e z^T + z e^T``); ``sqrt`` is bounded above by a rational checked by squaring. Every step is exact
(:class:`fractions.Fraction`; ``a, r, q`` are the floats the problem evaluates with, read exactly) and
the bounds are rounded outward to floats, so ``lower <= f* <= upper`` is proven; the gap is a few ulp.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import scipy.optimize

from ..population import moments, value_loss, value_loss_grad
from ._exact import round_down, round_up, sqrt_up
from ._problem import Certificate, Problem, project_psd

__all__ = ["GramTrace", "trace_kkt", "trace_reduced_loss"]

_DPS = 60


class _Consts:
    """The reduced problem's constants (SPEC §4.6(a)), as Fractions (``exact=True``) or floats."""

    def __init__(self, tm, mk, c, exact: bool):
        num = Fraction if exact else float
        T, v, tau = tm.T, tm.v, tm.tau
        self.T, self.n = T, T * v
        self.a, self.r, self.q = num(mk.a), num(mk.r), num(mk.q)
        Ep2 = Fraction(1, tau * v) if exact else 1.0 / (tau * v)
        self.kappa = Ep2 - (Fraction(1, self.n) if exact else 1.0 / self.n)
        self.const = 1 - Ep2
        self.c = num(c)
        self.has_within = v >= 2


def trace_reduced_loss(lam, w1, om, k: _Consts):
    """``L`` of the symmetric Gram ``(lam, w = (w_1, omega/sqrt n))`` (module docstring)."""
    return k.kappa * (k.a * lam - 1) ** 2 + w1 * w1 + (om - 1) ** 2 / k.n + k.const


def _trace_B(w1, om, k):
    """``(||w||^2, w . z)`` in the rational coordinates."""
    return w1 * w1 + om * om / k.n, k.q * w1 + (k.a + k.r) * om / k.n


def _tr_B(w1, om, k):
    """``tr B = ||w||^2 / (w . z)`` (0 for ``w = 0``, ``B = 0``)."""
    if w1 == 0 and om == 0:
        return 0 * w1
    N, Dz = _trace_B(w1, om, k)
    return N / Dz


def _nu_B(k) -> float:
    """The multiplier above which ``B = 0``: ``lambda_max(u z^T + z u^T) = u . z + ||u|| ||z||``."""
    return (k.a + k.r) / k.n + np.sqrt(1.0 / k.n) * np.sqrt(k.q * k.q + (k.a + k.r) ** 2 / k.n)


def trace_kkt(x, k: _Consts, lam_active: bool):
    """KKT residuals in ``(lam, w_1, omega, nu)`` (``lam_active``: ``lam = 0`` is fixed, ``x = (w_1, omega, nu)``)."""
    if lam_active:
        w1, om, nu = x
        lam = 0 * nu
    else:
        lam, w1, om, nu = x
    N, Dz = _trace_B(w1, om, k)
    r_w1 = 2 * w1 + nu * (2 * w1 * Dz - N * k.q) / Dz**2
    r_om = 2 * (om - 1) + nu * (2 * om * Dz - N * (k.a + k.r)) / Dz**2
    r_tr = (k.T - 1) * lam + N / Dz - k.c
    if lam_active:
        return [r_w1, r_om, r_tr]
    return [2 * k.a * k.kappa * (k.a * lam - 1) + nu * (k.T - 1), r_w1, r_om, r_tr]


def _w_step(nu, k):
    """``w = B z`` of ``argmin_{B PSD} ||B z - u||^2 + nu tr B``, returned as ``(w_1, omega)``.

    The minimiser is ``B = beta b b^T`` (least trace for its ``w``); for a unit ``b`` with ``b . z > 0`` the best
    ``beta = ((b.z)(b.u) - nu/2)_+ / (b.z)^2``, so ``b`` maximises ``h(b) = b.u - nu / (2 b.z)`` and
    ``w = h b`` (``B = 0`` if ``h <= 0``). One bounded scalar search over the angle of ``b`` (orthonormal basis
    ``(e_0, 1_W / sqrt(n))``); the KKT polish of :meth:`GramTrace._solve_float` makes it exact to rounding.
    """
    sn = np.sqrt(k.n)
    u, z = np.array([0.0, 1.0 / sn]), np.array([k.q, (k.a + k.r) / sn])
    tz = np.arctan2(z[1], z[0])

    def neg_h(t):
        b = np.array([np.cos(t), np.sin(t)])
        return -(b @ u - nu / (2 * (b @ z)))

    half = np.pi / 2 * (1 - 1e-12)
    res = scipy.optimize.minimize_scalar(neg_h, bounds=(tz - half, tz + half), method="bounded",
                                         options={"xatol": 1e-13})  # fmt: skip
    h = -float(res.fun)
    if h <= 0:
        return 0.0, 0.0
    w = h * np.array([np.cos(res.x), np.sin(res.x)])
    return float(w[0]), float(w[1] * sn)


def _trace_at(nu, k):
    """``(tr G, lam, w_1, omega)`` of the minimiser of ``L + nu tr G`` over the symmetric PSD Grams."""
    lam = max(0.0, 1 / k.a - nu * (k.T - 1) / (2 * k.a * k.a * k.kappa))
    w1, om = _w_step(nu, k) if nu < _nu_B(k) else (0.0, 0.0)
    return (k.T - 1) * lam + _tr_B(w1, om, k), lam, w1, om


class GramTrace(Problem):
    """Trace-limited tied-embedding Gram: ``min L(G)`` s.t. ``G`` PSD, ``tr G <= c`` (SPEC §4.1, §4.6(a)).

    ``c = frac * tr G*`` (``frac`` in ``(0, 1)``, default 0.5): the trace constraint and the PSD
    constraint both bind at the (unique) optimum. f* certified by exact primal-dual bounds.
    """

    family = "gram/trace"
    constraint = "psd,trace<=c"
    start_doc = (
        "seed 0: G = 0 (feasible); seed k > 0: G = (c/2) A A^T / tr(A A^T), A_ij ~ N(0, 1) from default_rng(k) "
        "(feasible, trace c/2)"
    )
    default_frac = 0.5

    def __init__(self, model, size, tm, mk):
        frac = float(size.get("frac", self.default_frac))
        if not 0.0 < frac < 1.0:
            raise ValueError(f"{self.family}: frac must be in (0, 1) (c = frac * tr G*), got {frac!r}")
        if getattr(tm, "prior", "uniform-tau") != "uniform-tau" or not 1 <= tm.tau < tm.T:
            raise ValueError(
                f"{self.family}: needs the uniform-tau prior with 1 <= tau < T, got T={tm.T}, tau={tm.tau}"
            )
        mk.require_informative(self.family)
        super().__init__(model, size, tm, mk)
        self.size["frac"] = frac
        self.shape = (tm.V1, tm.V1)
        a, r = mk.a, mk.r
        #: the trace of the minimum-norm unconstrained optimum (SPEC §4.1 D3)
        self.trace_star = (tm.T - 1) / a + 1 / (a + r)
        #: the trace budget (a float; the exact certificate reads it exactly)
        self.c = float(frac * self.trace_star)
        self._Sigma: np.ndarray | None = None

    # -- objective ------------------------------------------------------------------------------
    def f(self, x) -> float:
        return float(value_loss(x, self.tm, self.mk))

    def grad(self, x) -> np.ndarray:
        return np.asarray(value_loss_grad(x, self.tm, self.mk)[1])

    def hvp(self, x, v) -> np.ndarray:
        """``2 v Sigma`` (exact; the loss is quadratic; the dense ``Sigma`` is built once)."""
        if self._Sigma is None:
            self._Sigma = np.asarray(moments(self.tm, self.mk)[0])
        return 2.0 * (np.asarray(v, dtype=float) @ self._Sigma)

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(self.shape)
        A = np.random.default_rng(seed).standard_normal(self.shape)
        G = A @ A.T
        return (self.c / 2) * G / np.trace(G)

    def violation(self, x) -> float:
        """``max(||G - G^T||_F, -lambda_min((G + G^T)/2), tr G - c, 0)``."""
        x = np.asarray(x, dtype=float)
        S = (x + x.T) / 2
        return max(float(np.linalg.norm(x - x.T)), -float(np.linalg.eigvalsh(S)[0]), float(np.trace(S)) - self.c, 0.0)

    def project(self, x) -> np.ndarray:
        """Projection onto ``{G PSD, tr G <= c}``: eigenvalues onto the capped simplex (:func:`project_psd`)."""
        return project_psd(x, self.c)

    # -- the reduced solution -------------------------------------------------------------------
    def _solve_float(self):
        """``(lam, w_1, omega, nu)`` solving the KKT system in floats: bisection on the multiplier ``nu`` (the
        trace of the minimiser of ``L + nu tr G`` decreases in ``nu``), then Newton (scipy ``root``) polish."""
        k = _Consts(self.tm, self.mk, self.c, exact=False)
        lo, hi = 0.0, 1.0
        while _trace_at(hi, k)[0] > k.c:
            lo, hi = hi, 2 * hi
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if _trace_at(mid, k)[0] > k.c else (lo, mid)
        nu = 0.5 * (lo + hi)
        _, lam, w1, om = _trace_at(nu, k)
        if w1 == 0.0 and om == 0.0:  # B = 0: the whole budget on the contrasts (closed form)
            lam = k.c / (k.T - 1)
            return np.array([lam, 0.0, 0.0, 2 * k.a * k.kappa * (1 - k.a * lam) / (k.T - 1)])
        lam_active = lam == 0.0
        x0 = [w1, om, nu] if lam_active else [lam, w1, om, nu]
        sol = scipy.optimize.root(trace_kkt, x0, args=(k, lam_active), method="hybr")
        x = np.array(([0.0] + x0) if lam_active else x0, dtype=float)
        y = np.array(([0.0, *sol.x]) if lam_active else sol.x, dtype=float)
        better = np.max(np.abs(trace_kkt(sol.x, k, lam_active))) < np.max(np.abs(trace_kkt(x0, k, lam_active)))
        if better and np.all(np.isfinite(y)) and y[0] >= 0 and y[3] >= 0 and _trace_B(y[1], y[2], k)[1] > 0:
            x = y
        if not (np.all(np.isfinite(x)) and _trace_B(x[1], x[2], k)[1] > 0):
            raise ArithmeticError(f"{self.name}: the reduced KKT system has no valid solution (x = {x})")
        return x

    def _assemble(self, lam, w1, om) -> np.ndarray:
        """The dense ``V1 x V1`` symmetric Gram of ``(lam, w)`` (module docstring)."""
        tm, mk = self.tm, self.mk
        n, T, v = tm.n_words, tm.T, tm.v
        Dz = mk.q * w1 + (mk.a + mk.r) * om / n
        # B = w w^T / (w . z): B e_0 = g0 e_0 + h 1_W, B 1_W = n h e_0 + s 1_W (B = 0 for w = 0)
        g0, h, s = (0.0, 0.0, 0.0) if Dz == 0 else (w1 * w1 / Dz, w1 * om / (n * Dz), om * om / (n * Dz))
        y = (s - lam) / (T * v)  # other-topic entry: s = v x + (T - 1) v y, lam = v (x - y)
        x = y + lam / v
        topics = tm.token_topics()[1:]
        G = np.empty(self.shape)
        G[0, 0] = g0
        G[0, 1:] = G[1:, 0] = h
        G[1:, 1:] = np.where(topics[:, None] == topics[None, :], x, y)
        return G

    def reference(self) -> np.ndarray:
        lam, w1, om, _ = self._solve_float()
        return self._assemble(lam, w1, om)

    def _solve_exact(self):
        """The float KKT solution refined to ``_DPS`` digits (mpmath Newton), as Fractions."""
        x = self._solve_float()
        if x[1] == 0.0 and x[2] == 0.0:  # B = 0: lam = c / (T - 1) exactly
            return [Fraction(self.c) / (self.tm.T - 1), Fraction(0), Fraction(0), Fraction(float(x[3]))]
        lam_active = x[0] == 0.0
        k = _Consts(self.tm, self.mk, self.c, exact=False)
        with mpmath.workdps(_DPS):
            km = _Consts(self.tm, self.mk, self.c, exact=False)
            for name in ("a", "r", "q", "c"):
                setattr(km, name, mpmath.mpf(getattr(k, name)))
            km.kappa = mpmath.mpf(1) / (self.tm.tau * self.tm.v) - mpmath.mpf(1) / k.n
            x0 = [mpmath.mpf(float(t)) for t in (x[1:] if lam_active else x)]
            try:
                sol = mpmath.findroot(lambda *z: trace_kkt(z, km, lam_active), x0)
                vals = [Fraction(mpmath.nstr(t, _DPS)) for t in sol]
            except (ValueError, ZeroDivisionError):  # keep the float solution (the certificate stays valid)
                vals = [Fraction(float(t)) for t in (x[1:] if lam_active else x)]
        return ([Fraction(0)] + vals) if lam_active else vals

    def _optimum(self):
        k = _Consts(self.tm, self.mk, self.c, exact=True)
        lam, w1, om, _ = self._solve_exact()
        lam = max(lam, Fraction(0))
        if (w1 != 0 or om != 0) and _trace_B(w1, om, k)[1] <= 0:
            raise ArithmeticError(f"{self.name}: the refined solution has w . z <= 0 (B not PSD)")
        tr = (k.T - 1) * lam + _tr_B(w1, om, k)
        if tr > k.c:  # exact feasibility: scale G (lam and w) into the budget
            t = k.c / tr
            lam, w1, om = lam * t, w1 * t, om * t
        upper = trace_reduced_loss(lam, w1, om, k)
        # dual (Fenchel / Frank-Wolfe) bound at S = grad L(G_p)
        e1, e2 = w1, om - 1  # e = w - u = (e1, e2 / sqrt(n))
        ez = k.q * e1 + (k.a + k.r) * e2 / k.n
        ee = e1 * e1 + e2 * e2 / k.n
        zz = k.q * k.q + (k.a + k.r) ** 2 / k.n
        s_contrast = 2 * k.a * k.kappa * (k.a * lam - 1) / (k.T - 1)
        lam_min = min([s_contrast, ez - sqrt_up(ee * zz)] + ([Fraction(0)] if k.has_within else []))
        S_dot_G = 2 * k.a * k.kappa * (k.a * lam - 1) * lam + 2 * (e1 * w1 + e2 * om / k.n)
        lower = upper - S_dot_G + k.c * min(Fraction(0), lam_min)
        if lower > upper:  # cannot happen (weak duality); a bug if it does
            raise ArithmeticError(f"{self.name}: dual bound {float(lower)} above the primal value {float(upper)}")
        method = (
            "exact primal-dual pair of the symmetric reduction (SPEC §4.6(a)): feasible G (rational) and the "
            "Fenchel/Frank-Wolfe dual bound at grad L(G), rounded outward"
        )
        cert = Certificate(method, round_down(lower), round_up(upper))
        return cert, self._assemble(float(lam), float(w1), float(om))
