"""Links both ways between the math reference and the API (issue 39).

Each numbered SPEC section that the toolkit implements ends with an "Implemented by:" paragraph naming the
public objects (their public path, ``theorycheck.population.alpha_beta_loss``) and the claims that check it
("Checked by:", ``proofs_numeric`` claim ids). These tests keep that list and the docstrings in step:

- every name on such a line is a public object (a name in a facade's ``__all__``) or a registered claim id;
- every public object whose docstring cites a section (in its own text: not in its See Also entries, which
  describe other objects, nor in its examples' code, nor in a literal) is named on the line of that section or
  of one of its subsections (a chapter citation such as "SPEC §1 (documents)" is met by the subsection that
  implements it), unless :data:`EXCLUDED` gives the reason why not;
- every claim whose ``spec`` field cites a section is named there too (§0, the provenance legend, excepted);
- every guide page and every tutorial links to the API at least once (a MyST cross-reference role).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from theorycheck import spec

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The how-to pages and the tutorials (their index pages are tables of contents).
PAGES = sorted(p for folder in ("guide", "tutorials") for p in (DOCS / folder).glob("*.md") if p.stem != "index")

from test_docstrings import public_objects  # noqa: E402  (the public objects, as the numpydoc test walks them)

#: The real-data facades (``theorycheck.realdata`` itself exports only the extra's checks); the API reference
#: documents each (``docs/_ext/theorycheck_docs.py``, ``FACADES``).
REALDATA_FACADES = [
    f"theorycheck.realdata.{name}"
    for name in (
        "corpus tokenizer encoder mapping topics stats theory attention_theory lifts theory_lifts output plots pipeline"
    ).split()
]

#: A SPEC citation: ``§4.3``, ``§4.3(a)``, ``§4.1 D3`` (as the docs extension's citation links read them).
_CITE = re.compile(r"(?<![\w§])§\s?(\d+(?:\.\d+)?)(\([a-z]\))?(?: (D\d+))?(?![\w(])")
_SECTION_HEAD = re.compile(r"^([A-Z][\w ]*)\n-{3,}\s*$", re.M)


def _excluded(paths: str, sections: str, reason: str) -> dict[tuple[str, str], str]:
    return {(p, s): reason for p in paths.split() for s in sections.split(",")}


_PROBLEMS = (
    "a benchmark problem built from the objective this section defines (implemented by the functions listed here); "
    "the problem families are listed in §4.6"
)
_STATISTICS = "the statistic is defined in §11.6 (where it is listed); this section states its value at an optimum"
_PRESETS = "a training preset compared with this optimum (computed by the functions listed here); see §5.1, §5.2"

#: ``(public path, section)`` pairs whose citation does not make the object part of the section's
#: implementation, with the reason.
EXCLUDED: dict[tuple[str, str], str] = {
    **{
        (f"theorycheck.problems.{name}", number): _PROBLEMS
        for name, numbers in [
            ("Problem", "4.0 4.1 4.2 4.3 11"),
            ("get", "1.1 2.1 4.0 4.1 4.2 4.3 11.1"),
            ("list", "4.0 4.1 4.2 4.3 11.1"),
            ("match", "4.0 4.1 4.2 4.3"),
        ]
        for number in numbers.split(" ")
    },
    **_excluded("theorycheck.analysis.topic_gap", "4.1 D3,4.2", _STATISTICS),
    **_excluded("theorycheck.analysis.matrix_topic_stats", "4.2", _STATISTICS),
    **_excluded("theorycheck.analysis.attention_preference", "4.3", _STATISTICS),
    **_excluded("theorycheck.nn.preset theorycheck.nn.run_preset", "4.2,4.3", _PRESETS),
    **_excluded("theorycheck.nn.TrainConfig", "4.2", _PRESETS),
    ("theorycheck.nn.SGD", "6"): "cites item 9 of the list of claims (gradient descent from 0 reaches the "
    "minimum-norm optimum), which the claims listed in §6 check",
    ("theorycheck.population.symmetric_attention_loss", "1.1"): "uses the model's topic-permutation symmetry; "
    "it evaluates the loss of §4.3 (listed there)",
    ("theorycheck.realdata.theory.theory_comparison", "2.1"): "uses the masking of §2.1 as its default",
    ("theorycheck.realdata.pipeline.synthetic_signal", "1.2"): "samples the documents of §1.2 with "
    "sample_documents (listed there); it is listed in §5.5",
    **_excluded(
        "theorycheck.nn.References",
        "4.1,4.2,4.3,11.3",
        "holds the exact optima a training run is compared with (computed by the functions listed there); it is "
        "listed in §5",
    ),
    ("theorycheck.realdata.attention_theory.label_optimum", "11.5"): "freezes the stage-1 matrix of §11.5 "
    "(computed by the functions listed there); it is listed in §11.8",
}

#: Sections whose claims are not listed: what a claim cites there is not implemented by anything.
CLAIM_SECTIONS_EXCLUDED = {"0": "the provenance legend: a claim citing it cites the paper's abstract as a source"}


def api_objects() -> list[tuple[str, object]]:
    """(public path, object) of every public callable: :func:`public_objects`, then the real-data facades'."""
    out = list(public_objects())
    seen = {id(obj) for _, obj in out}
    for facade in REALDATA_FACADES:
        mod = importlib.import_module(facade)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{facade}.{name}", obj))
    return out


