"""The one solver contract (SPEC §4.1-§4.3 solvers): signature, status table, tol, warnings, memory guards."""

import inspect
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population import (
    alpha_beta_loss,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    moments,
    stage1_block_constants,
)
from theorycheck.solvers import (
    STATUS_MESSAGES,
    BlockGram,
    BlockValueMatrix,
    embedding_from_gram,
    optimal_attention,
    optimal_embedding_gram,
    optimal_value_matrix,
)
from theorycheck.solvers._certify import (
    CVXPY_STATUS,
    ITERATION_LIMIT,
    NOT_CERTIFIED,
    ON_BOUNDARY,
    SOLVER_FAILURE,
    SUCCESS,
    certify,
    check_contract,
    cvxpy_status,
)
from theorycheck.strategies import maskings

SOLVERS = (optimal_value_matrix, optimal_embedding_gram, optimal_attention)
CONTRACT = ("method", "reg", "tol", "solver", "options")
PAPER = (tc.TopicModel(T=10, v=10, tau=3), tc.Masking())
SMALL = (tc.TopicModel(T=3, v=2, tau=2), tc.Masking())


# ----------------------------------------------------------------------------- signature
@pytest.mark.parametrize("fn", SOLVERS)
def test_contract_signature(fn):
    params = inspect.signature(fn).parameters
    names = list(params)
    assert names[:2] == ["tm", "mk"]
    assert all(params[n].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for n in names[:2])
    assert names[2:7] == list(CONTRACT)
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in names[2:])
    assert params["reg"].default == 0.0 and params["solver"].default is None and params["options"].default is None
    assert params["tol"].default > 0


def test_status_table():
    assert STATUS_MESSAGES.keys() == {0, 1, 2, 3, 4}
    assert (SUCCESS, ITERATION_LIMIT, SOLVER_FAILURE, ON_BOUNDARY, NOT_CERTIFIED) == (0, 1, 2, 3, 4)
    assert "boundary" in STATUS_MESSAGES[ON_BOUNDARY] and "Not certified" in STATUS_MESSAGES[NOT_CERTIFIED]
    assert cvxpy_status("optimal") == SUCCESS and cvxpy_status("user_limit") == ITERATION_LIMIT
    assert cvxpy_status("infeasible") == SOLVER_FAILURE and cvxpy_status("something new") == SOLVER_FAILURE
    assert cvxpy_status(None) == SOLVER_FAILURE
    assert set(CVXPY_STATUS.values()) <= {SUCCESS, ITERATION_LIMIT, SOLVER_FAILURE}


@settings(max_examples=50)
@given(
    st.dictionaries(st.sampled_from("abcde"), st.tuples(st.floats(-1e3, 1e3), st.floats(0, 1e3)), max_size=5),
    st.floats(1e-12, 1.0),
)
def test_certify_is_max_relative_residual_within_tol(checks, tol):
    status, message, rel = certify(checks, tol)
    expect = {k: abs(v) / s if s > 0 else abs(v) for k, (v, s) in checks.items()}
    assert rel == pytest.approx(expect)
    assert status == (SUCCESS if all(r <= tol for r in expect.values()) else NOT_CERTIFIED)
    if status == NOT_CERTIFIED:
        assert "Residual check" in message
    # a backend status always wins
    assert certify(checks, tol, backend=ITERATION_LIMIT)[0] == ITERATION_LIMIT


def test_certify_non_finite_is_not_certified():
    status, message, _ = certify({"x": (math.nan, 1.0)}, 1.0)
    assert status == NOT_CERTIFIED and "Non-finite residual: x" in message
    for res, scale in ((math.inf, 1.0), (1.0, math.nan), (1.0, -math.inf)):
        status, message, _ = certify({"y": (res, scale)}, 1.0)
        assert status == NOT_CERTIFIED and "Non-finite residual: y" in message and "Residual check" not in message


