"""The benchopt benchmark (benchmarks/benchopt) records the same objective values as theorycheck (issue #23).

Skipped without benchopt (optional extra ``theorycheck[benchopt]``).
"""

import os
import shutil
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
NAME = "attention-ab/block:paper"


def test_benchopt_records_our_objective_values(tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(ROOT / "benchmarks" / "benchopt", bench)  # benchopt writes outputs/ and a cache into it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    cmd = [sys.executable, "-m", "benchopt", "run", str(bench), "-d", f"theorycheck[problem='{NAME}',level=0]",
           "-s", "theorycheck[method=L-BFGS-B]", "--no-plot", "--no-html", "--no-display", "-n", "30",
           "--timeout", "60"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (parquet,) = sorted((bench / "outputs").glob("*.parquet"))
    df = results.read_results(parquet)
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
