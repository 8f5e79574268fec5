"""An exact N -> inf attention loss at any T by topic-permutation symmetry (SPEC §4.3, §1.1).

An independent route to the (alpha, beta) closed forms of :mod:`._alpha_beta`: it shares none of
their derivation (no query classes, no normalisers ``Z``, no group counts written by hand). It
evaluates the model's definition (module docstring of :mod:`._attention_loss`) directly:

.. math::
    L = \\frac{1}{\\binom{T}{\\tau}} \\sum_S \\sum_{x} \\sum_{w} P_S(x, w)\\, \\ell(o_S(x), w),
    \\qquad o_S(x) = W\\, \\mathrm{softmax}(S[x, :] + \\log m_S) + b,

with ``P_S(0, w) = p_mask p_S(w)`` and, for a word ``x``,
``P_S(x, w) = p_c p_S(w) [w = x] + (p_r / (T v)) p_S(w)``; ``m_S`` is
:func:`theorycheck.population.masked_density` (or ``p_S`` with ``mask_keys``).

Symmetry reduction (exact, no sampling). Let ``G`` be the group of token permutations that
permute topics and permute words within each topic (fixing [MASK]). If ``S`` and ``W`` (and
``b``) are invariant under ``G`` (``S[g x, g y] = S[x, y]``, ``W[g x, g y] = W[x, y]``), then
``o_{gS}(g x) = g o_S(x)`` and ``P_{gS}(g x, g w) = P_S(x, w)``, so every topic set has the same
loss and ``L`` is the loss of the single set ``S_0 = {0, .., tau - 1}``. Within ``S_0`` the
stabiliser of ``S_0`` in ``G`` permutes the in-set words transitively, and the out-of-set words
transitively, so

.. math::
    L = \\Lambda(0) + \\tau v\\, \\Lambda(x_{in}) + (T - \\tau) v\\, \\Lambda(x_{out}),
    \\qquad \\Lambda(x) = \\sum_w P_{S_0}(x, w)\\, \\ell(o_{S_0}(x), w),

for the representatives ``x_in = 1`` (first word of topic 0) and ``x_out = tau v + 1``. Each
``Lambda`` is one dense softmax over the ``V1`` keys and one application of ``W``: ``O(V1)`` memory
and time given an ``O(V1)`` product ``h -> W h``, so T = 1e5 costs a few vectors of length 1e6.

The (alpha, beta) scores and the block / identity ``W^V`` are ``G``-invariant; the caller must
guarantee invariance for anything else (tests compare with the general evaluator, which
enumerates every topic set, at small T).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, softmax

from .._memory import check_alloc
from .._validate import check_choice, check_loss, check_real
from ..models import Masking, TopicModel, check_models, require_symmetric, token_topic
from ._alpha_beta import _stage1_constants
from ._moments import _masked_density, _set_mixture, _topic_density

__all__ = ["symmetric_attention_loss", "alpha_beta_symmetric_loss", "alpha_beta_score_row", "block_value_apply"]

#: vectors of length V1 alive at once (scores, context, attention, output, target law, temporaries)
_VECTORS = 8


def _query_term(x, score_row, value_apply, logm, p, b, tm, mk, loss):
    """``Lambda(x) = sum_w P(x, w) ell(o(x), w)`` for one query token ``x`` (module docstring)."""
    h = softmax(np.asarray(score_row(x), dtype=np.float64) + logm)
    o = np.asarray(value_apply(h), dtype=np.float64) + b
    if x == 0:
        P = mk.p_mask * p
    else:
        P = (mk.p_r / tm.n_words) * p
        P[x] += mk.p_c * p[x]
    mass = float(P.sum())
    if loss == "squared":  # sum_w P(w) ||o - e_w||^2 = mass ||o||^2 - 2 P.o + mass
        return mass * float(o @ o) - 2.0 * float(P @ o) + mass
    return mass * float(logsumexp(o)) - float(P @ o)


def _check_symmetric(tm, mk):
    """The model arguments of the symmetric route: the paper's model, uniform-tau law, ``p_m > 0``."""
    check_models(tm, mk)
    if tm.prior != "uniform-tau":
        raise ValueError("symmetric_attention_loss needs prior='uniform-tau' (it averages over tau-topic sets)")
    mk.require_masked_positions("symmetric_attention_loss")


