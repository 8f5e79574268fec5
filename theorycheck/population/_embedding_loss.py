"""Exact population loss of the embedding model (Theorem 1 setting) and its gradient.

Setting (SPEC §3.1 variant E, §4.0, §4.1): attention frozen uniform, ``W^V = I``,
one layer, squared loss, N -> inf. Every output column is ``M m_S + b`` with the effective
linear map

.. math::
    M = W^{dec} W^E \\quad\\text{(untied decoder)}, \\qquad
    M = (W^E)^T W^E = G \\quad\\text{(tied decoder, } W^{dec} = (W^E)^T),

so the loss is exactly ``value_loss(M, tm, mk, b)`` plus the L2 term, for any topic model: the
model-specific work is the value loss of ``M``, dispatched on the model (the paper's model: block
sums, SPEC §4.0; any :class:`~theorycheck.models.GeneralTopicModel`: the rank-T factors, SPEC §11.5).
The gradient is the chain rule on top of :func:`theorycheck.population.value_loss_grad` (``D = dL/dM``):

.. math::
    \\text{tied: } \\partial_{W^E} L = W^E (D + D^T) + 2\\lambda W^E, \\qquad
    \\text{untied: } \\partial_{W^E} L = (W^{dec})^T D + 2\\lambda W^E,\\;
    \\partial_{W^{dec}} L = D (W^E)^T + 2\\lambda W^{dec}.

The regulariser is ``reg * ||W^E||_F^2`` (tied) or ``reg * (||W^E||_F^2 + ||W^dec||_F^2)``
(untied), on the trained matrices (DESIGN.md conventions). Cost: one ``V1 x V1`` product
``M`` (``O(V1^2 d)``) plus the evaluation of ``value_loss_grad`` (``O(V1^2)`` block sums on the
paper's model, ``O(V1^2 T)`` otherwise).
``_embedding_loss_ref`` is the independent dense-moment reference.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._memory import check_alloc, resolve_max_bytes
from .._threads import small_problem
from .._validate import check_array, check_real
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from ._moments import moments
from ._value_loss import _grad_arrays, _value_loss, _value_loss_grad

__all__ = ["embedding_loss", "embedding_loss_grad", "EmbeddingLossGrad", "effective_map"]

#: Below this V1 the block-sum kernel runs on one Numba thread: for small problems launching the
#: parallel region costs more than the work.
SERIAL_BELOW_V1 = 512

_ALTERNATIVE = (
    "optimal_embedding_gram(method='closed-form') for the optimum, or value_loss on a structured "
    "effective map; the embedding loss needs the dense V1 x V1 map M"
)


def _kernel_threads(V1: int):
    """Serial Numba kernels below ``SERIAL_BELOW_V1`` (thread start-up outweighs the work)."""
    return small_problem(V1, SERIAL_BELOW_V1, numba=True)


class EmbeddingLossGrad(NamedTuple):
    """Loss and gradients of the embedding model.

    Parameters
    ----------
    loss : float
        :func:`embedding_loss` at the point.
    dW_E : ndarray, shape (d, V1)
        ``dL/dW^E``.
    dW_dec : ndarray, shape (V1, d), or None
        ``dL/dW^dec``; ``None`` when the decoder is tied.
    db : ndarray, shape (V1,)
        Gradient w.r.t. the decoder bias (at ``b = 0`` when no bias is passed, like
        :func:`~theorycheck.population.value_loss_grad`).

    See Also
    --------
    embedding_loss_grad : Returns it.
    AttentionLossGrad : The gradient tuple of the attention model.
    value_loss_grad : The gradient in the effective map.

    References
    ----------
    SPEC §4.1 (the embedding model of Theorem 1).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import embedding_loss_grad
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> g = embedding_loss_grad(np.eye(tm.V1)[:3], tm, Masking())
    >>> g._fields, g.dW_E.shape, g.dW_dec is None
    (('loss', 'dW_E', 'dW_dec', 'db'), (3, 7), True)
    """

    loss: float
    dW_E: np.ndarray
    dW_dec: np.ndarray | None
    db: np.ndarray


def _validate(
    W_E, tm, mk, W_dec, b, tied, reg, max_bytes=None, n_dense=1
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, bool, float]:
    """The arguments of :func:`embedding_loss` besides the model types (checked by the caller) and the
    ``n_dense`` dense ``V1 x V1`` arrays against ``max_bytes``."""
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    mk.require_masked_positions("embedding_loss")
    if not isinstance(tied, (bool, np.bool_)):
        raise TypeError(f"tied must be a bool, got {tied!r}")
    W_E = check_array("W_E", W_E, ndim=2)
    if W_E.shape[1] != tm.V1 or W_E.shape[0] < 1:
        raise ValueError(f"W_E must have shape (d, V1) = (d >= 1, {tm.V1}), got {W_E.shape}")
    d = W_E.shape[0]
    if tied:
        if W_dec is not None:
            raise ValueError("W_dec must be None when tied=True (the decoder is W_E^T); pass tied=False to use W_dec")
    else:
        if W_dec is None:
            raise ValueError(f"W_dec (shape (V1, d) = ({tm.V1}, {d})) is required when tied=False")
        W_dec = check_array("W_dec", W_dec, shape=(tm.V1, d))
    b = None if b is None else check_array("b", b, shape=(tm.V1,))
    reg = check_real("reg", reg, low=0.0)
    check_alloc(f"embedding_loss: effective map M (and {n_dense - 1} more V1 x V1 arrays)" if n_dense > 1
                else "embedding_loss: effective map M", (n_dense, tm.V1, tm.V1), max_bytes=max_bytes,
                alternative=_ALTERNATIVE)  # fmt: skip
    return W_E, W_dec, b, bool(tied), reg


def _penalty(W_E, W_dec, tied: bool) -> float:
    """``||W^E||_F^2`` (tied) or ``||W^E||_F^2 + ||W^dec||_F^2`` (untied)."""
    return float(np.sum(W_E * W_E)) + (0.0 if tied else float(np.sum(W_dec * W_dec)))


def effective_map(W_E, W_dec=None, *, tied: bool = True) -> np.ndarray:
    """``M = (W^E)^T W^E`` (tied) or ``M = W^dec W^E`` (untied); shape ``(V1, V1)``. No validation."""
    return W_E.T @ W_E if tied else W_dec @ W_E


def embedding_loss(
    W_E: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    W_dec: ArrayLike | None = None,
    b: ArrayLike | None = None,
    tied: bool = True,
    reg: float = 0.0,
    max_bytes: int | None = None,
) -> float:
    """Exact population squared MLM loss of the embedding model (SPEC §4.0, §4.1).

    .. math::
        L = E_S E_{x \\sim p_S} \\| M m_S + b - e_x \\|^2 + \\lambda (\\|W^E\\|_F^2 [+ \\|W^{dec}\\|_F^2]),

    with ``M = (W^E)^T W^E`` (tied) or ``W^dec W^E`` (untied).

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Token embeddings; column ``i`` is the embedding ``E_i`` of token ``i`` (0 = [MASK]).
    tm, mk : GeneralTopicModel (or the paper's TopicModel), Masking
        ``mk.p_m > 0``.
    W_dec : array_like, shape (V1, d), optional
        Untied decoder; required iff ``tied=False``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    tied : bool
        Tie the decoder to the embedding (``W^dec = (W^E)^T``).
    reg : float
        L2 coefficient ``lambda >= 0``.
    max_bytes : int, optional
        Memory limit for the dense ``V1 x V1`` map ``M`` (default ``$THEORYCHECK_MAX_BYTES`` or half
        the available memory); above it a ``ValueError``.

    Returns
    -------
    L : float
        The loss above; minimum ``1 - E||p||^2`` at ``reg = 0`` (if ``d`` is large enough, see
        :func:`theorycheck.solvers.min_embedding_dim`).

    Raises
    ------
    ValueError
        If ``mk.p_m = 0``, an array has the wrong shape or a non-finite entry, ``W_dec`` is missing
        with ``tied=False`` (or passed with ``tied=True``), ``reg < 0``, or ``M`` exceeds ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking, or ``tied`` is not a bool.

    See Also
    --------
    embedding_loss_grad : The loss with its gradients.
    value_loss : The loss of the effective map ``M`` (this function adds the L2 term).
    theorycheck.solvers.optimal_embedding_gram : The optimal tied Gram matrix ``(W^E)^T W^E``.
    theorycheck.solvers.embedding_from_gram : An embedding with a given Gram matrix.

    Notes
    -----
    Attention is frozen uniform and ``W^V = I``, so the loss is ``value_loss(M, tm, mk, b)`` plus the
    L2 term, for any topic model.

    References
    ----------
    SPEC §3.1 (variant E), §4.0, §4.1 (Theorem 1: topic structure in the embeddings); Li, Li and
    Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 1.

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, embedding_loss, value_loss
    >>> from theorycheck.solvers import embedding_from_gram, min_embedding_dim, optimal_embedding_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()

    A tied embedding of the optimal Gram matrix in ``d = T`` dimensions attains ``1 - 1/(tau v)``:

    >>> d = min_embedding_dim(tm, mk)
    >>> W_E = embedding_from_gram(optimal_embedding_gram(tm, mk).x, d)
    >>> d, W_E.shape, round(embedding_loss(W_E, tm, mk), 12)
    (3, (3, 7), 0.75)

    Untied, with one-hot embeddings the effective map is the decoder itself:

    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> round(embedding_loss(np.eye(tm.V1), tm, mk, W_dec=W, tied=False), 12), round(value_loss(W, tm, mk), 12)
    (0.75, 0.75)
    """
    check_models(tm, mk, general=True)
    W_E, W_dec, b, tied, reg = _validate(W_E, tm, mk, W_dec, b, tied, reg, max_bytes)
    M = effective_map(W_E, W_dec, tied=tied)
    with _kernel_threads(tm.V1):
        loss = _value_loss(tm, M, mk, b, 0.0)
    return loss + reg * _penalty(W_E, W_dec, tied)


def embedding_loss_grad(
    W_E: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    W_dec: ArrayLike | None = None,
    b: ArrayLike | None = None,
    tied: bool = True,
    reg: float = 0.0,
    max_bytes: int | None = None,
) -> EmbeddingLossGrad:
    """Loss and gradients of :func:`embedding_loss` by the chain rule on ``value_loss_grad``.

    With ``D = dL/dM = 2 M Sigma - 2 C + 2 b mu^T`` from
    :func:`~theorycheck.population.value_loss_grad`:

    .. math::
        \\text{tied: } \\partial_{W^E} L = W^E (D + D^T) + 2\\lambda W^E; \\quad
        \\text{untied: } \\partial_{W^E} L = (W^{dec})^T D + 2\\lambda W^E,\\;
        \\partial_{W^{dec}} L = D (W^E)^T + 2\\lambda W^{dec}.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Token embeddings (column ``i``: token ``i``), finite.
    tm : GeneralTopicModel or TopicModel
        The topic model, any prior.
    mk : Masking
        ``mk.p_m > 0``.
    W_dec : array_like, shape (V1, d), optional
        Untied decoder; required iff ``tied=False``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    tied : bool, default True
        Tie the decoder to the embedding (``W^dec = (W^E)^T``).
    reg : float, reg >= 0
        L2 coefficient ``lambda``.
    max_bytes : int, optional
        Memory limit for ``M`` and the dense gradient arrays.

    Returns
    -------
    EmbeddingLossGrad
        ``(loss, dW_E (d, V1), dW_dec (V1, d) or None, db (V1,))``. ``max_bytes`` as in
        :func:`embedding_loss` (here for ``M`` and the dense gradient arrays).

    Raises
    ------
    ValueError
        As :func:`embedding_loss`.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    embedding_loss : The loss alone.
    EmbeddingLossGrad : The result tuple.
    value_loss_grad : ``D = dL/dM``, the gradient the chain rule starts from.

    References
    ----------
    SPEC §4.0 (the value-loss gradient), §4.1 (the embedding model).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import embedding_loss, embedding_loss_grad
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> rng = np.random.default_rng(0)
    >>> W_E, D = rng.normal(size=(2, 3, tm.V1))
    >>> g = embedding_loss_grad(W_E, tm, mk, reg=0.01)
    >>> h = 1e-6
    >>> fd = (embedding_loss(W_E + h * D, tm, mk, reg=0.01) - embedding_loss(W_E - h * D, tm, mk, reg=0.01)) / (2 * h)
    >>> abs(fd - float((g.dW_E * D).sum())) < 1e-7, g.dW_dec is None
    (True, True)
    """
    check_models(tm, mk, general=True)
    W_E, W_dec, b, tied, reg = _validate(W_E, tm, mk, W_dec, b, tied, reg, max_bytes, n_dense=1 + _grad_arrays(tm))
    M = effective_map(W_E, W_dec, tied=tied)
    with _kernel_threads(tm.V1):
        loss, D, db = _value_loss_grad(tm, M, mk, b, 0.0, max_bytes)
    if W_dec is None:  # tied (validated: W_dec is None iff tied)
        dW_E = W_E @ (D + D.T) + 2.0 * reg * W_E
        dW_dec = None
    else:
        dW_E = W_dec.T @ D + 2.0 * reg * W_E
        dW_dec = D @ W_E.T + 2.0 * reg * W_dec
    return EmbeddingLossGrad(loss + reg * _penalty(W_E, W_dec, tied), dW_E, dW_dec, db)


def _embedding_loss_ref(W_E, tm: TopicModel, mk: Masking, *, W_dec=None, b=None, tied: bool = True, reg: float = 0.0):
    """Dense numpy reference: ``(loss, dW_E, dW_dec, db)`` from the exact moments ``(Sigma, C)``.

    ``L = tr(M Sigma M^T) - 2 tr(M C^T) + 2 b^T M mu + ||b||^2 - 2 u^T b + 1 + reg * penalty``;
    gradients written out from the dense moments, independently of ``value_loss_grad``.
    """
    Sigma, C = moments(tm, mk)
    W_E = np.asarray(W_E, dtype=float)
    M = W_E.T @ W_E if tied else np.asarray(W_dec, dtype=float) @ W_E
    bb = np.zeros(tm.V1) if b is None else np.asarray(b, dtype=float)
    u = np.full(tm.V1, 1.0 / tm.n_words)
    u[0] = 0.0
    mu = (mk.a + mk.r) * u
    mu[0] = mk.q
    loss = np.trace(M @ Sigma @ M.T) - 2 * np.sum(M * C) + 2 * bb @ M @ mu + bb @ bb - 2 * u @ bb + 1.0
    D = 2 * M @ Sigma - 2 * C + 2 * np.outer(bb, mu)
    db = 2 * (M @ mu + bb - u)
    if tied:
        loss += reg * np.sum(W_E**2)
        return float(loss), W_E @ (D + D.T) + 2 * reg * W_E, None, db
    W_dec = np.asarray(W_dec, dtype=float)
    loss += reg * (np.sum(W_E**2) + np.sum(W_dec**2))
    return float(loss), W_dec.T @ D + 2 * reg * W_E, D @ W_E.T + 2 * reg * W_dec, db
