r"""Benchmark statistics: pure functions of run records, each statistic in one place (as COCO's cocopp).

Every function takes a list of *records* (the dicts the harness writes, one per run; ``None``, the JSON
form of NaN, reads as NaN) and returns arrays ready to plot; nothing here runs a solver or draws.

**The credit rule** (the harness's; every statistic below counts hits through it). A run reaches the
relative target ``tol`` at

.. math::

    RT(tol) = \min\bigl(\min\{x_i : \text{trace point } i \text{ has } s_i \le tol,\ v_i \le tol\},\;
    x_{\mathrm{answer}}\bigr)
    \quad\text{if the record is credited and } s_{\mathrm{answer}} \le tol,\ v_{\mathrm{answer}} \le tol,

and ``RT(tol) = inf`` otherwise; ``s = subopt_rel = (f - f*) / |f*|`` (signed), ``v = violation`` and
``x`` the measure: evaluations (``evals``, ``answer_evals``) or seconds (``t``, ``answer_t``). So a run
earns nothing it did not return: an uncredited record (status ``over budget``, ``killed``, ``error``,
...) or an answer that misses the target contributes no hit, whatever its trace holds; a returned
answer that meets the target is credited from the first evaluated point that met it. The *level* of
a point, ``max(s, v)`` (NaN -> inf), is the smallest relative target it meets (:func:`target_level`).

**One denominator.** The instances are every ``(problem, size, repeat)`` present in ``records`` for
any solver (``problem`` names the model, ``repeat`` is the start seed); a solver with no credited hit
on an instance (not run, ``not applicable``, failed) counts as unsolved there. Every profile and ECDF
divides by the same number of instances for every solver, and reports per solver how many instances
it was not applicable to and not run on.

References: Dolan & Moré, Math. Program. 91:201-213 (2002) (performance profiles); Moré & Wild,
SIAM J. Optim. 20(1):172-191 (2009) (data profiles); Hansen, Auger, Ros, Mersmann, Tušar, Brockhoff,
"COCO: a platform for comparing continuous optimizers in a black-box setting", Optim. Methods Softw.
36(1):114-144 (2021) and Hansen, Auger, Brockhoff, Tušar, "Anytime performance assessment in
blackbox optimization benchmarking", IEEE TEVC 26(6):1293-1305 (2022) (runtime ECDFs, ERT);
Price, Proc. IEEE ICEC 1997, 153-157 and Auger & Hansen, Proc. IEEE CEC 2005, 1777-1784 (ERT);
Efron & Tibshirani, *An Introduction to the Bootstrap* (1993) (percentile intervals).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import stdtrit

from ._execute import CREDITED, STATUSES  # every status a record may carry; credit only for the first two

__all__ = [
    "STATUSES", "CREDITED", "MEASURES", "FLOOR", "COCO_TARGETS", "target_level", "hitting_time",
    "hitting_times", "reduction_hitting_time", "instances", "Profile", "performance_profile",
    "data_profile", "RuntimeECDF", "runtime_ecdf", "ERT", "ERTInterval", "ert", "ert_bootstrap",
    "simulated_restarts", "Band", "level_curve", "quantile_band", "Exponent", "fit_exponent",
    "scaling_exponents", "summary_table", "fastest",
]  # fmt: skip

Record = Mapping[str, Any]
Instance = tuple[str, str, int]  # (problem, size, repeat)
GroupKey = tuple[str, str, str]  # (solver, problem, size)

NOT_APPLICABLE = "not applicable"
MEASURES = ("evals", "t")
#: runtimes are clipped below at this floor before ratios are taken (so every ratio is finite)
FLOOR = {"t": 1e-9, "evals": 1.0}
#: COCO's 51 targets, log-spaced 1e2 .. 1e-8 (ours are relative suboptimality, COCO's absolute f - f*)
COCO_TARGETS = np.logspace(2, -8, 51)

_ANSWER = {"evals": "answer_evals", "t": "answer_t"}
_ID_KEYS = ("problem", "size", "repeat", "solver", "status", "credited")
_HIT_KEYS = ("subopt_rel", "violation", "answer_t", "answer_evals", "trace")
_POINT_KEYS = ("t", "evals", "subopt_rel", "violation")


# ----------------------------------------------------------------------------------- validation
def _num(x) -> float:
    return math.nan if x is None else float(x)


def _check_measure(measure) -> str:
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    return measure


def _check_positive(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _check_array(name: str, values, *, low: float = 0.0, strict: bool = True, allow_inf: bool = False):
    """A non-empty 1-d float array of numbers ``> low`` (``>= low`` unless ``strict``)."""
    try:
        a = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-d sequence of numbers, got {values!r}") from None
    bad = np.isnan(a) | (a <= low if strict else a < low) | (~np.isfinite(a) & (not allow_inf))
    if a.ndim != 1 or a.size == 0 or bad.any():
        rng = f"{'>' if strict else '>='} {low:g}" + ("" if allow_inf else ", finite")
        raise ValueError(f"{name} must be a non-empty 1-d sequence of numbers {rng}, got {values!r}")
    return a


def _check_record(rec, where: str, extra: Sequence[str] = ()) -> None:
    if not isinstance(rec, Mapping):
        raise ValueError(f"{where} must be a record (a dict), got {type(rec).__name__}")
    missing = [k for k in (*_ID_KEYS, *_HIT_KEYS, *extra) if k not in rec]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing} (solver {rec.get('solver')!r})")
    if rec["status"] not in STATUSES:
        raise ValueError(f"{where}: status must be one of {STATUSES}, got {rec['status']!r}")
    if rec["credited"] and (rec["status"] not in CREDITED or rec["answer_t"] is None or rec["answer_evals"] is None):
        raise ValueError(
            f"{where}: credited with status {rec['status']!r}, answer_t {rec['answer_t']!r}, answer_evals "
            f"{rec['answer_evals']!r}; a credited record has status in {CREDITED} and an answer time"
        )
    for j, p in enumerate(rec["trace"] or ()):
        if not isinstance(p, Mapping) or any(k not in p for k in _POINT_KEYS):
            raise ValueError(f"{where}: trace[{j}] must be a dict with keys {_POINT_KEYS}, got {p!r}")
    if "n" in extra and not (isinstance(rec["n"], int | np.integer) and rec["n"] >= 1):
        raise ValueError(f"{where}: n (the number of variables) must be an integer >= 1, got {rec['n']!r}")


def _check_records(records, extra: Sequence[str] = (), name: str = "records") -> list[Record]:
    """The records as a list, each checked; ``ValueError`` if empty or if a run appears twice."""
    if isinstance(records, Mapping) or not isinstance(records, Iterable):
        raise ValueError(f"{name} must be a list of records (dicts), got {type(records).__name__}")
    recs = list(records)
    if not recs:
        raise ValueError(f"{name} is empty: at least one record is needed")
    seen: dict[tuple, int] = {}
    for i, r in enumerate(recs):
        _check_record(r, f"{name}[{i}]", extra)
        key = (r["solver"], *_instance(r))
        if key in seen:
            raise ValueError(
                f"{name}[{i}] repeats the run of {name}[{seen[key]}]: (solver, problem, size, repeat) {key}"
            )
        seen[key] = i
    return recs


def _instance(rec: Record) -> Instance:
    return (str(rec["problem"]), str(rec["size"]), int(rec["repeat"]))


# ----------------------------------------------------------------------------------- hitting times
def target_level(subopt_rel, violation) -> float:
    """``max(subopt_rel, violation)``: the smallest relative target a point meets (NaN or None -> inf)."""
    s, v = _num(subopt_rel), _num(violation)
    return math.inf if math.isnan(s) or math.isnan(v) else max(s, v)


def _levels(sub: np.ndarray, viol: np.ndarray) -> np.ndarray:
    m = np.maximum(sub, viol)  # NaN propagates ...
    m[np.isnan(m)] = np.inf  # ... and meets no target
    return m


def _trace_arrays(rec: Record, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """``(x, level)`` of the trace points with a known measure, sorted by ``x``."""
    tr = rec["trace"] or ()
    x = np.array([_num(p[measure]) for p in tr], dtype=float)
    sub = np.array([_num(p["subopt_rel"]) for p in tr], dtype=float)
    viol = np.array([_num(p["violation"]) for p in tr], dtype=float)
    keep = ~np.isnan(x)
    x, m = x[keep], _levels(sub[keep], viol[keep])
    order = np.argsort(x, kind="stable")
    return x[order], m[order]


def _first_hits(x: np.ndarray, m: np.ndarray, tols: np.ndarray) -> np.ndarray:
    """For each tol the smallest ``x_i`` (x sorted) with ``m_i <= tol``, inf if none: the prefix minimum of
    ``m`` is nonincreasing, so one ``searchsorted`` finds, for every tol at once, where it first drops."""
    if x.size == 0:
        return np.full(tols.shape, np.inf)
    pm = np.minimum.accumulate(m)
    k = np.searchsorted(-pm, -tols, side="left")
    return np.where(k < x.size, x[np.minimum(k, x.size - 1)], np.inf)


def _hits(rec: Record, tols: np.ndarray, measure: str) -> np.ndarray:
    if not rec["credited"]:
        return np.full(tols.shape, np.inf)
    m_ans = target_level(rec["subopt_rel"], rec["violation"])
    hit = np.fmin(_first_hits(*_trace_arrays(rec, measure), tols), _num(rec[_ANSWER[measure]]))
    return np.where(m_ans <= tols, hit, np.inf)


def hitting_times(rec: Record, tols, measure: str = "evals") -> np.ndarray:
    """The runtimes ``RT(tol)`` of one run for every relative target in ``tols`` (the module's credit rule).

    ``measure``: ``"evals"`` (oracle evaluations f + grad + hvp) or ``"t"`` (seconds). Returns an array of
    ``tols``' shape: a runtime, or ``inf`` where the run earns no hit. One pass over the trace for all
    targets (the prefix minimum of the levels), as the 51-target ECDFs need.
    """
    _check_measure(measure)
    tols = _check_array("tols", tols)
    _check_record(rec, "rec")
    return _hits(rec, tols, measure)


def hitting_time(rec: Record, tol: float, measure: str = "evals") -> float:
    """``RT(tol)`` of one run (see :func:`hitting_times` and the module docstring); ``inf`` if no hit."""
    return float(hitting_times(rec, [_check_positive("tol", tol)], measure)[0])


def _reduction_hit(rec: Record, tau: float, viol_tol: float) -> float:
    if not rec["credited"]:
        return math.inf
    f_l, f0 = _num(rec["f_star"]), _num(rec["f0"])
    bound = f_l + tau * (f0 - f_l)  # NaN if either is unknown: nothing passes

    def passes(f, v) -> bool:
        return bool(_num(f) <= bound and _num(v) <= viol_tol)

    if not passes(rec["f"], rec["violation"]):
        return math.inf
    hits = [_num(p["evals"]) for p in rec["trace"] or () if passes(p.get("f"), p["violation"])]
    return float(np.fmin(min(hits, default=math.inf), _num(rec["answer_evals"])))


def reduction_hitting_time(rec: Record, tau: float, viol_tol: float | None = None) -> float:
    r"""Evaluations until Moré & Wild's (2009, eq. 2.2) convergence test holds, under the credit rule.

    The test is :math:`f(x) \le f_L + \tau\,(f(x_0) - f_L)` with :math:`f_L` = ``f_star`` (the certified
    optimum, where Moré & Wild take the best value any solver found) and :math:`f(x_0)` = ``f0``, read on
    the trace's ``f`` and the answer's ``f``; a point passes only if also ``violation <= viol_tol``
    (default ``tau``). ``inf`` unless the record is credited and its answer passes; else the smaller of
    the first passing trace point's ``evals`` and ``answer_evals``. Where ``f0 <= f_star`` (a start at
    the optimum, or an ``upper-bound`` f*) the bound is ``<= f_star``, as the formula gives.
    """
    tau = _check_positive("tau", tau)
    viol_tol = tau if viol_tol is None else _check_positive("viol_tol", viol_tol)
    _check_record(rec, "rec", ("f", "f0", "f_star"))
    return _reduction_hit(rec, tau, viol_tol)


# ----------------------------------------------------------------------------------- instances
def instances(records) -> list[Instance]:
    """The sorted ``(problem, size, repeat)`` present in ``records`` for any solver: the one denominator."""
    return sorted({_instance(r) for r in _check_records(records)})


class _Table(NamedTuple):
    instances: tuple[Instance, ...]
    solvers: tuple[str, ...]
    values: np.ndarray  # (solvers, instances, *tail); inf where the solver has no value (not run / n.a.)
    not_applicable: dict[str, int]
    not_run: dict[str, int]


def _table(recs: list[Record], value: Callable[[Record], Any], tail: tuple[int, ...] = ()) -> _Table:
    inst = sorted({_instance(r) for r in recs})
    solvers = sorted({str(r["solver"]) for r in recs})
    ii, si = {k: i for i, k in enumerate(inst)}, {s: i for i, s in enumerate(solvers)}
    vals = np.full((len(solvers), len(inst), *tail), np.inf)
    seen = np.zeros((len(solvers), len(inst)), dtype=bool)
    na = dict.fromkeys(solvers, 0)
    for r in recs:
        s, i = si[str(r["solver"])], ii[_instance(r)]
        seen[s, i] = True
        if r["status"] == NOT_APPLICABLE:
            na[solvers[s]] += 1
        else:
            vals[s, i] = value(r)
    not_run = {s: int((~seen[k]).sum()) for k, s in enumerate(solvers)}
    return _Table(tuple(inst), tuple(solvers), vals, na, not_run)


@dataclass(frozen=True)
class Profile:
    """A performance or data profile: step functions of ``x`` over one set of instances.

    - ``kind``: ``"performance"`` (``x`` is tau, the ratio to the fastest) or ``"data"`` (``x`` is kappa,
      evaluations in units of ``n + 1``);
    - ``x``: the abscissae (ascending); by default every step of the curves and a flat tail;
    - ``fraction[s]``: ``#{instances p : values[s][p] <= x} / len(instances)`` at each ``x``;
    - ``values[s]``: per instance (order of ``instances``) the ratio ``r_{p,s}`` or ``kappa_{p,s}``,
      ``inf`` where ``s`` has no credited hit;
    - ``solved[s]``: the fraction at ``x = inf`` (instances solved at all);
    - ``not_applicable[s]``, ``not_run[s]``: instances ``s`` was not applicable to / has no record on.
    Plot ``plt.step(p.x, p.fraction[s], where="post")``.
    """

    kind: str
    x: np.ndarray
    fraction: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    instances: tuple[Instance, ...]
    solved: dict[str, float]
    not_applicable: dict[str, int]
    not_run: dict[str, int]

    @property
    def denominator(self) -> int:
        """The number of instances every solver's fraction is divided by."""
        return len(self.instances)


