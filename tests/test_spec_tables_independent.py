"""Every SPEC §4.2 / §4.3 / §4.5 table value re-derived by a route that shares no code with the solvers
(issue #25 item 5): :mod:`proofs_numeric._spec_route` retypes the SPEC formulas in mpmath (40 digits)
and optimises them with mpmath. Each printed value must be its route value rounded to the printed
digits, and the package's solvers must agree with the route far below the printed digits.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import theorycheck as tc
from proofs_numeric import _spec_route as R
from theorycheck.analysis.dynamics import stage2_onset

P = (0.15, 0.1, 0.1)


def _printed(x, digits):
    """``x`` rounded to ``digits`` decimals (the table's printing)."""
    return round(float(x), digits)


def _sig(x, n):
    """``x`` rounded to ``n`` significant digits."""
    return float(f"{float(x):.{n}g}")


# (T, v, tau, K*, K*/v, K*/(v tau), L*, L(uniform)) of the SPEC §4.3 table
TABLE_43 = [
    (10, 10, 2, 57.63, 5.76, 2.88, 0.946103, 0.950000),
    (10, 10, 3, 70.05, 7.01, 2.34, 0.961770, 0.966667),
    (10, 10, 5, 81.84, 8.18, 1.64, 0.974854, 0.980000),
    (100, 10, 3, 172.6, 17.3, 5.75, 0.960314, 0.966667),
    (100, 10, 10, 416.8, 41.7, 4.17, 0.981893, 0.990000),
    (1000, 10, 30, 1811, 181, 6.04, 0.987295, 0.996667),
    (1000, 50, 30, 9055, 181, 6.04, 0.997459, 0.999333),
    (10000, 10, 100, 6893, 689, 6.89, 0.989201, 0.999000),
    (100000, 10, 300, 21740, 2174, 7.25, 0.989730, 0.999667),
]


@pytest.mark.parametrize("row", TABLE_43, ids=lambda r: f"T{r[0]}v{r[1]}tau{r[2]}")
def test_table_43_block_optimum_by_the_independent_route(row):
    T, v, tau, K_tab, Kv_tab, Kvt_tab, L_tab, Lu_tab = row
    c = R.consts(T, v, tau, *P)
    K, L = R.kstar(c, hi=14)
    assert _sig(K, 4) == K_tab
    assert _sig(K / v, max(3, len(str(int(K / v))))) == Kv_tab and _sig(K / (v * tau), 3) == Kvt_tab
    assert _printed(L, 6) == L_tab and _printed(R.block_loss(v, c), 6) == Lu_tab
    with mp.workdps(40):  # SPEC §4.3(a) fact 2
        assert abs(R.block_loss(v, c) - (1 - mp.mpf(1) / (tau * v))) < mp.mpf(10) ** -30
    sol = tc.solvers.optimal_attention(tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*P), value="block",
                                       options={"check_general": False})  # fmt: skip
    # the float loss locates the argmin only to ~1e-6 relative where it is flat (T = 1000, v = 50: 1.1e-6)
    assert sol.K == pytest.approx(float(K), rel=1e-5)
    assert sol.fun == pytest.approx(float(L), abs=1e-12)


def test_third_row_is_8184_not_8185():
    """SPEC §4.3: the first form printed 81.85; the route gives K* = 81.84475 (SPEC printed 81.8447 before:
    the float solver's 81.844748, within float resolution of the flat minimum, truncated)."""
    K, _ = R.kstar(R.consts(10, 10, 5, *P))
    assert round(float(K), 5) == 81.84475 and _sig(K, 4) == 81.84


def test_kstar_over_v_almost_independent_of_v():
    """SPEC §4.3(a) scaling: T = 1000, tau = 30: K*/v = 181.107 / 181.099 / 181.097 (v = 10, 50, 200),
    v (1 - L*) = 0.127055, 0.127054, 0.127054 (SPEC said 0.127055 in all three before: 0.1270547, 0.1270540,
    0.1270539)."""
    for v, ratio, gain in ((10, 181.107, 0.127055), (50, 181.099, 0.127054), (200, 181.097, 0.127054)):
        K, L = R.kstar(R.consts(1000, v, 30, *P), hi=14)
        assert _printed(K / v, 3) == ratio
        assert _printed(v * (1 - L), 6) == gain


