"""GeneralTopicModel (SPEC §11.1-§11.2): validation messages, constructors, serialisation, and
theta_moments against sampled theta (Monte Carlo within 5 standard errors) and exact enumeration."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.models import ROW_SUM_TOL, GeneralTopicModel

GM = tc.GeneralTopicModel


@pytest.mark.parametrize(
    ("phi", "kw", "exc", "match"),
    [
        ([[0.5, 0.6]], {"tau": 1}, ValueError, "sum to 1"),
        ([[1.2, -0.2]], {"tau": 1}, ValueError, "non-negative"),
        ([[1.0, 0.0]], {"tau": 1}, ValueError, "in no topic"),
        ([[np.nan, 1.0]], {"tau": 1}, ValueError, "finite"),
        ([0.5, 0.5], {"tau": 1}, ValueError, "shape"),
        (np.zeros((0, 3)), {"tau": 1}, ValueError, "shape"),
        ("abc", {"tau": 1}, TypeError, "phi must be an array"),
        ([[0.5 + 0j, 0.5]], {"tau": 1}, TypeError, "real"),
        ([[0.5, 0.5]], {}, ValueError, "tau is required"),
        ([[0.5, 0.5]], {"tau": 2}, ValueError, "tau"),
        ([[0.5, 0.5]], {"prior": "dirichlet"}, ValueError, "alpha is required"),
        ([[0.5, 0.5]], {"prior": "dirichlet", "alpha": -1.0}, ValueError, "alpha must be > 0"),
        ([[0.5, 0.5]], {"prior": "dirichlet", "alpha": [1.0, 2.0]}, ValueError, "vector of T=1"),
        ([[0.5, 0.5]], {"prior": "dirichlet", "alpha": 1.0, "tau": 1}, ValueError, "tau is not used"),
        ([[0.5, 0.5]], {"tau": 1, "alpha": 1.0}, ValueError, "alpha is only used"),
        ([[0.5, 0.5]], {"prior": "lda", "tau": 1}, ValueError, "prior"),
    ],
)
def test_validation_messages(phi, kw, exc, match):
    with pytest.raises(exc, match=match):
        GM(phi, **kw)


def test_rows_within_tolerance_are_renormalised_and_read_only():
    g = GM([[0.5, 0.5 + 0.5 * ROW_SUM_TOL], [0.2, 0.8]], tau=1)
    assert np.allclose(g.phi.sum(axis=1), 1.0, atol=1e-15)
    with pytest.raises(ValueError):
        g.phi[0, 0] = 1.0
    assert (g.T, g.n_words, g.V1) == (2, 2, 3) and type(g) is GM and isinstance(tc.TopicModel(T=2, v=1, tau=1), GM)


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda: GM.overlapping(3, 2, eps=0.25, tau=2), (3, 6)),
        (lambda: GM.overlapping(3, 2, n_shared=1, tau=2), (3, 6)),
        (lambda: GM.zipf(2, 4, 1.5, prior="dirichlet", alpha=0.5), (2, 8)),
        (lambda: GM.unequal([1, 2, 3], tau=1), (3, 6)),
        (lambda: GM.from_lda(np.arange(1.0, 7.0).reshape(2, 3)), (2, 3)),
    ],
)
def test_constructors_give_row_stochastic_phi(make, shape):
    g = make()
    assert g.phi.shape == shape
    np.testing.assert_allclose(g.phi.sum(axis=1), 1.0, atol=1e-14)
    assert GM.from_dict(g.to_dict()) == g and hash(GM.from_dict(g.to_dict())) == hash(g)


def test_constructor_values():
    g = GM.overlapping(2, 2, eps=0.4, tau=1)
    np.testing.assert_allclose(g.phi[0], [0.6 * 0.5 + 0.1, 0.6 * 0.5 + 0.1, 0.1, 0.1])
    g = GM.overlapping(3, 2, n_shared=1, tau=1)
    np.testing.assert_allclose(g.phi[2], [1 / 3, 0, 0, 0, 1 / 3, 1 / 3])
    z = GM.zipf(1, 3, 1.0, tau=1).phi[0]
    np.testing.assert_allclose(z, np.array([1, 1 / 2, 1 / 3]) / (11 / 6))
    u = GM.unequal([1, 3], tau=1).phi
    np.testing.assert_allclose(u, [[1, 0, 0, 0], [0, 1 / 3, 1 / 3, 1 / 3]])
    tm = tc.TopicModel(T=3, v=2, tau=2)
    g = GM.from_topic_model(tm)
    np.testing.assert_array_equal(g.token_topics(), tm.token_topics())
    assert GM.overlapping(3, 2, eps=0.0, tau=2) == g
    with pytest.raises(ValueError, match="exactly one of eps"):
        GM.overlapping(3, 2, tau=2)
    with pytest.raises(ValueError, match="eps"):
        GM.overlapping(3, 2, eps=1.5, tau=2)
    with pytest.raises(ValueError, match="n_shared"):
        GM.overlapping(3, 2, n_shared=3, tau=2)
    with pytest.raises(ValueError, match="sizes"):
        GM.unequal([2, 0], tau=1)
    assert GM.from_topic_model(g) == g  # any topic model: a plain copy with the same phi and law
    with pytest.raises(TypeError, match="TopicModel"):
        GM.from_topic_model("not a model")


def test_theta_moments_uniform_tau_equal_enumeration():
    for T, tau in [(1, 1), (4, 1), (4, 2), (5, 5), (6, 3)]:
        g = GM.overlapping(T, 1, eps=0.0, tau=tau)
        sets = list(itertools.combinations(range(T), tau))
        th = np.zeros((len(sets), T))
        for i, S in enumerate(sets):
            th[i, list(S)] = 1.0 / tau
        mu, M2 = g.theta_moments()
        np.testing.assert_allclose(mu, th.mean(axis=0), atol=1e-15)
        np.testing.assert_allclose(M2, th.T @ th / len(sets), atol=1e-15)


@given(
    alpha=st.one_of(st.floats(0.1, 5.0), st.lists(st.floats(0.1, 5.0), min_size=3, max_size=3)),
    seed=st.integers(0, 2**16),
)
def test_theta_moments_dirichlet_equal_sampling(alpha, seed):
    g = GM.unequal([1, 2, 1], prior="dirichlet", alpha=alpha)
    n = 20_000
    th = np.random.default_rng(seed).dirichlet(g.alpha, size=n)
    mu, M2 = g.theta_moments()
    for emp, exact in ((th, mu), (th[:, :, None] * th[:, None, :], M2)):
        se = emp.std(axis=0, ddof=1) / np.sqrt(n)
        assert np.all(np.abs(emp.mean(axis=0) - exact) <= 5 * se + 1e-12)


def test_word_density_and_dominant_topic():
    g = GM([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], tau=1)
    np.testing.assert_allclose(g.word_density([0.5, 0.5]), [0, 0.4, 0.15, 0.45])
    np.testing.assert_array_equal(g.dominant_topic(), [0, 0, 1])
    with pytest.raises(ValueError, match="last dimension T=2"):
        g.word_density([1.0])


@given(
    T=st.integers(1, 6),
    v=st.integers(1, 9),
    s=st.floats(0.0, 2.0),
    eps=st.floats(0.0, 1.0),
)
def test_construction_is_idempotent(T, v, s, eps):
    """A normalised phi is kept bit for bit: to_dict -> from_dict gives an equal model (no last-bit drift)."""
    for g in (tc.GeneralTopicModel.zipf(T, v, s, tau=1), tc.GeneralTopicModel.overlapping(T, v, eps, tau=T)):
        h = tc.GeneralTopicModel.from_dict(g.to_dict())
        assert h == g
        assert np.array_equal(tc.GeneralTopicModel(h.phi, tau=h.tau).phi, g.phi)
        assert np.abs(g.phi.sum(axis=1) - 1.0).max() <= 8 * np.finfo(float).eps * g.n_words


# ----- sizes bounded before work (issue #26 item 3): the memory guard before phi is built -----
@pytest.mark.parametrize(
    "build, where",
    [
        (lambda: GeneralTopicModel.zipf(T=100000, v=10000, s=1.1, tau=2), "GeneralTopicModel.zipf"),
        (lambda: GeneralTopicModel.overlapping(T=100000, v=100, eps=0.1, tau=2), "GeneralTopicModel.overlapping"),
        (lambda: GeneralTopicModel.overlapping(T=100000, v=100, n_shared=1, tau=2), "GeneralTopicModel.overlapping"),
        (lambda: GeneralTopicModel.unequal([10**6] * 10**4, tau=2), "GeneralTopicModel.unequal"),
        (lambda: GeneralTopicModel.from_lda(np.broadcast_to(1.0, (10**5, 10**6))), "GeneralTopicModel.from_lda"),
        (lambda: GeneralTopicModel(np.broadcast_to(1e-6, (10**5, 10**6)), tau=2), "GeneralTopicModel: phi"),
    ],
)
def test_huge_phi_refused_by_the_memory_guard_before_allocating(build, where, monkeypatch):
    monkeypatch.delenv("THEORYCHECK_MAX_BYTES", raising=False)
    with pytest.raises(ValueError, match="above the memory limit") as e:
        build()
    assert where in str(e.value) and "TopicModel(T, v, tau)" in str(e.value)


def test_phi_guard_follows_the_environment_limit(monkeypatch):
    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "1M")
    with pytest.raises(ValueError, match=r"GeneralTopicModel.zipf: phi: .*1\.0 MiB"):
        GeneralTopicModel.zipf(T=100, v=100, s=1.0, tau=2)
    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "1G")
    assert GeneralTopicModel.zipf(T=100, v=100, s=1.0, tau=2).phi.shape == (100, 10000)
