"""Population objects of a GeneralTopicModel (SPEC §11.2, §11.5): the general path equals the symmetric
one for the paper's model (1e-12), the closed-form moments equal enumeration over every tau-subset and a
Monte Carlo of sampled documents (within 5 standard errors), losses equal the dense-moment formula and
brute-force averages, gradients pass finite differences."""

import itertools

import numpy as np
import pytest
from _general_strategies import constructed_model
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.diagnostics import check_gradient
from theorycheck.population._moments import stage1_factors
from theorycheck.population._value_loss import _value_loss_dense_ref, min_value_loss
from theorycheck.strategies import maskings, topic_models

GM = tc.GeneralTopicModel


# ----------------------------------------------------------------------------- strategies
def _law(draw, T):
    if draw(st.booleans()):
        return {"prior": "uniform-tau", "tau": draw(st.integers(1, T))}
    if draw(st.booleans()):
        return {"prior": "dirichlet", "alpha": draw(st.floats(0.1, 3.0))}
    return {"prior": "dirichlet", "alpha": draw(st.lists(st.floats(0.1, 3.0), min_size=T, max_size=T))}


@st.composite
def general_models(draw, max_T=4, max_v=4):
    """Random general models: Dirichlet rows, overlapping (eps / shared words), Zipfian, unequal sizes."""
    kind = draw(st.sampled_from(["rows", "eps", "shared", "zipf", "unequal"]))
    T = draw(st.integers(2, max_T))
    v = draw(st.integers(1, max_v))
    law = _law(draw, T)
    if kind == "rows":
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        phi = rng.dirichlet(np.full(T * v, draw(st.floats(0.3, 3.0))), size=T) + 1e-3
        return GM(phi / phi.sum(axis=1, keepdims=True), **law)
    return constructed_model(draw, kind, T, v, law, max_size=max_v)


def _rand(shape, seed, scale=1.0):
    return scale * np.random.default_rng(seed).standard_normal(shape)


# ----------------------------------------------------------------------------- general == symmetric
@given(tm=st.one_of(topic_models(max_T=5, max_v=4), topic_models(max_T=5, max_v=4, prior="dirichlet")), mk=maskings())
def test_moments_and_densities_equal_symmetric(tm, mk):
    g = GM.from_topic_model(tm)
    for A, B in zip(tc.population.moments(tm, mk), tc.population.moments(g, mk), strict=True):
        np.testing.assert_allclose(B, A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tc.population.expected_pp(g), tc.population.expected_pp(tm), rtol=0, atol=1e-12)
    S = list(range(tm.tau)) if tm.prior == "uniform-tau" else None
    theta = None if S is not None else np.full(tm.T, 1.0 / tm.T)
    np.testing.assert_allclose(
        tc.population.masked_density(g, mk, S, theta=theta),
        tc.population.masked_density(tm, mk, S, theta=theta),
        rtol=0,
        atol=1e-12,
    )
    assert min_value_loss(g, mk) == pytest.approx(tm.min_value_loss(), abs=1e-12)


@given(
    tm=st.one_of(topic_models(max_T=4, max_v=3), topic_models(max_T=4, max_v=3, prior="dirichlet")),
    mk=maskings(),
    seed=st.integers(0, 2**16),
    reg=st.sampled_from([0.0, 0.3]),
    bias=st.booleans(),
)
def test_value_loss_and_grad_equal_symmetric(tm, mk, seed, reg, bias):
    g = GM.from_topic_model(tm)
    W = _rand((tm.V1, tm.V1), seed)
    b = _rand(tm.V1, seed + 1) if bias else None
    L1, dW1, db1 = tc.population.value_loss_grad(W, tm, mk, b=b, reg=reg)
    L2, dW2, db2 = tc.population.value_loss_grad(W, g, mk, b=b, reg=reg)
    scale = max(1.0, abs(L1))
    assert abs(L2 - L1) <= 1e-12 * scale
    assert abs(tc.population.value_loss(W, g, mk, b=b, reg=reg) - L1) <= 1e-12 * scale
    np.testing.assert_allclose(dW2, dW1, rtol=0, atol=1e-12 * max(1.0, np.abs(dW1).max()))
    np.testing.assert_allclose(db2, db1, rtol=0, atol=1e-12 * max(1.0, np.abs(db1).max()))


