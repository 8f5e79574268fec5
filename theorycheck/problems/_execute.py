r"""One run of one solver on one problem: the solver under the clock, then its outcome evaluated outside it.

:func:`execute` gives the solver a sealed :class:`~._oracle.Oracle` (never the problem), a
:class:`~._oracle.Budget` and a callback, starts the clock, and collects what happened: how the solver
ended, its answer, the oracle's counts and kept points. :func:`evaluate` then (clock stopped) classifies
the run and evaluates ``f`` at its answer, at its start and at the kept points. Both run in the process that
owns the problem (a run process of :mod:`._zygote` in ``theorycheck benchmark``; the caller's process in
:func:`~._harness.run_cell`).

**The answer** is what the solver returns; for a generator solver its return value, else its last yielded
iterate; for a solver stopped by the budget (the oracle raised :class:`~._oracle.BudgetExhausted`, or the
harness stopped a generator) its last iterate reported to ``callback`` or yielded. A callback is a progress
signal and nothing else: no time or evaluation count is ever credited from a callback argument.

**Statuses** (:data:`STATUSES`):

- ``ok``: a finite answer of the right shape within the budget;
- ``budget``: stopped by the budget, whoever noticed it (the oracle refused an evaluation, the harness
  stopped a generator, or the solver returned after ``max_seconds`` but within the grace
  :func:`grace` ``= 0.1 budget + 0.05 s``, or after its last allowed evaluation);
- ``over budget``: answered after ``budget + grace``: the answer is recorded but earns no credit;
- ``killed``: no answer at the hard limit :func:`hard_limit` ``= 1.5 budget + 1 s`` (the run's processes are
  killed; :mod:`._zygote`);
- ``error`` (raised, returned a non-array, or its process died), ``nan`` (non-finite answer),
  ``wrong-shape``, ``not applicable`` (the solver's ``applies(info)`` said no; never run).

Only ``ok`` and ``budget`` runs with an answer are *credited* (:data:`CREDITED`).
"""

from __future__ import annotations

import inspect
import math
import time

import numpy as np

from ._oracle import Budget, BudgetExhausted, Meter, make_oracle

__all__ = ["execute", "evaluate", "STATUSES", "FAILURES", "CREDITED", "grace", "hard_limit", "Reporter"]

STATUSES = ("ok", "budget", "over budget", "killed", "error", "nan", "wrong-shape", "not applicable")
#: statuses that count as failures of the solver (``not applicable`` is not one: the solver declined)
FAILURES = ("over budget", "killed", "error", "nan", "wrong-shape")
#: statuses whose answer can earn credit
CREDITED = ("ok", "budget")
GRACE_FRACTION, GRACE_SECONDS = 0.1, 0.05
HARD_FACTOR, HARD_SLACK = 1.5, 1.0


def grace(budget_seconds: float) -> float:
    """Seconds after ``max_seconds`` within which an answer still counts as stopped by the budget."""
    return GRACE_FRACTION * budget_seconds + GRACE_SECONDS


def hard_limit(budget_seconds: float) -> float:
    """Seconds after the clock started at which a run with no answer is killed."""
    return HARD_FACTOR * budget_seconds + HARD_SLACK


class Reporter:
    """The callback given to a solver: keeps a copy of the last reported iterate (a progress signal)."""

    __slots__ = ("last", "count")

    def __init__(self):
        self.last, self.count = None, 0

    def __call__(self, x, *args, **kwargs):
        self.count += 1
        try:
            self.last = np.array(x, dtype=float, copy=True)
        except (TypeError, ValueError):
            self.last = x  # kept as given: classified when it becomes the answer


def _consume(gen, budget: Budget, reporter: Reporter):
    """Drive a generator solver: ``(answer, stopped)``; each yielded iterate goes to ``reporter``; stopped
    (and the generator closed) once the budget is spent."""
    try:
        while True:
            x = next(gen)
            reporter(x)
            if budget.expired():
                gen.close()
                return reporter.last, True
    except StopIteration as stop:
        return (stop.value if stop.value is not None else reporter.last), False


