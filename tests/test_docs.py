"""The built documentation site (``docs/_build/html``, made by ``docs/build.sh``; ``.ci/run`` builds it before
the tests): math rendered, every SPEC section anchored, docstring citations linked, every tutorial executed.

The HTML is checked, not rebuilt (a build takes minutes): the tests skip when there is no build. The pure
helpers of the docs extension are tested whenever Sphinx is installed.
"""

import html
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


def test_type_aliases_are_written_as_their_target():
    """Sphinx 9 writes an ``autodoc_type_aliases`` alias inside a union as a repr and inside ``Callable[...]`` as
    the bare name: both become the alias' target; a qualified or quoted name is left alone."""
    ext = _ext()
    aliases = {"ArrayLike": "~numpy.typing.ArrayLike"}
    sig = (
        "(x: TypeAliasForwardRef('~numpy.typing.ArrayLike') | None, "
        "f: Callable[[int], ArrayLike], s: str = 'ArrayLike')"
    )
    assert ext.alias_names(sig, aliases) == (
        "(x: ~numpy.typing.ArrayLike | None, f: Callable[[int], ~numpy.typing.ArrayLike], s: str = 'ArrayLike')"
    )
    assert ext.alias_names("(y: ~numpy.typing.ArrayLike)", aliases) == "(y: ~numpy.typing.ArrayLike)"
    assert ext.alias_names(None, aliases) is None


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
    md = ext.link_citations_md("(as in §4.1)\n(spec-4-1)=\n$x \\text{ §4.2}$ and §4.3\n", known)
    assert "(as in {ref}`§4.1 <spec-4-1>`)" in md, "a line that opens with a parenthesis is text"
    assert "(spec-4-1)=\n" in md and "$x \\text{ §4.2}$" in md, "labels and math stay as written"
    assert "and {ref}`§4.3 <spec-4-3>`" in md


def test_spec_page_labels_every_numbered_section():
    ext = _ext()
    page = ext.spec_page()
    for label in ext.spec_labels().values():
        assert f"({label})=" in page


def test_measured_marker_renders_one_result_file(tmp_path):
    ext = _ext()
    (tmp_path / "b_c.json").write_text('{"machine": {"cpus": 2}, "headers": ["case", "ratio"], "rows": [["y", 3.5]]}')
    md = ext.insert_measured("Intro.\n\n% measured: b_c.json\n\nAfter.\n", tmp_path)
    assert "### B c\n" in md and "| y | 3.5 |" in md and "% measured" not in md
    assert "<summary>Raw record: <code>benchmarks/results/b_c.json</code></summary>" in md
    assert ")=" not in md, "no label: the performance page holds the labels of the results files"
    assert md.startswith("Intro.") and md.rstrip().endswith("After.")
    with pytest.raises(FileNotFoundError, match="missing.json"):
        ext.insert_measured("% measured: missing.json\n", tmp_path)


def test_spec_headings_render_their_formulas_as_math():
    ext = _ext()
    assert ext.heading_math("## §4.3 Theorem 3 — stage 2: optimal attention given W^V") == (
        "## §4.3 Theorem 3 — stage 2: optimal attention given $W^V$"
    )
    assert ext.heading_math("### §4.1 D2 — tied decoder, no bias (`G = (W^E)^T W^E`, PSD)") == (
        "### §4.1 D2 — tied decoder, no bias ($G = (W^E)^\\top W^E$, PSD)"
    )
    assert "$W^V_{00} = 0$" in ext.heading_math("### §4.3(b) Identity (diagonal) W^V (`W^V_00 = 0`)")
    assert ext.heading_math("# SPEC — the mathematics that `theorycheck` checks").endswith("`theorycheck` checks")


