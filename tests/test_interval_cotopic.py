"""The interval certificate of the general model's co-topic family (SPEC §7, §11.8): rigorous enclosures of the
structured loss on boxes of (alpha, beta) and of (alpha + beta, beta) against the dense evaluator of SPEC §11.4
(hypothesis over phi, tau, masking, mask_keys, the box), gradient enclosures against finite differences of that
evaluator, the certificate against a fine grid and the float optimum, its outcomes and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking, TopicModel
from theorycheck.population import attention_loss
from theorycheck.solvers import cotopic_matrix, optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_cotopic import COTOPIC_MAX_V1, CotopicLoss
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_vec import evaluate

maskings = st.sampled_from([Masking(), Masking(p_m=0.3, p_c=0.2, p_r=0.3), Masking(p_m=0.5, p_c=0.6, p_r=0.0)])


def _dense(g, mk, W, a, b, mask_keys):
    """The dense evaluator of SPEC §11.4 at S = alpha I_w + beta G."""
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    return float(attention_loss(a * I_w + b * cotopic_matrix(g), W, g, mk, mask_keys=mask_keys))


def _stage1(g, mk):
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    return f.left, f.right, f.toarray()


@settings(max_examples=15, deadline=None)
@given(
    g=general_models(max_T=3, max_v=3, paper=True),
    mk=maskings,
    mask_keys=st.booleans(),
    centre=st.tuples(st.floats(-6.0, 6.0), st.floats(-6.0, 6.0)),
    width=st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 2.0)),
    frac=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=2, max_size=2),
)
def test_enclosures_contain_the_dense_values_and_finite_differences(g, mk, mask_keys, centre, width, frac):
    """On a box of (alpha, beta) (and of (alpha + beta, beta)) the value (orders 0, 1, 2) encloses the dense
    evaluator's loss at points of the box, the order-1 and order-2 gradients enclose its central finite differences
    there (to their error), and a point's enclosure is tight."""
    U, V, W = _stage1(g, mk)
    orig = CotopicLoss(g, mk, U, V, mask_keys, coords="original")
    summ = CotopicLoss(g, mk, U, V, mask_keys)
    lo = np.array([[centre[0] - width[0] / 2, centre[1] - width[1] / 2]])
    hi = np.array([[centre[0] + width[0] / 2, centre[1] + width[1] / 2]])
    pts = [lo[0] + np.array(f) * (hi[0] - lo[0]) for f in frac]
    ulo = np.array([[lo[0, 0] + lo[0, 1] - 1e-9, lo[0, 1]]])
    uhi = np.array([[hi[0, 0] + hi[0, 1] + 1e-9, hi[0, 1]]])
    h = 1e-5
    for order in (0, 1, 2):
        for CL, blo, bhi, jac in ((orig, lo, hi, np.eye(2)), (summ, ulo, uhi, np.array([[1.0, 0.0], [-1.0, 1.0]]))):
            box = evaluate(blo, bhi, None, None, CL.original, order=order)
            bv = box if order == 0 else box.v
            for p in pts:
                d = _dense(g, mk, W, p[0], p[1], mask_keys)
                slack = 1e-12 * max(1.0, abs(d))  # the dense evaluator's own rounding
                assert bv.lo[0] - slack <= d <= bv.hi[0] + slack, (order, bv.lo, d, bv.hi)
                if order == 0:
                    continue
                fd = np.array([(_dense(g, mk, W, *(p + h * e), mask_keys) - _dense(g, mk, W, *(p - h * e), mask_keys))
                               / (2 * h) for e in np.eye(2)])  # fmt: skip
                fd = jac @ fd  # (alpha, beta) -> the evaluator's variables
                for gi, f in zip(box.g, fd):
                    assert gi.lo[0] - 1e-6 <= f <= gi.hi[0] + 1e-6, (order, gi.lo, f, gi.hi)
    p = np.array([pts[0]])
    pt = evaluate(p, p, None, None, orig.original, order=2)
    assert pt.v.hi[0] - pt.v.lo[0] <= 1e-10


