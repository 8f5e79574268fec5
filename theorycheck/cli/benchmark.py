"""``theorycheck benchmark``: run solvers on the certified problem library (:mod:`theorycheck.problems`).

Its parser is :mod:`theorycheck.cli.parsers.benchmark`; ``run(args) -> int`` executes it (exit 0; a
bad flag or name raises ``ValueError``, which the main CLI prints and turns into exit 2).
"""

from __future__ import annotations

import shlex

from .._validate import check_int, check_real
from ..problems._execute import FAILURES
from ..problems._registry import list_problems
from ..problems._run import DEFAULT, DEFAULT_SOLVERS, QUICK, run_benchmark
from ..problems._solvers import solver_names
from ..report.runner import default_jobs
from .common import (
    json_path,
    write_json_summary,
)
from .parsers.benchmark import MAX_BUDGET, MAX_EVALS, MAX_REPEATS

__all__ = ["run"]


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _levels(text):
    """``None`` (every level) for ``all``; ``"default"`` (``_run.default_levels``) when ``text`` is empty."""
    if not text:
        return "default"
    if text.strip() == "all":
        return None
    try:
        levels = [int(t) for t in _csv(text)]
    except ValueError:
        raise ValueError(f"--sizes must be comma-separated ladder levels such as 0,1,2, got {text!r}") from None
    if any(k < 0 for k in levels):
        raise ValueError(f"--sizes: levels are >= 0, got {text!r}")
    return levels


def run(args) -> int:
    if args.list:
        for d in list_problems():
            print(f"{d['name']:34s} sizes: {d['sizes']}")
        print("solvers:", ", ".join(solver_names()))
        print(
            f"default set: levels {','.join(map(str, DEFAULT['levels']))} (every level of the O(1) structured "
            f"stage-1 form), budget {DEFAULT['budget']:g} s per run, solvers {', '.join(DEFAULT_SOLVERS)}"
        )
        return 0
    check_int("--repeats", args.repeats, low=1, high=MAX_REPEATS)
    check_int("--jobs", args.jobs, low=1, high=4 * default_jobs())
    check_int("--max-evals", args.max_evals, low=1, high=MAX_EVALS)
    budget = DEFAULT["budget"] if args.budget is None else args.budget
    check_real("--budget", budget, low=0.0, low_open=True, high=MAX_BUDGET)  # finite: a deadline is computed
    if args.sizes is not None and not _csv(args.sizes):  # '', ' ' or ',': no level (it ran the default set)
        raise ValueError("--sizes: empty; give comma-separated ladder levels such as 0,1,2, or 'all'")
    problems, solvers, levels = _csv(args.problems), _csv(args.solvers), _levels(args.sizes)
    if args.quick:
        problems = problems or QUICK["problems"]
        solvers = solvers or list(QUICK["solvers"])
        levels = [0] if not args.sizes else levels
        budget = min(budget, QUICK["budget"])
    if args.compare_archive and not (args.solver or args.solvers):
        raise ValueError("--compare-archive ranks your solvers against the archive's: give --solver FILE.py:FUNCTION")
    if args.solver:
        default = [] if args.compare_archive else DEFAULT_SOLVERS  # the archive holds the built-ins' runs
        solvers = list(solvers if solvers is not None else default) + list(args.solver)
    json_file = json_path(args)
    command = "theorycheck " + " ".join(shlex.quote(a) for a in getattr(args, "argv", ["benchmark"]))
    records, summary = run_benchmark(
        args.out,
        problems=problems,
        solvers=solvers,
        levels=levels,
        repeats=args.repeats,
        budget=budget,
        max_evals=args.max_evals,
        jobs=args.jobs,
        scheduler=args.scheduler,
        force=args.force,
        progress=not args.quiet,
        rerun=args.rerun,
        archive=args.archive,
        compare_archive=args.compare_archive,
        command=command,
    )
    fails = sum(r["status"] in FAILURES for r in records)
    declined = sum(r["status"] == "not applicable" for r in records)
    print(
        f"{len(records)} runs ({summary['resumed']} resumed from {args.out}, {summary['run_now']} run now), "
        f"{fails} failed, {declined} not applicable; {args.out}/report.html"
    )
    for fam, best in summary["fastest"].items():
        print(f"  {fam:28s} fastest to 1e-8: " + (f"{best[0]} ({best[1]:.3g} s)" if best else "none reached it"))
    write_json_summary(json_file, {"runs": len(records), "failed": fails, **summary})
    return 0
