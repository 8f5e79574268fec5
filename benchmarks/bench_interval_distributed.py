"""The whole-domain label certificate as tasks on a Dask scheduler and workers started as separate processes (SPEC §7,
"Distributed run", "Sub-box tasks"): serial against 1 and 2 workers, side by side in one run, with the speed model
checked and projected.

A seeded Dirichlet(0.1) model (default T = 8, 2,000 words, tau = 2: 56,000 (set, word) pairs, a serial certificate
of 30-60 s CPU), the stage-1 ``W^V``, the float optimum as the expansion point. In one process, one after another:

- ``serial``: :func:`label_split_certificate` with ``executor=None``, a fresh :class:`LabelLoss` built inside the
  clock (as a worker builds its own), with a checkpoint in a temporary folder to record every region's CPU and wall
  seconds; its kernel uses both cores (the default);
- ``sep1``, ``sep2``: ``python -m distributed.cli.dask_scheduler`` and 1 or 2 ``dask_worker`` processes
  (``--nthreads 1``, each worker's kernel on one thread, ``THEORYCHECK_THREADS=1``) on 127.0.0.1, a
  ``distributed.Client`` to it; the regions as sub-box tasks (each region's first rounds up to a frontier of
  :data:`SPLIT_AT` boxes, then one task per frontier box). The processes are started, and each worker has loaded
  the kernel, before the clock (the start-up is reported apart);
- ``sep2-regions``: the same 2 workers with whole regions as tasks (the 9 tasks of the route before).

Every run's bounds, box counts per region and argmin must equal the serial run's (checked; the script fails
otherwise). Times: wall (``time.time``), CPU of this process (``time.process_time``) and CPU of the tasks (each task's
``process_time`` in its worker); the load (``os.getloadavg`` and ``uptime``) before and after.

**The speed model.** The client builds the loss and bounds the exclusion box (``c``: measured here as the setup
below), then submits the tasks; a worker builds the loss and its per-pair coefficients on its first task (``s``,
the setup: measured here in this process, and taken out of each worker's first task time). Tasks are handed out in
submission order to the worker free first: the regions' first-round tasks at once, in region order, and each
region's frontier tasks when its first rounds end (a list schedule with release times, simulated event by event
on the measured task times, :func:`schedule`). The predicted wall on ``P`` workers is the last task's end. With whole
regions the speed-up is capped at ``sum t_k / max t_k`` (the largest region); with sub-box tasks the cap is the
longest chain, ``max_k (first rounds of k + its largest frontier task)``. The model is checked on the 1- and
2-worker runs: from each run's own task times, and the 2-worker run predicted from the 1-worker run's task times
(both with one kernel thread per worker); 16 and 64 workers are projected from the 1-worker run's task times (one
core per worker, no contention: the tasks as they would run on a cluster of one-thread workers).

Run: ``python benchmarks/bench_interval_distributed.py [--T 8 --words 2000 --tau 2]``; writes
``results/interval_distributed.json`` (the earlier process-pool and LocalCluster measurements kept under
``earlier``).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import subprocess
import tempfile
import time

import numpy as np
from _common import RESULTS, dirichlet_model, print_table, separate_cluster, write_json

from theorycheck import GeneralTopicModel, Masking
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention import _interval_regions
from theorycheck.solvers.attention._interval_general import label_split_certificate
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import score_loss
from theorycheck.solvers.attention._interval_vec import evaluate

MK = Masking()
#: The frontier at which each region's search is cut into tasks (the library's default).
SPLIT_AT = _interval_regions.SPLIT_AT


def _warm():
    """In a worker: import the certificate's modules and load the compiled kernel (a one-word model, one box)."""
    g = GeneralTopicModel(np.array([[0.5, 0.5], [0.5, 0.5]]), tau=1)
    LL = LabelLoss(g, MK, np.eye(g.V1), np.eye(g.V1), False)
    xs = np.array([[0.0, 0.0]])
    evaluate(xs, xs + 1.0, None, None, lambda v: score_loss(LL, v), order=2)
    return os.getpid()


def _same(a, b) -> bool:
    keys = ("lower", "upper", "n_boxes", "argmin", "x_best")
    sa, sb = a.info["split"], b.info["split"]
    return all(getattr(a, k) == getattr(b, k) for k in keys) and sa["boxes_per_region"] == sb["boxes_per_region"]


def _run(spec, x0, executor=None, checkpoint=None):
    w, c = time.time(), time.process_time()
    LL = LabelLoss(*spec)  # this process needs it too (the exclusion box, the tables' hash)
    gc = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0, checkpoint, executor, spec)
    return gc, time.time() - w, time.process_time() - c


