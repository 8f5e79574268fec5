"""A small transparent transformer (numpy forward and backward, no autograd) and its trainer.

============================  =====================================================
SPEC section                  name
============================  =====================================================
§3.1 (model, column form)     :class:`Transformer`, :class:`ModelConfig`
§2.1, §2.2 (masked batches)   :func:`make_batch`, :func:`count_batch`, :func:`position_batch`, :class:`Groups`
§4.0 (N -> inf batch)         :func:`population_batch`
§5.1, §5.2 (training)         :class:`TrainConfig`, :class:`Trainer`, :func:`train`, :func:`preset`
§5 (probes, resume)           :data:`DEFAULT_PROBES`, :class:`ProbeContext`, :class:`References`,
                              :func:`load_checkpoint`
§4.5, §5.2 (stage grid)       :func:`stage_grid`, :func:`run_stages`
============================  =====================================================

The facade is lazy (``theorycheck._lazy``): ``theorycheck.nn`` imports no submodule, and each name below is
imported on first access; so a light module of this package (e.g. :mod:`.config`) is imported without the
trainer and its kernels.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_facade

if TYPE_CHECKING:  # the names below, for type checkers and IDEs (not executed)
    from .batches import (
        CountBatch,
        PositionBatch,
        count_batch,
        make_batch,
        merged_batch,
        population_batch,
        position_batch,
    )
    from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
    from .config import PARAM_NAMES, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_diff, config_hash
    from .data import DataStream
    from .layers import Groups
    from .model import Transformer
    from .optim import SGD, Adam, make_optimizer
    from .presets import PRESETS, preset, run_preset
    from .probes import DEFAULT_PROBES, ProbeContext, References, stage1_reference
    from .stage_grid import stage_grid
    from .trainer import (
        Trainer,
        TrainingDiverged,
        TrainingInterrupted,
        TrainResult,
        load_metrics,
        run_stages,
        stage_curves,
        train,
    )

__all__ = [
    "PARAM_NAMES",
    "CountBatch",
    "ModelConfig",
    "PositionBatch",
    "Transformer",
    "count_batch",
    "make_batch",
    "merged_batch",
    "population_batch",
    "position_batch",
    "PRESETS",
    "SGD",
    "Adam",
    "DataConfig",
    "OptimConfig",
    "TrainConfig",
    "Trainer",
    "TrainResult",
    "load_metrics",
    "make_optimizer",
    "preset",
    "run_preset",
    "stage1_reference",
    "stage_curves",
    "stage_grid",
    "run_stages",
    "train",
    "TrainingInterrupted",
    "TrainingDiverged",
    "DataStream",
    "DEFAULT_PROBES",
    "ProbeContext",
    "References",
    "Groups",
    "Checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "config_diff",
    "config_hash",
]

#: Public name -> (its module, the attribute), imported on first access.
_LAZY: dict[str, tuple[str, str | None]] = {
    "PARAM_NAMES": (".config", "PARAM_NAMES"),
    "CountBatch": (".batches", "CountBatch"),
    "ModelConfig": (".config", "ModelConfig"),
    "PositionBatch": (".batches", "PositionBatch"),
    "Transformer": (".model", "Transformer"),
    "count_batch": (".batches", "count_batch"),
    "make_batch": (".batches", "make_batch"),
    "merged_batch": (".batches", "merged_batch"),
    "population_batch": (".batches", "population_batch"),
    "position_batch": (".batches", "position_batch"),
    "PRESETS": (".presets", "PRESETS"),
    "SGD": (".optim", "SGD"),
    "Adam": (".optim", "Adam"),
    "DataConfig": (".config", "DataConfig"),
    "OptimConfig": (".config", "OptimConfig"),
    "TrainConfig": (".config", "TrainConfig"),
    "Trainer": (".trainer", "Trainer"),
    "TrainResult": (".trainer", "TrainResult"),
    "load_metrics": (".trainer", "load_metrics"),
    "make_optimizer": (".optim", "make_optimizer"),
    "preset": (".presets", "preset"),
    "run_preset": (".presets", "run_preset"),
    "stage1_reference": (".probes", "stage1_reference"),
    "stage_curves": (".trainer", "stage_curves"),
    "stage_grid": (".stage_grid", "stage_grid"),
    "run_stages": (".trainer", "run_stages"),
    "train": (".trainer", "train"),
    "TrainingInterrupted": (".trainer", "TrainingInterrupted"),
    "TrainingDiverged": (".trainer", "TrainingDiverged"),
    "DataStream": (".data", "DataStream"),
    "DEFAULT_PROBES": (".probes", "DEFAULT_PROBES"),
    "ProbeContext": (".probes", "ProbeContext"),
    "References": (".probes", "References"),
    "Groups": (".layers", "Groups"),
    "Checkpoint": (".checkpoint", "Checkpoint"),
    "load_checkpoint": (".checkpoint", "load_checkpoint"),
    "save_checkpoint": (".checkpoint", "save_checkpoint"),
    "config_diff": (".config", "config_diff"),
    "config_hash": (".config", "config_hash"),
}

__getattr__, __dir__ = lazy_facade(__name__, _LAZY)
