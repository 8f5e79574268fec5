"""nn/_kernels.py: the fused Numba kernels of the count path == their numpy references; the softmax
backward kernel == finite differences (check_gradient); the per-document attention kernel == a
plain loop over documents and heads, its backward == finite differences."""

import re

import numpy as np
import pytest
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


# ---------------------------------------------------------------------------- row-parallel products
def _rounding_bound(A, B):
    """Elementwise bound ``1e-13 |A| |B|`` on the rounding difference of two orders of summation
    (the reduction length is at most 400 here: 400 eps ~ 9e-14)."""
    return 1e-13 * (np.abs(A) @ np.abs(B))


def _bits(M):
    return np.ascontiguousarray(M).view(np.int64)


def _at_numba_threads(n, fn, *args):
    """``fn(*args)`` with Numba at ``n`` threads (the previous count restored)."""
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        return fn(*args)
    finally:
        numba.set_num_threads(old)


def _two_numba_threads() -> bool:
    import numba

    return numba.config.NUMBA_NUM_THREADS >= 2


def _in_a_two_thread_process(call: str):
    """Run ``call`` (a function of this module, as source) in a fresh process whose Numba pool has 2
    threads (under ``pytest -n`` the pool here has 1 and cannot grow); its assertions fail the test."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"}
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_nn_kernels as t; t.{call}"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


def _check_matmuls_thread_invariant(A, B, Bt_view):
    """``matmul_rows(A, Bt_view)`` and ``matmul_tn(A, B)``: the same bits at 1 and 2 Numba threads."""
    from theorycheck.nn._dense_kernels import matmul_rows, matmul_tn

    for fn, args in ((matmul_rows, (A, Bt_view)), (matmul_tn, (A, B))):
        one = _at_numba_threads(1, fn, *args)
        two = _at_numba_threads(2, fn, *args)
        np.testing.assert_array_equal(_bits(one), _bits(two))


@settings(max_examples=30)
@given(
    st.integers(0, 400),
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 2**31),
    st.booleans(),
)
def test_matmul_rows_and_tn_equal_references_and_are_thread_invariant(R, k, n, seed, transposed):
    """``matmul_rows(A, B)`` == ``A @ B`` and ``matmul_tn(A, C)`` == ``A^T C`` to rounding
    (``1e-13 |A||B|`` elementwise), for ``B`` C-contiguous or a transposed (F-contiguous) view, any
    ``R`` (zero, one block below MIN_BLOCK_ROWS = 128, two or more above) and zero-size ``k``, ``n``; the
    same bits on 1 and 2 Numba threads."""
    from theorycheck.nn._dense_kernels import matmul_rows, matmul_rows_ref, matmul_tn, matmul_tn_ref

    rng = np.random.default_rng(seed)
    A = rng.normal(size=(R, k))
    B = rng.normal(size=(n, k)).T if transposed else rng.normal(size=(k, n))
    C = rng.normal(size=(R, n))
    out = matmul_rows(A, B)
    assert out.shape == (R, n) and out.dtype == np.float64
    assert np.all(np.abs(out - matmul_rows_ref(A, B)) <= _rounding_bound(A, B))
    out = matmul_tn(A, C)
    assert out.shape == (k, n) and out.dtype == np.float64
    assert np.all(np.abs(out - matmul_tn_ref(A, C)) <= _rounding_bound(A.T, C))
    if _two_numba_threads():
        _check_matmuls_thread_invariant(A, C, B)


def _check_r300(seed: int = 0):
    """R = 300 rows = two blocks of 150 (:func:`row_blocks`): == the references; every row block of
    ``matmul_rows`` is the same bits as the one-block kernel on that block alone; ``matmul_tn`` is
    the same bits as the per-block products added in block order; at 1 and 2 Numba threads (when
    the pool has 2)."""
    from theorycheck.nn import _dense_kernels as K
    from theorycheck.nn._dense_kernels import matmul_rows, matmul_rows_ref, matmul_tn, matmul_tn_ref, row_blocks

    assert row_blocks(300).tolist() == [0, 150, 300]
    assert row_blocks(127).tolist() == [0, 127] and row_blocks(1100).tolist() == [0, 183, 366, 550, 733, 916, 1100]
    rng = np.random.default_rng(seed)
    A, B, C = rng.normal(size=(300, 37)), rng.normal(size=(23, 37)).T, rng.normal(size=(300, 29))
    assert B.flags.f_contiguous and not B.flags.c_contiguous
    out = matmul_rows(A, B)
    assert np.all(np.abs(out - matmul_rows_ref(A, B)) <= _rounding_bound(A, B))
    blocks = [(0, 150), (150, 300)]
    one = np.array([0, 150], dtype=np.int64)  # a single block of 150 rows
    for r0, r1 in blocks:
        alone = np.empty((150, 23))
        K._matmul_rows(A[r0:r1].copy(), B, one, alone)
        np.testing.assert_array_equal(_bits(out[r0:r1]), _bits(alone))
    tn = matmul_tn(A, C)
    assert np.all(np.abs(tn - matmul_tn_ref(A, C)) <= _rounding_bound(A.T, C))
    summed = np.zeros((37, 29))
    for r0, r1 in blocks:
        part = np.empty((37, 29))
        K._matmul_tn(A[r0:r1].copy(), C[r0:r1].copy(), one, part)
        summed += part
    np.testing.assert_array_equal(_bits(tn), _bits(summed))
    if _two_numba_threads():
        _check_matmuls_thread_invariant(A, C, B)


def test_matmul_r300_blocks_fixed_and_thread_invariant():
    _check_r300()
    if not _two_numba_threads():
        _in_a_two_thread_process("_check_r300()")


@pytest.mark.parametrize("R, k, n", [(0, 3, 4), (5, 0, 4), (5, 3, 0), (0, 0, 0), (0, 3, 0)])
def test_matmul_zero_size_dimensions(R, k, n):
    """Empty products: the right shapes, zeros where the reduction is empty."""
    from theorycheck.nn._dense_kernels import matmul_rows, matmul_tn

    A, B, C = np.ones((R, k)), np.ones((k, n)), np.ones((R, n))
    out = matmul_rows(A, B)
    assert out.shape == (R, n) and np.all(out == float(k))
    out = matmul_rows(A, np.ones((n, k)).T)
    assert out.shape == (R, n) and np.all(out == float(k))
    out = matmul_tn(A, C)
    assert out.shape == (k, n) and np.all(out == float(R))


@pytest.mark.parametrize(
    "fn, a, b",
    [
        ("matmul_rows", (3, 4), (5, 2)),
        ("matmul_rows", (4,), (4, 2)),
        ("matmul_rows", (3, 4), (4, 2, 1)),
        ("matmul_tn", (3, 4), (5, 2)),
        ("matmul_tn", (3,), (3, 2)),
        ("matmul_tn", (3, 4), (3, 2, 2)),
    ],
)
def test_matmul_wrong_shapes_name_them(fn, a, b):
    from theorycheck.nn import _dense_kernels

    with pytest.raises(ValueError, match=rf"{fn} needs .*got {re.escape(str(a))} and {re.escape(str(b))}"):
        getattr(_dense_kernels, fn)(np.ones(a), np.ones(b))


def _position_path_loss_and_grads(count_based: str):
    """Loss and gradients of the ``deep-4x4`` preset on one sampled batch, in the batch form of
    ``count_based`` (``"auto"``: merged tokens; ``"never"``: one row per position), at 1 and 2 Numba
    threads; also the largest row count ``matmul_rows`` saw (the kernel is on the path)."""
    import theorycheck.nn.layers as L
    from theorycheck.nn import ModelConfig, Transformer, make_batch, preset
    from theorycheck.sampling import mask_documents, sample_documents

    cfg = preset("deep-4x4")
    mc = ModelConfig.from_dict({**cfg.model.to_dict(), "count_based": count_based})
    tm, mk = cfg.data.topic_model(), cfg.data.masking()
    rng = np.random.default_rng(0)
    mb = mask_documents(sample_documents(tm, cfg.batch_size, cfg.data.N, rng=rng), tm, mk, rng=rng)
    batch = make_batch(mc, mb.inputs, mb.selected, mb.targets, average=cfg.data.average)
    model = Transformer(mc, seed=0)
    rows = []
    real = L.matmul_rows

    def spy(A, B):
        rows.append(np.shape(A)[0])
        return real(A, B)

    def run():
        model.zero_grad()
        loss = model.loss_and_grad(batch)
        return loss, {n: model.grad(n).copy() for n in model.trainable_names()}

    L.matmul_rows = spy
    try:
        return _at_numba_threads(1, run), _at_numba_threads(2, run), max(rows, default=0)
    finally:
        L.matmul_rows = real


def _check_position_path(count_based: str):
    (l1, g1), (l2, g2), rows = _position_path_loss_and_grads(count_based)
    assert rows > 128, rows  # several row blocks of matmul_rows
    assert np.isfinite(l1) and np.float64(l1).tobytes() == np.float64(l2).tobytes(), (l1, l2)
    assert g1.keys() == g2.keys() and {"W_K", "W_Q", "W_V"} <= {n.rsplit(".", 1)[-1] for n in g1}
    for name in g1:
        assert np.any(g1[name] != 0), name
        np.testing.assert_array_equal(_bits(g1[name]), _bits(g2[name]), err_msg=name)


@pytest.mark.parametrize("count_based", ["auto", "never"])
def test_deep_preset_loss_and_gradients_bitwise_on_1_and_2_numba_threads(count_based):
    """``deep-4x4`` (4 layers x 4 heads, residual + layer norm) on one batch of 16 documents, merged
    tokens (as trained) and one row per position: loss and every gradient the same bits at 1 and 2
    Numba threads (in a 2-thread subprocess when this process's pool has 1)."""
    if _two_numba_threads():
        _check_position_path(count_based)
    else:
        _in_a_two_thread_process(f"_check_position_path({count_based!r})")


@settings(max_examples=30)
@given(st.integers(0, 600), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 2**31))
def test_matmul_rows_tn_is_both_products_bitwise(R, k, n, m, seed):
    """``matmul_rows_tn(A, B, C)`` == ``(matmul_rows(A, B), matmul_tn(A, C))`` bit for bit: the same
    BLAS calls on the same row blocks, in one parallel pass."""
    from theorycheck.nn._dense_kernels import matmul_rows, matmul_rows_tn, matmul_tn

    rng = np.random.default_rng(seed)
    A, B, C = rng.normal(size=(R, k)), rng.normal(size=(k, n)), rng.normal(size=(R, m))
    out, out_tn = matmul_rows_tn(A, B, C)
    assert out.shape == (R, n) and out_tn.shape == (k, m)
    np.testing.assert_array_equal(_bits(out), _bits(matmul_rows(A, B)))
    np.testing.assert_array_equal(_bits(out_tn), _bits(matmul_tn(A, C)))


def test_matmul_rows_tn_wrong_shapes_name_them():
    from theorycheck.nn._dense_kernels import matmul_rows_tn

    with pytest.raises(ValueError, match=r"matmul_rows_tn needs .*got \(3, 4\), \(5, 2\) and \(3, 1\)"):
        matmul_rows_tn(np.ones((3, 4)), np.ones((5, 2)), np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"got \(3, 4\), \(4, 2\) and \(2, 1\)"):
        matmul_rows_tn(np.ones((3, 4)), np.ones((4, 2)), np.ones((2, 1)))
