"""The (alpha, beta) family's squared loss written for interval arithmetic (SPEC §4.3(a), (b)).

The formulas (and the interval forward-mode AD :class:`_Dual`) shared by the two interval engines:
the scalar ``mpmath.iv`` engine (:mod:`._interval`) and the numpy one (:mod:`._interval_vec`). See
:mod:`._interval` for the rewriting that uses each variable once.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mpmath import iv

from ...models import Masking, TopicModel
from .._rational import rational_masking
from ..value._rational import rational_value_constants


# =============================================================================== interval AD
class _Dual:
    """``val + sum_i der[i] eps_i`` with interval components: encloses a function and its gradient.

    ``mpmath`` intervals raise (instead of deferring) when the left operand of ``iv * _Dual``: the
    formulas below always put the :class:`_Dual` (the variable-dependent factor) on the left.
    """

    __slots__ = ("val", "der")

    def __init__(self, val, der):
        self.val, self.der = val, tuple(der)

    def __add__(self, o):
        if isinstance(o, _Dual):
            return _Dual(self.val + o.val, [x + y for x, y in zip(self.der, o.der)])
        return _Dual(self.val + o, self.der)

    __radd__ = __add__

    def __neg__(self):
        return _Dual(-self.val, [-x for x in self.der])

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __mul__(self, o):
        if isinstance(o, _Dual):
            return _Dual(self.val * o.val, [self.val * y + o.val * x for x, y in zip(self.der, o.der)])
        return _Dual(self.val * o, [x * o for x in self.der])

    __rmul__ = __mul__

    def __truediv__(self, o):
        if isinstance(o, _Dual):
            q = self.val / o.val
            return _Dual(q, [(x - q * y) / o.val for x, y in zip(self.der, o.der)])
        return _Dual(self.val / o, [x / o for x in self.der])

    def __rtruediv__(self, o):  # o / self, o a constant
        q = o / self.val
        return _Dual(q, [-(q / self.val) * x for x in self.der])


def _exp(x):
    if hasattr(x, "exp"):  # the numpy engine's IVec / T2 (:mod:`._interval_vec`)
        return x.exp()
    if isinstance(x, _Dual):
        e = iv.exp(x.val)
        return _Dual(e, [e * d for d in x.der])
    return iv.exp(x)


def _down(x) -> float:
    """Largest float ``<= x`` (``x`` an mpmath real): directed rounding of a lower endpoint."""
    f = float(x)
    return math.nextafter(f, -math.inf) if f > x else f


def _up(x) -> float:
    """Smallest float ``>= x``: directed rounding of an upper endpoint."""
    f = float(x)
    return math.nextafter(f, math.inf) if f < x else f


def _iv(x: Fraction):
    """Interval enclosing the rational ``x``."""
    return iv.mpf(x.numerator) / iv.mpf(x.denominator)


# =============================================================================== the loss on intervals
def _sq(x):
    """``x^2``: the numpy engine's exact-range square, ``x * x`` for ``mpmath.iv`` and :class:`_Dual`."""
    return x.sq() if hasattr(x, "sq") else x * x


def _setup(tm: TopicModel, mk: Masking, value: str, constants=None, make=None) -> dict:
    """Exact constants of SPEC §2.1 / §4.2 / §4.3 as Fractions, then as enclosing intervals (``make``:
    Fraction -> interval, default ``mpmath.iv``)."""
    e = rational_masking(mk)
    a, r, q = e["a"], e["r"], e["q"]
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta = a / (tau * v) + r / (T * v), r / (T * v)
    c = dict(rho=rho, eta=eta, q=q, D_in=1 - rho * v, D_out=1 - eta * v)
    c.update(p_mask=1 - e["p_c"] - e["p_r"], p_c=e["p_c"], p_r=e["p_r"])
    if value in COMPACT and c["D_in"] > 0:  # the compact chart's constants k = D/rho and R = k'/k (k' = D'/eta)
        c.update(k_in=c["D_in"] / rho, R=(c["D_out"] / eta) / (c["D_in"] / rho) if eta else 1)
    if value in ("block", "block-u"):
        if constants is None:  # stage-1 minimum-norm constants, exact (informative or constant-context case)
            constants = rational_value_constants(tm, mk)[:3]
        A, B0, gamma = (Fraction(x) for x in constants)
        c.update(B0=B0, gamma=gamma, d=A - B0)
    return {k: (make or _iv)(x) for k, x in c.items()} | {"eta_zero": eta == 0}


