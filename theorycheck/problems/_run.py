"""``run_benchmark``: the cells of a benchmark, run (resumably) and written to one output folder.

Output-folder rules are those of ``theorycheck verify`` (:mod:`theorycheck._io`): the folder is
checked before any work (a folder holding files theorycheck did not write is refused unless
``force``; foreign files are never read, replaced or deleted) and carries the marker listing the
files theorycheck wrote. Unlike ``verify`` the folder is written incrementally (one file per finished
cell) so that a killed run resumes: a cell whose record exists *under the same key* is not run again. The
key (:func:`~._harness.cell_key`) holds the solver's code fingerprint and the problem's full specification,
so a changed solver or problem is rerun; ``rerun`` forces the named solvers' cells. The summary lists what
was resumed.

This process (the *coordinator*) plans the cells, computes each problem's certificate once, and turns the
runs' outcomes into records; the runs themselves happen in sealed processes (:mod:`._zygote`), locally or
as tasks on a Dask cluster. It never imports a user's solver module (:func:`~._solvers.check_solver`).
"""

from __future__ import annotations

import concurrent.futures
import fnmatch
import math
import os
import platform
import time
from datetime import UTC, datetime
from typing import Any

from tqdm.auto import tqdm

from .._dask import scheduler_executor
from .._io import prepare_output_dir
from .._version import __version__
from ._archive import load_archive, rescale, write_archive
from ._execute import hard_limit
from ._harness import (
    Cell,
    Recorder,
    cell_key,
    failure_record,
    finish_record,
    header,
    not_applicable_record,
    problem_fingerprint,
)
from ._oracle import ProblemInfo
from ._registry import FAMILIES, LADDERS, get, match
from ._report import size_text, write_outputs
from ._solvers import SOLVERS, check_solver, display_name, solver_fingerprint
from ._zygote import close_workers, guarded_run

__all__ = ["run_benchmark", "plan", "default_levels", "QUICK", "DEFAULT", "DEFAULT_SOLVERS", "to_record",
           "display_names", "reference_workload", "REFERENCE"]  # fmt: skip

#: ``--quick``: these problems at ladder level 0, these solvers, 1 repeat, 1 s budget
QUICK: dict[str, Any] = {
    "problems": ["stage1-value/lsq:paper", "stage1-value/ridge:zipf", "gram/sdp:paper", "gram/factor:paper",
                 "attention-ab/block:paper", "attention-ab/identity:paper"],
    "solvers": ["closed-form", "lstsq", "cvxpy-CLARABEL", "cvxpy-SCS", "L-BFGS-B", "Newton-CG", "Nelder-Mead",
                "gd", "grid-refine"],
    "budget": 1.0,
}  # fmt: skip
#: the built-in solvers run by default (``cvxpy-HIGHS``, a QP backend for the dense stage-1 problems, is
#: registered but opt-in)
DEFAULT_SOLVERS = [*QUICK["solvers"], "cvxpy-OSQP", "trust-constr", "adam"]
#: the CLI's default set (every problem, every default solver): ladder levels 0-2, budget 1 s per run.
#: The larger rungs (dense stage 1 at V1 = 257, 401; the factorization at V1 = 257) are opt-in
#: (``--sizes all``); the structured stage-1 form (``stage1-value/block``) keeps the size range of the
#: scaling plots up to V1 = 100,001 at O(1) cost per evaluation.
DEFAULT: dict[str, Any] = {"levels": [0, 1, 2], "budget": 1.0}


def default_levels(family: str) -> list[int]:
    """The default set's ladder levels of ``family``: ``DEFAULT["levels"]``; every level where an
    evaluation costs O(1) in ``V1`` (the structured stage-1 form)."""
    if not getattr(FAMILIES[family][0], "dense", True):
        return list(range(len(LADDERS[family])))
    return list(DEFAULT["levels"])


