"""theorycheck.diagnostics.check_gradient: passes true gradients, catches wrong ones (difference and slope)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck.diagnostics import check_gradient


@given(st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_true_gradient_of_a_smooth_function_passes(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    x = rng.standard_normal(n)

    def f(z):
        return float(np.log1p(np.sum(np.exp(A @ z))))

    e = np.exp(A @ x)
    g = A.T @ e / (1 + e.sum())
    res = check_gradient(f, x, g, seed=seed)
    assert res.passed, res.message


def test_dict_parameters_and_a_wrong_block_is_caught():
    x = {"a": np.array([1.0, -2.0]), "b": np.array([[0.5]])}

    def f(p):
        return float(np.sum(p["a"] ** 3) + np.sin(p["b"][0, 0]) * p["a"][0])

    g = {"a": np.array([3 * 1.0 + np.sin(0.5), 3 * 4.0]), "b": np.array([[np.cos(0.5) * 1.0]])}
    assert check_gradient(f, x, g).passed
    bad = {"a": g["a"], "b": g["b"] * 1.01}
    res = check_gradient(f, x, bad, n_directions=4)
    assert not res.passed
    with pytest.raises(AssertionError, match="FAILED"):
        res.assert_ok()


def test_slope_test_catches_an_error_below_the_difference_tolerance():
    # f = x^4 / 4; a gradient off by 1e-6 passes a loose difference test but the remainder
    # r(h) ~ 1e-6 h (above the h^2 term for h < 1e-5) has slope 1, not 2
    x = np.array([0.3])

    def f(z):
        return float(z[0] ** 4 / 4)

    res = check_gradient(f, x, x**3 + 1e-6, rtol=1e-3, atol=1e-3, h=1e-6)
    assert not res.passed and min(res.slopes) < 1.5


def test_bad_arguments():
    with pytest.raises(ValueError, match="grad has 2 entries"):
        check_gradient(lambda z: 0.0, np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="n_directions"):
        check_gradient(lambda z: 0.0, np.zeros(3), np.zeros(3), n_directions=0)
    with pytest.raises(ValueError, match="h must"):
        check_gradient(lambda z: 0.0, np.zeros(3), np.zeros(3), h=0.0)
