"""Configuration validation: every bad input raises, naming the parameter."""

import math

import numpy as np
import pytest
from hypothesis import given

import theorycheck as tc
from theorycheck.strategies import maskings, topic_models

BAD_TOPIC_MODELS = [
    (dict(T=0, v=3, tau=1), ValueError, "T"),
    (dict(T=3, v=0, tau=1), ValueError, "v"),
    (dict(T=3, v=2, tau=4), ValueError, "tau"),
    (dict(T=3, v=2, tau=0), ValueError, "tau"),
    (dict(T=3, v=2), ValueError, "tau"),
    (dict(T=3.5, v=2, tau=1), ValueError, "T"),
    (dict(T=float("nan"), v=2, tau=1), ValueError, "T"),
    (dict(T="3", v=2, tau=1), TypeError, "T"),
    (dict(T=True, v=2, tau=1), TypeError, "T"),
    (dict(T=3, v=2, tau=1, prior="lda"), ValueError, "prior"),
    (dict(T=3, v=2, prior="dirichlet"), ValueError, "alpha"),
    (dict(T=3, v=2, prior="dirichlet", alpha=0.0), ValueError, "alpha"),
    (dict(T=3, v=2, prior="dirichlet", alpha=float("nan")), ValueError, "alpha"),
    (dict(T=3, v=2, tau=1, prior="dirichlet", alpha=0.1), ValueError, "tau"),
    (dict(T=3, v=2, tau=1, alpha=0.1), ValueError, "alpha"),
]


@pytest.mark.parametrize("kwargs,exc,name", BAD_TOPIC_MODELS, ids=[repr(k) for k, _, _ in BAD_TOPIC_MODELS])
def test_topic_model_rejects(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        tc.TopicModel(**kwargs)


BAD_MASKINGS = [
    (dict(p_m=-0.1), "p_m"),
    (dict(p_m=1.5), "p_m"),
    (dict(p_m=float("nan")), "p_m"),
    (dict(p_c=2.0), "p_c"),
    (dict(p_r=-1e-3), "p_r"),
    (dict(p_c=0.6, p_r=0.6), "p_c \\+ p_r"),
    (dict(p_m=float("inf")), "p_m"),
]


@pytest.mark.parametrize("kwargs,name", BAD_MASKINGS, ids=[repr(k) for k, _ in BAD_MASKINGS])
def test_masking_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tc.Masking(**kwargs)


def test_masking_requires_selected_positions():
    with pytest.raises(ValueError, match="p_m"):
        tc.Masking(p_m=0.0).require_masked_positions()
    with pytest.raises(ValueError, match="a = 1 - p_m"):
        tc.Masking(p_m=1.0, p_c=0.0, p_r=0.5).require_informative()


def test_default_masking_constants():
    mk = tc.Masking()
    assert (mk.a, mk.r, mk.q) == pytest.approx((0.865, 0.015, 0.12), abs=1e-15)


@given(maskings())
def test_masking_fractions_sum_to_one(mk):
    assert mk.a + mk.r + mk.q == pytest.approx(1.0, abs=1e-14)
    assert min(mk.a, mk.r, mk.q) >= 0


@given(topic_models(max_T=9))
def test_token_layout(tm):
    topics = tm.token_topics()
    assert topics.shape == (tm.V1,)
    assert topics[0] == -1
    # every topic owns exactly v consecutive words
    counts = np.bincount(topics[1:], minlength=tm.T)
    assert np.all(counts == tm.v)
    assert np.all(np.diff(topics[1:]) >= 0)
    ind = tm.topic_indicator()
    assert np.array_equal(ind.argmax(axis=1)[1:], topics[1:])


@given(topic_models(max_T=9))
def test_round_trip_dict(tm):
    assert tc.TopicModel.from_dict(tm.to_dict()) == tm


def test_dirichlet_min_loss_paper_value():
    # SPEC §4.0: T=10, alpha=0.1 gives E sum theta^2 = 0.55 and L* = 1 - 0.055 = 0.945 (v=10)
    tm = tc.TopicModel(T=10, v=10, prior="dirichlet", alpha=0.1)
    assert tm.min_value_loss() == pytest.approx(0.945, abs=1e-15)
    assert math.isinf(tm.n_topic_sets)


def test_token_topic_is_the_layout_rule(tm_small):
    from theorycheck.models import token_topic

    tokens = np.arange(tm_small.V1)
    expected = np.array([-1] + [(w - 1) // tm_small.v for w in range(1, tm_small.V1)])
    np.testing.assert_array_equal(token_topic(tokens, tm_small.v), expected)
    np.testing.assert_array_equal(tm_small.topic_of(tokens), expected)
    np.testing.assert_array_equal(tm_small.token_topics(), expected)