def test_certify_overflowing_relative_residual_is_a_failed_check():
    """A finite residual over a subnormal scale: the quotient overflows to inf, which fails the residual
    check like any residual above tol (hypothesis's random profile drew (1.0, 5e-324), reported as a
    non-finite residual before)."""
    status, message, rel = certify({"a": (1.0, 5e-324), "b": (0.0, 1.0)}, 1.0)
    assert rel["a"] == math.inf and rel["b"] == 0.0
    assert status == NOT_CERTIFIED and "Residual check (tol=1) failed: a=inf." in message
    assert "Non-finite" not in message


# ----------------------------------------------------------------------------- forced statuses
def test_value_tol_too_strict_is_not_certified():
    tm, mk = SMALL
    ok = optimal_value_matrix(tm, mk, method="lstsq")
    assert ok.status == SUCCESS
    worst = max(ok.info["relative_residuals"].values())
    assert worst > 0.0
    bad = optimal_value_matrix(tm, mk, method="lstsq", tol=worst / 2)
    assert bad.status == NOT_CERTIFIED and "Residual check" in bad.message
    np.testing.assert_array_equal(bad.x, ok.x)  # same point, only the verdict changes
    assert optimal_value_matrix(tm, mk, method="lstsq", tol=worst).status == SUCCESS  # tol respected exactly


def test_value_cvxpy_iteration_limit_via_options():
    tm, mk = SMALL
    res = optimal_value_matrix(
        tm, mk, reg=0.5, method="cvxpy", solver="SCS", options={"solver_options": {"max_iters": 1}}
    )
    assert res.status in (ITERATION_LIMIT, NOT_CERTIFIED), res.message
    assert not res.success


def test_embedding_iteration_limit_via_options():
    tm, mk = SMALL
    res = optimal_embedding_gram(tm, mk, method="factorized", d=tm.V1, options={"solver_options": {"maxiter": 2}})
    assert res.status == ITERATION_LIMIT and res.nit <= 2, res.message
    assert optimal_embedding_gram(tm, mk, method="factorized", d=tm.V1).status == SUCCESS


def test_embedding_tol_too_strict_is_not_certified():
    tm, mk = SMALL
    ok = optimal_embedding_gram(tm, mk, method="schur")
    assert ok.status == SUCCESS
    worst = max(ok.info["relative_residuals"].values())
    bad = optimal_embedding_gram(tm, mk, method="schur", tol=worst / 2 if worst > 0 else 1e-300)
    if worst > 0:
        assert bad.status == NOT_CERTIFIED
    cv = optimal_embedding_gram(tm, mk, method="cvxpy")
    assert cv.certificate is not None and abs(cv.certificate["duality_gap"]) < 1e-5


def test_attention_boundary_via_tiny_search_box():
    tm, mk = PAPER
    free = optimal_attention(tm, mk, options={"check_general": False})
    assert free.status == SUCCESS and 4.0 < math.log(free.K) < 4.5  # K* = 70.05, SPEC §4.3
    boxed = optimal_attention(tm, mk, options={"box": (0.0, 1.0), "check_general": False})
    assert boxed.status == ON_BOUNDARY and boxed.at_boundary
    assert boxed.logK <= 1.0 + 1e-9 and boxed.loss > free.loss
    ident = optimal_attention(tm, mk, value="identity", options={"box": ((0.0, 1.0), (-1.0, 0.0)), "n_grid": 41})
    assert ident.status == ON_BOUNDARY


def test_attention_iteration_limit_and_tol():
    tm, mk = PAPER
    res = optimal_attention(tm, mk, options={"check_general": False, "solver_options": {"maxiter": 1}})
    assert res.status == ITERATION_LIMIT, res.message
    strict = optimal_attention(tm, mk, tol=1e-300, options={"check_general": False})
    assert strict.status == NOT_CERTIFIED and strict.x == pytest.approx(optimal_attention(tm, mk).x)
    assert strict.certificate["tails_above_optimum"] and strict.certificate is strict.info["certificate"]


def test_attention_reg_and_method_are_checked():
    tm, mk = SMALL
    with pytest.raises(ValueError, match="reg must lie in"):
        optimal_attention(tm, mk, reg=0.1)
    with pytest.raises(ValueError, match="method must be one of"):
        optimal_attention(tm, mk, method="newton")
    with pytest.raises(ValueError, match="box must be"):
        optimal_attention(tm, mk, options={"box": (1.0, 0.0)})


