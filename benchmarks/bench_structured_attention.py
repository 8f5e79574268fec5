"""Structured (alpha, beta) family loss (SPEC §11.8): time per topic set against V1 and T, beside the dense evaluator.

Random topic-word matrices (Dirichlet(0.1) rows, uniform-tau law, the stage-1 ``W^V`` factored, rank <= T) and
the exact squared loss with its ``(alpha, beta)``-gradient, in one run:

- ``V1`` ladder (T = 10, tau = 3; per-set times on sampled sets): V1 = 101, 1001, 10001, 100001. Label
  family: the once-per-``W`` setup, the per-``beta`` tables and the per-set time (tables cached); co-topic family
  (one blocked product per ``beta``, ``O(V1^2 T k)``) where it fits the budget; the dense evaluator
  (:func:`theorycheck.population.attention_loss_grad`, ``O(V1^3)`` per set, on 4 sampled sets) where it fits;
  the structured and dense losses of the same sampled sets are compared.
- ``T`` ladder (n_words = 2000, tau = 2): T = 5, 10, 20, 40.

Fitted exponents: least squares of log(time per set) on log V1 (expected about 1) and on log T. Times are CPU
seconds (``time.process_time``, one BLAS / Numba thread: the project default) with the load average beside
them; wall seconds too. Writes ``results/structured_attention.json``.

The cost model of the label family's pass over the laws (flops and bytes, SPEC §11.8) and its roofline against the
machine's measured peaks: ``benchmarks/bench_roofline.py``.

Run: ``python benchmarks/bench_structured_attention.py [--quick] [--budget 120]``.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from _common import print_table, write_json

import theorycheck as tc
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss_grad
from theorycheck.population._attention_structured import make_evaluator
from theorycheck.solvers import cotopic_matrix, optimal_value_matrix

MK = tc.Masking()
ALPHA, BETA = 1.5, 0.7


def _model(T, n, tau, seed=0):
    phi = np.random.default_rng(seed).dirichlet(np.full(n, 0.1), size=T) + 1e-12
    return tc.GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=tau)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def _structured(g, W, family):
    """Setup, per-beta tables and per-set time (best of 3, tables cached, after a warm-up at another point) on
    ``n`` sampled sets, ``n`` = 2048 down to 64 as ``V1 T`` grows (the per-set cost is what is measured)."""
    n = int(max(64, min(2048, 2e7 // (g.V1 * g.T))))
    c_setup, w_setup, ev = _timed(lambda: make_evaluator(g, MK, W, family, n_sets=n, seed=0))
    ev(ALPHA - 1.0, BETA - 1.0, True)  # warm-up (Numba, caches) at another beta
    c_tab, w_tab, _ = _timed(lambda: ev.tables(BETA))
    runs = [_timed(lambda: ev(ALPHA, BETA, True)) for _ in range(3)]
    c_eval, w_eval = min(r[0] for r in runs), min(r[1] for r in runs)
    r = runs[0][2]
    return {
        f"{family}_setup_cpu_s": c_setup,
        f"{family}_tables_cpu_s": c_tab,
        f"{family}_per_set_cpu_s": c_eval / n,
        f"{family}_per_set_wall_s": w_eval / n,
        f"{family}_loss": r.value,
        "n_sets": n,
    }


def _dense(g, W):
    """The dense evaluator on 4 sampled sets (seed 0) and the structured loss of the same sets."""
    Wd = W.toarray()
    G = cotopic_matrix(g)
    c, w, r = _timed(lambda: attention_loss_grad(family_scores(ALPHA, BETA, G), Wd, g, MK, n_sets=4, seed=0))
    s = make_evaluator(g, MK, W, "co-topic", n_sets=4, seed=0)(ALPHA, BETA)
    return {"dense_per_set_cpu_s": c / 4, "dense_per_set_wall_s": w / 4,
            "dense_minus_structured": float(r.loss.mean) - s.value}  # fmt: skip


def _row(g, budget, last):
    row = {"V1": g.V1, "T": g.T, "tau": g.tau, "load_1min": os.getloadavg()[0]}
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    row.update(_structured(g, W, "label"))
    pred = last.get("co") and last["co"][0] * (g.V1 / last["co"][1]) ** 2 * (g.T / last["co"][2]) ** 2
    if not pred or pred <= budget:
        c, _, out = _timed(lambda: _structured(g, W, "co-topic"))
        row.update(out)
        last["co"] = (c, g.V1, g.T)
    pred = last.get("de") and last["de"][0] * (g.V1 / last["de"][1]) ** 3
    if g.V1 <= 2001 and (not pred or pred <= budget):
        c, _, out = _timed(lambda: _dense(g, W))
        row.update(out)
        last["de"] = (c, g.V1)
    return row


def _fit(xs, ys):
    ok = [(x, y) for x, y in zip(xs, ys) if y]
    if len(ok) < 2:
        return None
    lx, ly = np.log([x for x, _ in ok]), np.log([y for _, y in ok])
    return float(np.polyfit(lx, ly, 1)[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="V1 up to 10001, T up to 20")
    ap.add_argument("--budget", type=float, default=120.0, help="skip a route predicted above this many CPU seconds")
    args = ap.parse_args(argv)
    v_ladder = [101, 1001, 10001] + ([] if args.quick else [100001])
    t_ladder = [5, 10, 20] + ([] if args.quick else [40])
    last: dict = {}
    rows_v = []
    for V1 in v_ladder:
        rows_v.append(_row(_model(10, V1 - 1, 3), args.budget, last))
        print(f"V1={V1} done", flush=True)
    last = {}
    rows_t = []
    for T in t_ladder:
        rows_t.append(_row(_model(T, 2000, 2), args.budget, last))
        print(f"T={T} done", flush=True)
    fits = {
        "label_per_set_vs_V1": _fit([r["V1"] for r in rows_v], [r["label_per_set_cpu_s"] for r in rows_v]),
        "co_topic_per_set_vs_V1": _fit([r["V1"] for r in rows_v], [r.get("co-topic_per_set_cpu_s") for r in rows_v]),
        "co_topic_tables_vs_V1": _fit([r["V1"] for r in rows_v], [r.get("co-topic_tables_cpu_s") for r in rows_v]),
        "dense_per_set_vs_V1": _fit([r["V1"] for r in rows_v], [r.get("dense_per_set_cpu_s") for r in rows_v]),
        "label_per_set_vs_T": _fit([r["T"] for r in rows_t], [r["label_per_set_cpu_s"] for r in rows_t]),
        "co_topic_per_set_vs_T": _fit([r["T"] for r in rows_t], [r.get("co-topic_per_set_cpu_s") for r in rows_t]),
    }
    headers = ["V1", "T", "sets", "label/set", "label tables", "co-topic/set", "co-topic tables", "dense/set",
               "dense/label", "load"]  # fmt: skip

    def fmt(r, k):
        v = r.get(k)
        return "-" if v is None else f"{v:.3g}"

    table = []
    for r in rows_v + rows_t:  # sets: the number of sampled sets timed
        ratio = r.get("dense_per_set_cpu_s")
        ratio = "-" if ratio is None else f"{ratio / r['label_per_set_cpu_s']:.3g}"
        table.append([r["V1"], r["T"], r["n_sets"], fmt(r, "label_per_set_cpu_s"), fmt(r, "label_tables_cpu_s"),
                      fmt(r, "co-topic_per_set_cpu_s"), fmt(r, "co-topic_tables_cpu_s"), fmt(r, "dense_per_set_cpu_s"),
                      ratio, f"{r['load_1min']:.1f}"])  # fmt: skip
    print_table(headers, table)
    print("fitted exponents:", {k: (None if v is None else round(v, 2)) for k, v in fits.items()})
    payload = {"masking": MK.to_dict(), "alpha": ALPHA, "beta": BETA, "budget_cpu_s": args.budget,
               "rows_V1": rows_v, "rows_T": rows_t, "exponents": fits,
               "threads": "1 BLAS / Numba thread (project default)", "time": "CPU seconds (process_time)"}  # fmt: skip
    path = write_json("structured_attention", payload)
    print(f"wrote {path}")
    return 0 if all(math.isfinite(r["label_loss"]) for r in rows_v + rows_t) else 1


if __name__ == "__main__":
    raise SystemExit(main())