def _default_x(values: np.ndarray, first: float, stretch: float, empty_top: float) -> np.ndarray:
    finite = values[np.isfinite(values)]
    x = np.unique(np.concatenate([[first], finite]))
    top = x[-1] * stretch if finite.size else empty_top
    return np.append(x, top) if top > x[-1] else x


def _profile(kind: str, tab: _Table, vals: np.ndarray, x: np.ndarray) -> Profile:
    hit = np.isfinite(vals)[:, :, None] & (vals[:, :, None] <= x)  # inf (no hit) is never <= tau, even tau = inf
    fraction = {s: np.mean(hit[k], axis=0) for k, s in enumerate(tab.solvers)}
    solved = {s: float(np.mean(np.isfinite(vals[k]))) for k, s in enumerate(tab.solvers)}
    return Profile(
        kind, x, fraction, {s: vals[k].copy() for k, s in enumerate(tab.solvers)}, tab.instances, solved,
        tab.not_applicable, tab.not_run,
    )  # fmt: skip


def performance_profile(records, tol: float, measure: str = "t", taus=None) -> Profile:
    r"""Dolan & Moré's (2002) performance profile at relative target ``tol``, one denominator.

    With :math:`t_{p,s}` = :func:`hitting_time` (clipped below at :data:`FLOOR`; ``inf`` for no credited
    hit, no record or ``not applicable``), :math:`r_{p,s} = t_{p,s} / \min_{s'} t_{p,s'}` (``inf`` where
    :math:`t_{p,s}` is) and :math:`\rho_s(\tau) = \#\{p : r_{p,s} \le \tau\} / n_p`, ``n_p`` = every
    instance in ``records``. An instance no solver solves stays in ``n_p`` (every ratio inf there).
    ``taus`` (numbers >= 0, inf allowed) default to 1, every distinct finite ratio, and twice the largest.
    """
    recs = _check_records(records)
    tol, measure = _check_positive("tol", tol), _check_measure(measure)
    x = None if taus is None else _check_array("taus", taus, strict=False, allow_inf=True)
    tab = _table(recs, lambda r: _hits(r, np.array([tol]), measure)[0])
    t = np.maximum(tab.values, FLOOR[measure])
    best = t.min(axis=0)
    with np.errstate(invalid="ignore"):
        ratios = np.where(np.isfinite(t), t / best, np.inf)
    return _profile("performance", tab, ratios, _default_x(ratios, 1.0, 2.0, 2.0) if x is None else np.sort(x))


