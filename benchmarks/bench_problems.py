"""Harness overhead of ``theorycheck benchmark``: the sealed oracle's cost per evaluation (goal <= 5%).

Measured in one run, interleaved rounds (a shared machine's drift hits every variant alike):

- ``own_ns``: the oracle's own work per evaluation (counting, the budget check, the geometric thinning of
  kept points with their copies), on a zero-cost problem of the same shape: the oracle's loop minus the bare
  loop, per call, minimum over rounds (free of load noise);
- ``grad_us``: a real gradient's cost (median over rounds) on each problem: the cheapest in the default set
  (the structured stage-1 block form, O(1)), a 2-d attention landscape and the larger dense rungs;
- ``own / grad``: **the ratio the goal refers to** (harness overhead per evaluation over the gradient);
- ``cell``: the whole in-process run of a cell (warm-up, oracle, the after-run evaluation of the kept points)
  over the bare cost of its ``k`` gradients, minus 1;
- ``sealed``: the same cell through a sealed run process (:mod:`theorycheck.problems._zygote`: a fork per run,
  the outcome sent back, what ``theorycheck benchmark`` does) over the bare cost, minus 1.

Run: ``python benchmarks/bench_problems.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from _common import print_table, write_json

from theorycheck import problems
from theorycheck.problems._execute import evaluate, execute
from theorycheck.problems._harness import Cell, run_cell
from theorycheck.problems._oracle import Meter, make_oracle
from theorycheck.problems._zygote import close_workers, guarded_run

K = 2000
ROUNDS = 7
NOOP = Path(__file__).with_name("_noop_solver.py")


class _Null:
    """A problem of the same shape whose evaluations cost nothing: isolates the oracle's own work."""

    def __init__(self, p):
        self.shape, self.n, self.hvp, self._g = p.shape, p.n, None, np.zeros(p.shape)
        self.name, self.family, self.model, self.size, self.tm = p.name, p.family, p.model, p.size, p.tm
        self.constraint = None

    def f(self, x):
        return 0.0

    def grad(self, x):
        return self._g

    def start(self, seed=0):
        return np.zeros(self.shape)

    def violation(self, x):
        return 0.0


def _oracle_loop(p, x, k):
    o = make_oracle(p, Meter(3600.0, 10**12, p.n), x)
    g = o.grad
    t = time.perf_counter()
    for _ in range(k):
        g(x)
    return time.perf_counter() - t


def _bare_loop(p, x, k):
    g = p.grad
    t = time.perf_counter()
    for _ in range(k):
        g(x)
    return time.perf_counter() - t


def _noop(problem, budget, callback):
    x = problem.x0
    for _ in range(K_CELL):
        problem.grad(x)
    return x


K_CELL = 40


def main():
    NOOP.write_text(
        "K = 40\n\ndef noop(problem, budget, callback):\n    x = problem.x0\n    for _ in range(K):\n"
        "        problem.grad(x)\n    return x\n"
    )
    cases = [
        ("stage1-value/block:paper", dict(T=1000, v=100, tau=3)),
        ("attention-ab/block:paper", dict(T=3, v=4, tau=2)),
        ("stage1-value/lsq:paper", dict(T=12, v=50, tau=3)),
        ("gram/factor:paper", dict(T=10, v=40, tau=3)),
    ]
    rows = []
    try:
        for name, size in cases:
            p = problems.get(name, **size)
            x = p.x0
            p.certificate  # noqa: B018  (computed once, outside the timings)
            null = _Null(p)
            k = K if p.n < 10 else 40
            bare, own, cell, sealed = [], [], [], []
            for _ in range(ROUNDS):  # interleaved: load drift hits every variant alike
                bare.append(_bare_loop(p, x, k) / k)
                own.append((_oracle_loop(null, x, 20 * K) - _bare_loop(null, x, 20 * K)) / (20 * K))
                t = time.perf_counter()
                raw = execute(p, _noop, x, 3600.0, 10**9)
                evaluate(p, raw, 3600.0)
                cell.append((time.perf_counter() - t) / K_CELL)
                t = time.perf_counter()
                ans = guarded_run(Cell(name, size, f"{NOOP}:noop", 0), 3600.0, 10**9)
                sealed.append((time.perf_counter() - t) / K_CELL)
                assert ans[0] == "done", ans
            g = float(np.median(bare))
            o = float(np.min(own))
            rows.append([name, p.n, g * 1e6, o * 1e9, o / g, float(np.median(cell)) / g - 1,
                         float(np.median(sealed)) / g - 1])  # fmt: skip
            run_cell(Cell(name, size, "L-BFGS-B", 0), 1.0, 10**6)  # the ordinary path still runs
    finally:
        close_workers()
        NOOP.unlink(missing_ok=True)
    headers = ["problem", "n", "grad_us", "own_ns", "own / grad", "cell", "sealed"]
    print_table(headers, rows)
    path = write_json("problems_harness", {"headers": headers, "rows": rows, "k_evals": K, "rounds": ROUNDS,
                                           "goal": 0.05, "statistic": "own: min over interleaved rounds; "
                                           "grad, cell, sealed: median"})  # fmt: skip
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
