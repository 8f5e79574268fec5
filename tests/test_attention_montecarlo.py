"""The finite-document Monte Carlo loss against exact expectations (independent code paths:
sampled documents, BERT masking, position-level attention over counts; versus an enumeration of
every masked document, and the exact N -> inf evaluator)."""

import numpy as np
import pytest
from test_stage1_montecarlo import exact_finite_N

import theorycheck as tc
from proofs_numeric import attention_finite_n as claim
from theorycheck.analysis.landscape import finite_n_gap
from theorycheck.analysis.stats import power_law_fit
from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss
from theorycheck.sampling.finite_exact import exact_finite_loss
from theorycheck.sampling.montecarlo import mc_attention_loss

TINY = tc.TopicModel(T=2, v=2, tau=1)
TINY_MK = tc.Masking(p_m=0.4, p_c=0.2, p_r=0.3)


def _random_point(tm, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(tm.V1, tm.V1)), 0.5 * rng.normal(size=(tm.V1, tm.V1)), 0.3 * rng.normal(size=tm.V1)


@pytest.mark.parametrize("N", [1, 2, 3, 4])
def test_monte_carlo_equals_the_exact_finite_N_loss(N):
    """Tolerance: 4 Monte Carlo standard errors at fixed N (SE ~ 0.1% of the loss; no 1/N allowance)."""
    S, W, b = _random_point(TINY, 5)
    exact = exact_finite_loss(S, W, TINY, TINY_MK, N, b)
    est = mc_attention_loss(S, W, TINY, TINY_MK, N=N, n_docs=200000, b=b, seed=100 + N)
    assert abs(est.mean - exact) <= 4 * est.stderr
    # sharp enough to see one unit of N: E_N and E_{N+1} differ by more than the tolerance
    assert abs(exact_finite_loss(S, W, TINY, TINY_MK, N + 1, b) - exact) > 4 * est.stderr


def test_exact_finite_loss_at_N_1_by_hand():
    """N = 1: the only position is selected and attends to itself, so o = W e_z + b."""
    S, W, b = _random_point(TINY, 1)
    tm, mk = TINY, TINY_MK
    tot = 0.0
    for t in range(tm.T):
        for x in range(t * tm.v + 1, (t + 1) * tm.v + 1):
            law = np.r_[mk.p_mask, np.full(tm.n_words, mk.p_r / tm.n_words)]
            law[x] += mk.p_c
            for z in range(tm.V1):
                e = np.zeros(tm.V1)
                e[x] = 1.0
                tot += law[z] * np.sum((W[:, z] + b - e) ** 2) / (tm.T * tm.v)
    assert abs(exact_finite_loss(S, W, tm, mk, 1, b) - tot) <= 1e-13


@pytest.mark.parametrize("N", [2, 4])
def test_exact_finite_loss_equals_the_uniform_attention_derivation(N):
    """S = 0: the enumeration equals the closed finite-N expression of tests/test_stage1_montecarlo
    (two independent derivations of the same expectation)."""
    tm, mk = tc.TopicModel(T=3, v=1, tau=2), tc.Masking(p_m=0.5, p_c=0.2, p_r=0.3)
    _, W, b = _random_point(tm, 3)
    EN = exact_finite_N(W, b, tm, mk, N)[0]
    assert abs(exact_finite_loss(np.zeros((tm.V1, tm.V1)), W, tm, mk, N, b) - EN) <= 1e-13


def test_exact_finite_loss_refuses_too_many_documents():
    S, W, _ = _random_point(TINY, 0)
    with pytest.raises(ValueError, match="MAX_DOCUMENTS"):
        exact_finite_loss(S, W, TINY, TINY_MK, 9)
    with pytest.raises(ValueError, match="N"):
        exact_finite_loss(S, W, TINY, TINY_MK, 0)


def test_monte_carlo_key_masked_converges_to_exact():
    """mask_keys=True (no finite-N enumeration: documents with every position selected have no
    key): the gap at N = 800 equals the 1/N extrapolation of the gap at N = 100 within 4 combined
    standard errors plus 25% (O(1/N^2)), and the large-N mean is within 4 SE + the O(1/N) allowance."""
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.2)
    S = alpha_beta_score_matrix(2.0, 1.0, tm)
    W = alpha_beta_value_matrix(tm, mk)
    g = finite_n_gap(S, W, tm, mk, [100, 800], n_docs=5000, seed=11, mask_keys=True)
    assert g["exact"] == attention_loss(S, W, tm, mk, mask_keys=True)
    extrap = g["gap"][0] * 100 / 800
    se = np.hypot(g["stderr"][1], g["stderr"][0] * 100 / 800)
    assert abs(g["gap"][1] - extrap) <= 4 * se + 0.25 * abs(extrap)
    assert abs(g["mc"][1] - g["exact"]) <= 4 * g["stderr"][1] + 1.5 * abs(g["gap"][0]) * 100 / 800


def test_finite_n_claim_figure_lengths_leave_the_verdict_unchanged():
    """``figure_Ns`` adds lengths to the figure only: expected, measured, tolerance and details of the
    claim at its default parameters equal those without them; the figure gets every length."""
    p = dict(claim.CLAIM.default_params[0])
    assert len(claim.NS) + len(p["figure_Ns"]) >= 6  # enough lengths to show the 1/N law
    p["n_docs"] = 300
    with_fig = claim.check(p)
    without = claim.check({k: v for k, v in p.items() if k != "figure_Ns"})
    for field in ("expected", "measured", "tolerance", "passed", "details"):
        assert getattr(with_fig, field) == getattr(without, field), field
    N, gap, se = with_fig.data["gap"]
    assert list(N) == sorted(claim.NS + tuple(p["figure_Ns"]))
    np.testing.assert_array_equal(gap[np.searchsorted(N, claim.NS)], without.data["gap"][1])


def test_power_law_fit_recovers_the_exponent_and_matches_weighted_polyfit():
    N = np.array([25.0, 50, 100, 200, 400, 800])
    fit = power_law_fit(N, 0.37 / N)
    assert fit.slope == pytest.approx(-1.0, abs=1e-12) and fit.intercept == pytest.approx(np.log(0.37))
    rng = np.random.default_rng(0)
    y = 0.37 / N * np.exp(rng.normal(0, 0.05, N.size))
    se = 0.05 * y * rng.uniform(0.5, 2.0, N.size)
    fit = power_law_fit(N, y, se)
    coef, cov = np.polyfit(np.log(N), np.log(y), 1, w=y / se, cov="unscaled")  # independent weighted LS
    assert fit.slope == pytest.approx(coef[0], rel=1e-10) and fit.intercept == pytest.approx(coef[1], rel=1e-10)
    assert fit.slope_stderr == pytest.approx(np.sqrt(cov[0, 0]), rel=1e-10)
    # points <= 0 are left out; fewer than two positive points: NaN
    assert power_law_fit([1.0, 2.0, 4.0], [1.0, -1.0, 0.25]).slope == pytest.approx(-1.0)
    assert np.isnan(power_law_fit([1.0, 2.0], [1.0, 0.0]).slope)
    with pytest.raises(ValueError, match="same shape"):
        power_law_fit([1.0, 2.0], [1.0])