def data_profile(records, tau: float, kappas=None, viol_tol: float | None = None) -> Profile:
    r"""Moré & Wild's (2009, eq. 2.7) data profile at tolerance ``tau``, one denominator.

    :math:`d_s(\kappa) = \#\{p : t_{p,s} \le \kappa (n_p + 1)\} / n_{inst}` with :math:`t_{p,s}` =
    :func:`reduction_hitting_time` (evaluations f + grad + hvp; Moré & Wild count f only) and ``n_p`` =
    ``rec["n"]``; ``values[s]`` holds :math:`t_{p,s} / (n_p + 1)`. ``kappas`` (numbers >= 0, inf allowed)
    default to 0, every distinct finite value, and 1.1 times the largest.
    """
    recs = _check_records(records, ("f", "f0", "f_star", "n"))
    tau = _check_positive("tau", tau)
    viol_tol = tau if viol_tol is None else _check_positive("viol_tol", viol_tol)
    x = None if kappas is None else _check_array("kappas", kappas, strict=False, allow_inf=True)
    tab = _table(recs, lambda r: _reduction_hit(r, tau, viol_tol) / (int(r["n"]) + 1))
    vals = tab.values
    return _profile("data", tab, vals, _default_x(vals, 0.0, 1.1, 1.0) if x is None else np.sort(x))


