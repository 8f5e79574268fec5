"""nn.config / nn.trainer: configs validate on every change before any work; probes land in metrics.jsonl."""

import dataclasses
import json

import numpy as np
import pytest

from theorycheck.nn import (
    DataConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    Trainer,
    config_diff,
    config_hash,
    load_metrics,
    train,
)


def _cfg(**kw):
    d = DataConfig(T=3, v=2, tau=2, source="population")
    m = ModelConfig(V1=d.V1, train=("W_K", "W_Q", "W_V"), init_scale=0.3, scale="none")
    base = dict(data=d, model=m, optim=OptimConfig("sgd", lr=0.5), steps=6, log_every=2, eval_every=0, eval_docs=0)
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize(
    "target, field, value, name, exc",
    [
        ("cfg", "steps", -5, "steps", ValueError),
        ("cfg", "steps", "ten", "steps", TypeError),
        ("cfg", "batch_size", 0, "batch_size", ValueError),
        ("cfg", "checkpoint_every", -1, "checkpoint_every", ValueError),
        ("cfg", "init_W_V", "random", "init_W_V", ValueError),
        ("optim", "lr", "big", "lr", TypeError),
        ("optim", "lr", -1.0, "lr", ValueError),
        ("optim", "momentum", 1.0, "momentum", ValueError),
        ("optim", "name", "rmsprop", "name", ValueError),
        ("data", "source", "stream", "source", ValueError),
        ("data", "N", (9, 3), "N", ValueError),
        ("data", "p_m", 0.0, "p_m", ValueError),
    ],
)
def test_assignment_is_validated_at_once_and_rolled_back(target, field, value, name, exc):
    cfg = _cfg()
    obj = {"cfg": cfg, "optim": cfg.optim, "data": cfg.data}[target]
    before = getattr(obj, field)
    with pytest.raises(exc, match=name):
        setattr(obj, field, value)
    assert getattr(obj, field) == before  # the bad value did not stick
    Trainer(cfg, progress=False)  # still a valid config


def test_good_assignments_and_replace_are_normalised():
    cfg = _cfg()
    cfg.steps = 7.0  # integral float accepted, stored as int
    assert cfg.steps == 7 and isinstance(cfg.steps, int)
    cfg.optim.lr = 1
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)
    new = cfg.replace(seed=3)
    assert new.seed == 3 and cfg.seed == 0 and new.data is cfg.data
    with pytest.raises(ValueError, match="seed"):
        cfg.replace(seed=-1)
    with pytest.raises(ValueError, match="steps"):
        dataclasses.replace(cfg, steps=-1)
    with pytest.raises(AttributeError, match="stpes"):
        cfg.stpes = 3


