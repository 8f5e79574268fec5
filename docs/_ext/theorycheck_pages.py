"""Sphinx extension: the site's pages generated from the code and the repository's files at build time.

- **Command line.** A line ``% cli-reference`` of a Markdown page (``cli.md``) is replaced by the reference of
  every ``theorycheck`` subcommand, read from the argparse parsers (:func:`theorycheck.cli.build_parser`): its
  description, usage and a table of its flags (their help, defaults included, as ``--help`` prints it). No
  hand-written copy of a flag can drift.
- **Citing.** A line ``% bibtex`` (``citing.md``) is replaced by BibTeX entries of the paper and of the software,
  made from ``CITATION.cff`` (the one source of the citation metadata).

Both pages are read again at every build (their text comes from outside ``docs/``).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import yaml
from sphinx.application import Sphinx

from theorycheck.cli import build_parser
from theorycheck.cli.common import leaf_parsers

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent

_CLI = re.compile(r"^% cli-reference\s*$", re.M)
_BIBTEX = re.compile(r"^% bibtex\s*$", re.M)
#: Characters of a help text that Markdown (MyST, with dollar math) would read as markup.
_MARKUP = re.compile(r"([\\`*_\[\]<>|$])")


def _escape(text: str) -> str:
    return _MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def _flag_cell(action: argparse.Action) -> str:
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.nargs != 0 and action.option_strings:
        metavar = action.metavar or (
            "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
        )
        names += f" `{metavar}`"
    return names


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return _escape(parser._get_formatter()._expand_help(action))  # %(default)s etc. as --help prints them


def cli_reference() -> str:
    """MyST Markdown: one section per ``theorycheck`` subcommand (leaf parser), in the order of ``--help``; usage
    lines wrapped at 100 columns whatever the terminal of the build."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps usage at the terminal's width
    try:
        return _cli_reference()
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def _cli_reference() -> str:
    top = build_parser()
    out = [
        "```text",
        top.format_usage().strip(),
        "```",
        "",
        _escape(top.description or ""),
        "",
        "Every subcommand also takes `-h`/`--help`; `theorycheck --version` prints the version.",
        "",
    ]
    for name, parser in leaf_parsers(top).items():
        out += [f"## `theorycheck {name}`", "", _escape(parser.description or ""), ""]
        out += ["```text", parser.format_usage().strip(), "```", ""]
        rows = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        if rows:
            out += ["| argument | meaning (and default) |", "|---|---|"]
            out += [f"| {_flag_cell(a)} | {_help(parser, a)} |" for a in rows]
            out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------- citing
def _bib_authors(authors: list[dict]) -> str:
    names = []
    for a in authors:
        if "family-names" in a:
            names.append(f"{a['family-names']}, {a['given-names']}")
        else:
            names.append("{" + a["name"] + "}")
    return " and ".join(names)


def _entry(kind: str, key: str, fields: dict) -> list[str]:
    body = [f"  {k} = {{{v}}}," for k, v in fields.items() if v not in (None, "")]
    return [f"@{kind}{{{key},", *body, "}"]


def bibtex(cff_path: Path = ROOT / "CITATION.cff") -> str:
    """BibTeX entries of the paper (``preferred-citation``) and of the software, from ``CITATION.cff``."""
    cff = yaml.safe_load(cff_path.read_text(encoding="utf-8"))
    paper = cff["preferred-citation"]
    arxiv = next((i for i in paper.get("identifiers", []) if "arxiv" in str(i.get("value", "")).lower()), None)
    pages = f"{paper['start']}--{paper['end']}" if "start" in paper and "end" in paper else None
    first = paper["authors"][0]["family-names"].lower()
    entries = _entry(
        "inproceedings",
        f"{first}{paper['year']}transformers",
        {
            "title": paper["title"],
            "author": _bib_authors(paper["authors"]),
            "booktitle": paper.get("collection-title"),
            "series": "Proceedings of Machine Learning Research",
            "volume": paper.get("volume"),
            "pages": pages,
            "publisher": paper.get("publisher", {}).get("name"),
            "year": paper["year"],
            "url": paper.get("url"),
            "eprint": arxiv["value"].rsplit("/", 1)[-1] if arxiv else None,
            "archivePrefix": "arXiv" if arxiv else None,
        },
    )
    entries += [""] + _entry(
        "software",
        "theorycheck",
        {
            "title": cff["title"],
            "author": _bib_authors(cff["authors"]),
            "version": cff["version"],
            "license": cff.get("license"),
            "url": cff.get("url") or cff.get("repository-code"),
        },
    )
    return "\n".join(["```bibtex", *entries, "```"])


# ------------------------------------------------------------------------------------------------------ Sphinx
def _on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    source[0] = _CLI.sub(lambda m: cli_reference(), source[0])
    source[0] = _BIBTEX.sub(lambda m: bibtex(), source[0])


def _on_env_get_outdated(app, env, added, changed, removed) -> list[str]:
    """The pages with a marker are read again at every build (the parsers or CITATION.cff may have changed)."""
    out = []
    for path in sorted(DOCS.rglob("*.md")):
        if "_build" not in path.parts:
            text = path.read_text(encoding="utf-8")
            if _CLI.search(text) or _BIBTEX.search(text):
                out.append(path.relative_to(DOCS).with_suffix("").as_posix())
    return [d for d in out if d in env.found_docs and d not in added | changed]


def setup(app: Sphinx) -> dict:
    app.connect("source-read", _on_source_read, priority=400)  # before theorycheck_docs links the § citations
    app.connect("env-get-outdated", _on_env_get_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
