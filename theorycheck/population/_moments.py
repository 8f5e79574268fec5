"""Infinite-document densities and exact second moments (SPEC §1.1, §2.1, §4.0).

In the limit N -> inf the empirical token distribution of a masked document with topic set
``S`` is

.. math::  m_S = a\\, p_S + r\\, u + q\\, e_0,

with ``p_S = (1/(tau v)) sum_{t in S} 1_t``, ``u = 1_W/(T v)`` and ``(a, r, q)`` from
:class:`~theorycheck.models.Masking`. The exact moments used by every uniform-attention loss are
``Sigma = E[m_S m_S^T]`` and ``C = E[p_S m_S^T]`` (shape ``(V1, V1)``).
"""

from __future__ import annotations

import numpy as np

from .._memory import check_alloc
from .._validate import check_choice
from ..models import Masking, TopicModel, check_models, is_general
from ._general import (
    MAX_ENUMERATED_SETS,
    general_expected_pp,
    general_masked_density,
    general_moments,
    general_topic_density,
    general_topic_sets,
    topic_mixture,
)

__all__ = [
    "masked_density",
    "topic_density",
    "topic_sets",
    "expected_pp",
    "moments",
    "MAX_ENUMERATED_SETS",
]

_ALTERNATIVE = (
    "the structured routes: value_loss / value_loss_grad (block sums, no moment matrix), "
    "optimal_value_matrix(method='closed-form') (a BlockValueMatrix) or alpha_beta_loss (closed form)"
)


def topic_density(tm: TopicModel, topics=None, *, theta=None) -> np.ndarray:
    """Ground-truth word distribution of a document, shape ``(V1,)`` (entry 0 is 0).

    Either a topic set ``topics`` (``p_S = (1/(|S| v)) sum_{t in S} 1_t``) or a topic mixture
    ``theta`` (length T, non-negative, summing to 1; ``p_theta(w) = theta_{t(w)} / v``).
    """
    if is_general(tm):  # SPEC §11.2
        return general_topic_density(tm, topics, theta=theta)
    check_models(tm)
    th = topic_mixture(tm, topics, theta)
    p = np.zeros(tm.V1)
    p[1:] = np.repeat(th / tm.v, tm.v)
    return p


def masked_density(tm: TopicModel, mk: Masking, topics=None, *, theta=None) -> np.ndarray:
    """Limit empirical token distribution of a masked document, ``m_S = a p_S + r u + q e_0``.

    Parameters
    ----------
    tm, mk : TopicModel, Masking
    topics : sequence of int, optional
        The document's topic set ``S`` (0-based topic indices, ``|S| = tau``).
    theta : array_like, shape (T,), optional
        A topic mixture instead of a set (Dirichlet prior).

    Returns
    -------
    m : ndarray, shape (V1,)
        Non-negative, sums to 1, ``m[0] = q``. SPEC §2.1.
    """
    if is_general(tm):  # SPEC §11.2
        return general_masked_density(tm, mk, topics, theta=theta)
    check_models(tm, mk)
    p = topic_density(tm, topics, theta=theta)
    m = mk.a * p
    m[1:] += mk.r / tm.n_words
    m[0] += mk.q
    return m


def topic_sets(tm: TopicModel, *, max_sets: int = MAX_ENUMERATED_SETS) -> np.ndarray:
    """All ``tau``-subsets of the topics in lexicographic order, shape ``(C(T, tau), tau)``.

    Raises ``ValueError`` if there are more than ``max_sets`` of them.
    """
    if not is_general(tm):  # the enumeration reads only T, tau and the law (SPEC §11.2 for a general model)
        check_models(tm)
    return general_topic_sets(tm, max_sets=max_sets)


