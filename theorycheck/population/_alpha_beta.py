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

import numpy as np

from .._validate import check_choice
from ..config import Masking, TopicModel, check_models

__all__ = [
    "alpha_beta_loss",
    "alpha_beta_loss_logK",
    "alpha_beta_score_matrix",
    "alpha_beta_value_matrix",
    "alpha_beta_ce_loss",
    "stage1_block_constants",
    "VALUES",
]

VALUES = ("block", "identity")
LOSSES = ("sq", "ce")


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _check(tm, mk, value=None):
    check_models(tm, mk)
    if tm.prior != "uniform-tau":
        raise ValueError("the (alpha, beta) closed forms need prior='uniform-tau' (a tau-topic document model)")
    if value is not None:
        check_choice("value", value, VALUES)
    mk.require_informative("the (alpha, beta) attention loss")


def stage1_block_constants(tm: TopicModel, mk: Masking) -> tuple[float, float, float]:
    """``(A, B0, gamma)`` of the minimum-norm stage-1 value matrix (SPEC §4.2, DER).

    .. math::
        B_0 = -\\frac{r (a + r) + T v q^2}{a v T [(a + r)^2 + T v q^2]},\\quad
        A = B_0 + \\frac{1}{a v},\\quad
        \\gamma = \\frac{q (T v B_0 + 1/a)}{a + r}.

    Independent of ``tau``. This is ``C Sigma^+`` when ``tau < T`` (tested in
    ``tests/test_attention_closed_form.py``); for ``tau = T`` every document has the same ``p_S``
    and the minimum-norm solution is different (the formula still defines a block ``W^V``).
    """
    _check(tm, mk)
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    B0 = -(r * (a + r) + T * v * q * q) / (a * v * T * ((a + r) ** 2 + T * v * q * q))
    A = B0 + 1.0 / (a * v)
    gamma = q * (T * v * B0 + 1.0 / a) / (a + r)
    return A, B0, gamma


def alpha_beta_value_matrix(tm: TopicModel, mk: Masking, value: str = "block", *, constants=None) -> np.ndarray:
    """The fixed ``W^V`` of the family, shape ``(V1, V1)``.

    ``"block"``: ``W_{ww'} = A`` (same topic), ``B0`` (different topics), ``W_{w0} = gamma``,
    row 0 zero (:func:`stage1_block_constants`, or ``constants=(A, B0, gamma)``).
    ``"identity"``: identity on words, ``W_00 = 0``.
    """
    _check(tm, mk, value)
    V1 = tm.V1
    if value == "identity":
        W = np.eye(V1)
        W[0, 0] = 0.0
        return W
    A, B0, gamma = stage1_block_constants(tm, mk) if constants is None else constants
    top = tm.token_topics()
    W = np.zeros((V1, V1))
    same = top[1:, None] == top[None, 1:]
    W[1:, 1:] = np.where(same, A, B0)
    W[1:, 0] = gamma
    return W


def alpha_beta_score_matrix(alpha: float, beta: float, tm: TopicModel) -> np.ndarray:
    """Score matrix ``S`` (``S[x, y]`` = score of key token y for query token x), shape ``(V1, V1)``.

    ``S[x, x] = alpha`` for words, ``S[x, y] = beta`` for distinct words of one topic, 0 else.
    """
    from .._validate import check_real

    check_models(tm)
    alpha = check_real("alpha", alpha)
    beta = check_real("beta", beta)
    top = tm.token_topics()
    S = np.zeros((tm.V1, tm.V1))
    S[1:, 1:] = np.where(top[1:, None] == top[None, 1:], beta, 0.0)
    idx = np.arange(1, tm.V1)
    S[idx, idx] = alpha
    return S


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
    if loss == "sq":
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


def _block_loss_logK(logK, tm, mk, constants=None, loss="sq", deriv=False):
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
    A, B0, gamma = stage1_block_constants(tm, mk) if constants is None else constants
    d = A - B0
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    lr, le = _log(rho), _log(eta)

    def ex(lnum, logZ):  # exp(lnum - logZ) with log 0 = -inf -> 0 (no inf * 0)
        return np.exp(lnum - logZ)

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
        logZ = np.logaddexp(_log(D_in), lr + logK)
        H1 = ex(lr + logK, logZ)
        Ho = ex(_log(rho * v), logZ) if tau > 1 else 0.0  # unused (weight 0) when tau = 1
        Hout = ex(_log(eta * v), logZ)
        h0 = ex(_log(q), logZ)
        counts = [v, (tau - 1) * v, (T - tau) * v]
        l_same, dl_same = query_class(logZ, H1, [Ho, Hout], h0, counts, 0)
        l_other, dl_other = query_class(logZ, H1, [Ho, Hout], h0, counts, 1) if tau > 1 else (0.0, 0.0)
        # out-of-document query (topic t1 not in S): Z' = D' + eta K
        if tau < T and p_r > 0:
            logZp = np.logaddexp(_log(D_out), le + logK)
            H1p = ex(le + logK, logZp)
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


