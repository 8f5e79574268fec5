"""Compatibility module: the model now lives in :mod:`theorycheck.nn.model`,
:mod:`theorycheck.nn.model_config`, :mod:`theorycheck.nn.batches`, :mod:`theorycheck.nn.modules`
and :mod:`theorycheck.nn.layers`; import from :mod:`theorycheck.nn` instead."""

from .batches import (
    CountBatch,
    PositionBatch,
    count_batch,
    make_batch,
    merged_batch,
    population_batch,
    position_batch,
)
from .model import Transformer
from .model_config import PARAM_NAMES, ModelConfig

__all__ = [
    "ModelConfig",
    "Transformer",
    "CountBatch",
    "PositionBatch",
    "count_batch",
    "merged_batch",
    "make_batch",
    "position_batch",
    "population_batch",
    "PARAM_NAMES",
]
