"""The interval certificates of the general model's (alpha, beta) families (``options.certify="interval"``; SPEC §7,
§11.8): the label family over all of ``R^2``, the co-topic family over the search box.

:func:`attach_general_interval` adds to a structured-route result (:mod:`._structured`) the rigorous bounds of
:class:`._interval_label.LabelLoss` by the branch and bound of :mod:`._interval_vec` on a split domain
(:func:`label_split_certificate`): a score box around the float optimum and five boxes with infinite ends
(:func:`outer_regions`), all bounded by the compiled score-coordinate evaluator (:mod:`._interval_scores`):
``lower <= inf L <= upper`` over **all** of ``(alpha, beta) in R^2``, and an ``argmin`` holding every minimiser
(``info["argmin_original"]``: its ``(alpha, beta)`` ranges, infinite where a live box has an infinite end). The
search box of the float solver therefore does not limit the statement: when the argmin is finite and the solver's
point is on its box, or whenever the branch and bound's best point is better (float loss), that point replaces it
(``info["moved_to_box"]``). :func:`label_global_certificate` (the compact chart ``(u, w) in [0, 1]^2``, the route
before) and :func:`label_box_certificate` (a box of ``(alpha, beta)``) are kept as references for the tests and
benchmarks.

When every label is a single word the loss depends on ``alpha + beta`` only and :func:`label_line_certificate` runs
on the line of ``s = alpha + beta`` instead (``kind="certified optimum (a line of minimisers)"``, status 0 when it
converges: the minimisers fill lines ``alpha + beta = s*``, ``info["argmin_scores"]`` the range of ``s*``).

Outcomes: status 0 (``kind="certified optimum"``) iff the branch and bound converged (``gap <= tol``), its argmin is
finite (every global minimiser finite) and ``fun - lower <= tol``; status 3 (``"bound (infimum at infinity)"``)
when a live box has an infinite end (the infimum may be a limit, e.g. ``beta -> -inf``; ``lower`` still bounds it,
the returned point is finite); otherwise status 4 (``"not certified"``, or the solver's failure status). The
returned point is always a point of ``R^2`` and ``lower <= fun <= upper`` always holds (``fun`` is checked against
the rigorous enclosure at the point).

Co-topic family (:func:`attach_cotopic_interval`; :class:`._interval_cotopic.CotopicLoss`, V1 <= 5000): every key
has its own weight ``e^{beta G_xy}``, so there is no finite chart of ``R^2``: the statement is over the solver's
search box ``B = [a0, a1] x [b0, b1]`` of ``(alpha, beta)`` (``options.box``, default ``(-60, 60)^2``). The branch and
bound runs in ``(u, beta) = (alpha + beta, beta)`` on ``[a0 + b0, a1 + b1] x [b0, b1]``, which holds the image of
``B``: the loss's valley ``alpha + beta = const``, ``beta -> -inf`` (the own word against the [MASK] key and the
unrelated words) then runs along an axis, and a box holding no point of ``B``'s image is discarded (value ``+inf``,
:attr:`._interval_cotopic.CotopicLoss.alpha_range`), so ``lower <= min_B L``. Status 0 (``"certified optimum on the
box"``) iff the gap closed, the argmin (mapped back to ``(alpha, beta)`` ranges) lies inside ``B`` off its edges and
``fun - lower <= tol``; status 3 (``"bound on the box"``) when it touches ``B``'s edge (the minimum over ``B`` may be
on its edge or beyond; ``lower`` bounds the minimum over ``B``); otherwise 4. When the branch and bound's best point
lies in ``B`` and beats the solver's (float loss) it replaces it.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import math
import warnings

import numpy as np

from ..._dask import is_client, resolve_executor
from ..._progress import bar as progress_bar
from ..._validate import TheorycheckWarning, check_choice, check_int, check_real
from .._certify import NOT_CERTIFIED, ON_BOUNDARY, STATUS_MESSAGES, SUCCESS
from . import _interval_vec as vec
from ._interval import make_certificate
from ._interval_checkpoint import check_checkpoint, open_checkpoint
from ._interval_cotopic import CotopicLoss, check_cotopic_size
from ._interval_label import LabelLoss
from ._interval_regions import run_regions
from ._interval_scores import score_loss, to_scores
from ._interval_vec import IVec

__all__ = [
    "attach_general_interval",
    "check_general_certify",
    "cotopic_box_certificate",
    "label_box_certificate",
    "label_global_certificate",
    "label_split_certificate",
    "outer_regions",
]

#: The certificate's options for a general model (``certify_options``), with their defaults (``radius=None``:
#: the scope's default of :data:`SCOPE_DEFAULTS`; ``max_boxes``: the whole-domain branch and bound's budget).
GENERAL_CERTIFY_OPTIONS = {
    "tol": 1e-9, "max_boxes": 20_000, "scope": "global", "radius": None, "max_pairs": 2_000_000, "checkpoint": None,
    "executor": None,
}  # fmt: skip
#: Per scope, the half-width of the score box around the float optimum: the inner region of
#: :func:`label_split_certificate` (global); ``None`` for the local scope: the radii :data:`LOCAL_RADII` in turn.
SCOPE_DEFAULTS: dict[str, dict[str, float | None]] = {"global": {"radius": 2.0}, "local": {"radius": None}}
#: Half-widths of the score boxes the local certificate tries in turn (:func:`label_local_certificate`).
LOCAL_RADII = (0.25, 0.05, 0.01, 2e-3, 4e-4, 8e-5)
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
    scope = check_choice("certify_options['scope']", out["scope"], tuple(SCOPE_DEFAULTS))
    for key, val in SCOPE_DEFAULTS[scope].items():
        out[key] = val if out[key] is None else out[key]
    out["max_boxes"] = check_int("certify_options['max_boxes']", out["max_boxes"], low=1)
    if out["radius"] is not None:
        out["radius"] = check_real("certify_options['radius']", out["radius"], low=0.0, low_open=True, high=BOX_LIMIT)
    out["max_pairs"] = check_int("certify_options['max_pairs']", out["max_pairs"], low=1)
    out["checkpoint"] = check_checkpoint(out["checkpoint"])
    if out["checkpoint"] is not None and (fam != "label" or scope != "global"):
        raise ValueError(f"{where}: certify_options['checkpoint'] records the regions of the label family's "
                         "whole-domain certificate (scope='global'); the others run in one piece")  # fmt: skip
    out["executor"] = _check_executor(out["executor"])
    if out["executor"] is not None and (fam != "label" or scope != "global"):
        raise ValueError(f"{where}: certify_options['executor'] runs the regions of the label family's "
                         "whole-domain certificate (scope='global') as tasks; the others run in one piece")  # fmt: skip
    pairs = math.comb(g.T, g.tau) * (g.V1 - 1)
    if fam == "co-topic" and scope == "local":
        raise ValueError(f"{where}: certify_options['scope']='local' is for the label family (its score-coordinate "
                         "evaluator); the co-topic family's certificate is over the search box")  # fmt: skip
    if fam == "label" and scope == "global" and pairs > out["max_pairs"]:
        raise ValueError(
            f"{where}: the whole-domain certificate evaluates all C(T, tau) x n = {pairs:,} (set, word) pairs on each "
            f"of its boxes (several hundred), above certify_options['max_pairs'] = {out['max_pairs']:,}; use "
            "certify_options={'scope': 'local'} (a certified local minimum on a score box around the optimum) or "
            "raise 'max_pairs'"
        )
    return out


def _check_executor(value):
    """``certify_options['executor']``: ``None``, a :class:`concurrent.futures.Executor` or a ``distributed.Client``
    (run through :func:`theorycheck._dask.resolve_executor`)."""
    if value is None or isinstance(value, cf.Executor) or is_client(value):
        return value
    hint = (
        " (for a scheduler address use theorycheck._dask.scheduler_executor(ADDRESS))" if isinstance(value, str) else ""
    )
    raise ValueError(
        "certify_options['executor'] must be None, a concurrent.futures.Executor or a distributed.Client, got "
        f"{value!r}{hint}"
    )


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


def outer_regions(q, floor=None):
    """Four boxes, with infinite ends, covering ``R^2`` minus the score box ``q = [s0, s1] x [b0, b1]`` exactly
    (SPEC §11.8): the half-plane ``beta <= b0`` in ``(s, beta)`` (frame ``"scores"``: as ``beta -> -inf`` the
    own word competes with the third class, through ``s``), the half-plane ``beta >= b1`` in ``(alpha, beta)``
    (frame ``"original"``: as ``beta -> +inf`` with the rest of its label, through ``alpha``), and in ``(s, beta)``
    the strip ``b0 <= beta <= b1`` with ``s <= s0`` and with ``s >= s1``. With ``floor < b0`` the first is cut in
    two: the band ``floor <= beta <= b0`` and the half-plane ``beta <= floor`` (five boxes). Every point of ``R^2``
    lies in ``q`` or in one of them (their shared edges are the same floats)."""
    (s0, s1), (b0, b1) = q
    inf = math.inf
    low = [("scores", ((-inf, inf), (-inf, b0)))]
    if floor is not None and floor < b0:
        low = [("scores", ((-inf, inf), (floor, b0))), ("scores", ((-inf, inf), (-inf, floor)))]
    return low + [("original", ((-inf, inf), (b1, inf))), ("scores", ((-inf, s0), (b0, b1))),
                  ("scores", ((s1, inf), (b0, b1)))]  # fmt: skip


def _scores_to_original(lo, hi):
    """``(alpha, beta)`` ranges of ``(s, beta)`` boxes: ``alpha = s - beta``."""
    return ((float(np.min(lo[:, 0] - hi[:, 1])), float(np.max(hi[:, 0] - lo[:, 1]))),
            (float(np.min(lo[:, 1])), float(np.max(hi[:, 1]))))  # fmt: skip


def _in_original(frame, lo, hi):
    """``(alpha, beta)`` ranges of a frame's boxes (:func:`outer_regions`)."""
    if frame == "scores":
        return _scores_to_original(lo, hi)
    return tuple((float(lo[:, i].min()), float(hi[:, i].max())) for i in range(2))


