"""Optimal tied embedding Gram: closed form == Schur completion == cvxpy == L-BFGS; minimiser checker."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.analysis.stats import embedding_topic_stats
from theorycheck.population import embedding_loss, moments, value_loss
from theorycheck.solvers import (
    BlockGram,
    closed_form_gram,
    embedding_from_gram,
    embedding_minimiser_violation,
    identifiable_part,
    min_embedding_dim,
    optimal_embedding_gram,
)
from theorycheck.strategies import maskings, topic_models

PAPER = dict(tm=tc.TopicModel(T=10, v=10, tau=3), mk=tc.Masking(0.15, 0.1, 0.1))


def _informative(mk):
    assume(mk.a > 0.05)
    return mk


def _null_projector(tm, mk):
    Sigma, _ = moments(tm, mk)
    lam, U = np.linalg.eigh(Sigma)
    Up = U[:, lam <= 1e-12 * lam.max()]
    return Up @ Up.T


# ----------------------------------------------------------------------------- closed form vs independent solvers
@given(topic_models(max_T=7, max_v=5), maskings())
def test_closed_form_equals_schur_completion_and_attains_Lstar(tm, mk):
    _informative(mk)
    cf = optimal_embedding_gram(tm, mk, method="closed-form")
    sc = optimal_embedding_gram(tm, mk, method="schur")
    assert cf.success and sc.success, (cf.message, sc.message)
    G = cf.x.toarray()
    assert np.max(np.abs(G - sc.x)) <= 1e-9 * (1 + np.max(np.abs(G)))
    L_star = 1 - 1 / (tm.tau * tm.v)
    assert abs(value_loss(G, tm, mk) - L_star) <= 1e-12
    assert abs(value_loss(sc.x, tm, mk) - L_star) <= 1e-12
    assert np.linalg.eigvalsh(G)[0] >= -1e-12
    # min-norm: the [MASK] embedding vanishes
    assert np.all(G[0] == 0.0)


@settings(max_examples=8)
@given(topic_models(max_T=4, max_v=3), maskings(), st.sampled_from(["CLARABEL", "SCS"]))
def test_closed_form_equals_cvxpy_trace_minimisation(tm, mk, solver):
    _informative(mk)
    cv = optimal_embedding_gram(tm, mk, method="cvxpy", solver=solver)
    G = closed_form_gram(tm, mk).toarray()
    tol = 1e-6 if solver == "CLARABEL" else 1e-4  # first-order SCS is less accurate
    assert cv.status in (0, 4), cv.message
    assert np.max(np.abs(cv.x - G)) <= tol * (1 + np.max(np.abs(G)))
    assert cv.residuals["loss_gap"] <= 10 * tol  # attains 1 - 1/(tau v) (recomputed by value_loss)
    assert np.linalg.eigvalsh(cv.x)[0] >= -tol
    # certificate recomputed by us from cvxpy's multipliers
    assert abs(cv.residuals["duality_gap"]) <= 10 * tol * (1 + np.trace(G))
    assert cv.residuals["dual_infeasibility"] <= 10 * tol


@settings(max_examples=6)
@given(topic_models(max_T=4, max_v=3), maskings(), st.integers(0, 3), st.integers(0, 100))
def test_factorized_lbfgs_reaches_optimum(tm, mk, extra_d, seed):
    _informative(mk)
    d = min_embedding_dim(tm, mk) + extra_d
    fz = optimal_embedding_gram(tm, mk, method="factorized", d=d, options={"seed": seed})
    L_star = 1 - 1 / (tm.tau * tm.v)
    W = fz.info["W_E"]
    assert W.shape == (d, tm.V1)
    assert embedding_loss(W, tm, mk) - L_star <= 1e-8
    assert fz.success, fz.message
    # same identifiable part (G m_S = p_S fixes G outside the free block P_perp G P_perp)
    G = closed_form_gram(tm, mk).toarray()
    diff = identifiable_part(fz.x, tm, mk) - identifiable_part(G, tm, mk)
    assert np.max(np.abs(diff)) <= 1e-4
    assert embedding_minimiser_violation(W, tm, mk) <= 1e-5
    # the trace (norm) can only be >= the min-norm value
    assert np.trace(fz.x) >= np.trace(G) - 1e-7


def test_paper_configuration_values():
    """T = v = 10, tau = 3, p = .15/.1/.1: SPEC §4.1 D3 quotes x = 0.115410, y = -0.000197."""
    res = optimal_embedding_gram(PAPER["tm"], PAPER["mk"])
    assert res.success
    assert res.same_topic == pytest.approx(0.115410, abs=5e-7)
    assert res.different_topic == pytest.approx(-0.000197, abs=5e-7)
    a, r = PAPER["mk"].a, PAPER["mk"].r
    G = res.x.toarray()
    lam = np.linalg.eigvalsh(G)
    ones = np.r_[0.0, np.ones(100)]
    assert ones @ G @ ones / (ones @ ones) == pytest.approx(1 / (a + r), rel=1e-12)
    assert np.sum(lam > 1e-10) == 10 == min_embedding_dim(**PAPER)
    lam = np.sort(lam)  # 1/(a+r) = 1.136 < 1/a = 1.156 (x 9), then 91 zeros
    assert lam[-9:] == pytest.approx(np.full(9, 1 / a), rel=1e-10)
    assert lam[-10] == pytest.approx(1 / (a + r), rel=1e-10)
    assert np.max(np.abs(lam[:-10])) <= 1e-12


def test_huge_vocabulary_closed_form_is_structured():
    tm = tc.TopicModel(T=1000, v=100, tau=30)
    res = optimal_embedding_gram(tm, tc.Masking())
    assert isinstance(res.x, BlockGram) and res.success
    assert res.x.rank() == 1000
    assert abs(res.residuals["loss_gap"]) <= 1e-12
    # structured matvec agrees with the block formula on a random vector
    z = np.random.default_rng(0).normal(size=tm.V1)
    Gz = res.x.matvec(z)
    ts = z[1:].reshape(1000, 100).sum(axis=1)
    assert Gz[0] == 0.0
    assert Gz[1] == pytest.approx(res.x.x * ts[0] + res.x.y * (ts.sum() - ts[0]), rel=1e-10)


@settings(max_examples=15)
@given(topic_models(max_T=5, max_v=4), maskings(), st.integers(0, 2**31))
def test_block_gram_matvec_and_structured_loss_equal_dense(tm, mk, seed):
    _informative(mk)
    res = optimal_embedding_gram(tm, mk)
    G = res.x.toarray()
    z = np.random.default_rng(seed).normal(size=tm.V1)
    assert np.allclose(res.x.matvec(z), G @ z, rtol=1e-12, atol=1e-12)
    assert abs(res.residuals["loss_gap_dense"] - res.residuals["loss_gap"]) <= 1e-12
    assert res.x.trace == pytest.approx(np.trace(G), rel=1e-12)


# ----------------------------------------------------------------------------- degenerate cases
@pytest.mark.parametrize(
    "T,v,tau,p",
    [
        (4, 3, 4, (0.15, 0.1, 0.1)),  # tau = T: one document law, rank-one optimum
        (1, 3, 1, (0.15, 0.1, 0.1)),  # T = 1
        (5, 1, 2, (0.15, 0.1, 0.1)),  # v = 1
        (4, 3, 2, (0.3, 0.5, 0.5)),  # q = 0 (no [MASK] token shown)
        (4, 3, 2, (0.3, 0.2, 0.0)),  # r = 0 (no random replacement): y = 0
        (4, 3, 1, (1.0, 0.3, 0.0)),  # every position selected
    ],
)
def test_degenerate_cases_match_schur_and_cvxpy(T, v, tau, p):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*p)
    cf = optimal_embedding_gram(tm, mk)
    G = cf.x.toarray()
    sc = optimal_embedding_gram(tm, mk, method="schur")
    cv = optimal_embedding_gram(tm, mk, method="cvxpy")
    assert cf.success and sc.success and cv.status in (0, 4)
    assert np.max(np.abs(sc.x - G)) <= 1e-9
    assert np.max(np.abs(cv.x - G)) <= 1e-6
    rank = np.sum(np.linalg.eigvalsh(G) > 1e-9)
    assert rank == min_embedding_dim(tm, mk) == (1 if tau == T else T)
    if mk.r == 0 and tau < T:
        assert cf.x.y == 0.0


def test_single_law_optimum_has_no_topic_structure():
    """tau = T: the block-sum identity own - other = 1/a does NOT hold (SPEC §4.1 needs tau < T)."""
    tm, mk = tc.TopicModel(T=4, v=3, tau=4), tc.Masking()
    G = closed_form_gram(tm, mk)
    assert G.x == G.y  # same-topic = different-topic inner product
    W = embedding_from_gram(G, 1)
    assert embedding_minimiser_violation(W, tm, mk) <= 1e-14


def test_rejects_unreachable_configurations():
    tm = tc.TopicModel(T=3, v=2, tau=1)
    with pytest.raises(ValueError, match="p_m"):
        optimal_embedding_gram(tm, tc.Masking(p_m=0.0))
    with pytest.raises(ValueError, match="a = 1 - p_m"):
        optimal_embedding_gram(tm, tc.Masking(p_m=1.0, p_c=0.0, p_r=0.5))


# ----------------------------------------------------------------------------- all optima: structure
@settings(max_examples=10)
@given(topic_models(min_T=2, max_T=5, min_v=2, max_v=4), maskings(), st.integers(0, 50))
def test_same_topic_exceeds_different_topic_for_every_optimum_found(tm, mk, seed):
    _informative(mk)
    assume(tm.tau < tm.T)
    d = tm.T + 1
    for W in (
        embedding_from_gram(closed_form_gram(tm, mk), d),
        optimal_embedding_gram(tm, mk, method="factorized", d=d, options={"seed": seed}).info["W_E"],
    ):
        s = embedding_topic_stats(W, tm)
        assert s.gap_dot > 0
        assert s.gap_cos > 0


def test_same_topic_gap_is_not_universal_over_minimisers():
    """A valid minimiser (null-space perturbation) where distinct-token same-topic < different-topic.

    Adding ``c P_w`` (``P_w`` the within-topic zero-mean projector) keeps G PSD and optimal, raises
    the diagonal by ``c (v-1)/v`` and lowers same-topic off-diagonal entries by ``c/v``. So the
    paper's statement holds for the min-norm / small-init optimum and for block sums (including
    i = j), not for every minimiser.
    """
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    G = closed_form_gram(tm, mk).toarray()
    Pw = np.zeros_like(G)
    Pw[1:, 1:] = np.eye(tm.n_words) - np.kron(np.eye(tm.T), np.ones((tm.v, tm.v)) / tm.v)
    G2 = G + 3.0 * Pw  # same-topic off-diagonal entries drop by 3/v = 1 > x - y = 1/(a v)
    W = embedding_from_gram(G2, tm.V1)
    assert embedding_loss(W, tm, mk) - tm.min_value_loss() <= 1e-12
    assert embedding_minimiser_violation(W, tm, mk) <= 1e-12
    s = embedding_topic_stats(W, tm)
    assert s.gap_dot < 0
    assert s.same_token_dot > s.diff_topic_dot


# ----------------------------------------------------------------------------- the minimiser checker
@given(topic_models(max_T=5, max_v=4), maskings(), st.integers(0, 2**31), st.floats(1e-3, 1.0))
def test_checker_accepts_null_perturbations_and_rejects_others(tm, mk, seed, eps):
    _informative(mk)
    rng = np.random.default_rng(seed)
    G = closed_form_gram(tm, mk).toarray()
    Pp = _null_projector(tm, mk)
    X = rng.normal(size=(tm.V1, tm.V1))
    G_ok = G + eps * Pp @ X @ X.T @ Pp  # still PSD, still optimal
    W_ok = embedding_from_gram(G_ok, tm.V1)
    assert embedding_minimiser_violation(W_ok, tm, mk) <= 1e-9
    assert embedding_loss(W_ok, tm, mk) - tm.min_value_loss() <= 1e-10
    # a random PSD perturbation leaves the minimiser set: checker and loss both see it
    Y = rng.normal(size=(tm.V1, 2))
    G_bad = G + eps * Y @ Y.T
    W_bad = embedding_from_gram(G_bad, tm.V1)
    viol = embedding_minimiser_violation(W_bad, tm, mk)
    gap = embedding_loss(W_bad, tm, mk) - tm.min_value_loss()
    assert gap > 1e-12
    assert viol > 1e-6 * eps
    # the loss excess is quadratic in the violation: gap <= c * viol^2 with c = O(V1)
    assert gap <= 10 * tm.V1 * viol**2 + 1e-14


@settings(max_examples=15)
@given(topic_models(max_T=5, max_v=3), maskings(), st.integers(0, 2**31), st.booleans())
def test_checker_matches_direct_condition_untied(tm, mk, seed, with_b):
    """Untied: violation == 0 iff M m_S + b = p_S for every topic set (direct, enumerated)."""
    _informative(mk)
    rng = np.random.default_rng(seed)
    d = tm.V1
    # an exact untied minimiser: least-squares M from the enumerated conditions, then factor M = W_dec W_E
    sets = tc.population.topic_sets(tm)
    Mm = np.stack([tc.population.masked_density(tm, mk, S) for S in sets], axis=1)
    P = np.stack([tc.population.topic_density(tm, S) for S in sets], axis=1)
    b = rng.normal(size=tm.V1) * 0.1 if with_b else None
    target = P - (0 if b is None else b[:, None])
    M = target @ np.linalg.pinv(Mm)
    W_E = np.eye(d)
    # with any b the affine conditions are solvable (the m_S have mass 1), so this M is exact
    assert np.max(np.abs(M @ Mm + (0 if b is None else b[:, None]) - P)) <= 1e-10
    assert embedding_minimiser_violation(W_E, tm, mk, W_dec=M, b=b, tied=False) <= 1e-9
    assert embedding_loss(W_E, tm, mk, W_dec=M, b=b, tied=False) - tm.min_value_loss() <= 1e-12
    # a random perturbation of M: the direct condition, the checker and the loss all see it
    M_bad = M + 1e-3 * rng.normal(size=M.shape)
    direct = np.max(np.abs(M_bad @ Mm + (0 if b is None else b[:, None]) - P))
    viol = embedding_minimiser_violation(W_E, tm, mk, W_dec=M_bad, b=b, tied=False)
    gap = embedding_loss(W_E, tm, mk, W_dec=M_bad, b=b, tied=False) - tm.min_value_loss()
    assert direct > 1e-6 and viol > 1e-6 and gap > 0
    # the loss excess is the mean squared residual of the direct condition
    assert gap == pytest.approx(
        np.mean(np.sum((M_bad @ Mm + (0 if b is None else b[:, None]) - P) ** 2, axis=0)), rel=1e-6
    )


# ----------------------------------------------------------------------------- embedding_from_gram / dims
@settings(max_examples=15)
@given(topic_models(max_T=5, max_v=4), maskings(), st.integers(0, 3))
def test_embedding_from_gram_reproduces_gram(tm, mk, extra):
    _informative(mk)
    G = closed_form_gram(tm, mk)
    d = G.rank() + extra
    for Gin in (G, G.toarray()):
        W = embedding_from_gram(Gin, d)
        assert W.shape == (d, tm.V1)
        assert np.max(np.abs(W.T @ W - G.toarray())) <= 1e-10
        assert np.all(W[:, 0] == 0.0)


def test_d_below_rank_cannot_reach_optimum():
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    with pytest.raises(ValueError, match=r"d=3 is too small .* rank >= 4"):
        optimal_embedding_gram(tm, mk, method="factorized", d=3)
    with pytest.raises(ValueError, match="d=3 is too small"):
        embedding_from_gram(closed_form_gram(tm, mk), 3)
    # and indeed a rank-3 model stays strictly above L* (every minimiser has rank >= T)
    fz = optimal_embedding_gram(tm, mk, method="factorized", d=3, reg=1e-12)
    assert fz.fun - tm.min_value_loss() > 1e-6


@settings(max_examples=6)
@given(topic_models(min_T=2, max_T=5, max_v=3, max_tau=4), maskings(), st.integers(0, 20))
def test_rank_deficient_embeddings_respect_eckart_young_bound(tm, mk, seed):
    """d = T - 1: the loss gap is >= sigma_T(C Sigma^{+1/2})^2 > 0 for ANY rank-(T-1) map."""
    from proofs_numeric._embedding_common import lbfgs_embedding
    from proofs_numeric.embedding_min_dim import _eckart_young_bound

    _informative(mk)
    assume(tm.tau < tm.T)
    bound, _ = _eckart_young_bound(tm, mk, tm.T - 1)
    assert bound > 1e-8
    W = lbfgs_embedding(tm, mk, tm.T - 1, seed=seed)
    assert embedding_loss(W, tm, mk) - tm.min_value_loss() >= bound - 1e-10
    # and a random rank-(T-1) PSD Gram is no better
    X = np.random.default_rng(seed).normal(size=(tm.T - 1, tm.V1))
    assert embedding_loss(X, tm, mk) - tm.min_value_loss() >= bound - 1e-10


def test_regularised_cvxpy_equals_regularised_lbfgs_and_tends_to_min_norm():
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking()
    G = closed_form_gram(tm, mk).toarray()
    prev = np.inf
    for reg in (1e-1, 1e-2, 1e-3):
        cv = optimal_embedding_gram(tm, mk, method="cvxpy", reg=reg)
        fz = optimal_embedding_gram(tm, mk, method="factorized", d=tm.V1, reg=reg)
        assert cv.status == 0 and fz.status == 0, (cv.message, fz.message)
        assert abs(cv.fun - fz.fun) <= 1e-6
        assert np.max(np.abs(cv.x - fz.x)) <= 1e-4
        dist = np.max(np.abs(cv.x - G))
        assert dist < prev
        prev = dist
    assert prev <= 1e-2


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(method="magic"), ValueError, "method must be one of"),
        (dict(solver="MOSEK"), ValueError, "solver must be one of"),
        (dict(d=0), ValueError, "d must lie in"),
        (dict(d=2.5), ValueError, "d must be an integer"),
        (dict(reg=-1.0), ValueError, "reg must lie in"),
        (dict(reg=0.1), ValueError, "reg=0.1: method='closed-form'"),
        (dict(method="factorized"), ValueError, "d is required"),
        (dict(method="factorized", d=2), ValueError, "d=2 is too small"),
        (dict(options={"init_scale": 0.0}), ValueError, "init_scale"),
        (dict(bias="yes"), TypeError, "bias must be a bool"),
        (dict(tm=None), TypeError, "tm must be a TopicModel"),
    ],
)
def test_optimal_embedding_gram_rejects(kwargs, exc, match):
    args = dict(tm=tc.TopicModel(T=3, v=2, tau=1), mk=tc.Masking())
    args.update(kwargs)
    tm, mk = args.pop("tm"), args.pop("mk")
    with pytest.raises(exc, match=match):
        optimal_embedding_gram(tm, mk, **args)


def test_dense_methods_refuse_huge_vocabulary():
    with pytest.raises(ValueError, match="V1 = 100001.*above the memory limit.*method='closed-form'"):
        optimal_embedding_gram(tc.TopicModel(T=1000, v=100, tau=3), tc.Masking(), method="schur")


@pytest.mark.parametrize(
    "G,d,match",
    [
        (np.eye(3), 0, "d must lie in"),
        (np.ones((3, 4)), 3, "square"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), 2, "symmetric"),
        (-np.eye(2), 2, "positive semidefinite"),
        (np.full((2, 2), np.nan), 2, "finite"),
        (np.eye(3), 2, "d=2 is too small"),
    ],
)
def test_embedding_from_gram_rejects(G, d, match):
    with pytest.raises(ValueError, match=match):
        embedding_from_gram(G, d)


def test_minimiser_violation_rejects_bad_shapes():
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking()
    with pytest.raises(ValueError, match="W_E must have shape"):
        embedding_minimiser_violation(np.zeros((2, 6)), tm, mk)
    with pytest.raises(ValueError, match="W_dec .* is required"):
        embedding_minimiser_violation(np.zeros((2, 7)), tm, mk, tied=False)
    with pytest.raises(ValueError, match="finite"):
        embedding_minimiser_violation(np.full((2, 7), np.nan), tm, mk)


def test_gradient_descent_from_small_init_reaches_min_norm_gram():
    """SPEC §4.1 D2: plain GD from small init keeps E_0 ~ init and lands on the min-norm Gram.

    (Within-topic zero-mean components of W_E can only shrink under gradient flow, since their
    velocity is -2 W_E Sigma W_E^T applied to them; the min-norm Gram is reached up to O(init^2).)
    """
    from theorycheck.population import embedding_loss_grad

    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking()
    G_star = closed_form_gram(tm, mk).toarray()
    W = 1e-3 * np.random.default_rng(0).standard_normal((tm.T + 2, tm.V1))
    for _ in range(800):
        W = W - 1.0 * embedding_loss_grad(W, tm, mk).dW_E
    assert embedding_loss(W, tm, mk) - tm.min_value_loss() <= 1e-10
    assert np.linalg.norm(W[:, 0]) <= 1e-2
    assert np.max(np.abs(W.T @ W - G_star)) <= 1e-4


@settings(max_examples=5)
@given(topic_models(min_T=2, max_T=5, max_v=4), maskings(), st.integers(0, 100))
def test_tied_model_with_free_bias_keeps_block_sum_identity(tm, mk, seed):
    """SPEC §4.1: with a trained decoder bias the own-minus-other identity (1/a) still holds."""
    from scipy.optimize import minimize

    from theorycheck.analysis.stats import own_minus_other_block_sums
    from theorycheck.population import embedding_loss_grad

    _informative(mk)
    assume(tm.tau < tm.T)
    d = tm.T + 2
    rng = np.random.default_rng(seed)
    x0 = np.r_[1e-2 * rng.standard_normal(d * tm.V1), np.zeros(tm.V1)]

    def fg(z):
        W, b = z[: d * tm.V1].reshape(d, tm.V1), z[d * tm.V1 :]
        out = embedding_loss_grad(W, tm, mk, b=b)
        return out.loss, np.r_[out.dW_E.ravel(), out.db]

    opt = minimize(fg, x0, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-11})
    W, b = opt.x[: d * tm.V1].reshape(d, tm.V1), opt.x[d * tm.V1 :]
    assert embedding_loss(W, tm, mk, b=b) - tm.min_value_loss() <= 1e-9
    assert embedding_minimiser_violation(W, tm, mk, b=b) <= 1e-4
    D = own_minus_other_block_sums(W, tm)
    assert np.max(np.abs(mk.a * D - 1.0)) <= 1e-4


# ----------------------------------------------------------------------------- free decoder bias
@given(topic_models(max_T=6, max_v=4), maskings())
def test_bias_closed_form_equals_schur_and_attains_Lstar(tm, mk):
    _informative(mk)
    cf = optimal_embedding_gram(tm, mk, bias=True)
    sc = optimal_embedding_gram(tm, mk, method="schur", bias=True)
    assert cf.success and sc.success
    G = cf.x.toarray()
    assert np.max(np.abs(G - sc.x)) <= 1e-9 * (1 + np.max(np.abs(G)))
    assert np.max(np.abs(cf.b - sc.b)) <= 1e-9
    assert abs(value_loss(G, tm, mk, b=cf.b) - tm.min_value_loss()) <= 1e-12
    u = np.r_[0.0, np.full(tm.n_words, 1 / tm.n_words)]
    assert np.max(np.abs(cf.b - u)) <= 1e-15  # the bias predicts the mean word distribution
    # a free bias can only lower the minimum norm
    assert cf.x.trace <= closed_form_gram(tm, mk).trace + 1e-12


@settings(max_examples=4)
@given(topic_models(max_T=4, max_v=3), maskings())
def test_bias_closed_form_equals_cvxpy(tm, mk):
    _informative(mk)
    cv = optimal_embedding_gram(tm, mk, method="cvxpy", bias=True)
    assert cv.status in (0, 4), cv.message
    G = closed_form_gram(tm, mk, bias=True).toarray()
    assert np.max(np.abs(cv.x - G)) <= 1e-6
    assert abs(cv.residuals["duality_gap"]) <= 1e-5


@settings(max_examples=5)
@given(topic_models(min_T=2, max_T=4, max_v=3), maskings(), st.integers(0, 50))
def test_bias_factorized_reaches_optimum_with_d_equal_T_minus_1(tm, mk, seed):
    _informative(mk)
    d = max(min_embedding_dim(tm, mk, bias=True), 1)
    assert d == (1 if tm.tau == tm.T else tm.T - 1)
    fz = optimal_embedding_gram(tm, mk, method="factorized", d=d, bias=True, options={"seed": seed})
    assert fz.success, fz.message
    assert embedding_loss(fz.W_E, tm, mk, b=fz.b) - tm.min_value_loss() <= 1e-8
    G = closed_form_gram(tm, mk, bias=True).toarray()
    diff = identifiable_part(fz.x, tm, mk, bias=True) - identifiable_part(G, tm, mk, bias=True)
    assert np.max(np.abs(diff)) <= 1e-4


def test_bias_min_norm_matches_spec_gradient_descent_numbers():
    """SPEC §4.1: 'with a free bias ... (T=5, v=4, tau=2) GD from small init gives same-topic
    ~ 0.231, different-topic ~ -0.058'. These are the bias min-norm values (T-1)/(a v T), -1/(a v T)."""
    tm, mk = tc.TopicModel(T=5, v=4, tau=2), tc.Masking()
    G = closed_form_gram(tm, mk, bias=True)
    assert G.x == pytest.approx(0.231, abs=5e-4)
    assert G.y == pytest.approx(-0.058, abs=5e-4)
    assert G.rank() == tm.T - 1 == min_embedding_dim(tm, mk, bias=True)


