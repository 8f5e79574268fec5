"""The dense batched evaluator of the attention loss, per document law (SPEC §4.3, §11.4).

For a chunk of document laws (the topic sets ``S`` of the paper's model, or mixtures ``theta`` of any
:class:`~theorycheck.models.GeneralTopicModel`) it builds the laws ``(log m, omega, omega t)`` of
:mod:`._attention_loss` (context density, query law, joint (query, target) law), stacks the attention
matrices ``H`` of the chunk and forms ``O = H W^T`` with one large GEMM:

.. math::
    \\ell = \\sum_x \\Big[\\omega(x) \\|o(x)\\|^2 - 2\\, (\\omega t)(x)^T o(x) + \\omega(x)\\Big]
    \\ (\\text{squared}), \\qquad
    \\ell = \\sum_x \\Big[\\omega(x) \\log \\textstyle\\sum_y e^{o(x)_y} - (\\omega t)(x)^T o(x)\\Big]
    \\ (\\text{cross-entropy}),

with the exact gradients with respect to ``S``, ``W`` and ``b`` (``dL/do``, then ``G^T H``, ``sum G`` and
the softmax backward ``h (W^T g - (h^T W^T g) 1)``). Both routes of :mod:`._attention_loss` use it: the
paper's model for the cross-entropy loss and the gradients (:func:`_dense_sets`), any model for
everything (:func:`_per_theta`). No validation here: the callers check their arguments and memory.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, softmax

from .._validate import check_loss

_CHUNK_BYTES = 48 * 2**20
#: ``V1 x V1`` arrays alive at once in the dense path with one topic set per chunk
#: (scores, attention, outputs, targets, output gradient, ``dH``, softmax temporaries, ``dS``, ``dW``).
_DENSE_ARRAYS = 10


def _context(tm, mk, mask_keys):
    """Context densities ``(rho, eta, q)``: in-document word, out-of-document word, [MASK]."""
    T, v, tau = tm.T, tm.v, tm.tau
    if mask_keys:
        return 1.0 / (tau * v), 0.0, 0.0
    return mk.a / (tau * v) + mk.r / (T * v), mk.r / (T * v), mk.q


def _set_laws(st, tm, mk, mask_keys):
    """For a chunk of topic sets ``st``: ``(logm, omega, OT)``.

    ``logm[n]``: log context density; ``omega[n, x]``: probability that the query shows ``x``;
    ``OT[n, x, :]``: the joint law of (query shows ``x``, target) (module docstring).
    """
    V1, T, v, tau = tm.V1, tm.T, tm.v, tm.tau
    rho, eta, q = _context(tm, mk, mask_keys)
    p_mask, p_c, p_r = mk.p_mask, mk.p_c, mk.p_r
    nc = len(st)
    inset = np.zeros((nc, T), bool)
    inset[np.arange(nc)[:, None], st] = True
    inword = np.repeat(inset, v, axis=1)  # (nc, Tv)
    pS = np.zeros((nc, V1))
    pS[:, 1:] = inword / (tau * v)
    with np.errstate(divide="ignore"):
        logm = np.empty((nc, V1))
        logm[:, 0] = np.log(q)
        logm[:, 1:] = np.where(inword, np.log(rho), np.log(eta))
    omega = np.empty((nc, V1))
    omega[:, 0] = p_mask
    omega[:, 1:] = p_c * pS[:, 1:] + p_r / (T * v)
    OT = np.empty((nc, V1, V1))
    OT[:, 0, :] = p_mask * pS
    OT[:, 1:, :] = (p_r / (T * v)) * pS[:, None, :]
    words = np.arange(1, V1)
    OT[:, words, words] += p_c * pS[:, 1:]
    return logm, omega, OT


def _dense_chunk(S, W, bvec, st, tm, mk, mask_keys, loss, grads):
    """Per-set losses of the chunk ``st``; adds the summed gradients to ``grads = [dS, dW, db]`` if given."""
    logm, omega, OT = _set_laws(st, tm, mk, mask_keys)
    return _dense_laws(S, W, bvec, logm, omega, OT, loss, grads)


def _dense_laws(S, W, bvec, logm, omega, OT, loss, grads):
    """Per-document losses from the laws ``(logm, omega, OT)`` of :func:`_set_laws` (any document law, SPEC §11.4).

    Adds the summed gradients to ``grads = [dS, dW, db]`` if given.
    """
    nc, V1 = omega.shape
    H = softmax(S[None, :, :] + logm[:, None, :], axis=2)  # attention of every query token, per set
    O = (H.reshape(nc * V1, V1) @ W.T).reshape(nc, V1, V1) + bvec
    if loss == "squared":
        per_set = np.einsum("nx,nxy,nxy->n", omega, O, O) - 2.0 * np.einsum("nxy,nxy->n", OT, O) + 1.0
    else:
        per_set = np.einsum("nx,nx->n", omega, logsumexp(O, axis=2)) - np.einsum("nxy,nxy->n", OT, O)
    if grads is not None:
        if loss == "squared":
            Gr = 2.0 * (omega[:, :, None] * O - OT)
        else:
            Gr = omega[:, :, None] * softmax(O, axis=2) - OT
        Hf = H.reshape(nc * V1, V1)
        Gf = Gr.reshape(nc * V1, V1)
        grads[1] += Gf.T @ Hf
        grads[2] += Gf.sum(axis=0)
        dH = (Gf @ W).reshape(nc, V1, V1)
        grads[0] += (H * (dH - np.einsum("nxy,nxy->nx", H, dH)[:, :, None])).sum(axis=0)
    return per_set


def _dense_sets(S, W, b, sets, tm, mk, mask_keys, loss="squared", want_grad=False):
    """Per-set losses (and summed gradients) by stacking ``H_S`` for chunks of sets (GEMM-bound).

    Returns ``(per_set (n,), dS, dW, db)`` where the gradients are sums over the given sets
    (``None`` unless ``want_grad``). No validation and no memory check (the callers do both).
    """
    V1 = tm.V1
    loss = check_loss(loss)
    bvec = np.zeros(V1) if b is None else b
    grads = [np.zeros((V1, V1)), np.zeros((V1, V1)), np.zeros(V1)] if want_grad else None
    chunk = max(1, _CHUNK_BYTES // (8 * V1 * V1))
    per_set = np.concatenate(
        [
            _dense_chunk(S, W, bvec, sets[c0 : c0 + chunk], tm, mk, mask_keys, loss, grads)
            for c0 in range(0, len(sets), chunk)
        ]
    )
    if grads is None:
        return per_set, None, None, None
    dS, dW, db = grads
    return per_set, dS, dW, db


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
