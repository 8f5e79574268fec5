"""The label family's certificate in score coordinates (SPEC §7, §11.8): the score-coordinate evaluator's enclosures
against the dense evaluator (values), the structured gradient (at points) and finite differences of it (Hessian on
boxes), also on boxes with infinite ends in both frames; the split domain's four unbounded boxes cover the plane
outside the score box; the half-line cuts of the branch and bound; the split-domain certificate
against the chart-only certificate and a fine grid; the local scope, its failure on a box flatter than tol, and the
refusal of a whole-domain certificate above ``max_pairs``."""

from __future__ import annotations

import numpy as np
import pytest
from _general_strategies import label_box_cases
from hypothesis import given, settings
from hypothesis import strategies as st
from test_interval_label import _dense, _model, _w

from theorycheck import Masking
from theorycheck.population import family_attention_loss
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_general import (
    exclusion_box,
    label_global_certificate,
    label_split_certificate,
    outer_regions,
    ring,
)
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import FRAMES, score_loss
from theorycheck.solvers.attention._interval_vec import (
    _bisect,
    _side_length,
    _split_point,
    box_bounds,
    branch_and_bound,
    evaluate,
)


def _grad_sb(g, mk, UV, mask_keys, s, b):
    """The structured float gradient in ``(s, beta)``: d/ds = d/dalpha, d/dbeta|_s = d/dbeta - d/dalpha."""
    r = family_attention_loss(s - b, b, UV, g, mk, family="label", mask_keys=mask_keys, grad=True)
    return np.array([r.dalpha, r.dbeta - r.dalpha])


@settings(max_examples=20, deadline=None)
@given(**label_box_cases(centre=((-6.0, 8.0), (-6.0, 6.0)), width=(0.0, 2.0), frac=(0.05, 0.95)))
def test_score_enclosures_contain_the_dense_values_and_derivatives(g, mk, mask_keys, kind, centre, width, frac):
    (U, V), W = _w(g, mk, kind)
    LL = LabelLoss(g, mk, U, V, mask_keys)
    lo = np.array([[centre[0] - width[0] / 2, centre[1] - width[1] / 2]])
    hi = np.array([[centre[0] + width[0] / 2, centre[1] + width[1] / 2]])
    pts = [lo[0] + np.array(f) * (hi[0] - lo[0]) for f in frac]
    F = evaluate(lo, hi, None, None, lambda xs: score_loss(LL, xs), order=2)
    for s, b in pts:
        d = _dense(g, mk, W, s - b, b, mask_keys)
        slack = 1e-12 * max(1.0, abs(d))
        assert F.v.lo[0] - slack <= d <= F.v.hi[0] + slack
        gr = _grad_sb(g, mk, (U, V), mask_keys, s, b)
        for i in range(2):
            assert F.g[i].lo[0] - 1e-10 <= gr[i] <= F.g[i].hi[0] + 1e-10
    # the Hessian enclosure holds a central difference of the exact gradient at an interior point (the
    # difference's truncation error is O(h^2) times the third derivative, far below the slack)
    s, b = pts[0]
    h = 1e-4 * max(1.0, width[0], width[1])
    if width[0] > 2 * h and width[1] > 2 * h:
        s, b = float(np.clip(s, lo[0, 0] + h, hi[0, 0] - h)), float(np.clip(b, lo[0, 1] + h, hi[0, 1] - h))
        col_s = (_grad_sb(g, mk, (U, V), mask_keys, s + h, b) - _grad_sb(g, mk, (U, V), mask_keys, s - h, b)) / (2 * h)
        col_b = (_grad_sb(g, mk, (U, V), mask_keys, s, b + h) - _grad_sb(g, mk, (U, V), mask_keys, s, b - h)) / (2 * h)
        for k, val in enumerate((col_s[0], 0.5 * (col_s[1] + col_b[0]), col_b[1])):
            slack = 1e-5 * max(1.0, abs(val))
            assert F.h[k].lo[0] - slack <= val <= F.h[k].hi[0] + slack, (k, F.h[k].lo, val, F.h[k].hi)
    # a point's enclosure is tight (SPEC §7: not for probabilities near the underflow threshold, where the
    # coefficients divide by a subnormal mass and the enclosures, still valid, are the whole line; a product of two
    # probabilities is such a mass once they are below sqrt(2.2e-308) ~ 1.5e-154: phi = 1.1e-256 off the diagonal,
    # T = 2, tau = 1, found by hypothesis, gives the whole line)
    p = pts[0]
    P = evaluate(p[None], p[None], None, None, lambda xs: score_loss(LL, xs), order=1)
    assert P.v.lo[0] <= P.v.hi[0]
    if np.min(g.phi[g.phi > 0]) > 1e-150:  # exact zeros are exact: only tiny positive entries widen
        assert P.v.hi[0] - P.v.lo[0] <= 1e-10


