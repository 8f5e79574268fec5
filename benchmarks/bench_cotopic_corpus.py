"""The default score family at a corpus's size: the co-topic optimum at 20 topics x 13,586 words (SPEC §11.8(a)).

``optimal_attention(g, mk)`` with no options on a general model optimises ``S = alpha I_w + beta G`` (``G`` the
co-topic similarity) with the stage-1 ``W^V`` frozen, on the exact squared loss over the ``C(T, tau)`` topic sets.
This script, in one run and on ``--threads`` threads (default 2):

- probes the machine: a dgemm of the pair-sum product's shape (flop/s at 1 and ``--threads`` threads) and a stream
  triad (bytes/s), and times a **reference workload** (that dgemm, single-threaded, CPU seconds) so that every time
  is also reported as a ratio to it, comparable across machines;
- builds the seeded Dirichlet(0.1) model (``benchmarks/_common.dirichlet_model(20, 13586, 3, floor=1e-12)``,
  uniform-tau, tau = 3: 1,140 sets) and times the pieces of the pair-sum route against its cost model
  (:func:`theorycheck.population._cotopic_pairs.build_cost`, :func:`theorycheck.population._set_laws.pass_cost`):
  one table build without and with the ``beta``-derivatives, one pass over the (query, set) pairs at one and at
  seven ``alpha``, as achieved flop/s and bytes/s beside the probes;
- runs the optimum end to end (``optimal_attention(g, mk)``), CPU seconds (``time.process_time``: all threads
  summed), wall seconds and the load average before and after;
- with ``--lda`` (needs the ``nlp`` extra) the same optimum at the Wikipedia fragment's fitted LDA (20 topics, its
  13,586-word vocabulary, ``theorycheck.realdata`` defaults: seed 0, 30 iterations), under uniform-tau, tau = 3;
- with ``--compare N`` (default 500; 0 skips) the route before (blocked tables, grid + L-BFGS-B from three starts)
  beside the new one on a 20 x N model of the same kind: the two losses and CPU times.

The roofline of the table build and of the pass at this size (all ceilings measured in one run, one thread):
``benchmarks/bench_roofline.py``.

Writes ``results/cotopic_corpus.json``. Run: ``python benchmarks/bench_cotopic_corpus.py [--lda] [--compare N]
[--threads 2] [--words 13586]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _common import dirichlet_model, write_json
from threadpoolctl import threadpool_limits

import theorycheck as tc
from theorycheck._threads import configure
from theorycheck.population._attention_structured import make_evaluator
from theorycheck.population._cotopic_pairs import build_cost
from theorycheck.population._set_laws import pass_cost, set_laws
from theorycheck.realdata.corpus import content_words, stop_words, wikipedia_fragment
from theorycheck.realdata.topics import fit_lda
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._family import FAMILY_BOX, FAMILY_GRID
from theorycheck.solvers.attention._structured import structured_solve

MK = tc.Masking()
T, TAU = 20, 3


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def _load():
    return [round(x, 2) for x in os.getloadavg()]


def probes(n: int, q: int, threads: int) -> dict:
    """The machine, measured now: a dgemm of the pair-sum product's shape ``(256, n) @ (n, q)`` at 1 and ``threads``
    threads and a stream triad ``a = b + s c`` over 2 x 10^7 doubles, each the best of 3, as flop/s (bytes/s) per
    wall second and per CPU second (all threads summed: on a shared machine the CPU rate is the core's, the wall rate
    also counts the other jobs); and the reference workload, 32 such dgemms on one thread (CPU and wall seconds)."""
    rng = np.random.default_rng(0)
    A, B = rng.random((256, n)), rng.random((n, q))
    out = {}
    for nt in sorted({1, threads}):
        with threadpool_limits(nt):
            A @ B
            runs = [_timed(lambda: A @ B) for _ in range(3)]
        out[f"dgemm_flops_per_wall_s_{nt}t"] = 2 * 256 * n * q / min(r[1] for r in runs)
        out[f"dgemm_flops_per_cpu_s_{nt}t"] = 2 * 256 * n * q / min(r[0] for r in runs)
    b, c = rng.random(20_000_000), rng.random(20_000_000)
    a = np.empty_like(b)

    def triad():
        np.multiply(c, 1.5, out=a)
        np.add(a, b, out=a)

    triad()
    runs = [_timed(triad) for _ in range(3)]
    moved = 5 * 8 * b.size  # read c, write a; read a and b, write a
    out["triad_bytes_per_wall_s"] = moved / min(r[1] for r in runs)
    out["triad_bytes_per_cpu_s"] = moved / min(r[0] for r in runs)
    with threadpool_limits(1):
        cpu, wall, _ = _timed(lambda: [A @ B for _ in range(32)])
    out.update(reference_cpu=cpu, reference_wall=wall, reference_what=f"32 x dgemm (256, {n}) @ ({n}, {q}), 1 thread")
    return out


def pieces(g, machine, threads) -> dict:
    """One build without / with the beta-derivatives and passes over the pairs, against the cost model."""
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    ev = make_evaluator(g, MK, W, "co-topic")
    assert ev.route == "pairs", ev.pair_info
    n, k = g.n_words, W.rank
    ev.alpha_scan([1.0], 0.5)  # warm-up (Numba)
    rows = {}
    for name, want_d, beta in (("build", False, 1.0), ("build_with_d", True, 1.5)):
        cpu, wall, _ = _timed(lambda: ev.tables(beta, want_d))
        cm = build_cost(n, T, k, want_d)
        rows[name] = dict(cpu=cpu, wall=wall, **cm, flops_per_cpu_s=cm["flops"] / cpu,
                          gemm_fraction_of_dgemm=(cm["gemm_flops"] / cpu) / machine["dgemm_flops_per_cpu_s_1t"],
                          bytes_per_cpu_s=cm["bytes"] / cpu)  # fmt: skip
    pt = ev.tables(1.5, True)
    for name, n_alpha, want_b in (("pass_1_alpha", 1, False), ("pass_7_alpha", 7, False), ("pass_grad", 1, True)):
        alphas = np.linspace(-10.0, 30.0, n_alpha) if n_alpha > 1 else [2.0]
        cpu, wall, _ = _timed(lambda: set_laws(ev.sets, ev.theta, pt, ev.st, MK, alphas, want_b))
        cm = pass_cost(n, T, len(ev.sets), TAU, n_alpha, want_b)
        rows[name] = dict(cpu=cpu, wall=wall, **cm, ns_per_pair_cpu=1e9 * cpu / cm["pairs"],
                          flops_per_cpu_s=cm["flops"] / cpu, fraction_of_dgemm=cm["flops"] / cpu /
                          machine["dgemm_flops_per_cpu_s_1t"], bytes_per_cpu_s=cm["bytes"] / cpu,
                          cache_bytes_per_cpu_s=cm["cache_bytes"] / cpu)  # fmt: skip
    rows["pair_info"] = ev.pair_info
    return rows


def optimum(g, machine, label) -> dict:
    load0 = _load()
    cpu, wall, r = _timed(lambda: optimal_attention(g, MK))
    keys = ("beta_tables", "alpha_passes", "points", "grid_min", "loss_uniform", "tables_route", "search")
    return dict(model=label, words=g.n_words, T=g.T, tau=g.tau, sets=g.n_topic_sets, cpu=cpu, wall=wall,
                cpu_over_reference=cpu / machine["reference_cpu"], load_before=load0, load_after=_load(),
                x=r.x.tolist(), fun=r.fun, status=r.status, message=r.message, gradient_norm=r.residuals[
                    "gradient_norm"], **{k: r.info[k] for k in keys})  # fmt: skip


def compare(n_words, machine) -> dict:
    """The route before (blocked tables, L-BFGS-B from the three best grid points) beside optimal_attention's."""
    g = dirichlet_model(T, n_words, TAU, floor=1e-12)
    c_new, w_new, r = _timed(lambda: optimal_attention(g, MK))
    box = [FAMILY_BOX] * 2
    c_old, w_old, old = _timed(lambda: structured_solve(g, MK, "co-topic", "stage1", "squared", False, None, 0, box,
                                                        7, FAMILY_GRID, {}, None, pairs=False))  # fmt: skip
    return dict(words=n_words, new_cpu=c_new, new_wall=w_new, old_cpu=c_old, old_wall=w_old, new_fun=r.fun,
                old_fun=old[1], loss_difference=r.fun - old[1], new_x=r.x.tolist(), old_x=old[0].tolist(),
                old_nfev=old[5]["nfev"], new_tables=r.info["beta_tables"], old_over_new_cpu=c_old / c_new,
                new_cpu_over_reference=c_new / machine["reference_cpu"])  # fmt: skip


