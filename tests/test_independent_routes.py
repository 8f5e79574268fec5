"""Independent routes to the (alpha, beta) closed forms at large T (issue 16, SPEC §4.3).

``theorycheck.population._symmetry`` evaluates the attention loss from its definition on one topic
set and three query tokens (topic-permutation symmetry). Here it is checked against the general
evaluator (every topic set, small T), against the dense per-set evaluator on the representative set
at T = 100 (the symmetry reduction), against the set-sampled evaluator, and it is shown to catch a
5% error injected in the block closed form at large T.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from proofs_numeric import get_claim
from theorycheck.population import (
    _alpha_beta,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    attention_loss,
)
from theorycheck.population._attention_dense import _dense_sets
from theorycheck.population._symmetry import (
    alpha_beta_score_row,
    alpha_beta_symmetric_loss,
    block_value_apply,
    symmetric_attention_loss,
)
from theorycheck.strategies import maskings

PAPER = tc.Masking(p_m=0.15, p_c=0.1, p_r=0.1)


@st.composite
def small_models(draw):
    T = draw(st.integers(1, 5))
    return tc.TopicModel(T=T, v=draw(st.integers(1, 3)), tau=draw(st.integers(1, T)))


@settings(max_examples=25, deadline=None)
@given(
    small_models(),
    maskings(min_p_m=0.05),
    st.floats(-6, 6),
    st.floats(-6, 6),
    st.sampled_from(["block", "identity"]),
    st.sampled_from(["squared", "ce"]),
)
def test_symmetric_route_equals_general_evaluator_over_all_sets(tm, mk, alpha, beta, value, loss):
    """Small T: the one-set route equals attention_loss, which enumerates every topic set."""
    S = alpha_beta_score_matrix(alpha, beta, tm)
    W = alpha_beta_value_matrix(tm, mk, value)
    general = attention_loss(S, W, tm, mk, loss=loss)
    sym = alpha_beta_symmetric_loss(alpha, beta, tm, mk, value, loss=loss)
    assert abs(sym - general) <= 1e-12 * max(1.0, abs(general))


@pytest.mark.parametrize("mask_keys", [False, True])
def test_symmetric_route_with_bias_and_mask_keys(mask_keys):
    """A word-constant bias and the key-masked context, against the general evaluator."""
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.25)
    S = alpha_beta_score_matrix(1.3, -0.4, tm)
    W = alpha_beta_value_matrix(tm, mk)
    b = np.r_[0.7, np.full(tm.n_words, -0.2)]
    general = attention_loss(S, W, tm, mk, b, mask_keys=mask_keys)
    sym = symmetric_attention_loss(lambda x: S[x], lambda h: W @ h, tm, mk, b, mask_keys=mask_keys)
    assert abs(sym - general) <= 1e-13


def test_symmetric_route_refuses_a_non_invariant_bias():
    tm = tc.TopicModel(T=3, v=2, tau=1)
    b = np.arange(tm.V1, dtype=float)
    with pytest.raises(ValueError, match="b must be equal on all words"):
        symmetric_attention_loss(lambda x: np.zeros(tm.V1), lambda h: h, tm, PAPER, b)


def test_block_value_apply_is_the_dense_block_matrix():
    tm = tc.TopicModel(T=5, v=3, tau=2)
    W = alpha_beta_value_matrix(tm, PAPER)
    h = np.random.default_rng(0).random(tm.V1)
    A, B0, gamma = tc.population.stage1_block_constants(tm, PAPER)
    assert np.allclose(block_value_apply(tm, A, B0, gamma)(h), W @ h, rtol=0, atol=1e-15)
    row = alpha_beta_score_row(2.0, -1.0, tm)
    S = alpha_beta_score_matrix(2.0, -1.0, tm)
    assert all(np.array_equal(row(x), S[x]) for x in range(tm.V1))


@pytest.mark.parametrize("value", ["block", "identity"])
def test_one_set_reduction_at_T_100_against_the_dense_evaluator(value):
    """T = 100: the dense per-set evaluator on the representative set (all V1 = 1001 query tokens)
    equals the three-query reduction, and both equal the closed form."""
    tm = tc.TopicModel(T=100, v=10, tau=10)
    alpha, beta = 3.2, 2.1
    S = alpha_beta_score_matrix(alpha, beta, tm)
    W = alpha_beta_value_matrix(tm, PAPER, value)
    dense = _dense_sets(S, W, None, np.arange(tm.tau)[None, :], tm, PAPER, False)[0][0]
    sym = alpha_beta_symmetric_loss(alpha, beta, tm, PAPER, value)
    closed = alpha_beta_loss(alpha, beta, tm, PAPER, value)
    assert abs(dense - sym) <= 1e-12
    assert abs(closed - sym) <= 1e-12


def test_set_sampled_general_evaluator_at_T_100():
    """T = 100: the set-sampled structured evaluator agrees within 4 of its standard errors (plus
    rounding: for these symmetric S, W every set has the same loss, so the stderr is ~0)."""
    tm = tc.TopicModel(T=100, v=10, tau=3)
    S = alpha_beta_score_matrix(4.0, 2.0, tm)
    W = alpha_beta_value_matrix(tm, PAPER)
    est = attention_loss(S, W, tm, PAPER, n_sets=8, seed=0)
    sym = alpha_beta_symmetric_loss(4.0, 2.0, tm, PAPER)
    assert abs(est.mean - sym) <= 4 * est.stderr + 1e-12


@pytest.mark.parametrize("T,v,tau", [(1000, 10, 30), (100000, 10, 300)])
def test_closed_form_equals_symmetric_route_at_large_T(T, v, tau):
    tm = tc.TopicModel(T=T, v=v, tau=tau)
    for K in (v, 7.0 * v * tau, 100.0 * v * tau):
        s = math.log(K / v)
        closed = float(alpha_beta_loss_logK(math.log(K), tm, PAPER))
        assert abs(closed - alpha_beta_symmetric_loss(s, s, tm, PAPER)) <= 1e-10


@pytest.mark.parametrize("claim_id", ["attention.asymptotic", "attention.paper-theorem3"])
def test_a_five_percent_error_in_the_block_closed_form_is_caught_at_large_T(monkeypatch, claim_id):
    claim = get_claim(claim_id)
    params = claim.default_params[0]
    assert claim.run(params).passed
    orig = _alpha_beta._block_loss_logK

    def wrong(*args, **kw):
        out = orig(*args, **kw)
        return (1.05 * out[0], 1.05 * out[1]) if kw.get("deriv") else 1.05 * out

    monkeypatch.setattr(_alpha_beta, "_block_loss_logK", wrong)
    res = claim.run(params)
    assert not res.passed
    failed = [k for k, val in res.details.items() if "route_error" in k and val > 1e-10]
    assert failed, "the failure must come from the independent route"