def _point_in_original(frame, x):
    """``(alpha, beta)`` of a frame's point (``alpha = s - beta`` in ``(s, beta)``)."""
    return (float(x[0] - x[1]) if frame == "scores" else float(x[0]), float(x[1]))


def label_line_certificate(LL: LabelLoss, tol, max_boxes, x0):
    """Rigorous ``lower <= inf_{R^2} L <= upper`` when every label is a single word (SPEC §7): no pair has an
    own-label class, so the class masses, and the loss, depend on ``s = alpha + beta`` only (``L(alpha, beta) =
    f(s)``) and ``inf_{R^2} L = inf_{s in R} f``. The branch and bound runs on the whole line of ``s`` (``beta``
    pinned at ``x0``'s: the score evaluator's ``beta`` enclosures are then points, and its ``beta`` derivatives
    exactly 0). ``info["argmin_scores"]``: the ``s`` range holding every minimiser of ``f``; the global minimisers
    of ``L`` are the points with ``alpha + beta`` in it, for every ``beta`` (a band around a line, unbounded in
    ``(alpha, beta)``)."""
    xs = np.array(to_scores(*x0))
    box = ((-math.inf, math.inf), (float(xs[1]), float(xs[1])))
    lower, upper, xb, n, (lo, hi) = vec.branch_and_bound(
        box, None, None, functools.partial(score_loss, LL), offset=0.0, tol=tol, max_boxes=max_boxes, x0=xs,
        one_point=True, monotone=True,
    )  # fmt: skip
    s_range = (float(lo[:, 0].min()), float(hi[:, 0].max())) if len(lo) else box[0]
    whole = ((-math.inf, math.inf),) * 2
    info = {
        "engine": "numba score-coordinate kernel, the line of s = alpha + beta (every label a single word)",
        "domain": "R^2",
        "line": True,
        "argmin_scores": list(s_range),
        "at_infinity": not all(map(math.isfinite, s_range)),
        "argmin_original": [list(b) for b in whole],
        "x_best_original": list(_point_in_original("scores", xb)),
    }
    method = "interval-branch-and-bound (the line of s = alpha + beta: every label a single word)"
    return make_certificate(lower, upper, n, whole, info["x_best_original"], ("alpha", "beta"), whole, tol, info,
                            method)  # fmt: skip


