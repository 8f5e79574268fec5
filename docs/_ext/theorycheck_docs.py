"""Sphinx extension of theorycheck's documentation site.

- **Math reference.** The page ``spec`` is ``theorycheck/SPEC.md`` (the package data, read at build time), each
  numbered section preceded by a stable label: ``§4.3`` -> ``spec-4-3``, ``§4.3(a)`` -> ``spec-4-3a``,
  ``§4.1 D1`` -> ``spec-4-1-d1``.
- **Links to the API.** A backticked public path on an "Implemented by:" paragraph of SPEC.md becomes a Python
  cross-reference (:func:`link_implemented_by`).
- **Citations as links.** Every ``§x.y`` naming a SPEC section in a docstring (``autodoc-process-docstring``) or
  in a Markdown page of the site (``source-read``) becomes a link to its label; code (backticks, fenced blocks)
  and headings are left alone.
- **API reference.** ``api/<facade>.rst`` is generated from each facade's ``__all__``: an autosummary table
  (one page per public name) of the names whose home is that facade, links for the names it re-exports.
- **Measured figures.** The page ``performance`` gets a summary, tables, a figure and the raw records of every
  ``benchmarks/results/*.json`` appended, rendered from the JSON at build time (no hand-typed numbers; see
  ``theorycheck_perf``); a line ``% measured: NAME.json`` in any page (a MyST comment) is replaced by the
  section of that one file.
- **Cross-references.** A Python reference to an object documented under another path (a function re-exported
  by a facade, a member of such a class, a constant) resolves to its documented page; a class page lists public
  bases only.
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
import re
import shutil
import sys
import types
from pathlib import Path

from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from theorycheck_api import FACADES
from theorycheck_perf import FIGURE, ROOFLINE_FIGURE, performance_page, ratio_figure, roofline_figure, section

from theorycheck import spec as _spec

logger = logging.getLogger(__name__)

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
RESULTS = ROOT / "benchmarks" / "results"


# ----------------------------------------------------------------------------------------------------------------
# SPEC labels and citation links


def spec_label(number: str) -> str:
    """``"4.3"`` -> ``"spec-4-3"``, ``"4.3(a)"`` -> ``"spec-4-3a"``, ``"4.1 D1"`` -> ``"spec-4-1-d1"``."""
    text = number.strip().lower().replace("(", "").replace(")", "")
    return "spec-" + re.sub(r"[.\s]+", "-", text)


def spec_labels() -> dict[str, str]:
    """Section number (as SPEC writes it) -> label, for every numbered section."""
    return {number: spec_label(number) for number in _spec.sections()}


_CITE = re.compile(r"(?<![\w§])§\s?(\d+(?:\.\d+)?)(\([a-z]\))?(?: (D\d+))?(?![\w(])")
# Code, math and interpreted text are left alone: rST/Markdown literals and roles (``...``, `...`, :role:`...`),
# MyST math ($...$, $$...$$) and Markdown links.
_CODE = re.compile(
    r"(\$\$.+?\$\$|(?<![\\$])\$[^$\n]+\$|``.+?``|:?[\w:.+-]*`[^`]+`_*|\{\w+\}`[^`]+`|\[[^\]]*\]\([^)]*\))", re.S
)


def _link_citations(text: str, known: dict[str, str], fmt: str) -> str:
    def sub(m: re.Match) -> str:
        number = m[1] + (m[2] or "") + (f" {m[3]}" if m[3] else "")
        label = known.get(number) or known.get(m[1] + (m[2] or "")) or known.get(m[1])
        if label is None:
            return m[0]
        return fmt.format(text=m[0], label=label)

    parts = _CODE.split(text)
    return "".join(p if i % 2 else _CITE.sub(sub, p) for i, p in enumerate(parts))


_BORDER = re.compile(r"^\s*=+(\s+=+)+\s*$")


def link_citations_rst(text: str, known: dict[str, str]) -> str:
    """Every ``§x.y`` outside code in rST ``text`` as ``:ref:`§x.y <spec-x-y>```.

    Lines of simple tables (between ``===  ===`` borders) are left alone: a link would widen a cell past
    its column.
    """
    lines = text.split("\n")
    keep, in_table = [False] * len(lines), False
    for i, line in enumerate(lines):
        if _BORDER.match(line):
            closing = in_table and (i + 1 == len(lines) or not lines[i + 1].strip())
            in_table = not closing
            keep[i] = True
        elif in_table:
            keep[i] = True
    out, chunk = [], []
    for line, k in zip(lines, keep):
        if k:
            if chunk:
                out.append(_link_citations("\n".join(chunk), known, ":ref:`{text} <{label}>`"))
                chunk = []
            out.append(line)
        else:
            chunk.append(line)
    if chunk:
        out.append(_link_citations("\n".join(chunk), known, ":ref:`{text} <{label}>`"))
    return "\n".join(out)


def link_citations_md(text: str, known: dict[str, str]) -> str:
    """Every ``§x.y`` outside code, math, fenced blocks and headings of MyST ``text`` as a ``{ref}`` link."""
    out, fenced = [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")) or line.strip() == "$$":
            fenced = not fenced
        if fenced or line.lstrip().startswith(("#", "```", "~~~")) or re.match(r"\s*\([\w-]+\)=\s*$", line):
            out.append(line)
        else:
            out.append(_link_citations(line, known, "{{ref}}`{text} <{label}>`"))
    return "".join(out)


_HEADING = re.compile(r"^(#{1,6})\s+§")


def spec_page() -> str:
    """SPEC.md as MyST, a ``(label)=`` target before each numbered section's heading."""
    labels = iter(spec_labels().values())
    out, fenced, titled = [], False, False
    for line in _spec.spec_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and _HEADING.match(line):
            out.extend([f"({next(labels)})=", ""])
        if not fenced and re.match(r"^#{1,5}\s", line):
            if titled:  # the file's title stays the page title; its sections (several "# §k.") go one level down
                line = "#" + line
            titled = True
            line = heading_math(line)
        out.append(line)
    return "\n".join(out) + "\n"


