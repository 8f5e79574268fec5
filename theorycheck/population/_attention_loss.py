"""Exact N -> inf MLM loss of the one-layer one-hot attention model for ANY scores (SPEC §4.3).

Model (one-hot ``W^E = I``, ``W^dec = I``): a query position showing token ``x'`` attends to the
context of its masked document with

.. math::  h(x')_y \\propto m(y)\\, e^{S[x', y]},\\qquad o(x') = W h(x') + b,

where, as N -> inf, the context law is ``m = m_S = a p_S + r u + q e_0`` (theory: every position
is a key) or ``m = p_S`` (``mask_keys=True``, the official code: selected positions are hidden).
The query at a selected position shows the original word ``w ~ p_S`` w.p. ``p_c``, a uniformly
random word w.p. ``p_r`` and [MASK] otherwise; the target is ``w``. Hence, with
``omega_S(x)`` = probability that the query shows ``x`` and ``omega t_S(x)`` = the
corresponding joint law of the target,

.. math::
    L = \\frac{1}{\\binom{T}{\\tau}} \\sum_S \\sum_{x} \\Big[\\omega_S(x) \\|o_S(x)\\|^2
        - 2\\, (\\omega t)_S(x)^T o_S(x) + \\omega_S(x)\\Big],

``omega_S(0) = 1 - p_c - p_r``, ``(omega t)_S(0) = (1 - p_c - p_r) p_S``; for a word x,
``omega_S(x) = p_c p_S(x) + p_r/(T v)`` and ``(omega t)_S(x) = p_c p_S(x) e_x + (p_r/(Tv)) p_S``.

For any :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.4) the same formula holds per
document law ``theta`` with ``p_S`` replaced by ``p_theta = Phi^T theta`` and ``u = 1_W / n``:

.. math::
    \\ell(\\theta) = \\sum_x \\Big[\\omega_\\theta(x) \\|o_\\theta(x)\\|^2
        - 2\\, (\\omega t)_\\theta(x)^T o_\\theta(x) + \\omega_\\theta(x)\\Big],\\qquad
    L = E_\\theta[\\ell(\\theta)],

``omega_theta(w) = p_c p_theta(w) + p_r / n``, ``(omega t)_theta(w, .) = p_c p_theta(w) e_w +
(p_r / n) p_theta``: the exact average over all ``C(T, tau)`` sets (uniform-tau), over ``n_sets``
sampled sets, or over ``n_theta`` i.i.d. draws ``theta ~ Dir(alpha)`` (Dirichlet; ``seed`` or ``rng``
required) with the standard error ``sd(ell(theta_i)) / sqrt(n)`` (:func:`attention_loss_estimate`).

The loss and its gradient are ``functools.singledispatch`` functions: the generic route (any
model, the dense path over document laws) is the base, the paper's
:class:`~theorycheck.models.TopicModel` registers the structured route. On the paper's model three
implementations are tested against each other:

- the structured squared loss (the default; :mod:`._attention_kernels`): the context density
  takes three values, so per query token everything reduces to sums over the ``T + 1`` token
  groups, ``O(V1^3)`` once and then ``O(V1 tau^2)`` per topic set in Numba;
- ``_dense_sets`` (:mod:`._attention_dense`): stacks the attention matrices ``H_S`` of a chunk of topic sets and forms
  ``O = H W^T`` with one large GEMM; it also gives the cross-entropy loss and the exact gradients
  with respect to ``S``, ``W`` and ``b`` (used by :func:`attention_loss_grad`);
- ``_attention_loss_ref``: a plain loop over topic sets, query tokens and targets.

Every path estimates its dense allocations first (:func:`theorycheck._memory.check_alloc`, the
``max_bytes=`` argument or ``$THEORYCHECK_MAX_BYTES``) and refuses with a ``ValueError`` that names
the structured alternative.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, overload

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, softmax

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_int, check_loss, check_rng
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from ._attention_dense import _DENSE_ARRAYS, _context, _dense_sets, _per_theta
from ._attention_kernels import STRUCTURED_MAX_ENTRIES, structured_sq
from ._moments import MAX_ENUMERATED_SETS, _enumerate_sets, masked_density, topic_density, topic_sets

__all__ = [
    "attention_loss",
    "attention_loss_grad",
    "attention_loss_estimate",
    "AttentionLossGrad",
    "SetSampledLoss",
    "LossEstimate",
    "LOSSES",
    "DEFAULT_N_THETA",
]

#: Loss names (:func:`theorycheck._validate.check_loss`).
LOSSES = ("squared", "ce")
#: Default number of sampled topic proportions for the Dirichlet law.
DEFAULT_N_THETA = 4096
_GENERIC_ALTERNATIVE = "a smaller model, or value_loss (uniform attention) for large vocabularies"
_ALTERNATIVE = (
    "alpha_beta_loss / alpha_beta_loss_logK (closed forms of the (alpha, beta) family), value_loss "
    "(uniform attention, block sums) or attention_loss(loss='squared') without gradients (structured path)"
)


class SetSampledLoss(NamedTuple):
    """Loss averaged over ``n_sets`` uniformly sampled topic sets (exact in every other respect).

    ``mean`` is unbiased for the exact loss, ``stderr`` its standard error
    (sample standard deviation of the per-set losses over ``sqrt(n_sets)``).

    Parameters
    ----------
    mean : float
        ``(1/n) sum_i ell(S_i)`` over the sampled topic sets ``S_i`` (each loss exact, N -> inf).
    stderr : float, stderr >= 0
        ``sd(ell(S_i)) / sqrt(n_sets)`` (sample standard deviation, ``ddof=1``).
    n_sets : int, n_sets >= 2
        Number of sampled topic sets.

    See Also
    --------
    attention_loss : Returns it when ``n_sets`` is given.
    LossEstimate : The same estimate for any document law, with an ``exact`` flag.
    attention_loss_grad : Its ``loss`` field is one of these with ``n_sets``.

    References
    ----------
    SPEC §4.3 (the exact loss as an average over topic sets), §11.4 (sampled document laws).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, attention_loss
    >>> tm, mk = TopicModel(T=4, v=2, tau=2), Masking()
    >>> S = np.random.default_rng(0).normal(size=(tm.V1, tm.V1))
    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> est = attention_loss(S, W, tm, mk, n_sets=100, seed=1)
    >>> est.n_sets, round(est.mean, 4), round(est.stderr, 4)
    (100, 0.7832, 0.0029)
    >>> exact = attention_loss(S, W, tm, mk)  # all C(4, 2) = 6 sets
    >>> round(exact, 4), abs(est.mean - exact) < 2 * est.stderr
    (0.784, True)
    """

    mean: float
    stderr: float
    n_sets: int


class AttentionLossGrad(NamedTuple):
    """Loss and exact gradients of :func:`attention_loss` (unpacks as ``L, dS, dW, db``).

    Parameters
    ----------
    loss : float or SetSampledLoss
        The loss; a :class:`SetSampledLoss` when topic sets were sampled (``n_sets``).
    dS : ndarray, shape (V1, V1)
        ``dL/dS`` (the scores).
    dW : ndarray, shape (V1, V1)
        ``dL/dW`` (the value matrix).
    db : ndarray, shape (V1,)
        ``dL/db`` (the decoder bias), at ``b = 0`` when no bias is passed.

    See Also
    --------
    attention_loss_grad : Returns it.
    attention_loss : The loss alone, on the faster structured route.
    EmbeddingLossGrad : The gradient tuple of the embedding model.

    References
    ----------
    SPEC §4.3 (the exact loss and its gradients).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, attention_loss_grad
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> g = attention_loss_grad(np.zeros((tm.V1, tm.V1)), alpha_beta_value_matrix(tm, mk), tm, mk)
    >>> g._fields
    ('loss', 'dS', 'dW', 'db')
    >>> L, dS, dW, db = g
    >>> round(L, 12), dS.shape, db.shape  # uniform attention, stage-1 W: 1 - 1/(tau v) = 0.5
    (0.5, (7, 7), (7,))
    """

    loss: float | SetSampledLoss
    dS: np.ndarray
    dW: np.ndarray
    db: np.ndarray


class LossEstimate(NamedTuple):
    """The attention loss with its error: ``value`` (exact when ``exact``), ``stderr`` and ``n``.

    ``n`` is the number of averaged document laws (topic sets or sampled ``theta``); ``stderr`` is
    0 for the exact enumeration of the uniform-tau law, else ``sd(ell) / sqrt(n)`` (SPEC §11.4).

    Parameters
    ----------
    value : float
        ``(1/n) sum_i ell(theta_i)``, the loss averaged over the document laws.
    stderr : float, stderr >= 0
        Its standard error, 0 when ``exact``.
    n : int, n >= 1
        Number of averaged document laws.
    exact : bool
        Whether every topic set was enumerated (then ``value`` is the exact loss).

    See Also
    --------
    attention_loss_estimate : Returns it.
    SetSampledLoss : The sampled-sets result of :func:`attention_loss`.
    theorycheck.sampling.MCEstimate : The finite-document Monte Carlo counterpart.

    References
    ----------
    SPEC §11.4 (the attention loss of any document law and its standard error).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import attention_loss_estimate
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> est = attention_loss_estimate(np.zeros((7, 7)), np.eye(7), tm, Masking())
    >>> est.n, est.stderr, est.exact
    (3, 0.0, True)
    """

    value: float
    stderr: float
    n: int
    exact: bool


# ----------------------------------------------------------------------------- validation
def _check_arrays(S, W, b, V1, mask_keys, max_bytes):
    """``max_bytes``, ``mask_keys`` and the ``(V1, V1)`` scores / values and ``(V1,)`` bias of an attention loss
    (either model kind); returns ``S, W, b, mask_keys`` as float arrays and a bool."""
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    S = check_array("S", S, shape=(V1, V1))
    W = check_array("W", W, shape=(V1, V1))
    b = None if b is None else check_array("b", b, shape=(V1,))
    return S, W, b, bool(mask_keys)


def _check_n_sets(model, n_sets, hint: str):
    """``n_sets`` (an int >= 2: sampled topic sets), or ``None`` when the ``C(T, tau)`` topic sets of the
    uniform-tau law can be enumerated (at most :data:`MAX_ENUMERATED_SETS`; above it ``hint`` says what to do)."""
    if n_sets is not None:
        return check_int("n_sets", n_sets, low=2)
    if model.n_topic_sets > MAX_ENUMERATED_SETS:
        raise ValueError(
            f"C(T={model.T}, tau={model.tau}) = {model.n_topic_sets} topic sets exceeds {MAX_ENUMERATED_SETS}; {hint}"
        )
    return None


def _validate(S, W, tm, mk, b, mask_keys, loss, max_bytes):
    """The arguments shared by both routes (the model types are checked by the caller)."""
    mk.require_masked_positions("attention_loss")
    loss = check_loss(loss)
    S, W, b, mask_keys = _check_arrays(S, W, b, tm.V1, mask_keys, max_bytes)
    return S, W, b, mask_keys, loss


def _paper_counts(tm, n_sets, n_theta):
    """The paper's model: uniform-tau law only, ``n_sets`` (or ``None``: every set), no ``n_theta``."""
    _no_n_theta(n_theta)
    if tm.prior != "uniform-tau":
        raise ValueError("attention_loss needs prior='uniform-tau' (it averages over tau-topic sets)")
    return _check_n_sets(tm, n_sets, "pass n_sets to sample topic sets")


