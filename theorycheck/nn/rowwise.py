"""Row-wise maps around the attention layers (SPEC §3.1, §2.2): the post-LN layer norm, the
decoder ``o = W^dec y + b^dec`` and the loss heads, each a pure forward/backward pair on rows
(one row per position or query group). The attention layers are in :mod:`theorycheck.nn.layers`."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, softmax

from ._dense_kernels import layer_norm_rows, layer_norm_rows_backward

__all__ = [
    "LN_EPS",
    "layer_norm_forward",
    "layer_norm_backward",
    "layer_norm_ref",
    "layer_norm_backward_ref",
    "decoder_forward",
    "decoder_backward",
    "squared_loss",
    "ce_loss",
    "loss_head",
]

#: Layer-norm epsilon (BERT's value).
LN_EPS = 1e-5


# ---------------------------------------------------------------------------- layer norm
def layer_norm_forward(R):
    """Post-LN without gain/bias: ``y = (r - mean r) / sqrt(var r + eps)`` per row. Returns ``(y, inv)``.

    One fused Numba pass per row (:func:`~theorycheck.nn._dense_kernels.layer_norm_rows`); the numpy
    reference is :func:`layer_norm_ref`."""
    return layer_norm_rows(R, LN_EPS)


def layer_norm_backward(Yn, inv, dY):
    """``dL/dr = inv (dy - mean(dy) - y mean(dy * y))`` per row (Numba kernel; reference
    :func:`layer_norm_backward_ref`)."""
    return layer_norm_rows_backward(Yn, inv, dY)


def layer_norm_ref(R):
    """Pure numpy reference of :func:`layer_norm_forward`."""
    mu = R.mean(axis=-1, keepdims=True)
    xc = R - mu
    inv = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + LN_EPS)
    return xc * inv, inv


def layer_norm_backward_ref(Yn, inv, dY):
    """Pure numpy reference of :func:`layer_norm_backward`."""
    return inv * (dY - dY.mean(axis=-1, keepdims=True) - Yn * np.mean(dY * Yn, axis=-1, keepdims=True))


# ---------------------------------------------------------------------------- decoder
def decoder_forward(Y, W_dec, b):
    """Outputs ``o = W^dec y + b^dec`` per row (``W_dec`` (V1, d), or ``None`` for the identity)."""
    return Y + b if W_dec is None else Y @ W_dec.T + b


def decoder_backward(dO, Y, W_dec, tied: bool = False):
    """``(dL/dY, dW, db_dec)``: ``dO W^dec``, the matrix gradient and the column sums of ``dO``.

    The matrix gradient is ``dL/dW^dec = dO^T Y`` (``None`` for the identity decoder); with
    ``tied=True`` (``W^dec = (W^E)^T``) it is returned for ``W^E`` instead: ``Y^T dO`` (``d x V1``).
    """
    db = dO.sum(axis=0)
    if W_dec is None:
        return dO, None, db
    return dO @ W_dec, (Y.T @ dO if tied else dO.T @ Y), db


# ---------------------------------------------------------------------------- loss heads
def squared_loss(O, Y, weight):
    """``sum_e sum_x Y[e, x] ||o_e - e_x||^2`` with ``weight = Y.sum(1)`` (SPEC §2.2) and ``dL/dO``."""
    loss = float(np.sum(weight * (np.sum(O * O, axis=1) + 1.0)) - 2.0 * np.sum(O * Y))
    return loss, 2.0 * weight[:, None] * O - 2.0 * Y


def ce_loss(O, Y, weight):
    """``sum_e sum_x Y[e, x] (-log softmax(o_e)_x)`` (SPEC §2.2) and ``dL/dO = w softmax(o) - Y``.

    One pass of exponentials serves both: with ``m = max_x o_x`` and ``s = sum_x e^{o_x - m}``,
    ``logsumexp(o) = m + log s`` and ``softmax(o) = e^{o - m} / s`` (the operations of
    ``scipy.special.softmax``). Rows with a non-finite maximum go through scipy."""
    m = O.max(axis=1, keepdims=True)
    if not np.all(np.isfinite(m)):
        loss = float(np.sum(weight * logsumexp(O, axis=1)) - np.sum(O * Y))
        return loss, weight[:, None] * softmax(O, axis=1) - Y
    ex = np.exp(O - m)
    s = ex.sum(axis=1, keepdims=True)
    lse = np.log(s[:, 0]) + m[:, 0]
    loss = float(np.sum(weight * lse) - np.sum(O * Y))
    ex /= s
    ex *= weight[:, None]
    ex -= Y
    return loss, ex


def loss_head(O, Y, weight, kind: str):
    """:func:`squared_loss` (``kind="squared"``) or :func:`ce_loss` (``"ce"``)."""
    return squared_loss(O, Y, weight) if kind == "squared" else ce_loss(O, Y, weight)
