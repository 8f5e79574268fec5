"""Data types for checkable claims (the registry itself lives in ``proofs_numeric/``).

A :class:`Claim` is one statement of the paper or of our derivations (SPEC §6) with a
``check(params, inject=None) -> ClaimResult`` function. A claim never prints; it returns data.

``inject`` lets a test replace an intermediate quantity (a matrix, a constant) by a
deliberately wrong one; every claim provides ``falsify(params) -> inject`` whose injection must
make the claim fail, which proves the check can fail.

Margins: ``margin >= 0`` iff the claim passed. For an equality check
``|measured - expected| <= tol`` the margin is ``tol - |measured - expected|``; for an
inequality ``measured > expected`` it is ``measured - expected``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "Claim",
    "ClaimResult",
    "SOURCES",
    "TIERS",
    "compare_close",
    "compare_greater",
    "compare_all",
    "over_seeds",
    "by_seed",
]

#: Where a claim comes from: derived by us, stated in the paper, or measured (empirical).
SOURCES = ("DERIVED", "PAPER", "EMPIRICAL")
#: Verification tiers: ``default`` (about a minute) and ``full`` (paper-size runs over seeds).
TIERS = ("default", "full")


@dataclass
class ClaimResult:
    """Outcome of checking one claim on one parameter set.

    ``passed`` is stored as ``bool(passed) and margin is finite``: a NaN or infinite margin never passes.

    Parameters
    ----------
    passed : bool
        Whether the check passed (``margin >= 0`` for results of :func:`compare_close` and
        :func:`compare_greater`).
    expected, measured : float or str
        What the claim predicts and what was computed (numbers where possible).
    margin : float
        Distance to the failure threshold, ``>= 0`` iff passed (see module docstring).
    tolerance : float
        The tolerance used (0 for strict inequalities).
    params : dict
        The configuration checked (JSON-serialisable).
    details : dict
        Extra JSON-serialisable numbers (errors of each method, timings, ...).
    data : dict
        Arrays for figures; not written to results.json.
    label : str
        The sub-check in words, e.g. ``"beta* <= 0"`` (``compare_all`` keeps the deciding one's).

    See Also
    --------
    compare_close : A result for an equality within a tolerance.
    compare_greater : A result for a strict inequality.
    compare_all : One result from several sub-checks.
    Claim : Whose ``check`` returns a ``ClaimResult``.

    References
    ----------
    SPEC §6 (the checkable claims and how they are judged).

    Examples
    --------
    >>> from theorycheck.report import ClaimResult
    >>> ClaimResult(passed=True, expected=0.75, measured=0.75, margin=1e-12, tolerance=1e-12).passed
    True
    >>> ClaimResult(passed=True, expected=0.75, measured=float("nan"), margin=float("nan")).passed
    False
    """

    passed: bool
    expected: Any
    measured: Any
    margin: float
    tolerance: float = 0.0
    params: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    label: str = ""

    def __post_init__(self):
        self.passed = bool(self.passed) and _finite(self.margin)


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Claim:
    """A registered, checkable claim.

    A claim never prints; it returns data. ``falsify`` proves the check can fail: its injection must
    make ``check`` fail on every default parameter set (the test suite runs it).

    Parameters
    ----------
    id : str
        Short stable identifier, e.g. ``"stage1.minnorm-block"``.
    statement : str
        One sentence stating the claim.
    source : {"DERIVED", "PAPER", "EMPIRICAL"}
        Derived by us, stated in the paper, or measured (:data:`SOURCES`).
    spec : str
        Where it is stated, e.g. ``"SPEC §4.2, §6 item 5"``.
    check : callable
        ``check(params: dict, inject: dict | None = None) -> ClaimResult``.
    default_params : tuple of dict
        Configurations run by ``theorycheck verify``.
    falsify : callable
        ``falsify(params) -> dict``: an ``inject`` that must make ``check`` fail.
    plot : callable, optional
        ``plot(results: list[ClaimResult]) -> dict[str, matplotlib.figure.Figure]``.
    full_params : tuple of dict
        Further configurations run only by ``theorycheck verify --full`` (long and multi-seed runs).
    cost : float
        Static hint of the seconds one default check takes, used to start heavy checks first when
        no measured time is cached (:mod:`theorycheck.report.runner`).
    group : str, optional
        Checks of claims sharing a group run one after another in one worker, so that they share
        in-process caches (e.g. the realdata encoder pass).
    domain : callable, optional
        ``domain() -> hypothesis strategy`` of parameter dicts: the claim's configuration space,
        bounded for cost, explored by ``theorycheck verify --explore N``
        (:mod:`theorycheck.report.explore`). Claims without one are skipped by explore.
    preconditions : tuple of (str, callable)
        ``(description, predicate(params) -> bool)`` pairs the claim needs (e.g.
        ``("tau < T", tau_below_T)``); explore draws only configurations satisfying all of them.
        Use module-level functions (claims are pickled for the process pool).

    Raises
    ------
    ValueError
        ``source`` not in :data:`SOURCES`, or no ``default_params``.
    TypeError
        A precondition that is not a ``(str, callable)`` pair, or a ``domain`` that is not callable.

    See Also
    --------
    ClaimResult : What ``check`` returns.
    run_claims : Run the checks of a list of claims.
    load_path : Load claims from a user's claim module (``verify --claims``).

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    The stage-1 minimum of the exact population loss (uniform attention, SPEC §4.0, §4.2) is
    ``1 - E||p||^2 = 1 - 1/(tau v)``; the falsifier injects ``W^V = 0``, whose loss is 1:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> def falsify(params):
    ...     return {"W_V": np.zeros((params["T"] * params["v"] + 1,) * 2)}
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=falsify,
    ...     default_params=({"T": 3, "v": 2, "tau": 2},),
    ... )
    >>> params = claim.default_params[0]
    >>> res = claim.run(params)
    >>> res.passed, res.expected, round(res.measured, 12), res.params
    (True, 0.75, 0.75, {'T': 3, 'v': 2, 'tau': 2})
    >>> claim.run(params, falsify(params)).passed
    False
    """

    id: str
    statement: str
    source: str
    spec: str
    check: Callable[..., ClaimResult]
    default_params: tuple
    falsify: Callable[[dict], dict]
    plot: Callable | None = None
    full_params: tuple = ()
    cost: float = 1.0
    group: str | None = None
    domain: Callable[[], Any] | None = None
    preconditions: tuple = ()

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if not self.default_params:
            raise ValueError(f"claim {self.id!r} needs at least one default parameter set")
        for pre in self.preconditions:
            if not (isinstance(pre, tuple) and len(pre) == 2 and isinstance(pre[0], str) and callable(pre[1])):
                raise TypeError(f"claim {self.id!r}: preconditions must be (description, predicate) pairs, got {pre!r}")
        if self.domain is not None and not callable(self.domain):
            raise TypeError(f"claim {self.id!r}: domain must be a callable returning a strategy, got {self.domain!r}")

    def precondition_text(self) -> str:
        """The preconditions' descriptions joined by ``" and "`` (``""`` if none)."""
        return " and ".join(d for d, _ in self.preconditions)

    def satisfies(self, params: dict) -> bool:
        """True iff ``params`` satisfies every precondition."""
        return all(pred(params) for _, pred in self.preconditions)

    def params_for(self, tier: str = "default") -> tuple:
        """The configurations of a tier: ``"default"`` (``default_params``) or ``"full"`` (``+ full_params``)."""
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
        return tuple(self.default_params) + (tuple(self.full_params) if tier == "full" else ())

    def run(self, params: dict, inject: dict | None = None) -> ClaimResult:
        """Run ``check`` and stamp the parameters on the result."""
        res = self.check(dict(params), inject)
        res.params = dict(params)
        return res


