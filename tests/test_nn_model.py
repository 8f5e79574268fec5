"""nn/model.py: hand-written gradients vs finite differences (check_gradient); count path == position
path == merged rows; population batch == exact uniform-attention loss (value_loss) and gradient;
configuration and batch validation. The autograd reference is in test_nn_model_autograd.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
import theorycheck.population
from theorycheck.diagnostics import check_gradient
from theorycheck.nn import (
    ModelConfig,
    Transformer,
    count_batch,
    merged_batch,
    population_batch,
    position_batch,
)
from theorycheck.population import value_loss_grad
from theorycheck.strategies import maskings, topic_models


def _random_masked(rng, V1, B, N, p_sel=0.4):
    lengths = rng.integers(1, N + 1, size=B)
    inputs = rng.integers(0, V1, size=(B, N))
    pad = np.arange(N)[None, :] >= lengths[:, None]
    inputs[pad] = -1
    selected = (rng.random((B, N)) < p_sel) & ~pad
    selected[:, 0] = True  # every document has a selected position
    targets = np.where(pad, -1, rng.integers(1, V1, size=(B, N)))
    return inputs, selected, targets


@st.composite
def model_setups(draw):
    V1 = draw(st.integers(3, 7))
    n_layers = draw(st.integers(1, 2))
    n_heads = draw(st.integers(1, 2))
    embedding = draw(st.sampled_from(["one-hot", "trained"]))
    decoder = draw(
        st.sampled_from(["identity", "trained", "tied"] if embedding == "trained" else ["identity", "trained"])
    )
    d = V1 if (embedding == "one-hot" or decoder == "identity") else draw(st.integers(2, 6))
    attention = draw(st.sampled_from(["softmax", "uniform"]))
    possible = ["W_V", "b_dec"]
    if attention == "softmax":
        possible += ["W_K", "W_Q"]
    if embedding == "trained":
        possible.append("W_E")
    if decoder == "trained":
        possible.append("W_dec")
    train = tuple(draw(st.lists(st.sampled_from(possible), min_size=1, unique=True)))
    cfg = ModelConfig(
        V1=V1,
        d=d,
        d_a=draw(st.integers(1, 4)),
        n_layers=n_layers,
        n_heads=n_heads,
        embedding=embedding,
        decoder=decoder,
        attention=attention,
        scale=draw(st.sampled_from(["sqrt", "none"])),
        residual=draw(st.booleans()),
        layer_norm=draw(st.booleans()),
        mask_keys=draw(st.booleans()),
        loss=draw(st.sampled_from(["squared", "ce"])),
        reg=draw(st.sampled_from([0.0, 0.1])),
        train=train,
    )
    B = draw(st.integers(1, 3))
    N = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31))
    path = draw(st.sampled_from(["count", "merged", "position"] if n_layers == 1 else ["merged", "position"]))
    return cfg, B, N, seed, path


def _assert_same_loss_and_grads(model, batch_a, batch_b, rtol_loss, rtol_grad, what):
    """Loss and every trainable gradient of ``model`` agree on two forms of one batch."""
    model.zero_grad()
    la = model.loss_and_grad(batch_a)
    ga = {n: model.grad(n).copy() for n in model.trainable_names()}
    model.zero_grad()
    lb = model.loss_and_grad(batch_b)
    assert la == pytest.approx(lb, rel=rtol_loss, abs=1e-12), f"loss, {what}: {la!r} vs {lb!r}"
    for n in ga:
        err = np.max(np.abs(ga[n] - model.grad(n)))
        assert err <= rtol_grad * (1 + np.max(np.abs(ga[n]))), f"{n}, {what}: differ by {err:.3g}"


def _randomize(model, rng, scale=0.7):
    for _name, (mod, k) in model.named_params().items():
        if k in ("W_K", "W_Q") and model.cfg.attention == "uniform":
            continue
        mod.params[k][...] = rng.normal(scale=scale, size=mod.params[k].shape)


def _params_and_grads(model, batch):
    model.zero_grad()
    model.loss_and_grad(batch)
    names = model.trainable_names()
    return {n: model.get(n).copy() for n in names}, {n: model.grad(n).copy() for n in names}


def _loss_at(model, batch):
    """The model's loss as a function of its trainable parameters (a dict), for check_gradient."""

    def f(p):
        saved = model.state_dict()
        for n, v in p.items():
            model.get(n)[...] = v
        val = model.loss(batch)
        model.load_state_dict(saved)
        return val

    return f


