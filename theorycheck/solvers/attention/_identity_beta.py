"""The certified ``beta*`` of the identity-``W^V`` optimum and its sign (SPEC §4.3(b), §7; issue 36 item 4).

:func:`certified_beta_star` decides where the infimum of the identity-``W^V`` loss ``L(alpha, beta)`` over ``R^2``
lies, from rigorous bounds only (the float solver gives a starting point, nothing else):

1. The whole-domain certificate (:func:`._interval.global_certificate` on the compact chart ``(u, w) in [0, 1]^2``;
   ``w = Q/(Q + k)``, ``Q = (v - 1) e^beta``, depends on ``beta`` only and increases with it, ``beta = 0`` at
   ``w* = (v - 1)/(v - 1 + k)``): every minimiser of the closed square lies in its live boxes or on a face. A face
   is ruled out when a rigorous lower bound of ``L`` on it exceeds the certificate's ``upper`` (a value some point
   attains): the strict test of :func:`._interval._faces_at_infinity` (``slack = 0``).
2. **alpha -> +inf**: when the face ``u = 1`` (a single point: all attention on the query's own word) may hold the
   infimum and attains it within the certificate's gap (e.g. ``p_r = 0``: every query shows its own word or
   [MASK]), ``beta`` has no effect in that limit: ``kind = "alpha-infinity"``, ``beta* = -inf`` by convention
   (the float solver's), ``sign = -1``.
3. **Critical points** (:func:`_isolate`): an interior minimiser is a zero of the chart gradient (the chart is a
   diffeomorphism of the open square onto ``R^2``) with ``L <= upper``. The live boxes are split until each piece
   is dropped (its lower bound above ``upper``; a gradient component of one strict sign; or ``K(X) ∩ X`` empty,
   since every zero of the gradient in ``X`` lies in the Krawczyk image ``K(X) = x~ - Y g(x~) + (I - Y H(X))
   (X - x~)``: ``g``, ``H`` the interval gradient and Hessian of :mod:`._interval_vec`, ``Y ~ H(x~)^-1``, ``x~`` the
   midpoint) or proven to hold exactly one zero (``K(X)`` in the interior of ``X``; Krawczyk 1969, Moore, Kearfott
   and Cloud, *Introduction to Interval Analysis*, 2009, §8.2).
4. **Finite optimum** (no face open, one critical point): it is the unique global minimiser; ``X <- K(X) ∩ X``
   narrows its box to rounding level (about 1e-12 in ``beta``), mapped to ``(alpha, beta)`` (monotone maps,
   widened by ``1e-13 (1 + |x|)`` for the float logarithms).
5. **beta* = -inf** (``+inf``): no critical point, no box set aside, and only the face ``w = 0`` (``w = 1``) open:
   every global minimiser lies on that face, with ``alpha`` finite (the corners belong to the ruled-out faces
   ``u = 0, 1``).
6. Otherwise the sign is still certain when every critical point's box, every box set aside next to an open face
   (where the loss flattens towards its limit and no test closes) and every open face has ``beta`` of one sign (the
   faces ``u = 0``, ``u = 1`` span every ``beta``); else ``sign = 0`` (undecided).

``sign`` is ``-1`` (``beta* < 0``, ``-inf`` included), ``+1`` (``beta* > 0``) or ``0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..._validate import check_int, check_real
from ...models import Masking, TopicModel
from . import _interval_vec as vec
from ._interval import _faces_at_infinity, global_certificate
from ._interval_loss import _setup
from ._solve import optimal_attention

__all__ = ["BetaStar", "certified_beta_star"]

#: Narrowing steps ``X <- K(X) ∩ X`` after the Krawczyk proof (at most; they stop when the box stops shrinking).
N_NARROW = 10
#: Budget of boxes for isolating the critical point (:func:`_isolate`).
MAX_ISOLATE_BOXES = 4000
#: Width in ``w`` below which a box next to an open face ``w = 0`` or ``w = 1`` is set aside (:func:`_isolate`).
ASIDE_WIDTH = 2.0**-20


@dataclass(frozen=True)
class BetaStar:
    """The certified ``beta*`` of the identity-``W^V`` optimum (module docstring).

    ``beta``: the enclosure's midpoint (finite optimum), ``-inf`` / ``+inf`` (the limits ``beta -> -+inf``,
    proven; ``-inf`` also for ``alpha -> +inf`` by convention) or NaN (not decided); ``lower <= beta* <= upper``
    rigorously where ``kind == "finite"`` (both ``-+inf`` for a limit); ``alpha``: the enclosure of ``alpha*``
    (finite optimum); ``sign``: -1, +1 or 0 (undecided); ``kind``: ``"finite"``, ``"minus-infinity"``,
    ``"plus-infinity"``, ``"alpha-infinity"``, ``"sign only"`` or ``"undecided"``; ``proof``: how;
    ``L_lower <= inf L <= L_upper``.
    """

    beta: float
    lower: float
    upper: float
    sign: int
    kind: str
    proof: str
    L_lower: float
    L_upper: float
    alpha: tuple = (math.nan, math.nan)
    info: dict = field(default_factory=dict, compare=False)

    @property
    def width(self) -> float:
        """``upper - lower`` of the ``beta*`` enclosure (0 for the limits, NaN when not enclosed)."""
        return 0.0 if self.kind in ("minus-infinity", "plus-infinity", "alpha-infinity") else self.upper - self.lower


def certified_beta_star(tm: TopicModel, mk: Masking, *, tol: float = 1e-12, max_boxes: int = 200_000,
                        x0=None) -> BetaStar:  # fmt: skip
    """``beta*`` of the identity-``W^V`` (alpha, beta) optimum with a rigorous enclosure and sign (module docstring;
    SPEC §4.3(b), §7). ``v >= 2`` (at ``v = 1`` there is no other same-topic word). ``tol``, ``max_boxes``: the
    whole-domain certificate's (a narrow valley can take ~2e4 boxes). ``x0``: a float optimum to expand around
    (default: the float solver's)."""
    if tm.v < 2:
        raise ValueError(f"beta* needs v >= 2 (at v = 1 there is no other word of the query's topic), got v={tm.v}")
    tol = check_real("tol", tol, low=0.0, low_open=True)
    max_boxes = check_int("max_boxes", max_boxes, low=1)
    if x0 is None:
        x0 = _float_optimum(tm, mk)
    gc = global_certificate(tm, mk, "identity", tol=tol, max_boxes=max_boxes, x0=x0)
    if gc is None:
        return _undecided(math.nan, math.nan, "the chart is degenerate (1 - rho v = 0): L does not depend on beta")
    if not gc.converged or gc.live is None:
        return _undecided(gc.lower, gc.upper, f"the whole-domain certificate did not converge (gap {gc.gap:.3g})")
    faces = _faces_at_infinity(tm, mk, "identity-uw", None, 0.0, gc, 2, max_boxes, slack=0.0)
    open_faces = {name for name, f in faces.items() if f["may_hold_infimum"]}
    info = {"faces": faces, "n_boxes": gc.n_boxes, "n_live": len(gc.live[0]), "x0": list(x0)}
    if "u=1" in open_faces and _alpha_limit(tm, mk, gc):
        return BetaStar(-math.inf, -math.inf, -math.inf, -1, "alpha-infinity",
                        "the infimum is the limit alpha -> +inf (face u = 1), where beta has no effect; beta* = -inf "
                        "by convention", gc.lower, gc.upper, info=info)  # fmt: skip
    cst = _setup(tm, mk, "identity-uw", make=vec.ivec_exact)
    exact = _setup(tm, mk, "identity-uw", make=lambda x: x)
    w_star = Fraction(tm.v - 1) / (tm.v - 1 + exact["k_in"])
    if not math.isfinite(vec.constants_range(cst)):
        return _undecided(gc.lower, gc.upper, "constants beyond the float range")
    found, aside, n = _isolate(gc.live[0].copy(), gc.live[1].copy(), tm, cst, gc.upper, open_faces, w_star)
    info["isolate_boxes"] = n
    if found is None or aside is None:
        return _undecided(gc.lower, gc.upper, "isolating the critical points ran out of boxes")
    found = _merge(found, tm, cst)
    info.update(critical_points=len(found), set_aside=len(aside))
    if not found and not aside and open_faces in ({"w=0"}, {"w=1"}):
        plus = open_faces == {"w=1"}
        lim = math.inf if plus else -math.inf
        why = f"no critical point in the live boxes; only the face {sorted(open_faces)[0]} may hold the infimum"
        kind = "plus-infinity" if plus else "minus-infinity"
        return BetaStar(lim, lim, lim, 1 if plus else -1, kind, why, gc.lower, gc.upper, info=info)
    if len(found) == 1 and not open_faces:
        return _finite(tm, cst, gc, found[0], w_star, info)
    sign = _sign(found + aside, open_faces, w_star)
    kind = "sign only" if sign else "undecided"
    why = (f"{len(found)} critical point(s) within the bound, {len(aside)} box(es) next to the open faces "
           f"{sorted(open_faces)}")  # fmt: skip
    return BetaStar(math.nan, math.nan, math.nan, sign, kind, why, gc.lower, gc.upper, info=info)


def _float_optimum(tm, mk) -> tuple[float, float]:
    """The float solver's optimum (a starting point only: every bound above is rigorous whatever it is)."""
    r = optimal_attention(tm, mk, value="identity", options={"check_general": False})
    return float(r.alpha), float(r.beta)


def _alpha_limit(tm, mk, gc) -> bool:
    """Whether the limit ``alpha -> +inf`` (the chart's face ``u = 1``, a single point: all attention on the query's
    own word) attains the infimum within the certificate's gap: its value's upper end at most ``gc.upper``."""
    cst = _setup(tm, mk, "identity-uw", make=vec.ivec_exact)
    if not math.isfinite(vec.constants_range(cst)):
        return False
    pt = np.array([[1.0, 0.5]])
    return bool(vec.evaluate(pt, pt, tm, cst, "identity-uw", order=0).hi[0] <= gc.upper)


def _undecided(L_lower, L_upper, why):
    return BetaStar(math.nan, math.nan, math.nan, 0, "undecided", why, L_lower, L_upper)


def _sign(found, open_faces, w_star) -> int:
    """-1 / +1 when every place that may hold a minimiser (the isolated critical points' boxes, the open faces)
    has ``beta`` of one sign (``w`` below / above ``w*``, compared exactly), else 0."""
    if open_faces & {"u=0", "u=1"}:
        return 0  # those faces span every beta
    below = all(Fraction(float(hi[1])) < w_star for _, hi in found) and "w=1" not in open_faces
    above = all(Fraction(float(lo[1])) > w_star for lo, _ in found) and "w=0" not in open_faces
    return -1 if below else 1 if above else 0


# ----------------------------------------------------------------------------- finite optimum: Krawczyk
def _to_original(lo, hi, k, v):
    """``(alpha, beta)`` box holding the chart boxes ``[lo, hi]`` (``alpha`` increases in ``u`` and ``w``, ``beta``
    in ``w``), widened by ``1e-13 (1 + |x|)`` for the float logarithms; infinite at the faces."""

    def a(u, w):
        return math.log(k * u / ((1.0 - u) * (1.0 - w))) if 0.0 < u < 1.0 and w < 1.0 else (
            -math.inf if u <= 0.0 else math.inf)  # fmt: skip

    def b(w):
        return math.log(k * w / ((v - 1) * (1.0 - w))) if 0.0 < w < 1.0 else (-math.inf if w <= 0.0 else math.inf)

    u0, w0 = float(lo[:, 0].min()), float(lo[:, 1].min())
    u1, w1 = float(hi[:, 0].max()), float(hi[:, 1].max())
    box = [[a(u0, w0), a(u1, w1)], [b(w0), b(w1)]]
    for r in box:
        r[0] -= 1e-13 * (1.0 + abs(r[0])) if math.isfinite(r[0]) else 0.0
        r[1] += 1e-13 * (1.0 + abs(r[1])) if math.isfinite(r[1]) else 0.0
    return np.array(box)


def _entry(x):
    return x if x is not None else vec.ivec_exact(0)


def _krawczyk(lo, hi, tm, cst, value):
    """The Krawczyk images ``[Klo, Khi]`` (arrays ``(N, 2)``) of the boxes ``[lo, hi]`` and whether each lies in
    its box's interior (``K(X) = x~ - Y g(x~) + (I - Y H(X)) (X - x~)``, ``x~`` the midpoint, ``Y`` the float
    inverse of the Hessian there; NaN rows where that Hessian is singular)."""
    xm = 0.5 * lo + 0.5 * hi
    P = vec.evaluate(xm, xm, tm, cst, value, order=2)
    F = vec.evaluate(lo, hi, tm, cst, value, order=2)
    N = len(lo)
    hm = [np.broadcast_to(_entry(x).mid, (N,)) for x in P.h]
    det = hm[0] * hm[2] - hm[1] * hm[1]
    ok = np.isfinite(det) & (det != 0.0)
    det = np.where(ok, det, 1.0)
    Y = [[hm[2] / det, -hm[1] / det], [-hm[1] / det, hm[0] / det]]  # only steers: K(X) is an enclosure for any Y
    g = [_entry(P.g[i]) for i in range(2)]
    H = [[_entry(F.h[0]), _entry(F.h[1])], [_entry(F.h[1]), _entry(F.h[2])]]
    d = [vec.IVec(np.nextafter(lo[:, j] - xm[:, j], -np.inf), np.nextafter(hi[:, j] - xm[:, j], np.inf))
         for j in range(2)]  # fmt: skip
    Klo, Khi = np.empty((N, 2)), np.empty((N, 2))
    for i in range(2):
        y0, y1 = vec.IVec(Y[i][0]), vec.IVec(Y[i][1])
        acc = vec.IVec(xm[:, i]) - (g[0] * y0 + g[1] * y1)
        for j in range(2):
            acc = acc + ((1.0 if i == j else 0.0) - (H[0][j] * y0 + H[1][j] * y1)) * d[j]
        Klo[:, i], Khi[:, i] = np.broadcast_to(acc.lo, (N,)), np.broadcast_to(acc.hi, (N,))
    Klo[~ok], Khi[~ok] = np.nan, np.nan
    inside = ok & np.all((lo < Klo) & (Khi < hi), axis=1)
    return Klo, Khi, inside


def _isolate(lo, hi, tm, cst, upper, open_faces=frozenset(), w_star=None):
    """``(found, aside, n)``: boxes inside ``[lo, hi]`` (chart), each proven by Krawczyk to hold exactly one
    critical point, and boxes set aside next to an open face, that together hold every critical point of those
    boxes with ``L <= upper`` (``None`` past :data:`MAX_ISOLATE_BOXES`). A box is dropped when its lower bound
    exceeds ``upper``, when a gradient component has one strict sign on it, or when ``K(X) ∩ X`` is empty (every
    zero of ``g`` in ``X`` lies in ``K(X)``); kept (as ``K(X) ∩ X``) when ``K(X)`` lies in its interior; set aside
    when it touches an open face ``w = 0`` (``w = 1``), lies on that face's side of ``w*`` and is at most
    :data:`ASIDE_WIDTH` wide in ``w`` (where the loss flattens towards a limit at infinity, no test closes); else
    bisected along its widest side. All boxes of a round at once."""
    found, aside, n = [], [], 0
    while len(lo):
        n += len(lo)
        if n > MAX_ISOLATE_BOXES:
            return None, None, n
        F = vec.evaluate(lo, hi, tm, cst, "identity-uw", order=1)
        N = len(lo)
        keep = np.broadcast_to(F.v.lo, (N,)) <= upper
        for i in range(2):
            gi = _entry(F.g[i])
            keep &= ~((np.broadcast_to(gi.lo, (N,)) > 0.0) | (np.broadcast_to(gi.hi, (N,)) < 0.0))
        lo, hi = lo[keep], hi[keep]
        if not len(lo):
            break
        Klo, Khi, inside = _krawczyk(lo, hi, tm, cst, "identity-uw")
        empty = np.any(Khi < lo, axis=1) | np.any(Klo > hi, axis=1)
        for k in np.flatnonzero(inside):
            found.append((np.maximum(lo[k], Klo[k]), np.minimum(hi[k], Khi[k])))
        near = np.zeros(len(lo), bool)
        if w_star is not None:
            thin = hi[:, 1] - lo[:, 1] <= ASIDE_WIDTH
            if "w=0" in open_faces:
                near |= thin & (lo[:, 1] <= 0.0) & np.array([Fraction(float(x)) < w_star for x in hi[:, 1]], bool)
            if "w=1" in open_faces:
                near |= thin & (hi[:, 1] >= 1.0) & np.array([Fraction(float(x)) > w_star for x in lo[:, 1]], bool)
        near &= ~inside & ~empty
        aside += [(lo[k], hi[k]) for k in np.flatnonzero(near)]
        rest = ~inside & ~empty & ~near
        lo, hi = lo[rest], hi[rest]
        if not len(lo):
            break
        axis = np.argmax(hi - lo, axis=1)
        rows = np.arange(len(lo))
        mid = 0.5 * (lo[rows, axis] + hi[rows, axis])
        if np.any((mid <= lo[rows, axis]) | (mid >= hi[rows, axis])):
            return None, None, n  # too thin to split in floats
        h1, l2 = hi.copy(), lo.copy()
        h1[rows, axis] = mid
        l2[rows, axis] = mid
        lo, hi = np.vstack([lo, l2]), np.vstack([h1, hi])
    return found, aside, n


def _narrow(lo, hi, tm, cst):
    """``X <- K(X) ∩ X`` at most :data:`N_NARROW` times (every zero of ``g`` in ``X`` stays in it)."""
    for _ in range(N_NARROW):
        Klo, Khi, _ = _krawczyk(lo[None], hi[None], tm, cst, "identity-uw")
        nlo, nhi = np.fmax(lo, Klo[0]), np.fmin(hi, Khi[0])
        if np.any(nlo > nhi) or (np.array_equal(nlo, lo) and np.array_equal(nhi, hi)):
            break
        lo, hi = nlo, nhi
    return lo, hi


def _merge(found, tm, cst):
    """Isolated boxes that share a critical point on a common edge, as one box (Krawczyk on their hull); the list
    unchanged when the hull is not proven to hold a single one."""
    if len(found) < 2:
        return found
    H0, H1 = np.min([f[0] for f in found], 0), np.max([f[1] for f in found], 0)
    Klo, Khi, inside = _krawczyk(H0[None], H1[None], tm, cst, "identity-uw")
    return [(np.fmax(H0, Klo[0]), np.fmin(H1, Khi[0]))] if inside[0] else found


def _finite(tm, cst, gc, box, w_star, info):
    """Case 2 of the module docstring: the one critical point (every global minimiser) in ``box`` (chart)."""
    zlo, zhi = _narrow(box[0], box[1], tm, cst)
    if zlo[0] <= 0.0 or zhi[0] >= 1.0 or zlo[1] <= 0.0 or zhi[1] >= 1.0:
        return _undecided(gc.lower, gc.upper, "the critical point's box touches a face of the chart")
    X = _to_original(zlo[None], zhi[None], float(gc.info["k"]), tm.v)
    b0, b1 = float(X[1, 0]), float(X[1, 1])
    return BetaStar(0.5 * (b0 + b1), b0, b1, _sign([(zlo, zhi)], set(), w_star), "finite",
                    "Krawczyk: the unique critical point in the live boxes", gc.lower, gc.upper,
                    alpha=(float(X[0, 0]), float(X[0, 1])), info=info)  # fmt: skip