def _ell(groups, target):
    """Squared loss of one query class, ``sum_g n_g o_g^2 - 2 o_target + 1`` (``o_0 = 0``), written as
    ``(o_t - 1)^2 + (n_t - 1) o_t^2 + sum_{g != t} n_g o_g^2`` (a sum of squares: tighter on intervals)."""
    n_t, o_t = groups[target]
    s = _sq(o_t - 1)
    for i, (n, o) in enumerate(groups):
        m = n - 1 if i == target else n
        if m > 0:
            s = s + m * _sq(o)
    return s


def _block_class(cst, H1, Y, dens, masses, counts, target):
    """One block-case query class (SPEC §4.3(a)): ``H1`` query-topic mass, others ``(mass/dens) Y``."""
    h0 = Y * (cst["q"] / dens)
    c0 = h0 * (cst["gamma"] - cst["B0"]) + cst["B0"]
    Hs = [H1] + [Y * (m / dens) for m in masses]
    groups = [(n, H * cst["d"] + c0) for n, H in zip(counts, Hs)]
    return _ell(groups, target)


def _block_loss(x, tm, cst):
    """Block-``W^V`` squared loss at ``x = log K`` (interval or :class:`_Dual`), SPEC §4.3(a)."""
    eK, eKm = _exp(x), _exp(-x)
    k = cst["D_in"] / cst["rho"]
    if cst["eta_zero"]:
        return _block_masses(tm, cst, 1 / (eKm * k + 1), 1 / (eK + k), None, None)
    kp = cst["D_out"] / cst["eta"]
    return _block_masses(tm, cst, 1 / (eKm * k + 1), 1 / (eK + k), 1 / (eKm * kp + 1), 1 / (eK + kp))


def _block_loss_u(u, tm, cst):
    """Block-``W^V`` squared loss in the compact chart ``u = K/(K + k) in [0, 1]`` (``k = D/rho``; SPEC §7,
    whole-domain certificate): ``H_1 = u``, ``Y = (1 - u)/k``; out of the document, with ``R = k'/k`` and
    ``den = R - (R - 1) u``: ``H_1' = u/den``, ``Y' = (1 - u)/(k den)``. Rational in ``u`` (no ``exp``);
    ``u = 0, 1`` are the limits ``log K -> -inf, +inf``."""
    k, one_u = cst["k_in"], 1 - u
    if cst["eta_zero"]:
        return _block_masses(tm, cst, u, one_u / k, None, None)
    den = u * (1 - cst["R"]) + cst["R"]
    return _block_masses(tm, cst, u, one_u / k, u / den, one_u / (den * k))


def _block_masses(tm, cst, H1, Y, H1p, Yp):
    """Block-``W^V`` squared loss from the query-topic masses ``H1`` (in the document), ``H1p`` (outside)
    and the per-density weights ``Y = 1/(K + k)``, ``Yp = 1/(K + k')`` (SPEC §4.3(a))."""
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, p_r = cst["rho"], cst["eta"], cst["p_r"]
    counts = [v, (tau - 1) * v, (T - tau) * v]
    masses = [rho * v, eta * v]
    L = _block_class(cst, H1, Y, rho, masses, counts, 0) * (cst["p_c"] + p_r / T)
    if tau > 1:
        L = L + _block_class(cst, H1, Y, rho, masses, counts, 1) * (p_r * (tau - 1) / T)
    if tau < T and H1p is not None:
        cnt = [v, tau * v, (T - tau - 1) * v]
        L = L + _block_class(cst, H1p, Yp, eta, [rho * v, eta * v], cnt, 1) * (p_r * (T - tau) / T)
    cm = cst["B0"] + (cst["gamma"] - cst["B0"]) * cst["q"]
    d = cst["d"]
    o_in = cm + d * rho * v
    l_mask = _ell([(tau * v, o_in), ((T - tau) * v, cm + d * eta * v)], 0)
    return L + cst["p_mask"] * l_mask