def _model():
    rng = np.random.default_rng(2)
    return GeneralTopicModel(rng.dirichlet(np.full(6, 0.5), size=3), tau=1)


BOX = ((-6.0, 10.0), (-8.0, 8.0))


@pytest.mark.parametrize("mask_keys", [False, True])
def test_certificate_agrees_with_a_fine_grid_and_the_float_optimum(mask_keys):
    """Status 0 on the given box, lower <= fun <= upper, the float optimum's point and value; no point of a fine
    grid of the box is below fun - tol (fun - lower <= tol and lower bounds every value on the box)."""
    g, mk = _model(), Masking()
    opts = {"family": "co-topic", "mask_keys": mask_keys, "box": BOX}
    f = optimal_attention(g, mk, options=opts)
    r = optimal_attention(g, mk, options={**opts, "certify": "interval"})
    c = r.certificate
    assert r.status == 0 and c["certified"] and c["kind"] == "certified optimum on the box", r.message
    assert c["domain"] == "box" and c["box"] == [list(b) for b in BOX]
    assert c["lower"] <= r.fun <= c["upper"] and c["gap"] <= 1e-9 and r.fun - c["lower"] <= 1e-9
    assert np.allclose(r.x, f.x, atol=1e-5) and abs(r.fun - f.fun) <= 1e-12
    (a_lo, a_hi), (b_lo, b_hi) = c["argmin_original"]
    assert a_lo <= r.x[0] <= a_hi and b_lo <= r.x[1] <= b_hi
    _, _, W = _stage1(g, mk)
    A, B = np.linspace(*BOX[0], 33), np.linspace(*BOX[1], 33)
    grid = [_dense(g, mk, W, a, b, mask_keys) for a in A for b in B]
    assert min(grid) >= r.fun - 1e-9 and min(grid) >= c["lower"] - 1e-12
    near = [_dense(g, mk, W, r.x[0] + da, r.x[1] + db, mask_keys) for da in (-0.01, 0, 0.01) for db in (-0.01, 0, 0.01)]
    assert min(near) >= c["lower"] - 1e-12 and min(near) - r.fun <= 1e-4


def test_optimum_beyond_the_box_is_a_bound():
    """A box that cuts the optimum off: the argmin touches its edge, status 3 (a bound on the box), lower <= fun."""
    g, mk = _model(), Masking()
    f = optimal_attention(g, mk, options={"family": "co-topic", "box": BOX})
    box = ((f.x[0] - 4.0, f.x[0] - 1.0), BOX[1])
    r = optimal_attention(g, mk, options={"family": "co-topic", "box": box, "certify": "interval"})
    c = r.certificate
    assert r.status == 3 and not c["certified"] and c["kind"] == "bound on the box" and "touch" in r.message
    assert c["lower"] <= r.fun <= c["upper"] and not c["argmin_interior"]
    assert r.fun > f.fun and c["lower"] > f.fun  # the box's minimum is above the optimum beyond it


def test_flat_loss_is_a_bound_not_a_certificate():
    """Only [MASK] queries: the loss does not depend on the scores, the argmin is the whole box: status 3."""
    g = _model()
    r = optimal_attention(g, Masking(p_m=0.5, p_c=0.0, p_r=0.0),
                          options={"family": "co-topic", "box": BOX, "certify": "interval"})  # fmt: skip
    c = r.certificate
    assert r.status == 3 and not c["certified"] and c["gap"] <= 1e-9 and c["lower"] <= r.fun <= c["upper"]


@settings(max_examples=10, deadline=None)
@given(T=st.integers(2, 3), v=st.integers(1, 3), tau=st.integers(1, 2), mask_keys=st.booleans(),
       a=st.floats(-5.0, 8.0), b=st.floats(-8.0, 8.0))  # fmt: skip
