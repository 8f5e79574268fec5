r"""The solver protocol and the built-in solvers.

A solver is a callable ``solver(oracle, budget, callback) -> x``:

- ``oracle`` is a sealed :class:`~theorycheck.problems._oracle.Oracle`: ``f``, ``grad``, ``hvp`` (or ``None``),
  ``shape``, ``n``, ``x0`` (this run's start), ``start(seed)``, ``constraint``, ``project(x)``,
  ``violation(x)``, and the problem statement ``name``, ``family``, ``model``, ``size``, ``V1``. Every
  evaluation is counted and budgeted by the oracle itself; once the budget is spent it raises
  :class:`BudgetExhausted`. It exposes nothing else: no optimum, certificate or reference point;
- ``budget`` is a :class:`Budget` (``max_seconds``, ``max_evals``, ``expired()``, ``remaining()``);
- ``callback(x)`` is a progress signal: the harness keeps the last reported iterate as the answer of a run
  the budget stops, and credits nothing from it (times and evaluation counts to a target come only from
  points the oracle evaluated, and the run's answer);
- the return value is the solver's answer, an array of ``oracle.shape``; or the solver is a generator
  function that ``yield``\ s its iterates (the harness stops it once the budget is spent) and whose answer
  is its return value, or its last iterate if it returns nothing.

A solver may carry ``applies(info) -> (bool, reason)`` (benchopt's ``skip``; ``info`` a
:class:`~theorycheck.problems._oracle.ProblemInfo`): where it does not apply the run is recorded as
``not applicable`` (an unsolved instance in every profile). It may carry ``prepare()``, called once before
its first run outside the clock (imports of heavy libraries). User solvers: ``path/to/file.py:function`` or
an entry point in the group ``theorycheck.solvers``; the solver's module is imported before the clock starts.
A solver may of course import theorycheck and solve the problem with the library's own methods inside its
clock (``name`` and ``size`` say which problem it is): that is what ``closed-form``, ``lstsq`` and the
``cvxpy-*`` solvers do.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.optimize

from .._version import __version__
from ..solvers import optimal_embedding_gram, optimal_value_matrix
from ._oracle import Budget, BudgetExhausted
from ._registry import get
from ._value import dense

__all__ = ["Budget", "BudgetExhausted", "SOLVERS", "load_solver", "solver_names", "ENTRY_POINT_GROUP",
           "check_solver", "solver_fingerprint", "display_name", "code_digest"]  # fmt: skip

ENTRY_POINT_GROUP = "theorycheck.solvers"
#: largest V1 given to cvxpy: the QP in W (V1^2 variables) and the dense PSD cone (V1 (V1+1)/2)
_CVXPY_MAX_V1 = {"stage1": 81, "gram/sdp": 50}


def _applies_all(info):
    return True, ""


def _solver(name, applies=_applies_all, prepare=None):
    def deco(fn):
        fn.solver_name = name
        fn.applies = applies
        if prepare is not None:
            fn.prepare = prepare
        return fn

    return deco


def _statement(oracle):
    """The problem itself, rebuilt from its statement (``name``, ``size``) in the run's process: what the
    library's own solvers need (the topic model, the masking). Built inside the clock; it holds no optimum
    (one is computed only where a solver asks for it, and then inside the clock too)."""
    return get(oracle.name, **oracle.size)


# ---------------------------------------------------------------------------------- applicability
_DENSE_STAGE1 = ("stage1-value/lsq", "stage1-value/ridge")


def _is_stage1(p):
    return (p.family in _DENSE_STAGE1, "dense stage-1 problems only")


def _unconstrained(p):
    return (p.constraint is None, "unconstrained problems only")


def _two_d(p):
    return (p.n == 2, "2-d problems only")


def _installed_cvxpy():
    try:
        import cvxpy  # optional dependency, imported only here

        return set(cvxpy.installed_solvers())
    except ImportError:
        return set()


def _import_cvxpy():
    """``prepare`` of the cvxpy solvers: the 2 s import of cvxpy happens before the clock starts."""
    _installed_cvxpy()


def _cvx_applies(backend, families):
    def applies(p):
        if backend not in _installed_cvxpy():
            return False, f"cvxpy backend {backend} not installed"
        if not p.family.startswith(families):
            return False, f"applies to {families}"
        limit = _CVXPY_MAX_V1["gram/sdp" if p.family.startswith("gram/sdp") else "stage1"]
        if p.V1 > limit:
            return False, f"V1 = {p.V1} > {limit} (dense conic program too large for the budget)"
        return True, ""

    return applies


# ---------------------------------------------------------------------------------- direct solvers
@_solver("closed-form")
def closed_form(oracle, budget, callback):
    """The library's own solver for the problem (closed form, or grid + interval for attention), run inside
    the clock from the problem's statement."""
    return _statement(oracle).reference()


