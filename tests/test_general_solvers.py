"""Stage-1 W^V and the tied embedding Gram for a GeneralTopicModel (SPEC §11.3, §11.5): closed form ==
lstsq == cvxpy, fun == L* = 1 - tr(Phi^T M2 Phi), W° Pi identity, general == symmetric for the paper's
model (1e-12), Gram closed form == SDP, validation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.strategies import maskings, topic_models

GM = tc.GeneralTopicModel
MK = tc.Masking(p_m=0.3, p_c=0.2, p_r=0.25)


def _random_phi(T, n, seed):
    phi = np.random.default_rng(seed).dirichlet(np.ones(n), size=T) + 1e-3
    return phi / phi.sum(axis=1, keepdims=True)


MODELS = {
    "random-tau2": GM(_random_phi(4, 9, 0), tau=2),
    "random-tauT": GM(_random_phi(3, 7, 1), tau=3),
    "random-dirichlet": GM(_random_phi(3, 8, 2), prior="dirichlet", alpha=[0.2, 0.7, 1.5]),
    "overlap-eps": GM.overlapping(4, 3, eps=0.4, tau=2),
    "overlap-shared": GM.overlapping(3, 3, n_shared=2, prior="dirichlet", alpha=0.3),
    "zipf": GM.zipf(3, 4, 1.3, tau=1),
    "unequal": GM.unequal([1, 3, 5], tau=2),
    "identical-topics": GM.overlapping(3, 2, eps=1.0, tau=2),  # all rows equal: rank-one context
}


def _dense(x):
    return x.toarray() if hasattr(x, "toarray") else np.asarray(x)


def _L_star(g):
    _, M2 = g.theta_moments()
    return 1.0 - float(np.trace(g.phi.T @ M2 @ g.phi))


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("reg", [0.0, 0.05])
def test_value_matrix_three_methods_agree(name, reg):
    g = MODELS[name]
    res = {m: tc.solvers.optimal_value_matrix(g, MK, method=m, reg=reg) for m in ("closed-form", "lstsq", "cvxpy")}
    for m, r in res.items():
        assert r.success, (m, r.message)
    W = _dense(res["closed-form"].x)
    np.testing.assert_allclose(_dense(res["lstsq"].x), W, rtol=0, atol=1e-9)
    np.testing.assert_allclose(_dense(res["cvxpy"].x), W, rtol=0, atol=1e-6)
    assert tc.population.value_loss(W, g, MK, reg=reg) == pytest.approx(res["closed-form"].fun, abs=1e-12)
    if reg == 0.0:
        for r in res.values():
            assert r.fun == pytest.approx(_L_star(g), abs=1e-9)
        assert res["closed-form"].fun == pytest.approx(_L_star(g), abs=1e-13)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_closed_form_is_W_circ_Pi(name):
    """SPEC §11.3: C Sigma^+ = W° Pi, W° = (I - c 1^T)/a, Pi the projector onto range(Sigma)."""
    g = MODELS[name]
    W = _dense(tc.solvers.optimal_value_matrix(g, MK).x)
    Sigma, _ = tc.population.moments(g, MK)
    Pi = Sigma @ np.linalg.pinv(Sigma, rcond=1e-10, hermitian=True)
    c = np.r_[MK.q, np.full(g.n_words, MK.r / g.n_words)]
    W_circ = (np.eye(g.V1) - np.outer(c, np.ones(g.V1))) / MK.a
    np.testing.assert_allclose(W, W_circ @ Pi, rtol=0, atol=1e-8)
    rank = tc.solvers.optimal_value_matrix(g, MK, options={"dense": False}).x.rank
    assert rank == np.linalg.matrix_rank(Sigma, tol=1e-10 * np.abs(Sigma).max())
    if g.tau == g.T:
        assert rank == 1


def test_low_rank_result_and_a_zero():
    g = MODELS["random-tau2"]
    r = tc.solvers.optimal_value_matrix(g, MK, options={"dense": False})
    assert isinstance(r.x, tc.solvers.LowRankMatrix) and r.x.shape == (g.V1, g.V1)
    x = np.random.default_rng(0).standard_normal(g.V1)
    np.testing.assert_allclose(r.x @ x, r.x.toarray() @ x, atol=1e-12)
    assert r.x.fro_norm == pytest.approx(np.linalg.norm(r.x.toarray()), rel=1e-12)
    # a = 0 (every position masked): constant context, W = E[p] c^T / ||c||^2, L* = 1 - ||E p||^2
    mk0 = tc.Masking(p_m=1.0, p_c=0.0, p_r=0.3)
    r0 = tc.solvers.optimal_value_matrix(g, mk0)
    r1 = tc.solvers.optimal_value_matrix(g, mk0, method="lstsq")
    Ep = g.word_density(g.theta_moments()[0])
    c = np.r_[mk0.q, np.full(g.n_words, mk0.r / g.n_words)]
    np.testing.assert_allclose(r0.x, np.outer(Ep, c) / (c @ c), atol=1e-13)
    np.testing.assert_allclose(r1.x, r0.x, atol=1e-10)
    assert r0.success and r0.fun == pytest.approx(1 - Ep @ Ep, abs=1e-13)


@settings(max_examples=15)
@given(
    tm=st.one_of(topic_models(max_T=5, max_v=4), topic_models(max_T=5, max_v=4, prior="dirichlet")),
    mk=maskings(),
)
def test_value_and_gram_equal_symmetric(tm, mk):
    g = GM.from_topic_model(tm)
    r_s, r_g = tc.solvers.optimal_value_matrix(tm, mk), tc.solvers.optimal_value_matrix(g, mk)
    Ws, Wg = _dense(r_s.x), _dense(r_g.x)
    np.testing.assert_allclose(Wg, Ws, rtol=0, atol=1e-12 * max(1.0, np.abs(Ws).max()))
    assert r_g.fun == pytest.approx(r_s.fun, abs=1e-12)
    for bias in (False, True):
        G_s = tc.solvers.optimal_embedding_gram(tm, mk, bias=bias)
        G_g = tc.solvers.optimal_embedding_gram(g, mk, bias=bias)
        assert G_g.success, G_g.message
        Gs = G_s.x.toarray()
        np.testing.assert_allclose(_dense(G_g.x), Gs, rtol=0, atol=1e-12 * max(1.0, np.abs(Gs).max()))
        assert G_g.fun == pytest.approx(G_s.fun, abs=1e-12)
        assert G_g.info["rank"] == G_s.info["rank"]
        if bias:
            np.testing.assert_allclose(G_g.info["b"], G_s.info["b"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("bias", [False, True])
def test_gram_closed_form_equals_sdp(name, bias):
    g = MODELS[name]
    cf = tc.solvers.optimal_embedding_gram(g, MK, bias=bias)
    sdp = tc.solvers.optimal_embedding_gram(g, MK, method="cvxpy", bias=bias)
    assert cf.success and sdp.success, (cf.message, sdp.message)
    G = cf.x.toarray()
    np.testing.assert_allclose(sdp.x, G, rtol=0, atol=1e-6)
    assert cf.fun == pytest.approx(_L_star(g), abs=1e-12)
    assert np.trace(sdp.x) >= np.trace(G) - 1e-7  # least trace
    assert np.linalg.eigvalsh(G)[0] >= -1e-12
    W_E = cf.info["W_E"]  # an optimal embedding of dimension rank
    assert W_E.shape == (cf.info["rank"], g.V1)
    kw = {"b": cf.info["b"]} if bias else {}
    if cf.info["rank"] > 0:
        assert tc.population.embedding_loss(W_E, g, MK, **kw) == pytest.approx(_L_star(g), abs=1e-12)


@pytest.mark.parametrize("T,v", [(5, 1), (3, 2), (4, 3), (6, 1)])
@pytest.mark.parametrize("mk", [tc.Masking(p_m=1.0, p_c=0.8835595021016558, p_r=0.0), MK])
def test_gram_with_bias_is_zero_for_a_single_topic_law(T, v, mk):
    """tau = T: every document holds every topic, ``Cov(theta) = M2 - mu mu^T = 0`` exactly, the bias
    alone fits the constant target ``E[p]`` and the least-norm Gram is 0. The subtraction leaves
    round-off of ``~1e-18`` (hypothesis found T = 5, v = 1 with ``p_c = 0.88``), which must not count
    as a direction: the general solver once returned a rank-one Gram of trace 1.13 here (the same loss,
    not the least norm). Checked against the symmetric closed form and the SDP."""
    tm = tc.TopicModel(T=T, v=v, tau=T)
    g = GM.from_topic_model(tm)
    for G_g in (
        tc.solvers.optimal_embedding_gram(g, mk, bias=True),
        tc.solvers.optimal_embedding_gram(g, mk, method="cvxpy", bias=True),
    ):
        assert G_g.success, G_g.message
        np.testing.assert_array_equal(_dense(G_g.x), 0.0)
        np.testing.assert_allclose(G_g.info["b"], g.word_density(g.theta_moments()[0]), atol=1e-15)
    G_s = tc.solvers.optimal_embedding_gram(tm, mk, bias=True)
    assert G_s.info["rank"] == 0 and tc.solvers.optimal_embedding_gram(g, mk, bias=True).info["rank"] == 0
    assert tc.solvers.optimal_embedding_gram(g, mk, bias=True).fun == pytest.approx(G_s.fun, abs=1e-12)


def test_gram_formula_and_ranks():
    """G* = Phi^T (a Phi Phi^T + (r/n) J)^{-1} Phi for tau < T and independent topics (SPEC §11.5)."""
    g = MODELS["random-tau2"]
    Phi = g.topic_token_matrix()
    K = MK.a * Phi @ Phi.T + MK.r / g.n_words
    G = tc.solvers.optimal_embedding_gram(g, MK).x.toarray()
    np.testing.assert_allclose(G, Phi.T @ np.linalg.solve(K, Phi), atol=1e-12)
    assert tc.solvers.optimal_embedding_gram(g, MK).info["rank"] == g.T
    assert tc.solvers.optimal_embedding_gram(g, MK, bias=True).info["rank"] == g.T - 1
    assert tc.solvers.optimal_embedding_gram(MODELS["random-tauT"], MK, bias=True).info["rank"] == 0


def test_validation_messages():
    g = MODELS["random-tau2"]
    with pytest.raises(ValueError, match="method must be one of"):
        tc.solvers.optimal_value_matrix(g, MK, method="rational")
    with pytest.raises(ValueError, match="reg"):
        tc.solvers.optimal_value_matrix(g, MK, reg=-1.0)
    with pytest.raises(ValueError, match="dense=False"):
        tc.solvers.optimal_value_matrix(g, MK, method="lstsq", options={"dense": False})
    with pytest.raises(ValueError, match="p_m"):
        tc.solvers.optimal_value_matrix(g, tc.Masking(p_m=0.0))
    with pytest.raises(ValueError, match="method must be one of"):
        tc.solvers.optimal_embedding_gram(g, MK, method="schur")
    with pytest.raises(ValueError, match="reg"):
        tc.solvers.optimal_embedding_gram(g, MK, reg=0.1)
    with pytest.raises(ValueError, match="d=2 is too small"):
        tc.solvers.optimal_embedding_gram(g, MK, d=2)
    with pytest.raises(ValueError, match="seed"):
        tc.solvers.optimal_embedding_gram(g, MK, options={"seed": 3})
    with pytest.raises(ValueError, match="a = 1 - p_m"):
        tc.solvers.optimal_embedding_gram(g, tc.Masking(p_m=1.0, p_c=0.0))
    big = GM.overlapping(20, 20, eps=0.1, tau=2)
    with pytest.raises(ValueError, match="V1 <="):
        tc.solvers.optimal_value_matrix(big, MK, method="cvxpy")
    with pytest.raises(ValueError, match="V1 <="):
        tc.solvers.optimal_embedding_gram(big, MK, method="cvxpy", options={"max_bytes": 10**15})
    with pytest.raises(ValueError, match="above the memory limit"):
        tc.solvers.optimal_value_matrix(big, MK, options={"dense": True, "max_bytes": 1000})
    with pytest.raises(TypeError, match="symmetric TopicModel"):
        tc.population.stage1_block_constants(g, MK)
