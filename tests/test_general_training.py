"""Training the numpy transformer on a general topic-word matrix (SPEC §11): the data configuration,
the exact population batch, fresh/static streams, the dominant-topic probes, and the two-stage
dynamic on overlapping topics (eps = 0.1)."""

from __future__ import annotations

import numpy as np
import pytest

import theorycheck as tc
from theorycheck.analysis import stats
from theorycheck.analysis.topic_structure import block_contrast, block_score, topic_attention_ratio
from theorycheck.models import GeneralTopicModel
from theorycheck.nn import ModelConfig
from theorycheck.nn.batches import population_batch
from theorycheck.nn.config import DataConfig, OptimConfig, TrainConfig, config_hash
from theorycheck.nn.model import Transformer
from theorycheck.nn.trainer import stage_curves, train

MK = tc.Masking(p_m=0.2, p_c=0.15, p_r=0.05)  # p_c != p_r
MODELS = {
    "overlap": GeneralTopicModel.overlapping(4, 3, eps=0.1, tau=2),
    "shared": GeneralTopicModel.overlapping(3, 3, n_shared=1, tau=2),
    "unequal": GeneralTopicModel.unequal([2, 3, 4], tau=2),
    "zipf": GeneralTopicModel.zipf(3, 4, 1.2, tau=1),
}


def _uniform_model(V1, **kw):
    return ModelConfig(V1=V1, attention="uniform", train=("W_V",), init_V="zero", loss="squared", **kw)


def test_data_config_from_general_model_roundtrip():
    g = MODELS["unequal"]
    d = DataConfig.from_model(g, MK, N=12)
    assert d.V1 == g.V1 == 10 and d.T == 3
    assert d.topic_model() == g and d.masking() == MK
    cfg = TrainConfig(data=d, steps=3)
    back = TrainConfig.from_dict(cfg.to_dict())
    assert back.data.topic_model() == g and config_hash(back) == config_hash(cfg)
    dg = DataConfig.from_model(GeneralTopicModel.zipf(3, 2, 1.0, prior="dirichlet", alpha=[0.2, 0.5, 1.0]))
    np.testing.assert_array_equal(dg.topic_model().alpha, [0.2, 0.5, 1.0])


