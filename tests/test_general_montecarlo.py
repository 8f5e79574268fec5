"""Monte Carlo of finite documents for a GeneralTopicModel (SPEC §11.1, §11.4): ``mc_attention_loss``.

The exact reference is :func:`theorycheck.population.attention_loss` of the general model (enumeration
of the topic sets; Dirichlet: :func:`attention_loss_estimate` over many sampled theta, with its SE).
Finite documents carry an ``O(1/N)`` bias; ``richardson=True`` (``2 l_2N - l_N`` on the same
documents) removes it, leaving ``O(1/N^2)``. Tolerance: ``4 SE + 20/N^2`` (the second-order term of
the bias is below ``20/N^2`` for scores, values and biases in ``[-1, 1]``, as in
tests/test_general_attention.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.models import GeneralTopicModel as G
from theorycheck.population import attention_loss, attention_loss_estimate
from theorycheck.sampling.montecarlo import MCEstimate, mc_attention_loss

N, N_DOCS = 50, 4000


maskings = st.builds(
    tc.Masking,
    p_m=st.sampled_from([0.2, 0.3, 0.5]),
    p_c=st.sampled_from([0.0, 0.1, 0.3]),
    p_r=st.sampled_from([0.05, 0.2, 0.4]),
)


def _params(V1, seed):
    r = np.random.default_rng(seed)
    return r.uniform(-1, 1, (V1, V1)), r.uniform(-1, 1, (V1, V1)), r.uniform(-1, 1, V1)


@settings(max_examples=12)
@given(g=general_models(max_T=3, paper=True), mk=maskings, seed=st.integers(0, 2**16), mask_keys=st.booleans())
def test_richardson_estimate_equals_exact_loss(g, mk, seed, mask_keys):
    S, W, b = _params(g.V1, seed)
    exact = attention_loss(S, W, g, mk, b, mask_keys=mask_keys)
    est = mc_attention_loss(S, W, g, mk, N=N, n_docs=N_DOCS, b=b, seed=seed, mask_keys=mask_keys, richardson=True)
    assert est.n_docs == N_DOCS and est.stderr > 0
    assert abs(est.mean - exact) <= 4 * est.stderr + 20 / N**2, (est, exact)


@pytest.mark.parametrize("mask_keys", [False, True])
def test_dirichlet_law_against_the_sampled_exact_loss(mask_keys):
    """Dirichlet: theta drawn afresh per document; the reference averages 20000 sampled theta (its SE added)."""
    rng = np.random.default_rng(3)
    g = G(rng.dirichlet(np.full(5, 0.7), size=3), prior="dirichlet", alpha=[0.5, 1.0, 2.0])
    mk = tc.Masking(0.3, 0.2, 0.3)
    S, W, b = _params(g.V1, 4)
    ref = attention_loss_estimate(S, W, g, mk, b, mask_keys=mask_keys, n_theta=20000, seed=1)
    est = mc_attention_loss(S, W, g, mk, N=N, n_docs=N_DOCS, b=b, seed=2, mask_keys=mask_keys, richardson=True)
    assert abs(est.mean - ref.value) <= 4 * math.hypot(est.stderr, ref.stderr) + 20 / N**2, (est, ref)


def test_finite_n_bias_is_real_and_first_order():
    """Without the correction the estimate at N is biased by ``B/N`` (detectably, > 4 SE), and the bias
    halves from N to 2N (within the SEs): the O(1/N) law the Richardson step relies on."""
    g, mk = G.zipf(3, 3, 1.1, tau=2), tc.Masking(0.3, 0.2, 0.3)
    S, W, b = _params(g.V1, 5)
    exact = attention_loss(S, W, g, mk, b)
    e1 = mc_attention_loss(S, W, g, mk, N=25, n_docs=8000, b=b, seed=1)
    e2 = mc_attention_loss(S, W, g, mk, N=50, n_docs=8000, b=b, seed=2)
    assert e1.mean - exact > 4 * e1.stderr
    ratio_gap = (e1.mean - exact) - 2 * (e2.mean - exact)  # 0 for a pure B/N bias
    assert abs(ratio_gap) <= 4 * math.hypot(e1.stderr, 2 * e2.stderr) + 20 / 25**2


def test_determinism_by_seed_and_rng():
    g, mk = G.overlapping(3, 2, eps=0.3, tau=2), tc.Masking()
    S, W, b = _params(g.V1, 7)
    kw = dict(N=(20, 30), n_docs=300, b=b)
    a = mc_attention_loss(S, W, g, mk, **kw, seed=11)
    assert isinstance(a, MCEstimate)
    assert a == mc_attention_loss(S, W, g, mk, **kw, seed=11)
    assert a == mc_attention_loss(S, W, g, mk, **kw, rng=np.random.default_rng(11))
    assert a != mc_attention_loss(S, W, g, mk, **kw, seed=12)
    r = mc_attention_loss(S, W, g, mk, N=20, n_docs=300, b=b, seed=11, richardson=True)
    assert r == mc_attention_loss(S, W, g, mk, N=20, n_docs=300, b=b, seed=11, richardson=True)


def test_stratified_over_topic_sets():
    """Uniform-tau with few sets: documents cycle through the C(T, tau) sets (stratified estimator and SE);
    both it and the unstratified estimator agree with the exact loss up to the finite-N bias."""
    g, mk = G.overlapping(3, 2, eps=0.2, tau=1), tc.Masking(0.3, 0.1, 0.1)
    S, W, b = _params(g.V1, 8)
    strat = mc_attention_loss(S, W, g, mk, N=30, n_docs=2000, b=b, seed=1)
    plain = mc_attention_loss(S, W, g, mk, N=30, n_docs=2000, b=b, seed=1, stratify=False)
    exact = attention_loss(S, W, g, mk, b)
    for est in (strat, plain):
        assert abs(est.mean - exact) <= 4 * est.stderr + 3.0 / 30  # finite-N bias below 3/N here
    assert strat != plain


def test_bad_input():
    g = G.zipf(2, 2, 1.0, tau=1)
    S, W, b = _params(g.V1, 0)
    with pytest.raises(TypeError, match="mk must be a Masking"):
        mc_attention_loss(S, W, g, None, N=10, n_docs=10)
    with pytest.raises(ValueError, match="S"):
        mc_attention_loss(S[:-1], W, g, tc.Masking(), N=10, n_docs=10)
    with pytest.raises(ValueError, match="b"):
        mc_attention_loss(S, W, g, tc.Masking(), N=10, n_docs=10, b=b[:-1])
    with pytest.raises(ValueError, match="p_m"):
        mc_attention_loss(S, W, g, tc.Masking(p_m=0.0), N=10, n_docs=10)
    with pytest.raises(ValueError, match="N"):
        mc_attention_loss(S, W, g, tc.Masking(), N=(10, 20), n_docs=10, richardson=True)
    with pytest.raises(ValueError, match="n_docs"):
        mc_attention_loss(S, W, g, tc.Masking(), N=10, n_docs=1)