# ----------------------------------------------------------------------------------- runtime ECDF
@dataclass(frozen=True)
class RuntimeECDF:
    """COCO's empirical runtime distribution per solver (no simulated restarts; see :func:`runtime_ecdf`).

    - ``runtimes[s]``: sorted, finite: one entry per (instance, target) pair ``s`` hit;
    - ``denominator``: ``len(instances) * len(targets)``, the same for every solver;
    - ``fraction(s, x)``: ``#{runtimes[s] <= x} / denominator``, the ECDF at ``x``;
    - ``measure`` and ``per_dim`` say what a runtime is (evaluations / n, evaluations, or seconds).
    Plot ``plt.step(e.runtimes[s], np.arange(1, k + 1) / e.denominator, where="post")``.
    """

    targets: np.ndarray
    runtimes: dict[str, np.ndarray]
    instances: tuple[Instance, ...]
    not_applicable: dict[str, int]
    not_run: dict[str, int]
    measure: str
    per_dim: bool

    @property
    def denominator(self) -> int:
        return len(self.instances) * len(self.targets)

    def fraction(self, solver: str, x) -> np.ndarray:
        """The ECDF of ``solver`` at runtimes ``x`` (array-like)."""
        return np.searchsorted(self.runtimes[solver], np.asarray(x, dtype=float), side="right") / self.denominator


