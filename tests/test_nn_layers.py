"""nn/layers.py: every pure backward against directional finite differences (check_gradient), on
both the position path (per-document attention) and the count path (token scores gathered per
query group), over random shapes and seeds."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.diagnostics import check_gradient
from theorycheck.nn import layers as L
from theorycheck.nn import rowwise
from theorycheck.nn._kernels import gather_softmax


def _weights(rng, shape, p_zero=0.3):
    w = rng.integers(1, 4, size=shape) * (rng.random(shape) >= p_zero)
    return w.astype(np.float64)


@settings(max_examples=25)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(0, 2**31))
def test_softmax_rows_backward_matches_finite_differences(B, N, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(B, N, N))
    logw = L.log_weights(_weights(rng, (B, 1, N)))
    G = rng.normal(size=z.shape)
    A = L.softmax_rows(z + logw)
    check_gradient(lambda zz: np.sum(G * L.softmax_rows(zz + logw)), z, L.softmax_rows_backward(A, G)).assert_ok()
    check_gradient(  # the 2-d (Numba) route
        lambda zz: np.sum(G[0] * L.softmax_rows(zz + logw[0])), z[0], L.softmax_rows_backward(A[0], G[0].copy())
    ).assert_ok()


def test_softmax_rows_empty_rows_and_weights():
    """Key weights (2, 0, 1) with logits (0, 5, log 2): weights 2 : 0 : 2; a row without keys is 0."""
    logits = np.array([[0.0, 5.0, np.log(2.0)], [0.0, 0.0, 0.0]])
    logw = L.log_weights(np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    A = L.softmax_rows(logits + logw)
    np.testing.assert_allclose(A, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]], rtol=1e-15)
    np.testing.assert_array_equal(L.key_distribution(np.array([[2.0, 0.0, 2.0], [0, 0, 0]])), A)


@settings(max_examples=20)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(1, 20), st.integers(0, 2**31))
def test_softmax_rows_equals_the_gather_kernel(V1, G, E, seed):
    rng = np.random.default_rng(seed)
    S = 10 * rng.normal(size=(V1, V1))
    logK = L.log_weights(_weights(rng, (G, V1)))
    qtok, ctx = rng.integers(0, V1, size=E), rng.integers(0, G, size=E)
    np.testing.assert_allclose(
        gather_softmax(S, logK, qtok, ctx), L.softmax_rows(S[qtok] + logK[ctx]), rtol=1e-13, atol=1e-300
    )


@st.composite
def attention_setups(draw):
    return dict(
        H=draw(st.integers(1, 2)),
        d=draw(st.integers(1, 5)),
        d_a=draw(st.integers(1, 4)),
        c=draw(st.sampled_from([1.0, 0.5])),
        seed=draw(st.integers(0, 2**31)),
        path=draw(st.sampled_from(["position", "count"])),
    )


def _attention_inputs(s):
    """Inputs of one attention call: ``X`` and key weights for the position or the count path."""
    rng = np.random.default_rng(s["seed"])
    H, d, da = s["H"], s["d"], s["d_a"]
    W = dict(W_Q=rng.normal(size=(H, da, d)), W_K=rng.normal(size=(H, da, d)), W_V=rng.normal(size=(H, d, d)))
    if s["path"] == "position":
        B, N = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        return rng.normal(size=(B, N, d)), _weights(rng, (B, N)), W, None, rng
    V1, G, E = int(rng.integers(2, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 12))
    qtok, ctx = rng.integers(0, V1, size=E), np.sort(rng.integers(0, G, size=E))
    P_q = sp.csr_matrix((np.ones(E), (qtok, np.arange(E))), shape=(V1, E))
    return rng.normal(size=(V1, d)), _weights(rng, (G, V1)), W, L.Groups(qtok=qtok, ctx=ctx, P_q=P_q), rng


@settings(max_examples=40)
@given(attention_setups())
def test_attention_backward_matches_finite_differences(s):
    X, w, W, groups, rng = _attention_inputs(s)
    logw = L.log_weights(w)

    def f(p):
        out, _ = L.attention_forward(p["X"], logw, p["W_Q"], p["W_K"], p["W_V"], s["c"], groups=groups)
        return np.sum(Gout * out)

    out, cache = L.attention_forward(X, logw, W["W_Q"], W["W_K"], W["W_V"], s["c"], groups=groups)
    Gout = rng.normal(size=out.shape)
    dX, grads = L.attention_backward(Gout, cache)
    check_gradient(f, dict(X=X, **W), dict(X=dX, **grads)).assert_ok()
    dX_in = rng.normal(size=X.shape)  # an upstream gradient (the residual branch) is added
    np.testing.assert_allclose(L.attention_backward(Gout, cache, dX_in=dX_in)[0], dX + dX_in, rtol=1e-12, atol=1e-12)
    assert L.attention_backward(Gout, cache, need_dX=False)[0] is None


def _attention_ref(X, logw, W_Q, W_K, W_V, c):
    """Independent position-path forward: a loop over heads with explicit per-head projections."""
    out = 0.0
    for h in range(W_V.shape[0]):
        Q, K, V = X @ W_Q[h].T, X @ W_K[h].T, X @ W_V[h].T
        out = out + L.softmax_rows(c * np.einsum("bqa,bka->bqk", Q, K) + logw[:, None, :]) @ V
    return out


@settings(max_examples=20)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(2, 7), st.integers(0, 2**31))
def test_one_hot_rows_take_the_gather_route(B, N, V1, seed):
    """One-hot inputs (with padding rows of zeros): the projections are a row gather (bit-equal to
    the GEMM), the weight gradients a sparse scatter (== the GEMM to rounding); outputs equal the
    independent per-head forward and every gradient equals finite differences."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    tokens = rng.integers(-1, V1, size=(B, N))
    X = L.embedding_forward(np.eye(V1), tokens)
    W = dict(W_Q=rng.normal(size=(H, da, V1)), W_K=rng.normal(size=(H, da, V1)), W_V=rng.normal(size=(H, V1, V1)))
    logw = L.log_weights(_weights(rng, (B, N)))
    X2 = X.reshape(-1, V1)
    Wcat = L._stacked(W["W_Q"], W["W_K"], W["W_V"])
    P, oh = L._project(X2, Wcat)
    assert oh is not None
    np.testing.assert_array_equal(P, X2 @ Wcat.T)
    dP = rng.normal(size=P.shape)
    np.testing.assert_allclose(L._weight_grads(dP, X2, oh), dP.T @ X2, rtol=1e-14, atol=1e-14)
    out, cache = L.attention_forward(X, logw, W["W_Q"], W["W_K"], W["W_V"], 0.7)
    np.testing.assert_allclose(out, _attention_ref(X, logw, W["W_Q"], W["W_K"], W["W_V"], 0.7), rtol=1e-12, atol=1e-13)
    Gout = rng.normal(size=out.shape)
    dX, grads = L.attention_backward(Gout, cache)

    def f(p):
        return np.sum(Gout * L.attention_forward(X, logw, p["W_Q"], p["W_K"], p["W_V"], 0.7)[0])

    check_gradient(f, W, grads).assert_ok()
    dense = X2.copy()
    dense[0, 0] += 0.5  # not one-hot any more: the GEMM route
    assert L._one_hot_rows(dense) is None and L._one_hot_rows(2.0 * X2 + (X2.max() == 0)) is None


