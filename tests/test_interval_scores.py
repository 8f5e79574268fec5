"""The score-coordinate interval evaluator of the label family (SPEC §7, §11.8): the Numba kernel against the numpy
engine (same formulas: intersecting enclosures of nearly equal widths), both against the dense float loss at points
of the box, the float structured gradient at a point and a central difference of it inside a box; the kernel's
rounding rule against exact rational arithmetic; the same bits on 1 and 2 threads."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest
from _general_strategies import label_box_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck._threads import numba_threads
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss, family_attention_loss
from theorycheck.solvers import optimal_value_matrix
from theorycheck.solvers.attention import _interval_scores_kernel as K
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import _corner_exps, packed_chunks, score_loss
from theorycheck.solvers.attention._interval_vec import IVec, evaluate

#: The engines' widths agree to this relative factor plus ABS_WIDTH times the magnitude (rounding-level differences:
#: the kernel widens by 2^-52 |x| per operation where numpy moves one float, and sums pairwise).
REL_WIDTH, ABS_WIDTH = 1e-6, 1e-12
#: Float error of the dense / structured float evaluators at a point.
FLOAT_TOL = 1e-11
#: Central-difference step and the float error of the difference quotient (the exact quotient is the mean of the
#: Hessian over the segment, inside the box's enclosure).
FD_STEP, FD_TOL = 1e-4, 1e-8


def _setup(g, mk, kind, mask_keys):
    if kind == "stage1":
        f = optimal_value_matrix(g, mk, options={"dense": False}).x
        U, V, W = f.left, f.right, f.toarray()
    else:
        W = np.eye(g.V1)
        W[0, 0] = 0.0
        U, V = W, np.eye(g.V1)
    return LabelLoss(g, mk, U, V, mask_keys), (U, V), W


def _entries(t, order):
    return [t] if order == 0 else [t.v, *t.g, *t.h] if order == 2 else [t.v, *t.g]


def _dense(g, mk, W, s, b, mask_keys):
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    return float(attention_loss(family_scores(s - b, b, Z), W, g, mk, mask_keys=mask_keys))


def _grad_sb(g, mk, UV, s, b, mask_keys):
    """The structured float gradient in ``(s, beta)``: ``d/ds = d/dalpha``, ``d/dbeta|_s = d/dbeta - d/dalpha``."""
    r = family_attention_loss(s - b, b, UV, g, mk, family="label", mask_keys=mask_keys, grad=True)
    return np.array([r.dalpha, r.dbeta - r.dalpha])


def _close_widths(a: IVec, b: IVec):
    wa, wb = a.hi - a.lo, b.hi - b.lo
    fin = np.isfinite(wa) & np.isfinite(wb)
    assert np.array_equal(np.isfinite(wa), np.isfinite(wb)), (a, b)
    mag = np.maximum(1.0, np.maximum(np.abs(a.lo), np.abs(a.hi)))
    wa, wb, mag = wa[fin], wb[fin], mag[fin]
    assert np.all(np.abs(wa - wb) <= REL_WIDTH * np.maximum(wa, wb) + ABS_WIDTH * mag), (a, b)
    assert np.all(np.maximum(a.lo, b.lo) <= np.minimum(a.hi, b.hi)), (a, b)  # both hold the exact value


@settings(max_examples=15, deadline=None)
@given(**label_box_cases(width=(0.01, 3.0)))
def test_kernel_agrees_with_numpy_and_encloses_the_float_loss(g, mk, mask_keys, kind, centre, width, frac):
    """Orders 0, 1, 2 on a box and at a point: the engines' enclosures intersect with widths within REL_WIDTH;
    both hold the dense loss at points of the box, the float gradient at a point, and (order 2) a central
    difference of the float gradient at the box's centre."""
    LL, UV, W = _setup(g, mk, kind, mask_keys)
    c, w = np.array(centre), np.array(width)
    lo, hi = (c - w / 2)[None], (c + w / 2)[None]
    pts = [lo[0] + np.array(f) * (hi[0] - lo[0]) for f in frac]
    p = pts[0][None]
    ev = {e: functools.partial(score_loss, LL, engine=e) for e in ("numpy", "numba")}
    for order in (0, 1, 2):
        on_box = {e: evaluate(lo, hi, None, None, f, order=order) for e, f in ev.items()}
        at_p = {e: evaluate(p, p, None, None, f, order=min(order, 1)) for e, f in ev.items()}
        for a, b in zip(_entries(on_box["numpy"], order), _entries(on_box["numba"], order)):
            _close_widths(a, b)
        for a, b in zip(_entries(at_p["numpy"], min(order, 1)), _entries(at_p["numba"], min(order, 1))):
            _close_widths(a, b)
        for t in on_box.values():
            v = t if order == 0 else t.v
            for q in pts:
                d = _dense(g, mk, W, q[0], q[1], mask_keys)
                assert v.lo[0] - FLOAT_TOL * max(1.0, abs(d)) <= d <= v.hi[0] + FLOAT_TOL * max(1.0, abs(d))
    gp = _grad_sb(g, mk, UV, p[0, 0], p[0, 1], mask_keys)
    H = {e: evaluate(lo, hi, None, None, f, order=2).h for e, f in ev.items()}
    fd = np.zeros((2, 2))
    for k in range(2):
        step = np.eye(2)[k] * FD_STEP
        fd[:, k] = (_grad_sb(g, mk, UV, *(c + step), mask_keys) - _grad_sb(g, mk, UV, *(c - step), mask_keys)) / (
            2 * FD_STEP
        )
    for e, f in ev.items():
        t = evaluate(p, p, None, None, f, order=1)
        for j in range(2):
            assert t.g[j].lo[0] - FLOAT_TOL <= gp[j] <= t.g[j].hi[0] + FLOAT_TOL, (e, j, t.g[j], gp[j])
        for m, (j, k) in enumerate(((0, 0), (0, 1), (1, 1))):
            hj = H[e][m]
            for val in {fd[j, k], fd[k, j]}:
                assert hj.lo[0] - FD_TOL <= val <= hj.hi[0] + FD_TOL, (e, j, k, hj, val)


