"""Infinite-document (N -> inf) population objects: densities, exact moments, loss evaluators.

This module is the public face; each job lives in a small private module:

- ``_moments``: masked densities ``m_S`` and the exact moments ``(Sigma, C)`` (SPEC §1, §2, §4.0).
- ``_value_loss``: exact uniform-attention squared loss and gradient (SPEC §4.0).
"""

from ._moments import expected_pp, masked_density, moments, topic_density, topic_sets

__all__ = [
    "masked_density",
    "topic_density",
    "topic_sets",
    "expected_pp",
    "moments",
]

from ._value_loss import value_loss, value_loss_grad

__all__ += ["value_loss", "value_loss_grad"]

from ._attention_loss import SetSampledLoss, attention_loss, attention_loss_grad  # noqa: E402

__all__ += ["attention_loss", "attention_loss_grad", "SetSampledLoss"]

from ._alpha_beta import (  # noqa: E402
    alpha_beta_ce_loss,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    stage1_block_constants,
)

__all__ += [
    "alpha_beta_loss",
    "alpha_beta_loss_logK",
    "alpha_beta_score_matrix",
    "alpha_beta_value_matrix",
    "alpha_beta_ce_loss",
    "stage1_block_constants",
]
from ._embedding_loss import EmbeddingLossGrad, embedding_loss, embedding_loss_grad  # noqa: E402

__all__ += ["embedding_loss", "embedding_loss_grad", "EmbeddingLossGrad"]