@settings(max_examples=30)
@given(attention_setups())
def test_uniform_attention_backward_matches_finite_differences(s):
    X, w, W, _, rng = _attention_inputs(s)

    def f(p):
        return np.sum(Gout * L.uniform_attention_forward(p["X"], w, p["W_V"])[0])

    Uc, cache = L.uniform_attention_forward(X, w, W["W_V"])
    Gout = rng.normal(size=Uc.shape)
    dX, grads = L.uniform_attention_backward(Gout, cache)
    check_gradient(f, dict(X=X, W_V=W["W_V"]), dict(X=dX, **grads)).assert_ok()


def test_uniform_attention_is_softmax_attention_with_zero_scores():
    rng = np.random.default_rng(0)
    X, w = rng.normal(size=(2, 5, 3)), _weights(rng, (2, 5))
    W_V = rng.normal(size=(2, 3, 3))
    zero = np.zeros((2, 1, 3))
    out, _ = L.attention_forward(X, L.log_weights(w), zero, zero, W_V, 1.0)
    Uc, _ = L.uniform_attention_forward(X, w, W_V)
    np.testing.assert_allclose(out, np.broadcast_to(Uc[:, None, :], out.shape), rtol=1e-13, atol=1e-14)


@settings(max_examples=25)
@given(st.integers(1, 4), st.integers(2, 7), st.integers(0, 2**31))
def test_layer_norm_backward_matches_finite_differences(n, d, seed):
    rng = np.random.default_rng(seed)
    R, G = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    Yn, inv = rowwise.layer_norm_forward(R)
    np.testing.assert_allclose(Yn.mean(axis=1), 0.0, atol=1e-13)
    var_ratio = 1.0 - rowwise.LN_EPS * inv[:, 0] ** 2  # var / (var + eps)
    np.testing.assert_allclose((Yn**2).mean(axis=1), var_ratio, rtol=1e-12)
    check_gradient(
        lambda r: np.sum(G * rowwise.layer_norm_forward(r)[0]), R, rowwise.layer_norm_backward(Yn, inv, G), h=1e-6
    ).assert_ok()


