"""No hidden imports in the analysis / report / real-data layer (issue #22 item 4): no import of the
package inside a function, and matplotlib imported in one place (``theorycheck/_mpl.py``, lazily)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "theorycheck"
FILES = sorted(
    [
        *(ROOT / "analysis").glob("*.py"),
        *(ROOT / "report").glob("*.py"),
        *(ROOT / "realdata").glob("*.py"),
        ROOT / "nn" / "probes.py",
        ROOT / "diagnostics.py",
        ROOT / "strategies.py",
    ]
)


def _function_imports(path: Path):
    """``(line, module)`` of every import statement inside a function body."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom):
                    out.append((sub.lineno, "." * sub.level + (sub.module or "")))
                elif isinstance(sub, ast.Import):
                    out.extend((sub.lineno, a.name) for a in sub.names)
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_import_inside_functions(path):
    bad = [(line, mod) for line, mod in _function_imports(path) if mod.startswith((".", "theorycheck"))]
    assert not bad, f"{path.name}: package imports inside functions at {bad}"


def test_matplotlib_is_imported_in_one_place():
    """No import statement names matplotlib: theorycheck/_mpl.py imports it through importlib (lazily)."""
    users = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(n.split(".")[0] == "matplotlib" for n in names):
                users.append(str(path.relative_to(ROOT)))
    assert not users, sorted(set(users))
