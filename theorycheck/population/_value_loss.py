"""Exact uniform-attention squared MLM loss and its gradient (SPEC §4.0, §4.2).

With frozen uniform attention, one-hot embeddings and ``W^dec = I`` every output column is
``W m_S + b`` in the limit N -> inf, and the target ``x ~ p_S`` is independent of ``m_S``:

.. math::
    L(W, b) = E_S E_{x \\sim p_S} \\| W m_S + b - e_x \\|^2 + \\lambda \\|W\\|_F^2
            = tr(W \\Sigma W^T) - 2 tr(W C^T) + 2 b^T W \\mu + \\|b\\|^2 - 2 u^T b + 1
              + \\lambda \\|W\\|_F^2,

``mu = E[m_S] = a u + c``, ``c = r u + q e_0``. Because ``E[p p^T] = d B + s J``
(``d = s_same - s_diff``, ``s = s_diff``), every term only needs the topic-block column sums
``Y = W [1_1 ... 1_T]`` (shape ``(V1, T)``) and the [MASK] column ``W e_0``:

.. math::
    tr(W E[pp^T] W^T) = d \\|Y\\|_F^2 + s \\|Y 1_T\\|^2, \\qquad
    tr(W E[pp^T]) = d \\sum_t 1_t^T Y_{:,t} + s\\, 1_W^T Y 1_T.

So the loss costs one pass over ``W`` (a Numba kernel, parallel over rows) plus ``O(V1 T)``
work; no ``V1 x V1`` moment matrix is formed. ``_value_loss_ref`` is the plain dense-moment
formula kept as the independent numpy reference.
"""

from __future__ import annotations

import numba
import numpy as np

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_real
from ..models import Masking, TopicModel, check_models, is_general
from ._general import general_value_loss, general_value_loss_grad
from ._moments import moments

__all__ = ["value_loss", "value_loss_grad"]


#: Below this many entries of W the serial kernel is used (thread start-up dominates).
PARALLEL_MIN_ENTRIES = 1_000_000

#: ``V1 x V1`` arrays :func:`value_loss_grad` allocates (``W Sigma``, ``C``, ``dW`` and a temporary).
_VALUE_GRAD_ARRAYS = 4


def _block_sums_impl(W, T, v):
    """``Y[i, t] = sum_{j in topic t} W[i, j]`` and ``||W||_F^2`` in one pass over W."""
    V1 = W.shape[0]
    Y = np.zeros((V1, T))
    sq = np.zeros(V1)
    for i in numba.prange(V1):
        acc = W[i, 0] * W[i, 0]
        for t in range(T):
            s = 0.0
            base = 1 + t * v
            for k in range(v):
                w = W[i, base + k]
                s += w
                acc += w * w
            Y[i, t] = s
        sq[i] = acc
    return Y, sq.sum()


_block_sums_par = numba.njit(cache=True, parallel=True, fastmath=False)(_block_sums_impl)
_block_sums_ser = numba.njit(cache=True, parallel=False, fastmath=False)(_block_sums_impl)


def _block_sums_nb(W, T, v):
    """Dispatch to the serial or the row-parallel Numba kernel by the size of ``W``."""
    if W.size >= PARALLEL_MIN_ENTRIES:
        return _block_sums_par(W, T, v)
    return _block_sums_ser(W, T, v)


def _validate(W, tm, mk, b, reg):
    check_models(tm, mk)
    mk.require_masked_positions("value_loss")
    W = check_array("W", W, shape=(tm.V1, tm.V1))
    b = None if b is None else check_array("b", b, shape=(tm.V1,))
    reg = check_real("reg", reg, low=0.0)
    return W, b, reg


def _loss_from_sums(Y, sqF, W0, b, tm, mk, reg):
    """Loss from the block sums ``Y``, ``||W||_F^2`` and the [MASK] column ``W0`` (all O(V1 T))."""
    a, r, q = mk.a, mk.r, mk.q
    s_same, s_diff = tm.pair_moments()
    d = s_same - s_diff
    n = tm.n_words
    y = Y.sum(axis=1)  # W 1_W
    Wu = y / n
    Wc = r * Wu + q * W0
    topics = tm.token_topics()
    diag = float(Y[np.arange(1, tm.V1), topics[1:]].sum())  # sum_t 1_t^T W 1_t
    tr_WSW = a * a * (d * float(np.sum(Y * Y)) + s_diff * float(y @ y)) + 2 * a * float(Wu @ Wc) + float(Wc @ Wc)
    tr_WC = a * (d * diag + s_diff * float(y[1:].sum())) + float(Wc[1:].sum()) / n
    loss = tr_WSW - 2.0 * tr_WC + 1.0 + reg * sqF
    if b is not None:
        mu_W = a * Wu + Wc  # W mu
        loss += 2.0 * float(b @ mu_W) + float(b @ b) - 2.0 * float(b[1:].sum()) / n
    return loss


