"""The co-topic certificate's compiled beta-tables (SPEC §11.8, "Interval certificate (co-topic family)"):
:func:`exp_rows` against its numpy reference and mpmath, :func:`nonneg_imatmul` against exact rational products
and :func:`.imatmul`, the tables against mpmath sums, the whole evaluator (``tables="compiled"``) against the numpy
evaluator (``tables="numpy"``) and the dense evaluator of SPEC §11.4 (hypothesis over models, tau, masking,
mask_keys, boxes), and the certificate against the numpy one and the float optimum."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.population import attention_loss
from theorycheck.solvers import cotopic_matrix, optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_cotopic import CotopicLoss
from theorycheck.solvers.attention._interval_cotopic_tables import (
    TableCache,
    _exp_hi,
    _exp_lo,
    beta_tables,
    exp_rows,
    exp_rows_reference,
    nonneg_imatmul,
    split_columns,
)
from theorycheck.solvers.attention._interval_general import cotopic_box_certificate
from theorycheck.solvers.attention._interval_label import imatmul
from theorycheck.solvers.attention._interval_vec import IVec, evaluate

mpmath.mp.dps = 50
maskings = st.sampled_from([Masking(), Masking(p_m=0.3, p_c=0.2, p_r=0.3), Masking(p_m=0.5, p_c=0.6, p_r=0.0)])
betas = st.tuples(st.floats(-40.0, 40.0), st.floats(0.0, 5.0))


@settings(max_examples=300, deadline=None)
@given(x=st.floats(-745.0, 709.0) | st.floats(-1.0, 1.0) | st.sampled_from([0.0, -744.5, 708.9, 1e-300, -1e-300]))
def test_compiled_exp_enclosure_holds_mpmath(x):
    """The kernel's ``exp`` (libm's, widened by 2^-49 relative and 2^-1070 absolute as the numpy engine's) holds the
    exact value, subnormal results included."""
    exact = mpmath.exp(mpmath.mpf(x))
    assert 0.0 <= _exp_lo(x) <= exact <= _exp_hi(x)


def _rows(seed, n, V1, signed):
    rng = np.random.default_rng(seed)
    G = rng.random((n, V1))
    G[:, 0] = 0.0  # the [MASK] column
    if signed:
        G -= 0.3
    return G


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), beta=betas, order=st.integers(0, 2), signed=st.booleans(), x0=st.integers(0, 3))
def test_exp_rows_encloses_mpmath_and_meets_the_numpy_reference(seed, beta, order, signed, x0):
    """``E_o = e^{beta G} G^o`` (0 on the own key): the compiled enclosure holds the mpmath value at both ends and
    the middle of the beta interval, overlaps the numpy reference and is as narrow (to a few float steps)."""
    n, V1, rows = 6, 7, 3
    G = _rows(seed, n, V1, signed)
    b0, b1 = beta[0], beta[0] + beta[1]
    lo, hi = np.empty((order + 1, rows, V1)), np.empty((order + 1, rows, V1))
    exp_rows(b0, b1, G, np.zeros(n), np.zeros(n), x0, order, lo, hi)
    ref = exp_rows_reference(b0, b1, G, np.zeros(n), np.zeros(n), x0, rows, order)
    for o in range(order + 1):
        assert np.all(lo[o] <= ref[o].hi) and np.all(ref[o].lo <= hi[o])
        scale = np.maximum(np.abs(hi[o]), 1e-300)
        assert np.all((hi[o] - lo[o]) - (ref[o].hi - ref[o].lo) <= 1e-14 * scale)
        for i in range(rows):
            for y in range(V1):
                own = y == x0 + i + 1
                for b in (b0, 0.5 * b0 + 0.5 * b1, b1):
                    g = mpmath.mpf(G[x0 + i, y])
                    exact = 0 if own else mpmath.exp(mpmath.mpf(b) * g) * g**o
                    assert lo[o, i, y] <= exact <= hi[o, i, y], (o, i, y, b)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), shape=st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 4)),
       scale=st.sampled_from([1.0, 1e-200, 1e150]))  # fmt: skip
def test_nonneg_imatmul_encloses_exact_products_and_is_no_wider_than_imatmul(seed, shape, scale):
    """For ``E >= 0`` the enclosure holds the exact rational product at random points of both interval matrices
    (corners included), and it is not wider than the midpoint-radius :func:`.imatmul` (beyond rounding)."""
    m, N, c = shape
    rng = np.random.default_rng(seed)
    Elo = rng.random((m, N)) * scale
    Ehi = Elo + rng.random((m, N)) * scale * rng.integers(0, 2, (m, N))
    Blo = rng.standard_normal((N, c))
    Bhi = Blo + rng.random((N, c)) * rng.integers(0, 2, (N, c))
    lo, hi = nonneg_imatmul(Elo, Ehi, split_columns(IVec(Blo, Bhi)))
    ref = imatmul(IVec(Elo, Ehi), IVec(Blo, Bhi))
    assert np.all(hi - lo <= (ref.hi - ref.lo) * (1 + 1e-12) + 1e-300)
    for _ in range(4):
        te, tb = rng.random((m, N)), rng.random((N, c))
        te[rng.random((m, N)) < 0.3] = 1.0
        tb[rng.random((N, c)) < 0.3] = 0.0
        E = [[Fraction(Elo[i, j]) + Fraction(te[i, j]) * (Fraction(Ehi[i, j]) - Fraction(Elo[i, j])) for j in range(N)]
             for i in range(m)]  # fmt: skip
        B = [[Fraction(Blo[i, j]) + Fraction(tb[i, j]) * (Fraction(Bhi[i, j]) - Fraction(Blo[i, j])) for j in range(c)]
             for i in range(N)]  # fmt: skip
        for i in range(m):
            for j in range(c):
                exact = sum(E[i][k] * B[k][j] for k in range(N))
                assert Fraction(lo[i, j]) <= exact <= Fraction(hi[i, j])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), beta=betas, order=st.integers(0, 2), rows=st.integers(1, 5), signed=st.booleans())
def test_beta_tables_enclose_mpmath_sums(seed, beta, order, rows, signed):
    """``sum_{y != x} e^{beta G_xy} G_xy^o B[y, :]`` (any block size; ``G`` with negative entries too, where the odd
    orders' weights are signed): the tables hold the mpmath sums at points of the beta interval."""
    n, V1 = 7, 8
    G = _rows(seed, n, V1, signed)
    B = np.random.default_rng(seed + 1).standard_normal((V1, 3))
    b0, b1 = beta[0], beta[0] + beta[1]
    lo, hi = beta_tables(G, IVec(B), b0, b1, order, rows=rows)
    for b in (b0, 0.5 * b0 + 0.5 * b1, b1):
        for x in range(n):
            for j in range(3):
                for o in range(order + 1):
                    exact = mpmath.fsum(mpmath.exp(mpmath.mpf(b) * mpmath.mpf(G[x, y])) * mpmath.mpf(G[x, y]) ** o
                                        * mpmath.mpf(B[y, j]) for y in range(V1) if y != x + 1)  # fmt: skip
                    assert lo[o, x, j] <= exact <= hi[o, x, j]


def test_an_unknown_tables_engine_is_refused():
    g = GeneralTopicModel(np.full((2, 3), 1.0 / 3), tau=1)
    with pytest.raises(ValueError, match="tables must be 'compiled' or 'numpy', got 'fast'"):
        CotopicLoss(g, Masking(), np.eye(4), np.eye(4), tables="fast")


def test_table_cache_keeps_the_highest_order_and_drops_the_oldest():
    """A request at a lower order is served from a higher one; beyond its size the least recent is recomputed."""
    calls = []

    def compute(b0, b1, o):
        calls.append((b0, b1, o))
        return np.zeros((o + 1, 1, 1)), np.zeros((o + 1, 1, 1))

    c = TableCache(compute, size=2)
    c.get(0.0, 1.0, 2)
    c.get(0.0, 1.0, 1)
    c.get(0.0, 1.0, 2)
    c.get(1.0, 2.0, 0)
    c.get(1.0, 2.0, 1)
    c.get(2.0, 3.0, 0)
    c.get(0.0, 1.0, 0)
    assert calls == [(0.0, 1.0, 2), (1.0, 2.0, 0), (1.0, 2.0, 1), (2.0, 3.0, 0), (0.0, 1.0, 0)]
    assert (c.hits, c.misses) == (2, 5)


def _stage1(g, mk):
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    return f.left, f.right, f.toarray()


def _dense(g, mk, W, a, b, mask_keys):
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    return float(attention_loss(a * I_w + b * cotopic_matrix(g), W, g, mk, mask_keys=mask_keys))


def _entries(F):
    if isinstance(F, IVec):
        return [F]
    return [F.v, *[x for x in F.g if x is not None], *[x for x in (F.h or []) if x is not None]]


@settings(max_examples=12, deadline=None)
@given(g=general_models(max_T=4, max_v=3, paper=True), mk=maskings, mask_keys=st.booleans(),
       coords=st.sampled_from(["sum", "original"]), centre=st.tuples(st.floats(-6.0, 6.0), st.floats(-6.0, 6.0)),
       width=st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 2.0)),
       frac=st.tuples(st.floats(0, 1), st.floats(0, 1)))  # fmt: skip
