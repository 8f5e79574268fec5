"""The README's Python examples run as written (executed in order, in a temporary folder)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4, "README lost its examples"
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"README.md python block {i}", "exec"), ns)
        except Exception as exc:  # pragma: no cover - the message names the block
            raise AssertionError(f"README python block {i} failed: {exc!r}\n{code}") from exc
