"""CPU cost of the general model's interval certificate (label family, SPEC §7, §11.8) beside the float solve.

Seeded Dirichlet(0.1) topics (as ``bench_structured_attention.py``), the stage-1 ``W^V``, uniform-tau: for each size
the float structured search (grid + L-BFGS-B) and the same search with ``certify="interval"`` (the whole-domain
chart certificate), CPU seconds (``time.process_time``) side by side in one run, with the ratio, the status, the gap
and the branch-and-bound boxes. For the corpus-sized case (``--big``: T = 20, 13,586 words, tau = 3, 1,140 sets,
15.5 million (set, word) pairs) the full certificate does not fit in minutes: the rigorous coefficient setup, one
point enclosure and one second-order box evaluation are timed, and the certificate's CPU is estimated as the boxes
of the largest full run times the cost of one box. Writes ``results/interval_label.json``.

Run: ``python benchmarks/bench_interval_label.py [--quick] [--big]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import dirichlet_model, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_vec import evaluate

MK = tc.Masking()
SIZES = [(3, 12, 2), (4, 40, 2), (6, 100, 3)]


def _cpu(fn):
    c = time.process_time()
    out = fn()
    return time.process_time() - c, out


def _row(T, n, tau):
    g = dirichlet_model(T, n, tau, floor=1e-12)
    opts = {"family": "label"}
    c_float, r0 = _cpu(lambda: optimal_attention(g, MK, options=opts))
    c_cert, r = _cpu(lambda: optimal_attention(g, MK, options={**opts, "certify": "interval"}))
    cert = r.certificate
    return dict(T=T, words=n, tau=tau, float_cpu=c_float, cert_cpu=c_cert,
                ratio=c_cert / c_float, status=r.status, kind=cert["kind"], gap=cert["gap"],
                boxes=cert["global"]["n_boxes"], fun=r.fun, lower=cert["lower"], float_fun=r0.fun)  # fmt: skip


def _big(boxes):
    g = dirichlet_model(20, 13586, 3, floor=1e-12)
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    c_setup, LL = _cpu(lambda: LabelLoss(g, MK, W.left, W.right))
    x = np.array([[8.59, 0.182]])
    c_point, p = _cpu(lambda: evaluate(x, x, None, None, LL.original, order=0))
    box = np.array([[0.8, 0.4]]), np.array([[0.85, 0.45]])
    c_box, b = _cpu(lambda: evaluate(box[0], box[1], None, None, LL.chart, order=2))
    return dict(T=20, words=13586, tau=3, pairs=LL.pairs, setup_cpu=c_setup, point_cpu=c_point,
                point_width=float(p.hi[0] - p.lo[0]), box_order2_cpu=c_box, boxes_assumed=boxes,
                cert_cpu_estimate=c_setup + boxes * c_box)  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    args = ap.parse_args()
    rows = [_row(*s) for s in (SIZES[:2] if args.quick else SIZES)]
    keys = ["T", "words", "tau", "float_cpu", "cert_cpu", "ratio", "status", "gap", "boxes"]
    print_table(keys, [[r[k] for k in keys] for r in rows])
    out = {"rows": rows}
    if args.big:
        out["big"] = _big(max(r["boxes"] for r in rows))
        print(out["big"])
    write_json("interval_label", out)


if __name__ == "__main__":
    main()
