"""The identity-W^V beta* and its phase boundary on the certified route (issue 36 items 4, 10, 11; SPEC §4.3(b)).

Oracles independent of the certificate: the SPEC §4.3(b) loss retyped in mpmath (:mod:`proofs_numeric._spec_route`:
its value, its gradient by ``mpmath.diff`` and its limit ``beta -> -inf``).
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from proofs_numeric import _spec_route as R
from theorycheck.analysis.identity_phase import BETA_ZERO, beta_boundary, identity_beta, identity_beta_star
from theorycheck.solvers.attention import certified_beta_star
from theorycheck.spec import spec_text


def _route(tm, mk):
    return R.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)


def _route_at(b, c):
    """The route's loss and gradient at the midpoint of the certified enclosure."""
    a, be = mp.mpf(sum(b.alpha) / 2), mp.mpf(b.beta)

    def f(x, y):
        return R.identity_loss(x, y, c)

    with mp.workdps(40):
        return f(a, be), (mp.diff(f, (a, be), (1, 0)), mp.diff(f, (a, be), (0, 1)))


def test_finite_beta_star_below_the_limit_is_not_reported_as_minus_infinity():
    # issue 36 item 4: the float solver returned -inf; the optimum is finite, beta* = -2.199, L = 0.8003147080770,
    # 1.1e-7 below the limit beta -> -inf
    tm, mk = tc.TopicModel(14, 10, 5), tc.Masking(0.15, 0.2, 0.05)
    beta = identity_beta_star(14, 10, 5, mk)
    assert math.isfinite(beta) and abs(beta + 2.1998) < 1e-3, beta
    c = _route(tm, mk)
    b = identity_beta(14, 10, 5, mk)
    L, g = _route_at(b, c)
    _, L_limit = R.identity_optimum_beta_inf(c)
    assert float(L_limit - L) > 1e-7  # the route: the finite point is below every point of the limit
    assert b.L_lower - 1e-15 <= float(L) <= b.L_upper + 1e-15
    assert max(abs(float(x)) for x in g) < 1e-9  # a critical point of the independent loss


@pytest.mark.parametrize(
    "T, v, tau, mask, printed",
    [
        (10, 10, 3, (0.15, 0.1, 0.1), "-0.1503"),  # SPEC §4.3(b)
        (10, 2, 3, (0.05, 0.05, 0.05), "+1.8e-4"),  # SPEC §4.3(b) counterexample (item 11: this masking)
        (10, 2, 3, (0.15, 0.1, 0.1), "-0.048"),  # the same T, v, tau at the default masking
        (2, 3, 1, (0.05, 0.05, 0.05), "+0.394"),
        (10, 2, 3, (0.15, 0.05, 0.05), "+7.2e-4"),  # attention.identity-optimum's third default
    ],
)
def test_spec_beta_star_values(T, v, tau, mask, printed):
    mk = tc.Masking(*mask)
    b = identity_beta(T, v, tau, mk)
    assert b.kind == "finite" and b.width < 1e-10, b
    assert R.printed_as(b.beta, float(printed)), (b.beta, printed)
    assert b.sign == (1 if printed.startswith("+") else -1)


def test_spec_counterexample_states_its_masking():
    # issue 36 item 11: "T = 10, v = 2, tau = 3 gives beta* = +1.8e-4" needs p = 0.05/0.05/0.05
    text = " ".join(spec_text().split())
    assert "$T = 10$, $v = 2$, $\\tau = 3$, $p = 0.05/0.05/0.05$ gives $\\beta^* = +\\text{1.8e-4}$" in text
    assert "default masking" in text and "-0.048" in text


def test_minus_infinity_is_proven_and_is_the_route_limit():
    tm, mk = tc.TopicModel(100, 10, 3), tc.Masking()
    b = identity_beta(100, 10, 3, mk)
    assert b.kind == "minus-infinity" and b.sign == -1 and b.beta == -math.inf
    _, L_limit = R.identity_optimum_beta_inf(_route(tm, mk))
    assert b.L_lower - 1e-15 <= float(L_limit) <= b.L_upper + 1e-15


def test_p_r_zero_is_the_limit_alpha_to_infinity():
    b = identity_beta(10, 10, 3, tc.Masking(0.15, 0.1, 0.0))
    assert b.kind == "alpha-infinity" and b.sign == -1
    # all attention on the own word: kept queries cost 0, [MASK] queries their fixed cost
    c = _route(tc.TopicModel(10, 10, 3), tc.Masking(0.15, 0.1, 0.0))
    assert b.L_lower - 1e-15 <= float(R.identity_loss(mp.mpf(800), mp.mpf(0), c)) <= b.L_upper + 1e-15


@settings(max_examples=10)
@given(
    T=st.integers(2, 9),
    v=st.integers(2, 5),
    tau_frac=st.floats(0.0, 1.0),
    p=st.tuples(
        st.sampled_from([0.05, 0.15, 0.5]), st.sampled_from([0.05, 0.1, 0.3]), st.sampled_from([0.0, 0.05, 0.1])
    ),
)
def test_certified_beta_star_is_a_critical_point_of_the_route(T, v, tau_frac, p):
    tau = 1 + int(tau_frac * (T - 1))
    tm, mk = tc.TopicModel(T, v, tau), tc.Masking(*p)
    b = certified_beta_star(tm, mk)
    c = _route(tm, mk)
    assert b.kind != "undecided", b
    if b.kind == "finite":
        L, g = _route_at(b, c)
        assert b.lower <= b.beta <= b.upper and b.width < 1e-9
        assert b.L_lower - 1e-15 <= float(L) <= b.L_upper + 1e-15
        assert max(abs(float(x)) for x in g) < 1e-8, (tm, mk, b, g)
        assert b.sign == (-1 if b.upper < 0 else 1 if b.lower > 0 else 0)
    elif b.kind == "minus-infinity":
        _, L_limit = R.identity_optimum_beta_inf(c)
        assert b.L_lower - 1e-15 <= float(L_limit) <= b.L_upper + 1e-12


@pytest.mark.parametrize(
    "v, tau, mask, T0",
    [
        (10, 3, (0.15, 0.1, 0.1), 5),
        (2, 3, (0.15, 0.05, 0.05), 11),
        (2, 1, (0.15, 0.1, 0.05), 3),
        (10, 1, (0.15, 0.4, 0.3), 2),
    ],
)
def test_boundary_by_consecutive_scan_matches_the_spec_table(v, tau, mask, T0):
    mk = tc.Masking(*mask)
    assert beta_boundary(v, tau, mk, T_max=64) == T0
    for T in range(tau, T0 + 3):  # consecutive T: one sign change, at T0
        nonpositive = identity_beta(T, v, tau, mk).upper <= BETA_ZERO or identity_beta(T, v, tau, mk).beta == -math.inf
        assert nonpositive == (T >= T0), (T, identity_beta(T, v, tau, mk))


def test_float_solver_finds_the_shallow_interior_basin():
    # issue 36 item 4: the float solver's grid point sat on the plateau towards beta -> -inf and it reported -inf;
    # the band starts find the basin 1.1e-7 below the limit
    tm, mk = tc.TopicModel(14, 10, 5), tc.Masking(0.15, 0.2, 0.05)
    r = tc.solvers.optimal_attention(tm, mk, value="identity", options={"check_general": False})
    b = identity_beta(14, 10, 5, mk)
    assert r.status == 0 and not r.info["beta_to_minus_inf"], r.message
    assert abs(r.beta - b.beta) < 1e-4 and b.L_lower - 1e-12 <= r.fun <= b.L_upper + 1e-12
