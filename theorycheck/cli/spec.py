"""``theorycheck spec [SECTION]``: print a section of the math reference SPEC.md (:mod:`theorycheck.spec`),
e.g. ``theorycheck spec 4.3``; without a section, the list of section numbers and titles."""

from __future__ import annotations

from .. import spec

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
    return p


def run(args) -> int:
    if args.section is None:
        titles = spec.sections()
        width = max(len(n) for n in titles) + 1
        for number, title in titles.items():
            print(f"§{number.ljust(width)} {title}")
        return 0
    print(spec.section(args.section), end="")
    return 0
