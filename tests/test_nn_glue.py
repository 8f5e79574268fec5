"""The Python glue of the training step (commits ebf84d8 .. f98a829, eaa937c) against the routes it
replaced: the one-exp-pass CE loss == the scipy formula (to 1e-13, non-finite rows through scipy);
``count_batch`` with ``np.bincount`` == an ``np.add.at`` / loop reference, bitwise;
``attention_backward(dX_in_rows=)`` == the zero-padded full ``dX_in``, bitwise; the stacked
``W_Q, W_K, W_V`` buffer of ``AttentionLayer`` survives copies, replaced arrays and in-place
optimizer steps (loss and gradients bitwise); the ``tokens=`` one-hot hint changes no bit."""

import copy
import pickle
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax

from theorycheck import Masking, TopicModel
from theorycheck.nn import ModelConfig, Transformer, count_batch, make_batch, make_optimizer, modules, preset, rowwise
from theorycheck.nn import layers as L
from theorycheck.sampling import mask_documents, sample_documents


# ---------------------------------------------------------------------------- 1. ce_loss
def _scipy_ce(O, Y, weight):
    """The route ``ce_loss`` replaced: ``w logsumexp(o) - <o, Y>`` and ``w softmax(o) - Y``."""
    with np.errstate(invalid="ignore", over="ignore"):
        loss = float(np.sum(weight * logsumexp(O, axis=1)) - np.sum(O * Y))
        return loss, weight[:, None] * softmax(O, axis=1) - Y


def _loss_scale(O, Y, weight):
    """``sum |w lse| + sum |O Y|``: the size of the two terms whose difference is the loss (the
    loss itself may cancel to ~0 when the targets sit on the largest logit)."""
    return float(np.sum(np.abs(weight * logsumexp(O, axis=1))) + np.sum(np.abs(O * Y)))


@st.composite
def ce_inputs(draw, non_finite=False):
    E, V1 = draw(st.integers(1, 6)), draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    mag = draw(st.sampled_from([1e-8, 1.0, 30.0, 1e3, 1e4]))
    O = rng.uniform(-mag, mag, size=(E, V1))
    if draw(st.booleans()):  # some rows with large offsets (|O| up to 1e4, finite)
        O += rng.choice([0.0, -1e4 + mag, 1e4 - mag], size=(E, 1))
        O = np.clip(O, -1e4, 1e4)
    Y = rng.integers(0, 3, size=(E, V1)).astype(np.float64) * draw(st.sampled_from([1.0, 0.125, 1 / 3]))
    weight = Y.sum(axis=1) if draw(st.booleans()) else rng.uniform(0.0, 2.0, size=E)
    if non_finite:
        kind = rng.choice(np.array([-np.inf, np.inf, 0.0]), size=(E, V1), p=[0.3, 0.1, 0.6])
        O = np.where(kind != 0.0, kind, O)
        if draw(st.booleans()):  # one row that is -inf everywhere
            O[rng.integers(E)] = -np.inf
    return O, Y, weight


@settings(max_examples=120)
@given(ce_inputs())
def test_ce_loss_equals_the_scipy_route(args):
    """Finite logits (|O| <= 1e4): the gradient equals ``w softmax(O) - Y`` to 1e-13 relative per
    entry (in fact bitwise: the same operations as ``scipy.special.softmax``); the loss equals
    ``w logsumexp(O) - sum O Y`` to 1e-13 of the terms' size; the fallback is not taken and O is
    left unchanged."""
    O, Y, weight = args
    O0 = O.copy()
    with mock.patch.object(rowwise, "logsumexp", wraps=rowwise.logsumexp) as spy:
        loss, grad = rowwise.ce_loss(O, Y, weight)
    assert spy.call_count == 0  # finite maxima: the one-pass route
    np.testing.assert_array_equal(O, O0)
    ref_loss, ref_grad = _scipy_ce(O, Y, weight)
    assert grad.shape == O.shape and np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-13, atol=0.0)
    np.testing.assert_array_equal(grad, ref_grad)
    assert abs(loss - ref_loss) <= 1e-13 * _loss_scale(O, Y, weight) + 1e-300
    # the loss head dispatches to it
    assert rowwise.loss_head(O, Y, weight, "ce")[0] == loss


