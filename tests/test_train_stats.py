"""stats.py (training block): attention class averages, block scores, effective K, stage detection."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.analysis.stats import (
    attention_class_averages,
    block_contrast,
    block_score,
    detect_stages,
    effective_K,
    relative_distance,
)
from theorycheck.population import moments
from theorycheck.strategies import maskings, topic_models


def _class_averages_loop(A, tokens, v):
    sums = {"same_word": 0.0, "same_topic": 0.0, "diff_topic": 0.0, "no_topic": 0.0}
    counts = dict.fromkeys(sums, 0)
    for b in range(tokens.shape[0]):
        for i in range(tokens.shape[1]):
            for j in range(tokens.shape[1]):
                x, y = tokens[b, i], tokens[b, j]
                if x < 0 or y < 0:
                    continue
                if i == j or x == y:
                    k = "same_word"
                elif x == 0 or y == 0:
                    k = "no_topic"
                elif (x - 1) // v == (y - 1) // v:
                    k = "same_topic"
                else:
                    k = "diff_topic"
                sums[k] += A[b, i, j]
                counts[k] += 1
    return {k: (sums[k] / counts[k] if counts[k] else np.nan) for k in sums}


@settings(max_examples=25)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 7), st.integers(0, 2**31))
def test_attention_class_averages_equal_a_pair_loop(T, v, B, N, seed):
    rng = np.random.default_rng(seed)
    V1 = T * v + 1
    toks = rng.integers(0, V1, size=(B, N))
    toks[rng.random((B, N)) < 0.2] = -1
    A = rng.random((B, N, N))
    got = attention_class_averages(A, toks, v)
    ref = _class_averages_loop(A, toks, v)
    for k in ref:
        if np.isnan(ref[k]):
            assert np.isnan(got[k]), k
        else:
            assert got[k] == pytest.approx(ref[k], rel=1e-12), k


def test_uniform_attention_gives_one_over_N_in_every_class():
    rng = np.random.default_rng(0)
    toks = rng.integers(1, 31, size=(4, 50))
    A = np.full((4, 50, 50), 1 / 50)
    st_ = attention_class_averages(A, toks, 10)
    for k in ("same_word", "same_topic", "diff_topic"):
        assert st_[k] == pytest.approx(1 / 50, rel=1e-12)
    assert st_["same_minus_diff"] == pytest.approx(0.0, abs=1e-15)


def test_normalised_class_averages_are_one_under_uniform_attention_for_any_lengths():
    """Documents of different lengths: raw class averages mix 1/N_b scales (and differ between
    classes, because long and short documents hold different shares of each class), the
    length-normalised ones are exactly 1."""
    rng = np.random.default_rng(1)
    lengths = np.array([5, 40, 12])
    N = lengths.max()
    toks = rng.integers(0, 31, size=(3, N))
    toks[np.arange(N)[None, :] >= lengths[:, None]] = -1
    A = np.zeros((3, N, N))
    for b, n in enumerate(lengths):
        A[b, :n, :n] = 1.0 / n
    raw = attention_class_averages(A, toks, 10)
    norm = attention_class_averages(A, toks, 10, normalise=True)
    for k in ("same_word", "same_topic", "diff_topic", "no_topic"):
        assert norm[k] == pytest.approx(1.0, rel=1e-12), k
    assert raw["same_word"] != pytest.approx(raw["diff_topic"], rel=1e-3)  # the raw ones are biased
    ref = _class_averages_loop(A * lengths[:, None, None], toks, 10)
    for k in ref:
        assert norm[k] == pytest.approx(ref[k], rel=1e-12), k


@settings(max_examples=15)
@given(topic_models(min_T=2, max_T=6, max_v=4), maskings(min_p_m=0.05, allow_no_mask_token=False))
def test_min_norm_value_matrix_is_block_constant_with_contrast_one_over_av(tm, mk):
    """SPEC §4.2 (DER): the min-norm W^V has A - B0 = 1/(a v) and is exactly two-valued on words.

    Needs tau < T (with tau = T every document has the same topic density: no topic signal)."""
    assume(tm.tau < tm.T)
    Sigma, C = moments(tm, mk)
    W = C @ np.linalg.pinv(Sigma)
    assert block_contrast(W, tm.v) == pytest.approx(1 / (mk.a * tm.v), rel=1e-8)
    if tm.v > 1 or tm.T > 1:
        assert block_score(W, tm.v) == pytest.approx(1.0, abs=1e-9)


def test_block_score_of_unstructured_matrix_is_small():
    rng = np.random.default_rng(1)
    M = rng.normal(size=(101, 101))
    assert abs(block_score(M, 10)) < 0.02
    assert block_score(np.eye(101) + 0.0, 10) < 0.2


@given(st.floats(-5, 5), st.floats(-5, 5), st.integers(2, 5), st.integers(1, 4))
def test_effective_K_of_alpha_beta_family(alpha, beta, T, v):
    top = np.r_[-1, np.repeat(np.arange(T), v)]
    S = np.where(top[:, None] == top[None, :], beta, 0.0)
    np.fill_diagonal(S, alpha)
    S[0, :] = 0.0
    S[:, 0] = 0.0
    K = effective_K(S, v)
    np.testing.assert_allclose(K, np.exp(alpha) + (v - 1) * np.exp(beta), rtol=1e-12)
    S2 = S + 1e4  # a constant shift changes no attention weight; stays finite
    np.testing.assert_allclose(effective_K(S2, v), K, rtol=1e-9)


def test_detect_stages_on_synthetic_curves():
    steps = np.arange(0, 1000, 10)
    nV = 3.0 / (1 + np.exp(-(steps - 100) / 15.0)) + 0.01
    nKQ = 0.01 * np.exp(np.clip(steps - 400, 0, None) / 50.0)
    st_ = detect_stages(steps, nV, nKQ)
    # ||W_V|| reaches 0.9 of 3.01 where the logistic equals ~2.7: t = 100 + 15 ln(9) ~ 133 -> 140
    assert st_.stage1_end == 140
    # KQ exceeds 10x its initial value at 400 + 50 ln(10) ~ 515 -> 520
    assert st_.stage2_start == 520
    assert st_.ordered
    Ke = 4.0 * (1 + np.clip(steps - 600, 0, None) / 100.0)  # v = 4: 10% above v at step 610
    sa = detect_stages(steps, nV, nKQ, K_eff=Ke, v=4)
    assert sa.stage2_attention == 610 and sa.stage1_end_attention == 140
    assert sa.V_growth_before_attention == pytest.approx(nV[61] / nV[0])
    with pytest.raises(ValueError, match="v is required"):
        detect_stages(steps, nV, nKQ, K_eff=Ke)
    none = detect_stages(steps, nV, np.full(steps.shape, 0.01))
    assert none.stage2_start is None and none.stage1_end == 140
    with pytest.raises(ValueError, match="frac"):
        detect_stages(steps, nV, nKQ, frac=0.0)
    with pytest.raises(ValueError, match="kq_factor"):
        detect_stages(steps, nV, nKQ, kq_factor=1.0)
    with pytest.raises(ValueError, match="norm_V"):
        detect_stages(steps, nV[:-1], nKQ)


def test_detect_stages_structural_rule():
    """Block score saturates (stage 1) then decays while K_eff rises (stage 2): the structural rule
    ignores the norms, which here grow from the start (as under Adam)."""
    steps = np.arange(0, 1000, 10)
    nV = 1.0 + steps / 10.0
    nKQ = 0.1 + steps.astype(float)  # 10x its start at step 1: the norm rule says "stage 2 at once"
    bs = np.where(steps < 500, 1.0 - np.exp(-steps / 50.0), np.exp(-(steps - 500) / 300.0) * (1 - np.exp(-10)))
    Ke = 10.0 * (1 + np.clip(steps - 600, 0, None) / 100.0)  # v = 10: 10% above v at step 610
    st_ = detect_stages(steps, nV, nKQ, K_eff=Ke, v=10, block_score=bs)
    assert st_.stage2_start == 10 and st_.stage1_end == 10  # norm rule: no separation
    # 1 - exp(-t/50) >= 0.9 * max(bs[:62]) = 0.9 (1 - e^-10)  ->  t >= 50 ln(1/(1 - 0.9 (1 - e^-10))) = 115.1 -> 120
    assert st_.stage1_end_structure == 120
    assert st_.stage2_attention == 610
    assert st_.block_score_at_stage2 == pytest.approx(bs[61])
    assert st_.structural_two_stage
    # attention turning topic-aware before the block pattern forms: no two stages
    early = detect_stages(steps, nV, nKQ, K_eff=np.where(steps >= 50, 20.0, 10.0), v=10, block_score=bs)
    assert early.stage2_attention == 50 and early.stage1_end_structure == 50 and not early.structural_two_stage
    with pytest.raises(ValueError, match="block_score needs K_eff"):
        detect_stages(steps, nV, nKQ, block_score=bs)
    with pytest.raises(ValueError, match="block_score must have the shape"):
        detect_stages(steps, nV, nKQ, K_eff=Ke, v=10, block_score=bs[:-1])


def test_relative_distance_and_shape_errors():
    assert relative_distance(np.ones(3) * 2, np.ones(3)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        relative_distance(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="v="):
        block_score(np.ones((5, 5)), 3)
    with pytest.raises(ValueError, match="shape"):
        attention_class_averages(np.ones((1, 2, 3)), np.ones((1, 2), int), 1)


def test_trained_model_statistics_use_the_model_attention():
    """attention_class_averages on a model's own weights: same-word attention grows with alpha."""
    from theorycheck.nn import ModelConfig, Transformer

    tm = tc.TopicModel(T=3, v=2, tau=2)
    cfg = ModelConfig(V1=tm.V1, train=("W_K", "W_Q"), scale="none", init="zero")
    model = Transformer(cfg, seed=0)
    model.get("layers.0.W_K")[0] = 2.0 * np.eye(tm.V1)
    model.get("layers.0.W_Q")[0] = np.eye(tm.V1)  # S = 2 I: same word favoured
    toks = np.array([[1, 2, 3, 4, 5, 6]])
    st_ = attention_class_averages(model.attention_weights(toks), toks, tm.v)
    assert st_["same_word"] > st_["same_topic"] == pytest.approx(st_["diff_topic"])
