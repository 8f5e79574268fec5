"""The vectorised label interval kernel beside the per-pair kernel and numpy (issue 37 item 2; SPEC §7, §11.8).

Seeded Dirichlet(0.1) topics (``_common.dirichlet_model``, floor 1e-12), the stage-1 ``W^V``, uniform-tau. In one run,
side by side (CPU seconds ``time.process_time``, all threads, and wall seconds; the load average and the Numba thread
count recorded):

- per (box, pair) nanoseconds of the evaluator sums for order 0 / 1 (a point) and 2 (a box of half-width 0.05), one
  box and 8 boxes per call, with ``engine="numba"`` (:mod:`._interval_label_kernel`), ``"numba-pairs"``
  (:mod:`._interval_scores_kernel`) and ``"numpy"``, and the widths of the enclosures (new over per-pair kernel);
  on T = 8 x 2,000 words, tau = 2 and on T = 20 x 2,000 words, tau = 3 (numpy only on the first);
- the whole-domain certificate (:func:`._interval_general.label_split_certificate`) with the new and the per-pair
  kernel on T = 8 x 2,000: boxes, bounds, CPU and wall;
- with ``--corpus``: the whole-domain certificate at corpus size (T = 20, 13,586 words, tau = 3; 15.5 million pairs)
  end to end through the public API (``bench_interval_label._corpus``, its regions recorded in
  ``results/interval_label_corpus_kernel.jsonl``), beside the per-region record of the run before this kernel
  (``results/interval_label_corpus.jsonl``, the per-pair kernel).

Writes ``results/interval_label_kernel.json`` (a section not run now is kept). Run:
``python benchmarks/bench_interval_label_kernel.py [--quick] [--corpus]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numba
import numpy as np
from _common import RESULTS, dirichlet_model, write_json
from bench_interval_label import _corpus as corpus_run  # the corpus model and its public-API call

import theorycheck as tc
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention import _interval_general as ig
from theorycheck.solvers.attention import _interval_scores as sc
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_vec import IVec, evaluate

MK = tc.Masking()


def _timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def _evaluator(LL, engine):
    return lambda xs: sc.score_loss(LL, xs, engine=engine)


def _per_pair(LL, x, engines, repeat):
    """ns per (box, pair) of each engine's evaluation (best of ``repeat``), and enclosure widths."""
    rows = {}
    for n_boxes, order, half in ((1, 0, 0.0), (1, 1, 0.0), (1, 2, 0.05), (8, 1, 0.0), (8, 2, 0.05)):
        lo = np.array([[x[0] - half + 0.01 * i, x[1] - half] for i in range(n_boxes)])
        hi = lo + 2 * half
        row = {}
        for engine in engines:
            ev = _evaluator(LL, engine)
            evaluate(lo, hi, None, None, ev, order=order)  # warm-up: compile, fill the caches
            best = None
            for _ in range(repeat):
                c, w, out = _timed(lambda ev=ev: evaluate(lo, hi, None, None, ev, order=order))
                best = (c, w, out) if best is None or c < best[0] else best
            c, w, out = best
            v = out if isinstance(out, IVec) else out.v
            parts = [v] if isinstance(out, IVec) else [v, *out.g, *(out.h or [])]
            n = n_boxes * LL.pairs
            row[engine] = dict(cpu=c, wall=w, ns_cpu=1e9 * c / n, ns_wall=1e9 * w / n,
                               widths=[float(np.max(p.hi - p.lo)) for p in parts])  # fmt: skip
        new, old = row["numba"], row["numba-pairs"]
        row["cpu_ratio_pairs_over_new"] = old["cpu"] / new["cpu"]
        row["wall_ratio_pairs_over_new"] = old["wall"] / new["wall"]
        ratios = [a / b if b > 0 else 1.0 for a, b in zip(new["widths"], old["widths"])]
        row["width_ratio_new_over_pairs_max"] = max(ratios)
        if "numpy" in row:
            row["cpu_ratio_numpy_over_new"] = row["numpy"]["cpu"] / new["cpu"]
        rows[f"{n_boxes}_box_order{order}"] = row
        print(n_boxes, order, {k: (v["ns_cpu"] if isinstance(v, dict) else v) for k, v in row.items()}, flush=True)
    return rows


