"""The interval certificates of the general model's (alpha, beta) families (``options.certify="interval"``; SPEC §7,
§11.8): the label family over all of ``R^2``, the co-topic family over the search box.

:func:`attach_general_interval` adds to a structured-route result (:mod:`._structured`) the rigorous bounds of
:class:`._interval_label.LabelLoss` by the numpy branch and bound of :mod:`._interval_vec` on the compact chart
``(u, w) in [0, 1]^2`` (:func:`label_global_certificate`): ``lower <= inf L <= upper`` over **all** of
``(alpha, beta) in R^2``, and a chart box ``argmin`` holding every minimiser (``info["argmin_original"]``: its
``(alpha, beta)`` ranges, infinite at the edges). The search box of the float solver therefore does not limit the
statement: when the chart's argmin is finite and the solver's point is on its box (or worse than the chart's best
point by more than ``tol``), the chart's best point replaces it (``info["moved_to_box"]``).
:func:`label_box_certificate` is the same on a box of ``(alpha, beta)`` (original coordinates; slower: the level
sets run along ``alpha + beta``).

Outcomes: status 0 (``kind="certified optimum"``) iff the branch and bound converged (``gap <= tol``), its argmin is
off the square's edges (every global minimiser finite) and ``fun - lower <= tol``; status 3
(``"bound (infimum at infinity)"``) when the argmin touches an edge (the infimum may be a limit, e.g.
``beta -> -inf``; ``lower`` still bounds it, the returned point is finite); otherwise status 4 (``"not
certified"``, or the solver's failure status). The returned point is always a point of ``R^2`` and
``lower <= fun <= upper`` always holds (``fun`` is checked against the rigorous enclosure at the point).

Co-topic family (:func:`attach_cotopic_interval`; :class:`._interval_cotopic.CotopicLoss`, small models): every key
has its own weight ``e^{beta G_xy}``, so there is no finite chart of ``R^2``: the statement is over the solver's
search box ``B = [a0, a1] x [b0, b1]`` of ``(alpha, beta)`` (``options.box``, default ``(-60, 60)^2``). The branch and
bound runs in ``(u, beta) = (alpha + beta, beta)`` on ``[a0 + b0, a1 + b1] x [b0, b1]``, which holds the image of
``B``: the loss's valley ``alpha + beta = const``, ``beta -> -inf`` (the own word against the [MASK] key and the
unrelated words) then runs along an axis, and a box holding no point of ``B``'s image is discarded (value ``+inf``,
:attr:`._interval_cotopic.CotopicLoss.alpha_range`), so ``lower <= min_B L``. Status 0 (``"certified optimum on the
box"``) iff the gap closed, the argmin (mapped back to ``(alpha, beta)`` ranges) lies inside ``B`` off its edges and
``fun - lower <= tol``; status 3 (``"bound on the box"``) when it touches ``B``'s edge (the minimum over ``B`` may be
on its edge or beyond; ``lower`` bounds the minimum over ``B``); otherwise 4. When the branch and bound's best point
lies in ``B`` and beats the solver's by more than ``tol`` it replaces it.
"""

from __future__ import annotations

import math

import numpy as np

from ..._validate import check_int, check_real
from .._certify import NOT_CERTIFIED, ON_BOUNDARY, STATUS_MESSAGES, SUCCESS
from . import _interval_vec as vec
from ._interval import make_certificate
from ._interval_cotopic import CotopicLoss, check_cotopic_size
from ._interval_label import LabelLoss

__all__ = [
    "attach_general_interval",
    "check_general_certify",
    "cotopic_box_certificate",
    "label_box_certificate",
    "label_global_certificate",
]

#: The certificate's options for a general model (``certify_options``), with their defaults.
GENERAL_CERTIFY_OPTIONS = {"tol": 1e-9, "max_boxes": 20_000}
#: Largest |coordinate| of a box of :func:`label_box_certificate` (``e^{2 |x|}`` stays far inside the float range).
BOX_LIMIT = 300.0


