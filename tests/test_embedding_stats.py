"""Embedding topic statistics == brute force over all word pairs; block sums; validation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.analysis.stats import embedding_topic_stats, own_minus_other_block_sums, topic_block_sums
from theorycheck.strategies import topic_models


def _brute(W, tm):
    E = W[:, 1:]
    G = E.T @ E
    n = np.linalg.norm(E, axis=0)
    Cos = G / np.outer(n, n)
    top = np.arange(tm.n_words) // tm.v
    same = top[:, None] == top[None, :]
    eye = np.eye(tm.n_words, dtype=bool)
    st_ = same & ~eye
    return dict(
        same_token_dot=G[eye].mean(),
        same_topic_dot=G[st_].mean(),
        diff_topic_dot=G[~same].mean(),
        same_topic_cos=Cos[st_].mean(),
        diff_topic_cos=Cos[~same].mean(),
    )


@given(topic_models(min_T=2, max_T=6, min_v=2, max_v=5), st.integers(1, 6), st.integers(0, 2**31))
def test_stats_equal_brute_force(tm, d, seed):
    W = np.random.default_rng(seed).normal(size=(d, tm.V1))
    s = embedding_topic_stats(W, tm)
    ref = _brute(W, tm)
    for k, v in ref.items():
        assert getattr(s, k) == pytest.approx(v, rel=1e-10, abs=1e-12), k
    assert s.gap_dot == pytest.approx(ref["same_topic_dot"] - ref["diff_topic_dot"], rel=1e-9, abs=1e-12)
    assert s.n_same_topic + s.n_diff_topic + s.n_same_token == tm.n_words**2


@given(topic_models(min_T=2, max_T=5, max_v=4), st.integers(1, 5), st.integers(0, 2**31))
def test_block_sums_equal_gram_sums(tm, d, seed):
    W = np.random.default_rng(seed).normal(size=(d, tm.V1))
    G = W.T @ W
    Y = topic_block_sums(W, tm)
    ref = G[:, 1:].reshape(tm.V1, tm.T, tm.v).sum(axis=2)
    assert np.allclose(Y, ref, rtol=1e-12, atol=1e-12)
    D = own_minus_other_block_sums(W, tm)
    assert D.shape == (tm.n_words, tm.T - 1)
    i = tm.n_words - 1  # last word: topic T-1, its "other" topics are 0..T-2 in order
    assert np.allclose(D[i], ref[i + 1, tm.T - 1] - ref[i + 1, : tm.T - 1], rtol=1e-12, atol=1e-12)


def test_mask_token_is_excluded():
    tm = tc.TopicModel(T=3, v=2, tau=1)
    W = np.random.default_rng(0).normal(size=(3, tm.V1))
    W2 = W.copy()
    W2[:, 0] = 100.0
    assert embedding_topic_stats(W, tm) == embedding_topic_stats(W2, tm)


@pytest.mark.parametrize(
    "tm,W,match",
    [
        (tc.TopicModel(T=3, v=1, tau=1), np.ones((2, 4)), "v >= 2"),
        (tc.TopicModel(T=1, v=3, tau=1), np.ones((2, 4)), "T >= 2"),
        (tc.TopicModel(T=2, v=2, tau=1), np.ones((2, 4)), "W_E must have shape"),
        (tc.TopicModel(T=2, v=2, tau=1), np.c_[np.ones((2, 4)), np.zeros((2, 1))], "zero embedding for word 4"),
        (tc.TopicModel(T=2, v=2, tau=1), np.full((2, 5), np.nan), "finite"),
    ],
)
def test_stats_reject(tm, W, match):
    with pytest.raises(ValueError, match=match):
        embedding_topic_stats(W, tm)


def test_block_sums_reject():
    with pytest.raises(ValueError, match="T >= 2"):
        own_minus_other_block_sums(np.ones((2, 4)), tc.TopicModel(T=1, v=3, tau=1))
    with pytest.raises(TypeError, match="tm must be a TopicModel"):
        topic_block_sums(np.ones((2, 4)), None)
