"""The benchmark harness: run solvers on problems, record every run, resume a killed run.

One *cell* is (problem, size, solver, repeat). A cell's run gets a fresh :class:`Budget`, a counting
proxy of the problem (whose ``x0`` is ``problem.start(repeat)``) and a callback that records
``(time, evaluations, x)``; after the run (outside the timed region) ``f`` is evaluated at the
recorded iterates (at most ``_KEEP`` of them, thinned geometrically) to give the convergence trace.

Status of a run: ``ok`` (returned a finite array of the right shape), ``budget`` (the budget ran out;
the last reported iterate is the answer), and the failures ``error`` (raised; the message is kept),
``nan``, ``wrong-shape``, ``overrun`` (no answer within :func:`overrun_limit` ``= 1.5 budget + 1 s``:
run in a worker process, :mod:`._worker`, the solver is killed at that limit; run in this process,
:func:`run_cell`, it is flagged when it returns). A failure never stops the run. Each finished cell
is written to ``<out>/cells/<key>.json`` at once; a rerun with the same ``--out`` skips the cells
found there.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from typing import Any

import numpy as np

from .._io import atomic_write_text, dumps_json, read_marker, write_marker
from ._registry import get
from ._solvers import Budget, BudgetExhausted, load_solver

__all__ = ["Cell", "run_cell", "cell_key", "Recorder", "TOLS", "FAILURES", "overrun_limit", "failure_record"]

TOLS = (1e-4, 1e-8)
FAILURES = ("error", "nan", "wrong-shape", "overrun")
_KEEP = 128
#: a run with no answer after ``OVERRUN_FACTOR * budget + OVERRUN_SLACK`` seconds is an overrun
OVERRUN_FACTOR, OVERRUN_SLACK = 1.5, 1.0


def overrun_limit(budget_seconds: float) -> float:
    """Seconds after which a run without an answer is an ``overrun`` (and, in a worker process, killed)."""
    return OVERRUN_FACTOR * budget_seconds + OVERRUN_SLACK


class Counted:
    """Counting proxy of a problem: ``f``, ``grad``, ``hvp`` counted and checked against the budget."""

    def __init__(self, problem, budget: Budget, x0):
        self._p, self._b, self._x0 = problem, budget, x0
        self.nf = self.ng = self.nh = 0
        self.hvp = None if problem.hvp is None else self._hvp

    def __getattr__(self, name):
        return getattr(self._p, name)

    @property
    def x0(self):
        return self._x0.copy()

    def _check(self):
        b = self._b
        if self.nf + self.ng + self.nh >= b.max_evals or b.expired():
            raise BudgetExhausted(f"budget spent ({self.nf + self.ng + self.nh} evaluations, {b.elapsed():.3g} s)")

    def f(self, x):
        self._check()
        self.nf += 1
        return self._p.f(x)

    def grad(self, x):
        self._check()
        self.ng += 1
        return self._p.grad(x)

    def _hvp(self, x, v):
        self._check()
        self.nh += 1
        return self._p.hvp(x, v)

    @property
    def evals(self) -> int:
        return self.nf + self.ng + self.nh


class Trace:
    """Keeps at most ``2 * _KEEP`` iterates (every ``stride``-th, the stride doubling) plus the last.

    Only the kept iterates are copied (a copy per call would cost a pass over ``x`` each time); the
    last one is held by reference, so a solver that updates ``x`` in place and then runs out of
    budget is credited with its current ``x``.
    """

    def __init__(self, counted: Counted, t0: float):
        self.c, self.t0 = counted, t0
        self.points: list[tuple[float, int, np.ndarray]] = []
        self.stride, self.k = 1, 0
        self.last: tuple[float, int, Any] | None = None

    def __call__(self, x):
        t, ev = time.perf_counter() - self.t0, self.c.evals
        self.last = (t, ev, x)
        if self.k % self.stride == 0:
            self.points.append((t, ev, np.array(x, dtype=float, copy=True)))
            if len(self.points) >= 2 * _KEEP:
                self.points = self.points[::2]
                self.stride *= 2
        self.k += 1


class Cell(tuple):
    """``(problem, size_items, solver, repeat)``; hashable, JSON-able."""

    def __new__(cls, problem, size, solver, repeat):
        return super().__new__(cls, (problem, tuple(sorted(dict(size).items())), solver, int(repeat)))

    def __getnewargs__(self):  # pickling (``--jobs N`` sends cells to worker processes)
        return (self[0], dict(self[1]), self[2], self[3])

    problem = property(lambda s: s[0])
    size = property(lambda s: dict(s[1]))
    solver = property(lambda s: s[2])
    repeat = property(lambda s: s[3])


def cell_key(cell: Cell, budget: float, max_evals: int) -> str:
    text = json.dumps([cell.problem, cell.size, cell.solver, cell.repeat, budget, max_evals], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _time_to(trace, tol, key):
    for row in trace:
        if row["subopt_rel"] is not None and row["subopt_rel"] <= tol and row["violation"] <= tol:
            return row[key]
    return None


def _consume(gen, budget: Budget, trace):
    """Drive a generator solver: every yielded iterate is reported to ``trace``; the answer is the
    generator's return value if it returns one, else its last iterate. Stops (and closes the
    generator) once the budget is spent."""
    x = None
    try:
        while True:
            x = next(gen)
            trace(x)
            if budget.expired():
                gen.close()
                break
    except StopIteration as stop:
        if stop.value is not None:
            x = stop.value
    return x


def _execute(solver, problem, cell, budget_seconds, max_evals, on_start=None, on_stop=None):
    """Run the solver under the clock: ``(status, message, x, wall, counted, trace)``; ``on_start()`` is
    called just before the clock starts, ``on_stop()`` just after the solver returns."""
    x0 = problem.start(cell.repeat)
    problem.f(x0), problem.grad(x0)  # warm-up (JIT compilation, caches) outside the clock, uncounted
    budget = Budget(budget_seconds, max_evals)
    counted = Counted(problem, budget, x0)
    if on_start is not None:
        on_start()
    budget.t0 = time.perf_counter()
    trace = Trace(counted, budget.t0)
    status, message, x = "ok", "", None
    try:
        x = solver(counted, budget, trace)
        if inspect.isgenerator(x):
            x = _consume(x, budget, trace)
    except BudgetExhausted as exc:
        status, message = "budget", str(exc)
    except Exception as exc:  # a solver's failure is recorded, never fatal
        status, message = "error", f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - budget.t0
    if on_stop is not None:
        on_stop()
    if status == "budget":
        x = np.array(trace.last[2], dtype=float) if trace.last is not None else x0
    return status, message, x, wall, counted, trace


def _check_answer(status, message, x, shape, wall, budget_seconds):
    """Classify the returned value: ``ok``, ``wrong-shape``, ``nan``, ``overrun`` or ``error``."""
    if status != "ok":
        return status, message, x
    try:
        x = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        return "error", f"returned a non-array: {exc}", x
    if x.shape != tuple(shape):
        return "wrong-shape", f"returned shape {x.shape}, expected {tuple(shape)}", x
    if not np.all(np.isfinite(x)):
        return "nan", "returned non-finite values", x
    if wall > overrun_limit(budget_seconds):
        return "overrun", f"returned after {wall:.3g} s, budget {budget_seconds:g} s", x
    return status, message, x


def _trace_rows(problem, cert, points):
    """``f`` at the recorded iterates (outside the clock): suboptimality and violation per point."""
    rows = []
    for t, ev, xi in points:
        xi = np.asarray(xi)
        if xi.shape != tuple(problem.shape) or not np.all(np.isfinite(xi)):
            continue
        fi = problem.f(xi)
        rel = (fi - cert.upper) / max(abs(cert.upper), 1e-300)
        rows.append(
            {"t": t, "evals": ev, "subopt_abs": fi - cert.upper, "subopt_rel": rel, "violation": problem.violation(xi)}
        )
    return rows


def _header(cell: Cell, problem, cert) -> dict:
    """The part of a cell's record known before the run (problem, size, solver, certificate)."""
    return {
        "problem": cell.problem,
        "family": problem.family,
        "model": problem.model,
        "size": json.dumps(problem.size, sort_keys=True),
        "n": problem.n,
        "V1": problem.tm.V1,
        "solver": cell.solver,
        "repeat": cell.repeat,
        "status": "",
        "message": "",
        "wall": math.nan,
        "nfev": None,
        "ngev": None,
        "nhev": None,
        "f_star": cert.upper,
        "f_star_lower": cert.lower,
        "cert_gap": cert.gap,
        "cert_kind": cert.kind,
    }