@settings(max_examples=120)
@given(ce_inputs(non_finite=True))
def test_ce_loss_non_finite_rows_go_through_scipy(args):
    """Logits with -inf / +inf entries: a row with a non-finite maximum (+inf, or all -inf) sends
    the batch through the scipy fallback; -inf entries under a finite maximum stay on the one-pass
    route. Either way the loss and gradient are scipy's: NaN exactly where scipy's are, finite
    values to 1e-13."""
    O, Y, weight = args
    fallback = not np.all(np.isfinite(O.max(axis=1)))
    with mock.patch.object(rowwise, "logsumexp", wraps=rowwise.logsumexp) as spy, np.errstate(all="ignore"):
        loss, grad = rowwise.ce_loss(O, Y, weight)
    assert spy.call_count == (1 if fallback else 0)
    ref_loss, ref_grad = _scipy_ce(O, Y, weight)
    np.testing.assert_array_equal(np.isnan(grad), np.isnan(ref_grad))  # no NaN where scipy is finite
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-13, atol=0.0, equal_nan=True)
    assert np.isnan(loss) == np.isnan(ref_loss)
    if np.isfinite(ref_loss):
        assert abs(loss - ref_loss) <= 1e-13 * _loss_scale(O, Y, weight) + 1e-300
    else:
        assert loss == ref_loss or np.isnan(ref_loss)


def test_ce_loss_examples_with_infinities():
    """Hand-made rows: ``[-inf, 0, log 3]`` with target 2 (one-pass route: softmax (0, 1/4, 3/4),
    loss log(4/3) up to rounding) and the same with a +inf row added (scipy route: the finite row's
    gradient unchanged bit for bit, the +inf row NaN as in scipy)."""
    O = np.array([[-np.inf, 0.0, np.log(3.0)]])
    Y = np.array([[0.0, 0.0, 1.0]])
    with np.errstate(invalid="ignore"):
        loss, grad = rowwise.ce_loss(O, Y, np.ones(1))
    np.testing.assert_allclose(grad, [[0.0, 0.25, -0.25]], rtol=1e-15, atol=1e-16)
    assert np.isnan(loss)  # -inf * 0 in sum(O * Y), as in scipy's formula
    O2 = np.vstack([O, [[np.inf, 0.0, 1.0]]])
    Y2 = np.vstack([Y, [[0.0, 1.0, 0.0]]])
    with mock.patch.object(rowwise, "logsumexp", wraps=rowwise.logsumexp) as spy, np.errstate(all="ignore"):
        _, grad2 = rowwise.ce_loss(O2, Y2, np.ones(2))
    assert spy.call_count == 1
    np.testing.assert_array_equal(grad2[0], grad[0])
    np.testing.assert_array_equal(np.isnan(grad2[1]), np.isnan(_scipy_ce(O2, Y2, np.ones(2))[1][1]))


# ---------------------------------------------------------------------------- 2. count_batch
def _count_ref(inputs, selected, targets, V1, mask_keys, average):
    """``K`` by a loop of ``+= 1``; ``Y`` by ``np.add.at`` over the selected positions in row-major
    order; entries sorted by (document, query token); weights per SPEC §2.2."""
    B, N = inputs.shape
    K = np.zeros((B, V1))
    for b in range(B):
        for n in range(N):
            if inputs[b, n] >= 0 and not (mask_keys and selected[b, n]):
                K[b, inputs[b, n]] += 1.0
    n_sel = selected.sum(axis=1)
    if average == "document":
        docs = max(int(np.count_nonzero(n_sel)), 1)
        w = [(1.0 / n_sel[b] if n_sel[b] else 0.0) / docs for b in range(B)]
    else:
        w = [1.0 / max(int(n_sel.sum()), 1)] * B
    pos = [(b, n) for b in range(B) for n in range(N) if selected[b, n]]
    entries = sorted({(b, int(inputs[b, n])) for b, n in pos})
    row = {e: i for i, e in enumerate(entries)}
    Y = np.zeros((len(entries), V1))
    ei = np.array([row[(b, int(inputs[b, n]))] for b, n in pos], dtype=np.int64)
    tg = np.array([targets[b, n] for b, n in pos], dtype=np.int64)
    np.add.at(Y, (ei, tg), np.array([w[b] for b, _ in pos], dtype=np.float64))
    ctx = np.array([e[0] for e in entries], dtype=np.int64)
    qtok = np.array([e[1] for e in entries], dtype=np.int64)
    return K, ctx, qtok, Y


