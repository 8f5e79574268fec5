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

    Attributes
    ----------
    passed : bool
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

    Attributes
    ----------
    id : str
        Short stable identifier, e.g. ``"stage1.minnorm-block"``.
    statement : str
        One sentence stating the claim.
    source : {"DERIVED", "PAPER", "EMPIRICAL"}
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
    """Equality within ``tol`` (max abs difference for arrays). ``kw`` go to ClaimResult."""
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
    """Strict inequality ``measured > expected``; margin ``measured - expected``."""
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