@settings(max_examples=30)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=3),
    st.integers(1, 130),
    st.floats(-1e4, 1e4),
    st.integers(0, 2**31),
)
def test_layer_norm_kernel_equals_the_numpy_reference(lead, d, shift, seed):
    """The Numba layer norm (forward and backward) == the numpy reference to rounding, on any
    leading shape (zero rows included) and rows with a large common offset (the centring is exact)."""
    rng = np.random.default_rng(seed)
    R = rng.normal(size=(*lead, d)) * rng.uniform(0.01, 100.0) + shift
    G = rng.normal(size=R.shape)
    Y, inv = rowwise.layer_norm_forward(R)
    Yr, invr = rowwise.layer_norm_ref(R)
    assert Y.shape == R.shape and inv.shape == (*lead, 1)
    np.testing.assert_allclose(Y, Yr, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(inv, invr, rtol=1e-9)
    np.testing.assert_allclose(
        rowwise.layer_norm_backward(Y, inv, G),
        rowwise.layer_norm_backward_ref(Yr, invr, G),
        rtol=1e-9,
        atol=1e-9 * np.max(invr, initial=1.0),
    )


@settings(max_examples=20)
@given(st.integers(2, 6), st.integers(1, 4), st.integers(0, 2**31))
def test_embedding_backward_matches_finite_differences(V1, d, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(-1, V1, size=(2, 5))
    table = rng.normal(size=(d, V1))
    G = rng.normal(size=(2, 5, d))
    X = L.embedding_forward(table, tokens)
    assert np.all(X[tokens < 0] == 0)
    np.testing.assert_array_equal(X[tokens >= 0], table.T[tokens[tokens >= 0]])
    check_gradient(
        lambda t: np.sum(G * L.embedding_forward(t, tokens)), table, L.embedding_backward(tokens, G, V1)
    ).assert_ok()


@pytest.mark.parametrize("kind", ["identity", "trained", "tied"])
def test_decoder_backward_matches_finite_differences(kind):
    rng = np.random.default_rng(1)
    V1, d, E = 5, 5 if kind == "identity" else 3, 4
    Y, b, G = rng.normal(size=(E, d)), rng.normal(size=V1), rng.normal(size=(E, V1))
    M = {"identity": None, "trained": rng.normal(size=(V1, d)), "tied": rng.normal(size=(d, V1))}[kind]

    def mat(m):  # the decoder matrix: W^dec, or (W^E)^T when tied
        return None if m is None else (m.T if kind == "tied" else m)

    dY, dW, db = rowwise.decoder_backward(G, Y, mat(M), tied=kind == "tied")
    x, g = dict(Y=Y, b=b), dict(Y=dY, b=db)
    if M is not None:
        x["M"], g["M"] = M, dW

    def f(p):
        return np.sum(G * rowwise.decoder_forward(p["Y"], mat(p.get("M")), p["b"]))

    check_gradient(f, x, g).assert_ok()


@settings(max_examples=25)
@given(st.integers(1, 5), st.integers(2, 6), st.integers(0, 2**31), st.sampled_from(["squared", "ce"]))
def test_loss_heads_match_definition_and_finite_differences(E, V1, seed, kind):
    """``sum_e sum_x Y[e, x] l(o_e, x)`` written out over targets x, and dL/dO by differences."""
    rng = np.random.default_rng(seed)
    O, Y = 3 * rng.normal(size=(E, V1)), rng.random((E, V1)) * (rng.random((E, V1)) < 0.6)
    w = Y.sum(axis=1)
    val, dO = rowwise.loss_head(O, Y, w, kind)
    ref = 0.0
    for e in range(E):
        for x in range(V1):
            if kind == "squared":
                ref += Y[e, x] * np.sum((O[e] - np.eye(V1)[x]) ** 2)
            else:
                ref += Y[e, x] * (np.log(np.sum(np.exp(O[e]))) - O[e, x])
    assert val == pytest.approx(ref, rel=1e-12, abs=1e-12)
    check_gradient(lambda o: rowwise.loss_head(o, Y, w, kind)[0], O, dO).assert_ok()


@pytest.mark.parametrize("attention", ["softmax", "uniform"])
def test_attention_layer_backward_without_input_gradient(attention):
    """``AttentionLayer.backward(need_dX=False)`` returns None and accumulates the same gradients."""
    from theorycheck.nn import ModelConfig
    from theorycheck.nn.modules import AttentionLayer

    train = ["W_K", "W_Q", "W_V"] if attention == "softmax" else ["W_V"]
    cfg = ModelConfig(V1=7, d=7, d_a=3, n_heads=2, attention=attention, train=train, init_scale=0.5)
    rng = np.random.default_rng(3)
    lay = AttentionLayer(cfg, rng)
    X, w = rng.normal(size=(2, 5, 7)), _weights(rng, (2, 5))
    dY = rng.normal(size=lay.forward(X, w).shape)
    dX = lay.backward(dY)
    first = {k: g.copy() for k, g in lay.grads.items()}
    lay.zero_grad()
    assert dX is not None and lay.backward(dY, need_dX=False) is None
    for k, g in lay.grads.items():
        np.testing.assert_array_equal(g, first[k])


def _packed_case(rng, B, N, d, one_hot):
    """Random documents with padding at random positions (not keys) and their packed rows."""
    valid = rng.random((B, N)) < 0.7
    if one_hot:
        tokens = np.where(valid, rng.integers(0, d, size=(B, N)), -1)
        X = L.embedding_forward(np.eye(d), tokens)
    else:
        X = rng.normal(size=(B, N, d)) * valid[..., None] + 5.0 * ~valid[..., None]  # padding rows: garbage
    w = _weights(rng, (B, N)) * valid
    return X, L.log_weights(w), np.flatnonzero(valid.ravel())


@settings(max_examples=25)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(2, 5), st.booleans(), st.integers(0, 2**31))
def test_packed_rows_equal_the_padded_position_path(B, N, d, one_hot, seed):
    """``rows=`` (padding left out of every GEMM): output rows, weight gradients and input gradients
    equal the full (B, N) position path whose output gradient is zero at padding, to 1e-12."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    X, logw, rows = _packed_case(rng, B, N, d, one_hot)
    W = dict(W_Q=rng.normal(size=(H, da, d)), W_K=rng.normal(size=(H, da, d)), W_V=rng.normal(size=(H, d, d)))
    full, cfull = L.attention_forward(X, logw, W["W_Q"], W["W_K"], W["W_V"], 0.8)
    Xp = X.reshape(B * N, d)[rows]
    packed, cpack = L.attention_forward(Xp, logw, W["W_Q"], W["W_K"], W["W_V"], 0.8, rows=rows)
    assert packed.shape == (rows.size, d)
    np.testing.assert_allclose(packed, full.reshape(B * N, d)[rows], rtol=1e-12, atol=1e-12)
    Gp = rng.normal(size=packed.shape)
    Gfull = np.zeros((B * N, d))
    Gfull[rows] = Gp
    dXf, gf = L.attention_backward(Gfull.reshape(B, N, d), cfull)
    dXp, gp = L.attention_backward(Gp, cpack)
    np.testing.assert_allclose(dXp, dXf.reshape(B * N, d)[rows], rtol=1e-12, atol=1e-12)
    for k in gf:
        np.testing.assert_allclose(gp[k], gf[k], rtol=1e-12, atol=1e-12)

    def f(p):
        return np.sum(Gp * L.attention_forward(p["X"], logw, p["W_Q"], p["W_K"], p["W_V"], 0.8, rows=rows)[0])

    if rows.size:
        check_gradient(f, dict(W, X=Xp), dict(gp, X=dXp)).assert_ok()


@settings(max_examples=25)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(2, 5), st.booleans(), st.integers(0, 2**31))
def test_queries_equal_the_full_packed_path_at_those_rows(B, N, d, one_hot, seed):
    """``queries=`` (only some rows attend; all stay keys and values): the output is the full packed
    path's at those rows and every gradient equals the full path's with ``dout`` zero elsewhere, to
    1e-12; finite differences."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    X, logw, rows = _packed_case(rng, B, N, d, one_hot)
    Xp = X.reshape(B * N, d)[rows]
    queries = np.flatnonzero(rng.random(rows.size) < 0.4)
    W = dict(W_Q=rng.normal(size=(H, da, d)), W_K=rng.normal(size=(H, da, d)), W_V=rng.normal(size=(H, d, d)))
    full, cfull = L.attention_forward(Xp, logw, *W.values(), 0.8, rows=rows)
    out, cq = L.attention_forward(Xp, logw, *W.values(), 0.8, rows=rows, queries=queries)
    assert out.shape == (queries.size, d)
    np.testing.assert_allclose(out, full[queries], rtol=1e-12, atol=1e-12)
    Gq = rng.normal(size=out.shape)
    Gfull = np.zeros_like(full)
    Gfull[queries] = Gq
    dXf, gf = L.attention_backward(Gfull, cfull)
    dXq, gq = L.attention_backward(Gq, cq)
    np.testing.assert_allclose(dXq, dXf, rtol=1e-12, atol=1e-12)
    for k in gf:
        np.testing.assert_allclose(gq[k], gf[k], rtol=1e-12, atol=1e-12)

    def f(p):
        o = L.attention_forward(p["X"], logw, p["W_Q"], p["W_K"], p["W_V"], 0.8, rows=rows, queries=queries)[0]
        return np.sum(Gq * o)

    if queries.size:
        check_gradient(f, dict(W, X=Xp), dict(gq, X=dXq)).assert_ok()


@settings(max_examples=20)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(2, 5), st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_fused_kernel_equals_the_numpy_route(B, N, d, one_hot, subset, seed):
    """``fused=True`` (per-document Numba kernel) == ``fused=False`` (padded numpy products) on the
    same packed rows and queries: output, input and weight gradients to 1e-12."""
    rng = np.random.default_rng(seed)
    H, da = 2, 3
    X, logw, rows = _packed_case(rng, B, N, d, one_hot)
    Xp = X.reshape(B * N, d)[rows]
    queries = np.flatnonzero(rng.random(rows.size) < 0.5) if subset else None
    W = (rng.normal(size=(H, da, d)), rng.normal(size=(H, da, d)), rng.normal(size=(H, d, d)))
    res = [L.attention_forward(Xp, logw, *W, 0.7, rows=rows, queries=queries, fused=f) for f in (True, False)]
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12, atol=1e-12)
    G = rng.normal(size=res[0][0].shape)
    (dX1, g1), (dX0, g0) = (L.attention_backward(G, cache) for _, cache in res)
    np.testing.assert_allclose(dX1, dX0, rtol=1e-12, atol=1e-12)
    for k in g0:
        np.testing.assert_allclose(g1[k], g0[k], rtol=1e-12, atol=1e-12)


@settings(max_examples=40)
@given(st.lists(st.floats(0.0, 1e4), min_size=0, max_size=40), st.integers(1, 6))
def test_balanced_groups_is_a_partition_within_the_lpt_bound(cost, n_groups):
    """Every document in exactly one group, at most ``n_groups`` groups, and the heaviest group
    within one document's cost of the mean load (the greedy bound: a group only grows while it is
    the lightest)."""
    from theorycheck.nn._kernels import balanced_groups

    cost = np.array(cost)
    order, gstart = balanced_groups(cost, n_groups)
    assert sorted(order.tolist()) == list(range(cost.size))
    assert gstart[0] == 0 and gstart[-1] == cost.size and np.all(np.diff(gstart) >= 0)
    assert len(gstart) - 1 == max(1, min(n_groups, cost.size))
    loads = [cost[order[a:b]].sum() for a, b in zip(gstart[:-1], gstart[1:])]
    if cost.size:
        assert max(loads) <= cost.sum() / len(loads) + cost.max() + 1e-9