def compare_close(measured: ArrayLike, expected: ArrayLike, tol: float, **kw: Any) -> ClaimResult:
    """Equality within ``tol`` (max abs difference for arrays). ``kw`` go to ClaimResult.

    Parameters
    ----------
    measured, expected : array_like
        The computed and the predicted value (scalars or arrays of one shape).
    tol : float
        Absolute tolerance ``tol >= 0`` on ``max |measured - expected|``.
    **kw
        Further :class:`ClaimResult` fields (``label``, ``details``, ``data``, ...).

    Returns
    -------
    ClaimResult
        ``passed = err <= tol`` and ``margin = tol - err`` with ``err = max |measured - expected|``
        (``inf`` when ``measured`` is not finite); ``details["abs_error"] = err``. Arrays are reported
        by their shape (``"array(3, 3)"``).

    See Also
    --------
    compare_greater : A strict inequality instead.
    compare_all : Combine several comparisons.

    Examples
    --------
    >>> from theorycheck.report import compare_close
    >>> r = compare_close(np.eye(2) + 1e-9, np.eye(2), tol=1e-6)
    >>> r.passed, r.expected, round(r.margin, 12)
    (True, 'array(2, 2)', 9.99e-07)
    >>> compare_close(1.0, 0.75, tol=0.1, label="loss = 1 - 1/(tau v)").passed
    False
    """
    m = np.asarray(measured, dtype=float)
    e = np.asarray(expected, dtype=float)
    err = float(np.max(np.abs(m - e))) if m.size else 0.0
    if not np.all(np.isfinite(m)):
        err = math.inf
    details = kw.pop("details", {})
    details.setdefault("abs_error", err)
    return ClaimResult(
        passed=err <= tol,
        expected=_scalar(expected),
        measured=_scalar(measured),
        margin=tol - err,
        tolerance=tol,
        details=details,
        **kw,
    )


