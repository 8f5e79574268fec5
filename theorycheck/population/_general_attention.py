"""Exact N -> inf attention loss for ANY topic-word matrix (SPEC §11.4).

For a :class:`~theorycheck.models.GeneralTopicModel` the loss of SPEC §4.3 holds with the
topic-set density ``p_S`` replaced by the document's word law ``p_theta = Phi^T theta`` and the
random-replacement law ``u = 1_W / n`` (``n`` words). Per document law ``theta``:

.. math::
    \\ell(\\theta) = \\sum_x \\Big[\\omega_\\theta(x) \\|o_\\theta(x)\\|^2
        - 2\\, (\\omega t)_\\theta(x)^T o_\\theta(x) + \\omega_\\theta(x)\\Big],\\qquad
    o_\\theta(x) = W\\, \\mathrm{softmax}(S[x, :] + \\log m_\\theta) + b,

with the context ``m_theta = a p_theta + r u + q e_0`` (``p_theta`` with ``mask_keys=True``), the
query law ``omega_theta(0) = 1 - p_c - p_r``, ``omega_theta(w) = p_c p_theta(w) + p_r / n`` and the
joint (query, target) law ``(omega t)_theta(0, .) = (1 - p_c - p_r) p_theta``,
``(omega t)_theta(w, .) = p_c p_theta(w) e_w + (p_r / n) p_theta`` (cross-entropy: as in §4.3).
The loss is ``L = E_theta[ell(theta)]``:

- uniform-tau: the exact average over all ``C(T, tau)`` sets (``theta = 1_S / tau``), or over
  ``n_sets`` uniformly sampled sets (the same sampler and seed stream as the symmetric path);
- Dirichlet(alpha): the average over ``n_theta`` i.i.d. draws ``theta ~ Dir(alpha)`` (``seed`` or
  ``rng`` required, so the value is deterministic), with the standard error
  ``SE = sd(ell(theta_i)) / sqrt(n_theta)`` (:func:`attention_loss_estimate`).

The per-document formula is the one of the symmetric dense path
(:func:`._attention_loss._dense_laws`); only the laws ``(log m, omega, omega t)`` are built here.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .._memory import check_alloc
from .._validate import check_int, check_loss, check_rng
from ..models import GeneralTopicModel, Masking, TopicModel, is_general
from ._attention_loss import (
    _CHUNK_BYTES,
    _DENSE_ARRAYS,
    AttentionLossGrad,
    SetSampledLoss,
    _check_arrays,
    _check_n_sets,
    _dense_laws,
    _sample_sets,
)

__all__ = [
    "LossEstimate",
    "attention_loss_estimate",
    "general_attention_loss",
    "general_attention_loss_grad",
    "DEFAULT_N_THETA",
]

#: Default number of sampled topic proportions for the Dirichlet law.
DEFAULT_N_THETA = 4096
_ALTERNATIVE = "a smaller model, or value_loss (uniform attention) for large vocabularies"


class LossEstimate(NamedTuple):
    """The attention loss with its error: ``value`` (exact when ``exact``), ``stderr`` and ``n``.

    ``n`` is the number of averaged document laws (topic sets or sampled ``theta``); ``stderr`` is
    0 for the exact enumeration of the uniform-tau law, else ``sd(ell) / sqrt(n)`` (SPEC §11.4).
    """

    value: float
    stderr: float
    n: int
    exact: bool


def _as_general(tm):
    if is_general(tm):
        return tm
    if isinstance(tm, TopicModel):
        return GeneralTopicModel.from_topic_model(tm)
    raise TypeError(f"tm must be a GeneralTopicModel or a TopicModel, got {type(tm).__name__}")


def _validate(S, W, g, mk, b, mask_keys, n_sets, n_theta, loss, max_bytes):
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    mk.require_masked_positions("attention_loss")
    loss = check_loss(loss)
    S, W, b, mask_keys = _check_arrays(S, W, b, g.V1, mask_keys, max_bytes)
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
                alternative=_ALTERNATIVE)  # fmt: skip
    return S, W, b, mask_keys, n_sets, n_theta, loss


def _thetas(g, n_sets, n_theta, rng, seed, max_bytes):
    """Document laws ``theta`` (n, T) and whether they are sampled."""
    if g.prior == "uniform-tau" and n_sets is None:
        if rng is not None or seed is not None:
            raise ValueError("rng/seed are only used with n_sets (sampled topic sets); pass n_sets or drop rng/seed")
        sets = np.array(list(itertools.combinations(range(g.T), g.tau)), dtype=np.int64).reshape(-1, g.tau)
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
            return rng.dirichlet(g.alpha, size=n_theta), True
        sets = _sample_sets(g, n_sets, rng)
        sampled = True
    theta = np.zeros((len(sets), g.T))
    theta[np.arange(len(sets))[:, None], sets] = 1.0 / g.tau
    return theta, sampled


def theta_laws(theta, g, mk, mask_keys):
    """``(logm, omega, OT)`` for a chunk of document laws ``theta`` (n, T) (module docstring, SPEC §11.4)."""
    n_words = g.n_words
    p = g.word_density(theta)  # (nc, V1), column 0 is 0
    if mask_keys:
        m = p
    else:
        m = mk.a * p
        m[:, 1:] += mk.r / n_words
        m[:, 0] += mk.q
    with np.errstate(divide="ignore"):
        logm = np.log(m)
    nc, V1 = p.shape
    omega = np.empty((nc, V1))
    omega[:, 0] = mk.p_mask
    omega[:, 1:] = mk.p_c * p[:, 1:] + mk.p_r / n_words
    OT = np.empty((nc, V1, V1))
    OT[:, 0, :] = mk.p_mask * p
    OT[:, 1:, :] = (mk.p_r / n_words) * p[:, None, :]
    words = np.arange(1, V1)
    OT[:, words, words] += mk.p_c * p[:, 1:]
    return logm, omega, OT


def _per_theta(S, W, b, theta, g, mk, mask_keys, loss, want_grad):
    """Per-law losses (n,) and the summed gradients ``[dS, dW, db]`` (or None), chunked."""
    V1 = g.V1
    bvec = np.zeros(V1) if b is None else b
    grads = [np.zeros((V1, V1)), np.zeros((V1, V1)), np.zeros(V1)] if want_grad else None
    chunk = max(1, _CHUNK_BYTES // (8 * V1 * V1))
    parts = []
    for c0 in range(0, len(theta), chunk):
        logm, omega, OT = theta_laws(theta[c0 : c0 + chunk], g, mk, mask_keys)
        parts.append(_dense_laws(S, W, bvec, logm, omega, OT, loss, grads))
    return np.concatenate(parts), grads


def _estimate(per, sampled):
    n = len(per)
    se = float(per.std(ddof=1) / math.sqrt(n)) if sampled else 0.0
    return LossEstimate(float(per.mean()), se, n, not sampled)


def _run(S, W, tm, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, want_grad):
    g = _as_general(tm)
    S, W, b, mask_keys, n_sets, n_theta, loss = _validate(S, W, g, mk, b, mask_keys, n_sets, n_theta, loss, max_bytes)
    theta, sampled = _thetas(g, n_sets, n_theta, rng, seed, max_bytes)
    per, grads = _per_theta(S, W, b, theta, g, mk, mask_keys, loss, want_grad)
    return g, n_sets, _estimate(per, sampled), grads


def attention_loss_estimate(
    S, W, tm, mk: Masking, b=None, *, mask_keys=False, n_sets=None, n_theta=None, rng=None, seed=None,
    loss="squared", max_bytes=None,
) -> LossEstimate:  # fmt: skip
    """The attention loss of SPEC §11.4 with its standard error, for any document law.

    .. math:: \\hat L = \\frac{1}{n} \\sum_{i=1}^n \\ell(\\theta_i),\\qquad
              \\mathrm{SE} = \\mathrm{sd}(\\ell(\\theta_i)) / \\sqrt{n}

    Parameters
    ----------
    S, W, b, mask_keys, loss, max_bytes
        As in :func:`theorycheck.population.attention_loss`.
    tm : GeneralTopicModel or TopicModel
        A symmetric ``TopicModel`` is converted by ``GeneralTopicModel.from_topic_model``.
    mk : Masking
        ``p_m > 0``.
    n_sets : int, optional
        Uniform-tau: average over ``n_sets >= 2`` sampled topic sets instead of all ``C(T, tau)``
        (required above 200000 sets).
    n_theta : int, optional
        Dirichlet: number of i.i.d. ``theta ~ Dir(alpha)`` (default :data:`DEFAULT_N_THETA`).
    rng, seed
        Randomness of the samples; required whenever the laws are sampled.

    Returns
    -------
    LossEstimate
        ``(value, stderr, n, exact)``; ``stderr = 0`` and ``exact = True`` for the enumeration.
    """
    return _run(S, W, tm, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, False)[2]


def general_attention_loss(
    S, W, tm, mk, b=None, *, mask_keys=False, n_sets=None, n_theta=None, rng=None, seed=None, loss="squared",
    max_bytes=None,
):  # fmt: skip
    """:func:`theorycheck.population.attention_loss` for a general model (SPEC §11.4).

    Returns a float: the exact value (uniform-tau, all sets) or the estimate's value (Dirichlet; see
    :func:`attention_loss_estimate` for its standard error); a :class:`SetSampledLoss` when
    ``n_sets`` samples topic sets (as on the symmetric path).
    """
    _, n_sets, est, _ = _run(S, W, tm, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, False)
    if n_sets is not None:
        return SetSampledLoss(est.value, est.stderr, est.n)
    return est.value


def general_attention_loss_grad(
    S, W, tm, mk, b=None, *, mask_keys=False, n_sets=None, n_theta=None, rng=None, seed=None, loss="squared",
    max_bytes=None,
) -> AttentionLossGrad:  # fmt: skip
    """:func:`theorycheck.population.attention_loss_grad` for a general model (SPEC §4.3, §11.4).

    The gradients are the averages of the per-law gradients of the dense path over the same laws
    as :func:`general_attention_loss` (exact for the enumeration; for sampled laws, the exact
    gradient of the sampled average, so it is deterministic for a fixed ``seed``).
    """
    _, n_sets, est, (dS, dW, db) = _run(S, W, tm, mk, b, mask_keys, n_sets, n_theta, rng, seed, loss, max_bytes, True)
    n = est.n
    value = SetSampledLoss(est.value, est.stderr, n) if n_sets is not None else est.value
    return AttentionLossGrad(value, dS / n, dW / n, db / n)
