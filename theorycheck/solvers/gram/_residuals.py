"""Residuals of tied-embedding candidates (SPEC §4.1 D1/D2), recomputed by our own numpy code.

The minimiser characterisation (:func:`minimiser_residuals`, :func:`embedding_minimiser_violation`),
the identifiable part of a Gram (:func:`identifiable_part`), the (centred) moments and the residuals
of a dense candidate (:func:`dense_gram_residuals`) with their scales for the shared certification
(:func:`gram_checks`, :mod:`._certify`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import check_array
from ...models import Masking, TopicModel, require_symmetric
from ...population._embedding_loss import _kernel_threads, effective_map
from ...population._embedding_loss import _validate as _validate_loss
from ...population._moments import moments
from ...population._value_loss import value_loss, value_loss_grad
from ._block import block_closed_form_gram, check_embedding_models, single_law

__all__ = [
    "minimiser_residuals",
    "embedding_minimiser_violation",
    "identifiable_part",
    "dense_gram_residuals",
    "gram_checks",
    "range_split",
    "mean_density",
    "mean_target",
]


def minimiser_residuals(M, tm: TopicModel, mk: Masking, b=None) -> dict:
    """Residuals of the characterisation of all minimisers ``(M, b)`` (SPEC §4.1 D1).

    Generic case (``T >= 2``, ``tau < T`` or Dirichlet): with the block sums ``Y = M [1_1 .. 1_T]``
    and ``g = mean_t (Y_{:,t} - 1_t / a) / v``,

    .. math::
        r_1 = \\max |Y - (1/a) [1_1 .. 1_T] - v g 1_T^T|, \\qquad
        r_2 = \\max | q M e_0 + b + (a + r) g + (r/(a v T)) 1_W |.

    Single document law: ``r_1 = max |M m + b - u|`` with ``m = (a+r) u + q e_0``, ``r_2 = 0``.
    No validation (see :func:`embedding_minimiser_violation`).
    """
    a, r, q, T, v, V1 = mk.a, mk.r, mk.q, tm.T, tm.v, tm.V1
    n = tm.n_words
    bb = np.zeros(V1) if b is None else b
    if single_law(tm):
        m = np.full(V1, (a + r) / n)
        m[0] = q
        u = np.full(V1, 1.0 / n)
        u[0] = 0.0
        return {"block_sums": float(np.max(np.abs(M @ m + bb - u))), "mask_column": 0.0}
    Y = M[:, 1:].reshape(V1, T, v).sum(axis=2)
    Ind = tm.topic_indicator()
    R = Y - Ind / a
    g = R.mean(axis=1) / v
    r1 = float(np.max(np.abs(R - v * g[:, None])))
    oneW = np.ones(V1)
    oneW[0] = 0.0
    r2 = float(np.max(np.abs(q * M[:, 0] + bb + (a + r) * g + (r / (a * v * T)) * oneW)))
    return {"block_sums": r1, "mask_column": r2}


def embedding_minimiser_violation(
    W_E: ArrayLike,
    tm: TopicModel,
    mk: Masking,
    *,
    W_dec: ArrayLike | None = None,
    b: ArrayLike | None = None,
    tied: bool = True,
) -> float:
    """How far an embedding model is from the set of ALL population minimisers (§4.1 D1/D2).

    ``(W_E, W_dec, b)`` minimises the population loss iff the effective map
    ``M = (W^E)^T W^E`` (tied) or ``W^dec W^E`` (untied) satisfies, for some vector g,

    .. math::
        M 1_t = \\tfrac1a 1_t + v g \\ (\\forall t), \\qquad
        q M e_0 + b = -(a+r) g - \\tfrac{r}{a v T} 1_W .

    For the tied model this gives, in every word row ``i`` and topic ``t' != t(i)``,
    ``sum_{j in t(i)} <E_i, E_j> - sum_{j in t'} <E_i, E_j> = 1/a`` (§4.1 D2).
    With a single document law (``tau = T`` or ``T = 1``) the only condition is
    ``M m + b = u``.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        The token embedding.
    tm : TopicModel
        The paper's topic model (a :class:`~theorycheck.GeneralTopicModel` is refused).
    mk : Masking
        ``p_m > 0`` and ``a > 0``.
    W_dec : array_like, shape (V1, d), optional
        The decoder; required iff ``tied=False``.
    b : array_like, shape (V1,), optional
        Decoder bias (0 if omitted).
    tied : bool, default True
        Tied decoder ``W^dec = (W^E)^T``.

    Returns
    -------
    float
        Max absolute violation of the identities (0 for an exact minimiser; the loss excess
        is quadratic in it).

    Raises
    ------
    ValueError
        Arrays of the wrong shape or not finite, ``W_dec`` missing with ``tied=False`` (or given with
        ``tied=True``), ``p_m = 0`` or ``a = 0``, or a general model.
    TypeError
        ``tied`` not a bool.

    See Also
    --------
    embedding_from_gram : Builds an embedding from an optimal Gram.
    identifiable_part : The part of a Gram that optimality fixes.
    optimal_embedding_gram : The minimum-norm optimum.

    References
    ----------
    SPEC §4.1 D1 (all minimisers, any linear map), D2 (tied decoder).

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import closed_form_gram, embedding_from_gram, embedding_minimiser_violation
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W_E = embedding_from_gram(closed_form_gram(tm, mk), 3)
    >>> embedding_minimiser_violation(W_E, tm, mk) < 1e-12
    True
    >>> round(embedding_minimiser_violation(np.zeros((3, tm.V1)), tm, mk), 6)  # W = 0: 2/(3a) off
    0.770713
    """
    require_symmetric(
        tm,
        "embedding_minimiser_violation",
        "embedding_loss(W_E, g, mk) - solvers.optimal_embedding_gram(g, mk).fun (the loss gap)",
    )
    check_embedding_models(tm, mk, "embedding_minimiser_violation")
    W_E, W_dec, b, tied, _ = _validate_loss(W_E, tm, mk, W_dec, b, tied, 0.0)
    M = effective_map(W_E, W_dec, tied=tied)
    res = minimiser_residuals(M, tm, mk, b)
    return max(res.values())


def identifiable_part(G: ArrayLike, tm: TopicModel, mk: Masking, *, bias: bool = False) -> np.ndarray:
    """``G - P_perp G P_perp``: the part of a Gram fixed by optimality (dense, moderate V1).

    ``P_perp`` projects onto the orthogonal complement of ``span{m_S}`` (within-topic zero-mean
    vectors and the null direction ``1_W - ((a+r)/q) e_0``). Every minimiser satisfies
    ``G m_S = p_S``, which fixes ``G P`` and ``P G`` (``P = I - P_perp``) but leaves
    ``P_perp G P_perp`` free, so two minimisers have the same identifiable part.
    With ``bias=True`` the relevant span is that of the centred densities ``m_S - mu``
    (covariance ``Sigma - mu mu^T``).

    Parameters
    ----------
    G : array_like, shape (V1, V1)
        A (dense) Gram matrix.
    tm : TopicModel
        The paper's topic model (a :class:`~theorycheck.GeneralTopicModel` is refused).
    mk : Masking
        ``p_m > 0`` and ``a > 0``.
    bias : bool, default False
        With a free decoder bias (the centred span).

    Returns
    -------
    ndarray, shape (V1, V1)
        ``G - P_perp G P_perp``.

    Raises
    ------
    ValueError
        ``G`` of the wrong shape or not finite, ``p_m = 0`` or ``a = 0``, or a general model.

    See Also
    --------
    optimal_embedding_gram : Its ``"factorized"`` minimiser matches the min-norm one on this part.
    embedding_minimiser_violation : Whether an embedding is a minimiser at all.
    closed_form_gram : The minimum-norm optimum.

    References
    ----------
    SPEC §4.1 D1-D3.

    Examples
    --------
    Adding a within-topic contrast ``e e^T`` (``e = e_1 - e_2``) to the optimum gives another
    minimiser with the same loss and the same identifiable part:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.solvers import closed_form_gram, identifiable_part
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> G = closed_form_gram(tm, mk).toarray()
    >>> e = np.zeros(tm.V1)
    >>> e[1], e[2] = 1.0, -1.0
    >>> G2 = G + np.outer(e, e)
    >>> round(value_loss(G2, tm, mk), 12), round(value_loss(G, tm, mk), 12)
    (0.75, 0.75)
    >>> bool(np.allclose(identifiable_part(G2, tm, mk), identifiable_part(G, tm, mk), atol=1e-12))
    True
    """
    require_symmetric(
        tm,
        "identifiable_part",
        "solvers.optimal_embedding_gram(g, mk) (the min-norm Gram) and moments(g, mk) (the range of Sigma)",
    )
    check_embedding_models(tm, mk, "identifiable_part")
    G = check_array("G", G, shape=(tm.V1, tm.V1))
    Sigma, _ = _moments_for(tm, mk, bias)
    lam, U = np.linalg.eigh(Sigma)
    Up = U[:, ~_range_mask(lam, tm, mk)]
    Pp = Up @ Up.T
    return G - Pp @ G @ Pp


def _range_mask(lam, tm, mk):
    """Eigenvalues of (centred) Sigma counted as non-zero: relative to ``||mu||^2`` (the scale of
    the uncentred moment), so that an all-zero centred Sigma (single document law) has empty range."""
    mu = mean_density(tm, mk)
    return lam > 1e-12 * max(float(lam.max()), float(mu @ mu))


def mean_density(tm, mk):
    """``mu = E[m_S] = (a + r) u + q e_0``."""
    mu = np.full(tm.V1, (mk.a + mk.r) / tm.n_words)
    mu[0] = mk.q
    return mu


def _moments_for(tm, mk, bias):
    """``(Sigma, C)``, centred (``Sigma - mu mu^T``, ``C - u mu^T``) when the bias is free.

    With a free bias the optimal ``b = u - G mu`` and ``L = tr(G Sigma_c G) - 2 <G, C_c> + 1 - ||u||^2``.
    """
    Sigma, C = moments(tm, mk)
    if bias:
        mu = mean_density(tm, mk)
        u = np.full(tm.V1, 1.0 / tm.n_words)
        u[0] = 0.0
        Sigma = Sigma - np.outer(mu, mu)
        C = C - np.outer(u, mu)
    return Sigma, C


def mean_target(tm):
    """``u = E[p_S]``: uniform over the words, 0 on [MASK]."""
    u = np.full(tm.V1, 1.0 / tm.n_words)
    u[0] = 0.0
    return u


def range_split(tm, mk, bias=False):
    """Orthonormal bases of range(Sigma) / its complement and ``K = C U_r Lambda_r^{-1}``.

    (Centred moments when the bias is free.)
    """
    Sigma, C = _moments_for(tm, mk, bias)
    lam, U = np.linalg.eigh(Sigma)
    keep = _range_mask(lam, tm, mk)
    Ur, Up = U[:, keep], U[:, ~keep]
    K = C @ Ur / lam[keep]  # G Ur = K  <=>  G Sigma = C
    return Ur, Up, K, Sigma, C


def dense_gram_residuals(G, tm, mk, reg, *, b=None, identifiable=False) -> tuple[dict, float]:
    """Our own checks of a dense Gram (and bias): loss gap, PSD, minimiser violation, distance to closed form."""
    res = {}
    bias = b is not None
    with _kernel_threads(tm.V1):
        loss = value_loss(G, tm, mk, b=b)
    res["loss_gap"] = loss - tm.min_value_loss()
    res["min_eig"] = float(np.linalg.eigvalsh((G + G.T) / 2)[0])
    res["asymmetry"] = float(np.max(np.abs(G - G.T)))
    res["gram_norm"] = float(np.linalg.norm(G))
    res["minimiser_violation"] = max(minimiser_residuals(G, tm, mk, b).values())
    if reg > 0.0:
        # KKT of min L(G, b) + reg tr G over G >= 0: Z = sym(dL/dG) + reg I >= 0, <Z, G> = 0 (and dL/db = 0)
        with _kernel_threads(tm.V1):
            _, D, db = value_loss_grad(G, tm, mk, b=b)
        if bias:
            res["bias_stationarity"] = float(np.max(np.abs(db)))
        Z = (D + D.T) / 2 + reg * np.eye(tm.V1)
        res["kkt_dual_infeasibility"] = max(0.0, -float(np.linalg.eigvalsh(Z)[0]))
        res["kkt_complementarity"] = abs(float(np.sum(Z * G)))
    if reg == 0.0:
        Gc = block_closed_form_gram(tm, mk, bool(bias)).toarray()
        if identifiable:
            idp = identifiable_part(G, tm, mk, bias=bias) - identifiable_part(Gc, tm, mk, bias=bias)
            res["dist_closed_form"] = float(np.max(np.abs(idp)))
        else:
            res["dist_closed_form"] = float(np.max(np.abs(G - Gc)))
    return res, loss


def gram_checks(res: dict, reg: float) -> dict:
    """``{name: (residual, scale)}`` for :func:`theorycheck.solvers._certify.certify`.

    PSD violation ``max(0, -lambda_min)`` and asymmetry relative to ``||G||_F``; for ``reg = 0`` the
    loss gap ``L(G) - L*`` (scale 1, the loss of ``G = 0``); for ``reg > 0`` the KKT residuals of
    ``min L(G) + reg tr G`` over ``G >= 0`` and the bias stationarity (scale 1, loss units).
    """
    scale = res.get("gram_norm", 0.0)
    checks = {"psd": (max(0.0, -res["min_eig"]), scale), "asymmetry": (res.get("asymmetry", 0.0), scale)}
    if reg == 0.0:
        checks["loss_gap"] = (max(0.0, res["loss_gap"]), 1.0)
    else:
        for k in ("kkt_dual_infeasibility", "kkt_complementarity", "bias_stationarity"):
            if k in res:
                checks[k] = (res[k], 1.0)
    return checks