@st.composite
def masked_inputs(draw):
    B, N, V1 = draw(st.integers(1, 5)), draw(st.integers(1, 14)), draw(st.integers(2, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    inputs = rng.integers(0, V1, size=(B, N))
    pad = rng.random((B, N)) < draw(st.sampled_from([0.0, 0.3]))
    inputs[pad] = -1
    selected = (rng.random((B, N)) < draw(st.sampled_from([0.0, 0.3, 0.8]))) & ~pad
    targets = np.where(pad, -1, rng.integers(1, V1, size=(B, N)))
    return inputs, selected, targets, V1


@settings(max_examples=100)
@given(masked_inputs(), st.booleans(), st.sampled_from(["document", "token"]))
def test_count_batch_equals_the_add_at_reference_bitwise(case, mask_keys, average):
    """``K``, ``ctx``, ``qtok``, ``Y`` bitwise equal to the loop / ``np.add.at`` reference (repeated
    additions: the summands of one cell are one document's weight, so a product ``count * w`` would
    differ in the last bit for some counts), ``weight`` the row sums of ``Y``; float64 ``K``, ``Y``."""
    inputs, selected, targets, V1 = case
    cb = count_batch(inputs, selected, targets, V1, mask_keys=mask_keys, average=average)
    K, ctx, qtok, Y = _count_ref(inputs, selected, targets, V1, mask_keys, average)
    assert cb.K.dtype == np.float64
    if Y.shape[0]:  # (no loss entry: see test_count_batch_without_selection_keeps_float_targets)
        assert cb.Y.dtype == np.float64 and cb.weight.dtype == np.float64
    assert cb.K.shape == K.shape and cb.Y.shape == Y.shape
    np.testing.assert_array_equal(cb.K, K)
    np.testing.assert_array_equal(cb.ctx, ctx)
    np.testing.assert_array_equal(cb.qtok, qtok)
    np.testing.assert_array_equal(cb.Y, Y)
    np.testing.assert_array_equal(cb.weight, Y.sum(axis=1))


def test_count_batch_without_selection_keeps_float_targets():
    """No selected position (E = 0): ``Y`` (0, V1) and ``weight`` (0,) stay float64 as before."""
    cb = count_batch(np.array([[1, 2, -1]]), np.zeros((1, 3), dtype=bool), np.array([[1, 1, -1]]), 3)
    assert cb.Y.shape == (0, 3) and cb.weight.shape == (0,)
    assert cb.Y.dtype == np.float64 and cb.weight.dtype == np.float64


def test_count_batch_sums_by_repeated_addition():
    """Ten selected positions of one (document, query token, target) cell, weight 1/10 each: ``Y``
    is ``0.1`` added ten times (0.9999999999999999, as ``np.add.at`` gives), not ``10 * 0.1 = 1``;
    a second target of the same entry and the counts ``K`` (mask_keys: unselected keys only)."""
    inputs = np.array([[2] * 11 + [1, -1]])
    selected = np.array([[True] * 11 + [False, False]])
    targets = np.array([[1] * 10 + [3, 1, -1]])
    cb = count_batch(inputs, selected, targets, 4, mask_keys=True)
    w = 1.0 / 11.0
    acc = 0.0
    for _ in range(10):
        acc += w
    assert acc != 10 * w
    np.testing.assert_array_equal(cb.Y, [[0.0, acc, 0.0, w]])
    np.testing.assert_array_equal(cb.weight, [acc + w])
    np.testing.assert_array_equal(cb.K, [[0.0, 1.0, 0.0, 0.0]])
    assert cb.ctx.tolist() == [0] and cb.qtok.tolist() == [2]


# ---------------------------------------------------------------------------- shared setups
def _packed_case(rng, B, N, d, one_hot):
    """Random documents with padding at random positions (key weight 0), their packed rows and
    (one-hot) tokens: ``(Xp (R, d), log_w (B, N), rows (R,), tokens (R,) or None)``."""
    valid = rng.random((B, N)) < 0.7
    valid[0, 0] = True
    w = rng.integers(1, 4, size=(B, N)) * valid
    rows = np.flatnonzero(valid.ravel())
    if one_hot:
        tok = rng.integers(0, d, size=rows.size)
        return np.eye(d)[tok], L.log_weights(w.astype(np.float64)), rows, tok
    return rng.normal(size=(rows.size, d)), L.log_weights(w.astype(np.float64)), rows, None


def _weights(rng, H, da, d):
    return rng.normal(size=(H, da, d)), rng.normal(size=(H, da, d)), rng.normal(size=(H, d, d))


def _assert_grads_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ---------------------------------------------------------------------------- 3. dX_in_rows
@settings(max_examples=40)
@given(
    st.integers(1, 3),
    st.integers(1, 7),
    st.integers(2, 5),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, True, False]),
    st.integers(0, 2**31),
)
def test_dX_in_rows_equals_the_zero_padded_dX_in(B, N, d, one_hot, use_queries, fused, seed):
    """Packed position path (``rows=``; ``queries=`` as the last layer of the model, or all rows):
    the upstream gradient given at rows ``dX_in_rows`` only gives the same ``dX`` and weight
    gradients, bit for bit, as the full zero-padded ``dX_in``; without ``need_dX`` both are None.
    On the fused Numba route (default) and the numpy route (``fused=False``)."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    Xp, logw, rows, _ = _packed_case(rng, B, N, d, one_hot)
    R = rows.size
    if use_queries:
        queries = np.flatnonzero(rng.random(R) < 0.5)
        in_rows = queries
    else:
        queries = None
        in_rows = np.flatnonzero(rng.random(R) < 0.5)
    W = _weights(rng, H, da, d)
    out, cache = L.attention_forward(Xp, logw, *W, 0.8, rows=rows, queries=queries, fused=fused)
    G = rng.normal(size=out.shape)
    dX_in = rng.normal(size=(in_rows.size, d))
    full = np.zeros((R, d))
    full[in_rows] = dX_in
    dX_full, g_full = L.attention_backward(G, cache, dX_in=full)
    dX_rows, g_rows = L.attention_backward(G, cache, dX_in=dX_in, dX_in_rows=in_rows)
    assert dX_rows.shape == (R, d)
    np.testing.assert_array_equal(dX_rows, dX_full)
    _assert_grads_equal(g_rows, g_full)
    # the upstream gradient really is added (and only at its rows)
    dX_none, _ = L.attention_backward(G, cache)
    np.testing.assert_allclose(dX_rows - dX_none, full, rtol=0, atol=1e-12 * (1 + np.abs(dX_none).max()))
    # the caller's arrays are read only
    np.testing.assert_array_equal(full[in_rows], dX_in)
    none_dX, g_nodx = L.attention_backward(G, cache, need_dX=False, dX_in=dX_in, dX_in_rows=in_rows)
    assert none_dX is None
    _assert_grads_equal(g_nodx, g_full)


@settings(max_examples=20)
@given(st.integers(1, 3), st.integers(1, 6), st.booleans(), st.integers(0, 2**31))
def test_attention_layer_backward_equals_the_padded_residual(B, N, layer_norm, seed):
    """``AttentionLayer.backward`` after a ``queries=`` forward (residual: ``dX_in`` = the query rows'
    gradient, ``dX_in_rows=queries``) == ``attention_backward`` with the residual scattered into a zero
    array the size of ``X``, bitwise (input and weight gradients)."""
    rng = np.random.default_rng(seed)
    d = 4
    cfg = ModelConfig(
        V1=d,
        d=d,
        d_a=3,
        n_heads=2,
        attention="softmax",
        residual=True,
        layer_norm=layer_norm,
        train=("W_Q", "W_K", "W_V"),
    )
    lay = modules.AttentionLayer(cfg, rng)
    Xp, logw, rows, _ = _packed_case(rng, B, N, d, False)
    key_w = np.exp(logw)
    queries = np.flatnonzero(rng.random(rows.size) < 0.6)
    out = lay.forward(Xp, key_w, rows=rows, queries=queries)
    dY = rng.normal(size=out.shape)
    lay.zero_grad()
    dX = lay.backward(dY)
    dR = rowwise.layer_norm_backward(lay.cache["Yn"], lay.cache["inv"], dY) if layer_norm else dY
    full = np.zeros_like(Xp)
    full[queries] = dR
    dX_ref, g_ref = L.attention_backward(dR, lay.cache["att"], dX_in=full)
    np.testing.assert_array_equal(dX, dX_ref)
    _assert_grads_equal({k: lay.grads[k] for k in g_ref}, {k: 0.0 + g for k, g in g_ref.items()})


# ---------------------------------------------------------------------------- 4. stacked buffer
TM = TopicModel(T=3, v=3, prior="dirichlet", alpha=0.3)  # V1 = 10
MK = Masking(p_m=0.3, p_c=0.1, p_r=0.1)


def _deep_cfg(count_based="auto"):
    """deep-4x4's architecture (one-hot, trained decoder, softmax, residual, post-LN, CE, SGD)
    at V1 = 10 with 2 layers x 2 heads, d_a = 4 and a larger init (attention far from uniform)."""
    m = preset("deep-4x4").model.to_dict()
    m.update(V1=TM.V1, d=None, d_a=4, n_layers=2, n_heads=2, init_scale=0.3, count_based=count_based)
    return ModelConfig.from_dict(m)


def _batch(cfg, seed):
    rng = np.random.default_rng(seed)
    docs = sample_documents(TM, 4, (6, 10), rng=rng)
    mb = mask_documents(docs, TM, MK, rng=rng)
    return make_batch(cfg, mb.inputs, mb.selected, mb.targets)


def _loss_grads(model, batch):
    model.zero_grad()
    loss = model.loss_and_grad(batch)
    return loss, {n: model.grad(n).copy() for n in model.trainable_names()}


def _assert_same(a, b):
    assert a[0] == b[0]
    _assert_grads_equal(a[1], b[1])


def _trained(cfg, steps=2):
    """A model after ``steps`` SGD steps of the preset's optimizer (lr 1: W_Q, W_K, W_V moved)."""
    model = Transformer(cfg, seed=3)
    opt = make_optimizer(preset("deep-4x4").optim)
    names = model.trainable_names()
    assert {"layers.0.W_Q", "layers.0.W_K", "layers.0.W_V", "layers.1.W_V"} <= set(names)
    for s in range(steps):
        _loss_grads(model, _batch(cfg, 100 + s))
        opt.step({n: model.get(n) for n in names}, {n: model.grad(n) for n in names}, 1.0)
    return model, opt