@given(
    tm=st.one_of(topic_models(max_T=4, max_v=3), topic_models(max_T=4, max_v=3, prior="dirichlet")),
    mk=maskings(),
    seed=st.integers(0, 2**16),
    tied=st.booleans(),
    bias=st.booleans(),
    reg=st.sampled_from([0.0, 0.2]),
)
def test_embedding_loss_and_grad_equal_symmetric(tm, mk, seed, tied, bias, reg):
    g = GM.from_topic_model(tm)
    d = 3
    kw = {"b": _rand(tm.V1, seed + 1) if bias else None, "tied": tied, "reg": reg}
    if not tied:
        kw["W_dec"] = _rand((tm.V1, d), seed + 2, 0.5)
    W_E = _rand((d, tm.V1), seed, 0.5)
    r1 = tc.population.embedding_loss_grad(W_E, tm, mk, **kw)
    r2 = tc.population.embedding_loss_grad(W_E, g, mk, **kw)
    assert abs(r2.loss - r1.loss) <= 1e-12 * max(1.0, abs(r1.loss))
    assert abs(tc.population.embedding_loss(W_E, g, mk, **kw) - r1.loss) <= 1e-12 * max(1.0, abs(r1.loss))
    for a, b in ((r1.dW_E, r2.dW_E), (r1.db, r2.db)) + (() if tied else ((r1.dW_dec, r2.dW_dec),)):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * max(1.0, np.abs(a).max()))
    assert (r2.dW_dec is None) == tied


# ----------------------------------------------------------------------------- independent routes
@given(g=general_models(), mk=maskings())
def test_moments_closed_form_equal_enumeration(g, mk):
    if g.prior != "uniform-tau":
        with pytest.raises(ValueError, match="uniform-tau"):
            tc.population.moments(g, mk, method="enumerate")
        return
    for A, B in zip(tc.population.moments(g, mk), tc.population.moments(g, mk, method="enumerate"), strict=True):
        np.testing.assert_allclose(A, B, rtol=0, atol=1e-14)


@given(g=general_models(max_T=3, max_v=3), mk=maskings(), seed=st.integers(0, 2**16), bias=st.booleans())
def test_value_loss_equals_brute_force_average(g, mk, seed, bias):
    """Uniform-tau: the loss averaged document by document (every S, every target word x)."""
    if g.prior != "uniform-tau":
        g = GM(g.phi, tau=max(1, g.T - 1))
    W = _rand((g.V1, g.V1), seed)
    b = _rand(g.V1, seed + 1) if bias else np.zeros(g.V1)
    total, sets = 0.0, list(itertools.combinations(range(g.T), g.tau))
    for S in sets:
        m = tc.population.masked_density(g, mk, list(S))
        p = tc.population.topic_density(g, list(S))
        out = W @ m + b
        total += sum(p[x] * np.sum((out - np.eye(g.V1)[x]) ** 2) for x in range(1, g.V1))
    L = tc.population.value_loss(W, g, mk, b=b if bias else None)
    assert L == pytest.approx(total / len(sets), rel=1e-12)
    assert _value_loss_dense_ref(W, g, mk, b=b if bias else None) == pytest.approx(L, rel=1e-12)


def _sample_documents(g, mk, n_docs, N, rng):
    """Empirical (m m^T, p m^T) per sampled document: theta, then N tokens from p_theta, then masking."""
    if g.prior == "uniform-tau":
        sets = np.array(list(itertools.combinations(range(g.T), g.tau)))[rng.integers(g.n_topic_sets, size=n_docs)]
        theta = np.zeros((n_docs, g.T))
        np.put_along_axis(theta, sets, 1.0 / g.tau, axis=1)
    else:
        theta = rng.dirichlet(g.alpha, size=n_docs)
    p = g.word_density(theta)  # (n_docs, V1)
    cdf = np.cumsum(p, axis=1)
    x = np.minimum((rng.random((n_docs, N))[:, :, None] > cdf[:, None, :]).sum(axis=2), g.V1 - 1)
    sel, u = rng.random((n_docs, N)) < mk.p_m, rng.random((n_docs, N))
    shown = np.where(sel & (u >= mk.p_c) & (u < mk.p_c + mk.p_r), rng.integers(1, g.V1, size=(n_docs, N)), x)
    shown = np.where(sel & (u >= mk.p_c + mk.p_r), 0, shown)
    offsets = g.V1 * np.arange(n_docs)[:, None]
    m = np.bincount((shown + offsets).ravel(), minlength=n_docs * g.V1).reshape(n_docs, g.V1) / N
    return m[:, :, None] * m[:, None, :], p[:, :, None] * m[:, None, :]


@settings(max_examples=6)
@given(g=general_models(max_T=3, max_v=3), mk=maskings(min_p_m=0.1), seed=st.integers(0, 2**16))
def test_moments_equal_monte_carlo_of_documents(g, mk, seed):
    """Documents of N tokens: the positions are i.i.d. with law m_theta given theta, so exactly
    E[m m^T] = Sigma + (diag(E m) - Sigma) / N and E[p m^T] = C; every entry within 5 standard errors."""
    N, n_docs = 200, 4000
    sS, sC = _sample_documents(g, mk, n_docs, N, np.random.default_rng(seed))
    Sigma, C = tc.population.moments(g, mk)
    Em = Sigma.sum(axis=1)  # Sigma 1 = E[m (m^T 1)] = E[m]
    for emp, exact in ((sS, Sigma + (np.diag(Em) - Sigma) / N), (sC, C)):
        mean, se = emp.mean(axis=0), emp.std(axis=0, ddof=1) / np.sqrt(n_docs)
        assert np.all(np.abs(mean - exact) <= 5 * se + 1e-12), np.max(np.abs(mean - exact) / (se + 1e-300))


