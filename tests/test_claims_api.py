"""The claim helpers: margins are >= 0 iff passed, and compare_all reports a consistent worst part."""

import math

from hypothesis import given
from hypothesis import strategies as st

from theorycheck.report.claims import ClaimResult, compare_all, compare_close, compare_greater

finite = st.floats(-1e6, 1e6, allow_nan=False)


@given(finite, finite, st.floats(0, 1e3))
def test_compare_close_margin_sign(m, e, tol):
    r = compare_close(m, e, tol)
    assert r.passed == (abs(m - e) <= tol)
    assert (r.margin >= 0) == r.passed


@given(finite, finite)
def test_compare_greater_margin_sign(m, e):
    r = compare_greater(m, e)
    assert r.passed == (m > e)
    assert math.isclose(r.margin, m - e)


def test_compare_all_reports_the_part_closest_to_failure_in_its_own_units():
    tight = compare_close(0.9e-15, 0.0, 1e-15)  # 10% of its tolerance left
    loose = compare_close(3.0, 0.0, 5.0)  # 40% left, but a larger absolute margin
    res = compare_all([loose, tight])
    assert res.passed
    assert res.margin == tight.margin and res.tolerance == tight.tolerance
    assert math.isclose(res.details["relative_margin"], 0.1, rel_tol=1e-9)
    bad = compare_all([loose, compare_close(2.0, 0.0, 1.0)])
    assert not bad.passed and bad.margin == -1.0


def test_non_finite_margin_fails():
    assert not ClaimResult(True, 1.0, float("nan"), float("nan")).passed
