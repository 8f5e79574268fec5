"""Infinite-document (N -> inf) population objects: densities, exact moments, loss evaluators.

This module only re-exports; each formula lives in one private module.

======================  ===========================  ==========================================
SPEC section            function                     module
======================  ===========================  ==========================================
§1.1 document law       ``topic_density``            ``_moments``
§1.1 topic sets         ``topic_sets``               ``_moments``
§1.1 ``E[p p^T]``       ``expected_pp``              ``_moments``
§2.1 masked density     ``masked_density``           ``_moments``
§4.0 ``(Sigma, C)``     ``moments``                  ``_moments``
§4.0, §4.2 uniform      ``value_loss``,              ``_value_loss`` (block sums, Numba)
attention               ``value_loss_grad``
§4.3 any scores         ``attention_loss``,          ``_attention_loss`` (dense path, reference)
                        ``attention_loss_grad``,     and ``_attention_kernels`` (structured
                        ``AttentionLossGrad``,       squared loss, Numba)
                        ``SetSampledLoss``
§11.2 any topic-word    ``moments``, ``masked_density``,  ``_general`` (GeneralTopicModel: the
matrix: moments, losses ``value_loss(_grad)``,       public functions dispatch; rank-T factors)
                        ``embedding_loss(_grad)``    and ``_general_embedding``
§11.4 any topic-word    ``attention_loss_estimate``, ``_general_attention`` (GeneralTopicModel:
matrix: attention       ``LossEstimate``             exact over tau-sets, Dirichlet sampled + SE)
§4.3 (alpha, beta)      ``alpha_beta_loss``,         ``_alpha_beta`` (closed forms)
family                  ``alpha_beta_loss_logK``,
                        ``alpha_beta_ce_loss``,
                        ``alpha_beta_score_matrix``,
                        ``alpha_beta_value_matrix``,
                        ``stage1_block_constants``
§2.1, §4.0 weighted     ``population_contexts``,     ``_contexts`` (every tau-subset as one
contexts                ``PopulationContexts``       weighted context; nn.population_batch)
§4.3 independent route ``symmetric_attention_loss``,  ``_symmetry`` (topic-permutation symmetry:
(any T)                 ``alpha_beta_symmetric_loss``  one topic set, three query tokens, O(V1))
§3.1 E, §4.0, §4.1      ``embedding_loss``,          ``_embedding_loss`` (chain rule on
embedding model         ``embedding_loss_grad``,     ``value_loss_grad``)
                        ``EmbeddingLossGrad``
======================  ===========================  ==========================================

Loss names are ``"squared"`` and ``"ce"`` everywhere; gradients are named tuples. Every function
that builds a dense ``V1 x V1`` array checks its size first (``max_bytes=`` or
``$THEORYCHECK_MAX_BYTES``, see :mod:`theorycheck._memory`).
"""

from ._alpha_beta import (
    alpha_beta_ce_loss,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    stage1_block_constants,
)
from ._attention_loss import AttentionLossGrad, SetSampledLoss, attention_loss, attention_loss_grad
from ._contexts import PopulationContexts, population_contexts
from ._embedding_loss import EmbeddingLossGrad, embedding_loss, embedding_loss_grad
from ._general_attention import LossEstimate, attention_loss_estimate
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
