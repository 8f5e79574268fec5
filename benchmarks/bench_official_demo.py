"""Reproduction of the released demo (SPEC §5.1): best dev cross-entropy of the preset
``official-demo`` against the official code's 3.3954 and the N -> inf Bayes CE 3.149.

Slow (3000 Adam steps plus 13 evaluations of 10,000 dev documents; the run time is in its output), hence a
benchmark-style script, not a test or a claim. Run: ``python benchmarks/bench_official_demo.py``.
"""

from __future__ import annotations

import tempfile
import time

from _common import print_table, write_json

from theorycheck.nn import load_metrics, run_preset

OFFICIAL_BEST_DEV_CE = 3.3954
BAYES_CE_N_INF = 3.149


def main():
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = run_preset("official-demo", tmp, progress=True)
        seconds = time.perf_counter() - t0
        recs = load_metrics(tmp)
    devs = [(r["step"], r["dev_loss"]) for r in recs if r.get("dev_loss") is not None]
    best_step, best = min(devs, key=lambda x: x[1])
    rel = (best - OFFICIAL_BEST_DEV_CE) / OFFICIAL_BEST_DEV_CE
    rows = [[best, best_step, OFFICIAL_BEST_DEV_CE, rel, BAYES_CE_N_INF, seconds]]
    headers = ["best_dev_CE", "at_step", "official", "rel_diff", "bayes_N_inf", "seconds"]
    print_table(headers, rows)
    path = write_json("official_demo", {"headers": headers, "rows": rows, "dev_curve": devs, "summary": summary})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