@settings(max_examples=200, deadline=None)
@given(
    q=st.tuples(st.floats(-30.0, 30.0), st.floats(0.0, 20.0), st.floats(-30.0, 30.0), st.floats(0.0, 20.0)),
    p=st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)),
    depth=st.one_of(st.none(), st.floats(0.0, 40.0)),
)
def test_outer_regions_cover_the_plane_outside_the_score_box(q, p, depth):
    """Four (or, with a floor below the score box, five) boxes with infinite ends cover the plane outside it."""
    s0, ds, b0, db = q
    box = ((s0, s0 + ds), (b0, b0 + db))
    regions = outer_regions(box, None if depth is None else b0 - depth)
    assert len(regions) == (5 if depth is not None and b0 - depth < b0 else 4)
    alpha, beta = p
    s = alpha + beta
    inside = box[0][0] <= s <= box[0][1] and box[1][0] <= beta <= box[1][1]
    coords = {"scores": (s, beta), "original": (alpha, beta)}
    covered = [f for f, ((a, b), (c, d)) in regions if a <= coords[f][0] <= b and c <= coords[f][1] <= d]
    assert inside or covered, (box, p, regions)


@settings(max_examples=200, deadline=None)
@given(
    q=st.tuples(st.floats(-30.0, 30.0), st.floats(0.1, 20.0), st.floats(-30.0, 30.0), st.floats(0.1, 20.0)),
    inner=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0)),
    p=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)),
)
def test_ring_covers_the_score_box_minus_the_exclusion_box(q, inner, p):
    """The four boxes of ``ring(q, b)`` lie in ``q`` and, with ``b``, cover it."""
    s0, ds, b0, db = q
    box = ((s0, s0 + ds), (b0, b0 + db))
    fa, fb, fc, fd = inner
    a0, a1 = sorted((s0 + fa * ds, s0 + fb * ds))
    c0, c1 = sorted((b0 + fc * db, b0 + fd * db))
    b = ((a0, a1), (c0, c1))
    x = (s0 + p[0] * ds, b0 + p[1] * db)
    boxes = [b, *ring(box, b)]
    for (lo1, hi1), (lo2, hi2) in boxes:
        assert s0 <= lo1 <= hi1 <= s0 + ds and b0 <= lo2 <= hi2 <= b0 + db
    assert any(lo1 <= x[0] <= hi1 and lo2 <= x[1] <= hi2 for (lo1, hi1), (lo2, hi2) in boxes)


@settings(max_examples=25, deadline=None)
@given(**label_box_cases(centre=((-4.0, 8.0), (-4.0, 4.0)), width=(0.01, 1.0), frac=(0.0, 1.0), n_points=1))
def test_boxes_the_monotonicity_test_discards_hold_no_critical_point(g, mk, mask_keys, kind, centre, width, frac):
    """A box flagged by the monotonicity test (the mean-value gradient enclosure excludes 0 in some variable): on a
    7 x 7 grid of the box the exact structured gradient keeps one strict sign in that variable."""
    (U, V), _ = _w(g, mk, kind)
    LL = LabelLoss(g, mk, U, V, mask_keys)
    lo = np.array([[centre[0] - width[0] / 2, centre[1] - width[1] / 2]])
    hi = np.array([[centre[0] + width[0] / 2, centre[1] + width[1] / 2]])
    *_, mono = box_bounds(lo, hi, None, None, lambda xs: score_loss(LL, xs), None, one_point=True)
    if not mono[0]:
        return
    grads = np.array([_grad_sb(g, mk, (U, V), mask_keys, s, b) for s in np.linspace(lo[0, 0], hi[0, 0], 7)
                      for b in np.linspace(lo[0, 1], hi[0, 1], 7)])  # fmt: skip
    assert any(np.all(grads[:, i] > 0) or np.all(grads[:, i] < 0) for i in range(2)), grads


def _score_box_case():
    """The small model's float optimum, stage-1 ``W^V``, label loss, optimum in scores and score box of half-width 2."""
    g, mk = _model(), Masking()
    r = optimal_attention(g, mk, options={"family": "label"})
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, W.left, W.right)
    xs = np.array([r.x[0] + r.x[1], r.x[1]])
    return g, mk, r, W, LL, xs, ((xs[0] - 2.0, xs[0] + 2.0), (xs[1] - 2.0, xs[1] + 2.0))