def _no_n_theta(n_theta):
    if n_theta is not None:
        raise ValueError(
            "n_theta (sampled Dirichlet topic proportions) needs a GeneralTopicModel with prior='dirichlet' "
            "(GeneralTopicModel.from_topic_model(tm)); for a TopicModel pass n_sets"
        )


def _sample_sets(tm, n, rng):
    keys = rng.random((n, tm.T))
    sets = np.argpartition(keys, tm.tau - 1, axis=1)[:, : tm.tau] if tm.tau < tm.T else np.tile(np.arange(tm.T), (n, 1))
    return np.sort(sets, axis=1).astype(np.int64)


def _get_sets(tm, n_sets, rng, seed, max_bytes):
    if n_sets is None:
        if rng is not None or seed is not None:
            raise ValueError("rng/seed are only used with n_sets (sampled topic sets); pass n_sets or drop rng/seed")
        return _enumerate_sets(tm)
    rng = check_rng(rng, seed)
    # the draw keys (n_sets x T), the sets and the per-set partial sums of the kernels
    check_alloc("attention_loss(n_sets=...): sampled topic sets", (n_sets, tm.T + 64), max_bytes=max_bytes,
                alternative="a smaller n_sets (the standard error falls as 1/sqrt(n_sets))")  # fmt: skip
    return _sample_sets(tm, n_sets, rng)


