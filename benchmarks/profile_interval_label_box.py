"""Where a box of the whole-domain label certificate spends its time at corpus size (issue 37 item 2, SPEC §7, §11.8).

Not a ``bench_*`` script (``theorycheck bench`` does not run it): it needs about 5 GB (the packed pair coefficients)
and several CPU-minutes. At 20 topics x 13,586 words, tau = 3 (15.5 million (set, word) pairs;
``benchmarks/_common.dirichlet_model(20, 13586, 3, floor=1e-12)``, the stage-1 ``W^V``), in one run, CPU seconds
(``time.process_time``, all threads) beside wall seconds and the load:

- the one-time setup (:class:`LabelLoss`) and coefficient pass (packing, kept in memory);
- the **memory-bandwidth bound** of one pass over the packed pairs: a compiled parallel sum over every packed array
  (bytes / s), the least a pass can cost;
- the score kernel (:func:`._interval_scores_kernel.score_sums`) on one point (order 1, the point each box also
  evaluates), one order-2 box and four order-2 boxes in one call (the coefficients then read once for the four):
  CPU nanoseconds per (box, pair) and the ratio to the bandwidth bound.

The overhead outside the kernel (interval bookkeeping, the branch and bound, the float solve) is measured by
``--mid`` on a smaller model end to end under cProfile (the kernel's share of the run and the rest per box).
Writes ``results/interval_label_profile.json``. Run: ``python benchmarks/profile_interval_label_box.py [--mid]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import numba
import numpy as np
from _common import dirichlet_model, write_json

import theorycheck as tc
from theorycheck._threads import configure
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import _corner_exps, packed_chunks
from theorycheck.solvers.attention._interval_scores_kernel import score_sums
from theorycheck.solvers.attention._interval_vec import IVec

MK = tc.Masking()


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


@numba.njit(parallel=True, cache=True)
def _stream(a):  # pragma: no cover - compiled
    s = 0.0
    for i in numba.prange(a.shape[0]):
        for j in range(a.shape[1]):
            s += a[i, j]
    return s


def corpus() -> dict:
    g = dirichlet_model(20, 13586, 3, floor=1e-12)
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    c_setup, w_setup, LL = _timed(lambda: LabelLoss(g, MK, W.left, W.right))
    c_pack, w_pack, chunks = _timed(lambda: list(packed_chunks(LL)))
    nbytes = sum(x.nbytes for x in chunks)
    _stream(chunks[0][:8])
    c_str, w_str, _ = _timed(lambda: [_stream(x) for x in chunks])
    out = dict(pairs=LL.pairs, packed_bytes=nbytes, setup_cpu=c_setup, pack_cpu=c_pack, pack_wall=w_pack,
               stream_cpu=c_str, stream_wall=w_str, stream_bytes_per_wall_s=nbytes / w_str)  # fmt: skip
    s0, b0 = 9.0, -0.4
    for n_boxes, order, r in ((1, 1, 0.0), (1, 2, 0.05), (4, 2, 0.05)):
        lo = np.array([[s0 - r + 0.01 * i, b0 - r] for i in range(n_boxes)])
        hi = lo + 2 * r
        S, B = IVec(lo[:, 0], hi[:, 0]), IVec(lo[:, 1], hi[:, 1])
        ex = _corner_exps(S, B, "scores")
        nc = np.where((S.lo == S.hi) & (B.lo == B.hi), 1, 4).astype(np.int64)
        score_sums(chunks[0][:1000], ex, nc, order)
        c, w, _ = _timed(lambda: [score_sums(x, ex, nc, order) for x in chunks])
        out[f"kernel_{n_boxes}_box_order{order}"] = dict(
            cpu=c, wall=w, ns_per_box_pair_cpu=1e9 * c / (n_boxes * LL.pairs), over_stream_cpu=c / c_str
        )
    return out


def mid(T=10, n=1000, tau=3) -> dict:
    """The whole-domain certificate end to end under cProfile: the kernel's share and the rest per box."""
    g = dirichlet_model(T, n, tau, floor=1e-12)
    opts = {"family": "label", "certify": "interval"}
    optimal_attention(dirichlet_model(3, 12, 2, floor=1e-12), MK, options=opts)  # compile
    pr = cProfile.Profile()
    c0 = time.process_time()
    pr.enable()
    r = optimal_attention(g, MK, options=opts)
    pr.disable()
    cpu = time.process_time() - c0
    st = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    tot = sum(v[2] for v in st.values())
    kern = sum(v[2] for k, v in st.items() if k[2] == "_score_sums_nb")
    flt = sum(v[3] for k, v in st.items() if k[2] == "per_law")
    boxes = r.certificate["global"]["n_boxes"]
    rest = tot - kern - flt
    return dict(T=T, words=n, tau=tau, boxes=boxes, cpu=cpu, profiled_s=tot, kernel_share=kern / tot,
                float_solve_share=flt / tot, rest_share=rest / tot, rest_per_box_s=rest / boxes,
                status=r.status)  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mid", action="store_true", help="also the end-to-end profile at 10 x 1000 words")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    configure(args.threads)
    out = dict(threads=args.threads, load_start=list(os.getloadavg()), corpus=corpus())
    print(out["corpus"], flush=True)
    if args.mid:
        out["mid"] = mid()
        print(out["mid"], flush=True)
    out["load_end"] = list(os.getloadavg())
    write_json("interval_label_profile", out)


if __name__ == "__main__":
    main()