def plan(problems, solvers, levels, repeats):
    """``(cells, declined)``: every (problem, size, solver, repeat); ``declined`` maps the cells a built-in
    solver does not apply to (its ``applies``) to the reason. A user's solver decides in its run process.

    ``levels``: ladder levels (``None``: all; ``"default"``: :func:`default_levels`)."""
    cells, declined = [], {}
    for s in solvers:
        check_solver(s)  # unknown names fail here, before any work; nothing of a user's is imported
    for name in problems:
        fam = name.split(":", 1)[0]
        if levels == "default":
            fam_levels = default_levels(fam)
        else:
            fam_levels = list(levels) if levels is not None else list(range(len(LADDERS[fam])))
        for level in fam_levels:
            if level >= len(LADDERS[fam]):
                continue
            problem = get(name, level=level)  # sizes beyond the memory guard fail here
            info = ProblemInfo.of(problem)
            for s in solvers:
                why = ""
                if s in SOLVERS:
                    ok, why = SOLVERS[s].applies(info)
                    why = "" if ok else why
                for r in range(repeats):
                    c = Cell(name, problem.size, s, r)
                    cells.append(c)
                    if why:
                        declined[c] = why
    return cells, declined


def display_names(solvers) -> dict[str, str]:
    """A short name per solver for tables and legends (a file solver: its function name, with the file's
    name added where two would read the same)."""
    names = {s: display_name(s) for s in solvers}
    for s, n in names.items():
        if list(names.values()).count(n) > 1 and s not in SOLVERS:
            names[s] = f"{n} ({os.path.basename(s.rpartition(':')[0])})"
    return names


def _address(scheduler):
    """The scheduler's address (``None`` for a local run)."""
    if scheduler is None:
        return None
    return str(getattr(getattr(scheduler, "scheduler", None), "address", scheduler))


def to_record(head: dict, problem, answer) -> dict:
    """A cell's record from its run's answer (:func:`~._zygote.guarded_run`) and its header."""
    kind = answer[0]
    if kind == "record":
        return {**answer[1], **{k: head[k] for k in ("solver_name", "budget_seconds", "max_evals")}}
    if kind == "done":
        out = dict(answer[1], output=answer[2])
        return finish_record(head, out, problem)
    if kind == "not applicable":
        return not_applicable_record(head, answer[1])
    if kind == "error":
        return failure_record(head, "error", answer[1])
    if kind == "killed":
        _, phase, wall, output = answer
        budget = head["budget_seconds"]
        if phase == "run":
            msg = f"no answer after {wall:.3g} s (budget {budget:g} s, hard limit {hard_limit(budget):.3g} s); killed"
            return failure_record(head, "killed", msg, wall, output=output)
        what = "setting up the solver" if phase == "setup" else "evaluating the run's outcome"
        return failure_record(head, "error", f"{what} did not finish in time; killed", math.nan, output=output)
    _, how, phase, wall, output = answer
    when = {"setup": "before its clock started", "run": "during the run", "after": "after the run"}.get(phase, phase)
    return failure_record(head, "error", f"the run's process ended {when} ({how})", wall, output=output)


def _machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "theorycheck": __version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


#: the reference workload: gradients of this problem (a dense numpy workload like the benchmark's own)
REFERENCE = ("stage1-value/lsq:paper", {"T": 6, "v": 16, "tau": 3}, 20)