# ----------------------------------------------------------------------------- warnings
def test_warn_ignored_decides_by_none():
    tm, mk = SMALL
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimal_value_matrix(tm, mk, solver=None, options=None)  # explicit None: no warning
        optimal_embedding_gram(tm, mk, options={"seed": None, "init_scale": None, "maxiter": None})
        optimal_attention(tm, mk, solver=None, options={"check_general": False})
    # a value equal to the old default is still reported (no comparison with copied defaults)
    with pytest.warns(tc.TheorycheckWarning, match="solver is ignored by method='closed-form'"):
        optimal_value_matrix(tm, mk, solver="CLARABEL")
    with pytest.warns(tc.TheorycheckWarning, match="solver_options is ignored"):
        optimal_value_matrix(tm, mk, method="lstsq", options={"solver_options": {}})
    with pytest.warns(tc.TheorycheckWarning, match="seed is ignored"):
        optimal_embedding_gram(tm, mk, options={"seed": 0})
    with pytest.warns(tc.TheorycheckWarning, match="solver is ignored by method='grid'"):
        optimal_attention(tm, mk, solver="brent", options={"check_general": False})
    with pytest.raises(TypeError, match="options must be None or a dict"):
        check_contract("x", 1e-6, None, [1], uses_solver=True, uses_options=True)


def test_loss_names():
    tm, mk = SMALL
    assert optimal_attention(tm, mk, loss="squared", options={"check_general": False}).loss_kind == "squared"
    for bad in ("sq", "l2"):  # "sq", the old spelling of "squared", was removed before 0.1.0
        with pytest.raises(ValueError, match="loss"):
            optimal_attention(tm, mk, loss=bad)
        with pytest.raises(ValueError, match="loss"):
            alpha_beta_loss(1.0, 0.5, tm, mk, loss=bad)


def test_solvers_take_only_the_model_and_masking_positionally():
    """0.1.0 was never released: the old positional forms (reg, method, value after tm, mk) are gone."""
    tm, mk = SMALL
    for call in (
        lambda: optimal_value_matrix(tm, mk, 0.1, "lstsq"),
        lambda: optimal_embedding_gram(tm, mk, "schur"),
        lambda: optimal_attention(tm, mk, "identity"),
    ):
        with pytest.raises(TypeError, match="positional"):
            call()


# ----------------------------------------------------------------------------- one home for the constants
@settings(max_examples=30)
@given(st.integers(1, 7), st.integers(1, 4), st.data(), maskings(min_p_m=0.01))
def test_stage1_constants_equal_dense_pinv_in_every_case(T, v, data, mk):
    """stage1_block_constants == entries of C pinv(Sigma) from the exact moments (independent route),
    including tau = T, T = 1, a = 0 and q = 0; the solver, the (alpha, beta) W^V and BlockValueMatrix
    all use these constants."""
    if data.draw(st.booleans()):
        tm = tc.TopicModel(T=T, v=v, tau=data.draw(st.integers(1, T)))
    else:
        tm = tc.TopicModel(T=T, v=v, prior="dirichlet", alpha=data.draw(st.floats(0.05, 5.0)))
    Sigma, C = moments(tm, mk)
    W = C @ np.linalg.pinv(Sigma, rcond=1e-12, hermitian=True)
    A, B0, g = stage1_block_constants(tm, mk)
    dense = BlockValueMatrix(A, B0, g, tm.T, tm.v).toarray()
    if T == 1:  # B0 does not occur
        dense = BlockValueMatrix(A, A, g, 1, tm.v).toarray()
    assert np.max(np.abs(dense - W)) <= 1e-8 * max(1.0, np.max(np.abs(W)))
    res = optimal_value_matrix(tm, mk)
    assert (res.info["A"], res.info["B0"], res.info["gamma"]) == (A, B0, g)
    if mk.a > 0 and tm.prior == "uniform-tau":
        np.testing.assert_array_equal(alpha_beta_value_matrix(tm, mk, "block"), dense)


