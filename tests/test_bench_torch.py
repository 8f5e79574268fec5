"""The PyTorch reference of the training benchmark (``benchmarks/_torch_models.py``) computes the
model of SPEC §3.1 / §3.2: the same loss and gradients as our numpy model (float64, every
parameter, relative 1e-9) and, with the preset's optimizer, the same parameters after a step.
Skipped without torch (the optional ``bench`` extra)."""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck import Masking, TopicModel
from theorycheck.nn import ModelConfig, Transformer, make_batch, make_optimizer
from theorycheck.sampling import mask_documents, sample_documents

torch = pytest.importorskip("torch")
BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _bench_module(name: str):
    """A module of ``benchmarks/`` (not a package: its scripts import each other by name)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


bench_train = _bench_module("bench_train")
TorchTransformer = _bench_module("_torch_models").TorchTransformer
compare_with_numpy = _bench_module("_torch_models").compare_with_numpy

RTOL = 1e-9
TM = TopicModel(T=3, v=3, prior="dirichlet", alpha=0.3)  # V1 = 10
MK = Masking(p_m=0.3, p_c=0.1, p_r=0.1)


def _batch(seed=0, n_docs=5, N=(8, 12)):
    rng = np.random.default_rng(seed)
    docs = sample_documents(TM, n_docs, N, rng=rng)
    return mask_documents(docs, TM, MK, rng=rng)


def _small(model_cfg: ModelConfig, **changes) -> ModelConfig:
    """The benchmark's architecture at V1 = 10, with a larger init so attention is far from uniform."""
    return ModelConfig.from_dict({**model_cfg.to_dict(), "V1": TM.V1, "d": None, "d_a": None, **changes})


def _bench_models():
    cfgs = bench_train.bench_configs()
    one = cfgs["one-layer"]
    deep = cfgs["deep-4x4"]
    return {
        "one-layer": (_small(one.model, init_scale=0.5), one.data.average, one.optim),
        "deep-4x4": (_small(deep.model, init_scale=0.3, d_a=4), deep.data.average, deep.optim),
    }


def test_bench_model_a_is_the_demo_with_attention_trained():
    cfg = bench_train.one_layer_config()
    m = cfg.model
    assert (m.n_layers, m.n_heads, m.embedding, m.attention) == (1, 1, "one-hot", "softmax")
    assert {"W_K", "W_Q", "W_V"} <= set(m.train)
    assert (cfg.batch_size, tuple(cfg.data.N), cfg.optim.name) == (40, (100, 150), "adam")


@pytest.mark.parametrize("name", ["one-layer", "deep-4x4"])
@pytest.mark.parametrize("count_based", ["auto", "never"])
def test_same_loss_and_gradients_as_numpy(name, count_based):
    cfg, average, _ = _bench_models()[name]
    cfg = ModelConfig.from_dict({**cfg.to_dict(), "count_based": count_based})
    mb = _batch()
    rel = compare_with_numpy(cfg, mb.inputs, mb.selected, mb.targets, average=average, seed=1)
    assert set(rel) == {"loss", "max", *Transformer(cfg, seed=1).trainable_names()}
    assert rel["max"] <= RTOL, rel


@given(
    seed=st.integers(0, 2**16),
    loss=st.sampled_from(["squared", "ce"]),
    average=st.sampled_from(["document", "token"]),
    mask_keys=st.booleans(),
    residual=st.booleans(),
    layer_norm=st.booleans(),
    decoder=st.sampled_from(["identity", "trained"]),
    n_layers=st.integers(1, 2),
    n_heads=st.integers(1, 2),
    scale=st.sampled_from(["sqrt", "none"]),
)
def test_same_loss_and_gradients_any_architecture(
    seed, loss, average, mask_keys, residual, layer_norm, decoder, n_layers, n_heads, scale
):
    train = ("W_K", "W_Q", "W_V", "b_dec") + (("W_dec",) if decoder == "trained" else ())
    cfg = ModelConfig(
        V1=TM.V1,
        d_a=3,
        n_layers=n_layers,
        n_heads=n_heads,
        decoder=decoder,
        residual=residual,
        layer_norm=layer_norm,
        mask_keys=mask_keys,
        loss=loss,
        scale=scale,
        reg=1e-3,
        train=train,
        init_scale=0.5,
    )
    mb = _batch(seed, n_docs=3)
    rel = compare_with_numpy(cfg, mb.inputs, mb.selected, mb.targets, average=average, seed=seed)
    assert rel["max"] <= RTOL, rel


def test_trained_embedding_tied_decoder_and_uniform_attention():
    for cfg in (
        ModelConfig(V1=TM.V1, embedding="trained", decoder="tied", train=("W_E", "W_K", "W_Q", "W_V"), init_scale=0.5),
        ModelConfig(V1=TM.V1, attention="uniform", train=("W_V", "b_dec"), mask_keys=True, loss="ce", init_scale=0.5),
    ):
        mb = _batch(3)
        rel = compare_with_numpy(cfg, mb.inputs, mb.selected, mb.targets, seed=2)
        assert rel["max"] <= RTOL, rel


