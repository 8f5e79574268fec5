"""nn/_kernels.py: the fused Numba kernels of the count path == their numpy references; the softmax
backward kernel == finite differences (check_gradient); the per-document attention kernel == a
plain loop over documents and heads, its backward == finite differences."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.diagnostics import check_gradient
from theorycheck.nn._kernels import (
    bias_softmax,
    bias_softmax_ref,
    doc_attention,
    doc_attention_backward,
    gather_softmax,
    gather_softmax_ref,
    scatter_rows,
    scatter_rows_ref,
    softmax_bwd,
    softmax_bwd_ref,
)


@settings(max_examples=40)
@given(
    st.integers(1, 12),
    st.integers(1, 5),
    st.integers(1, 30),
    st.integers(0, 2**31),
    st.sampled_from([1.0, 30.0, 1e4]),
    st.floats(0.0, 0.9),
)
def test_gather_softmax_equals_reference(V1, G, E, seed, scale, p_zero):
    """Random scores up to |S| = 1e4 (log-sum-exp must keep them finite), zero key counts, empty contexts."""
    rng = np.random.default_rng(seed)
    S = scale * rng.normal(size=(V1, V1))
    K = rng.random((G, V1)) * (rng.random((G, V1)) >= p_zero)
    K[0] = 0.0  # a context without keys: zero attention
    logK = np.full(K.shape, -np.inf)
    np.log(K, out=logK, where=K > 0)
    qtok = rng.integers(0, V1, size=E)
    ctx = rng.integers(0, G, size=E)
    A = gather_softmax(S, logK, qtok, ctx)
    R = gather_softmax_ref(S, logK, qtok, ctx)
    assert np.all(np.isfinite(A))
    np.testing.assert_allclose(A, R, rtol=1e-13, atol=1e-300)
    has_keys = K[ctx].sum(axis=1) > 0
    np.testing.assert_allclose(A.sum(axis=1), has_keys.astype(float), rtol=1e-13)
    assert np.all(A[K[ctx] == 0] == 0)


def test_gather_softmax_example():
    """One query on counts (2, 0, 1) with scores (0, 5, log 2): weights 2 : 0 : 2."""
    S = np.array([[0.0, 5.0, np.log(2.0)]] * 3)
    logK = np.array([[np.log(2.0), -np.inf, 0.0]])
    A = gather_softmax(S, logK, np.array([1]), np.array([0]))
    np.testing.assert_allclose(A, [[0.5, 0.0, 0.5]], rtol=1e-15)


@settings(max_examples=30)
@given(st.integers(1, 12), st.integers(1, 30), st.integers(0, 2**31))
def test_softmax_bwd_equals_reference_and_finite_differences(V1, E, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(E, V1))
    A = np.exp(z - z.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    dA = rng.normal(size=(E, V1))
    g = softmax_bwd(A, dA)
    np.testing.assert_allclose(g, softmax_bwd_ref(A, dA), rtol=1e-13, atol=1e-15)

    def f(zz):
        a = np.exp(zz - zz.max(axis=1, keepdims=True))
        return np.sum(dA * a / a.sum(axis=1, keepdims=True))

    check_gradient(f, z, g, seed=seed).assert_ok()


@settings(max_examples=30)
@given(
    st.integers(1, 4),
    st.integers(1, 7),
    st.integers(1, 9),
    st.integers(0, 2**31),
    st.sampled_from([1.0, 30.0, 1e4]),
    st.floats(0.0, 0.9),
)
def test_bias_softmax_equals_reference_and_softmax_rows(B, Nq, Nk, seed, scale, p_zero):
    """Position-path kernel: softmax(c S + log w) per row, scores up to 1e4, zero weights and keyless rows."""
    from theorycheck.nn import layers as L

    rng = np.random.default_rng(seed)
    S = scale * rng.normal(size=(B, Nq, Nk))
    w = rng.random((B, Nk)) * (rng.random((B, Nk)) >= p_zero)
    w[0] = 0.0 if p_zero > 0.8 else w[0]  # a document without keys: all-zero attention
    logw = L.log_weights(w)
    c = float(rng.uniform(0.1, 2.0))
    A = bias_softmax(S, logw, c)
    np.testing.assert_allclose(A, bias_softmax_ref(S, logw, c), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(A, L.softmax_rows(c * S + logw[:, None, :]), rtol=1e-13, atol=1e-300)
    assert np.all(A[w.sum(axis=1) == 0] == 0.0)
    np.testing.assert_allclose(A.sum(axis=-1)[w.sum(axis=1) > 0], 1.0, rtol=1e-14)


@settings(max_examples=30)
@given(st.integers(1, 8), st.integers(0, 40), st.integers(1, 6), st.integers(0, 2**31))
def test_scatter_rows_equals_reference_and_the_one_hot_product(n, R, k, seed):
    """``scatter_rows`` == ``np.add.at`` and, bit for bit, == ``X^T M`` of the one-hot rows ``X``
    summed in the same (increasing row) order by a sparse product."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=R)
    valid = rng.random(R) < 0.8
    M = rng.normal(size=(R, k))
    out = scatter_rows(idx, valid, M, n)
    np.testing.assert_allclose(out, scatter_rows_ref(idx, valid, M, n), rtol=1e-14, atol=1e-14)
    r = np.flatnonzero(valid)
    X = sp.csr_matrix((np.ones(r.size), (r, idx[r])), shape=(R, n))
    np.testing.assert_array_equal(out, (X.T.tocsr() @ M))