def test_references_resolve_to_where_the_object_is_documented():
    ext = _ext()
    homes = ext._homes()
    # a function re-exported by a facade, a member of a re-exported class, a class by its defining module
    assert ext.documented_name("theorycheck.sampling.documents.sample_documents", homes) == (
        "theorycheck.sampling.sample_documents"
    )
    assert ext.documented_name("theorycheck.analysis.phase.GeneralTopicModel.zipf", homes) == (
        "theorycheck.models.GeneralTopicModel.zipf"
    )
    assert ext.documented_name("theorycheck.models.paper.TopicModel", homes) == "theorycheck.models.TopicModel"
    # private helpers and names that do not exist have no documented page
    assert ext.documented_name("theorycheck._memory.check_alloc", homes) is None
    assert ext.documented_name("theorycheck.report.claims._relative_margin", homes) is None
    assert ext.documented_name("theorycheck.models.no_such_name", homes) is None


def test_spec_formulas_are_tex_not_code():
    """SPEC writes its formulas in TeX (``$...$``, ``$$...$$``); code spans hold identifiers, flags and file names.
    A code span with a Greek letter or a relation sign is a formula MathJax would not render."""
    body = "\n".join(line for line in spec.spec_text().splitlines() if not line.startswith("#"))
    spans = re.findall(r"(?<!`)`([^`]+)`(?!`)", body)
    formulas = [s for s in spans if re.search(r"[α-ωΓΣΦΠΛΔΘℓ≤≥≠≈∈→⇒‖√∑]", s) and s != "i, j ≥ 4"]
    assert not formulas, f"formulas left in code spans: {formulas[:10]}"
    assert body.count("$$") % 2 == 0 and body.count("$$") >= 40, "display math blocks"
    inline = re.sub(r"\$\$.*?\$\$", "", body, flags=re.S)
    assert len(re.findall(r"(?<!\\)\$[^$\n]+\$", inline)) > 800, "inline math"


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


# The SPEC page: math per top-level section (about half of what the TeX conversion gave, so that a section whose
# formulas fall back to plain text or code fails), no raw TeX or unrendered sub/superscripts outside math, and
# every formula well formed (balanced braces and environments: what MathJax needs to render it).
SPEC_MATH_FLOOR = {0: 2, 1: 25, 2: 15, 3: 25, 4: 300, 5: 30, 6: 50, 7: 40, 8: 45, 9: 3, 10: 2, 11: 160}


def _spec_sections() -> dict[int, str]:
    html = (HTML / "spec.html").read_text(encoding="utf-8")
    starts = [(m.start(), int(m[1])) for m in re.finditer(r'<section id="spec-(\d+)"', html)]
    ends = [s for s, _ in starts[1:]] + [len(html)]
    return {n: html[s:e] for (s, n), e in zip(starts, ends)}


@built
def test_spec_sections_contain_rendered_math():
    sections = _spec_sections()
    assert set(sections) == set(SPEC_MATH_FLOOR), "top-level SPEC sections"
    counts = {n: len(re.findall(r'class="math', body)) for n, body in sections.items()}
    low = {n: (counts[n], floor) for n, floor in SPEC_MATH_FLOOR.items() if counts[n] < floor}
    assert not low, f"SPEC sections with too little rendered math (count, floor): {low}"


@built
def test_spec_has_no_raw_tex_or_unrendered_formulas():
    html = (HTML / "spec.html").read_text(encoding="utf-8")
    p = _Text()
    p.feed(html[html.index("<article") : html.index("</article>")])  # the page, not the site's navigation
    text = " ".join(p.text)
    raw = re.findall(r"\\[A-Za-z]+|\$|\b[A-Za-z][A-Za-z0-9]*[_^]\{?[A-Za-z0-9*]", text)
    assert not raw, f"raw TeX or sub/superscripts outside math on the SPEC page: {sorted(set(raw))[:20]}"


class _Math(HTMLParser):
    """The TeX source of every math container (the text MathJax typesets)."""

    def __init__(self):
        super().__init__()
        self.formulas: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self._depth:
            self._depth += 1
        elif "math" in classes and tag in {"span", "div"}:
            self._depth = 1
            self.formulas.append("")

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.formulas[-1] += data


