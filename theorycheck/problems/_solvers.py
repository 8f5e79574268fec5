r"""The solver protocol and the built-in solvers.

A solver is a callable ``solver(problem, budget, callback) -> x``:

- ``problem`` is a :class:`~theorycheck.problems.Problem` (``f``, ``grad``, ``hvp`` if not ``None``,
  ``shape``, ``x0``, ``start(seed)``, ``constraint``); the harness passes a counting proxy whose
  ``x0`` is the run's seeded start;
- ``budget`` is a :class:`Budget` (``max_seconds``, ``max_evals``, ``expired()``, ``remaining()``);
  once it is spent the proxy's ``f``/``grad`` raise :class:`BudgetExhausted` and the harness takes the
  last iterate reported to ``callback``;
- ``callback(x)`` reports an iterate (the harness copies it and records time and evaluation counts);
- the return value is the solver's answer, an array of ``problem.shape``; or the solver is a
  generator function that ``yield``\ s its iterates (each one is reported as if passed to
  ``callback``; the harness stops it once the budget is spent) and whose answer is its return value,
  or its last iterate if it returns nothing.

A solver may carry ``applies(problem) -> (bool, reason)`` (benchopt's ``skip``): cells where it does
not apply are listed as skipped, not run. User solvers: ``path/to/file.py:function`` or an entry
point in the group ``theorycheck.solvers``.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from ..solvers import optimal_embedding_gram, optimal_value_matrix
from ._value import dense

__all__ = ["Budget", "BudgetExhausted", "SOLVERS", "load_solver", "solver_names", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "theorycheck.solvers"
#: largest V1 given to cvxpy: the QP in W (V1^2 variables) and the dense PSD cone (V1 (V1+1)/2)
_CVXPY_MAX_V1 = {"stage1": 81, "gram/sdp": 50}


class BudgetExhausted(RuntimeError):
    """Raised by the harness's problem proxy once the time or evaluation budget is spent."""


@dataclass
class Budget:
    """A run's budget: wall seconds and evaluations (``f`` + ``grad`` + ``hvp`` calls)."""

    max_seconds: float = 10.0
    max_evals: int = 1_000_000
    t0: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def remaining(self) -> float:
        return max(0.0, self.max_seconds - self.elapsed())

    def expired(self) -> bool:
        return self.elapsed() > self.max_seconds


def _applies_all(problem):
    return True, ""


def _solver(name, applies=_applies_all):
    def deco(fn):
        fn.solver_name = name
        fn.applies = applies
        return fn

    return deco


# ---------------------------------------------------------------------------------- applicability
_DENSE_STAGE1 = ("stage1-value/lsq", "stage1-value/ridge")


def _is_stage1(p):
    return (p.family in _DENSE_STAGE1, "dense stage-1 problems only")


def _unconstrained(p):
    return (p.constraint is None, "unconstrained problems only")


def _two_d(p):
    return (p.n == 2, "2-d problems only")


def _has_reference(p):
    return (True, "")


def _installed_cvxpy():
    try:
        import cvxpy  # optional dependency, imported only here

        return set(cvxpy.installed_solvers())
    except ImportError:
        return set()


def _cvx_applies(backend, families):
    def applies(p):
        if backend not in _installed_cvxpy():
            return False, f"cvxpy backend {backend} not installed"
        if not p.family.startswith(families):
            return False, f"applies to {families}"
        limit = _CVXPY_MAX_V1["gram/sdp" if p.family.startswith("gram/sdp") else "stage1"]
        if p.tm.V1 > limit:
            return False, f"V1 = {p.tm.V1} > {limit} (dense conic program too large for the budget)"
        return True, ""

    return applies


# ---------------------------------------------------------------------------------- direct solvers
@_solver("closed-form", _has_reference)
def closed_form(problem, budget, callback):
    """The library's own certified solver for the problem (closed form, or grid + interval for attention)."""
    x = problem.reference()
    callback(x)
    return x


@_solver("lstsq", _is_stage1)
def lstsq(problem, budget, callback):
    """Dense least squares on the moments (``optimal_value_matrix(method="lstsq")``)."""
    x = dense(optimal_value_matrix(problem.tm, problem.mk, method="lstsq", reg=problem.reg).x)
    callback(x)
    return x


def _make_cvxpy(backend, families):
    def run(problem, budget, callback):
        if problem.family.startswith("gram/sdp"):
            res = optimal_embedding_gram(problem.tm, problem.mk, method="cvxpy", solver=backend)
        else:
            res = optimal_value_matrix(problem.tm, problem.mk, method="cvxpy", solver=backend, reg=problem.reg)
        if res.x is None:
            raise RuntimeError(f"cvxpy {backend}: status {res.status}: {res.message}")
        x = dense(res.x)
        callback(x)
        return x

    run.__doc__ = f"cvxpy with the {backend} backend (through the library's solver)."
    return _solver(f"cvxpy-{backend}", _cvx_applies(backend, families))(run)


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
def _project(problem, x):
    return problem.project(x)


@_solver("gd")
def gd(problem, budget, callback):
    """(Projected) gradient descent with Armijo backtracking; the step grows x2 after each accepted step."""
    x = _project(problem, problem.x0.astype(float))
    fx, step = problem.f(x), 1.0
    callback(x)
    while not budget.expired():
        g = problem.grad(x)
        if not np.any(g):
            break
        while True:
            y = _project(problem, x - step * g)
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
    """Adam (lr 1e-2, betas 0.9/0.999, eps 1e-12), projected onto the PSD cone where constrained."""
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-12
    x = _project(problem, problem.x0.astype(float))
    m, v = np.zeros_like(x), np.zeros_like(x)
    callback(x)
    k = 0
    while not budget.expired():
        k += 1
        g = problem.grad(x)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = _project(problem, x - lr * (m / (1 - b1**k)) / (np.sqrt(v / (1 - b2**k)) + eps))
        callback(x)
    return x


@_solver("grid-refine", _two_d)
def grid_refine(problem, budget, callback):
    """101 x 101 grid on [-10, 40] x [-40, 20], then L-BFGS-B from the best grid point."""
    A, B = np.linspace(-10, 40, 101), np.linspace(-40, 20, 101)
    best, xb = np.inf, None
    for a in A:
        for b in B:
            z = np.array([a, b])
            fz = problem.f(z)
            if fz < best:
                best, xb = fz, z
    callback(xb)
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
    """Built-in and entry-point solver names."""
    return [*SOLVERS, *sorted(set(_entry_points()) - set(SOLVERS))]


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

    Unknown names raise ``ValueError`` naming the closest; a file that fails to import names the
    file and the error.
    """
    if spec in SOLVERS:
        return SOLVERS[spec]
    if ":" in spec and spec.rpartition(":")[0].endswith(".py"):
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
