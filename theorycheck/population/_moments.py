"""Infinite-document densities and exact second moments (SPEC §1.1, §2.1, §4.0, §11.1, §11.2, §11.5).

For any topic model (a :class:`~theorycheck.models.GeneralTopicModel`, topic-word matrix ``phi``,
``Phi`` its ``(T, V1)`` token form with column 0 = 0) the limit N -> inf word law of a document with
topic mixture ``theta`` is ``p_theta = Phi^T theta`` and that of its masked context is

.. math::  m_\\theta = a\\, p_\\theta + c, \\qquad c = r u + q e_0,\\quad u = 1_W / n

(``(a, r, q)`` from :class:`~theorycheck.models.Masking`, ``n`` words). With ``mu = E[theta]`` and
``M2 = E[theta theta^T]`` (:meth:`~theorycheck.models.GeneralTopicModel.theta_moments`), SPEC §11.2:

.. math::
    E[p] = \\Phi^T \\mu, \\quad E[p p^T] = \\Phi^T M_2 \\Phi, \\quad
    C = a E[pp^T] + E[p] c^T, \\quad \\Sigma = a^2 E[pp^T] + a (E[p] c^T + c E[p]^T) + c c^T.

Every formula is one ``functools.singledispatch`` function: the generic route (any model, SPEC
§11.2) is the base, and the paper's :class:`~theorycheck.models.TopicModel` registers its closed
form (SPEC §1.1, §4.0: ``p_S = (1/(tau v)) sum_{t in S} 1_t``, ``E[pp^T] = (s_same - s_diff) B +
s_diff J``; no ``phi`` is materialised). The public functions validate their arguments once and
call the dispatcher. ``stage1_factors`` gives the rank-``rho`` factors ``Sigma = X X^T``,
``C = Y X^T`` of SPEC §11.5 used by the generic value loss and the generic solvers.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._memory import check_alloc
from .._validate import check_array, check_choice, check_int
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from ..models.layout import MAX_ENUMERATED_SETS

__all__ = [
    "masked_density",
    "topic_density",
    "topic_sets",
    "expected_pp",
    "moments",
    "stage1_factors",
    "Stage1Factors",
    "MAX_ENUMERATED_SETS",
]

#: Relative eigenvalue threshold of the rank-revealing factor of ``M2`` / ``Cov(theta)``.
RANK_RTOL = 1e-12

_ALTERNATIVE = (
    "the structured routes: value_loss / value_loss_grad (block sums, no moment matrix), "
    "optimal_value_matrix(method='closed-form') (a BlockValueMatrix) or alpha_beta_loss (closed form)"
)
_GENERIC_ALTERNATIVE = (
    "value_loss / value_loss_grad (from the rank-T factors, no moment matrix) or "
    "optimal_value_matrix(method='closed-form') (a factored matrix)"
)


# ----------------------------------------------------------------------------- document laws
def _check_topic_set(tm, topics) -> np.ndarray:
    S = np.asarray(topics)
    if S.ndim != 1 or S.size == 0:
        raise ValueError(f"topics must be a non-empty 1-d sequence of topic indices, got shape {S.shape}")
    if not np.issubdtype(S.dtype, np.integer):
        if not np.all(np.isfinite(S)) or np.any(S != np.round(S)):
            raise ValueError(f"topics must be integers in [0, {tm.T - 1}], got {topics!r}")
        S = S.astype(np.int64)
    if S.min() < 0 or S.max() >= tm.T:
        raise ValueError(f"topics must be integers in [0, {tm.T - 1}], got {topics!r}")
    if np.unique(S).size != S.size:
        raise ValueError(f"topics must be distinct, got {topics!r}")
    if tm.prior == "uniform-tau" and S.size != tm.tau:
        raise ValueError(f"topics must contain exactly tau={tm.tau} topics, got {S.size}")
    return S


def _set_mixture(T: int, S) -> np.ndarray:
    """``theta = 1_S / |S|``, shape ``(T,)`` (``S`` trusted: distinct topic indices)."""
    th = np.zeros(T)
    th[S] = 1.0 / len(S)
    return th


def topic_mixture(tm, topics=None, theta=None) -> np.ndarray:
    """The document's topic mixture, shape ``(T,)``: ``theta = 1_S / |S|`` for a topic set ``S``, or the given
    ``theta`` validated (non-negative, summing to 1); exactly one of the two (SPEC §1.1, §11.1).
    Only ``T``, ``tau`` and ``prior`` of the model are read."""
    if (topics is None) == (theta is None):
        raise ValueError("pass exactly one of topics (a topic set) or theta (a topic mixture)")
    if theta is None:
        return _set_mixture(tm.T, _check_topic_set(tm, topics))
    th = check_array("theta", theta, shape=(tm.T,))
    if np.any(th < 0) or abs(th.sum() - 1.0) > 1e-9:
        raise ValueError("theta must be non-negative and sum to 1")
    return th


def _c_vector(tm, mk) -> np.ndarray:
    """``c = r u + q e_0`` with ``u = 1_W / n`` (SPEC §11.1)."""
    c = np.full(tm.V1, mk.r / tm.n_words)
    c[0] = mk.q
    return c


def _enumerate_sets(tm, max_sets: int = MAX_ENUMERATED_SETS) -> np.ndarray:
    """All ``tau``-subsets in lexicographic order (the body of :func:`topic_sets`; ``max_sets`` trusted)."""
    if tm.prior != "uniform-tau":
        raise ValueError("topic_sets needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)")
    n = tm.n_topic_sets
    if n > max_sets:
        raise ValueError(
            f"C(T={tm.T}, tau={tm.tau}) = {n} topic sets exceeds max_sets={max_sets}; "
            "use a closed form or sample topic sets"
        )
    return np.array(list(itertools.combinations(range(tm.T), tm.tau)), dtype=np.int64).reshape(n, tm.tau)


def topic_sets(tm: GeneralTopicModel, *, max_sets: int = MAX_ENUMERATED_SETS) -> np.ndarray:
    """All ``tau``-subsets of the topics in lexicographic order, shape ``(C(T, tau), tau)`` (uniform-tau law).

    One route for every model (only ``T``, ``tau`` and the law are read). Raises ``ValueError`` if
    there are more than ``max_sets`` of them.

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        A model with the uniform-tau prior.
    max_sets : int, max_sets >= 1
        Largest number ``C(T, tau)`` of sets enumerated (default ``MAX_ENUMERATED_SETS`` = 200,000).

    Returns
    -------
    sets : ndarray of int64, shape (C(T, tau), tau)
        Row ``i`` is the ``i``-th topic set ``S`` (0-based topics, increasing); each has probability
        ``1/C(T, tau)`` under the document law.

    Raises
    ------
    ValueError
        If the prior is Dirichlet (a continuum of mixtures), ``max_sets < 1``, or ``C(T, tau) > max_sets``.

    See Also
    --------
    topic_density : The word law ``p_S`` of one topic set.
    moments : The exact moments, whose ``method="enumerate"`` averages over these sets.
    population_contexts : Every topic set as one weighted context.

    References
    ----------
    SPEC §1.1 (the uniform-tau document law).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.population import topic_sets
    >>> topic_sets(TopicModel(T=4, v=1, tau=2))
    array([[0, 1],
           [0, 2],
           [0, 3],
           [1, 2],
           [1, 3],
           [2, 3]])
    >>> topic_sets(TopicModel(T=30, v=1, tau=15), max_sets=1000)
    Traceback (most recent call last):
    ...
    ValueError: C(T=30, tau=15) = 155117520 topic sets exceeds max_sets=1000; use a closed form or sample topic sets
    """
    check_models(tm, general=True)
    return _enumerate_sets(tm, check_int("max_sets", max_sets, low=1))


# ----------------------------------------------------------------------------- densities
#: Vectors of length V1 alive at once while a density is built (the result, a repeat and a temporary).
_DENSITY_VECTORS = 3
_DENSITY_ALTERNATIVE = (
    "the paper's closed forms, which need no vector over the tokens (alpha_beta_loss, stage1_block_constants, "
    "optimal_value_matrix's BlockValueMatrix)"
)


@functools.singledispatch
def _topic_density(tm: GeneralTopicModel, th: np.ndarray) -> np.ndarray:
    """Generic route (SPEC §11.1): ``p_theta = Phi^T theta``."""
    return tm.word_density(th)


@_topic_density.register
def _(tm: TopicModel, th: np.ndarray) -> np.ndarray:
    """Paper's model (SPEC §1.1): ``p_theta(w) = theta_{t(w)} / v``."""
    p = np.zeros(tm.V1)
    p[1:] = np.repeat(th / tm.v, tm.v)
    return p