def _identity_weights(E, k, v):
    """Single-token weights ``(e^al, e^be, 1) / (e^al + (v-1) e^be + k)``, each variable used once.

    ``E``: the exponentials ``e^{al}, e^{be}, e^{-al}, e^{-be}, e^{be-al}, e^{al-be}``.
    """
    ea, eb, ema, emb, ebma, eamb = E
    h_a = 1 / (ebma * (v - 1) + ema * k + 1)
    h_b = 1 / (eamb + emb * k + (v - 1)) if v > 1 else 0
    h_1 = 1 / (ea + eb * (v - 1) + k)
    return h_a, h_b, h_1


def _identity_loss(al, be, tm, cst):
    """Identity-``W^V`` squared loss at ``(alpha, beta)``, SPEC §4.3(b)."""
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta = cst["rho"], cst["eta"]
    E = [_exp(x) for x in (al, be, -al, -be, be - al, al - be)]
    w_in = _identity_weights(E, cst["D_in"] / rho, v)
    w_out = None if tau == T or cst["eta_zero"] else _identity_weights(E, cst["D_out"] / eta, v)
    return _identity_masses(tm, cst, w_in, w_out)


def _identity_loss_uw(u, w, tm, cst):
    """Identity-``W^V`` squared loss in the compact chart (SPEC §7, whole-domain certificate): the
    in-document weights ``(e^al, (v-1) e^be, k) / (e^al + (v-1) e^be + k)`` are the barycentric
    coordinates ``(u, (1-u) w, (1-u)(1-w))`` of a triangle, parametrised by ``(u, w) in [0, 1]^2``
    (``w`` unused for ``v = 1``). Then ``h_a = u``, ``h_b = (1-u) w/(v-1)``, ``h_1 = (1-u)(1-w)/k``;
    outside the document the same over ``den = 1 + (R - 1)(1-u)(1-w)``. Rational (no ``exp``); the
    edges of the square are the limits of ``(alpha, beta)`` at infinity."""
    v, T, tau = tm.v, tm.T, tm.tau
    k, one_u = cst["k_in"], 1 - u
    lam_b = one_u * w if v > 1 else None
    lam_1 = one_u * (1 - w) if v > 1 else one_u + w * 0  # v = 1: w enters with an exact zero derivative
    w_in = (u, lam_b / (v - 1) if v > 1 else 0, lam_1 / k)
    w_out = None
    if tau < T and not cst["eta_zero"]:
        den = lam_1 * (cst["R"] - 1) + 1
        w_out = (u / den, lam_b / (den * (v - 1)) if v > 1 else 0, lam_1 / (den * k))
    return _identity_masses(tm, cst, w_in, w_out)


def _identity_masses(tm, cst, w_in, w_out):
    """Identity-``W^V`` squared loss from the single-token weights in (``w_in``) and outside (``w_out``)
    the document, each ``(h_a, h_b, h_1)`` (SPEC §4.3(b))."""
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, p_r = cst["rho"], cst["eta"], cst["p_r"]
    h_a, h_b, h_1 = w_in
    groups = [(1, h_a), (v - 1, h_b), ((tau - 1) * v, h_1), ((T - tau) * v, h_1 * (eta / rho))]
    L = _ell(groups, 0) * (cst["p_c"] + p_r / (T * v))
    if v > 1:
        L = L + _ell(groups, 1) * (p_r * (v - 1) / (T * v))
    if tau > 1:
        L = L + _ell(groups, 2) * (p_r * (tau - 1) / T)
    if w_out is not None:
        g_a, g_b, g_1 = w_out
        h_in = g_1 * (rho / eta)
        groups = [(1, g_a), (v - 1, g_b), (tau * v, h_in), ((T - tau - 1) * v, g_1)]
        L = L + _ell(groups, 2) * (p_r * (T - tau) / T)
    l_mask = _ell([(tau * v, rho), ((T - tau) * v, eta)], 0)
    return L + cst["p_mask"] * l_mask


#: The compact charts of the whole domain (SPEC §7, whole-domain certificate): value -> its chart's name.
COMPACT = {"block-u": "block", "identity-uw": "identity"}


def _evaluate(point, tm, cst, value):
    if value == "block":
        return _block_loss(point[0], tm, cst)
    if value == "identity":
        return _identity_loss(point[0], point[1], tm, cst)
    if value == "block-u":
        return _block_loss_u(point[0], tm, cst)
    return _identity_loss_uw(point[0], point[1], tm, cst)
