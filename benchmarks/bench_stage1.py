"""Stage-1 optimal W^V: closed form vs dense lstsq vs cvxpy (CLARABEL), side by side in one run.

For a ladder of sizes (v = 10, T growing, then T = 1000 with v up to 100) each method computes the
minimum-norm W^V (reg = 0) and, separately, the ridge solution (reg = 0.1). Reported per size:
wall time of each method (including our residual certification), the ratios, the max-abs distance
of each dense answer to the closed form, and each method's relative stationarity residual
``||W (Sigma + reg I) - C||_F / ||C||_F``. A method stops growing once a run exceeds the budget
(default 60 s) or its fitted power law predicts the next run would exceed 3x the budget.
The closed form runs to T = 1000, v = 100 (V1 = 100,001) without any V1 x V1 array.

Run: ``python benchmarks/bench_stage1.py [--budget 60] [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _common import best_time, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_value_matrix

LADDER = [
    (2, 10),
    (5, 10),
    (10, 10),
    (20, 10),
    (40, 10),
    (80, 10),
    (160, 10),
    (320, 10),
    (640, 10),
    (1000, 10),
    (1000, 20),
    (1000, 50),
    (1000, 100),
]
METHODS = ("closed-form", "lstsq", "cvxpy")
#: smallest exponent used to extrapolate the next run time (dense LAPACK is O(V1^3))
MIN_EXPONENT = {"lstsq": 3.0, "cvxpy": 2.0}


def _timed(method, tm, mk, reg):
    if method == "closed-form":
        t = best_time(
            lambda: optimal_value_matrix(tm, mk, reg=reg, method=method, options={"dense": False}),
            repeat=3,
            min_time=0.02,
        )
        return t, optimal_value_matrix(tm, mk, reg=reg, method=method, options={"dense": False})
    t0 = time.perf_counter()
    res = optimal_value_matrix(tm, mk, reg=reg, method=method)
    return time.perf_counter() - t0, res


def _err_to_closed_form(res, cf):
    if res is None or res.x is None:
        return math.nan
    if isinstance(res.x, np.ndarray):
        return float(np.abs(res.x - cf.x.toarray()).max())
    return 0.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per run before a method stops growing")
    ap.add_argument("--quick", action="store_true", help="only the first sizes (smoke test)")
    ap.add_argument("--regs", default="0,0.1", help="comma-separated reg values")
    args = ap.parse_args(argv)
    from tqdm.auto import tqdm

    mk = tc.Masking()
    ladder = LADDER[:5] if args.quick else LADDER
    regs = [float(x) for x in args.regs.split(",")]
    # warm-up: Numba kernels, cvxpy import
    tm0 = tc.TopicModel(T=3, v=2, tau=1)
    for m in METHODS:
        optimal_value_matrix(tm0, mk, reg=0.0, method=m)

    records = []
    for reg in regs:
        alive = {m: True for m in METHODS}
        history = {m: [] for m in METHODS}  # (V1, seconds)
        for T, v in tqdm(ladder, desc=f"reg={reg}", unit="size"):
            tm = tc.TopicModel(T=T, v=v, tau=min(3, T - 1) if T > 1 else 1)
            row = {"reg": reg, "T": T, "v": v, "V1": tm.V1}
            cf = None
            for m in METHODS:
                if m != "closed-form" and tm.V1 > 20001:
                    alive[m] = False
                if alive[m] and len(history[m]) >= 2 and m != "closed-form":
                    (n1, t1), (n2, t2) = history[m][-2:]
                    expo = max(MIN_EXPONENT[m], math.log(max(t2, 1e-9) / max(t1, 1e-9)) / math.log(n2 / n1))
                    if t2 * (tm.V1 / n2) ** expo > 3 * args.budget:
                        alive[m] = False
                if not alive[m]:
                    row[f"{m}_s"] = math.nan
                    row[f"{m}_err"] = math.nan
                    row[f"{m}_stat"] = math.nan
                    row[f"{m}_status"] = None
                    continue
                sec, res = _timed(m, tm, mk, reg)
                if m == "closed-form":
                    cf = res
                history[m].append((tm.V1, sec))
                row[f"{m}_s"] = sec
                row[f"{m}_err"] = _err_to_closed_form(res, cf)
                row[f"{m}_stat"] = res.residuals.get("stationarity_rel", math.nan)
                row[f"{m}_status"] = res.status
                if sec > args.budget:
                    alive[m] = False
            records.append(row)

    headers = [
        "reg",
        "V1",
        "cf_s",
        "lstsq_s",
        "cvxpy_s",
        "lstsq/cf",
        "cvxpy/cf",
        "cvxpy/lstsq",
        "err_lstsq",
        "err_cvxpy",
        "stat_cf",
        "stat_lstsq",
        "stat_cvxpy",
    ]
    rows = []
    for r in records:
        cf_s, ls_s, cv_s = r["closed-form_s"], r["lstsq_s"], r["cvxpy_s"]
        rows.append(
            [
                r["reg"],
                r["V1"],
                cf_s,
                ls_s,
                cv_s,
                ls_s / cf_s,
                cv_s / cf_s,
                cv_s / ls_s,
                r["lstsq_err"],
                r["cvxpy_err"],
                r["closed-form_stat"],
                r["lstsq_stat"],
                r["cvxpy_stat"],
            ]
        )
    print()
    print_table(headers, rows)
    largest = {
        f"{m} (reg={reg})": max((r["V1"] for r in records if r["reg"] == reg and r[f"{m}_s"] <= args.budget), default=0)
        for reg in regs
        for m in METHODS
    }
    print(f"\nlargest V1 solved within {args.budget:g} s:", largest)
    path = write_json(
        "stage1", {"budget_s": args.budget, "headers": headers, "rows": rows, "records": records, "largest_V1": largest}
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