def test_monotonicity_test_and_exclusion_box_keep_the_bound():
    """The score box's branch and bound with and without the monotonicity test: both converge, their bounds
    overlap and hold the float optimum's value, and the test saves boxes. The exclusion box around the optimum is
    found, its bound holds a 21 x 21 grid of the dense loss in it, and it is settled against its centre's value."""
    g, mk, r, W, LL, xs, q = _score_box_case()
    f = lambda z: score_loss(LL, z)  # noqa: E731
    out = [branch_and_bound(q, None, None, f, offset=0.0, tol=1e-9, max_boxes=20_000, x0=xs, one_point=True,
                            monotone=m) for m in (False, True)]  # fmt: skip
    (lo0, up0, _, n0, _), (lo1, up1, _, n1, _) = out
    assert up0 - lo0 <= 1e-9 and up1 - lo1 <= 1e-9 and n1 < n0
    assert max(lo0, lo1) <= min(up0, up1) and max(lo0, lo1) <= r.fun + 1e-12
    box, lower, upper, _ = exclusion_box(f, xs, 1e-9, 2.0)
    assert box is not None and box[0][0] < xs[0] < box[0][1] and box[1][0] < xs[1] < box[1][1]
    assert lower >= upper - 1e-11 and lower <= r.fun + 1e-12
    grid = [_dense(g, mk, W, s - b, b, False) for s in np.linspace(*box[0], 21) for b in np.linspace(*box[1], 21)]
    assert min(grid) >= lower - 1e-12


def _end(side, f):
    """A finite point of ``side`` (``(lo, hi)``, possibly infinite) at fraction ``f`` in [0, 1), out along a
    half-line up to 60 from its end (the float structured gradient, the reference, overflows beyond a few
    hundred)."""
    lo, hi = side
    if np.isfinite(lo) and np.isfinite(hi):
        return lo + f * (hi - lo)
    far = 60.0 * f**3
    return lo + far if np.isfinite(lo) else (hi - far if np.isfinite(hi) else (2 * f - 1) * 60.0)


_SIDES = st.sampled_from(["finite", "up", "down", "line"])


@settings(max_examples=40, deadline=None)
@given(**label_box_cases(centre=((-8.0, 8.0), (-8.0, 8.0)), width=(0.0, 3.0), frac=(0.0, 0.999), n_points=4),
       frame=st.sampled_from(FRAMES), sides=st.tuples(_SIDES, _SIDES))  # fmt: skip
def test_enclosures_on_unbounded_boxes_contain_the_loss_and_its_gradient(g, mk, mask_keys, kind, centre, width,
                                                                         frac, frame, sides):  # fmt: skip
    """A box with infinite ends in either frame (``(s, beta)`` or ``(alpha, beta)``): the order-2 evaluation is
    finite, its value holds the dense loss and its gradient the structured gradient (in the frame's variables) at
    finite points of the box up to 60 out along its half-lines; the numpy engine's enclosures meet the kernel's."""
    (U, V), W = _w(g, mk, kind)
    LL = LabelLoss(g, mk, U, V, mask_keys)
    box = []
    for c, w, kind_ in zip(centre, width, sides):
        box.append({"finite": (c, c + w), "up": (c, np.inf), "down": (-np.inf, c), "line": (-np.inf, np.inf)}[kind_])
    lo, hi = np.array([[b[0] for b in box]]), np.array([[b[1] for b in box]])
    F = evaluate(lo, hi, None, None, lambda xs: score_loss(LL, xs, frame=frame), order=2)
    ref = evaluate(lo, hi, None, None, lambda xs: score_loss(LL, xs, engine="numpy", frame=frame), order=2)
    for a, b in [(F.v, ref.v), *zip(F.g, ref.g), *zip(F.h, ref.h)]:
        assert np.isfinite(a.lo[0]) and np.isfinite(a.hi[0])
        assert max(a.lo[0], b.lo[0]) <= min(a.hi[0], b.hi[0])
    # the branch and bound's lower bound of the box (natural extension, Taylor forms, the face form on a box with
    # an infinite side) is below the loss at every point of it
    lower = box_bounds(lo, hi, None, None, lambda xs: score_loss(LL, xs, frame=frame), None)[0][0]
    for f in frac:
        x1, x2 = (_end(box[i], f[i]) for i in range(2))
        alpha = x1 - x2 if frame == "scores" else x1
        d = _dense(g, mk, W, alpha, x2, mask_keys)
        slack = 1e-12 * max(1.0, abs(d))
        assert F.v.lo[0] - slack <= d <= F.v.hi[0] + slack, (box, (x1, x2), F.v, d)
        assert lower <= d + slack, (box, (x1, x2), lower, d)
        if frame == "scores":
            gr = _grad_sb(g, mk, (U, V), mask_keys, x1, x2)
        else:
            r = family_attention_loss(alpha, x2, (U, V), g, mk, family="label", mask_keys=mask_keys, grad=True)
            gr = np.array([r.dalpha, r.dbeta])
        for i in range(2):
            assert F.g[i].lo[0] - 1e-10 <= gr[i] <= F.g[i].hi[0] + 1e-10, (frame, box, (x1, x2), i, gr, F.g[i])


