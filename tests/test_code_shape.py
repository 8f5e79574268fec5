"""House rules that keep the package readable, checked on the source: small modules, short
functions (Numba kernels excepted: each has a short numpy reference tested against it), facades
with one import block, no ``noqa: E402``, no profiler dumps tracked."""

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = sorted((ROOT / "theorycheck").rglob("*.py"))
MAX_MODULE_LINES = 800  # one concept per module, hard cap 800 lines (issue #22)
MAX_FUNCTION_CODE_LINES = 60
#: Generated modules (never edited; a test checks each equals its generator's output): no module-size cap.
GENERATED = {ROOT / "theorycheck/solvers/attention/_interval_label_tiles.py"}


def _code_lines(lines: list[str], node: ast.AST) -> int:
    doc = None
    body = getattr(node, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        if isinstance(body[0].value.value, str):
            doc = (body[0].lineno, body[0].end_lineno)
    n = 0
    for i in range(node.lineno, node.end_lineno + 1):
        if doc and doc[0] <= i <= doc[1]:
            continue
        s = lines[i - 1].strip()
        if s and not s.startswith("#"):
            n += 1
    return n


def _is_numba_kernel(node) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


@pytest.mark.parametrize("path", PACKAGE, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path):
    src = path.read_text()
    lines = src.splitlines()
    assert len(lines) <= MAX_MODULE_LINES or path in GENERATED, f"{path.name}: {len(lines)} lines"
    long = [
        f"{node.name} (line {node.lineno}): {_code_lines(lines, node)} code lines"
        for node in ast.walk(ast.parse(src))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not _is_numba_kernel(node)
        and _code_lines(lines, node) > MAX_FUNCTION_CODE_LINES
    ]
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_CODE_LINES} lines of code: {long}"


def test_no_import_order_suppressions():
    files = [*PACKAGE, *(ROOT / "proofs_numeric").glob("*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in files if "noqa: E402" in p.read_text()]
    assert not offenders


@pytest.mark.parametrize("pkg", [".", "population", "solvers", "nn", "analysis", "report"])
def test_facades_have_one_import_block_and_one_all(pkg):
    """A facade computes nothing: one import block and ``__all__``; a lazy facade (theorycheck/_lazy.py) has,
    instead of the imports, an ``if TYPE_CHECKING:`` block of imports, a literal ``_LAZY`` table and the one line
    binding ``__getattr__, __dir__``."""
    tree = ast.parse((ROOT / "theorycheck" / pkg / "__init__.py").read_text())
    body = [n for n in tree.body if not isinstance(n, ast.Expr)]
    kinds = [type(n).__name__ for n in body]
    alls = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AugAssign)) and "__all__" in ast.unparse(n)]
    assert len(alls) == 1 and isinstance(alls[0], ast.Assign), f"{pkg}: __all__ must be assigned once"
    first_other = next((i for i, k in enumerate(kinds) if k not in ("ImportFrom", "Import")), len(kinds))
    assert all(k not in ("ImportFrom", "Import") for k in kinds[first_other:]), f"{pkg}: imports after code"
    assert set(kinds) <= {"ImportFrom", "Import", "Assign", "AnnAssign", "If"}, f"{pkg}: a facade computes nothing"
    for node in body[first_other:]:
        text = ast.unparse(node)
        if isinstance(node, ast.If):
            assert ast.unparse(node.test) == "TYPE_CHECKING" and not node.orelse, f"{pkg}: {text[:60]}"
            assert all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body), f"{pkg}: {text[:60]}"
        elif isinstance(node, ast.AnnAssign):
            assert ast.unparse(node.target) == "_LAZY" and node.value is not None, f"{pkg}: {text[:60]}"
            ast.literal_eval(node.value)  # a literal table, nothing computed
        elif node is not alls[0]:
            assert text == "__getattr__, __dir__ = lazy_facade(__name__, _LAZY)", f"{pkg}: {text[:60]}"


def test_no_profiler_dumps_tracked():
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    dumps = [f for f in tracked.splitlines() if f.endswith((".prof", ".pstats", ".lprof")) or f.endswith("pd.out")]
    assert not dumps
