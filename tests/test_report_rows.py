"""Report rows say what decided: the deciding sub-check's label, expected, measured and margin."""

from __future__ import annotations

import json
import math

import pytest

from theorycheck.report import (
    Claim,
    ClaimResult,
    compare_all,
    compare_close,
    compare_greater,
    format_table,
    write_report,
)
from theorycheck.report.runner import ReportRow, decided_by


def _two_parts(params, inject=None):
    """Sub-check 0 passes with a wide relative margin (0.5 of 1e-3); sub-check 1 is closer to failure."""
    return compare_all(
        [
            compare_close(1.0 + 5e-4, 1.0, 1e-3, label="L* = 1 - 1/(tau v)"),
            compare_greater(-0.150276, params["bound"], label="beta* <= 0"),
        ]
    )


def _claim(cid="t.two-parts", check=_two_parts, params=({"bound": -0.2},)):
    return Claim(cid, "two sub-checks", "DERIVED", "SPEC §4.3", check, params, lambda p: {})


def _row(claim, params, error=None):
    return ReportRow(claim, claim.run(params), 0.0, error)


def test_compare_all_row_names_the_deciding_second_sub_check():
    claim = _claim()
    row = _row(claim, {"bound": -0.2})
    # relative margins: 5e-4 / 1e-3 = 0.5 for the first, 0.049724 / 1 for the second: the second decides
    assert row.decided_by == "beta* <= 0"
    assert row.result.margin == pytest.approx(-0.150276 + 0.2, abs=1e-15)
    assert (row.result.expected, row.result.measured) == (-0.2, -0.150276)
    js = row.to_json()
    assert js["decided_by"] == "beta* <= 0" and js["margin"] == pytest.approx(0.049724, abs=1e-15)
    table = format_table([row])
    header, _, line = table.splitlines()[:3]
    assert header.split() == ["claim", "statement", "decided", "by", "expected", "measured", "margin", "verdict"]
    assert "beta* <= 0" in line and "0.049724" in line and "-0.150276" in line and line.rstrip().endswith("PASS")
    md = format_table([row], markdown=True)
    assert "| decided by |" in md.splitlines()[0]
    assert "| beta* <= 0 | -0.2 | -0.150276 | 0.049724 | PASS |" in md


def test_the_first_sub_check_decides_when_it_is_closer_to_failure():
    row = _row(_claim(), {"bound": -0.16})  # second's relative margin 0.009724 < 0.5: still the second
    assert row.decided_by == "beta* <= 0"
    row = _row(_claim(), {"bound": -10.0})  # second's relative margin 9.85 / 10 = 0.985 > 0.5: the first decides
    assert row.decided_by == "L* = 1 - 1/(tau v)"
    assert row.result.tolerance == 1e-3 and row.result.margin == pytest.approx(5e-4, abs=1e-15)


def test_a_failing_sub_check_is_the_one_named():
    row = _row(_claim(), {"bound": 0.0})  # -0.150276 > 0 is false
    assert row.verdict == "FAIL" and row.decided_by == "beta* <= 0" and row.result.margin < 0


@pytest.mark.parametrize(
    "result, text",
    [
        (ClaimResult(True, 1.0, 1.0, 1e-9, tolerance=1e-9), "|measured - expected| <= 1e-09"),
        (ClaimResult(True, 0.0, 2.0, 2.0), "measured > expected"),
        (ClaimResult(True, "closed form == enumeration", 0.0, 1e-12, tolerance=1e-12), "error <= 1e-12"),
        (ClaimResult(True, "CI low > 0", 0.3, 0.3), "inequality: margin > 0"),
        (ClaimResult(True, 1.0, 1.0, 1.0, tolerance=1.0, label="own words"), "own words"),
    ],
)
def test_generated_labels_when_a_claim_gives_none(result, text):
    assert decided_by(result) == text


def test_error_rows_say_they_raised():
    claim = _claim()
    row = ReportRow(claim, ClaimResult(False, "", "", -math.inf), 0.0, "RuntimeError: x")
    assert row.verdict == "ERROR" and row.decided_by == "raised an exception"


def test_console_cuts_long_labels_markdown_keeps_them():
    claim = _claim()
    res = compare_close(1.0, 1.0, 1e-9, label="x" * 80)
    row = ReportRow(claim, res, 0.0)
    assert "x" * 37 + "..." in format_table([row]) and "x" * 38 not in format_table([row])
    assert "x" * 80 in format_table([row], markdown=True)


def test_report_counts_claims_and_checks_separately(tmp_path):
    a = _claim("t.a", params=({"bound": -0.2}, {"bound": 0.0}))
    b = _claim("t.b", params=({"bound": -0.3},))
    rows = [_row(a, p) for p in a.default_params] + [_row(b, b.default_params[0])]
    rows.append(ReportRow(b, ClaimResult(False, "", "", -math.inf, params={"bound": 1}), 0.0, "RuntimeError: x"))
    out = write_report(rows, tmp_path / "rep", figures=False)
    md = (out / "report.md").read_text()
    assert "2 claims, 4 checks: 2 passed, 1 failed, 1 raised an error." in md
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"]["claims"] == 2 and doc["summary"]["checks"] == 4 and doc["summary"]["passed"] == 2
    assert [r["decided_by"] for r in doc["claims"]] == ["beta* <= 0"] * 3 + ["raised an exception"]
    ok = write_report(rows[:1], tmp_path / "one", figures=False)
    assert "1 claim, 1 check: 1 passed." in (ok / "report.md").read_text()
