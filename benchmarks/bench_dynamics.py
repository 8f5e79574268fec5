"""Exact two-stage dynamics: the fused population route against the layer-by-layer route, side by side
in one run.

Preset ``two-stage`` (SPEC §4.5, §5.2): exact population gradient descent on W^K, W^Q, W^V at the
paper's size (T = v = 10, tau = 3: 120 topic sets x 101 query tokens, V1 = 101), squared loss.
The layer-by-layer route evaluates one ``V1``-wide attention row per (topic set, query token);
the fused route (:mod:`theorycheck.nn._factored_kernels`) uses that the key and target laws are
linear in the topic mixture (SPEC §11.5) and shares the per-token work across the sets.

Rows:

1. one step (loss and all gradients), each route, timed interleaved (best of rounds; wall and CPU);
2. the first ``--old-steps`` training steps of the preset with each route (``Trainer.run``, no run
   folder, probes included), wall and CPU, and the largest relative parameter difference between
   the two trajectories at the end;
3. the whole 3000-step preset with the fused route (wall and CPU), and the layer-by-layer route's
   time for it extrapolated from row 2 (``--full-old`` runs it instead);
4. the whole command ``theorycheck train --preset two-stage`` in a fresh process (imports, Numba cache
   loading, run folder, metrics, checkpoints, figures): wall and CPU of the child process (the
   layer-by-layer column: row 3's layer-by-layer time plus the command's time outside the steps).

The fused route's squared loss runs :mod:`theorycheck.nn._factored_squared` (Gram forms over
(context, token) grids, serial).

Numba threads: the defaults (the layer-by-layer kernels on every core, the fused kernel on one thread:
:func:`theorycheck.nn._factored_kernels.factored_loss_grad`); BLAS serial inside the steps (``Trainer.run``). The load
average is recorded: on a shared 2-core machine wall times are noisy, CPU times less so.

The cost model of the fused squared-loss kernel (flops and bytes, SPEC §3.2) and its roofline against the machine's
measured peaks: ``benchmarks/bench_roofline.py``.

Run: ``python benchmarks/bench_dynamics.py [--old-steps N] [--full-old]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
from _common import best_times_interleaved, print_table, write_json

from theorycheck._threads import blas_threads
from theorycheck.nn import Trainer, preset


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _trainer(steps: int, fused: bool) -> Trainer:
    cfg = preset("two-stage").replace(steps=steps, checkpoint_every=0)
    tr = Trainer(cfg, progress=False)
    tr.model.fused = fused
    return tr


def _step_row() -> list:
    tr_new, tr_old = _trainer(1, True), _trainer(1, False)
    batch = tr_new.batch_at(0)

    def step(tr):
        def fn():
            tr.model.zero_grad()
            tr.model.loss_and_grad(batch)

        return fn

    with blas_threads():
        walls = best_times_interleaved([step(tr_old), step(tr_new)], rounds=5, min_time=0.2)
        cpus = []
        for tr in (tr_old, tr_new):
            c0 = time.process_time()
            for _ in range(20):
                step(tr)()
            cpus.append((time.process_time() - c0) / 20)
    return ["one step (loss + gradients)", walls[0], walls[1], walls[0] / walls[1], cpus[0], cpus[1], cpus[0] / cpus[1]]


def _run_rows(old_steps: int, full_old: bool) -> tuple[list, list, float]:
    for fused in (True, False):  # warm-up: JIT caches, first-use indices
        _trainer(2, fused).run()
    new = _trainer(old_steps, True)
    _, w_new, c_new = _timed(new.run)
    old = _trainer(old_steps, False)
    _, w_old, c_old = _timed(old.run)
    p_new, p_old = new.model.state_dict(), old.model.state_dict()
    diff = max(float(np.max(np.abs(p_new[k] - p_old[k])) / max(np.max(np.abs(p_old[k])), 1e-300)) for k in p_old)
    row2 = [f"first {old_steps} steps (Trainer.run)", w_old, w_new, w_old / w_new, c_old, c_new, c_old / c_new]
    full = _trainer(3000, True)
    _, w_full, c_full = _timed(full.run)
    if full_old:
        _, w_fo, c_fo = _timed(_trainer(3000, False).run)
        label = "whole preset, 3000 steps"
    else:
        w_fo, c_fo = w_old * 3000 / old_steps, c_old * 3000 / old_steps
        label = f"whole preset, 3000 steps (old route extrapolated from {old_steps})"
    row3 = [label, w_fo, w_full, w_fo / w_full, c_fo, c_full, c_fo / c_full]
    return row2, row3, diff


def _command_row(row3) -> list:
    """Row 4: ``theorycheck train --preset two-stage`` in a child process (its own CPU time)."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="bench-dynamics-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "theorycheck.cli",
            "train",
            "--preset",
            "two-stage",
            "--quiet",
            "--out",
            tmp + "/run",
        ]
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - w0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    w_old, c_old = row3[1] + (wall - row3[2]), row3[4] + (cpu - row3[5])
    label = "theorycheck train --preset two-stage (whole command, fresh process)"
    return [label, w_old, wall, w_old / wall, c_old, cpu, c_old / cpu]


def main(argv=None):
    """Print the table and write ``results/dynamics.json``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-steps", type=int, default=300, help="steps of the layer-by-layer run in row 2")
    ap.add_argument("--full-old", action="store_true", help="also run all 3000 steps with the layer-by-layer route")
    args = ap.parse_args(argv)
    loads = {"start": _load()}
    rows = [_step_row()]
    loads["after step row"] = _load()
    row2, row3, diff = _run_rows(args.old_steps, args.full_old)
    rows += [row2, row3]
    loads["after run rows"] = _load()
    rows.append(_command_row(row3))
    loads["end"] = _load()
    headers = ["what", "old_wall_s", "fused_wall_s", "wall_ratio", "old_cpu_s", "fused_cpu_s", "cpu_ratio"]
    print(
        f"preset two-stage (exact population, T = v = 10, tau = 3); Numba pool {numba.get_num_threads()} threads "
        "(the layer-by-layer kernels use the pool, the fused kernel one thread unless --threads/THEORYCHECK_THREADS)"
    )
    print_table(headers, rows)
    print(f"largest relative parameter difference after {args.old_steps} steps (fused vs layer-by-layer): {diff:.2e}")
    print(f"1-minute load averages {loads} (2-core machine; wall times on a shared machine are noisy)")
    payload = {
        "headers": headers,
        "rows": rows,
        "trajectory_max_rel_diff": diff,
        "old_steps": args.old_steps,
        "numba_threads": numba.get_num_threads(),
        "load_average": loads,
    }
    print(f"written {write_json('dynamics', payload)}")


if __name__ == "__main__":
    main()
