"""nn/_factored_kernels.py: the fused route of a one-layer, one-head model on a factored count batch
(the exact population) against its numpy reference and against the layer-by-layer route
(``Transformer.fused = False``, the dense ``E x V1`` attention); the two-stage trajectory against
the layer-by-layer route; the fallback when a softmax normaliser underflows; factor validation."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from theorycheck.models import GeneralTopicModel, Masking, TopicModel
from theorycheck.nn import ModelConfig, Trainer, Transformer, population_batch, preset
from theorycheck.nn._factored_kernels import factored_loss_grad, factored_loss_grad_ref
from theorycheck.nn.batches import CountBatch
from theorycheck.strategies import maskings, topic_models

RTOL = 1e-12


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b), initial=0.0) / max(float(np.max(np.abs(b), initial=0.0)), 1e-300))


def _general_model(rng, T, n, tau):
    phi = rng.random((T, n)) ** 3 + 1e-3 * (rng.random((T, n)) < 0.5)
    return GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), prior="uniform-tau", tau=tau)


def _model(V1, loss, *, embedding="one-hot", seed=0, scale=0.7, b_dec=True):
    d = V1 if embedding == "one-hot" else V1
    train = ("W_K", "W_Q", "W_V") + (("b_dec",) if b_dec else ()) + (("W_E",) if embedding == "trained" else ())
    cfg = ModelConfig(V1=V1, d=d, embedding=embedding, loss=loss, train=train, init_scale=scale, scale="none")
    m = Transformer(cfg, seed=seed)
    m.decoder.params["b_dec"][...] = np.random.default_rng(seed + 1).normal(0.0, 0.2, V1)
    return m


def _grads(m, batch, fused):
    m.fused = fused
    m.zero_grad()
    loss = m.loss_and_grad(batch)
    return loss, {n: m.grad(n).copy() for n in m.trainable_names()}


@settings(max_examples=25, deadline=None)
@given(
    tm=topic_models(max_T=5, max_v=3, max_tau=3),
    mk=maskings(min_p_m=0.05),
    mask_keys=st.booleans(),
    loss=st.sampled_from(["squared", "ce"]),
    seed=st.integers(0, 2**16),
)
@example(tm=TopicModel(T=2, v=1, tau=1), mk=Masking(1.0, 1.0, 0.0), mask_keys=False, loss="squared", seed=0)
def test_kernel_equals_numpy_reference(tm, mk, mask_keys, loss, seed):
    """The Numba kernel and the vectorised numpy reference of the same formulas agree to 1e-12 (gradients:
    1e-11 relative, or 1e-14 absolute where a gradient is zero up to rounding, e.g. p_m = p_c = 1 with one word:
    every entry ~1e-16, drawn by hypothesis once the example pool changed)."""
    batch = population_batch(tm, mk, mask_keys=mask_keys)
    rng = np.random.default_rng(seed)
    V1 = tm.V1
    S = rng.normal(0.0, 2.0, (V1, V1))
    VtT = rng.normal(0.0, 0.5, (V1, V1))
    bias = rng.normal(0.0, 0.3, V1)
    fk = batch.key_factors()
    got = factored_loss_grad(S, VtT, bias, 0.7, fk, loss)
    ref = factored_loss_grad_ref(S, VtT, bias, 0.7, fk, loss)
    assert got[0] == pytest.approx(ref[0], rel=RTOL, abs=1e-14)
    for x, y in zip(got[1:4], ref[1:4]):
        assert _rel(x, y) < 1e-11 or float(np.max(np.abs(np.asarray(x) - np.asarray(y)), initial=0.0)) < 1e-14
    assert got[4] == pytest.approx(ref[4], rel=RTOL)


@settings(max_examples=20, deadline=None)
@given(
    tm=topic_models(max_T=5, max_v=3, max_tau=3),
    mk=maskings(min_p_m=0.05),
    mask_keys=st.booleans(),
    loss=st.sampled_from(["squared", "ce"]),
    embedding=st.sampled_from(["one-hot", "trained"]),
    seed=st.integers(0, 2**16),
)
def test_fused_route_equals_layer_by_layer(tm, mk, mask_keys, loss, embedding, seed):
    """Loss and every gradient of the fused route equal the dense count path's (an independent route:
    ``E x V1`` attention, decoder and loss head layer by layer)."""
    batch = population_batch(tm, mk, mask_keys=mask_keys)
    m = _model(tm.V1, loss, embedding=embedding, seed=seed)
    assert m.fused_route(batch)
    l_new, g_new = _grads(m, batch, True)
    l_old, g_old = _grads(m, batch, False)
    assert l_new == pytest.approx(l_old, rel=1e-12)
    _assert_grads_close(g_new, g_old)


def _assert_grads_close(g_new, g_old, rtol=1e-10):
    """Every gradient within ``rtol`` of the largest gradient entry (a gradient may vanish exactly)."""
    scale = max(float(np.max(np.abs(g), initial=0.0)) for g in g_old.values())
    for n in g_old:
        assert np.max(np.abs(g_new[n] - g_old[n]), initial=0.0) <= rtol * scale, n


def test_fused_route_on_a_general_model():
    """A general topic-word matrix (dense phi, unequal word laws): the same loss and gradients."""
    rng = np.random.default_rng(3)
    tm = _general_model(rng, 4, 9, 2)
    batch = population_batch(tm, Masking(0.3, 0.1, 0.2))
    for loss in ("squared", "ce"):
        m = _model(tm.V1, loss, seed=5)
        l_new, g_new = _grads(m, batch, True)
        l_old, g_old = _grads(m, batch, False)
        assert l_new == pytest.approx(l_old, rel=1e-12)
        _assert_grads_close(g_new, g_old)


def test_fused_route_applies_only_where_exact():
    tm, mk = TopicModel(3, 2, 2), Masking()
    batch = population_batch(tm, mk)
    assert _model(tm.V1, "squared").fused_route(batch)
    for change in (
        dict(n_heads=2),
        dict(residual=True),
        dict(layer_norm=True),
        dict(attention="uniform", train=("W_V",)),
    ):
        cfg = ModelConfig(V1=tm.V1, **change)
        assert not Transformer(cfg, seed=0).fused_route(batch)
    plain = CountBatch(K=batch.K, ctx=batch.ctx, qtok=batch.qtok, weight=batch.weight, Y=batch.Y)
    assert not plain.factored and not _model(tm.V1, "squared").fused_route(plain)


def test_two_stage_trajectory_equals_layer_by_layer_route():
    """The first 60 steps of the ``two-stage`` preset (paper size, SGD lr 30): every parameter and the
    logged loss of the fused run equal those of the layer-by-layer run (recorded here, with
    ``fused = False``) to 1e-12 relative."""
    cfg = preset("two-stage").replace(steps=60, log_every=5, checkpoint_every=0)
    runs = {}
    for fused in (True, False):
        tr = Trainer(cfg, progress=False)
        tr.model.fused = fused
        tr.run()
        runs[fused] = (tr.model.state_dict(), [r["loss"] for r in tr.history])
    (p_new, l_new), (p_old, l_old) = runs[True], runs[False]
    for n in p_old:
        assert _rel(p_new[n], p_old[n]) < RTOL, n
    assert np.allclose(l_new, l_old, rtol=RTOL, atol=0.0)
    assert _rel(p_new["layers.0.W_V"], p_old["layers.0.W_V"]) < RTOL and np.linalg.norm(p_old["layers.0.W_V"]) > 0.1


def test_underflowing_normaliser_falls_back_to_the_dense_route():
    """With ``mask_keys`` a context has no key outside its topics; scores that put every query's maximum
    on word 1 by a margin of 2000 underflow ``exp`` on the other contexts' keys: the fused route
    detects the zero normaliser and the result is the dense route's (finite, equal)."""
    tm, mk = TopicModel(3, 2, 1), Masking()
    batch = population_batch(tm, mk, mask_keys=True)
    m = _model(tm.V1, "squared", scale=0.0)
    lay = m.layers[0]
    lay.params["W_Q"][0] = np.eye(tm.V1)
    lay.params["W_K"][0] = 0.0
    lay.params["W_K"][0][:, 1] = 2000.0  # S[a, 1] = 2000 for every query a, 0 elsewhere
    l_new, g_new = _grads(m, batch, True)
    l_old, g_old = _grads(m, batch, False)
    assert np.isfinite(l_new) and l_new == l_old
    for n in g_old:
        assert np.array_equal(g_new[n], g_old[n]), n