def symmetric_attention_loss(
    score_row: Callable[[int], ArrayLike],
    value_apply: Callable[[np.ndarray], ArrayLike],
    tm: TopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    mask_keys: bool = False,
    loss: str = "squared",
    max_bytes: int | None = None,
) -> float:
    """Exact attention loss of a ``G``-invariant model from one topic set and three query tokens.

    .. math:: L = \\Lambda(0) + \\tau v\\, \\Lambda(1) + (T - \\tau) v\\, \\Lambda(\\tau v + 1)

    (module docstring; SPEC §4.3, §1.1).

    Parameters
    ----------
    score_row : callable
        ``score_row(x) -> (V1,)`` the row ``S[x, :]`` (scores of every key token for query ``x``).
    value_apply : callable
        ``value_apply(h) -> (V1,)`` the product ``W h`` for an attention vector ``h``.
    tm : TopicModel
        The paper's model with the uniform-tau prior (any ``T``: the cost is ``O(V1)``).
    mk : Masking
        ``mk.p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias (must be ``G``-invariant: equal on all words).
    mask_keys : bool, default False
        Context ``p_S`` (selected positions hidden as keys) instead of ``m_S``.
    loss : {"squared", "ce"}
        Squared loss or cross-entropy over all V1 outputs.
    max_bytes : int, optional
        Memory limit of the few length-``V1`` vectors.

    Returns
    -------
    L : float
        The exact N -> inf loss (the same value as :func:`attention_loss` for invariant ``S`` and ``W``).

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0``, ``loss`` is unknown, ``b`` has the wrong shape, a
        non-finite entry or different values on two words, or the vectors exceed ``max_bytes``.
    TypeError
        If ``tm`` is a general model, ``mk`` is not a masking, or ``mask_keys`` is not a bool.

    See Also
    --------
    alpha_beta_symmetric_loss : This route on the (alpha, beta) family.
    attention_loss : The dense evaluator over every topic set (no invariance needed).
    alpha_beta_loss : The closed form this route checks independently.

    Notes
    -----
    The caller guarantees the invariance of ``S`` and ``W`` under topic and within-topic word
    permutations; it is not checked (it would cost ``O(V1^2)``).

    References
    ----------
    SPEC §4.3 (the exact loss for any scores), §1.1 (the topic-permutation symmetry of the model).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, symmetric_attention_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = alpha_beta_value_matrix(tm, mk)

    Uniform attention (a zero score row for every query) with the stage-1 ``W``: ``1 - 1/(tau v)``:

    >>> round(symmetric_attention_loss(lambda x: np.zeros(tm.V1), lambda h: W @ h, tm, mk), 12)
    0.75
    """
    require_symmetric(
        tm, "symmetric_attention_loss", "attention_loss(S, W, g, mk) or attention_loss_estimate(S, W, g, mk)"
    )
    _check_symmetric(tm, mk)
    loss = check_loss(loss)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    check_alloc("symmetric_attention_loss", (_VECTORS, tm.V1), max_bytes=max_bytes)  # before the bias vector
    bvec = np.zeros(tm.V1) if b is None else np.asarray(b, dtype=np.float64)
    if bvec.shape != (tm.V1,) or not np.all(np.isfinite(bvec)):
        raise ValueError(f"b must be a finite vector of shape ({tm.V1},), got shape {bvec.shape}")
    if np.ptp(bvec[1:]) > 0.0:
        raise ValueError("b must be equal on all words (topic-permutation invariant)")
    return _symmetric_loss(score_row, value_apply, tm, mk, bvec, mask_keys, loss, max_bytes)


def _symmetric_loss(score_row, value_apply, tm, mk, bvec, mask_keys, loss, max_bytes) -> float:
    """The body of :func:`symmetric_attention_loss` (arguments trusted; ``bvec`` the bias vector)."""
    check_alloc("symmetric_attention_loss", (_VECTORS, tm.V1), max_bytes=max_bytes)
    th = _set_mixture(tm.T, np.arange(tm.tau))
    p = _topic_density(tm, th)
    m = p if mask_keys else _masked_density(tm, mk, th)
    with np.errstate(divide="ignore"):
        logm = np.log(m)
    args = (score_row, value_apply, logm, p, bvec, tm, mk, loss)
    total = _query_term(0, *args) + tm.tau * tm.v * _query_term(1, *args)
    if tm.tau < tm.T:
        total += (tm.T - tm.tau) * tm.v * _query_term(tm.tau * tm.v + 1, *args)
    return float(total)


def alpha_beta_score_row(alpha: float, beta: float, tm: TopicModel):
    """``x -> S[x, :]`` of the (alpha, beta) family without the dense matrix (SPEC §4.3).

    ``S[x, x] = alpha`` and ``S[x, y] = beta`` for distinct words of one topic, 0 otherwise and
    whenever [MASK] (token 0) is involved.
    """
    alpha = check_real("alpha", alpha)
    beta = check_real("beta", beta)
    topics = token_topic(np.arange(tm.V1), tm.v)

    def row(x):
        s = np.zeros(tm.V1)
        if x == 0:
            return s
        s[topics == topics[x]] = beta
        s[x] = alpha
        return s

    return row


