"""The performance page's generator (``docs/_ext/theorycheck_perf.py``) against the results files it reads:
one summary row per file, every number of the summary found at its path in the file, no table wider than the
page, no reference to the internal tracker, the raw records equal to the files; and the built page (skipped
without a build).
"""

import html as htmllib
import json
import math
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
HTML = ROOT / "docs" / "_build" / "html" / "performance.html"
FILES = sorted(RESULTS.glob("*.json"))
#: A reference to the issue tracker: "issue 25", "Issue #37", "issue-25", "#37".
TRACKER = re.compile(r"(?i)\bissue[ _#-]*\d+|#\d+")
_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
_SCALE = {"": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9, "pct": 100.0, "gb": 1e-9}


def _perf():
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import theorycheck_perf
    finally:
        sys.path.pop(0)
    return theorycheck_perf


def _at(data, path: str):
    """The value at ``path`` (``/``-joined keys and indices), walked here independently of the generator."""
    for part in path.split("/"):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def _parse(text: str) -> float:
    """A number as :func:`fmt_number` writes it, read back: ``9,391``, ``60.3``, ``5.01 × 10⁻¹³``."""
    text = text.replace(",", "")
    if " × 10" in text:
        mantissa, exponent = text.split(" × 10")
        return float(mantissa) * 10.0 ** int(exponent.translate(_SUPERSCRIPT))
    return float(text)


def _table_rows(md: str) -> list[list[str]]:
    """Cells of every Markdown table line (escaped pipes are not separators)."""
    rows = []
    for line in md.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


@given(st.floats(min_value=1e-18, max_value=1e8) | st.floats(min_value=-1e8, max_value=-1e-18))
def test_fmt_number_keeps_three_significant_digits(x):
    perf = _perf()
    text = perf.fmt_number(x)
    assert re.fullmatch(r"-?[\d,]+(\.\d+)?( × 10⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?", text), text
    assert math.isclose(_parse(text), x, rel_tol=5e-3), (x, text)  # 3 significant digits: within half a unit
    digits = re.sub(r"[^\d]", "", text.split(" × ")[0]).lstrip("0")
    assert len(digits.rstrip("0")) <= 3 or abs(x) >= 1000, (x, text)  # never more digits than it knows


def test_fmt_number_examples():
    perf = _perf()
    assert perf.fmt_number(60.34658645099999) == "60.3"
    assert perf.fmt_number(9390.720303595002) == "9,391"
    assert perf.fmt_number(13586) == "13,586"
    assert perf.fmt_number(5.014877402231832e-13) == "5.01 × 10⁻¹³"
    assert perf.fmt_number(24.450738969075406) == "24.5"
    assert perf.fmt_number(0.0) == "0" and perf.fmt_number(True) == "yes" and perf.fmt_number(None) == "–"
    assert perf.fmt_number(0.96177024601, digits=4) == "0.9618"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_summary_numbers_are_read_from_the_results_file(path):
    perf = _perf()
    data = json.loads(path.read_text())
    row = perf.summary_row(path, data)
    bench = perf.BENCHMARKS.get(path.name)
    assert bench is not None, f"{path.name}: no entry in theorycheck_perf.BENCHMARKS (title, topic, headline)"
    assert row.headline, f"{path.name}: a path of the headline template is missing from the file"
    for template, text in [(bench.headline, row.headline)] + [("{" + p + "}", row.load) for p in bench.load]:
        rest = text
        for p, unit in perf.placeholders(template):
            value = _at(data, p)
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (path.name, p, value)
            shown = perf.fmt_number(value * _SCALE[unit] if unit else value)
            assert shown in text, (path.name, p, value, text)
            assert math.isclose(_parse(shown), value * _SCALE[unit], rel_tol=5e-3, abs_tol=1e-300)
            rest = rest.replace(shown, "", 1)
        if template == bench.headline:
            assert not re.search(r"\d", rest), f"{path.name}: a number not read from the file in {text!r}"


def test_every_results_file_has_one_summary_row_and_a_section():
    perf = _perf()
    md = perf.performance_page(RESULTS)
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in _table_rows(summary)[2:]]  # after the header and the --- line
    assert len(rows) == len(FILES) > 0
    titles = [re.fullmatch(r"\[(.+)\]\(#(perf-[a-z0-9-]+)\)", r[0]) for r in rows]
    assert all(titles), rows
    for path in FILES:
        title = perf.BENCHMARKS[path.name].title
        anchor = next(m[2] for m in titles if m[1] == title)
        assert f"({anchor})=\n### {title}\n" in md, f"{path.name}: the summary links to its section"
        assert f"<summary>Raw record: <code>benchmarks/results/{path.name}</code></summary>" in md
    assert md.count("<details>") == md.count("</details>") == len(FILES)