def _finish(per_set, n_sets):
    if n_sets is None:
        return float(per_set.mean())
    return SetSampledLoss(float(per_set.mean()), float(per_set.std(ddof=1) / math.sqrt(len(per_set))), len(per_set))


def _structured_sq(S, W, b, sets, tm, mk, mask_keys, fast=True, max_bytes=None):
    """Per-set squared losses by the structured Numba kernels (:func:`._attention_kernels.structured_sq`)."""
    context = _context(tm, mk, mask_keys)
    masking = (mk.p_mask, mk.p_c, mk.p_r)
    return structured_sq(S, W, b, sets, tm.token_topics(), context, masking, tm.T, tm.v, fast=fast, max_bytes=max_bytes)


# ----------------------------------------------------------------------------- dense batched
def _check_dense(tm, what, max_bytes):
    """Refuse the dense path when even one topic set per chunk does not fit in ``max_bytes``."""
    check_alloc(what, (_DENSE_ARRAYS, tm.V1, tm.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)


# ----------------------------------------------------------------------------- generic route (SPEC §11.4)
def _generic_counts(g, n_sets, n_theta, max_bytes):
    """Any model: ``n_sets`` (uniform-tau) or ``n_theta`` (Dirichlet, default ``DEFAULT_N_THETA``) and the
    dense path's memory."""
    if g.prior == "uniform-tau":
        if n_theta is not None:
            raise ValueError("n_theta is for prior='dirichlet'; with prior='uniform-tau' pass n_sets to sample sets")
        n_sets = _check_n_sets(
            g, n_sets, "pass n_sets (and seed) to average over sampled topic sets with a standard error"
        )
    else:
        if n_sets is not None:
            raise ValueError("n_sets is for prior='uniform-tau'; with prior='dirichlet' pass n_theta")
        n_theta = DEFAULT_N_THETA if n_theta is None else check_int("n_theta", n_theta, low=2)
    check_alloc("attention_loss (general dense path)", (_DENSE_ARRAYS, g.V1, g.V1), max_bytes=max_bytes,
                alternative=_GENERIC_ALTERNATIVE)  # fmt: skip
    return n_sets, n_theta


def _thetas(g, n_sets, n_theta, rng, seed, max_bytes):
    """Document laws ``theta`` (n, T) and whether they are sampled."""
    if g.prior == "uniform-tau" and n_sets is None:
        if rng is not None or seed is not None:
            raise ValueError("rng/seed are only used with n_sets (sampled topic sets); pass n_sets or drop rng/seed")
        sets = _enumerate_sets(g)
        sampled = False
    else:
        if rng is None and seed is None:
            raise ValueError("seed (or rng) is required to sample document laws (n_sets / n_theta), for a "
                             "deterministic value; e.g. seed=0")  # fmt: skip
        rng = check_rng(rng, seed)
        n = n_sets if n_sets is not None else n_theta
        check_alloc("attention_loss: sampled document laws", (n, 2 * g.T + 64), max_bytes=max_bytes,
                    alternative="a smaller n_sets / n_theta (the standard error falls as 1/sqrt(n))")  # fmt: skip
        if g.prior == "dirichlet":
            return rng.dirichlet(g.concentration, size=n_theta), True
        sets = _sample_sets(g, n_sets, rng)
        sampled = True
    theta = np.zeros((len(sets), g.T))
    theta[np.arange(len(sets))[:, None], sets] = 1.0 / g.tau
    return theta, sampled


def _estimate(per, sampled):
    n = len(per)
    se = float(per.std(ddof=1) / math.sqrt(n)) if sampled else 0.0
    return LossEstimate(float(per.mean()), se, n, not sampled)


def _run_generic(g, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, want_grad):
    """The generic route on validated arguments: ``(n_sets, LossEstimate, grads or None)``."""
    n_sets, n_theta = _generic_counts(g, n_sets, n_theta, max_bytes)
    theta, sampled = _thetas(g, n_sets, n_theta, rng, seed, max_bytes)
    per, grads = _per_theta(S, W, b, theta, g, mk, mask_keys, loss, want_grad)
    return n_sets, _estimate(per, sampled), grads


@functools.singledispatch
def _attention_loss(tm: GeneralTopicModel, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes):
    """Generic route (SPEC §11.4): the dense path over the document laws; a float, or a
    :class:`SetSampledLoss` when ``n_sets`` samples topic sets."""
    n_sets, est, _ = _run_generic(tm, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, False)
    if n_sets is not None:
        return SetSampledLoss(est.value, est.stderr, est.n)
    return est.value


@functools.singledispatch
def _attention_loss_grad(tm: GeneralTopicModel, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes):
    """Generic route (SPEC §4.3, §11.4): the averages of the per-law gradients of the dense path."""
    n_sets, est, (dS, dW, db) = _run_generic(
        tm, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, True
    )
    n = est.n
    value = SetSampledLoss(est.value, est.stderr, n) if n_sets is not None else est.value
    return AttentionLossGrad(value, dS / n, dW / n, db / n)


# ----------------------------------------------------------------------------- paper's model (SPEC §4.3)
@_attention_loss.register
def _(tm: TopicModel, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes):
    """Paper's model: the structured squared loss (Numba group sums), else the dense path over topic sets."""
    n_sets = _paper_counts(tm, n_sets, n_theta)
    structured = loss == "squared" and tm.V1 * (tm.T + 1) ** 2 <= STRUCTURED_MAX_ENTRIES
    if not structured:
        what = "attention_loss (dense path)" if loss == "squared" else "attention_loss(loss='ce')"
        _check_dense(tm, what, max_bytes)
    sets = _get_sets(tm, n_sets, rng, seed, max_bytes)
    if structured:
        per_set = _structured_sq(S, W, b, sets, tm, mk, mask_keys, max_bytes=max_bytes)
    else:  # cross-entropy, or group tables too large: memory-bounded dense path (O(V1^3) per set)
        per_set = _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss=loss)[0]
    return _finish(per_set, n_sets)


