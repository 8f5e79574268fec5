"""Residuals of stage-1 candidates (SPEC §4.0, §4.2), recomputed by our own code, and the minimiser set.

For a candidate ``W`` of ``min L(W) + reg ||W||_F^2`` (``L`` the exact uniform-attention loss):

- ``stationarity = ||W (Sigma + reg I) - C||_F`` (scale ``||C||_F``),
- ``loss_gap = L(W) - L*`` (``reg = 0``; scale 1, the loss of ``W = 0``),
- ``range_violation = ||W - W P||_F`` with ``P`` the projector on ``range(Sigma)`` (``reg = 0``;
  scale ``||W||_F``): zero iff a minimiser is *the* minimum-norm one,
- ``error_bound = stationarity / reg`` (``reg > 0``): a certified bound on ``||W - W_opt||_F``
  (the Hessian ``2 (Sigma + reg I)`` is ``>= 2 reg I``).

Dense matrices use the block-sum kernel of :func:`~theorycheck.population.value_loss_grad`;
:class:`BlockValueMatrix` candidates the O(1) topic-symmetric algebra (:mod:`._symmetric`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..._memory import check_alloc
from ..._validate import check_array
from ...models import Masking, TopicModel, require_symmetric, token_topic
from ...population._alpha_beta import stage1_constant_context
from ...population._value_loss import value_loss_grad
from ._block import BlockValueMatrix, block_hat, check_stage1_models, hat_moments, predicted_min_loss

__all__ = ["value_residuals", "value_checks", "minimiser_violation", "MinimiserViolation"]


def _block_residuals(W: BlockValueMatrix, tm: TopicModel, mk: Masking, reg: float) -> dict:
    """Loss and residuals of a block matrix, computed in the topic-symmetric algebra (O(1))."""
    Sig, Cm = hat_moments(tm, mk)
    K = block_hat(W.A, W.B0, W.gamma, tm.T, tm.v)
    loss = (K @ Sig @ K.t).trace() - 2.0 * (K @ Cm.t).trace() + 1.0
    R = K @ Sig - Cm + K.scale(reg)
    P = Sig @ Sig.pinv()
    out_of_range = (K - K @ P).fro()
    return _assemble(loss, W.fro_norm, R.fro(), out_of_range, Cm.fro(), tm, mk, reg)


def _dense_residuals(W: np.ndarray, tm: TopicModel, mk: Masking, reg: float) -> dict:
    """Loss and residuals of a dense matrix: loss and gradient from the block-sum kernel."""
    loss, dW, _ = value_loss_grad(W, tm, mk, reg=0.0)
    # gradient of the regularised objective is dW + 2 reg W; stationarity = half its norm
    stat = float(np.linalg.norm(0.5 * dW + reg * W))
    # component of the rows of W outside range(Sigma): W - W Q Pi Q^T
    Sig, Cm = hat_moments(tm, mk)
    Pi = (Sig @ Sig.pinv()).toarray()
    T, v = tm.T, tm.v
    WQ = np.empty((tm.V1, T + 1))
    WQ[:, :T] = W[:, 1:].reshape(tm.V1, T, v).sum(axis=2) / math.sqrt(v)
    WQ[:, T] = W[:, 0]
    Z = WQ @ Pi
    proj = np.empty_like(W)
    proj[:, 1:] = np.repeat(Z[:, :T] / math.sqrt(v), v, axis=1)
    proj[:, 0] = Z[:, T]
    out_of_range = float(np.linalg.norm(W - proj))
    return _assemble(loss, float(np.linalg.norm(W)), stat, out_of_range, Cm.fro(), tm, mk, reg)


def _assemble(loss, fro, stat, out_of_range, c_fro, tm, mk, reg) -> dict:
    res = {
        "stationarity": float(stat),
        "stationarity_rel": float(stat) / c_fro if c_fro > 0 else float(stat),
        "loss": float(loss),
        "objective": float(loss) + reg * fro * fro,
    }
    if reg > 0.0:
        # strong convexity (Hessian 2 (Sigma + reg I) >= 2 reg I): ||W - W_opt||_F <= stationarity / reg
        res["error_bound"] = float(stat) / reg
    if reg == 0.0:
        res["loss_gap"] = float(loss) - predicted_min_loss(tm, mk)
        res["range_violation"] = float(out_of_range)
        res["range_violation_rel"] = float(out_of_range) / fro if fro > 0 else float(out_of_range)
    return res


def value_residuals(W, tm, mk, reg) -> dict:
    """Residuals of a dense or block candidate (module docstring); keys as in ``SolveResult.residuals``."""
    if isinstance(W, BlockValueMatrix):
        return _block_residuals(W, tm, mk, reg)
    return _dense_residuals(W, tm, mk, reg)


def value_checks(residuals: dict) -> dict:
    """``{name: (residual, scale)}`` for :func:`theorycheck.solvers._certify.certify` (module docstring)."""
    # the ``*_rel`` residuals are already divided by their scales (||C||_F and ||W||_F)
    checks = {"stationarity": (residuals["stationarity_rel"], 1.0)}
    if "loss_gap" in residuals:
        checks["loss_gap"] = (residuals["loss_gap"], 1.0)
        checks["range_violation"] = (residuals["range_violation_rel"], 1.0)
    return checks


# =============================================================================== minimiser set
class MinimiserViolation(NamedTuple):
    """Distance of ``(W, b)`` from the affine set of minimisers (see :func:`minimiser_violation`).

    Parameters
    ----------
    norm : float
        Euclidean norm of the violated linear conditions (0 iff ``(W, b)`` is a minimiser).
    g : ndarray of shape (V1,) or None
        Least-squares fitted ``g`` (``None`` in the constant-context case, where no ``g`` appears).

    See Also
    --------
    minimiser_violation : Computes it.
    optimal_value_matrix : The minimum-norm minimiser, whose violation is 0.

    References
    ----------
    SPEC §4.2 (the affine set of all minimisers).

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import minimiser_violation
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> mv = minimiser_violation(np.zeros((tm.V1, tm.V1)), tm, Masking())
    >>> mv.norm > 1, mv.g.shape  # W = 0 is far from every minimiser
    (True, (7,))
    """

    norm: float
    g: np.ndarray | None


def minimiser_violation(
    W: ArrayLike | BlockValueMatrix,
    tm: TopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    max_bytes: int | None = None,
) -> MinimiserViolation:
    """How far ``(W, b)`` is from the set of all minimisers of the uniform-attention loss (SPEC §4.0, §4.2).

    Informative context (``a > 0``, ``tau < T`` or Dirichlet with ``T >= 2``): ``(W, b)`` minimises iff
    some ``g`` satisfies, with ``Y_t = W 1_t`` and ``z = W e_0``,

    .. math::
        Y_t - \\tfrac{1}{a} 1_t - v g = 0 \\ (t = 1..T), \\qquad
        q z + b + (a + r) g + \\tfrac{r}{a T v} 1_W = 0.

    Row by row, ``g_i`` is fitted by least squares and ``norm`` is the Euclidean norm of all these
    residuals. Constant context (``tau = T``, ``T = 1`` or ``a = 0``): minimisers are exactly the
    ``W mu + b = u`` with ``mu = (a+r) u + q e_0``; ``norm = ||W mu + b - u||`` and ``g = None``.

    Parameters
    ----------
    W : array_like of shape (V1, V1) or BlockValueMatrix
        The candidate value matrix.
    tm : TopicModel
        The paper's topic model (a :class:`~theorycheck.GeneralTopicModel` is refused).
    mk : Masking
        Masking probabilities, ``mk.p_m > 0``.
    b : array_like of shape (V1,), optional
        Output bias (``0`` if omitted).
    max_bytes : int, optional
        Memory limit for the ``(V1, T)`` block-sum arrays of a :class:`BlockValueMatrix`.

    Returns
    -------
    MinimiserViolation
        ``(norm, g)``: the residual norm (0 iff ``(W, b)`` minimises the loss) and the fitted ``g``.

    Raises
    ------
    ValueError
        ``W`` or ``b`` of the wrong shape or not finite, a :class:`BlockValueMatrix` of another
        ``(T, v)``, ``mk.p_m = 0``, a general model, or block sums above ``max_bytes``.

    See Also
    --------
    optimal_value_matrix : The minimum-norm minimiser (one point of this set).
    MinimiserViolation : The returned pair.
    theorycheck.population.value_loss : The loss, equal to its minimum on the whole set.

    References
    ----------
    SPEC §4.0 (the reduction), §4.2 (all minimisers, degenerate cases).

    Examples
    --------
    The optimum has violation 0 and ``g = B0`` on the word rows; a within-block zero-mean column
    perturbation is another (non-block) minimiser with the same loss:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import minimiser_violation, optimal_value_matrix
    >>> from theorycheck.population import value_loss
    >>> tm, mk = TopicModel(T=5, v=3, tau=2), Masking()
    >>> res = optimal_value_matrix(tm, mk)
    >>> mv = minimiser_violation(res.x, tm, mk)
    >>> mv.norm < 1e-12, round(float(mv.g[1]), 6), round(res.B0, 6)
    (True, -0.017836, -0.017836)
    >>> P = np.zeros((tm.V1, tm.V1))
    >>> P[1, 1], P[1, 2] = 0.3, -0.3
    >>> minimiser_violation(res.x + P, tm, mk).norm < 1e-12
    True
    >>> round(value_loss(res.x + P, tm, mk), 12), round(1 - 1 / (tm.tau * tm.v), 12)
    (0.833333333333, 0.833333333333)
    """
    require_symmetric(
        tm,
        "minimiser_violation",
        "value_loss_grad(W, g, mk) (zero at a minimiser) or solvers.optimal_value_matrix(g, mk).residuals",
    )
    check_stage1_models(tm, mk)
    T, v, V1, n = tm.T, tm.v, tm.V1, tm.n_words
    if isinstance(W, BlockValueMatrix):
        if (W.T, W.v) != (T, v):
            raise ValueError(f"W is a BlockValueMatrix for (T, v) = ({W.T}, {W.v}), expected ({T}, {v})")
        check_alloc(
            "minimiser_violation: block sums of a BlockValueMatrix",
            (4, V1, T),
            max_bytes=max_bytes,
            alternative="optimal_value_matrix(tm, mk, options={'dense': False}).residuals (O(1))",
        )
        Y = np.zeros((V1, T))
        topics = token_topic(np.arange(1, V1), v)
        Y[1:] = v * W.B0
        Y[np.arange(1, V1), topics] = v * W.A
        z = np.r_[0.0, np.full(n, W.gamma)]
    else:
        W = check_array("W", W, shape=(V1, V1))
        Y = W[:, 1:].reshape(V1, T, v).sum(axis=2)
        z = W[:, 0]
    bb = np.zeros(V1) if b is None else check_array("b", b, shape=(V1,))
    a, r, q = mk.a, mk.r, mk.q
    if stage1_constant_context(tm, mk):
        u = np.r_[0.0, np.full(n, 1.0 / n)]
        resid = ((a + r) / n) * Y.sum(axis=1) + q * z + bb - u
        return MinimiserViolation(float(np.linalg.norm(resid)), None)
    E = Y.copy()
    topics = token_topic(np.arange(1, V1), v)
    E[np.arange(1, V1), topics] -= 1.0 / a
    f = q * z + bb
    f[1:] += r / (a * n)
    # minimise sum_t (E_it - v g)^2 + (f_i + (a + r) g)^2 over g
    g = (v * E.sum(axis=1) - (a + r) * f) / (T * v * v + (a + r) ** 2)
    res2 = np.sum((E - v * g[:, None]) ** 2, axis=1) + (f + (a + r) * g) ** 2
    return MinimiserViolation(float(math.sqrt(res2.sum())), g)
