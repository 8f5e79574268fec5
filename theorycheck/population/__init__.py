"""Infinite-document (N -> inf) population objects: densities, exact moments, loss evaluators.

This module only re-exports; each formula lives in one private module, as a
``functools.singledispatch`` function: the generic route for any
:class:`~theorycheck.models.GeneralTopicModel` (SPEC §11) is the base and the paper's
:class:`~theorycheck.models.TopicModel` registers its closed form (a fast path tested against the
generic route). The public functions validate their arguments once, then dispatch.

=========================  ===============================  ==========================================
SPEC section               function                         module
=========================  ===============================  ==========================================
§1.1, §11.1 doc. law       ``topic_density``                ``_moments``
§1.1 topic sets            ``topic_sets``                   ``_moments``
§1.1, §11.2 ``E[pp^T]``    ``expected_pp``                  ``_moments``
§2.1 masked density        ``masked_density``               ``_moments``
§4.0, §11.2, §11.5         ``moments``                      ``_moments`` (and the rank-T factors
``(Sigma, C)``                                              ``stage1_factors``)
§4.0, §4.2, §11.5          ``value_loss``,                  ``_value_loss`` (block sums, Numba, on the
uniform attention          ``value_loss_grad``              paper's model; rank-T factors otherwise)
§4.3, §11.4 any scores     ``attention_loss``,              ``_attention_loss`` (structured route,
                           ``attention_loss_grad``,         dense path over topic sets or document
                           ``attention_loss_estimate``,     laws, reference) and ``_attention_kernels``
                           ``AttentionLossGrad``,           (structured squared loss, Numba)
                           ``SetSampledLoss``,              ``_attention_dense`` (dense evaluator
                           ``LossEstimate``                 per document law, both routes)
§11.8 (alpha, beta)        ``family_attention_loss``,       ``_attention_structured`` and
families, any phi          ``FamilyLoss``                   ``_attention_tables`` (no V1 x V1 array)
§4.3 (alpha, beta)         ``alpha_beta_loss``,             ``_alpha_beta`` (closed forms, paper's
family                     ``alpha_beta_loss_logK``,        model only)
                           ``alpha_beta_ce_loss``,
                           ``alpha_beta_score_matrix``,
                           ``alpha_beta_value_matrix``,
                           ``stage1_block_constants``
§2.1, §4.0 weighted        ``population_contexts``,         ``_contexts`` (every tau-subset as one
contexts                   ``PopulationContexts``           weighted context; nn.population_batch)
§4.3 independent route     ``symmetric_attention_loss``,    ``_symmetry`` (topic-permutation symmetry:
(any T)                    ``alpha_beta_symmetric_loss``    one topic set, three query tokens, O(V1))
§3.1 E, §4.0, §4.1,        ``embedding_loss``,              ``_embedding_loss`` (chain rule on the
§11.5 embedding model      ``embedding_loss_grad``,         value loss of the effective map)
                           ``EmbeddingLossGrad``
=========================  ===============================  ==========================================

Loss names are ``"squared"`` and ``"ce"`` everywhere; gradients are named tuples. Every function
that builds a dense ``V1 x V1`` array checks its size first (``max_bytes=`` or
``$THEORYCHECK_MAX_BYTES``, see ``theorycheck._memory``).
"""

from ._alpha_beta import (
    alpha_beta_ce_loss,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    stage1_block_constants,
)
from ._attention_loss import (
    AttentionLossGrad,
    LossEstimate,
    SetSampledLoss,
    attention_loss,
    attention_loss_estimate,
    attention_loss_grad,
)
from ._attention_structured import FamilyLoss, family_attention_loss
from ._contexts import PopulationContexts, population_contexts
from ._embedding_loss import EmbeddingLossGrad, embedding_loss, embedding_loss_grad
from ._moments import expected_pp, masked_density, moments, topic_density, topic_sets
from ._symmetry import alpha_beta_symmetric_loss, symmetric_attention_loss
from ._value_loss import value_loss, value_loss_grad

__all__ = [
    "masked_density",
    "topic_density",
    "topic_sets",
    "expected_pp",
    "moments",
    "value_loss",
    "value_loss_grad",
    "attention_loss",
    "attention_loss_grad",
    "AttentionLossGrad",
    "SetSampledLoss",
    "attention_loss_estimate",
    "LossEstimate",
    "family_attention_loss",
    "FamilyLoss",
    "alpha_beta_loss",
    "alpha_beta_loss_logK",
    "alpha_beta_score_matrix",
    "alpha_beta_value_matrix",
    "alpha_beta_ce_loss",
    "stage1_block_constants",
    "embedding_loss",
    "embedding_loss_grad",
    "EmbeddingLossGrad",
    "population_contexts",
    "PopulationContexts",
    "symmetric_attention_loss",
    "alpha_beta_symmetric_loss",
]