def resolve(m: re.Match, known) -> str | None:
    """The section number a citation names, the most specific one SPEC has (``§4.1 D1`` -> ``4.1 D1``)."""
    for candidate in (m[1] + (m[2] or "") + (f" {m[3]}" if m[3] else ""), m[1] + (m[2] or ""), m[1]):
        if candidate in known:
            return candidate
    return None


def own_text(doc: str) -> str:
    """A docstring without its See Also and Examples sections (they describe other objects and what an example
    computes), the code lines of examples elsewhere and its ``literals``."""
    doc = inspect.cleandoc(doc or "")
    heads = list(_SECTION_HEAD.finditer(doc))
    keep, last = [], 0
    for k, h in enumerate(heads):
        keep.append(doc[last : h.start()])
        end = heads[k + 1].start() if k + 1 < len(heads) else len(doc)
        if h[1].strip() not in ("See Also", "Examples"):
            keep.append(doc[h.start() : end])
        last = end
    keep.append(doc[last:])
    lines = [ln for ln in "".join(keep).splitlines() if not ln.lstrip().startswith((">>>", "... "))]
    return re.sub(r"``.+?``", "", "\n".join(lines), flags=re.S)


_RANGE = re.compile(r"\s?[-–/]\s?(?:§\s?)?(\d+(?:\.\d+)?|D\d)")


def _kind(number: str) -> str:
    """The shape of a section number (``4``, ``4.3``, ``4.1 D1``, ``4.3(a)``): a range spans one shape."""
    return re.sub(r"\d+", "0", re.sub(r"\([a-z]\)", "(x)", number))


def cited(text: str) -> list[str]:
    """The SPEC sections ``text`` cites, in order, each once; a range (``§4.0-§4.3``, ``§4.1 D1-D4``,
    ``§4.1 D1/D2``) cites every section of its shape from its first to its last."""
    known = spec.sections()
    order = list(known)
    out: list[str] = []
    for m in _CITE.finditer(text):
        number = resolve(m, known)
        if number is None:
            continue
        span = [number]
        r = _RANGE.match(text, m.end())
        if r:
            last = f"{number.split()[0]} {r[1]}" if r[1].startswith("D") else r[1]
            if last in known and _kind(last) == _kind(number) and order.index(last) > order.index(number):
                between = order[order.index(number) : order.index(last) + 1]
                span = [n for n in between if _kind(n) == _kind(number)]
        out += [n for n in span if n not in out]
    return out


# -- the "Implemented by" paragraphs of SPEC.md --------------------------------------------------------------------

_PARAGRAPH = re.compile(r"^(?:Implemented by|Checked by):.*?(?=\n\s*\n|\Z)", re.M | re.S)
_NAME = re.compile(r"`([^`]+)`")


def own_part(number: str) -> str:
    """Section ``number``'s text before its first subsection (where its "Implemented by" paragraph is)."""
    lines = spec.section(number).splitlines()
    body = [lines[0]]
    for line in lines[1:]:
        if re.match(r"^#{1,6}\s+§", line):
            break
        body.append(line)
    return "\n".join(body)


