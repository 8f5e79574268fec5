"""The benchopt benchmark (benchmarks/benchopt) records the same objective values as theorycheck (issue #23), its
README's command works as written and writes nothing into the source tree, and ``benchopt test`` passes (#35).

Skipped without benchopt (optional extra ``theorycheck[benchopt]``).
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("benchopt")
results = pytest.importorskip("benchopt.results")

from theorycheck import problems  # noqa: E402
from theorycheck.problems._harness import Cell, run_cell  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "benchopt"
NAME = "attention-ab/block:paper"


def _env():
    bindir = str(Path(sys.executable).parent)  # benchopt test runs `python -m pytest` from PATH
    return {**os.environ, "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}  # fmt: skip


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "__pycache__" not in p.parts}


def _readme_command(tmp_path) -> list[str]:
    """The README's `benchopt run` command, as written, with its output file moved into ``tmp_path``."""
    text = (BENCH / "README.md").read_text()
    block = text.split("```")[1]
    line = " ".join(block.strip().splitlines()[0:2]).replace("\\", " ")
    argv = shlex.split(line)
    assert argv[:2] == ["benchopt", "run"] and "--output" in argv
    argv[argv.index("--output") + 1] = str(tmp_path / "out.parquet")
    return [sys.executable, "-m", "benchopt", *argv[1:], "--no-display", "-n", "30", "--timeout", "60"]


def test_benchopt_records_our_objective_values_and_leaves_the_source_tree_alone(tmp_path):
    before = _tree(BENCH)
    proc = subprocess.run(_readme_command(tmp_path), env=_env(), capture_output=True, text=True, timeout=600,
                          cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _tree(BENCH) == before  # no outputs/ or cache written into the benchmark folder
    df = results.read_results(tmp_path / "out.parquet")
    p = problems.get(NAME, level=0)
    assert len(df) >= 3
    for _, row in df.iterrows():
        x = np.array([row["objective_alpha"], row["objective_beta"]])
        # the same iterate, evaluated by theorycheck: bit-identical value and exact suboptimality
        assert row["objective_value"] == p.f(x)
        assert row["objective_suboptimality"] == p.f(x) - p.f_star
        assert row["objective_certificate_gap"] == p.certificate.gap
    final = df.sort_values("stop_val").iloc[-1]
    ours = run_cell(Cell(NAME, p.size, "L-BFGS-B", 0), 60.0, 10**6)
    # the same deterministic solver from the same start: the same final value
    assert abs(final["objective_value"] - ours["f"]) <= 1e-14
    assert final["objective_suboptimality"] <= 1e-8


def test_benchopt_test_passes_on_our_benchmark():
    before = _tree(BENCH)
    proc = subprocess.run([sys.executable, "-m", "benchopt", "test", str(BENCH), "--skip-install", "-p",
                           "no:cacheprovider"], env=_env(), capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
    assert _tree(BENCH) == before
