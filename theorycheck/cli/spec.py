"""``theorycheck spec [SECTION]``: print a section of the math reference SPEC.md (:mod:`theorycheck.spec`),
e.g. ``theorycheck spec 4.3``; without a section, the list of section numbers and titles."""

from __future__ import annotations

from .. import spec


def run(args) -> int:
    if args.section is None:
        titles = spec.sections()
        width = max(len(n) for n in titles) + 1
        for number, title in titles.items():
            print(f"§{number.ljust(width)} {title}")
        return 0
    print(spec.section(args.section), end="")
    return 0