@_attention_loss_grad.register
def _(tm: TopicModel, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes):
    """Paper's model: the dense path over topic sets (stacked GEMMs)."""
    n_sets = _paper_counts(tm, n_sets, n_theta)
    _check_dense(tm, "attention_loss_grad", max_bytes)
    sets = _get_sets(tm, n_sets, rng, seed, max_bytes)
    per_set, dS, dW, db = _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss=loss, want_grad=True)
    n = len(sets)
    return AttentionLossGrad(_finish(per_set, n_sets), dS / n, dW / n, db / n)


# ----------------------------------------------------------------------------- public
@overload
def attention_loss(
    S: ArrayLike,
    W: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    mask_keys: bool = False,
    n_sets: None = None,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    loss: str = "squared",
    max_bytes: int | None = None,
    n_theta: int | None = None,
) -> float: ...


@overload
def attention_loss(
    S: ArrayLike,
    W: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    mask_keys: bool = False,
    n_sets: int | None = None,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    loss: str = "squared",
    max_bytes: int | None = None,
    n_theta: int | None = None,
) -> float | SetSampledLoss: ...


def attention_loss(
    S: ArrayLike,
    W: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    mask_keys: bool = False,
    n_sets: int | None = None,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    loss: str = "squared",
    max_bytes: int | None = None,
    n_theta: int | None = None,
) -> float | SetSampledLoss:
    """Exact infinite-document MLM loss of the one-layer one-hot attention model (SPEC §4.3, §11.4).

    .. math::
        L = \\frac{1}{\\binom{T}{\\tau}} \\sum_S \\sum_{x} \\Big[\\omega_S(x) \\|o_S(x)\\|^2
            - 2\\, (\\omega t)_S(x)^T o_S(x) + \\omega_S(x)\\Big]
        \\quad (\\text{squared}),\\qquad o_S(x) = W\\, \\mathrm{softmax}(S[x, :] + \\log m_S) + b.

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Scores: ``S[x, y]`` of key ``y`` for query ``x`` (row 0: [MASK]); any finite values (log-sum-exp).
    W : array_like, shape (V1, V1)
        Value matrix ``W^V`` (decoder ``W^dec = I``), finite.
    tm : GeneralTopicModel or TopicModel
        The topic model; the paper's model needs the uniform-tau prior.
    mk : Masking
        ``mk.p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    mask_keys : bool, default False
        False (theory): the context is ``m_S = a p_S + r u + q e_0``. True (official code): selected
        positions are hidden as keys, the context is ``p_S``; queries still show kept / random / [MASK] tokens.
    n_sets : int, n_sets >= 2, optional
        Average over ``n_sets`` uniformly sampled topic sets instead of enumerating all
        ``C(T, tau)`` (required when that exceeds 200000).
    rng : numpy.random.Generator, optional
        For ``n_sets`` or ``n_theta`` only; required (or ``seed``) when a general model's laws are sampled.
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``.
    loss : {"squared", "ce"}
        Squared loss ``||o - e_w||^2`` over all V1 outputs, or cross-entropy ``-log softmax(o)_w``.
    max_bytes : int, optional
        Memory limit of the evaluator's arrays (default ``$THEORYCHECK_MAX_BYTES`` or half the memory).
    n_theta : int, n_theta >= 2, optional
        :class:`~theorycheck.models.GeneralTopicModel` with the Dirichlet law only: number of
        sampled topic proportions (SPEC §11.4; :func:`attention_loss_estimate` gives the standard error).

    Returns
    -------
    L : float or SetSampledLoss
        The exact loss; a :class:`SetSampledLoss` ``(mean, stderr, n_sets)`` when ``n_sets`` is given
        (a general Dirichlet model: the estimate, its error by :func:`attention_loss_estimate`).

    Raises
    ------
    ValueError
        If ``mk.p_m = 0``, ``S``, ``W`` or ``b`` has the wrong shape or a non-finite entry, ``loss`` is
        unknown, ``C(T, tau) > 200000`` without ``n_sets``, ``rng`` / ``seed`` are given without sampling
        (or missing for sampled Dirichlet laws), ``n_sets`` / ``n_theta`` do not fit the prior, or an
        array exceeds ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking, or ``mask_keys`` is not a bool.

    See Also
    --------
    attention_loss_grad : The loss with its exact gradients in ``S``, ``W`` and ``b``.
    attention_loss_estimate : The loss with its standard error, for any document law.
    alpha_beta_loss : The O(1) closed form on the (alpha, beta) family of scores.
    value_loss : Uniform attention (``S = 0``) in closed form.

    Notes
    -----
    Any model runs the generic route (SPEC §11.4: ``p_S`` replaced by ``p_theta = Phi^T theta``, dense over
    document laws); the paper's model its structured route (SPEC §4.3), chosen by the dispatcher.

    The paper's model, squared loss: ``O(V1^3)`` dense products once, then ``O(V1 tau^2)`` per topic set (Numba);
    above ``STRUCTURED_MAX_ENTRIES`` group-table entries (``V1 (T+1)^2``) the dense path is used. Cross-entropy
    needs every output coordinate: ``O(V1^3)`` per topic set (stacked GEMMs).

    References
    ----------
    SPEC §4.3 (the exact loss for any scores), §11.4 (any topic-word matrix); Li, Li and Risteski,
    *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Section 4.

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking, TopicModel
    >>> from theorycheck.population import (
    ...     alpha_beta_loss, alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss)
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = alpha_beta_value_matrix(tm, mk)

    Uniform attention (``S = 0``) gives the stage-1 value ``1 - 1/(tau v)``:

    >>> round(attention_loss(np.zeros((tm.V1, tm.V1)), W, tm, mk), 12)
    0.75

    On the (alpha, beta) family it equals the closed form, on both routes:

    >>> S = alpha_beta_score_matrix(1.0, 0.5, tm)
    >>> round(attention_loss(S, W, tm, mk), 10), round(alpha_beta_loss(1.0, 0.5, tm, mk), 10)
    (0.736803582, 0.736803582)
    >>> round(attention_loss(S, W, GeneralTopicModel.from_topic_model(tm), mk), 10)
    0.736803582

    Hiding the selected positions as keys (the official code's convention) changes the value:

    >>> round(attention_loss(S, W, tm, mk, mask_keys=True), 10)
    0.7383199864
    """
    check_models(tm, mk, general=True)
    S, W, b, mask_keys, loss = _validate(S, W, tm, mk, b, mask_keys, loss, max_bytes)
    return _attention_loss(tm, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes)