@pytest.mark.parametrize("frame", FRAMES)
def test_face_form_is_below_a_grid_across_the_finite_side(frame):
    """A box finite in the first variable (6 wide, its centre off the valley) and a half-line in beta, as in the
    outer regions: its lower bound (the face form: the centre face plus the gradient over the finite side) is below
    the loss on a grid across the finite side at several beta out along the half-line."""
    g, mk = _model(), Masking()
    r = optimal_attention(g, mk, options={"family": "label"})
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, W.left, W.right)
    x1 = r.x[0] + r.x[1] if frame == "scores" else r.x[0]
    lo, hi = np.array([[x1 - 1.0, -np.inf]]), np.array([[x1 + 5.0, r.x[1] - 2.0]])
    lower = box_bounds(lo, hi, None, None, lambda xs: score_loss(LL, xs, frame=frame), None)[0][0]
    assert np.isfinite(lower)
    for b in r.x[1] - 2.0 - np.array([0.0, 1.0, 5.0, 30.0]):
        for x in np.linspace(lo[0, 0], hi[0, 0], 61):
            alpha = x - b if frame == "scores" else x
            d = family_attention_loss(alpha, b, W, g, mk, family="label").value
            assert lower <= d + 1e-12, (frame, x, b, lower, d)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(-1e300, 1e300), w=st.floats(0.0, 1e6), side=_SIDES)
def test_half_lines_are_cut_at_a_finite_point_inside_them(a, w, side):
    """The branch and bound's cut of a side (:func:`_split_point`) is finite and inside it, the two children cover
    the parent exactly, and a half-line's length (:func:`_side_length`) is that of its bounded child."""
    lo, hi = {"finite": (a, a + w), "up": (a, np.inf), "down": (-np.inf, a), "line": (-np.inf, np.inf)}[side]
    lo_, hi_ = np.array([[lo, 0.0]]), np.array([[hi, 1.0]])
    m = float(_split_point(lo_[:, 0], hi_[:, 0])[0])
    assert np.isfinite(m) and lo <= m <= hi
    length = float(_side_length(lo_[:, 0], hi_[:, 0])[0])
    if side in ("up", "down"):
        assert length == abs(m - a) and length > 0 or abs(a) >= 1e300
    elif side == "line":
        assert length == np.inf and m == 0.0
    clo, chi = _bisect(lo_, hi_, np.array([[np.inf, 0.0]]))
    assert clo[0, 0] == lo and chi[1, 0] == hi and chi[0, 0] == clo[1, 0] == m
    assert np.all(clo[:, 1] == 0.0) and np.all(chi[:, 1] == 1.0)


@pytest.mark.parametrize("mask_keys", [False, True])
def test_split_certificate_agrees_with_the_chart_certificate_and_a_grid(mask_keys):
    g, mk = _model(), Masking()
    r = optimal_attention(g, mk, options={"family": "label", "mask_keys": mask_keys})
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, W.left, W.right, mask_keys)
    sc = label_split_certificate(LL, 1e-9, 20_000, r.x, 2.0)
    cc = label_global_certificate(LL, 1e-9, 20_000, r.x)
    assert sc.converged and cc.converged
    assert max(sc.lower, cc.lower) <= min(sc.upper, cc.upper) + 1e-12
    assert sc.lower <= r.fun + 1e-12 and r.fun - sc.lower <= 1e-9
    (a_lo, a_hi), (b_lo, b_hi) = sc.info["argmin_original"]
    assert a_lo <= r.x[0] <= a_hi and b_lo <= r.x[1] <= b_hi
    # outside the score box too: a coarse grid over a wide range never goes below the lower bound
    A, B = np.linspace(-20, 30, 26), np.linspace(-25, 25, 26)
    grid = [family_attention_loss(a, b, W, g, mk, family="label", mask_keys=mask_keys).value for a in A for b in B]
    assert min(grid) >= sc.lower - 1e-12