def test_paper_model_co_topic_enclosure_meets_the_label_family_enclosure(T, v, tau, mask_keys, a, b):
    """For the paper's model G is the within-topic block, so the co-topic and label families are one loss: the two
    independent rigorous enclosures (per key vs three key classes) intersect, at points and on boxes."""
    g, mk = GeneralTopicModel.from_topic_model(TopicModel(T=T, v=v, tau=min(tau, T))), Masking()
    U, V, _ = _stage1(g, mk)
    co = CotopicLoss(g, mk, U, V, mask_keys, coords="original")
    lab = LabelLoss(g, mk, U, V, mask_keys)
    for lo, hi in ((np.array([[a, b]]), np.array([[a, b]])), (np.array([[a, b]]), np.array([[a + 0.5, b + 0.25]]))):
        x, y = (evaluate(lo, hi, None, None, f, order=0) for f in (co.original, lab.original))
        assert max(x.lo[0], y.lo[0]) <= min(x.hi[0], y.hi[0]), (x, y)


@pytest.mark.parametrize(
    "options, kw, match",
    [
        ({}, {"loss": "ce"}, "needs loss='squared'"),
        ({}, {"method": "lbfgs"}, "not unrestricted scores"),
        ({}, {"value": "identity"}, "not the family 'co-topic' with value='identity'"),
        ({"certify_options": {"recheck": True}}, {}, r"certify_options\['recheck'\] is not supported"),
        ({"certify_options": {"max_boxes": 0}}, {}, "max_boxes"),
    ],
)
def test_refusals_name_what_is_not_covered(options, kw, match):
    with pytest.raises(ValueError, match=match):
        optimal_attention(_model(), Masking(), options={"family": "co-topic", **options, "certify": "interval"}, **kw)


def test_dirichlet_prior_is_refused():
    g = GeneralTopicModel(np.full((2, 4), 0.25), prior="dirichlet", alpha=0.5)
    with pytest.raises(ValueError, match="prior='uniform-tau'"):
        optimal_attention(g, Masking(), options={"family": "co-topic", "certify": "interval"})


def test_a_big_model_is_refused_before_any_work():
    """V1 above the limit (and too many (set, word) pairs): a ValueError naming the limit and why, raised before
    the float solve (no grid evaluation happens)."""
    big = GeneralTopicModel(np.full((2, COTOPIC_MAX_V1), 1.0 / COTOPIC_MAX_V1), tau=1)
    with pytest.raises(ValueError, match=r"needs V1 <= 5000 .* got V1=5001.*own weight e\^\(beta G_xy\)"):
        optimal_attention(big, Masking(), options={"family": "co-topic", "certify": "interval"})
    many = GeneralTopicModel(np.full((20, 40), 1.0 / 40), tau=5)  # C(20, 5) * 40 pairs
    with pytest.raises(ValueError, match=r"C\(T, tau\) \* n <= 250000, got V1=41, C\(T, tau\) \* n=620160"):
        CotopicLoss(many, Masking(), np.eye(41), np.eye(41))


def test_budget_exhausted_is_not_certified():
    """Too few boxes for the gap to close: status 4 with the gap, the boxes and the box in the message; the bounds
    still hold."""
    g, mk = _model(), Masking()
    r = optimal_attention(g, mk, options={"family": "co-topic", "box": BOX, "certify": "interval",
                                          "certify_options": {"max_boxes": 40}})  # fmt: skip
    c = r.certificate
    assert r.status == 4 and not c["certified"] and c["kind"] == "not certified"
    assert "Not certified by interval arithmetic" in r.message and "on the box [[-6.0, 10.0], [-8.0, 8.0]]" in r.message
    assert c["lower"] <= r.fun <= c["upper"] and c["gap"] > 1e-9 and c["global"]["n_boxes"] <= 40
