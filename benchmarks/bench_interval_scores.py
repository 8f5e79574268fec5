"""CPU of the score-coordinate interval evaluator (SPEC §7, §11.8): the Numba kernel beside the numpy engine.

Seeded Dirichlet(0.1) topics (as ``bench_interval_label.py``), the stage-1 ``W^V``, uniform-tau. Per size, side by
side in one run (CPU seconds, ``time.process_time``, best of ``--repeat``, after a warm-up that compiles the kernel
and fills the coefficient caches): what :func:`._interval_vec.box_bounds` asks of the evaluator per box (one
order-2 box evaluation and the order-1 enclosures at two points) with ``engine="numpy"`` and ``engine="numba"``, the
ratio, and the widths of both engines' enclosures; at 6 x 100 words also :func:`label_split_certificate` end to end
with each engine. With ``--big`` the corpus-sized case (T = 20, 13,586 words, tau = 3: 15.5 million (law, word)
pairs): the rigorous setup, one pass over the coefficients (numpy, and numpy + packing for the kernel; the packed
coefficients are kept when they fit half the memory limit, ``packed_cached``), the kernel alone, and the same box
work per engine end to end (numpy recomputes its coefficients on every evaluation at that size; the kernel reads the
kept packed ones, or repacks them when they were not kept). The Numba thread count and the load average are recorded.
Writes ``results/interval_scores.json``.

Run: ``python benchmarks/bench_interval_scores.py [--big] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import numba
import numpy as np
from _common import dirichlet_model, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention import _interval_general as ig
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import _PACKED, _corner_exps, packed_chunks, score_loss, to_scores
from theorycheck.solvers.attention._interval_scores_kernel import N_COEF, score_sums
from theorycheck.solvers.attention._interval_vec import IVec, evaluate

MK = tc.Masking()


def _cpu(fn):
    c = time.process_time()
    out = fn()
    return time.process_time() - c, out


def _best(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        c, out = _cpu(fn)
        best = min(best, c)
    return best, out


def _box_work(LL, lo, hi, pts, engine):
    """The evaluator calls of one ``box_bounds`` box: order 2 on the box, order 1 at two points."""
    ev = functools.partial(score_loss, LL, engine=engine)
    F = evaluate(lo, hi, None, None, ev, order=2)
    P = evaluate(pts, pts, None, None, ev, order=1)
    return F, P


def _widths(F):
    return [float(x.hi[0] - x.lo[0]) for x in (F.v, *F.g, *F.h)]


def _compare(LL, x, half, repeat):
    """Side-by-side CPU of one box's evaluator work (box of half-width ``half`` around the scores ``x``)."""
    lo, hi = np.array([x]) - half, np.array([x]) + half
    pts = np.vstack([np.array([x]), 0.5 * lo + 0.5 * hi])
    out = {}
    for engine in ("numpy", "numba"):
        c, (F, _) = _best(lambda e=engine: _box_work(LL, lo, hi, pts, e), repeat)
        out[engine] = dict(cpu=c, widths=_widths(F))
    out["ratio_numpy_over_numba"] = out["numpy"]["cpu"] / out["numba"]["cpu"]
    return out


def _certificate(g, repeat):
    """``label_split_certificate`` end to end with each engine (the engine chosen by rebinding the evaluator)."""
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    r = optimal_attention(g, MK, options={"family": "label"})
    x0 = (float(r.x[0]), float(r.x[1]))
    out = {}
    orig, radius = ig.score_loss, ig.SCOPE_DEFAULTS["global"]["radius"]
    try:
        for engine in ("numpy", "numba"):
            ig.score_loss = functools.partial(orig, engine=engine)
            c, cert = _best(lambda: ig.label_split_certificate(LabelLoss(g, MK, W.left, W.right), 1e-9, 20_000, x0,
                                                                radius), repeat)  # fmt: skip
            out[engine] = dict(cpu=c, lower=cert.lower, upper=cert.upper, gap=cert.gap, boxes=cert.n_boxes,
                               converged=cert.converged)  # fmt: skip
    finally:
        ig.score_loss = orig
    out["ratio_numpy_over_numba"] = out["numpy"]["cpu"] / out["numba"]["cpu"]
    return out


