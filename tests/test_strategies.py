"""``theorycheck.strategies``: every draw is valid (constructs), has the right shape, is finite and in bounds;
bad arguments raise before drawing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck import Masking, TopicModel
from theorycheck.strategies import (
    choices,
    decoder_biases,
    masking_params,
    maskings,
    matrices,
    model_params,
    p_c_positive,
    params,
    score_matrices,
    seeds,
    tau_below_T,
    topic_models,
    value_matrices,
)


def _model(p: dict) -> TopicModel:
    if p.get("prior") == "dirichlet":
        return TopicModel(T=p["T"], v=p["v"], prior="dirichlet", alpha=p["alpha"])
    return TopicModel(T=p["T"], v=p["v"], tau=p["tau"])


@given(topic_models(max_T=5, max_v=3), topic_models(max_T=5, prior="dirichlet"), maskings())
def test_models_and_maskings_are_valid(tm, tm_dir, mk):
    assert 2 <= tm.T <= 5 and 1 <= tm.v <= 3 and 1 <= tm.tau <= tm.T
    assert tm_dir.prior == "dirichlet" and 0.05 <= tm_dir.alpha <= 5.0
    assert isinstance(mk, Masking) and mk.a >= 0.05
    assert abs(mk.a + mk.r + mk.q - 1.0) < 1e-12


@given(params(model_params(max_T=6, max_v=3, dirichlet=True), masking_params(min_p_m=0.1), seeds(max_seed=9)))
def test_param_dicts_construct_models_and_maskings(p):
    tm = _model(p)
    mk = Masking(p["p_m"], p["p_c"], p["p_r"])
    assert tm.T <= 6 and tm.v <= 3 and mk.p_m >= 0.1
    assert 0 <= p["seed"] <= 9
    assert tau_below_T(p) == (tm.prior == "dirichlet" or tm.tau < tm.T)
    assert p_c_positive(p) == (mk.p_c > 0)


def test_model_params_with_dirichlet_draws_a_valid_dirichlet_model():
    from hypothesis import find

    p = find(model_params(max_T=4, dirichlet=True), lambda d: d.get("prior") == "dirichlet")
    tm = _model(p)
    assert tm.prior == "dirichlet" and 0.05 <= tm.alpha <= 5.0 and tm.T <= 4


@pytest.mark.parametrize("max_scale", [1.0, 1e4])
@given(data=st.data(), V1=st.integers(1, 9))
def test_score_matrices_shape_finite_and_bounded(max_scale, data, V1):
    S = data.draw(score_matrices(V1, max_scale=max_scale))
    assert S.shape == (V1, V1) and S.dtype == np.float64
    assert np.all(np.isfinite(S)) and np.abs(S).max() <= max_scale


@given(data=st.data(), V1=st.integers(1, 9), scale=st.floats(1e-3, 10.0))
def test_value_matrices_and_biases(data, V1, scale):
    W = data.draw(value_matrices(V1, scale=scale))
    assert W.shape == (V1, V1) and np.all(np.isfinite(W)) and np.abs(W).max() <= scale
    b = data.draw(decoder_biases(V1, scale=scale))
    assert b is None or (b.shape == (V1,) and np.all(np.isfinite(b)) and np.abs(b).max() <= scale)
    assert data.draw(decoder_biases(V1, allow_none=False)) is not None


@given(matrices(4, scale=3.0, symmetric=True))
def test_symmetric_matrices(M):
    assert np.allclose(M, M.T) and np.abs(M).max() <= 3.0


def test_score_matrices_reach_large_scores():
    """Scores up to 1e4 are drawn (softmax saturation is in the domain)."""
    from hypothesis import find

    S = find(score_matrices(3, max_scale=1e4), lambda S: np.abs(S).max() > 1e3)
    assert np.abs(S).max() <= 1e4


@given(choices(loss=("squared", "ce"), mask_keys=(False, True)))
def test_choices_draws_from_the_options(d):
    assert set(d) == {"loss", "mask_keys"}
    assert d["loss"] in ("squared", "ce") and d["mask_keys"] in (False, True)


def test_params_merges_and_fixed_entries_win():
    from hypothesis import find

    p = find(params(seeds(max_seed=3), choices(loss=("ce",)), n=2, seed=7), lambda d: True)
    assert p == {"seed": 7, "loss": "ce", "n": 2}


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: score_matrices(0), "V1"),
        (lambda: score_matrices(3, max_scale=2e4), "max_scale"),
        (lambda: score_matrices(3, max_scale=1.0, min_scale=2.0), "min_scale"),
        (lambda: value_matrices(3, scale=0.0), "scale"),
        (lambda: decoder_biases(3, scale=-1.0), "scale"),
        (lambda: choices(loss=()), "loss"),
        (lambda: choices(loss="ce"), "loss"),
        (lambda: seeds(max_seed=-1), "max_seed"),
        (lambda: topic_models(min_T=5, max_T=3), "min_T"),
    ],
)
def test_bad_arguments_raise_before_drawing(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_params_rejects_non_strategies():
    with pytest.raises(TypeError, match="part 0"):
        params({"T": 3})