@_solver("lstsq", _is_stage1)
def lstsq(oracle, budget, callback):
    """Dense least squares on the moments (``optimal_value_matrix(method="lstsq")``)."""
    p = _statement(oracle)
    return dense(optimal_value_matrix(p.tm, p.mk, method="lstsq", reg=p.reg).x)


def _make_cvxpy(backend, families):
    def run(oracle, budget, callback):
        p = _statement(oracle)
        if p.family.startswith("gram/sdp"):
            res = optimal_embedding_gram(p.tm, p.mk, method="cvxpy", solver=backend)
        else:
            res = optimal_value_matrix(p.tm, p.mk, method="cvxpy", solver=backend, reg=p.reg)
        if res.x is None:
            raise RuntimeError(f"cvxpy {backend}: status {res.status}: {res.message}")
        return dense(res.x)

    run.__doc__ = f"cvxpy with the {backend} backend (through the library's solver)."
    return _solver(f"cvxpy-{backend}", _cvx_applies(backend, families), _import_cvxpy)(run)


# ---------------------------------------------------------------------------------- scipy.optimize
def _scipy(method, options, use_hess=False):
    def run(problem, budget, callback):
        shape = problem.shape

        def fun(z):
            return problem.f(z.reshape(shape))

        def jac(z):
            return problem.grad(z.reshape(shape)).ravel()

        def cb(intermediate_result):
            callback(intermediate_result.x.reshape(shape))
            if budget.expired():
                raise StopIteration

        kw: dict[str, Callable] = {}
        if method != "Nelder-Mead":
            kw["jac"] = jac
        if use_hess and problem.hvp is not None:

            def hessp(z, u):
                return problem.hvp(z.reshape(shape), u.reshape(shape)).ravel()

            kw["hessp"] = hessp
        with warnings.catch_warnings():  # scipy's advice (e.g. trust-constr's quasi-Newton) is not a failure
            warnings.simplefilter("ignore", UserWarning)
            res = scipy.optimize.minimize(fun, problem.x0.ravel(), method=method, callback=cb, options=options, **kw)
        return res.x.reshape(shape)

    run.__doc__ = f"scipy.optimize.minimize(method={method!r}) with options {options}."
    return run


# ---------------------------------------------------------------------------------- first-order
@_solver("gd")
def gd(problem, budget, callback):
    """(Projected) gradient descent with Armijo backtracking; the step grows x2 after each accepted step."""
    x = problem.project(problem.x0)
    fx, step = problem.f(x), 1.0
    callback(x)
    while not budget.expired():
        g = problem.grad(x)
        if not np.any(g):
            break
        while True:
            y = problem.project(x - step * g)
            fy = problem.f(y)
            if fy <= fx - 0.5 * np.sum(g * (x - y)) or step < 1e-20:
                break
            step /= 2
        if step < 1e-20:
            break
        x, fx, step = y, fy, step * 2
        callback(x)
    return x


@_solver("adam")
def adam(problem, budget, callback):
    """Adam (lr 1e-2, betas 0.9/0.999, eps 1e-12), projected onto the feasible set where constrained."""
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-12
    x = problem.project(problem.x0)
    m, v = np.zeros_like(x), np.zeros_like(x)
    callback(x)
    k = 0
    while not budget.expired():
        k += 1
        g = problem.grad(x)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = problem.project(x - lr * (m / (1 - b1**k)) / (np.sqrt(v / (1 - b2**k)) + eps))
        callback(x)
    return x


@_solver("grid-refine", _two_d)
def grid_refine(problem, budget, callback):
    """101 x 101 grid on [-10, 40] x [-40, 20] (row by row, the best point so far reported after each row,
    cut short when the budget runs out), then L-BFGS-B from the best grid point."""
    A, B = np.linspace(-10, 40, 101), np.linspace(-40, 20, 101)
    best, xb = np.inf, None
    for a in A:
        for b in B:
            z = np.array([a, b])
            fz = problem.f(z)
            if fz < best:
                best, xb = fz, z
        callback(xb)
        if budget.expired():
            return xb
    res = scipy.optimize.minimize(
        lambda z: problem.f(z),
        xb,
        jac=lambda z: problem.grad(z),
        method="L-BFGS-B",
        callback=lambda intermediate_result: callback(intermediate_result.x),
        options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 10_000},
    )
    return res.x if res.fun <= best else xb