def check_general_certify(g, opts, method, fam, value, loss) -> dict:
    """Refuse, before any work, what the general model's interval certificate does not cover (``ValueError``);
    return the certificate's options with their defaults."""
    where = "options.certify='interval' on a general topic model"
    if method == "lbfgs":
        raise ValueError(f"{where} certifies the (alpha, beta) label family, not unrestricted scores "
                         "(method='lbfgs'); use method='family'")  # fmt: skip
    if fam not in ("label", "co-topic"):
        fam_in = opts.family
        name = "co-topic" if fam_in is None else fam_in if isinstance(fam_in, str) else "(given matrices)"
        raise ValueError(f"{where} is implemented for options.family='label' and 'co-topic' on the structured route "
                         f"(co-topic: value='stage1'), not the family {name!r} with value={value!r}: a given matrix "
                         "family or another W^V has no structured loss")  # fmt: skip
    if loss != "squared":
        raise ValueError(f"{where} needs loss='squared', got loss={loss!r}")
    if g.prior != "uniform-tau":
        raise ValueError(f"{where} needs prior='uniform-tau' (the Dirichlet loss is a sampled estimate), "
                         f"got prior={g.prior!r}")  # fmt: skip
    if fam == "co-topic":
        check_cotopic_size(g)
    out = dict(GENERAL_CERTIFY_OPTIONS)
    for key, val in (opts.certify_options or {}).items():
        if key not in GENERAL_CERTIFY_OPTIONS:
            raise ValueError(f"{where}: certify_options[{key!r}] is not supported (supported: "
                             f"{sorted(GENERAL_CERTIFY_OPTIONS)}; the Arb re-check is for the paper's "
                             "model)")  # fmt: skip
        out[key] = val
    out["tol"] = check_real("certify_options['tol']", out["tol"], low=0.0, low_open=True)
    out["max_boxes"] = check_int("certify_options['max_boxes']", out["max_boxes"], low=1)
    return out


def _argmin(lo, hi, box):
    if len(lo) == 0:
        return tuple(tuple(b) for b in box)
    return tuple((float(lo[:, i].min()), float(hi[:, i].max())) for i in range(len(box)))


def label_box_certificate(LL: LabelLoss, box, tol, max_boxes, x0):
    """Rigorous ``lower <= min_box L <= upper`` of the label family over ``box`` of ``(alpha, beta)``."""
    box = tuple((float(lo), float(hi)) for lo, hi in box)
    if not all(-BOX_LIMIT <= lo < hi <= BOX_LIMIT for lo, hi in box):
        raise ValueError(
            f"box must be 2 (low, high) pairs with -{BOX_LIMIT:g} <= low < high <= {BOX_LIMIT:g}, got {box!r}"
        )
    x0 = np.clip(np.asarray(x0, float), [b[0] for b in box], [b[1] for b in box])
    lower, upper, x_best, n, (lo, hi) = vec.branch_and_bound(
        box, None, None, LL.original, offset=0.0, tol=tol, max_boxes=max_boxes, widest_if_unbounded=True, x0=x0
    )
    info = {"n_live_boxes": len(lo), "engine": "numpy (structured label loss)", "x0": x0.tolist()}
    return make_certificate(lower, upper, n, _argmin(lo, hi, box), tuple(float(c) for c in x_best),
                            ("alpha", "beta"), box, tol, info)  # fmt: skip


def to_chart(alpha, beta):
    """``(u, w)`` of ``(alpha, beta)``: ``w = 1/(1 + e^-beta)``, ``u = 1/(1 + e^-alpha + e^-(alpha+beta))``."""
    with np.errstate(over="ignore"):
        w = 1.0 / (1.0 + math.exp(min(-beta, 700.0)))
        u = 1.0 / (1.0 + math.exp(min(-alpha, 700.0)) + math.exp(min(-alpha - beta, 700.0)))
    return u, w


def _log_ratio(x, y):
    """``log(x / y)`` with ``+-inf`` at the ends."""
    return math.inf if y <= 0.0 else -math.inf if x <= 0.0 else math.log(x / y)


def from_chart_box(box):
    """Original ranges of a chart box (reporting only): ``beta = log(w/(1-w))``, ``alpha = log(u/((1-u) w))``
    (increasing in ``u``, decreasing in ``w``)."""
    (u0, u1), (w0, w1) = box
    return ((_log_ratio(u0, (1.0 - u0) * w1), _log_ratio(u1, (1.0 - u1) * w0)),
            (_log_ratio(w0, 1.0 - w0), _log_ratio(w1, 1.0 - w1)))  # fmt: skip