def _identity_loss(al, be, tm, mk, loss="sq"):
    T, v, tau = tm.T, tm.v, tm.tau
    rho, eta, q = _densities(tm, mk)
    D_in, D_out = _rest(tm, rho, eta, q)
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    lr, le = _log(rho), _log(eta)
    with np.errstate(divide="ignore", invalid="ignore"):
        logK = al if v == 1 else np.logaddexp(al, math.log(v - 1) + be)
        # in-document query: h = rho e^alpha / Z (the query word), rho e^beta / Z (v-1 words of its
        # topic), rho / Z (other document words), eta / Z (outside words), q / Z ([MASK], output 0)
        logZ = np.logaddexp(_log(D_in), lr + logK)
        h_a = np.exp(lr + al - logZ)
        h_b = np.exp(lr + be - logZ) if v > 1 else 0.0
        h_in = np.exp(lr - logZ)
        groups = [(1, h_a), (v - 1, h_b), ((tau - 1) * v, h_in), ((T - tau) * v, np.exp(le - logZ))]
        l_xw = _ell(loss, groups, h_a)
        l_xs = _ell(loss, groups, h_b) if v > 1 else 0.0
        l_xin = _ell(loss, groups, h_in) if tau > 1 else 0.0
        if tau < T and p_r > 0:
            logZp = np.logaddexp(_log(D_out), le + logK)
            h_inp = np.exp(lr - logZp)
            groups = [
                (1, np.exp(le + al - logZp)),
                (v - 1, np.exp(le + be - logZp) if v > 1 else 0.0),
                (tau * v, h_inp),
                ((T - tau - 1) * v, np.exp(le - logZp)),
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


def alpha_beta_loss(alpha, beta, tm: TopicModel, mk: Masking, value: str = "block", *, loss: str = "sq"):
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
    loss : {"sq", "ce"}
        Squared loss (the theory) or cross-entropy ``-log softmax(W^V h)_w`` over all V1 outputs
        (closed form: every class has a handful of distinct outputs; tested against the general
        evaluator ``attention_loss(..., loss="ce")``).

    Returns
    -------
    float or ndarray
        Broadcast shape of ``(alpha, beta)``.

    Notes
    -----
    .. math::
        L = (1 - p_c - p_r)\\,\\ell_{mask} + \\sum_{\\text{query classes}} P(\\text{class})\\,\\ell_{class},

    block (sq): ``ell = v sum_t (c + d H_t)^2 - 2 (c + d H_{t(w)}) + 1`` (ce:
    ``log(1 + v sum_t e^{c + d H_t}) - (c + d H_{t(w)})``) with ``c = B0 (1 - h_0) + gamma h_0``,
    ``d = 1/(a v)``; depends on ``(alpha, beta)`` only through ``K``. identity:
    ``ell = sum_{y >= 1} h_y^2 - 2 h_w + 1``. Query classes: [MASK]; the target word (kept, or
    random and equal); for identity a same-topic other word; another in-document topic; an
    out-of-document topic. Cost O(1) per point.
    """
    _check(tm, mk, value)
    check_choice("loss", loss, LOSSES)
    al = _as_float_array("alpha", alpha)
    be = _as_float_array("beta", beta)
    al, be = np.broadcast_arrays(al, be)
    if value == "block":
        with np.errstate(divide="ignore"):
            logK = al if tm.v == 1 else np.logaddexp(al, math.log(tm.v - 1) + be)
        out = _block_loss_logK(logK, tm, mk, loss=loss)
    else:
        out = _identity_loss(al, be, tm, mk, loss=loss)
    out = np.asarray(out, dtype=np.float64)
    return float(out) if out.ndim == 0 else out


def alpha_beta_loss_logK(logK, tm: TopicModel, mk: Masking, *, constants=None, loss: str = "sq"):
    """Block-``W^V`` loss as a function of ``log K`` (``K = e^alpha + (v-1) e^beta``), broadcast.

    ``constants``: optional ``(A, B0, gamma)`` of another block-constant ``W^V`` (row 0 zero);
    default the stage-1 minimum-norm constants.
    """
    _check(tm, mk)
    check_choice("loss", loss, LOSSES)
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
    outputs, including [MASK]). Scalar ``alpha``, ``beta``; cost O(C(T, tau) V1^3).
    """
    _check(tm, mk, value)
    from ._attention_loss import attention_loss

    S = alpha_beta_score_matrix(alpha, beta, tm)
    W = alpha_beta_value_matrix(tm, mk, value)
    return attention_loss(S, W, tm, mk, mask_keys=mask_keys, loss="ce")
