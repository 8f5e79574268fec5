"""Exact moments: closed form (SPEC §1.1/§4.0) against enumeration and Monte Carlo."""

import math

import numpy as np
import pytest
from hypothesis import given

import theorycheck as tc
from theorycheck.population import masked_density, moments, topic_density, topic_sets
from theorycheck.strategies import maskings, topic_models


@given(topic_models(max_T=9, max_v=5), maskings())
def test_closed_form_equals_enumeration(tm, mk):
    S1, C1 = moments(tm, mk, method="closed-form")
    S2, C2 = moments(tm, mk, method="enumerate")
    np.testing.assert_allclose(S1, S2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(C1, C2, rtol=0, atol=1e-14)


@given(topic_models(max_T=8), maskings())
def test_masked_density_is_a_distribution(tm, mk):
    S = topic_sets(tm)[0]
    m = masked_density(tm, mk, S)
    assert m.shape == (tm.V1,)
    assert m.min() >= 0
    assert m.sum() == pytest.approx(1.0, abs=1e-13)
    assert m[0] == pytest.approx(mk.q, abs=1e-15)
    # in-document words get a/(tau v) + r/(T v), others r/(T v)
    in_doc = np.isin(tm.token_topics(), S)
    np.testing.assert_allclose(m[in_doc], mk.a / (tm.tau * tm.v) + mk.r / tm.n_words, atol=1e-15)
    np.testing.assert_allclose(m[1:][~in_doc[1:]], mk.r / tm.n_words, atol=1e-15)


def test_dirichlet_moments_monte_carlo():
    """E[p p^T] for Dirichlet(alpha) against 200k draws (tolerance 5 standard errors)."""
    tm = tc.TopicModel(T=4, v=2, prior="dirichlet", alpha=0.7)
    rng = np.random.default_rng(0)
    th = rng.dirichlet(np.full(tm.T, tm.alpha), size=200_000)
    same = th[:, 0] ** 2 / tm.v**2
    diff = th[:, 0] * th[:, 1] / tm.v**2
    s_same, s_diff = tm.pair_moments()
    for samples, exact in ((same, s_same), (diff, s_diff)):
        se = samples.std() / math.sqrt(samples.size)
        assert abs(samples.mean() - exact) < 5 * se


def test_topic_density_validation():
    tm = tc.TopicModel(T=4, v=2, tau=2)
    with pytest.raises(ValueError, match="topics"):
        topic_density(tm, [0, 0])
    with pytest.raises(ValueError, match="topics"):
        topic_density(tm, [0, 4])
    with pytest.raises(ValueError, match="tau=2"):
        topic_density(tm, [0])
    with pytest.raises(ValueError, match="exactly one"):
        topic_density(tm)
    with pytest.raises(ValueError, match="theta"):
        topic_density(tm, theta=[0.5, 0.5, 0.5, -0.5])
    with pytest.raises(ValueError, match="max_sets"):
        topic_sets(tc.TopicModel(T=40, v=1, tau=20))
    with pytest.raises(ValueError, match="method"):
        moments(tm, tc.Masking(), method="mc")