def test_compiled_evaluator_meets_the_numpy_one_and_holds_the_dense_value(g, mk, mask_keys, coords, centre, width,
                                                                          frac):  # fmt: skip
    """Value, gradient and Hessian enclosures (orders 0, 1, 2) of ``tables="compiled"`` and ``"numpy"`` overlap and
    have the same widths (to 1e-9 relative), and the compiled value holds the dense evaluator's loss at a point of
    the box (to its rounding)."""
    U, V, W = _stage1(g, mk)
    comp = CotopicLoss(g, mk, U, V, mask_keys, coords=coords)
    ref = CotopicLoss(g, mk, U, V, mask_keys, coords=coords, tables="numpy")
    lo = np.array([[centre[0] - width[0] / 2, centre[1] - width[1] / 2]])
    hi = np.array([[centre[0] + width[0] / 2, centre[1] + width[1] / 2]])
    p = lo[0] + np.array(frac) * (hi[0] - lo[0])
    a, b = (p[0] - p[1], p[1]) if coords == "sum" else (p[0], p[1])
    d = _dense(g, mk, W, a, b, mask_keys)
    for order in (0, 1, 2):
        Fc, Fn = (evaluate(lo, hi, None, None, CL.original, order=order) for CL in (comp, ref))
        for x, y in zip(_entries(Fc), _entries(Fn)):
            assert np.all(x.lo <= y.hi) and np.all(y.lo <= x.hi), (order, x, y)
            wx, wy = x.hi - x.lo, y.hi - y.lo
            assert np.all(np.abs(wx - wy) <= 1e-9 * np.maximum(1.0, np.abs(x.hi)) + 1e-9 * wy), (order, x, y)
        v = Fc if order == 0 else Fc.v
        slack = 1e-12 * max(1.0, abs(d))
        assert v.lo[0] - slack <= d <= v.hi[0] + slack


