"""Optima of the population objectives, each returned as a :class:`SolveResult`.

Public face; each solver family lives in a small private module.
Every ``method=`` result carries residuals recomputed by our own numpy code.
"""

from ._result import STATUS_MESSAGES, SolveResult

__all__ = ["SolveResult", "STATUS_MESSAGES"]

from ._attention import optimal_attention

__all__ += ["optimal_attention"]
from ._embedding import (  # noqa: E402
    BlockGram,
    closed_form_gram,
    embedding_from_gram,
    embedding_minimiser_violation,
    identifiable_part,
    min_embedding_dim,
    optimal_embedding_gram,
)

__all__ += [
    "optimal_embedding_gram",
    "closed_form_gram",
    "BlockGram",
    "embedding_from_gram",
    "min_embedding_dim",
    "embedding_minimiser_violation",
    "identifiable_part",
]
from ._value import (  # noqa: E402
    BlockValueMatrix,
    MinimiserViolation,
    minimiser_violation,
    optimal_value_matrix,
    value_block_constants,
)

__all__ += [
    "optimal_value_matrix",
    "BlockValueMatrix",
    "minimiser_violation",
    "MinimiserViolation",
    "value_block_constants",
]
