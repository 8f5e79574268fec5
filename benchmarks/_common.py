"""Shared helpers for the side-by-side benchmarks (ratios measured in one run)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from theorycheck import GeneralTopicModel, _io

RESULTS = Path(__file__).resolve().parent / "results"


def dirichlet_model(T: int, n: int, tau: int, *, seed: int = 0, floor: float = 1e-9):
    """A seeded general topic model: ``phi`` rows Dirichlet(0.1) over ``n`` words, plus ``floor``, renormalised."""
    phi = np.random.default_rng(seed).dirichlet(np.full(n, 0.1), size=T) + floor
    return GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=tau)


def _sample(fn, min_time: float) -> float:
    """Mean wall time of ``fn()`` over as many calls as fit in ``min_time`` (at least one)."""
    n = 0
    t0 = time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_time:
            return el / n


def best_time(fn, *, repeat: int = 5, min_time: float = 0.05) -> float:
    """Best-of-``repeat`` wall time of ``fn()``; each sample loops until ``min_time`` elapsed."""
    fn()  # warm-up (JIT, caches)
    return min(_sample(fn, min_time) for _ in range(repeat))


def best_times_interleaved(fns, *, rounds: int = 7, min_time: float = 0.02) -> list[float]:
    """Best wall time of each ``fn()`` in ``fns`` over ``rounds`` rounds in which every function takes
    one sample (:func:`_sample`) in turn: a shared machine's drift then hits every
    function alike, so their ratios are fairer than from back-to-back timings."""
    for fn in fns:
        fn()  # warm-up (JIT, caches)
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], _sample(fn, min_time))
    return best


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
    }


def write_json(name: str, payload: dict) -> Path:
    """Write ``<name>.json`` (machine info first) atomically, non-finite floats as ``null``.

    The folder is ``$THEORYCHECK_BENCH_OUT`` when set (``theorycheck bench --out DIR``), else ``results/``.
    """
    folder = Path(os.environ.get("THEORYCHECK_BENCH_OUT") or RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.json"
    if os.environ.get("THEORYCHECK_BENCH_OUT") and (target.exists() or target.is_symlink()):
        marker = _io.read_marker(folder)  # `theorycheck bench --out DIR --force`: the user's files are kept
        if marker is None or target.name not in marker["files"]:
            raise SystemExit(
                f"refusing to overwrite {str(target)!r}: theorycheck did not write it (the folder's {_io.MARKER} "
                "does not list it); move it away or choose a new --out folder"
            )
    return _io.write_json(target, {"machine": machine(), **payload})


def print_table(headers, rows) -> None:
    cells = [[str(h) for h in headers]] + [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


@contextlib.contextmanager
def separate_cluster(folder, n_workers: int, *, nthreads: int = 1, env: dict | None = None, wait: float = 120.0):
    """``with separate_cluster(folder, 2) as (address, procs):`` a ``dask scheduler`` and ``n_workers`` ``dask
    worker`` processes (``--nthreads nthreads``, no nanny, no dashboard), started with ``python -m distributed.cli...``
    on 127.0.0.1 with a free port (the scheduler picks it and writes it to its scheduler file), logs in ``folder``;
    every process is terminated (then killed) on exit, whatever happens. ``env``: extra environment variables of
    the workers (e.g. ``THEORYCHECK_THREADS``). ``procs``: the scheduler's and the workers' ``Popen``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sfile, procs = folder / "scheduler.json", []
    base = dict(os.environ, **(env or {}))

    def start(cmd, log):
        procs.append(subprocess.Popen(cmd, stdout=(folder / log).open("wb"), stderr=subprocess.STDOUT, env=base,
                                      cwd=folder))  # fmt: skip

    try:
        start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
               "--no-dashboard", "--scheduler-file", str(sfile)], "scheduler.log")  # fmt: skip
        deadline = time.monotonic() + wait
        address = None
        while address is None and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.2)
            with contextlib.suppress(OSError, ValueError, KeyError):
                address = json.loads(sfile.read_text())["address"]
        if address is None:
            raise RuntimeError(f"the scheduler did not start: {(folder / 'scheduler.log').read_text()[-2000:]}")
        for i in range(n_workers):
            start([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", str(nthreads),
                   "--no-nanny", "--no-dashboard", "--host", "127.0.0.1", "--local-directory", str(folder / f"w{i}")],
                  f"worker{i}.log")  # fmt: skip
        yield address, procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=20)