# ----------------------------------------------------------------------------- memory guards
LIMIT = 2**20  # 1 MiB


def _dense_constructors(T, v, mk):
    tm = tc.TopicModel(T=T, v=v, tau=1)
    return {
        "alpha_beta_value_matrix": lambda: alpha_beta_value_matrix(tm, mk, "block", max_bytes=LIMIT),
        "alpha_beta_value_matrix(identity)": lambda: alpha_beta_value_matrix(tm, mk, "identity", max_bytes=LIMIT),
        "alpha_beta_score_matrix": lambda: alpha_beta_score_matrix(1.0, 0.5, tm, max_bytes=LIMIT),
        "BlockValueMatrix.toarray": lambda: BlockValueMatrix(1.0, 0.5, 0.1, T, v).toarray(max_bytes=LIMIT),
        "BlockGram.toarray": lambda: BlockGram(T, v, 1.0, 0.5).toarray(max_bytes=LIMIT),
        "embedding_from_gram": lambda: embedding_from_gram(BlockGram(T, v, 1.0, 0.0), 1 + T, max_bytes=LIMIT),
        "optimal_value_matrix(dense)": lambda: optimal_value_matrix(
            tm, mk, options={"dense": True, "max_bytes": LIMIT}
        ),
        "optimal_value_matrix(lstsq)": lambda: optimal_value_matrix(
            tm, mk, method="lstsq", options={"max_bytes": LIMIT}
        ),
        "optimal_value_matrix(cvxpy)": lambda: optimal_value_matrix(
            tm, mk, method="cvxpy", options={"max_bytes": LIMIT}
        ),
        "optimal_embedding_gram(schur)": lambda: optimal_embedding_gram(
            tm, mk, method="schur", options={"max_bytes": LIMIT}
        ),
        "optimal_embedding_gram(cvxpy)": lambda: optimal_embedding_gram(
            tm, mk, method="cvxpy", options={"max_bytes": LIMIT}
        ),
    }


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**7), st.integers(1, 100), st.sampled_from(sorted(_dense_constructors(1, 1, tc.Masking()))))
def test_dense_constructors_refuse_above_max_bytes(T, v, name):
    """Above max_bytes: ValueError naming the structured alternative, before any allocation (never
    MemoryError). Below it the constructor succeeds."""
    V1 = T * v + 1
    build = _dense_constructors(T, v, tc.Masking())[name]
    if name.startswith("embedding_from_gram"):
        need = 8 * ((1 + T) * V1 + T * T)
    elif "cvxpy" in name and "embedding" in name:
        need = 8 * (V1 * (V1 + 1) // 2) ** 2
    elif "lstsq" in name or "cvxpy" in name:
        need = 8 * 3 * V1 * V1
    elif "schur" in name:
        need = 8 * 6 * V1 * V1
    else:
        need = 8 * V1 * V1
    if need > LIMIT:
        with pytest.raises(ValueError, match=r"above the memory limit .* Use "):
            build()
    elif V1 <= 60 and not ("cvxpy" in name and V1 > 15):
        build()  # small enough: succeeds


@pytest.mark.parametrize("T,v", [(2, 2), (5, 3)])
def test_dense_constructors_succeed_below_limit(T, v):
    for name, build in _dense_constructors(T, v, tc.Masking()).items():
        if "cvxpy" in name and "embedding" in name and T * v > 6:
            continue
        out = build()
        assert out is not None, name


def test_dense_constructors_message_names_alternative():
    tm, mk = tc.TopicModel(T=10**6, v=100, tau=1), tc.Masking()
    with pytest.raises(ValueError, match="BlockValueMatrix"):
        alpha_beta_value_matrix(tm, mk)
    with pytest.raises(ValueError, match="closed-form"):
        optimal_value_matrix(tm, mk, method="lstsq")
    with pytest.raises(ValueError, match="alpha_beta_loss"):
        alpha_beta_score_matrix(0.0, 0.0, tm)
    assert isinstance(optimal_value_matrix(tm, mk).x, BlockValueMatrix)  # the structured route works
