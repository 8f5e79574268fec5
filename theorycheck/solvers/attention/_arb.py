"""An independent re-check of the whole-domain interval certificate in Arb ball arithmetic (SPEC §7).

Optional: needs ``python-flint`` (the ``certify`` extra, ``pip install "theorycheck[certify]"``); this
module is the one place that imports it (:data:`HAVE_FLINT` says whether it is there). Arb
(python-flint's ``arb``) is midpoint-radius ball arithmetic with rigorous error bounds on every
operation (FLINT/Arb documentation, "arb: real numbers"); only ``+ - * /`` are used here.

:func:`arb_recheck` re-derives ``lower <= inf L <= upper`` over the whole line (block ``W^V``) or
plane (identity ``W^V``) with code that shares nothing with the float engines
(:mod:`._interval_loss`, :mod:`._interval_vec`): the squared loss of SPEC §4.3 is written again from
the query-class table (``sum_y n_y h_y^2 - 2 h_target + 1`` per class, the SPEC's form, not the
sum-of-squares rewriting of the engines), on the same compact chart (block: ``u = K/(K + k)``;
identity: the barycentric ``(u, (1-u) w, (1-u)(1-w))`` of ``(e^alpha, (v-1) e^beta, k)``), with its
own first-order forward differentiation (:class:`_D`) and its own best-first branch and bound
(natural extension and mean-value form). A certificate passes the re-check when both enclosures
intersect and hold the solver's optimum.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction
from typing import Any

from ..._validate import MissingExtra

try:  # the optional Arb engine (python-flint)
    import flint

    HAVE_FLINT = True
except ImportError:  # pragma: no cover - exercised where python-flint is absent
    flint = None  # type: ignore[assignment]
    HAVE_FLINT = False

__all__ = ["HAVE_FLINT", "arb_recheck", "arb_loss"]


class _D:
    """``val + sum_i der[i] eps_i`` over Arb balls: first-order forward differentiation."""

    __slots__ = ("val", "der")

    def __init__(self, val, der):
        self.val, self.der = val, der

    def _lift(self, o):
        return o if isinstance(o, _D) else _D(o, [0] * len(self.der))

    def __add__(self, o):
        o = self._lift(o)
        return _D(self.val + o.val, [a + b for a, b in zip(self.der, o.der)])

    __radd__ = __add__

    def __neg__(self):
        return _D(-self.val, [-a for a in self.der])

    def __sub__(self, o):
        return self + (-self._lift(o))

    def __rsub__(self, o):
        return self._lift(o) + (-self)

    def __mul__(self, o):
        o = self._lift(o)
        return _D(self.val * o.val, [a * o.val + self.val * b for a, b in zip(self.der, o.der)])

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = self._lift(o)
        q = self.val / o.val
        return _D(q, [(a - q * b) / o.val for a, b in zip(self.der, o.der)])

    def __rtruediv__(self, o):
        return self._lift(o) / self


def _q(x) -> Any:
    """The Arb ball of an exact rational."""
    x = Fraction(x)
    return flint.arb(flint.fmpq(x.numerator, x.denominator))


def _constants(T, v, tau, p_m, p_c, p_r):
    """SPEC §2.1 / §4.2 constants as exact Fractions (masking read as decimals: ``Fraction(repr(p))``)."""
    p_m, p_c, p_r = (Fraction(repr(float(p))) for p in (p_m, p_c, p_r))
    a, r, q = 1 - p_m * (1 - p_c), p_m * p_r, p_m * (1 - p_c - p_r)
    Tv = T * v
    if tau < T:
        B0 = -(r * (a + r) + Tv * q * q) / (a * v * T * ((a + r) ** 2 + Tv * q * q))
        A, gamma = B0 + 1 / (a * v), q * (Tv * B0 + 1 / a) / (a + r)
    else:  # constant context
        mu2 = (a + r) ** 2 / Tv + q * q
        A = B0 = (a + r) / (Tv * Tv * mu2)
        gamma = q / (Tv * mu2)
    rho, eta = a / (tau * v) + r / Tv, r / Tv
    return dict(p_c=p_c, p_r=p_r, q=q, rho=rho, eta=eta, A=A, B0=B0, gamma=gamma, a=a, r=r)


def _class_cost(groups, target):
    """SPEC §4.3: ``sum_g n_g o_g^2 - 2 o_target + 1``; ``groups``: ``(count, output)``."""
    s = 0
    for n, o in groups:
        if n:
            s = o * o * n + s
    return s - groups[target][1] * 2 + 1


def arb_loss(point, T, v, tau, cst, value):
    """SPEC §4.3 squared loss on the compact chart (module docstring); ``point``: Arb balls or :class:`_D`."""
    c = {k: _q(x) for k, x in cst.items()}
    rho, eta, q = c["rho"], c["eta"], c["q"]
    k = (1 - rho * v) / rho  # Z / rho = K + k for an in-document query
    R = ((1 - eta * v) / eta) / k if cst["eta"] else None  # (K + k') = k (u + R (1 - u)) / ... (module docstring)
    P = {}  # query-class probabilities, SPEC §4.3 table
    P["mask"] = 1 - c["p_c"] - c["p_r"]
    u = point[0]
    if value == "block":
        # in the document: H_t1 = rho K / Z = u, rho v / Z = v (1 - u) / k; h_0 = q / Z = (q / rho)(1 - u)/k
        d, B0, g = c["A"] - c["B0"], c["B0"], c["gamma"]

        def out(H, h0):
            return B0 * (1 - h0) + g * h0 + d * H

        def cost(H_list, h0, target):  # H_list: (number of topics, mass per topic); v outputs per topic
            return _class_cost([(n * v, out(H, h0)) for n, H in H_list], target)

        Y = (1 - u) / k
        H_in = [(1, u), (tau - 1, Y * v), (T - tau, Y * (eta * v / rho))]
        h0 = Y * (q / rho)
        L = cost([(tau, c["a"] / tau + c["r"] / T), (T - tau, c["r"] / T)], q, 0) * P["mask"]
        L = cost(H_in, h0, 0) * (c["p_c"] + c["p_r"] / T) + L
        if tau > 1:
            L = cost(H_in, h0, 1) * (c["p_r"] * (tau - 1) / T) + L
        if tau < T and R is not None:
            den = u + (1 - u) * R  # (K + k') / (K + k)
            Yp = (1 - u) / (k * den)  # = 1 / (K + k')
            H_out = [(1, u / den), (tau, Yp * (rho * v / eta)), (T - tau - 1, Yp * v)]
            L = cost(H_out, Yp * (q / eta), 1) * (c["p_r"] * (T - tau) / T) + L
        return L
    w = point[1]
    lam_b = (1 - u) * w if v > 1 else 0
    lam_1 = (1 - u) * (1 - w) if v > 1 else (1 - u)
    # in the document: rho e^a / Z = u, rho e^b / Z = lam_b/(v-1), rho / Z = lam_1 / k, eta / Z = (eta/rho) lam_1/k
    ha, hb, h1 = u, (lam_b / (v - 1) if v > 1 else 0), lam_1 / k
    groups = [(1, ha), (v - 1, hb), ((tau - 1) * v, h1), ((T - tau) * v, h1 * (eta / rho))]
    L = _class_cost([(tau * v, rho), ((T - tau) * v, eta)], 0) * P["mask"]
    L = _class_cost(groups, 0) * (c["p_c"] + c["p_r"] / (T * v)) + L
    if v > 1:
        L = _class_cost(groups, 1) * (c["p_r"] * (v - 1) / (T * v)) + L
    if tau > 1:
        L = _class_cost(groups, 2) * (c["p_r"] * (tau - 1) / T) + L
    if tau < T and R is not None:
        den = lam_1 * (R - 1) + 1  # Z' / Z in units of rho: (e^a + (v-1) e^b + k') / (e^a + (v-1) e^b + k)
        g1 = lam_1 / (k * den)  # eta / Z' = 1 / (sum + k') in units where the in-doc weight is rho/eta times
        grp = [(1, u / den), (v - 1, (lam_b / ((v - 1) * den) if v > 1 else 0)), (tau * v, g1 * (rho / eta)),
               ((T - tau - 1) * v, g1)]  # fmt: skip
        L = _class_cost(grp, 2) * (c["p_r"] * (T - tau) / T) + L
    return L


def _ball(lo, hi):
    """The Arb ball holding ``[lo, hi]`` (floats; midpoint and radius computed in Arb, exact at 80 bits)."""
    a, b = flint.arb(lo), flint.arb(hi)
    return flint.arb((a + b) / 2, (b - a) / 2)


def _lo(x) -> float:
    """A float ``<=`` every point of the ball ``x`` (one float below the rounded lower end)."""
    return math.nextafter(float(x.lower()), -math.inf)


def _hi(x) -> float:
    """A float ``>=`` every point of the ball ``x``."""
    return math.nextafter(float(x.upper()), math.inf)


def _bound(box, T, v, tau, cst, value):
    """``(lower, upper_at_centre, centre)`` of the loss on ``box``: natural extension and mean-value form."""
    n = len(box)
    X = [_ball(lo, hi) for lo, hi in box]
    F = arb_loss([_D(x, [1 if j == i else 0 for j in range(n)]) for i, x in enumerate(X)], T, v, tau, cst, value)
    c = [0.5 * (lo + hi) for lo, hi in box]
    Lc = arb_loss([flint.arb(x) for x in c], T, v, tau, cst, value)
    mv = Lc
    for g, x, ci in zip(F.der, X, c):
        mv = mv + g * (x - ci)
    lower = max(_lo(F.val), _lo(mv))
    if math.isnan(lower):
        lower = -math.inf
    mags = [_hi(abs(g)) * (hi - lo) if isinstance(g, flint.arb) else 0.0 for g, (lo, hi) in zip(F.der, box)]
    return lower, _hi(Lc), tuple(c), [m if m == m else math.inf for m in mags]


def arb_recheck(T, v, tau, p_m, p_c, p_r, value="block", *, tol=1e-8, max_boxes=20_000, prec=80):
    """Rigorous ``(lower, upper, n_boxes, argmin)`` of ``inf L`` over the whole domain, in Arb (module
    docstring). ``argmin``: hull of the chart boxes not excluded. Raises ``ImportError`` without
    python-flint."""
    if not HAVE_FLINT:
        raise MissingExtra("arb_recheck needs the optional package python-flint: pip install 'theorycheck[certify]'")
    cst = _constants(T, v, tau, p_m, p_c, p_r)
    if cst["rho"] * v == 1:
        raise ValueError("the chart is degenerate (1 - rho v = 0): the loss does not depend on the scores")
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        box = ((0.0, 1.0),) if value == "block" else ((0.0, 1.0), (0.0, 1.0))
        lo, up, c, mags = _bound(box, T, v, tau, cst, value)
        heap: list = [(lo, 0, box, mags)]
        upper, n_boxes, seq = up, 1, 1
        while heap and n_boxes + 2 <= max_boxes and upper - heap[0][0] > tol:
            entry = heapq.heappop(heap)
            b, mags = entry[2], entry[3]
            i = max(range(len(b)), key=lambda j: (mags[j], b[j][1] - b[j][0]))
            mid = 0.5 * (b[i][0] + b[i][1])
            if not b[i][0] < mid < b[i][1]:  # too thin to split in floats
                heapq.heappush(heap, entry)
                break
            for half in ((b[i][0], mid), (mid, b[i][1])):
                child = tuple(half if j == i else b[j] for j in range(len(b)))
                lo_c, up_c, _, m_c = _bound(child, T, v, tau, cst, value)
                n_boxes += 1
                upper = min(upper, up_c)
                if lo_c <= upper:
                    heapq.heappush(heap, (lo_c, seq, child, m_c))
                    seq += 1
        live = [b for lo_b, _, b, _ in heap if lo_b <= upper]
        lower = min((lo_b for lo_b, _, _, _ in heap), default=upper)
        argmin = tuple((min(b[i][0] for b in live), max(b[i][1] for b in live)) for i in range(len(box)))
        return min(lower, upper), upper, n_boxes, argmin
    finally:
        flint.ctx.prec = old
