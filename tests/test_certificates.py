"""Exact rational certificates (stage 1, tied embedding) and the interval bound on the attention optimum.

SPEC §4.0, §4.1 D3/D4, §4.2 (rational), §4.3(a), (b) (interval).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population._alpha_beta import alpha_beta_loss, alpha_beta_loss_logK
from theorycheck.solvers import closed_form_gram, value_block_constants
from theorycheck.solvers._rational import (
    MAX_SETS,
    MAX_V1,
    RationalMatrix,
    exact_pinv,
    is_psd_exact,
    rational_block_matrix,
    rational_masking,
    rational_moments,
)
from theorycheck.solvers.attention import interval_certificate, interval_loss
from theorycheck.solvers.gram import (
    rational_embedding_gram,
    rational_embedding_result,
    rational_gram_constants,
)
from theorycheck.solvers.value import (
    rational_value_constants,
    rational_value_optimum,
    rational_value_result,
)

MASKINGS = [(0.15, 0.1, 0.1), (0.3, 0.2, 0.05), (0.15, 0.5, 0.5)]  # default, p_c != p_r, q = 0
CONFIGS = [(2, 2, 1), (3, 2, 2), (4, 3, 2), (5, 2, 3), (3, 2, 3)]  # last: tau = T (constant context)


SQ = "squared"


# ----------------------------------------------------------------------------- exact linear algebra
def _R(rows):
    return RationalMatrix(tuple(tuple(Fraction(x) for x in r) for r in rows))


@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(0, 3),
    st.lists(st.integers(-3, 3), min_size=32, max_size=32),
)
def test_exact_pinv_satisfies_the_penrose_conditions(m, n, k, vals):
    # M = U V with inner dimension k: rank <= k, any rank deficiency
    U = _R([vals[i * 4 : i * 4 + k] for i in range(m)]) if k else None
    V = _R([vals[16 + j * 4 : 16 + j * 4 + n] for j in range(k)]) if k else None
    M = U @ V if k else _R([[0] * n for _ in range(m)])
    X = exact_pinv(M)
    assert X.shape == (n, m)
    assert M @ X @ M == M
    assert X @ M @ X == X
    assert (M @ X).T == M @ X
    assert (X @ M).T == X @ M
    assert np.allclose(X.toarray(), np.linalg.pinv(M.toarray()), atol=1e-12)


def test_exact_psd_test():
    assert is_psd_exact(_R([[2, 1], [1, 1]]))
    assert is_psd_exact(_R([[1, 1], [1, 1]]))  # singular PSD
    assert is_psd_exact(_R([[0, 0], [0, 0]]))
    assert not is_psd_exact(_R([[1, 2], [2, 1]]))  # eigenvalue -1
    assert not is_psd_exact(_R([[0, 1], [1, 0]]))  # zero pivot with a non-zero row
    assert not is_psd_exact(_R([[1, 0], [1, 1]]))  # not symmetric


def test_masking_is_read_as_decimal_rationals():
    e = rational_masking(tc.Masking(0.15, 0.1, 0.1))
    assert e["p_m"] == Fraction(3, 20)
    assert e["a"] == Fraction(173, 200) and e["r"] == Fraction(3, 200) and e["q"] == Fraction(3, 25)
    assert e["a"] + e["r"] + e["q"] == 1


# ----------------------------------------------------------------------------- moments
@pytest.mark.parametrize("T,v,tau", CONFIGS)
def test_rational_moments_match_float_moments(T, v, tau):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(0.3, 0.2, 0.05)
    Sigma, C = rational_moments(tm, mk)
    S_f, C_f = tc.population.moments(tm, mk)
    assert np.max(np.abs(Sigma.toarray() - S_f)) <= 1e-15
    assert np.max(np.abs(C.toarray() - C_f)) <= 1e-15
    assert Sigma == Sigma.T
    # rows of m_S sum to one: Sigma 1 = E[m] and 1^T C = E[m]^T ... checked exactly via E[m]
    ones = _R([[1]] * tm.V1)
    mu = Sigma @ ones
    e = rational_masking(mk)
    assert mu[0, 0] == e["q"]
    assert all(mu[i, 0] == (e["a"] + e["r"]) / (T * v) for i in range(1, tm.V1))


def test_size_limits_are_enforced_before_work():
    with pytest.raises(ValueError, match=f"MAX_V1 = {MAX_V1}"):
        rational_moments(tc.TopicModel(T=10, v=5, tau=2), tc.Masking())
    with pytest.raises(ValueError, match=f"MAX_SETS = {MAX_SETS}"):
        rational_moments(tc.TopicModel(T=12, v=2, tau=6), tc.Masking())
    with pytest.raises(ValueError, match="uniform-tau"):
        rational_moments(tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.1), tc.Masking())


# ----------------------------------------------------------------------------- stage 1
@pytest.mark.parametrize("T,v,tau", CONFIGS)
@pytest.mark.parametrize("mask", MASKINGS)
def test_value_optimum_equals_the_closed_form_exactly(T, v, tau, mask):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*mask)
    opt = rational_value_optimum(tm, mk)
    assert opt.certified, opt.checks
    A, B0, gamma, case = rational_value_constants(tm, mk)
    assert case == ("constant-context" if tau == T else "informative")
    assert opt.x == rational_block_matrix(T, v, A, B0, gamma)  # zero error, as rationals
    assert opt.loss == 1 - Fraction(1, tau * v)  # SPEC §4.0: L* = 1 - 1/(tau v)
    # the float closed form is the exact value to rounding level
    fl = value_block_constants(tm, mk)[:3]
    for f, e in zip(fl, (A, B0, gamma)):
        assert abs(Fraction(f) - e) <= Fraction(1, 10**14) * abs(e)


def test_value_rank_and_a_zero_case():
    tm = tc.TopicModel(T=4, v=3, tau=2)
    assert rational_value_optimum(tm, tc.Masking()).rank_sigma == tm.T  # SPEC §4.0 informative: rank T
    opt = rational_value_optimum(tm, tc.Masking(1.0, 0.0, 0.3))  # a = 0: constant context
    assert opt.certified and opt.rank_sigma == 1
    A, B0, gamma, case = rational_value_constants(tm, tc.Masking(1.0, 0.0, 0.3))
    assert case == "constant-context" and opt.x == rational_block_matrix(4, 3, A, B0, gamma)


def test_value_result_adapter():
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    res = rational_value_result(tm, mk)
    assert res.success and res.method == "rational"
    ref = tc.solvers.optimal_value_matrix(tm, mk, method="lstsq").x
    assert np.max(np.abs(res.x - ref)) <= 1e-14
    assert res.fun == pytest.approx(tm.min_value_loss(), abs=1e-16)


def test_value_refuses_p_m_zero():
    with pytest.raises(ValueError, match="p_m"):
        rational_value_optimum(tc.TopicModel(T=3, v=2, tau=2), tc.Masking(0.0, 0.1, 0.1))


# ----------------------------------------------------------------------------- embedding
@pytest.mark.parametrize("T,v,tau", CONFIGS)
@pytest.mark.parametrize("mask", MASKINGS[:2])
@pytest.mark.parametrize("bias", [False, True])
def test_embedding_gram_equals_the_closed_form_exactly(T, v, tau, mask, bias):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*mask)
    opt = rational_embedding_gram(tm, mk, bias=bias)
    assert opt.certified, opt.checks
    x, y = rational_gram_constants(tm, mk, bias=bias)
    assert opt.x == rational_block_matrix(T, v, x, y)
    G = closed_form_gram(tm, mk, bias=bias)
    for f, e in ((G.x, x), (G.y, y)):
        assert abs(Fraction(f) - e) <= Fraction(1, 10**14) * abs(e)


def test_embedding_result_adapter_and_bias():
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    res = rational_embedding_result(tm, mk, bias=True)
    assert res.success
    ref = tc.solvers.optimal_embedding_gram(tm, mk, method="schur", bias=True)
    assert np.max(np.abs(res.x - ref.x)) <= 1e-12
    u = np.full(tm.V1, 1.0 / 6)
    u[0] = 0.0
    assert np.max(np.abs(res.info["b"] - u)) <= 1e-15  # SPEC §4.1 D4: b = u


# ----------------------------------------------------------------------------- interval loss
PAPER = (tc.TopicModel(T=10, v=10, tau=3), tc.Masking(0.15, 0.1, 0.1))


@pytest.mark.parametrize("x", [-30.0, -2.0, 0.0, 4.25, 10.0, 60.0])
def test_interval_block_loss_contains_the_float_loss(x):
    tm, mk = PAPER
    Ix = interval_loss((x,), tm, mk, "block")
    f = alpha_beta_loss_logK(x, tm, mk, loss=SQ)
    # the float evaluation carries its own rounding error (a few ulps of ~1)
    assert Ix.a - 1e-15 <= f <= Ix.b + 1e-15
    assert float(Ix.delta) <= 1e-14


@pytest.mark.parametrize("ab", [(0.0, 0.0), (4.7, -0.15), (-10.0, 20.0), (40.0, -40.0), (3.0, 3.0)])
def test_interval_identity_loss_contains_the_float_loss(ab):
    tm, mk = PAPER
    Ix = interval_loss(ab, tm, mk, "identity")
    f = alpha_beta_loss(*ab, tm, mk, "identity", loss=SQ)
    assert Ix.a - 1e-15 <= f <= Ix.b + 1e-15


def test_interval_box_encloses_the_loss_on_a_grid():
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking(0.3, 0.2, 0.05)
    Ix = interval_loss(((1.0, 1.5), (-0.5, 0.2)), tm, mk, "identity")
    A, B = np.meshgrid(np.linspace(1.0, 1.5, 9), np.linspace(-0.5, 0.2, 9))
    F = alpha_beta_loss(A, B, tm, mk, "identity", loss=SQ)
    assert Ix.a - 1e-15 <= F.min() and F.max() <= Ix.b + 1e-15


# ----------------------------------------------------------------------------- branch and bound
def test_block_certificate_at_the_paper_configuration():
    tm, mk = PAPER
    cert = interval_certificate(tm, mk, "block", tol=1e-9)
    assert cert.converged and 0.0 <= cert.gap <= 1e-9
    assert cert.method == "interval-branch-and-bound" and cert.n_boxes > 1
    sol = tc.solvers.optimal_attention(tm, mk, value="block", loss=SQ)
    assert cert.lower <= sol.fun <= cert.lower + 2e-9  # the solver is certified optimal to 2e-9
    assert abs(cert.lower - 0.961770) <= 5e-7  # SPEC §4.3 table
    ((lo, hi),) = cert.argmin
    assert lo <= sol.logK <= hi and hi - lo < 0.05
    d = cert.as_dict()
    assert d["lower"] == cert.lower and d["variables"] == ["logK"] and d["converged"] is True


@settings(max_examples=8)
@given(
    T=st.integers(2, 6),
    v=st.integers(1, 4),
    tau_frac=st.floats(0.0, 1.0),
    p=st.tuples(st.floats(0.05, 0.6), st.floats(0.0, 0.5), st.floats(0.0, 0.5)),
    value=st.sampled_from(["block", "identity"]),
)
def test_lower_bound_never_exceeds_the_loss_on_a_grid(T, v, tau_frac, p, value):
    tau = 1 + int(tau_frac * (T - 1))
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*p)
    if value == "block":
        box = ((-6.0, 10.0),)
        cert = interval_certificate(tm, mk, value, box=box, tol=1e-8, max_boxes=60)
        F = alpha_beta_loss_logK(np.linspace(-6.0, 10.0, 801), tm, mk, loss=SQ)
    else:
        box = ((-4.0, 8.0), (-6.0, 4.0))
        cert = interval_certificate(tm, mk, value, box=box, tol=1e-6, max_boxes=40)
        A, B = np.meshgrid(np.linspace(-4.0, 8.0, 61), np.linspace(-6.0, 4.0, 51))
        F = alpha_beta_loss(A, B, tm, mk, "identity", loss=SQ)
    # lower <= min over the box <= every float value (up to the float evaluator's own rounding)
    assert cert.lower <= float(np.min(F)) + 1e-15
    assert cert.lower <= cert.upper and cert.gap == cert.upper - cert.lower
    assert math.isfinite(cert.gap) and cert.n_boxes <= (60 if value == "block" else 40) + 1


def test_identity_certificate_brackets_the_solver_mpmath_engine():
    tm, mk = PAPER
    box = ((3.0, 7.0), (-3.0, 2.0))
    cert = interval_certificate(tm, mk, "identity", box=box, tol=1e-6, max_boxes=300, engine="mpmath")
    sol = tc.solvers.optimal_attention(tm, mk, value="identity", loss=SQ)
    assert cert.lower <= sol.fun <= cert.upper + cert.gap
    assert cert.gap < 1e-3 and cert.info["engine"] == "mpmath"


def test_identity_certificate_at_the_paper_configuration():
    tm, mk = PAPER
    cert = interval_certificate(tm, mk, "identity", tol=1e-9)  # numpy engine, default box
    sol = tc.solvers.optimal_attention(tm, mk, value="identity", loss=SQ)
    assert cert.converged and 0.0 <= cert.gap <= 1e-9 and cert.info["engine"] == "numpy"
    assert cert.lower <= sol.fun <= cert.lower + 2e-9  # the solver is certified optimal to 2e-9
    (alo, ahi), (blo, bhi) = cert.argmin
    assert alo <= sol.alpha <= ahi and blo <= sol.beta <= bhi


def test_offset_moves_the_bounds():
    tm, mk = PAPER
    base = interval_certificate(tm, mk, "block", tol=1e-6)
    shifted = interval_certificate(tm, mk, "block", tol=1e-6, offset=1e-4)
    assert shifted.lower > base.upper


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(value="diag"), ValueError, "value"),
        (dict(box=((1.0, 0.0),)), ValueError, "low < high"),
        (dict(box=((0.0, 1.0), (0.0, 1.0))), ValueError, "1 finite"),
        (dict(box=((0.0, 1000.0),)), ValueError, "700"),
        (dict(box="ab"), TypeError, "box"),
        (dict(tol=0.0), ValueError, "tol"),
        (dict(max_boxes=0), ValueError, "max_boxes"),
    ],
)
def test_interval_certificate_validates_input(kw, exc, match):
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    with pytest.raises(exc, match=match):
        interval_certificate(tm, mk, **kw)


def test_interval_certificate_refuses_dirichlet():
    with pytest.raises(ValueError, match="uniform-tau"):
        interval_certificate(tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.1), tc.Masking())


# ------------------------------------------------------------------ wired into the public solvers
@pytest.mark.parametrize("T,v,tau", [(3, 2, 2), (4, 3, 2), (3, 2, 3)])
def test_solver_method_rational_equals_the_closed_form(T, v, tau):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.05)
    r = tc.solvers.optimal_value_matrix(tm, mk, method="rational")
    c = tc.solvers.optimal_value_matrix(tm, mk, method="closed-form", options={"dense": True})
    assert r.status == 0 and r.method == "rational"
    assert np.max(np.abs(r.x - c.x)) <= 1e-15
    g = tc.solvers.optimal_embedding_gram(tm, mk, method="rational")
    gc = tc.solvers.optimal_embedding_gram(tm, mk, method="closed-form")
    assert g.status == 0 and np.max(np.abs(g.x - gc.x.toarray())) <= 1e-15


def test_solver_method_rational_refuses_reg():
    tm, mk = tc.TopicModel(T=3, v=2, tau=2), tc.Masking()
    with pytest.raises(ValueError, match="reg"):
        tc.solvers.optimal_value_matrix(tm, mk, method="rational", reg=0.1)
    with pytest.raises(ValueError, match="reg"):
        tc.solvers.optimal_embedding_gram(tm, mk, method="rational", reg=0.1)


def test_optimal_attention_interval_certificate_at_the_paper_configuration():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    res = tc.solvers.optimal_attention(tm, mk, value="block", options={"certify": "interval"})
    cert = res.certificate
    assert res.status == 0
    assert cert["method"] == "interval-branch-and-bound"
    assert cert["lower"] <= res.fun <= cert["lower"] + 1e-9
    assert cert["gap"] <= 1e-9


def test_optimal_attention_interval_not_converged_is_not_certified():
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    res = tc.solvers.optimal_attention(
        tm, mk, value="identity", options={"certify": "interval", "certify_options": {"max_boxes": 20, "tol": 1e-12}}
    )
    assert res.status == 4 and "interval" in res.message
    assert res.certificate["lower"] <= res.fun


def test_optimal_attention_interval_argument_errors():
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    with pytest.raises(ValueError, match="certify"):
        tc.solvers.optimal_attention(tm, mk, options={"certify": "exact"})
    with pytest.raises(ValueError, match="squared"):
        tc.solvers.optimal_attention(tm, mk, loss="ce", options={"certify": "interval"})