def test_cross_field_changes_are_caught_before_any_work(tmp_path):
    """Changing the topic model in place breaks model.V1 = T v + 1: the trainer refuses before writing."""
    cfg = _cfg()
    cfg.data.T = 4  # valid for DataConfig alone
    with pytest.raises(ValueError, match="V1"):
        Trainer(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    cfg = _cfg()
    cfg.model.reg = -1.0  # ModelConfig fields are re-validated by the trainer
    with pytest.raises(ValueError, match="reg"):
        train(cfg, tmp_path / "run2", progress=False)
    assert not (tmp_path / "run2").exists()


def test_config_hash_and_diff():
    a, b = _cfg(), _cfg(seed=5)
    assert config_hash(a) == config_hash(_cfg()) and config_hash(a) != config_hash(b)
    assert config_diff(a.to_dict(), b.to_dict()) == ["seed: 0 -> 5"]
    c = _cfg(optim=OptimConfig("sgd", lr=0.25))
    assert config_diff(a.to_dict(), c.to_dict()) == ["optim.lr: 0.5 -> 0.25"]


def test_a_probe_passed_to_train_lands_in_metrics_jsonl(tmp_path):
    """A user probe's keys appear in every metrics record with the values it computed from the model
    at that step (before the update), next to the built-in keys."""
    seen = []

    def score_trace(model, ctx):
        S = model.score_matrix()
        seen.append((ctx.step, ctx.loss, float(np.trace(S))))
        return {"trace_S": float(np.trace(S)), "probe_step": ctx.step, "bad": float("nan")}

    res = train(_cfg(), tmp_path, probes=[score_trace], progress=False)
    recs = load_metrics(tmp_path)
    assert [r["step"] for r in recs] == [0, 2, 4, 5]
    assert [(r["step"], r["loss"], r["trace_S"]) for r in recs] == seen
    assert all(r["probe_step"] == r["step"] and r["bad"] is None for r in recs)
    assert "norm_W_V" in recs[0] and "gradnorm_W_K" in recs[0]  # built-ins still there
    assert len({r["trace_S"] for r in recs}) == 4  # the values moved with training
    assert json.loads(json.dumps(res.history)) == recs
    # the probe saw the model of its own step: re-run to step 2 and compare
    tr = Trainer(_cfg(), progress=False)
    tr.run(stop_at=2)
    assert float(np.trace(tr.model.score_matrix())) == recs[1]["trace_S"]


def test_bad_probes_are_refused():
    with pytest.raises(TypeError, match="probes"):
        Trainer(_cfg(), probes=[42], progress=False)
    with pytest.raises(ValueError, match="norm_W_V"):
        train(_cfg(), probes=[lambda m, c: {"norm_W_V": 0.0}], progress=False)
    with pytest.raises(TypeError, match="dict"):
        train(_cfg(), probes=[lambda m, c: 1.0], progress=False)


def test_metrics_file_is_strict_json_with_nulls(tmp_path):
    train(_cfg(), tmp_path, probes=[lambda m, c: {"inf_list": [1.0, float("inf")]}], progress=False)
    text = (tmp_path / "metrics.jsonl").read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text.splitlines()[0])["inf_list"] == [1.0, None]


def test_resume_needs_a_folder_and_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="run folder"):
        Trainer(_cfg(), progress=False).run(resume=True)
    train(_cfg(), tmp_path, progress=False)  # checkpoint_every = 0: nothing to resume
    before = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="no checkpoint"):
        train(_cfg(), tmp_path, progress=False, resume=True)
    assert (tmp_path / "metrics.jsonl").read_text() == before  # not silently restarted


def test_figures_keyword_is_gone():
    """``Trainer(figures=...)`` was ignored before 0.1.0; figures are drawn by report.training.write_figures."""
    with pytest.raises(TypeError, match="figures"):
        Trainer(_cfg(), progress=False, figures=False)


@pytest.mark.parametrize("requested, outside, expected", [(None, 2, 1), ("2", 1, 2)])
def test_training_loop_runs_at_the_policy_blas_thread_count_and_restores_it(requested, outside, expected, monkeypatch):
    """A probe reads every BLAS library's thread count (threadpoolctl) at each logged step: 1 inside
    the loop by default even when BLAS was at 2 before, the user's THEORYCHECK_THREADS=2 when set
    (BLAS at 1 before); the counts before the run are back after it."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from theorycheck import _threads

    monkeypatch.setitem(_threads._state, "threads", None)
    if requested is None:
        monkeypatch.delenv(_threads.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(_threads.ENV_VAR, requested)

    def blas_counts():
        return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]

    seen = []

    def probe(model, ctx):
        seen.append((ctx.step, blas_counts()))
        return {}

    with threadpool_limits(limits=expected, user_api="blas"):
        attainable = blas_counts()  # a library started with a smaller pool (e.g. torch's) stays below
    with threadpool_limits(limits=outside, user_api="blas"):
        before = blas_counts()
        if not before or set(before) != {outside}:
            pytest.skip(f"BLAS cannot be set to {outside} threads here: {before}")
        Trainer(_cfg(), probes=[probe], progress=False).run()
        after = blas_counts()
    assert [s for s, _ in seen] == [0, 2, 4, 5]
    assert expected in attainable
    assert all(counts == attainable for _, counts in seen)
    assert after == before