#: Depth below the float optimum's ``beta`` where the half-plane ``beta -> -inf`` starts (:func:`outer_regions`):
#: beyond it the own-label class carries ``e^-12 ~ 6e-6`` of its weight at the optimum, so the face form's natural
#: extension along ``beta`` is tight there; the band between it and the score box is bounded in ``beta``.
DEPTH = 12.0
#: Half-widths of the exclusion box tried around the float optimum, largest first (:func:`exclusion_box`).
EXCLUSION_RADII = (0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 5e-3, 2e-3, 1e-3)


def exclusion_box(f, xs, tol, radius, settle=0.01):
    """The largest box ``B = xs +- r`` (``r`` in :data:`EXCLUSION_RADII`, below ``radius``) whose second-order
    bound at ``xs`` already settles it (``lower(B) >= L(xs) - settle tol``): where the Hessian enclosure on ``B`` is
    positive definite this is ``L(xs) - g^T H^-1 g / 2`` for the tiny float gradient ``g``. The branch and bound then
    covers the score box minus ``B``, whose points are all at least ``r`` from the optimum: the boxes hugging the
    minimiser (``lower`` within ``settle tol`` of ``L*`` only when tiny) are never made. ``(box, lower, upper,
    n_tried)``; ``box`` is ``None`` when no radius settles (then ``lower = upper = inf``)."""
    n = 0
    for r in (r for r in EXCLUSION_RADII if r < radius):
        lo, hi = (xs - r)[None], (xs + r)[None]
        lower, up, _, _, _ = vec.box_bounds(lo, hi, None, None, f, xs, one_point=True)
        n += 1
        if lower[0] >= up[0] - settle * tol:
            return ((lo[0, 0], hi[0, 0]), (lo[0, 1], hi[0, 1])), float(lower[0]), float(up[0]), n
    return None, math.inf, math.inf, n  # nothing excluded: no bound yet (the minimum over an empty set)


