"""Domains of the gradient, sampling and stage-1 claims: declared, documented with their cost bound,
accepted by ``check``; regressions of the findings made while exploring them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from proofs_numeric import get_claim
from proofs_numeric._stage1 import binomial_z
from theorycheck.report.explore import explore_claim

IDS = [
    "data.moments",
    "gradient.attention-loss",
    "gradient.nn-layers",
    "gradient.value-embedding",
    "sampling.masking-frequencies",
    "stage1.block-sum-identity",
    "stage1.first-gradient",
    "stage1.gd-minnorm",
    "stage1.lda-docs",
    "stage1.masked-density",
    "stage1.min-loss",
    "stage1.minnorm-block",
    "stage1.ridge-symmetry",
    "stage1.tau-independence",
]
CHEAP = ["data.moments", "stage1.first-gradient", "stage1.min-loss", "stage1.minnorm-block", "stage1.ridge-symmetry"]


@pytest.mark.parametrize("cid", IDS)
def test_domain_declared_and_documented(cid):
    claim = get_claim(cid)
    assert claim.domain is not None, f"{cid} has no domain"
    assert claim.domain.__doc__ and len(claim.domain.__doc__) > 40


@pytest.mark.parametrize("cid", CHEAP)
def test_check_accepts_domain_draws_and_they_pass(cid):
    claim = get_claim(cid)

    @settings(max_examples=5)
    @given(claim.domain().filter(claim.satisfies))
    def prop(params):
        assert claim.run(params).passed

    prop()


def test_explore_is_deterministic_and_passes_on_a_gradient_claim():
    claim = get_claim("gradient.value-embedding")
    a = explore_claim(claim, 3, seed=5)
    assert a.verdict == "PASS" and len(a.explored) == 3
    assert a.explored == explore_claim(claim, 3, seed=5).explored


def test_binomial_z_matches_normal_when_frequent_and_exact_tail_when_rare():
    from scipy import stats

    z = binomial_z(np.array([5100.0]), 10_000, 0.5)
    assert z[0] == pytest.approx(2.0)
    # one occurrence of an event of expected count 0.012: normal |z| ~ 9, exact two-sided tail p = 2 P(X >= 1)
    n, p = 400_000, 3e-8
    tail = 2 * stats.binom.sf(0, n, p)
    assert binomial_z(1, n, p) == pytest.approx(stats.norm.isf(tail / 2), rel=1e-12)
    assert binomial_z(1, n, p) < 3
    assert binomial_z(1, n, 0.0) == np.inf and binomial_z(0, n, 0.0) == 0.0
    assert binomial_z(0, n, 1.0) == np.inf


def test_masked_density_with_rare_replacement_words_holds():
    """Finding: p_r = 3e-6 made a single replaced word read as z = 9 under the normal approximation."""
    claim = get_claim("stage1.masked-density")
    p = dict(T=10, v=5, tau=2, p_m=0.5, p_c=0.2, p_r=3e-6, topics=(0, 1), n_docs=8, N=50_000, seed=0)
    assert claim.run(p).passed
    wrong = claim.run(p, claim.falsify(p))
    assert not wrong.passed


@pytest.mark.parametrize("p_r", [0.0, 1e-5])
def test_masking_frequencies_without_replacements_holds(p_r):
    """Finding: p_r = 0 gave a NaN chi-square of zero replacement counts (refuted)."""
    claim = get_claim("sampling.masking-frequencies")
    p = dict(T=5, v=4, tau=2, N=40, n_docs=5000, p_m=0.5, p_c=0.2, p_r=p_r, seed=0)
    assert claim.run(p).passed


def test_lda_docs_small_alpha_single_token_documents_hold():
    """Findings: at T = 2, alpha = 0.0625, N = 1 the mean-of-ratios test read z = 14 (infinite variance)
    and theta_1 rounded to 1.0 (5% of draws) made KS p = 1.8e-11."""
    claim = get_claim("stage1.lda-docs")
    p = dict(T=2, v=1, alpha=0.0625, N=(1, 1), n_docs=5000, seed=0)
    res = claim.run(p)
    assert res.passed, res.measured
    assert res.details["p_ks_theta1"] > 1e-3
    assert not claim.run(p, {"alpha_sample": 0.3}).passed


def test_gd_minnorm_auto_steps_reach_the_contraction():
    from proofs_numeric.stage1_gd_minnorm import auto_steps

    for kappa in (1.0, 2.0, 50.0):
        k = auto_steps(kappa)
        assert k >= 50 and (kappa == 1.0 or (1 - 1 / kappa) ** k <= 1e-11)