_HEADING_CODE = re.compile(r"`([^`]*\^[^`]*)`")
_HEADING_SUPER = re.compile(r"(?<![\w$^])([A-Z]\^[A-Z]\w*)(?![\w$])")


def heading_math(line: str) -> str:
    """A SPEC heading as the site shows it: its formulas (``W^V``, ```G = (W^E)^T W^E```) as inline TeX.

    SPEC.md keeps its headings as printed (``theorycheck spec`` and the section titles read them); only the page
    renders them as math."""

    def code(m: re.Match) -> str:
        body = re.sub(r"\^T\b", r"^\\top", m[1])
        return "$" + re.sub(r"_(\d\d+)", r"_{\1}", body) + "$"

    parts = re.split(r"(`[^`]*`|\$[^$]*\$)", _HEADING_CODE.sub(code, line))
    return "".join(p if i % 2 else _HEADING_SUPER.sub(r"$\1$", p) for i, p in enumerate(parts))


_IMPLEMENTED = re.compile(r"^(?:Implemented by|Checked by):.*?(?=\n[ \t]*\n|\Z)", re.M | re.S)
_PUBLIC_PATH = re.compile(r"(?<![\w`])`(theorycheck(?:\.\w+)+)`(?!`)")


def link_implemented_by(text: str) -> str:
    """Each backticked public path (```theorycheck.population.alpha_beta_loss```) on an "Implemented by:"
    paragraph of SPEC.md as a ``{py:obj}`` cross-reference, so that the math reference links to the API
    (SPEC.md keeps plain backticks: ``theorycheck spec`` prints it in a terminal). Claim ids ("Checked by:")
    and every other line are left as they are."""

    def paragraph(m: re.Match) -> str:
        return _PUBLIC_PATH.sub(lambda p: f"{{py:obj}}`{p[1]}`", m[0])

    return _IMPLEMENTED.sub(paragraph, text)


def _data_doc(name: str, obj) -> list[str] | None:
    """The ``#:`` comment of a constant re-exported by a facade, read from the module that defines it."""
    short = name.rsplit(".", 1)[-1]
    for modname, mod in sorted(sys.modules.items()):
        if modname.startswith("theorycheck") and getattr(mod, short, None) is obj:
            try:
                docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
            except PycodeError:
                continue
            if ("", short) in docs:
                return [line for line in docs["", short] if line is not None]
    return None