def _register():
    reg = {f.solver_name: f for f in (closed_form, lstsq, gd, adam, grid_refine)}
    backends = (("CLARABEL", (*_DENSE_STAGE1, "gram/sdp")), ("OSQP", _DENSE_STAGE1), ("HIGHS", _DENSE_STAGE1),
                ("SCS", ("gram/sdp",)))  # fmt: skip
    for backend, fams in backends:
        s = _make_cvxpy(backend, fams)
        reg[s.solver_name] = s
    tight = {"maxiter": 1_000_000}
    scipy_methods = {
        "L-BFGS-B": ({**tight, "maxfun": 10_000_000, "ftol": 1e-16, "gtol": 1e-13}, False, _unconstrained),
        "trust-constr": ({**tight, "gtol": 1e-13, "xtol": 1e-15}, True, _unconstrained),
        "Newton-CG": ({**tight, "xtol": 1e-15}, True, _unconstrained),
        "Nelder-Mead": ({**tight, "xatol": 1e-13, "fatol": 1e-17}, False, _two_d),
    }
    for meth, (opts, hess, applies) in scipy_methods.items():
        reg[meth] = _solver(meth, applies)(_scipy(meth, opts, hess))
    return reg


#: built-in solvers by name
SOLVERS = _register()


def _entry_points() -> dict:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def solver_names() -> list[str]:
    """Built-in and entry-point solver names.

    Returns
    -------
    list of str
        The built-in names (:data:`SOLVERS`, in their order; the ``cvxpy-*`` ones for each installed cvxpy
        solver), then the names registered in the entry-point group ``theorycheck.solvers``, sorted.

    See Also
    --------
    load_solver : The solver callable of a name.
    match : The problem names, the benchmark's other axis.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    >>> from theorycheck import problems
    >>> names = problems.solver_names()
    >>> names[:5]
    ['closed-form', 'lstsq', 'gd', 'adam', 'grid-refine']
    >>> "L-BFGS-B" in names
    True
    """
    return [*SOLVERS, *sorted(set(_entry_points()) - set(SOLVERS))]


def _is_file_spec(spec: str) -> bool:
    return ":" in spec and spec.rpartition(":")[0].endswith(".py")


