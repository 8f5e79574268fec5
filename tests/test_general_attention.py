"""attention_loss / attention_loss_grad / optimal_attention for a GeneralTopicModel (SPEC §11.4)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp, roots_jacobi, softmax

import theorycheck as tc
from theorycheck.diagnostics import check_gradient
from theorycheck.models import GeneralTopicModel as G
from theorycheck.population import attention_loss, attention_loss_estimate, attention_loss_grad
from theorycheck.population._alpha_beta import alpha_beta_value_matrix
from theorycheck.sampling import Documents, MaskedBatch, mask_documents
from theorycheck.sampling.montecarlo import _stratified, doc_losses
from theorycheck.solvers import cotopic_matrix, stage1_value_matrix
from theorycheck.strategies import maskings, topic_models


def _rand(V1, seed, scale=1.0):
    r = np.random.default_rng(seed)
    return r.uniform(-scale, scale, (V1, V1)), r.uniform(-scale, scale, (V1, V1)), r.uniform(-scale, scale, V1)


# ----------------------------------------------------------------------------- brute force
def _ref_theta(S, W, b, g, mk, theta, mask_keys, loss):
    """Loop over query tokens x' and targets w for one theta (SPEC §11.4, independent of the package)."""
    n = g.n_words
    p = np.concatenate([[0.0], theta @ g.phi])
    m = p.copy() if mask_keys else mk.a * p + np.concatenate([[mk.q], np.full(n, mk.r / n)])
    with np.errstate(divide="ignore"):
        O = softmax(S + np.log(m)[None, :], axis=1) @ W.T + b
    tot = 0.0
    for x in range(g.V1):
        for w in range(1, g.V1):
            P = (1 - mk.p_c - mk.p_r) * p[w] if x == 0 else mk.p_r / n * p[w] + (mk.p_c * p[w] if x == w else 0.0)
            if P == 0.0:
                continue
            e = np.eye(g.V1)[w]
            tot += P * (np.sum((O[x] - e) ** 2) if loss == "squared" else logsumexp(O[x]) - O[x, w])
    return tot


def _ref_uniform(S, W, b, g, mk, mask_keys, loss):
    vals = []
    for st_ in itertools.combinations(range(g.T), g.tau):
        theta = np.zeros(g.T)
        theta[list(st_)] = 1.0 / g.tau
        vals.append(_ref_theta(S, W, b, g, mk, theta, mask_keys, loss))
    return float(np.mean(vals))


# ----------------------------------------------------------------------------- general == symmetric
@settings(max_examples=40)
@given(
    tm=topic_models(max_T=5, max_v=3),
    mk=maskings(),
    seed=st.integers(0, 2**16),
    scale=st.floats(0.01, 10.0),
    with_b=st.booleans(),
    mask_keys=st.booleans(),
    loss=st.sampled_from(["squared", "ce"]),
)
def test_general_path_equals_symmetric(tm, mk, seed, scale, with_b, mask_keys, loss):
    g = G.from_topic_model(tm)
    S, W, b = _rand(tm.V1, seed, scale)
    b = b if with_b else None
    kw = dict(mask_keys=mask_keys, loss=loss)
    Ls, Lg = attention_loss(S, W, tm, mk, b, **kw), attention_loss(S, W, g, mk, b, **kw)
    assert abs(Ls - Lg) <= 1e-12 * max(1.0, abs(Ls))
    rs, rg = attention_loss_grad(S, W, tm, mk, b, **kw), attention_loss_grad(S, W, g, mk, b, **kw)
    assert abs(rs.loss - rg.loss) <= 1e-12 * max(1.0, abs(Ls))
    for a, c in ((rs.dS, rg.dS), (rs.dW, rg.dW), (rs.db, rg.db)):
        np.testing.assert_allclose(c, a, rtol=0, atol=1e-12 * max(1.0, float(np.abs(a).max())))
    est = attention_loss_estimate(S, W, tm, mk, b, **kw)  # a TopicModel is converted
    assert est.exact and est.stderr == 0.0 and est.n == tm.n_topic_sets and abs(est.value - Ls) <= 1e-12 * max(1, Ls)


def test_sampled_sets_match_symmetric_stream(tm_small, mk_spec):
    g = G.from_topic_model(tm_small)
    S, W, b = _rand(tm_small.V1, 3)
    a = attention_loss(S, W, tm_small, mk_spec, b, n_sets=40, seed=7)
    c = attention_loss(S, W, g, mk_spec, b, n_sets=40, seed=7)
    assert c.n_sets == a.n_sets == 40
    assert abs(a.mean - c.mean) <= 1e-12 and abs(a.stderr - c.stderr) <= 1e-12