def _on_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if what == "data":
        lines[:] = _data_doc(name, obj) or []
    text = link_citations_rst("\n".join(lines), app.env.theorycheck_spec_labels)
    lines[:] = text.split("\n")


def _on_source_read(app, docname: str, source: list[str]) -> None:
    if docname == "spec":  # SPEC's own cross-references ("see §2.1") become links too
        source[0] = link_citations_md(link_implemented_by(spec_page()), app.env.theorycheck_spec_labels)
        return
    if docname == "performance":
        source[0] = source[0].rstrip() + "\n\n" + performance_page(RESULTS)
    source[0] = insert_measured(source[0], RESULTS)
    if app.env.doc2path(docname).suffix == ".md":
        source[0] = link_citations_md(source[0], app.env.theorycheck_spec_labels)


# ----------------------------------------------------------------------------------------------------------------
# API pages


def _homes() -> dict[int, tuple[str, str]]:
    """``id(object)`` -> ``(facade, name)`` of its home facade (the first in :data:`FACADES` exporting it)."""
    homes: dict[int, tuple[str, str]] = {}
    for facade in FACADES:
        mod = importlib.import_module(facade)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if _documentable(obj):
                homes.setdefault(id(obj), (facade, name))
    return homes


@functools.cache
def _cached_homes() -> dict[int, tuple[str, str]]:
    return _homes()


def _documentable(obj) -> bool:
    """Functions and classes are documented on their home page; data (constants) on every facade exporting it."""
    return callable(obj) and not isinstance(obj, types.ModuleType)


def api_page(facade: str, homes: dict[int, tuple[str, str]]) -> str:
    mod = importlib.import_module(facade)
    here, elsewhere, modules = [], [], []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType):
            modules.append(obj.__name__)
        elif _documentable(obj) and homes[id(obj)][0] != facade:
            elsewhere.append((name, "{}.{}".format(*homes[id(obj)]), isinstance(obj, type)))
        else:
            here.append(name)
    title = f"``{facade}``"
    lines = [
        f".. _api-{facade}:",
        "",
        title,
        "=" * len(title),
        "",
        f".. automodule:: {facade}",
        "   :no-members:",
        "",
        f".. currentmodule:: {facade}",
        "",
    ]
    if here:
        lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in here] + [""]
    if modules:
        lines += ["Submodules: " + ", ".join(f":mod:`{m}`" for m in modules) + ".", ""]
    if elsewhere:
        lines += ["Also exported here (documented at their home):", ""]
        for name, target, is_class in elsewhere:
            lines.append(f"- :py:{'class' if is_class else 'func'}:`{name} <{target}>`")
        lines.append("")
    submodules = public_submodules(facade)
    if submodules:  # last: ``py:module`` changes the current module of what follows
        lines += ["Modules of this package", "-" * len("Modules of this package"), ""]
        for name, summary in submodules:
            lines += [f".. py:module:: {name}", "", f"- ``{name}``: {summary}" if summary else f"- ``{name}``", ""]
    return "\n".join(lines)


def public_submodules(facade: str) -> list[tuple[str, str]]:
    """``(module, first docstring line)`` of the public submodules of package ``facade`` that are not facades
    themselves (a facade has its own page): the targets of ``:mod:`` references to them."""
    mod = importlib.import_module(facade)
    if not hasattr(mod, "__path__"):
        return []
    out = []
    for info in pkgutil.iter_modules(mod.__path__):
        name = f"{facade}.{info.name}"
        if info.name.startswith("_") or name in FACADES or info.name in mod.__all__:
            continue  # private, a facade with its own page, or shadowed by a public name (``nn.stage_grid``)
        sub = importlib.import_module(name)
        doc = (sub.__doc__ or "").strip().split("\n\n")[0]
        out.append((name, " ".join(doc.split())))
    return out


def write_api_pages(app: Sphinx) -> None:
    """``docs/api/<facade>.rst`` for every facade (generated; ignored by git)."""
    homes = _homes()
    folder = DOCS / "api"
    for facade in FACADES:
        path = folder / f"{facade}.rst"
        text = api_page(facade, homes)
        if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime (incremental builds)
            path.write_text(text)


# ----------------------------------------------------------------------------------------------------------------
# Measured figures from benchmarks/results/*.json


