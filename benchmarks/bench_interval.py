"""Interval certificate of the (alpha, beta) attention optimum (SPEC §4.3): numpy engine vs mpmath.iv.

For the paper's configuration (T = v = 10, tau = 3, p = .15/.1/.1) and three others, the block
(variable log K) and identity (variables alpha, beta) value matrices, over the default search boxes
of ``optimal_attention``, side by side in one run:

- ``mpmath`` (before): the scalar ``mpmath.iv`` best-first branch and bound (natural + mean-value
  forms) with ``--mp-boxes`` boxes (default 20000 block, 3000 identity);
- ``numpy`` (after): the vectorised outward-rounded engine with a second-order bound at the float
  minimiser (``theorycheck.solvers.attention._interval_vec``), target gap ``--tol`` (default 1e-9).

Reported per row: lower, upper, gap, boxes, seconds, and whether the solver's float optimum lies in
``[lower, lower + 2e-9]``. Writes ``results/interval.json``.

Run: ``python benchmarks/bench_interval.py [--quick] [--tol 1e-9] [--skip-mpmath]``.
"""

from __future__ import annotations

import argparse
import time

from _common import print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention
from theorycheck.solvers.attention import interval_certificate

CONFIGS = [
    ("paper", (10, 10, 3), (0.15, 0.1, 0.1)),
    ("tau=2", (10, 10, 2), (0.15, 0.1, 0.1)),
    ("small p_c!=p_r", (4, 3, 2), (0.3, 0.2, 0.05)),
    ("T=20 v=5 tau=4", (20, 5, 4), (0.2, 0.1, 0.3)),
]


def _row(name, value, engine, tm, mk, tol, max_boxes):
    t0 = time.perf_counter()
    cert = interval_certificate(tm, mk, value, tol=tol, max_boxes=max_boxes, engine=engine)
    sec = time.perf_counter() - t0
    sol = optimal_attention(tm, mk, value=value, options={"check_general": False})
    ok = cert.lower <= sol.fun <= cert.lower + 2e-9
    return dict(
        config=name,
        value=value,
        engine=engine,
        lower=cert.lower,
        upper=cert.upper,
        gap=cert.gap,
        boxes=cert.n_boxes,
        seconds=sec,
        solver_fun=sol.fun,
        solver_certified=ok,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the paper's configuration only, mpmath with 300/2000 boxes")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--skip-mpmath", action="store_true")
    args = ap.parse_args()
    configs = CONFIGS[:1] if args.quick else CONFIGS
    mp_boxes = {"block": 2000, "identity": 300} if args.quick else {"block": 20000, "identity": 3000}
    rows = []
    for name, (T, v, tau), p in configs:
        tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*p)
        for value in ("block", "identity"):
            engines = ["numpy"] if args.skip_mpmath else ["mpmath", "numpy"]
            for engine in engines:
                budget = mp_boxes[value] if engine == "mpmath" else 200_000
                rows.append(_row(name, value, engine, tm, mk, args.tol, budget))
                r = rows[-1]
                print(f"{name:>16} {value:>8} {engine:>6}: gap {r['gap']:.2e} in {r['seconds']:.2f} s", flush=True)
    keys = ["config", "value", "engine", "lower", "upper", "gap", "boxes", "seconds", "solver_certified"]
    print()
    print_table(keys, [[r[k] for k in keys] for r in rows])
    path = write_json("interval", {"tol": args.tol, "configs": [c[0] for c in configs], "rows": rows})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