def _tasks(gc) -> list[dict]:
    """Every task of a distributed run: ``{"region", "kind", "wall", "cpu", "worker", "start", "boxes"}`` (``kind``
    ``"whole"``, ``"first"`` (a region's first rounds) or ``"frontier"``)."""
    out = []
    for k, (t, n) in enumerate(zip(gc.info["split"]["tasks"], gc.info["split"]["boxes_per_region"][1:])):
        pieces = t.get("pieces")
        if not pieces:
            out.append(dict(region=k, kind="whole", boxes=n, **{key: t[key] for key in ("wall", "cpu", "worker",
                                                                                       "start")}))  # fmt: skip
            continue
        for j, p in enumerate(pieces):
            out.append(dict(region=k, kind="first" if j == 0 else "frontier", **p))
    return out


def _setup_free(tasks, setup) -> list[float]:
    """Task walls with each worker's setup (its first task's loss and coefficients) taken out of its first task."""
    first = {}
    for i, t in sorted(enumerate(tasks), key=lambda it: it[1]["start"]):
        first.setdefault(t["worker"], i)
    return [max(0.0, t["wall"] - setup) if i in first.values() else t["wall"] for i, t in enumerate(tasks)]


def schedule(tasks, walls, P, client, setup) -> float:
    """The speed model (module docstring): the wall of ``tasks`` (their walls ``walls``, setup excluded) on ``P``
    workers, each paying ``setup`` before its first task, after the client's ``client`` seconds. First-round and
    whole tasks are released at ``client`` in region order; a region's frontier tasks when its first rounds end."""
    free = [(client + setup, w) for w in range(P)]
    heapq.heapify(free)
    ready = [(client, i, i) for i, t in enumerate(tasks) if t["kind"] != "frontier"]  # (release, order, task)
    heapq.heapify(ready)
    frontier = {}
    for i, t in enumerate(tasks):
        if t["kind"] == "frontier":
            frontier.setdefault(t["region"], []).append(i)
    end, seq = client, len(tasks)
    while ready:
        t_free, w = heapq.heappop(free)
        release, _, i = heapq.heappop(ready)
        done = max(t_free, release) + walls[i]
        end = max(end, done)
        heapq.heappush(free, (done, w))
        if tasks[i]["kind"] == "first":
            for j in frontier.get(tasks[i]["region"], []):
                heapq.heappush(ready, (done, seq, j))
                seq += 1
    return end


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _distributed(name, P, split_at, spec, x0, tmp):
    """One run on a scheduler and ``P`` worker processes (one thread each, one kernel thread each)."""
    import distributed

    w0 = time.time()
    with separate_cluster(os.path.join(tmp, name), P, env={"THEORYCHECK_THREADS": "1"}) as (address, procs):
        with distributed.Client(address, timeout=120) as client:
            client.wait_for_workers(P, timeout=120)
            pids = client.run(_warm)
            startup = time.time() - w0
            t = time.time()
            for _ in range(20):  # the round trip of a task that does nothing: the per-task dispatch latency
                client.submit(os.getpid, pure=False).result()
            latency = (time.time() - t) / 20
            _interval_regions.SPLIT_AT = split_at
            try:
                gc, wall, cpu = _run(spec, x0, executor=client)
            finally:
                _interval_regions.SPLIT_AT = SPLIT_AT
        assert sorted(pids.values()) == sorted(p.pid for p in procs[1:])
    tasks = _tasks(gc)
    run = dict(wall=wall, cpu=cpu, tasks_cpu=sum(t["cpu"] for t in tasks), workers=P, startup=startup, latency=latency,
               split_at=split_at, kernel_threads=1, n_tasks=len(tasks), tasks=tasks)  # fmt: skip
    return gc, run