@pytest.mark.parametrize(
    "row",
    [(10, 10, 3, 0.108020, -0.007587, 0.054191), (100, 10, 3, 0.114509, -0.001098, 0.007908),
     (5, 3, 2, 0.367520, -0.017836, 0.121163)],
)  # fmt: skip
def test_table_42_stage1_constants(row):
    T, v, tau, A, B0, gamma = row
    c = R.consts(T, v, tau, *P)
    assert (_printed(c["A"], 6), _printed(c["B0"], 6), _printed(c["gamma"], 6)) == (A, B0, gamma)
    W = tc.solvers.optimal_value_matrix(tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*P)).x
    assert W[1, 1] == pytest.approx(float(c["A"]), abs=1e-13)
    assert W[1, -1] == pytest.approx(float(c["B0"]), abs=1e-13)
    assert W[1, 0] == pytest.approx(float(c["gamma"]), abs=1e-13)


def test_identity_optimum_by_the_independent_route():
    """SPEC §4.3(b): T = v = 10, tau = 3: alpha* = 4.7105 (e^alpha* = 111.1), beta* = -0.1503,
    L* = 0.892836, L(0,0) = 0.967236 (0.981636 with W^V_00 = 1: every class adds h_0^2 = q^2 at 0)."""
    c = R.consts(10, 10, 3, *P)
    a, b, L = R.identity_optimum(c)
    assert (_printed(a, 4), _printed(b, 4), _printed(L, 6)) == (4.7105, -0.1503, 0.892836)
    assert _printed(mp.exp(a), 1) == 111.1
    L00 = R.identity_loss(0, 0, c)
    assert _printed(L00, 6) == 0.967236 and _printed(L00 + c["q"] ** 2, 6) == 0.981636
    sol = tc.solvers.optimal_attention(tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P), value="identity",
                                       options={"check_general": False})  # fmt: skip
    assert (sol.alpha, sol.beta) == pytest.approx((float(a), float(b)), abs=1e-5)
    assert sol.fun == pytest.approx(float(L), abs=1e-12)


def test_identity_beta_to_minus_infinity_at_T100():
    """SPEC §4.3(b): T = 100, v = 10, tau = 3: e^alpha* ~ 730 with beta* -> -inf: the edge value is below
    every finite beta on a scan, and the solver's value (at its finite beta) is just above it."""
    c = R.consts(100, 10, 3, *P)
    a, L_edge = R.identity_optimum_beta_inf(c)
    assert round(float(mp.exp(a)), -1) == 730
    for beta in (-20, -10, -5, -2, 0, 2):
        _, L_b = R._argmin_1d(lambda al, beta=beta: R.identity_loss(al, beta, c), mp.mpf(-5), mp.mpf(20), n=50)
        assert L_b > L_edge
    sol = tc.solvers.optimal_attention(tc.TopicModel(T=100, v=10, tau=3), tc.Masking(*P), value="identity",
                                       options={"check_general": False})  # fmt: skip
    assert float(L_edge) - 1e-15 <= sol.fun <= float(L_edge) + 1e-9  # rounding of the float evaluation


@pytest.mark.parametrize(
    "row", [(10, 10, 2, 5.575e-5), (10, 10, 3, 4.964e-5), (10, 10, 5, 3.586e-5), (100, 10, 3, 4.49e-6),
            (5, 4, 2, 7.867e-4)],
)  # fmt: skip
def test_table_45_sigma_max(row):
    """SPEC §4.5 table: sigma_max = -L'(log K)|_{K=v} / (v (T - 1)) by the route, and the code's closed form."""
    T, v, tau, s_tab = row
    s = R.sigma_max(R.consts(T, v, tau, *P))
    assert _sig(s, len(f"{s_tab:e}".split("e")[0].replace(".", "").rstrip("0")) or 1) == s_tab
    assert stage2_onset(tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*P)).sigma_max == pytest.approx(float(s), rel=1e-9)


@pytest.mark.parametrize("T,v,tau", [(10, 10, 3), (4, 3, 2), (3, 2, 3), (5, 1, 2)])
def test_class_formulas_equal_the_one_document_evaluator(T, v, tau):
    """The route's class sums (SPEC §4.3(a), (b)) against the SPEC's loss for any scores on one document
    (vectors of size Tv + 1): a check of the route itself."""
    c = R.consts(T, v, tau, *P)
    W = R.block_value_matrix(c)
    Wid = np.eye(T * v + 1)
    Wid[0, 0] = 0.0
    for a, b in ((0.0, 0.0), (1.3, -0.4), (4.0, 2.0), (-2.0, 3.0)):
        K = math.exp(a) + (v - 1) * math.exp(b)
        if v > 1 or a == b:  # block: the loss depends on K only, any (a, b) with that K
            assert R.one_set_loss(R.family_scores(a, b, v), W, c) == pytest.approx(float(R.block_loss(K, c)), abs=1e-13)
        assert R.one_set_loss(R.family_scores(a, b, v), Wid, c) == pytest.approx(
            float(R.identity_loss(a, b, c)), abs=1e-13
        )
