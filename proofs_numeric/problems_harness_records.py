"""A benchmark run's record (the oracle's meter, :mod:`theorycheck.problems._execute`, ``_harness.finish_record``)
against an independent replay of the same deterministic solver (DERIVED from the harness's documented rules; issue
36: records of the benchmark against an independent computation, guards exactly at their limits, resume keys).

The solver: ``STEPS`` steps of gradient descent with a fixed step on ``stage1-value/lsq:paper`` (T = 3, v = 2,
tau = 2; each step one ``f`` and one ``grad`` call, the iterate reported to the callback). The replay evaluates the
problem's own ``f`` and ``grad`` on the same iterates outside any harness. Checked:

1. a run with room to spare: status ``ok``, credited; ``nfev = ngev = STEPS``, ``evals = 2 STEPS``; the answer's
   ``f`` and ``subopt_rel = (f - f*) / |f*|`` (``f*`` the certificate's upper end), ``f0``; every kept trace point's
   ``f`` and ``subopt_rel`` (relative error of the suboptimality itself) equal the replay's at the iterate of that
   evaluation (``f`` call ``2k + 1`` and ``grad`` call ``2k + 2`` see iterate ``k``), the first evaluation is kept,
   and consecutive kept points are at most ``2 E / keep`` evaluations apart (``E`` the last kept count: the geometric
   thinning's stride; near the start the gaps are that stride too, so "within a relative 1/keep of any evaluation
   count" in the oracle's docstring holds relative to the run's length, not to each count); ``evals_to_<tol>`` equal
   the credit rule recomputed from the trace;
2. the evaluation budget exactly at its limit (``max_evals = 2 m + 1``): the ``(2 m + 1)``-th evaluation is allowed,
   the next is refused; the record has status ``budget``, ``evals = 2 m + 1`` (``m + 1`` f calls, ``m`` grad
   calls) and the answer is the last reported iterate ``x_m``;
3. the cell key (:func:`~theorycheck.problems._harness.cell_key`) changes with each of the problem, size, solver,
   repeat, budget, ``max_evals``, solver code and problem code, and not otherwise (a resumed benchmark reruns a
   cell whose setting changed).

Tolerance :data:`TOL` = 1e-14 relative on every value (the same float operations in the same order give equal
values; the tolerance allows for BLAS summation order); counts and keys exactly. Falsifier: the record's ``f``
values shifted by 3e-14 relative (3 x TOL).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from theorycheck.problems import get
from theorycheck.problems._execute import evaluate, execute
from theorycheck.problems._harness import Cell, cell_key, finish_record, header
from theorycheck.problems._oracle import keep_limit
from theorycheck.report.claims import Claim, compare_all, compare_close

TOL = 1e-14
STEPS = 400
STEP = 0.5
PROBLEM, SIZE = "stage1-value/lsq:paper", {"T": 3, "v": 2, "tau": 2}


def gd_solver(oracle, budget, callback):
    """``STEPS`` steps ``x <- x - STEP grad f(x)`` (``f`` evaluated first at each step); reports every iterate."""
    x = oracle.x0
    for _ in range(STEPS):
        oracle.f(x)
        x = x - STEP * oracle.grad(x)
        callback(x)
    return x


def replay(problem, x0):
    """The iterates and their ``f`` values, computed directly on the problem (no oracle)."""
    xs, fs = [np.array(x0, dtype=float)], []
    for _ in range(STEPS):
        fs.append(problem.f(xs[-1]))
        xs.append(xs[-1] - STEP * problem.grad(xs[-1]))
    fs.append(problem.f(xs[-1]))
    return xs, fs


def _rel(a, b) -> float:
    return abs(a - b) / max(1.0, abs(b))


def _rel_sub(got: float, f: float, f_star: float) -> float:
    """Relative error of a suboptimality against ``(f - f*) / |f*|`` (floor 1e-12: near the optimum it is rounding)."""
    ref = (f - f_star) / abs(f_star)
    return abs(got - ref) / max(abs(ref), 1e-12)


def _record(problem, cert, budget, max_evals, shift):
    cell = Cell(PROBLEM, SIZE, "gd", 0)
    x0 = problem.start(0)
    raw = execute(problem, gd_solver, x0, budget, max_evals)
    rec = finish_record(header(cell, problem, cert, budget, max_evals), evaluate(problem, raw, budget), problem)
    if shift:
        rec["f"] *= 1 + shift
        for row in rec["trace"]:
            row["f"] *= 1 + shift
    return rec, x0


def _credit_rule(rec, tol) -> float:
    """``evals_to_tol`` recomputed: first trace point with ``subopt_rel <= tol``, else the answer's count."""
    if not rec["credited"] or not rec["subopt_rel"] <= tol:
        return math.inf
    hits = [p["evals"] for p in rec["trace"] if p["subopt_rel"] <= tol and p["violation"] <= tol]
    return float(min(hits + [rec["answer_evals"]]))


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    shift = inject.get("f_shift", 0.0)
    problem = get(PROBLEM, **SIZE)
    cert = problem.certificate
    f_star = cert.upper
    # 1. a run with room to spare
    rec, x0 = _record(problem, cert, 60.0, 10**6, shift)
    xs, fs = replay(problem, x0)
    errs = {"answer f": _rel(rec["f"], fs[-1]), "f0": _rel(rec["f0"], fs[0])}
    errs["answer subopt_rel"] = _rel(rec["subopt_rel"], (fs[-1] - f_star) / abs(f_star))
    errs["trace f"] = max(_rel(p["f"], fs[(int(p["evals"]) - 1) // 2]) for p in rec["trace"])
    # suboptimality relative to the certificate's f* (relative error of the suboptimality itself: early points are
    # far from f*, where a wrong scale shows)
    errs["trace subopt_rel"] = max(_rel_sub(p["subopt_rel"], fs[(int(p["evals"]) - 1) // 2], f_star)
                                   for p in rec["trace"])  # fmt: skip
    counts = {"status": rec["status"] == "ok" and rec["credited"], "nfev": rec["nfev"] == STEPS,
              "ngev": rec["ngev"] == STEPS, "evals": rec["evals"] == rec["answer_evals"] == 2 * STEPS,
              "first kept": rec["trace"][0]["evals"] == 1}  # fmt: skip
    kept = [int(p["evals"]) for p in rec["trace"]]
    keep = keep_limit(problem.n)
    gap = max(1.0, 2.0 * kept[-1] / keep)
    counts["thinning"] = all(b - a <= gap for a, b in zip(kept, kept[1:])) and kept == sorted(set(kept))
    for tol in (1e-4, 1e-8):
        ref = _credit_rule(rec, tol)
        got = rec[f"evals_to_{tol:g}"]
        counts[f"evals_to_{tol:g}"] = (got is None and ref == math.inf) or (got is not None and got == ref)
    # 2. the evaluation budget exactly at its limit
    m = int(params["m"])
    rb, _ = _record(problem, cert, 60.0, 2 * m + 1, 0.0)
    counts["budget status"] = rb["status"] == "budget" and rb["credited"]
    counts["budget counts"] = (rb["evals"], rb["nfev"], rb["ngev"]) == (2 * m + 1, m + 1, m)
    errs["budget answer = x_m"] = _rel(rb["f"], fs[m])
    # 3. cell keys
    base = dict(cell=Cell(PROBLEM, SIZE, "gd", 0), budget=1.0, max_evals=100, solver_fp="s", problem_fp="p")
    variants = [dict(base, cell=Cell("other", SIZE, "gd", 0)), dict(base, cell=Cell(PROBLEM, {"T": 4}, "gd", 0)),
                dict(base, cell=Cell(PROBLEM, SIZE, "lbfgs", 0)), dict(base, cell=Cell(PROBLEM, SIZE, "gd", 1)),
                dict(base, budget=2.0), dict(base, max_evals=101), dict(base, solver_fp="t"),
                dict(base, problem_fp="q")]  # fmt: skip
    k0 = cell_key(**base)
    keys = {k0, *(cell_key(**v) for v in variants)}
    counts["cell keys"] = cell_key(**dict(base)) == k0 and len(keys) == 1 + len(variants)
    bad = sorted(k for k, ok in counts.items() if not ok)
    worst = max(errs, key=errs.get)
    return compare_all(
        [
            compare_close(len(bad), 0, 0.5, label="record counts, statuses, credit and keys as replayed",
                          details={"wrong": bad, "kept points": len(kept), "keep": keep}),
            compare_close(errs[worst], 0.0, TOL, label="record values == independent replay",
                          details={"worst": worst, "errors": errs}),
        ]
    )  # fmt: skip


def domain():
    """``m`` in [1, STEPS - 2] = [1, 398]: the evaluation budget ``2 m + 1`` checked exactly at its limit (the run
    stops after ``m + 1`` values and ``m`` gradients, its answer the ``m``-th iterate). Default 37."""
    return st.fixed_dictionaries({"m": st.integers(1, STEPS - 2)})


def falsify(params: dict) -> dict:
    """The record's ``f`` values shifted by 3e-14 relative (3 x TOL; a loosened TOL lets it pass)."""
    return {"f_shift": 3e-14}


CLAIM = Claim(
    id="problems.harness-records",
    statement=(
        "A benchmark record (counts, kept trace, answer, suboptimality, credited hitting times, the budget guard "
        "at its limit, the cell key) equals an independent replay of a deterministic solver"
    ),
    source="DERIVED",
    spec="theorycheck/problems/_execute.py, _oracle.py, _harness.py (the credit rule, the meter)",
    check=check,
    default_params=(dict(m=37),),
    falsify=falsify,
    cost=1.0,
    domain=domain,
)