def ring(q, b):
    """Four boxes covering the box ``q`` minus the box ``b`` inside it (the sides of ``q`` left and right of ``b``
    at full height, and above and below ``b`` at its width; shared edges are the same floats)."""
    (s0, s1), (b0, b1) = q
    (a0, a1), (c0, c1) = b
    return [((s0, a0), (b0, b1)), ((a1, s1), (b0, b1)), ((a0, a1), (b0, c0)), ((a0, a1), (c1, b1))]


def label_split_certificate(LL: LabelLoss, tol, max_boxes, x0, radius, checkpoint=None, executor=None, spec=None):
    """Rigorous ``lower <= inf_{R^2} L <= upper`` on a split domain (SPEC §7, §11.8).

    The score box ``Q`` of half-width ``radius`` around ``x0`` in ``(s, beta) = (alpha + beta, beta)``: its
    exclusion box (:func:`exclusion_box`) bounded in one evaluation, then the four boxes of :func:`ring` around it
    (``Q`` whole when no exclusion box settles). Then the five unbounded boxes of :func:`outer_regions` (the
    half-plane below ``Q`` cut at :data:`DEPTH` below ``x0``), each pruned against the best upper bound found so
    far. All by the score-coordinate evaluator (:mod:`._interval_scores`, the compiled kernel); a box with an
    infinite end is bounded by the natural extension and the face form (:func:`._interval_vec._face_form`) and cut
    at :func:`._interval_vec._split_point`; the monotonicity test discards bounded boxes without a critical point.
    ``argmin`` holds every global minimiser: the hull of the live boxes, in ``(alpha, beta)``
    (``info["argmin_original"]``; infinite where an unbounded box stays live). ``checkpoint``: ``None`` or a file
    path; each finished region is recorded there and replayed by a later call on the same problem
    (:mod:`._interval_checkpoint`). ``executor``: ``None`` (the regions in turn, in this process) or a
    :class:`concurrent.futures.Executor` (or a ``distributed.Client``) running them as tasks, with the same result
    bit for bit (:mod:`._interval_regions`; ``spec = (g, mk, U, V, mask_keys)``, the inputs of ``LL``, is what the
    tasks receive, else ``LL``'s tables)."""
    xs = np.array(to_scores(*x0))
    depth = max(radius, DEPTH)
    q = ((xs[0] - radius, xs[0] + radius), (xs[1] - radius, xs[1] + radius))
    stats: dict[str, int] = {}
    f = functools.partial(score_loss, LL)
    excl, lower, upper, n = exclusion_box(f, xs, tol, radius)
    if excl is not None:
        elo, ehi = np.array([[excl[0][0], excl[1][0]]]), np.array([[excl[0][1], excl[1][1]]])
        x_best, ranges = _point_in_original("scores", xs), [_scores_to_original(elo, ehi)]
        inner = [("scores", b) for b in ring(q, excl)]
    else:
        x_best, ranges, inner = (math.nan, math.nan), [], [("scores", q)]
    at_inf, per_region = False, [n]
    outer = outer_regions(q, xs[1] - depth)
    ckpt = open_checkpoint(checkpoint, LL, xs.tolist(), tol, radius, max_boxes, DEPTH, EXCLUSION_RADII)
    regions = inner + outer
    x0s = [xs if excl is None and k == 0 else None for k in range(len(regions))]  # the whole score box: expand at x0
    with resolve_executor(executor) as ex:  # a distributed.Client: its futures as concurrent.futures ones
        done = run_regions(LL, regions, x0s, tol=tol, max_boxes=max_boxes, n0=n, upper0=upper, ckpt=ckpt,
                           executor=ex, spec=spec, stats=stats)  # fmt: skip
    timings = []
    for (frame, _), (out, timing) in zip(regions, done):
        lo_r, up_r, xb_r, n_r, (rlo, rhi) = out
        timings.append(timing)
        n += n_r
        per_region.append(n_r)
        lower = min(lower, lo_r)
        if xb_r is not None and up_r <= upper:
            upper = up_r
            x_best = _point_in_original(frame, xb_r)
        if len(rlo):
            at_inf = at_inf or not (np.all(np.isfinite(rlo)) and np.all(np.isfinite(rhi)))
            ranges.append(_in_original(frame, rlo, rhi))
    argmin = tuple((min(r[i][0] for r in ranges), max(r[i][1] for r in ranges)) for i in range(2)) if ranges else q
    info = {
        "engine": "numba score-coordinate kernel (numpy reference), all of R^2 (structured label loss)",
        "domain": "R^2",
        "split": {
            "scores_box": [list(b) for b in q],
            "radius": radius,
            "depth": depth,
            "exclusion_box": None if excl is None else [list(b) for b in excl],
            "boxes_per_region": per_region,
            "checkpoint": None if ckpt is None else ckpt.summary(),
            "tasks": None if executor is None else timings,
            "regions": [[fr, [list(b) for b in box]] for fr, box in inner + outer],
        },
        "n_monotone": stats.get("n_monotone", 0),
        "at_infinity": at_inf,
        "argmin_original": [list(b) for b in argmin],
        "x_best_original": list(x_best),
    }
    method = "interval-branch-and-bound (split domain: score box + five unbounded boxes, whole domain)"
    whole = ((-math.inf, math.inf),) * 2
    return make_certificate(lower, upper, n, argmin, x_best, ("alpha", "beta"), whole, tol, info, method)


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