def test_symmetric_configuration_unchanged_by_the_phi_field():
    cfg = TrainConfig(steps=3)
    assert "phi" not in cfg.to_dict()["data"]
    assert DataConfig.from_model(tc.TopicModel(T=4, v=3, tau=2)) == DataConfig(T=4, v=3, tau=2)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"phi": [[0.5, 0.6]], "T": 1}, ValueError, "phi"),
        ({"phi": [[1.0, 0.0]], "T": 1}, ValueError, "phi"),
        ({"phi": [[0.5, 0.5]], "T": 2}, ValueError, "T must equal"),
        ({"phi": [[0.5, 0.5], [0.5, 0.5]], "T": 2, "tau": 3}, ValueError, "tau"),
        (
            {"phi": [[0.5, 0.5]], "T": 1, "prior": "dirichlet", "tau": None, "alpha": 1.0, "source": "population"},
            ValueError,
            "population",
        ),  # fmt: skip
    ],
)
def test_bad_general_data_config(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataConfig(**kwargs)
    d = DataConfig.from_model(MODELS["zipf"])
    with pytest.raises(ValueError, match="T must equal"):
        d.T = 5
    assert d.T == 3  # rolled back


def test_population_batch_of_the_paper_model_equals_the_symmetric_one():
    tm = tc.TopicModel(T=4, v=3, tau=2)
    g = GeneralTopicModel.from_topic_model(tm)
    for mask_keys in (False, True):
        a, b = population_batch(tm, MK, mask_keys=mask_keys), population_batch(g, MK, mask_keys=mask_keys)
        for k in ("K", "Y", "weight"):
            np.testing.assert_allclose(getattr(b, k), getattr(a, k), rtol=0, atol=1e-15)
        for k in ("ctx", "qtok"):
            np.testing.assert_array_equal(getattr(b, k), getattr(a, k))


def _moments_11_2(g, mk):
    """Sigma, C straight from SPEC §11.2 (theta moments, Phi, c = r u + q e_0)."""
    mu, M2 = g.theta_moments()
    Phi = g.topic_token_matrix()
    Ep, Epp = Phi.T @ mu, Phi.T @ M2 @ Phi
    c = np.zeros(g.V1)
    c[1:] = mk.r / g.n_words
    c[0] = mk.q
    C = mk.a * Epp + np.outer(Ep, c)
    Sigma = mk.a**2 * Epp + mk.a * (np.outer(Ep, c) + np.outer(c, Ep)) + np.outer(c, c)
    return Sigma, C


@pytest.mark.parametrize("name", sorted(MODELS))
def test_population_batch_loss_is_the_exact_uniform_attention_loss(name):
    """Squared loss of uniform attention on the batch == tr(W Sigma W^T) - 2 tr(W C^T) + 1 (SPEC §11.2),
    and equals population.value_loss for the general model."""
    g = MODELS[name]
    Sigma, C = _moments_11_2(g, MK)
    S2, C2 = tc.population.moments(g, MK)
    np.testing.assert_allclose(S2, Sigma, atol=1e-14)
    np.testing.assert_allclose(C2, C, atol=1e-14)
    model = Transformer(_uniform_model(g.V1), rng=np.random.default_rng(0))
    batch = population_batch(g, MK)
    W = np.random.default_rng(1).normal(size=(g.V1, g.V1))
    model.layers[0].params["W_V"][0] = W
    exact = np.trace(W @ Sigma @ W.T) - 2 * np.trace(W @ C.T) + 1.0
    assert model.loss(batch) == pytest.approx(exact, rel=1e-12)
    assert model.loss(batch) == pytest.approx(tc.population.value_loss(W, g, MK), rel=1e-12)


def test_population_batch_refuses_dirichlet():
    g = GeneralTopicModel.zipf(3, 2, 1.0, prior="dirichlet", alpha=0.5)
    with pytest.raises(ValueError, match="uniform-tau"):
        population_batch(g, MK)


def test_stage1_optimum_is_stationary_on_the_general_population():
    """init_W_V='stage1-optimum' sets W^V = C Sigma^+ of the general moments (SPEC §11.3); the gradient of
    the exact population batch's loss vanishes there, and gradient descent from 0 approaches it."""
    g = MODELS["overlap"]
    d = DataConfig.from_model(g, MK, source="population")
    cfg = TrainConfig(data=d, model=_uniform_model(g.V1), steps=1, init_W_V="stage1-optimum", eval_docs=0)
    r = train(cfg, progress=False)
    assert r.history[0]["gradnorm_W_V"] < 1e-10
    assert r.history[0]["dist_W_V_opt"] == 0.0
    cfg = TrainConfig(data=d, model=_uniform_model(g.V1), steps=400, log_every=399, optim=OptimConfig("sgd", lr=8.0))
    r = train(cfg, progress=False)
    assert r.history[-1]["dist_W_V_opt"] < 0.05 < r.history[0]["dist_W_V_opt"]


@pytest.mark.parametrize("source", ["fresh", "static"])
def test_fresh_and_static_sources_train_and_are_deterministic(source):
    g = GeneralTopicModel.overlapping(3, 3, eps=0.2, prior="dirichlet", alpha=0.5)
    d = DataConfig.from_model(g, MK, N=(8, 12), source=source, n_train=30, n_dev=10)
    cfg = TrainConfig(data=d, steps=12, batch_size=6, log_every=4, eval_every=4, eval_docs=3)
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    assert [r["loss"] for r in a.history] == [r["loss"] for r in b.history]
    assert a.history[-1]["loss"] < a.history[0]["loss"]
    assert {"block_score_W_V", "topic_attention_ratio_median", "attn_same_topic"} <= set(a.final)
    assert ("dev_loss" in a.final) == (source == "static")


def test_dominant_topic_probes_equal_the_builtin_ones_on_the_paper_model():
    tm = tc.TopicModel(T=4, v=3, tau=2)
    labels = GeneralTopicModel.from_topic_model(tm).token_topics()
    rng = np.random.default_rng(4)
    M = rng.normal(size=(tm.V1, tm.V1))
    assert block_score(M, labels) == stats.block_score(M, tm.v)
    assert block_contrast(M, labels) == stats.block_contrast(M, tm.v)
    toks = tc.sampling.sample_documents(tm, 5, (4, 9), seed=1).tokens
    A = rng.random((5, 9, 9)) * (toks[:, None, :] >= 0)
    A /= A.sum(axis=2, keepdims=True)
    ref = stats.attention_class_averages(A, toks, tm.v, normalise=True)
    got = stats.attention_class_averages(A, toks, normalise=True, labels=labels)
    for k in ("same_word", "same_topic", "diff_topic"):
        assert got[k] == ref[k]
    S = rng.normal(size=(tm.V1, tm.V1))
    np.testing.assert_allclose(topic_attention_ratio(S, labels), stats.effective_K(S, tm.v) / tm.v, rtol=1e-12)
    assert np.allclose(topic_attention_ratio(np.zeros((tm.V1, tm.V1)), labels), 1.0)


def test_attention_class_averages_labels_refused_when_ambiguous_or_short():
    """stats.attention_class_averages takes exactly one of v and labels; labels must cover every token."""
    A, toks = np.full((1, 2, 2), 0.5), np.array([[1, 4]])
    with pytest.raises(ValueError, match="exactly one of v"):
        stats.attention_class_averages(A, toks)
    with pytest.raises(ValueError, match="exactly one of v"):
        stats.attention_class_averages(A, toks, 2, labels=[-1, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="labels must be 1-d"):
        stats.attention_class_averages(A, toks, labels=[-1, 0, 0, 1])
    got = stats.attention_class_averages(A, toks, labels=[-1, 0, 0, 1, 1], normalise=True)
    assert got["same_word"] == 1.0 and got["diff_topic"] == 1.0 and np.isnan(got["same_topic"])


def test_two_stage_dynamic_on_overlapping_topics():
    """Joint W^K, W^Q, W^V training from N(0, 0.01^2) on the exact population of overlapping topics
    (T=4, v=3, eps=0.1, tau=2; SGD lr 4, the two-stage preset's setting scaled to V1=13): ||W^V||
    reaches 90% of its plateau while ||W_K^T W_Q|| has not doubled; later the scores grow more than
    100-fold and attention favours the dominant topic (same-topic > 2 x different-topic)."""
    g = MODELS["overlap"]
    d = DataConfig.from_model(g, source="population")
    m = ModelConfig(
        V1=d.V1, attention="softmax", train=("W_K", "W_Q", "W_V"), init="normal", init_scale=0.01,
        loss="squared", scale="none",
    )  # fmt: skip
    cfg = TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=4.0), steps=1000, log_every=20, eval_every=999)
    r = train(cfg, progress=False)
    steps = [rec["step"] for rec in r.history]
    nV, nKQ = stage_curves(r.history)
    st = stats.detect_stages(steps, nV, nKQ)
    assert st.ordered, st
    i1 = steps.index(st.stage1_end)
    assert nKQ[i1] < 2 * nKQ[0]  # W^V formed first, scores still near their init
    assert nKQ[-1] > 100 * nKQ[0]
    assert r.history[0]["topic_attention_ratio_median"] < 1.01 < 2.0 < r.history[-1]["topic_attention_ratio_median"]
    assert r.final["attn_same_topic"] > 2 * r.final["attn_diff_topic"]
    assert r.final["block_score_W_V"] > 0.9 and r.final["loss"] < r.history[0]["loss"]


