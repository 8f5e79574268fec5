"""Issue #26 item 5: Ctrl-C during ``verify`` stops the run (exit 130); the finished rows are written and the
report is marked partial, instead of the interruption being recorded as one claim's ERROR."""

from __future__ import annotations

import json

import pytest

import proofs_numeric
from theorycheck.cli import main
from theorycheck.nn import TrainingInterrupted
from theorycheck.report import run_claims
from theorycheck.report.claims import Claim, ClaimResult
from theorycheck.report.runner import RunInterrupted

RAN: list[str] = []


def _claim(cid, action):
    def check(p, inject=None):
        RAN.append(cid)
        if action == "ctrl-c":
            raise KeyboardInterrupt
        if action == "train-ctrl-c":  # the trainer's SIGINT handler turns Ctrl-C into TrainingInterrupted
            raise TrainingInterrupted(step=3, signame="SIGINT")
        return ClaimResult(True, 1.0, 1.0, 1.0)

    return Claim(
        id=cid,
        statement=f"{cid} holds",
        source="DERIVED",
        spec="test",
        check=check,
        default_params=({},),
        falsify=lambda p: {},
    )


@pytest.fixture(params=["ctrl-c", "train-ctrl-c"])
def claims(request, monkeypatch):
    RAN.clear()
    cs = [_claim("zz.a-first", "pass"), _claim("zz.b-interrupted", request.param), _claim("zz.c-never", "pass")]
    monkeypatch.setattr(proofs_numeric, "CLAIMS", cs)
    return cs


def test_run_claims_stops_at_ctrl_c_with_the_finished_rows(claims):
    with pytest.raises(RunInterrupted) as info:
        run_claims(claims, progress=False)
    assert isinstance(info.value, KeyboardInterrupt)
    assert [r.claim.id for r in info.value.rows] == ["zz.a-first"] and info.value.n_checks == 3
    assert RAN == ["zz.a-first", "zz.b-interrupted"]  # the run stopped: the third claim never ran


def test_verify_ctrl_c_writes_the_finished_rows_marked_partial(claims, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["verify", "--out", str(out), "--quiet", "--no-figures", "--no-cache"]) == 130
    err = capsys.readouterr().err
    line = "theorycheck verify: PARTIAL REPORT: interrupted (Ctrl-C) after 1 of 3 checks; the partial report is in"
    assert line in err and "Traceback" not in err
    data = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in data["claims"]] == ["zz.a-first"]
    assert [c["passed"] for c in data["claims"]] == [True]  # no ERROR row for the interrupted claim
    assert data["skipped"][0].startswith("PARTIAL REPORT: interrupted (Ctrl-C) after 1 of 3 checks")
    assert "PARTIAL REPORT" in (out / "report.md").read_text()
    assert RAN == ["zz.a-first", "zz.b-interrupted"]
