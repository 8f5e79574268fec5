"""Finite documents (SPEC §1, §2.1, §2.2, §11.1): sampling, BERT-style masking, and the finite-N loss
by Monte Carlo and by exact enumeration.

=====================================  ================================================  ==================
SPEC section                           name                                              module
=====================================  ================================================  ==================
§1.2, §11.1 (documents)                :func:`sample_documents`, :class:`Documents`      ``documents``
§2.1 (masking)                         :func:`mask_documents`, :class:`MaskedBatch`      ``masking``
§2.2, §3.1 (finite-N loss, estimate)   :func:`mc_attention_loss`, :func:`doc_losses`     ``montecarlo``
§2.2 (finite-N loss, exact)            :func:`exact_finite_loss`                         ``finite_exact``
=====================================  ================================================  ==================

Every sampler takes ``rng`` (a ``numpy.random.Generator``) or ``seed``; the same seed gives
bit-identical output.
"""

from .documents import PAD, Documents, check_sample_size, sample_documents, token_counts
from .finite_exact import MAX_DOCUMENTS, exact_finite_loss
from .masking import MaskedBatch, mask_documents
from .montecarlo import MCEstimate, doc_losses, mc_attention_loss

__all__ = [
    "Documents",
    "MaskedBatch",
    "sample_documents",
    "mask_documents",
    "token_counts",
    "check_sample_size",
    "PAD",
    "MCEstimate",
    "mc_attention_loss",
    "doc_losses",
    "exact_finite_loss",
    "MAX_DOCUMENTS",
]
