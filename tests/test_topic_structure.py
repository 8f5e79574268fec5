"""Topic-structure statistics of matrices and attention scores for any topic-word matrix (SPEC §11.6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.analysis.topic_structure import (
    attention_preference,
    matrix_topic_stats,
    topic_gap,
    word_topics,
)
from theorycheck.models import GeneralTopicModel
from theorycheck.population import stage1_block_constants

MK = tc.Masking()


@st.composite
def paper_models(draw):
    T = draw(st.integers(2, 5))
    v = draw(st.integers(2, 4))
    tau = draw(st.integers(1, T - 1))
    p_m = draw(st.sampled_from([0.15, 0.4, 0.9]))
    p_c = draw(st.sampled_from([0.0, 0.1, 0.3]))
    p_r = draw(st.sampled_from([0.0, 0.1, 0.4]))
    return tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(p_m, p_c, p_r)


@st.composite
def general_models(draw):
    """Random Dirichlet rows, overlapping (eps or shared words), Zipfian and unequal topics."""
    kind = draw(st.sampled_from(["dirichlet-rows", "eps", "shared", "zipf", "unequal"]))
    T = draw(st.integers(2, 4))
    tau = draw(st.integers(1, T))
    if kind == "dirichlet-rows":
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        return GeneralTopicModel(rng.dirichlet(np.full(draw(st.integers(3, 9)), 0.5), size=T), tau=tau)
    if kind == "eps":
        return GeneralTopicModel.overlapping(T, draw(st.integers(1, 3)), eps=draw(st.floats(0, 0.99)), tau=tau)
    if kind == "shared":
        v = draw(st.integers(1, 3))
        return GeneralTopicModel.overlapping(T, v, n_shared=draw(st.integers(0, v)), tau=tau)
    if kind == "zipf":
        return GeneralTopicModel.zipf(T, draw(st.integers(1, 3)), draw(st.floats(0, 3)), tau=tau)
    return GeneralTopicModel.unequal(draw(st.lists(st.integers(1, 3), min_size=T, max_size=T)), tau=tau)


# ----------------------------------------------------------------------------- brute force
def _pairs_brute(M, z, include_diagonal):
    """Explicit pair lists: gap, Pearson correlation (np.corrcoef) and eta^2 of block means."""
    n = len(z)
    vals, same, block = [], [], []
    for i, j in itertools.product(range(n), range(n)):
        if i == j and not include_diagonal:
            continue
        vals.append(M[i, j])
        same.append(z[i] == z[j])
        block.append((z[i], z[j]))
    vals, same = np.array(vals), np.array(same)
    gap = vals[same].mean() - vals[~same].mean()
    corr = 0.0 if np.std(vals) == 0 else np.corrcoef(vals, same.astype(float))[0, 1]
    means = {b: np.mean([x for x, bb in zip(vals, block) if bb == b]) for b in set(block)}
    fitted = np.array([means[b] for b in block])
    energy = 0.0 if np.std(vals) == 0 else np.sum((fitted - vals.mean()) ** 2) / np.sum((vals - vals.mean()) ** 2)
    return gap, corr, energy


@settings(max_examples=40)
@given(st.integers(2, 4), st.integers(1, 4), st.integers(0, 2**16), st.booleans())
def test_matrix_stats_equal_explicit_pair_lists(T, v, seed, diag):
    rng = np.random.default_rng(seed)
    g = GeneralTopicModel(rng.dirichlet(np.ones(T * v), size=T), tau=1)
    if T * v < 3:
        return
    z = rng.integers(0, T, size=T * v)
    z[:3] = [0, 0, 1]
    M = rng.standard_normal((g.V1, g.V1))
    st_ = matrix_topic_stats(M, g, topics=z, include_diagonal=diag)
    gap, corr, energy = _pairs_brute(M[1:, 1:], z, diag)
    assert st_.gap == pytest.approx(gap, abs=1e-12)
    assert st_.correlation == pytest.approx(corr, abs=1e-12)
    assert st_.energy == pytest.approx(energy, abs=1e-12)
    assert -1 <= st_.correlation <= 1 and 0 <= st_.energy <= 1


@settings(max_examples=25)
@given(paper_models())
def test_paper_value_matrix_gap_is_A_minus_B0(models):
    """Independent route: the symmetric solver's W^V and the closed-form block constants (SPEC §4.2)."""
    tm, mk = models
    if mk.a == 0:
        return
    g = GeneralTopicModel.from_topic_model(tm)
    A, B0, _ = stage1_block_constants(tm, mk)
    W = np.asarray(tc.solvers.optimal_value_matrix(tm, mk).x)
    s = matrix_topic_stats(W, g)
    assert s.gap == pytest.approx(A - B0, rel=1e-9, abs=1e-12)
    assert s.same_mean == pytest.approx(A, rel=1e-9, abs=1e-12)
    assert s.diff_mean == pytest.approx(B0, rel=1e-9, abs=1e-12)
    assert s.correlation == pytest.approx(1.0, abs=1e-9) and s.energy == pytest.approx(1.0, abs=1e-9)
    # the general min-norm W^V of the same model gives the same statistics
    Wg = tc.solvers.optimal_value_matrix(g, mk).x
    assert matrix_topic_stats(Wg, g).gap == pytest.approx(A - B0, rel=1e-9, abs=1e-12)