def test_factor_validation():
    tm, mk = TopicModel(3, 2, 2), Masking()
    b = population_batch(tm, mk)
    base = dict(K=b.K, ctx=b.ctx, qtok=b.qtok, weight=b.weight, Y=b.Y)
    f = dict(key_coef=b.key_coef, key_basis=b.key_basis, target_coef=b.target_coef, target_basis=b.target_basis)
    with pytest.raises(ValueError, match="pass all of key_coef"):
        CountBatch(**base, key_coef=b.key_coef, key_basis=b.key_basis)
    with pytest.raises(ValueError, match="shapes"):
        CountBatch(**base, **{**f, "key_basis": b.key_basis[:, 1:]})
    with pytest.raises(ValueError, match="target_coef and target_basis must have shapes"):
        CountBatch(**base, **{**f, "target_basis": b.target_basis[:, :1]})
    with pytest.raises(ValueError, match="key_coef must be non-negative"):
        CountBatch(**base, **{**f, "key_coef": -b.key_coef})
    with pytest.raises(ValueError, match="key_coef @ key_basis must equal"):
        CountBatch(**base, **{**f, "key_coef": 2.0 * b.key_coef})
    with pytest.raises(ValueError, match="factored targets must equal"):
        CountBatch(**base, **{**f, "target_coef": 0.5 * b.target_coef})


