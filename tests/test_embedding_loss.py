"""embedding_loss / embedding_loss_grad: == dense-moment reference == enumeration; gradients == finite differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.diagnostics import check_gradient
from theorycheck.population import (
    embedding_loss,
    embedding_loss_grad,
    masked_density,
    topic_density,
    topic_sets,
)
from theorycheck.population._embedding_loss import _embedding_loss_ref
from theorycheck.strategies import maskings, topic_models


def _draw(tm, seed, d, tied, with_b):
    rng = np.random.default_rng(seed)
    W_E = rng.normal(size=(d, tm.V1)) / np.sqrt(d)
    W_dec = None if tied else rng.normal(size=(tm.V1, d)) / np.sqrt(d)
    b = rng.normal(size=tm.V1) if with_b else None
    return rng, W_E, W_dec, b


def _enumerated(W_E, W_dec, b, tm, mk, tied, reg):
    """Average over every topic set of E_{x~p_S} ||M m_S + b - e_x||^2 (no moments involved)."""
    M = W_E.T @ W_E if tied else W_dec @ W_E
    tot = 0.0
    sets = topic_sets(tm)
    for S in sets:
        o = M @ masked_density(tm, mk, S) + (0 if b is None else b)
        tot += o @ o - 2 * topic_density(tm, S) @ o + 1.0
    pen = np.sum(W_E**2) + (0 if tied else np.sum(W_dec**2))
    return tot / len(sets) + reg * pen


@given(
    topic_models(max_T=5, max_v=3),
    maskings(),
    st.integers(1, 6),
    st.booleans(),
    st.booleans(),
    st.floats(0, 1),
    st.integers(0, 2**31),
)
def test_value_and_gradients_equal_reference(tm, mk, d, tied, with_b, reg, seed):
    _, W_E, W_dec, b = _draw(tm, seed, d, tied, with_b)
    kw = dict(W_dec=W_dec, b=b, tied=tied, reg=reg)
    out = embedding_loss_grad(W_E, tm, mk, **kw)
    ref = _embedding_loss_ref(W_E, tm, mk, **kw)
    scale = 1.0 + abs(ref[0])
    assert abs(out.loss - ref[0]) <= 1e-12 * scale
    assert abs(embedding_loss(W_E, tm, mk, **kw) - out.loss) <= 1e-13 * scale
    assert abs(out.loss - _enumerated(W_E, W_dec, b, tm, mk, tied, reg)) <= 1e-12 * scale
    gscale = 1.0 + np.max(np.abs(ref[1]))
    assert np.max(np.abs(out.dW_E - ref[1])) <= 1e-11 * gscale
    if tied:
        assert out.dW_dec is None
    else:
        assert np.max(np.abs(out.dW_dec - ref[2])) <= 1e-11 * (1.0 + np.max(np.abs(ref[2])))
    assert np.max(np.abs(out.db - ref[3])) <= 1e-11 * (1.0 + np.max(np.abs(ref[3])))


@given(
    topic_models(max_T=4, max_v=3),
    maskings(),
    st.integers(1, 5),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_gradients_match_central_differences(tm, mk, d, tied, with_b, seed):
    rng, W_E, W_dec, b = _draw(tm, seed, d, tied, with_b)
    reg = 0.2
    kw = dict(W_dec=W_dec, b=b, tied=tied, reg=reg)
    out = embedding_loss_grad(W_E, tm, mk, **kw)
    # quartic in W_E (tied) / bilinear (untied): central differences have O(h^2) error
    x = dict(W_E=W_E, b=np.zeros(tm.V1) if b is None else b)
    grad = dict(W_E=out.dW_E, b=out.db)
    if not tied:
        x["W_dec"], grad["W_dec"] = W_dec, out.dW_dec

    def f_of(name):
        def f(value):
            args = dict(x, **{name: value})
            return embedding_loss(args.pop("W_E"), tm, mk, tied=tied, reg=reg, **args)

        return f

    for name in x:  # each parameter on its own: a wrong block cannot hide behind a right one
        check_gradient(f_of(name), x[name], grad[name], seed=seed, rtol=1e-6, atol=1e-9).assert_ok()


def test_paper_configuration_zero_embedding_gives_loss_one_and_zero_gradient():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    out = embedding_loss_grad(np.zeros((12, tm.V1)), tm, mk)
    assert out.loss == 1.0
    assert np.all(out.dW_E == 0.0)  # W_E = 0 is a saddle of the tied model


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(W_E=np.zeros((3, 5))), ValueError, "W_E must have shape"),
        (dict(W_E=np.zeros((0, 7))), ValueError, "W_E must have shape"),
        (dict(W_E=np.zeros(7)), ValueError, "W_E must be a 2-d"),
        (dict(W_E=np.full((2, 7), np.inf)), ValueError, "W_E must contain only finite"),
        (dict(W_dec=np.zeros((7, 2))), ValueError, "W_dec must be None when tied=True"),
        (dict(tied=False), ValueError, "W_dec .* is required"),
        (dict(tied=False, W_dec=np.zeros((7, 3))), ValueError, "W_dec must have shape"),
        (dict(tied=False, W_dec=np.full((7, 2), np.nan)), ValueError, "W_dec must contain only finite"),
        (dict(b=np.zeros(6)), ValueError, "b must have shape"),
        (dict(reg=-0.1), ValueError, "reg"),
        (dict(tied="yes"), TypeError, "tied must be a bool"),
        (dict(mk=tc.Masking(p_m=0.0)), ValueError, "p_m"),
        (dict(tm="T=3"), TypeError, "tm must be a TopicModel"),
    ],
)
def test_embedding_loss_rejects(kwargs, exc, match):
    args = dict(W_E=np.zeros((2, 7)), tm=tc.TopicModel(T=3, v=2, tau=1), mk=tc.Masking())
    args.update(kwargs)
    W_E, tm, mk = args.pop("W_E"), args.pop("tm"), args.pop("mk")
    with pytest.raises(exc, match=match):
        embedding_loss(W_E, tm, mk, **args)
    with pytest.raises(exc, match=match):
        embedding_loss_grad(W_E, tm, mk, **args)


@settings(max_examples=10)
@given(topic_models(prior="dirichlet", max_T=5, max_v=3), maskings(), st.integers(0, 2**31))
def test_dirichlet_prior_matches_reference(tm, mk, seed):
    _, W_E, _, b = _draw(tm, seed, 3, True, True)
    out = embedding_loss_grad(W_E, tm, mk, b=b)
    ref = _embedding_loss_ref(W_E, tm, mk, b=b)
    assert abs(out.loss - ref[0]) <= 1e-12 * (1 + abs(ref[0]))
    assert np.max(np.abs(out.dW_E - ref[1])) <= 1e-11 * (1 + np.max(np.abs(ref[1])))