@settings(max_examples=25)
@given(general_models(), st.integers(0, 2**16))
def test_invariant_under_topic_and_word_permutation(g, seed):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 3, size=g.n_words)
    if g.n_words < 3:
        return
    z[:3] = [0, 0, 1]
    M = rng.standard_normal((g.n_words, g.n_words))
    base = matrix_topic_stats(M, g, topics=z)
    relabel = rng.permutation(3)[z]  # permute topic names
    assert np.allclose(matrix_topic_stats(M, g, topics=relabel)[:5], base[:5], atol=1e-12)
    P = rng.permutation(g.n_words)  # permute words consistently
    assert np.allclose(matrix_topic_stats(M[np.ix_(P, P)], g, topics=z[P])[:5], base[:5], atol=1e-12)


@settings(max_examples=20)
@given(paper_models(), st.integers(0, 2**16), st.booleans())
def test_paper_model_equals_its_general_copy(models, seed, diag):
    """Any model is accepted: the paper's TopicModel gives the statistics of its general copy
    (``GeneralTopicModel.from_topic_model``), bit for bit (one route; the labels are equal)."""
    tm, mk = models
    g = GeneralTopicModel.from_topic_model(tm)
    M = np.random.default_rng(seed).standard_normal((tm.V1, tm.V1))
    assert matrix_topic_stats(M, tm, include_diagonal=diag) == matrix_topic_stats(M, g, include_diagonal=diag)
    if mk.p_c + mk.p_r > 0 and 2 <= tm.tau < tm.T:
        assert attention_preference(M, tm, mk) == attention_preference(M, g, mk)


@pytest.mark.parametrize("make", [lambda n: np.full((n, n), 2.5), lambda n: 3.0 * np.eye(n) - 0.7])
def test_structureless_matrix_scores_zero(make):
    g = GeneralTopicModel.overlapping(3, 3, eps=0.3, tau=2)
    s = matrix_topic_stats(make(g.n_words), g)
    assert s.gap == pytest.approx(0.0, abs=1e-15)
    assert s.correlation == 0.0 and s.energy == 0.0


def test_diagonal_option_and_lowrank_input():
    g = GeneralTopicModel.zipf(3, 3, 1.0, tau=2)
    res = tc.solvers.optimal_value_matrix(g, MK, options={"dense": False})
    dense = res.x.toarray()
    assert matrix_topic_stats(res.x, g) == matrix_topic_stats(dense, g)
    M = np.eye(g.n_words)
    assert topic_gap(M, g) == 0.0
    assert topic_gap(M, g, include_diagonal=True) == pytest.approx(1.0 / 3.0)  # 3 of 9 same-topic pairs


def test_errors_name_the_parameter():
    g = GeneralTopicModel.overlapping(3, 2, eps=0.2, tau=1)
    M = np.zeros((g.V1, g.V1))
    with pytest.raises(ValueError, match="M must have shape"):
        matrix_topic_stats(np.zeros((3, 3)), g)
    with pytest.raises(ValueError, match="topics must have shape"):
        matrix_topic_stats(M, g, topics=[0, 1])
    with pytest.raises(ValueError, match="topics"):
        matrix_topic_stats(M, g, topics=np.zeros(g.n_words, dtype=int))  # one label: no different pair
    with pytest.raises(ValueError, match="topics must be non-negative"):
        word_topics(g, -np.ones(g.n_words, dtype=int))
    with pytest.raises(ValueError, match="topics"):
        matrix_topic_stats(np.eye(4), GeneralTopicModel.unequal([1, 1, 1], tau=1))  # singletons, no diagonal
    with pytest.raises(TypeError, match="GeneralTopicModel"):
        matrix_topic_stats(M, "not a model")
    with pytest.raises(ValueError, match="M"):
        matrix_topic_stats(np.full((g.V1, g.V1), np.nan), g)
    with pytest.raises(ValueError, match="p_c \\+ p_r"):
        attention_preference(np.zeros((g.V1, g.V1)), g, tc.Masking(0.15, 0.0, 0.0))
    with pytest.raises(ValueError, match="S"):
        attention_preference(np.zeros((2, 2)), g, MK)