def compare_greater(measured: float, expected: float, **kw: Any) -> ClaimResult:
    """Strict inequality ``measured > expected``; margin ``measured - expected``.

    Parameters
    ----------
    measured, expected : float
        The computed value and the bound it must exceed.
    **kw
        Further :class:`ClaimResult` fields (``label``, ``details``, ...).

    Returns
    -------
    ClaimResult
        ``passed = measured > expected``, ``margin = measured - expected``, ``tolerance = 0``.

    See Also
    --------
    compare_close : An equality within a tolerance instead.
    compare_all : Combine several comparisons.

    Examples
    --------
    >>> from theorycheck.report import compare_greater
    >>> r = compare_greater(0.3, 0.1, label="gap > 0.1")
    >>> r.passed, round(r.margin, 12), r.label
    (True, 0.2, 'gap > 0.1')
    >>> compare_greater(0.1, 0.1).passed  # strict
    False
    """
    margin = float(measured) - float(expected)
    return ClaimResult(passed=margin > 0, expected=float(expected), measured=float(measured), margin=margin, **kw)


def _relative_margin(r: ClaimResult) -> float:
    """Margin in units of the sub-check's own scale: ``margin / tolerance`` for equalities,
    ``margin / max(|expected|, 1)`` for inequalities (``-inf`` if not finite)."""
    if not _finite(r.margin):
        return -math.inf
    if r.tolerance and r.tolerance > 0:
        return float(r.margin) / float(r.tolerance)
    try:
        scale = max(abs(float(r.expected)), 1.0)
    except (TypeError, ValueError):
        scale = 1.0
    return float(r.margin) / scale


def compare_all(results: list[ClaimResult]) -> ClaimResult:
    """Combine sub-checks: passes iff all pass.

    Reports the sub-check closest to failure *relative to its own scale* (see
    ``_relative_margin``), so the reported margin, tolerance, expected and measured values
    belong together; ``details["relative_margin"]`` holds that scale-free margin.

    Parameters
    ----------
    results : list of ClaimResult
        The sub-checks (at least one).

    Returns
    -------
    ClaimResult
        ``passed`` iff every sub-check passed; ``expected``, ``measured``, ``margin``, ``tolerance`` and
        ``label`` of the worst sub-check by relative margin (``margin / tolerance`` for equalities,
        ``margin / max(|expected|, 1)`` for inequalities); ``details`` of sub-check ``i`` under keys
        ``"i.<key>"``; the ``data`` of all merged.

    See Also
    --------
    compare_close : An equality sub-check.
    compare_greater : An inequality sub-check.
    over_seeds : The same combination over the seeds of an EMPIRICAL claim.

    Examples
    --------
    The equality uses a thousandth of its tolerance, the inequality a fifth of its scale: the
    inequality is closer to failing and decides.

    >>> from theorycheck.report import compare_all, compare_close, compare_greater
    >>> r = compare_all([compare_close(1.0 + 1e-9, 1.0, tol=1e-6, label="eq"), compare_greater(0.3, 0.1, label="gap")])
    >>> r.passed, r.label, round(r.details["relative_margin"], 12), round(r.details["0.abs_error"], 15)
    (True, 'gap', 0.2, 1e-09)
    """
    worst = min(results, key=_relative_margin)
    details = {}
    for i, r in enumerate(results):
        for k, v in r.details.items():
            details[f"{i}.{k}"] = v
    details["relative_margin"] = _relative_margin(worst)
    data = {}
    for r in results:
        data.update(r.data)
    return ClaimResult(
        passed=all(r.passed for r in results),
        expected=worst.expected,
        measured=worst.measured,
        margin=worst.margin,
        tolerance=worst.tolerance,
        details=details,
        data=data,
        label=worst.label,
    )


def _scalar(x):
    arr = np.asarray(x)
    if arr.ndim == 0:
        return float(arr)
    return f"array{arr.shape}"


def _detail(details: dict, key: str):
    """``details[key]``, or the value of a ``"<i>.key"`` entry written by :func:`compare_all`."""
    if key in details:
        return details[key]
    for k, v in details.items():
        if k.endswith("." + key):
            return v
    raise KeyError(f"statistic {key!r} not in the claim's details {sorted(details)}")


