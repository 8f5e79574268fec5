"""Issue 36: the interval primitives behind the label certificate at realistic sizes, against exact rationals, and
the branch and bound's box budget. End to end a lost rounding step hides inside the slack of the other operations
(``certificate.label-kernel``), so each step is checked where it is visible."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention import _interval_scores_kernel as K
from theorycheck.solvers.attention._interval_label import LabelLoss, imatmul, isum
from theorycheck.solvers.attention._interval_scores import score_loss
from theorycheck.solvers.attention._interval_vec import IVec, branch_and_bound

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False, allow_subnormal=True)


@settings(max_examples=200, deadline=None)
@given(s_lo=finite, width=st.floats(0.0, 1e3), lo=finite, w2=st.floats(0.0, 1e3))
def test_kernel_accumulation_encloses_the_exact_sum(s_lo, width, lo, w2):
    """``_acc`` (every addition of the kernel's sums): ``[s_lo, s_hi] + [lo, hi]`` encloses the exact sum of the
    ends (a rounded-to-nearest end misses about half the time)."""
    s = np.array([s_lo, s_lo + width])
    hi = lo + w2
    exact_lo, exact_hi = Fraction(s[0]) + Fraction(lo), Fraction(s[1]) + Fraction(hi)
    K._acc(s, 0, lo, hi)
    assert s[0] == -np.inf or Fraction(float(s[0])) <= exact_lo
    assert s[1] == np.inf or exact_hi <= Fraction(float(s[1]))


def test_kernel_accumulation_at_size():
    """2,000 additions of realistic magnitudes (partial sums up to 1e3, terms 1e-6 .. 1): every one enclosed."""
    rng = np.random.default_rng(5)
    s = np.zeros(2)
    for _ in range(2000):
        lo, x = float(rng.uniform(1.0, 1e3)), float(10.0 ** rng.uniform(-6, 0))
        s[:] = lo
        K._acc(s, 0, x, x)
        assert Fraction(float(s[0])) <= Fraction(lo) + Fraction(x) <= Fraction(float(s[1]))


@pytest.mark.parametrize("seed", range(6))
def test_interval_sum_encloses_a_cancelling_sum(seed):
    """``isum`` over 3,001 terms that cancel to ~1e-15 (the float sum loses every digit) encloses the exact sum: its
    error bound is ``f sum |x|``, not ``f |sum x|``."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, 1500)
    a = np.concatenate([a, -a[::-1] * (1 + 2.0**-52), [1e-17]])
    rng.shuffle(a)
    t = isum(IVec(a, a), 0)
    exact = sum((Fraction(float(x)) for x in a), Fraction(0))
    assert Fraction(float(t.lo)) <= exact <= Fraction(float(t.hi))


def test_interval_matmul_encloses_a_cancelling_product():
    """``imatmul`` at a realistic inner size (2,000) with cancellation, against exact rationals."""
    rng = np.random.default_rng(2)
    u = rng.uniform(-1.0, 1.0, 1000)
    x = np.concatenate([u, -u])[None, :]
    y = np.concatenate([np.ones(1000), np.ones(1000) * (1 + 2.0**-50)])[:, None]
    t = imatmul(IVec(x, x), IVec(y, y))
    exact = sum((Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x[0], y[:, 0])), Fraction(0))
    assert Fraction(float(t.lo[0, 0])) <= exact <= Fraction(float(t.hi[0, 0]))


@pytest.mark.parametrize("budget", [1, 2, 7, 40, 121])
def test_branch_and_bound_stays_within_its_box_budget(budget):
    """``max_boxes`` is a cap (its docstring: ``n_boxes <= max_boxes``, every child evaluated); the bound stopped by
    it still lies below the converged one."""
    g, mk = GeneralTopicModel.zipf(3, 2, 1.0, tau=2), Masking()
    r = optimal_attention(g, mk, options={"family": "label", "x0": [2.0, -1.0]})
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, f.left, f.right, False)
    xs = np.array([r.x[0] + r.x[1], r.x[1]])
    q = [(xs[0] - 1.0, xs[0] + 1.0), (xs[1] - 1.0, xs[1] + 1.0)]

    def value(z):
        return score_loss(LL, z)

    lo, up, _, n, _ = branch_and_bound(q, None, None, value, offset=0.0, tol=1e-9, max_boxes=budget, x0=xs,
                                       one_point=True)  # fmt: skip
    assert 1 <= n <= budget
    lo_full, up_full, *_ = branch_and_bound(q, None, None, value, offset=0.0, tol=1e-9, max_boxes=20_000, x0=xs,
                                            one_point=True)  # fmt: skip
    assert lo <= lo_full + 1e-15 and lo <= r.fun + 1e-12 and up_full - lo_full <= 1e-9