# ----------------------------------------------------------------------------- brute force, random phi
@settings(max_examples=25)
@given(
    g=general_models(),
    mk=maskings(),
    seed=st.integers(0, 2**16),
    mask_keys=st.booleans(),
    loss=st.sampled_from(["squared", "ce"]),
)
def test_general_equals_brute_force(g, mk, seed, mask_keys, loss):
    S, W, b = _rand(g.V1, seed, 2.0)
    L = attention_loss(S, W, g, mk, b, mask_keys=mask_keys, loss=loss)
    ref = _ref_uniform(S, W, b, g, mk, mask_keys, loss)
    assert abs(L - ref) <= 1e-11 * max(1.0, abs(ref))


@settings(max_examples=8)
@given(g=general_models(max_T=3, max_v=2), seed=st.integers(0, 2**16), loss=st.sampled_from(["squared", "ce"]))
def test_gradients_finite_differences(g, seed, loss):
    mk = tc.Masking(0.4, 0.3, 0.2)
    S, W, b = _rand(g.V1, seed)

    def f(x):
        return attention_loss(x["S"], x["W"], g, mk, x["b"], loss=loss)

    r = attention_loss_grad(S, W, g, mk, b, loss=loss)
    check_gradient(f, {"S": S, "W": W, "b": b}, {"S": r.dS, "W": r.dW, "b": r.db}).assert_ok()


def test_dirichlet_gradient_finite_differences():
    g = G.zipf(3, 2, 1.2, prior="dirichlet", alpha=[0.5, 1.0, 2.0])
    mk = tc.Masking(0.3, 0.2, 0.2)
    S, W, b = _rand(g.V1, 11)
    kw = dict(n_theta=64, seed=5, mask_keys=True)
    r = attention_loss_grad(S, W, g, mk, b, **kw)
    assert r.loss == attention_loss(S, W, g, mk, b, **kw)

    def f(x):
        return attention_loss(x["S"], x["W"], g, mk, x["b"], **kw)

    check_gradient(f, {"S": S, "W": W, "b": b}, {"S": r.dS, "W": r.dW, "b": r.db}).assert_ok()


# ----------------------------------------------------------------------------- Dirichlet: honest SE
def _quadrature_T2(S, W, b, g, mk, n_nodes=80):
    """Exact Dirichlet(a1, a2) loss for T = 2 by Gauss-Jacobi quadrature over theta_1 ~ Beta(a1, a2)."""
    a1, a2 = g.alpha
    t, w = roots_jacobi(n_nodes, a2 - 1.0, a1 - 1.0)  # weight (1 - t)^(a2-1) (1 + t)^(a1-1)
    x = (1.0 + t) / 2.0
    vals = np.array([_ref_theta(S, W, b, g, mk, np.array([xi, 1 - xi]), False, "squared") for xi in x])
    return float(np.sum(w * vals) / np.sum(w))


@pytest.mark.parametrize("alpha", [(0.7, 1.5), (2.0, 3.0)])
def test_dirichlet_estimate_against_quadrature(alpha):
    rng = np.random.default_rng(0)
    g = G(rng.dirichlet(np.ones(5), size=2), prior="dirichlet", alpha=list(alpha))
    mk = tc.Masking(0.3, 0.2, 0.3)
    S, W, b = _rand(g.V1, 1, 2.0)
    exact = _quadrature_T2(S, W, b, g, mk)
    assert abs(_quadrature_T2(S, W, b, g, mk, 120) - exact) < 1e-10  # the quadrature has converged
    z = []
    for seed in range(6):
        est = attention_loss_estimate(S, W, g, mk, b, n_theta=400, seed=seed)
        assert not est.exact and est.n == 400 and est.stderr > 0
        z.append((est.value - exact) / est.stderr)
    z = np.array(z)
    assert np.all(np.abs(z) < 4.0), z  # each estimate within 4 SE of the exact value
    assert 0.3 < np.sqrt(np.mean(z**2)) < 2.0, z  # the SE is neither far too small nor far too large


def test_dirichlet_two_seeds_z_score_and_determinism():
    g = G.overlapping(3, 2, eps=0.2, prior="dirichlet", alpha=0.5)
    mk = tc.Masking()
    S, W, b = _rand(g.V1, 2)
    e1 = attention_loss_estimate(S, W, g, mk, b, n_theta=2000, seed=1)
    e2 = attention_loss_estimate(S, W, g, mk, b, n_theta=2000, seed=2)
    assert abs(e1.value - e2.value) / math.hypot(e1.stderr, e2.stderr) < 4.0
    assert attention_loss(S, W, g, mk, b, n_theta=2000, seed=1) == e1.value
    spread = np.std([attention_loss(S, W, g, mk, b, n_theta=50, seed=s) for s in range(40)], ddof=1)
    se = attention_loss_estimate(S, W, g, mk, b, n_theta=50, seed=0).stderr
    assert 0.5 < spread / se < 2.0  # reported SE vs the spread of 40 independent estimates


