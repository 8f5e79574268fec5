"""Stage 1: the optimal value matrix ``W^V`` under uniform attention (SPEC §4.0, §4.2, §11.3).

One solver, :func:`optimal_value_matrix`, with its routes side by side:

=================== =====================================================================
module              content
=================== =====================================================================
``_solve``          the public solver: validation, the route registry (``functools.singledispatch``
                    on the model type) and the paper model's methods (closed form, lstsq, cvxpy)
``_block``          :class:`BlockValueMatrix`, the SPEC §4.2 constants (:func:`value_block_constants`)
``_residuals``      residuals and the minimiser violation of a candidate (:func:`minimiser_violation`)
``_lowrank``        the generic route for any topic-word matrix (:class:`LowRankMatrix`, SPEC §11.3)
``_rational``       the exact rational optimum ``C Sigma^+`` and constants (``method="rational"``)
=================== =====================================================================
"""

from .._options import ValueOptions
from ._block import BlockValueMatrix, structured_constants, value_block_constants
from ._lowrank import LowRankMatrix
from ._rational import rational_value_constants, rational_value_optimum, rational_value_result
from ._residuals import MinimiserViolation, minimiser_violation
from ._solve import VALUE_METHODS, optimal_value_matrix

__all__ = [
    "optimal_value_matrix",
    "ValueOptions",
    "VALUE_METHODS",
    "BlockValueMatrix",
    "LowRankMatrix",
    "value_block_constants",
    "structured_constants",
    "minimiser_violation",
    "MinimiserViolation",
    "rational_value_optimum",
    "rational_value_constants",
    "rational_value_result",
]
