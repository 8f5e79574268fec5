"""(alpha, beta) closed forms (SPEC §4.3): == general evaluator, == high-precision mpmath
evaluation of the plain formulas, structural facts (K-only, L(K=v), K*), stage-1 constants == C Sigma^+ (SPEC §4.2)."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population import (
    alpha_beta_ce_loss,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    attention_loss,
    moments,
    stage1_block_constants,
)
from theorycheck.population._symmetry import alpha_beta_symmetric_loss
from theorycheck.strategies import maskings, topic_models

scores = st.floats(-12.0, 12.0, allow_nan=False)


@settings(max_examples=25)
@given(topic_models(max_T=5, max_v=4), maskings(), scores, scores, st.sampled_from(["block", "identity"]))
def test_closed_form_equals_general_evaluator(tm, mk, a, b, value):
    S = alpha_beta_score_matrix(a, b, tm)
    W = alpha_beta_value_matrix(tm, mk, value)
    assert alpha_beta_loss(a, b, tm, mk, value) == pytest.approx(attention_loss(S, W, tm, mk), abs=1e-10)


@pytest.mark.parametrize("value", ["block", "identity"])
def test_paper_configuration_extreme_scores(value):
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    W = alpha_beta_value_matrix(tm, mk, value)
    for a, b in [(1e4, 1e4), (-1e4, 1e4), (1e4, -1e4), (-1e4, -1e4), (50.0, 30.0), (4.711, -0.15)]:
        g = attention_loss(alpha_beta_score_matrix(a, b, tm), W, tm, mk)
        assert alpha_beta_loss(a, b, tm, mk, value) == pytest.approx(g, abs=1e-10)


def _mp_loss(alpha, beta, tm, mk, value):
    """The §4.3 formulas written plainly (K = e^a + (v-1)e^b, Z = 1 + rho (K - v)) in mpmath."""
    mp.mp.dps = 60
    T, v, tau = tm.T, tm.v, tm.tau
    a, r, q = mp.mpf(mk.a), mp.mpf(mk.r), mp.mpf(mk.q)
    p_c, p_r = mp.mpf(mk.p_c), mp.mpf(mk.p_r)
    p_mask = 1 - p_c - p_r
    rho = a / (tau * v) + r / (T * v)
    eta = r / (T * v)
    ea, eb = mp.e ** mp.mpf(alpha), mp.e ** mp.mpf(beta)
    K = ea + (v - 1) * eb
    Z = 1 + rho * (K - v)
    Zp = 1 + eta * (K - v)
    if value == "block":
        Tm, vm = mp.mpf(T), mp.mpf(v)
        if tau == T:  # constant context: min-norm W = u mu^T / ||mu||^2, mu = (a + r) u + q e_0 (SPEC §4.2)
            n = Tm * vm
            mu2 = (a + r) ** 2 / n + q**2
            A = (a + r) / (n * n * mu2)
            B0 = A if T > 1 else mp.mpf(0)
            gam = q / (n * mu2)
            d = A - B0
        else:
            B0 = -(r * (a + r) + Tm * vm * q**2) / (a * vm * Tm * ((a + r) ** 2 + Tm * vm * q**2))
            gam = q * (Tm * vm * B0 + 1 / a) / (a + r)
            d = 1 / (a * vm)

        def ell(H_list, Htarget, h0):
            c = B0 * (1 - h0) + gam * h0
            return v * sum(n * (c + d * H) ** 2 for n, H in H_list) - 2 * (c + d * Htarget) + 1

        l_mask = ell([(tau, rho * v), (T - tau, eta * v)], rho * v, q)
        in_list = [(1, rho * K / Z), (tau - 1, rho * v / Z), (T - tau, eta * v / Z)]
        l_same = ell(in_list, rho * K / Z, q / Z)
        l_oth = ell(in_list, rho * v / Z, q / Z)
        l_out = ell([(1, eta * K / Zp), (tau, rho * v / Zp), (T - tau - 1, eta * v / Zp)], rho * v / Zp, q / Zp)
        return (
            p_mask * l_mask + (p_c + p_r / T) * l_same + p_r * (tau - 1) / T * l_oth + p_r * mp.mpf(T - tau) / T * l_out
        )
    P2_in = (rho**2 * ea**2 + (v - 1) * rho**2 * eb**2 + (tau - 1) * v * rho**2 + (T - tau) * v * eta**2) / Z**2
    P2_out = (eta**2 * ea**2 + (v - 1) * eta**2 * eb**2 + tau * v * rho**2 + (T - tau - 1) * v * eta**2) / Zp**2
    l_mask = tau * v * rho**2 + (T - tau) * v * eta**2 - 2 * rho + 1
    return (
        p_mask * l_mask
        + (p_c + p_r / (T * v)) * (P2_in - 2 * rho * ea / Z + 1)
        + p_r * (v - 1) / (T * v) * (P2_in - 2 * rho * eb / Z + 1)
        + p_r * mp.mpf(tau - 1) / T * (P2_in - 2 * rho / Z + 1)
        + p_r * mp.mpf(T - tau) / T * (P2_out - 2 * rho / Zp + 1)
    )


big = st.floats(-1e4, 1e4, allow_nan=False)


@settings(max_examples=40)
@given(topic_models(max_T=12, max_v=6), maskings(), big, big, st.sampled_from(["block", "identity"]))
@example(tc.TopicModel(T=11, v=3, tau=1), tc.Masking(p_m=0.25, p_c=0.0, p_r=0.5), 0.0, 8197.0, "identity")
@example(tc.TopicModel(T=5, v=1, tau=3), tc.Masking(p_m=0.79, p_c=0.49, p_r=0.21), 0.548, 10000.9, "identity")
@example(tc.TopicModel(T=6, v=4, tau=2), tc.Masking(p_m=0.5, p_c=0.2, p_r=0.3), 9999.0, -3.0, "block")
def test_closed_form_equals_mpmath_up_to_1e4(tm, mk, a, b, value):
    """Relative 1e-14 at |alpha|, |beta| up to 1e4: the weights e^alpha / Z, e^beta / Z are formed from
    logs shifted by max(alpha, beta, 0) (forming log Z ~ 1e4 first lost ~1e4 ulp: 4.6e-13 in the first
    example, found by hypothesis's random profile; the second: beta is unused when v = 1)."""
    got = alpha_beta_loss(a, b, tm, mk, value)
    assert math.isfinite(got)
    assert got == pytest.approx(float(_mp_loss(a, b, tm, mk, value)), abs=1e-15, rel=1e-14)


def test_no_nan_on_a_large_grid():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    A = np.linspace(-1e4, 1e4, 301)
    for value in ("block", "identity"):
        L = alpha_beta_loss(A[:, None], A[None, :], tm, mk, value)
        assert L.shape == (301, 301) and np.all(np.isfinite(L))
        assert np.all(L > 0) and np.all(L < 2)


@settings(max_examples=25, deadline=None)
@given(topic_models(min_v=2, max_T=8, max_v=6), maskings(), st.floats(-8, 12), st.floats(0.02, 0.98))
def test_block_depends_on_K_only(tm, mk, logK, frac):
    """Any split of K between the same word and the other v-1 words gives the same loss, measured
    by the independent symmetric route (population._symmetry: the model's definition on one topic
    set, not the closed form), and the closed form as a function of log K equals it."""
    K = math.exp(logK)
    a, b = math.log(frac * K), math.log((1 - frac) * K / (tm.v - 1))
    split = alpha_beta_symmetric_loss(a, b, tm, mk)
    all_on_word = alpha_beta_symmetric_loss(logK, -700.0, tm, mk)  # e^beta ~ 0: K carried by alpha
    assert split == pytest.approx(all_on_word, abs=1e-12)
    assert float(alpha_beta_loss_logK(logK, tm, mk)) == pytest.approx(split, abs=1e-12)


@settings(max_examples=30)
@given(topic_models(max_T=10, max_v=6), maskings())
def test_uniform_K_equals_v_gives_stage1_minimum(tm, mk):
    assert float(alpha_beta_loss_logK(math.log(tm.v), tm, mk)) == pytest.approx(1 - 1 / (tm.tau * tm.v), abs=1e-13)


@settings(max_examples=20)
@given(topic_models(max_T=8, max_v=5), maskings())
def test_stage1_constants_are_the_min_norm_solution(tm, mk):
    """(A, B0, gamma) of §4.2 == C Sigma^+ built from the exact moments (independent route), for
    every tau: with tau = T (one document law) the min-norm W^V is the rank-one u mu^T / ||mu||^2."""
    Sigma, C = moments(tm, mk)
    W_pinv = C @ np.linalg.pinv(Sigma, rcond=1e-12, hermitian=True)
    W = alpha_beta_value_matrix(tm, mk, "block")
    assert np.max(np.abs(W - W_pinv)) <= 1e-8 * max(1.0, np.max(np.abs(W)))
    A, B0, g = stage1_block_constants(tm, mk)
    if tm.tau < tm.T:
        assert A - B0 == pytest.approx(1 / (mk.a * tm.v), rel=1e-12)
    elif tm.T > 1:
        assert A == B0  # no topic structure (K still moves the weight on [MASK] when q > 0)


def _kstar_bruteforce(tm, mk):
    x = np.linspace(-6.0, 16.0, 22001)
    L = alpha_beta_loss_logK(x, tm, mk)
    i = int(np.argmin(L))
    return math.exp(x[i]), x[1] - x[0], i, len(x)


@settings(max_examples=15)
@given(topic_models(max_T=10, max_v=5, max_tau=1), maskings(max_p_m=0.6))
def test_tau1_optimum_is_uniform(tm, mk):
    from hypothesis import assume

    # flat in K with only [MASK] queries, or when the context holds nothing but document words (q = r = 0)
    assume(mk.p_c + mk.p_r >= 0.05 and mk.q + mk.r >= 0.01)
    K, h, i, n = _kstar_bruteforce(tm, mk)
    assert 0 < i < n - 1
    assert abs(math.log(K / tm.v)) <= 1.5 * h


@settings(max_examples=15)
@given(topic_models(min_T=3, max_T=10, min_v=1, max_v=5, min_tau=2), maskings(min_p_m=0.05, max_p_m=0.6))
def test_tau2_plus_optimum_exceeds_uniform(tm, mk):
    from hypothesis import assume

    assume(tm.tau < tm.T and mk.p_c >= 0.02)
    K, h, i, n = _kstar_bruteforce(tm, mk)
    assert K > tm.v
    assert float(alpha_beta_loss_logK(math.log(K), tm, mk)) < 1 - 1 / (tm.tau * tm.v)


@settings(max_examples=15)
@given(topic_models(min_T=3, max_T=10, min_v=1, max_v=5, min_tau=2), maskings(min_p_m=0.05, max_p_m=0.6))
def test_without_kept_queries_uniform_is_optimal(tm, mk):
    """Precondition of SPEC §6 item 16 found here: K* > v needs p_c > 0. With p_c = 0 the
    query token (random word or [MASK]) is independent of the target, and K = v is optimal."""
    from hypothesis import assume

    mk = tc.Masking(p_m=mk.p_m, p_c=0.0, p_r=mk.p_r)
    assume(tm.tau < tm.T)
    x = np.linspace(-6.0, 16.0, 4001)
    L = alpha_beta_loss_logK(x, tm, mk)
    assert np.all(L >= 1 - 1 / (tm.tau * tm.v) - 1e-13)


@pytest.mark.parametrize("T,v,tau", [(10, 10, 3), (10, 10, 1), (20, 5, 4), (100, 10, 3)])
def test_identity_optimum_large_alpha_nonpositive_beta(T, v, tau):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking()
    r = tc.solvers.optimal_attention(tm, mk, value="identity", options={"check_general": False})
    assert r.status in (0, 3)
    assert r.beta <= 0.0
    assert r.alpha > math.log(v)
    # independent check: Nelder-Mead from several starts never finds a lower loss
    from scipy.optimize import minimize

    f = lambda z: alpha_beta_loss(z[0], z[1], tm, mk, "identity")  # noqa: E731
    for x0 in ([0.0, 0.0], [8.0, 3.0], [2.0, -5.0]):
        assert minimize(f, x0, method="Nelder-Mead").fun >= r.loss - 1e-9


def test_ce_family_from_general_evaluator():
    """CE of the family: the general CE evaluator == a direct per-set softmax computation."""
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    from theorycheck.population._attention_loss import _attention_loss_ref

    for value in ("block", "identity"):
        got = alpha_beta_ce_loss(3.0, 1.0, tm, mk, value)
        S = alpha_beta_score_matrix(3.0, 1.0, tm)
        ref = _attention_loss_ref(S, alpha_beta_value_matrix(tm, mk, value), tm, mk, loss="ce")
        assert got == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda tm, mk: alpha_beta_loss(0, 0, tm, mk, value="diag"), ValueError, "value must be one of"),
        (lambda tm, mk: alpha_beta_loss(np.nan, 0, tm, mk), ValueError, "alpha must be finite"),
        (lambda tm, mk: alpha_beta_loss(0, [np.inf], tm, mk), ValueError, "beta must be finite"),
        (lambda tm, mk: alpha_beta_loss(0, 0, tm, tc.Masking(p_m=0.0)), ValueError, "p_m"),
        (lambda tm, mk: alpha_beta_loss(0, 0, "tm", mk), TypeError, "tm must be a TopicModel"),
        (lambda tm, mk: alpha_beta_score_matrix(float("nan"), 0.0, tm), ValueError, "alpha must be finite"),
        (lambda tm, mk: alpha_beta_loss_logK("x", tm, mk), TypeError, "logK"),
        (lambda tm, mk: alpha_beta_loss_logK(1.0, tm, mk, constants=(1.0, 2.0)), ValueError, "constants"),
        (
            lambda tm, mk: alpha_beta_loss(0, 0, tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.1), mk),
            ValueError,
            "uniform-tau",
        ),
    ],
)
def test_rejects_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call(tc.TopicModel(T=3, v=2, tau=1), tc.Masking())


