"""A small transparent transformer (numpy forward and backward, no autograd) and its trainer.

============================  =====================================================
SPEC section                  name
============================  =====================================================
§3.1 (model, column form)     :class:`Transformer`, :class:`ModelConfig`
§2.1, §2.2 (masked batches)   :func:`make_batch`, :func:`count_batch`, :func:`position_batch`
§4.0 (N -> inf batch)         :func:`population_batch`
§5.1, §5.2 (training)         :class:`TrainConfig`, :class:`Trainer`, :func:`train`, :func:`preset`
§5 (probes, resume)           :data:`DEFAULT_PROBES`, :class:`ProbeContext`, :func:`load_checkpoint`
§4.5, §5.2 (stage grid)       :func:`stage_grid`, :func:`run_stages`
============================  =====================================================
"""

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
from .model import Transformer
from .optim import SGD, Adam, make_optimizer
from .presets import PRESETS, preset, run_preset
from .probes import DEFAULT_PROBES, ProbeContext, stage1_reference
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
    "Checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "config_diff",
    "config_hash",
]