BOX = ((-6.0, 10.0), (-8.0, 8.0))


def test_certificate_agrees_with_the_numpy_tables_and_the_float_optimum():
    """On a small model the branch and bound with the compiled tables and with the numpy ones: both converge, their
    bounds overlap (to tol) and hold the float optimum's value; through ``optimal_attention`` status 0 with
    ``fun - lower <= tol`` and ``fun`` the float optimum's (to 1e-12)."""
    g, mk = GeneralTopicModel(np.random.default_rng(5).dirichlet(np.full(9, 0.5), size=3), tau=2), Masking()
    f = optimal_attention(g, mk, options={"family": "co-topic", "box": BOX})
    U, V, _ = _stage1(g, mk)
    out = [cotopic_box_certificate(CotopicLoss(g, mk, U, V, tables=t), BOX, 1e-9, 20_000, f.x)
           for t in ("compiled", "numpy")]  # fmt: skip
    for c in out:
        assert c.converged and c.lower <= f.fun + 1e-12 and c.upper >= f.fun - 1e-9
    assert abs(out[0].lower - out[1].lower) <= 1e-9 and abs(out[0].upper - out[1].upper) <= 1e-9
    r = optimal_attention(g, mk, options={"family": "co-topic", "box": BOX, "certify": "interval"})
    c = r.certificate
    assert r.status == 0 and c["kind"] == "certified optimum on the box", r.message
    assert c["lower"] <= r.fun <= c["upper"] and r.fun - c["lower"] <= 1e-9 and abs(r.fun - f.fun) <= 1e-12
