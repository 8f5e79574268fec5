"""The math reference ``SPEC.md``, shipped as package data, by section: what ``theorycheck spec [SECTION]`` prints.

A section is a Markdown heading whose text starts with ``§``: ``# §4. Theory``, ``## §4.3 Theorem 3 — ...``,
``### §4.3(a) Block W^V ...``, ``### §4.1 D1 — ...``. Its number is what a citation "SPEC §4.3" or
"SPEC §4.1 D1" names: the first word after ``§`` without a trailing dot, followed by a ``D<k>``
label when there is one. A section's text runs from its heading to the next heading of the same or
a higher level, so it holds its subsections. Headings inside fenced code blocks are not headings.

>>> from theorycheck import spec
>>> spec.sections()["4.3"]
'Theorem 3 — stage 2: optimal attention given W^V'
>>> spec.section("4.3").splitlines()[0]
'## §4.3 Theorem 3 — stage 2: optimal attention given W^V'
"""

from __future__ import annotations

import difflib
import functools
import re
from importlib import resources

__all__ = ["sections", "section", "spec_text"]

_HEADING = re.compile(r"^(#{1,6})\s+§\s?(\S+?)\.?(?:\s+(D\d+)\b)?(?:\s+(?:—\s+)?(.*?))?\s*$")


@functools.cache
def spec_text() -> str:
    """The whole of ``theorycheck/SPEC.md``, read from the installed package (``importlib.resources``).

    Read once and cached.

    Returns
    -------
    str
        The Markdown text of the SPEC.

    See Also
    --------
    sections : Its section numbers and titles.
    section : The text of one section.

    References
    ----------
    SPEC §0 (provenance legend: what each tag of the SPEC means).

    Examples
    --------
    >>> from theorycheck import spec
    >>> spec.spec_text().splitlines()[0]
    '# SPEC — the mathematics that `theorycheck` checks'
    """
    return resources.files("theorycheck").joinpath("SPEC.md").read_text(encoding="utf-8")


@functools.cache
def _index() -> tuple[tuple[str, str, int, int, int], ...]:
    """``(number, title, level, first line, end line)`` of every section, in document order."""
    lines = spec_text().splitlines()
    heads, fenced = [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            number = m[2] + (f" {m[3]}" if m[3] else "")
            heads.append((number, (m[4] or "").strip(), len(m[1]), i))
    rows = []
    for k, (number, title, level, start) in enumerate(heads):
        end = next((s for _, _, lv, s in heads[k + 1 :] if lv <= level), len(lines))
        rows.append((number, title, level, start, end))
    return tuple(rows)


def _key(number: str) -> str:
    """The lookup form of a section number: ``§4.1 D1``, ``4.1D1``, ``4.1 d1`` -> ``4.1D1``; ``4.3a`` -> ``4.3A``
    as ``4.3(a)``."""
    text = str(number).strip().lstrip("§").strip().rstrip(".")
    return re.sub(r"[\s()]", "", text).upper()


def sections() -> dict[str, str]:
    """Section number -> title, in document order (``{"0": "Provenance legend, ...", "1": "Data distribution",
    "1.1": ..., "4.1 D1": ..., "4.3(a)": ...}``).

    Returns
    -------
    dict of str to str
        The number of every section (as a citation "SPEC §4.3" names it) and its heading's title.

    See Also
    --------
    section : The text of one section.
    spec_text : The whole SPEC.

    References
    ----------
    This module's docstring (what counts as a section and its number).

    Examples
    --------
    >>> from theorycheck import spec
    >>> s = spec.sections()
    >>> list(s)[:4]
    ['0', '1', '1.1', '1.2']
    >>> s["1"], s["4.1 D2"]
    ('Data distribution', 'tied decoder, no bias (`G = (W^E)^T W^E`, PSD)')
    """
    return {number: title for number, title, *_ in _index()}


def section(number: str) -> str:
    """The text of section ``number`` (its heading line first, its subsections included), e.g. ``section("4.3")``.

    Parameters
    ----------
    number : str
        A section number as :func:`sections` lists it; a leading ``§``, a trailing dot, spaces, parentheses
        and the case are ignored (``"§4.1 D1"``, ``"4.1d1"``, ``"4.3a"`` for ``4.3(a)``).

    Returns
    -------
    str
        The section's Markdown, from its heading to the next heading of the same or a higher level,
        ending with a newline.

    Raises
    ------
    ValueError
        No such section; the message names the closest section numbers.

    See Also
    --------
    sections : Every section number and title.
    spec_text : The whole SPEC.

    References
    ----------
    This module's docstring (section numbers; what ``theorycheck spec SECTION`` prints).

    Examples
    --------
    >>> from theorycheck import spec
    >>> spec.section("§4.1 d2").splitlines()[0]
    '### §4.1 D2 — tied decoder, no bias (`G = (W^E)^T W^E`, PSD)'
    >>> spec.section("4.3a") == spec.section("4.3(a)")
    True
    >>> spec.section("4.9")
    Traceback (most recent call last):
    ...
    ValueError: no section §4.9 in SPEC.md; closest: §4.6, §4.5, §4.4
    """
    key = _key(number)
    rows = _index()
    lines = spec_text().splitlines()
    for num, _, _, start, end in rows:
        if _key(num) == key:
            return "\n".join(lines[start:end]).rstrip() + "\n"
    raise ValueError(f"no section §{number} in SPEC.md; closest: {', '.join(_closest(key, rows))}")


def _closest(key: str, rows) -> list[str]:
    """Up to three section numbers nearest ``key``, one per number first: the longest common prefix first, then the
    nearest number (``4.9`` -> ``§4.6, §4.5, §4.4``), then string similarity."""
    target = _leading_number(key)

    def score(num: str):
        k = _key(num)
        prefix = next((i for i, (a, b) in enumerate(zip(k, key, strict=False)) if a != b), min(len(k), len(key)))
        near = _leading_number(k)
        distance = abs(near - target) if near is not None and target is not None else 0.0
        return (prefix, -distance, difflib.SequenceMatcher(None, k, key).ratio())

    ranked = sorted((num for num, *_ in rows), key=score, reverse=True)
    # one per section number first (``§4.6`` rather than ``§4.6(a)`` and ``§4.6(b)`` too), then the rest
    seen: set = set()
    distinct = []
    for n in ranked:
        number = _leading_number(_key(n))
        if number not in seen:
            seen.add(number)
            distinct.append(n)
    picked = (distinct + [n for n in ranked if n not in distinct])[:3]
    return [f"§{n}" for n in picked]


def _leading_number(key: str) -> float | None:
    m = re.match(r"\d+(?:\.\d+)?", key)
    return float(m[0]) if m else None