def _earlier() -> list[dict]:
    """The process-pool and LocalCluster measurements of the route before (whole regions), kept."""
    out = []
    for name in ("interval_distributed.json", "interval_distributed_run2.json"):
        path = RESULTS / name
        if path.exists():
            d = json.loads(path.read_text())
            if "earlier" in d:
                return d["earlier"]
            keep = ("load_before", "load_after", "setup_wall", "region_wall", "region_cpu", "model_wall", "cap_speedup")
            runs = {k: {f: v for f, v in r.items() if not f.startswith("task_")} for k, r in d["runs"].items()}
            out.append({key: d[key] for key in keep} | {"runs": runs})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--tau", type=int, default=2)
    args = ap.parse_args()
    earlier = _earlier()
    load0, up0 = os.getloadavg(), _uptime()
    g = dirichlet_model(args.T, args.words, args.tau, floor=1e-12)
    x0 = optimal_attention(g, MK, options={"family": "label"}).x
    W = optimal_value_matrix(g, MK, options={"dense": False}).x
    spec = (g, MK, W.left, W.right, False)
    w, c = time.time(), time.process_time()  # setup of one worker: the loss and its first (coefficient) pass
    LL = LabelLoss(*spec)
    xs = np.array([[x0[0] + x0[1], x0[1]]])
    evaluate(xs, xs, None, None, lambda v: score_loss(LL, v), order=0)
    setup_wall, setup_cpu = time.time() - w, time.process_time() - c
    runs, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "serial.jsonl")
        serial, wall, cpu = _run(spec, x0, checkpoint=ckpt)
        recs = sorted((json.loads(line) for line in open(ckpt).read().splitlines()[1:]), key=lambda r: r["region"])
        runs["serial"] = dict(wall=wall, cpu=cpu, tasks_cpu=0.0, workers=0, startup=0.0, split_at=None,
                              kernel_threads=None, n_tasks=0)  # fmt: skip
        for name, P, split_at in (("sep1", 1, SPLIT_AT), ("sep2", 2, SPLIT_AT), ("sep2-regions", 2, None)):
            gc, runs[name] = _distributed(name, P, split_at, spec, x0, tmp)
            if not _same(gc, serial):
                raise AssertionError(f"{name}: the distributed certificate differs from the serial one")
    base = runs["sep1"]["tasks"]
    base_walls = _setup_free(base, setup_wall)
    for r in runs.values():
        if not r["workers"]:
            continue
        own = _setup_free(r["tasks"], setup_wall)
        r["model_own_tasks"] = schedule(r["tasks"], own, r["workers"], setup_wall, setup_wall)
        lat = [t + r["latency"] for t in own]  # with the measured dispatch latency per task
        r["model_own_tasks_latency"] = schedule(r["tasks"], lat, r["workers"], setup_wall, setup_wall)
        if r["split_at"] == SPLIT_AT:
            r["model_from_sep1"] = schedule(base, base_walls, r["workers"], setup_wall, setup_wall)
            lat = [t + r["latency"] for t in base_walls]
            r["model_from_sep1_latency"] = schedule(base, lat, r["workers"], setup_wall, setup_wall)
    regions = [dict(region=k, kind="whole", wall=t["wall"]) for k, t in enumerate(recs)]
    t_reg = [t["wall"] for t in regions]
    projection = {
        "sub_box_tasks": {str(P): schedule(base, base_walls, P, setup_wall, setup_wall) for P in (1, 2, 16, 64)},
        "whole_regions": {str(P): schedule(regions, t_reg, P, setup_wall, setup_wall) for P in (1, 2, 16, 64)},
    }
    chain = {}
    for t, wt in zip(base, base_walls):
        k = t["region"]
        first, longest = chain.get(k, (0.0, 0.0))
        chain[k] = (first + wt, longest) if t["kind"] != "frontier" else (first, max(longest, wt))
    longest_chain = max(a + b for a, b in chain.values())
    for name, r in runs.items():
        speed = runs["serial"]["wall"] / r["wall"]
        rows.append([name, f"{r['wall']:.1f}", f"{r['cpu'] + r['tasks_cpu']:.1f}", r["n_tasks"],
                     f"{r['startup']:.1f}", f"{r.get('latency', 0.0) * 1e3:.0f}",
                     *(f"{r.get(key, float('nan')):.1f}" for key in ("model_own_tasks", "model_own_tasks_latency",
                                                                     "model_from_sep1", "model_from_sep1_latency")),
                     f"{speed:.2f}"])  # fmt: skip
    print_table(["run", "wall s", "CPU s (all)", "tasks", "start-up s", "latency ms", "model (own) s",
                 "+latency s", "model (sep1) s", "+latency s", "speed-up"], rows)  # fmt: skip
    print(f"region wall s (serial): {[round(t, 2) for t in t_reg]}; setup {setup_wall:.2f} s")
    print(f"projection (sub-box tasks, from sep1): {projection['sub_box_tasks']}; longest chain {longest_chain:.2f} s")
    print(f"projection (whole regions, serial region times): {projection['whole_regions']}")
    payload = dict(
        load_before=load0, load_after=os.getloadavg(), uptime_before=up0, uptime_after=_uptime(), T=args.T,
        words=args.words, tau=args.tau, pairs=LL.pairs, n_boxes=serial.n_boxes, split_at=SPLIT_AT,
        boxes_per_region=serial.info["split"]["boxes_per_region"], lower=serial.lower, upper=serial.upper,
        setup_wall=setup_wall, setup_cpu=setup_cpu, region_wall=t_reg, region_cpu=[r["cpu"] for r in recs],
        runs=runs, projection=projection, longest_chain=longest_chain,
        cap_speedup_regions=sum(t_reg) / max(t_reg), speedup_2_workers=runs["serial"]["wall"] / runs["sep2"]["wall"],
        identical=True, earlier=earlier,
    )  # fmt: skip
    print(f"written {write_json('interval_distributed', payload)}")


if __name__ == "__main__":
    main()