@built
def test_spec_formulas_are_well_formed():
    p = _Math()
    p.feed((HTML / "spec.html").read_text(encoding="utf-8"))
    assert len(p.formulas) > 1000
    bad = []
    for f in p.formulas:
        body = re.sub(r"\\[{}]", "", f)
        depth = 0
        for ch in body:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth < 0:
                break
        envs = re.findall(r"\\(begin|end)\{(\w+)\}", f)
        stack = []
        for kind, name in envs:
            if kind == "begin":
                stack.append(name)
            elif not stack or stack.pop() != name:
                stack.append("mismatch")
                break
        if depth != 0 or stack or len(re.findall(r"\\left\b", f)) != len(re.findall(r"\\right\b", f)):
            bad.append(f.strip()[:80])
    assert not bad, f"malformed formulas: {bad[:10]}"


def test_claim_counts_in_the_pages_match_the_registry():
    """The README, the landing page and the verify guide state how many claims (and default-tier checks)
    ``theorycheck verify`` runs: the numbers must be the registry's."""
    from proofs_numeric import CLAIMS

    n_claims = len(CLAIMS)
    n_checks = sum(len(c.default_params) for c in CLAIMS)
    n_no_nlp = sum(len(c.default_params) for c in CLAIMS if not c.id.startswith("realdata."))
    root = Path(__file__).resolve().parents[1]
    for page in ("README.md", "docs/index.md", "docs/guide/verify.md"):
        text = (root / page).read_text(encoding="utf-8")
        claims = [int(m) for m in re.findall(r"(?:runs|all|\()\s?(\d+) claims\b", text)]
        assert claims and set(claims) == {n_claims}, (page, claims, n_claims)
        checks = [int(m) for m in re.findall(r"(?:\(|;)\s?(\d+) checks\b", text)]
        assert set(checks) <= {n_checks}, (page, checks, n_checks)
    guide = (root / "docs/guide/verify.md").read_text(encoding="utf-8")
    assert f"{n_no_nlp} without" in guide


def test_text_sources_hold_no_control_characters():
    """A LaTeX command written through a Python string ("\\tau", "\\rvert") turns into a tab or a carriage return
    and silently breaks the formula: the SPEC, the README and the pages hold no control character but newlines."""
    root = Path(__file__).resolve().parents[1]
    pages = [root / "theorycheck/SPEC.md", root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    bad = [
        f"{p.relative_to(root)}:{i}"
        for p in pages
        if "_build" not in p.parts
        for i, line in enumerate(p.read_text(encoding="utf-8").split("\n"), 1)
        if re.search(r"[\x00-\x09\x0b-\x1f\x7f]", line)
    ]
    assert not bad, bad


@built
def test_search_shows_snippets():
    """Search results quote the page: the summary is on, and every page has the main-content element that
    Sphinx's searchtools.js quotes the snippet from (``[role="main"]``)."""
    options = (HTML / "_static" / "documentation_options.js").read_text(encoding="utf-8")
    assert re.search(r"SHOW_SEARCH_SUMMARY:\s*true", options), "html_show_search_summary is off"
    assert (HTML / "searchindex.js").is_file() and (HTML / "search.html").is_file()
    searchtools = (HTML / "_static" / "searchtools.js").read_text(encoding="utf-8")
    assert '[role="main"]' in searchtools, "Sphinx's search no longer reads [role=main]: check the snippets"
    missing = [
        str(p.relative_to(HTML))
        for p in _pages()
        if p.name not in {"search.html", "genindex.html", "py-modindex.html"}
        and 'role="main"' not in p.read_text(encoding="utf-8")
    ]
    assert not missing, f"pages without a main-content element (no search snippet): {missing[:5]}"


@built
def test_signatures_show_types():
    """The reference shows the annotations: phase_diagram's parameters with their types and its return type,
    an ``ArrayLike`` parameter as that one name (not numpy's union)."""
    page = (HTML / "api" / "generated" / "theorycheck.analysis.phase.phase_diagram.html").read_text(encoding="utf-8")
    sig = re.sub(r"<[^>]+>", "", page[page.index('<dt class="sig') : page.index("</dt>", page.index('<dt class="sig'))])
    sig = " ".join(html.unescape(sig).split())
    for shown in ("kind: str", "values: ArrayLike", "T: int = 4", "taus: ArrayLike | None = None", "→ PhaseDiagram"):
        assert shown in sig, (shown, sig)
    assert "_SupportsArray" not in page and "TypeAliasForwardRef" not in page