def implemented_by() -> dict[str, tuple[list[str], list[str]]]:
    """Section number -> (public paths, claim ids) of its "Implemented by:" / "Checked by:" paragraph."""
    out = {}
    for number in spec.sections():
        found = _PARAGRAPH.findall(own_part(number))
        if not found:
            continue
        assert len(found) == 1, f"§{number}: more than one 'Implemented by' paragraph"
        text = found[0]
        objects, _, claims = text.partition("Checked by:")
        out[number] = (_NAME.findall(objects), _NAME.findall(claims))
    return out


def listed_under(number: str, table) -> tuple[set[str], set[str]]:
    """Names on the line of section ``number`` or of one of its subsections."""
    objects, claims = set(), set()
    for n, (objs, ids) in table.items():
        if n == number or n.startswith(number + ".") or n.startswith(number + " ") or n.startswith(number + "("):
            objects |= set(objs)
            claims |= set(ids)
    return objects, claims


def test_the_sections_have_their_lines():
    table = implemented_by()
    assert len(table) >= 35, f"only {len(table)} sections have an 'Implemented by' line"
    for number in ("1.1", "2.1", "4.0", "4.1", "4.2", "4.3", "4.3(a)", "11.4", "11.8"):
        assert table[number][0], f"§{number} names no public object"


def test_every_name_on_a_line_is_public_or_a_claim():
    import proofs_numeric

    ids = {c.id for c in proofs_numeric.CLAIMS}
    facades = {p for p, _ in api_objects()}
    bad = []
    for number, (objects, claims) in implemented_by().items():
        for path in objects:
            module, _, name = path.rpartition(".")
            try:
                mod = importlib.import_module(module)
            except ImportError:
                bad.append(f"§{number}: {path}: no module {module}")
                continue
            if name not in getattr(mod, "__all__", ()):
                bad.append(f"§{number}: {path}: not in {module}.__all__")
            elif path not in facades:
                bad.append(f"§{number}: {path}: a public object, named by another path than its public one")
        bad += [f"§{number}: {c}: no such claim" for c in claims if c not in ids]
        for names, kind in ((objects, "object"), (claims, "claim")):
            if len(set(names)) != len(names):
                bad.append(f"§{number}: an {kind} named twice")
    assert not bad, "\n".join(bad)


def test_every_cited_section_lists_the_object():
    """An object whose own text cites §x is on §x's line (or a subsection's), unless EXCLUDED says why not."""
    table = implemented_by()
    missing, cites = [], set()
    for path, obj in api_objects():
        for number in cited(own_text(obj.__doc__)):
            cites.add((path, number))
            if (path, number) not in EXCLUDED and path not in listed_under(number, table)[0]:
                missing.append(f"{path} cites §{number}")
    assert not missing, "not on the section's 'Implemented by' line:\n" + "\n".join(missing)
    stale = sorted(k for k in EXCLUDED if k not in cites)
    assert not stale, f"EXCLUDED names citations that no docstring makes: {stale}"


def test_every_claim_is_listed_where_its_spec_field_points():
    import proofs_numeric

    table = implemented_by()
    missing = []
    for claim in proofs_numeric.CLAIMS:
        for number in cited(claim.spec or ""):
            if number not in CLAIM_SECTIONS_EXCLUDED and claim.id not in listed_under(number, table)[1]:
                missing.append(f"{claim.id} ({claim.spec!r}) -> §{number}")
    assert not missing, "claims missing from 'Checked by':\n" + "\n".join(missing)


def test_excluded_objects_are_listed_elsewhere():
    """An exclusion moves an object, it does not hide it: every excluded object is on some section's line."""
    listed = {p for objects, _ in implemented_by().values() for p in objects}
    assert not {p for p, _ in EXCLUDED} - listed


def test_cited_reads_ranges_and_literal_free_text():
    assert cited("SPEC §4.0-§4.3 (the objectives)") == ["4.0", "4.1", "4.2", "4.3"]
    assert cited("SPEC §4.1 D1-D3, §4.3(a)") == ["4.1 D1", "4.1 D2", "4.1 D3", "4.3(a)"]
    assert cited("§4.1 D1/D2") == ["4.1 D1", "4.1 D2"]
    assert cited("§99.9 and §4.2") == ["4.2"]
    doc = "Summary (SPEC §4.2).\n\nSee Also\n--------\nf : g (SPEC §1.1).\n\nExamples\n--------\n>>> x  # §2.1\n"
    assert cited(own_text(doc)) == ["4.2"]
    assert cited(own_text('Text ``"SPEC §6 item 5"``; §4.3.')) == ["4.3"]


