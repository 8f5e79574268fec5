"""The whole-domain label certificate's regions as tasks (SPEC §7 "Distributed run"): serial against a process pool
and a Dask LocalCluster, side by side in one run, with the cost model checked and projected.

A seeded Dirichlet(0.1) model (default T = 8, 2,000 words, tau = 2: 56,000 (set, word) pairs, a serial certificate
of 20-60 s CPU), the stage-1 ``W^V``, the float optimum as the expansion point. In one process, one after another:

- ``serial``: :func:`label_split_certificate` with ``executor=None``, a fresh :class:`LabelLoss` built inside the
  clock (as a worker builds its own), with a checkpoint in a temporary folder to record every region's CPU and wall
  seconds;
- ``pool1``, ``pool2``: a ``forkserver`` ``ProcessPoolExecutor`` of 1 and 2 workers (started and warmed up before
  the clock: the start-up is reported apart);
- ``cluster2``: a ``distributed.LocalCluster`` of 2 worker processes, 1 thread each (if ``distributed`` is
  installed);
- ``pool2-t1``, ``cluster2-t1``: the same with each worker's kernels on one thread (``THEORYCHECK_THREADS=1``), so
  2 workers use 2 threads in all, as the serial run does.

Every run's bounds, box counts per region and argmin must equal the serial run's (checked; the script fails
otherwise). Times: wall (``time.time``), CPU of this process (``time.process_time``) and CPU of the tasks (each
task's ``process_time`` in its worker); the load (``os.getloadavg``) before and after.

**The cost model.** A worker first builds the loss and its pair coefficients (``setup``, the first evaluation's
coefficient pass: measured here in this process), then runs the regions it is given, one after another. The
executor hands the regions out in order to whichever worker is free (list scheduling), so with region times
``t_k`` (the serial run's wall per region) the predicted wall time on ``P`` workers is
``setup + max_w (setup + sum_{k on w} t_k)`` (the client builds the loss and bounds the exclusion box first):
``2 setup + sum t_k`` for ``P = 1`` (serial: ``setup + sum t_k``), ``2 setup + max t_k`` for ``P >= K`` (``K``
regions: 9 here, the ring's four boxes and the five unbounded regions). So the speed-up is capped at
``sum t_k / max t_k`` whatever the cluster; what lifts the cap is cutting the largest regions into sub-boxes
(the branch and bound's first rounds, then the live boxes as tasks). On this 2-core machine each worker's Numba
kernel also uses both cores when a round is large (``N boxes x pairs >= 10^6``), so two workers share the cores the
serial run already uses.

Run: ``python benchmarks/bench_interval_distributed.py [--T 8 --words 2000 --tau 2]``; writes
``results/interval_distributed.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import tempfile
import time

import numpy as np
from _common import dirichlet_model, machine, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_general import label_split_certificate
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import score_loss
from theorycheck.solvers.attention._interval_vec import evaluate

MK = tc.Masking()


def _warm(_):
    return os.getpid()


def _one_thread():
    """Pool initializer: this worker's kernels on one thread (``THEORYCHECK_THREADS=1``, read at every call)."""
    os.environ["THEORYCHECK_THREADS"] = "1"


def _same(a, b) -> bool:
    keys = ("lower", "upper", "n_boxes", "argmin", "x_best")
    sa, sb = a.info["split"], b.info["split"]
    return all(getattr(a, k) == getattr(b, k) for k in keys) and sa["boxes_per_region"] == sb["boxes_per_region"]


def _run(spec, x0, executor=None, checkpoint=None):
    w, c = time.time(), time.process_time()
    LL = LabelLoss(*spec)  # this process needs it too (the exclusion box, the tables' hash)
    gc = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0, checkpoint, executor, spec)
    return gc, time.time() - w, time.process_time() - c