def _uses_buffer(model):
    return [lay._stacked() is not None for lay in model.layers]


@pytest.mark.parametrize("count_based", ["auto", "never"])
def test_copies_give_the_same_loss_and_gradients(count_based):
    """``copy.deepcopy`` and a pickle round trip of a trained model: loss and every trainable
    gradient bitwise equal to the original's on the same batch, and again after the copy's
    ``W_V`` (and the original's ``W_Q``) is replaced by a new array object."""
    cfg = _deep_cfg(count_based)
    model, _ = _trained(cfg)
    assert all(_uses_buffer(model))  # the original runs on its stacked buffer
    batch = _batch(cfg, 7)
    ref = _loss_grads(model, batch)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        _assert_same(_loss_grads(clone, batch), ref)
        for lay in clone.layers:
            lay.params["W_V"] = lay.params["W_V"].copy()
        _assert_same(_loss_grads(clone, batch), ref)
    for lay in model.layers:
        lay.params["W_Q"] = np.array(lay.params["W_Q"])
    assert not any(_uses_buffer(model))  # a replaced array is noticed
    _assert_same(_loss_grads(model, batch), ref)


@pytest.mark.parametrize("count_based", ["auto", "never"])
def test_in_place_steps_reach_the_stacked_buffer(count_based):
    """An optimizer step updates ``W_Q, W_K, W_V`` in place: the stacked buffer sees it (the model
    still uses it), and loss and gradients equal those of a fresh model given
    ``load_state_dict(model.state_dict())``, bitwise; also for a model whose ``W_K`` array was
    replaced before the step (its buffer then goes stale and must not be read)."""
    cfg = _deep_cfg(count_based)
    batch = _batch(cfg, 11)
    for replace in (False, True):
        model, opt = _trained(cfg, steps=1)
        if replace:
            for lay in model.layers:
                lay.params["W_K"] = lay.params["W_K"].copy()
        before = {n: model.get(n).copy() for n in model.trainable_names()}
        _loss_grads(model, _batch(cfg, 12))
        names = model.trainable_names()
        opt.step({n: model.get(n) for n in names}, {n: model.grad(n) for n in names}, 1.0)
        assert any(not np.array_equal(model.get(n), before[n]) for n in names if ".W_K" in n)
        assert _uses_buffer(model) == [not replace] * cfg.n_layers
        if not replace:
            for lay in model.layers:  # the buffer holds the updated values
                np.testing.assert_array_equal(lay._cat, L._stacked(*(lay.params[k] for k in ("W_Q", "W_K", "W_V"))))
        fresh = Transformer(cfg, seed=99)
        fresh.load_state_dict(model.state_dict())
        _assert_same(_loss_grads(model, batch), _loss_grads(fresh, batch))


