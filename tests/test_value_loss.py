"""value_loss: Numba kernel == dense numpy reference == enumeration; gradient == finite differences."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.population import masked_density, topic_density, topic_sets, value_loss, value_loss_grad
from theorycheck.population._value_loss import _value_loss_ref
from theorycheck.strategies import maskings, topic_models


def _enumerated_loss(W, tm, mk, b=None, reg=0.0):
    """Average over every topic set S of E_{x~p_S} ||W m_S + b - e_x||^2 (independent of moments)."""
    tot = 0.0
    sets = topic_sets(tm)
    for S in sets:
        m = masked_density(tm, mk, S)
        p = topic_density(tm, S)
        o = W @ m + (0 if b is None else b)
        tot += o @ o - 2 * p @ o + 1.0
    return tot / len(sets) + reg * np.sum(W * W)


@given(topic_models(max_T=6, max_v=4), maskings(), st.integers(0, 2**31), st.booleans(), st.floats(0, 2))
def test_kernel_equals_reference_and_enumeration(tm, mk, seed, with_b, reg):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(tm.V1, tm.V1))
    b = rng.normal(size=tm.V1) if with_b else None
    got = value_loss(W, tm, mk, b=b, reg=reg)
    ref = _value_loss_ref(W, tm, mk, b=b, reg=reg)
    enum = _enumerated_loss(W, tm, mk, b=b, reg=reg)
    scale = 1.0 + abs(ref)
    assert abs(got - ref) <= 1e-12 * scale
    assert abs(got - enum) <= 1e-12 * scale


@given(topic_models(max_T=5, max_v=3), maskings(), st.integers(0, 2**31), st.booleans())
def test_gradient_matches_finite_differences(tm, mk, seed, with_b):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(tm.V1, tm.V1))
    b = rng.normal(size=tm.V1) if with_b else None
    reg = 0.3
    _, dW, db = value_loss_grad(W, tm, mk, b=b, reg=reg)
    # the loss is quadratic: central differences are exact up to round-off
    h = 1e-3
    E = rng.normal(size=W.shape)
    fd = (value_loss(W + h * E, tm, mk, b=b, reg=reg) - value_loss(W - h * E, tm, mk, b=b, reg=reg)) / (2 * h)
    assert fd == pytest.approx(np.sum(dW * E), rel=1e-8, abs=1e-9)
    bb = np.zeros(tm.V1) if b is None else b
    e = rng.normal(size=tm.V1)
    fdb = (value_loss(W, tm, mk, b=bb + h * e) - value_loss(W, tm, mk, b=bb - h * e)) / (2 * h)
    assert fdb == pytest.approx(db @ e, rel=1e-8, abs=1e-9)


def test_loss_at_zero_is_one():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    assert value_loss(np.zeros((tm.V1, tm.V1)), tm, mk) == 1.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(W=np.zeros((3, 3))), "W must have shape"),
        (dict(W=np.full((7, 7), np.nan)), "finite"),
        (dict(reg=-1.0), "reg"),
        (dict(reg=float("inf")), "reg"),
        (dict(b=np.zeros(3)), "b must have shape"),
        (dict(mk=tc.Masking(p_m=0.0)), "p_m"),
    ],
)
def test_value_loss_rejects(kwargs, match):
    tm = tc.TopicModel(T=3, v=2, tau=1)
    args = dict(W=np.zeros((7, 7)), tm=tm, mk=tc.Masking(), b=None, reg=0.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        value_loss(**args)


def test_serial_and_parallel_kernels_agree():
    from theorycheck.population._value_loss import _block_sums_par, _block_sums_ser

    W = np.random.default_rng(0).normal(size=(61, 61))
    Yp, sp = _block_sums_par(W, 6, 10)
    Ys, ss = _block_sums_ser(W, 6, 10)
    np.testing.assert_allclose(Yp, Ys, rtol=0, atol=1e-13)
    assert sp == pytest.approx(ss, rel=1e-14)
    # and both against plain numpy block sums
    np.testing.assert_allclose(Ys, W[:, 1:].reshape(61, 6, 10).sum(axis=2), atol=1e-13)