def expected_pp(tm: TopicModel, *, max_bytes=None) -> np.ndarray:
    """``E[p p^T]`` over the document law, shape ``(V1, V1)`` (closed form, SPEC §1.1).

    ``E[p p^T] = (s_same - s_diff) B + s_diff J`` with ``B`` the within-topic all-ones blocks and
    ``J`` the all-ones matrix on words (see :meth:`TopicModel.pair_moments`). The one dense array is
    checked against ``max_bytes`` first (:func:`theorycheck._memory.check_alloc`).
    """
    if is_general(tm):  # SPEC §11.2
        return general_expected_pp(tm, max_bytes=max_bytes)
    check_models(tm)
    check_alloc("expected_pp", (tm.V1, tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    s_same, s_diff = tm.pair_moments()
    out = np.zeros((tm.V1, tm.V1))
    words = out[1:, 1:]
    words[...] = s_diff
    blocks = words.reshape(tm.T, tm.v, tm.T, tm.v)  # a view: rows and columns split by topic
    t = np.arange(tm.T)
    blocks[t, :, t, :] = s_same
    return out


def moments(tm: TopicModel, mk: Masking, *, method: str = "closed-form", max_bytes=None):
    """Exact moments ``(Sigma, C) = (E[m_S m_S^T], E[p_S m_S^T])``, each ``(V1, V1)``.

    Closed form (SPEC §4.0), with ``c = r u + q e_0``:

    .. math::
        C = a E[p p^T] + u c^T,\\qquad
        \\Sigma = a^2 E[p p^T] + a (u c^T + c u^T) + c c^T.

    Parameters
    ----------
    method : {"closed-form", "enumerate"}
        ``"enumerate"`` averages over every ``tau``-subset (uniform-tau prior only, at most
        :data:`MAX_ENUMERATED_SETS` sets); it is the independent check of the closed form.
    max_bytes : int, optional
        Memory limit for the two dense ``V1 x V1`` results (plus the ``C(T, tau) x V1`` topic-set
        matrices of ``"enumerate"``); default ``$THEORYCHECK_MAX_BYTES`` or half the available
        memory. Above it a ``ValueError`` names the structured alternatives.

    Notes
    -----
    The structured solvers never call it: ``value_loss`` works from block sums and
    ``optimal_value_matrix(method="closed-form")`` returns a ``BlockValueMatrix``.
    """
    if is_general(tm):  # SPEC §11.2
        return general_moments(tm, mk, method=method, max_bytes=max_bytes)
    check_models(tm, mk)
    check_choice("method", method, ("closed-form", "enumerate"))
    check_alloc("moments: Sigma and C", (2, tm.V1, tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    if method == "closed-form":
        return _moments_closed_form(tm, mk, max_bytes)
    sets = topic_sets(tm)
    check_alloc("moments(method='enumerate')", (2, len(sets), tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    a, r, q = mk.a, mk.r, mk.q
    P = np.zeros((len(sets), tm.V1))
    rows = np.repeat(np.arange(len(sets)), tm.tau * tm.v)
    cols = (1 + sets[:, :, None] * tm.v + np.arange(tm.v)[None, None, :]).reshape(-1)
    P[rows, cols] = 1.0 / (tm.tau * tm.v)
    M = a * P
    M[:, 1:] += r / tm.n_words
    M[:, 0] += q
    n = len(sets)
    return M.T @ M / n, P.T @ M / n


def _moments_closed_form(tm, mk, max_bytes):
    """The closed form of :func:`moments` with the two results as the only ``V1 x V1`` arrays.

    ``u = 1_W / (T v)`` and ``c = r u + q e_0`` take one value on the words, so every rank-one term
    is added in place, block by block ([MASK] row/column, word block), in the same floating-point
    order as the dense formula ``a^2 E[pp^T] + a (u c^T + c u^T) + c c^T``.
    """
    a, r, q = mk.a, mk.r, mk.q
    uw = 1.0 / tm.n_words  # u on a word (0 on [MASK])
    cw = r * uw  # c on a word; c[0] = q
    c = np.full(tm.V1, cw)
    c[0] = q
    Sigma = expected_pp(tm, max_bytes=max_bytes)
    C = a * Sigma
    C[1:, :] += uw * c  # u c^T (row 0 of u c^T is zero)
    Sigma *= a * a
    Sigma[0, 1:] += a * (q * uw)  # a (u c^T + c u^T): the [MASK] row, column, then the word block
    Sigma[1:, 0] += a * (uw * q)
    Sigma[1:, 1:] += a * (uw * cw + cw * uw)
    Sigma[0, 0] += q * q  # c c^T
    Sigma[0, 1:] += q * cw
    Sigma[1:, 0] += cw * q
    Sigma[1:, 1:] += cw * cw
    return Sigma, C
