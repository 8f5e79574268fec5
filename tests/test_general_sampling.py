"""Finite documents from a GeneralTopicModel (SPEC §11.1): word law p_theta = phi^T theta, the theta law,
masking, determinism and bad input. Statistical checks use z-scores against stated standard errors
(binomial for fixed theta, the across-document SE for the mixture) with a fixed seed."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _general_strategies import constructed_model
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

import theorycheck as tc
from theorycheck.models import GeneralTopicModel
from theorycheck.sampling import PAD, documents, mask_documents, sample_documents, token_counts
from theorycheck.sampling.documents import draw_words

Z = 5.0  # |z| bound per coordinate (two-sided tail 6e-7 per test coordinate)


@st.composite
def general_models(draw, max_T=5, max_words=12):
    """Random general models: Dirichlet rows with some zeros, or a constructor with drawn parameters."""
    kind = draw(st.sampled_from(["random", "eps", "shared", "zipf", "unequal"]))
    T = draw(st.integers(1 if kind != "shared" else 2, max_T))
    law = draw(st.sampled_from(["uniform-tau", "dirichlet"]))
    kw = {"prior": "dirichlet", "alpha": draw(st.floats(0.05, 3.0))} if law == "dirichlet" else {}
    if law == "uniform-tau":
        kw = {"tau": draw(st.integers(1, T))}
    v = draw(st.integers(1, 4))
    if kind == "random":
        n = draw(st.integers(T, max_words))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        phi = rng.dirichlet(np.full(n, 0.7), size=T) * (rng.random((T, n)) < 0.7)
        phi[np.arange(n) % T, np.arange(n)] += 0.1  # every word in some topic, every row non-zero
        return GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), **kw)
    return constructed_model(draw, kind, T, v, kw, max_size=4)


@settings(max_examples=40)
@given(g=general_models(), seed=st.integers(0, 2**31), N=st.integers(1, 9))
def test_documents_shape_support_padding(g, seed, N):
    docs = sample_documents(g, 7, (1, N), seed=seed)
    assert docs.tokens.shape == (7, N) and docs.tokens.dtype == np.int64
    assert np.all((docs.lengths >= 1) & (docs.lengths <= N))
    pos = np.arange(N)[None, :]
    assert np.all((docs.tokens == PAD) == (pos >= docs.lengths[:, None]))
    assert docs.theta.shape == (7, g.T) and np.allclose(docs.theta.sum(axis=1), 1.0)
    # every word has positive probability under its document's p_theta (zero-probability words never drawn)
    p = g.word_density(docs.theta)
    valid = docs.tokens != PAD
    rows = np.broadcast_to(np.arange(7)[:, None], docs.tokens.shape)[valid]
    assert np.all(p[rows, docs.tokens[valid]] > 0)
    if g.prior == "uniform-tau":
        assert docs.topics.shape == (7, g.tau)
        assert np.all(np.diff(docs.topics, axis=1) > 0) if g.tau > 1 else True


@pytest.mark.parametrize(
    "g",
    [
        GeneralTopicModel.overlapping(4, 3, eps=0.3, tau=2),
        GeneralTopicModel.unequal([1, 3, 5], tau=2),
        GeneralTopicModel.zipf(3, 5, 1.3, tau=1),
        GeneralTopicModel.overlapping(3, 4, n_shared=2, tau=2),
    ],
    ids=["overlap-eps", "unequal", "zipf", "shared"],
)
def test_word_frequencies_match_p_theta_for_a_fixed_topic_set(g):
    """All documents on one topic set S: token counts ~ Multinomial(total, p_S); each word's
    frequency within Z binomial SEs, and Pearson's chi-square p-value above 1e-4."""
    n_docs, N = 400, 50
    S = np.tile(np.arange(g.tau), (n_docs, 1))
    docs = sample_documents(g, n_docs, N, seed=3, topic_sets=S)
    counts = token_counts(docs.tokens, g.V1).sum(axis=0)[1:]
    total = n_docs * N
    theta = np.zeros(g.T)
    theta[: g.tau] = 1.0 / g.tau
    p = g.word_density(theta)[1:]
    se = np.sqrt(p * (1 - p) / total)
    z = np.abs(counts / total - p)[p > 0] / se[p > 0]
    assert z.max() < Z, z.max()
    assert np.all(counts[p == 0] == 0)
    pos = p > 0
    assert sps.chisquare(counts[pos], total * p[pos]).pvalue > 1e-4


