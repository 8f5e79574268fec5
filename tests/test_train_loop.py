"""nn.trainer: population GD reaches the min-norm W^V; resume is bit-identical; configs validate; CLI."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings

import theorycheck as tc
from theorycheck.cli import main
from theorycheck.nn import (
    PRESETS,
    DataConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    Trainer,
    load_metrics,
    preset,
)
from theorycheck.population import moments
from theorycheck.report.training import write_figures
from theorycheck.strategies import maskings, topic_models


def _stage1_cfg(tm_kw, mk, lr, steps):
    d = DataConfig(**tm_kw, p_m=mk.p_m, p_c=mk.p_c, p_r=mk.p_r, source="population")
    m = ModelConfig(V1=d.V1, attention="uniform", train=("W_V",), init_V="zero", loss="squared")
    return TrainConfig(
        data=d, model=m, optim=OptimConfig("sgd", lr=lr), steps=steps, log_every=steps, eval_every=0, eval_docs=0
    )


def test_population_gd_from_zero_reaches_min_norm_paper_config():
    """T = v = 10, tau = 3, default masking: 150 exact population GD steps from W = 0."""
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    res = Trainer(_stage1_cfg(dict(T=10, v=10, tau=3), mk, 40.0, 150), progress=False).run()
    Sigma, C = moments(tm, mk)
    ref = C @ np.linalg.pinv(Sigma)  # independent reference, not the trainer's
    W = res.model.get("layers.0.W_V")[0]
    rel = np.linalg.norm(W - ref) / np.linalg.norm(ref)
    assert rel <= 1e-6, f"relative error to C pinv(Sigma): {rel:.3g}"
    assert res.final["loss"] == pytest.approx(tm.min_value_loss(), abs=1e-12)


@settings(max_examples=8)
@given(topic_models(min_T=2, max_T=5, max_v=3), maskings(min_p_m=0.1, allow_no_mask_token=False))
def test_population_gd_from_zero_reaches_min_norm(tm, mk):
    Sigma, C = moments(tm, mk)
    ev = np.linalg.eigvalsh(2 * Sigma)
    pos = ev[ev > 1e-10 * ev.max()]
    lr = 2.0 / (pos.min() + pos.max())
    rho = (pos.max() - pos.min()) / (pos.max() + pos.min())
    steps = int(math.ceil(math.log(1e-9) / math.log(max(rho, 1e-3)))) + 5
    assume(steps <= 1500)
    kw = dict(T=tm.T, v=tm.v, tau=tm.tau)
    res = Trainer(_stage1_cfg(kw, mk, lr, steps), progress=False).run()
    ref = C @ np.linalg.pinv(Sigma, rcond=1e-10)
    W = res.model.get("layers.0.W_V")[0]
    rel = np.linalg.norm(W - ref) / np.linalg.norm(ref)
    assert rel <= 1e-6, f"relative error {rel:.3g} after {steps} steps (lr={lr:.3g}, rho={rho:.3g})"


def _small_cfg(source, n_layers=1, optim="adam"):
    d = DataConfig(T=3, v=3, tau=2, N=(5, 8), source=source, n_train=20, n_dev=6)
    m = ModelConfig(
        V1=d.V1,
        n_layers=n_layers,
        n_heads=2,
        train=("W_K", "W_Q", "W_V", "b_dec"),
        init_scale=0.3,
        loss="ce",
        residual=n_layers > 1,
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig(optim, lr=0.05, momentum=0.5),
        steps=13,
        batch_size=4,
        log_every=2,
        eval_every=4,
        checkpoint_every=5,
        eval_docs=3,
    )


@pytest.mark.parametrize(
    "source, n_layers, optim",
    [("fresh", 1, "adam"), ("static", 2, "sgd"), ("population", 1, "adam"), ("population", 2, "sgd")],
)
def test_resume_after_interruption_is_bit_identical(tmp_path, source, n_layers, optim):
    cfg = _small_cfg(source, n_layers, optim)
    a = tmp_path / "a"
    b = tmp_path / "b"
    Trainer(cfg, a, progress=False).run()
    # interrupted after step 8 (last checkpoint at step 5), then resumed from the folder
    Trainer(cfg, b, progress=False).run(stop_at=8)
    assert json.loads((b / "checkpoint-5.json").read_text())["step"] == 5
    assert not (b / "checkpoint-10.json").exists()
    Trainer(cfg, b, progress=False).run(resume=True)
    with np.load(a / "params.npz") as za, np.load(b / "params.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for k in za.files:
            assert np.array_equal(za[k], zb[k]), f"parameter {k} differs after resume"
    assert (a / "metrics.jsonl").read_text() == (b / "metrics.jsonl").read_text()
    # the uninterrupted run really changed the parameters (the test could fail)
    with np.load(a / "params.npz") as za:
        assert np.linalg.norm(za["W_K"]) > 0


def test_run_folder_contents(tmp_path):
    cfg = _small_cfg("static")
    Trainer(cfg, tmp_path, progress=False).run()
    write_figures(tmp_path)
    conf = json.loads((tmp_path / "config.json").read_text())
    assert conf["seed"] == cfg.seed and "numpy" in conf["versions"]
    assert list(conf) == sorted(conf)
    assert TrainConfig.from_dict({k: v for k, v in conf.items() if k != "versions"}).to_dict() == cfg.to_dict()
    recs = load_metrics(tmp_path)
    assert [r["step"] for r in recs] == [0, 2, 4, 6, 8, 10, 12]
    for key in ("loss", "norm_W_V", "norm_W_K", "norm_W_Q", "gradnorm_W_V", "lr"):
        assert all(key in r for r in recs), key
    assert "dev_loss" in recs[-1] and "attn_same_topic" in recs[-1]
    with np.load(tmp_path / "params.npz") as z:
        assert z["W_V"].shape == (10, 10) and z["W_K"].shape == (10, 10) and z["W_E"].shape == (10, 10)
    assert {p.name for p in (tmp_path / "figures").iterdir()} >= {"norms.png", "W_V.png", "attention.png"}


def test_fresh_batches_depend_only_on_seed_and_step():
    cfg = _small_cfg("fresh")
    t1, t2 = Trainer(cfg, progress=False), Trainer(cfg, progress=False)
    b1, b2 = t1.batch_at(7), t2.batch_at(7)
    assert np.array_equal(b1.Y, b2.Y) and np.array_equal(b1.K, b2.K)
    assert not np.array_equal(t1.batch_at(6).K, b1.K)


def test_dev_loss_matches_direct_evaluation():
    """The chunked dev loss equals the loss of the whole dev set as one batch (token average)."""
    from theorycheck.nn import count_batch

    cfg = _small_cfg("static")
    cfg.data.average = "token"
    tr = Trainer(cfg, progress=False)
    dev_chunked = tr.dev_loss(chunk=4)
    dev = tr.stream.dev
    one = tr.model.loss(count_batch(dev.inputs, dev.selected, dev.targets, 10, average="token"))
    assert dev_chunked == pytest.approx(one, rel=1e-12)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: DataConfig(source="stream"), "source"),
        (lambda: DataConfig(N=(10, 5)), "N"),
        (lambda: DataConfig(p_m=0.0), "p_m"),
        (lambda: DataConfig(tau=None, prior="dirichlet", alpha=0.1, source="population"), "population"),
        (lambda: DataConfig(T=0), "T"),
        (lambda: OptimConfig(name="rmsprop"), "name"),
        (lambda: OptimConfig(lr=0.0), "lr"),
        (lambda: OptimConfig(momentum=1.0), "momentum"),
        (lambda: TrainConfig(steps=-1), "steps"),
        (lambda: TrainConfig(batch_size=0), "batch_size"),
        (lambda: TrainConfig(model=ModelConfig(V1=5)), "V1"),
        (
            lambda: TrainConfig(
                data=DataConfig(source="population"), model=ModelConfig(V1=101, n_layers=2, count_based="never")
            ),
            "count_based",
        ),
        (lambda: TrainConfig(init_W_V="random"), "init_W_V"),
    ],
)
def test_bad_training_config_raises_naming_the_parameter(make, name):
    with pytest.raises((ValueError, TypeError), match=name):
        make()


def test_every_preset_builds_a_valid_config():
    for name in PRESETS:
        cfgs = preset(name)
        for cfg in (c for _, c in cfgs) if isinstance(cfgs, list) else [cfgs]:
            assert isinstance(cfg, TrainConfig)
    with pytest.raises(ValueError, match="preset"):
        preset("no-such-preset")


def test_cli_train_list_and_errors(capsys, tmp_path):
    assert main(["train", "--list"]) == 0
    assert capsys.readouterr().out.split() == [
        "official-demo",
        "stage1-population",
        "stage2-population",
        "two-stage",
        "embedding",
        "deep-4x4",
        "ablation",
        "compensation",
    ]
    assert main(["train", "--preset", "nope", "--out", str(tmp_path)]) == 2
    assert "preset" in capsys.readouterr().err


def test_cli_train_runs_a_preset(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--preset", "stage1-population", "--out", str(out), "--steps", "20", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"][0]["steps"] == 20
    recs = load_metrics(out)
    assert recs[-1]["step"] == 19 and recs[-1]["dist_W_V_opt"] < recs[0]["dist_W_V_opt"]
    assert (out / "params.npz").exists() and (out / "figures" / "norms.png").exists()


def test_multi_head_runs_log_the_topic_ratio_of_every_layer_and_head(tmp_path):
    """Deep/multi-head runs record same-topic : different-topic attention for each (layer, head);
    the (0, 0) entry is the ratio of the first-head class averages logged beside it."""
    cfg = _small_cfg("fresh", n_layers=2)
    Trainer(cfg, tmp_path, progress=False).run()
    write_figures(tmp_path)
    assert (tmp_path / "figures" / "attention_heads.png").exists()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    full = [r for r in rows if "attn_topic_ratio_heads" in r]
    assert full, "no evaluation row carries the per-head ratios"
    for r in full:
        assert len(r["attn_topic_ratio_heads"]) == 2 * 2
        assert r["attn_topic_ratio_heads"][0] == pytest.approx(r["attn_same_topic"] / r["attn_diff_topic"], rel=1e-12)
        assert r["attn_topic_ratio_max"] == pytest.approx(max(r["attn_topic_ratio_heads"]), rel=1e-12)
    # per-layer norms: entry 0 is the layer-0 norm logged beside it, entry 1 is layer 1's
    tr = Trainer(cfg, None, progress=False)
    rec = tr.metrics(0, 1.0, 0.1, full=False)
    for key in ("W_V", "W_K", "W_Q"):
        assert len(rec[f"norm_{key}_layers"]) == 2 and len(rows[-1][f"norm_{key}_layers"]) == 2
        assert rec[f"norm_{key}_layers"][0] == rec[f"norm_{key}"]
        assert rec[f"norm_{key}_layers"][1] == pytest.approx(np.linalg.norm(tr.model.get(f"layers.1.{key}")), rel=1e-12)


def test_attention_head_ratio_figure_checks_the_head_count():
    from theorycheck.report.plots import attention_head_ratios

    recs = [{"step": 0, "attn_topic_ratio_heads": [1.0, 1.1, 0.9, 1.2]}]
    attention_head_ratios(recs, 2, 2)
    with pytest.raises(ValueError, match="n_layers \\* n_heads = 6"):
        attention_head_ratios(recs, 2, 3)


def test_history_equals_the_metrics_file(tmp_path):
    """Trainer.history holds exactly the records written to metrics.jsonl (same steps, same values)."""
    cfg = _small_cfg("fresh")
    tr = Trainer(cfg, tmp_path, progress=False)
    tr.run()
    on_disk = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in tr.history] == [r["step"] for r in on_disk] and len(on_disk) > 1
    assert json.loads(json.dumps(tr.history)) == on_disk


def test_stage_curves_of_deep_runs_read_every_layer():
    """Deep runs: total ||W^V|| over layers and the largest per-layer growth of ||W_K|| ||W_Q||
    (a layer other than the first can open stage 2); one-layer runs: the logged curves as they are."""
    from theorycheck.analysis.stats import detect_stages
    from theorycheck.nn import stage_curves

    K1 = [1.0, 1.0, 1.2, 2.0, 4.0]  # layer 1 keys and queries: 1 -> 16 in the product at step 40
    recs = [
        {
            "step": 10 * i,
            "norm_W_V_layers": [3.0 * min(i, 1) + 0.1, 4.0 * min(i, 1) + 0.1],
            "norm_W_K_layers": [0.5, K1[i]],
            "norm_W_Q_layers": [0.5, K1[i]],
        }
        for i in range(5)
    ]
    nV, nKQ = stage_curves(recs)
    assert nV[0] == pytest.approx(math.hypot(0.1, 0.1)) and nV[1] == pytest.approx(math.hypot(3.1, 4.1))
    assert nKQ == pytest.approx([1.0, 1.0, 1.44, 4.0, 16.0])
    st = detect_stages([r["step"] for r in recs], nV, nKQ)
    assert (st.stage1_end, st.stage2_start) == (10, 40)
    flat = [{"step": 0, "norm_W_V": 1.0, "norm_KQ": 2.0}, {"step": 1, "norm_W_V": 3.0, "norm_KQ": 5.0}]
    assert stage_curves(flat) == ([1.0, 3.0], [2.0, 5.0])