def lda_model():
    stop = stop_words()
    docs = [content_words(x, stop=stop) for x in wikipedia_fragment().texts]
    fit = fit_lda(docs, 20, seed=0)
    return tc.GeneralTopicModel.from_lda(fit, prior="uniform-tau", tau=TAU)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--words", type=int, default=13586)
    ap.add_argument("--lda", action="store_true", help="also the fitted LDA of the Wikipedia fragment (nlp extra)")
    ap.add_argument("--compare", type=int, default=500, help="words of the side-by-side with the route before")
    args = ap.parse_args()
    configure(args.threads)
    q = (T + 1) * (T + 2) // 2
    out = dict(threads=args.threads, load_start=_load(), machine_probes=probes(args.words, q, args.threads))
    m = out["machine_probes"]
    print({k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in m.items()}, flush=True)
    g = dirichlet_model(T, args.words, TAU, floor=1e-12)
    out["pieces"] = pieces(g, m, args.threads)
    for k, v in out["pieces"].items():
        if k != "pair_info":
            print(k, {a: f"{b:.3g}" for a, b in v.items() if isinstance(b, float)}, flush=True)
    out["optimum"] = optimum(g, m, f"dirichlet_model({T}, {args.words}, {TAU}, floor=1e-12)")
    print("optimum", out["optimum"], flush=True)
    if args.lda:
        out["optimum_lda"] = optimum(lda_model(), m, "Wikipedia fragment LDA (sklearn, 20 topics, seed 0)")
        print("optimum_lda", out["optimum_lda"], flush=True)
    if args.compare:
        out["compare"] = compare(args.compare, m)
        print("compare", out["compare"], flush=True)
    out["load_end"] = _load()
    out["cpu_count"] = os.cpu_count()
    write_json("cotopic_corpus", out)


if __name__ == "__main__":
    main()