@pytest.mark.parametrize(
    "g",
    [
        GeneralTopicModel.overlapping(4, 3, eps=0.2, tau=2),
        GeneralTopicModel.unequal([2, 3, 6], prior="dirichlet", alpha=[0.3, 1.0, 2.0]),
        GeneralTopicModel.zipf(3, 4, 0.8, prior="dirichlet", alpha=0.5),
    ],
    ids=["overlap-tau", "unequal-dirichlet-vector", "zipf-dirichlet"],
)
def test_mean_word_law_is_phi_T_mu(g):
    """E[p] = Phi^T mu (SPEC §11.2): the mean per-document frequency vector within Z across-document SEs."""
    n_docs, N = 4000, 20
    docs = sample_documents(g, n_docs, N, seed=11)
    f = token_counts(docs.tokens, g.V1)[:, 1:] / N
    mu, _ = g.theta_moments()
    Ep = mu @ g.phi
    se = f.std(axis=0, ddof=1) / math.sqrt(n_docs)
    z = np.abs(f.mean(axis=0) - Ep) / se
    assert z.max() < Z, z.max()
    # per-document frequencies are unbiased for p_theta of that document (conditional check)
    resid = f - g.word_density(docs.theta)[:, 1:]
    assert np.abs(resid.mean(axis=0)).max() < Z * (resid.std(axis=0, ddof=1) / math.sqrt(n_docs)).max()


def test_uniform_tau_topic_sets_are_uniform():
    g = GeneralTopicModel.overlapping(5, 2, eps=0.1, tau=2)
    docs = sample_documents(g, 5000, 1, seed=5)
    sets = list(itertools.combinations(range(5), 2))
    counts = np.array([np.sum(np.all(docs.topics == np.array(S), axis=1)) for S in sets])
    assert counts.sum() == 5000
    assert sps.chisquare(counts).pvalue > 1e-4
    in_set = (np.arange(5)[None, :, None] == docs.topics[:, None, :]).any(axis=2)
    np.testing.assert_array_equal(docs.theta, np.where(in_set, 0.5, 0.0))


def test_dirichlet_theta_mean_and_variance():
    alpha = np.array([0.2, 0.5, 1.0, 3.0])
    g = GeneralTopicModel.zipf(4, 3, 1.0, prior="dirichlet", alpha=alpha)
    n = 20000
    th = sample_documents(g, n, 1, seed=9).theta
    a0 = alpha.sum()
    mean, var = alpha / a0, alpha * (a0 - alpha) / (a0**2 * (a0 + 1))
    assert np.all(np.abs(th.mean(axis=0) - mean) < Z * np.sqrt(var / n))
    # sample variance: SE from the fourth central moment (estimated)
    c = th - mean
    se_var = np.sqrt(((c**2 - var) ** 2).mean(axis=0) / n)
    assert np.all(np.abs(th.var(axis=0) - var) < Z * se_var)
    M2 = g.theta_moments()[1]
    P = th[:, :, None] * th[:, None, :]
    assert np.all(np.abs(P.mean(axis=0) - M2) < Z * P.std(axis=0, ddof=1) / math.sqrt(n))


def test_same_seed_same_documents_and_masks():
    g = GeneralTopicModel.overlapping(4, 3, eps=0.2, prior="dirichlet", alpha=0.3)
    mk = tc.Masking(p_m=0.3, p_c=0.2, p_r=0.3)
    a, b = sample_documents(g, 9, (3, 12), seed=42), sample_documents(g, 9, (3, 12), seed=42)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(mask_documents(a, g, mk, seed=1).inputs, mask_documents(b, g, mk, seed=1).inputs)
    c = sample_documents(g, 9, (3, 12), seed=43)
    assert not np.array_equal(a.tokens, c.tokens)
    d = sample_documents(g, 9, (3, 12), rng=np.random.default_rng(42))
    np.testing.assert_array_equal(a.tokens, d.tokens)


def test_masking_replacement_words_uniform_over_n_words():
    """mask_documents unchanged: with p_m = 1, p_r = 1 every input is a uniform word 1..n_words."""
    g = GeneralTopicModel.unequal([1, 2, 7], tau=1)
    docs = sample_documents(g, 300, 40, seed=0)
    m = mask_documents(docs, g, tc.Masking(p_m=1.0, p_c=0.0, p_r=1.0), seed=1)
    assert m.selected.all()
    counts = np.bincount(m.inputs.ravel(), minlength=g.V1)
    assert counts[0] == 0
    assert sps.chisquare(counts[1:]).pvalue > 1e-4
    m2 = mask_documents(docs, g, tc.Masking(p_m=1.0, p_c=0.0, p_r=0.0), seed=1)
    assert np.all(m2.inputs == 0)
    np.testing.assert_array_equal(m2.targets, docs.tokens)


class _EdgeRng:
    """``random`` returns the largest double below 1: the inverse CDF's rounding edge."""

    def random(self, shape):
        return np.full(shape, np.nextafter(1.0, 0.0))