def label_global_certificate(LL: LabelLoss, tol, max_boxes, x0):
    """Rigorous ``lower <= inf_{R^2} L <= upper`` on the compact chart, or ``None`` when a key class has zero mass
    (the loss is then not continuous on the closed square)."""
    box = ((0.0, 1.0), (0.0, 1.0))
    y0 = np.array(to_chart(*x0))
    lower, upper, x_best, n, (lo, hi) = vec.branch_and_bound(
        box, None, None, LL.chart, offset=0.0, tol=tol, max_boxes=max_boxes, widest_if_unbounded=True, x0=y0
    )
    argmin = _argmin(lo, hi, box)
    info = {
        "n_live_boxes": len(lo),
        "engine": "numpy (structured label loss, chart)",
        "domain": "R^2",
        "chart": "(u, w): weights (u, (1-u) w, (1-u)(1-w)) = (e^(alpha+beta), e^beta, 1)/sum",
        "at_infinity": any(a <= 0.0 or b >= 1.0 for a, b in argmin),
        "argmin_original": [list(b) for b in from_chart_box(argmin)],
        "x_best_original": [b[0] for b in from_chart_box(tuple((c, c) for c in x_best))],
    }
    return make_certificate(lower, upper, n, argmin, tuple(float(c) for c in x_best), ("u", "w"), box, tol, info,
                            "interval-branch-and-bound (compact chart, whole domain)")  # fmt: skip


def _point_enclosure(value, x, sum_coords=False):
    """Rigorous enclosure of the loss at the point ``x = (alpha, beta)``; ``sum_coords``: ``value`` takes
    ``(alpha + beta, beta)`` (evaluated on the float interval holding the exact sum)."""
    lo = hi = np.asarray([x], float)
    if sum_coords:
        s = x[0] + x[1]
        lo = np.array([[np.nextafter(s, -np.inf), x[1]]])
        hi = np.array([[np.nextafter(s, np.inf), x[1]]])
    out = vec.evaluate(lo, hi, None, None, value, order=0)
    return float(out.lo[0]), float(out.hi[0])


def _move(res, x, ev):
    """Replace the solver's point by ``x`` (a point the branch and bound found better)."""
    r = ev(x[0], x[1], True)
    res.x, res.fun = np.array(x), r.value
    res.info.update(alpha=x[0], beta=x[1], coefficients=list(x), loss=r.value, loss_family=r.value,
                    moved_to_box=True, gap_to_uniform=res.info["loss_uniform"] - r.value)  # fmt: skip


def _check_point(value, x, fun, lower, sum_coords=False):
    """``lower <= fun`` and ``fun`` inside the rigorous enclosure at ``x`` (else an AssertionError: a bug)."""
    if not all(map(math.isfinite, x)):
        raise AssertionError(f"interval certificate: the returned point {x} is not a point of R^2")
    plo, phi = _point_enclosure(value, x, sum_coords)
    slack = 1e-12 * max(1.0, abs(fun))
    if not (plo - slack <= fun <= phi + slack and lower - slack <= fun):
        raise AssertionError(f"interval certificate contradicts the result: L = {fun!r}, enclosure at the point "
                             f"[{plo!r}, {phi!r}], lower = {lower!r}")  # fmt: skip


def _not_certified(res, gc, excess, why=""):
    status = res.status if res.status not in (SUCCESS, ON_BOUNDARY) else NOT_CERTIFIED
    msg = (f"Not certified by interval arithmetic: L* - lower bound = {excess:.3g} (tol {gc.tol:g}), gap "
           f"{gc.gap:.3g} after {gc.n_boxes} boxes (converged: {gc.converged}){why}; "
           f"solver: {res.message}")  # fmt: skip
    return status, "not certified", msg


def _record(res, status, kind, msg, gc, lower, upper, extra):
    res.status, res.message = status, msg
    res.info["at_boundary"] = status == ON_BOUNDARY
    res.certificate = {
        **(res.certificate or {}),
        "lower": lower,
        "upper": upper,
        "gap": upper - lower,
        "kind": kind,
        "certified": status == SUCCESS,
        **extra,
        "global": gc.as_dict(),
        "global_lower": gc.lower,
        "global_upper": gc.upper,
    }