def t_interval(values, level: float = 0.95) -> list:
    """Student-t interval ``mean +- t_{(1+level)/2, n-1} s / sqrt(n)`` of the mean (``[nan, nan]`` if n < 2)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.all(np.isfinite(x)):
        return [math.nan, math.nan]
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return [float(x.mean()) - half, float(x.mean()) + half]


def over_seeds(
    check_one: Callable[..., ClaimResult], params: dict, inject: dict | None = None, *, statistics: Sequence[str] = ()
) -> ClaimResult:
    """Judge a seeded (EMPIRICAL) claim on every seed of ``params["seeds"]``; passes iff every seed passes.

    ``check_one(dict(params, seed=s), inject)`` checks one seed. The combined result is the
    worst seed (as :func:`compare_all` picks it); ``details`` hold the seeds, the fraction of
    seeds that pass, every seed's measured value and margin, and a 95% Student-t interval over
    seeds (``t_interval``) of the margin and of each named detail in ``statistics`` (over the seeds
    where it is finite: a seed records NaN for a value it does not have, counted in ``<key>_n_finite``).
    ``data`` is the first seed's (for figures).

    Parameters
    ----------
    check_one : callable
        ``check_one(params, inject) -> ClaimResult`` for one ``params["seed"]``.
    params : dict
        The configuration; ``params["seeds"]`` lists the seeds (at least one).
    inject : dict, optional
        Passed to every seed's check (a falsifier's injection).
    statistics : sequence of str
        Keys of the seeds' ``details`` (or of their ``"<i>.key"`` entries) to summarise over seeds.

    Returns
    -------
    ClaimResult
        The worst seed's values (:func:`compare_all`), ``passed`` iff every seed passed, and the
        per-seed ``details`` described above.

    Raises
    ------
    ValueError
        ``params["seeds"]`` is empty.
    KeyError
        A name of ``statistics`` is not in a seed's details.

    See Also
    --------
    compare_all : How the worst seed is chosen.
    Claim : An EMPIRICAL claim's ``check`` calls ``over_seeds``.

    References
    ----------
    SPEC §5 (seeded experiments), §6 (EMPIRICAL claims).

    Examples
    --------
    The mean of ``n = 200`` uniform draws is within ``4 / sqrt(12 n)`` (four standard errors) of 1/2:

    >>> from theorycheck.report import compare_close, over_seeds
    >>> def one(params, inject=None):
    ...     x = np.random.default_rng(params["seed"]).random(params["n"])
    ...     return compare_close(x.mean(), 0.5, tol=4 / np.sqrt(12 * params["n"]), details={"mean": x.mean()})
    >>> r = over_seeds(one, {"n": 200, "seeds": [0, 1, 2]}, statistics=["mean"])
    >>> r.passed, r.details["n_seeds"], r.details["fraction_passed"]
    (True, 3, 1.0)
    >>> [round(m, 4) for m in r.details["mean_per_seed"]]
    [0.5396, 0.5081, 0.5024]
    """
    seeds = [int(s) for s in params["seeds"]]
    if not seeds:
        raise ValueError("params['seeds'] must list at least one seed")
    one = {k: v for k, v in params.items() if k != "seeds"}
    results = [check_one(dict(one, seed=s), inject) for s in seeds]
    worst = compare_all(results)
    margins = [float(r.margin) for r in results]
    details = {
        "seeds": seeds,
        "n_seeds": len(seeds),
        "fraction_passed": sum(r.passed for r in results) / len(seeds),
        "passed_per_seed": [bool(r.passed) for r in results],
        "measured_per_seed": [r.measured for r in results],
        "margin_per_seed": margins,
        "margin_mean": float(np.mean(margins)),
        "margin_ci95": t_interval(margins),
        "relative_margin": worst.details["relative_margin"],
    }
    for key in statistics:
        vals = [float(_detail(r.details, key)) for r in results]
        finite = [v for v in vals if math.isfinite(v)]  # NaN: the seed has no such value (e.g. a stage not reached)
        details[f"{key}_per_seed"] = vals
        details[f"{key}_mean"] = float(np.mean(finite)) if finite else math.nan
        details[f"{key}_ci95"] = t_interval(finite)
        if len(finite) < len(vals):
            details[f"{key}_n_finite"] = len(finite)
    return ClaimResult(
        passed=worst.passed,
        expected=worst.expected,
        measured=worst.measured,
        margin=worst.margin,
        tolerance=worst.tolerance,
        details=details,
        data=results[0].data,
        label=worst.label,
    )


def by_seed(check_one: Callable[..., ClaimResult], params: dict, inject=None, *, statistics=()) -> ClaimResult:
    """``check_one(params, inject)`` for a single ``seed``, :func:`over_seeds` when ``params`` has ``seeds``."""
    if "seeds" in params:
        return over_seeds(check_one, params, inject, statistics=statistics)
    return check_one(params, inject)
