"""Finite documents, masking and the Monte Carlo loss estimator."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.sampling import PAD, mask_documents, sample_documents, token_counts
from theorycheck.sampling.montecarlo import _doc_losses_ref, doc_losses, mc_attention_loss
from theorycheck.strategies import maskings, topic_models


@given(topic_models(max_T=8), st.integers(1, 20), st.integers(0, 2**31))
def test_uniform_tau_documents_respect_topic_sets(tm, n_docs, seed):
    docs = sample_documents(tm, n_docs, (3, 9), seed=seed)
    assert docs.tokens.shape == (n_docs, 9)
    assert np.all((docs.lengths >= 3) & (docs.lengths <= 9))
    for i in range(n_docs):
        L = docs.lengths[i]
        assert np.all(docs.tokens[i, L:] == PAD)
        words = docs.tokens[i, :L]
        assert np.all((words >= 1) & (words <= tm.n_words))
        assert set(tm.topic_of(words)) <= set(docs.topics[i])
        assert len(set(docs.topics[i])) == tm.tau


def test_same_seed_bit_identical():
    tm, mk = tc.TopicModel(T=10, v=10, prior="dirichlet", alpha=0.1), tc.Masking()
    a = mask_documents(sample_documents(tm, 50, (100, 150), seed=3), tm, mk, seed=4)
    b = mask_documents(sample_documents(tm, 50, (100, 150), seed=3), tm, mk, seed=4)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


def test_word_frequencies_uniform_within_document_topics():
    """Chi-square: words are uniform over the tau*v words of the document's topic set."""
    tm = tc.TopicModel(T=5, v=4, tau=2)
    docs = sample_documents(tm, 1, 200_000, topic_sets=[[1, 3]], seed=0)
    counts = np.bincount(docs.tokens[0], minlength=tm.V1)
    inside = np.isin(tm.token_topics(), [1, 3])
    assert counts[~inside].sum() == 0
    obs = counts[inside]
    exp = obs.sum() / obs.size
    chi2 = np.sum((obs - exp) ** 2 / exp)
    # 7 degrees of freedom: P(chi2 > 30) < 1e-4
    assert chi2 < 30


def test_dirichlet_topic_proportions():
    """Per-document topic frequencies track theta; theta has the Dirichlet(alpha) mean and variance."""
    tm = tc.TopicModel(T=4, v=3, prior="dirichlet", alpha=0.5)
    docs = sample_documents(tm, 4000, 400, seed=1)
    th = docs.theta
    # E theta_t = 1/T ; Var theta_t = (1/T)(1-1/T)/(T alpha + 1)
    var = (1 / 4) * (3 / 4) / (4 * 0.5 + 1)
    assert abs(th[:, 0].mean() - 0.25) < 5 * math.sqrt(var / 4000)
    freq = np.stack([np.bincount(tm.topic_of(docs.tokens[i]), minlength=4) for i in range(200)]) / 400
    # multinomial sampling noise: sd <= sqrt(0.25/400) = 0.025 per entry
    assert np.max(np.abs(freq - th[:200])) < 6 * 0.025


@given(maskings(min_p_m=0.05), st.integers(0, 2**31))
@settings(max_examples=15)
def test_masking_fractions(mk, seed):
    tm = tc.TopicModel(T=6, v=5, tau=2)
    docs = sample_documents(tm, 200, 200, seed=seed)
    batch = mask_documents(docs, tm, mk, seed=seed + 1, at_least_one=False)
    n = docs.tokens.size
    sel = batch.selected
    se = math.sqrt(mk.p_m * (1 - mk.p_m) / n) + 1e-12
    assert abs(sel.mean() - mk.p_m) < 5 * se
    assert np.array_equal(batch.inputs[~sel], docs.tokens[~sel])
    k = sel.sum()
    shown_mask = (batch.inputs[sel] == 0).mean()
    se_k = math.sqrt(0.25 / k)
    assert abs(shown_mask - mk.p_mask) < 5 * se_k
    kept = (batch.inputs[sel] == docs.tokens[sel]).mean()
    # a random replacement equals the original word with probability 1/(T v)
    assert abs(kept - (mk.p_c + mk.p_r / tm.n_words)) < 5 * se_k


def test_at_least_one_selected_and_counts():
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking(p_m=0.01)
    docs = sample_documents(tm, 300, (1, 5), seed=0)
    batch = mask_documents(docs, tm, mk, seed=1)
    assert np.all(batch.selected.any(axis=1))
    c = token_counts(batch.inputs, tm.V1)
    assert np.array_equal(c.sum(axis=1), docs.lengths)
    with pytest.raises(ValueError, match="p_m"):
        mask_documents(docs, tm, tc.Masking(p_m=0.0), seed=0)


@given(topic_models(max_T=5, max_v=3), maskings(), st.integers(0, 2**31), st.booleans())
@settings(max_examples=20)
def test_count_based_equals_position_based(tm, mk, seed, mask_keys):
    rng = np.random.default_rng(seed)
    S = rng.normal(scale=3.0, size=(tm.V1, tm.V1))
    W = rng.normal(size=(tm.V1, tm.V1))
    b = rng.normal(size=tm.V1)
    batch = mask_documents(sample_documents(tm, 6, (2, 12), rng=rng), tm, mk, rng=rng)
    if mask_keys:
        # every document (length >= 2) gets one selected position and one unselected key, so no
        # document is dropped and none is vacuous: position 0 is selected, position 1 is a key
        selected = batch.selected.copy()
        selected[:, 0], selected[:, 1] = True, False
        inputs = batch.inputs.copy()
        inputs[:, 1] = batch.targets[:, 1]  # an unselected position shows its word
        batch = type(batch)(inputs, selected, batch.targets, batch.lengths)
    got = doc_losses(batch, S, W, b, mask_keys=mask_keys)
    ref = _doc_losses_ref(batch.inputs, batch.selected, batch.targets, S, W, b, mask_keys)
    assert got.shape == (6,) and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_mc_estimator_against_exact_constant_predictor():
    """With W = 0 the output is b: loss = ||b||^2 - 2 E[b_x] + 1 with x ~ p_S, E[b_x] = u.b exactly."""
    tm, mk = tc.TopicModel(T=6, v=3, tau=2), tc.Masking()
    rng = np.random.default_rng(0)
    b = rng.normal(size=tm.V1)
    exact = b @ b - 2 * b[1:].mean() + 1
    for stratify in (True, False):
        est = mc_attention_loss(
            rng.normal(size=(tm.V1, tm.V1)),
            np.zeros((tm.V1, tm.V1)),
            tm,
            mk,
            N=40,
            n_docs=3000,
            b=b,
            seed=1,
            stratify=stratify,
        )
        assert abs(est.mean - exact) < 4 * est.stderr
        assert est.stderr > 0


def test_sampling_rejects_bad_input():
    tm = tc.TopicModel(T=4, v=2, tau=2)
    with pytest.raises(ValueError, match="n_docs"):
        sample_documents(tm, 0, 10, seed=0)
    with pytest.raises(ValueError, match="N"):
        sample_documents(tm, 3, (10, 5), seed=0)
    with pytest.raises(ValueError, match="N"):
        sample_documents(tm, 3, 0, seed=0)
    with pytest.raises(ValueError, match="topic_sets"):
        sample_documents(tm, 2, 5, topic_sets=[[0, 0], [1, 2]], seed=0)
    with pytest.raises(ValueError, match="rng or seed"):
        sample_documents(tm, 2, 5, seed=0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_docs"):
        mc_attention_loss(np.zeros((9, 9)), np.zeros((9, 9)), tm, tc.Masking(), N=5, n_docs=1)
