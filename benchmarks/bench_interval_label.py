"""CPU cost of the general model's interval certificate (label family, SPEC §7, §11.8) beside the float solve.

Seeded Dirichlet(0.1) topics (as ``bench_structured_attention.py``), the stage-1 ``W^V``, uniform-tau: for each size
the float structured search (grid + L-BFGS-B), then, side by side in one run (CPU seconds, ``time.process_time``):
the whole-domain certificate on the compact chart alone (the oldest route, :func:`label_global_certificate`), the
split-domain certificate ``optimal_attention(..., certify="interval")`` (score box and four unbounded boxes, all by
the score-coordinate kernel, :func:`label_split_certificate`) and the local certificate (``certify_options={"scope":
"local"}``), with their statuses, gaps and branch-and-bound boxes. For the corpus-sized case (``--big``: T = 20,
13,586 words, tau = 3, 1,140 sets, 15.5 million (set, word) pairs; the score evaluator keeps its packed
coefficients in memory): the rigorous setup, the first (coefficient) pass, one order-1 point and one order-2
score box (the work of one branch-and-bound box), and the local certificate (interval Newton on score boxes) end
to end; the whole-domain certificate is estimated as the split route's boxes of the largest full run times the cost
of one box. ``--corpus`` runs that whole-domain certificate at corpus size end to end (``max_pairs`` raised; hours
of CPU), its finished regions recorded in ``--checkpoint`` (default ``results/interval_label_corpus.jsonl``): a
run stopped midway resumes there (``certify_options['checkpoint']``). Writes ``results/interval_label.json``
(sections not run are kept).

Run: ``python benchmarks/bench_interval_label.py [--quick] [--big] [--corpus [--checkpoint PATH]]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import RESULTS, dirichlet_model, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_general import (
    LOCAL_RADII,
    label_global_certificate,
    label_local_certificate,
)
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import score_loss
from theorycheck.solvers.attention._interval_vec import evaluate

MK = tc.Masking()
SIZES = [(3, 12, 2), (4, 40, 2), (6, 100, 3)]
BIG = (20, 13586, 3)


def _cpu(fn):
    c = time.process_time()
    out = fn()
    return time.process_time() - c, out


def _cert(g, scope):
    opts = {"family": "label", "certify": "interval", "certify_options": {"scope": scope}}
    c, r = _cpu(lambda: optimal_attention(g, MK, options=opts))
    cert = r.certificate
    return c, r, cert, (cert["local"] or cert["global"])["n_boxes"]


def _row(T, n, tau):
    g = dirichlet_model(T, n, tau, floor=1e-12)
    c_float, r0 = _cpu(lambda: optimal_attention(g, MK, options={"family": "label"}))
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    c_chart, cc = _cpu(lambda: label_global_certificate(LabelLoss(g, MK, W.left, W.right), 1e-9, 20_000, r0.x))
    c_split, r, cert, n_split = _cert(g, "global")
    regions = cert["global"]["split"]["boxes_per_region"]
    c_local, rl, lcert, n_local = _cert(g, "local")
    return dict(T=T, words=n, tau=tau, float_cpu=c_float, chart_cpu=c_chart, chart_boxes=cc.n_boxes,
                chart_gap=cc.gap, cert_cpu=c_split, ratio=c_split / c_float, chart_over_split=c_chart / c_split,
                status=r.status, kind=cert["kind"], gap=cert["gap"], boxes=n_split, regions=regions, local_cpu=c_local,
                local_status=rl.status, local_kind=lcert["kind"], local_gap=lcert["gap"], local_boxes=n_local,
                fun=r.fun, lower=cert["lower"], float_fun=r0.fun)  # fmt: skip


def _big(boxes):
    g = dirichlet_model(*BIG, floor=1e-12)
    c_float, r0 = _cpu(lambda: optimal_attention(g, MK, options={"family": "label"}))
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    c_setup, LL = _cpu(lambda: LabelLoss(g, MK, W.left, W.right))
    f = lambda xs: score_loss(LL, xs)  # noqa: E731
    x = np.array([[r0.x[0] + r0.x[1], r0.x[1]]])
    c_first, _ = _cpu(lambda: evaluate(x, x, None, None, f, order=1))
    c_point, p = _cpu(lambda: evaluate(x, x, None, None, f, order=1))
    c_box, b = _cpu(lambda: evaluate(x - 0.05, x + 0.05, None, None, f, order=2))
    c_local, lc = _cpu(lambda: label_local_certificate(LL, 1e-9, r0.x, LOCAL_RADII))
    per_box = c_box + c_point  # one order-2 box and its one point (one_point=True), in every region
    return dict(T=BIG[0], words=BIG[1], tau=BIG[2], pairs=LL.pairs, float_cpu=c_float, x=r0.x.tolist(), fun=r0.fun,
                setup_cpu=c_setup, first_pass_cpu=c_first, point_order1_cpu=c_point,
                point_width=float(p.v.hi[0] - p.v.lo[0]), box_order2_cpu=c_box, box_radius=0.05,
                box_hessian=[[float(h.lo[0]), float(h.hi[0])] for h in b.h], local_radius=lc.info["radius"],
                local_radii_tried=lc.info["radii_tried"], local_hessian=lc.info["hessian_enclosure"],
                local_newton_image=lc.info["newton_image"], local_cpu=c_local, local_converged=lc.converged,
                local_boxes=lc.n_boxes, local_gap=lc.gap,
                local_interior=lc.info["interior"], local_lower_minus_fun=lc.lower - r0.fun,
                boxes_assumed=boxes, cert_cpu_estimate=c_first + boxes * per_box)  # fmt: skip


def _corpus(checkpoint):
    """The whole-domain certificate at corpus size end to end through the public API (``max_pairs`` raised), its
    finished regions recorded in ``checkpoint`` (a later run resumes there; CPU and wall summed over the regions of
    every run)."""
    g = dirichlet_model(*BIG, floor=1e-12)
    copts = {"max_pairs": 20_000_000, "checkpoint": checkpoint}
    opts = {"family": "label", "certify": "interval", "certify_options": copts}
    w0 = time.time()
    c, r = _cpu(lambda: optimal_attention(g, MK, options=opts))
    cert = r.certificate
    split = cert["global"]["split"]
    ck = split["checkpoint"]
    return dict(T=BIG[0], words=BIG[1], tau=BIG[2], radius=split["radius"], status=r.status, kind=cert["kind"],
                x=r.x.tolist(), fun=r.fun, lower=cert["lower"], upper=cert["upper"], gap=cert["gap"],
                n_boxes=cert["global"]["n_boxes"], boxes_per_region=split["boxes_per_region"],
                n_monotone=cert["global"]["n_monotone"], regions_replayed=ck["regions_replayed"],
                cpu_per_region=ck["cpu_per_region"], wall_per_region=ck["wall_per_region"],
                regions_cpu=sum(ck["cpu_per_region"]), regions_wall=sum(ck["wall_per_region"]),
                cpu_this_run=c, wall_this_run=time.time() - w0)  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--corpus", action="store_true", help="the corpus-size certificate end to end (hours of CPU)")
    ap.add_argument("--checkpoint", default=str(RESULTS / "interval_label_corpus.jsonl"),
                    help="--corpus: the file of finished regions (resumed when it exists)")  # fmt: skip
    args = ap.parse_args()
    rows = [_row(*s) for s in (SIZES[:2] if args.quick else SIZES)]
    keys = ["T", "words", "tau", "float_cpu", "chart_cpu", "chart_boxes", "cert_cpu", "boxes", "chart_over_split",
            "status", "gap", "local_cpu", "local_boxes", "local_status"]  # fmt: skip
    print_table(keys, [[r[k] for k in keys] for r in rows])
    old = RESULTS / "interval_label.json"  # sections not run now are kept
    out = {k: v for k, v in (json.loads(old.read_text()) if old.exists() else {}).items() if k != "machine"}
    out["rows"] = rows
    if args.big:
        out["big"] = _big(rows[-1]["boxes"])  # the largest size's boxes (score box and the four outer regions)
        print(out["big"])
    if args.corpus:
        out["corpus"] = _corpus(args.checkpoint)
        print(out["corpus"])
    write_json("interval_label", out)


if __name__ == "__main__":
    main()
