"""Issue 15 item 5: a built-in claim's report row belongs to ONE sub-check.

For the cheap claims (stage-1, data, general evaluator, embedding block sums) on their first default
configuration, passed and falsified: the row's ``label``, ``expected``, ``measured``, ``margin`` and
``tolerance`` are those of the sub-check :func:`compare_all` picked (recorded by wrapping it in the
claim's module: nothing overwrites them afterwards), ``expected`` and ``measured`` are numbers, and the
margin re-derives from them (``tolerance - |measured - expected|`` for an equality, ``measured -
expected`` for an inequality). Plus the helper :func:`proofs_numeric._stage1.compare_worst` that turns
array comparisons into the deciding entry's numbers with a bit-identical margin.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from proofs_numeric import CLAIMS
from proofs_numeric._stage1 import compare_worst
from theorycheck.report import claims as claims_mod
from theorycheck.report.claims import compare_close

CHEAP = ("stage1.", "data.moments", "attention.general-evaluator", "embedding.block-sum-identity")
CASES = [c for c in CLAIMS if c.id.startswith(CHEAP)]


def test_the_cheap_subset_is_what_it_says():
    ids = {c.id for c in CASES}
    assert {"stage1.min-loss", "stage1.block-sum-identity", "stage1.gd-minnorm", "data.moments"} <= ids
    assert len(ids) == 12, sorted(ids)


def _run_recording(claim, monkeypatch, inject):
    """Run the claim's first default configuration; return the result and compare_all's pick (or None)."""
    module = sys.modules[claim.check.__module__]
    picked = []

    def recording(parts):
        out = claims_mod.compare_all(parts)
        picked.append(min(parts, key=claims_mod._relative_margin))
        return out

    if hasattr(module, "compare_all"):
        monkeypatch.setattr(module, "compare_all", recording)
    params = claim.default_params[0]
    res = claim.run(params, inject=claim.falsify(params) if inject else None)
    return res, (picked[-1] if picked else None)


def _derived_margin(res) -> float:
    m, e = float(res.measured), float(res.expected)
    return res.tolerance - abs(m - e) if res.tolerance > 0 else m - e


@pytest.mark.parametrize("falsified", [False, True], ids=["default", "falsified"])
@pytest.mark.parametrize("claim", CASES, ids=[c.id for c in CASES])
def test_row_is_one_sub_check(claim, falsified, monkeypatch):
    res, worst = _run_recording(claim, monkeypatch, falsified)
    assert res.passed is (not falsified)
    assert isinstance(res.label, str) and res.label.strip(), f"{claim.id}: empty label"
    for name in ("expected", "measured"):
        value = getattr(res, name)
        assert isinstance(value, float) and math.isfinite(value), f"{claim.id}: {name} = {value!r} is not a number"
    if worst is not None:  # the row is compare_all's pick, untouched
        got = (res.label, res.expected, res.measured, res.margin, res.tolerance)
        assert got == (worst.label, worst.expected, worst.measured, worst.margin, worst.tolerance)
    scale = max(1.0, abs(float(res.measured)), abs(float(res.expected)))
    assert abs(res.margin - _derived_margin(res)) <= 4e-16 * scale, (claim.id, res.margin, _derived_margin(res))
    assert (res.margin >= 0) is res.passed


def test_min_loss_row_no_longer_mixes_sub_checks():
    """The example of the issue: the stationarity residual decided, but the row showed the loss values."""
    claim = next(c for c in CLAIMS if c.id == "stage1.min-loss")
    res = claim.run(claim.default_params[0])
    assert res.label == "stationarity ||W Sigma - C|| rel"
    assert res.expected == 0.0 and 0.0 <= res.measured < 1e-12
    assert res.details["min_loss_formula"] == pytest.approx(1 - 1 / 30, abs=1e-15)
    assert res.details["loss_lstsq"] == pytest.approx(1 - 1 / 30, abs=1e-12)


_finite = st.floats(-1e6, 1e6, allow_nan=False)


@given(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5), elements=_finite),
    st.one_of(_finite, st.just(0.0)),
    st.floats(1e-12, 1e3),
)
def test_compare_worst_equals_compare_close_margin(m, e, tol):
    whole = compare_close(m, e, tol, label="x = e")
    worst = compare_worst(m, e, tol, label="x = e")
    assert worst.margin == whole.margin and worst.passed == whole.passed  # bit-identical
    assert isinstance(worst.expected, float) and isinstance(worst.measured, float)
    assert worst.tolerance - abs(worst.measured - worst.expected) == worst.margin
    assert worst.label == ("x = e (worst entry)" if m.size > 1 else "x = e")
    assert worst.details["abs_error"] == whole.details["abs_error"]


def test_compare_worst_array_expected_and_non_finite():
    got = compare_worst(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.5, 3.1]), 1.0, label="v")
    assert (got.expected, got.measured, got.label) == (2.5, 2.0, "v (worst entry)")
    assert got.margin == 0.5
    bad = compare_worst(np.array([1.0, np.nan]), 1.0, 1.0, label="v")
    assert not bad.passed and bad.margin == -math.inf and bad.label == "v"  # compare_close unchanged
