"""Harness overhead of ``theorycheck benchmark``: a no-op solver on a >= 10 ms evaluation (goal <= 5%).

The no-op solver does nothing but ``k`` gradient evaluations and ``k`` callbacks at a fixed point;
its bare cost is ``k`` direct ``problem.grad`` calls. Two overheads are reported, in one run with
interleaved rounds (medians over rounds; a shared machine's drift hits every variant alike):

- ``own``: the harness's own work per evaluation + callback (counting proxy, budget check, the
  iterate's copy), measured on a zero-cost problem of the same shape (min over rounds: free of load
  noise), over the real evaluation's time: **the number the goal refers to**;
- ``in_clock``: the timed wall of the run (counting proxy, budget checks, iterate copies) over the
  bare cost, minus 1: what a solver's reported time carries on top of its own work;
- ``cell``: the whole ``run_cell`` (warm-up, certificate lookup, the after-run evaluation of ``f`` at
  the recorded iterates) over the bare cost, minus 1;
- ``worker``: the same cell through ``guarded_run`` (what ``theorycheck benchmark`` does: the cell sent
  to a worker process that is killed at the deadline, the record sent back) over the bare cost, minus 1.

Run: ``python benchmarks/bench_problems.py``.
"""

from __future__ import annotations

import time

import numpy as np
from _common import print_table, write_json

from theorycheck import problems
from theorycheck.problems._harness import Cell, Counted, Trace, run_cell
from theorycheck.problems._solvers import Budget
from theorycheck.problems._worker import close_workers, guarded_run

K = 40
ROUNDS = 7


def noop(problem, budget, callback):
    x = problem.x0
    for _ in range(K):
        problem.grad(x)
        callback(x)
    return x


noop.applies = lambda p: (True, "")


class _Null:
    """A problem of the same shape whose gradient costs nothing: isolates the harness's own work."""

    def __init__(self, p):
        self.shape, self.hvp, self._g = p.shape, None, np.zeros(p.shape)

    def f(self, x):
        return 0.0

    def grad(self, x):
        return self._g


def _proxy_loop(p, x, k):
    """The in-clock harness work: the counting proxy and the recording callback around ``k`` grads."""
    budget = Budget(60.0, 10**9)
    counted = Counted(p, budget, x)
    trace = Trace(counted, time.perf_counter())
    t = time.perf_counter()
    for _ in range(k):
        counted.grad(x)
        trace(x)
    return time.perf_counter() - t


def _bare_loop(p, x, k):
    t = time.perf_counter()
    for _ in range(k):
        p.grad(x)
    return time.perf_counter() - t


def main():
    rows = []
    cases = [("stage1-value/lsq:paper", dict(T=12, v=50, tau=3)), ("gram/factor:paper", dict(T=10, v=40, tau=3))]
    problems.SOLVERS["_noop"] = noop
    try:
        for name, size in cases:
            p = problems.get(name, **size)
            x = p.x0
            p.certificate  # noqa: B018  (computed once, outside the timings)
            null = _Null(p)
            bare, clock, cell, per_call, worker = [], [], [], [], []
            for _ in range(ROUNDS):  # interleaved: load drift hits every variant alike
                bare.append(_bare_loop(p, x, K))
                per_call.append((_proxy_loop(null, x, 1000) - _bare_loop(null, x, 1000)) / 1000)
                t = time.perf_counter()
                rec = run_cell(Cell(name, p.size, "_noop", 0), 60.0, 10**9)
                cell.append(time.perf_counter() - t)
                clock.append(rec["wall"])
                t = time.perf_counter()
                guarded_run(Cell(name, p.size, "_noop", 0), 60.0, 10**9)
                worker.append(time.perf_counter() - t)
            b = float(np.median(bare))
            own = float(np.min(per_call))  # the harness's own cost per evaluation + callback (no load noise)
            rows.append([name, p.n, b / K * 1e3, own * 1e6, own / (b / K)]
                        + [float(np.median(v)) / b - 1 for v in (clock, cell, worker)])  # fmt: skip
    finally:
        del problems.SOLVERS["_noop"]
        close_workers()
    headers = [
        "problem",
        "n",
        "grad_ms",
        "harness_us_per_call",
        "overhead_own",
        "overhead_in_clock",
        "overhead_cell",
        "overhead_worker",
    ]
    print_table(headers, rows)
    path = write_json("problems_harness", {"headers": headers, "rows": rows, "k_evals": K, "rounds": ROUNDS,
                                           "goal": 0.05, "statistic": "median over interleaved rounds"})  # fmt: skip
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
