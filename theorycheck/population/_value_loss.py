"""Exact uniform-attention squared MLM loss and its gradient (SPEC §4.0, §4.2, §11.2, §11.5).

With frozen uniform attention, one-hot embeddings and ``W^dec = I`` every output column is
``W m + b`` in the limit N -> inf, and the target ``x ~ p`` is independent of ``m``:

.. math::
    L(W, b) = E E_{x \\sim p} \\| W m + b - e_x \\|^2 + \\lambda \\|W\\|_F^2
            = tr(W \\Sigma W^T) - 2 tr(W C^T) + 2 b^T W E[m] + \\|b\\|^2 - 2 E[p]^T b + 1
              + \\lambda \\|W\\|_F^2.

Two routes, one dispatcher per formula (``functools.singledispatch`` on the model):

- any :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.5): from the rank-``rho`` factors
  ``Sigma = X X^T``, ``C = Y X^T`` (:func:`~theorycheck.population._moments.stage1_factors`),
  ``L = ||W X||_F^2 - 2 <W X, Y> + 1 + 2 b^T W E[m] + ||b||^2 - 2 b^T E[p] + lambda ||W||_F^2``
  in ``O(V1^2 T)``;
- the paper's :class:`~theorycheck.models.TopicModel` (SPEC §4.0, §4.2): ``E[p] = u``,
  ``E[m] = a u + c``, ``c = r u + q e_0``, and ``E[p p^T] = d B + s J``
  (``d = s_same - s_diff``, ``s = s_diff``), so every term only needs the topic-block column sums
  ``Y = W [1_1 ... 1_T]`` (shape ``(V1, T)``) and the [MASK] column ``W e_0``:

  .. math::
      tr(W E[pp^T] W^T) = d \\|Y\\|_F^2 + s \\|Y 1_T\\|^2, \\qquad
      tr(W E[pp^T]) = d \\sum_t 1_t^T Y_{:,t} + s\\, 1_W^T Y 1_T,

  one pass over ``W`` (a Numba kernel, parallel over rows) plus ``O(V1 T)`` work.

No ``V1 x V1`` moment matrix is formed. ``_value_loss_ref`` (paper's model) and
``_value_loss_dense_ref`` (any model) are the plain dense-moment formulas kept as independent
references.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numpy.typing import ArrayLike

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_real
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from ._moments import _moments, moments, stage1_factors

__all__ = ["value_loss", "value_loss_grad", "min_value_loss"]


#: Below this many entries of W the serial kernel is used (thread start-up dominates).
PARALLEL_MIN_ENTRIES = 1_000_000

#: ``V1 x V1`` arrays :func:`value_loss_grad` allocates on the paper's model (``W Sigma``, ``C``, ``dW`` and a
#: temporary).
_VALUE_GRAD_ARRAYS = 4
#: ``V1 x V1`` arrays of the generic route (``dW`` and a temporary).
_GENERIC_GRAD_ARRAYS = 2


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
    """The arguments of :func:`value_loss` besides the model types (checked by the caller)."""
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


# ----------------------------------------------------------------------------- generic route (SPEC §11.5)
def _loss_from_products(WX, WEm, W_sq, F, b, reg) -> float:
    """The generic loss (module docstring) from ``W X``, ``W E[m]`` and ``||W||_F^2``."""
    loss = float(np.sum(WX * WX)) - 2.0 * float(np.sum(WX * F.Y)) + 1.0 + reg * W_sq
    if b is not None:
        loss += 2.0 * float(b @ WEm) + float(b @ b) - 2.0 * float(b @ F.Ep)
    return loss


@functools.singledispatch
def _value_loss(tm: GeneralTopicModel, W, mk: Masking, b, reg) -> float:
    """Generic route (SPEC §11.2, §11.5): O(V1^2 T) from the rank-``rho`` factors."""
    F = stage1_factors(tm, mk)
    return _loss_from_products(W @ F.X, W @ F.Em, float(np.sum(W * W)), F, b, reg)


@functools.singledispatch
def _value_loss_grad(tm: GeneralTopicModel, W, mk: Masking, b, reg, max_bytes):
    """Generic route (SPEC §11.5): ``dL/dW = 2 (W X - Y) X^T + 2 b E[m]^T + 2 reg W``,
    ``dL/db = 2 (W E[m] + b - E[p])``."""
    check_alloc("value_loss_grad: dense gradient", (_GENERIC_GRAD_ARRAYS, tm.V1, tm.V1), max_bytes=max_bytes,
                alternative="value_loss (no gradient) or optimal_value_matrix(method='closed-form')")  # fmt: skip
    F = stage1_factors(tm, mk)
    WX, WEm = W @ F.X, W @ F.Em
    loss = _loss_from_products(WX, WEm, float(np.sum(W * W)), F, b, reg)
    bb = np.zeros(tm.V1) if b is None else b
    dW = 2.0 * (WX - F.Y) @ F.X.T + 2.0 * np.outer(bb, F.Em) + 2.0 * reg * W
    return loss, dW, 2.0 * (WEm + bb - F.Ep)


@functools.singledispatch
def _grad_arrays(tm: GeneralTopicModel) -> int:
    """``V1 x V1`` arrays :func:`_value_loss_grad` allocates (the generic route)."""
    return _GENERIC_GRAD_ARRAYS


@_grad_arrays.register
def _(tm: TopicModel) -> int:
    return _VALUE_GRAD_ARRAYS


# ----------------------------------------------------------------------------- paper's model (SPEC §4.0, §4.2)
@_value_loss.register
def _(tm: TopicModel, W, mk: Masking, b, reg) -> float:
    """Paper's model: one pass over ``W`` (block sums, Numba) plus ``O(V1 T)`` work."""
    Y, sqF = _block_sums_nb(W, tm.T, tm.v)
    return _loss_from_sums(Y, sqF, W[:, 0].copy(), b, tm, mk, reg)