def _factors(g, W):
    return (W.left, W.right) if hasattr(W, "left") else (np.asarray(W, float), np.eye(g.V1))


def attach_general_interval(res, g, mk, W, mask_keys, copts, ev, fam="label", box=None):
    """Add the interval certificate to the structured result ``res`` (module docstring): the whole-domain one of
    the label family, or the box one of the co-topic family (:func:`attach_cotopic_interval`, ``box`` the
    solver's search box); ``W``: the ``W^V`` the solver used (factors or dense), ``ev``: its float evaluator (for
    a moved point)."""
    if fam == "co-topic":
        return attach_cotopic_interval(res, g, mk, W, mask_keys, copts, ev, box)
    U, V = _factors(g, W)
    LL = LabelLoss(g, mk, U, V, bool(mask_keys))
    x = (float(res.x[0]), float(res.x[1]))
    gc = label_global_certificate(LL, copts["tol"], copts["max_boxes"], x)
    at_inf = gc.info["at_infinity"]
    xb = tuple(gc.info["x_best_original"])
    better = gc.converged and not at_inf and all(map(math.isfinite, xb)) and res.fun - gc.upper > gc.tol
    moved = better or (res.status == ON_BOUNDARY and gc.converged and not at_inf and all(map(math.isfinite, xb)))
    if moved:  # the chart's best point (finite) replaces the solver's: the box is enlarged to hold the optimum
        x = (float(xb[0]), float(xb[1]))
        _move(res, x, ev)
    _check_point(LL.original, x, res.fun, gc.lower)
    lower, upper = min(gc.lower, res.fun), max(gc.upper, res.fun)
    excess = res.fun - lower
    if gc.converged and at_inf:
        status, kind = ON_BOUNDARY, "bound (infimum at infinity)"
        msg = (f"{STATUS_MESSAGES[ON_BOUNDARY]} Interval certificate: the certified argmin touches the chart's edge "
               f"(original ranges {gc.info['argmin_original']}): the infimum over R^2 may be a limit at infinity; "
               "lower bounds it, the returned point is a finite point, not a certified optimum")  # fmt: skip
    elif gc.converged and excess <= gc.tol and (res.status == SUCCESS or moved):
        status, kind, msg = SUCCESS, "certified optimum", STATUS_MESSAGES[SUCCESS]
    else:
        why = (
            "; labels of a single word make the chart's corner (u, w) = (0, 1) a discontinuity (it carries the "
            "whole line alpha + beta = const), where the bound does not close"
            if LL.single_word_labels
            else ""
        )
        status, kind, msg = _not_certified(res, gc, excess, why)
    _record(res, status, kind, msg, gc, lower, upper, {
        "method": gc.method + " (structured label loss, SPEC §11.8)",
        "domain": "R^2",
        "argmin_interior": gc.converged and not at_inf,
        "argmin_original": gc.info["argmin_original"],
    })  # fmt: skip