def attention_loss_grad(
    S: ArrayLike,
    W: ArrayLike,
    tm: GeneralTopicModel,
    mk: Masking,
    b: ArrayLike | None = None,
    *,
    mask_keys: bool = False,
    n_sets: int | None = None,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    loss: str = "squared",
    max_bytes: int | None = None,
    n_theta: int | None = None,
) -> AttentionLossGrad:
    """Loss and exact gradients ``(L, dL/dS, dL/dW, dL/db)`` of :func:`attention_loss` (SPEC §4.3, §11.4).

    .. math::
        \\partial_{o_S(x)} L = 2(\\omega_S(x) o_S(x) - (\\omega t)_S(x)) \\ \\text{(squared)},\\quad
        \\partial_W L = \\sum G^T H,\\quad \\partial_b L = \\sum G,\\quad
        \\partial_{S[x,:]} L = \\sum_S h \\odot (W^T g - (h^T W^T g) 1),

    averaged over topic sets (stacked GEMMs, ``O(V1^3)`` per set) or document laws (a general model). With
    ``n_sets`` the loss is a :class:`SetSampledLoss` and the gradients the sampled averages' exact gradients
    (deterministic for a fixed ``seed``). ``dL/db`` is returned even when ``b is None`` (at ``b = 0``).

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Scores (query token, key token), finite.
    W : array_like, shape (V1, V1)
        Value matrix ``W^V``, finite.
    tm : GeneralTopicModel or TopicModel
        The topic model; the paper's model needs the uniform-tau prior.
    mk : Masking
        ``mk.p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    mask_keys : bool, default False
        Context ``p_S`` (selected positions hidden as keys) instead of ``m_S``.
    n_sets : int, n_sets >= 2, optional
        Sampled topic sets instead of all ``C(T, tau)``.
    rng : numpy.random.Generator, optional
        Randomness of the sampled document laws.
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``.
    loss : {"squared", "ce"}
        Squared loss or cross-entropy.
    max_bytes : int, optional
        Memory limit of the stacked dense arrays.
    n_theta : int, n_theta >= 2, optional
        Sampled topic proportions (a general model with the Dirichlet law).

    Returns
    -------
    AttentionLossGrad
        ``(loss, dS, dW, db)``, a named tuple.

    Raises
    ------
    ValueError
        As :func:`attention_loss`; the dense path's memory estimate is checked against ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking, or ``mask_keys`` is not a bool.

    See Also
    --------
    attention_loss : The loss alone (structured route, faster).
    AttentionLossGrad : The result tuple.
    value_loss_grad : The gradient in ``W`` under uniform attention, in closed form.

    References
    ----------
    SPEC §4.3 (the exact loss and gradients), §11.4 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, attention_loss, attention_loss_grad
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = alpha_beta_value_matrix(tm, mk)

    At uniform attention the stage-1 ``W`` is optimal (``dW = 0``), while raising the same-topic
    scores lowers the loss (``dS < 0`` there, ``> 0`` across topics): stage 2 starts (SPEC §4.5):

    >>> L, dS, dW, db = attention_loss_grad(np.zeros((tm.V1, tm.V1)), W, tm, mk)
    >>> round(L, 12), float(np.abs(dW).max()) < 1e-12
    (0.75, True)
    >>> float(dS[1, 2]) < 0 < float(dS[1, 3])
    True

    The score gradient against a central finite difference:

    >>> S = np.random.default_rng(0).normal(size=(tm.V1, tm.V1))
    >>> D = np.random.default_rng(1).normal(size=(tm.V1, tm.V1))
    >>> L, dS, dW, db = attention_loss_grad(S, W, tm, mk)
    >>> h = 1e-6
    >>> fd = (attention_loss(S + h * D, W, tm, mk) - attention_loss(S - h * D, W, tm, mk)) / (2 * h)
    >>> abs(fd - float((dS * D).sum())) < 1e-8
    True
    """
    check_models(tm, mk, general=True)
    S, W, b, mask_keys, loss = _validate(S, W, tm, mk, b, mask_keys, loss, max_bytes)
    return _attention_loss_grad(tm, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes)