def topic_density(
    tm: GeneralTopicModel, topics: ArrayLike | None = None, *, theta: ArrayLike | None = None
) -> np.ndarray:
    """Ground-truth word distribution of a document, shape ``(V1,)`` (entry 0 is 0; SPEC §1.1, §11.1).

    Either a topic set ``topics`` (``p_S = Phi^T 1_S / |S|``; the paper's model:
    ``(1/(|S| v)) sum_{t in S} 1_t``) or a topic mixture ``theta`` (length T, non-negative, summing
    to 1; ``p_theta = Phi^T theta``).

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model (any prior; only ``phi`` or ``T, v`` are read).
    topics : sequence of int, optional
        The document's topic set ``S``: distinct 0-based topics in ``[0, T)``, ``|S| = tau`` for the
        uniform-tau prior.
    theta : array_like, shape (T,), optional
        A topic mixture instead (non-negative, summing to 1 within 1e-9). Exactly one of ``topics``
        and ``theta``.

    Returns
    -------
    p : ndarray, shape (V1,)
        ``p[w]`` for every token, ``p[0] = 0`` ([MASK]); non-negative, sums to 1.

    Raises
    ------
    ValueError
        If both or neither of ``topics`` and ``theta`` are given, the topic set is invalid, or
        ``theta`` is not a probability vector of length ``T``.

    See Also
    --------
    masked_density : The token law of the masked document, ``a p + r u + q e_0``.
    expected_pp : ``E[p p^T]`` over the document law.
    topic_sets : Every topic set of the uniform-tau law.

    References
    ----------
    SPEC §1.1 (the paper's model), §11.1 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, TopicModel
    >>> from theorycheck.population import topic_density
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> topic_density(tm, [0, 2])  # 1/(tau v) on the words of S
    array([0.  , 0.25, 0.25, 0.  , 0.  , 0.25, 0.25])
    >>> topic_density(tm, theta=[0.5, 0.25, 0.25])  # theta_t / v on topic t
    array([0.   , 0.25 , 0.25 , 0.125, 0.125, 0.125, 0.125])

    Overlapping topics: every word has some mass outside ``S``:

    >>> g = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, tau=2)
    >>> np.round(topic_density(g, [0, 1]), 6)
    array([0.      , 0.233333, 0.233333, 0.233333, 0.233333, 0.033333, 0.033333])
    """
    check_models(tm, general=True)
    check_alloc("topic_density", (_DENSITY_VECTORS, tm.V1), alternative=_DENSITY_ALTERNATIVE)
    return _topic_density(tm, topic_mixture(tm, topics, theta))


