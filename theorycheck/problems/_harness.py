"""Benchmark cells and their records: keys that cannot serve stale results, and the credit rule.

One *cell* is (problem, size, solver, repeat); its run starts at ``problem.start(repeat)``. The run itself
(:mod:`._execute`) happens in a process that owns the problem and never computed its optimum
(:mod:`._zygote`); this module turns its outcome into a *record*, here, where the certificate is known:

- ``f``, ``subopt_abs = f - f*``, ``subopt_rel = (f - f*) / |f*|`` (signed), ``violation``, ``distance``:
  the **answer's**, evaluated outside the clock (``f*`` is the certificate's ``upper``; a value below the
  certificate's ``lower`` is flagged ``below_lower``: below a certified optimum means a bug or an
  infeasible point);
- ``trace``: the oracle's kept evaluated points (time, evaluation count, ``f``, suboptimality, violation),
  all within the budget;
- ``time_to_<tol>`` / ``evals_to_<tol>``: :func:`credited_time`: only a credited run (``ok``/``budget``)
  whose *answer* meets the target is credited, at the first evaluated point that met it or at the answer's
  own return, whichever came first (a credited answer came within the budget, or within its grace when
  the budget stopped the run: :mod:`._execute`). Callback arguments never count.

A cell's key (:func:`cell_key`) hashes the problem's full specification (name, size, masking, package
version, the problem module's source), the solver's fingerprint (its code:
:func:`~._solvers.solver_fingerprint`), the budget and the repeat: a resumed benchmark reruns any cell whose
solver or problem changed. :func:`run_cell` runs a cell in *this* process (no process isolation: the
problem's certificate may be in memory here; use it for tests and for platforms without ``os.fork``).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys

from .._io import atomic_write_text, dumps_json, read_marker, remove_file, write_marker
from .._version import __version__
from ._execute import CREDITED, FAILURES, STATUSES, evaluate, execute
from ._oracle import ProblemInfo
from ._registry import get
from ._solvers import code_digest, display_name, load_solver
from ._stats import hitting_time

__all__ = ["Cell", "run_cell", "cell_key", "problem_fingerprint", "header", "finish_record", "failure_record",
           "credited_time", "Recorder", "TOLS", "FAILURES", "STATUSES", "CREDITED"]  # fmt: skip

TOLS = (1e-4, 1e-8)


class Cell(tuple):
    """``(problem, size_items, solver, repeat)``; hashable, JSON-able."""

    def __new__(cls, problem, size, solver, repeat):
        return super().__new__(cls, (problem, tuple(sorted(dict(size).items())), solver, int(repeat)))

    def __getnewargs__(self):  # pickling (cells go to worker processes and Dask tasks)
        return (self[0], dict(self[1]), self[2], self[3])

    problem = property(lambda s: s[0])
    size = property(lambda s: dict(s[1]))
    solver = property(lambda s: s[2])
    repeat = property(lambda s: s[3])


def problem_fingerprint(problem) -> str:
    """The problem's full specification as a hash: name, size, masking, package version, module code
    (:func:`~._solvers.code_digest`)."""
    mk = problem.mk
    spec = [problem.name, sorted(problem.size.items()), [mk.p_m, mk.p_c, mk.p_r], __version__]
    h = hashlib.sha256(json.dumps(spec, default=str).encode())
    for cls in type(problem).__mro__:
        mod = sys.modules.get(cls.__module__)
        path = getattr(mod, "__file__", None)
        if path and cls.__module__.startswith("theorycheck"):
            h.update(code_digest(path))  # the code, not its docstrings
    return h.hexdigest()[:16]


def cell_key(cell: Cell, budget: float, max_evals: int, solver_fp: str, problem_fp: str) -> str:
    """The cell's record name: changes with the problem's or the solver's code, the budget and the repeat."""
    text = json.dumps([cell.problem, cell.size, cell.solver, cell.repeat, budget, max_evals, solver_fp, problem_fp],
                      sort_keys=True)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def header(cell: Cell, problem, cert, budget: float, max_evals: int, display: str | None = None) -> dict:
    """The part of a cell's record known before the run (problem, size, solver, certificate, budget)."""
    return {
        "problem": cell.problem,
        "family": problem.family,
        "model": problem.model,
        "size": json.dumps(problem.size, sort_keys=True),
        "n": problem.n,
        "V1": problem.tm.V1,
        "solver": cell.solver,
        "solver_name": display or display_name(cell.solver),
        "repeat": cell.repeat,
        "budget_seconds": float(budget),
        "max_evals": int(max_evals),
        "f_star": cert.upper,
        "f_star_lower": cert.lower,
        "cert_gap": cert.gap,
        "cert_kind": cert.kind,
    }