# ----------------------------------------------------------------------------- attention
def _preference_brute(S, g, mk, z, include_self):
    """Loops over sets, queries and keys with the softmax written out (SPEC §11.6)."""
    num = den = 0.0
    n = g.n_words
    for sset in itertools.combinations(range(g.T), g.tau):
        theta = np.zeros(g.T)
        theta[list(sset)] = 1.0 / g.tau
        p = g.word_density(theta)
        m = mk.a * p + np.r_[mk.q, np.full(n, mk.r / n)]
        for x in range(1, n + 1):
            Z = sum(m[y] * np.exp(S[x, y]) for y in range(g.V1))
            same = [y for y in range(1, n + 1) if z[y - 1] == z[x - 1] and (include_self or y != x)]
            diff = [y for y in range(1, n + 1) if z[y - 1] != z[x - 1]]
            ms, md = sum(m[y] for y in same), sum(m[y] for y in diff)
            if ms <= 0 or md <= 0:
                continue
            ks = sum(m[y] * np.exp(S[x, y]) / Z for y in same) / ms
            kd = sum(m[y] * np.exp(S[x, y]) / Z for y in diff) / md
            w = mk.p_c * p[x] + mk.p_r / n
            num += w * (ks - kd)
            den += w
    return num / den if den > 0 else None


@settings(max_examples=20)
@given(general_models(), st.integers(0, 2**16), st.booleans())
def test_preference_equals_explicit_loops(g, seed, include_self):
    rng = np.random.default_rng(seed)
    S = rng.uniform(-3, 3, size=(g.V1, g.V1))
    z = g.dominant_topic()
    if np.unique(z).size < 2:
        return
    expected = _preference_brute(S, g, MK, z, include_self)
    if expected is None:  # e.g. singleton topics without the query's own word: no same-topic key
        with pytest.raises(ValueError, match="topics: no word query"):
            attention_preference(S, g, MK, include_self=include_self)
        return
    assert attention_preference(S, g, MK, include_self=include_self) == pytest.approx(expected, rel=1e-10, abs=1e-12)


@settings(max_examples=30)
@given(paper_models(), st.floats(-4, 4), st.floats(-4, 4))
def test_paper_family_preference_closed_form(models, alpha, beta):
    """(alpha, beta) family on the paper's model: pref = (K/v - 1) [w_in/Z + w_out/Z'] / (p_c + p_r) (SPEC §4.3)."""
    tm, mk = models
    if mk.p_c + mk.p_r == 0 or (tm.tau == 1 and mk.p_r == 0):  # no word query / no different-topic context
        return
    g = GeneralTopicModel.from_topic_model(tm)
    T, v, tau, n = tm.T, tm.v, tm.tau, tm.T * tm.v
    z = g.dominant_topic()
    S = np.zeros((g.V1, g.V1))
    S[1:, 1:] = np.where(z[:, None] == z[None, :], beta, 0.0)
    np.fill_diagonal(S[1:, 1:], alpha)
    K = np.exp(alpha) + (v - 1) * np.exp(beta)
    rho, eta = mk.a / (tau * v) + mk.r / n, mk.r / n
    Z, Zp = 1 + rho * (K - v), 1 + eta * (K - v)
    w_in, w_out = mk.p_c + mk.p_r * tau / T, mk.p_r * (T - tau) / T
    expected = (K / v - 1) * (w_in / Z + w_out / Zp) / (mk.p_c + mk.p_r)
    pref = attention_preference(S, g, mk)
    assert pref == pytest.approx(expected, rel=1e-10, abs=1e-13)
    if abs(K / v - 1) > 1e-12:  # the sign of the preference is the sign of K / v - 1
        assert np.sign(pref) == np.sign(K / v - 1)
    else:  # no preference (e.g. S = 0): zero up to round-off (hypothesis's random profile found 2.2e-16)
        assert abs(pref) <= 1e-13


def test_uniform_attention_has_no_preference_and_dirichlet_is_seeded():
    g = GeneralTopicModel.zipf(3, 3, 1.2, prior="dirichlet", alpha=0.3)
    S0 = np.zeros((g.V1, g.V1))
    assert attention_preference(S0, g, MK, n_theta=64, seed=1) == pytest.approx(0.0, abs=1e-14)
    S = np.random.default_rng(0).standard_normal((g.V1, g.V1))
    a = attention_preference(S, g, MK, n_theta=64, seed=1)
    assert a == attention_preference(S, g, MK, n_theta=64, seed=1)
    assert a != attention_preference(S, g, MK, n_theta=64, seed=2)


def test_preference_mask_keys_and_family_sign():
    """With mask_keys the context is p_theta; a positive beta on the co-topic G prefers same-topic keys."""
    g = GeneralTopicModel.overlapping(4, 3, eps=0.4, tau=2)
    G = tc.solvers.cotopic_matrix(g)
    for beta in (0.5, 2.0):
        assert attention_preference(beta * G, g, MK, include_self=False) > 0
        assert attention_preference(-beta * G, g, MK, include_self=False, mask_keys=True) < 0
