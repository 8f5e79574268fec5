"""Stage boundaries of the exact two-stage dynamics over a learning-rate x init-scale grid (SPEC §4.5, §5.2).

Every cell is the preset ``two-stage`` (joint W^K, W^Q, W^V training by exact population gradient
descent, T = v = 10, tau = 3, squared loss) with its SGD learning rate and its init scale
(``N(0, s^2)`` entries) replaced; the boundaries are those of a run folder's ``stages.json``
(:func:`theorycheck.nn.trainer.run_stages`: the norm rule of
:func:`theorycheck.analysis.stats.detect_stages` on :func:`~theorycheck.nn.trainer.stage_curves`, and the
structural rule). Cells run serially, or on an ``executor`` (e.g. a process pool) or a Dask ``client``
(:mod:`theorycheck._dask`); each cell is a pure function of its configuration, so the table does not
depend on where it ran (apart from the ``seconds`` column).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .._dask import resolve_executor
from .._validate import check_int, check_real
from .config import GRID_PRESET, MAX_CELLS, MAX_GRID_STEPS, ModelConfig, TrainConfig
from .presets import preset
from .trainer import Trainer, TrainingDiverged, run_stages

__all__ = ["GRID_PRESET", "MAX_CELLS", "MAX_GRID_STEPS", "GRID_COLUMNS", "check_grid", "grid_config", "stage_grid"]

#: the columns of a grid row, in table order
GRID_COLUMNS = (
    "lr",
    "init_scale",
    "stage1_end",
    "stage2_start",
    "stage2_attention",
    "structural_two_stage",
    "final_loss",
    "diverged",
    "seconds",
)


def grid_config(lr: float, init_scale: float, *, steps: int | None = None, seed: int | None = None) -> TrainConfig:
    """The ``two-stage`` preset's configuration with SGD rate ``lr`` and init scale ``init_scale``
    (``steps`` and ``seed`` overriding the preset's when given), validated."""
    cfg = preset(GRID_PRESET)
    assert isinstance(cfg, TrainConfig)  # a single-run preset
    changes: dict[str, Any] = {
        "optim": cfg.optim.replace(lr=lr),
        "model": ModelConfig.from_dict({**cfg.model.to_dict(), "init_scale": init_scale}),
        "checkpoint_every": 0,
    }
    if steps is not None:
        changes["steps"] = steps
    if seed is not None:
        changes["seed"] = seed
    return cfg.replace(**changes).validate()


def _check_values(name: str, values) -> list[float]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of positive numbers, got {type(values).__name__}")
    out = [check_real(f"{name}[]", x, low=0.0) for x in values]
    if not out or any(x <= 0.0 or not math.isfinite(x) for x in out):
        raise ValueError(f"{name} must be a non-empty sequence of finite numbers > 0, got {list(values)!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat a value, got {list(values)!r}")
    return out


def check_grid(lrs, init_scales, *, steps=None, seed=None) -> list[TrainConfig]:
    """The cells' configurations (learning rates outer), every argument validated (see :func:`stage_grid`)."""
    lrs = _check_values("lrs", lrs)
    scales = _check_values("init_scales", init_scales)
    if len(lrs) * len(scales) > MAX_CELLS:
        raise ValueError(f"the grid has {len(lrs)} x {len(scales)} cells; at most {MAX_CELLS} are accepted")
    if steps is not None:
        steps = check_int("steps", steps, low=1, high=MAX_GRID_STEPS)
    if seed is not None:
        seed = check_int("seed", seed, low=0)
    return [grid_config(lr, s, steps=steps, seed=seed) for lr in lrs for s in scales]


def _cell(cfg: TrainConfig) -> dict:
    """Train one cell (no run folder) and return its row (runs on a worker too)."""
    t0 = time.perf_counter()
    tr = Trainer(cfg, progress=False)
    diverged = None
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging cell is detected by its loss, told once
            tr.run()
    except TrainingDiverged as exc:  # a learning rate past the stable range: the cell's result, not an error
        diverged = exc.step
    stages = (run_stages(cfg, tr.history) or {}) if diverged is None else {}
    final = tr.history[-1] if tr.history and diverged is None else {}
    return {
        "lr": cfg.optim.lr,
        "init_scale": cfg.model.init_scale,
        "stage1_end": stages.get("stage1_end"),
        "stage2_start": stages.get("stage2_start"),
        "stage2_attention": stages.get("stage2_attention"),
        "structural_two_stage": stages.get("structural_two_stage"),
        "final_loss": final.get("loss"),
        "diverged": diverged,
        "seconds": round(time.perf_counter() - t0, 3),
        "steps": cfg.steps,
    }


def stage_grid(
    lrs: Sequence[float],
    init_scales: Sequence[float],
    *,
    steps: int | None = None,
    seed: int | None = None,
    executor: Executor | None = None,
    client: Any = None,
    progress: bool = True,
) -> list[dict]:
    """Stage boundaries of the ``two-stage`` preset for every (learning rate, init scale) pair.

    Returns one row per cell (``GRID_COLUMNS`` plus ``steps``), learning rates outer, init scales
    inner, in the given orders. A boundary that no rule found is ``None`` (e.g. a run too short for
    stage 2). A cell whose loss left the floats (a learning rate past the stable range) is a result:
    ``diverged`` is the step where it did (else ``None``), its boundaries and ``final_loss`` are ``None``.
    ``lrs`` and ``init_scales``: distinct positive finite numbers; at most ``MAX_CELLS`` cells and
    ``MAX_GRID_STEPS`` steps (checked before any work). ``executor`` (a
    :class:`concurrent.futures.Executor`) or ``client`` (a ``distributed.Client`` or a scheduler
    address) runs the cells concurrently; ``progress``: a bar over the cells.

    Parameters
    ----------
    lrs : sequence of float
        SGD learning rates: distinct, finite, ``> 0`` (the outer loop).
    init_scales : sequence of float
        Init scales ``s`` (entries ``N(0, s^2)``): distinct, finite, ``> 0`` (the inner loop).
    steps : int, optional
        Steps of every cell, ``1 <= steps <= MAX_GRID_STEPS`` (default: the preset's).
    seed : int, optional
        Seed of every cell, ``seed >= 0`` (default: the preset's).
    executor : concurrent.futures.Executor, optional
        Runs the cells concurrently.
    client : distributed.Client or str, optional
        A Dask client or scheduler address, instead of ``executor``.
    progress : bool
        A progress bar over the cells.

    Returns
    -------
    list of dict
        One row per cell with the keys ``GRID_COLUMNS`` and ``steps``: the cell's ``lr`` and
        ``init_scale``, the stage boundaries (``stage1_end``, ``stage2_start``, ``stage2_attention``,
        ``structural_two_stage``; ``None`` where no rule fired), ``final_loss``, ``diverged`` (the step
        whose loss was not finite, else ``None``) and ``seconds``.

    Raises
    ------
    ValueError
        An empty, repeated, non-positive or non-finite value, more than ``MAX_CELLS`` cells, or ``steps``
        or ``seed`` out of range (before any work).
    TypeError
        ``lrs`` or ``init_scales`` not a sequence of numbers.

    See Also
    --------
    run_stages : The boundaries of one run.
    preset : The ``two-stage`` preset every cell starts from.
    TrainingDiverged : What a diverging cell records as ``diverged``.

    References
    ----------
    SPEC §4.5 (the two-stage dynamics and the stage-2 onset), §5.2 (the two-stage experiment), §11.7
    (stable learning rates).

    Examples
    --------
    Twelve steps of two cells at T = v = 10: the paper's rate 30 is in stage 1 (``W^V`` plateaus);
    rate ``10^4`` leaves the floats at step 9.

    >>> from theorycheck.nn import stage_grid
    >>> rows = stage_grid([30.0, 1e4], [0.01], steps=12, progress=False)
    >>> [(r["lr"], r["stage1_end"], r["stage2_start"], r["diverged"]) for r in rows]
    [(30.0, 10, None, None), (10000.0, None, None, 9)]
    >>> round(rows[0]["final_loss"], 6)
    0.9682
    >>> stage_grid([30.0, 30.0], [0.01])
    Traceback (most recent call last):
        ...
    ValueError: lrs must not repeat a value, got [30.0, 30.0]
    """
    cfgs = check_grid(lrs, init_scales, steps=steps, seed=seed)
    bar = tqdm(total=len(cfgs), desc="grid", unit="cell", disable=not progress, leave=False)
    rows = []
    try:
        with resolve_executor(executor, client) as ex:
            results = map(_cell, cfgs) if ex is None else ex.map(_cell, cfgs)
            for row in results:
                rows.append(row)
                bar.update(1)
    finally:
        bar.close()
    return rows
