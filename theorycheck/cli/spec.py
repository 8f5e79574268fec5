"""``theorycheck spec [SECTION]``: print a section of the math reference SPEC.md (:mod:`theorycheck.spec`),
e.g. ``theorycheck spec 4.3``; without a section, the list of section numbers and titles.

A section is rendered for a terminal (:func:`theorycheck._plaintext.render`: formulas in Unicode, tables
aligned, headings underlined); on a terminal, headings are bold (unless ``$NO_COLOR`` is set) and wide tables
are wrapped to its width. ``--raw`` prints the Markdown and LaTeX source as SPEC.md has it."""

from __future__ import annotations

import os
import shutil
import sys

from .. import spec
from .._plaintext import render


def run(args) -> int:
    if args.section is None:
        titles = spec.sections()
        width = max(len(n) for n in titles) + 1
        for number, title in titles.items():
            print(f"§{number.ljust(width)} {title}")
        return 0
    text = spec.section(args.section)
    if not args.raw:
        tty = sys.stdout.isatty()
        color = tty and not os.environ.get("NO_COLOR")
        text = render(text, color=color, width=shutil.get_terminal_size().columns if tty else None)
    print(text, end="")
    return 0
