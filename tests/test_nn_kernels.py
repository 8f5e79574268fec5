"""nn/_kernels.py: the fused Numba kernels of the count path == their numpy references; the softmax
backward kernel == finite differences (check_gradient)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.diagnostics import check_gradient
from theorycheck.nn._kernels import (
    bias_softmax,
    bias_softmax_ref,
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
