"""nn.probes: the built-in probes measure what their docstrings say (independent recomputation)."""

import numpy as np
import pytest

import theorycheck as tc
from theorycheck.analysis import stats
from theorycheck.models import GeneralTopicModel
from theorycheck.nn import DEFAULT_PROBES, DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer
from theorycheck.nn.probes import ProbeContext, _score_summary, kq_norm, stage1_reference
from theorycheck.population import moments


def test_stage1_reference_is_the_min_norm_solution():
    """C Sigma^+ solves the normal equations W Sigma = C and lies in the row space of Sigma."""
    tm, mk = tc.TopicModel(T=3, v=3, tau=2), tc.Masking()
    Sigma, C = moments(tm, mk)
    W = stage1_reference(tm, mk)
    assert np.allclose(W @ Sigma, C, atol=1e-12)
    P = Sigma @ np.linalg.pinv(Sigma)  # projector onto the range of Sigma
    assert np.allclose(W @ P, W, atol=1e-12)
    ref = tc.solvers.optimal_value_matrix(tm, mk, method="closed-form").x
    ref = ref.toarray() if hasattr(ref, "toarray") else np.asarray(ref)
    assert np.allclose(W, ref, atol=1e-10)


def _trainer(**kw):
    d = DataConfig(T=3, v=2, tau=2, N=(4, 6), source="static", n_train=8, n_dev=5)
    m = ModelConfig(V1=d.V1, n_heads=2, train=("W_K", "W_Q", "W_V"), init_scale=0.4, loss="ce")
    cfg = TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=0.1), steps=3, batch_size=3, eval_docs=2, **kw)
    return Trainer(cfg, progress=False)


def test_builtin_probe_values_match_direct_computation():
    tr = _trainer()
    tr.run()
    m = tr.model
    loss = m.loss_and_grad(tr.batch_at(3))
    rec = tr.metrics(3, loss, 0.1, full=True)
    lay = m.layers[0]
    WK, WQ = lay.params["W_K"], lay.params["W_Q"]
    assert rec["norm_W_K"] == pytest.approx(np.sqrt(np.sum(WK**2)), rel=1e-14)
    # c ||sum_h W_K,h^T W_Q,h||_F with an explicit loop over heads
    M = sum(WK[h].T @ WQ[h] for h in range(2))
    assert rec["norm_KQ"] == pytest.approx(lay.c * np.linalg.norm(M), rel=1e-12) == kq_norm(lay)
    assert rec["gradnorm_W_V"] == pytest.approx(np.linalg.norm(m.grad("layers.0.W_V")), rel=1e-14)
    assert rec["dev_loss"] == pytest.approx(tr.dev_loss(), rel=1e-14)
    assert rec["K_eff_median"] == pytest.approx(np.median(stats.effective_K(m.score_matrix(), 2)), rel=1e-14)
    assert {"attn_same_word", "attn_same_topic", "attn_diff_topic", "attn_topic_ratio_heads"} <= set(rec)
    assert len(rec["attn_topic_ratio_heads"]) == 2
    # not a full evaluation: no attention statistics, no dev loss
    part = tr.metrics(3, loss, 0.1, full=False)
    assert "attn_same_topic" not in part and "dev_loss" not in part
    assert part["norm_W_K"] == rec["norm_W_K"]


def test_default_probes_are_named_functions_with_docstrings():
    names = [p.__name__ for p in DEFAULT_PROBES]
    assert len(set(names)) == len(names)
    assert all(p.__doc__ for p in DEFAULT_PROBES)


def test_value_distance_probe_reads_the_stage1_reference():
    d = DataConfig(T=3, v=2, tau=2, source="population")
    m = ModelConfig(V1=d.V1, attention="uniform", train=("W_V",), init_V="zero", loss="squared")
    cfg = TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=1.0), steps=1, eval_every=0, eval_docs=0)
    tr = Trainer(cfg, progress=False)
    rec = tr.metrics(0, 0.0, 1.0, full=False)
    assert rec["dist_W_V_opt"] == pytest.approx(1.0, rel=1e-14)  # W = 0: distance ||0 - W*|| / ||W*|| = 1


def test_probes_on_the_paper_model_and_its_general_copy():
    """One probe set for every model: on the paper's model and on the same model as a plain
    GeneralTopicModel the block and attention-class statistics are equal (equal labels); the score
    summary is K_eff_median for the paper's model (fast path, with K*) and the topic attention
    ratio K_eff / v for the general copy (generic route)."""
    tr = _trainer()
    tr.run()
    m, tm = tr.model, tr.tm
    g = GeneralTopicModel.from_topic_model(tm)
    ctx = ProbeContext(3, 1.0, 0.1, True, tr.cfg, tm, tr.mk, tr.stream, tr.refs)
    ctx_g = ProbeContext(3, 1.0, 0.1, True, tr.cfg, g, tr.mk, tr.stream, tr.refs)
    for probe in DEFAULT_PROBES:
        if probe.__name__ in ("value_structure", "embedding_structure", "attention_classes"):
            assert probe(m, ctx) == probe(m, ctx_g), probe.__name__
    S = m.score_matrix()
    fast = _score_summary(tm, S, tm.token_topics(), tr.refs)
    generic = _score_summary.dispatch(GeneralTopicModel)(tm, S, tm.token_topics(), tr.refs)
    assert fast["K_eff_median"] / tm.v == pytest.approx(generic["topic_attention_ratio_median"], rel=1e-12)