def label_local_certificate(LL: LabelLoss, tol, x0, radii):
    """A certified strict local minimum near ``x0`` by the interval Newton test on score boxes (SPEC §7).

    For each half-width ``r`` of ``radii`` in turn, ``B`` the score box ``|s - s_0| <= r``, ``|beta - beta_0| <= r``
    around ``x0`` (``s = alpha + beta``): the Hessian enclosure ``H(B)`` (:mod:`._interval_scores`) must be
    positive definite for every matrix in it (``h_ss > 0`` and ``h_ss h_bb - h_sb^2 > 0`` at their lower ends) and
    the Newton image ``N(B) = x_0 - H(B)^{-1} g(x_0)`` (``g(x_0)`` the gradient's enclosure at the point; Cramer's
    rule in interval arithmetic) must lie in ``B``'s interior. Then ``L`` is strictly convex on ``B``, ``B`` holds
    exactly one critical point ``x_c`` (in ``N(B)``), which minimises ``L`` over ``B`` and is a strict local
    minimiser on ``R^2``, and ``L(x_0) + g(x_0) . (x_c - x_0) <= L(x_c) <= L(x_0)`` (convexity): the bounds.
    ``info["interior"]``: the test passed (on the first radius that passes); ``n_boxes``: the boxes tried."""
    f = functools.partial(score_loss, LL)
    xs = np.array(to_scores(*x0))
    P = vec.evaluate(xs[None], xs[None], None, None, f, order=1)
    g = [IVec(x.lo, x.hi) for x in P.g]
    lower, upper = float(P.v.lo[0]), float(P.v.hi[0])
    tried, passed, newton, hess = [], False, None, None
    for r in progress_bar(radii, desc="interval Newton (score boxes)", unit="box", leave=False, delay=2.0):
        lo, hi = (xs - r)[None], (xs + r)[None]
        h11, h12, h22 = vec.evaluate(lo, hi, None, None, f, order=2).h
        det = h11 * h22 - h12.sq()
        tried.append(float(r))
        hess = [[float(h.lo[0]), float(h.hi[0])] for h in (h11, h12, h22)]
        if not (h11.lo[0] > 0 and det.lo[0] > 0):
            continue
        d = [(h22 * g[0] - h12 * g[1]) / det, (h11 * g[1] - h12 * g[0]) / det]  # H^{-1} g, every H in H(B)
        N = [IVec(xs[i]) - d[i] for i in range(2)]
        newton = [[float(N[i].lo[0]), float(N[i].hi[0])] for i in range(2)]
        if all(lo[0, i] < N[i].lo[0] and N[i].hi[0] < hi[0, i] for i in range(2)):
            passed = True
            step = IVec(0.0) - (g[0] * d[0] + g[1] * d[1])  # g . (x_c - x_0), x_c - x_0 in -d
            lower = float((P.v + step).lo[0])
            break
    r = tried[-1]
    q = ((xs[0] - r, xs[0] + r), (xs[1] - r, xs[1] + r))
    argmin = tuple(tuple(b) for b in newton) if passed and newton is not None else q
    lo_a = np.array([[a[0] for a in argmin]])
    hi_a = np.array([[a[1] for a in argmin]])
    info = {
        "engine": "numba (structured label loss, score coordinates)",
        "domain": "score box",
        "scores_box": [list(b) for b in q],
        "radius": r,
        "radii_tried": tried,
        "hessian_enclosure": hess,
        "newton_image": newton,
        "interior": passed,
        "at_infinity": False,
        "argmin_original": [list(b) for b in _scores_to_original(lo_a, hi_a)],
        "x_best_original": [float(x0[0]), float(x0[1])],
    }
    return make_certificate(lower, upper, len(tried), argmin, tuple(float(c) for c in xs), ("s", "beta"), q, tol,
                            info, "interval Newton on a score box around the optimum (local)")  # fmt: skip


