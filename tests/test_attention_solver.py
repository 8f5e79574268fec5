"""optimal_attention: certificate fields, agreement with independent searches, flat direction."""

import math

import numpy as np
import pytest
from hypothesis import given, settings

import theorycheck as tc
from theorycheck.population import alpha_beta_loss, alpha_beta_loss_logK
from theorycheck.solvers import optimal_attention
from theorycheck.strategies import maskings, topic_models


@settings(max_examples=15)
@given(topic_models(min_T=2, max_T=12, min_v=2, max_v=6), maskings(min_p_m=0.05))
def test_block_optimum_beats_random_points_and_is_stationary(tm, mk):
    from hypothesis import assume

    assume(mk.p_c + mk.p_r >= 0.05 and mk.q + mk.r >= 0.01)  # otherwise L is flat in K
    r = optimal_attention(tm, mk, value="block", options={"check_general": False})
    assert r.status in (0, 3)
    if r.status == 0:
        pts = np.random.default_rng(0).uniform(-20, 40, 2000)
        assert r.loss <= np.min(alpha_beta_loss_logK(pts, tm, mk)) + 1e-12
        assert r.certificate["grid_lower_bound"] <= r.loss
        assert r.certificate["certified_gap"] < 1e-4  # grid step 4.5e-3 in log K
    # canonical representative of the flat direction
    assert r.alpha == pytest.approx(r.beta)
    assert r.K == pytest.approx(math.exp(r.alpha) * tm.v, rel=1e-9)
    assert r.loss == pytest.approx(alpha_beta_loss(r.alpha, r.beta, tm, mk), abs=1e-14)
    assert r.loss == pytest.approx(alpha_beta_loss(math.log(r.K), -700.0, tm, mk), abs=1e-12)
    assert r.gap_to_uniform >= -1e-15
    assert r.attention_ratio == pytest.approx(r.K / tm.v)


def test_paper_configuration_result_object():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    r = optimal_attention(tm, mk)
    assert r.success and r.status == 0
    assert r.residuals["general_evaluator"] <= 1e-10
    assert "flat" not in r.flat_direction or "K" in r.flat_direction
    assert r.loss_uniform == pytest.approx(1 - 1 / 30, abs=1e-14)
    assert r.certificate["tails_above_optimum"]
    assert "alpha" in repr(r)
    ri = optimal_attention(tm, mk, value="identity")
    assert ri.success and ri.residuals["gradient_norm"] < 1e-6
    assert ri.loss < r.loss  # identity W^V with same-word attention beats the block family here


def test_identity_beta_to_minus_infinity_is_reported():
    tm, mk = tc.TopicModel(T=100, v=10, tau=3), tc.Masking()
    r = optimal_attention(tm, mk, value="identity", options={"check_general": False})
    assert r.status == 3 and r.beta_to_minus_inf
    assert "beta* = -inf" in r.message
    assert math.exp(r.alpha) == pytest.approx(730, rel=0.01)  # SPEC §4.3(b): e^alpha* ~ 730


@pytest.mark.parametrize("kwargs,match", [(dict(value="full"), "value"), (dict(options={"n_grid": 3}), "n_grid")])
def test_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimal_attention(tc.TopicModel(T=4, v=2, tau=2), tc.Masking(), **kwargs)