@pytest.mark.parametrize("name", ["one-layer", "deep-4x4"])
def test_one_optimizer_step_matches_numpy(name):
    """Two steps of the preset's optimizer (Adam for model a, SGD for deep-4x4) land on the same
    parameters in torch float64 and in numpy."""
    cfg, average, optim = _bench_models()[name]
    model = Transformer(cfg, seed=0)
    tmodel = TorchTransformer(cfg, model.state_dict(), optim=optim, average=average, dtype="float64")
    opt = make_optimizer(optim)
    params = {n: model.get(n) for n in model.trainable_names()}
    grads = {n: model.grad(n) for n in model.trainable_names()}
    for seed in (0, 1):
        mb = _batch(seed)
        model.zero_grad()
        loss_np = model.loss_and_grad(make_batch(cfg, mb.inputs, mb.selected, mb.targets, average=average))
        opt.step(params, grads, optim.lr)
        loss_t = tmodel.step(mb.inputs, mb.selected, mb.targets)
        assert loss_t == pytest.approx(loss_np, rel=RTOL)
    for n, p in params.items():
        assert np.allclose(tmodel.params[n].detach().numpy(), p, rtol=1e-9, atol=1e-12), n


def test_float32_is_close_but_not_exact():
    cfg, average, _ = _bench_models()["deep-4x4"]
    mb = _batch(4)
    state = Transformer(cfg, seed=0).state_dict()
    l64, _ = TorchTransformer(cfg, state, average=average).loss_and_grads(mb.inputs, mb.selected, mb.targets)
    l32, _ = TorchTransformer(cfg, state, average=average, dtype="float32").loss_and_grads(
        mb.inputs, mb.selected, mb.targets
    )
    assert abs(l32 - l64) / l64 < 1e-5


def test_bad_input_is_refused_with_the_parameter_name():
    cfg = ModelConfig(V1=TM.V1, mask_keys=True)
    state = Transformer(cfg, seed=0).state_dict()
    with pytest.raises(ValueError, match="dtype must be one of"):
        TorchTransformer(cfg, state, dtype="float16")
    with pytest.raises(ValueError, match="average must be"):
        TorchTransformer(cfg, state, average="batch")
    with pytest.raises(ValueError, match="state is missing parameters"):
        TorchTransformer(cfg, {k: v for k, v in state.items() if k != "layers.0.W_K"})
    tm = TorchTransformer(cfg, state)
    with pytest.raises(ValueError, match="step needs an optimizer"):
        tm.step(*_batch()[:3])
    inputs = np.array([[3, 4, -1]])
    selected = np.array([[True, True, False]])
    with pytest.raises(ValueError, match="at least one key position"):
        tm.prepare(inputs, selected, inputs)


def test_benchmark_quick_rows(monkeypatch, tmp_path):
    """The table builder yields one row per implementation with the JSON keys of ``train.json``."""

    def fake_measure(cfg, batches, runs):
        return [
            ((2.0 if t == 1 else 4.0) if form is None else 10.0 * t + (form == "auto"), [1.0])
            for _, t, _, _, form in runs
        ]

    monkeypatch.setattr(bench_train, "_measure", fake_measure)
    rows = bench_train._model_rows("deep-4x4", bench_train.preset("deep-4x4"), [], True)
    assert len(rows) == 7
    assert {"model", "implementation", "threads", "blas_threads", "dtype", "steps_per_s"} <= set(rows[0])
    assert [(r["implementation"], r["threads"], r["blas_threads"]) for r in rows[:3]] == [
        ("numpy merged tokens", 1, 1),
        ("numpy merged tokens", 2, 1),
        ("numpy positions", 1, 1),
    ]
    assert [r["merged_speedup"] for r in rows] == [1.0, 11 / 21, 11 / 10, 5.5, 5.5, 2.75, 2.75]


def test_timed_rows_are_interleaved_and_report_the_median(monkeypatch):
    """Every row warms up once, then each of the REPEATS rounds times one pass of every row in
    turn (A B A B ..., never A A B B), inside that row's settings; a row reports the median rate."""
    from contextlib import contextmanager

    log = []
    clock = iter(np.arange(0.0, 1000.0, 0.5))  # each perf_counter call advances 0.5 s

    def runner(name):
        @contextmanager
        def settings():
            log.append(("enter", name))
            yield
            log.append(("exit", name))

        return bench_train._Runner(lambda mb: log.append((name, mb)) or 1.0, settings)

    monkeypatch.setattr(bench_train.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bench_train, "REPEATS", 3)
    out = bench_train._timed_interleaved([runner("A"), runner("B")], ["m1", "m2"])
    passes = [e[0] for e in log if e[0] in ("A", "B")]
    assert passes[:2] == ["A", "B"]  # warm-up: one step each
    assert passes[2:] == ["A", "A", "B", "B"] * 3  # rounds: a pass (2 batches) of A, then of B
    assert all(log[i][0] == "enter" for i in range(len(log)) if i == 0 or log[i - 1][0] == "exit")
    assert [r for r, _ in out] == [4.0, 4.0]  # 2 steps in 0.5 s each time
    assert [f for _, f in out] == [[1.0, 1.0], [1.0, 1.0]]
