"""The tied embedding's optimal Gram ``G = (W^E)^T W^E`` (SPEC §4.1, §11.5).

One solver, :func:`optimal_embedding_gram`, with its routes side by side:

=================== =====================================================================
module              content
=================== =====================================================================
``_solve``          the public solver: validation, the route registry (``functools.singledispatch``
                    on the model type) and the paper model's methods (closed form, Schur, SDP,
                    factorized L-BFGS)
``_block``          :class:`BlockGram`, :func:`closed_form_gram` (SPEC §4.1 D3/D4),
                    :func:`embedding_from_gram`, :func:`min_embedding_dim`
``_residuals``      residuals of a candidate Gram, :func:`embedding_minimiser_violation`,
                    :func:`identifiable_part`
``_lowrank``        the generic route for any topic-word matrix (SPEC §11.5)
``_rational``       the exact rational minimum-trace Gram and constants (``method="rational"``)
=================== =====================================================================
"""

from .._options import GramOptions
from ._block import BlockGram, closed_form_gram, embedding_from_gram, min_embedding_dim, optimal_bias
from ._rational import rational_embedding_gram, rational_embedding_result, rational_gram_constants
from ._residuals import embedding_minimiser_violation, identifiable_part
from ._solve import optimal_embedding_gram

__all__ = [
    "optimal_embedding_gram",
    "GramOptions",
    "BlockGram",
    "closed_form_gram",
    "optimal_bias",
    "embedding_from_gram",
    "min_embedding_dim",
    "embedding_minimiser_violation",
    "identifiable_part",
    "rational_embedding_gram",
    "rational_gram_constants",
    "rational_embedding_result",
]