def _doc_attention_loop(P, logw, start, H, da, c, queries):
    """Reference of ``doc_attention``: per document and head, ``softmax(c Q K^T + logw) V`` in numpy."""
    from theorycheck.nn.layers import softmax_rows

    nq = H * da
    dv = (P.shape[1] - 2 * nq) // H
    qrows = np.arange(P.shape[0]) if queries is None else queries
    out = np.zeros((qrows.size, dv))
    for d in range(start.size - 1):
        keys = np.arange(start[d], start[d + 1])
        sel = np.flatnonzero((qrows >= start[d]) & (qrows < start[d + 1]))
        for h in range(H):
            Q = P[qrows[sel], h * da : (h + 1) * da]
            K = P[keys, nq + h * da : nq + (h + 1) * da]
            V = P[keys, 2 * nq + h * dv : 2 * nq + (h + 1) * dv]
            out[sel] += softmax_rows(c * Q @ K.T + logw[keys]) @ V
    return out


@settings(max_examples=30)
@given(
    st.lists(st.integers(1, 7), min_size=1, max_size=4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(0, 2**31),
    st.sampled_from([1.0, 100.0]),
    st.booleans(),
)
def test_doc_attention_equals_a_loop_over_documents_and_finite_differences(sizes, H, da, dv, seed, scale, subset):
    """Documents of different lengths, dead keys (log-weight -inf; a document may have none alive),
    scores up to ~1e4, all rows or a subset as queries: == the per-document numpy loop to 1e-12;
    the backward == finite differences of ``sum(G * out)`` in ``P``."""
    rng = np.random.default_rng(seed)
    start = np.concatenate([[0], np.cumsum(sizes)])
    R = int(start[-1])
    P = scale * rng.normal(size=(R, H * (2 * da + dv)))
    w = rng.random(R) * (rng.random(R) < 0.8)
    logw = np.full(R, -np.inf)
    np.log(w, out=logw, where=w > 0)
    queries = np.flatnonzero(rng.random(R) < 0.5) if subset else None
    c = float(rng.uniform(0.1, 1.0))
    out, Aflat, idx = doc_attention(P, logw, start, H, da, c, queries=queries)
    np.testing.assert_allclose(out, _doc_attention_loop(P, logw, start, H, da, c, queries), rtol=1e-12, atol=1e-12)
    maps = idx.maps(Aflat)
    assert np.all((maps >= 0) & (maps <= 1))
    G = rng.normal(size=out.shape)
    dP = doc_attention_backward(P, Aflat, idx, G, da, c)
    if scale == 1.0:

        def f(p):
            return float(np.sum(G * doc_attention(p, logw, start, H, da, c, queries=queries)[0]))

        check_gradient(f, P, dP, seed=seed).assert_ok()


def test_doc_attention_example():
    """One document of two rows, one head, d_a = d_v = 1: scores 0 and log 3 -> weights 1/4, 3/4."""
    P = np.array([[1.0, 0.0, 10.0], [1.0, np.log(3.0), 20.0]])  # [Q | K | V]
    out, Aflat, _ = doc_attention(P, np.zeros(2), np.array([0, 2]), 1, 1, 1.0)
    np.testing.assert_allclose(out[:, 0], [17.5, 17.5], rtol=1e-15)
    np.testing.assert_allclose(Aflat, [0.25, 0.75, 0.25, 0.75], rtol=1e-15)


@settings(max_examples=20)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.integers(1, 3), st.integers(1, 4), st.integers(0, 2**31))
def test_doc_attention_shared_values_keeps_heads_apart(sizes, H, dv, seed):
    """``shared_values``: one value block for every head, heads side by side: head ``h``'s block ==
    the summed kernel run with only head ``h`` (its own Q, K and that V); backward == finite differences."""
    rng = np.random.default_rng(seed)
    da = 2
    start = np.concatenate([[0], np.cumsum(sizes)])
    R = int(start[-1])
    QK, V = rng.normal(size=(R, 2 * H * da)), rng.normal(size=(R, dv))
    logw = np.log(rng.integers(1, 3, size=R).astype(float))
    queries = np.flatnonzero(rng.random(R) < 0.6)
    P = np.concatenate([QK, V], axis=1)
    out, Aflat, idx = doc_attention(P, logw, start, H, da, 0.9, queries=queries, shared_values=True)
    assert out.shape == (queries.size, H * dv)
    for h in range(H):
        Ph = np.concatenate([QK[:, h * da : (h + 1) * da], QK[:, (H + h) * da : (H + h + 1) * da], V], axis=1)
        ref = doc_attention(Ph, logw, start, 1, da, 0.9, queries=queries)[0]
        np.testing.assert_allclose(out[:, h * dv : (h + 1) * dv], ref, rtol=1e-12, atol=1e-12)
    G = rng.normal(size=out.shape)
    dP = doc_attention_backward(P, Aflat, idx, G, da, 0.9)

    def f(p):
        return float(np.sum(G * doc_attention(p, logw, start, H, da, 0.9, queries=queries, shared_values=True)[0]))

    check_gradient(f, P, dP, seed=seed).assert_ok()
