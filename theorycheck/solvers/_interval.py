"""Rigorous lower bound on the stage-2 attention optimum by interval branch and bound (SPEC §4.3).

:func:`interval_certificate` encloses ``min L`` over a search box of the (alpha, beta) family's
squared population loss (SPEC §4.3) between two rigorous numbers: every arithmetic operation is done
in outward-rounded interval arithmetic (``mpmath.iv``), so ``lower <= min_box L <= upper`` holds
as a mathematical statement about the loss with the masking probabilities ``Fraction(repr(p))``
(``0.15 -> 3/20``, as in :mod:`theorycheck.solvers._rational`), not as a floating-point estimate.

The loss is re-implemented here in a form that evaluates on intervals, from the same formulas as
``_block_loss_logK`` / ``_identity_loss`` (:mod:`theorycheck.population._alpha_beta`), rewritten
so that each attention weight uses its variables once (less interval over-estimation):

* block ``W^V`` (SPEC §4.3(a); the loss depends on ``x = log K`` only): for an in-document query
  ``Z = D + rho K`` with ``D = 1 - rho v``; with ``k = D/rho`` and ``Y = 1/(e^x + k)`` the query
  topic's mass is ``H_1 = 1/(1 + k e^{-x})``, every other class mass is ``(mass/rho) Y``
  (``H_t = v Y`` for the other document topics, ``eta v Y / rho`` outside, ``h_0 = q Y/rho``);
  the same with ``eta``, ``D' = 1 - eta v`` for an out-of-document query. The outputs are
  ``o = c + d H`` with ``c = B0 (1 - h_0) + gamma h_0``, ``d = A - B0`` and each class costs
  ``sum_t v (c + d H_t)^2 - 2 o_target + 1``.
* identity ``W^V`` (SPEC §4.3(b)): the single-token weights are written as
  ``rho e^alpha / Z = 1/(1 + (v-1) e^{beta-alpha} + k e^{-alpha})``,
  ``rho e^beta / Z = 1/(e^{alpha-beta} + v - 1 + k e^{-beta})`` and
  ``rho / Z = 1/(e^alpha + (v-1) e^beta + k)``; the class cost is
  ``sum_y h_y^2 - 2 h_w + 1``.

Branch and bound (best first): on a box ``X`` with centre ``c`` the bound is the better of the
natural interval extension ``L(X)`` and the mean-value form ``L(c) + grad L(X) . (X - c)``, where
``grad L(X)`` is enclosed by forward-mode automatic differentiation on intervals
(:class:`_Dual`). The upper bound is the smallest ``L(c)`` seen (upper end of its interval). The
box with the smallest lower bound is bisected along its widest side until
``upper - lower <= tol`` or ``max_boxes`` boxes were evaluated. Boxes whose lower bound exceeds the
current upper bound cannot hold a minimiser and are discarded; the hull of the boxes left with
``lower <= upper`` encloses every global minimiser in the search box (``argmin``).

Engines: the above is ``engine="mpmath"`` (the scalar reference). The default ``engine="numpy"``
(:mod:`._interval_vec`) evaluates the same formulas on arrays of boxes with outward-rounded float
intervals, adds a second-order bound at the float minimiser (interval Hessian) and bounds all open
boxes of a round at once; it falls back to mpmath when a constant leaves the float range.

Scope: squared loss, uniform-tau prior, the search box only (the loss at the box's edges is part
of the bound, the loss outside is not).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from fractions import Fraction

from mpmath import iv

from .._validate import check_choice, check_int, check_real
from ..models import Masking, TopicModel, check_models
from ._rational import rational_masking, rational_value_constants

__all__ = ["IntervalCertificate", "interval_certificate", "interval_loss", "DEFAULT_BOXES"]

#: Default search boxes: the grids of :func:`theorycheck.solvers.optimal_attention`.
DEFAULT_BOXES = {"block": ((-30.0, 60.0),), "identity": ((-10.0, 40.0), (-40.0, 20.0))}


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
    if value == "block":
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
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, p_r = cst["rho"], cst["eta"], cst["p_r"]
    eK, eKm = _exp(x), _exp(-x)
    k = cst["D_in"] / rho
    H1, Y = 1 / (eKm * k + 1), 1 / (eK + k)
    counts = [v, (tau - 1) * v, (T - tau) * v]
    masses = [rho * v, eta * v]
    L = _block_class(cst, H1, Y, rho, masses, counts, 0) * (cst["p_c"] + p_r / T)
    if tau > 1:
        L = L + _block_class(cst, H1, Y, rho, masses, counts, 1) * (p_r * (tau - 1) / T)
    if tau < T and not cst["eta_zero"]:
        kp = cst["D_out"] / eta
        H1p, Yp = 1 / (eKm * kp + 1), 1 / (eK + kp)
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
    rho, eta, p_r = cst["rho"], cst["eta"], cst["p_r"]
    E = [_exp(x) for x in (al, be, -al, -be, be - al, al - be)]
    h_a, h_b, h_1 = _identity_weights(E, cst["D_in"] / rho, v)
    groups = [(1, h_a), (v - 1, h_b), ((tau - 1) * v, h_1), ((T - tau) * v, h_1 * (eta / rho))]
    L = _ell(groups, 0) * (cst["p_c"] + p_r / (T * v))
    if v > 1:
        L = L + _ell(groups, 1) * (p_r * (v - 1) / (T * v))
    if tau > 1:
        L = L + _ell(groups, 2) * (p_r * (tau - 1) / T)
    if tau < T and not cst["eta_zero"]:
        g_a, g_b, g_1 = _identity_weights(E, cst["D_out"] / eta, v)
        h_in = g_1 * (rho / eta)
        groups = [(1, g_a), (v - 1, g_b), (tau * v, h_in), ((T - tau - 1) * v, g_1)]
        L = L + _ell(groups, 2) * (p_r * (T - tau) / T)
    l_mask = _ell([(tau * v, rho), ((T - tau) * v, eta)], 0)
    return L + cst["p_mask"] * l_mask


def _evaluate(point, tm, cst, value):
    return _block_loss(point[0], tm, cst) if value == "block" else _identity_loss(point[0], point[1], tm, cst)


# =============================================================================== public API
def _check(tm, mk, value):
    check_models(tm, mk)
    check_choice("value", value, ("block", "identity"))
    if not isinstance(tm, TopicModel) or tm.prior != "uniform-tau":
        raise ValueError("interval_certificate needs a TopicModel with prior='uniform-tau' (SPEC §4.3)")
    mk.require_informative("the (alpha, beta) attention loss")


def _check_box(box, value):
    ndim = 1 if value == "block" else 2
    try:
        box = tuple((float(lo), float(hi)) for lo, hi in box)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"box must be a sequence of {ndim} (low, high) pairs, got {box!r}") from exc
    if len(box) != ndim or not all(math.isfinite(lo) and math.isfinite(hi) and lo < hi for lo, hi in box):
        names = "(logK,)" if value == "block" else "(alpha, beta)"
        raise ValueError(f"box must be {ndim} finite (low, high) pairs with low < high over {names}, got {box!r}")
    if any(max(abs(lo), abs(hi)) > 700.0 for lo, hi in box):
        raise ValueError(f"box coordinates must lie in [-700, 700] (exp overflow of the float centre), got {box!r}")
    return box


def interval_loss(point, tm: TopicModel, mk: Masking, value: str = "block", *, constants=None):
    """The loss on an interval point or box, as an ``mpmath.iv`` interval (SPEC §4.3(a), (b)).

    ``point``: ``(logK,)`` for ``value="block"``, ``(alpha, beta)`` for ``"identity"``; each entry a
    number or a ``(low, high)`` pair. The result contains ``L(x)`` for every ``x`` in the box.
    ``constants``: ``(A, B0, gamma)`` of another block ``W^V`` (exact rationals or floats).
    """
    _check(tm, mk, value)
    xs = [iv.mpf(list(p)) if isinstance(p, (tuple, list)) else iv.mpf(p) for p in point]
    if len(xs) != (1 if value == "block" else 2):
        raise ValueError(f"point must have {1 if value == 'block' else 2} coordinates for value={value!r}")
    return _evaluate(xs, tm, _setup(tm, mk, value, constants), value)


@dataclass
class IntervalCertificate:
    """Rigorous enclosure ``lower <= min_box L <= upper`` of the attention optimum (SPEC §4.3).

    Attributes: ``lower``, ``upper``, ``gap = upper - lower``, ``converged`` (``gap <= tol``),
    ``method``, ``n_boxes`` (boxes evaluated), ``argmin`` (a box, one ``(low, high)`` per variable,
    enclosing every global minimiser in the search box), ``x_best`` (the point attaining ``upper``),
    ``variables``, ``box``, ``tol``.
    """

    lower: float
    upper: float
    gap: float
    converged: bool
    n_boxes: int
    argmin: tuple
    x_best: tuple
    variables: tuple
    box: tuple
    tol: float
    method: str = "interval-branch-and-bound"
    info: dict = field(default_factory=dict)

    def contains(self, value: float) -> bool:
        """``lower <= value <= upper``."""
        return self.lower <= value <= self.upper

    def as_dict(self) -> dict:
        """JSON-ready dict (for ``SolveResult.info["certificate"]``)."""
        return {
            "method": self.method,
            "lower": self.lower,
            "upper": self.upper,
            "gap": self.gap,
            "converged": self.converged,
            "n_boxes": self.n_boxes,
            "argmin": [list(b) for b in self.argmin],
            "x_best": list(self.x_best),
            "variables": list(self.variables),
            "box": [list(b) for b in self.box],
            "tol": self.tol,
            **self.info,
        }


def _enclose(box, tm, cst, value):
    """Interval enclosure of ``L`` and its gradient on ``box`` (forward-mode AD on intervals)."""
    n = len(box)
    X = [iv.mpf([lo, hi]) for lo, hi in box]
    return _evaluate([_Dual(x, [int(i == j) for j in range(n)]) for i, x in enumerate(X)], tm, cst, value), X


def _monotone_face(box, grad):
    """Where ``dL/dx_i`` has one sign on the box, the minimum lies on the lower (> 0) or upper (< 0)
    face: replace that side by the face."""
    out = []
    for (lo, hi), g in zip(box, grad):
        g = iv.mpf(g)
        out.append((lo, lo) if g.a > 0 else (hi, hi) if g.b < 0 else (lo, hi))
    return tuple(out)


def _bound(box, tm, cst, value, offset):
    """``(lower, upper_at_centre, centre, smear, box)`` of the loss on ``box``.

    The box is first reduced to a face along every monotone direction (:func:`_monotone_face`:
    ``min_box L`` is unchanged). Lower bound: the better of the natural extension and the mean-value
    form; ``smear_i = max |dL/dx_i| * width_i`` steers the bisection.
    """
    F, X = _enclose(box, tm, cst, value)
    face = _monotone_face(box, F.der)
    if face != box:
        box = face
        F, X = _enclose(box, tm, cst, value)
    c = [0.5 * (lo + hi) for lo, hi in box]
    Fc = _evaluate([iv.mpf(ci) for ci in c], tm, cst, value) + offset
    mv = Fc + sum((g * (x - ci) for g, x, ci in zip(F.der, X, c)), iv.mpf(0))
    lower = max(_down((F.val + offset).a), _down(mv.a))
    mags = (max(abs(float(iv.mpf(g).a)), abs(float(iv.mpf(g).b))) for g in F.der)
    smear = tuple(m * (hi - lo) for m, (lo, hi) in zip(mags, box))
    return lower, _up(Fc.b), tuple(c), smear, box


def _split(box, smear):
    """Bisect along the side with the largest smear ``|dL/dx_i| width_i`` (the mean-value form's excess)."""
    i = max(range(len(box)), key=lambda k: (smear[k], box[k][1] - box[k][0]))
    lo, hi = box[i]
    mid = 0.5 * (lo + hi)
    left, right = list(box), list(box)
    left[i], right[i] = (lo, mid), (mid, hi)
    return tuple(left), tuple(right), hi - lo


def interval_certificate(
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    box=None,
    tol: float = 1e-9,
    max_boxes: int = 20_000,
    constants=None,
    offset: float = 0.0,
    engine: str = "numpy",
    x0=None,
) -> IntervalCertificate:
    """Rigorous lower and upper bounds on ``min L`` over a search box (SPEC §4.3; module docstring).

    Parameters
    ----------
    tm, mk : TopicModel, Masking
        uniform-tau prior; ``p_m > 0`` and ``a > 0``.
    value : {"block", "identity"}
        Frozen ``W^V``: block (variable ``log K``) or identity (variables ``alpha, beta``).
    box : sequence of (low, high), optional
        Default :data:`DEFAULT_BOXES` (the grids of ``optimal_attention``); coordinates in [-700, 700].
    tol : float
        Target gap ``upper - lower`` (> 0).
    max_boxes : int
        Evaluation budget; when reached the certificate is returned with ``converged = False``.
    constants : (A, B0, gamma), optional
        Another block ``W^V`` (``value="block"``).
    offset : float
        Added to the loss (testing hook: a wrong offset must make a comparison with the float
        optimum fail).
    engine : {"numpy", "mpmath"}
        ``"numpy"`` (default): vectorised outward-rounded intervals with a second-order bound at the
        float minimiser (:mod:`._interval_vec`; the gap closes to rounding level). ``"mpmath"``: the
        scalar ``mpmath.iv`` reference (natural and mean-value forms, best-first).
    x0 : sequence of float, optional
        numpy engine: the float minimiser to expand around (default: found by
        :func:`._interval_vec.float_minimiser`); it only steers the search, the bounds are rigorous
        for any ``x0`` in the box.
    """
    _check(tm, mk, value)
    box = _check_box(DEFAULT_BOXES[value] if box is None else box, value)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    max_boxes = check_int("max_boxes", max_boxes, low=1)
    offset = check_real("offset", offset)
    check_choice("engine", engine, ("numpy", "mpmath"))
    x0 = _check_x0(x0, box)
    if engine == "numpy":
        lower, upper, x_best, n_boxes, argmin, info = _numpy_engine(
            tm, mk, value, box, constants, offset, tol, max_boxes, x0
        )
    else:
        lower, upper, x_best, n_boxes, argmin, info = _mpmath_engine(
            tm, mk, value, box, constants, offset, tol, max_boxes
        )
    gap = upper - lower
    return IntervalCertificate(
        lower=lower,
        upper=upper,
        gap=gap,
        converged=gap <= tol,
        n_boxes=n_boxes,
        argmin=argmin,
        x_best=x_best,
        variables=("logK",) if value == "block" else ("alpha", "beta"),
        box=box,
        tol=tol,
        info=info,
    )


def _check_x0(x0, box):
    if x0 is None:
        return None
    try:
        x = tuple(float(c) for c in x0)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"x0 must be a sequence of {len(box)} floats, got {x0!r}") from exc
    if len(x) != len(box) or not all(lo <= c <= hi for c, (lo, hi) in zip(x, box)):
        raise ValueError(f"x0 must be a point of the box {box!r} ({len(box)} coordinates), got {x0!r}")
    return x


