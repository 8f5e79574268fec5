"""The one model abstraction: the paper's TopicModel is a GeneralTopicModel (SPEC §1, §11)."""

import copy
import pickle
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.models import GeneralTopicModel, TopicModel


@given(T=st.integers(1, 6), v=st.integers(1, 5), data=st.data())
def test_paper_model_is_a_general_model_with_the_block_phi(T, v, data):
    dirichlet = data.draw(st.booleans())
    if dirichlet:
        tm = TopicModel(T=T, v=v, prior="dirichlet", alpha=data.draw(st.floats(0.01, 10)))
    else:
        tm = TopicModel(T=T, v=v, tau=data.draw(st.integers(1, T)))
    assert isinstance(tm, GeneralTopicModel)
    g = GeneralTopicModel.from_topic_model(tm)
    assert type(g) is GeneralTopicModel
    # the generic attributes of the base agree with the subclass's O(1) ones
    np.testing.assert_array_equal(g.phi, tm.phi)
    assert (g.T, g.n_words, g.V1, g.prior, g.tau) == (tm.T, tm.n_words, tm.V1, tm.prior, tm.tau)
    np.testing.assert_array_equal(g.token_topics(), tm.token_topics())
    np.testing.assert_array_equal(g.dominant_topic(), tm.dominant_topic())
    for a, b in zip(g.theta_moments(), tm.theta_moments()):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)
    if dirichlet:
        np.testing.assert_array_equal(tm.concentration, np.full(T, tm.alpha))
        np.testing.assert_array_equal(g.concentration, tm.concentration)
    else:
        assert tm.concentration is None and g.concentration is None
    # E||p||^2 of the closed form equals tr(phi^T M2 phi) of the generic law
    M2 = tm.theta_moments()[1]
    assert tm.expected_p_norm2() == pytest.approx(np.trace(tm.phi.T @ M2 @ tm.phi), rel=1e-13)


def test_paper_model_stores_no_phi_until_asked():
    tm = TopicModel(T=1000, v=100, tau=30)
    assert "phi" not in vars(tm)
    assert tm.V1 == 100_001 and tm.n_words == 100_000
    small = TopicModel(T=3, v=2, tau=2)
    _ = small.phi
    assert "phi" in vars(small)
    assert small == TopicModel(T=3, v=2, tau=2)  # the cache does not enter equality
    assert hash(small) == hash(TopicModel(T=3, v=2, tau=2))


def test_paper_model_phi_respects_the_memory_guard(monkeypatch):
    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "1M")
    with pytest.raises(ValueError, match="TopicModel.phi"):
        _ = TopicModel(T=1000, v=100, tau=30).phi


@pytest.mark.parametrize(
    "model",
    [
        TopicModel(T=4, v=3, tau=2),
        TopicModel(T=4, v=3, prior="dirichlet", alpha=0.1),
        GeneralTopicModel.zipf(T=3, v=2, s=1.0, tau=2),
    ],
)
def test_models_are_immutable_values(model):
    with pytest.raises(FrozenInstanceError):
        model.T = 5
    with pytest.raises(FrozenInstanceError):
        model.tau = 1
    with pytest.raises(FrozenInstanceError):
        del model.tau
    for twin in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model), type(model).from_dict(model.to_dict())):
        assert twin == model and hash(twin) == hash(model) and type(twin) is type(model)


def test_paper_and_general_models_are_different_values():
    tm = TopicModel(T=3, v=2, tau=2)
    g = GeneralTopicModel.from_topic_model(tm)
    assert tm != g and g != tm  # same law, different types: the paper model carries its closed forms
    assert repr(tm) == "TopicModel(T=3, v=2, tau=2, prior='uniform-tau', alpha=None)"
    assert tm.to_dict() == {"T": 3, "v": 2, "tau": 2, "prior": "uniform-tau", "alpha": None}


def test_constructors_of_the_base_return_the_base_type():
    # the named constructors build a general model even when called through the subclass
    assert type(TopicModel.zipf(T=2, v=2, s=1.0, tau=1)) is GeneralTopicModel
    assert type(tc.GeneralTopicModel.overlapping(T=2, v=2, eps=0.1, tau=1)) is GeneralTopicModel
