"""One home per topic statistic (issue #22 item 5): the block score / contrast, the effective K /
topic attention ratio and the same-minus-different gap of :mod:`theorycheck.analysis.topic_structure`.

Two kinds of checks. (1) Every former implementation (``stats.block_score``/``block_contrast``/
``effective_K`` with the paper's ``v``, ``nn._general_probes.label_block_stats``/
``topic_attention_ratio`` with labels), copied here verbatim as it was before the merge, gives the
same numbers as the one implementation on random inputs: bit for bit where the arithmetic is kept,
and to 1e-12 of the matrix scale for ``block_contrast``, which now is the gap of
:func:`~theorycheck.analysis.topic_structure.matrix_topic_stats` (block sums instead of masked
means: a different order of the same floating point sums). (2) Each statistic against a
brute-force loop over word pairs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import theorycheck as tc
from theorycheck.analysis import stats
from theorycheck.analysis.topic_structure import (
    block_contrast,
    block_score,
    effective_K,
    matrix_topic_stats,
    token_labels,
    topic_attention_ratio,
)
from theorycheck.models import GeneralTopicModel, token_topic


# ----------------------------------------------------------------------------- the former implementations
def _old_word_blocks(M, v):
    M = np.asarray(M, dtype=float)
    Wd = M[1:, 1:]
    top = token_topic(np.arange(1, Wd.shape[0] + 1), v)
    return Wd, top[:, None] == top[None, :]


def _old_block_contrast(M, v):
    Wd, same = _old_word_blocks(M, v)
    if same.all():
        return float("nan")
    return float(Wd[same].mean() - Wd[~same].mean())


def _old_block_score(M, v):
    Wd, same = _old_word_blocks(M, v)
    if same.all():
        return float("nan")
    P = np.where(same, Wd[same].mean(), Wd[~same].mean())
    tot = float(np.sum((Wd - Wd.mean()) ** 2))
    if tot == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((Wd - P) ** 2)) / tot


def _old_effective_K(S, v):
    Wd, same = _old_word_blocks(S, v)
    log_in = logsumexp(np.where(same, Wd, -np.inf), axis=1)
    n_out = (~same).sum(axis=1)
    log_out = logsumexp(np.where(~same, Wd, -np.inf), axis=1) - np.log(n_out)
    return np.exp(np.minimum(log_in - log_out, 700.0))


def _old_label_block_stats(M, labels):
    M = np.asarray(M, dtype=float)
    Wd, lab = M[1:, 1:], np.asarray(labels)[1:]
    same = lab[:, None] == lab[None, :]
    if same.all() or not same.any():
        return float("nan"), float("nan")
    ms, md = Wd[same].mean(), Wd[~same].mean()
    tot = float(np.sum((Wd - Wd.mean()) ** 2))
    score = float("nan") if tot == 0.0 else 1.0 - float(np.sum((Wd - np.where(same, ms, md)) ** 2)) / tot
    return score, float(ms - md)


def _old_topic_attention_ratio(S, labels):
    Wd, lab = np.asarray(S, dtype=float)[1:, 1:], np.asarray(labels)[1:]
    same = lab[:, None] == lab[None, :]
    n_in, n_out = same.sum(axis=1), (~same).sum(axis=1)
    log_in = logsumexp(np.where(same, Wd, -np.inf), axis=1) - np.log(n_in)
    log_out = logsumexp(np.where(~same, Wd, -np.inf), axis=1) - np.log(np.maximum(n_out, 1))
    return np.exp(np.minimum(log_in - log_out, 700.0))


# ----------------------------------------------------------------------------- inputs
@st.composite
def layouts(draw):
    """A (V1, V1) random matrix and its labels: the paper's (T, v) layout or random labels."""
    T = draw(st.integers(2, 5))
    v = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([1e-6, 1.0, 30.0]))
    M = scale * rng.standard_normal((T * v + 1, T * v + 1))
    if draw(st.booleans()):
        labels = rng.integers(0, T, size=T * v + 1)
        labels[0] = -1
        labels[1:3] = [0, 1] if T * v >= 2 else labels[1:3]
        return M, labels, None
    return M, token_topic(np.arange(T * v + 1), v), v


@settings(max_examples=60)
@given(layouts())
def test_block_statistics_equal_the_former_implementations(case):
    M, labels, v = case
    score, contrast = _old_label_block_stats(M, labels)
    assert block_score(M, labels) == score or (np.isnan(score) and np.isnan(block_score(M, labels)))
    scale = float(np.abs(M[1:, 1:]).max())
    assert block_contrast(M, labels) == pytest.approx(contrast, rel=0, abs=1e-12 * scale)
    if v is not None:  # the paper's layout: stats.* with v, bit for bit (score) / 1e-12 (contrast)
        assert stats.block_score(M, v) == _old_block_score(M, v)
        assert stats.block_score(M, v) == block_score(M, labels)
        assert stats.block_contrast(M, v) == pytest.approx(_old_block_contrast(M, v), rel=0, abs=1e-12 * scale)
        assert stats.block_contrast(M, v) == block_contrast(M, labels)


@settings(max_examples=60)
@given(layouts())
def test_attention_score_statistics_equal_the_former_implementations(case):
    S, labels, v = case
    lab = labels[1:]
    if np.all(lab == lab[0]):
        with pytest.raises(ValueError, match="at least two topics"):
            effective_K(S, labels)
        return
    np.testing.assert_array_equal(topic_attention_ratio(S, labels), _old_topic_attention_ratio(S, labels))
    if v is not None:
        np.testing.assert_array_equal(stats.effective_K(S, v), _old_effective_K(S, v))
        np.testing.assert_array_equal(effective_K(S, v), effective_K(S, labels))
        np.testing.assert_allclose(topic_attention_ratio(S, v), effective_K(S, v) / v, rtol=1e-12)