@pytest.mark.parametrize("loss", ["ce", "squared"])
def test_kernel_gives_the_same_bits_on_any_thread_count(loss):
    """Cross-entropy: fixed token blocks, partial sums added in block order; squared: a serial kernel.
    1 and 2 Numba threads agree exactly."""
    tm = TopicModel(4, 3, 2)
    batch = population_batch(tm, Masking())
    rng = np.random.default_rng(7)
    S, VtT, bias = rng.normal(0, 2, (tm.V1, tm.V1)), rng.normal(0, 0.5, (tm.V1, tm.V1)), rng.normal(0, 0.3, tm.V1)
    out = []
    for n in (1, 2):
        out.append(factored_loss_grad(S, VtT, bias, 1.0, batch.key_factors(), loss, threads=n))
    assert out[0][0] == out[1][0]
    for x, y in zip(out[0][1:4], out[1][1:4]):
        assert np.array_equal(x, y)


def _sub_batch(batch, keep):
    """The loss entries ``keep`` (indices, repeats allowed) of a factored batch, factors unchanged."""
    keep = np.sort(np.asarray(keep))
    return CountBatch(
        K=batch.K, ctx=batch.ctx[keep], qtok=batch.qtok[keep], weight=batch.weight[keep], Y=batch.Y[keep],
        key_coef=batch.key_coef, key_basis=batch.key_basis, target_coef=batch.target_coef,
        target_basis=batch.target_basis,
    )  # fmt: skip


@pytest.mark.parametrize("loss", ["squared", "ce"])
def test_fused_route_with_missing_and_repeated_entries(loss):
    """The squared route sums over a (context, token) grid with entry counts and weight sums: loss
    entries dropped (a pair that is no entry) and repeated (a pair counted twice) give the layer-by-layer
    route's loss and gradients."""
    rng = np.random.default_rng(11)
    batch = population_batch(TopicModel(4, 3, 2), Masking(0.2, 0.1, 0.1))
    E = batch.ctx.size
    keep = np.concatenate([rng.choice(E, size=E // 2, replace=False), rng.choice(E, size=E // 5)])
    sub = _sub_batch(batch, keep)
    assert sub.factored and np.unique(np.stack([sub.ctx, sub.qtok]), axis=1).shape[1] < sub.ctx.size
    m = _model(batch.K.shape[1], loss, seed=4)
    l_new, g_new = _grads(m, sub, True)
    l_old, g_old = _grads(m, sub, False)
    assert l_new == pytest.approx(l_old, rel=1e-12)
    _assert_grads_close(g_new, g_old)


def test_unknown_loss_is_refused_before_any_work():
    batch = population_batch(TopicModel(3, 2, 2), Masking())
    V1 = batch.K.shape[1]
    with pytest.raises(ValueError, match="loss must be one of \\['ce', 'squared'\\], got 'hinge'"):
        factored_loss_grad(np.zeros((V1, V1)), np.zeros((V1, V1)), np.zeros(V1), 1.0, batch.key_factors(), "hinge")
