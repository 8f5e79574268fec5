"""The interval certificate of the general model's label family (SPEC §7, §11.8): rigorous enclosures of the
structured loss on boxes of (alpha, beta) and of the compact chart against the dense evaluator of SPEC §11.4
(hypothesis over phi, tau, masking, mask_keys and W^V), the interval matrix product and sum against exact
rational arithmetic, the certificate against a fine grid, its outcomes and its refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from _general_strategies import label_box_cases
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from theorycheck import GeneralTopicModel, Masking, TopicModel
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss, family_attention_loss
from theorycheck.population._attention_structured import make_evaluator
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_general import label_box_certificate, to_chart
from theorycheck.solvers.attention._interval_label import LabelLoss, imatmul, isum
from theorycheck.solvers.attention._interval_vec import IVec, evaluate


def _label_matrix(g):
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    return Z


def _w(g, mk, kind):
    if kind == "stage1":
        f = optimal_value_matrix(g, mk, options={"dense": False}).x
        return (f.left, f.right), f.toarray()
    W = np.eye(g.V1)
    W[0, 0] = 0.0
    return (W, np.eye(g.V1)), W


def _dense(g, mk, W, a, b, mask_keys):
    return float(attention_loss(family_scores(a, b, _label_matrix(g)), W, g, mk, mask_keys=mask_keys))


@settings(max_examples=20, deadline=None)
@given(**label_box_cases(n_points=3))
def test_enclosures_contain_the_dense_values(g, mk, mask_keys, kind, centre, width, frac):
    """On a box of (alpha, beta) and on its chart box, the value (order 0, 1, 2) encloses the dense evaluator's
    loss at points of the box; the order-1 gradient encloses the structured gradient."""
    (U, V), W = _w(g, mk, kind)
    LL = LabelLoss(g, mk, U, V, mask_keys)
    lo = np.array([[centre[0] - width[0] / 2, centre[1] - width[1] / 2]])
    hi = np.array([[centre[0] + width[0] / 2, centre[1] + width[1] / 2]])
    pts = [lo[0] + np.array(f) * (hi[0] - lo[0]) for f in frac]
    chart = [to_chart(*p) for p in pts]
    clo, chi = np.min(chart, axis=0)[None], np.max(chart, axis=0)[None]
    for order in (0, 1, 2):
        box = evaluate(lo, hi, None, None, LL.original, order=order)
        cbox = evaluate(clo, chi, None, None, LL.chart, order=order)
        bv, cv = (box if order == 0 else box.v), (cbox if order == 0 else cbox.v)
        for p in pts:
            d = _dense(g, mk, W, p[0], p[1], mask_keys)
            slack = 1e-12 * max(1.0, abs(d))  # the dense evaluator's own rounding
            assert bv.lo[0] - slack <= d <= bv.hi[0] + slack, (order, bv.lo, d, bv.hi)
            assert cv.lo[0] - slack <= d <= cv.hi[0] + slack, (order, cv.lo, d, cv.hi)
    p = pts[0]
    pt = evaluate(p[None], p[None], None, None, LL.original, order=1)
    r = family_attention_loss(p[0], p[1], (U, V), g, mk, family="label", mask_keys=mask_keys, grad=True)
    for gi, exact in zip(pt.g, (r.dalpha, r.dbeta)):
        assert gi.lo[0] - 1e-11 <= exact <= gi.hi[0] + 1e-11
    # a point's enclosure is tight, unless a class mass is within a few hundred ulps of the underflow threshold
    # (phi entries ~1e-309: G_ij / (m_i m_j) then divides the a-priori underflow term 2^-1021 by a subnormal mass,
    # and the enclosure, still valid, is the whole line; SPEC §7 "Known limit")
    if np.min(g.phi[g.phi > 0]) >= 1e-290:
        assert pt.v.hi[0] - pt.v.lo[0] <= 1e-10


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 6), k=st.integers(1, 6), m=st.integers(1, 4))
def test_interval_product_and_sum_contain_the_exact_rational_results(seed, n, k, m):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, k)) * 10.0 ** rng.integers(-5, 5, size=(n, k))
    B = rng.standard_normal((k, m))
    Bw = rng.random((k, m)) * 1e-3
    C = imatmul(IVec(A), IVec(B - Bw, B + Bw))
    for i in range(n):
        for j in range(m):
            for sgn in (-1, 1):  # the exact product at two corners of the operand box
                ex = sum(Fraction(A[i, t]) * (Fraction(B[t, j]) + sgn * int(np.sign(A[i, t])) * Fraction(Bw[t, j]))
                         for t in range(k))  # fmt: skip
                assert Fraction(float(C.lo[i, j])) <= ex <= Fraction(float(C.hi[i, j]))
    S = isum(IVec(A), (0, 1))
    assert Fraction(float(S.lo)) <= sum(Fraction(float(x)) for x in A.ravel()) <= Fraction(float(S.hi))


def _model():
    rng = np.random.default_rng(3)
    for _ in range(50):
        g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.5), size=3), tau=2)
        if np.bincount(g.dominant_topic(), minlength=3).min() >= 2:
            return g
    raise AssertionError("no model with two words per label")


@pytest.mark.parametrize("mask_keys", [False, True])
def test_certificate_agrees_with_a_fine_grid(mask_keys):
    """Status 0 and lower <= fun <= upper; no point of a fine grid (through the optimum) is below the rigorous
    lower bound, and the grid minimum is within the grid's resolution of fun."""
    g, mk = _model(), Masking()
    r = optimal_attention(g, mk, options={"family": "label", "certify": "interval", "mask_keys": mask_keys})
    c = r.certificate
    assert c["certified"] == (r.status == 0)
    assert r.status == 0 and c["kind"] == "certified optimum", r.message
    assert c["lower"] <= r.fun <= c["upper"] and c["gap"] <= 1e-9
    (a_lo, a_hi), (b_lo, b_hi) = c["argmin_original"]
    assert a_lo <= r.x[0] <= a_hi and b_lo <= r.x[1] <= b_hi
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    A = r.x[0] + np.linspace(-3, 3, 25)
    B = r.x[1] + np.linspace(-3, 3, 25)
    grid = [family_attention_loss(a, b, W, g, mk, family="label", mask_keys=mask_keys).value for a in A for b in B]
    assert min(grid) >= c["lower"] - 1e-12
    assert min(grid) - r.fun <= 1e-3  # the grid's resolution (0.25) around a smooth minimum
    # the original-coordinate box certificate on a box around the optimum agrees
    LL = LabelLoss(g, mk, W.left, W.right, mask_keys)
    box = ((r.x[0] - 1, r.x[0] + 1), (r.x[1] - 1, r.x[1] + 1))
    bc = label_box_certificate(LL, box, 1e-9, 20_000, r.x)
    assert bc.converged and bc.lower <= r.fun <= bc.upper + 1e-12 and abs(bc.lower - c["lower"]) <= 2e-9