def runtime_ecdf(records, targets=None, measure: str = "evals", per_dim: bool | None = None) -> RuntimeECDF:
    r"""The empirical cumulative distribution of runtimes over all (instance, target) pairs, per solver.

    Hansen et al. 2021 (§ "runtime distributions") and 2022: for the targets :math:`\{t_k\}` (default
    :data:`COCO_TARGETS`, 51 log-spaced 1e2 .. 1e-8; COCO's are absolute :math:`f - f^*`, ours relative
    suboptimality) :math:`F_s(x) = \#\{(p, k) : RT_{p,s}(t_k) \le x\} / (n_{inst} K)` with
    :math:`RT` = :func:`hitting_times`, divided by ``n`` when ``per_dim`` (default: for evaluations).
    Plain ECDF, as IOHprofiler's: an unsuccessful (run, target) pair is ``inf``; unlike cocopp's figures
    no runs are concatenated by *simulated restarts* (each run has its own budget; a restarted solver's
    runtime is :func:`simulated_restarts`'s). Instances a solver was not run on or not applicable to count
    as unsolved pairs (one denominator).
    """
    measure = _check_measure(measure)
    per_dim = (measure == "evals") if per_dim is None else bool(per_dim)
    if per_dim and measure != "evals":
        raise ValueError(f"per_dim=True divides evaluations by n; it needs measure='evals', got {measure!r}")
    recs = _check_records(records, ("n",) if per_dim else ())
    tgt = COCO_TARGETS.copy() if targets is None else _check_array("targets", targets)

    def value(r):
        return _hits(r, tgt, measure) / (int(r["n"]) if per_dim else 1)

    tab = _table(recs, value, (tgt.size,))
    rts = {s: np.sort(v[np.isfinite(v)]) for s, v in zip(tab.solvers, tab.values, strict=True)}
    return RuntimeECDF(tgt, rts, tab.instances, tab.not_applicable, tab.not_run, measure, per_dim)


# ----------------------------------------------------------------------------------- ERT
class ERT(NamedTuple):
    """Expected running time of one (solver, problem, size) over its runs (repeats)."""

    ert: float  # sum of runtimes (success) and costs (failure) / number of successes; inf if none
    n_runs: int
    n_success: int
    total: float  # the numerator: everything the runs spent until success or their end


class ERTInterval(NamedTuple):
    """``ert`` with a bootstrap percentile interval ``[low, high]`` at ``confidence``."""

    ert: float
    low: float
    high: float
    confidence: float
    n_runs: int
    n_success: int


def _run_cost(rec: Record, measure: str) -> float:
    """What an unsuccessful run spent: its evaluations, or ``min(wall, budget_seconds)`` (wall NaN -> budget).
    A run whose count is unknown (killed, or its process died) is charged its whole ``max_evals``."""
    if measure == "evals":
        ev = _num(rec.get("evals"))
        return _num(rec.get("max_evals")) if math.isnan(ev) else ev
    budget, wall = _num(rec["budget_seconds"]), _num(rec["wall"])
    return budget if math.isnan(wall) else min(wall, budget)