def test_an_unknown_results_file_gets_a_row_and_its_own_description(tmp_path):
    perf = _perf()
    (tmp_path / "new_bench.json").write_text(
        '{"what": "a new benchmark (issue 41)", "headers": ["case", "a_s"], "rows": [["x", 1.23456]]}'
    )
    md = perf.performance_page(tmp_path)
    assert "| [New bench](#perf-new-bench) | a new benchmark | see its section |" in md
    assert "## Other results" in md and "| x | 1.235 |" in md
    assert perf.performance_page(tmp_path / "empty").startswith("No benchmark results")


def test_no_tracker_references_in_the_page():
    perf = _perf()
    md = perf.performance_page(RESULTS)
    assert not TRACKER.search(md), TRACKER.search(md)
    assert perf.scrub("theorycheck verify --full (issue 25 item 4): every check") == (
        "theorycheck verify --full: every check"
    )
    assert perf.scrub("baseline 802c915 (before issue 39), same period") == "baseline 802c915, same period"
    assert perf.scrub("Issue 25 item 6, final run 2026-11-26") == "Final run 2026-11-26"
    assert perf.scrub("see #37 for the profile") == "see for the profile"
    for text in ("kernel_GB/s", "load 14-19", "commit a68a569", "20 x 13,586"):
        assert perf.scrub(text) == text


def test_no_table_wider_than_the_page():
    perf = _perf()
    md = perf.performance_page(RESULTS)
    widths = [len(r) for r in _table_rows(md)]
    assert widths and max(widths) <= perf.MAX_COLUMNS
    # a wide table of few rows is transposed: one column per record, one row per quantity
    few = [{"case": f"c{i}", **{f"k{j}": 10 * i + j for j in range(9)}} for i in range(3)]
    rows = _table_rows("\n".join(perf.markdown_table(few)))
    assert rows[0] == ["case", "c0", "c1", "c2"] and len(rows) == 2 + 9
    assert rows[2 + 4] == ["k4", "4", "14", "24"]
    # one of many rows is split: the first column repeated, every value shown once
    many = [{"case": f"c{i}", **{f"k{j}": 100 * i + j for j in range(9)}} for i in range(8)]
    rows = _table_rows("\n".join(perf.markdown_table(many)))
    assert max(len(r) for r in rows) <= perf.MAX_COLUMNS
    values = [c for r in rows if re.fullmatch(r"c\d+", r[0]) for c in r[1:]]
    expected = [f"{100 * i + j:,}" for i in range(8) for j in range(9)]
    assert sorted(values, key=lambda v: int(v.replace(",", ""))) == expected


def test_raw_records_hold_the_files_numbers():
    perf = _perf()
    md = perf.performance_page(RESULTS)
    blocks = re.findall(r"<code>benchmarks/results/(\S+)</code></summary>\n\n```json\n(.*?)\n```", md, re.S)
    assert sorted(name for name, _ in blocks) == [p.name for p in FILES]

    def numbers(x):
        if isinstance(x, dict):
            return [(k, n) for k, v in x.items() for n in numbers(v)]
        if isinstance(x, list):
            return [n for v in x for n in numbers(v)]
        return [] if isinstance(x, str) else [x]

    for name, block in blocks:
        assert numbers(json.loads(block)) == numbers(json.loads((RESULTS / name).read_text())), name


def test_figure_is_drawn_from_the_results(tmp_path):
    perf = _perf()
    out = tmp_path / "f.png"
    assert perf.ratio_figure(RESULTS, out) and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not perf.ratio_figure(tmp_path / "empty", tmp_path / "g.png") and not (tmp_path / "g.png").exists()
    for _, name, p in perf.SPEEDUPS:  # every bar is a ratio recorded in a results file
        assert _at(json.loads((RESULTS / name).read_text()), p) > 1, (name, p)


@pytest.mark.skipif(not HTML.is_file(), reason="docs not built (bash docs/build.sh)")
def test_built_performance_page():
    html = HTML.read_text(encoding="utf-8")
    src = re.search(r'<img src="(_static/[^"]+\.png)"', html)
    assert src and (HTML.parent / src[1]).is_file(), "the figure is in the build"
    assert html.count("<details>") == len(FILES)
    visible = htmllib.unescape(re.sub(r"<(script|style|pre)\b.*?</\1>|<[^>]+>", " ", html, flags=re.S))
    assert not TRACKER.search(visible), TRACKER.search(visible)
    for path in FILES:  # every summary link resolves to a section of the page
        anchor = "perf-" + re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")
        assert f'href="#{anchor}"' in html and f'id="{anchor}"' in html, anchor


def test_no_number_typed_by_hand_in_the_generated_text():
    """Headlines, facts, figure labels and topic introductions hold numbers only as paths into the files."""
    perf = _perf()
    texts = [t for b in perf.BENCHMARKS.values() for t in (b.headline, *b.facts)]
    texts += [label for label, _, _ in perf.SPEEDUPS] + [intro for _, intro in perf.TOPICS.values()]
    for text in texts:
        assert not re.search(r"\d", re.sub(r"\{[^{}]+\}", "", text)), text