# ----------------------------------------------------------------------------- brute force
def _brute(M, labels):
    """Loops over word pairs: contrast, R^2 of the two-valued pattern, K_eff and the ratio per word."""
    n = M.shape[0] - 1
    same_vals, diff_vals = [], []
    for i, j in itertools.product(range(1, n + 1), repeat=2):
        (same_vals if labels[i] == labels[j] else diff_vals).append(M[i, j])
    ms, md = sum(same_vals) / len(same_vals), sum(diff_vals) / len(diff_vals)
    allv = same_vals + diff_vals
    mean = sum(allv) / len(allv)
    resid = sum((x - ms) ** 2 for x in same_vals) + sum((x - md) ** 2 for x in diff_vals)
    tot = sum((x - mean) ** 2 for x in allv)
    K, ratio = [], []
    for a in range(1, n + 1):
        ins = [np.exp(M[a, b]) for b in range(1, n + 1) if labels[b] == labels[a]]
        outs = [np.exp(M[a, b]) for b in range(1, n + 1) if labels[b] != labels[a]]
        K.append(sum(ins) / (sum(outs) / len(outs)))
        ratio.append((sum(ins) / len(ins)) / (sum(outs) / len(outs)))
    return ms - md, 1.0 - resid / tot, np.array(K), np.array(ratio)


@settings(max_examples=40)
@given(layouts())
def test_statistics_equal_brute_force(case):
    M, labels, _ = case
    M = M / max(1.0, float(np.abs(M).max()) / 5.0)  # exp(M) in range for the plain loops
    lab = labels[1:]
    if np.all(lab == lab[0]):
        assert np.isnan(block_score(M, labels)) and np.isnan(block_contrast(M, labels))
        return
    contrast, score, K, ratio = _brute(M, labels)
    scale = float(np.abs(M[1:, 1:]).max())
    assert block_contrast(M, labels) == pytest.approx(contrast, rel=1e-12, abs=1e-12 * scale)
    assert block_score(M, labels) == pytest.approx(score, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(effective_K(M, labels), K, rtol=1e-12)
    np.testing.assert_allclose(topic_attention_ratio(M, labels), ratio, rtol=1e-12)


@settings(max_examples=30)
@given(st.integers(2, 4), st.integers(1, 4), st.integers(0, 2**16))
def test_block_contrast_is_the_gap_with_the_diagonal(T, v, seed):
    """block_contrast and matrix_topic_stats(include_diagonal=True).gap: one computation, equal bits,
    for the paper's model and the same model as a general one (labels = token_topics())."""
    tm = tc.TopicModel(T=T, v=v, tau=1)
    M = np.random.default_rng(seed).standard_normal((tm.V1, tm.V1))
    gap = matrix_topic_stats(M, tm, include_diagonal=True).gap
    assert block_contrast(M, tm.token_topics()) == gap == block_contrast(M, v)
    g = GeneralTopicModel.from_topic_model(tm)
    assert matrix_topic_stats(M, g, include_diagonal=True).gap == gap
    assert block_contrast(M, g.token_topics()) == gap


def test_token_labels_and_errors():
    np.testing.assert_array_equal(token_labels(2, 7), [-1, 0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(token_labels(np.arange(4), 4), np.arange(4))
    with pytest.raises(ValueError, match="v=3"):
        block_score(np.ones((5, 5)), 3)
    with pytest.raises(ValueError, match="labels of shape"):
        block_score(np.ones((5, 5)), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="square"):
        block_contrast(np.ones((5, 4)), 2)
    assert np.isnan(block_contrast(np.ones((5, 5)), 4))  # a single topic


@settings(max_examples=30)
@given(st.integers(2, 4), st.integers(2, 4), st.integers(1, 5), st.integers(0, 2**16), st.booleans())
def test_embedding_gap_is_the_gram_gap(T, v, d, seed, general):
    """embedding_topic_stats (per-topic sums of the embedding, no Gram) equals the gap of
    matrix_topic_stats on the Gram W_E^T W_E over off-diagonal pairs, for the paper's model and a
    general one (dominant topics); topic_block_sums equals the Gram's row sums per topic."""
    rng = np.random.default_rng(seed)
    tm = tc.TopicModel(T=T, v=v, tau=1)
    g = GeneralTopicModel(rng.dirichlet(np.ones(T * v), size=T), tau=1) if general else tm
    W = rng.standard_normal((d, g.V1))
    G = W.T @ W
    z = g.dominant_topic()
    if len(set(z.tolist())) < 2 or np.bincount(z).max() < 2:
        return
    e = stats.embedding_topic_stats(W, g)
    s = matrix_topic_stats(G, g)
    scale = float(np.abs(G).max())
    assert e.gap_dot == pytest.approx(s.gap, rel=1e-12, abs=1e-12 * scale)
    assert e.same_topic_dot == pytest.approx(s.same_mean, rel=1e-12, abs=1e-12 * scale)
    Y = stats.topic_block_sums(W, g)
    brute = np.stack([G[:, 1:][:, z == t].sum(axis=1) for t in range(g.T)], axis=1)
    np.testing.assert_allclose(Y, brute, rtol=1e-12, atol=1e-12 * scale)