def execute(problem, solver, x0, budget_seconds: float, max_evals: int, on_start=None, on_stop=None) -> dict:
    """Run ``solver(oracle, budget, callback)`` on ``problem`` under the clock; the raw outcome (a dict).

    ``on_start()`` is called just before the clock starts and ``on_stop()`` just after the solver ends
    (:mod:`._zygote` reports both to the process that enforces the deadline).
    """
    meter = Meter(budget_seconds, max_evals, problem.n)
    oracle = make_oracle(problem, meter, x0)
    reporter = Reporter()
    if on_start is not None:
        on_start()
    meter.start()
    budget = Budget(float(budget_seconds), int(max_evals), t0=meter.t0, _meter=meter)
    ended, message, answer, source = "returned", "", None, "returned"
    try:
        x = solver(oracle, budget, reporter)
        if inspect.isgenerator(x):
            x, stopped = _consume(x, budget, reporter)
            ended, source = ("stopped", "yielded") if stopped else ("returned", "returned")
        answer = x
    except BudgetExhausted as exc:
        ended, message, answer, source = "exhausted", str(exc), reporter.last, "reported"
    except (Exception, SystemExit) as exc:  # a solver's failure is recorded, never fatal
        ended, message = "error", f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - meter.t0
    if on_stop is not None:
        on_stop()
    return {
        "ended": ended,
        "message": message,
        "wall": wall,
        "answer": answer,
        "answer_source": source if answer is not None else None,
        "nf": meter.nf,
        "ng": meter.ng,
        "nh": meter.nh,
        "evals": meter.k,
        "exhausted": meter.stop,
        "points": meter.points,
        "callbacks": reporter.count,
        "x0": np.array(x0, dtype=float, copy=True),
    }


def _finite_float(fn, *args) -> float:
    """``float(fn(*args))``, NaN if it raises or is not finite."""
    try:
        v = float(fn(*args))
    except Exception:  # a point the problem refuses (e.g. outside its domain) gives no value
        return math.nan
    return v if math.isfinite(v) else math.nan


def _classify(raw: dict, shape, budget_seconds: float) -> tuple[str, str, np.ndarray | None]:
    """``(status, message, answer)`` of a raw outcome (see the module docstring)."""
    if raw["ended"] == "error":
        return "error", raw["message"], None
    x = raw["answer"]
    if x is None:
        why = "no iterate reported or yielded before the budget ran out" if raw["ended"] != "returned" else ""
        if raw["ended"] == "returned":
            return "error", "returned None", None
        return "budget", f"{raw['message'] or 'stopped by the budget'}; {why}", None
    try:
        x = np.array(x, dtype=float, copy=True)
    except (TypeError, ValueError) as exc:
        return "error", f"returned a non-array ({type(raw['answer']).__name__}): {exc}", None
    if x.shape != tuple(shape):
        return "wrong-shape", f"answer of shape {x.shape}, expected {tuple(shape)}", None
    if not np.all(np.isfinite(x)):
        return "nan", "answer has non-finite values", None
    wall = raw["wall"]
    if raw["ended"] in ("exhausted", "stopped"):
        return "budget", raw["message"] or "stopped by the harness at the budget", x
    if wall > budget_seconds + grace(budget_seconds):
        late = f"answered after {wall:.3g} s: budget {budget_seconds:g} s + grace {grace(budget_seconds):.3g} s"
        return "over budget", late, x
    if wall > budget_seconds or raw["exhausted"]:
        return "budget", "returned at the budget" if wall > budget_seconds else "returned after its last evaluation", x
    return "ok", "", x


def evaluate(problem, raw: dict, budget_seconds: float) -> dict:
    """The run's outcome, evaluated outside the clock: status, answer, ``f`` there, at the start and at the
    oracle's kept points (those evaluated within the budget)."""
    status, message, x = _classify(raw, problem.shape, budget_seconds)
    f = viol = math.nan
    if x is not None:
        f = _finite_float(problem.f, x)
        viol = _finite_float(problem.violation, x)
        if math.isnan(f):
            status, message, x = "nan", "f is not finite at the answer (or the problem refused it)", None
    trace = []
    for k, t, kind, value, xi in raw["points"]:
        if t > budget_seconds:  # evaluated after the budget (within one thinning stride): never credited
            continue
        fi = float(value) if value is not None and math.isfinite(float(value)) else _finite_float(problem.f, xi)
        if math.isnan(fi):
            continue
        trace.append({"t": t, "evals": k, "kind": kind, "f": fi, "violation": _finite_float(problem.violation, xi)})
    return {
        "status": status,
        "message": message[:500],
        "wall": raw["wall"],
        "nfev": raw["nf"],
        "ngev": raw["ng"],
        "nhev": raw["nh"],
        "evals": raw["evals"],
        "callbacks": raw["callbacks"],
        "answer": x,
        "answer_source": raw["answer_source"] if x is not None else None,
        "f": f,
        "violation": viol,
        "f0": _finite_float(problem.f, raw["x0"]),
        "trace": trace,
    }
