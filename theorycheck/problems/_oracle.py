r"""The sealed oracle: the only object a benchmarked solver receives, and the meter behind it.

What a solver may know (the contract, also in the guide and in :class:`Oracle`):

- ``f(x)``, ``grad(x)`` and, where the problem defines one, ``hvp(x, v)`` (else ``hvp is None``): every call
  is counted and budgeted *at the source*, inside the oracle;
- ``shape``, ``n``, ``x0`` (a fresh copy of the run's start), ``start(seed)`` (the problem's documented
  seeded starts), ``constraint`` (``None`` or a short description such as ``"psd"``), ``project(x)``
  (Euclidean projection onto the feasible set; the identity when unconstrained) and ``violation(x)``;
- ``name``, ``family``, ``model``, ``size``, ``V1``: what the problem is, so that a solver can decide how to
  attack it (the :data:`ProblemInfo` fields; ``applies(info)`` receives the same);
- ``evaluations``: its own counts so far.

Nothing else: no attribute forwarding, no optimum, certificate, minimiser, reference point or unwrapped
problem is an attribute of the oracle (the evaluation functions are closures; the instance has fixed
``__slots__`` and refuses new attributes). In ``theorycheck benchmark`` the oracle lives in a process that
never computed an optimum (:mod:`._zygote`), so nothing that knows the answer exists where the solver runs;
a solver can still import theorycheck and *compute* an optimum with the library's own solvers, inside its
clock: that is what the built-in ``closed-form`` solver does.

The meter. Each evaluation increments the counts; the evaluation that exhausts ``max_evals`` is allowed and
the next one raises :class:`BudgetExhausted`, as does any evaluation once the wall-clock budget has passed.
Evaluated points are kept for the record: every one while fewer than ``2 keep`` are held, then every
``stride``-th with the stride doubling (geometric thinning: the kept points stay within a relative
``1 / keep`` of any evaluation count), each with its evaluation count, its time (taken when the evaluation
returned) and, for ``f`` calls, the value computed there. The wall-clock deadline is checked at the kept
points only, so a run can overshoot by one thinning stride (at most ``1 / keep`` of the elapsed time) before
the oracle refuses; the solver's own ``budget.expired()`` reads the clock directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Oracle", "Meter", "Budget", "BudgetExhausted", "ProblemInfo", "make_oracle", "keep_limit"]

#: kept points: all of the first ``2 * KEEP``, then geometric thinning (the record's trace)
KEEP = 128
#: bytes of kept points held at most (a large variable keeps fewer points, never fewer than 16 x 2)
KEEP_BYTES = 128 * 2**20


class BudgetExhausted(RuntimeError):
    """Raised by the oracle once the run's time or evaluation budget is spent.

    The evaluation that reaches ``max_evals`` is allowed; the next one raises, as does any evaluation
    once the wall-clock budget has passed. A solver may let it propagate: the harness then keeps the
    last iterate the solver reported (``callback`` or ``yield``) as the run's answer.

    See Also
    --------
    Oracle : Raises it.
    Budget : The budget a solver can poll (``expired()``) to stop before it is raised.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    >>> from theorycheck import problems
    >>> from theorycheck.problems import BudgetExhausted
    >>> from theorycheck.problems._oracle import Meter, make_oracle  # what the harness does
    >>> p = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2)
    >>> oracle = make_oracle(p, Meter(10.0, 2, p.n), p.x0)  # at most 2 evaluations
    >>> oracle.f(oracle.x0), oracle.grad(oracle.x0).shape
    (1.0, (13, 13))
    >>> try:
    ...     oracle.f(oracle.x0)
    ... except BudgetExhausted as exc:
    ...     print(exc)
    budget spent: 2 evaluations (2 evaluations)
    """


@dataclass
class Budget:
    """A run's budget: wall seconds and evaluations (``f`` + ``grad`` + ``hvp`` calls).

    ``expired()`` is true once ``max_seconds`` have passed since ``t0`` or once the oracle has spent
    ``max_evals`` evaluations; ``elapsed()`` is the wall time since ``t0`` and
    ``remaining() = max(0, max_seconds - elapsed())``. The harness builds it; a solver receives it as
    its second argument and may poll it.

    Parameters
    ----------
    max_seconds : float, default 10.0
        Wall-clock budget in seconds, ``>= 0`` (the harness passes the run's budget; not validated here).
    max_evals : int, default 1000000
        Evaluation budget (``f``, ``grad`` and ``hvp`` calls together), ``>= 1``; enforced by the oracle.
    t0 : float, optional
        Start of the clock (``time.perf_counter()`` at construction by default).
    _meter : object, optional
        Internal: the harness links the run's evaluation meter here, so that ``expired()`` also turns
        true once the oracle has spent ``max_evals``; leave it unset.

    See Also
    --------
    Oracle : Counts the evaluations and enforces the budget.
    BudgetExhausted : Raised by the oracle once the budget is spent.
    load_solver : The solvers that receive it.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    >>> from theorycheck.problems import Budget
    >>> b = Budget(max_seconds=30.0, max_evals=100)
    >>> b.expired(), 0.0 < b.remaining() <= 30.0
    (False, True)
    >>> Budget(max_seconds=0.0).expired()
    True
    """

    max_seconds: float = 10.0
    max_evals: int = 1_000_000
    t0: float = field(default_factory=time.perf_counter)
    _meter: Any = field(default=None, repr=False, compare=False)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def remaining(self) -> float:
        return max(0.0, self.max_seconds - self.elapsed())

    def expired(self) -> bool:
        m = self._meter
        return self.elapsed() > self.max_seconds or (m is not None and m.stop)


@dataclass(frozen=True)
class ProblemInfo:
    """What a solver may know about a problem besides its oracle: the problem statement, not its answer.

    A solver's ``applies(info)`` receives one to decide whether it applies; ``ProblemInfo.of(problem)``
    builds it from a :class:`Problem`.

    Parameters
    ----------
    name : str
        ``"<family>:<model>"``.
    family : str
        The problem family, e.g. ``"gram/sdp"``.
    model : str
        The topic model's kind (``"paper"``, ``"zipf"``, ...).
    size : dict
        The size parameters (``T``, ``v``, ``tau`` and family extras).
    shape : tuple
        Shape of the variable ``x``.
    n : int
        Number of variables, ``prod(shape)``.
    V1 : int
        Vocabulary size (``[MASK]`` included).
    constraint : str or None
        ``"psd"`` or ``None`` (unconstrained).
    has_hvp : bool
        Whether the oracle offers Hessian-vector products.

    See Also
    --------
    Oracle : Carries the same fields, plus the evaluation functions.
    load_solver : Solvers whose ``applies(info)`` reads it.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    >>> from theorycheck import problems
    >>> info = problems.ProblemInfo.of(problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2))
    >>> info.name, info.shape, info.n, info.V1, info.constraint, info.has_hvp
    ('stage1-value/lsq:paper', (13, 13), 169, 13, None, True)
    >>> problems.load_solver("closed-form").applies(info)[0]
    True
    """

    name: str
    family: str
    model: str
    size: dict
    shape: tuple
    n: int
    V1: int
    constraint: str | None
    has_hvp: bool

    @classmethod
    def of(cls, problem) -> ProblemInfo:
        return cls(
            name=problem.name,
            family=problem.family,
            model=problem.model,
            size=dict(problem.size),
            shape=tuple(problem.shape),
            n=int(problem.n),
            V1=int(problem.tm.V1),
            constraint=problem.constraint,
            has_hvp=problem.hvp is not None,
        )


def keep_limit(n: int) -> int:
    """Points kept per thinning level for a variable of ``n`` entries (``KEEP``, fewer for a large ``n``)."""
    return int(max(16, min(KEEP, KEEP_BYTES // (16 * max(int(n), 1)))))


class Meter:
    """Counts, budget and kept points of one run (no reference to the problem: only the oracle's closures hold it)."""

    __slots__ = ("k", "nf", "ng", "nh", "next", "stride", "keep", "points", "stop", "why", "t0", "max_seconds",
                 "max_evals")  # fmt: skip

    def __init__(self, max_seconds: float, max_evals: int, n: int):
        self.k = self.nf = self.ng = self.nh = 0
        self.max_seconds, self.max_evals = float(max_seconds), int(max_evals)
        self.keep = keep_limit(n)
        self.stride = 1
        self.next = 1  # the first evaluation is kept
        #: ``(evaluations, seconds, kind, value or None, point copy)`` in evaluation order
        self.points: list[tuple[int, float, str, float | None, np.ndarray]] = []
        self.stop, self.why = False, ""
        self.t0 = time.perf_counter()

    def start(self) -> None:
        """Start the clock (the run's ``t = 0``)."""
        self.t0 = time.perf_counter()

    def refuse(self) -> BudgetExhausted:
        return BudgetExhausted(f"budget spent: {self.why} ({self.k} evaluations)")

    def tick(self, k: int, kind: str, value, x) -> None:
        """At the ``k``-th evaluation (a kept one, or the last allowed): record it, check the budget."""
        t = time.perf_counter() - self.t0
        if k >= self.max_evals:
            self.stop, self.why = True, f"{self.max_evals} evaluations"
        elif t > self.max_seconds:
            self.stop, self.why = True, f"{self.max_seconds:g} s"
        if k % self.stride == 0 or k == 1 or self.stop:  # the first, every stride-th and the last allowed
            try:
                xc = np.array(x, dtype=float, copy=True)
            except (TypeError, ValueError):
                xc = None
            if xc is not None:
                self.points.append((k, t, kind, value, xc))
            if len(self.points) >= 2 * self.keep:  # thin: keep the multiples of the doubled stride
                self.stride *= 2
                self.points = [p for p in self.points if p[0] % self.stride == 0 or p[0] == 1]
        nxt = (k // self.stride + 1) * self.stride
        self.next = min(nxt, self.max_evals)

    @property
    def evals(self) -> int:
        return self.k


class Oracle:
    """What a benchmarked solver sees of a problem (module docstring: the contract).

    Attributes
    ----------
    f, grad : callable
        ``f(x) -> float``, ``grad(x) -> ndarray`` of ``shape``; counted and budgeted.
    hvp : callable or None
        ``hvp(x, v) -> H(x) v`` where the problem defines it; counted and budgeted.
    shape, n : tuple, int
        The variable's shape and its number of entries.
    x0 : ndarray
        A fresh copy of this run's start (``start(repeat)``).
    start : callable
        ``start(seed) -> ndarray``: the problem's documented seeded starts.
    constraint : str or None
        ``None`` (unconstrained) or a description (``"psd"``: symmetric positive semidefinite, ...).
    project, violation : callable
        ``project(x)``: Euclidean projection onto the feasible set (``x`` itself when unconstrained);
        ``violation(x) >= 0``, zero on the feasible set. Not counted (they reveal nothing about ``f``).
    name, family, model, size, V1, has_hvp : problem statement
        As in :class:`ProblemInfo`.
    evaluations : dict
        ``{"f": ..., "grad": ..., "hvp": ..., "total": ...}`` so far.

    See Also
    --------
    Budget : The run's budget, the solver's second argument.
    BudgetExhausted : Raised once the budget is spent.
    ProblemInfo : The problem statement alone.
    Problem : The unsealed problem (with its optimum), which a solver never receives.

    Notes
    -----
    Oracles are built by the harness (``theorycheck benchmark``; ``theorycheck.problems._oracle.make_oracle``),
    never by a solver. The instance has fixed slots and is read-only.

    References
    ----------
    SPEC §7 (the benchmark harness).

    Examples
    --------
    Every evaluation is counted at the source; nothing that knows the answer is reachable:

    >>> from theorycheck import problems
    >>> from theorycheck.problems._oracle import Meter, make_oracle  # what the harness does
    >>> p = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2)
    >>> oracle = make_oracle(p, Meter(10.0, 100, p.n), p.x0)
    >>> oracle
    <Oracle stage1-value/lsq:paper shape=(13, 13) constraint=None>
    >>> oracle.f(oracle.x0), oracle.grad(oracle.x0).shape, oracle.evaluations
    (1.0, (13, 13), {'f': 1, 'grad': 1, 'hvp': 0, 'total': 2})
    >>> hasattr(oracle, "certificate"), hasattr(oracle, "minimiser")
    (False, False)
    >>> oracle.f = None
    Traceback (most recent call last):
    ...
    AttributeError: the oracle is read-only (cannot set 'f')
    """

    __slots__ = ("f", "grad", "hvp", "start", "project", "violation", "shape", "n", "constraint", "name", "family",
                 "model", "V1", "has_hvp", "_size", "_x0", "_counts", "_sealed")  # fmt: skip

    f: Callable[[Any], float]
    grad: Callable[[Any], np.ndarray]
    hvp: Callable[[Any, Any], np.ndarray] | None
    start: Callable[..., np.ndarray]
    project: Callable[[Any], np.ndarray]
    violation: Callable[[Any], float]
    shape: tuple
    n: int
    constraint: str | None
    name: str
    family: str
    model: str
    V1: int
    has_hvp: bool
    _size: tuple
    _x0: np.ndarray
    _counts: Callable[[], dict]
    _sealed: bool

    def __setattr__(self, name, value):
        if getattr(self, "_sealed", False):
            raise AttributeError(f"the oracle is read-only (cannot set {name!r})")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        raise AttributeError(f"the oracle is read-only (cannot delete {name!r})")

    @property
    def x0(self) -> np.ndarray:
        return self._x0.copy()

    @property
    def size(self) -> dict:
        return dict(self._size)

    @property
    def evaluations(self) -> dict:
        return self._counts()

    def __repr__(self) -> str:
        return f"<Oracle {self.name} shape={self.shape} constraint={self.constraint}>"


def make_oracle(problem, meter: Meter, x0) -> Oracle:
    """The sealed oracle of ``problem`` metered by ``meter``, starting at ``x0``.

    The problem's bound methods are captured in closures here; the returned object holds no reference to
    the problem in any attribute.
    """
    pf, pg, ph = problem.f, problem.grad, problem.hvp
    pstart = problem.start
    pproject = getattr(problem, "project", None)
    pviolation = problem.violation
    m = meter

    def f(x):
        if m.stop:
            raise m.refuse()
        k = m.k = m.k + 1
        m.nf += 1
        y = pf(x)
        if k >= m.next:
            m.tick(k, "f", y, x)
        return y

    def grad(x):
        if m.stop:
            raise m.refuse()
        k = m.k = m.k + 1
        m.ng += 1
        g = pg(x)
        if k >= m.next:
            m.tick(k, "grad", None, x)
        return g

    def hvp(x, v):
        if m.stop:
            raise m.refuse()
        k = m.k = m.k + 1
        m.nh += 1
        hv = ph(x, v)
        if k >= m.next:
            m.tick(k, "hvp", None, x)
        return hv

    def start(seed: int = 0):
        return np.array(pstart(seed), dtype=float)

    def project(x):
        return np.asarray(x, dtype=float) if pproject is None else pproject(x)

    def violation(x) -> float:
        return float(pviolation(x))

    def counts() -> dict:
        return {"f": m.nf, "grad": m.ng, "hvp": m.nh, "total": m.k}

    funcs = {"f": f, "grad": grad, "hvp": None if ph is None else hvp, "start": start, "project": project,
             "violation": violation, "_counts": counts}  # fmt: skip
    return _seal(funcs, ProblemInfo.of(problem), x0)


def _seal(funcs: dict, info: ProblemInfo, x0) -> Oracle:
    """An :class:`Oracle` holding ``funcs`` and the problem statement ``info``, then read-only."""
    o = object.__new__(Oracle)
    fields = {"shape": info.shape, "n": info.n, "constraint": info.constraint, "name": info.name,
              "family": info.family, "model": info.model, "V1": info.V1, "has_hvp": info.has_hvp,
              "_size": tuple(sorted(info.size.items())), "_x0": np.array(x0, dtype=float, copy=True)}  # fmt: skip
    for name, value in {**funcs, **fields, "_sealed": True}.items():
        object.__setattr__(o, name, value)
    return o
