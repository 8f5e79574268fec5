"""``theorycheck spec``: its parser (the command: :mod:`theorycheck.cli.spec`)."""

from __future__ import annotations

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.spec"


DESCRIPTION = "print a section of the math reference SPEC.md (e.g. 'spec 4.3'); without one, list the sections"


def add_parser(sub):
    p = sub.add_parser("spec", help=DESCRIPTION, description=DESCRIPTION)
    p.add_argument(
        "section",
        nargs="?",
        default=None,
        metavar="SECTION",
        help="section number as cited, e.g. 4.3, 4.1 D3, 4.3(a) or 11; subsections are included",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="print the section's Markdown and LaTeX source (default: rendered for a terminal, formulas in Unicode)",
    )
    return p