# ----------------------------------------------------------------------------- Monte Carlo of documents
def _sample_docs(g, theta, N, rng):
    """Documents from any phi: each position's topic ~ theta, its word ~ phi[topic] (SPEC §11.1)."""
    n_docs = len(theta)
    cdf = np.cumsum(theta, axis=1)
    cdf[:, -1] = 1.0
    offs = np.arange(n_docs)[:, None]
    flat = np.searchsorted((cdf + offs).ravel(), (rng.random((n_docs, N)) + offs).ravel(), side="right")
    topic = np.minimum(flat.reshape(n_docs, N) - offs * g.T, g.T - 1)
    words = np.empty((n_docs, N), np.int64)
    for t in range(g.T):
        sel = topic == t
        words[sel] = 1 + rng.choice(g.n_words, size=int(sel.sum()), p=g.phi[t])
    return Documents(words, np.full(n_docs, N, np.int64), None, theta)


@pytest.mark.parametrize(
    "g, mask_keys",
    [
        (G.overlapping(3, 3, eps=0.3, tau=2), False),
        (G.zipf(3, 3, 1.1, tau=2), True),
        (G.unequal([2, 3, 4], tau=2), False),
        (G.overlapping(3, 2, n_shared=1, tau=1), True),
    ],
)
def test_monte_carlo_of_documents(g, mask_keys):
    """Finite documents of lengths N and 2N (the first N positions of the same documents), stratified
    over topic sets; the Richardson combination ``2 L_2N - L_N`` removes the O(1/N) bias (leading
    bias about 3/N here), leaving O(1/N^2): we allow ``4 SE + 20/N^2``."""
    N, n_docs = 100, 8000
    rng = np.random.default_rng(1)
    mk = tc.Masking(0.3, 0.2, 0.3)
    S, W, b = _rand(g.V1, 4)
    L = attention_loss(S, W, g, mk, b, mask_keys=mask_keys)
    sets = np.array(list(itertools.combinations(range(g.T), g.tau)))
    strata = np.arange(n_docs) % len(sets)
    theta = np.zeros((n_docs, g.T))
    theta[np.arange(n_docs)[:, None], sets[strata]] = 1.0 / g.tau
    full = mask_documents(_sample_docs(g, theta, 2 * N, rng), g, mk, rng=rng)
    half = MaskedBatch(full.inputs[:, :N], full.selected[:, :N], full.targets[:, :N], np.full(n_docs, N))
    l2 = doc_losses(full, S, W, b, mask_keys=mask_keys)
    l1 = doc_losses(half, S, W, b, mask_keys=mask_keys)
    l1 = np.where(np.isnan(l1), l2, l1)  # no selected position among the first N (probability 0.7^100)
    est = _stratified(2 * l2 - l1, strata, n_docs)
    assert abs(est.mean - L) <= 4 * est.stderr + 20 / N**2, (est, L)
    raw = _stratified(l1, strata, n_docs)
    assert raw.mean - L > 4 * raw.stderr  # the finite-N bias is real (the correction is needed)


# ----------------------------------------------------------------------------- optima
def _c_sigma_pinv(g, mk):
    """``C Sigma^+`` from SPEC §11.2 by an eigendecomposition of Sigma (independent of the solver)."""
    mu, M2 = g.theta_moments()
    Phi = g.topic_token_matrix()
    Ep, Epp = Phi.T @ mu, Phi.T @ M2 @ Phi
    c = np.concatenate([[mk.q], np.full(g.n_words, mk.r / g.n_words)])
    C = mk.a * Epp + np.outer(Ep, c)
    Sigma = mk.a**2 * Epp + mk.a * (np.outer(Ep, c) + np.outer(c, Ep)) + np.outer(c, c)
    lam, U = np.linalg.eigh(Sigma)
    keep = lam > 1e-12 * lam.max()
    return (C @ U[:, keep]) / lam[keep] @ U[:, keep].T


@settings(max_examples=10)
@given(g=general_models(), mk=maskings())
def test_stage1_value_is_c_sigma_pinv(g, mk):
    np.testing.assert_allclose(stage1_value_matrix(g, mk), _c_sigma_pinv(g, mk), atol=1e-8)


