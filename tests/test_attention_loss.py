"""attention_loss: structured Numba kernel == dense stacked-GEMM path == plain numpy reference;
uniform attention == value_loss; gradients == finite differences; sampled topic sets; bad input."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.diagnostics import check_gradient
from theorycheck.population import (
    AttentionLossGrad,
    SetSampledLoss,
    attention_loss,
    attention_loss_grad,
    topic_sets,
    value_loss,
)
from theorycheck.population._attention_dense import _dense_sets
from theorycheck.population._attention_loss import _attention_loss_ref
from theorycheck.strategies import maskings, topic_models


def _draw(tm, seed, scale_S=2.0, with_b=True):
    rng = np.random.default_rng(seed)
    S = rng.normal(scale=scale_S, size=(tm.V1, tm.V1))
    W = rng.normal(size=(tm.V1, tm.V1))
    b = rng.normal(size=tm.V1) if with_b else None
    return S, W, b


@settings(max_examples=25)
@given(
    topic_models(max_T=5, max_v=3),
    maskings(),
    st.integers(0, 2**31),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0.0, 1.0, 5.0]),
)
def test_kernel_equals_reference_and_dense(tm, mk, seed, with_b, mask_keys, scale):
    S, W, b = _draw(tm, seed, scale_S=scale, with_b=with_b)
    got = attention_loss(S, W, tm, mk, b, mask_keys=mask_keys)
    ref = _attention_loss_ref(S, W, tm, mk, b, mask_keys=mask_keys)
    dense = _dense_sets(S, W, b, topic_sets(tm), tm, mk, mask_keys)[0].mean()
    tol = 1e-11 * (1.0 + abs(ref))
    assert abs(got - ref) <= tol, (got, ref)
    assert abs(dense - ref) <= tol, (dense, ref)


@settings(max_examples=15)
@given(topic_models(max_T=4, max_v=3), maskings(), st.integers(0, 2**31), st.booleans())
def test_cross_entropy_equals_reference(tm, mk, seed, mask_keys):
    S, W, b = _draw(tm, seed)
    got = attention_loss(S, W, tm, mk, b, mask_keys=mask_keys, loss="ce")
    ref = _attention_loss_ref(S, W, tm, mk, b, mask_keys=mask_keys, loss="ce")
    assert abs(got - ref) <= 1e-12 * (1.0 + abs(ref))


@settings(max_examples=20)
@given(topic_models(max_T=6, max_v=4), maskings(), st.integers(0, 2**31), st.booleans())
def test_uniform_attention_equals_value_loss(tm, mk, seed, with_b):
    """S = 0 (and any S constant along rows) is uniform attention: the stage-1 loss of SPEC §4.0."""
    _, W, b = _draw(tm, seed, with_b=with_b)
    c = np.random.default_rng(seed).normal(size=(tm.V1, 1))
    ref = value_loss(W, tm, mk, b=b)
    assert attention_loss(np.zeros((tm.V1, tm.V1)), W, tm, mk, b) == pytest.approx(ref, rel=1e-12, abs=1e-12)
    assert attention_loss(np.repeat(c, tm.V1, axis=1), W, tm, mk, b) == pytest.approx(ref, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("mask_keys", [False, True])
def test_huge_scores_finite_and_match_reference(mask_keys):
    tm, mk = tc.TopicModel(T=4, v=3, tau=2), tc.Masking()
    rng = np.random.default_rng(1)
    S = rng.choice([-1e4, 0.0, 1e4], size=(tm.V1, tm.V1)) + rng.normal(size=(tm.V1, tm.V1))
    W = rng.normal(size=(tm.V1, tm.V1))
    got = attention_loss(S, W, tm, mk, mask_keys=mask_keys)
    assert math.isfinite(got)
    assert got == pytest.approx(_attention_loss_ref(S, W, tm, mk, mask_keys=mask_keys), rel=1e-11)
    L, dS, dW, db = attention_loss_grad(S, W, tm, mk, mask_keys=mask_keys)
    assert all(np.all(np.isfinite(x)) for x in (dS, dW, db))


@settings(max_examples=15)
@given(
    topic_models(max_T=4, max_v=3), maskings(), st.integers(0, 2**31), st.booleans(), st.sampled_from(["squared", "ce"])
)
def test_gradient_matches_finite_differences(tm, mk, seed, mask_keys, loss):
    """Each of dS, dW, db separately against directional central differences and the Taylor slope
    of the (independently coded) per-set dense loss."""
    S, W, b = _draw(tm, seed, scale_S=1.0)
    res = attention_loss_grad(S, W, tm, mk, b, mask_keys=mask_keys, loss=loss)
    assert isinstance(res, AttentionLossGrad)
    x = dict(S=S, W=W, b=b)

    def f_of(name):
        def f(value):
            args = dict(x, **{name: value})
            return _dense_sets(args["S"], args["W"], args["b"], topic_sets(tm), tm, mk, mask_keys, loss=loss)[0].mean()

        return f

    for name in ("S", "W", "b"):
        check_gradient(f_of(name), x[name], getattr(res, "d" + name), seed=seed, rtol=1e-6, atol=1e-8).assert_ok()


def test_gradient_of_structured_loss_by_taylor_slope():
    """The gradient also matches the (independent) structured kernel: Taylor remainder falls like h^2."""
    tm, mk = tc.TopicModel(T=5, v=3, tau=2), tc.Masking()
    S, W, b = _draw(tm, 3)
    res = attention_loss_grad(S, W, tm, mk, b)

    def f(x):
        return attention_loss(x["S"], x["W"], tm, mk, b)

    chk = check_gradient(f, dict(S=S, W=W), dict(S=res.dS, W=res.dW), h=1e-4, rtol=1e-7, seed=4)
    chk.assert_ok()
    assert all(1.8 < s < 2.2 for s in chk.slopes), chk.message


def test_old_loss_name_is_rejected(tm_small, mk_spec):
    S, W, b = _draw(tm_small, 2)
    with pytest.raises(ValueError, match="loss"):
        attention_loss(S, W, tm_small, mk_spec, b, loss="sq")


def test_sampled_sets_unbiased_within_stderr():
    tm, mk = tc.TopicModel(T=9, v=2, tau=3), tc.Masking()
    S, W, b = _draw(tm, 7)
    exact = attention_loss(S, W, tm, mk, b)
    est = attention_loss(S, W, tm, mk, b, n_sets=400, seed=5)
    assert isinstance(est, SetSampledLoss) and est.n_sets == 400
    assert abs(est.mean - exact) <= 4 * est.stderr
    assert est == attention_loss(S, W, tm, mk, b, n_sets=400, seed=5)  # reproducible
    L, dS, dW, db = attention_loss_grad(S, W, tm, mk, b, n_sets=50, seed=5)
    assert L.mean == pytest.approx(attention_loss(S, W, tm, mk, b, n_sets=50, seed=5).mean, rel=1e-12)


def test_mask_keys_changes_the_context():
    """With mask_keys the context is p_S: for a pure [MASK]-query masking this is W p_S, i.e. the
    loss of uniform attention over the document words only."""
    tm, mk = tc.TopicModel(T=4, v=2, tau=2), tc.Masking(p_m=0.5, p_c=0.0, p_r=0.0)
    W = np.random.default_rng(0).normal(size=(tm.V1, tm.V1))
    direct = 0.0
    for St in topic_sets(tm):
        p = tc.population.topic_density(tm, St)
        o = W @ p
        direct += o @ o - 2 * p @ o + 1
    direct /= len(topic_sets(tm))
    assert attention_loss(np.zeros((tm.V1, tm.V1)), W, tm, mk, mask_keys=True) == pytest.approx(direct, rel=1e-12)


def _args(tm):
    return dict(S=np.zeros((tm.V1, tm.V1)), W=np.eye(tm.V1), tm=tm, mk=tc.Masking())


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(S=np.zeros((3, 3))), ValueError, "S must have shape"),
        (dict(W=np.zeros((7, 6))), ValueError, "W must have shape"),
        (dict(S=np.full((7, 7), np.inf)), ValueError, "S must contain only finite"),
        (dict(b=np.zeros(2)), ValueError, "b must have shape"),
        (dict(mk=tc.Masking(p_m=0.0)), ValueError, "p_m"),
        (dict(loss="mse"), ValueError, "loss must be one of"),
        (dict(max_bytes=-1.0), ValueError, "max_bytes must be a positive"),
        (dict(n_sets=1), ValueError, "n_sets must lie in"),
        (dict(seed=3), ValueError, "only used with n_sets"),
        (dict(mask_keys="yes"), TypeError, "mask_keys"),
        (dict(tm="tm"), TypeError, "tm must be a TopicModel"),
    ],
)
def test_rejects_bad_input(kwargs, exc, match):
    tm = tc.TopicModel(T=3, v=2, tau=1)
    args = _args(tm)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        attention_loss(**args)
    with pytest.raises(exc, match=match):
        attention_loss_grad(**args)


def test_too_many_sets_asks_for_n_sets():
    tm = tc.TopicModel(T=40, v=1, tau=20)
    with pytest.raises(ValueError, match="n_sets"):
        attention_loss(np.zeros((tm.V1, tm.V1)), np.eye(tm.V1), tm, tc.Masking())


def test_dirichlet_prior_rejected():
    tm = tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.1)
    with pytest.raises(ValueError, match="uniform-tau"):
        attention_loss(np.zeros((7, 7)), np.eye(7), tm, tc.Masking())


def test_parallel_and_serial_kernels_agree():
    from theorycheck.population._attention_dense import _context
    from theorycheck.population._attention_kernels import (
        _TABLES,
        _precompute,
        _structured_sq_nb,
        _structured_sq_serial_nb,
    )

    tm, mk = tc.TopicModel(T=7, v=3, tau=3), tc.Masking()
    S, W, b = _draw(tm, 9)
    pc = dict(_precompute(S, W, b, tm.T, tm.v), fast=True)
    args = (
        topic_sets(tm),
        tm.token_topics(),
        tuple(pc[k] for k in _TABLES),
        *_context(tm, mk, False),
        mk.p_mask,
        mk.p_c,
        mk.p_r,
        tm.T,
        tm.v,
    )
    par, ser = _structured_sq_nb(*args), _structured_sq_serial_nb(*args)
    np.testing.assert_allclose(par, ser, rtol=1e-13)  # same terms, chunked summation order
    assert par.mean() == pytest.approx(_attention_loss_ref(S, W, tm, mk, b), rel=1e-12)


def test_dense_fallback_for_large_group_tables(monkeypatch):
    import theorycheck.population._attention_loss as al

    tm, mk = tc.TopicModel(T=5, v=2, tau=2), tc.Masking()
    S, W, b = _draw(tm, 12)
    structured = attention_loss(S, W, tm, mk, b)
    monkeypatch.setattr(al, "STRUCTURED_MAX_ENTRIES", 10)
    assert attention_loss(S, W, tm, mk, b) == pytest.approx(structured, rel=1e-12)


def _check_group_quad(T, v, seed):
    """Numba group quadratic forms == numpy reference within the rounding bound of their sums
    (``4 eps V1 (|E| |M| |E|)`` per entry), exactly symmetric, parallel == serial bit for bit."""
    from theorycheck.population._attention_kernels import _group_quad_nb, _group_quad_ref, _group_quad_serial_nb

    V1 = T * v + 1
    rng = np.random.default_rng(seed)
    E = rng.random((V1, V1))
    A = rng.normal(size=(V1, V1))
    M = A.T @ A
    ref = _group_quad_ref(E, M, T, v)
    Q = _group_quad_nb(E, M, T, v)
    bound = 4 * np.finfo(float).eps * V1 * _group_quad_ref(E, np.abs(M), T, v)
    assert np.all(np.abs(Q - ref) <= bound)
    np.testing.assert_array_equal(Q, Q.transpose(0, 2, 1))
    np.testing.assert_array_equal(Q, _group_quad_serial_nb(E, M, T, v))


@settings(max_examples=10)
@given(topic_models(max_T=6, max_v=4), st.integers(0, 2**31))
def test_group_quadratic_forms_kernel_equals_reference(tm, seed):
    _check_group_quad(tm.T, tm.v, seed)


@pytest.mark.parametrize("T,v", [(1, 1), (52, 10), (3, 200)])
def test_group_quadratic_forms_across_column_blocks(T, v):
    """Sizes beyond one column block of the kernel (V1 > 512) and single-token groups."""
    _check_group_quad(T, v, 7)


def _group_quad_plain(E, M, T, v):
    """``Q`` by the kernel's summation order written plainly: per query ``x`` and group ``k`` a zero
    vector plus one axpy ``u += E[x, i] M[i, lo:]`` per row ``i`` of the group, then ``u *= E[x, lo:]``
    and left-to-right group sums; IEEE operations one at a time (numpy ufuncs, Python floats)."""
    V1 = E.shape[0]
    Q = np.full((V1, T + 1, T + 1), np.nan)
    for x in range(V1):
        for k in range(T + 1):
            lo = 0 if k == 0 else 1 + (k - 1) * v
            hi = 1 if k == 0 else lo + v
            u = np.zeros(V1 - lo)
            for i in range(lo, hi):
                u = u + E[x, i] * M[i, lo:]
            u = u * E[x, lo:]
            groups = [[0]] + [list(range(1 + t * v, 1 + (t + 1) * v)) for t in range(T)]
            for l in range(k, T + 1):
                acc = 0.0
                for j in groups[l]:
                    acc += float(u[j - lo])
                Q[x, k, l] = Q[x, l, k] = acc
    return Q


@pytest.mark.parametrize("T,v", [(3, 1), (2, 4), (3, 5), (2, 7), (4, 2), (1, 9), (2, 12)])
def test_group_quad_register_blocking_keeps_the_bits(T, v):
    """The kernel's blocking (four rows of ``M`` per pass over ``u``, two query rows per load of
    ``M``, odd tiles, remainders of 1-3 rows) changes no bit: it equals the plain axpy order."""
    from theorycheck.population._attention_kernels import _group_quad_nb, _group_quad_serial_nb

    V1 = T * v + 1
    rng = np.random.default_rng(T * 100 + v)
    E = rng.random((V1, V1))
    A = rng.normal(size=(V1, V1))
    M = A.T @ A
    plain = _group_quad_plain(E, M, T, v)
    np.testing.assert_array_equal(_group_quad_serial_nb(E, M, T, v), plain)
    np.testing.assert_array_equal(_group_quad_nb(E, M, T, v), plain)


def test_group_lin_kernels_equal_numpy():
    from theorycheck.population._attention_kernels import _group_lin_nb, _group_lin_ref, _group_lin_serial_nb

    T, v = 5, 3
    V1 = T * v + 1
    rng = np.random.default_rng(0)
    E, Wb, lam = rng.random((V1, V1)), rng.normal(size=(T, V1)), rng.random((V1, T + 1))
    groups = np.concatenate([[0], 1 + np.arange(T * v) // v])
    ref = np.stack(
        [np.stack([(E[:, groups == k] * Wb[t, groups == k]).sum(1) for t in range(T)], 1) for k in range(T + 1)], 1
    )
    for fn in (_group_lin_nb, _group_lin_serial_nb, _group_lin_ref):
        Lin, LinL = fn(E, Wb, lam, T, v)
        np.testing.assert_allclose(Lin, ref, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(LinL, np.einsum("xkt,xk->xt", ref, lam), rtol=1e-14, atol=1e-15)
    Lin, LinL = _group_lin_nb(E, Wb, lam, T, v)
    for x in (0, 1, V1 - 1):  # the kernel's summation order: over y in G_k, then over k
        for t in range(T):
            for k in range(T + 1):
                acc = 0.0
                for y in np.nonzero(groups == k)[0]:
                    acc += Wb[t, y] * E[x, y]
                assert Lin[x, k, t] == acc


@pytest.mark.parametrize("T,v,tau", [(5, 3, 2), (6, 2, 3)])
def test_gradient_at_uniform_attention_matches_closed_form_slope(T, v, tau):
    """Stage 2 starts at S = 0 with the stage-1 W^V: the exact gradient dL/dS, contracted with the
    (alpha, beta) = (1, 1) direction (all same-topic word pairs), equals the slope of the closed form
    d/dt L(t, t) at t = 0, and it is negative (topic attention grows) since K* > v for tau >= 2."""
    from theorycheck.population import alpha_beta_loss, alpha_beta_score_matrix, alpha_beta_value_matrix

    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking()
    W = alpha_beta_value_matrix(tm, mk)
    _, dS, dW, _ = attention_loss_grad(np.zeros((tm.V1, tm.V1)), W, tm, mk)
    direction = alpha_beta_score_matrix(1.0, 1.0, tm)
    slope = float(np.sum(dS * direction))
    h = 1e-5
    fd = (alpha_beta_loss(h, h, tm, mk) - alpha_beta_loss(-h, -h, tm, mk)) / (2 * h)
    assert slope == pytest.approx(fd, rel=1e-6, abs=1e-10)
    assert slope < 0
    assert np.max(np.abs(dW)) < 1e-12  # W is the stage-1 optimum under uniform attention


@settings(max_examples=15)
@given(
    topic_models(max_T=5, max_v=3),
    maskings(allow_no_mask_token=False),
    st.integers(0, 2**31),
    st.sampled_from([0.0, 3.0, 1e3]),
)
@example(tc.TopicModel(T=2, v=2, tau=1), tc.Masking(p_m=0.5, p_c=0.0, p_r=1.1125369292536007e-308), 0, 1e3)
def test_exp_free_fast_path_equals_log_sum_exp_path(tm, mk, seed, scale):
    """With eta, q > 0 the kernel uses weights relative to the row maximum (no exponentials);
    the general log-sum-exp path must give the same per-set losses, finite. (A subnormal eta, from
    p_r ~ 1e-308, made 1 / m overflow into NaN losses: found by hypothesis's random profile; such
    densities now take the log-sum-exp path.)"""
    from theorycheck.population._attention_loss import _structured_sq

    S, W, b = _draw(tm, seed, scale_S=scale)
    sets = topic_sets(tm)
    fast = _structured_sq(S, W, b, sets, tm, mk, False, fast=True)
    slow = _structured_sq(S, W, b, sets, tm, mk, False, fast=False)
    assert np.all(np.isfinite(fast)) and np.all(np.isfinite(slow))
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)