def _small(repeat):
    g = dirichlet_model(6, 100, 3, floor=1e-12)
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    LL = LabelLoss(g, MK, W.left, W.right)
    r = optimal_attention(g, MK, options={"family": "label"})
    x = to_scores(*r.x)
    _box_work(LL, np.array([x]) - 0.1, np.array([x]) + 0.1, np.array([x, x]), "numba")  # warm-up (JIT, caches)
    rows = {f"half_{h:g}": _compare(LL, x, h, repeat) for h in (0.01, 0.5)}
    return dict(T=6, words=100, tau=3, pairs=LL.pairs, boxes=rows, certificate=_certificate(g, max(1, repeat // 2)))


def _big(repeat):
    g = dirichlet_model(20, 13586, 3, floor=1e-12)
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    c_setup, LL = _cpu(lambda: LabelLoss(g, MK, W.left, W.right))
    c_coef, _ = _cpu(lambda: sum(c[0].lo.shape[0] for c in LL._chunks()))
    c_pack, _ = _cpu(lambda: sum(p.shape[0] for p in packed_chunks(LL)))
    x = to_scores(8.59, 0.182)
    lo, hi = np.array([x]) - 0.05, np.array([x]) + 0.05
    pts = np.vstack([np.array([x]), 0.5 * lo + 0.5 * hi])
    kern = {}
    for name, S, B, order in (("order2_box", IVec(lo[:, 0], hi[:, 0]), IVec(lo[:, 1], hi[:, 1]), 2),
                              ("order1_points", IVec(pts[:, 0]), IVec(pts[:, 1]), 1)):  # fmt: skip
        ex = _corner_exps(S, B)
        nc = np.where((S.lo == S.hi) & (B.lo == B.hi), 1, 4).astype(np.int64)
        c = 0.0
        for coef in packed_chunks(LL):  # the kernel alone, the packing excluded
            c += _cpu(lambda: score_sums(coef, ex, nc, order))[0]  # called at once
        kern[name] = c
    out = dict(T=20, words=13586, tau=3, pairs=LL.pairs, setup_cpu=c_setup, coefficient_pass_cpu=c_coef,
               coefficient_and_pack_pass_cpu=c_pack, kernel_only_cpu=kern,
               kernel_only_box_work_cpu=kern["order2_box"] + kern["order1_points"],
               packed_cached=LL in _PACKED, packed_bytes=LL.pairs * 2 * N_COEF * 8)  # fmt: skip
    out["numba"] = dict(cpu=_cpu(lambda: _box_work(LL, lo, hi, pts, "numba"))[0])
    print(out, flush=True)
    out["numpy"] = dict(cpu=_cpu(lambda: _box_work(LL, lo, hi, pts, "numpy"))[0])
    out["ratio_numpy_over_numba"] = out["numpy"]["cpu"] / out["numba"]["cpu"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = dict(numba_threads=numba.get_num_threads(), load_before=os.getloadavg())
    out["small"] = s = _small(args.repeat)
    keys = ["case", "numpy_cpu", "numba_cpu", "ratio"]
    rows = [[k, v["numpy"]["cpu"], v["numba"]["cpu"], v["ratio_numpy_over_numba"]] for k, v in s["boxes"].items()]
    c = s["certificate"]
    rows.append(["split certificate", c["numpy"]["cpu"], c["numba"]["cpu"], c["ratio_numpy_over_numba"]])
    print_table(keys, rows)
    if args.big:
        out["big"] = _big(1)
        print(out["big"])
    out["load_after"] = os.getloadavg()
    write_json("interval_scores", out)


if __name__ == "__main__":
    main()
