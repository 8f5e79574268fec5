"""Harness overhead of ``theorycheck benchmark``: a no-op solver on a >= 10 ms evaluation (goal <= 5%).

The no-op solver does nothing but ``k`` gradient evaluations and ``k`` callbacks at a fixed point;
its bare cost is ``k`` direct ``problem.grad`` calls. Two overheads are reported, in one run with
interleaved rounds (best of rounds, so a shared machine's drift hits both alike):

- ``in_clock``: the timed wall of the run (counting proxy, budget checks, iterate copies) over the
  bare cost, minus 1: what a solver's reported time carries on top of its own work;
- ``cell``: the whole ``run_cell`` (warm-up, certificate lookup, the after-run evaluation of ``f`` at
  the recorded iterates) over the bare cost, minus 1.

Run: ``python benchmarks/bench_problems.py``.
"""

from __future__ import annotations

import time

from _common import print_table, write_json

from theorycheck import problems
from theorycheck.problems._harness import Cell, run_cell

K = 40


def noop(problem, budget, callback):
    x = problem.x0
    for _ in range(K):
        problem.grad(x)
        callback(x)
    return x


noop.applies = lambda p: (True, "")


def main():
    rows = []
    for name, size in [("stage1-value/lsq:paper", dict(T=10, v=40, tau=3)), ("gram/factor:paper", dict(level=3))]:
        p = problems.get(name, **size)
        x = p.x0
        p.certificate  # noqa: B018  (computed once, outside the timings)
        problems.SOLVERS["_noop"] = noop
        try:
            best_bare = best_clock = best_cell = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(K):
                    p.grad(x)
                best_bare = min(best_bare, time.perf_counter() - t)
                t = time.perf_counter()
                rec = run_cell(Cell(name, p.size, "_noop", 0), 60.0, 10**9)
                best_cell = min(best_cell, time.perf_counter() - t)
                best_clock = min(best_clock, rec["wall"])
        finally:
            del problems.SOLVERS["_noop"]
        per_eval = best_bare / K
        rows.append([name, p.n, per_eval * 1e3, best_clock / best_bare - 1, best_cell / best_bare - 1])
    headers = ["problem", "n", "grad_ms", "overhead_in_clock", "overhead_cell"]
    print_table(headers, rows)
    path = write_json("problems_harness", {"headers": headers, "rows": rows, "k_evals": K, "goal": 0.05})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
