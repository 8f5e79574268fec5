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
of the bound, the loss outside is not). :func:`global_certificate` covers the whole line / plane:
the same branch and bound on a compact chart in which the loss is rational (SPEC §7, whole-domain
certificate). ``argmin`` touching a side of the box means the minimum over
the box may be on that side (the optimum at or beyond the box); ``optimal_attention`` then enlarges
the box, and reports a bound on the box (status 3) when the argmin still touches it at the cap.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np
from mpmath import iv

from ..._validate import check_choice, check_int, check_real
from ...models import Masking, TopicModel, check_models
from . import _interval_vec as vec
from ._interval_loss import COMPACT, _down, _Dual, _evaluate, _setup, _up

__all__ = ["IntervalCertificate", "interval_certificate", "interval_loss", "global_certificate", "DEFAULT_BOXES"]

#: Default search boxes: the grids of :func:`theorycheck.solvers.optimal_attention`.
DEFAULT_BOXES = {"block": ((-30.0, 60.0),), "identity": ((-10.0, 40.0), (-40.0, 20.0))}


# =============================================================================== public API
def _check(tm, mk, value):
    check_models(tm, mk)
    check_choice("value", value, ("block", "identity"))
    if tm.prior != "uniform-tau":  # check_models: the paper's TopicModel
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
    #: ``(lo, hi)`` arrays ``(N, n)`` of the boxes left with ``lower <= upper`` (their hull is ``argmin``); not
    #: part of :meth:`as_dict`
    live: tuple | None = field(default=None, repr=False, compare=False)

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
    variables = ("logK",) if value == "block" else ("alpha", "beta")
    return _run_engine(tm, mk, value, box, constants, offset, tol, max_boxes, engine, x0, variables)


def _run_engine(tm, mk, value, box, constants, offset, tol, max_boxes, engine, x0, variables, method=None,
                extra=None) -> IntervalCertificate:  # fmt: skip
    """Branch and bound on ``box`` with ``engine`` and the certificate of its result; ``extra(argmin, x_best)``
    returns entries added to ``info`` (the whole-domain chart's)."""
    if engine == "numpy":
        out = _numpy_engine(tm, mk, value, box, constants, offset, tol, max_boxes, x0)
    else:
        out = _mpmath_engine(tm, mk, value, box, constants, offset, tol, max_boxes)
    lower, upper, x_best, n_boxes, argmin, info = out
    live = info.pop("_live", None)
    if extra is not None:
        info.update(extra(argmin, x_best))
    cert = make_certificate(lower, upper, n_boxes, argmin, x_best, variables, box, tol, info, method)
    cert.live = live
    return cert


def make_certificate(lower, upper, n_boxes, argmin, x_best, variables, box, tol, info, method=None):
    """An :class:`IntervalCertificate` (``gap = upper - lower``, ``converged = gap <= tol``)."""
    gap = upper - lower
    kw = {} if method is None else {"method": method}
    return IntervalCertificate(lower=lower, upper=upper, gap=gap, converged=gap <= tol, n_boxes=n_boxes,
                               argmin=argmin, x_best=x_best, variables=variables, box=box, tol=tol, info=info,
                               **kw)  # fmt: skip