def block_value_apply(tm: TopicModel, A: float, B0: float, gamma: float):
    """``h -> W h`` for the block ``W^V`` (``A`` same topic, ``B0`` other topics, ``gamma`` on the
    [MASK] column, row 0 zero; SPEC §4.2) in ``O(V1)``: ``(W h)_w = B0 sum_{y >= 1} h_y +
    (A - B0) sum_{y in t(w)} h_y + gamma h_0``."""
    T, v = tm.T, tm.v

    def apply(h):
        topic_mass = h[1:].reshape(T, v).sum(axis=1)
        out = np.empty_like(h)
        out[0] = 0.0
        out[1:] = np.repeat(B0 * topic_mass.sum() + (A - B0) * topic_mass + gamma * h[0], v)
        return out

    return apply


def _identity_apply(h):
    out = h.copy()
    out[0] = 0.0
    return out


def alpha_beta_symmetric_loss(
    alpha: float,
    beta: float,
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    constants: Sequence[float] | None = None,
    loss: str = "squared",
    max_bytes: int | None = None,
) -> float:
    """The (alpha, beta) family's loss by :func:`symmetric_attention_loss` (the independent route
    to :func:`theorycheck.population.alpha_beta_loss`, SPEC §4.3).

    ``value="block"``: the stage-1 constants (:func:`theorycheck.population.stage1_block_constants`)
    or ``constants=(A, B0, gamma)``; ``"identity"``: identity on words, ``W_00 = 0``.

    Parameters
    ----------
    alpha : float
        Same-word score, finite.
    beta : float
        Same-topic (different word) score, finite.
    tm : TopicModel
        The paper's model with the uniform-tau prior (any ``T``: ``O(V1)`` memory and time).
    mk : Masking
        ``mk.p_m > 0``.
    value : {"block", "identity"}
        The frozen ``W^V``.
    constants : sequence of 3 floats, optional
        Finite ``(A, B0, gamma)`` of another block ``W^V`` (``value="block"``).
    loss : {"squared", "ce"}
        Squared loss or cross-entropy.
    max_bytes : int, optional
        Memory limit of the length-``V1`` vectors.

    Returns
    -------
    L : float
        The exact loss ``L(alpha, beta)``.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0``, ``value`` or ``loss`` is unknown, a score or constant is
        not finite, or the vectors exceed ``max_bytes``.
    TypeError
        If ``tm`` is a general model or ``mk`` is not a masking.

    See Also
    --------
    alpha_beta_loss : The closed form it checks.
    symmetric_attention_loss : The route for any invariant scores and values.
    attention_loss : The dense evaluator (small ``T``).

    References
    ----------
    SPEC §4.3 (the (alpha, beta) family).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_loss, alpha_beta_symmetric_loss
    >>> mk = Masking()
    >>> tm = TopicModel(T=1000, v=10, tau=30)  # C(1000, 30) topic sets: out of reach of enumeration
    >>> round(alpha_beta_symmetric_loss(1.0, 0.5, tm, mk), 10), round(alpha_beta_loss(1.0, 0.5, tm, mk), 10)
    (0.9961958820, 0.9961958820)
    >>> small = TopicModel(T=3, v=2, tau=2)
    >>> a = alpha_beta_symmetric_loss(1.0, 0.5, small, mk, "identity")
    >>> round(a, 10), round(alpha_beta_loss(1.0, 0.5, small, mk, "identity"), 10)
    (0.7279188593, 0.7279188593)
    """
    require_symmetric(
        tm, "alpha_beta_symmetric_loss", "attention_loss(S, W, g, mk) or analysis.landscape.alpha_beta_grid(g, mk)"
    )
    _check_symmetric(tm, mk)
    loss = check_loss(loss)
    check_choice("value", value, ("block", "identity"))
    # the row's topic labels (one more vector) and the loss's vectors, before any of them or the constants
    check_alloc("alpha_beta_symmetric_loss", (_VECTORS + 1, tm.V1), max_bytes=max_bytes)
    if value == "identity":
        apply = _identity_apply
    else:
        A, B0, gamma = _stage1_constants(tm, mk) if constants is None else constants
        if not all(math.isfinite(float(c)) for c in (A, B0, gamma)):
            raise ValueError(f"constants must be three finite numbers (A, B0, gamma), got {constants!r}")
        apply = block_value_apply(tm, float(A), float(B0), float(gamma))
    row = alpha_beta_score_row(alpha, beta, tm)
    return _symmetric_loss(row, apply, tm, mk, np.zeros(tm.V1), False, loss, max_bytes)
