"""The exact N -> inf attention loss is the limit of the finite-document Monte Carlo loss
(independent code path: sampled documents, BERT masking, position-level attention over counts)."""

import numpy as np
import pytest

import theorycheck as tc
from theorycheck.analysis.landscape import finite_n_gap
from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss


@pytest.mark.parametrize("mask_keys", [False, True])
def test_monte_carlo_converges_to_exact_like_one_over_N(mask_keys):
    """Allowance: the gap at N = 800 must equal the 1/N extrapolation of the gap measured at
    N = 100 within 4 combined standard errors plus 25% of the extrapolated value (O(1/N^2))."""
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.2)
    S = alpha_beta_score_matrix(2.0, 1.0, tm)
    W = alpha_beta_value_matrix(tm, mk)
    g = finite_n_gap(S, W, tm, mk, [100, 800], n_docs=5000, seed=11, mask_keys=mask_keys)
    assert g["exact"] == attention_loss(S, W, tm, mk, mask_keys=mask_keys)
    extrap = g["gap"][0] * 100 / 800
    se = np.hypot(g["stderr"][1], g["stderr"][0] * 100 / 800)
    assert abs(g["gap"][1] - extrap) <= 4 * se + 0.25 * abs(extrap)
    # and the large-N Monte Carlo equals the exact loss within 4 SE + the stated O(1/N) allowance
    assert abs(g["mc"][1] - g["exact"]) <= 4 * g["stderr"][1] + 1.5 * abs(g["gap"][0]) * 100 / 800


def test_monte_carlo_general_scores_and_bias():
    """Random S, W, b (not the family): the exact loss matches Monte Carlo at N = 2000."""
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking(p_m=0.4, p_c=0.2, p_r=0.3)
    rng = np.random.default_rng(0)
    S, W, b = rng.normal(size=(7, 7)), 0.5 * rng.normal(size=(7, 7)), 0.3 * rng.normal(size=7)
    from theorycheck.montecarlo import mc_attention_loss

    exact = attention_loss(S, W, tm, mk, b)
    est = mc_attention_loss(S, W, tm, mk, N=2000, n_docs=1500, b=b, seed=2)
    est_small = mc_attention_loss(S, W, tm, mk, N=50, n_docs=6000, b=b, seed=3)
    allowance = 1.5 * (abs(est_small.mean - exact) + 4 * est_small.stderr) * 50 / 2000
    assert abs(est.mean - exact) <= 4 * est.stderr + allowance
