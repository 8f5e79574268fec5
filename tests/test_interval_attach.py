"""The interval certificate attached by ``optimal_attention(options={"certify": "interval"})`` never
contradicts its result (issue #25 item 1; SPEC §7, interval certificate):

(a) the returned point lies in the certified box; (b) ``lower <= fun <= upper``; (c) only status 0 is
reported as certified, status 3 is a bound on the box.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population import alpha_beta_loss
from theorycheck.solvers.attention import _alpha_beta
from theorycheck.strategies import maskings, topic_models


def _point(res, value):
    return (res.info["logK"],) if value == "block" else (res.info["alpha"], res.info["beta"])


def _check_consistent(res, value):
    c = res.certificate
    assert all(lo <= x <= hi for x, (lo, hi) in zip(_point(res, value), c["box"]))  # (a)
    assert c["lower"] <= res.fun <= c["upper"]  # (b)
    assert c["certified"] == (res.status == 0)  # (c)
    assert c["kind"] == {0: "certified optimum", 3: "bound on the box"}.get(res.status, "not certified")
    if res.status == 0:
        assert c["argmin_interior"] and c["interval"]["converged"]


def test_issue25_reproduction_small_box_is_enlarged_to_the_interior_optimum():
    """Before: alpha = 4.449 (outside the box), fun = 0.892895 < lower = 0.907293, status 3 counted as certified."""
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    opts = {"certify": "interval", "box": ((-10, 3), (-40, 20))}
    res = tc.solvers.optimal_attention(tm, mk, value="identity", options=opts)
    _check_consistent(res, "identity")
    assert res.status == 0 and res.certificate["kind"] == "certified optimum"
    assert len(res.certificate["boxes_tried"]) >= 2  # the box was enlarged
    assert res.alpha == pytest.approx(4.71046, abs=1e-5) and res.beta == pytest.approx(-0.15028, abs=1e-5)
    assert res.fun == pytest.approx(0.8928358588516669, abs=1e-12)  # the global value, not 0.892895


def test_beta_to_minus_inf_is_a_bound_on_the_box_not_a_certified_optimum():
    tm, mk = tc.TopicModel(T=100, v=10, tau=3), tc.Masking()
    res = tc.solvers.optimal_attention(tm, mk, value="identity", options={"certify": "interval"})
    _check_consistent(res, "identity")
    assert res.status == 3 and res.certificate["kind"] == "bound on the box" and not res.certificate["certified"]
    lo, hi = res.certificate["box"][1]
    assert lo == -_alpha_beta.ENLARGE_CAP and lo <= res.beta < -40.0  # in the capped box, not -1e4
    assert res.fun == pytest.approx(float(alpha_beta_loss(res.alpha, res.beta, tm, mk, "identity")), abs=0)


def test_enlargement_respects_the_cap():
    box = ((-10.0, 40.0), (-150.0, 20.0))
    assert _alpha_beta._enlarged(box, [(1, 0)]) == ((-10.0, 40.0), (-200.0, 20.0))
    assert _alpha_beta._enlarged(((-10.0, 40.0), (-200.0, 20.0)), [(1, 0)]) is None
    assert _alpha_beta._enlarged(((-10.0, 3.0), (-40.0, 20.0)), [(0, 1)]) == ((-10.0, 16.0), (-40.0, 20.0))
    assert _alpha_beta._enlarged(((-300.0, 3.0),), [(0, 0)]) is None  # a user box beyond the cap stays


def _box(draw, value):
    def side(lo_min, lo_max, w_min, w_max):
        lo = draw(st.floats(lo_min, lo_max, allow_nan=False))
        return (lo, lo + draw(st.floats(w_min, w_max, allow_nan=False)))

    if value == "block":
        return side(-20.0, 10.0, 0.5, 30.0)
    return (side(-10.0, 8.0, 0.5, 20.0), side(-30.0, 3.0, 0.5, 20.0))


@st.composite
def _cases(draw):
    tm = draw(topic_models(max_T=5, max_v=4))
    mk = draw(maskings(min_p_m=0.05))
    value = draw(st.sampled_from(["block", "identity"]))
    box = _box(draw, value) if draw(st.booleans()) else None
    return tm, mk, value, box


@settings(max_examples=25)
@given(_cases())
def test_certificate_never_contradicts_the_result(case):
    """Any box (default or drawn), block / identity, small T, v, tau, any masking: (a), (b), (c)."""
    tm, mk, value, box = case
    opts = {"certify": "interval", "n_grid": 41, "certify_options": {"tol": 1e-8, "max_boxes": 600}}
    if box is not None:
        opts["box"] = box
    try:
        res = tc.solvers.optimal_attention(tm, mk, value=value, options=opts)
    except ValueError as exc:  # uninformative masking: refused by the solver, not certified
        assert "informative" in str(exc) or "masked" in str(exc)
        return
    _check_consistent(res, value)
    assert math.isfinite(res.fun)
