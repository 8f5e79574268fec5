"""The ``theorycheck`` command line: report files, exit codes, errors."""

import json
from pathlib import Path

import pytest

from theorycheck.cli import main


def test_verify_writes_report(tmp_path, capsys):
    out = tmp_path / "rep"
    code = main(["verify", "--out", str(out), "--only", "data.moments", "--quiet"])
    assert code == 0
    data = json.loads((out / "results.json").read_text())
    assert data["claims"], "no claims in results.json"
    for row in data["claims"]:
        assert set(["id", "statement", "source", "spec", "expected", "measured", "margin", "passed"]) <= set(row)
        assert row["passed"] is True
    assert (out / "report.md").read_text().startswith("# theorycheck verification report")
    # no temporary folders left behind
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]


def test_verify_unknown_claim_is_an_error(tmp_path, capsys):
    code = main(["verify", "--out", str(tmp_path / "x"), "--only", "no-such-claim"])
    assert code == 2
    assert "matches no claim" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_verify_exit_code_on_failure(tmp_path, monkeypatch):
    import proofs_numeric
    from theorycheck.report.claims import Claim, ClaimResult

    bad = Claim(
        id="zz.always-fails",
        statement="a claim that fails",
        source="DERIVED",
        spec="test",
        check=lambda p, inject=None: ClaimResult(False, 1.0, 2.0, -1.0),
        default_params=({},),
        falsify=lambda p: {},
    )
    monkeypatch.setattr(proofs_numeric, "CLAIMS", [bad])
    assert main(["verify", "--out", str(tmp_path / "r"), "--quiet", "--no-figures"]) == 1
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["claims"][0]["passed"] is False


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "verify" in capsys.readouterr().out


def test_network_is_refused_in_tests():
    """The autouse offline guard of conftest.py: any connection attempt fails loudly."""
    import socket

    with pytest.raises(RuntimeError, match="network access attempted"):
        socket.create_connection(("127.0.0.1", 9))
    s = socket.socket()
    try:
        with pytest.raises(RuntimeError, match="network access attempted"):
            s.connect(("127.0.0.1", 9))
    finally:
        s.close()


def test_bench_lists_and_rejects(capsys, tmp_path):
    # --dir: the checkout's benchmarks/ also when theorycheck is installed (tests run from an unpacked sdist)
    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    assert main(["bench", "--list", "--dir", bench]) == 0
    names = capsys.readouterr().out.split()
    assert "stage1" in names and "value_loss" in names
    assert main(["bench", "no-such-bench", "--dir", bench]) == 2
    assert "unknown benchmark" in capsys.readouterr().err
    assert main(["bench", "--dir", str(tmp_path / "missing")]) == 2
    assert "not found" in capsys.readouterr().err


def test_verify_reports_skipped_claims(tmp_path, monkeypatch, capsys):
    """A claim family that cannot run here (missing optional extra) is named, not silently absent."""
    import proofs_numeric

    reason = "demo.* claims skipped: the optional 'demo' extra is not installed"
    monkeypatch.setattr(proofs_numeric, "SKIPPED", [reason])
    out = tmp_path / "rep"
    assert main(["verify", "--out", str(out), "--only", "data.moments", "--quiet", "--no-figures"]) == 0
    assert f"note: {reason}" in capsys.readouterr().out
    assert json.loads((out / "results.json").read_text())["skipped"] == [reason]
    assert reason in (out / "report.md").read_text()