@functools.singledispatch
def _masked_density(tm: GeneralTopicModel, mk: Masking, th: np.ndarray) -> np.ndarray:
    """Generic route (SPEC §11.1): ``m_theta = a p_theta + c``."""
    return mk.a * _topic_density(tm, th) + _c_vector(tm, mk)


@_masked_density.register
def _(tm: TopicModel, mk: Masking, th: np.ndarray) -> np.ndarray:
    """Paper's model (SPEC §2.1): ``a p_S`` plus ``r / (T v)`` on the words and ``q`` on [MASK]."""
    m = mk.a * _topic_density(tm, th)
    m[1:] += mk.r / tm.n_words
    m[0] += mk.q
    return m


def masked_density(
    tm: GeneralTopicModel, mk: Masking, topics: ArrayLike | None = None, *, theta: ArrayLike | None = None
) -> np.ndarray:
    """Limit empirical token distribution of a masked document, ``m_S = a p_S + r u + q e_0``.

    ``u = 1_W / (T v)`` is the uniform law on the words (random replacements) and ``a``, ``r``, ``q``
    are the masking fractions of :class:`~theorycheck.models.Masking`: as ``N -> inf`` the fraction of
    positions showing each token of a masked document converges to ``m_S``.

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model (any prior).
    mk : Masking
        The masking (any probabilities).
    topics : sequence of int, optional
        The document's topic set ``S`` (0-based topic indices, ``|S| = tau``).
    theta : array_like, shape (T,), optional
        A topic mixture instead of a set (Dirichlet prior). Exactly one of ``topics`` and ``theta``.

    Returns
    -------
    m : ndarray, shape (V1,)
        Non-negative, sums to 1, ``m[0] = q``. SPEC §2.1, §11.1.

    Raises
    ------
    ValueError
        If both or neither of ``topics`` and ``theta`` are given, the topic set is invalid, or
        ``theta`` is not a probability vector of length ``T``.

    See Also
    --------
    topic_density : The unmasked law ``p_S``.
    moments : ``E[m m^T]`` and ``E[p m^T]``, the moments of the stage-1 problem.
    theorycheck.sampling.mask_documents : The finite-``N`` masking whose token frequencies converge to ``m_S``.

    References
    ----------
    SPEC §2.1 (masking and the constants ``a``, ``r``, ``q``), §11.1 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import masked_density
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> m = masked_density(tm, mk, [0, 2])
    >>> m  # q = 0.12 on [MASK], a/(tau v) + r/(T v) in S, r/(T v) outside
    array([0.12   , 0.21875, 0.21875, 0.0025 , 0.0025 , 0.21875, 0.21875])
    >>> round(float(m.sum()), 12)
    1.0
    """
    check_models(tm, mk, general=True)
    check_alloc("masked_density", (_DENSITY_VECTORS, tm.V1), alternative=_DENSITY_ALTERNATIVE)
    return _masked_density(tm, mk, topic_mixture(tm, topics, theta))


