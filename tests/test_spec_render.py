"""``theorycheck spec`` for a terminal (issue #39 item 2): LaTeX as Unicode text, Markdown tables aligned,
headings underlined, nothing of the source lost; ``--raw`` prints the source. Checked on every section of the
packaged SPEC.md, against properties computed here from the source (not from the renderer)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

import pytest

from theorycheck import spec
from theorycheck._plaintext import SYMBOLS, latex, render
from theorycheck.cli import main

SECTIONS = list(spec.sections())


@pytest.mark.parametrize(
    ("tex", "text"),
    [
        (r"\alpha + \beta", "α + β"),
        (r"\sum_{x} p(x)", "Σ_x p(x)"),
        (r"\frac{a}{b}", "a/b"),
        (r"\frac{a + 1}{b c}", "(a + 1)/(b c)"),
        (r"\frac{1}{a}\Big(1 - x\Big)", "(1/a)(1 - x)"),  # not 1/a(1 - x)
        (r"e^{\beta}", "e^β"),
        (r"e^{S[x,y]}", "e^(S[x,y])"),
        (r"x^{2} + y^{-3}", "x² + y⁻³"),
        (r"B_0 + W^\top", "B₀ + Wᵀ"),
        (r"\lambda_{\max}", "λ_max"),
        (r"\sum_{t\in S}", "Σ_(t ∈ S)"),
        (r"\mathbb{R}^{V_1}", "ℝ^V₁"),
        (r"\lVert o \rVert^2", "‖o‖²"),
        (r"\bar{x}", "x\u0304"),
        (r"\sqrt{d_a}", "√d_a"),
        (r"\mathbf{1}_W", "𝟏_W"),
        (r"p_c\, p_S", "p_c p_S"),
        (r"\operatorname{softmax}(o)", "softmax(o)"),
        (r"a \le b \ne c", "a ≤ b ≠ c"),
        (r"\unknowncommand{x}", r"\unknowncommand{x}"),  # kept visibly, never dropped
    ],
)
def test_latex_examples(tex, text):
    assert latex(tex).strip() == text


def test_aligned_environment_aligns_its_columns():
    out = latex(r"\begin{aligned} a &= 1 \\ bbb &= 22 && \text{(note)} \end{aligned}").splitlines()
    assert [ln.index("=") for ln in out] == [4, 4]
    assert out[1].rstrip().endswith("(note)")


# ---------------------------------------------------------------------------------------------- every section
def _width(line: str) -> int:
    """Terminal columns, written independently of the renderer: combining marks take none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _alnum(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if c.isalnum())  # accents dropped


def _source_alnum(md: str) -> str:
    """The letters and digits of the source a reader must find in the output: markup and LaTeX command names
    (including environment names) removed, everything else in order."""
    md = re.sub(r"\\(begin|end)\{\w+\}", " ", md)
    md = re.sub(r"\\[A-Za-z]+", " ", md)
    return _alnum(md)


def _is_subsequence(small: str, big: str) -> bool:
    it = iter(big)
    return all(c in it for c in small)


def _outside_code(text: str) -> str:
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("number", SECTIONS)
@pytest.mark.parametrize("width", [None, 80])
def test_every_section_renders(number, width):
    source = spec.section(number)
    out = render(source, width=width)
    # no LaTeX command left that has a mapping (outside code spans; SPEC.md has no fenced code)
    left = set(re.findall(r"\\([A-Za-z]+)", _outside_code(out)))
    assert not left & set(SYMBOLS), left
    assert not left, f"unconverted commands {left}"
    assert "$" not in _outside_code(out)
    # tables aligned: every line of a block of table lines has the same width
    lines = out.splitlines()
    rules = [i for i, ln in enumerate(lines) if re.fullmatch(r"─+(┼─+)*", ln)]
    assert len(rules) == sum(1 for ln in source.splitlines() if re.match(r"^\s*\|\s*:?-{3,}", ln))
    for i in rules:
        block = [lines[i - 1]]
        j = i + 1
        while j < len(lines) and "│" in lines[j]:
            block.append(lines[j])
            j += 1
        assert len({_width(ln) for ln in [*block, lines[i]]}) == 1, (number, block)
        if width is not None:
            assert _width(lines[i]) <= max(width, 12 * lines[i].count("┼") + 12 + 3 * lines[i].count("┼"))
    # nothing lost: the source's letters and digits appear, in order, in the output (a wrapped table cell
    # continues on the row's next line, after the other cells: there, each character as often)
    if width is None:
        assert _is_subsequence(_source_alnum(source), _alnum(out)), number
    else:
        assert not Counter(_source_alnum(source)) - Counter(_alnum(out)), number
    # the heading keeps its number
    assert out.splitlines()[0].startswith(f"§{number.split()[0]}")


def test_the_subsequence_check_sees_a_dropped_word():
    source = spec.section("4.3")
    out = render(source).replace("asymptotic", "")
    assert not _is_subsequence(_source_alnum(source), _alnum(out))


def test_bold_and_headings_on_a_colour_terminal():
    out = render("## §9 Title\n**strong** words\n", color=True)
    assert out.splitlines()[0] == "\x1b[1m§9 Title\x1b[0m" and set(out.splitlines()[1]) == {"━"}
    assert "\x1b[1mstrong\x1b[0m words" in out
    assert render("**strong** words\n") == "strong words\n"


def test_cli_spec_renders_and_raw_prints_the_source(capsys):
    assert main(["spec", "4.3"]) == 0
    out = capsys.readouterr().out
    assert "§4.3" in out and "$" not in _outside_code(out) and "α" in out and "\\alpha" not in out
    assert main(["spec", "4.3", "--raw"]) == 0
    assert capsys.readouterr().out == spec.section("4.3")