def global_certificate(
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    tol: float = 1e-9,
    max_boxes: int = 20_000,
    constants=None,
    offset: float = 0.0,
    engine: str = "numpy",
    x0=None,
) -> IntervalCertificate | None:
    """Rigorous bounds ``lower <= inf L <= upper`` over the whole domain: ``log K in R`` (block) or
    ``(alpha, beta) in R^2`` (identity) (SPEC §7, whole-domain certificate).

    The loss is a rational function of a compact chart (``u = K/(K + k) in [0, 1]`` for the block
    ``W^V``; ``(u, w) in [0, 1]^2``, the barycentric weights of the identity case, see
    :func:`._interval_loss._identity_loss_uw`), continuous on the closed square; the open square is the
    image of the whole line / plane, so ``inf`` over the domain equals ``min`` over the closed square.
    The same branch and bound as :func:`interval_certificate` runs on the square (only ``+ - * /``:
    no ``exp`` enclosure is involved). ``argmin`` (chart coordinates) holds every minimiser of the
    closed square; ``info["at_infinity"]`` is True when a face of the square (a limit at infinity) may hold the
    infimum below the best finite point by more than ``tol``, decided per face by comparing the limits with the
    interior bound (:func:`_faces_at_infinity`, ``info["faces"]``); ``info["argmin_original"]`` maps the argmin
    back (``log K`` or ``(alpha, beta)`` ranges,
    ``+-inf`` at the edges). ``x0``: a point of the original coordinates to expand around (the float
    optimum). Returns ``None`` when the chart is degenerate (``1 - rho v = 0``: the context holds only
    the query topic's words, the loss does not depend on the scores).
    """
    _check(tm, mk, value)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    max_boxes = check_int("max_boxes", max_boxes, low=1)
    offset = check_real("offset", offset)
    check_choice("engine", engine, ("numpy", "mpmath"))
    chart = next(c for c, v in COMPACT.items() if v == value)
    cst_f = _setup(tm, mk, chart, constants)
    if "k_in" not in cst_f:
        return None
    k, box = float(cst_f["k_in"].mid), ((0.0, 1.0),) if value == "block" else ((0.0, 1.0), (0.0, 1.0))
    y0 = None if x0 is None else _to_chart(tuple(float(c) for c in x0), k, tm.v)

    def extra(argmin, x_best):
        return dict(
            domain="R" if value == "block" else "R^2",
            chart="u = K/(K + k)" if value == "block" else "(u, w): barycentric (e^a, (v-1) e^b, k)/sum",
            k=k,
            argmin_original=[list(b) for b in _from_chart_box(argmin, k, tm.v)],
            x_best_original=[c[0] for c in _from_chart_box(tuple((c, c) for c in x_best), k, tm.v)],
        )

    variables = ("u",) if value == "block" else ("u", "w")
    cert = _run_engine(tm, mk, chart, box, constants, offset, tol, max_boxes, engine, y0, variables,
                       "interval-branch-and-bound (compact chart, whole domain)", extra)  # fmt: skip
    n_free = 1 if value == "block" or tm.v == 1 else 2
    faces = _faces_at_infinity(tm, mk, chart, constants, offset, cert, n_free, max_boxes)
    cert.info["faces"] = faces
    cert.info["at_infinity"] = any(f["may_hold_infimum"] for f in faces.values())
    return cert


#: The chart's faces (the limits at infinity): name -> (axis, end).
FACES = {"u=0": (0, 0.0), "u=1": (0, 1.0), "w=0": (1, 0.0), "w=1": (1, 1.0)}


def _faces_at_infinity(tm, mk, chart, constants, offset, cert, n_free, max_boxes, slack=None) -> dict:
    """Which faces of the chart (limits at infinity) may hold the infimum (issue 36 item 2; SPEC §7).

    Decided by comparing the limits with the best finite point, not by the argmin's extent (a gap that closes on
    a large box leaves the argmin hull on the faces however the limits compare). A face the argmin does not touch
    holds no minimiser. For a touched face: when the best point found, ``x_best``, is finite (inside the open
    chart), the face may hold the infimum unless a rigorous lower bound of ``L`` over the face is at least
    ``upper - tol`` (a point evaluation for the block chart, a 1-d branch and bound along the face for the
    identity chart): then no limit is below that finite point by more than ``tol`` (a flat landscape counts as
    finite). When ``x_best`` lies on a face there is no finite point to compare with: every touched face is reported
    as possibly holding the infimum. Returns, per
    face, ``touched``, ``may_hold_infimum`` and ``lower`` (the face's lower bound, ``None`` when not computed).
    ``slack``: compare with ``upper - slack`` instead (0: a face may hold the infimum unless it is proven above
    every value the finite point attains, the strict test of :mod:`._identity_beta`).
    """
    finite = all(0.0 < c < 1.0 for c in cert.x_best[:n_free])
    threshold = cert.upper - (cert.tol if slack is None else slack)
    out = {}
    for name, (axis, end) in FACES.items():
        if axis >= n_free:
            continue
        lo, hi = cert.argmin[axis]
        touched = lo <= 0.0 if end == 0.0 else hi >= 1.0
        face_lower = None
        if touched and finite:
            face_lower = _face_lower(tm, mk, chart, constants, offset, axis, end, n_free, threshold, cert.tol,
                                     max_boxes)  # fmt: skip
        may = touched and (not finite or face_lower is None or face_lower < threshold)
        out[name] = {"touched": touched, "may_hold_infimum": may, "lower": face_lower}
    return out


