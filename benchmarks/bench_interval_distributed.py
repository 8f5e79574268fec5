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
  ``distributed.Client`` to it; the regions as sub-box tasks (each piece of a region's search stops when its next
  round would bound :data:`SPLIT_AT` boxes or more, and each of those boxes becomes a piece). The processes are
  started, and each worker has loaded the kernel, before the clock (the start-up is reported apart);
- ``sep2-regions``: the same 2 workers with whole regions as tasks (the 9 tasks of the route before).

Every run's bounds, box counts per region and argmin must equal the serial run's (checked; the script fails
otherwise). Times: wall (``time.time``), CPU of this process (``time.process_time``) and CPU of the tasks (each task's
``process_time`` in its worker); the load (``os.getloadavg`` and ``uptime``) before and after.

**The speed model.** The client builds the loss and bounds the exclusion box (``c``: measured here as the setup
below), then submits the tasks; a worker builds the loss and its per-pair coefficients on its first task (``s``,
the setup: measured here in this process, and taken out of each worker's first task time). Tasks are handed out in
release order to the worker free first: whole regions and the regions' first pieces at once, in region order, and
each piece's frontier pieces when it ends (a list schedule with release times, simulated event by event on the
measured task times, :func:`schedule`). The predicted wall on ``P`` workers is the last task's end, plus nothing for
the scheduler (the dispatch latency of a task, measured apart on each cluster, is added in a second variant). With
whole regions the speed-up is capped at ``sum t_k / max t_k`` (the largest region); with sub-box tasks by the
longest chain of pieces, one below the other (:func:`longest_chain`). The model is checked on the 1- and
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
    """Every task of a distributed run: ``{"region", "path", "wall", "cpu", "worker", "start", "boxes"}`` (``path``
    ``None`` for a whole region, ``[]`` for a region's first piece, ``[j, ...]`` the frontier boxes below it)."""
    out = []
    for k, (t, n) in enumerate(zip(gc.info["split"]["tasks"], gc.info["split"]["boxes_per_region"][1:])):
        for p in t.get("pieces") or [dict(t, boxes=n, path=None)]:
            out.append(dict(region=k, **{key: p[key] for key in ("path", "wall", "cpu", "worker", "start", "boxes")}))
    return out


def _compact(tasks) -> list[dict]:
    """The tasks as recorded: seconds to 0.1 ms, ``start`` from the run's first task, workers by their order, the
    path as a string (``"0.2"``; ``""`` a region's first piece, ``None`` a whole region)."""
    t0 = min(t["start"] for t in tasks)
    names = sorted({t["worker"] for t in tasks})
    return [t | {"wall": round(t["wall"], 4), "cpu": round(t["cpu"], 4), "start": round(t["start"] - t0, 4),
                 "worker": names.index(t["worker"]), "path": _path_text(t["path"])} for t in tasks]  # fmt: skip


def _path_text(path):
    return path if path is None or isinstance(path, str) else ".".join(map(str, path))


def _path(t) -> list[int] | None:
    """A task's path as a list (:func:`_compact` writes it as text)."""
    p = t["path"]
    return p if p is None or isinstance(p, list) else [int(x) for x in p.split(".")] if p else []


def _setup_free(tasks, setup, key="wall") -> list[float]:
    """Task walls (``key="cpu"``: CPU seconds) with each worker's setup (its first task's loss and coefficients)
    taken out of its first task."""
    first = {}
    for i, t in sorted(enumerate(tasks), key=lambda it: it[1]["start"]):
        first.setdefault(t["worker"], i)
    return [max(0.0, t[key] - setup) if i in first.values() else t[key] for i, t in enumerate(tasks)]


def projections(base, regions, setup_wall, setup_cpu) -> dict:
    """The model's wall at 1, 2, 16 and 64 workers: from the tasks' wall times (as measured, contention included)
    and from their CPU times (each worker on a core of its own), with sub-box tasks (``base``, a run's tasks) and
    with whole regions (``regions``, the serial run's region times); and the longest chain of tasks."""
    out: dict = {}
    for key, setup in (("wall", setup_wall), ("cpu", setup_cpu)):
        walls = _setup_free(base, setup, key)
        reg = [t[key] for t in regions]
        sfx = "" if key == "wall" else "_cpu"
        out[f"projection{sfx}"] = {
            "sub_box_tasks": {str(P): schedule(base, walls, P, setup, setup) for P in (1, 2, 16, 64)},
            "whole_regions": {str(P): schedule(regions, reg, P, setup, setup) for P in (1, 2, 16, 64)},
        }
        out[f"longest_chain{sfx}"] = longest_chain(base, walls)
    return out


