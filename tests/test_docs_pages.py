"""The site's generated pages (issue #39 item 6): the command-line reference made from the parsers, the BibTeX
made from CITATION.cff, the changelog and the Getting started page in the built site. The generators are tested
whenever Sphinx is installed; the HTML when the site is built (``docs/build.sh``; skipped otherwise)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from theorycheck.cli import build_parser
from theorycheck.cli.common import leaf_parsers

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"
built = pytest.mark.skipif(not (HTML / "index.html").is_file(), reason="docs not built (bash docs/build.sh)")


def _pages():
    pytest.importorskip("sphinx")
    yaml = pytest.importorskip("yaml")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import theorycheck_pages
    finally:
        sys.path.pop(0)
    return theorycheck_pages, yaml


def _flags() -> dict[str, set[str]]:
    return {name: {s for a in p._actions for s in a.option_strings} for name, p in leaf_parsers(build_parser()).items()}


def test_the_cli_reference_has_every_subcommand_and_flag():
    pages, _ = _pages()
    text = pages.cli_reference()
    sections = re.split(r"^## `theorycheck (.+)`$", text, flags=re.M)
    by_name = dict(zip(sections[1::2], sections[2::2], strict=True))
    flags = _flags()
    assert list(by_name) == list(flags)  # every leaf, in the order of --help
    for name, section in by_name.items():
        cells = set(re.findall(r"^\| `(--?[\w-]+)`", section, re.M)) | set(re.findall(r", `(--?[\w-]+)`", section))
        assert cells == flags[name] - {"-h", "--help"}, name


def test_help_text_is_escaped_for_markdown():
    pages, _ = _pages()
    assert pages._escape("a|b *c* <run> $X_1") == r"a\|b \*c\* \<run\> \$X\_1"


def test_bibtex_is_made_from_citation_cff():
    pages, yaml = _pages()
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    text = pages.bibtex()
    paper = cff["preferred-citation"]
    assert "@inproceedings{li2023transformers," in text and "@software{theorycheck," in text
    assert f"title = {{{paper['title']}}}" in text
    assert "author = {Li, Yuchen and Li, Yuanzhi and Risteski, Andrej}" in text
    assert f"pages = {{{paper['start']}--{paper['end']}}}" in text and "volume = {202}" in text
    assert "eprint = {2303.04245}" in text and "url = {https://proceedings.mlr.press/v202/li23p.html}" in text
    assert f"version = {{{cff['version']}}}" in text


@built
def test_the_built_site_has_the_new_pages():
    cli = (HTML / "cli.html").read_text(encoding="utf-8")
    for name, flags in _flags().items():
        assert f"theorycheck {name}" in cli, name
        assert all(f in cli for f in flags), name
    citing = (HTML / "citing.html").read_text(encoding="utf-8")
    assert "@inproceedings" in citing and "cff-version" in citing and "arxiv.org/abs/2303.04245" in citing
    assert "Unreleased" in (HTML / "changelog.html").read_text(encoding="utf-8")
    index = (HTML / "index.html").read_text(encoding="utf-8")
    for page in ("getting-started.html", "cli.html", "changelog.html", "citing.html"):
        assert f'href="{page}' in index, page
    assert "proceedings.mlr.press/v202/li23p.html" in index and "arxiv.org/abs/2303.04245" in index
