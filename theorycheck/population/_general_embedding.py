"""Exact embedding-model loss for any topic-word matrix (SPEC §11.2, §11.5; the setting of SPEC §4.1).

Same model and arguments as :func:`theorycheck.population.embedding_loss`: uniform attention,
``W^V = I``, squared loss, N -> inf; the effective map is ``M = (W^E)^T W^E`` (tied) or
``W^dec W^E`` (untied) and the loss is ``value_loss(M, g, mk, b)`` (the general one,
:func:`~theorycheck.population._general.general_value_loss`) plus
``reg (||W^E||_F^2 [+ ||W^dec||_F^2])``. The gradient is the chain rule on ``D = dL/dM``:
tied ``W^E (D + D^T) + 2 reg W^E``; untied ``(W^dec)^T D + 2 reg W^E`` and ``D (W^E)^T + 2 reg W^dec``.
"""

from __future__ import annotations

import numpy as np

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_real
from ._general import _check_mk, general_value_loss, general_value_loss_grad

__all__ = ["general_embedding_loss", "general_embedding_loss_grad"]


def _validate(W_E, g, mk, W_dec, b, tied, reg, max_bytes, n_dense):
    _check_mk(mk, "embedding_loss")
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    if not isinstance(tied, bool | np.bool_):
        raise TypeError(f"tied must be a bool, got {tied!r}")
    W_E = check_array("W_E", W_E, ndim=2)
    if W_E.shape[1] != g.V1 or W_E.shape[0] < 1:
        raise ValueError(f"W_E must have shape (d, V1) = (d >= 1, {g.V1}), got {W_E.shape}")
    d = W_E.shape[0]
    if tied and W_dec is not None:
        raise ValueError("W_dec must be None when tied=True (the decoder is W_E^T); pass tied=False to use W_dec")
    if not tied:
        if W_dec is None:
            raise ValueError(f"W_dec (shape (V1, d) = ({g.V1}, {d})) is required when tied=False")
        W_dec = check_array("W_dec", W_dec, shape=(g.V1, d))
    b = None if b is None else check_array("b", b, shape=(g.V1,))
    reg = check_real("reg", reg, low=0.0)
    check_alloc("embedding_loss: effective map M and gradients", (n_dense, g.V1, g.V1), max_bytes=max_bytes,
                alternative="optimal_embedding_gram(method='closed-form') for the optimum")  # fmt: skip
    return W_E, W_dec, b, bool(tied), reg


def _penalty(W_E, W_dec, tied) -> float:
    return float(np.sum(W_E * W_E)) + (0.0 if tied else float(np.sum(W_dec * W_dec)))


def general_embedding_loss(W_E, g, mk, *, W_dec=None, b=None, tied=True, reg=0.0, max_bytes=None) -> float:
    """``E ||M m + b - e_x||^2 + reg * penalty`` for a general model (module docstring, SPEC §11.5)."""
    W_E, W_dec, b, tied, reg = _validate(W_E, g, mk, W_dec, b, tied, reg, max_bytes, 1)
    M = W_E.T @ W_E if tied else W_dec @ W_E
    return general_value_loss(M, g, mk, b=b) + reg * _penalty(W_E, W_dec, tied)


def general_embedding_loss_grad(W_E, g, mk, *, W_dec=None, b=None, tied=True, reg=0.0, max_bytes=None):
    """Loss and gradients of :func:`general_embedding_loss` as an ``EmbeddingLossGrad``."""
    from ._embedding_loss import EmbeddingLossGrad

    W_E, W_dec, b, tied, reg = _validate(W_E, g, mk, W_dec, b, tied, reg, max_bytes, 3)
    M = W_E.T @ W_E if tied else W_dec @ W_E
    loss, D, db = general_value_loss_grad(M, g, mk, b=b, max_bytes=max_bytes)
    if tied:
        dW_E, dW_dec = W_E @ (D + D.T) + 2.0 * reg * W_E, None
    else:
        dW_E, dW_dec = W_dec.T @ D + 2.0 * reg * W_E, D @ W_E.T + 2.0 * reg * W_dec
    return EmbeddingLossGrad(loss + reg * _penalty(W_E, W_dec, tied), dW_E, dW_dec, db)