def _schedule(times, setup, P) -> float:
    """List scheduling: regions in order, each to the worker free first; the wall of the last to finish."""
    free = [setup] * P
    for t in times:
        i = int(np.argmin(free))
        free[i] += t
    return max(free)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--tau", type=int, default=2)
    args = ap.parse_args()
    load0 = os.getloadavg()
    g = dirichlet_model(args.T, args.words, args.tau, floor=1e-12)
    x0 = optimal_attention(g, MK, options={"family": "label"}).x
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    spec = (g, MK, W.left, W.right, False)
    # setup of one worker: the loss and its first (coefficient) pass, measured here
    w, c = time.time(), time.process_time()
    LL = LabelLoss(*spec)
    xs = np.array([[x0[0] + x0[1], x0[1]]])
    evaluate(xs, xs, None, None, lambda v: score_loss(LL, v), order=0)
    setup_wall, setup_cpu = time.time() - w, time.process_time() - c
    rows, runs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "serial.jsonl")
        serial, wall, cpu = _run(spec, x0, checkpoint=ckpt)
        recs = [json.loads(line) for line in open(ckpt).read().splitlines()[1:]]
    t_wall = [r["wall"] for r in sorted(recs, key=lambda r: r["region"])]
    t_cpu = [r["cpu"] for r in sorted(recs, key=lambda r: r["region"])]
    runs["serial"] = dict(wall=wall, cpu=cpu, tasks_cpu=0.0, workers=0, startup=0.0)
    executors = [("pool1", 1), ("pool2", 2)]
    try:
        import distributed
    except ImportError:
        distributed = None
    executors.append(("pool2-t1", 2))
    if distributed is not None:
        executors += [("cluster2", 2), ("cluster2-t1", 2)]
    for name, P in executors:
        w0 = time.time()
        one = name.endswith("-t1")  # each worker's kernels on one thread: P workers x 1 thread on the cores
        if name.startswith("pool"):
            ctx = multiprocessing.get_context("forkserver")
            ex = cf.ProcessPoolExecutor(P, mp_context=ctx, initializer=_one_thread if one else None)
            list(ex.map(_warm, range(4 * P)))
            closer = ex.shutdown
            run_ex = ex
        else:
            cluster = distributed.LocalCluster(n_workers=P, threads_per_worker=1, processes=True,
                                               dashboard_address=None, host="127.0.0.1",
                                               env={"THEORYCHECK_THREADS": "1"} if one else None)  # fmt: skip
            client = distributed.Client(cluster)
            client.wait_for_workers(P)
            run_ex = client

            def closer(client=client, cluster=cluster):
                client.close()
                cluster.close()

        startup = time.time() - w0
        try:
            gc, wall, cpu = _run(spec, x0, executor=run_ex)
        finally:
            closer()
        if not _same(gc, serial):
            raise AssertionError(f"{name}: the distributed certificate differs from the serial one")
        tasks = gc.info["split"]["tasks"]
        runs[name] = dict(wall=wall, cpu=cpu, tasks_cpu=sum(t["cpu"] for t in tasks), workers=P, startup=startup,
                          task_wall=[t["wall"] for t in tasks], task_cpu=[t["cpu"] for t in tasks],
                          task_workers=[t["worker"] for t in tasks])  # fmt: skip
    # this process builds the loss and runs the exclusion box first (one setup), then the workers (their own)
    model = {P: setup_wall + _schedule(t_wall, setup_wall, P) for P in (1, 2, 16, 64)}
    for name, r in runs.items():
        P = max(1, r["workers"])
        pred = model[P] if r["workers"] else setup_wall + sum(t_wall)  # serial: one setup, then the regions
        speed = runs["serial"]["wall"] / r["wall"]
        rows.append([name, f"{r['wall']:.1f}", f"{r['cpu'] + r['tasks_cpu']:.1f}", f"{r['startup']:.1f}",
                     f"{pred:.1f}", f"{r['wall'] / pred:.2f}", f"{speed:.2f}"])  # fmt: skip
    for name, r in runs.items():  # the same schedule on the run's own task times (contention included)
        if r["workers"]:
            r["model_from_tasks"] = setup_wall + _schedule(r["task_wall"], 0.0, r["workers"])
            rows[list(runs).index(name)].append(f"{r['model_from_tasks']:.1f}")
    rows[0].append("-")
    print_table(["run", "wall s", "CPU s (all)", "start-up s", "model wall s", "measured/model", "speed-up",
                 "model on own tasks s"], rows)  # fmt: skip
    print(f"region wall s (serial): {[round(t, 2) for t in t_wall]}; setup {setup_wall:.2f} s")
    print(f"projection: 16 workers {model[16]:.1f} s, 64 workers {model[64]:.1f} s (capped: 2 setup + max region "
          f"= {2 * setup_wall + max(t_wall):.1f} s; sum/max = {sum(t_wall) / max(t_wall):.2f})")  # fmt: skip
    payload = dict(
        machine=machine(), load_before=load0, load_after=os.getloadavg(), T=args.T, words=args.words, tau=args.tau,
        pairs=LL.pairs, n_boxes=serial.n_boxes, boxes_per_region=serial.info["split"]["boxes_per_region"],
        lower=serial.lower, upper=serial.upper, setup_wall=setup_wall, setup_cpu=setup_cpu, region_wall=t_wall,
        region_cpu=t_cpu, runs=runs, model_wall={str(k): v for k, v in model.items()},
        cap_speedup=sum(t_wall) / max(t_wall), identical=True,
    )  # fmt: skip
    print(f"written {write_json('interval_distributed', payload)}")


if __name__ == "__main__":
    main()
