"""The built documentation site (``docs/_build/html``, made by ``docs/build.sh``; ``.ci/run`` builds it before
the tests): math rendered, every SPEC section anchored, docstring citations linked, every tutorial executed.

The HTML is checked, not rebuilt (a build takes minutes): the tests skip when there is no build. The pure
helpers of the docs extension are tested whenever Sphinx is installed.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from theorycheck import spec

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "docs" / "_build" / "html"
TUTORIALS = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md") if p.stem != "index")

built = pytest.mark.skipif(not (HTML / "index.html").is_file(), reason="docs not built (bash docs/build.sh)")


def _ext():
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import theorycheck_docs
    finally:
        sys.path.pop(0)
    return theorycheck_docs


class _Text(HTMLParser):
    """Visible text of a page outside code, math and scripts; ids of every element."""

    SKIP = {"script", "style", "pre", "code", "math"}

    def __init__(self):
        super().__init__()
        self.text: list[str] = []
        self.ids: set[str] = set()
        self._stack: list[bool] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        classes = (a.get("class") or "").split()
        skip = tag in self.SKIP or "math" in classes or "highlight" in " ".join(classes)
        if tag not in {"br", "img", "hr", "meta", "link", "input"}:
            self._stack.append(skip)

    def handle_endtag(self, tag):
        if tag not in {"br", "img", "hr", "meta", "link", "input"} and self._stack:
            self._stack.pop()

    def handle_data(self, data):
        if not any(self._stack):
            self.text.append(data)


def _parse(path: Path) -> _Text:
    p = _Text()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _pages() -> list[Path]:
    return [p for p in HTML.rglob("*.html") if "_static" not in p.parts]


# -- the extension's helpers (no build needed) --------------------------------------------------------------------


def test_spec_labels_are_stable():
    ext = _ext()
    assert ext.spec_label("4.3") == "spec-4-3"
    assert ext.spec_label("4.3(a)") == "spec-4-3a"
    assert ext.spec_label("4.1 D1") == "spec-4-1-d1"
    assert ext.spec_label("0") == "spec-0"
    labels = ext.spec_labels()
    assert len(set(labels.values())) == len(labels), "two SPEC sections share a label"


def test_citations_become_links_outside_code_only():
    ext = _ext()
    known = ext.spec_labels()
    unknown = "\u00a7" + "99.9"  # no such section (kept off the citation checker's lines)
    rst = ext.link_citations_rst(
        "Closed form (SPEC §4.3, §11.6); ``SPEC §4.2`` stays; §4.3(a) and " + unknown + " too.", known
    )
    assert ":ref:`§4.3 <spec-4-3>`" in rst and ":ref:`§11.6 <spec-11-6>`" in rst
    assert "``SPEC §4.2``" in rst, "a citation inside a literal must stay a literal"
    assert ":ref:`§4.3(a) <spec-4-3a>`" in rst
    assert unknown in rst and "spec-99-9" not in rst, "an unknown section must not become a broken link"
    md = ext.link_citations_md("text SPEC §4.1\n```python\nx = 1  # SPEC §4.2\n```\n## Heading §4.3\n", known)
    assert "{ref}`§4.1 <spec-4-1>`" in md
    assert "# SPEC §4.2" in md and "## Heading §4.3" in md


def test_spec_page_labels_every_numbered_section():
    ext = _ext()
    page = ext.spec_page()
    for label in ext.spec_labels().values():
        assert f"({label})=" in page


def test_performance_tables_render_every_result_file(tmp_path):
    ext = _ext()
    (tmp_path / "a.json").write_text(
        '{"machine": {"cpus": 2}, "headers": ["case", "ratio"], "rows": [["x", 1.23456]],'
        ' "cases": [{"case": "y", "a_s": 0.5, "ratio": 2.0}]}'
    )
    md = ext.performance_tables(tmp_path)
    assert "## `a.json`" in md and "Machine: cpus 2." in md
    assert "| x | 1.235 |" in md, "headers/rows table"
    assert "| y | 0.5 | 2 |" in md, "list of records as a table"


# -- the built site ------------------------------------------------------------------------------------------------


@built
def test_no_raw_or_unrendered_math():
    offenders = []
    for page in _pages():
        text = " ".join(_parse(page).text)
        for m in re.finditer(r"\$[^$\n]{1,200}\$|\\\(|\\\[|\\begin\{|\\frac|\\mathbb", text):
            offenders.append(f"{page.relative_to(HTML)}: {m.group(0)[:60]!r}")
    assert not offenders, "math left as raw text (not in a MathJax container):\n" + "\n".join(offenders[:20])


@built
def test_math_is_handed_to_mathjax():
    index = (HTML / "index.html").read_text(encoding="utf-8")
    assert 'class="math' in index and "mathjax" in index.lower()


@built
def test_every_spec_section_has_its_anchor():
    ext = _ext()
    ids = _parse(HTML / "spec.html").ids
    missing = [f"§{n} -> {label}" for n, label in ext.spec_labels().items() if label not in ids]
    assert not missing, "SPEC sections without their anchor:\n" + "\n".join(missing)
    assert len(ext.spec_labels()) == len(spec.sections())


@built
def test_docstring_citations_link_to_the_spec_page():
    page = (HTML / "api" / "generated" / "theorycheck.solvers.optimal_attention.html").read_text(encoding="utf-8")
    assert re.search(r'href="\.\./\.\./spec\.html#spec-4-3"', page), "optimal_attention's SPEC §4.3 is not a link"
    linked = sum(
        len(re.findall(r'href="[./]*spec\.html#spec-[\w-]+"', p.read_text(encoding="utf-8")))
        for p in (HTML / "api").rglob("*.html")
    )
    assert linked > 100, f"only {linked} SPEC links in the API reference"
    ids = _parse(HTML / "spec.html").ids
    targets = set()
    for p in _pages():
        targets |= set(re.findall(r'href="[./]*spec\.html#(spec-[\w-]+)"', p.read_text(encoding="utf-8")))
    assert targets and targets <= ids, f"links to missing anchors: {sorted(targets - ids)}"


@built
def test_every_public_name_has_a_documented_page():
    ext = _ext()
    homes = ext._homes()
    undocumented = []
    for facade, name in homes.values():
        page = HTML / "api" / "generated" / f"{facade}.{name}.html"
        if not page.is_file():
            undocumented.append(f"{facade}.{name}: no page")
            continue
        body = page.read_text(encoding="utf-8")
        dd = re.search(r"<dd>(.*?)</dd>", body, re.S)
        if not dd or not re.sub(r"<[^>]+>|\s", "", dd.group(1)):
            undocumented.append(f"{facade}.{name}: empty docstring")
    assert not undocumented, "\n".join(undocumented)


@built
@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorials_were_executed(name):
    page = (HTML / "tutorials" / f"{name}.html").read_text(encoding="utf-8")
    assert "cell_output" in page, f"tutorial {name} shows no output: was it executed?"
    assert "Traceback" not in page, f"tutorial {name} shows a traceback"
