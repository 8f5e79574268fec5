"""``theorycheck bench``: its parser (the command: :mod:`theorycheck.cli.bench`)."""

from __future__ import annotations

from ..common import add_force_flag

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.bench"


DESCRIPTION = "run side-by-side ratio benchmarks (benchmarks/bench_*.py of a source tree; see also 'benchmark')"


def add_parser(sub):
    p = sub.add_parser("bench", help=DESCRIPTION, description=DESCRIPTION)
    p.add_argument("names", nargs="*", help="benchmark names (e.g. stage1 attention); default: all")
    p.add_argument("--list", action="store_true", help="list benchmark names and exit")
    p.add_argument(
        "--dir", default=None, help="benchmark folder, e.g. an unpacked sdist's benchmarks/ (default: the source's)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for the JSON results, new, empty or theorycheck's (default: the benchmark folder's results/)",
    )
    add_force_flag(p)
    p.add_argument("--extra", default="", help="extra arguments passed to each script, e.g. --extra=--quick")
    return p
