"""Exact population batch of a :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.1, §11.4).

A thin name for :func:`theorycheck.nn.batches.population_batch`, whose contexts
(:func:`theorycheck.population.population_contexts`) dispatch on the model: for a general model
``p_S`` becomes ``p_theta = phi^T theta`` (``theta = 1_S / tau``) and ``u = 1_W / n_words``, so every
``tau``-subset ``S`` is one context with key density ``m_theta = a p_theta + r u + q e_0``
(``p_theta`` with ``mask_keys``), and query groups

- query [MASK] with target weights ``(1 - p_c - p_r) p_theta``,
- query word ``w`` with target weights ``(p_r / n) p_theta + p_c p_theta(w) e_w``,

all divided by ``C(T, tau)``. The loss of a position-free one-layer model summed over these groups
is its exact population MLM loss (for uniform attention: ``tr(W Sigma W^T) - 2 tr(W C^T) + 1`` for
the squared loss, with ``(Sigma, C) = moments(g, mk)``, SPEC §11.2). Uniform-tau law only (the
Dirichlet law has a continuum of mixtures).
"""

from __future__ import annotations

from ..models import Masking

__all__ = ["general_population_batch"]


def general_population_batch(g, mk: Masking, *, mask_keys: bool = False):
    """The exact population of the general model ``g`` as a weighted :class:`theorycheck.nn.batches.CountBatch`
    (module docstring; :func:`theorycheck.nn.batches.population_batch` of ``g``)."""
    from .batches import population_batch

    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    if g.prior != "uniform-tau":
        raise ValueError(
            "source='population' needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)"
        )
    return population_batch(g, mk, mask_keys=mask_keys)