@_value_loss_grad.register
def _(tm: TopicModel, W, mk: Masking, b, reg, max_bytes):
    """Paper's model: the gradient through the block structure of ``Sigma`` and ``C`` in ``O(V1^2)``."""
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


# ----------------------------------------------------------------------------- public
def value_loss(W: ArrayLike, tm: GeneralTopicModel, mk: Masking, b: ArrayLike | None = None, reg: float = 0.0) -> float:
    """Exact population squared MLM loss under uniform attention (SPEC §4.0, §11.2).

    Parameters
    ----------
    W : array_like, shape (V1, V1)
        Effective linear map (``W^V`` with one-hot embeddings and identity decoder).
    tm, mk : GeneralTopicModel (or the paper's TopicModel), Masking
        ``mk.p_m`` must be > 0.
    b : array_like, shape (V1,), optional
        Decoder bias (absent if ``None``).
    reg : float
        L2 coefficient ``lambda >= 0`` on ``||W||_F^2``.

    Returns
    -------
    L : float
        ``L(W, b) = E E_{x~p} ||W m + b - e_x||^2 + reg ||W||_F^2``; minimum ``min_value_loss``
        (the paper's model: ``1 - E||p||^2``) at ``reg = 0``. Cost: one pass over W (the paper's
        model), ``O(V1^2 T)`` (any model).

    Raises
    ------
    ValueError
        If ``mk.p_m = 0``, ``W`` or ``b`` has the wrong shape or a non-finite entry, or ``reg < 0``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    value_loss_grad : The loss with its gradients in ``W`` and ``b``.
    moments : ``Sigma`` and ``C``, with ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1`` (no bias).
    theorycheck.solvers.optimal_value_matrix : The certified minimiser.
    attention_loss : The same loss for any attention scores (uniform attention is ``S = 0``).

    Notes
    -----
    With uniform attention over a masked document of infinite length the attention output is the
    masked density ``m_S`` (:func:`masked_density`), so the loss is quadratic in ``(W, b)``; the
    expectation is over the document law and the target word ``x ~ p_S``.

    References
    ----------
    SPEC §4.0 (the reduction under uniform attention), §4.2 (stage 1), §11.2 (any topic-word
    matrix); Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023,
    arXiv:2303.04245, Theorem 2.

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, value_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> value_loss(np.zeros((tm.V1, tm.V1)), tm, mk)  # W = 0 predicts nothing: E||e_x||^2 = 1
    1.0

    The stage-1 matrix attains ``1 - 1/(tau v)``, on the closed-form route and on the generic one:

    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> round(value_loss(W, tm, mk), 12), round(value_loss(W, GeneralTopicModel.from_topic_model(tm), mk), 12)
    (0.75, 0.75)
    >>> round(value_loss(W, tm, mk, reg=0.1) - 0.1 * float((W**2).sum()), 12)  # reg adds reg ||W||_F^2
    0.75
    """
    check_models(tm, mk, general=True)
    W, b, reg = _validate(W, tm, mk, b, reg)
    return _value_loss(tm, W, mk, b, reg)