def test_stage1_value_matches_block(tm_paper, mk_spec):
    g = G.from_topic_model(tm_paper)
    np.testing.assert_allclose(stage1_value_matrix(g, mk_spec), alpha_beta_value_matrix(tm_paper, mk_spec), atol=1e-12)
    Gm = cotopic_matrix(g)
    assert Gm[0].max() == 0 and np.allclose(np.diag(Gm)[1:], 1.0)
    tt = tm_paper.token_topics()
    np.testing.assert_allclose(Gm[1:, 1:], (tt[1:, None] == tt[None, 1:]).astype(float), atol=1e-14)


def test_family_optimum_reproduces_symmetric(tm_paper, mk_spec):
    """G = block co-topic: alpha I_w + beta G is the (alpha, beta) family with alpha_sym = alpha + beta."""
    g = G.from_topic_model(tm_paper)
    sym = tc.solvers.optimal_attention(tm_paper, mk_spec, value="identity")
    gen = tc.solvers.optimal_attention(g, mk_spec, value="identity")
    assert sym.success and gen.success, gen.message
    assert abs(gen.fun - sym.fun) <= 1e-6
    assert abs(gen.alpha + gen.beta - sym.alpha) <= 1e-5 and abs(gen.beta - sym.beta) <= 1e-5
    assert gen.residuals["gradient_norm"] <= 1e-6


def test_unrestricted_at_most_family():
    g = G(np.random.default_rng(0).dirichlet(np.full(6, 0.7), size=3), tau=2)  # no symmetry
    mk = tc.Masking(0.3, 0.2, 0.2)
    fam = tc.solvers.optimal_attention(g, mk, method="family")
    free = tc.solvers.optimal_attention(g, mk, method="lbfgs", options={"solver_options": {"maxiter": 300}})
    assert free.x.shape == (g.V1, g.V1) and free.info["S"] is free.x
    assert free.fun <= fam.fun + 1e-12 and free.fun < fam.fun - 1e-4  # the family is not optimal here
    assert abs(free.fun - attention_loss(free.x, free.W, g, mk)) <= 1e-12
    assert free.residuals["gradient_norm"] < 1e-4 and free.status in (0, 1)  # 1: maxiter (flat softmax shifts)
    assert fam.status == 0 and fam.loss_uniform > fam.fun


def test_family_given_basis_and_dirichlet():
    g = G.zipf(3, 2, 1.0, prior="dirichlet", alpha=0.3)
    mk = tc.Masking(0.3, 0.2, 0.2)
    W = np.eye(g.V1)
    res = tc.solvers.optimal_attention(g, mk, value=W, tol=1e-5, options={"family": [np.eye(g.V1)], "n_grid": 1})
    assert res.x.shape == (1,) and res.status in (0, 3)
    S = res.x[0] * np.eye(g.V1)
    assert abs(res.fun - attention_loss(S, W, g, mk, n_theta=4096, seed=0)) <= 1e-12


# ----------------------------------------------------------------------------- errors
def test_errors(tm_small, mk_spec):
    g = G.from_topic_model(tm_small)
    gd = G(g.phi, prior="dirichlet", alpha=1.0)
    S, W, _ = _rand(g.V1, 0)
    with pytest.raises(ValueError, match="n_theta"):
        attention_loss(S, W, g, mk_spec, n_theta=10, seed=0)
    with pytest.raises(ValueError, match="n_theta"):
        attention_loss(S, W, tm_small, mk_spec, n_theta=10)
    with pytest.raises(ValueError, match="n_sets"):
        attention_loss(S, W, gd, mk_spec, n_sets=10, seed=0)
    with pytest.raises(ValueError, match="seed"):
        attention_loss(S, W, gd, mk_spec)
    with pytest.raises(ValueError, match="n_theta"):
        attention_loss(S, W, gd, mk_spec, n_theta=1, seed=0)
    with pytest.raises(ValueError, match="S"):
        attention_loss(S[:-1], W, g, mk_spec)
    big = G.overlapping(30, 1, eps=0.1, tau=15)
    with pytest.raises(ValueError, match="n_sets"):
        attention_loss(np.zeros((31, 31)), np.eye(31), big, mk_spec)
    with pytest.raises(ValueError, match="family"):
        tc.solvers.optimal_attention(g, mk_spec, options={"family": "nope"})
    with pytest.raises(ValueError, match="family"):
        tc.solvers.optimal_attention(tm_small, mk_spec, options={"family": np.eye(12)})
    with pytest.raises(ValueError, match="certify"):  # the co-topic certificate needs the stage-1 W^V
        tc.solvers.optimal_attention(g, mk_spec, value="identity", options={"certify": "interval"})
    with pytest.raises(ValueError, match="method"):
        tc.solvers.optimal_attention(g, mk_spec, method="sdp")
    with pytest.raises(ValueError, match="value"):
        tc.solvers.optimal_attention(g, mk_spec, value="nope")