def _face_lower(tm, mk, chart, constants, offset, axis, end, n_free, threshold, tol, max_boxes):
    """A rigorous lower bound of ``L + offset`` on the face ``{chart coordinate axis = end}``: ``>= threshold``
    when proven there, else the bound found. The numpy engine, or the mpmath one when a constant leaves the float
    range (as for the certificate itself)."""
    cst = _setup(tm, mk, chart, constants, make=vec.ivec_exact)
    if not all(math.isfinite(c.lo) and math.isfinite(c.hi) for c in cst.values() if isinstance(c, vec.IVec)) or not (
        math.isfinite(vec.constants_range(cst))
    ):
        face = [(0.5, 0.5)] * (1 if chart == "block-u" else 2)
        face[axis] = (end, end)
        if n_free == 2:
            face[1 - axis] = (0.0, 1.0)
        heap, upper, _, _ = _branch_and_bound(tuple(face), tm, _setup(tm, mk, chart, constants), chart,
                                              iv.mpf(offset), tol, max_boxes)  # fmt: skip
        return min((lo for lo, _, _, _ in heap), default=upper)
    if n_free == 1:  # the block chart (or the identity chart at v = 1, where w does not enter): a point
        pt = np.full((1, 1 if chart == "block-u" else 2), 0.5)
        pt[0, axis] = end
        return float(vec.evaluate(pt, pt, tm, cst, chart, order=0, offset=offset).lo[0])

    def on_face(xs):
        x = xs[0]
        fixed: vec.T2 | vec.IVec = vec.ivec_exact(end)
        if isinstance(x, vec.T2):
            fixed = vec.T2(fixed, [None], None if x.h is None else [None])
        return _evaluate([fixed, x] if axis == 0 else [x, fixed], tm, cst, chart)

    lower, _, _, _, (live_lo, _) = vec.branch_and_bound(
        ((0.0, 1.0),), None, None, on_face, offset=offset, tol=tol, max_boxes=max_boxes, x0=None, upper=threshold,
        desc="interval certificate, a face at infinity",
    )  # fmt: skip
    return threshold if len(live_lo) == 0 else float(lower)


def _to_chart(x, k, v):
    """Chart coordinates of a float point ``(log K,)`` or ``(alpha, beta)`` (clipped to [0, 1])."""
    if len(x) == 1:
        return (min(1.0, max(0.0, 1.0 / (1.0 + k * math.exp(-x[0])))),)
    P = math.exp(min(x[0], 700.0))
    Q = (v - 1) * math.exp(min(x[1], 700.0))
    u = P / (P + Q + k) if math.isfinite(P + Q) else (1.0 if P >= Q else 0.0)
    w = Q / (Q + k) if math.isfinite(Q) else 1.0
    return (min(1.0, max(0.0, u)), min(1.0, max(0.0, w)))


def _logit(y, k):
    """``log(k y/(1 - y))`` with the limits ``-inf`` at 0 and ``+inf`` at 1."""
    return -math.inf if y <= 0.0 else math.inf if y >= 1.0 else math.log(k * y / (1.0 - y))


def _from_chart_box(box, k, v):
    """Original-coordinate ranges of a chart box (float; reporting only): ``log K`` from ``u``;
    ``alpha = log(k u/((1-u)(1-w)))``, ``beta = log(k w/((v-1)(1-w)))``."""
    (u0, u1), rest = box[0], box[1:]
    if not rest:
        return ((_logit(u0, k), _logit(u1, k)),)
    w0, w1 = rest[0]
    if v == 1:
        return ((_logit(u0, k), _logit(u1, k)), (-math.inf, math.inf))
    # alpha increases in u and in w; beta increases in w only
    a_lo = _logit(u0, k) - (math.log1p(-w0) if w0 < 1.0 else -math.inf)
    a_hi = _logit(u1, k) - (math.log1p(-w1) if w1 < 1.0 else -math.inf)
    a_lo, a_hi = (-math.inf if math.isnan(a_lo) else a_lo), (math.inf if math.isnan(a_hi) else a_hi)
    return ((a_lo, a_hi), (_logit(w0, k / (v - 1)), _logit(w1, k / (v - 1))))


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
    arrays = tuple(np.array([[b[i][j] for i in range(len(box))] for b in live], float) for j in (0, 1))
    info = {"n_live_boxes": len(live), "iv_prec": iv.prec, "engine": "mpmath", "_live": arrays}
    return lower, upper, x_best, n_boxes, argmin, info


def _numpy_engine(tm, mk, value, box, constants, offset, tol, max_boxes, x0):
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
    info = {"n_live_boxes": len(lo), "engine": "numpy", "x0": list(x0), "_live": (lo, hi)}
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