def _packed(n_copies):
    rng = np.random.default_rng(5)
    g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.5), size=4), tau=2)
    mk = Masking()
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, f.left, f.right)
    coef = np.vstack(list(packed_chunks(LL)))
    return np.tile(coef, (n_copies, 1))


def test_same_bits_on_one_and_two_threads():
    """The blocks and their order depend on the number of pairs only: 1 and 2 Numba threads give equal arrays."""
    coef = _packed(200)  # 8,800 pairs: 35 tiles, 35 blocks
    S, B = IVec(np.array([0.5, 1.0]), np.array([0.9, 1.0])), IVec(np.array([-0.3, 0.2]), np.array([0.1, 0.2]))
    ex, nc = _corner_exps(S, B), np.array([4, 1], np.int64)
    outs = []
    for n in (1, 2):
        with numba_threads(n):
            outs.append([K.score_sums(coef, ex, nc, order) for order in (0, 1, 2)])
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
    assert np.all(outs[0][2][:, 0::2] <= outs[0][2][:, 1::2])


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
    b=st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
    op=st.sampled_from(["+", "-", "*", "/"]),
)
def test_rounding_rule_brackets_the_exact_result(a, b, op):
    """``_dn(fl(a op b)) <= a op b <= _up(fl(a op b))`` in exact rational arithmetic (finite results)."""
    if op == "/" and b == 0.0:
        return
    fa, fb = Fraction(a), Fraction(b)
    exact = {"+": fa + fb, "-": fa - fb, "*": fa * fb, "/": fa / fb if b else 0}[op]
    with np.errstate(all="ignore"):
        x = {"+": np.float64(a) + b, "-": np.float64(a) - b, "*": np.float64(a) * b, "/": np.float64(a) / b}[op]
    if not np.isfinite(x):
        return
    lo, hi = K._dn(float(x)), K._up(float(x))
    assert lo == -np.inf or Fraction(lo) <= exact
    assert hi == np.inf or exact <= Fraction(hi)


def test_nan_ends_and_reciprocal_of_zero_are_the_whole_line():
    assert K._mul(0.0, 1.0, 1.0, np.inf) == (-np.inf, np.inf)  # 0 * inf
    assert K._recip(-1.0, 2.0) == (-np.inf, np.inf)
    assert K._dn(np.inf) == -np.inf and K._up(-np.inf) == np.inf  # overflowed ends: the whole line
    lo, hi = K._omx(0.2, 0.7)
    assert lo <= 0.16 and hi == 0.25


def test_unknown_engine_is_refused():
    LL = LabelLoss.__new__(LabelLoss)
    with pytest.raises(ValueError, match="engine must be one of"):
        score_loss(LL, [IVec(0.0), IVec(0.0)], engine="fortran")
