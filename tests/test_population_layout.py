"""Layout rules of ``theorycheck.population`` (issue #22), checked on the source: no model-type switch
(routes are chosen by ``functools.singledispatch`` registrations), no package import inside a function,
no import cycle between its modules, no ``_general_*`` mirror modules, models checked only at entries."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "theorycheck" / "population"
MODULES = {p.stem: ast.parse(p.read_text()) for p in sorted(ROOT.glob("*.py"))}


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_mirror_modules():
    assert not [name for name in MODULES if name.startswith("_general")]


def test_no_type_switch_on_the_model():
    bad = []
    for name, tree in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "is_general":
                bad.append(f"{name}: is_general")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                kinds = ast.unparse(node.args[1])
                if "TopicModel" in kinds:
                    bad.append(f"{name} (line {node.lineno}): isinstance(..., {kinds})")
    assert not bad


def test_no_package_import_inside_a_function():
    bad = [
        f"{name}.{fn.name} (line {node.lineno})"
        for name, tree in MODULES.items()
        for fn in _functions(tree)
        for node in ast.walk(fn)
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("theorycheck"))
    ]
    assert not bad


def test_no_import_cycle_between_population_modules():
    graph = {
        name: {
            node.module
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in MODULES
        }
        for name, tree in MODULES.items()
    }
    state: dict[str, int] = {}

    def visit(n, path):
        if state.get(n) == 1:
            raise AssertionError(f"import cycle: {' -> '.join([*path, n])}")
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in sorted(graph[n]):
            visit(m, [*path, n])
        state[n] = 2

    for n in sorted(graph):
        visit(n, [])


def test_models_are_checked_only_by_public_functions():
    """``check_models`` runs at the public entry points; the private routes trust their arguments
    (``_check`` of ``_alpha_beta`` and ``_check_symmetric`` of ``_symmetry`` are the entries' shared checks)."""
    entries = {"_check", "_check_symmetric"}
    bad = [
        f"{name}.{fn.name}"
        for name, tree in MODULES.items()
        for fn in _functions(tree)
        if fn.name.startswith("_") and fn.name not in entries
        for node in ast.walk(fn)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_models"
    ]
    assert not bad