def _load_file(spec: str):
    path, _, func = spec.rpartition(":")
    if not os.path.isfile(path):
        raise ValueError(f"--solver {spec!r}: no such file {path!r}")
    try:
        modspec = importlib.util.spec_from_file_location(f"_theorycheck_user_{abs(hash(path))}", path)
        if modspec is None or modspec.loader is None:
            raise ImportError("not a loadable Python file")
        mod = importlib.util.module_from_spec(modspec)
        modspec.loader.exec_module(mod)
    except Exception as exc:  # a user's file: report any import failure with its file name
        raise ValueError(f"--solver {spec!r}: importing {path!r} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(mod, func, None)
    if not callable(fn):
        close = difflib.get_close_matches(func, [n for n in dir(mod) if not n.startswith("_")], n=3, cutoff=0.0)
        raise ValueError(f"--solver {spec!r}: {path!r} has no callable {func!r}; closest: {close}")
    return fn


def load_solver(spec: str):
    """A solver callable from a built-in name, an entry-point name or ``path/file.py:function``.

    Imports the solver's module (user code runs). Unknown names raise ``ValueError`` naming the closest; a
    file that fails to import names the file and the error. ``check_solver`` checks a name without
    importing anything.

    Parameters
    ----------
    spec : str
        A built-in name (:func:`solver_names`), an entry-point name of the group ``theorycheck.solvers``,
        or ``"path/to/file.py:function"``.

    Returns
    -------
    callable
        ``solver(oracle, budget, callback) -> x`` (or a generator function yielding iterates), with an
        ``applies(info) -> (bool, reason)`` attribute (always true when the solver defines none).

    Raises
    ------
    ValueError
        An unknown name (naming the closest), a missing file, a file that fails to import, or a file
        without that callable.

    See Also
    --------
    solver_names : The names it accepts.
    Oracle : The solver's first argument.
    Budget : The solver's second argument.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    The built-in ``closed-form`` solver computes the optimum with the library's own solver, without a
    single oracle evaluation:

    >>> from theorycheck import problems
    >>> from theorycheck.problems._oracle import Meter, make_oracle  # what the harness does
    >>> solver = problems.load_solver("closed-form")
    >>> p = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2)
    >>> oracle = make_oracle(p, Meter(1.0, 100, p.n), p.x0)
    >>> x = solver(oracle, problems.Budget(max_seconds=1.0), lambda x: None)
    >>> p.suboptimality(x), oracle.evaluations["total"]
    (0.0, 0)
    >>> problems.load_solver("gdd")
    Traceback (most recent call last):
    ...
    ValueError: unknown solver 'gdd'; closest: 'gd', ...
    """
    if spec in SOLVERS:
        return SOLVERS[spec]
    if _is_file_spec(spec):
        fn = _load_file(spec)
    else:
        eps = _entry_points()
        if spec not in eps:
            close = difflib.get_close_matches(spec, solver_names(), n=3, cutoff=0.0)
            raise ValueError(f"unknown solver {spec!r}; closest: {', '.join(map(repr, close))}")
        fn = eps[spec].load()
    if not hasattr(fn, "applies"):
        try:
            fn.applies = _applies_all
        except AttributeError:
            pass
    return fn


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def check_solver(spec: str) -> None:
    """Check a solver name *without importing or running anything* (the benchmark's coordinator never runs a
    user's code: a file solver is imported in the run's own process). Unknown built-in / entry-point names,
    missing files, files that do not parse and files with no top-level ``function`` raise ``ValueError``."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"a solver is a name or path/file.py:function, got {spec!r}")
    if spec in SOLVERS:
        return
    if not _is_file_spec(spec):
        if spec not in _entry_points():
            close = difflib.get_close_matches(spec, solver_names(), n=3, cutoff=0.0)
            raise ValueError(f"unknown solver {spec!r}; closest: {', '.join(map(repr, close))}")
        return
    path, _, func = spec.rpartition(":")
    if not os.path.isfile(path):
        raise ValueError(f"--solver {spec!r}: no such file {path!r}")
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"--solver {spec!r}: {path!r} does not parse: {exc}") from None
    names = _top_level_names(tree)
    if func not in names:
        close = difflib.get_close_matches(func, sorted(n for n in names if not n.startswith("_")), n=3, cutoff=0.0)
        raise ValueError(f"--solver {spec!r}: {path!r} defines no {func!r} at top level; closest: {close}")


def code_digest(path: str | Path) -> bytes:
    """The code of a theorycheck module as bytes to hash: its syntax tree without docstrings, comments or layout, so
    that documentation edits keep the shipped archive's and a resumed benchmark's records, and any change to what
    runs does not (a file that does not parse: its bytes)."""
    data = Path(path).read_bytes()
    try:
        tree = ast.parse(data)
    except SyntaxError:
        return data
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


def solver_fingerprint(spec: str) -> str:
    """A hash that changes whenever the solver's code may have: a file solver's bytes (and its function name);
    an entry point's distribution and version (and its module file's bytes where it can be found without
    importing it); a built-in's module code (:func:`code_digest`: docstrings left out) and the package version.
    Part of every benchmark cell's key, so that a resumed benchmark never serves a record of other code."""
    h = hashlib.sha256()
    if spec in SOLVERS:
        h.update(f"builtin:{spec}:{__version__}:".encode())
        h.update(code_digest(__file__))  # the code, not its docstrings
    elif _is_file_spec(spec):
        path, _, func = spec.rpartition(":")
        h.update(f"file:{func}:".encode())
        h.update(Path(path).read_bytes())
    else:
        ep = _entry_points()[spec]
        dist = getattr(ep, "dist", None)
        h.update(f"entry-point:{spec}:{ep.value}:{getattr(dist, 'name', '')}:{getattr(dist, 'version', '')}".encode())
        module = ep.value.split(":", 1)[0]
        try:
            found = importlib.util.find_spec(module) if module not in sys.modules else sys.modules[module].__spec__
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and os.path.isfile(found.origin):
            h.update(Path(found.origin).read_bytes())
    return h.hexdigest()[:16]


def display_name(spec: str) -> str:
    """A solver's name for tables and legends: built-in and entry-point names as they are, a file solver by its
    function name (the file is named in the report's footnotes)."""
    return spec.rpartition(":")[2] if _is_file_spec(spec) else spec
