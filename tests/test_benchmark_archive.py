"""The reference archive (issue #35): compact records keep every statistic, rescaling, comparison in the report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from theorycheck.cli import main
from theorycheck.problems import _stats as S
from theorycheck.problems._archive import ARCHIVE_TAG, compact, load_archive, rescale
from theorycheck.problems._run import run_benchmark

PROBS = ["attention-ab/block:paper", "stage1-value/block:paper"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("arch")
    records, summary = run_benchmark(out / "o", problems=PROBS, solvers=["L-BFGS-B", "gd", "Nelder-Mead"],
                                     levels=[0, 1], repeats=2, budget=0.3, progress=False,
                                     archive=out / "a.json.gz")  # fmt: skip
    return out, records, summary


def test_compact_records_keep_every_statistic(run):
    _, records, _ = run
    small = [compact(r) for r in records]
    assert sum(len(r["trace"]) for r in small) < sum(len(r["trace"]) for r in records)
    for tol in S.COCO_TARGETS:
        for measure in ("evals", "t"):
            for a, b in zip(records, small, strict=True):
                assert S.hitting_time(a, tol, measure) == S.hitting_time(b, tol, measure)
    for tol in (1e-4, 1e-8):
        for a, b in zip(records, small, strict=True):
            assert S.reduction_hitting_time(a, tol) == S.reduction_hitting_time(b, tol)
    e1, e2 = S.runtime_ecdf(records), S.runtime_ecdf(small)
    assert all(np.array_equal(e1.runtimes[s], e2.runtimes[s]) for s in e1.runtimes)


def test_archive_round_trip_and_rescale(run):
    out, records, summary = run
    doc = load_archive(out / "a.json.gz")
    assert doc["format"] == 1 and len(doc["records"]) == len(records)
    assert doc["reference"]["seconds"] == summary["reference"]["seconds"]
    assert set(doc["solvers"]) == {"L-BFGS-B", "gd", "Nelder-Mead"}
    ours = 2.5 * doc["reference"]["seconds"]
    scaled = rescale(doc, ours)
    for a, b in zip(doc["records"], scaled, strict=True):
        assert b["solver"] == "archive:" + a["solver"] and b["solver_name"].endswith(ARCHIVE_TAG)
        assert b["evals"] == a["evals"]  # evaluation counts are as recorded
        if a["answer_t"] is not None:
            assert b["answer_t"] == pytest.approx(2.5 * a["answer_t"], rel=1e-12)
        assert [p["t"] for p in b["trace"]] == pytest.approx([2.5 * p["t"] for p in a["trace"]], rel=1e-12)


def test_bad_archives_are_refused_before_any_work(tmp_path):
    (tmp_path / "x.json.gz").write_bytes(b"not gzip, not json")
    with pytest.raises(ValueError, match="not a readable archive"):
        load_archive(tmp_path / "x.json.gz")
    (tmp_path / "y.json").write_text(json.dumps({"format": 99, "records": []}))
    with pytest.raises(ValueError, match="not a theorycheck archive"):
        run_benchmark(tmp_path / "o", problems=PROBS, solvers=["gd"], compare_archive=tmp_path / "y.json",
                      progress=False)  # fmt: skip
    assert not (tmp_path / "o" / "cells").exists()


def test_compare_archive_ranks_a_user_solver_without_rerunning_the_builtins(run, tmp_path, capsys):
    out, records, _ = run
    f = tmp_path / "mine.py"
    f.write_text(
        "import scipy.optimize\n\ndef mine(oracle, budget, callback):\n"
        "    return scipy.optimize.minimize(oracle.f, oracle.x0, jac=oracle.grad, method='BFGS').x\n"
    )
    argv = ["benchmark", "--problems", ",".join(PROBS), "--sizes", "0,1", "--repeats", "2", "--budget", "0.3",
            "--solver", f"{f}:mine", "--compare-archive", str(out / "a.json.gz"), "--quiet",
            "--out", str(tmp_path / "cmp"), "--json", str(tmp_path / "s.json")]  # fmt: skip
    assert main(argv) == 0
    res = json.loads((tmp_path / "cmp" / "results.json").read_text())
    solvers = {r["solver_name"] for r in res["runs"]}
    assert solvers == {"mine", "L-BFGS-B (archive)", "gd (archive)", "Nelder-Mead (archive)"}
    assert res["meta"]["run_now"] == 8  # only the user's cells ran: 4 instances x 2 repeats
    assert res["meta"]["archive"]["records"] == len(records) and not res["meta"]["archive"]["changed_since"]
    html = (tmp_path / "cmp" / "report.html").read_text()
    assert "Compared with the archive" in html and "reference workload" in html and "gd (archive)" in html
    # without a solver of the user's there is nothing to compare
    assert main(["benchmark", "--compare-archive", "--out", str(tmp_path / "x")]) == 2
    assert "--solver" in capsys.readouterr().err


def test_the_shipped_archive_covers_the_default_set_with_the_current_builtins():
    """The package's archive: the default set's instances (every problem at its default levels, one start),
    the default built-in solvers, a reference workload, and records the statistics accept. A built-in whose code
    changed since is not an error (the report flags it), but the archive then needs remaking: this test says so."""
    from theorycheck.problems._registry import match
    from theorycheck.problems._run import DEFAULT, DEFAULT_SOLVERS, plan
    from theorycheck.problems._solvers import solver_fingerprint

    doc = load_archive()
    cells, _ = plan(match(None), DEFAULT_SOLVERS, "default", 1)
    want = {(c.problem, c.size["T"], c.repeat) for c in cells}
    have = {(r["problem"], json.loads(r["size"])["T"], r["repeat"]) for r in doc["records"]}
    assert want == have and doc["budget_seconds"] == DEFAULT["budget"] and doc["reference"]["seconds"] > 0
    assert {r["solver"] for r in doc["records"]} == set(DEFAULT_SOLVERS)
    stale = [s for s, fp in doc["solvers"].items() if fp != solver_fingerprint(s)]
    assert not stale, f"built-in solvers changed since the archive was made: {stale}; remake it (guide)"
    assert S.summary_table(doc["records"], 1e-8)  # records the statistics accept


def test_fingerprints_follow_the_code_not_its_docstrings(tmp_path):
    """A documentation edit keeps a module's digest (so the shipped archive and resumed records stay valid); a
    change to what runs (a constant, an operator) changes it."""
    from theorycheck.problems._solvers import code_digest

    base = '"""Module doc."""\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # comment\n'
    variants = {
        "docs": '"""Other doc."""\n\n\ndef f(x):\n    """Reworded, longer\n    doc."""\n    return x + 1\n',
        "constant": base.replace("x + 1", "x + 2"),
        "operator": base.replace("x + 1", "x - 1"),
        "no docstring": "def f(x):\n    return x + 1\n",
    }
    digests = {}
    for name, text in {"base": base, **variants}.items():
        p = tmp_path / f"{name.replace(' ', '_')}.py"
        p.write_text(text)
        digests[name] = code_digest(p)
    assert digests["docs"] == digests["base"] == digests["no docstring"]
    assert len({digests["base"], digests["constant"], digests["operator"]}) == 3
