"""Optima of the population objectives, each returned as a :class:`SolveResult` (one contract).

Every solver takes ``(tm, mk, *, method, reg, tol, solver, options)`` plus keyword-only extras of
its own, returns a :class:`SolveResult` (``x``, ``fun``, ``status``, ``message``, ``residuals``,
``info``, ``certificate``) and is certified by one shared function with one status table
(:data:`STATUS_MESSAGES`; ``theorycheck.solvers._certify``).

=========================== =====================================================================
SPEC section                function
=========================== =====================================================================
§4.0, §4.2 stage-1 ``W^V``  :func:`optimal_value_matrix`, :class:`BlockValueMatrix`,
                            :func:`value_block_constants` (min-norm constants:
                            ``theorycheck.population.stage1_block_constants``),
                            :func:`minimiser_violation`
§11.3, §11.5 general phi    the same two solvers dispatch on a ``GeneralTopicModel``
                            (:class:`LowRankMatrix` results; ``solvers._general*``)
§4.1 tied embedding Gram    :func:`optimal_embedding_gram`, :func:`closed_form_gram`,
                            :class:`BlockGram`, :func:`embedding_from_gram`,
                            :func:`min_embedding_dim`, :func:`embedding_minimiser_violation`,
                            :func:`identifiable_part`
§4.3 (alpha, beta) attention :func:`optimal_attention`
§11.4 general attention      :func:`general_optimal_attention` (also via ``optimal_attention``),
                             :func:`cotopic_matrix`, :func:`stage1_value_matrix`
=========================== =====================================================================
"""

from ._attention import optimal_attention
from ._certify import STATUS_MESSAGES
from ._embedding import optimal_embedding_gram
from ._general import LowRankMatrix
from ._general_attention import cotopic_matrix, general_optimal_attention, stage1_value_matrix
from ._gram import BlockGram, closed_form_gram, embedding_from_gram, min_embedding_dim
from ._gram_residuals import embedding_minimiser_violation, identifiable_part
from ._result import SolveResult
from ._value import optimal_value_matrix
from ._value_block import BlockValueMatrix, value_block_constants
from ._value_residuals import MinimiserViolation, minimiser_violation

__all__ = [
    "SolveResult",
    "STATUS_MESSAGES",
    "optimal_attention",
    "general_optimal_attention",
    "cotopic_matrix",
    "stage1_value_matrix",
    "optimal_embedding_gram",
    "closed_form_gram",
    "BlockGram",
    "embedding_from_gram",
    "min_embedding_dim",
    "embedding_minimiser_violation",
    "identifiable_part",
    "optimal_value_matrix",
    "BlockValueMatrix",
    "LowRankMatrix",
    "minimiser_violation",
    "MinimiserViolation",
    "value_block_constants",
]
