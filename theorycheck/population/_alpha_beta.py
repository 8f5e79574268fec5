"""Closed-form population loss of the (alpha, beta) attention family (SPEC §4.3).

Scores (one-hot embeddings, ``W^dec = I``): ``s(x, y) = alpha`` if ``x = y`` is a word,
``beta`` if ``x != y`` are words of the same topic, ``0`` otherwise and whenever [MASK] is
involved. With ``K = e^alpha + (v - 1) e^beta`` and the context densities
``rho = a/(tau v) + r/(T v)`` (in-document word), ``eta = r/(T v)`` (out-of-document word),
``q`` ([MASK]), an in-document query has normaliser ``Z = 1 + rho (K - v)`` and an
out-of-document query ``Z' = 1 + eta (K - v)``.

Everything is evaluated in log space (``log K = logaddexp(alpha, log(v-1) + beta)``,
``log Z = logaddexp(log(1 - rho v), log rho + log K)``) so that ``|alpha|, |beta|`` up to 1e4
(and far beyond) give finite, accurate values. The formulas were derived by us (DER); they are
tested against the general evaluator :func:`theorycheck.population.attention_loss` and against
an mpmath evaluation of the plain (non-log-space) formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._memory import check_alloc
from .._validate import check_choice, check_loss, check_real
from ..models import Masking, TopicModel, check_models, require_symmetric
from ._attention_loss import _attention_loss
from ._stage1_block import _stage1_constants, block_token_matrix, stage1_block_constants, stage1_constant_context

__all__ = [
    "alpha_beta_loss",
    "alpha_beta_loss_logK",
    "alpha_beta_score_matrix",
    "alpha_beta_value_matrix",
    "alpha_beta_ce_loss",
    "stage1_block_constants",
    "stage1_constant_context",
    "block_token_matrix",
    "VALUES",
    "LOSSES",
]

VALUES = ("block", "identity")
LOSSES = ("squared", "ce")


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _check(tm, mk, value=None):
    check_models(tm, mk)
    if tm.prior != "uniform-tau":
        raise ValueError("the (alpha, beta) closed forms need prior='uniform-tau' (a tau-topic document model)")
    if value is not None:
        check_choice("value", value, VALUES)
    mk.require_informative("the (alpha, beta) attention loss")


_VALUE_ALTERNATIVE = (
    "theorycheck.solvers.BlockValueMatrix(*stage1_block_constants(tm, mk), tm.T, tm.v) (O(1) storage, W @ x in "
    "O(V1)), optimal_value_matrix(tm, mk, options={'dense': False}), or the O(1) closed forms "
    "alpha_beta_loss / alpha_beta_loss_logK"
)


def alpha_beta_value_matrix(
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    constants: Sequence[float] | None = None,
    max_bytes: int | None = None,
) -> np.ndarray:
    """The fixed ``W^V`` of the family, shape ``(V1, V1)`` (SPEC §4.2, §4.3).

    ``"block"``: ``W_{ww'} = A`` (same topic), ``B0`` (different topics), ``W_{w0} = gamma``,
    row 0 zero (:func:`stage1_block_constants`, or ``constants=(A, B0, gamma)``), assembled by
    ``block_token_matrix``. ``"identity"``: identity on words, ``W_00 = 0``.
    ``max_bytes``: memory limit of the dense array (``theorycheck._memory.check_alloc``).

    Parameters
    ----------
    tm : TopicModel
        The paper's model with the uniform-tau prior.
    mk : Masking
        ``mk.p_m > 0`` and ``mk.a > 0``.
    value : {"block", "identity"}
        The minimum-norm stage-1 matrix or the identity on words.
    constants : sequence of 3 floats, optional
        ``(A, B0, gamma)`` of another block-constant matrix (``value="block"`` only); default
        :func:`stage1_block_constants`.
    max_bytes : int, optional
        Memory limit of the dense array; default ``$THEORYCHECK_MAX_BYTES`` or half the available memory.

    Returns
    -------
    W : ndarray, shape (V1, V1)
        The value matrix, ``V1 = T v + 1``; row 0 ([MASK] output) is zero.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``value`` is not one of the two, ``p_m = 0`` or ``a = 0``, or the
        array exceeds ``max_bytes`` (the message names the O(1) alternatives).
    TypeError
        If ``tm`` is a general model (use :func:`theorycheck.solvers.stage1_value_matrix`).

    See Also
    --------
    stage1_block_constants : The constants ``(A, B0, gamma)``, O(1).
    theorycheck.solvers.BlockValueMatrix : The same matrix in O(1) storage.
    alpha_beta_score_matrix : The family's score matrix, the other half of the stage-2 model.

    References
    ----------
    SPEC §4.2 (the stage-1 matrix), §4.3(a) and §4.3(b) (the two frozen ``W^V`` of stage 2).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, value_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> np.round(W[:3], 4)  # row 0 zero; gamma, then A (same topic), B0 (other topics)
    array([[ 0.    ,  0.    ,  0.    ,  0.    ,  0.    ,  0.    ,  0.    ],
           [ 0.1394,  0.5557,  0.5557, -0.0223, -0.0223, -0.0223, -0.0223],
           [ 0.1394,  0.5557,  0.5557, -0.0223, -0.0223, -0.0223, -0.0223]])

    It attains the stage-1 minimum ``1 - 1/(tau v)`` of the value loss:

    >>> round(value_loss(W, tm, mk), 12), 1 - 1 / (2 * 2)
    (0.75, 0.75)
    >>> alpha_beta_value_matrix(tm, mk, "identity")[:3, :3]
    array([[0., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.]])
    """
    require_symmetric(tm, "alpha_beta_value_matrix", "solvers.stage1_value_matrix(g, mk)")
    _check(tm, mk, value)
    return _value_matrix(tm, mk, value, constants, max_bytes)


def _value_matrix(tm, mk, value, constants, max_bytes) -> np.ndarray:
    """The body of :func:`alpha_beta_value_matrix` (arguments trusted)."""
    if value == "identity":
        check_alloc("alpha_beta_value_matrix", (tm.V1, tm.V1), max_bytes=max_bytes, alternative=_VALUE_ALTERNATIVE)
        W = np.eye(tm.V1)
        W[0, 0] = 0.0
        return W
    A, B0, gamma = _stage1_constants(tm, mk) if constants is None else constants
    return block_token_matrix(
        tm.T,
        tm.v,
        A,
        B0,
        mask_col=gamma,
        what="alpha_beta_value_matrix",
        alternative=_VALUE_ALTERNATIVE,
        max_bytes=max_bytes,
    )


def alpha_beta_score_matrix(alpha: float, beta: float, tm: TopicModel, *, max_bytes: int | None = None) -> np.ndarray:
    """Score matrix ``S`` (``S[x, y]`` = score of key token y for query token x), shape ``(V1, V1)`` (SPEC §4.3).

    ``S[x, x] = alpha`` for words, ``S[x, y] = beta`` for distinct words of one topic, 0 else.
    ``max_bytes``: memory limit of the dense array (``theorycheck._memory.check_alloc``).

    Parameters
    ----------
    alpha : float
        Same-word score, finite.
    beta : float
        Same-topic (different word) score, finite.
    tm : TopicModel
        The paper's model (any prior).
    max_bytes : int, optional
        Memory limit of the dense array; default ``$THEORYCHECK_MAX_BYTES`` or half the available memory.

    Returns
    -------
    S : ndarray, shape (V1, V1)
        Symmetric; row and column 0 ([MASK]) are zero, as are different-topic pairs.

    Raises
    ------
    ValueError
        If ``alpha`` or ``beta`` is not finite, or the array exceeds ``max_bytes``.
    TypeError
        If ``tm`` is a general model (the message names ``analysis.landscape.family_scores``), or
        ``alpha`` / ``beta`` is not a real number.

    See Also
    --------
    alpha_beta_value_matrix : The frozen ``W^V`` of the family.
    alpha_beta_loss : The loss of these scores in closed form, without the dense matrix.
    attention_loss : The exact loss of any score matrix, e.g. this one.

    References
    ----------
    SPEC §4.3 (the (alpha, beta) family).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.population import alpha_beta_score_matrix
    >>> S = alpha_beta_score_matrix(1.0, 0.5, TopicModel(T=2, v=2, tau=1))
    >>> S
    array([[0. , 0. , 0. , 0. , 0. ],
           [0. , 1. , 0.5, 0. , 0. ],
           [0. , 0.5, 1. , 0. , 0. ],
           [0. , 0. , 0. , 1. , 0.5],
           [0. , 0. , 0. , 0.5, 1. ]])
    >>> bool(np.array_equal(S, S.T))
    True
    """
    require_symmetric(
        tm, "alpha_beta_score_matrix", "analysis.landscape.family_scores(alpha, beta, solvers.cotopic_matrix(g))"
    )
    check_models(tm)
    return _score_matrix(check_real("alpha", alpha), check_real("beta", beta), tm, max_bytes)


def _score_matrix(alpha: float, beta: float, tm, max_bytes) -> np.ndarray:
    """The body of :func:`alpha_beta_score_matrix` (arguments trusted)."""
    return block_token_matrix(
        tm.T,
        tm.v,
        beta,
        0.0,
        diag=alpha,
        what="alpha_beta_score_matrix",
        alternative="the O(1) closed forms alpha_beta_loss(alpha, beta, tm, mk) / alpha_beta_loss_logK",
        max_bytes=max_bytes,
    )


def _as_float_array(name, x):
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number or array, got {type(x).__name__}") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def _densities(tm, mk):
    a, r, q = mk.a, mk.r, mk.q
    T, v, tau = tm.T, tm.v, tm.tau
    rho = a / (tau * v) + r / (T * v)
    eta = r / (T * v)
    return rho, eta, q


def _rest(tm, rho, eta, q):
    """``(D_in, D_out) = (1 - rho v, 1 - eta v)`` summed from their non-negative parts (no cancellation)."""
    T, v, tau = tm.T, tm.v, tm.tau
    D_in = (tau - 1) * rho * v + (T - tau) * eta * v + q
    D_out = tau * rho * v + max(T - tau - 1, 0) * eta * v + q
    return D_in, D_out


def _ell(loss, groups, o_target, dgroups=None, do_target=None):
    """Loss of one query class from its word outputs ``groups = [(count, o), ...]`` (``o_0 = 0``).

    sq: ``sum count o^2 - 2 o_target + 1``; ce: ``log(1 + sum count e^o) - o_target`` (softmax over
    all V1 outputs, the [MASK] output being 0). Groups with count 0 are skipped (no inf * 0).
    With ``dgroups`` (the derivatives ``o'`` of the outputs, same order) and ``do_target`` it
    returns ``(ell, ell')`` by the chain rule.
    """
    live = [(n, o, do) for (n, o), do in zip(groups, dgroups or [0.0] * len(groups)) if n > 0]
    if loss == "squared":
        val = sum(n * o * o for n, o, _ in live) - 2.0 * o_target + 1.0
        if dgroups is None:
            return val
        return val, sum(2.0 * n * o * do for n, o, do in live) - 2.0 * do_target
    lse = np.log1p(sum(n * np.exp(o) for n, o, _ in live))
    if dgroups is None:
        return lse - o_target
    # softmax-weighted derivative, shifted by the largest output (finite for large outputs)
    m = 0.0
    for _, o, _ in live:
        m = np.maximum(m, o)
    num = sum(n * np.exp(o - m) * do for n, o, do in live)
    den = np.exp(-m) + sum(n * np.exp(o - m) for n, o, _ in live)
    return lse - o_target, num / den - do_target


def _block_loss_logK(logK, tm, mk, constants=None, loss="squared", deriv=False):
    """Block-``W^V`` loss as a function of ``x = log K`` (broadcast array); with ``deriv`` also
    ``dL/dx``.

    Derivative: with ``Z = D + rho K`` the in-document attention ``H1 = rho K / Z`` has
    ``H1' = H1 (1 - H1)`` and every other class weight ``X = const / Z`` has ``X' = -X H1`` (the
    same with ``eta``, ``Z'``, ``H1p`` for an out-of-document query); the outputs
    ``c + d H`` with ``c = B0 + (gamma - B0) h0`` follow by the chain rule.
    """
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, q = _densities(tm, mk)
    D_in, D_out = _rest(tm, rho, eta, q)
    A, B0, gamma = _stage1_constants(tm, mk) if constants is None else constants
    d = A - B0
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    lr, le = _log(rho), _log(eta)

    # Shifted logs: with m = max(log K, 0), logZs = log Z - m = logaddexp(log D - m, log rho + (log K - m))
    # is O(1) where the query topic dominates, so the weights exp(log num - m - logZs) keep full
    # relative accuracy at log K ~ 1e4 (forming log Z ~ 1e4 first and subtracting it loses ~1e4 ulp).
    m = np.maximum(logK, 0.0)
    xK = logK - m  # exact: 0 or log K

    def ex(lnum, logZs):  # exp(lnum - m - logZs) with log 0 = -inf -> 0 (no inf * 0)
        return np.exp((lnum - m) - logZs)

    def query_class(logZ, H1, others, h0, counts, target):
        """``(ell, ell')`` of one query class: ``H1`` the query topic's weight, ``others`` the
        other class weights (derivative ``-X H1``), ``target`` the index of the target group."""
        c = B0 * (1.0 - h0) + gamma * h0
        dc = -(gamma - B0) * h0 * H1
        Hs = [H1] + others
        dHs = [H1 * (1.0 - H1)] + [-X * H1 for X in others]
        groups = [(n, c + d * H) for n, H in zip(counts, Hs)]
        dgroups = [dc + d * dH for dH in dHs]
        return _ell(loss, groups, groups[target][1], dgroups, dgroups[target])

    with np.errstate(divide="ignore", invalid="ignore"):
        # in-document query (topic t1 in S): Z = D + rho K, D = 1 - rho v >= 0
        logZ = np.logaddexp(_log(D_in) - m, lr + xK)  # log Z - m
        H1 = np.exp(lr + xK - logZ)
        Ho = ex(_log(rho * v), logZ) if tau > 1 else 0.0  # unused (weight 0) when tau = 1
        Hout = ex(_log(eta * v), logZ)
        h0 = ex(_log(q), logZ)
        counts = [v, (tau - 1) * v, (T - tau) * v]
        l_same, dl_same = query_class(logZ, H1, [Ho, Hout], h0, counts, 0)
        l_other, dl_other = query_class(logZ, H1, [Ho, Hout], h0, counts, 1) if tau > 1 else (0.0, 0.0)
        # out-of-document query (topic t1 not in S): Z' = D' + eta K
        if tau < T and p_r > 0:
            logZp = np.logaddexp(_log(D_out) - m, le + xK)  # log Z' - m
            H1p = np.exp(le + xK - logZp)
            Hin = ex(_log(rho * v), logZp)
            Houtp = ex(_log(eta * v), logZp)
            h0p = ex(_log(q), logZp)
            l_out, dl_out = query_class(logZp, H1p, [Hin, Houtp], h0p, [v, tau * v, (T - tau - 1) * v], 1)
        else:
            l_out = dl_out = 0.0
    # [MASK] query: uniform over the context (does not depend on K)
    cm = B0 * (1.0 - q) + gamma * q
    l_mask = _ell(loss, [(tau * v, cm + d * rho * v), ((T - tau) * v, cm + d * eta * v)], cm + d * rho * v)
    w_same, w_other, w_out = p_c + p_r / T, p_r * (tau - 1) / T, p_r * (T - tau) / T
    L = p_mask * l_mask + w_same * l_same + w_other * l_other + w_out * l_out
    if not deriv:
        return L
    return L, w_same * dl_same + w_other * dl_other + w_out * dl_out


def _identity_loss(al, be, tm, mk, loss="squared"):
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, q = _densities(tm, mk)
    D_in, D_out = _rest(tm, rho, eta, q)
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    lr, le = _log(rho), _log(eta)
    with np.errstate(divide="ignore", invalid="ignore"):
        # shifted logs (as in _block_loss_logK): m = max(alpha, beta, 0), logZ = log Z - m is O(1)
        # where the scores dominate, so e^alpha / Z and e^beta / Z keep full relative accuracy at 1e4
        m = np.maximum(al if v == 1 else np.maximum(al, be), 0.0)  # v = 1: no other word, beta unused
        xa, xb = al - m, be - m
        xK = xa if v == 1 else np.logaddexp(xa, math.log(v - 1) + xb)  # log K - m
        # in-document query: h = rho e^alpha / Z (the query word), rho e^beta / Z (v-1 words of its
        # topic), rho / Z (other document words), eta / Z (outside words), q / Z ([MASK], output 0)
        logZ = np.logaddexp(_log(D_in) - m, lr + xK)
        h_a = np.exp(lr + xa - logZ)
        h_b = np.exp(lr + xb - logZ) if v > 1 else 0.0
        h_in = np.exp((lr - m) - logZ)
        groups = [(1, h_a), (v - 1, h_b), ((tau - 1) * v, h_in), ((T - tau) * v, np.exp((le - m) - logZ))]
        l_xw = _ell(loss, groups, h_a)
        l_xs = _ell(loss, groups, h_b) if v > 1 else 0.0
        l_xin = _ell(loss, groups, h_in) if tau > 1 else 0.0
        if tau < T and p_r > 0:
            logZp = np.logaddexp(_log(D_out) - m, le + xK)  # log Z' - m
            h_inp = np.exp((lr - m) - logZp)
            groups = [
                (1, np.exp(le + xa - logZp)),
                (v - 1, np.exp(le + xb - logZp) if v > 1 else 0.0),
                (tau * v, h_inp),
                ((T - tau - 1) * v, np.exp((le - m) - logZp)),
            ]
            l_out = _ell(loss, groups, h_inp)
        else:
            l_out = 0.0
    l_mask = _ell(loss, [(tau * v, rho), ((T - tau) * v, eta)], rho)
    return (
        p_mask * l_mask
        + (p_c + p_r / (T * v)) * l_xw
        + p_r * (v - 1) / (T * v) * l_xs
        + p_r * (tau - 1) / T * l_xin
        + p_r * (T - tau) / T * l_out
    )


def alpha_beta_loss(
    alpha: ArrayLike, beta: ArrayLike, tm: TopicModel, mk: Masking, value: str = "block", *, loss: str = "squared"
) -> float | np.ndarray:
    """Exact N -> inf MLM loss ``L(alpha, beta)`` of the (alpha, beta) family (SPEC §4.3).

    Parameters
    ----------
    alpha, beta : float or array_like
        Same-word and same-topic scores; broadcast against each other.
    tm, mk : TopicModel, Masking
        uniform-tau prior; ``p_m > 0`` and ``a > 0``.
    value : {"block", "identity"}
        Frozen ``W^V``: the minimum-norm stage-1 matrix (:func:`stage1_block_constants`) or the
        identity on words with ``W_00 = 0`` (:func:`alpha_beta_value_matrix`).
    loss : {"squared", "ce"}
        Squared loss (the theory) or
        cross-entropy ``-log softmax(W^V h)_w`` over all V1 outputs
        (closed form: every class has a handful of distinct outputs; tested against the general
        evaluator ``attention_loss(..., loss="ce")``).

    Returns
    -------
    L : float or ndarray
        The loss ``L(alpha, beta)``: a float for scalar arguments, else an array of the broadcast
        shape of ``(alpha, beta)``.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0`` or ``a = 0``, ``value`` or ``loss`` is not one of the
        allowed names, or ``alpha`` / ``beta`` has a NaN or an infinite entry.
    TypeError
        If ``tm`` is a general model (use :func:`attention_loss` with
        ``analysis.landscape.family_scores``) or ``alpha`` / ``beta`` is not numeric.

    See Also
    --------
    alpha_beta_loss_logK : The block loss as a function of ``log K`` (it depends on nothing else).
    alpha_beta_score_matrix : The score matrix of the family, for :func:`attention_loss`.
    theorycheck.solvers.optimal_attention : The certified minimiser over the family.
    alpha_beta_symmetric_loss : An independent evaluation through the topic-permutation symmetry.

    Notes
    -----
    .. math::
        L = (1 - p_c - p_r)\\,\\ell_{mask} + \\sum_{\\text{query classes}} P(\\text{class})\\,\\ell_{class},

    block (sq): ``ell = v sum_t (c + d H_t)^2 - 2 (c + d H_{t(w)}) + 1`` (ce:
    ``log(1 + v sum_t e^{c + d H_t}) - (c + d H_{t(w)})``) with ``c = B0 (1 - h_0) + gamma h_0``,
    ``d = 1/(a v)``; depends on ``(alpha, beta)`` only through ``K``. identity:
    ``ell = sum_{y >= 1} h_y^2 - 2 h_w + 1``. Query classes: [MASK]; the target word (kept, or
    random and equal); for identity a same-topic other word; another in-document topic; an
    out-of-document topic. Cost O(1) per point. Evaluated in log space: finite and accurate for
    ``|alpha|, |beta|`` up to 1e4 and beyond.

    References
    ----------
    SPEC §4.3 (the exact loss for any scores and the query classes), §4.3(a) (block ``W^V``),
    §4.3(b) (identity ``W^V``); Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*,
    ICML 2023, arXiv:2303.04245, Theorem 3.

    Examples
    --------
    >>> import math
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_loss
    >>> tm, mk = TopicModel(T=10, v=10, tau=3), Masking()

    Uniform attention (``alpha = beta = 0``, ``K = v``) gives the stage-1 optimum ``1 - 1/(tau v)``:

    >>> round(alpha_beta_loss(0.0, 0.0, tm, mk), 12), round(1 - 1 / 30, 12)
    (0.966666666667, 0.966666666667)

    The block loss depends only on ``K = e^alpha + (v - 1) e^beta``; at ``K = 70.05`` (the optimum ``K*`` of
    SPEC §4.3(a) to 4 digits) two different pairs give the same value, below the uniform one:

    >>> a = math.log(70.05 / 10)
    >>> round(alpha_beta_loss(a, a, tm, mk), 9), round(alpha_beta_loss(math.log(70.05 - 9), 0.0, tm, mk), 9)
    (0.961770246, 0.961770246)

    Arrays broadcast; the identity ``W^V`` (at its optimum, ``L* = 0.892836`` in SPEC §4.3(b)) and
    cross-entropy are options:

    >>> np.round(alpha_beta_loss([0.0, 1.0, 2.0], 0.0, tm, mk), 6)
    array([0.966667, 0.965963, 0.964554])
    >>> round(alpha_beta_loss(4.7105, -0.1503, tm, mk, "identity"), 6)  # the identity optimum L*
    0.892836
    >>> round(alpha_beta_loss(0.0, 0.0, tm, mk, loss="ce"), 6)
    4.591805
    """
    require_symmetric(
        tm,
        "alpha_beta_loss",
        "attention_loss(S, W, g, mk) with S = analysis.landscape.family_scores(alpha, beta, solvers.cotopic_matrix(g))",
    )
    _check(tm, mk, value)
    loss = check_loss(loss)
    return family_loss(_as_float_array("alpha", alpha), _as_float_array("beta", beta), tm, mk, value, loss)


def family_loss(al, be, tm: TopicModel, mk: Masking, value: str, loss: str) -> float | np.ndarray:
    """:func:`alpha_beta_loss` on arguments already validated (float arrays, the paper's model,
    ``value`` and ``loss`` checked): the route of callers that evaluate it many times."""
    al, be = np.broadcast_arrays(al, be)
    if value == "block":
        with np.errstate(divide="ignore"):
            logK = al if tm.v == 1 else np.logaddexp(al, math.log(tm.v - 1) + be)
        out = _block_loss_logK(logK, tm, mk, loss=loss)
    else:
        out = _identity_loss(al, be, tm, mk, loss=loss)
    out = np.asarray(out, dtype=np.float64)
    return float(out) if out.ndim == 0 else out


def logK_loss(logK, tm: TopicModel, mk: Masking, loss: str) -> float | np.ndarray:
    """:func:`alpha_beta_loss_logK` with the stage-1 constants on validated arguments (inner loops)."""
    out = np.asarray(_block_loss_logK(np.asarray(logK, dtype=np.float64), tm, mk, None, loss), dtype=np.float64)
    return float(out) if out.ndim == 0 else out


def alpha_beta_loss_logK(
    logK: ArrayLike, tm: TopicModel, mk: Masking, *, constants: Sequence[float] | None = None, loss: str = "squared"
) -> float | np.ndarray:
    """Block-``W^V`` loss as a function of ``log K`` (``K = e^alpha + (v-1) e^beta``), broadcast.

    ``constants``: optional ``(A, B0, gamma)`` of another block-constant ``W^V`` (row 0 zero);
    default the stage-1 minimum-norm constants.

    With a block-constant ``W^V`` the loss of the (alpha, beta) family depends on the scores only
    through ``K``, so this is the whole landscape on one line; ``log K = log v`` is uniform attention.

    Parameters
    ----------
    logK : float or array_like
        ``log K``, any finite real (``K > 0``); broadcast.
    tm : TopicModel
        The paper's model with the uniform-tau prior.
    mk : Masking
        ``mk.p_m > 0`` and ``mk.a > 0``.
    constants : sequence of 3 floats, optional
        Finite ``(A, B0, gamma)``; default :func:`stage1_block_constants`.
    loss : {"squared", "ce"}
        Squared loss (the theory) or cross-entropy over all V1 outputs.

    Returns
    -------
    float or ndarray
        ``L(log K)`` with the shape of ``logK`` (the formula of :func:`alpha_beta_loss`, block case).

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0`` or ``a = 0``, ``loss`` is unknown, ``logK`` is not finite,
        or ``constants`` is not three finite numbers.
    TypeError
        If ``tm`` is a general model.

    See Also
    --------
    alpha_beta_loss : The same loss in ``(alpha, beta)``, also for the identity ``W^V``.
    stage1_block_constants : The default constants.
    theorycheck.solvers.optimal_attention : Minimises this function of ``log K``, certified.

    References
    ----------
    SPEC §4.3(a) (the block closed form and its derivative in ``log K``), §4.5 (its use for the
    stage-2 onset).

    Examples
    --------
    >>> import math
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_loss_logK
    >>> tm, mk = TopicModel(T=10, v=10, tau=3), Masking()
    >>> np.round(alpha_beta_loss_logK([math.log(10), math.log(70.05)], tm, mk), 6)  # K = v, then K near K*
    array([0.966667, 0.96177 ])

    Extreme scores stay finite (log-space evaluation):

    >>> bool(np.isfinite(alpha_beta_loss_logK(1e4, tm, mk)))
    True
    """
    require_symmetric(
        tm,
        "alpha_beta_loss_logK",
        "analysis.landscape.alpha_beta_grid(g, mk) or solvers.optimal_attention(g, mk)",
    )
    _check(tm, mk)
    loss = check_loss(loss)
    lk = _as_float_array("logK", logK)
    if constants is not None:
        constants = tuple(float(c) for c in constants)
        if len(constants) != 3 or not all(math.isfinite(c) for c in constants):
            raise ValueError(f"constants must be three finite numbers (A, B0, gamma), got {constants!r}")
    out = np.asarray(_block_loss_logK(lk, tm, mk, constants, loss), dtype=np.float64)
    return float(out) if out.ndim == 0 else out


def alpha_beta_ce_loss(
    alpha: float, beta: float, tm: TopicModel, mk: Masking, value: str = "block", *, mask_keys: bool = False
) -> float:
    """Cross-entropy loss ``E[-log softmax(W^V h)_w]`` of the family, from the general CE evaluator.

    Builds ``S`` (:func:`alpha_beta_score_matrix`) and ``W^V`` (:func:`alpha_beta_value_matrix`) and
    calls :func:`theorycheck.population.attention_loss` with ``loss="ce"`` (softmax over all V1
    outputs, including [MASK]). Scalar ``alpha``, ``beta``; cost O(C(T, tau) V1^3). It is the dense,
    independent route to ``alpha_beta_loss(..., loss="ce")`` (O(1)), and the only one with key masking.

    Parameters
    ----------
    alpha : float
        Same-word score, finite.
    beta : float
        Same-topic (different word) score, finite.
    tm : TopicModel
        The paper's model with the uniform-tau prior (small: every topic set is enumerated).
    mk : Masking
        ``mk.p_m > 0`` and ``mk.a > 0``.
    value : {"block", "identity"}
        The frozen ``W^V`` (:func:`alpha_beta_value_matrix`).
    mask_keys : bool, default False
        Whether the keys are the unmasked words only (context law ``p_S`` instead of ``m_S``).

    Returns
    -------
    L : float
        ``E[-log softmax(W^V h(x))_w]`` over documents, selected positions and their targets.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0`` or ``a = 0``, ``value`` is unknown, ``alpha`` or ``beta``
        is not finite, or a dense array exceeds the memory limit.
    TypeError
        If ``tm`` is a general model or ``mask_keys`` is not a bool.

    See Also
    --------
    alpha_beta_loss : The O(1) closed form (``loss="ce"``).
    attention_loss : The general evaluator this function calls.
    alpha_beta_score_matrix : The scores it builds.

    References
    ----------
    SPEC §4.3 (the exact loss for any scores, CE variant), §2.2 (the MLM objective).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_ce_loss, alpha_beta_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> round(alpha_beta_ce_loss(1.0, 0.5, tm, mk), 10)
    1.836351552
    >>> round(alpha_beta_loss(1.0, 0.5, tm, mk, loss="ce"), 10)  # the closed form agrees
    1.836351552
    """
    require_symmetric(tm, "alpha_beta_ce_loss", "attention_loss(S, W, g, mk, loss='ce')")
    _check(tm, mk, value)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    S = _score_matrix(check_real("alpha", alpha), check_real("beta", beta), tm, None)
    W = _value_matrix(tm, mk, value, None, None)
    return _attention_loss(tm, S, W, mk, None, bool(mask_keys), None, None, None, None, "ce", None)
