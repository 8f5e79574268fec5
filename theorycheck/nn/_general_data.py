"""Exact population batch of a :class:`~theorycheck.general_model.GeneralTopicModel` (SPEC §11.1, §11.4).

The population contexts of :mod:`theorycheck.population._contexts` with ``p_S`` replaced by
``p_theta = phi^T theta`` (``theta = 1_S / tau``) and ``u = 1_W / n_words``: every ``tau``-subset
``S`` is one context with key density ``m_theta = a p_theta + r u + q e_0`` (``p_theta`` with
``mask_keys``), and query groups

- query [MASK] with target weights ``(1 - p_c - p_r) p_theta``,
- query word ``w`` with target weights ``(p_r / n) p_theta + p_c p_theta(w) e_w``,

all divided by ``C(T, tau)``. The loss of a position-free one-layer model summed over these groups
is its exact population MLM loss (for uniform attention: ``tr(W Sigma W^T) - 2 tr(W C^T) + 1`` for
the squared loss, with ``(Sigma, C) = moments(g, mk)``, SPEC §11.2). Uniform-tau law only (the
Dirichlet law has a continuum of mixtures).
"""

from __future__ import annotations

import numpy as np

from .._memory import check_alloc
from ..config import Masking

__all__ = ["general_population_batch"]


def general_population_batch(g, mk: Masking, *, mask_keys: bool = False):
    """The exact population of ``g`` as a weighted :class:`theorycheck.nn.batches.CountBatch` (module docstring)."""
    from ..population import masked_density, topic_density, topic_sets
    from .batches import CountBatch

    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    if g.prior != "uniform-tau":
        raise ValueError(
            "source='population' needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)"
        )
    mk.require_masked_positions("population_batch")
    sets = topic_sets(g)
    n, V1, nw = len(sets), g.V1, g.n_words
    check_alloc("population contexts (topic sets x V1 x V1 targets)", (n, V1, V1))
    P = np.stack([topic_density(g, S) for S in sets])
    K = P.copy() if mask_keys else np.stack([masked_density(g, mk, S) for S in sets])
    Y = np.zeros((n, V1, V1))
    Y[:, 0, :] = mk.p_mask * P
    Y[:, 1:, :] = (mk.p_r / nw) * P[:, None, :]
    idx = np.arange(1, V1)
    Y[:, idx, idx] += mk.p_c * P[:, 1:]
    Y = Y.reshape(n * V1, V1) / n
    ctx = np.repeat(np.arange(n), V1)
    qtok = np.tile(np.arange(V1), n)
    w = Y.sum(axis=1)
    keep = w > 0
    return CountBatch(K=K, ctx=ctx[keep], qtok=qtok[keep], weight=w[keep], Y=np.ascontiguousarray(Y[keep]))
