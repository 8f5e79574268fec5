"""The README's and the user guide's Python examples run as written (each page's blocks executed
in order in one namespace, in a temporary folder)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def test_the_examples_are_still_there():
    assert len(_blocks(ROOT / "README.md")) >= 1, "README lost its tour"
    assert sum(len(_blocks(p)) for p in PAGES) >= 8, "the guide lost its examples"


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for i, code in enumerate(_blocks(page)):
        try:
            exec(compile(code, f"{page.name} python block {i}", "exec"), ns)
        except Exception as exc:  # pragma: no cover - the message names the block
            raise AssertionError(f"{page.name} python block {i} failed: {exc!r}\n{code}") from exc


def test_relative_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)}: broken link {target}"