def cotopic_box_certificate(CL: CotopicLoss, box, tol, max_boxes, x0):
    """Rigorous ``lower <= min_box L`` of the co-topic family over ``box`` of ``(alpha, beta)`` (module docstring):
    the branch and bound runs on the box ``[a0 + b0, a1 + b1] x [b0, b1]`` of ``(u, beta) = (alpha + beta, beta)``,
    which holds the box's image; ``info["argmin_original"]``: the ``(alpha, beta)`` ranges of its argmin,
    ``info["x_best_original"]``: its best point (``upper`` is the loss there, possibly outside ``box``)."""
    box = tuple((float(lo), float(hi)) for lo, hi in box)
    if not all(-BOX_LIMIT <= lo < hi <= BOX_LIMIT for lo, hi in box):
        raise ValueError(
            f"box must be 2 (low, high) pairs with -{BOX_LIMIT:g} <= low < high <= {BOX_LIMIT:g}, got {box!r}"
        )
    (a0, a1), (b0, b1) = box
    ubox = ((float(np.nextafter(a0 + b0, -np.inf)), float(np.nextafter(a1 + b1, np.inf))), (b0, b1))
    x0 = np.clip(np.asarray(x0, float), [a0, b0], [a1, b1])
    CL.alpha_range = (a0, a1)  # boxes of (u, beta) outside the box's image are discarded
    y0 = np.clip(np.array([x0[0] + x0[1], x0[1]]), [c[0] for c in ubox], [c[1] for c in ubox])
    lower, upper, y_best, n, (lo, hi) = vec.branch_and_bound(
        ubox, None, None, CL.original, offset=0.0, tol=tol, max_boxes=max_boxes, widest_if_unbounded=True, x0=y0
    )
    argmin = _argmin(lo, hi, ubox)
    (u0, u1), (v0, v1) = argmin
    arg_orig = ((float(np.nextafter(u0 - v1, -np.inf)), float(np.nextafter(u1 - v0, np.inf))), (v0, v1))
    info = {
        "n_live_boxes": len(lo),
        "engine": "numpy (structured co-topic loss, (alpha + beta, beta))",
        "domain": "box",
        "box": [list(b) for b in box],
        "u_box": [list(b) for b in ubox],
        "argmin_original": [list(b) for b in arg_orig],
        "x_best_original": [float(y_best[0] - y_best[1]), float(y_best[1])],
        "x0": x0.tolist(),
    }
    return make_certificate(lower, upper, n, argmin, tuple(float(c) for c in y_best), ("alpha + beta", "beta"),
                            ubox, tol, info, "interval-branch-and-bound (co-topic, box)")  # fmt: skip


def attach_cotopic_interval(res, g, mk, W, mask_keys, copts, ev, box):
    """The co-topic family's certificate over the search ``box`` (:func:`cotopic_box_certificate`): status 0 iff
    the gap closed, the argmin is interior to the box and ``L* - lower <= tol``; 3 when the argmin touches the
    box's edge; else 4. Not over ``R^2``: every key has its own weight ``e^{beta G_xy}``, no finite chart."""
    U, V = _factors(g, W)
    CL = CotopicLoss(g, mk, U, V, bool(mask_keys))
    x = (float(res.x[0]), float(res.x[1]))
    gc = cotopic_box_certificate(CL, box, copts["tol"], copts["max_boxes"], x)
    (a0, a1), (b0, b1) = gc.info["box"]
    (al0, al1), (be0, be1) = gc.info["argmin_original"]
    interior = a0 < al0 and al1 < a1 and b0 < be0 and be1 < b1
    xb = tuple(gc.info["x_best_original"])
    inside = a0 <= xb[0] <= a1 and b0 <= xb[1] <= b1
    moved = gc.converged and inside and res.fun - gc.upper > gc.tol
    if moved:  # the float solver missed the box's minimum: the branch and bound's best point replaces it
        x = (float(xb[0]), float(xb[1]))
        _move(res, x, ev)
    _check_point(CL.original, x, res.fun, gc.lower, sum_coords=True)
    lower, upper = min(gc.lower, res.fun), max(gc.upper, res.fun)
    excess = res.fun - lower
    if gc.converged and not interior:
        status, kind = ON_BOUNDARY, "bound on the box"
        msg = (f"{STATUS_MESSAGES[ON_BOUNDARY]} Interval certificate: the certified argmin (alpha, beta) ranges "
               f"{gc.info['argmin_original']} touch the search box {gc.info['box']}: the minimum may be on its edge "
               "or beyond; lower bounds the minimum over the box (the co-topic family has no finite chart of R^2: "
               "every key has its own weight e^(beta G_xy))")  # fmt: skip
    elif gc.converged and excess <= gc.tol and (res.status == SUCCESS or moved):
        status, kind, msg = SUCCESS, "certified optimum on the box", STATUS_MESSAGES[SUCCESS]
    else:
        status, kind, msg = _not_certified(res, gc, excess, f" on the box {gc.info['box']}")
    _record(res, status, kind, msg, gc, lower, upper, {
        "method": gc.method + " (structured co-topic loss, SPEC §11.8)",
        "domain": "box",
        "box": gc.info["box"],
        "argmin_interior": gc.converged and interior,
        "argmin_original": gc.info["argmin_original"],
    })  # fmt: skip
