"""Monte Carlo estimate of the finite-document squared MLM loss (SPEC §2.2, §3.1).

Model: one layer, one head, one-hot embeddings without positions, ``W^dec = I``. For a masked
document with input tokens ``x'_1..x'_N`` and selected set ``M``, the query at position ``i``
attends to key positions ``j`` with weight ``exp(S[x'_i, x'_j])`` (normalised over keys). Keys
are all positions (theory; the query's own and selected positions included) or, with
``mask_keys=True``, only the unselected positions (official code). With one-hot embeddings the
attention output depends on the keys only through their token counts ``c``:

.. math::  h(x') = \\frac{c \\odot e^{S[x', :]}}{\\sum_y c_y e^{S[x', y]}}, \\qquad
           \\ell_i = \\| W h(x'_i) + b - e_{x_i} \\|^2 ,

which is exact (not an approximation) and costs ``O(|supp c| V1)`` per query. The document
loss is ``(1/|M|) sum_{i in M} l_i`` and the estimate averages it over documents.

Stratification: with the uniform-tau prior and ``C(T, tau)`` small, documents cycle through
every topic set (equal strata) and the standard error is the stratified one,
``SE^2 = sum_s var_s / (n_s K^2)`` over the ``K`` strata.

General topic-word matrices (SPEC §11.1, §11.4): a
:class:`~theorycheck.models.GeneralTopicModel` takes the same path. Its documents come from
:func:`theorycheck.sampling.documents.sample_documents` (``theta`` from the document law, words from
``p_theta = Phi^T theta``), are masked by :func:`theorycheck.sampling.masking.mask_documents` (random
replacements uniform over the ``n_words`` words) and evaluated by the same kernel; the uniform-tau law
is stratified over its topic sets as above, the Dirichlet law draws ``theta`` afresh per document. As
``N -> inf`` the estimate tends to :func:`theorycheck.population.attention_loss` of the general model
with an ``O(1/N)`` bias (the query's own token among the keys, the fluctuation of the empirical
context around ``m_theta``, the conditioning on a selected position).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike
from scipy.special import softmax

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_int, check_rng
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from ..population import topic_sets as _all_topic_sets
from .documents import check_length, check_sample_size, sample_unchecked
from .masking import MaskedBatch, mask_unchecked

__all__ = ["MCEstimate", "mc_attention_loss", "doc_losses"]


class MCEstimate(NamedTuple):
    """A Monte Carlo estimate: ``mean`` with its standard error ``stderr`` from ``n_docs`` documents.

    Parameters
    ----------
    mean : float
        The average of the per-document losses (stratified: the mean of the strata means).
    stderr : float, stderr >= 0
        Its standard error: ``sd / sqrt(n_docs)``, or the stratified ``sqrt(sum_s var_s / n_s) / K``.
    n_docs : int, n_docs >= 2
        Number of documents.

    See Also
    --------
    mc_attention_loss : Returns it.
    theorycheck.population.LossEstimate : The N -> inf counterpart over document laws.
    exact_finite_loss : The exact value the mean estimates (tiny models).

    References
    ----------
    SPEC §2.2 (the finite-N loss), §4.3(c) (Monte Carlo against the exact finite-N expectation).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix
    >>> from theorycheck.sampling import mc_attention_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> est = mc_attention_loss(np.zeros((7, 7)), alpha_beta_value_matrix(tm, mk), tm, mk, N=20, n_docs=60, seed=0)
    >>> est._fields, est.n_docs, est.stderr > 0
    (('mean', 'stderr', 'n_docs'), 60, True)
    """

    mean: float
    stderr: float
    n_docs: int


@numba.njit(cache=True, parallel=True, fastmath=False)
def _doc_losses_nb(inputs, selected, targets, S, W, b, mask_keys):
    n_docs, n_pos = inputs.shape
    V1 = W.shape[0]
    out = np.zeros(n_docs)
    for d in numba.prange(n_docs):
        counts = np.zeros(V1)
        for i in range(n_pos):
            tok = inputs[d, i]
            if tok >= 0 and not (mask_keys and selected[d, i]):
                counts[tok] += 1.0
        supp = np.flatnonzero(counts)
        ns = supp.size
        wts = np.empty(ns)
        o = np.empty(V1)
        tot = 0.0
        nsel = 0
        for i in range(n_pos):
            if not selected[d, i]:
                continue
            xq = inputs[d, i]
            mx = -np.inf
            for k in range(ns):
                s = S[xq, supp[k]]
                if s > mx:
                    mx = s
            Z = 0.0
            for k in range(ns):
                wk = counts[supp[k]] * math.exp(S[xq, supp[k]] - mx)
                wts[k] = wk
                Z += wk
            for r in range(V1):
                acc = b[r]
                for k in range(ns):
                    acc += W[r, supp[k]] * wts[k] / Z
                o[r] = acc
            loss = 1.0 - 2.0 * o[targets[d, i]]
            for r in range(V1):
                loss += o[r] * o[r]
            tot += loss
            nsel += 1
        out[d] = tot / nsel if nsel > 0 else np.nan
    return out


def _doc_losses_ref(inputs, selected, targets, S, W, b, mask_keys):
    """Position-based numpy reference (N x N attention over positions; slow, for tests)."""
    n_docs = inputs.shape[0]
    V1 = W.shape[0]
    out = np.full(n_docs, np.nan)
    for d in range(n_docs):
        valid = inputs[d] >= 0
        keys = valid & ~(selected[d] if mask_keys else np.zeros_like(valid))
        X = np.eye(V1)[inputs[d, keys]]  # (n_keys, V1) one-hot rows
        losses = []
        for i in np.flatnonzero(selected[d]):
            a = softmax(S[inputs[d, i], inputs[d, keys]])
            o = W @ (X.T @ a) + b
            e = np.zeros(V1)
            e[targets[d, i]] = 1.0
            losses.append(np.sum((o - e) ** 2))
        if losses:
            out[d] = np.mean(losses)
    return out


def doc_losses(
    batch: MaskedBatch, S: ArrayLike, W: ArrayLike, b: ArrayLike | None = None, *, mask_keys: bool = False
) -> np.ndarray:
    """Per-document mean squared loss over selected positions, shape ``(n_docs,)``.

    ``batch`` is a :class:`~theorycheck.sampling.masking.MaskedBatch`; documents with no selected
    position (only possible with ``at_least_one=False``) give NaN.

    .. math:: \\ell(d) = \\frac{1}{|M_d|} \\sum_{i \\in M_d} \\| W h(x'_i) + b - e_{x_i} \\|^2,\\qquad
              h(x') = \\frac{c \\odot e^{S[x', :]}}{\\sum_y c_y e^{S[x', y]}}

    with ``c`` the key token counts of the document (module docstring); exact, ``O(|supp c| V1)`` per query.

    Parameters
    ----------
    batch : MaskedBatch
        Masked documents, tokens ``< V1``.
    S : array_like, shape (V1, V1)
        Scores (query token, key token), finite.
    W : array_like, shape (V1, V1)
        Value matrix (decoder identity), finite; its size defines ``V1``.
    b : array_like, shape (V1,), optional
        Output bias.
    mask_keys : bool, default False
        Hide selected positions from the keys (official code).

    Returns
    -------
    losses : ndarray of float64, shape (n_docs,)
        ``ell(d)`` per document; NaN for a document without a selected position.

    Raises
    ------
    ValueError
        If ``S``, ``W`` or ``b`` has the wrong shape or a non-finite entry, or a token is ``>= V1``.

    See Also
    --------
    mc_attention_loss : Averages these losses over sampled documents.
    mask_documents : Produces the batch.
    exact_finite_loss : The exact expectation of these losses (tiny models).

    References
    ----------
    SPEC §2.2 (the MLM objective), §3.1 (the one-layer model).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.sampling import doc_losses, mask_documents, sample_documents
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking(p_m=0.5)
    >>> docs = sample_documents(tm, n_docs=4, N=5, seed=0)
    >>> batch = mask_documents(docs, tm, mk, seed=1)

    ``W = 0`` predicts nothing, so every selected position costs ``||e_x||^2 = 1``:

    >>> doc_losses(batch, np.zeros((7, 7)), np.zeros((7, 7)))
    array([1., 1., 1., 1.])

    Identity ``W`` and very large same-token scores copy the query token: a position showing its
    own word costs 0, the others 2:

    >>> L = doc_losses(batch, 50 * np.eye(7), np.eye(7))
    >>> sel = batch.selected
    >>> expected = [2 * np.mean(batch.inputs[d][sel[d]] != batch.targets[d][sel[d]]) for d in range(4)]
    >>> bool(np.allclose(L, expected))
    True
    """
    V1 = np.asarray(W).shape[0]
    S = check_array("S", S, shape=(V1, V1))
    W = check_array("W", W, shape=(V1, V1))
    b = np.zeros(V1) if b is None else check_array("b", b, shape=(V1,))
    inputs = np.ascontiguousarray(batch.inputs, dtype=np.int64)
    if inputs.max() >= V1:
        raise ValueError(f"batch tokens exceed V1 - 1 = {V1 - 1}")
    return _doc_losses_nb(
        inputs,
        np.ascontiguousarray(batch.selected),
        np.ascontiguousarray(batch.targets, dtype=np.int64),
        S,
        W,
        b,
        bool(mask_keys),
    )


def mc_attention_loss(
    S: ArrayLike,
    W: ArrayLike,
    tm: TopicModel | GeneralTopicModel,
    mk: Masking,
    *,
    N: int | Sequence[int],
    n_docs: int,
    b: ArrayLike | None = None,
    mask_keys: bool = False,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    stratify: bool = True,
    batch_size: int = 4096,
    max_bytes: int | None = None,
    richardson: bool = False,
) -> MCEstimate:
    """Monte Carlo estimate of the finite-N squared MLM loss of the one-layer one-hot model (SPEC §2.2, §3.1).

    .. math:: \\hat L = \\frac{1}{n} \\sum_{d} \\frac{1}{|M_d|} \\sum_{i \\in M_d}
              \\| W h(x'_i) + b - e_{x_i} \\|^2

    (module docstring for ``h``).

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Scores; ``S[a, b]`` is the score of key token ``b`` for query token ``a``. ``S = 0`` is
        uniform attention.
    W : array_like, shape (V1, V1)
        Value matrix (decoder identity).
    tm : TopicModel or GeneralTopicModel
        The paper's model, or any topic-word matrix (SPEC §11.1; module docstring).
    mk : Masking
        ``p_m > 0``.
    N : int or (int, int)
        Document length or inclusive range.
    n_docs : int
        Number of documents (``>= 2``).
    b : array_like, shape (V1,), optional
        Output bias.
    mask_keys : bool
        Hide selected positions from the keys (official code).
    rng : numpy.random.Generator, optional
        Randomness of the documents and their masking.
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``; the same seed gives the same estimate.
    stratify : bool
        Cycle documents through every topic set when the uniform-tau prior has
        ``2 C(T, tau) <= n_docs`` (stratified estimator); otherwise draw topic sets at random.
    batch_size : int
        Documents sampled at once, ``>= 1`` (the estimate depends on it only through the order of the draws).
    max_bytes : int, optional
        Memory limit (default ``$THEORYCHECK_MAX_BYTES`` or half the available memory) for one batch
        of documents and the per-document arrays; above it a ``ValueError`` before any draw.
    richardson : bool
        Estimate the ``N -> inf`` loss instead (``N`` an int): documents of length ``2N`` are drawn,
        each scored on all ``2N`` positions (``l_2N``) and on its first ``N`` (``l_N``, same masking),
        and the estimate averages ``2 l_2N - l_N``. Since ``E l_N = L + B/N + O(1/N^2)`` the ``O(1/N)``
        bias cancels (Richardson), leaving ``O(1/N^2)``; the standard error is that of the combined
        per-document values (same documents: common random numbers). A document with no selected
        position among its first ``N`` (probability ``(1 - p_m)^N``) uses ``l_2N`` for ``l_N``.

    Returns
    -------
    MCEstimate
        Documents are conditioned on at least one selected position.

    Raises
    ------
    ValueError
        If ``mk.p_m = 0``, ``S``, ``W`` or ``b`` has the wrong shape or a non-finite entry, ``n_docs < 2``,
        ``batch_size < 1``, ``N`` is invalid (or a range with ``richardson``), both ``rng`` and ``seed`` are
        given, or a batch exceeds ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    exact_finite_loss : The exact finite-N expectation (tiny models), the same conditioning.
    theorycheck.population.attention_loss : The N -> inf loss the estimate tends to, with ``O(1/N)`` bias.
    doc_losses : The per-document losses it averages.
    MCEstimate : The result.

    References
    ----------
    SPEC §2.2 (the finite-N objective), §3.1 (the model), §4.3(c) (the O(1/N) gap and the comparison with
    the exact finite-N expectation), §11.4 (general topic models).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, attention_loss
    >>> from theorycheck.sampling import exact_finite_loss, mc_attention_loss

    A tiny model where the exact finite-N expectation is computable: the estimate agrees within its error:

    >>> tm, mk = TopicModel(T=2, v=1, tau=1), Masking(p_m=0.5, p_c=0.2, p_r=0.2)
    >>> S, W = np.zeros((3, 3)), alpha_beta_value_matrix(tm, mk)
    >>> est = mc_attention_loss(S, W, tm, mk, N=3, n_docs=2000, seed=1)
    >>> exact = exact_finite_loss(S, W, tm, mk, N=3)
    >>> round(exact, 6), abs(est.mean - exact) < 2 * est.stderr
    (0.148896, True)

    Long documents approach the N -> inf loss ``1 - 1/(tau v)`` of uniform attention:

    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = alpha_beta_value_matrix(tm, mk)
    >>> est = mc_attention_loss(np.zeros((7, 7)), W, tm, mk, N=200, n_docs=200, seed=0)
    >>> round(attention_loss(np.zeros((7, 7)), W, tm, mk), 12), abs(est.mean - 0.75) < 0.005
    (0.75, True)
    """
    check_models(tm, mk, general=True)  # one route for every model (module docstring; SPEC §11.1, §11.4)
    mk.require_masked_positions("mc_attention_loss")
    S = check_array("S", S, shape=(tm.V1, tm.V1))
    W = check_array("W", W, shape=(tm.V1, tm.V1))
    b = np.zeros(tm.V1) if b is None else check_array("b", b, shape=(tm.V1,))
    n_docs = check_int("n_docs", n_docs, low=2)
    batch_size = check_int("batch_size", batch_size, low=1)
    half = None
    if richardson:
        if isinstance(N, (tuple, list)):
            raise ValueError(f"N must be an int (one length, doubled) with richardson=True, got {N!r}")
        half = check_int("N", N, low=1)
        N = 2 * half
    lo, hi = _check_mc_size(tm, N, n_docs, batch_size, max_bytes)
    rng = check_rng(rng, seed)

    strata = all_sets = None
    if stratify and tm.prior == "uniform-tau" and 2 * tm.n_topic_sets <= n_docs:
        all_sets = _all_topic_sets(tm)
        strata = np.arange(n_docs) % len(all_sets)
    losses = np.empty(n_docs)
    for start in range(0, n_docs, batch_size):
        stop = min(n_docs, start + batch_size)
        sets = None if strata is None or all_sets is None else all_sets[strata[start:stop]]
        docs = sample_unchecked(tm, stop - start, lo, hi, rng, sets)
        batch = mask_unchecked(docs, tm, mk, rng, at_least_one=True)
        losses[start:stop] = _batch_losses(batch, S, W, b, bool(mask_keys), half)
    if strata is None:
        return MCEstimate(float(losses.mean()), float(losses.std(ddof=1) / math.sqrt(n_docs)), n_docs)
    return _stratified(losses, strata, n_docs)


def _batch_losses(batch, S, W, b, mask_keys, half):
    """Per-document losses of a masked batch; with ``half`` the Richardson values ``2 l_2N - l_N``,
    ``l_N`` on the first ``half`` positions (``l_2N`` where those hold no selected position)."""
    full = _doc_losses_nb(batch.inputs, batch.selected, batch.targets, S, W, b, mask_keys)
    if half is None:
        return full
    inputs, selected, targets = (
        np.ascontiguousarray(a[:, :half]) for a in (batch.inputs, batch.selected, batch.targets)
    )
    part = _doc_losses_nb(inputs, selected, targets, S, W, b, mask_keys)
    return 2.0 * full - np.where(np.isnan(part), full, part)


def _check_mc_size(tm, N, n_docs, batch_size, max_bytes):
    """Refuse before any draw: the per-document arrays (losses, strata) and one batch of documents (its
    sampling and masking arrays). Returns the validated lengths ``(lo, hi)``."""
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    lo, hi = check_length(N)
    alt = "attention_loss (the exact N -> inf loss), fewer documents, a smaller batch_size or a shorter N"
    check_alloc("mc_attention_loss: per-document losses", (4, n_docs), max_bytes=max_bytes, alternative=alt)
    check_sample_size(
        "mc_attention_loss: one batch of documents",
        tm,
        min(batch_size, n_docs),
        hi,
        max_bytes,
        masked=True,
        alternative=alt,
    )
    return lo, hi


def _stratified(losses, strata, n_docs):
    """Stratified mean and standard error ``sqrt(sum_s var_s / n_s) / K`` over ``K`` equal strata."""
    K = int(strata.max()) + 1
    cnt = np.bincount(strata, minlength=K)
    means = np.bincount(strata, weights=losses, minlength=K) / cnt
    sq = np.bincount(strata, weights=(losses - means[strata]) ** 2, minlength=K)
    var = sq / (cnt - 1)
    return MCEstimate(float(means.mean()), float(math.sqrt(np.sum(var / cnt)) / K), n_docs)