def _children(tasks) -> dict[int, list[int]]:
    """Per task, the tasks of the boxes of its frontier (released when it ends)."""
    paths = [_path(t) for t in tasks]
    index = {(t["region"], tuple(p)): i for i, (t, p) in enumerate(zip(tasks, paths)) if p is not None}
    kids: dict[int, list[int]] = {}
    for i, (t, p) in enumerate(zip(tasks, paths)):
        if p:
            kids.setdefault(index[(t["region"], tuple(p[:-1]))], []).append(i)
    return kids


def schedule(tasks, walls, P, client, setup) -> float:
    """The speed model (module docstring): the wall of ``tasks`` (their walls ``walls``, setup excluded) on ``P``
    workers, each paying ``setup`` before its first task, after the client's ``client`` seconds. Whole regions and
    the regions' first pieces are released at ``client`` in region order; a piece's frontier pieces when it ends."""
    free = [(client + setup, w) for w in range(P)]
    heapq.heapify(free)
    ready = [(client, i, i) for i, t in enumerate(tasks) if not _path(t)]  # (release, order, task)
    heapq.heapify(ready)
    kids, end, seq = _children(tasks), client, len(tasks)
    while ready:
        t_free, w = heapq.heappop(free)
        release, _, i = heapq.heappop(ready)
        done = max(t_free, release) + walls[i]
        end = max(end, done)
        heapq.heappush(free, (done, w))
        for j in kids.get(i, []):
            heapq.heappush(ready, (done, seq, j))
            seq += 1
    return end


def longest_chain(tasks, walls) -> float:
    """The wall of the longest chain of tasks (a piece after the pieces above it): the model's limit for any number
    of workers, besides the setups."""
    kids, memo = _children(tasks), {}

    def chain(i):
        if i not in memo:
            memo[i] = walls[i] + max((chain(j) for j in kids.get(i, [])), default=0.0)
        return memo[i]

    return max(chain(i) for i, t in enumerate(tasks) if not _path(t))


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
    tasks = _compact(_tasks(gc))
    run = dict(wall=wall, cpu=cpu, tasks_cpu=sum(t["cpu"] for t in tasks), workers=P, startup=startup, latency=latency,
               split_at=split_at, kernel_threads=1, n_tasks=len(tasks), tasks=tasks)  # fmt: skip
    return gc, run


def _earlier(size: tuple[int, int, int]) -> list[dict]:
    """The measurements kept from the results file: its ``earlier`` list (the process-pool and LocalCluster runs of
    the route before, whole regions), and its last run when that was of another size ``(T, words, tau)`` (a run of
    the same size replaces it)."""
    path = RESULTS / "interval_distributed.json"
    if not path.exists():
        return []
    old = json.loads(path.read_text())
    kept = old.pop("earlier", [])
    if "runs" in old and (old.get("T"), old.get("words"), old.get("tau")) != size:
        kept = [dict(old, kind="an earlier size"), *kept]
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--tau", type=int, default=2)
    args = ap.parse_args()
    earlier = _earlier((args.T, args.words, args.tau))
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
            cpu = _setup_free(base, setup_cpu, "cpu")  # each worker on a core of its own
            r["model_from_sep1_cpu"] = schedule(base, cpu, r["workers"], setup_cpu, setup_cpu)
    regions = [dict(region=k, path=None, wall=t["wall"], cpu=t["cpu"]) for k, t in enumerate(recs)]
    t_reg = [t["wall"] for t in regions]
    proj = projections(base, regions, setup_wall, setup_cpu)
    projection, chain = proj["projection"], proj["longest_chain"]
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
    print(f"projection (sub-box tasks, from sep1): {projection['sub_box_tasks']}; longest chain {chain:.2f} s")
    print(f"projection (whole regions, serial region times): {projection['whole_regions']}")
    print(f"on CPU times: {proj['projection_cpu']}; longest chain {proj['longest_chain_cpu']:.2f} s")
    payload = dict(
        load_before=load0, load_after=os.getloadavg(), uptime_before=up0, uptime_after=_uptime(), T=args.T,
        words=args.words, tau=args.tau, pairs=LL.pairs, n_boxes=serial.n_boxes, split_at=SPLIT_AT,
        boxes_per_region=serial.info["split"]["boxes_per_region"], lower=serial.lower, upper=serial.upper,
        setup_wall=setup_wall, setup_cpu=setup_cpu, region_wall=t_reg, region_cpu=[r["cpu"] for r in recs],
        runs=runs, **proj,
        cap_speedup_regions=sum(t_reg) / max(t_reg), speedup_2_workers=runs["serial"]["wall"] / runs["sep2"]["wall"],
        speedup_2_over_1_workers=runs["sep1"]["wall"] / runs["sep2"]["wall"],
        identical=True, earlier=earlier,
    )  # fmt: skip
    print(f"written {write_json('interval_distributed', payload)}")


if __name__ == "__main__":
    main()