def _rel(f: float, f_star: float) -> float:
    return (f - f_star) / max(abs(f_star), 1e-300)


def credited_time(rec: dict, tol: float, measure: str = "t") -> float | None:
    """Seconds (``measure="t"``) or evaluations (``"evals"``) to relative suboptimality ``tol`` by the credit
    rule (:func:`._stats.hitting_time`); ``None`` if not credited."""
    t = hitting_time(rec, tol, measure)
    return None if not math.isfinite(t) else t


def _blank(rec: dict) -> dict:
    rec.update(f=math.nan, f0=math.nan, subopt_abs=math.nan, subopt_rel=math.nan, violation=math.nan,
               distance=math.nan, credited=False, below_lower=False, answer_t=None, answer_evals=None,
               answer_source=None, trace=[])  # fmt: skip
    for tol in TOLS:
        rec[f"time_to_{tol:g}"] = rec[f"evals_to_{tol:g}"] = None
    return rec


def failure_record(head: dict, status: str, message: str, wall: float = math.nan, **counts) -> dict:
    """A complete record of a run that gave no answer (``head``: :func:`header`)."""
    rec = {**head, "status": status, "message": message[:500], "wall": wall, "nfev": None, "ngev": None,
           "nhev": None, "evals": None, "callbacks": None, "output": ""}  # fmt: skip
    rec.update(counts)
    return _blank(rec)


def finish_record(head: dict, out: dict, problem=None) -> dict:
    """The record of a run from its evaluated outcome (:func:`._execute.evaluate`) and the certificate in
    ``head``; ``problem`` (with its minimiser) gives the answer's ``distance``."""
    f_star, lower = head["f_star"], head["f_star_lower"]
    rec = failure_record(head, out["status"], out["message"], out["wall"])
    rec.update({k: out[k] for k in ("nfev", "ngev", "nhev", "evals", "callbacks")})
    rec["output"] = out.get("output", "")
    rec["f0"] = out["f0"]
    rec["trace"] = [
        {**row, "subopt_abs": row["f"] - f_star, "subopt_rel": _rel(row["f"], f_star)} for row in out["trace"]
    ]
    x = out["answer"]
    if x is None:
        return rec
    f = out["f"]
    rec.update(f=f, subopt_abs=f - f_star, subopt_rel=_rel(f, f_star), violation=out["violation"])
    rec["answer_source"] = out["answer_source"]
    rec["distance"] = problem.distance(x) if problem is not None else math.nan
    # below a certified lower bound (beyond rounding): a bug or an infeasible answer; flagged, never hidden
    rec["below_lower"] = bool(head["cert_kind"] == "certified" and f < lower - 1e-12 * max(1.0, abs(lower)))
    rec["credited"] = out["status"] in CREDITED
    if rec["credited"]:  # ok, or stopped by the budget and answered within its grace
        rec["answer_t"], rec["answer_evals"] = out["wall"], out["evals"]
    for tol in TOLS:
        rec[f"time_to_{tol:g}"] = credited_time(rec, tol, "t")
        rec[f"evals_to_{tol:g}"] = credited_time(rec, tol, "evals")
    return rec


def not_applicable_record(head: dict, reason: str) -> dict:
    return failure_record(head, "not applicable", reason, math.nan)


def run_cell(cell: Cell, budget_seconds: float, max_evals: int) -> dict:
    """Run one cell in this process and return its record (no process isolation: module docstring)."""
    problem = get(cell.problem, **cell.size)
    cert = problem.certificate  # computed before the clock starts
    head = header(cell, problem, cert, budget_seconds, max_evals)
    try:
        solver = load_solver(cell.solver)
    except ValueError as exc:
        return failure_record(head, "error", str(exc))
    ok, why = solver.applies(ProblemInfo.of(problem)) if hasattr(solver, "applies") else (True, "")
    if not ok:
        return not_applicable_record(head, why)
    prepare = getattr(solver, "prepare", None)
    if prepare is not None:
        prepare()
    x0 = problem.start(cell.repeat)
    problem.f(x0), problem.grad(x0)  # warm-up (JIT compilation, caches) outside the clock, uncounted
    raw = execute(problem, solver, x0, budget_seconds, max_evals)
    return finish_record(head, evaluate(problem, raw, budget_seconds), problem)


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

    def drop_cell(self, key: str) -> None:
        """Remove a cell record theorycheck wrote (``--rerun``)."""
        rel = f"cells/{key}.json"
        if rel in self.owned:
            remove_file(self.out / rel)
            self.owned.discard(rel)

    def sync(self) -> None:
        write_marker(self.out, command=self.command, files=sorted(self.owned))
