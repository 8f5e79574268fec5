"""``run_benchmark``: the cells of a benchmark, run (resumably) and written to one output folder.

Output-folder rules are those of ``theorycheck verify`` (:mod:`theorycheck._io`): the folder is
checked before any work (a folder holding files theorycheck did not write is refused unless
``force``; foreign files are never read, replaced or deleted) and carries the marker listing the
files theorycheck wrote. Unlike ``verify`` the folder is written incrementally (one file per finished
cell) so that a killed run resumes: cells whose file exists are not run again.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from tqdm.auto import tqdm

from .._dask import scheduler_executor
from .._io import prepare_output_dir
from ._harness import Cell, Recorder, cell_key
from ._registry import FAMILIES, LADDERS, get, match
from ._report import write_outputs
from ._solvers import load_solver
from ._worker import close_workers, guarded_run

__all__ = ["run_benchmark", "plan", "default_levels", "QUICK", "DEFAULT", "DEFAULT_SOLVERS"]

#: ``--quick``: these problems at ladder level 0, these solvers, 1 repeat, 1 s budget
QUICK: dict[str, Any] = {
    "problems": ["stage1-value/lsq:paper", "stage1-value/ridge:zipf", "gram/sdp:paper", "gram/factor:paper",
                 "attention-ab/block:paper", "attention-ab/identity:paper"],
    "solvers": ["closed-form", "lstsq", "cvxpy-CLARABEL", "cvxpy-SCS", "L-BFGS-B", "Newton-CG", "Nelder-Mead",
                "gd", "grid-refine"],
    "budget": 1.0,
}  # fmt: skip
#: the built-in solvers run by default (``cvxpy-HIGHS``, a QP backend for the dense stage-1 problems, is
#: registered but opt-in: HiGHS prints its banner on stdout)
DEFAULT_SOLVERS = [*QUICK["solvers"], "cvxpy-OSQP", "trust-constr", "adam"]
#: the CLI's default set (every problem, every default solver): ladder levels 0-2, budget 1 s per run.
#: The larger rungs (dense stage 1 at V1 = 257, 401; the factorization at V1 = 257) are where GD and
#: Adam spend their whole budget without new information on the ranking, so they are opt-in
#: (``--sizes all``); the structured stage-1 form (``stage1-value/block``) keeps the size range
#: of the scaling plots up to V1 = 100,001 at O(V1) cost. Budget 1 s: the first-order solvers that do
#: not converge stop at 1 s instead of 1.5 s; at levels 0-2, 2 of the runs that reached 1e-8 within
#: 1.5 s needed more than 1 s (Adam on the overlap SDP, trust-constr on the factorization).
DEFAULT: dict[str, Any] = {"levels": [0, 1, 2], "budget": 1.0}


def default_levels(family: str) -> list[int]:
    """The default set's ladder levels of ``family``: ``DEFAULT["levels"]``; every level where an
    evaluation costs O(1) in ``V1`` (the structured stage-1 form)."""
    if not getattr(FAMILIES[family][0], "dense", True):
        return list(range(len(LADDERS[family])))
    return list(DEFAULT["levels"])


def plan(problems, solvers, levels, repeats):
    """``(cells, skipped)``: every applicable (problem, size, solver, repeat); skipped with reasons.

    ``levels``: ladder levels (``None``: all; ``"default"``: :func:`default_levels`)."""
    cells, skipped = [], []
    fns = {s: load_solver(s) for s in solvers}  # unknown names fail here, before any work
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
            for s, fn in fns.items():
                ok, why = getattr(fn, "applies", lambda p: (True, ""))(problem)
                if not ok:
                    skipped.append({"problem": name, "size": problem.size, "solver": s, "reason": why})
                    continue
                cells += [Cell(name, problem.size, s, r) for r in range(repeats)]
    return cells, skipped


def _describe(cells) -> list:
    """One description (sizes, certificate, start) per (problem, size) among ``cells``."""
    info = {}
    for c in cells:
        if (c.problem, c[1]) not in info:
            d = get(c.problem, **c.size).describe()
            d["size"] = str(d["size"])
            info[(c.problem, c[1])] = d
    return list(info.values())


def _address(scheduler):
    """The scheduler's address (``None`` for a local run)."""
    if scheduler is None:
        return None
    return str(getattr(getattr(scheduler, "scheduler", None), "address", scheduler))


def _run_cells(out, command, cells, budget, max_evals, jobs, dask_ex, progress):
    """Run the cells not yet in ``out`` (on ``dask_ex`` or ``jobs`` local worker processes):
    ``(records, todo, elapsed, recorder, descriptions)``."""
    info = _describe(cells)  # certificates computed once, before the workers are forked (they inherit them)
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, command)
    done = rec.done()
    keys = {c: cell_key(c, budget, max_evals) for c in cells}
    todo = [c for c in cells if keys[c] not in done]
    bar = tqdm(total=len(cells), initial=len(cells) - len(todo), desc="benchmark", unit="run", disable=not progress)
    t0 = time.perf_counter()
    local = concurrent.futures.ThreadPoolExecutor(max_workers=jobs) if dask_ex is None else None
    ex = dask_ex if dask_ex is not None else local
    assert ex is not None
    futs: dict = {}
    try:
        futs = {ex.submit(guarded_run, c, budget, max_evals): c for c in todo}
        for fut in concurrent.futures.as_completed(futs):
            rec.add_cell(keys[futs[fut]], fut.result())
            bar.update()
    finally:
        for f in futs:
            f.cancel()
        if local is not None:  # workers first: a thread waiting on one (Ctrl-C) then returns at once
            close_workers()
            local.shutdown(wait=True, cancel_futures=True)
        bar.close()
    done = rec.done()
    return [done[keys[c]] for c in cells if keys[c] in done], todo, time.perf_counter() - t0, rec, info


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
    command: str = "theorycheck benchmark",
):
    """Run every cell not already in ``out`` and write the outputs; return ``(records, summary)``.

    ``jobs``: cells at a time in local worker processes; ``scheduler``: a Dask scheduler address or
    ``distributed.Client`` (cells run on its workers; ``jobs`` is then ignored). A bad or unreachable
    scheduler fails before any cell runs.
    """
    out = prepare_output_dir(out, force=force)
    names = match(problems)  # unknown problem or solver names fail here, before any work
    solvers = list(solvers or DEFAULT_SOLVERS)
    for s in solvers:
        load_solver(s)
    with scheduler_executor(scheduler) as dask_ex:  # a bad or unreachable scheduler fails here, in seconds
        cells, skipped = plan(names, solvers, levels, repeats)
        if not cells:
            why = (
                "; ".join(sorted({f"{s['solver']}: {s['reason']}" for s in skipped})) or "no size level in the ladders"
            )
            raise ValueError(f"no (problem, size, solver) combination applies ({why})")
        records, todo, elapsed, rec, info = _run_cells(out, command, cells, budget, max_evals, jobs, dask_ex, progress)
    meta = {
        "command": command,
        "cells": len(cells),
        "run_now": len(todo),
        "resumed": len(cells) - len(todo),
        "budget_seconds": budget,
        "max_evals": max_evals,
        "jobs": jobs if scheduler is None else None,
        "scheduler": _address(scheduler),
        "elapsed": elapsed,
        "skipped": skipped,
    }
    summary = write_outputs(rec, records, info, meta)
    summary.update(meta)
    return records, summary
