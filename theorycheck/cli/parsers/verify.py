"""``theorycheck verify``: its parser (the command: :mod:`theorycheck.cli.verify`)."""

from __future__ import annotations

from ..common import (
    add_jobs_flag,
    add_json_flag,
    add_no_figures_flag,
    add_out_flags,
    add_quiet_flag,
    add_scheduler_flag,
    add_seed_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.verify"


#: The largest ``verify --explore N`` accepted (checked before any work): N configurations per claim.
MAX_EXPLORE = 100_000


DESCRIPTION = "run every registered claim (SPEC §6) and write the report"


def add_parser(sub):
    p = sub.add_parser("verify", help=DESCRIPTION, description=DESCRIPTION)
    add_out_flags(p, "theorycheck-report", "report folder")
    p.add_argument("--only", default=None, help="comma-separated globs/substrings of claim ids")
    p.add_argument("--list", action="store_true", help="list claim ids and exit")
    add_no_figures_flag(p)
    add_quiet_flag(p)
    p.add_argument(
        "--full", action="store_true", help="also run the long and multi-seed checks (each claim's full_params)"
    )
    add_jobs_flag(p)
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="recompute every check instead of reusing your earlier results of this version (still stored)",
    )
    add_scheduler_flag(p, "the checks")
    p.add_argument(
        "--explore",
        type=int,
        default=None,
        metavar="N",
        help="check N configurations per claim drawn from its domain; shrink a failure to a minimal counterexample "
        f"(1 to {MAX_EXPLORE:,})",
    )
    add_seed_flag(p, 0, "seed of --explore (same seed, same configurations)")
    add_json_flag(p, "the results (results.json of the report)")
    p.add_argument(
        "--claims",
        action="append",
        default=[],
        metavar="PATH",
        help="also run your claim modules: a .py file defining CLAIM or CLAIMS, or a folder of them (repeatable)",
    )
    return p