def attention_loss_estimate(
    S: ArrayLike, W: ArrayLike, tm: GeneralTopicModel, mk: Masking, b: ArrayLike | None = None, *,
    mask_keys: bool = False, n_sets: int | None = None, n_theta: int | None = None,
    rng: np.random.Generator | None = None, seed: int | np.random.SeedSequence | None = None,
    loss: str = "squared", max_bytes: int | None = None,
) -> LossEstimate:  # fmt: skip
    """The attention loss of SPEC §11.4 with its standard error, for any document law.

    .. math:: \\hat L = \\frac{1}{n} \\sum_{i=1}^n \\ell(\\theta_i),\\qquad
              \\mathrm{SE} = \\mathrm{sd}(\\ell(\\theta_i)) / \\sqrt{n}

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Scores (query token, key token), finite.
    W : array_like, shape (V1, V1)
        Value matrix ``W^V``, finite.
    tm : GeneralTopicModel or TopicModel
        Always the generic route (the paper's model too: its ``phi`` is materialised).
    mk : Masking
        ``p_m > 0``.
    b : array_like, shape (V1,), optional
        Decoder bias.
    mask_keys : bool, default False
        Context ``p_S`` (selected positions hidden as keys) instead of ``m_S``.
    n_sets : int, optional
        Uniform-tau: average over ``n_sets >= 2`` sampled topic sets instead of all ``C(T, tau)``
        (required above 200000 sets).
    n_theta : int, optional
        Dirichlet: number of i.i.d. ``theta ~ Dir(alpha)``, ``>= 2`` (default ``DEFAULT_N_THETA`` = 4096).
    rng : numpy.random.Generator, optional
        Randomness of the samples; ``rng`` or ``seed`` is required whenever the laws are sampled.
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``.
    loss : {"squared", "ce"}
        Squared loss or cross-entropy.
    max_bytes : int, optional
        Memory limit of the dense path's arrays.

    Returns
    -------
    LossEstimate
        ``(value, stderr, n, exact)``; ``stderr = 0`` and ``exact = True`` for the enumeration.

    Raises
    ------
    ValueError
        As :func:`attention_loss`, and if the laws are sampled without ``rng`` or ``seed``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    attention_loss : The loss alone (the structured route on the paper's model).
    LossEstimate : The result tuple.
    theorycheck.sampling.mc_attention_loss : The finite-document Monte Carlo estimate.

    References
    ----------
    SPEC §11.4 (the attention loss of any document law).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking, TopicModel
    >>> from theorycheck.population import attention_loss_estimate
    >>> mk = Masking()
    >>> S, W = np.zeros((7, 7)), np.eye(7)

    Enumerated topic sets: the exact value, no error:

    >>> est = attention_loss_estimate(S, W, TopicModel(T=3, v=2, tau=1), mk)
    >>> round(est.value, 12), est.stderr, est.n, est.exact
    (0.522875, 0.0, 3, True)

    A Dirichlet law is sampled (a seed is required) and the estimate carries its standard error:

    >>> g = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, prior="dirichlet", alpha=0.5)
    >>> est = attention_loss_estimate(S, W, g, mk, n_theta=200, seed=0)
    >>> est.n, est.exact, round(est.value, 4), round(est.stderr, 4)
    (200, False, 0.7712, 0.0039)
    """
    check_models(tm, mk, general=True)
    S, W, b, mask_keys, loss = _validate(S, W, tm, mk, b, mask_keys, loss, max_bytes)
    return _run_generic(tm, S, W, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, False)[1]