@settings(max_examples=15)
@given(topic_models(prior="dirichlet", max_T=6, max_v=4), maskings(), st.booleans())
def test_dirichlet_prior_same_min_norm_gram(tm, mk, bias):
    """The min-norm Gram does not depend on the document law (LDA prior included), only on a, r, T, v."""
    _informative(mk)
    cf = optimal_embedding_gram(tm, mk, bias=bias)
    sc = optimal_embedding_gram(tm, mk, method="schur", bias=bias)
    assert cf.success and sc.success, (cf.message, sc.message)
    assert np.max(np.abs(cf.x.toarray() - sc.x)) <= 1e-9 * (1 + abs(cf.x.x))
    assert abs(cf.fun - tm.min_value_loss()) <= 1e-12
    if tm.T >= 2:
        uniform = tc.TopicModel(T=tm.T, v=tm.v, tau=1)
        assert closed_form_gram(uniform, mk, bias=bias) == cf.x


def test_ignored_arguments_warn():
    """Arguments a method does not use are never dropped silently (TheorycheckWarning)."""
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    with pytest.warns(tc.TheorycheckWarning, match="solver is ignored by method='closed-form'"):
        tc.solvers.optimal_embedding_gram(tm, mk, solver="SCS")
    with pytest.warns(tc.TheorycheckWarning, match="seed, maxiter are ignored"):
        tc.solvers.optimal_embedding_gram(tm, mk, method="schur", options={"seed": 3, "maxiter": 5})