def test_inverse_cdf_edge_stays_in_the_topic_support():
    g = GeneralTopicModel.unequal([3, 2, 4], tau=1)
    topic = np.array([[0, 1, 2, 0, 1, 2]])
    w = draw_words(g.phi, topic, _EdgeRng())
    np.testing.assert_array_equal(w, [[3, 5, 9, 3, 5, 9]])  # last word of each topic, not the next topic's
    phi = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])  # topic 0's trailing word has probability 0
    np.testing.assert_array_equal(draw_words(phi, np.array([[0, 1]]), _EdgeRng()), [[2, 3]])


def test_paper_model_through_the_general_path_has_the_symmetric_law():
    tm = tc.TopicModel(T=4, v=3, tau=2)
    g = GeneralTopicModel.from_topic_model(tm)
    docs = sample_documents(g, 500, 30, seed=2)
    assert docs.tokens.max() <= tm.n_words and docs.tokens[docs.tokens != PAD].min() >= 1
    topic = (docs.tokens - 1) // tm.v
    assert np.all((topic[:, :, None] == docs.topics[:, None, :]).any(axis=2) | (docs.tokens == PAD))
    counts = token_counts(docs.tokens, g.V1).sum(axis=0)[1:]
    assert sps.chisquare(counts).pvalue > 1e-4  # E[p] = u for the paper's model


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_docs": 0, "N": 5}, "n_docs"),
        ({"n_docs": 2, "N": 0}, "N"),
        ({"n_docs": 2, "N": (6, 3)}, "lo <= hi"),
        ({"n_docs": 2, "N": 5, "topic_sets": [[0, 1]]}, "topic_sets"),
        ({"n_docs": 1, "N": 5, "topic_sets": [[0, 0]]}, "distinct"),
        ({"n_docs": 1, "N": 5, "topic_sets": [[0, 9]]}, "topic_sets"),
        ({"n_docs": 10**9, "N": 10**6}, "sample_documents"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    g = GeneralTopicModel.overlapping(3, 2, eps=0.5, tau=2)
    with pytest.raises(ValueError, match=match):
        sample_documents(g, **kwargs, seed=0)


def test_topic_sets_refused_for_dirichlet():
    g = GeneralTopicModel.overlapping(3, 2, eps=0.5, prior="dirichlet", alpha=1.0)
    with pytest.raises(ValueError, match="topic_sets"):
        sample_documents(g, 1, 3, seed=0, topic_sets=[[0]])


# ---------------------------------------------------------------------------- fast path vs generic route
# The paper's TopicModel samples words as 1 + z v + U{0..v-1} (sampling.documents._draw's TopicModel
# fast path); the generic route (_draw.dispatch(GeneralTopicModel)) draws them from phi's row CDFs. Other
# RNG calls, so the words differ: the test is one of laws, on independent seeds. Statistic: the joint
# counts of (topic set, first word, second word) of every document (the topic set for uniform-tau only;
# the word pair carries the within-document correlation, i.e. the theta law) and, for the Dirichlet
# law, theta[:, 0]. Tests: chi-square homogeneity of the two count tables (scipy.stats.chi2_contingency)
# and two-sample Kolmogorov-Smirnov on theta[:, 0], each p > 1e-6 (fixed seeds: deterministic). Power:
# the first word of the block instead of a uniform one on a tenth of the documents gives p < 1e-6
# (test_the_homogeneity_statistic_detects_a_wrong_word_law).
PAPER_LAWS = [
    {"T": 3, "v": 2, "tau": 2},
    {"T": 4, "v": 3, "tau": 1},
    {"T": 2, "v": 3, "tau": 2},
    {"T": 3, "v": 2, "prior": "dirichlet", "alpha": 0.4},
    {"T": 2, "v": 2, "prior": "dirichlet", "alpha": 2.0},
]
P_MIN = 1e-6
GENERIC = documents._draw.dispatch(GeneralTopicModel)


def _cells(tm, words, sets):
    """One code per document: (topic set rank, first word, second word)."""
    n = tm.n_words
    code = (words[:, 0] - 1) * n + (words[:, 1] - 1)
    if sets is not None:
        rank = {s: i for i, s in enumerate(itertools.combinations(range(tm.T), tm.tau))}
        code = code + n * n * np.array([rank[tuple(s)] for s in sets.tolist()])
    return code


def _homogeneity_p(a, b) -> float:
    K = int(max(a.max(), b.max())) + 1
    table = np.stack([np.bincount(a, minlength=K), np.bincount(b, minlength=K)])
    return sps.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue


@pytest.mark.parametrize("law", PAPER_LAWS, ids=lambda d: "-".join(f"{k}{v}" for k, v in d.items()))
def test_paper_fast_sampler_has_the_generic_route_law(law):
    tm = tc.TopicModel(**law)
    assert documents._draw.dispatch(type(tm)) is not GENERIC
    w1, s1, t1 = documents._draw(tm, (20_000, 2), np.random.default_rng(11), None)
    w2, s2, t2 = GENERIC(tm, (20_000, 2), np.random.default_rng(12), None)
    for w in (w1, w2):
        assert w.shape == (20_000, 2) and w.min() >= 1 and w.max() <= tm.n_words
    assert (s1 is None) == (s2 is None) == (tm.prior != "uniform-tau")
    assert _homogeneity_p(_cells(tm, w1, s1), _cells(tm, w2, s2)) > P_MIN
    if tm.prior == "dirichlet":
        assert sps.ks_2samp(t1[:, 0], t2[:, 0]).pvalue > P_MIN


@st.composite
def paper_models(draw):
    T = draw(st.integers(1, 5))
    v = draw(st.integers(1, 4))
    if draw(st.booleans()):
        return tc.TopicModel(T=T, v=v, tau=draw(st.integers(1, T)))
    return tc.TopicModel(T=T, v=v, prior="dirichlet", alpha=draw(st.floats(0.2, 3.0)))


@settings(max_examples=40)
@given(tm=paper_models(), seed=st.integers(0, 2**31), n_docs=st.integers(1, 30), N=st.integers(1, 9))
def test_paper_fast_sampler_draws_the_generic_topics_bit_for_bit(tm, seed, n_docs, N):
    """Both routes make the same RNG calls up to the topic of every position (uniform-tau: the set
    ranking, then a uniform member of the set; Dirichlet: theta, then one uniform per position), so on
    one seed the sets, theta (Dirichlet) and position topics are identical and only the word within
    its topic's block differs."""
    w1, s1, t1 = documents._draw(tm, (n_docs, N), np.random.default_rng(seed), None)
    w2, s2, t2 = GENERIC(tm, (n_docs, N), np.random.default_rng(seed), None)
    np.testing.assert_array_equal((w1 - 1) // tm.v, (w2 - 1) // tm.v)
    if tm.prior == "uniform-tau":
        np.testing.assert_array_equal(s1, s2)
        in_set = (np.arange(tm.T)[None, :, None] == s2[:, None, :]).any(axis=2)
        np.testing.assert_array_equal(t2, in_set / tm.tau)
    else:
        np.testing.assert_array_equal(t1, t2)


def test_paper_fast_sampler_with_fixed_topic_sets_has_the_generic_route_law():
    """Stratified sampling (topic_sets given): the same sets, the same word law within them."""
    tm = tc.TopicModel(T=4, v=2, tau=2)
    sets = np.array(list(itertools.combinations(range(4), 2)))[np.arange(12_000) % 6][:, ::-1]
    w1, s1, _ = documents._draw(tm, (12_000, 2), np.random.default_rng(5), sets)
    w2, s2, _ = GENERIC(tm, (12_000, 2), np.random.default_rng(6), sets)
    np.testing.assert_array_equal(s1, np.sort(sets, axis=1))
    np.testing.assert_array_equal(s2, np.sort(sets, axis=1))
    assert _homogeneity_p(_cells(tm, w1, s1), _cells(tm, w2, s2)) > P_MIN


def test_the_homogeneity_statistic_detects_a_wrong_word_law():
    """Power of the statistic above: a fast path that draws the first word of the block instead of a
    uniform one on a tenth of the documents is rejected."""
    tm = tc.TopicModel(T=3, v=2, tau=2)
    w1, s1, _ = documents._draw(tm, (20_000, 2), np.random.default_rng(11), None)
    w2, s2, _ = GENERIC(tm, (20_000, 2), np.random.default_rng(12), None)
    bad = np.where((np.arange(20_000) % 10 == 0)[:, None], (w1 - 1) // tm.v * tm.v + 1, w1)
    assert _homogeneity_p(_cells(tm, bad, s1), _cells(tm, w2, s2)) < P_MIN


def test_public_sampler_routes_by_model_type():
    """sample_documents on the paper's model takes its fast path (no theta for uniform-tau), on
    GeneralTopicModel.from_topic_model(tm) the generic route (theta of every document); the lengths
    and topic sets are the same draws."""
    tm = tc.TopicModel(T=3, v=2, tau=2)
    g = GeneralTopicModel.from_topic_model(tm)
    a, b = sample_documents(tm, 6, (2, 5), seed=3), sample_documents(g, 6, (2, 5), seed=3)
    assert a.theta is None and b.theta is not None
    np.testing.assert_array_equal(a.lengths, b.lengths)
    np.testing.assert_array_equal(a.topics, b.topics)
