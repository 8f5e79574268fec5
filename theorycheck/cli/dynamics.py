"""``theorycheck dynamics``: stage boundaries of the exact two-stage dynamics over a learning-rate x
init-scale grid (SPEC §4.5, §5.2), one training run of the preset ``two-stage`` per cell
(:func:`theorycheck.nn.stage_grid`), written as a table and a figure; cells in local worker processes
(``--jobs``) or on a Dask cluster (``--scheduler``).
"""

from __future__ import annotations

import io
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from multiprocessing import forkserver

from .. import _io, _threads
from .._dask import scheduler_executor
from .._interrupt import ignore_sigint, pool_stopped_on_interrupt, sigint_ignored
from .._validate import check_int
from ..nn.stage_grid import GRID_COLUMNS, GRID_PRESET, MAX_CELLS, MAX_GRID_STEPS, check_grid, stage_grid
from ..report.plots import stage_grid as stage_grid_figure
from ..report.runner import default_jobs
from .common import (
    command,
    json_path,
    write_json_summary,
)


def _parse_list(flag: str, text: str) -> list[float]:
    try:
        values = [float(t) for t in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated numbers > 0 such as 10,30, got {text!r}") from None
    return values


def _init_worker() -> None:
    """A cell worker leaves Ctrl-C to its parent and can be ended at once (:func:`theorycheck._interrupt.stop_pool`)."""
    ignore_sigint()
    _threads.numba_lock_per_process()


def _pool(jobs: int):
    """``jobs`` local worker processes (``forkserver``: no Numba thread pool inherited across fork), ended at once
    after Ctrl-C or SIGTERM (:func:`theorycheck._interrupt.pool_stopped_on_interrupt`)."""
    ctx = multiprocessing.get_context("forkserver")
    with sigint_ignored():  # the forkserver (and the workers it forks) leave Ctrl-C to this process
        forkserver.ensure_running()
    return pool_stopped_on_interrupt(ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker))


def _table(rows) -> str:
    lines = ["| " + " | ".join(GRID_COLUMNS) + " |", "|" + "---|" * len(GRID_COLUMNS)]
    for r in rows:
        cells = [
            f"{r[c]:.6g}" if isinstance(r[c], float) else ("-" if r[c] is None else str(r[c])) for c in GRID_COLUMNS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    lrs = _parse_list("--lr", args.lr)
    scales = _parse_list("--init-scale", args.init_scale)
    if len(lrs) * len(scales) > MAX_CELLS:
        raise ValueError(f"--lr x --init-scale has {len(lrs)} x {len(scales)} cells; at most {MAX_CELLS} are accepted")
    if args.steps is not None:
        check_int("--steps", args.steps, low=1, high=MAX_GRID_STEPS)
    if args.seed is not None:
        check_int("--seed", args.seed, low=0)
    check_grid(lrs, scales, steps=args.steps, seed=args.seed)  # every value, before any work
    jobs = 1 if args.jobs is None else check_int("--jobs", args.jobs, low=1, high=max(default_jobs(), 1) * 4)
    if args.scheduler is not None and args.jobs is not None:
        raise ValueError("pass --jobs (local worker processes) or --scheduler (a Dask cluster), not both")
    out = _io.prepare_output_dir(args.out, force=args.force, flag="--out")
    json_file = json_path(args)
    local = _pool(jobs) if jobs > 1 and args.scheduler is None else nullcontext()
    with scheduler_executor(args.scheduler) as dask_ex, local as pool:
        rows = stage_grid(
            lrs, scales, steps=args.steps, seed=args.seed, executor=dask_ex or pool, progress=not args.quiet
        )
    out.mkdir(parents=True, exist_ok=True)
    summary = {"preset": GRID_PRESET, "lrs": lrs, "init_scales": scales, "rows": rows}
    files = [_io.write_json(out / "stage_grid.json", summary, sort_keys=True, indent=2)]
    files.append(_io.atomic_write_text(out / "stage_grid.md", _table(rows)))
    if not args.no_figures:
        (out / "figures").mkdir(exist_ok=True)
        buf = io.BytesIO()
        stage_grid_figure(rows).savefig(buf, dpi=110, format="png")
        files.append(_io.atomic_write_bytes(out / "figures" / "stage_grid.png", buf.getvalue()))
    _io.write_marker(out, command=command(args), files=sorted(p.relative_to(out).as_posix() for p in files))
    print(_table(rows), end="")
    print(f"written {out}/stage_grid.md, stage_grid.json" + ("" if args.no_figures else ", figures/stage_grid.png"))
    write_json_summary(json_file, summary)
    return 0
