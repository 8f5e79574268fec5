"""The exact N -> inf masked-LM population as weighted contexts (SPEC §2.1, §4.0).

Every ``tau``-subset ``S`` of topics is one context with key density ``m_S = a p_S + r u + q e_0``
(:func:`~theorycheck.population.masked_density`; ``p_S`` when selected positions are hidden as
keys, ``mask_keys=True``). A selected position with target ``x ~ p_S`` shows [MASK] with
probability ``1 - p_c - p_r``, ``x`` with ``p_c`` and a uniform random word with ``p_r``, so the
query groups of ``S`` are

- query [MASK] (token 0) with target weights ``(1 - p_c - p_r) p_S``,
- query word ``w`` with target weights ``(p_r / (T v)) p_S + p_c p_S(w) e_w``,

all divided by ``C(T, tau)``. The loss of any position-free one-layer model summed over these
weighted groups is its exact population MLM loss. The key densities are linear in the topic
mixture ``theta_S = 1_S / tau`` (SPEC §11.5): ``K = U R`` with ``U = [theta_S^T, 1]`` and
``R = [a Phi; c]`` (``U = theta_S^T``, ``R = Phi`` with ``mask_keys``), returned as ``key_coef``
and ``key_basis`` for routes that share per-token work across the contexts. :func:`theorycheck.nn.population_batch`
wraps the arrays into a ``CountBatch``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._memory import check_alloc
from ..models import GeneralTopicModel, Masking, check_models
from ._moments import _c_vector, _enumerate_sets, _masked_density, _set_mixture, _topic_density

__all__ = ["PopulationContexts", "population_contexts"]


@dataclass(frozen=True)
class PopulationContexts:
    """Weighted contexts of the population (plain arrays; ``G`` topic sets, ``E`` query groups).

    Parameters
    ----------
    K : ndarray, shape (G, V1)
        Key density of each context (``m_S``, or ``p_S`` with ``mask_keys``).
    ctx, qtok : ndarray of int, shape (E,)
        Context and query token of each group (groups of zero weight are dropped).
    weight : ndarray, shape (E,)
        ``Y.sum(axis=1)``.
    Y : ndarray, shape (E, V1)
        Target weights: the population loss is ``sum_e sum_x Y[e, x] l(o_e, x)``.
    key_coef, key_basis : ndarray, shapes (G, r) and (r, V1)
        Non-negative factors with ``K = key_coef @ key_basis`` (in exact arithmetic; ``r = T + 1``,
        ``T`` with ``mask_keys``).
    target_coef, target_basis : ndarray, shapes (G, T) and (V1, T, V1)
        ``theta_S`` of every context and the per-topic targets of every query token:
        ``Y[e] = sum_t target_coef[ctx[e], t] target_basis[qtok[e], t]`` (the rows above with
        ``p_S`` replaced by ``phi_t``).

    See Also
    --------
    population_contexts : Builds it.
    theorycheck.nn.population_batch : Wraps the arrays into a training batch.
    masked_density : The key density ``m_S`` of one context.

    References
    ----------
    SPEC §2.1 (masking and the query law), §4.0 (the population loss), §11.5 (the linear factors).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import population_contexts
    >>> pc = population_contexts(TopicModel(T=3, v=2, tau=2), Masking())
    >>> pc.K.shape, pc.Y.shape, pc.key_coef.shape, pc.key_basis.shape  # G = 3 sets, E = 3 x V1 groups
    ((3, 7), (21, 7), (3, 4), (4, 7))
    >>> float(np.abs(pc.key_coef @ pc.key_basis - pc.K).max()) < 1e-15
    True
    """

    K: np.ndarray
    ctx: np.ndarray
    qtok: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    key_coef: np.ndarray | None = None
    key_basis: np.ndarray | None = None
    target_coef: np.ndarray | None = None
    target_basis: np.ndarray | None = None


def population_contexts(tm: GeneralTopicModel, mk: Masking, *, mask_keys: bool = False) -> PopulationContexts:
    """Contexts, query groups and target weights of the exact population (see the module docstring).

    Any topic model with the uniform-tau law: a :class:`~theorycheck.models.GeneralTopicModel` has
    the same contexts with ``p_S = Phi^T 1_S / tau`` and ``u = 1_W / n_words`` (SPEC §11.1); the
    densities dispatch on the model (``._moments``).

    Every ``tau``-subset ``S`` is one context with key density ``m_S``; its query groups are [MASK]
    with target weights ``(1 - p_c - p_r) p_S / C(T, tau)`` and each word ``w`` with
    ``((p_r / (T v)) p_S + p_c p_S(w) e_w) / C(T, tau)``. The loss of a position-free one-layer model
    summed over the weighted groups is its exact population MLM loss.

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        A model with the uniform-tau prior (every topic set is enumerated: ``C(T, tau) <= 200000``).
    mk : Masking
        ``mk.p_m > 0``.
    mask_keys : bool, default False
        Key densities ``p_S`` (selected positions hidden as keys) instead of ``m_S``.

    Returns
    -------
    PopulationContexts
        The key densities ``K`` ``(C(T, tau), V1)``, the groups' context and query token, their
        weights and target weights ``Y`` (summing to 1 over all groups), and the linear factors of
        ``K`` and ``Y``.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``C(T, tau) > 200000``, ``mk.p_m = 0``, or the
        ``C(T, tau) x V1 x V1`` targets do not fit in memory.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking, or ``mask_keys`` is not a bool.

    See Also
    --------
    PopulationContexts : The result.
    theorycheck.nn.population_batch : The same contexts as a training batch.
    attention_loss : The exact loss of the one-hot attention model, from the same population.

    References
    ----------
    SPEC §2.1 (masking), §4.0 (the population), §11.5 (``m_S`` linear in ``theta_S``).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, population_contexts, value_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> pc = population_contexts(tm, mk)
    >>> round(float(pc.weight.sum()), 12)  # every selected position is one query of one group
    1.0

    Uniform attention outputs ``W m_S``; summed over the weighted groups the squared loss is the value loss:

    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> O = pc.K[pc.ctx] @ W.T
    >>> L = (pc.weight * (O**2).sum(axis=1)).sum() - 2 * (pc.Y * O).sum() + pc.weight.sum()
    >>> round(float(L), 12), round(value_loss(W, tm, mk), 12)
    (0.75, 0.75)
    """
    check_models(tm, mk, general=True)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    mk.require_masked_positions("population_batch")
    sets = _enumerate_sets(tm)
    n, V1, nw = len(sets), tm.V1, tm.n_words
    check_alloc("population contexts (topic sets x V1 x V1 targets)", (n, V1, V1))
    thetas = [_set_mixture(tm.T, S) for S in sets]
    P = np.stack([_topic_density(tm, th) for th in thetas])
    K = P.copy() if mask_keys else np.stack([_masked_density(tm, mk, th) for th in thetas])
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
    theta, Phi = np.stack(thetas), tm.topic_token_matrix()
    coef, basis = theta, Phi
    if not mask_keys:  # m_S = a p_S + c = [theta_S, 1] [a Phi; c]
        coef = np.hstack([coef, np.ones((n, 1))])
        basis = np.vstack([mk.a * basis, _c_vector(tm, mk)])
    check_alloc("population targets per topic (V1 x T x V1)", (V1, tm.T, V1))
    B = np.empty((V1, tm.T, V1))  # the rows of Y with p_S replaced by phi_t
    B[0] = mk.p_mask * Phi
    B[1:] = (mk.p_r / nw) * Phi[None]
    B[idx, :, idx] += mk.p_c * Phi[:, 1:].T
    B /= n
    return PopulationContexts(
        K=K,
        ctx=ctx[keep],
        qtok=qtok[keep],
        weight=w[keep],
        Y=np.ascontiguousarray(Y[keep]),
        key_coef=coef,
        key_basis=basis,
        target_coef=theta,
        target_basis=B,
    )