@settings(max_examples=40)
@given(model_setups())
def test_every_gradient_matches_finite_differences(setup):
    cfg, B, N, seed, path = setup
    rng = np.random.default_rng(seed)
    model = Transformer(cfg, seed=seed)
    _randomize(model, rng)
    inputs, selected, targets = _random_masked(rng, cfg.V1, B, N)
    build = {"count": count_batch, "merged": merged_batch, "position": position_batch}[path]
    batch = build(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys)
    params, grads = _params_and_grads(model, batch)
    res = check_gradient(_loss_at(model, batch), params, grads, n_directions=2, h=1e-5, rtol=1e-6, seed=seed)
    assert res.passed, f"{res.message} (path={path}, cfg={cfg})"
    # frozen parameters receive no gradient
    for name in set(model.named_params()) - set(model.trainable_names()):
        assert not np.any(model.grad(name)), f"frozen {name} received a gradient"


@settings(max_examples=25)
@given(
    st.integers(3, 9),
    st.integers(1, 4),
    st.integers(1, 9),
    st.integers(0, 2**31),
    st.booleans(),
    st.sampled_from(["softmax", "uniform"]),
    st.sampled_from(["squared", "ce"]),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["document", "token"]),
)
def test_count_attention_equals_position_attention(V1, B, N, seed, mask_keys, attention, loss, residual, ln, average):
    rng = np.random.default_rng(seed)
    train = ("W_V",) if attention == "uniform" else ("W_K", "W_Q", "W_V")
    cfg = ModelConfig(
        V1=V1,
        n_heads=2,
        attention=attention,
        loss=loss,
        residual=residual,
        layer_norm=ln,
        mask_keys=mask_keys,
        train=train + ("b_dec",),
    )
    model = Transformer(cfg, seed=seed)
    _randomize(model, rng, scale=1.5)
    inputs, selected, targets = _random_masked(rng, V1, B, N, p_sel=0.6)
    cb = count_batch(inputs, selected, targets, V1, mask_keys=mask_keys, average=average)
    pb = position_batch(inputs, selected, targets, V1, mask_keys=mask_keys, average=average)
    _assert_same_loss_and_grads(model, cb, pb, 1e-12, 1e-11, "counts vs positions")


@settings(max_examples=30)
@given(model_setups(), st.sampled_from(["document", "token"]))
def test_merged_tokens_equal_positions_at_any_depth(setup, average):
    """One row per distinct token (key weight = count) == one row per position: loss and every
    gradient, for 1-2 layers, residual/LN, trained embeddings, both attentions and losses."""
    cfg, B, N, seed, _ = setup
    rng = np.random.default_rng(seed)
    model = Transformer(cfg, seed=seed)
    _randomize(model, rng, scale=1.2)
    inputs, selected, targets = _random_masked(rng, cfg.V1, B, N + 4, p_sel=0.5)
    inputs[:, 1:] = np.where(inputs[:, 1:] >= 0, rng.integers(0, 3, size=inputs[:, 1:].shape), -1)  # repeats
    mb = merged_batch(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys, average=average)
    pb = position_batch(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys, average=average)
    assert mb.tokens.shape[1] <= min(pb.tokens.shape[1], cfg.V1)
    _assert_same_loss_and_grads(model, mb, pb, 1e-11, 1e-10, "merged vs positions")