@pytest.mark.parametrize("mask_keys", [False, True])
def test_population_training_of_the_paper_model_equals_its_general_copy(mask_keys):
    """The same run (source='population', softmax attention, Adam) on the paper's TopicModel and on
    GeneralTopicModel.from_topic_model(tm): the batches agree to 1e-15 (test above), so the per-step
    losses agree to 1e-12 relative (a few steps: Adam's normalised step keeps the round-off at that level)."""
    tm = tc.TopicModel(T=3, v=2, tau=2)
    g = GeneralTopicModel.from_topic_model(tm)
    runs = []
    for m in (tm, g):
        d = DataConfig.from_model(m, MK, source="population")
        model = ModelConfig(V1=m.V1, mask_keys=mask_keys, init_scale=0.3)
        run = dict(steps=6, log_every=1, eval_every=0, eval_docs=0, optim=OptimConfig(lr=0.05))
        cfg = TrainConfig(data=d, model=model, **run)
        runs.append([rec["loss"] for rec in train(cfg, progress=False).history])
    assert len(runs[0]) == len(runs[1]) >= 6
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12)


def test_data_config_from_model_of_either_type():
    """DataConfig.from_model reads the paper's model through its own fields (v, scalar alpha; no phi)
    and any other model through phi and the alpha vector; both describe the same law."""
    tm = tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.3)
    g = GeneralTopicModel.from_topic_model(tm)
    a, b = DataConfig.from_model(tm, MK), DataConfig.from_model(g, MK)
    assert a.phi is None and a.v == 2 and a.alpha == 0.3 and a.topic_model() == tm
    assert b.topic_model() == g and b.alpha == [0.3, 0.3, 0.3] and a.V1 == b.V1 == 7
    np.testing.assert_array_equal(b.topic_model().phi, tm.phi)
    with pytest.raises(TypeError, match="tm must be a TopicModel or a GeneralTopicModel"):
        DataConfig.from_model("not a model")