def test_one_point_per_box_gives_the_same_bound():
    """The score box's branch and bound with one point evaluation per box (the expansion point ``x0`` in its box,
    the centre elsewhere; the certificate's default) and with two (``x0`` clipped to each box, and the centre): both
    converge, their bounds overlap and both hold the float optimum's value."""
    g, mk, r, W, LL, xs, q = _score_box_case()
    out = []
    for one in (False, True):
        f = lambda z: score_loss(LL, z)  # noqa: E731
        out.append(branch_and_bound(q, None, None, f, offset=0.0, tol=1e-9, max_boxes=20_000, x0=xs, one_point=one))
    (lo0, up0, *_), (lo1, up1, *_) = out
    assert up0 - lo0 <= 1e-9 and up1 - lo1 <= 1e-9
    assert max(lo0, lo1) <= min(up0, up1) and lo1 <= r.fun + 1e-12 and lo0 <= r.fun + 1e-12


def test_local_scope_certifies_a_local_minimum():
    """Interval Newton on a score box: a strictly convex box holding exactly one critical point; its bounds hold the
    whole-domain certificate's optimum and the minimum of a fine grid of the box, and the Newton image (which holds
    the critical point) is within 1e-7 of the float optimum."""
    g, mk = _model(), Masking()
    opts = {"family": "label", "certify": "interval", "certify_options": {"scope": "local"}}
    r = optimal_attention(g, mk, options=opts)
    c = r.certificate
    assert r.status == 0 and c["kind"] == "certified local minimum" and c["scope"] == "local", r.message
    loc = c["local"]
    assert c["global"] is None and c["argmin_interior"] and loc["interior"] and loc["converged"]
    assert c["lower"] <= r.fun <= c["upper"] and c["gap"] <= 1e-9
    assert "scope='local'" in r.message and "whole-domain certificate was not run" in r.message
    full = optimal_attention(g, mk, options={"family": "label", "certify": "interval"}).certificate
    assert full["lower"] <= c["lower"] + 1e-12 and max(full["lower"], c["lower"]) <= min(full["upper"], c["upper"])
    (s_lo, s_hi), (b_lo, b_hi) = loc["newton_image"]  # holds the critical point: a tiny step from the float optimum
    assert s_lo - 1e-7 <= r.x[0] + r.x[1] <= s_hi + 1e-7 and b_lo - 1e-7 <= r.x[1] <= b_hi + 1e-7
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    rad = loc["radius"]
    S = r.x[0] + r.x[1] + np.linspace(-rad, rad, 9)
    B = r.x[1] + np.linspace(-rad, rad, 9)
    grid = [family_attention_loss(s - b, b, W, g, mk, family="label").value for s in S for b in B]
    assert min(grid) >= c["lower"] - 1e-12
    # a given radius is the only one tried
    one = optimal_attention(g, mk, options={**opts, "certify_options": {"scope": "local", "radius": rad}})
    assert one.status == 0 and one.certificate["local"]["radii_tried"] == [rad]


def test_local_scope_where_the_hessian_is_not_positive_definite_is_not_certified():
    """A score box far too wide for convexity (half-width 200: it reaches the loss's flat tails): no Newton test,
    status 4 with the radii tried in the message, and still lower <= fun <= upper."""
    g, mk = _model(), Masking()
    opts = {"family": "label", "certify": "interval", "certify_options": {"scope": "local", "radius": 200.0}}
    r = optimal_attention(g, mk, options=opts)
    c = r.certificate
    assert r.status == 4 and not c["certified"] and c["kind"] == "not certified"
    assert "on no score box tried (half-widths [200.0])" in r.message and c["lower"] <= r.fun <= c["upper"]


@pytest.mark.parametrize(
    "copts, match",
    [
        ({"max_pairs": 10}, r"all C\(T, tau\) x n = 36 \(set, word\) pairs.*max_pairs'\] = 10.*'scope': 'local'"),
        ({"scope": "nearby"}, r"certify_options\['scope'\] must be one of 'global', 'local'"),
        ({"scope": "local", "radius": 0.0}, r"certify_options\['radius'\]"),
        ({"max_pairs": 0}, r"certify_options\['max_pairs'\]"),
    ],
)
def test_certificate_option_refusals(copts, match):
    with pytest.raises(ValueError, match=match):
        optimal_attention(_model(), Masking(), options={"family": "label", "certify": "interval",
                                                        "certify_options": copts})  # fmt: skip


def test_local_scope_is_refused_for_the_cotopic_family():
    with pytest.raises(ValueError, match=r"scope'\]='local' is for the label family"):
        optimal_attention(_model(), Masking(), options={"family": "co-topic", "certify": "interval",
                                                        "certify_options": {"scope": "local"}})  # fmt: skip
