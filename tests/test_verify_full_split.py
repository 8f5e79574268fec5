"""``benchmarks/verify_full.py``: a check's seeds split over processes and assembled through the claim's own
``check`` give the row a direct run gives (every field but the timing), and the summary states each rule's power."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import proofs_numeric
from proofs_numeric._empirical import k_of_n_power
from theorycheck.report.runner import ReportRow, execute

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "theorycheck_benchmarks_verify_full", ROOT / "benchmarks" / "verify_full.py"
)
vf = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("theorycheck_benchmarks_verify_full", vf)
_spec.loader.exec_module(vf)

CLAIM = "train.stage2-same-topic-attention"  # seven seeds of a small exact run: about a second


def test_split_seeds_assemble_to_the_direct_row_and_summarise(tmp_path):
    claim = next(c for c in proofs_numeric.CLAIMS if c.id == CLAIM)
    params = claim.full_params[0]
    n = len(params["seeds"])
    vf.run_seeds(CLAIM, str(tmp_path / "seeds"), 0, 3)
    vf.run_seeds(CLAIM, str(tmp_path / "seeds"), 3, n)
    out, log = tmp_path / "asm.json", tmp_path / "cpu.jsonl"
    vf.assemble(CLAIM, str(tmp_path / "seeds"), str(out), str(log))
    got = json.loads(out.read_text())["claims"][0]
    assert len(got["details"].pop("cpu_seconds_per_seed")) == n
    res, secs, err = execute(claim, params)
    want = ReportRow(claim, res, secs, err, "full").to_json()
    for key in set(want) - {"seconds"}:
        assert json.dumps(got[key], sort_keys=True) == json.dumps(want[key], sort_keys=True), key
    summary = vf.summarize([str(out)], [str(log)], None, tmp_path / "verify_full.json")
    (entry,) = summary["full_checks"]
    assert entry["claim"] == CLAIM and entry["passed"] == want["passed"] and entry["seeds"] == list(params["seeds"])
    assert entry["rule"] == f"all {n} seeds pass"
    assert entry["power_at_30pct_seed_failure"] == round(k_of_n_power(n, n), 4) == round(1 - 0.7**n, 4)
    assert entry["cpu_seconds"] is not None and summary["totals_by_tier"]["full"]["checks"] == 1
