"""Optima of the population objectives, each returned as a :class:`SolveResult` (one contract).

Every solver takes ``(tm, mk, *, method, reg, tol, solver, options)`` plus at most two
problem-defining keywords (``value=``, ``loss=``; ``d=``, ``bias=``), with ``options`` a typed, frozen
options object (:class:`ValueOptions`, :class:`GramOptions`, :class:`AttentionOptions`, or a dict of
their fields; the backend's own options are their field ``solver_options``), returns a
:class:`SolveResult` (``x``, ``fun``, ``status``, ``message``, ``residuals``, ``info``,
``certificate``) and is certified by one shared function with one status table
(:data:`STATUS_MESSAGES`; ``theorycheck.solvers._certify``).

=============================  =====================================================================
SPEC section                   function
=============================  =====================================================================
§4.0, §4.2 stage-1 ``W^V``     :func:`optimal_value_matrix`, :class:`BlockValueMatrix`,
                               :func:`value_block_constants` (min-norm constants:
                               ``theorycheck.population.stage1_block_constants``),
                               :func:`minimiser_violation`
§11.3, §11.5 general phi       the same two solvers dispatch on a ``GeneralTopicModel``
                               (:class:`LowRankMatrix` results; the ``_lowrank`` modules)
§4.1 tied embedding Gram       :func:`optimal_embedding_gram`, :func:`closed_form_gram`,
                               :class:`BlockGram`, :func:`embedding_from_gram`,
                               :func:`min_embedding_dim`, :func:`embedding_minimiser_violation`,
                               :func:`identifiable_part`
§4.3 (alpha, beta) attention   :func:`optimal_attention`
§11.4 general attention        :func:`optimal_attention` on a ``GeneralTopicModel``,
                               :func:`cotopic_matrix`, :func:`stage1_value_matrix`
=============================  =====================================================================

Layout by concept: one subpackage per solver family, closed form, numeric methods, residuals and
certificates side by side: :mod:`.value` (stage-1 ``W^V``), :mod:`.gram` (tied embedding Gram),
:mod:`.attention` ((alpha, beta) and general scores). Shared: ``_result`` (:class:`SolveResult`),
``_certify`` (the status table), ``_options`` (the options objects), ``_rational`` (exact rational
core), ``_symmetric`` (topic-symmetric algebra), ``_cvxpy`` (the one cvxpy import). The route for a
model type is chosen by ``functools.singledispatch`` registries, one per solver.
"""

from ._certify import STATUS_MESSAGES
from ._options import AttentionOptions, GramOptions, ValueOptions
from ._result import SolveResult
from .attention import cotopic_matrix, optimal_attention, stage1_value_matrix
from .gram import (
    BlockGram,
    closed_form_gram,
    embedding_from_gram,
    embedding_minimiser_violation,
    identifiable_part,
    min_embedding_dim,
    optimal_embedding_gram,
)
from .value import (
    BlockValueMatrix,
    LowRankMatrix,
    MinimiserViolation,
    minimiser_violation,
    optimal_value_matrix,
    value_block_constants,
)

__all__ = [
    "SolveResult",
    "STATUS_MESSAGES",
    "AttentionOptions",
    "GramOptions",
    "ValueOptions",
    "optimal_attention",
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