def failure_record(head: dict, status: str, message: str, wall: float) -> dict:
    """A complete record of a run that gave no answer (``head``: :func:`_header`): no ``f``, no trace."""
    rec = {**head, "status": status, "message": message[:500], "wall": wall}
    rec.update(f=math.nan, subopt_abs=math.nan, subopt_rel=math.nan, violation=math.nan, distance=math.nan)
    for tol in TOLS:
        rec[f"time_to_{tol:g}"] = rec[f"evals_to_{tol:g}"] = None
    rec["trace"] = []
    return rec


def run_cell(cell: Cell, budget_seconds: float, max_evals: int, hooks=None) -> dict:
    """Run one cell in this process and return its record (a JSON-able dict, trace included).

    ``hooks``: ``(on_start(header), on_stop())`` or ``None``; :mod:`._worker` uses them to time the
    solver from outside the process and kill it at :func:`overrun_limit`.
    """
    problem = get(cell.problem, **cell.size)
    solver = load_solver(cell.solver)
    cert = problem.certificate  # the optimum is computed before the clock starts
    rec = _header(cell, problem, cert)
    on_start, on_stop = hooks if hooks is not None else (None, None)
    status, message, x, wall, counted, trace = _execute(
        solver, problem, cell, budget_seconds, max_evals, None if on_start is None else lambda: on_start(rec), on_stop
    )
    status, message, x = _check_answer(status, message, x, problem.shape, wall, budget_seconds)
    rec.update(status=status, message=message[:500], wall=wall, nfev=counted.nf, ngev=counted.ng, nhev=counted.nh)
    points = list(trace.points)
    if trace.last is not None and (not points or points[-1][0] != trace.last[0]):
        points.append(trace.last)
    final = status in ("ok", "budget")
    if final:
        points.append((wall, counted.evals, x))
    rows = _trace_rows(problem, cert, points)
    fx = problem.f(x) if final else math.nan
    rec.update(
        f=fx,
        subopt_abs=fx - cert.upper,
        subopt_rel=(fx - cert.upper) / max(abs(cert.upper), 1e-300),
        violation=problem.violation(x) if final else math.nan,
        distance=problem.distance(x) if final else math.nan,
    )
    for tol in TOLS:
        rec[f"time_to_{tol:g}"] = _time_to(rows, tol, "t") if final else None
        rec[f"evals_to_{tol:g}"] = _time_to(rows, tol, "evals") if final else None
    rec["trace"] = rows
    return rec


class Recorder:
    """Per-cell JSON files under ``out/cells`` plus the folder's marker (kept current after each cell)."""

    def __init__(self, out, command: str):
        self.out, self.command = out, command
        (out / "cells").mkdir(parents=True, exist_ok=True)
        marker = read_marker(out)
        self.owned = set(marker["files"]) if marker else set()

    def done(self) -> dict:
        found = {}
        for path in sorted((self.out / "cells").glob("*.json")):
            if f"cells/{path.name}" not in self.owned:
                continue  # never read (or overwrite) a file theorycheck did not write
            try:
                found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
        return found

    def write(self, rel: str, text: str) -> None:
        atomic_write_text(self.out / rel, text)
        self.owned.add(rel)

    def add_cell(self, key: str, rec: dict) -> None:
        self.write(f"cells/{key}.json", dumps_json(rec))
        self.sync()

    def sync(self) -> None:
        write_marker(self.out, command=self.command, files=sorted(self.owned))
