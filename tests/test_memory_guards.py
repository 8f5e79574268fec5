"""Memory guards: every dense constructor/evaluator of population, sampling and Monte Carlo refuses
an allocation above the limit with a ValueError (never a MemoryError), before any work, and still
works below it.

Sizes up to T = 1e7 topics (v up to 100) are drawn by hypothesis; the limit is 1e8 bytes, passed as
``max_bytes=`` or through ``$THEORYCHECK_MAX_BYTES``. Inputs that would themselves be V1 x V1
(scores, value matrices) are replaced by small stand-ins: the guard must fire before the inputs'
shapes are looked at, or the test uses a model whose inputs are small and whose *work arrays* are big.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck._memory import MAX_BYTES_ENV
from theorycheck.population import (
    attention_loss,
    attention_loss_grad,
    embedding_loss,
    embedding_loss_grad,
    expected_pp,
    moments,
    value_loss_grad,
)
from theorycheck.sampling import mask_documents, sample_documents, token_counts
from theorycheck.sampling.montecarlo import mc_attention_loss

LIMIT = 10**8


def _dense_bytes(tm):
    return 8 * tm.V1 * tm.V1


big_models = st.builds(
    lambda T, v: tc.TopicModel(T=T, v=v, tau=1),
    T=st.integers(1, 10**7),
    v=st.integers(1, 100),
).filter(lambda tm: _dense_bytes(tm) > LIMIT)


@settings(max_examples=25)
@given(big_models, st.sampled_from(["arg", "env"]))
def test_moments_and_expected_pp_refuse_above_the_limit(tm, how):
    kw = {"max_bytes": LIMIT} if how == "arg" else {}
    with pytest.MonkeyPatch.context() as mp:
        if how == "env":
            mp.setenv(MAX_BYTES_ENV, str(LIMIT))
        with pytest.raises(ValueError, match=r"moments: Sigma and C: a dense 2 x .* array needs .* BlockValueMatrix"):
            moments(tm, tc.Masking(), **kw)
        with pytest.raises(ValueError, match="expected_pp: a dense .* above the memory limit"):
            expected_pp(tm, **kw)


@settings(max_examples=25)
@given(st.integers(2, 10**7), st.integers(1, 100), st.integers(0, 2))
def test_sampling_refuses_huge_batches(n_docs, N, extra):
    tm = tc.TopicModel(T=3, v=2, tau=1)
    N = N * 10 ** (2 + 2 * extra)  # document lengths up to 1e8
    need = n_docs * (5 * N + tm.T) * 8
    if need <= LIMIT:
        return
    with pytest.raises(ValueError, match="sample_documents: .* needs .* fewer documents"):
        sample_documents(tm, n_docs, N, seed=0, max_bytes=LIMIT)


@settings(max_examples=20)
@given(st.integers(10**4, 10**9), st.integers(2, 10**12))
def test_mc_attention_loss_refuses_huge_N_or_n_docs(N, n_docs):
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking()
    Z = np.zeros((tm.V1, tm.V1))
    rows = min(4096, n_docs)
    if max(4 * n_docs * 8, rows * (9 * N + tm.T) * 8) <= LIMIT:
        return
    with pytest.raises(ValueError, match="mc_attention_loss: .* attention_loss"):
        mc_attention_loss(Z, np.eye(tm.V1), tm, mk, N=N, n_docs=n_docs, seed=0, max_bytes=LIMIT)


def test_mc_attention_loss_N_1e9_is_a_value_error_not_a_memory_error():
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking()
    with pytest.raises(ValueError, match="one batch of documents"):
        mc_attention_loss(np.zeros((7, 7)), np.eye(7), tm, mk, N=10**9, n_docs=100, seed=0)


@pytest.mark.parametrize("v", [1, 10, 100])
def test_attention_evaluators_refuse_above_the_limit(v):
    """V1 x V1 inputs of a few MB, work arrays (10 dense V1 x V1 per set, group tables) above 1 MB."""
    tm, mk = tc.TopicModel(T=max(2, 400 // v), v=v, tau=1), tc.Masking()
    S = np.zeros((tm.V1, tm.V1))
    W = np.eye(tm.V1)
    small = 10 * _dense_bytes(tm) - 1
    with pytest.raises(ValueError, match="attention_loss_grad: a dense 10 x .* alpha_beta_loss"):
        attention_loss_grad(S, W, tm, mk, max_bytes=small)
    with pytest.raises(ValueError, match=r"attention_loss\(loss='ce'\)"):
        attention_loss(S, W, tm, mk, loss="ce", max_bytes=small)
    structured = tm.V1 * (tm.T + 1) ** 2 <= 40_000_000  # else the dense path (both guarded)
    msg = r"structured squared loss\): group tables" if structured else r"attention_loss \(dense path\): a dense 10 x"
    with pytest.raises(ValueError, match=msg):
        attention_loss(S, W, tm, mk, max_bytes=2 * _dense_bytes(tm))
    with pytest.raises(ValueError, match="sampled topic sets"):
        attention_loss(S, W, tm, mk, n_sets=10**9, seed=0, max_bytes=10**8)


def test_value_and_embedding_gradients_refuse_above_the_limit(tm_small, mk_spec):
    W = np.eye(tm_small.V1)
    lim = 3 * _dense_bytes(tm_small)
    with pytest.raises(ValueError, match="value_loss_grad: dense gradient.*BlockValueMatrix"):
        value_loss_grad(W, tm_small, mk_spec, max_bytes=lim)
    W_E = np.eye(tm_small.V1)[:2]
    with pytest.raises(ValueError, match="embedding_loss: effective map M"):
        embedding_loss(W_E, tm_small, mk_spec, max_bytes=_dense_bytes(tm_small) - 1)
    with pytest.raises(ValueError, match="embedding_loss: effective map M .*4 more"):
        embedding_loss_grad(W_E, tm_small, mk_spec, max_bytes=lim)


def test_masking_and_counts_refuse_above_the_limit(tm_small, mk_spec):
    docs = sample_documents(tm_small, 50, 20, seed=1)
    with pytest.raises(ValueError, match="mask_documents"):
        mask_documents(docs, tm_small, mk_spec, seed=2, max_bytes=4 * 50 * 20 * 8 - 1)
    with pytest.raises(ValueError, match="token_counts"):
        token_counts(docs.tokens, tm_small.V1, max_bytes=2 * 50 * tm_small.V1 * 8 - 1)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1G"])
def test_bad_max_bytes_is_refused_before_any_work(bad, tm_small, mk_spec):
    exc = TypeError if isinstance(bad, str) else ValueError
    Z = np.zeros((tm_small.V1, tm_small.V1))
    for call in (
        lambda: moments(tm_small, mk_spec, max_bytes=bad),
        lambda: attention_loss(Z, Z, tm_small, mk_spec, max_bytes=bad),
        lambda: sample_documents(tm_small, 3, 5, seed=0, max_bytes=bad),
        lambda: mc_attention_loss(Z, Z, tm_small, mk_spec, N=5, n_docs=3, seed=0, max_bytes=bad),
    ):
        with pytest.raises(exc, match="max_bytes"):
            call()


@settings(max_examples=15)
@given(st.integers(1, 6), st.integers(1, 4))
def test_everything_still_works_below_the_limit(T, v):
    """Small models under the same 1e8-byte limit: results equal those without a limit."""
    tm, mk = tc.TopicModel(T=T, v=v, tau=1), tc.Masking()
    rng = np.random.default_rng(T * 10 + v)
    S, W = rng.normal(size=(tm.V1, tm.V1)), rng.normal(size=(tm.V1, tm.V1))
    kw = dict(max_bytes=LIMIT)
    for a, b in zip(moments(tm, mk, **kw), moments(tm, mk)):
        np.testing.assert_array_equal(a, b)
    assert attention_loss(S, W, tm, mk, **kw) == attention_loss(S, W, tm, mk)
    assert attention_loss(S, W, tm, mk, loss="ce", **kw) == attention_loss(S, W, tm, mk, loss="ce")
    g1, g2 = attention_loss_grad(S, W, tm, mk, **kw), attention_loss_grad(S, W, tm, mk)
    assert g1.loss == g2.loss and np.array_equal(g1.dS, g2.dS)
    assert value_loss_grad(W, tm, mk, **kw)[0] == value_loss_grad(W, tm, mk)[0]
    docs = sample_documents(tm, 4, 6, seed=3, **kw)
    assert np.array_equal(docs.tokens, sample_documents(tm, 4, 6, seed=3).tokens)
    est = mc_attention_loss(S, W, tm, mk, N=6, n_docs=4, seed=3, **kw)
    assert est == mc_attention_loss(S, W, tm, mk, N=6, n_docs=4, seed=3)