def test_copies_keep_the_stacked_buffer():
    model = Transformer(_deep_cfg(), seed=0)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert all(_uses_buffer(clone))


# ---------------------------------------------------------------------------- 5. tokens= hint
@settings(max_examples=30)
@given(
    st.integers(1, 3),
    st.integers(1, 7),
    st.integers(2, 6),
    st.booleans(),
    st.sampled_from([None, True, False]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_tokens_hint_changes_nothing(B, N, d, use_queries, fused, stacked, seed):
    """One-hot packed rows: ``attention_forward(..., tokens=)`` gives the output and (through
    ``attention_backward``) the input and weight gradients of the call without the hint, bit for
    bit; with and without ``queries``, on both routes, with and without ``W_cat``."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    Xp, logw, rows, tok = _packed_case(rng, B, N, d, True)
    queries = np.flatnonzero(rng.random(rows.size) < 0.5) if use_queries else None
    W = _weights(rng, H, da, d)
    extra = dict(W_cat=L._stacked(*W)) if stacked else {}
    kw = dict(rows=rows, queries=queries, fused=fused, **extra)
    out0, c0 = L.attention_forward(Xp, logw, *W, 0.7, **kw)
    out1, c1 = L.attention_forward(Xp, logw, *W, 0.7, tokens=tok, **kw)
    np.testing.assert_array_equal(out1, out0)
    G = rng.normal(size=out0.shape)
    dX0, g0 = L.attention_backward(G, c0)
    dX1, g1 = L.attention_backward(G, c1)
    np.testing.assert_array_equal(dX1, dX0)
    _assert_grads_equal(g1, g0)


def test_tokens_hint_with_padding_rows():
    """Unpacked rows (``rows=None``, numpy route) with zero rows at padding: ``tokens`` with ``-1``
    there gives the same output and gradients as the one-hot test."""
    rng = np.random.default_rng(5)
    B, N, d, H, da = 3, 5, 4, 2, 2
    tokens = np.where(rng.random((B, N)) < 0.7, rng.integers(0, d, size=(B, N)), -1)
    tokens[0, 0] = 1
    X = L.embedding_forward(np.eye(d), tokens)
    logw = L.log_weights((tokens >= 0).astype(np.float64))
    W = _weights(rng, H, da, d)
    for fused in (False, True):
        out0, c0 = L.attention_forward(X, logw, *W, 0.7, fused=fused)
        out1, c1 = L.attention_forward(X, logw, *W, 0.7, fused=fused, tokens=tokens.ravel())
        np.testing.assert_array_equal(out1, out0)
        G = rng.normal(size=out0.shape)
        (dX0, g0), (dX1, g1) = L.attention_backward(G, c0), L.attention_backward(G, c1)
        np.testing.assert_array_equal(dX1, dX0)
        _assert_grads_equal(g1, g0)


@pytest.mark.parametrize("count_based", ["auto", "never"])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_model_with_and_without_the_tokens_hint(count_based, n_layers):
    """A one-hot Transformer passes ``tokens=`` to its first layer (checked by a spy); dropping the
    hint changes neither the loss nor any gradient (bitwise)."""
    m = _deep_cfg(count_based).to_dict()
    m["n_layers"] = n_layers
    cfg = ModelConfig.from_dict(m)
    if cfg.batch_form == "count":
        cfg = ModelConfig.from_dict({**m, "count_based": "never"})
    model = Transformer(cfg, seed=4)
    batch = _batch(cfg, 21)
    real = modules.attention_forward
    seen = []

    def spy(*a, **k):
        seen.append(k.get("tokens") is not None)
        return real(*a, **k)

    def drop(*a, **k):
        k.pop("tokens", None)
        return real(*a, **k)

    with mock.patch.object(modules, "attention_forward", spy):
        ref = _loss_grads(model, batch)
    assert seen == [True] + [False] * (n_layers - 1)
    with mock.patch.object(modules, "attention_forward", drop):
        _assert_same(_loss_grads(model, batch), ref)
