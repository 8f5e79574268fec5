"""The README's and the user guide's Python examples run as written and print what the page shows.

Each page's ``python`` blocks run in order in one namespace, in a temporary folder. A block that prints is followed
(after at most one blank line) by its output block, a ``text`` code block captioned "Output"::

    ```{code-block} text
    :caption: Output

    0.961770
    ```

and the block's stdout must equal it, numbers within 1e-9 relative / 1e-12 absolute (as the docstring examples,
``tests/test_docstrings.py``), ``...`` matching anything and runs of whitespace equal: a stated value that drifts
fails. Code lines on the guide and tutorial pages fit the page: at most 88 characters (furo's content column shows
about 90 characters of code without scrolling).

The runner is ``docs/_ext/theorycheck_examples.py``: the docs build checks the site's pages with it too (a drifting
value is a build error); here each page is one test (the quick check while editing), the README included.
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import theorycheck_examples as examples  # noqa: E402  (the checks the docs build runs: one copy)

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "_build" not in p.parts]

#: pages whose examples run but whose printed output is not shown on the page, with the reason.
OUTPUT_NOT_SHOWN = {"README.md": "the README is a short tour on GitHub; the site's guide pages show the outputs"}

MAX_CODE_LINE = 88


def _examples(page: Path) -> list[tuple[str, str | None]]:
    """(code, shown output or None) of each ``python`` block of the page, in order."""
    return [(ex.code, ex.want) for ex in examples.page_examples(page)]


def _blocks(page: Path) -> list[str]:
    return [code for code, _ in _examples(page)]


def test_the_examples_are_still_there():
    assert len(_blocks(ROOT / "README.md")) >= 1, "README lost its tour"
    assert sum(len(_blocks(p)) for p in PAGES) >= 8, "the guide lost its examples"
    shown = sum(want is not None for p in PAGES for _, want in _examples(p))
    assert shown >= 9, f"only {shown} output blocks on the pages"


def test_the_output_checker_fails_a_drifted_value():
    """The comparison the pages are held to: a last-digit change within 1e-9 passes, a drift fails."""
    check = examples.FloatChecker().check_output
    assert check("L* = 0.961770246 K 70.05\n", "L* = 0.9617702460000001 K 70.05\n")
    assert check("[0.1  0.2]\n", "[0.1 0.2]\n") and check("a ... b\n", "a long text b\n")
    assert not check("L* = 0.961770246\n", "L* = 0.961770247\n"), "a drift in the 9th digit"
    assert not check("0 certified\n", "0 not certified\n") and not check("1 2\n", "1 2 3\n")


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run_and_print_what_the_page_shows(page):
    name = str(page.relative_to(ROOT))
    failures = examples.run_page(page, outputs_shown=name not in OUTPUT_NOT_SHOWN)
    assert not failures, "\n".join(f"{name}:{line}: {message}" for line, message in failures)


def test_a_drifted_output_fails_its_page(tmp_path):
    """The page check itself: the stated output of a block changed in its last digit fails, the true one passes."""
    page = tmp_path / "p.md"
    block = "```python\nprint(round(1 / 3, 9))\n```\n\n```{code-block} text\n:caption: Output\n\n%s\n```\n"
    page.write_text(block % "0.333333333")
    assert examples.run_page(page) == []
    page.write_text(block % "0.333333334")
    [(line, message)] = examples.run_page(page)
    assert line == 2 and "printed\n0.333333333\nthe page shows\n0.333333334" in message


def _code_lines(page: Path):
    """(line number, line) of every line inside a backtick-fenced code block (a language, ``{code-cell}`` or
    ``{code-block}``; not the prose of other directives)."""
    fence = None
    for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        m = re.match(r"^(`{3,})\s*(\S*)", line)
        if fence is None:
            if m:
                info = m[2]
                is_code = not info.startswith("{") or info in ("{code-cell}", "{code-block}", "{code}")
                fence = (m[1], is_code)
            continue
        if m and m[1] >= fence[0] and not m[2]:
            fence = None
        elif fence[1] and not line.startswith(":"):
            yield n, line


def test_code_lines_fit_the_page():
    pages = sorted((ROOT / "docs" / "guide").glob("*.md")) + sorted((ROOT / "docs" / "tutorials").glob("*.md"))
    long = [
        f"{p.relative_to(ROOT)}:{n} ({len(line)} characters)"
        for p in pages
        for n, line in _code_lines(p)
        if len(line) > MAX_CODE_LINE
    ]
    assert not long, f"code lines over {MAX_CODE_LINE} characters:\n" + "\n".join(long)


def test_the_line_finder_sees_code_and_not_prose(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "text\n```python\nx = 1\n```\n```{note}\nprose\n```\n" + "````{code-cell} ipython3\n:tags: [x]\ny\n````\n"
    )
    assert list(_code_lines(page)) == [(3, "x = 1"), (10, "y")]


def test_each_guide_page_has_one_title():
    """One H1 per guide page (its title), and no section heading that repeats it."""
    for page in sorted((ROOT / "docs" / "guide").glob("*.md")):
        prose = re.sub(r"^(`{3,}).*?^\1[ \t]*$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        titles = re.findall(r"^# (.+)$", prose, re.M)
        assert len(titles) == 1, f"{page.name}: {len(titles)} H1 headings {titles}"
        words = set(re.findall(r"\w+", titles[0].lower()))
        for heading in re.findall(r"^#{2,} (.+)$", prose, re.M):
            assert not words <= set(re.findall(r"\w+", heading.lower())), f"{page.name}: {heading!r} repeats the title"


def test_relative_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)}: broken link {target}"
