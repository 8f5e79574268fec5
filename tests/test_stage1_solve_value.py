"""Stage-1 optimal W^V (SPEC §4.2): closed form vs lstsq vs cvxpy, minimiser set, residuals, input checks."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population import moments, value_loss
from theorycheck.solvers import BlockValueMatrix, minimiser_violation, optimal_value_matrix
from theorycheck.solvers._symmetric import TopicSym
from theorycheck.solvers.value._residuals import _block_residuals, _dense_residuals
from theorycheck.strategies import maskings


@st.composite
def stage1_models(draw, max_T=12, max_v=8, dirichlet=True):
    """T in [2, max_T], v in [1, max_v], tau in [1, T] (or a Dirichlet prior)."""
    T = draw(st.integers(2, max_T))
    v = draw(st.integers(1, max_v))
    if dirichlet and draw(st.integers(0, 4)) == 0:
        return tc.TopicModel(T=T, v=v, prior="dirichlet", alpha=draw(st.floats(0.05, 5.0)))
    return tc.TopicModel(T=T, v=v, tau=draw(st.integers(1, T)))


def _expected_min_loss(tm):
    """1 - 1/(tau v) (uniform-tau) or 1 - (alpha+1)/((T alpha+1) v) (Dirichlet), written out here."""
    if tm.prior == "uniform-tau":
        return 1.0 - 1.0 / (tm.tau * tm.v)
    return 1.0 - (tm.alpha + 1.0) / ((tm.T * tm.alpha + 1.0) * tm.v)


# ------------------------------------------------------------------------------ methods agree
@settings(max_examples=40)
@given(stage1_models(), maskings(min_p_m=0.01), st.sampled_from([0.0, 0.0, 1e-3, 0.1, 2.0]))
def test_closed_form_equals_lstsq(tm, mk, reg):
    cf = optimal_value_matrix(tm, mk, reg=reg, method="closed-form")
    ls = optimal_value_matrix(tm, mk, reg=reg, method="lstsq")
    assert cf.success and ls.success, (cf.message, ls.message)
    np.testing.assert_allclose(cf.x, ls.x, rtol=0, atol=1e-8 * max(1.0, np.abs(ls.x).max()))
    assert cf.fun == pytest.approx(ls.fun, abs=1e-10)


@settings(max_examples=6)
@given(stage1_models(max_T=5, max_v=3), maskings(min_p_m=0.05), st.sampled_from([0.0, 0.3]))
def test_closed_form_equals_cvxpy(tm, mk, reg):
    cf = optimal_value_matrix(tm, mk, reg=reg, method="closed-form")
    cv = optimal_value_matrix(tm, mk, reg=reg, method="cvxpy")
    assert cv.success, cv.message
    assert cv.info["backend_status"].startswith("optimal")
    np.testing.assert_allclose(cv.x, cf.x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("solver", ["SCS", "OSQP"])
def test_other_cvxpy_solvers(solver):
    tm, mk = tc.TopicModel(T=4, v=2, tau=2), tc.Masking()
    cf = optimal_value_matrix(tm, mk)
    cv = optimal_value_matrix(tm, mk, method="cvxpy", solver=solver)
    assert cv.success, cv.message
    np.testing.assert_allclose(cv.x, cf.x, atol=1e-5)


# ------------------------------------------------------------------------------ the optimum
@settings(max_examples=40)
@given(stage1_models(), maskings(min_p_m=0.01))
def test_minimum_loss_is_one_minus_inverse_tau_v(tm, mk):
    res = optimal_value_matrix(tm, mk)
    W = res.x
    assert value_loss(W, tm, mk) == pytest.approx(_expected_min_loss(tm), abs=1e-12)
    # any other matrix is no better; random directions strictly worse along non-null directions
    rng = np.random.default_rng(0)
    E = rng.normal(size=W.shape)
    assert value_loss(W + 1e-3 * E, tm, mk) > value_loss(W, tm, mk)


@settings(max_examples=30)
@given(stage1_models(max_T=8, max_v=5), maskings(min_p_m=0.01), st.integers(0, 2**31))
def test_minimiser_set(tm, mk, seed):
    """Every W* + Z with rows of Z in null(Sigma) minimises (loss = L*) and has zero violation;
    generic perturbations have positive violation and larger loss."""
    Sigma, _ = moments(tm, mk)
    rng = np.random.default_rng(seed)
    results = [optimal_value_matrix(tm, mk, method=m) for m in ("closed-form", "lstsq")]
    for res in results:
        assert minimiser_violation(res.x, tm, mk).norm <= 1e-10
    W = results[0].x
    P_null = np.eye(tm.V1) - Sigma @ np.linalg.pinv(Sigma, hermitian=True)
    Z = rng.normal(size=W.shape) @ P_null
    L_star = _expected_min_loss(tm)
    assert value_loss(W + Z, tm, mk) == pytest.approx(L_star, abs=1e-9)
    assert minimiser_violation(W + Z, tm, mk).norm <= 1e-8
    bad = W + 1e-2 * rng.normal(size=W.shape)
    viol = minimiser_violation(bad, tm, mk).norm
    assert viol > 1e-4
    assert value_loss(bad, tm, mk) > L_star + 1e-9


@settings(max_examples=25)
@given(stage1_models(max_T=8, max_v=5, dirichlet=False), maskings(min_p_m=0.01), st.integers(0, 2**31))
def test_minimiser_violation_with_bias(tm, mk, seed):
    """With a bias: (W, b) minimises iff W m_S + b = p_S; build such pairs by least squares over b."""
    assume(tm.tau < tm.T)
    rng = np.random.default_rng(seed)
    W = optimal_value_matrix(tm, mk).x
    # shift along the affine set: change g by delta, fix block sums and pick b to compensate
    g = rng.normal(size=tm.V1)
    W2 = W.copy()
    W2[:, 1:] += g[:, None]  # Y_t += v g
    b = -(mk.a + mk.r) * g  # keeps q z + b + (a+r) g + r/(aTv) 1_W = 0
    viol = minimiser_violation(W2, tm, mk, b=b)
    assert viol.norm <= 1e-9
    np.testing.assert_allclose(viol.g - minimiser_violation(W, tm, mk).g, g, atol=1e-9)
    assert value_loss(W2, tm, mk, b=b) == pytest.approx(_expected_min_loss(tm), abs=1e-9)
    assert minimiser_violation(W2, tm, mk).norm > 1e-3  # without the bias it is not a minimiser


def test_block_sum_identity_every_minimiser():
    """Own-topic minus other-topic block sums equal 1/a in every word row (SPEC §6 item 7)."""
    tm, mk = tc.TopicModel(T=6, v=3, tau=2), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.3)
    Sigma, _ = moments(tm, mk)
    rng = np.random.default_rng(1)
    W = optimal_value_matrix(tm, mk).x + rng.normal(size=(tm.V1, tm.V1)) @ (
        np.eye(tm.V1) - Sigma @ np.linalg.pinv(Sigma)
    )
    Y = W[:, 1:].reshape(tm.V1, tm.T, tm.v).sum(axis=2)
    topics = tm.token_topics()[1:]
    own = Y[np.arange(1, tm.V1), topics]
    for t in range(tm.T):
        other = Y[1:, t][topics != t]
        np.testing.assert_allclose(own[topics != t] - other, 1.0 / (1.0 - mk.p_m * (1.0 - mk.p_c)), atol=1e-9)


# ------------------------------------------------------------------------------ degenerate cases
def test_tau_equals_T_min_norm_is_rank_one():
    """tau = T: Sigma = mu mu^T, W* = u mu^T / ||mu||^2, and A = B0 (no topic structure)."""
    tm, mk = tc.TopicModel(T=5, v=3, tau=5), tc.Masking()
    res = optimal_value_matrix(tm, mk)
    Sigma, C = moments(tm, mk)
    assert np.linalg.matrix_rank(Sigma, tol=1e-12) == 1
    ls = optimal_value_matrix(tm, mk, method="lstsq")
    np.testing.assert_allclose(res.x, ls.x, atol=1e-12)
    assert res.info["A"] == pytest.approx(res.info["B0"], abs=1e-15)
    assert res.info["case"] == "constant-context"
    # SPEC §4.2 / §6 items 6-7 state the (A, B0, gamma) formulas and the block-sum identity
    # without the condition tau < T: here the min-norm minimiser has own-minus-other block sums 0, not 1/a
    Y = ls.x[:, 1:].reshape(tm.V1, tm.T, tm.v).sum(axis=2)
    assert abs(Y[1, 0] - Y[1, 1]) < 1e-12 and 1.0 / mk.a > 1.0
    assert value_loss(ls.x, tm, mk) == pytest.approx(1 - 1 / 15, abs=1e-12)
    # the informative-case formula would give A - B0 = 1/(a v) != 0: it is not the min-norm answer here
    tm2 = tc.TopicModel(T=5, v=3, tau=2)
    assert optimal_value_matrix(tm2, mk).info["A"] - optimal_value_matrix(tm2, mk).info["B0"] == pytest.approx(
        1 / (mk.a * 3)
    )


@pytest.mark.parametrize(
    "tm,mk",
    [
        (tc.TopicModel(T=4, v=1, tau=2), tc.Masking()),  # v = 1
        (tc.TopicModel(T=5, v=2, tau=2), tc.Masking(0.4, 0.3, 0.7)),  # q = 0
        (tc.TopicModel(T=5, v=2, tau=3), tc.Masking(0.4, 1.0, 0.0)),  # q = r = 0 (a = 1)
        (tc.TopicModel(T=4, v=3, tau=2), tc.Masking(1.0, 0.0, 0.2)),  # a = 0: no information
        (tc.TopicModel(T=4, v=3, tau=2), tc.Masking(1.0, 0.0, 0.0)),  # a = r = 0: only [MASK]
        (tc.TopicModel(T=1, v=4, tau=1), tc.Masking()),  # one topic
        (tc.TopicModel(T=1, v=4, prior="dirichlet", alpha=0.3), tc.Masking()),
        (tc.TopicModel(T=6, v=2, prior="dirichlet", alpha=0.1), tc.Masking(0.5, 0.5, 0.5)),
    ],
)
@pytest.mark.parametrize("reg", [0.0, 0.05])
def test_degenerate_cases_match_lstsq(tm, mk, reg):
    cf = optimal_value_matrix(tm, mk, reg=reg)
    ls = optimal_value_matrix(tm, mk, reg=reg, method="lstsq")
    assert cf.success and ls.success, (cf.message, ls.message)
    np.testing.assert_allclose(cf.x, ls.x, atol=1e-10)
    if reg == 0:
        # minimum of the loss: 1 - ||u||^2 if the context carries no information (a = 0), else 1 - E||p||^2
        expected = 1 - 1 / tm.n_words if mk.a == 0 else _expected_min_loss(tm)
        assert value_loss(cf.x, tm, mk) == pytest.approx(expected, abs=1e-12)
        assert minimiser_violation(cf.x, tm, mk).norm <= 1e-10


def test_dirichlet_min_norm_equals_uniform_tau():
    """SPEC §4.2: same min-norm W for every tau < T and every Dirichlet alpha (via lstsq)."""
    mk = tc.Masking()
    ref = optimal_value_matrix(tc.TopicModel(T=6, v=3, tau=1), mk, method="lstsq").x
    for tm in [tc.TopicModel(T=6, v=3, tau=t) for t in (2, 3, 5)] + [
        tc.TopicModel(T=6, v=3, prior="dirichlet", alpha=al) for al in (0.1, 1.0, 7.0)
    ]:
        np.testing.assert_allclose(optimal_value_matrix(tm, mk, method="lstsq").x, ref, atol=1e-10)
    # but not for tau = T, and the ridge solution does depend on tau
    assert np.abs(optimal_value_matrix(tc.TopicModel(T=6, v=3, tau=6), mk).x - ref).max() > 1e-2
    r1 = optimal_value_matrix(tc.TopicModel(T=6, v=3, tau=1), mk, reg=0.1).x
    r2 = optimal_value_matrix(tc.TopicModel(T=6, v=3, tau=3), mk, reg=0.1).x
    assert np.abs(r1 - r2).max() > 1e-4


def test_ridge_tends_to_min_norm():
    tm, mk = tc.TopicModel(T=6, v=3, tau=2), tc.Masking()
    W0 = optimal_value_matrix(tm, mk).x
    errs = [np.abs(optimal_value_matrix(tm, mk, reg=lam).x - W0).max() for lam in (1e-2, 1e-4, 1e-6)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-4


def test_large_structured_solution():
    """T = 1000, v = 100 (V1 = 100,001) without a V1 x V1 array; structured residuals certify it."""
    tm, mk = tc.TopicModel(T=1000, v=100, tau=30), tc.Masking()
    res = optimal_value_matrix(tm, mk)
    assert res.success, res.message
    assert isinstance(res.x, BlockValueMatrix)
    assert res.residuals["stationarity_rel"] < 1e-10 and abs(res.residuals["loss_gap"]) < 1e-12
    assert res.residuals["loss"] == pytest.approx(1 - 1 / 3000, abs=1e-12)
    x = np.random.default_rng(0).normal(size=tm.V1)
    y = res.x @ x
    # row 0 is 0; a word row is B0 * sum(words) + (A - B0) * own-topic sum + gamma x_0
    assert y[0] == 0.0
    w = 12345
    t = (w - 1) // tm.v
    expect = (
        res.x.B0 * x[1:].sum() + (res.x.A - res.x.B0) * x[1 + t * 100 : 1 + (t + 1) * 100].sum() + res.x.gamma * x[0]
    )
    assert y[w] == pytest.approx(expect, rel=1e-12)
    with pytest.raises(ValueError, match="BlockValueMatrix.toarray.*Use W @ x"):
        res.x.toarray(max_bytes=2**30)
    with pytest.raises(ValueError, match="V1 x V1.*method='closed-form'"):
        optimal_value_matrix(tm, mk, method="lstsq", options={"max_bytes": 2**30})


# ------------------------------------------------------------------------------ residual machinery
@settings(max_examples=30)
@given(st.integers(1, 7), st.integers(0, 2**31))
def test_topic_symmetric_algebra_matches_dense(T, seed):
    rng = np.random.default_rng(seed)
    X = TopicSym.from_entries(T, *rng.normal(size=5))
    Y = TopicSym.from_entries(T, *rng.normal(size=5))
    Xd, Yd = X.toarray(), Y.toarray()
    np.testing.assert_allclose((X @ Y).toarray(), Xd @ Yd, atol=1e-12)
    np.testing.assert_allclose((X - Y.scale(2.0)).toarray(), Xd - 2 * Yd, atol=1e-12)
    np.testing.assert_allclose(X.t.toarray(), Xd.T, atol=1e-14)
    assert X.trace() == pytest.approx(np.trace(Xd), abs=1e-12)
    assert X.fro() == pytest.approx(np.linalg.norm(Xd), rel=1e-12)
    np.testing.assert_allclose(
        X.pinv().toarray(), np.linalg.pinv(Xd), atol=1e-8 * (1 + np.abs(np.linalg.pinv(Xd)).max())
    )
    R = TopicSym.from_entries(T, 1.0, 1.0, 0.5, 2.0, 1.0)  # rank deficient when T > 1
    np.testing.assert_allclose(R.pinv().toarray(), np.linalg.pinv(R.toarray()), atol=1e-10)


@settings(max_examples=25)
@given(stage1_models(max_T=7, max_v=4), maskings(), st.floats(0, 1), st.integers(0, 2**31))
def test_structured_residuals_equal_dense_residuals(tm, mk, reg, seed):
    rng = np.random.default_rng(seed)
    A, B0, g = rng.normal(size=3) * 0.1
    W = BlockValueMatrix(A, B0, g, tm.T, tm.v)
    rb = _block_residuals(W, tm, mk, reg)
    rd = _dense_residuals(W.toarray(), tm, mk, reg)
    assert rb.keys() == rd.keys()
    for k in rb:
        assert rb[k] == pytest.approx(rd[k], rel=1e-8, abs=1e-12), k
    # and the dense loss is the exact value_loss
    assert rd["loss"] == pytest.approx(value_loss(W.toarray(), tm, mk), abs=1e-13)
    # stationarity is ||W (Sigma + reg I) - C||_F with the dense moments
    Sigma, C = moments(tm, mk)
    Wd = W.toarray()
    assert rb["stationarity"] == pytest.approx(
        np.linalg.norm(Wd @ (Sigma + reg * np.eye(tm.V1)) - C), rel=1e-8, abs=1e-14
    )


@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31))
def test_block_matrix_matmul_and_norm(T, v, seed):
    rng = np.random.default_rng(seed)
    W = BlockValueMatrix(*rng.normal(size=3), T, v)
    D = W.toarray()
    x = rng.normal(size=(W.V1, 3))
    np.testing.assert_allclose(W @ x, D @ x, atol=1e-12)
    np.testing.assert_allclose(W @ x[:, 0], D @ x[:, 0], atol=1e-12)
    assert W.fro_norm == pytest.approx(np.linalg.norm(D), rel=1e-12)
    np.testing.assert_array_equal(np.asarray(W), D)


def test_range_violation_detects_non_min_norm_minimiser():
    """A minimiser that is not the min-norm one passes stationarity but fails the range check."""
    tm, mk = tc.TopicModel(T=5, v=3, tau=2), tc.Masking()
    from theorycheck.solvers._certify import NOT_CERTIFIED, certify
    from theorycheck.solvers.value._residuals import value_checks

    Sigma, _ = moments(tm, mk)
    W = optimal_value_matrix(tm, mk).x
    Z = np.random.default_rng(3).normal(size=W.shape) @ (np.eye(tm.V1) - Sigma @ np.linalg.pinv(Sigma))
    res = _dense_residuals(W + Z, tm, mk, 0.0)
    assert res["stationarity_rel"] < 1e-10 and abs(res["loss_gap"]) < 1e-12
    assert res["range_violation_rel"] > 0.1
    status, message, rel = certify(value_checks(res), 1e-6)
    assert status == NOT_CERTIFIED and "range_violation" in message and rel["range_violation"] > 0.1


# ------------------------------------------------------------------------------ SolveResult
@pytest.mark.parametrize("method", ["closed-form", "lstsq", "cvxpy"])
def test_solve_result_fields(method):
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    res = optimal_value_matrix(tm, mk, method=method)
    assert res.success == (res.status == 0)
    assert res.method == method
    assert res.time >= 0 and math.isfinite(res.fun)
    assert {"stationarity", "stationarity_rel", "loss", "objective", "loss_gap", "range_violation"} <= set(
        res.residuals
    )
    assert res.fun == pytest.approx(value_loss(res.x, tm, mk), abs=1e-9)
    assert "SolveResult(" in repr(res)
    r2 = optimal_value_matrix(tm, mk, reg=0.2, method=method)
    assert "loss_gap" not in r2.residuals
    assert r2.fun == pytest.approx(value_loss(r2.x, tm, mk, reg=0.2), abs=1e-9)


def test_cvxpy_status_downgraded_when_residual_check_fails():
    """SCS stopped after a few iterations: our own residual check must refuse the point."""
    tm, mk = tc.TopicModel(T=4, v=2, tau=2), tc.Masking()
    res = optimal_value_matrix(
        tm,
        mk,
        reg=0.5,
        method="cvxpy",
        solver="SCS",
        options={"solver_options": {"max_iters": 2, "eps_abs": 1e-1, "eps_rel": 1e-1}},
    )
    assert not res.success
    assert res.status in (1, 4)
    assert res.success == (res.status == 0)
    if res.status == 4:
        assert "Residual check" in res.message


def test_dense_flag():
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    r = optimal_value_matrix(tm, mk, options={"dense": False})
    assert isinstance(r.x, BlockValueMatrix)
    np.testing.assert_allclose(r.x.toarray(), optimal_value_matrix(tm, mk).x, atol=0)
    assert r.residuals["loss"] == pytest.approx(optimal_value_matrix(tm, mk).residuals["loss"], abs=1e-14)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(reg=-1.0), ValueError, "reg"),
        (dict(reg=float("nan")), ValueError, "reg"),
        (dict(method="newton"), ValueError, "method"),
        (dict(mk=tc.Masking(p_m=0.0)), ValueError, "p_m"),
        (dict(tm="T=3"), TypeError, "tm"),
        (dict(mk=None), TypeError, "mk"),
        (dict(tol=0.0), ValueError, "tol"),
        (dict(options={"dense": "yes"}), TypeError, "dense"),
        (dict(method="lstsq", options={"dense": False}), ValueError, "dense"),
        (dict(method="cvxpy", solver="NOPE"), ValueError, "solver"),
    ],
)
def test_bad_input(kwargs, exc, match):
    args = dict(tm=tc.TopicModel(T=3, v=2, tau=1), mk=tc.Masking(), reg=0.0, method="closed-form")
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        optimal_value_matrix(**args)


def test_ignored_solver_warns():
    with pytest.warns(tc.TheorycheckWarning, match="ignored"):
        optimal_value_matrix(tc.TopicModel(T=3, v=2, tau=1), tc.Masking(), solver="SCS")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(W=np.zeros((3, 3))), "W must have shape"),
        (dict(b=np.zeros(2)), "b must have shape"),
        (dict(W=BlockValueMatrix(1.0, 0.0, 0.0, 2, 2)), "BlockValueMatrix"),
    ],
)
def test_minimiser_violation_bad_input(kwargs, match):
    tm = tc.TopicModel(T=3, v=2, tau=1)
    args = dict(W=np.zeros((7, 7)), tm=tm, mk=tc.Masking(), b=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        minimiser_violation(**args)


def test_minimiser_violation_block_input():
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    W = optimal_value_matrix(tm, mk, options={"dense": False}).x
    assert minimiser_violation(W, tm, mk).norm <= 1e-12
    bad = BlockValueMatrix(W.A * 1.1, W.B0, W.gamma, 4, 3)
    assert minimiser_violation(bad, tm, mk).norm == pytest.approx(
        minimiser_violation(bad.toarray(), tm, mk).norm, rel=1e-12
    )
    assert minimiser_violation(bad, tm, mk).norm > 1e-3


# ------------------------------------------------------------------------------ CLI
def test_cli_solve_value_writes_npz(tmp_path, capsys):
    from theorycheck.cli import main

    out = tmp_path / "w.npz"
    code = main(["solve", "value", "--T", "4", "--v", "3", "--tau", "2", "--method", "lstsq", "--npz", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "SolveResult(" not in printed  # one summary table, not the repr too
    assert "resid.stationarity_rel" in printed and f"written to {out}" in printed
    d = np.load(out)
    ref = optimal_value_matrix(tc.TopicModel(T=4, v=3, tau=2), tc.Masking(), method="closed-form").x
    np.testing.assert_allclose(d["W"], ref, atol=1e-10)
    assert float(d["resid_stationarity_rel"]) < 1e-8 and int(d["status"]) == 0


def test_cli_solve_value_structured_and_errors(tmp_path, capsys):
    from theorycheck.cli import main

    out = tmp_path / "big.npz"
    assert main(["solve", "value", "--T", "1000", "--v", "100", "--tau", "3", "--npz", str(out)]) == 0
    d = np.load(out)
    assert bool(d["structured"]) and "W" not in d
    res = optimal_value_matrix(tc.TopicModel(T=1000, v=100, tau=3), tc.Masking())
    assert float(d["A"]) == res.x.A
    assert main(["solve", "value", "--T", "3", "--v", "2", "--tau", "7"]) == 2
    assert "tau must lie in [1, 3]" in capsys.readouterr().err
    assert main(["solve", "value", "--T", "3", "--v", "2", "--prior", "dirichlet", "--alpha", "-1"]) == 2
    assert "alpha" in capsys.readouterr().err


@settings(max_examples=40)
@given(
    st.integers(1, 3000),
    st.integers(1, 200),
    st.data(),
    maskings(min_p_m=0.01),
    st.sampled_from([0.0, 0.0, 1e-14, 1e-9, 1e-3, 0.5, 1e3]),
)
def test_closed_form_equals_structured_pinv_at_any_size(T, v, data, mk, reg):
    """Analytic (A, B0, gamma) == C_hat (Sigma_hat + reg I)^+ computed numerically in the O(1) algebra."""
    from theorycheck.solvers.value._block import structured_constants, value_block_constants

    tau = data.draw(st.integers(1, T))
    tm = tc.TopicModel(T=T, v=v, tau=tau)
    A, B0, g, _ = value_block_constants(tm, mk, reg)
    A2, B02, g2 = structured_constants(tm, mk, reg)
    scale = max(abs(A), abs(B0), abs(g))
    assert abs(A - A2) <= 1e-9 * scale and abs(B0 - B02) <= 1e-9 * scale and abs(g - g2) <= 1e-9 * scale


@settings(max_examples=30)
@given(stage1_models(max_T=50, max_v=20), maskings(min_p_m=0.01))
def test_ridge_is_smooth_in_reg_at_zero(tm, mk):
    """x(reg) = (A, B0, gamma) is analytic at reg = 0+: one-sided differences at h and 10 h
    (h = min(1e-10, 1e-4 lambda_min), lambda_min the smallest non-zero eigenvalue of Sigma) give
    the same derivative (a plain 3 x 3 solve or a dense C (Sigma + reg I)^-1 loses these digits).
    The difference of the two quotients is O(10 h / lambda_min) <= 1e-3 from curvature plus
    O(eps |x| / h) from rounding (a fixed h is not enough when lambda_min is small)."""
    from theorycheck.solvers.value._block import hat_moments, value_block_constants

    ev = np.linalg.eigvalsh(hat_moments(tm, mk)[0].toarray())
    lam = ev[ev > 1e-12 * ev[-1]].min()
    h = min(1e-10, 1e-4 * lam)
    x0 = np.array(value_block_constants(tm, mk, 0.0)[:3])
    d1 = (np.array(value_block_constants(tm, mk, h)[:3]) - x0) / h
    d2 = (np.array(value_block_constants(tm, mk, 10 * h)[:3]) - x0) / (10 * h)
    np.testing.assert_allclose(d1, d2, rtol=1e-3, atol=1e-6 * max(1.0, np.abs(d2).max()))


@settings(max_examples=20)
@given(stage1_models(max_T=6, max_v=4), maskings(min_p_m=0.01), st.floats(1e-3, 10.0), st.integers(0, 2**31))
def test_error_bound_is_a_certificate(tm, mk, reg, seed):
    """For reg > 0, error_bound = ||W (Sigma + reg I) - C||_F / reg >= ||W - W_opt||_F for any W."""
    W_opt = optimal_value_matrix(tm, mk, reg=reg).x
    E = np.random.default_rng(seed).normal(scale=0.1, size=W_opt.shape)
    bound = _dense_residuals(W_opt + E, tm, mk, reg)["error_bound"]
    assert bound >= np.linalg.norm(E) * (1 - 1e-9)


@pytest.mark.parametrize("tm", [tc.TopicModel(T=3, v=2, tau=1), tc.TopicModel(T=4, v=2, tau=4)])
@pytest.mark.parametrize("reg", [0.0, 0.2])
def test_cvxpy_sparse_form_equals_textbook_form(tm, reg):
    """The sparse equivalent program of method='cvxpy' has the same optimum as the textbook one
    (min ||W||^2 s.t. W Sigma = C with dense Sigma; or min tr(W Sigma W^T) - 2 <W, C> + reg ||W||^2)."""
    import cvxpy as cp

    mk = tc.Masking()
    Sigma, C = moments(tm, mk)
    W = cp.Variable(Sigma.shape)
    if reg == 0.0:
        prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), [W @ Sigma == C])
    else:
        lam, V = np.linalg.eigh(Sigma)
        root = V * np.sqrt(np.clip(lam, 0, None))
        prob = cp.Problem(
            cp.Minimize(cp.sum_squares(W @ root) - 2 * cp.sum(cp.multiply(W, C)) + reg * cp.sum_squares(W))
        )
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    ours = optimal_value_matrix(tm, mk, reg=reg, method="cvxpy")
    assert ours.success
    np.testing.assert_allclose(ours.x, W.value, atol=1e-6)


@settings(max_examples=40)
@given(st.integers(1, 2000), st.integers(1, 100), st.data(), maskings(min_p_m=0.01))
def test_reduced_quadratic_at_zero_reg_is_the_analytic_min_norm(T, v, data, mk):
    """The reduced (A, B0, gamma) quadratic minimised in the weighted norm at reg = 0 reproduces the
    analytic min-norm formulas, including the constant-context case tau = T."""
    from theorycheck.solvers.value._block import _ridge_constants, value_block_constants

    tm = tc.TopicModel(T=T, v=v, tau=data.draw(st.integers(1, T)))
    x = np.array(_ridge_constants(tm, mk, 0.0))
    y = np.array(value_block_constants(tm, mk, 0.0)[:3])
    np.testing.assert_allclose(x, y, rtol=0, atol=1e-11 * np.abs(y).max())
