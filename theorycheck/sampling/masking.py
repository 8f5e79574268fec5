"""BERT-style masking of finite documents (SPEC §2.1, §11.1).

Each position is selected with probability ``p_m``. A selected position keeps its word with
probability ``p_c``, shows a uniformly random word (``1 .. n_words``; ``1 .. T v`` for the paper's
model) with probability ``p_r``, and shows [MASK] (0) otherwise. One route for every topic model:
the masking reads only ``n_words``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_rng
from ..models import GeneralTopicModel, Masking, check_models
from .documents import MASK_ARRAYS, PAD, SIZE_HINT, Documents

__all__ = ["MaskedBatch", "mask_documents"]


class MaskedBatch(NamedTuple):
    """Masked documents.

    Parameters
    ----------
    inputs : ndarray of int64, shape (n_docs, N_max)
        What the model sees: original word, a random word, or 0 ([MASK]); :data:`PAD` padding.
    selected : ndarray of bool, shape (n_docs, N_max)
        Positions selected for prediction (the loss is averaged over these).
    targets : ndarray of int64, shape (n_docs, N_max)
        The original words (``Documents.tokens``).
    lengths : ndarray of int64, shape (n_docs,)
        Length of each document (``Documents.lengths``).

    See Also
    --------
    mask_documents : Builds it.
    doc_losses : Per-document losses of a batch.
    Documents : The unmasked batch.

    References
    ----------
    SPEC §2.1 (masking).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.sampling import mask_documents, sample_documents
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> mb = mask_documents(sample_documents(tm, 3, 5, seed=0), tm, Masking(p_m=0.5), seed=1)
    >>> mb._fields
    ('inputs', 'selected', 'targets', 'lengths')
    >>> bool(np.all(mb.inputs[~mb.selected] == mb.targets[~mb.selected]))  # unselected positions unchanged
    True
    """

    inputs: np.ndarray
    selected: np.ndarray
    targets: np.ndarray
    lengths: np.ndarray


def mask_documents(
    docs: Documents,
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None,
    at_least_one: bool = True,
    max_bytes: int | None = None,
) -> MaskedBatch:
    """Apply BERT-style masking (module docstring; SPEC §2.1).

    Parameters
    ----------
    docs : Documents
        From :func:`~theorycheck.sampling.documents.sample_documents`.
    tm : TopicModel or GeneralTopicModel
        The model the documents come from (its ``n_words`` random replacement words).
    mk : Masking
        The masking probabilities ``p_m``, ``p_c``, ``p_r``.
    rng : numpy.random.Generator, optional
        Randomness of the masking.
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``.
    at_least_one : bool, default True
        Resample the selection of a document until at least one position is selected (as the
        official code does), i.e. condition on ``|M| >= 1``. Requires ``p_m > 0``.
    max_bytes : int, optional
        Memory limit for the new ``(n_docs, N_max)`` arrays (see
        :func:`~theorycheck.sampling.documents.sample_documents`).

    Returns
    -------
    MaskedBatch
        ``inputs`` (kept word, random word ``1 .. n_words`` or 0 = [MASK] at selected positions, the
        word elsewhere), ``selected``, ``targets`` (the original words) and ``lengths``.

    Raises
    ------
    ValueError
        If ``at_least_one`` and ``mk.p_m = 0``, a token is not a word of ``tm`` (documents of another
        model), both ``rng`` and ``seed`` are given, or the arrays exceed ``max_bytes``.
    TypeError
        If ``docs`` is not a :class:`Documents`, ``tm`` or ``mk`` has the wrong type, or the tokens are
        not a 2-D integer array.

    See Also
    --------
    sample_documents : The documents to mask.
    MaskedBatch : The result.
    theorycheck.models.Masking : The probabilities and the derived fractions ``a``, ``r``, ``q``.

    References
    ----------
    SPEC §2.1 (the masking procedure); Devlin et al., *BERT*, NAACL 2019, Section 3.1.

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.sampling import mask_documents, sample_documents
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking(p_m=0.5, p_c=0.0, p_r=0.0)
    >>> docs = sample_documents(tm, n_docs=4, N=5, seed=0)
    >>> mb = mask_documents(docs, tm, mk, seed=1)

    With ``p_c = p_r = 0`` every selected position shows [MASK], the others their word; every
    document has a selected position:

    >>> bool(np.all(mb.inputs[mb.selected] == 0)), bool(np.all(mb.inputs[~mb.selected] == docs.tokens[~mb.selected]))
    (True, True)
    >>> mb.selected.any(axis=1)
    array([ True,  True,  True,  True])

    Over many positions the shown tokens follow ``a``, ``r``, ``q`` (here ``q = p_m (1 - p_c - p_r) = 0.12``):

    >>> big = sample_documents(tm, n_docs=200, N=100, seed=2)
    >>> frac_mask = (mask_documents(big, tm, Masking(), seed=3).inputs == 0).mean()
    >>> abs(float(frac_mask) - Masking().q) < 0.01
    True
    """
    if not isinstance(docs, Documents):
        raise TypeError(f"docs must be a Documents tuple, got {type(docs).__name__}")
    check_models(tm, mk, general=True)
    if at_least_one:
        mk.require_masked_positions("mask_documents(at_least_one=True)")
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    check_alloc("mask_documents", (MASK_ARRAYS, *docs.tokens.shape), max_bytes=max_bytes, alternative=SIZE_HINT)
    _check_tokens(docs.tokens, tm.n_words)
    return mask_unchecked(docs, tm, mk, check_rng(rng, seed), at_least_one)


def _check_tokens(tokens, n_words: int) -> None:
    """``docs.tokens``: a 2-D integer array of words ``1 .. n_words`` of the model, or :data:`PAD` (``ValueError``
    naming the first token outside, its position and the allowed range)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise TypeError(f"docs.tokens must be a 2-D integer array, got {tokens.dtype} of shape {tokens.shape}")
    bad = (tokens != PAD) & ((tokens < 1) | (tokens > n_words))
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise ValueError(
            f"docs.tokens[{i}, {j}] = {int(tokens[i, j])} is not a word of the model: words are 1..{n_words} "
            f"(padding {PAD}); were the documents sampled from another model?"
        )


def mask_unchecked(docs: Documents, tm, mk: Masking, rng, at_least_one: bool) -> MaskedBatch:
    """:func:`mask_documents` on validated arguments (a ``Generator``)."""
    tokens = docs.tokens
    valid = tokens != PAD
    selected = (rng.random(tokens.shape) < mk.p_m) & valid
    if at_least_one:
        todo = np.flatnonzero(~selected.any(axis=1))
        while todo.size:
            redraw = (rng.random((todo.size, tokens.shape[1])) < mk.p_m) & valid[todo]
            selected[todo] = redraw
            todo = todo[~redraw.any(axis=1)]
    u = rng.random(tokens.shape)
    rand_words = rng.integers(1, tm.n_words + 1, size=tokens.shape)
    inputs = tokens.copy()
    is_rand = selected & (u >= mk.p_c) & (u < mk.p_c + mk.p_r)
    is_mask = selected & (u >= mk.p_c + mk.p_r)
    inputs[is_rand] = rand_words[is_rand]
    inputs[is_mask] = 0
    return MaskedBatch(inputs, selected, tokens, docs.lengths)