def test_merged_rows_example():
    """Explicit layout: distinct tokens sorted per document, key weight = count as a key."""
    inputs = np.array([[3, 1, 3, 0, 3], [2, 2, -1, -1, -1]])
    selected = np.array([[False, True, False, True, False], [True, False, False, False, False]])
    targets = np.array([[3, 4, 3, 2, 3], [1, 2, -1, -1, -1]])
    mb = merged_batch(inputs, selected, targets, 5, mask_keys=True)
    np.testing.assert_array_equal(mb.tokens, [[0, 1, 3], [2, -1, -1]])
    np.testing.assert_array_equal(mb.key_weight, [[0, 0, 3], [1, 0, 0]])  # selected 0 and 1 hidden
    np.testing.assert_array_equal(np.c_[mb.qdoc, mb.qpos], [[0, 0], [0, 1], [1, 0]])
    np.testing.assert_array_equal(mb.Y.argmax(axis=1), [2, 4, 1])


@settings(max_examples=15)
@given(topic_models(max_T=4, max_v=3), maskings(), st.integers(0, 2**31), st.booleans())
def test_population_merged_equals_population_counts(tm, mk, seed, mask_keys):
    """The N -> inf population as merged rows (real-valued key densities) == the count path."""
    cfg = ModelConfig(
        V1=tm.V1, n_heads=2, d_a=3, train=("W_K", "W_Q", "W_V", "b_dec"), loss="ce", residual=True, layer_norm=True
    )
    model = Transformer(cfg, seed=seed)
    _randomize(model, np.random.default_rng(seed), scale=1.0)
    cb = population_batch(tm, mk, mask_keys=mask_keys)
    _assert_same_loss_and_grads(model, cb, cb.to_positions(), 1e-11, 1e-9, "population counts vs merged")


def test_count_attention_weights_equal_position_weights_example():
    """Explicit attention distributions: a query token's weight on key token b = count_b e^S / Z."""
    V1 = 6
    cfg = ModelConfig(V1=V1, train=("W_K", "W_Q"), scale="none")
    model = Transformer(cfg, seed=3)
    _randomize(model, np.random.default_rng(0), scale=1.0)
    toks = np.array([[1, 2, 2, 5, 1, 0, 3]])
    A = model.attention_weights(toks)[0]  # (N, N) query i, key j
    S = model.score_matrix()
    counts = np.bincount(toks[0], minlength=V1)
    for i, a in enumerate(toks[0]):
        w = counts * np.exp(S[a])
        w /= w.sum()
        per_token = np.bincount(toks[0], weights=A[i], minlength=V1)
        np.testing.assert_allclose(per_token, w, rtol=1e-12, atol=1e-15, err_msg=f"query position {i} token {a}")


@pytest.mark.parametrize("attention", ["softmax", "uniform"])
def test_attention_maps_equal_per_head_weights(attention):
    """One forward pass for every layer and head == the per-(layer, head) path, padding included."""
    V1 = 7
    train = ("W_K", "W_Q", "W_V") if attention == "softmax" else ("W_V",)
    cfg = ModelConfig(
        V1=V1, n_layers=3, n_heads=2, d_a=3, residual=True, layer_norm=True, attention=attention, train=train
    )
    model = Transformer(cfg, seed=1)
    _randomize(model, np.random.default_rng(2), scale=1.0)
    toks = np.array([[1, 2, 2, 5, 1, 0, 3], [4, 6, 6, -1, -1, -1, -1]])
    maps = model.attention_maps(toks)
    assert maps.shape == (3, 2, 2, 7, 7)
    for li in range(3):
        for hi in range(2):
            np.testing.assert_array_equal(maps[li, hi], model.attention_weights(toks, layer=li, head=hi))
    np.testing.assert_allclose(maps.sum(axis=-1)[:, :, 0], 1.0, rtol=1e-12)
    assert np.all(maps[:, :, 1, :, 3:] == 0)  # padding is never a key


@settings(max_examples=20)
@given(topic_models(max_T=5, max_v=3), maskings(), st.integers(0, 2**31))
def test_population_batch_is_the_exact_uniform_attention_loss(tm, mk, seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(tm.V1, tm.V1))
    cfg = ModelConfig(V1=tm.V1, attention="uniform", train=("W_V",), loss="squared")
    model = Transformer(cfg, seed=0)
    model.get("layers.0.W_V")[0] = W
    model.zero_grad()
    loss = model.loss_and_grad(population_batch(tm, mk))
    ref, dW, _ = value_loss_grad(W, tm, mk)
    assert loss == pytest.approx(ref, rel=1e-11, abs=1e-12)
    np.testing.assert_allclose(model.grad("layers.0.W_V")[0], dW, rtol=1e-9, atol=1e-12)


