"""``theorycheck embedding``: the deprecated alias of ``theorycheck solve embedding`` (same flags)."""

from __future__ import annotations

import sys

from . import solve

DESCRIPTION = "deprecated alias of 'solve embedding' (removed in the next release)"


def add_parser(sub):
    p = sub.add_parser("embedding", help=DESCRIPTION, description=DESCRIPTION)
    solve.add_solve_flags(p, "embedding")
    return p


def run(args) -> int:
    print(
        "theorycheck embedding: deprecated, use 'theorycheck solve embedding' (same flags); "
        "the alias will be removed in the next release",
        file=sys.stderr,
    )
    return solve.run(args)