# -- the guides and tutorials link to the API ---------------------------------------------------------------------

_ROLE = re.compile(r"\{py:(?:func|class|meth|mod|obj|data|attr)\}`([^`]+)`")


def _prose_and_code(text: str) -> tuple[str, str]:
    """A MyST page split into its prose and its fenced blocks (code cells, shell sessions, outputs)."""
    prose, code, fence = [], [], None
    for line in text.splitlines():
        marker = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and marker:
            fence = marker[1]
            code.append(line)
        elif fence is not None:
            code.append(line)
            if line.strip() == fence:
                fence = None
        else:
            prose.append(line)
    return "\n".join(prose), "\n".join(code)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_page_links_to_the_api(page):
    prose, code = _prose_and_code(page.read_text(encoding="utf-8"))
    assert _ROLE.search(prose), f"{page.relative_to(ROOT)}: no cross-reference to the API in its prose"
    assert not _ROLE.search(code), f"{page.relative_to(ROOT)}: a cross-reference role inside a code block"


def test_the_pages_link_public_objects():
    """Every target of a role on these pages is a public object, a member of one, or a public module (the
    nitpicky docs build resolves them; this says so without a build)."""
    public = {p for p, _ in api_objects()}
    bad = []
    for page in PAGES:
        for m in _ROLE.finditer(_prose_and_code(page.read_text(encoding="utf-8"))[0]):
            target = m[1].split("<")[-1].rstrip(">").lstrip("~").strip()
            module, _, name = target.rpartition(".")
            try:
                importlib.import_module(target)
                continue  # a module
            except ImportError:
                pass
            parent = importlib.import_module(module) if _importable(module) else None
            if parent is not None and name in getattr(parent, "__all__", ()):
                continue  # a name a facade exports
            if module in public and hasattr(_resolve(module), name):
                continue  # a member of a public class
            bad.append(f"{page.relative_to(ROOT)}: {target}")
    assert not bad, "\n".join(bad)


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


# -- the docs extension turns the SPEC's names into links ---------------------------------------------------------


def _ext():
    pytest.importorskip("sphinx")
    import sys

    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import theorycheck_docs
    finally:
        sys.path.pop(0)
    return theorycheck_docs


def test_implemented_by_names_become_references():
    ext = _ext()
    text = (
        "See `theorycheck.population.moments` here.\n\n"
        "Implemented by: `theorycheck.population.alpha_beta_loss`,\n`theorycheck.solvers.optimal_attention`. "
        "Checked by: `attention.kstar`.\n\n```\n`theorycheck.x`\n```\n"
    )
    out = ext.link_implemented_by(text)
    assert "{py:obj}`theorycheck.population.alpha_beta_loss`" in out
    assert "{py:obj}`theorycheck.solvers.optimal_attention`" in out
    assert "See `theorycheck.population.moments` here." in out, "only the 'Implemented by' paragraph is linked"
    assert "`attention.kstar`" in out and "{py:obj}`attention" not in out, "claim ids are not API objects"
    assert "```\n`theorycheck.x`\n```" in out
    page = ext.link_implemented_by(ext.spec_page())
    listed = sum(len(objects) for objects, _ in implemented_by().values())
    assert page.count("{py:obj}`theorycheck.") == listed


HTML = DOCS / "_build" / "html"


@pytest.mark.skipif(not (HTML / "spec.html").is_file(), reason="docs not built (bash docs/build.sh)")
def test_the_built_spec_links_to_the_api():
    html = (HTML / "spec.html").read_text(encoding="utf-8")
    targets = set(re.findall(r'href="api/generated/([\w.]+)\.html#([\w.]+)"', html))
    listed = {p for objects, _ in implemented_by().values() for p in objects}
    assert len(targets) >= len(listed), f"{len(targets)} objects linked from the math reference, {len(listed)} listed"
    missing = [page for page, _ in targets if not (HTML / "api" / "generated" / f"{page}.html").is_file()]
    assert not missing, missing