def _move_if_better(res, gc, local, ev):
    """Replace the solver's point by the certificate's best (finite) point when that is better (its float loss
    below the solver's; issue 36 item 3), or (whole domain) when the solver stopped on its search box; returns
    whether it moved."""
    at_inf = gc.info["at_infinity"]
    xb = tuple(gc.info["x_best_original"])
    finite = all(map(math.isfinite, xb))
    ok = gc.converged and not at_inf and finite
    better = finite and ev(float(xb[0]), float(xb[1]), False).value < res.fun
    moved = better or (ok and not local and res.status == ON_BOUNDARY)
    if moved:
        _move(res, (float(xb[0]), float(xb[1])), ev)
    return moved


def _outcome(res, gc, LL, local, where, excess, moved):
    """``(status, kind, message)`` of the certified result (module docstring; SPEC §7)."""
    solver_ok = res.status == SUCCESS or moved
    if local and gc.converged and gc.info["interior"] and excess <= gc.tol and solver_ok:
        return SUCCESS, "certified local minimum", (
            f"{STATUS_MESSAGES[SUCCESS]} Interval certificate (scope='local'): L is strictly convex on {where} "
            "(interval Hessian positive definite), which holds exactly one critical point (interval Newton), a "
            "strict local minimum of L over R^2 whose value is within tol of L(x); the whole-domain certificate "
            "was not run")  # fmt: skip
    if not local and gc.converged and gc.info["at_infinity"]:
        return ON_BOUNDARY, "bound (infimum at infinity)", (
            f"{STATUS_MESSAGES[ON_BOUNDARY]} Interval certificate: the certified argmin reaches infinity (a live "
            f"box with an infinite end; original ranges {gc.info['argmin_original']}): the infimum over R^2 may be "
            "a limit at infinity; lower bounds it, the returned point is a finite point, not a certified "
            "optimum")  # fmt: skip
    if not local and gc.converged and gc.info.get("line") and excess <= gc.tol and solver_ok:
        s0, s1 = gc.info["argmin_scores"]
        return SUCCESS, "certified optimum (a line of minimisers)", (
            f"{STATUS_MESSAGES[SUCCESS]} Every label is a single word, so L depends on alpha + beta only: the global "
            f"minimisers fill lines alpha + beta = s* (every beta) with s* in [{s0:.12g}, {s1:.12g}]; the returned "
            "point is one of them")  # fmt: skip
    if not local and gc.converged and excess <= gc.tol and solver_ok:
        return SUCCESS, "certified optimum", STATUS_MESSAGES[SUCCESS]
    status = res.status if res.status not in (SUCCESS, ON_BOUNDARY) else NOT_CERTIFIED
    why = (
        "; a label of a single word beside labels of several words: as beta -> +inf the loss's valley runs along "
        "alpha = const for the words of the longer labels and along alpha + beta = const for the single-word ones, "
        "and the boxes with an infinite end, which follow one of the two, do not close the bound"
        if LL.single_word_labels and not local
        else f"; on no score box tried (half-widths {gc.info['radii_tried']}) was the interval Hessian positive "
        "definite with the Newton image inside the box"
        if local and not gc.info["interior"]
        else ""
    )
    scope = f" (scope='local', {where})" if local else ""
    return status, "not certified", (
        f"Not certified by interval arithmetic{scope}: L* - lower bound = {excess:.3g} (tol {gc.tol:g}), gap "
        f"{gc.gap:.3g} after {gc.n_boxes} boxes (converged: {gc.converged}){why}; solver: {res.message}")  # fmt: skip