def _certificate(g, W, x0):
    """The whole-domain certificate with the new and the per-pair kernel (every region, serial)."""
    out = {}
    radius = ig.SCOPE_DEFAULTS["global"]["radius"]
    try:
        for engine in ("numba", "numba-pairs"):
            sc._DEFAULT["engine"] = engine
            c, w, cert = _timed(lambda: ig.label_split_certificate(LabelLoss(g, MK, W.left, W.right), 1e-9, 20_000,
                                                                   x0, radius))  # fmt: skip
            out[engine] = dict(cpu=c, wall=w, lower=cert.lower, upper=cert.upper, gap=cert.gap, boxes=cert.n_boxes,
                               converged=cert.converged, per_region=cert.info["split"]["boxes_per_region"])  # fmt: skip
            print(engine, out[engine], flush=True)
    finally:
        sc._DEFAULT["engine"] = None
    out["cpu_ratio_pairs_over_new"] = out["numba-pairs"]["cpu"] / out["numba"]["cpu"]
    out["wall_ratio_pairs_over_new"] = out["numba-pairs"]["wall"] / out["numba"]["wall"]
    return out


def _model(T, n, tau):
    g = dirichlet_model(T, n, tau, floor=1e-12)
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    r = optimal_attention(g, MK, options={"family": "label"})
    return g, W, (float(r.x[0]), float(r.x[1]))


def _regions(path):
    """Boxes, CPU and wall per region of a checkpoint file (its last record of each region)."""
    recs = {}
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if "region" in d:
            recs[d["region"]] = d
    rows = [recs[k] for k in sorted(recs)]
    return dict(boxes=[r["n_boxes"] for r in rows], cpu=[r["cpu"] for r in rows], wall=[r["wall"] for r in rows],
                lower=min(r["lower"] for r in rows), upper=min(r["upper"] for r in rows))  # fmt: skip


def _corpus():
    """The corpus-size certificate now (a fresh checkpoint file) beside the per-region record of the run before."""
    new_path, old_path = RESULTS / "interval_label_corpus_kernel.jsonl", RESULTS / "interval_label_corpus.jsonl"
    out = dict(load_start=list(os.getloadavg()), run=corpus_run(str(new_path)), load_end=list(os.getloadavg()))
    new, old = _regions(new_path), _regions(old_path)
    out.update(regions_new=new, regions_before=old, boxes_new=sum(new["boxes"]), boxes_before=sum(old["boxes"]),
               cpu_new=sum(new["cpu"]), cpu_before=sum(old["cpu"]), wall_new=sum(new["wall"]),
               wall_before=sum(old["wall"]))  # fmt: skip
    out["cpu_ratio_before_over_new"] = out["cpu_before"] / out["cpu_new"]
    out["wall_ratio_before_over_new"] = out["wall_before"] / out["wall_new"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the 20 x 2,000 model and the certificates")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--corpus", action="store_true", help="only the corpus-size certificate (about 5 GB, 25 CPU-min)")
    args = ap.parse_args()
    old = RESULTS / "interval_label_kernel.json"  # sections not run now are kept
    out = {k: v for k, v in (json.loads(old.read_text()) if old.exists() else {}).items() if k != "machine"}
    if args.corpus:
        out["corpus"] = _corpus()
        print(out["corpus"], flush=True)
        write_json("interval_label_kernel", out)
        return
    out.update(numba_threads=numba.get_num_threads(), load_start=list(os.getloadavg()))
    g, W, x0 = _model(8, 2000, 2)
    LL = LabelLoss(g, MK, W.left, W.right)
    xs = sc.to_scores(*x0)
    rows = _per_pair(LL, xs, ("numba", "numba-pairs", "numpy"), args.repeat)
    out["T8_2000_tau2"] = dict(T=8, words=2000, tau=2, pairs=LL.pairs, rows=rows)
    if not args.quick:
        g2, W2, x2 = _model(20, 2000, 3)
        LL2 = LabelLoss(g2, MK, W2.left, W2.right)
        rows = _per_pair(LL2, sc.to_scores(*x2), ("numba", "numba-pairs"), args.repeat)
        out["T20_2000_tau3"] = dict(T=20, words=2000, tau=3, pairs=LL2.pairs, rows=rows)
        del LL2
        out["certificate_T8_2000_tau2"] = dict(T=8, words=2000, tau=2, **_certificate(g, W, x0))
    out["load_end"] = list(os.getloadavg())
    write_json("interval_label_kernel", out)


if __name__ == "__main__":
    main()