def _outcomes(group: list[Record], tol: float, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """Per run ``(runtime or cost, success)``."""
    hit = np.array([_hits(r, np.array([tol]), measure)[0] for r in group])
    success = np.isfinite(hit)
    cost = np.array([h if ok else _run_cost(r, measure) for h, ok, r in zip(hit, success, group, strict=True)])
    return cost, success


def _groups(recs: list[Record]) -> dict[GroupKey, list[Record]]:
    out: defaultdict[GroupKey, list[Record]] = defaultdict(list)
    for r in recs:
        if r["status"] != NOT_APPLICABLE:
            out[(str(r["solver"]), str(r["problem"]), str(r["size"]))].append(r)
    return {k: sorted(out[k], key=lambda r: int(r["repeat"])) for k in sorted(out)}


def _ert(cost: np.ndarray, success: np.ndarray) -> ERT:
    n_s, total = int(success.sum()), float(cost.sum())
    return ERT(total / n_s if n_s else math.inf, int(cost.size), n_s, total)


def ert(records, tol: float, measure: str = "evals") -> dict[GroupKey, ERT]:
    r"""COCO's expected running time (aRT; Price 1997, Auger & Hansen 2005; cocopp ``toolsstats.sp``).

    Per ``(solver, problem, size)`` over its runs (repeats; ``not applicable`` records are no runs):
    :math:`ERT = (\sum_{succ} RT_i + \sum_{fail} c_i) / n_{succ}`, ``RT`` = :func:`hitting_time` at
    ``tol`` and ``c`` what an unsuccessful run spent (``evals``, or ``min(wall, budget_seconds)``
    seconds, the budget where ``wall`` is unknown); ``inf`` without a success. It is the mean runtime of
    the solver restarted independently until it succeeds; with every run successful, the mean runtime.
    """
    recs = _check_records(records, ("evals", "wall", "budget_seconds"))
    tol, measure = _check_positive("tol", tol), _check_measure(measure)
    return {k: _ert(*_outcomes(g, tol, measure)) for k, g in _groups(recs).items()}


def _restart_sums(cost: np.ndarray, success: np.ndarray, size: int, k: int, rng) -> np.ndarray:
    """``size`` sums of ``k`` simulated restarted runs (cocopp's ``drawSP``): a restarted run draws runs
    uniformly with replacement, adding the cost of each failure, until a success, whose runtime it adds.
    The failures before ``k`` successes are negative-binomial(k, n_succ / n), each a uniform failed run."""
    succ, fail = cost[success], cost[~success]
    total = succ[rng.integers(0, succ.size, size=(size, k))].sum(axis=1)
    if fail.size:
        n_fail = rng.negative_binomial(k, succ.size / cost.size, size=size)
        draws = fail[rng.integers(0, fail.size, size=int(n_fail.sum()))]
        total = total + np.bincount(np.repeat(np.arange(size), n_fail), weights=draws, minlength=size)
    return total


def _check_count(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def ert_bootstrap(
    records, tol: float, measure: str = "evals", n_boot: int = 1000, confidence: float = 0.95, rng=0
) -> dict[GroupKey, ERTInterval]:
    r""":func:`ert` with a percentile bootstrap interval drawn by simulated restarts (cocopp's scheme).

    With ``n_s`` successes among ``n`` runs, one bootstrap replicate is the mean of ``n_s`` simulated
    restarted runs (each: draw runs with replacement until a success; the sum of the failures' costs
    and the success's runtime). Its expectation is the ERT exactly, and it is the ERT's own estimator
    under sampling until ``n_s`` successes, so its percentiles ``(1 -+ confidence) / 2`` bound the ERT
    (a confidence interval; the spread of *single* restarted runs, which cocopp's tables give in braces,
    is :func:`simulated_restarts`). Like every percentile bootstrap it under-covers with few runs and
    heavy tails (measured: a nominal 95% interval covered the true ERT in 0.81 of samples of 10 always
    successful lognormal runs, 0.86 of 15 runs succeeding w.p. 0.9; 0.94-0.95 at success rates 0.3-0.5;
    resampling whole runs instead, cocopp's ``draw(..., func=sp)``, gave the same within 0.01 except at
    5 runs). No success: ``(inf, inf, inf)``. ``rng``: a seed or a
    ``numpy.random.Generator``; groups are drawn in sorted order, so a seed gives the same intervals.
    """
    recs = _check_records(records, ("evals", "wall", "budget_seconds"))
    tol, measure = _check_positive("tol", tol), _check_measure(measure)
    n_boot = _check_count("n_boot", n_boot)
    c = float(confidence) if isinstance(confidence, int | float) and not isinstance(confidence, bool) else math.nan
    if not 0 < c < 1:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    gen = np.random.default_rng(rng)
    out = {}
    for key, group in _groups(recs).items():
        cost, success = _outcomes(group, tol, measure)
        e = _ert(cost, success)
        if e.n_success == 0:
            out[key] = ERTInterval(math.inf, math.inf, math.inf, c, e.n_runs, 0)
            continue
        reps = _restart_sums(cost, success, n_boot, e.n_success, gen) / e.n_success
        low, high = np.quantile(reps, [(1 - c) / 2, (1 + c) / 2])
        out[key] = ERTInterval(e.ert, float(low), float(high), c, e.n_runs, e.n_success)
    return out


def simulated_restarts(records, tol: float, measure: str = "evals", n: int = 1000, rng=0) -> dict[GroupKey, np.ndarray]:
    """``n`` sorted runtimes of the solver restarted until success (cocopp's ``drawSP``), per group.

    Their mean tends to the :func:`ert`; cocopp's tables print ``(q90 - q10) / 2`` of them as dispersion.
    A group without a success gives ``n`` times ``inf`` (a restarted solver that never succeeds).
    """
    recs = _check_records(records, ("evals", "wall", "budget_seconds"))
    tol, measure, n = _check_positive("tol", tol), _check_measure(measure), _check_count("n", n)
    gen = np.random.default_rng(rng)
    out = {}
    for key, group in _groups(recs).items():
        cost, success = _outcomes(group, tol, measure)
        out[key] = np.sort(_restart_sums(cost, success, n, 1, gen)) if success.any() else np.full(n, np.inf)
    return out


# ----------------------------------------------------------------------------------- convergence band
class Band(NamedTuple):
    """Quantiles over the runs of one (solver, problem, size) of their level curves on ``grid``.

    ``quantiles[j]`` is the ``qs[j]`` quantile at each grid point (shape ``(len(qs), len(grid))``),
    ``levels`` the runs' curves (shape ``(n_runs, len(grid))``, ``inf``: no target met yet).
    """

    grid: np.ndarray
    qs: np.ndarray
    quantiles: np.ndarray
    levels: np.ndarray
    n_runs: int
    n_credited: int


def _level_curve(rec: Record, grid: np.ndarray, measure: str, credit: bool) -> np.ndarray:
    x, m = _trace_arrays(rec, measure)
    pm = np.minimum.accumulate(m) if m.size else m
    k = np.searchsorted(x, grid, side="right") - 1
    seen = np.where(k >= 0, pm[np.maximum(k, 0)], np.inf) if x.size else np.full(grid.shape, np.inf)
    if not credit:
        return seen
    if not rec["credited"]:
        return np.full(grid.shape, np.inf)
    m_ans = target_level(rec["subopt_rel"], rec["violation"])
    answered = np.where(grid >= _num(rec[_ANSWER[measure]]), m_ans, np.inf)
    return np.maximum(m_ans, np.minimum(seen, answered))


def level_curve(rec: Record, grid, measure: str = "evals", credit: bool = True) -> np.ndarray:
    """The run's best level so far (smallest relative target met, ``max(subopt_rel, violation)``) at ``grid``.

    ``credit=False``: the best level of the points the oracle evaluated up to each grid point, whatever
    the run's status (what the solver saw). ``credit=True`` (default): the level the credit rule grants,
    ``max(m_answer, min(seen(x), m_answer if x >= x_answer))``, ``inf`` for an uncredited run; then
    ``level_curve(x) <= tol`` exactly when ``x >= hitting_time(tol)``, so bands and ECDFs agree.
    """
    _check_measure(measure)
    _check_record(rec, "rec")
    return _level_curve(rec, _check_array("grid", grid, low=-math.inf, allow_inf=True), measure, bool(credit))


def _quantiles(levels: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """numpy's default (linear, Hyndman-Fan 7) quantiles over axis 0; interpolation towards ``inf`` is inf."""
    s = np.sort(levels, axis=0)
    h = (s.shape[0] - 1) * qs
    lo, hi = np.floor(h).astype(int), np.ceil(h).astype(int)
    g = (h - lo)[:, None]
    a, b = s[lo], s[hi]
    with np.errstate(invalid="ignore"):
        mid = a + g * (b - a)
    return np.where(g == 0, a, np.where(np.isinf(b), np.inf, mid))


def quantile_band(records_group, measure: str = "evals", grid=None, qs=(0.25, 0.5, 0.75), credit: bool = True) -> Band:
    """Median and quantile band over the repeats of one (solver, problem, size) (:func:`level_curve`).

    ``grid`` defaults to every step of the curves (each trace point's and answer's measure). Quantiles
    are numpy's linear ones, ``inf`` where they interpolate towards a run that has met no target yet.
    ``not applicable`` records are left out; the group must share solver, problem and size.
    """
    measure = _check_measure(measure)
    recs = [r for r in _check_records(records_group, name="records_group") if r["status"] != NOT_APPLICABLE]
    keys = {(str(r["solver"]), str(r["problem"]), str(r["size"])) for r in recs}
    if len(keys) > 1:
        raise ValueError(f"records_group must be runs of one (solver, problem, size), got {sorted(keys)}")
    if not recs:
        raise ValueError("records_group has only 'not applicable' records: no run to draw")
    q = _check_array("qs", qs, low=0.0, strict=False)
    if (q > 1).any():
        raise ValueError(f"qs must be quantile levels in [0, 1], got {qs!r}")
    if grid is None:
        steps = [_trace_arrays(r, measure)[0] for r in recs] + [[_num(r[_ANSWER[measure]])] for r in recs]
        g = np.unique(np.concatenate(steps))
        g = g[np.isfinite(g)] if np.isfinite(g).any() else np.array([0.0])
    else:
        g = _check_array("grid", grid, low=-math.inf, allow_inf=True)
    levels = np.array([_level_curve(r, g, measure, bool(credit)) for r in recs])
    return Band(g, q, _quantiles(levels, q), levels, len(recs), sum(bool(r["credited"]) for r in recs))


# ----------------------------------------------------------------------------------- scaling exponent
class Exponent(NamedTuple):
    """Fitted ``t ~ C n^slope``: ``slope`` in ``[low, high]`` at ``confidence`` (NaN with a ``reason``)."""

    slope: float
    low: float
    high: float
    intercept: float  # log C (natural log)
    confidence: float
    sizes: np.ndarray  # the distinct sizes fitted
    medians: np.ndarray  # the median t over repeats at each size
    reason: str  # "" when fitted


def fit_exponent(n, t, confidence: float = 0.95) -> Exponent:
    r"""Least-squares slope of :math:`\log t` on :math:`\log n` with a t-distribution interval.

    The repeats at each size are first reduced to their median (so a size's weight does not grow with
    its repeats and one slow repeat does not bend the line); sizes whose median is not in ``(0, inf)``
    (a solver that failed there) are dropped. With ``k`` sizes left:
    :math:`b = S_{xy}/S_{xx}`, :math:`se = \sqrt{SSR / ((k - 2) S_{xx})}` and
    :math:`b \pm t_{k-2, (1 + c)/2}\, se`. Fewer than three sizes (a line through two points has no
    error estimate) give NaN and the reason.
    """
    n_a = _check_array("n", n)
    t_a = np.atleast_1d(np.asarray(t, dtype=float))
    if t_a.shape != n_a.shape or np.isnan(t_a).any():
        raise ValueError(f"t must be numbers (no NaN) of n's shape {n_a.shape}, got {t!r}")
    c = float(confidence)
    if not 0 < c < 1:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    sizes = np.unique(n_a)
    med = np.array([np.median(t_a[n_a == s]) for s in sizes])
    ok = np.isfinite(med) & (med > 0)
    if ok.sum() < 3:
        dropped = f"; dropped (no finite positive median time): {sizes[~ok].tolist()}" if (~ok).any() else ""
        reason = f"needs at least three distinct sizes, got {int(ok.sum())}: {sizes[ok].tolist()}{dropped}"
        return Exponent(math.nan, math.nan, math.nan, math.nan, c, sizes[ok], med[ok], reason)
    x, y = np.log(sizes[ok]), np.log(med[ok])
    sxx = float(np.sum((x - x.mean()) ** 2))
    b = float(np.sum((x - x.mean()) * (y - y.mean())) / sxx)
    a = float(y.mean() - b * x.mean())
    k = x.size
    se = math.sqrt(float(np.sum((y - a - b * x) ** 2)) / ((k - 2) * sxx))
    half = float(stdtrit(k - 2, (1 + c) / 2)) * se
    return Exponent(b, b - half, b + half, a, c, sizes[ok], med[ok], "")


def scaling_exponents(records, tol: float, measure: str = "t", size_key: str = "n") -> dict[tuple[str, str], Exponent]:
    """Per ``(family, solver)``: :func:`fit_exponent` of the runtime to ``tol`` against ``rec[size_key]``
    over every applicable run (all models and repeats of the family; failures are ``inf``)."""
    recs = _check_records(records, ("family", size_key))
    tol, measure = _check_positive("tol", tol), _check_measure(measure)
    pts: defaultdict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for r in recs:
        if r["status"] != NOT_APPLICABLE:
            t = float(_hits(r, np.array([tol]), measure)[0])
            pts[(str(r["family"]), str(r["solver"]))].append((float(r[size_key]), t))
    return {k: fit_exponent([p[0] for p in pts[k]], [p[1] for p in pts[k]]) for k in sorted(pts)}


# ----------------------------------------------------------------------------------- tables
def summary_table(records, tol: float) -> list[dict]:
    """One row per solver: counts over the common instances and median runtimes to ``tol``.

    Keys: ``solver``, ``instances`` (the one denominator), ``runs`` (records not ``not applicable``),
    ``not applicable``, ``not run``, ``credited``, ``solved`` (credited hit at ``tol``), ``solved
    fraction`` (``solved / instances``), one count per status in :data:`STATUSES` except ``not
    applicable``, and ``median t`` / ``median evals`` over the solved runs (NaN if none).
    """
    recs = _check_records(records)
    tol = _check_positive("tol", tol)
    t = _table(recs, lambda r: _hits(r, np.array([tol]), "t")[0])
    ev = _table(recs, lambda r: _hits(r, np.array([tol]), "evals")[0])
    rows = []
    for k, s in enumerate(t.solvers):
        mine = [r for r in recs if str(r["solver"]) == s]
        solved = np.isfinite(t.values[k])
        row: dict[str, Any] = {
            "solver": s, "instances": len(t.instances), "runs": sum(r["status"] != NOT_APPLICABLE for r in mine),
            "not applicable": t.not_applicable[s], "not run": t.not_run[s],
            "credited": sum(bool(r["credited"]) for r in mine), "solved": int(solved.sum()),
            "solved fraction": float(solved.mean()),
        }  # fmt: skip
        row.update({st: sum(r["status"] == st for r in mine) for st in STATUSES if st != NOT_APPLICABLE})
        row["median t"] = float(np.median(t.values[k][solved])) if solved.any() else math.nan
        row["median evals"] = float(np.median(ev.values[k][solved])) if solved.any() else math.nan
        rows.append(row)
    return rows


def fastest(records, tol: float, measure: str = "t") -> dict[str, tuple[str, float] | None]:
    """Per family: ``(solver, median runtime to tol)`` of the smallest median over the family's instances
    (one denominator: not run, not applicable and failed count as ``inf``); ``None`` if every median is inf."""
    recs = _check_records(records, ("family",))
    tol, measure = _check_positive("tol", tol), _check_measure(measure)
    out: dict[str, tuple[str, float] | None] = {}
    for fam in sorted({str(r["family"]) for r in recs}):
        mine = [r for r in recs if str(r["family"]) == fam]
        tab = _table(mine, lambda r: _hits(r, np.array([tol]), measure)[0])
        med = np.median(tab.values, axis=1)
        k = int(np.argmin(med))
        out[fam] = (tab.solvers[k], float(med[k])) if math.isfinite(med[k]) else None
    return out