_MEASURED = re.compile(r"^% measured: (\S+\.json)\s*$", re.M)


def insert_measured(text: str, folder: Path) -> str:
    """Every line ``% measured: NAME.json`` of a Markdown page (a MyST comment, invisible without this extension)
    replaced by the section of ``folder/NAME.json`` (:func:`theorycheck_perf.section`, a ``###`` heading)."""

    def sub(m: re.Match) -> str:
        path = folder / m[1]
        if not path.is_file():
            raise FileNotFoundError(f"{m[0].strip()!r}: no {path}")
        return "\n".join(section(path, json.loads(path.read_text()), depth=3, anchor=False))

    return _MEASURED.sub(sub, text)


# ----------------------------------------------------------------------------------------------------------------


def _on_config_inited(app: Sphinx, config) -> None:
    write_api_pages(app)  # before Sphinx looks for source files and autosummary for its directives
    if _local_mathjax() is not None:  # else Sphinx's default: MathJax from its CDN
        config.mathjax_path = "mathjax/tex-chtml.js"


def _local_mathjax() -> Path | None:
    """MathJax 3's ``es5`` folder from the ``django-static-mathjax`` wheel (the ``docs`` extra), if installed."""
    try:
        import mathjax  # django-static-mathjax: MathJax's static files only, no Django dependency
    except ImportError:
        return None
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    return es5 if (es5 / "tex-chtml.js").is_file() else None


def _on_builder_inited(app: Sphinx) -> None:
    app.env.theorycheck_spec_labels = spec_labels()


def _on_build_finished(app: Sphinx, exc) -> None:
    """Copy MathJax (the script and its fonts) into ``_static/mathjax`` so that the site renders math offline;
    draw the performance page's figures into ``_static`` (:func:`theorycheck_perf.ratio_figure`,
    :func:`theorycheck_perf.roofline_figure`)."""
    if exc is not None or app.builder.format != "html":
        return
    ratio_figure(RESULTS, Path(app.outdir) / "_static" / FIGURE)
    roofline_figure(RESULTS, Path(app.outdir) / "_static" / ROOFLINE_FIGURE)
    es5 = _local_mathjax()
    if es5 is None:
        return
    dest = Path(app.outdir) / "_static" / "mathjax"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(es5 / "tex-chtml.js", dest / "tex-chtml.js")
    shutil.copytree(
        es5 / "output" / "chtml" / "fonts" / "woff-v2",
        dest / "output" / "chtml" / "fonts" / "woff-v2",
        dirs_exist_ok=True,
    )


# ----------------------------------------------------------------------------------------------------------------
# Cross-references by object identity


def _import_path(path: str):
    """The object named by dotted ``path`` (module prefix imported, the rest by attribute), or ``None``."""
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return None
        return obj
    return None


_MISSING = object()


def documented_name(path: str, homes: dict[int, tuple[str, str]]) -> str | None:
    """The documented name of the object a dotted ``path`` names, when it is documented under another path: a
    function or class re-exported by a facade (``theorycheck.sampling.documents.sample_documents`` ->
    ``theorycheck.sampling.sample_documents``), a member of such a class, a constant exported by a facade.
    ``None`` for objects the site does not document (private helpers)."""
    if not path.startswith("theorycheck") or any(p.startswith("_") for p in path.split(".")[-1:]):
        return None
    parts = path.split(".")
    for k in range(len(parts), 1, -1):
        obj = _import_path(".".join(parts[:k]))
        if obj is None:
            continue
        rest = parts[k:]
        if isinstance(obj, types.ModuleType) and not rest:
            return obj.__name__  # a target when its module is documented (a facade, or a public submodule of one)
        if id(obj) in homes:
            return ".".join(homes[id(obj)]) + "".join(f".{r}" for r in rest)
        if not rest and not callable(obj) and not isinstance(obj, types.ModuleType):
            for facade in FACADES:  # constants: documented on every facade that exports them
                mod = importlib.import_module(facade)
                if parts[-1] in mod.__all__ and getattr(mod, parts[-1]) is obj:
                    return f"{facade}.{parts[-1]}"
    return None


