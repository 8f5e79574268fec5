"""Every status the interval certificate reports is true (issue 36 items 2 and 3; SPEC §4.3, §7).

Oracles independent of the certificate: the SPEC §4.3 loss retyped in mpmath (:mod:`proofs_numeric._spec_route`)
for the limits at infinity, and the float closed form (:func:`theorycheck.population.alpha_beta_loss`) at the
certificate's own points.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import given, settings

import theorycheck as tc
from proofs_numeric import _spec_route as R
from theorycheck.population._alpha_beta import family_loss
from theorycheck.solvers.attention import global_certificate
from theorycheck.strategies import maskings, topic_models


def _limits(tm, mk):
    """``L`` at ``log K -> -inf`` and ``+inf`` (block ``W^V``), from the mpmath route."""
    c = R.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)
    return float(R.block_loss(mp.mpf("1e-60"), c)), float(R.block_loss(mp.mpf("1e60"), c))


# ----------------------------------------------------------------------------- item 2: "at infinity"
def test_interior_minimiser_is_not_reported_at_infinity():
    # issue 36 item 2: the gap closed in one box, the argmin was the whole chart and the status 4; the minimiser is
    # interior (log K ~ 4.137, L = 0.8670157) and both limits are higher (0.91466, 0.86768)
    tm, mk = tc.TopicModel(8, 3, 3), tc.Masking(0.15, 0.1, 0.0)
    g = global_certificate(tm, mk, "block")
    L0, L1 = _limits(tm, mk)
    assert g.converged and min(L0, L1) > g.upper + 1e-4
    assert not g.info["at_infinity"]
    res = tc.solvers.optimal_attention(tm, mk, value="block", options={"certify": "interval"})
    assert res.status == 0 and res.certificate["kind"] == "certified optimum", res.message
    assert abs(res.info["logK"] - 4.137) < 1e-3 and abs(res.fun - 0.8670157) < 1e-7


@settings(max_examples=25)
@given(tm=topic_models(min_T=2, max_T=8, max_v=4), mk=maskings(min_p_m=0.05))
def test_at_infinity_only_when_a_limit_is_as_low_as_the_best_finite_point(tm, mk):
    # tau = T included (a constant context: the loss is flat in K, every K is a minimiser)
    g = global_certificate(tm, mk, "block")
    if g is None or not g.converged:
        return  # degenerate chart (the loss does not depend on K), or not certified at all
    L0, L1 = _limits(tm, mk)
    assert g.lower <= min(L0, L1) + 1e-12  # the lower bound holds at infinity too
    if g.info["at_infinity"]:
        assert min(L0, L1) <= g.upper + 1e-12, (tm, mk, L0, L1, g.upper)
    else:  # a finite point within tol of the infimum: no limit below it by more than tol
        assert min(L0, L1) >= g.upper - g.tol - 1e-12, (tm, mk, L0, L1, g.upper)
        assert all(map(math.isfinite, g.info["x_best_original"]))


def test_flat_landscape_at_tau_equal_T_is_certified():
    # tau = T: constant context, A = B0, so L does not depend on K; every K (the returned one too) is optimal
    tm, mk = tc.TopicModel(3, 10, 3), tc.Masking()
    g = global_certificate(tm, mk, "block")
    assert g.converged and not g.info["at_infinity"]
    res = tc.solvers.optimal_attention(tm, mk, value="block", options={"certify": "interval"})
    assert res.status == 0, res.message
    assert min(_limits(tm, mk)) >= res.fun - 1e-12


def test_limit_beta_to_minus_infinity_is_still_at_infinity():
    tm, mk = tc.TopicModel(T=100, v=10, tau=3), tc.Masking()
    g = global_certificate(tm, mk, "identity")
    assert g.converged and g.info["at_infinity"]


# ----------------------------------------------------------------------------- item 3: the returned point
def _check_best_point(res, tm, mk, value):
    c = res.certificate
    xb = c["interval"]["x_best"]
    if value == "block":
        lk = xb[0]
        L_best = float(family_loss(lk - math.log(tm.v), lk - math.log(tm.v), tm, mk, "block", "squared"))
    else:
        L_best = float(family_loss(xb[0], xb[1], tm, mk, "identity", "squared"))
    assert res.fun <= L_best + 1e-15 * max(1.0, abs(L_best)), (res.fun, L_best)
    assert c["lower"] <= res.fun <= c["upper"]
    x = (res.info["logK"],) if value == "block" else (res.info["alpha"], res.info["beta"])
    assert all(lo <= xi <= hi for xi, (lo, hi) in zip(x, c["box"]))


def test_returned_point_is_the_certificate_best_in_a_user_box():
    # issue 36 item 3: the returned point had L = 0.95458, the certificate's x_best in the same box 0.89928
    tm, mk = tc.TopicModel(6, 4, 2), tc.Masking(0.9, 0.5, 0.5)
    box = ((30.0, 30.01), (29.99, 30.0))
    res = tc.solvers.optimal_attention(tm, mk, value="identity", options={"certify": "interval", "box": box})
    _check_best_point(res, tm, mk, "identity")
    assert res.fun < 0.9 and res.certificate["upper"] < 0.9


@pytest.mark.parametrize(
    "T, v, mask, box",
    [
        (3, 2, (0.15, 0.1, 0.1), ((-30.0, -29.5), (20.0, 20.5))),
        (4, 3, (0.5, 0.4, 0.05), ((25.0, 25.2), (-30.0, -29.8))),
        (2, 2, (0.1, 0.1, 0.3), ((0.0, 0.01), (35.0, 35.01))),
    ],
)
def test_returned_point_is_never_worse_than_the_certificate_best(T, v, mask, box):
    # user boxes far from the optimum: the point returned is the best the certificate evaluated, or better
    tm, mk = tc.TopicModel(T, v, 1), tc.Masking(*mask)
    res = tc.solvers.optimal_attention(tm, mk, value="identity", options={"certify": "interval", "box": box})
    _check_best_point(res, tm, mk, "identity")


@pytest.mark.parametrize("box", [(30.0, 30.01), (-25.0, -24.0)])
def test_block_returned_point_is_never_worse_than_the_certificate_best(box):
    tm, mk = tc.TopicModel(6, 4, 2), tc.Masking(0.9, 0.5, 0.5)
    res = tc.solvers.optimal_attention(tm, mk, value="block", options={"certify": "interval", "box": box})
    _check_best_point(res, tm, mk, "block")
