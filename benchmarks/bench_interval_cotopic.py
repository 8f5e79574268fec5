"""CPU cost of the co-topic family's interval certificate (SPEC §7, §11.8) beside the float solve.

Seeded Dirichlet(0.1) topics (:func:`_common.dirichlet_model`, as ``bench_interval_label.py``), the stage-1 ``W^V``,
uniform-tau, the solver's default search box ``(-60, 60)^2``: for each small size the float structured search
(grid + L-BFGS-B) and the same search with ``certify="interval"`` (the box certificate: every key has its own weight
``e^{beta G_xy}``, so each box redoes ``O(n V1 T k)`` interval work), CPU seconds (``time.process_time``) side by side
in one run, with the ratio, the status, the gap and the branch-and-bound boxes, and the load average at the start.
Writes ``results/interval_cotopic.json``.

``--big``: the certificate at ``V1 = 2,000`` (``T = 8`` Dirichlet(0.1) topics, 1,999 words, uniform-tau ``tau = 2``)
on the stated box ``[alpha* - r, alpha* + r] x [beta* - r, beta* + r]`` around the float optimum of the default
search box (``r = --radius``, default 0.5): boxes, status, bounds, gap, CPU and wall seconds, the table cache's hits,
``uptime`` before and after; a record of the list ``big`` (a rerun of the same size and radius replaces its record;
the file's other keys are kept).

``--tables``: one set of tables (a ``beta`` interval at order 2, a point at order 1) at that size, compiled against
the numpy reference side by side (best of three interleaved rounds, CPU seconds), recorded under ``tables``.

Run: ``python benchmarks/bench_interval_cotopic.py [--quick | --big [--radius R] [--words N] | --tables]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np
from _common import RESULTS, dirichlet_model, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention

MK = tc.Masking()
SIZES = [(3, 8, 1), (4, 12, 2), (4, 30, 2), (5, 60, 2)]


def _row(T, n, tau):
    g = dirichlet_model(T, n, tau, floor=1e-12)
    opts = {"family": "co-topic"}
    c0 = time.process_time()
    r0 = optimal_attention(g, MK, options=opts)
    c1 = time.process_time()
    r = optimal_attention(g, MK, options={**opts, "certify": "interval"})
    c2 = time.process_time()
    cert = r.certificate
    return dict(T=T, words=n, tau=tau, float_cpu=c1 - c0, cert_cpu=c2 - c1, ratio=(c2 - c1) / (c1 - c0),
                status=r.status, kind=cert["kind"], gap=cert["gap"], boxes=cert["global"]["n_boxes"], fun=r.fun,
                lower=cert["lower"], float_fun=r0.fun, x=[float(v) for v in r.x], box=cert["box"])  # fmt: skip


def _big_row(T, n, tau, radius, max_boxes):
    """The certificate on a box around the float optimum at corpus-like size (module docstring)."""
    from theorycheck.solvers.attention import _interval_general as ig

    made = []

    class Recorded(ig.CotopicLoss):  # keeps the evaluator, for its table cache's counts
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    ig.CotopicLoss = Recorded
    g = dirichlet_model(T, n, tau, floor=1e-12)
    up0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    c0 = time.process_time()
    r0 = optimal_attention(g, MK, options={"family": "co-topic"})
    c1, w1 = time.process_time(), time.perf_counter()
    (a, b) = (float(v) for v in r0.x)
    box = ((a - radius, a + radius), (b - radius, b + radius))
    r = optimal_attention(g, MK, options={"family": "co-topic", "box": box, "certify": "interval",
                                          "certify_options": {"max_boxes": max_boxes}})  # fmt: skip
    c2, w2 = time.process_time(), time.perf_counter()
    up1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    cert, cache = r.certificate, made[-1].cache
    return dict(T=T, words=n, V1=g.V1, tau=tau, pairs=made[-1].pairs, radius=radius, box=[list(x) for x in box],
                float_cpu=c1 - c0, float_fun=r0.fun, float_x=[a, b], cert_cpu=c2 - c1, cert_wall=w2 - w1,
                boxes=cert["global"]["n_boxes"], cpu_per_box=(c2 - c1) / cert["global"]["n_boxes"], status=r.status,
                kind=cert["kind"], lower=cert["lower"], upper=cert["upper"], fun=r.fun, gap=cert["gap"],
                fun_minus_float=r.fun - r0.fun, x=[float(v) for v in r.x], argmin=cert["argmin_original"],
                cache_hits=cache.hits, cache_misses=cache.misses, uptime_start=up0, uptime_end=up1,
                message=r.message)  # fmt: skip


def _tables_row(T, n, tau, rounds=3):
    """CPU seconds of one set of tables (a beta interval at order 2, a point at order 1), compiled against the numpy
    reference, side by side in one run (interleaved rounds, the best of each), and their widths' largest ratio."""
    from theorycheck.solvers.attention._interval_cotopic import CotopicLoss
    from theorycheck.solvers.attention._interval_general import _factors
    from theorycheck.solvers.attention._structured import _value

    g = dirichlet_model(T, n, tau, floor=1e-12)
    U, V = _factors(g, _value(g, MK, "stage1")[0])
    CL = {t: CotopicLoss(g, MK, U, V, tables=t) for t in ("compiled", "numpy")}
    cases = {"box_order2": (np.array([-0.5]), np.array([0.0]), 2), "point_order1": (np.array([0.3]),) * 2 + (1,)}
    best: dict = {}
    for _ in range(rounds):
        for name, (lo, hi, o) in cases.items():
            for t, cl in CL.items():
                cl.cache.store.clear()
                c0 = time.process_time()
                out = cl._tables(lo, hi, o)
                best[(name, t)] = min(best.get((name, t), (np.inf,))[0], time.process_time() - c0), out
    row = dict(T=T, words=n, V1=g.V1, tau=tau, load=list(os.getloadavg()))
    for name in cases:
        (tc_, oc), (tn, on) = best[(name, "compiled")], best[(name, "numpy")]
        widths = [np.max((a.hi - a.lo) / np.maximum(b.hi - b.lo, 1e-300))
                  for xs, ys in zip(oc, on) for a, b in zip(xs, ys)]  # fmt: skip
        row[name] = dict(compiled_cpu=tc_, numpy_cpu=tn, ratio_numpy_over_compiled=tn / tc_,
                         max_width_ratio_compiled_over_numpy=float(max(widths)))  # fmt: skip
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--tables", action="store_true")
    ap.add_argument("--radius", type=float, default=0.5)
    ap.add_argument("--words", type=int, default=1999)
    ap.add_argument("--max-boxes", type=int, default=3000)
    args = ap.parse_args()
    load = os.getloadavg()
    if args.big or args.tables:
        key, row = ("big", _big_row(8, args.words, 2, args.radius, args.max_boxes)) if args.big else (
            "tables", _tables_row(8, args.words, 2))  # fmt: skip
        print(json.dumps(row, indent=1))
        old = json.loads((RESULTS / "interval_cotopic.json").read_text())
        old.pop("machine", None)
        same = ("words", "tau", "radius") if args.big else ("words", "tau")
        rows = [r for r in old.get(key, []) if any(r.get(f) != row[f] for f in same)] + [row]  # replace a rerun
        write_json("interval_cotopic", {**old, key: rows, f"{key}_load_average_start": list(load)})
        return
    rows = [_row(*s) for s in (SIZES[:2] if args.quick else SIZES)]
    keys = ["T", "words", "tau", "float_cpu", "cert_cpu", "ratio", "status", "gap", "boxes"]
    print_table(keys, [[r[k] for k in keys] for r in rows])
    print(f"load average at the start: {load}")
    write_json("interval_cotopic", {"rows": rows, "load_average_start": list(load)})


if __name__ == "__main__":
    main()
