"""``theorycheck benchmark``: run solvers on the certified problem library (:mod:`theorycheck.problems`).

``add_parser(subparsers)`` registers the subcommand; ``run(args) -> int`` executes it (exit 0; a
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
    add_jobs_flag,
    add_json_flag,
    add_out_flags,
    add_quiet_flag,
    add_scheduler_flag,
    json_path,
    write_json_summary,
)

__all__ = ["DESCRIPTION", "add_parser", "run"]

#: The largest ``--budget`` (seconds per run, one day) and ``--repeats``, ``--max-evals`` accepted (before any work).
MAX_BUDGET = 86_400.0
MAX_REPEATS = 1_000
MAX_EVALS = 10**12

DESCRIPTION = "Benchmark optimum solvers on certified problems (time-to-accuracy, performance profiles)."


def add_parser(subparsers):
    p = subparsers.add_parser(
        "benchmark",
        help=DESCRIPTION[0].lower() + DESCRIPTION[1:-1],
        description=DESCRIPTION + " Writes results.csv/json, figures and report.html; a rerun with the same "
        "--out resumes (finished runs are kept).",
    )
    p.add_argument("--problems", default=None, help="comma-separated globs of problem names (default: all)")
    p.add_argument(
        "--solvers",
        default=None,
        help="comma-separated solver names (built-in or entry point 'theorycheck.solvers'); default: the built-ins",
    )
    p.add_argument(
        "--solver",
        action="append",
        default=[],
        metavar="FILE.py:FUNCTION",
        help="a user solver (repeatable): solver(oracle, budget, callback) -> x; its module is imported in the run's "
        "own process, before its clock starts",
    )
    _add_archive_flags(p)
    p.add_argument(
        "--sizes",
        default=None,
        help="comma-separated ladder levels, e.g. 0,1,2, or 'all' (default: "
        + ",".join(str(k) for k in DEFAULT["levels"])
        + ", and every level of the O(1) structured stage-1 form)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help=f"runs per cell, 1 to {MAX_REPEATS:,}; repeat k starts at problem.start(k)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT["budget"],
        help=f"seconds per run, > 0 and at most {MAX_BUDGET:,.0f} (default: %(default)s)",
    )
    p.add_argument(
        "--max-evals", type=int, default=1_000_000, help="evaluations per run, 1 to 10**12 (default: %(default)s)"
    )
    add_jobs_flag(p, default=1, default_text="1, so that runs are timed one at a time")
    add_scheduler_flag(
        p, "the runs (one task per run, each in a worker process killed at its deadline; --jobs ignored)"
    )
    p.add_argument("--quick", action="store_true", help="a small set (< 1 minute on 2 cores)")
    p.add_argument("--list", action="store_true", help="list problems and solvers and exit")
    add_quiet_flag(p)
    add_out_flags(p, "theorycheck-benchmark", "output folder (a rerun resumes its finished runs)")
    add_json_flag(p, "the summary (runs, resumed, fastest solver per family)")
    return p


def _add_archive_flags(p) -> None:
    """``--archive``, ``--compare-archive`` and ``--rerun``: what is reused and what is written for reuse."""
    p.add_argument(
        "--rerun",
        action="append",
        default=[],
        metavar="SOLVER",
        help="run this solver's cells again even if --out holds their records (a name or glob; repeatable). "
        "A solver whose code changed is rerun anyway: records are keyed by a hash of its code",
    )
    p.add_argument(
        "--archive",
        default=None,
        metavar="FILE",
        help="also write the runs' compact records to FILE (.json.gz): a reference archive for --compare-archive",
    )
    p.add_argument(
        "--compare-archive",
        nargs="?",
        const=True,
        default=None,
        metavar="FILE",
        help="rank the --solver(s) against an archive's built-in solvers without rerunning them (default: the "
        "archive shipped with theorycheck); times are rescaled by a reference workload measured in both runs",
    )


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
        return 0
    check_int("--repeats", args.repeats, low=1, high=MAX_REPEATS)
    check_int("--jobs", args.jobs, low=1, high=4 * default_jobs())
    check_int("--max-evals", args.max_evals, low=1, high=MAX_EVALS)
    check_real("--budget", args.budget, low=0.0, low_open=True, high=MAX_BUDGET)  # finite: a deadline is computed
    if args.sizes is not None and not _csv(args.sizes):  # '', ' ' or ',': no level (it ran the default set)
        raise ValueError("--sizes: empty; give comma-separated ladder levels such as 0,1,2, or 'all'")
    problems, solvers, levels, budget = _csv(args.problems), _csv(args.solvers), _levels(args.sizes), args.budget
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