def _mpmath_engine(tm, mk, value, box, constants, offset, tol, max_boxes):
    cst = _setup(tm, mk, value, constants)
    heap, upper, x_best, n_boxes = _branch_and_bound(box, tm, cst, value, iv.mpf(offset), tol, max_boxes)
    live = [b for lo, _, b, _ in heap if lo <= upper]
    lower = min((lo for lo, _, _, _ in heap), default=upper)
    argmin = tuple((min(b[i][0] for b in live), max(b[i][1] for b in live)) for i in range(len(box)))
    return lower, upper, x_best, n_boxes, argmin, {"n_live_boxes": len(live), "iv_prec": iv.prec, "engine": "mpmath"}


def _numpy_engine(tm, mk, value, box, constants, offset, tol, max_boxes, x0):
    from . import _interval_vec as vec

    cst = _setup(tm, mk, value, constants, make=vec.ivec_exact)
    if not all(math.isfinite(c.lo) and math.isfinite(c.hi) for c in cst.values() if isinstance(c, vec.IVec)) or not (
        math.isfinite(vec.constants_range(cst))
    ):  # constants beyond float range (e.g. eta ~ 1e-308): the mpmath engine has an unbounded exponent
        out = _mpmath_engine(tm, mk, value, box, constants, offset, tol, max_boxes)
        out[-1]["engine"] = "mpmath (numpy fallback: constants beyond float range)"
        return out
    if x0 is None:
        x0 = tuple(float(c) for c in vec.float_minimiser(box, tm, cst, value))
    lower, upper, x_best, n_boxes, (lo, hi) = vec.branch_and_bound(
        box, tm, cst, value, offset=offset, tol=tol, max_boxes=max_boxes, x0=x0
    )
    argmin = tuple((float(lo[:, i].min()), float(hi[:, i].max())) for i in range(len(box)))
    info = {"n_live_boxes": len(lo), "engine": "numpy", "x0": list(x0)}
    return lower, upper, tuple(float(c) for c in x_best), n_boxes, argmin, info


def _branch_and_bound(box, tm, cst, value, off, tol, max_boxes):
    """Best-first bisection; returns ``(heap of (lower, seq, box, smear), upper, x_best, n_boxes)``."""
    lower, upper, x_best, smear, box = _bound(box, tm, cst, value, off)
    heap, n_boxes, seq = [(lower, 0, box, smear)], 1, 1
    while n_boxes + 2 <= max_boxes and upper - heap[0][0] > tol:  # a split evaluates two children
        entry = heapq.heappop(heap)
        left, right, width = _split(entry[2], entry[3])
        if width <= 1e-14 * max(1.0, max(abs(lo) + abs(hi) for lo, hi in entry[2])):
            heapq.heappush(heap, entry)  # a point or too thin to refine in float coordinates
            break
        for child in (left, right):
            lo_c, up_c, c, sm, child = _bound(child, tm, cst, value, off)
            n_boxes += 1
            if up_c < upper:
                upper, x_best = up_c, c
            if lo_c <= upper:
                heapq.heappush(heap, (lo_c, seq, child, sm))
                seq += 1
    return heap, upper, x_best, n_boxes