@settings(max_examples=20)
@given(
    topic_models(max_T=5, max_v=3),
    maskings(),
    st.floats(-1e4, 1e4),
    st.floats(-1e4, 1e4),
    st.sampled_from(["block", "identity"]),
)
def test_ce_closed_form_equals_general_ce_evaluator(tm, mk, a, b, value):
    got = alpha_beta_loss(a, b, tm, mk, value, loss="ce")
    assert math.isfinite(got)
    assert got == pytest.approx(alpha_beta_ce_loss(a, b, tm, mk, value), abs=1e-10)


def test_ce_block_depends_on_K_only_and_tau1_optimum_is_not_uniform():
    """Cross-entropy with the (squared-loss) stage-1 W^V: still a function of K only, but unlike the
    squared loss, tau = 1 does NOT give K* = v (sharper attention buys larger logits)."""
    tm, mk = tc.TopicModel(T=10, v=10, tau=1), tc.Masking()
    assert alpha_beta_loss(3.0, 1.0, tm, mk, loss="ce") == pytest.approx(
        float(alpha_beta_loss_logK(np.logaddexp(3.0, math.log(9) + 1.0), tm, mk, loss="ce")), abs=1e-13
    )
    r = tc.solvers.optimal_attention(tm, mk, loss="ce")
    assert r.success and r.K > 5 * tm.v
    assert r.residuals["general_evaluator"] <= 1e-10
