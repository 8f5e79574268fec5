"""``theorycheck.spec`` and ``theorycheck spec [SECTION]``: the math reference SPEC.md by section, read from the
installed package data."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from theorycheck import spec
from theorycheck.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_read_from_the_package_data():
    assert spec.spec_text() == (ROOT / "theorycheck" / "SPEC.md").read_text(encoding="utf-8")


def test_sections_numbers_and_titles():
    s = spec.sections()
    assert {"0", "1", "1.1", "2.1", "4.0", "4.1", "4.1 D3", "4.2", "4.3", "4.3(a)", "4.5", "11.7"} <= set(s)
    assert s["4.3"] == "Theorem 3 — stage 2: optimal attention given W^V"
    assert s["4.1 D1"].startswith("all minimizers") and s["1"] == "Data distribution"
    assert all(title for title in s.values())


@pytest.mark.parametrize("number", list(spec.sections()))
def test_every_listed_section_is_printable(number):
    text = spec.section(number)
    assert text.splitlines()[0].lstrip("#").strip().startswith(f"§{number}")
    assert text.endswith("\n") and len(text.splitlines()) >= 1


def test_a_section_holds_its_subsections_and_stops_at_the_next():
    text = spec.section("4.3")
    assert text.startswith("## §4.3 Theorem 3")
    assert "### §4.3(a)" in text and "### §4.3(b)" in text
    assert "§4.4 Assumptions" not in text
    whole = spec.section("4")
    assert whole.startswith("# §4. Theory") and text in whole and "# §5." not in whole


def test_numbers_as_cited_or_typed():
    assert spec.section("§4.3") == spec.section("4.3") == spec.section("4.3.")
    assert spec.section("4.1D3") == spec.section("4.1 d3") == spec.section("4.1 D3")
    assert spec.section("4.3a") == spec.section("4.3(a)")


def test_unknown_section_names_the_closest():
    with pytest.raises(ValueError, match=r"no section §4\.31 .*closest: §4\.3,"):
        spec.section("4.31")
    with pytest.raises(ValueError, match=r"closest: §11\.9"):
        spec.section("11.91")


def test_every_citation_in_the_package_resolves():
    """Every "SPEC §x.y" in the package's code resolves from the packaged copy (not the repository path)."""
    cited = set()
    for f in (ROOT / "theorycheck").rglob("*.py"):
        for m in re.finditer(r"\bSPEC\b[^\n]*", f.read_text()):
            cited |= set(re.findall(r"§\s?(\d+(?:\.\d+)?)", m.group(0)))
    assert len(cited) > 20
    for number in sorted(cited):
        spec.section(number)


def test_cli_spec_section(capsys):
    assert main(["spec", "4.3", "--raw"]) == 0
    out = capsys.readouterr().out
    assert out == spec.section("4.3") and out.startswith("## §4.3 Theorem 3")
    assert main(["spec", "4.3"]) == 0  # rendered for a terminal (tests/test_spec_render.py)
    assert capsys.readouterr().out.startswith("§4.3 Theorem 3")


def test_cli_spec_lists_sections(capsys):
    assert main(["spec"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(spec.sections())
    assert any(re.match(r"§4\.3\s+Theorem 3", ln) for ln in lines)


def test_cli_spec_unknown_is_one_line_exit_2(capsys):
    assert main(["spec", "4.9"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("theorycheck spec: error: no section §4.9") and "§4.5" in err[0]


def test_module_entry_point_prints_a_section():
    res = subprocess.run(
        [sys.executable, "-m", "theorycheck.cli", "spec", "4.3"], capture_output=True, text=True, check=True
    )
    assert res.stdout.startswith("§4.3 Theorem 3")