def attach_general_interval(res, g, mk, W, mask_keys, copts, ev, fam="label", box=None):
    """Add the interval certificate to the structured result ``res`` (module docstring): for the label family the
    whole-domain one (``copts["scope"] == "global"``, :func:`label_split_certificate`) or the local one
    (:func:`label_local_certificate`); for the co-topic family the box one (:func:`attach_cotopic_interval`,
    ``box`` the solver's search box). ``W``: the ``W^V`` the solver used (factors or dense), ``ev``: its float
    evaluator (for a moved point)."""
    if fam == "co-topic":
        return attach_cotopic_interval(res, g, mk, W, mask_keys, copts, ev, box)
    U, V = _factors(g, W)
    LL = LabelLoss(g, mk, U, V, bool(mask_keys))
    x = (float(res.x[0]), float(res.x[1]))
    local = copts["scope"] == "local"
    if local:
        radii = LOCAL_RADII if copts["radius"] is None else (copts["radius"],)
        gc = label_local_certificate(LL, copts["tol"], x, radii)
    elif LL.every_label_single:
        for key in ("checkpoint", "executor"):
            if copts[key] is not None:
                warnings.warn(f"certify_options[{key!r}] is not used: every label is a single word, so the "
                              "certificate runs on the line of alpha + beta, in one piece", TheorycheckWarning,
                              stacklevel=2)  # fmt: skip
        gc = label_line_certificate(LL, copts["tol"], copts["max_boxes"], x)
    else:
        gc = label_split_certificate(LL, copts["tol"], copts["max_boxes"], x, copts["radius"], copts["checkpoint"],
                                     copts["executor"], (g, mk, U, V, bool(mask_keys)))  # fmt: skip
    moved = _move_if_better(res, gc, local, ev)
    # the compiled kernel in (alpha, beta) (the numpy reference LL.original costs ~40x more per pair at corpus size)
    _check_point(functools.partial(score_loss, LL, frame="original"), (float(res.x[0]), float(res.x[1])), res.fun,
                 gc.lower)  # fmt: skip
    lower, upper = min(gc.lower, res.fun), max(gc.upper, res.fun)
    q, where = gc.info.get("scores_box"), "R^2"
    if local:
        where = f"the score box alpha + beta in [{q[0][0]:.6g}, {q[0][1]:.6g}], beta in [{q[1][0]:.6g}, {q[1][1]:.6g}]"
    status, kind, msg = _outcome(res, gc, LL, local, where, res.fun - lower, moved)
    _record(res, status, kind, msg, gc, lower, upper, {
        "method": gc.method + " (structured label loss, SPEC §11.8)",
        "scope": copts["scope"],
        "domain": where,
        "argmin_interior": gc.converged and not gc.info["at_infinity"] and (gc.info["interior"] if local else True),
        "argmin_original": gc.info["argmin_original"],
    })  # fmt: skip
    if local:  # the bounds hold on the score box only: no whole-domain certificate
        res.certificate.update({"global": None, "global_lower": None, "global_upper": None, "local": gc.as_dict()})
    else:
        res.certificate["local"] = None


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
    moved = inside and ev(float(xb[0]), float(xb[1]), False).value < res.fun
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
