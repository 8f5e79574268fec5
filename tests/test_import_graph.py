"""The package's import structure (issue #22 item 4; DESIGN.md "Layout").

Read from the source with ``ast`` (nothing is imported):

- no package-internal import inside a function: every dependency between modules is visible
  at the top of the module;
- optional third-party libraries are imported in their one documented place each
  (:data:`OPTIONAL_HOMES`), never elsewhere;
- the module-level import graph of ``theorycheck`` has no cycles (Tarjan's strongly connected
  components), so data flows one way: models -> (sampling | population) -> (solvers | problems |
  nn) -> analysis -> (report, cli);
- deferred imports are declared at the top of their module too, never hidden in a function: a lazy facade's
  table ``_LAZY`` (:mod:`theorycheck._lazy`) and a CLI parser's ``IMPLEMENTATION`` (the module its command
  imports when it runs) name existing modules and go down the layers like any import (they are not edges of
  the cycle check: nothing is imported while the module itself imports).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "theorycheck"

#: optional third-party library -> the modules allowed to import it (its documented home)
OPTIONAL_HOMES: dict[str, set[str]] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """Absolute ``theorycheck`` modules an import statement in ``module`` loads (empty for others)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "theorycheck"]
    if node.level:
        base = module.split(".")
        if not _is_package(module):
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "theorycheck":
        return []
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
    if len(subs) == len(node.names):  # `from pkg import submodule`: the submodule (pkg is its parent)
        return subs
    return [target, *subs]


def _walk(tree: ast.AST, in_function: bool = False):
    for node in ast.iter_child_nodes(tree):
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
        yield from _walk(node, inner)


def _imports():
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, in_function in _walk(tree):
            if isinstance(node, ast.If) or getattr(node, "_type_checking", False):
                continue
            yield name, node, in_function


def _type_checking_lines(path: Path) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (not executed: not edges)."""
    tree = ast.parse(path.read_text())
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    lines.add(sub.lineno)
    return lines


def test_no_package_internal_import_inside_a_function():
    found = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}"
        for m, node, in_function in _imports()
        if in_function and _resolve(m, node)
    ]
    assert not found, f"{len(found)} package-internal imports inside functions:\n" + "\n".join(found)


def test_optional_libraries_are_imported_in_their_one_home():
    found = []
    for m, node, _ in _imports():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for n in names:
            top = n.split(".")[0]
            if node.__class__ is ast.ImportFrom and node.level:
                continue
            if top in OPTIONAL_HOMES and m not in OPTIONAL_HOMES[top]:
                found.append(f"{m}:{node.lineno}: {top} (home: {sorted(OPTIONAL_HOMES[top])})")
    assert not found, "\n".join(found)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        skip = _type_checking_lines(path)
        tree = ast.parse(path.read_text())
        for node, in_function in _walk(tree):
            if in_function or node.lineno in skip:
                continue
            for target in _resolve(m, node):
                while target not in MODULES and "." in target:  # `from pkg.mod import name`
                    target = target.rsplit(".", 1)[0]
                if target in MODULES and target != m:
                    graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_resolver_reads_relative_imports():
    mod = next(m for m in MODULES if m.startswith("theorycheck.population.") and not _is_package(m))
    node = ast.parse("from ..models import TopicModel").body[0]
    assert _resolve(mod, node) == ["theorycheck.models"]
    node = ast.parse("from . import _moments").body[0]
    assert "theorycheck.population._moments" in _resolve(mod, node)


def test_module_import_graph_has_no_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


#: The layers, lowest first (README "Architecture"): a module imports only from its own layer or
#: lower ones. Utilities at the bottom, the facade ``theorycheck/__init__`` at the top.
LAYERS = [
    {
        "_validate",
        "_memory",
        "_version",
        "_threads",
        "_progress",
        "_alloc",
        "_io",
        "_dask",
        "_mpl",
        "_interrupt",
        "_lazy",
        "_plaintext",
        "spec",
        "diagnostics",
    },
    {"models"},
    {"population"},
    {"sampling"},
    {"solvers"},
    {"problems"},
    {"analysis", "strategies"},
    {"nn"},
    {"report"},
    {"realdata"},
    {"cli"},
    {"<facade>"},
]


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "<facade>"
    for i, members in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"{module}: its top-level package {top!r} is in no layer of LAYERS")


def test_imports_only_go_down_the_layers():
    up = [
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m, targets in _graph().items()
        for t in targets
        if _layer(t) > _layer(m)
    ]
    assert not up, "imports up the layers:\n" + "\n".join(sorted(up))


def _absolute(package: str, name: str) -> str:
    """``name`` (``".models"``, ``"..x"`` or absolute) resolved against the package ``package``."""
    if not name.startswith("."):
        return name
    level = len(name) - len(name.lstrip("."))
    base = package.split(".")[: len(package.split(".")) - (level - 1)]
    rest = name[level:]
    return ".".join(base + ([rest] if rest else []))


def _deferred_edges() -> dict[str, set[str]]:
    """Module -> the modules its ``_LAZY`` table or its ``IMPLEMENTATION`` names (read with ``ast``)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        package = m if _is_package(m) else m.rsplit(".", 1)[0]
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            name = getattr(target, "id", None)
            if name == "_LAZY" and isinstance(value, ast.Dict):
                for entry in value.values:
                    assert isinstance(entry, ast.Tuple), f"{m}: a _LAZY entry is a (module, attribute) tuple"
                    edges[m].add(_absolute(package, ast.literal_eval(entry.elts[0])))
            elif name == "IMPLEMENTATION" and isinstance(value, ast.Constant):
                edges[m].add(value.value)
    return edges


def test_deferred_imports_name_modules_and_go_down_the_layers():
    edges = _deferred_edges()
    assert edges["theorycheck"] >= {"theorycheck.models", "theorycheck.population", "theorycheck.solvers"}
    assert edges["theorycheck.cli.parsers.verify"] == {"theorycheck.cli.verify"}
    missing = [f"{m} -> {t}" for m, ts in edges.items() for t in ts if t not in MODULES]
    assert not missing, "deferred imports of modules that do not exist:\n" + "\n".join(missing)
    up = [f"{m} defers {t}" for m, ts in edges.items() for t in ts if _layer(t) > _layer(m)]
    assert not up, "deferred imports up the layers:\n" + "\n".join(sorted(up))


def test_absolute_reads_relative_names():
    assert _absolute("theorycheck", ".models") == "theorycheck.models"
    assert _absolute("theorycheck.nn", ".config") == "theorycheck.nn.config"
    assert _absolute("theorycheck.nn", "..models") == "theorycheck.models"
    assert _absolute("theorycheck.nn", "theorycheck.x") == "theorycheck.x"
