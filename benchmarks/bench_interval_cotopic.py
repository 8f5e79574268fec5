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
``uptime`` before and after; recorded under ``big`` (the small rows of the file are kept).

Run: ``python benchmarks/bench_interval_cotopic.py [--quick | --big [--radius R] [--words N]]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--radius", type=float, default=0.5)
    ap.add_argument("--words", type=int, default=1999)
    ap.add_argument("--max-boxes", type=int, default=3000)
    args = ap.parse_args()
    load = os.getloadavg()
    if args.big:
        row = _big_row(8, args.words, 2, args.radius, args.max_boxes)
        print(json.dumps(row, indent=1))
        old = json.loads((RESULTS / "interval_cotopic.json").read_text())
        write_json("interval_cotopic", {"rows": old["rows"], "load_average_start": old["load_average_start"],
                                        "big": [row], "big_load_average_start": list(load)})  # fmt: skip
        return
    rows = [_row(*s) for s in (SIZES[:2] if args.quick else SIZES)]
    keys = ["T", "words", "tau", "float_cpu", "cert_cpu", "ratio", "status", "gap", "boxes"]
    print_table(keys, [[r[k] for k in keys] for r in rows])
    print(f"load average at the start: {load}")
    write_json("interval_cotopic", {"rows": rows, "load_average_start": list(load)})


if __name__ == "__main__":
    main()