@given(g=general_models(), mk=maskings(), seed=st.integers(0, 2**16))
def test_factors_reproduce_the_moments(g, mk, seed):
    F = stage1_factors(g, mk)
    Sigma, C = tc.population.moments(g, mk)
    np.testing.assert_allclose(F.X @ F.X.T, Sigma, rtol=0, atol=1e-13)
    np.testing.assert_allclose(F.Y @ F.X.T, C, rtol=0, atol=1e-13)
    assert F.X.shape[1] == (1 if g.tau == g.T else g.T)


@settings(max_examples=10)
@given(g=general_models(max_T=3, max_v=3), mk=maskings(), seed=st.integers(0, 2**16), reg=st.sampled_from([0.0, 0.5]))
def test_gradients_pass_finite_differences(g, mk, seed, reg):
    W, b = _rand((g.V1, g.V1), seed), _rand(g.V1, seed + 1)

    def f(x):
        return tc.population.value_loss(x["W"], g, mk, b=x["b"], reg=reg)

    _, dW, db = tc.population.value_loss_grad(W, g, mk, b=b, reg=reg)
    check_gradient(f, {"W": W, "b": b}, {"W": dW, "b": db}).assert_ok()
    W_E, W_dec = _rand((2, g.V1), seed + 2, 0.5), _rand((g.V1, 2), seed + 3, 0.5)
    for tied in (True, False):
        kw = {"tied": tied, "reg": reg, "W_dec": None if tied else W_dec}
        r = tc.population.embedding_loss_grad(W_E, g, mk, b=b, **kw)

        def h(x, kw=kw):
            kw = dict(kw, W_dec=x.get("W_dec"))
            return tc.population.embedding_loss(x["W_E"], g, mk, b=x["b"], **kw)

        x0 = {"W_E": W_E, "b": b} | ({} if tied else {"W_dec": W_dec})
        grad = {"W_E": r.dW_E, "b": r.db} | ({} if tied else {"W_dec": r.dW_dec})
        check_gradient(h, x0, grad).assert_ok()


# ----------------------------------------------------------------------------- validation
def test_bad_inputs_name_the_parameter():
    g = GM.overlapping(3, 2, eps=0.2, tau=2)
    mk = tc.Masking()
    with pytest.raises(ValueError, match="W must"):
        tc.population.value_loss(np.zeros((3, 3)), g, mk)
    with pytest.raises(ValueError, match="b"):
        tc.population.value_loss(np.zeros((g.V1, g.V1)), g, mk, b=np.zeros(2))
    with pytest.raises(ValueError, match="reg"):
        tc.population.value_loss(np.zeros((g.V1, g.V1)), g, mk, reg=-1.0)
    with pytest.raises(ValueError, match="p_m"):
        tc.population.value_loss(np.zeros((g.V1, g.V1)), g, tc.Masking(p_m=0.0))
    with pytest.raises(TypeError, match="mk must be a Masking"):
        tc.population.moments(g, None)
    with pytest.raises(ValueError, match="method"):
        tc.population.moments(g, mk, method="sampled")
    with pytest.raises(ValueError, match="topics must contain exactly tau=2"):
        tc.population.masked_density(g, mk, [0])
    with pytest.raises(ValueError, match="exactly one of topics"):
        tc.population.topic_density(g)
    with pytest.raises(ValueError, match="theta must be non-negative"):
        tc.population.topic_density(g, theta=[0.5, 0.6, -0.1])
    with pytest.raises(ValueError, match="W_E must have shape"):
        tc.population.embedding_loss(np.zeros((2, 3)), g, mk)
    with pytest.raises(ValueError, match="W_dec"):
        tc.population.embedding_loss(np.zeros((2, g.V1)), g, mk, tied=False)
    with pytest.raises(ValueError, match="max_sets"):
        tc.population.topic_sets(GM.overlapping(20, 1, eps=0.1, tau=10), max_sets=10)
    with pytest.raises(ValueError, match="above the memory limit"):
        tc.population.moments(g, mk, max_bytes=100)


def test_symmetric_only_functions_refuse_a_general_model():
    g = GM.overlapping(3, 2, eps=0.2, tau=2)
    with pytest.raises(TypeError, match="symmetric TopicModel"):
        tc.population.alpha_beta_loss(0.0, 0.0, g, tc.Masking())