def _attention_loss_ref(S, W, tm: TopicModel, mk: Masking, b=None, *, mask_keys=False, loss="squared", sets=None):
    """Plain numpy reference: loop over topic sets, query tokens x' and targets w.

    ``L = mean_S sum_{x', w} P(x', w | S) ell(W h(x') + b, w)`` with
    ``P(0, w) = p_mask p_S(w)``, ``P(w, w) += p_c p_S(w)``, ``P(x', w) += p_r p_S(w) / (T v)``.
    """
    loss = check_loss(loss)
    S = np.asarray(S, float)
    W = np.asarray(W, float)
    bvec = np.zeros(tm.V1) if b is None else np.asarray(b, float)
    sets = topic_sets(tm) if sets is None else sets
    n_words = tm.n_words
    vals = []
    for st in sets:
        p = topic_density(tm, st)
        m = p.copy() if mask_keys else masked_density(tm, mk, st)
        with np.errstate(divide="ignore"):
            logits = S + np.log(m)[None, :]
        O = softmax(logits, axis=1) @ W.T + bvec
        P = np.zeros((tm.V1, tm.V1))  # P[x', w]
        P[0, :] = mk.p_mask * p
        P[1:, :] += mk.p_r * p[None, :] / n_words
        P[np.arange(1, tm.V1), np.arange(1, tm.V1)] += mk.p_c * p[1:]
        tot = 0.0
        for x in range(tm.V1):
            o = O[x]
            for w in np.nonzero(P[x])[0]:
                if loss == "squared":
                    e = np.zeros(tm.V1)
                    e[w] = 1.0
                    ell = np.sum((o - e) ** 2)
                else:
                    ell = logsumexp(o) - o[w]
                tot += P[x, w] * ell
        vals.append(tot)
    return float(np.mean(vals))
