"""CPU cost of the co-topic family's interval certificate (SPEC §7, §11.8) beside the float solve.

Seeded Dirichlet(0.1) topics (:func:`_common.dirichlet_model`, as ``bench_interval_label.py``), the stage-1 ``W^V``,
uniform-tau, the solver's default search box ``(-60, 60)^2``: for each small size the float structured search
(grid + L-BFGS-B) and the same search with ``certify="interval"`` (the box certificate: every key has its own weight
``e^{beta G_xy}``, so each box redoes ``O(n V1 T k)`` interval work), CPU seconds (``time.process_time``) side by side
in one run, with the ratio, the status, the gap and the branch-and-bound boxes, and the load average at the start.
Writes ``results/interval_cotopic.json``.

Run: ``python benchmarks/bench_interval_cotopic.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import dirichlet_model, print_table, write_json

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()
    rows = [_row(*s) for s in (SIZES[:2] if args.quick else SIZES)]
    keys = ["T", "words", "tau", "float_cpu", "cert_cpu", "ratio", "status", "gap", "boxes"]
    print_table(keys, [[r[k] for k in keys] for r in rows])
    print(f"load average at the start: {load}")
    write_json("interval_cotopic", {"rows": rows, "load_average_start": list(load)})


if __name__ == "__main__":
    main()
