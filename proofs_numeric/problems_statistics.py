"""The benchmark statistics of :mod:`theorycheck.problems._stats` (DERIVED from their published definitions) against
a brute-force computation written here from the definitions, on synthetic records (issue 36: records and
statistics of the benchmark checked against an independent computation).

The records (:func:`synthetic_records`, seeded): 3 solvers x 2 problems x 2 sizes x 4 repeats with random statuses
(credited ``ok`` / ``budget`` and every failure kind, ``not applicable``, some runs missing), traces of random length
with NaN levels and points exactly at a target, answers that meet or miss the targets, unknown evaluation counts.
Brute force, one loop per definition (module docstring of ``_stats`` and the papers it cites):

- the credit rule ``RT(tol)`` for every record, target and measure;
- Dolan-Moré performance profiles ``rho_s(tau)`` (ratios to the fastest, floor ``FLOOR``, one denominator: every
  instance of any solver) at every ratio and between them;
- Moré-Wild data profiles ``d_s(kappa)`` (the reduction test ``f <= f_L + tau (f_0 - f_L)``, ``kappa`` in units of
  ``n + 1``);
- COCO runtime ECDFs (``#{(instance, target) : RT / n <= x} / (n_inst n_targets)``) at every runtime;
- ERT (``(sum of successes' runtimes + failures' costs) / #successes``, a failure's cost its evaluations or its
  ``max_evals`` when unknown);
- the scaling exponent's slope and its t interval: NumPy's ``polyfit`` with its covariance (the standard error
  from an independent formula) and SciPy's ``stats.t.ppf`` (the module uses ``scipy.special.stdtrit``);
- the summary table's solved counts and median runtimes.

Tolerance :data:`TOL` = 1e-12 (relative; ``inf`` must match ``inf``). Falsifier: every statistic of the module
shifted by 3e-12 relative (3 x TOL).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from theorycheck.problems import _stats as S
from theorycheck.report.claims import Claim, compare_all, compare_close

TOL = 1e-12
SOLVERS = ("alpha", "beta", "gamma")
PROBLEMS = ("p/one", "p/two")
SIZES = ('{"T": 3}', '{"T": 5}')
REPEATS = 4
TARGETS = (1e-1, 1e-3, 1e-5, 1e-8)


def synthetic_records(seed: int) -> list[dict]:
    """Seeded records with every status, NaN levels, missing runs and unknown counts (module docstring)."""
    rng = np.random.default_rng(seed)
    statuses = ("ok", "ok", "ok", "budget", "budget", "over budget", "killed", "error", "nan", "not applicable")
    recs = []
    for si, s in enumerate(SOLVERS):
        for p in PROBLEMS:
            for zi, size in enumerate(SIZES):
                n = 9 if zi == 0 else 25
                for rep in range(REPEATS):
                    if rng.random() < 0.08:
                        continue  # not run
                    st = str(rng.choice(statuses))
                    f_star = float(rng.uniform(0.5, 2.0))
                    f0 = f_star * (1 + float(rng.uniform(0.5, 5.0)))
                    k = int(rng.integers(0, 12))
                    evals = np.cumsum(rng.integers(1, 40, size=k)).astype(float)
                    t = np.cumsum(rng.uniform(1e-4, 0.05, size=k)) * (1 + si)
                    sub = np.minimum.accumulate(10.0 ** rng.uniform(-10, 1, size=k)) * rng.uniform(0.5, 2.0, size=k)
                    sub[rng.random(k) < 0.1] = np.nan
                    viol = np.where(rng.random(k) < 0.3, 10.0 ** rng.uniform(-12, -2, size=k), 0.0)
                    tie = rng.random(k) < 0.2  # points exactly at a target (a hit: level <= tol)
                    sub[tie], viol[tie] = rng.choice(TARGETS, size=int(tie.sum())), 0.0
                    trace = [{"t": float(t[j]), "evals": float(evals[j]), "subopt_rel": _none(sub[j]),
                              "violation": float(viol[j]), "f": f_star * (1 + float(np.nan_to_num(sub[j], nan=9.0)))}
                             for j in range(k)]  # fmt: skip
                    credited = st in S.CREDITED and rng.random() < 0.9
                    last_t = float(t[-1]) if k else 0.0
                    last_e = float(evals[-1]) if k else 0.0
                    a_sub = float(10.0 ** rng.uniform(-9, 0))
                    rec = {
                        "problem": p, "size": size, "repeat": rep, "solver": s, "family": p.split("/")[0], "n": n,
                        "status": st, "credited": credited, "subopt_rel": a_sub if st != "not applicable" else None,
                        "violation": float(viol[-1]) if k else 0.0, "f": f_star * (1 + a_sub), "f0": f0,
                        "f_star": f_star, "answer_t": last_t + 0.01 if credited else None,
                        "answer_evals": last_e + 2 if credited else None, "trace": trace,
                        "evals": None if st == "killed" else last_e + 2, "max_evals": 5000,
                        "wall": None if st == "killed" else last_t + 0.01, "budget_seconds": 1.0,
                    }  # fmt: skip
                    recs.append(rec)
    return recs


def _none(x):
    return None if not math.isfinite(float(x)) else float(x)


def _n(x) -> float:
    return math.nan if x is None else float(x)


def _level(s, v) -> float:
    s, v = _n(s), _n(v)
    return math.inf if math.isnan(s) or math.isnan(v) else max(s, v)


def rt(rec: dict, tol: float, measure: str) -> float:
    """The credit rule, one record, one target, by a loop."""
    if not rec["credited"] or not _level(rec["subopt_rel"], rec["violation"]) <= tol:
        return math.inf
    best = _n(rec["answer_" + measure])
    for p in rec["trace"]:
        x = _n(p[measure])
        if not math.isnan(x) and _level(p["subopt_rel"], p["violation"]) <= tol:
            best = min(best, x)
    return best


def reduction_rt(rec: dict, tau: float, viol_tol: float) -> float:
    if not rec["credited"]:
        return math.inf
    bound = rec["f_star"] + tau * (rec["f0"] - rec["f_star"])

    def ok(f, v):
        return _n(f) <= bound and _n(v) <= viol_tol

    if not ok(rec["f"], rec["violation"]):
        return math.inf
    best = _n(rec["answer_evals"])
    for p in rec["trace"]:
        if ok(p.get("f"), p["violation"]):
            best = min(best, _n(p["evals"]))
    return best


def _inst(r):
    return (r["problem"], r["size"], int(r["repeat"]))


def _value_of(recs, solver, inst, fn):
    for r in recs:
        if r["solver"] == solver and _inst(r) == inst:
            return math.inf if r["status"] == "not applicable" else fn(r)
    return math.inf


def _rel_err(mine, ref, shift=0.0) -> float:
    a, b = np.asarray(mine, float), np.asarray(ref, float)
    a = np.where(np.isfinite(a), a * (1 + shift), a)
    if a.shape != b.shape or not np.array_equal(np.isinf(a), np.isinf(b)) or np.isnan(a).any() != np.isnan(b).any():
        return math.inf
    fin = np.isfinite(b)
    if not fin.any():
        return 0.0
    return float(np.max(np.abs(a[fin] - b[fin]) / np.maximum(1.0, np.abs(b[fin]))))


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    sh = inject.get("shift", 0.0)
    recs = synthetic_records(params["seed"])
    inst = sorted({_inst(r) for r in recs})
    errs: dict[str, float] = {}
    # 1. the credit rule
    e = 0.0
    for r in recs:
        for m in S.MEASURES:
            ht = S.hitting_times(r, TARGETS, m)
            e = max(e, _rel_err(ht, [rt(r, tol, m) for tol in TARGETS], sh))
    errs["hitting times"] = e
    # 2. performance profiles (time) at every ratio, 3. data profiles
    e = 0.0
    for tol in (1e-3, 1e-6):
        t = {s: [max(_value_of(recs, s, i, lambda r, tol=tol: rt(r, tol, "t")), S.FLOOR["t"]) for i in inst]
             for s in SOLVERS}  # fmt: skip
        best = [min(t[s][j] for s in SOLVERS) for j in range(len(inst))]
        ratios = {s: [t[s][j] / best[j] if math.isfinite(t[s][j]) else math.inf for j in range(len(inst))]
                  for s in SOLVERS}  # fmt: skip
        taus = sorted({x for s in SOLVERS for x in ratios[s] if math.isfinite(x)} | {1.0, 1.5, 3.0, 1e6})
        prof = S.performance_profile(recs, tol, "t", taus=taus)
        for s in SOLVERS:
            ref = [sum(r <= x for r in ratios[s]) / len(inst) for x in taus]
            e = max(e, _rel_err(prof.fraction[s], ref, sh), _rel_err(prof.values[s], ratios[s], sh))
    errs["performance profile"] = e
    e = 0.0
    for tau in (1e-1, 1e-4):
        kap = {s: [_value_of(recs, s, i, lambda r, tau=tau: reduction_rt(r, tau, tau) / (r["n"] + 1)) for i in inst]
               for s in SOLVERS}  # fmt: skip
        xs = sorted({x for s in SOLVERS for x in kap[s] if math.isfinite(x)} | {0.0, 0.5, 1e3})
        prof = S.data_profile(recs, tau, kappas=xs)
        for s in SOLVERS:
            e = max(e, _rel_err(prof.fraction[s], [sum(k <= x for k in kap[s]) / len(inst) for x in xs], sh))
    errs["data profile"] = e
    # 4. runtime ECDF (evaluations / n)
    ecdf = S.runtime_ecdf(recs, targets=TARGETS)
    e = 0.0
    for s in SOLVERS:
        pts = [_value_of(recs, s, i, lambda r, tol=tol: rt(r, tol, "evals") / r["n"]) for i in inst for tol in TARGETS]
        xs = sorted({x for x in pts if math.isfinite(x)} | {0.1, 1e4})
        ref = [sum(p <= x for p in pts) / (len(inst) * len(TARGETS)) for x in xs]
        e = max(e, _rel_err(ecdf.fraction(s, xs), ref, sh))
    errs["runtime ECDF"] = e
    # 5. ERT
    e = 0.0
    for tol in (1e-2, 1e-6):
        got = S.ert(recs, tol)
        for (s, p, z), v in got.items():
            runs = [r for r in recs if (r["solver"], r["problem"], r["size"]) == (s, p, z)
                    and r["status"] != "not applicable"]  # fmt: skip
            hits = [rt(r, tol, "evals") for r in runs]
            cost = [h if math.isfinite(h) else (_n(r["evals"]) if r["evals"] is not None else r["max_evals"])
                    for h, r in zip(hits, runs, strict=True)]  # fmt: skip
            n_s = sum(math.isfinite(h) for h in hits)
            ref = sum(cost) / n_s if n_s else math.inf
            e = max(e, _rel_err([v.ert], [ref], sh))
    errs["ERT"] = e
    # 6. scaling exponent: slope and its t interval against polyfit's covariance and scipy's t quantile
    rng = np.random.default_rng(params["seed"] + 1)
    n = np.repeat([10.0, 20.0, 40.0, 80.0, 160.0], 3)
    t = 1e-3 * n**1.7 * np.exp(rng.normal(0.0, 0.2, n.size))
    ex = S.fit_exponent(n, t)
    sizes = np.unique(n)
    med = np.array([np.median(t[n == x]) for x in sizes])
    coef, cov = np.polyfit(np.log(sizes), np.log(med), 1, cov=True)
    half = stats.t.ppf(0.975, sizes.size - 2) * math.sqrt(cov[0, 0])
    errs["scaling exponent"] = _rel_err([ex.slope, ex.low, ex.high], [coef[0], coef[0] - half, coef[0] + half], sh)
    # 7. summary table
    e = 0.0
    for row in S.summary_table(recs, 1e-4):
        s = row["solver"]
        hits = [_value_of(recs, s, i, lambda r: rt(r, 1e-4, "evals")) for i in inst]
        solved = [h for h in hits if math.isfinite(h)]
        ref_med = float(np.median(solved)) if solved else math.nan
        if row["solved"] != len(solved) or row["instances"] != len(inst):
            e = math.inf
        elif solved:
            e = max(e, _rel_err([row["median evals"]], [ref_med], sh))
    errs["summary table"] = e
    worst = max(errs, key=errs.get)
    return compare_all(
        [
            compare_close(
                errs[worst],
                0.0,
                TOL,
                label="benchmark statistics == brute force from their definitions",
                details={"worst": worst, "errors": errs, "records": len(recs), "instances": len(inst)},
            )
        ]
    )


def falsify(params: dict) -> dict:
    """Every statistic shifted by 3e-12 relative (3 x TOL; a loosened TOL lets it pass). (Each mutant of
    ``benchmarks/mutation.py`` in ``problems/_stats.py`` breaks it by far.)"""
    return {"shift": 3e-12}


def domain():
    """Any seed of the synthetic records (pure functions of records: milliseconds per draw)."""
    from theorycheck.strategies import params as params_of
    from theorycheck.strategies import seeds

    return params_of(seeds())


CLAIM = Claim(
    id="problems.statistics",
    statement=(
        "The benchmark statistics (credit rule, performance and data profiles, runtime ECDFs, ERT, scaling exponent "
        "and its interval, summary table) equal brute-force computations from their definitions"
    ),
    source="DERIVED",
    spec="theorycheck/problems/_stats.py (Dolan-Moré 2002, Moré-Wild 2009, COCO 2021/2022)",
    check=check,
    default_params=(dict(seed=0),),
    falsify=falsify,
    domain=domain,
    cost=0.5,
)