def value_loss(W, tm: TopicModel, mk: Masking, b=None, reg: float = 0.0) -> float:
    """Exact population squared MLM loss under uniform attention (SPEC §4.0).

    Parameters
    ----------
    W : array_like, shape (V1, V1)
        Effective linear map (``W^V`` with one-hot embeddings and identity decoder).
    tm, mk : TopicModel, Masking
        ``mk.p_m`` must be > 0.
    b : array_like, shape (V1,), optional
        Decoder bias (absent if ``None``).
    reg : float
        L2 coefficient ``lambda >= 0`` on ``||W||_F^2``.

    Returns
    -------
    float
        ``L(W, b) = E_S E_{x~p_S} ||W m_S + b - e_x||^2 + reg ||W||_F^2``; minimum
        ``1 - E||p||^2`` at ``reg = 0``. Cost: one pass over W.
    """
    if is_general(tm):  # SPEC §11.2
        return general_value_loss(W, tm, mk, b=b, reg=reg)
    W, b, reg = _validate(W, tm, mk, b, reg)
    Y, sqF = _block_sums_nb(W, tm.T, tm.v)
    return _loss_from_sums(Y, sqF, W[:, 0].copy(), b, tm, mk, reg)


def value_loss_grad(W, tm: TopicModel, mk: Masking, b=None, reg: float = 0.0, *, max_bytes=None):
    """Loss and gradient ``(L, dL/dW, dL/db)`` of :func:`value_loss` (SPEC §4.0, §4.2).

    .. math::
        \\partial_W L = 2 W \\Sigma - 2 C + 2 b \\mu^T + 2 \\lambda W, \\qquad
        \\partial_b L = 2 (W \\mu + b - u),

    evaluated through the block structure of ``Sigma`` and ``C`` in ``O(V1^2)`` without forming
    them. ``dL/db`` is returned even when ``b is None`` (then at ``b = 0``). The dense gradient
    arrays are checked against ``max_bytes`` first (default ``$THEORYCHECK_MAX_BYTES`` or half the
    available memory).
    """
    if is_general(tm):  # SPEC §11.2
        return general_value_loss_grad(W, tm, mk, b=b, reg=reg, max_bytes=max_bytes)
    W, b, reg = _validate(W, tm, mk, b, reg)
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    check_alloc("value_loss_grad: dense gradient", (_VALUE_GRAD_ARRAYS, tm.V1, tm.V1), max_bytes=max_bytes,
                alternative="value_loss (no gradient, one pass over W) or optimal_value_matrix(method='closed-form') "
                "(the optimum as a BlockValueMatrix)")  # fmt: skip
    Y, sqF = _block_sums_nb(W, tm.T, tm.v)
    W0 = W[:, 0].copy()
    loss = _loss_from_sums(Y, sqF, W0, b, tm, mk, reg)
    a, r, q = mk.a, mk.r, mk.q
    s_same, s_diff = tm.pair_moments()
    d = s_same - s_diff
    n, v, V1 = tm.n_words, tm.v, tm.V1
    y = Y.sum(axis=1)
    Wu = y / n
    Wc = r * Wu + q * W0
    bb = np.zeros(V1) if b is None else b
    # c = r u + q e_0 ; mu = (a + r) u + q e_0
    # W Sigma = a^2 (d Y Ind^T + s y 1_W^T) + a (Wu c^T + Wc u^T) + Wc c^T
    G = np.empty((V1, V1))
    word_cols = (
        a * a * (d * np.repeat(Y, v, axis=1) + s_diff * y[:, None])
        + (a * r / n) * Wu[:, None]
        + (a / n) * Wc[:, None]
        + (r / n) * Wc[:, None]
    )
    G[:, 1:] = word_cols
    G[:, 0] = a * q * Wu + q * Wc
    # C = a E[pp^T] + u c^T  (row 0 is zero)
    Cm = np.zeros((V1, V1))
    topics = tm.token_topics()[1:]
    Cm[1:, 1:] = a * np.where(topics[:, None] == topics[None, :], s_same, s_diff) + r / (n * n)
    Cm[1:, 0] = q / n
    mu = np.full(V1, (a + r) / n)
    mu[0] = q
    dW = 2.0 * G - 2.0 * Cm + 2.0 * np.outer(bb, mu) + 2.0 * reg * W
    u = np.full(V1, 1.0 / n)
    u[0] = 0.0
    db = 2.0 * (W @ mu + bb - u)
    return loss, dW, db


def _value_loss_ref(W, tm: TopicModel, mk: Masking, b=None, reg: float = 0.0) -> float:
    """Numpy reference: ``tr(W Sigma W^T) - 2 tr(W C^T) + ... `` with dense exact moments."""
    Sigma, C = moments(tm, mk)
    W = np.asarray(W, dtype=float)
    loss = np.trace(W @ Sigma @ W.T) - 2 * np.sum(W * C) + 1.0 + reg * np.sum(W * W)
    if b is not None:
        b = np.asarray(b, dtype=float)
        u = np.full(tm.V1, 1.0 / tm.n_words)
        u[0] = 0.0
        mu = mk.a * u + mk.r * u
        mu[0] += mk.q
        loss += 2 * b @ W @ mu + b @ b - 2 * u @ b
    return float(loss)
