"""A small transparent transformer (numpy forward and backward, no autograd) and its trainer.

============================  =====================================================
SPEC section                  name
============================  =====================================================
§3.1 (model, column form)     :class:`Transformer`, :class:`ModelConfig`
§2.1, §2.2 (masked batches)   :func:`make_batch`, :func:`count_batch`, :func:`position_batch`
§4.0 (N -> inf batch)         :func:`population_batch`
§5.1, §5.2 (training)         :class:`TrainConfig`, :class:`Trainer`, :func:`train`, :func:`preset`
============================  =====================================================
"""

from ._model import (
    PARAM_NAMES,
    CountBatch,
    ModelConfig,
    PositionBatch,
    Transformer,
    count_batch,
    make_batch,
    merged_batch,
    population_batch,
    position_batch,
)
from ._train import (
    PRESETS,
    SGD,
    Adam,
    DataConfig,
    OptimConfig,
    TrainConfig,
    Trainer,
    TrainResult,
    load_metrics,
    make_optimizer,
    preset,
    run_preset,
    stage1_reference,
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
    "train",
]
