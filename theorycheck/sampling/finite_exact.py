"""Exact finite-document (finite N) MLM loss by enumerating every masked document (SPEC §1.1, §2.1, §2.2).

The expectation that :func:`theorycheck.sampling.montecarlo.mc_attention_loss` estimates, computed exactly
for tiny models: a document of length ``N`` draws a topic set ``S`` uniformly (uniform-tau prior),
then each position independently a state ``(x, z, s)``: its word ``x`` uniform over the
``tau v`` words of ``S``, selected (``s = 1``) w.p. ``p_m``, and shown token ``z``: ``x`` if not
selected; if selected, ``x`` w.p. ``p_c``, a uniform word of ``1 .. T v`` w.p. ``p_r``, [MASK] (0)
otherwise (the states ``z = x`` from "kept" and from "random and equal" are merged). Documents
are conditioned on ``|M| >= 1`` (as the sampler does). The document loss is

.. math::
    \\ell(d) = \\frac{1}{|M|} \\sum_{i \\in M} \\Big\\| W \\sum_j a_{ij} e_{z_j} + b - e_{x_i} \\Big\\|^2,
    \\qquad a_{ij} = \\mathrm{softmax}_j\\, S[z_i, z_j]

(every position is a key, the query's own included), and

.. math::
    E_N = \\frac{1}{\\binom{T}{\\tau}} \\sum_S
          \\frac{\\sum_{d:\\,|M| \\ge 1} P(d \\mid S)\\, \\ell(d)}{1 - (1 - p_m)^N}.

It shares no code with the Monte Carlo path nor with the N -> inf evaluators: a position-level
N x N softmax per document, by brute force over all ``(tau v (T v + 2))^N`` documents per set.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import softmax

from .._memory import check_alloc
from .._validate import check_array, check_int
from ..models import Masking, TopicModel, check_models, require_symmetric
from ..population import topic_sets

__all__ = ["exact_finite_loss", "MAX_DOCUMENTS"]

#: most documents (per topic set) enumerated
MAX_DOCUMENTS = 2_000_000
_CHUNK = 20_000


def _states(tm, mk, topics):
    """Per-position states of a document on ``topics``: arrays ``(x, z, selected, prob)``."""
    words = np.concatenate([np.arange(t * tm.v + 1, (t + 1) * tm.v + 1) for t in topics])
    n_in, n = len(words), tm.n_words
    xs, zs, sel, pr = [], [], [], []
    for x in words:
        xs.append(x)
        zs.append(x)
        sel.append(False)
        pr.append((1.0 - mk.p_m) / n_in)
        for z in range(tm.V1):
            p = mk.p_m * (mk.p_mask if z == 0 else mk.p_r / n + (mk.p_c if z == x else 0.0)) / n_in
            if p > 0.0:
                xs.append(x)
                zs.append(z)
                sel.append(True)
                pr.append(p)
    return np.array(xs), np.array(zs), np.array(sel), np.array(pr)


def _chunk_losses(idx, states, S, W, b):
    """Document losses (NaN without a selected position) and probabilities of the documents ``idx``."""
    xs, zs, sel, pr = states
    x, z, s = xs[idx], zs[idx], sel[idx]  # (n, N)
    prob = pr[idx].prod(axis=1)
    A = softmax(S[z[:, :, None], z[:, None, :]], axis=2)  # (n, N queries, N keys)
    O = np.einsum("nij,nrj->nir", A, W[:, z].transpose(1, 0, 2)) + b  # (n, N, V1)
    err = np.einsum("nir,nir->ni", O, O) - 2.0 * np.take_along_axis(O, x[:, :, None], axis=2)[:, :, 0] + 1.0
    nsel = s.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(nsel > 0, (err * s).sum(axis=1) / nsel, np.nan)
    return loss, prob


def exact_finite_loss(
    S: ArrayLike, W: ArrayLike, tm: TopicModel, mk: Masking, N: int, b: ArrayLike | None = None
) -> float:
    """Exact expected finite-N document loss ``E_N`` (module docstring; SPEC §2.2), squared loss.

    Parameters
    ----------
    S, W : array_like, shape (V1, V1)
        Scores (``S[a, c]``: key token ``c`` for query token ``a``) and value matrix.
    tm, mk : TopicModel, Masking
        uniform-tau prior, ``p_m > 0``.
    N : int
        Document length, ``>= 1``; ``(tau v (T v + 2))^N`` documents per topic set are enumerated
        and at most :data:`MAX_DOCUMENTS` are allowed.
    b : array_like, shape (V1,), optional
        Decoder bias.

    Returns
    -------
    E_N : float
        The expected document loss over all documents of length ``N`` with ``|M| >= 1`` (formula in the
        module docstring), the quantity :func:`mc_attention_loss` estimates.

    Raises
    ------
    ValueError
        If the prior is Dirichlet, ``p_m = 0``, ``N < 1``, ``S``, ``W`` or ``b`` has the wrong shape or a
        non-finite entry, or there are more than :data:`MAX_DOCUMENTS` documents per topic set.
    TypeError
        If ``tm`` is a general model (use :func:`mc_attention_loss`) or ``mk`` is not a masking.

    See Also
    --------
    mc_attention_loss : The Monte Carlo estimate of the same expectation, any size.
    theorycheck.population.attention_loss : The N -> inf limit.
    doc_losses : The loss of one sampled document.

    References
    ----------
    SPEC §2.2 (the finite-N objective), §4.3(c) (finite documents and the O(1/N) gap).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, attention_loss
    >>> from theorycheck.sampling import exact_finite_loss
    >>> tm, mk = TopicModel(T=2, v=1, tau=1), Masking(p_m=0.5, p_c=0.2, p_r=0.2)
    >>> S, W = np.zeros((3, 3)), alpha_beta_value_matrix(tm, mk)

    One word per document here, so the N -> inf loss is 0; the finite-N loss decreases towards it
    like ``1/N``:

    >>> attention_loss(S, W, tm, mk)
    0.0
    >>> [round(exact_finite_loss(S, W, tm, mk, N), 6) for N in (1, 2, 3)]
    [0.725898, 0.241966, 0.148896]
    """
    require_symmetric(
        tm,
        "exact_finite_loss",
        "sampling.mc_attention_loss(S, W, g, mk, N=N, n_docs=...) (Monte Carlo with a standard error)",
    )
    check_models(tm, mk)
    if tm.prior != "uniform-tau":
        raise ValueError("exact_finite_loss needs prior='uniform-tau'")
    mk.require_masked_positions("exact_finite_loss")
    N = check_int("N", N, low=1)
    S = check_array("S", S, shape=(tm.V1, tm.V1))
    W = check_array("W", W, shape=(tm.V1, tm.V1))
    b = np.zeros(tm.V1) if b is None else check_array("b", b, shape=(tm.V1,))
    n_states = len(_states(tm, mk, np.arange(tm.tau))[0])
    if n_states**N > MAX_DOCUMENTS:
        raise ValueError(
            f"N={N}: {n_states}^N documents per topic set exceed MAX_DOCUMENTS={MAX_DOCUMENTS}; "
            "use a smaller N or model, or theorycheck.sampling.mc_attention_loss"
        )
    check_alloc("exact_finite_loss", (_CHUNK, N, tm.V1 + N), max_bytes=None)
    p_any = 1.0 - (1.0 - mk.p_m) ** N
    total = 0.0
    sets = topic_sets(tm)
    for topics in sets:
        states = _states(tm, mk, topics)
        docs = np.array(list(itertools.product(range(len(states[0])), repeat=N)), dtype=np.int64)
        for c0 in range(0, len(docs), _CHUNK):
            loss, prob = _chunk_losses(docs[c0 : c0 + _CHUNK], states, S, W, b)
            ok = ~np.isnan(loss)
            total += float(prob[ok] @ loss[ok])
    return total / (p_any * len(sets))