def _on_missing_reference(app, env, node, contnode):
    """Resolve a Python reference to an object documented under another path (see :func:`documented_name`); a
    signature's annotation naming a private class of the package (:func:`_private`, the same rule as for the
    bases of a class) is shown as its name, unlinked: the site has no page for it."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    if _in_signature(node):
        obj = _import_path(target)
        if isinstance(obj, type) and _private(obj):
            return contnode
    modname = node.get("py:module") or ""
    prefixes = [modname.rsplit(".", k)[0] for k in range(modname.count(".") + 1)] if modname else []
    pagename = node["refdoc"].rsplit("/", 1)[-1]  # an API page is named after the object it documents
    page = _import_path(pagename) if pagename.startswith("theorycheck.") else None
    home = getattr(page, "__module__", None) if page is not None and not isinstance(page, types.ModuleType) else None
    if isinstance(home, str):
        prefixes.insert(0, home)  # the module defining the documented object: its docstring's own names
    homes = _cached_homes()
    for candidate in [f"{p}.{target}" for p in prefixes] + [target]:
        name = documented_name(candidate, homes)
        if name is None:
            continue
        domain = env.get_domain("py")
        found = domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)
        if found is not None:
            return found
    return None


def _in_signature(node) -> bool:
    """Whether ``node`` is part of an object's signature (an annotation), not of its description."""
    while node is not None:
        if isinstance(node, addnodes.desc_signature):
            return True
        node = node.parent
    return False


_ALIAS_REPR = re.compile(r"TypeAliasForwardRef\('([^']*)'\)")


def alias_names(text: str | None, aliases: dict[str, str]) -> str | None:
    """A signature with each type alias of ``autodoc_type_aliases`` written as its target: Sphinx 9 writes an
    alias inside a union (``ArrayLike | None``) as the repr ``TypeAliasForwardRef('~numpy.typing.ArrayLike')``
    and inside ``Callable[[int], ArrayLike]`` as the bare name."""
    if text is None:
        return None
    text = _ALIAS_REPR.sub(r"\1", text)
    for name, target in aliases.items():
        text = re.sub(rf"(?<![\w.~']){re.escape(name)}\b", target, text)
    return text


def _on_signature(app, what, name, obj, options, signature, return_annotation):
    aliases = app.config.autodoc_type_aliases
    return alias_names(signature, aliases), alias_names(return_annotation, aliases)


def _private(cls: type) -> bool:
    """A class of the package that the site does not document: private by name or by module, not re-exported."""
    path = f"{cls.__module__}.{cls.__qualname__}"
    return path.startswith("theorycheck") and "._" in f".{path}" and id(cls) not in _cached_homes()


def _drop_private_bases(app, name, obj, options, bases: list) -> None:
    """A class page lists documented bases only: an undocumented base of the package (``_Validated``,
    ``TokenMatrixShape`` of a private module) is replaced by its own bases."""
    out: list = []
    todo = list(bases)
    while todo:
        base = todo.pop(0)
        if isinstance(base, type) and _private(base):
            todo[:0] = [b for b in base.__bases__ if b is not object]
        elif base not in out:
            out.append(base)
    bases[:] = out or [object]


def _on_env_get_outdated(app, env, added, changed, removed) -> list[str]:
    """Pages whose text comes from outside ``docs/`` at read time are read again at every build: ``spec``
    (SPEC.md), ``performance`` and every page with a ``% measured:`` line (benchmarks/results/*.json)."""
    generated = ["spec", "performance"]
    for path in sorted(DOCS.rglob("*.md")):
        if "_build" not in path.parts and _MEASURED.search(path.read_text(encoding="utf-8")):
            generated.append(path.relative_to(DOCS).with_suffix("").as_posix())
    return [d for d in generated if d in env.found_docs and d not in added | changed]


def _on_env_before_read(app, env, docnames) -> None:
    env.theorycheck_spec_labels = spec_labels()


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _on_config_inited)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("build-finished", _on_build_finished)
    app.connect("env-before-read-docs", _on_env_before_read)
    app.connect("env-get-outdated", _on_env_get_outdated)
    app.connect("source-read", _on_source_read)
    app.connect("missing-reference", _on_missing_reference)
    app.connect("autodoc-process-bases", _drop_private_bases)
    app.connect("autodoc-process-signature", _on_signature)
    app.connect("autodoc-process-docstring", _on_docstring, priority=600)  # after numpydoc's own (500)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