def test_flat_loss_is_a_bound_not_a_certificate():
    """Only [MASK] queries (p_c = p_r = 0): the loss does not depend on the scores, every point minimises it, the
    chart's argmin is the whole square (infimum also a limit at infinity): status 3, not certified."""
    g = _model()
    r = optimal_attention(g, Masking(p_m=0.5, p_c=0.0, p_r=0.0), options={"family": "label", "certify": "interval"})
    c = r.certificate
    assert r.status == 3 and not c["certified"] and c["kind"].startswith("bound")
    assert c["lower"] <= r.fun <= c["upper"] and c["gap"] <= 1e-9 and np.all(np.isfinite(r.x))


@settings(max_examples=5, deadline=None)
@given(n=st.integers(2, 4), tau=st.integers(1, 2), off=st.floats(0.02, 0.3), seed=st.integers(0, 2**16))
def test_every_label_a_single_word_gives_a_line_of_minimisers(n, tau, off, seed):
    """Every label a single word: the loss depends on alpha + beta only (the dense evaluator, checked along the
    line), the certificate runs on the line of s = alpha + beta: status 0, kind "a line of minimisers", and its
    bounds hold the minimum of a fine grid of the dense loss over s (an independent computation)."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.ones(n), size=n) * off + np.eye(n)
    g = GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=min(tau, n))
    mk = Masking()
    r = optimal_attention(g, mk, options={"family": "label", "certify": "interval"})
    c = r.certificate
    assert r.status == 0 and c["certified"] and c["kind"] == "certified optimum (a line of minimisers)"
    assert c["global"]["line"] and c["lower"] <= r.fun <= c["upper"] and c["gap"] <= 1e-9
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    s0, s1 = c["global"]["argmin_scores"]
    assert s0 <= r.x[0] + r.x[1] <= s1 and f"[{s0:.12g}, {s1:.12g}]" in r.message
    a, b = r.x
    for d in (-7.0, 3.0, 25.0):  # constant along alpha + beta = const
        assert family_attention_loss(a + d, b - d, W, g, mk, family="label").value == pytest.approx(r.fun, abs=1e-12)
    ev = make_evaluator(g, mk, W)
    S = np.linspace(-30, 30, 121)
    k = int(np.argmin([ev(s, 0.0).value for s in S]))
    fmin = minimize_scalar(lambda s: ev(s, 0.0).value, bounds=(S[k] - 0.5, S[k] + 0.5), method="bounded",
                           options={"xatol": 1e-10}).fun  # fmt: skip
    assert c["lower"] - 1e-12 <= fmin <= c["upper"] + 1e-9


def test_labels_of_one_and_of_several_words_are_not_certified_and_say_why():
    """A label of a single word beside longer labels: the valleys at beta -> +inf run two ways and the boxes with
    an infinite end do not close the bound (a known limit): not certified, ``lower <= fun <= upper``, the reason
    in the message."""
    rng = np.random.default_rng(1)
    phi = rng.dirichlet(np.ones(6), size=3) * 0.3
    for j, t in enumerate([0, 1, 1, 2, 2, 2]):
        phi[t, j] += 1.0
    g = GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=2)
    r = optimal_attention(g, Masking(), options={"family": "label", "certify": "interval",
                                                 "certify_options": {"max_boxes": 1000}})  # fmt: skip
    c = r.certificate
    assert r.status != 0 and not c["certified"] and "a label of a single word beside labels" in r.message
    assert c["lower"] <= r.fun <= c["upper"] and np.all(np.isfinite(r.x))


def test_paper_model_as_general_agrees_with_the_paper_certificate():
    """The paper's model as a general one: the label family is the (alpha, beta) family (alpha_sym = alpha + beta);
    both rigorous enclosures hold the same optimum."""
    tm, mk = TopicModel(T=4, v=3, tau=2), Masking()
    p = optimal_attention(tm, mk, value="identity", options={"certify": "interval"})
    g = GeneralTopicModel.from_topic_model(tm)
    r = optimal_attention(g, mk, value="identity", options={"family": "label", "certify": "interval"})
    lo = max(p.certificate["lower"], r.certificate["lower"])
    hi = min(p.certificate["upper"], r.certificate["upper"])
    assert lo <= hi + 1e-12, (p.certificate["lower"], p.certificate["upper"], r.certificate)


@pytest.mark.parametrize(
    "options, kw, match",
    [
        ({"family": "co-topic"}, {"value": "identity"}, "not the family 'co-topic' with value='identity'"),
        ({}, {"value": "identity"}, "'label' and 'co-topic' on the structured route"),
        ({"family": "label"}, {"loss": "ce"}, "needs loss='squared'"),
        ({"family": "label"}, {"method": "lbfgs"}, "not unrestricted scores"),
        (
            {"family": "label", "certify_options": {"recheck": True}},
            {},
            r"certify_options\['recheck'\] is not supported",
        ),
        ({"family": "label", "certify_options": {"tol": -1.0}}, {}, "tol"),
    ],
)
def test_refusals_name_what_is_not_covered(options, kw, match):
    g = _model()
    with pytest.raises(ValueError, match=match):
        optimal_attention(g, Masking(), options={**options, "certify": "interval"}, **kw)


def test_dirichlet_prior_is_refused():
    g = GeneralTopicModel(np.full((2, 4), 0.25), prior="dirichlet", alpha=0.5)
    with pytest.raises(ValueError, match="prior='uniform-tau'"):
        optimal_attention(g, Masking(), options={"family": "label", "certify": "interval"})


def test_box_certificate_refuses_a_box_beyond_the_float_range():
    g, mk = _model(), Masking()
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    with pytest.raises(ValueError, match="box must be"):
        label_box_certificate(LabelLoss(g, mk, W.left, W.right), ((-400.0, 0.0), (0.0, 1.0)), 1e-9, 100, (0.0, 0.5))
    assert math.isfinite(to_chart(-800.0, 900.0)[0])