def reference_workload(rounds: int = 5) -> dict:
    """Seconds for a fixed workload on this machine, now (median of ``rounds``): ``REFERENCE[2]`` gradients
    of ``REFERENCE[0]`` at ``REFERENCE[1]``. Benchmark times divided by it compare across machines (the
    archive's runs are rescaled by the ratio of the two machines' reference seconds)."""
    name, size, k = REFERENCE
    p = get(name, **size)
    x = p.start(1)
    p.grad(x)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(k):
            p.grad(x)
        times.append(time.perf_counter() - t)
    times.sort()
    return {"seconds": times[len(times) // 2], "what": f"{k} gradients of {name} at {size_text(size)}"}


def _with_archive(records, doc, reference_seconds, budget, source):
    """The run's records plus the archive's on the same instances; the comparison's description."""
    ours = {(r["problem"], r["size"], r["repeat"]) for r in records}
    theirs = [r for r in rescale(doc, reference_seconds) if (r["problem"], r["size"], r["repeat"]) in ours]
    scale = theirs[0]["archive_scale"] if theirs else math.nan
    archived = doc.get("solvers") or {}
    changed = sorted(s for s, fp in archived.items() if s in SOLVERS and fp != solver_fingerprint(s))
    info = {
        "file": "shipped" if source is True else str(source),
        "theorycheck": doc.get("theorycheck"),
        "machine": doc.get("machine"),
        "reference": doc.get("reference"),
        "time_scale": scale,
        "records": len(theirs),
        "budget_seconds": doc.get("budget_seconds"),
        "budget_differs": doc.get("budget_seconds") != budget,
        "changed_since": changed,
    }
    return [*records, *theirs], info


def _matches(solver: str, names: dict, patterns) -> bool:
    return any(fnmatch.fnmatchcase(solver, p) or fnmatch.fnmatchcase(names[solver], p) for p in patterns)


def _run_cells(out, command, cells, declined, budget, max_evals, jobs, dask_ex, progress, rerun):
    """Run the cells not yet in ``out`` (on ``dask_ex`` or ``jobs`` local zygotes): ``(records, info)``."""
    names = display_names(sorted({c.solver for c in cells}))
    probs: dict = {}
    for c in cells:  # each problem once, its certificate computed here (the runs never see it)
        if (c.problem, c[1]) not in probs:
            p = get(c.problem, **c.size)
            probs[(c.problem, c[1])] = (p, p.certificate, problem_fingerprint(p))
    sfp = {s: solver_fingerprint(s) for s in names}
    heads = {
        c: header(c, probs[(c.problem, c[1])][0], probs[(c.problem, c[1])][1], budget, max_evals, names[c.solver])
        for c in cells
    }
    keys = {c: cell_key(c, budget, max_evals, sfp[c.solver], probs[(c.problem, c[1])][2]) for c in cells}
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, command)
    if rerun:
        for c in cells:
            if _matches(c.solver, names, rerun):
                rec.drop_cell(keys[c])
    done = rec.done()
    todo = [c for c in cells if keys[c] not in done]
    resumed = [c for c in cells if keys[c] in done]
    bar = tqdm(total=len(cells), initial=len(resumed), desc="benchmark", unit="run", disable=not progress)
    t0 = time.perf_counter()
    local = concurrent.futures.ThreadPoolExecutor(max_workers=jobs) if dask_ex is None else None
    ex = dask_ex if dask_ex is not None else local
    assert ex is not None
    futs: dict = {}
    try:
        for c in todo:
            if c in declined:
                rec.add_cell(keys[c], not_applicable_record(heads[c], declined[c]))
                bar.update()
        futs = {ex.submit(guarded_run, c, budget, max_evals): c for c in todo if c not in declined}
        for fut in concurrent.futures.as_completed(futs):
            c = futs[fut]
            rec.add_cell(keys[c], to_record(heads[c], probs[(c.problem, c[1])][0], fut.result()))
            bar.update()
    finally:
        for f in futs:
            f.cancel()
        close_workers()  # finished, interrupted (Ctrl-C, SIGTERM) or failed: no process of ours outlives the benchmark
        if local is not None:
            local.shutdown(wait=True, cancel_futures=True)
        bar.close()
    done = rec.done()
    records = [done[keys[c]] for c in cells if keys[c] in done]
    info = {
        "elapsed": time.perf_counter() - t0,
        "run_now": len(todo),
        "resumed": len(resumed),
        "resumed_cells": [
            {"problem": c.problem, "size": c.size, "solver": c.solver, "repeat": c.repeat} for c in resumed
        ],  # fmt: skip
        "recorder": rec,
        "problems": [_describe(p, cert) for p, cert, _ in probs.values()],
        "solvers": [{"solver": s, "name": n, "fingerprint": sfp[s]} for s, n in names.items()],
    }
    return records, info


def _describe(problem, cert) -> dict:
    d = problem.describe()
    d["size"] = str(d["size"])
    return d


def run_benchmark(
    out,
    *,
    problems=None,
    solvers=None,
    levels=None,
    repeats: int = 1,
    budget: float = 1.5,
    max_evals: int = 1_000_000,
    jobs: int = 1,
    scheduler=None,
    force: bool = False,
    progress: bool = True,
    rerun=(),
    archive=None,
    compare_archive=None,
    command: str = "theorycheck benchmark",
):
    """Run every cell not already in ``out`` and write the outputs; return ``(records, summary)``.

    ``jobs``: runs at a time in local sealed processes; ``scheduler``: a Dask scheduler address or
    ``distributed.Client`` (runs are tasks on its workers; ``jobs`` is then ignored). A bad or unreachable
    scheduler fails before any cell runs. ``rerun``: glob patterns of solver names (or specs) whose cells are
    run again even if a record exists. ``archive``: also write the run's compact records to this file
    (:mod:`._archive`); ``compare_archive``: ``True`` (the shipped archive) or a file: its records on the
    instances of this run join the report as ``<solver> (archive)``, times rescaled by the two runs'
    reference workloads.
    """
    out = prepare_output_dir(out, force=force)
    if archive is not None:
        archive = prepare_output_dir(archive, kind="file", force=force, suffix=".json.gz", flag="--archive")
    doc = None
    if compare_archive:
        doc = load_archive(None if compare_archive is True else compare_archive)
    names = match(problems)  # unknown problem or solver names fail here, before any work
    solvers = list(solvers or DEFAULT_SOLVERS)
    for s in solvers:
        check_solver(s)
    rerun = [rerun] if isinstance(rerun, str) else list(rerun or ())
    with scheduler_executor(scheduler) as dask_ex:  # a bad or unreachable scheduler fails here, in seconds
        cells, declined = plan(names, solvers, levels, repeats)
        if not cells or len(declined) == len(cells):
            why = "; ".join(sorted(set(declined.values()))) or "no size level in the ladders"
            raise ValueError(f"no (problem, size, solver) combination applies ({why})")
        reference, machine = reference_workload(), _machine()  # the machine as the runs start
        records, info = _run_cells(out, command, cells, declined, budget, max_evals, jobs, dask_ex, progress, rerun)
    meta = {
        "command": command,
        "cells": len(cells),
        "run_now": info["run_now"],
        "resumed": info["resumed"],
        "budget_seconds": budget,
        "max_evals": max_evals,
        "repeats": repeats,
        "jobs": jobs if scheduler is None else None,
        "scheduler": _address(scheduler),
        "elapsed": info["elapsed"],
        "not_applicable": sum(r["status"] == "not applicable" for r in records),
        "machine": machine,
        "reference": reference,
    }
    return _finish(records, info, meta, doc, compare_archive, archive)


def _finish(records, info: dict, meta: dict, doc, compare_archive, archive):
    """Write the archive and the report; ``(records, summary)``."""
    extra = {"resumed_cells": info["resumed_cells"], "solvers": info["solvers"]}
    shown = records
    if doc is not None:
        shown, meta["archive"] = _with_archive(
            records, doc, meta["reference"]["seconds"], meta["budget_seconds"], compare_archive
        )
        extra["solvers"] = extra["solvers"] + [
            {"solver": s, "name": n, "fingerprint": "archive"}
            for s, n in sorted({(r["solver"], r["solver_name"]) for r in shown if r["solver"].startswith("archive:")})
        ]
    if archive is not None:
        write_archive(archive, records, {**meta, "solvers": info["solvers"]})
        meta["archive_written"] = str(archive)
    summary = write_outputs(info["recorder"], shown, info["problems"], meta, extra)
    summary.update(meta)
    summary.update(extra)
    return records, summary
