"""``theorycheck benchmark``: its parser (the command: :mod:`theorycheck.cli.benchmark`).

The default set's levels and budget (``theorycheck.problems._run.DEFAULT``) are not read here: importing the
problem library loads the solvers; ``--list`` prints them and the command fills them in."""

from __future__ import annotations

from ..common import (
    add_jobs_flag,
    add_json_flag,
    add_out_flags,
    add_quiet_flag,
    add_scheduler_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.benchmark"

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
        help="comma-separated ladder levels, e.g. 0,1,2, or 'all' (default: the default set's levels, and every "
        "level of the O(1) structured stage-1 form; --list shows them)",
    )
    p.add_argument(
        "--repeats", type=int, default=1, help=f"runs per cell, 1 to {MAX_REPEATS:,}; repeat k starts at start(k)"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help=f"seconds per run, > 0 and at most {MAX_BUDGET:,.0f} (default: the default set's; --list shows it)",
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