def test_large_scores_stay_finite():
    V1 = 5
    cfg = ModelConfig(V1=V1, train=("W_K", "W_Q", "W_V"), loss="ce", scale="none")
    model = Transformer(cfg, seed=0)
    model.get("layers.0.W_K")[...] = 100.0 * np.random.default_rng(1).normal(size=(1, V1, V1))
    model.get("layers.0.W_Q")[...] = 100.0 * np.random.default_rng(2).normal(size=(1, V1, V1))
    model.get("layers.0.W_V")[...] = 1e3 * np.eye(V1)
    rng = np.random.default_rng(0)
    inputs, selected, targets = _random_masked(rng, V1, 3, 6)
    for build in (count_batch, position_batch):
        model.zero_grad()
        loss = model.loss_and_grad(build(inputs, selected, targets, V1))
        assert np.isfinite(loss)
        assert all(np.all(np.isfinite(model.grad(n))) for n in model.trainable_names())


def test_no_keys_gives_zero_attention_not_nan():
    """mask_keys with every position selected: the query has no key; the attention output is 0."""
    V1 = 4
    cfg = ModelConfig(V1=V1, train=("W_K", "W_Q", "W_V", "b_dec"), mask_keys=True)
    model = Transformer(cfg, seed=0)
    _randomize(model, np.random.default_rng(0))
    inputs = np.array([[1, 2, 3]])
    sel = np.ones((1, 3), bool)
    for build in (count_batch, position_batch):
        O = model.forward(build(inputs, sel, inputs, V1, mask_keys=True))
        np.testing.assert_allclose(O, np.broadcast_to(model.get("b_dec"), O.shape))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(V1=1), "V1"),
        (dict(V1=5, d=4), "d"),
        (dict(V1=5, n_layers=0), "n_layers"),
        (dict(V1=5, n_heads=0), "n_heads"),
        (dict(V1=5, embedding="learned"), "embedding"),
        (dict(V1=5, decoder="tied"), "tied"),
        (dict(V1=5, attention="linear"), "attention"),
        (dict(V1=5, scale="sqrt_d"), "scale"),
        (dict(V1=5, loss="l1"), "loss"),
        (dict(V1=5, reg=-1.0), "reg"),
        (dict(V1=5, train=("W_X",)), "train"),
        (dict(V1=5, train=("W_E",)), "W_E"),
        (dict(V1=5, train=("W_dec",)), "W_dec"),
        (dict(V1=5, attention="uniform", train=("W_K",)), "W_K"),
        (dict(V1=5, count_based="sometimes"), "count_based"),
        (dict(V1=5, init="xavier"), "init"),
        (dict(V1=5, embedding="trained", init_scale_E=-0.1), "init_scale_E"),
        (dict(V1=5, residual="yes"), "residual"),
    ],
)
def test_bad_model_config_raises_naming_the_parameter(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        ModelConfig(**kwargs)


def test_bad_batches_raise():
    with pytest.raises(ValueError, match="targets"):
        count_batch(np.array([[1, 2]]), np.array([[True, False]]), np.array([[0, 2]]), 3)
    with pytest.raises(ValueError, match="inputs"):
        position_batch(np.array([[1, 7]]), np.array([[True, False]]), np.array([[1, 2]]), 3)
    with pytest.raises(ValueError, match="average"):
        count_batch(np.array([[1, 2]]), np.array([[True, False]]), np.array([[1, 2]]), 3, average="mean")
    model = Transformer(ModelConfig(V1=5, n_layers=2), seed=0)
    cb = count_batch(np.array([[1, 2]]), np.array([[True, False]]), np.array([[1, 2]]), 5)
    with pytest.raises(ValueError, match="n_layers"):
        model.loss(cb)
    with pytest.raises(ValueError, match="p_m"):
        population_batch(tc.TopicModel(T=2, v=2, tau=1), tc.Masking(p_m=0.0))


@pytest.mark.parametrize("mask_keys", [False, True])
def test_finite_batch_loss_agrees_with_independent_monte_carlo(mask_keys):
    """Our count-based model on fresh masked documents vs montecarlo.mc_attention_loss (an
    independent finite-N estimator): same expected loss, within 4 combined standard errors."""
    from theorycheck.sampling import mask_documents, sample_documents
    from theorycheck.sampling.montecarlo import mc_attention_loss

    tm, mk = tc.TopicModel(T=3, v=3, tau=2), tc.Masking(p_m=0.3, p_c=0.2, p_r=0.2)
    rng = np.random.default_rng(5)
    S = rng.normal(size=(tm.V1, tm.V1))
    W = rng.normal(scale=0.3, size=(tm.V1, tm.V1))
    model = _score_model_local(tm, S, W, mask_keys)
    vals = []
    data_rng = np.random.default_rng(11)
    for _ in range(60):
        docs = sample_documents(tm, 100, 20, rng=data_rng)
        mb = mask_documents(docs, tm, mk, rng=data_rng)
        vals.append(model.loss(count_batch(mb.inputs, mb.selected, mb.targets, tm.V1, mask_keys=mask_keys)))
    ours, se_ours = float(np.mean(vals)), float(np.std(vals, ddof=1) / np.sqrt(len(vals)))
    est = mc_attention_loss(S, W, tm, mk, N=20, n_docs=6000, mask_keys=mask_keys, seed=3)
    tol = 4.0 * np.hypot(se_ours, est.stderr)
    assert abs(ours - est.mean) <= tol, f"ours {ours:.5f} +- {se_ours:.1e} vs MC {est.mean:.5f} +- {est.stderr:.1e}"


def _score_model_local(tm, S, W, mask_keys):
    cfg = ModelConfig(V1=tm.V1, train=("W_K", "W_Q", "W_V"), scale="none", mask_keys=mask_keys)
    model = Transformer(cfg, seed=0)
    model.get("layers.0.W_Q")[0] = np.eye(tm.V1)
    model.get("layers.0.W_K")[0] = S
    model.get("layers.0.W_V")[0] = W
    return model


def test_embedding_init_scale_override():
    """``init_scale_E`` sets the spread of W^E only (the other matrices keep ``init_scale``)."""
    cfg = ModelConfig(V1=60, embedding="trained", decoder="tied", init_scale=0.01, init_scale_E=0.5)
    m = Transformer(cfg, seed=0)
    assert np.std(m.get("W_E")) == pytest.approx(0.5, rel=0.05)
    assert np.std(m.get("layers.0.W_V")) == pytest.approx(0.01, rel=0.05)
    same = Transformer(ModelConfig(V1=60, embedding="trained", decoder="tied", init_scale=0.01), seed=0)
    assert np.std(same.get("W_E")) == pytest.approx(0.01, rel=0.05)


@settings(max_examples=15)
@given(topic_models(max_T=5, max_v=3), maskings(), st.booleans())
def test_population_contexts_are_probability_weighted(tm, mk, mask_keys):
    """Key densities sum to 1 per topic set; target weights sum to 1 over all groups (every selected
    position shows [MASK], itself or a random word: p_mask + p_c + p_r = 1); CountBatch wraps them."""
    pc = theorycheck.population.population_contexts(tm, mk, mask_keys=mask_keys)
    np.testing.assert_allclose(pc.K.sum(axis=1), 1.0, rtol=1e-13)
    assert pc.Y.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(pc.weight, pc.Y.sum(axis=1), rtol=1e-13)
    assert np.all(pc.K[:, 0] == 0) if mask_keys else np.all(pc.K[:, 0] == pytest.approx(mk.p_m * mk.p_mask))
    cb = population_batch(tm, mk, mask_keys=mask_keys)
    np.testing.assert_array_equal(cb.Y, pc.Y)
    np.testing.assert_array_equal(cb.qtok, pc.qtok)
    with pytest.raises(TypeError, match="mask_keys"):
        theorycheck.population.population_contexts(tm, mk, mask_keys="yes")