# ----------------------------------------------------------------------------- second moments
@functools.singledispatch
def _expected_pp(tm: GeneralTopicModel, max_bytes) -> np.ndarray:
    """Generic route (SPEC §11.2): ``E[p p^T] = Phi^T M2 Phi``, O(T n^2)."""
    check_alloc("expected_pp", (tm.V1, tm.V1), max_bytes=max_bytes, alternative=_GENERIC_ALTERNATIVE)
    _, M2 = tm.theta_moments()
    Phi = tm.topic_token_matrix()
    return (Phi.T @ M2) @ Phi


@_expected_pp.register
def _(tm: TopicModel, max_bytes) -> np.ndarray:
    """Paper's model (SPEC §1.1): ``(s_same - s_diff) B + s_diff J`` written block by block."""
    check_alloc("expected_pp", (tm.V1, tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    s_same, s_diff = tm.pair_moments()
    out = np.zeros((tm.V1, tm.V1))
    words = out[1:, 1:]
    words[...] = s_diff
    blocks = words.reshape(tm.T, tm.v, tm.T, tm.v)  # a view: rows and columns split by topic
    t = np.arange(tm.T)
    blocks[t, :, t, :] = s_same
    return out


def expected_pp(tm: GeneralTopicModel, *, max_bytes: int | None = None) -> np.ndarray:
    """``E[p p^T]`` over the document law, shape ``(V1, V1)`` (SPEC §1.1, §11.2).

    Any model: ``Phi^T M2 Phi``; the paper's model: ``E[p p^T] = (s_same - s_diff) B + s_diff J``
    with ``B`` the within-topic all-ones blocks and ``J`` the all-ones matrix on words (see
    :meth:`TopicModel.pair_moments`). The one dense array is checked against ``max_bytes`` first
    (``theorycheck._memory.check_alloc``).

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model, any prior (``M2 = E[theta theta^T]`` from
        :meth:`~theorycheck.models.GeneralTopicModel.theta_moments`).
    max_bytes : int, optional
        Memory limit of the dense result; default ``$THEORYCHECK_MAX_BYTES`` or half the available memory.

    Returns
    -------
    P : ndarray, shape (V1, V1)
        Symmetric, PSD, entries summing to 1; row and column 0 ([MASK]) are zero.

    Raises
    ------
    ValueError
        If the array exceeds ``max_bytes`` (the message names the structured alternatives).

    See Also
    --------
    moments : ``Sigma`` and ``C``, built from this matrix and the masking.
    topic_density : The ``p`` whose second moment this is.
    TopicModel.pair_moments : The two values ``s_same``, ``s_diff`` of the paper's model.

    References
    ----------
    SPEC §1.1 (the paper's pair moments), §11.2 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.population import expected_pp
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> P = expected_pp(tm)
    >>> np.round(P * 36, 6)  # s_same = 1/(tau T v^2) = 1.5/36, s_diff = kappa s_same = 0.75/36
    array([[0.  , 0.  , 0.  , 0.  , 0.  , 0.  , 0.  ],
           [0.  , 1.5 , 1.5 , 0.75, 0.75, 0.75, 0.75],
           [0.  , 1.5 , 1.5 , 0.75, 0.75, 0.75, 0.75],
           [0.  , 0.75, 0.75, 1.5 , 1.5 , 0.75, 0.75],
           [0.  , 0.75, 0.75, 1.5 , 1.5 , 0.75, 0.75],
           [0.  , 0.75, 0.75, 0.75, 0.75, 1.5 , 1.5 ],
           [0.  , 0.75, 0.75, 0.75, 0.75, 1.5 , 1.5 ]])
    >>> round(float(np.trace(P)), 12), round(tm.expected_p_norm2(), 12)  # tr E[pp^T] = E||p||^2
    (0.25, 0.25)
    """
    check_models(tm, general=True)
    return _expected_pp(tm, max_bytes)


@functools.singledispatch
def _moments(tm: GeneralTopicModel, mk: Masking, method: str, max_bytes):
    """Generic route (SPEC §11.2, §11.5).

    ``"closed-form"``: since ``1^T theta = 1``, ``m = Phi_tilde^T theta`` with ``Phi_tilde = a Phi + 1 c^T``,
    so ``Sigma = Phi_tilde^T M2 Phi_tilde`` and ``C = Phi^T M2 Phi_tilde`` (two ``(V1 x T)(T x V1)``
    products, no ``V1 x V1`` temporaries). ``"enumerate"``: the average of ``m_S m_S^T`` and
    ``p_S m_S^T`` over every ``tau``-subset ``S`` (uniform-tau law only), the independent check.
    """
    check_alloc("moments: Sigma and C", (2, tm.V1, tm.V1), max_bytes=max_bytes, alternative=_GENERIC_ALTERNATIVE)
    a, c = mk.a, _c_vector(tm, mk)
    if method == "enumerate":
        sets = _enumerate_sets(tm)
        check_alloc("moments(method='enumerate')", (2, len(sets), tm.V1), max_bytes=max_bytes,
                    alternative=_GENERIC_ALTERNATIVE)  # fmt: skip
        theta = np.zeros((len(sets), tm.T))
        np.put_along_axis(theta, sets, 1.0 / tm.tau, axis=1)
        P = tm.word_density(theta)
        M = a * P + c
        return M.T @ M / len(sets), P.T @ M / len(sets)
    _, M2 = tm.theta_moments()
    Phi = tm.topic_token_matrix()
    Phi_t = a * Phi + c[None, :]
    return (Phi_t.T @ M2) @ Phi_t, (Phi.T @ M2) @ Phi_t


@_moments.register
def _(tm: TopicModel, mk: Masking, method: str, max_bytes):
    """Paper's model (SPEC §4.0): the closed form block by block, or the enumeration of the topic sets."""
    check_alloc("moments: Sigma and C", (2, tm.V1, tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    if method == "closed-form":
        return _moments_closed_form(tm, mk, max_bytes)
    sets = _enumerate_sets(tm)
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


def _moments_closed_form(tm: TopicModel, mk: Masking, max_bytes):
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
    Sigma = _expected_pp(tm, max_bytes)
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


def moments(
    tm: GeneralTopicModel, mk: Masking, *, method: str = "closed-form", max_bytes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact moments ``(Sigma, C) = (E[m_S m_S^T], E[p_S m_S^T])``, each ``(V1, V1)`` (SPEC §4.0, §11.2).

    Closed form, with ``c = r u + q e_0``:

    .. math::
        C = a E[p p^T] + E[p] c^T,\\qquad
        \\Sigma = a^2 E[p p^T] + a (E[p] c^T + c E[p]^T) + c c^T

    (the paper's model: ``E[p] = u``, SPEC §4.0, block by block; any model: SPEC §11.2, from
    ``E[theta theta^T]`` in O(T n^2)).

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model, any prior.
    mk : Masking
        The masking (any probabilities).
    method : {"closed-form", "enumerate"}
        ``"enumerate"`` averages over every ``tau``-subset (uniform-tau prior only, at most
        ``MAX_ENUMERATED_SETS`` sets); it is the independent check of the closed form.
    max_bytes : int, optional
        Memory limit for the two dense ``V1 x V1`` results (plus the ``C(T, tau) x V1`` topic-set
        matrices of ``"enumerate"``); default ``$THEORYCHECK_MAX_BYTES`` or half the available
        memory. Above it a ``ValueError`` names the structured alternatives.

    Returns
    -------
    Sigma : ndarray, shape (V1, V1)
        ``E[m_S m_S^T]``, symmetric PSD, entries summing to 1.
    C : ndarray, shape (V1, V1)
        ``E[p_S m_S^T]``, entries summing to 1, row 0 zero. The value loss is
        ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1``, minimised where ``W Sigma = C``.

    Raises
    ------
    ValueError
        If ``method`` is unknown, ``"enumerate"`` is asked of the Dirichlet prior or of more than
        ``MAX_ENUMERATED_SETS`` sets, or the arrays exceed ``max_bytes``.

    See Also
    --------
    value_loss : The loss these moments define, evaluated without forming them.
    expected_pp : The ``E[p p^T]`` term.
    masked_density : ``m_S`` for one document.
    theorycheck.solvers.optimal_value_matrix : The minimiser ``C Sigma^+``.

    Notes
    -----
    The structured solvers never call it: ``value_loss`` works from block sums (or the rank-T
    factors of ``stage1_factors``) and ``optimal_value_matrix(method="closed-form")`` returns a
    structured matrix.

    References
    ----------
    SPEC §4.0 (the optimal linear map lemma and the closed form), §11.2 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, moments
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> Sigma, C = moments(tm, mk)
    >>> Sigma.shape, bool(np.allclose(Sigma, Sigma.T)), round(float(Sigma.sum()), 12), round(float(C.sum()), 12)
    ((7, 7), True, 1.0, 1.0)

    The closed form equals the average over the three topic sets, and the stage-1 matrix solves
    the normal equations ``W Sigma = C``:

    >>> Sigma2, C2 = moments(tm, mk, method="enumerate")
    >>> float(max(np.abs(Sigma - Sigma2).max(), np.abs(C - C2).max())) < 1e-15
    True
    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> float(np.abs(W @ Sigma - C).max()) < 1e-15
    True
    """
    check_models(tm, mk, general=True)
    check_choice("method", method, ("closed-form", "enumerate"))
    return _moments(tm, mk, method, max_bytes)


# ----------------------------------------------------------------------------- rank factors (SPEC §11.5)
class Stage1Factors(NamedTuple):
    """Rank-``rho`` factors of the moments (SPEC §11.5): ``Sigma = X X^T``, ``C = Y X^T``.

    Attributes
    ----------
    X, Y : ndarray, shape (V1, rho)
        ``X = Phi_tilde^T L``, ``Y = Phi^T L`` with ``M2 = L L^T`` (``Phi_tilde = a Phi + 1 c^T``).
    L : ndarray, shape (T, rho)
    Ep, Em : ndarray, shape (V1,)
        ``E[p]`` and ``E[m] = a E[p] + c``.
    """

    X: np.ndarray
    Y: np.ndarray
    L: np.ndarray
    Ep: np.ndarray
    Em: np.ndarray


def _psd_factor(M: np.ndarray, ref: float = 0.0) -> np.ndarray:
    """``L`` with ``M = L L^T`` over the eigenvalues above ``RANK_RTOL * max(lambda_max(M), ref)``
    (rank-revealing). ``ref``: the scale of the arrays ``M`` was computed from, e.g. ``||M2||`` for
    ``Cov(theta) = M2 - mu mu^T``, whose round-off (``~ eps ||M2||``) is no direction of the data even
    when it is all there is (a single topic law: ``Cov(theta) = 0`` exactly)."""
    lam, U = np.linalg.eigh((M + M.T) / 2)
    top = max(float(lam.max()) if lam.size else 0.0, ref)
    keep = lam > RANK_RTOL * top if top > 0 else np.zeros(lam.shape, dtype=bool)
    return U[:, keep] * np.sqrt(lam[keep])


def stage1_factors(g: GeneralTopicModel, mk: Masking, *, centred: bool = False) -> Stage1Factors:
    """The factors of SPEC §11.5 in O(n T^2) for any model (no validation: internal callers pass checked models).

    ``centred=True`` factors ``Cov(theta)`` instead of ``M2`` (then ``X X^T = Sigma - E[m] E[m]^T``,
    ``Y X^T = C - E[p] E[m]^T``, the free-bias problem).
    """
    mu, M2 = g.theta_moments()
    L = _psd_factor(M2 - np.outer(mu, mu), ref=float(np.linalg.norm(M2, 2))) if centred else _psd_factor(M2)
    Phi = g.topic_token_matrix()
    Y = Phi.T @ L
    X = mk.a * Y + np.outer(_c_vector(g, mk), L.sum(axis=0))
    Ep = g.word_density(mu)
    return Stage1Factors(X, Y, L, Ep, mk.a * Ep + _c_vector(g, mk))
