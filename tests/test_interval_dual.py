"""Forward-mode AD on intervals (``_Dual``, SPEC §7 whole-domain certificate) against independent derivatives.

Issue 25 item 6: a wrong sign in the quotient rule of ``_Dual`` (mutant ``interval-dual-div``) passed every test;
the mean-value bounds of the mpmath engine rest on these gradients. Checked here: the AD gradient of rational
functions (quotients of two variable-dependent terms) encloses the derivative computed by hand in exact
``Fraction`` arithmetic; and the AD gradient of the loss on the compact charts (the only loss forms with such
quotients) encloses the Richardson-extrapolated central difference of the same loss evaluated exactly in
``Fraction`` arithmetic, within the difference of the two steps' estimates (their O(h^2) truncation error) plus
``h^3 (1 + |D|)``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mpmath import iv

import theorycheck as tc
from theorycheck.solvers.attention._interval_loss import _Dual, _evaluate, _iv, _setup

fracs = st.fractions(min_value=-5, max_value=5, max_denominator=50)


def _var(x: Fraction, i: int, n: int) -> _Dual:
    return _Dual(_iv(x), [int(i == j) for j in range(n)])


def _contains(enclosure, exact: Fraction) -> bool:
    e = iv.mpf(enclosure)
    return e.a <= _iv(exact).a and _iv(exact).b <= e.b


@given(x=fracs)
def test_quotient_of_two_duals_encloses_the_exact_derivative(x):
    X = _var(x, 0, 1)
    Q = (X * X + 1) / (X + 7)  # (x^2 + 1)/(x + 7), denominator in [2, 12]
    exact = (2 * x * (x + 7) - (x * x + 1)) / (x + 7) ** 2
    assert _contains(Q.val, (x * x + 1) / (x + 7))
    assert _contains(Q.der[0], exact)


@given(x=fracs, y=fracs)
def test_two_variable_quotient_encloses_the_exact_gradient(x, y):
    X, Y = _var(x, 0, 2), _var(y, 1, 2)
    Q = (X * Y + 1) / (Y * Y + X + 8)  # denominator >= 3 on the box
    f, g = x * y + 1, y * y + x + 8
    assert _contains(Q.der[0], (y * g - f) / g**2)
    assert _contains(Q.der[1], (x * g - f * 2 * y) / g**2)


def test_a_wrong_quotient_rule_is_detected():
    """The check itself: the derivative of x/(x + 7) with the sign of the quotient term flipped is outside."""
    x = Fraction(2)
    q = x / (x + 7)
    wrong = (1 + q * 1) / (x + 7)
    Q = _var(x, 0, 1) / (_var(x, 0, 1) + 7)
    assert _contains(Q.der[0], (1 - q) / (x + 7)) and not _contains(Q.der[0], wrong)


CASES = [
    (tc.TopicModel(T=4, v=3, tau=2), tc.Masking(0.3, 0.2, 0.05)),
    (tc.TopicModel(T=10, v=10, tau=3), tc.Masking(0.15, 0.1, 0.1)),
    (tc.TopicModel(T=3, v=1, tau=1), tc.Masking(0.2, 0.1, 0.3)),
    (tc.TopicModel(T=5, v=2, tau=4), tc.Masking(0.5, 0.0, 0.4)),
]
POINTS = [(Fraction(1, 3), Fraction(1, 4)), (Fraction(3, 5), Fraction(2, 3)), (Fraction(9, 10), Fraction(1, 10))]
H = Fraction(1, 1000)


def _central(f, pt, i, h):
    up = [x + (h if j == i else 0) for j, x in enumerate(pt)]
    dn = [x - (h if j == i else 0) for j, x in enumerate(pt)]
    return (f(up) - f(dn)) / (2 * h)


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr(c)[:48])
@pytest.mark.parametrize("chart", ["block-u", "identity-uw"])
def test_chart_loss_gradient_encloses_exact_finite_differences(case, chart):
    tm, mk = case
    cst_iv, cst_q = _setup(tm, mk, chart), _setup(tm, mk, chart, make=lambda x: x)
    assert "k_in" in cst_q
    for point in POINTS:
        pt = point[: 1 if chart == "block-u" else 2]
        n = len(pt)
        F = _evaluate([_var(x, i, n) for i, x in enumerate(pt)], tm, cst_iv, chart)
        assert _contains(F.val, _evaluate(list(pt), tm, cst_q, chart))
        for i in range(n):
            d1, d2 = (_central(lambda p: _evaluate(p, tm, cst_q, chart), pt, i, h) for h in (H, H / 2))
            d = (4 * d2 - d1) / 3
            tol = abs(d2 - d1) + H**3 * (1 + abs(d))
            wide = iv.mpf(F.der[i]) + iv.mpf([-1, 1]) * _iv(tol)  # the AD enclosure widened by the FD error
            assert _contains(wide, d), (pt, i, float(d), F.der[i], float(tol))