def value_loss_grad(
    W: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    reg: float = 0.0,
    *,
    max_bytes: int | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss and gradient ``(L, dL/dW, dL/db)`` of :func:`value_loss` (SPEC §4.0, §4.2, §11.5).

    .. math::
        \\partial_W L = 2 W \\Sigma - 2 C + 2 b E[m]^T + 2 \\lambda W, \\qquad
        \\partial_b L = 2 (W E[m] + b - E[p]),

    evaluated without forming ``Sigma`` and ``C`` (block structure on the paper's model, ``O(V1^2)``;
    rank-T factors on any model, ``O(V1^2 T)``). ``dL/db`` is returned even when ``b is None`` (then
    at ``b = 0``). The dense gradient arrays are checked against ``max_bytes`` first (default
    ``$THEORYCHECK_MAX_BYTES`` or half the available memory).

    Parameters
    ----------
    W : array_like, shape (V1, V1)
        Effective linear map, finite.
    tm : GeneralTopicModel or TopicModel
        The topic model, any prior.
    mk : Masking
        ``mk.p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias (``None``: no bias).
    reg : float, reg >= 0
        L2 coefficient ``lambda`` on ``||W||_F^2``.
    max_bytes : int, optional
        Memory limit of the dense gradient arrays.

    Returns
    -------
    L : float
        :func:`value_loss` at ``(W, b)``.
    dW : ndarray, shape (V1, V1)
        ``dL/dW`` (formula above).
    db : ndarray, shape (V1,)
        ``dL/db`` (at ``b = 0`` when ``b`` is ``None``).

    Raises
    ------
    ValueError
        If ``mk.p_m = 0``, ``W`` or ``b`` has the wrong shape or a non-finite entry, ``reg < 0``, or the
        gradient arrays exceed ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    value_loss : The loss alone.
    moments : ``Sigma`` and ``C`` of the formula.
    embedding_loss_grad : The chain rule of this gradient through the embeddings.

    References
    ----------
    SPEC §4.0 (the quadratic loss), §4.2 (stage 1), §11.5 (the rank-T factors of a general model).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, value_loss, value_loss_grad
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()

    The gradient vanishes at the stage-1 optimum:

    >>> L, dW, db = value_loss_grad(alpha_beta_value_matrix(tm, mk), tm, mk)
    >>> round(L, 12), float(np.abs(dW).max()) < 1e-15, float(np.abs(db).max()) < 1e-15
    (0.75, True, True)

    and matches a central finite difference elsewhere:

    >>> rng = np.random.default_rng(0)
    >>> W, D = rng.normal(size=(2, tm.V1, tm.V1))
    >>> L, dW, db = value_loss_grad(W, tm, mk)
    >>> h = 1e-6
    >>> fd = (value_loss(W + h * D, tm, mk) - value_loss(W - h * D, tm, mk)) / (2 * h)
    >>> abs(fd - float((dW * D).sum())) < 1e-7
    True
    """
    check_models(tm, mk, general=True)
    W, b, reg = _validate(W, tm, mk, b, reg)
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    return _value_loss_grad(tm, W, mk, b, reg, max_bytes)


def min_value_loss(g: GeneralTopicModel, mk: Masking) -> float:
    """Minimum of the unregularised loss for any model (SPEC §11.3, §11.5): ``1 - tr(Phi^T M2 Phi)`` for
    ``a > 0``, else ``1 - ||E[p]||^2`` (constant context ``m = c``). No validation (internal callers)."""
    mu, M2 = g.theta_moments()
    if mk.a > 0.0:
        return 1.0 - float(np.sum(M2 * (g.phi @ g.phi.T)))
    Ep = g.phi.T @ mu
    return 1.0 - float(Ep @ Ep)


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


def _value_loss_dense_ref(W, g: GeneralTopicModel, mk: Masking, b=None, reg: float = 0.0) -> float:
    """Dense reference for any model from the moment matrices: ``tr(W Sigma W^T) - 2 <W, C> + ...``."""
    Sigma, C = _moments.dispatch(GeneralTopicModel)(g, mk, "closed-form", None)  # the generic route
    W = np.asarray(W, dtype=float)
    loss = float(np.sum((W @ Sigma) * W) - 2.0 * np.sum(W * C) + 1.0 + reg * np.sum(W * W))
    if b is not None:
        F = stage1_factors(g, mk)
        loss += float(2.0 * b @ W @ F.Em + b @ b - 2.0 * b @ F.Ep)
    return loss
