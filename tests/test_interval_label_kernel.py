"""The vectorised label interval kernel (:mod:`theorycheck.solvers.attention._interval_label_kernel`) against its
references: the per-pair Numba kernel and the numpy engine of ``score_loss`` (intersecting enclosures, the width
ratio bounded), the float loss and its derivatives at points of the box, the whole-domain certificate on small models
(same status, overlapping bounds), and the same bits on 1 and 2 Numba threads (subprocesses)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _general_strategies import label_box_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss, family_attention_loss
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention import _interval_general as ig
from theorycheck.solvers.attention import _interval_label_codegen as codegen
from theorycheck.solvers.attention import _interval_label_kernel as K
from theorycheck.solvers.attention import _interval_scores as sc
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_vec import IVec, evaluate

ROOT = Path(__file__).resolve().parents[1]
#: The new kernel's enclosure is at most this factor wider than either reference's (it is narrower or equal in
#: practice: one outward step fewer per class mass), plus ABS_WIDTH times the magnitude.
WIDTH_FACTOR = 1.05
ABS_WIDTH = 1e-13
#: Float error of the dense / structured float evaluators at a point.
FLOAT_TOL = 1e-11
#: Central-difference step and the float error of the difference quotient (the exact quotient is the mean of the
#: Hessian over the segment, inside the box's enclosure).
FD_STEP, FD_TOL = 1e-4, 1e-8


def _setup(g, mk, kind, mask_keys):
    if kind == "stage1":
        f = optimal_value_matrix(g, mk, options={"dense": False}).x
        U, V = f.left, f.right
    else:
        U = np.eye(g.V1)
        U[0, 0] = 0.0
        V = np.eye(g.V1)
    return LabelLoss(g, mk, U, V, mask_keys), (U, V), U @ V.T


def _entries(t, order):
    return [t] if order == 0 else [t.v, *t.g, *t.h] if order == 2 else [t.v, *t.g]


def _dense(g, mk, W, a, b, mask_keys):
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    return float(attention_loss(family_scores(a, b, Z), W, g, mk, mask_keys=mask_keys))


def _grad_ab(g, mk, UV, a, b, mask_keys):
    r = family_attention_loss(a, b, UV, g, mk, family="label", mask_keys=mask_keys, grad=True)
    return np.array([r.dalpha, r.dbeta])


def _check_width(new: IVec, ref: IVec, ratios: list):
    """Both hold the exact value (they intersect), and the new enclosure is at most WIDTH_FACTOR wider."""
    assert np.all(np.maximum(new.lo, ref.lo) <= np.minimum(new.hi, ref.hi)), (new, ref)
    wn, wr = new.hi - new.lo, ref.hi - ref.lo
    assert np.array_equal(np.isfinite(wn), np.isfinite(wr)), (new, ref)
    fin = np.isfinite(wn)
    mag = np.maximum(1.0, np.maximum(np.abs(ref.lo), np.abs(ref.hi)))[fin]
    assert np.all(wn[fin] <= WIDTH_FACTOR * wr[fin] + ABS_WIDTH * mag), (new, ref)
    ratios.extend((wn[fin] / np.where(wr[fin] > 0, wr[fin], 1.0)).tolist())


def _to_frame(a, b, frame):
    return (a + b, b) if frame == "scores" else (a, b)


@settings(max_examples=20, deadline=None)
@given(**label_box_cases(width=(0.0, 3.0)), frame=st.sampled_from(sc.FRAMES))
def test_kernel_against_both_references_and_the_float_loss(g, mk, mask_keys, kind, centre, width, frac, frame):
    """Orders 0, 1, 2 on a box (a point box when the width is 0) of ``(alpha, beta)`` in either frame: the new
    kernel's enclosures intersect the per-pair kernel's and numpy's and are at most WIDTH_FACTOR wider; they hold the
    numpy reference's midpoints at a point, the dense float loss at points of the box, the structured float gradient
    at a point and (order 2) central differences of it at the box's centre."""
    LL, UV, W = _setup(g, mk, kind, mask_keys)
    c, w = np.array(centre), np.array(width)
    ab_lo, ab_hi = c - w / 2, c + w / 2
    lo, hi = np.array([_to_frame(*ab_lo, frame)]), np.array([_to_frame(*ab_hi, frame)])
    ev = {e: functools.partial(sc.score_loss, LL, engine=e, frame=frame) for e in sc.ENGINES}
    ratios: list = []
    pts = [ab_lo + np.array(f) * (ab_hi - ab_lo) for f in frac]
    for order in (0, 1, 2):
        out = {e: evaluate(lo, hi, None, None, f, order=order) for e, f in ev.items()}
        for ref in ("numba-pairs", "numpy"):
            for a, b in zip(_entries(out["numba"], order), _entries(out[ref], order)):
                _check_width(a, b, ratios)
        v = out["numba"] if order == 0 else out["numba"].v
        for q in pts:
            if frame == "scores" and not np.all((lo[0] <= _to_frame(*q, frame)) & (_to_frame(*q, frame) <= hi[0])):
                continue  # the (s, beta) box of the corners' sums need not hold every (alpha, beta) point
            d = _dense(g, mk, W, q[0], q[1], mask_keys)
            assert v.lo[0] - FLOAT_TOL * max(1.0, abs(d)) <= d <= v.hi[0] + FLOAT_TOL * max(1.0, abs(d))
    p = np.array([_to_frame(*pts[0], frame)])
    at_p = {e: evaluate(p, p, None, None, f, order=1) for e, f in ev.items()}
    for a, b in zip(_entries(at_p["numba"], 1), _entries(at_p["numpy"], 1)):
        assert np.all((a.lo <= b.mid) & (b.mid <= a.hi)), (a, b)  # the reference's midpoint is inside
    gab = _grad_ab(g, mk, UV, *pts[0], mask_keys)
    gp = gab if frame == "original" else np.array([gab[0], gab[1] - gab[0]])  # d/ds = d/dalpha, d/dbeta|_s
    for j in range(2):
        t = at_p["numba"].g[j]
        assert t.lo[0] - FLOAT_TOL * max(1.0, abs(gp[j])) <= gp[j] <= t.hi[0] + FLOAT_TOL * max(1.0, abs(gp[j]))
    if np.all(w > 4 * FD_STEP):
        _check_hessian_fd(g, mk, UV, mask_keys, ev["numba"], lo, hi, frame)


def _check_hessian_fd(g, mk, UV, mask_keys, f, lo, hi, frame):
    """Central differences of the float gradient at the box's centre lie in the Hessian enclosure."""
    H = evaluate(lo, hi, None, None, f, order=2).h
    x = 0.5 * (lo[0] + hi[0])

    def grad(y):
        a, b = (y[0] - y[1], y[1]) if frame == "scores" else (y[0], y[1])
        gab = _grad_ab(g, mk, UV, a, b, mask_keys)
        return gab if frame == "original" else np.array([gab[0], gab[1] - gab[0]])

    fd = np.zeros((2, 2))
    for k in range(2):
        step = np.eye(2)[k] * FD_STEP
        fd[:, k] = (grad(x + step) - grad(x - step)) / (2 * FD_STEP)
    for m, (j, k) in enumerate(((0, 0), (0, 1), (1, 1))):
        for val in {fd[j, k], fd[k, j]}:
            assert H[m].lo[0] - FD_TOL <= val <= H[m].hi[0] + FD_TOL, (j, k, H[m], val)


@pytest.mark.parametrize("frame", sc.FRAMES)
def test_unbounded_boxes_match_the_references(frame):
    """Boxes with infinite ends (the outer regions of the certificate): finite enclosures, intersecting the
    references' and no wider than WIDTH_FACTOR times theirs."""
    rng = np.random.default_rng(3)
    g = GeneralTopicModel(rng.dirichlet(np.full(15, 0.3), size=5), tau=2)
    LL, _, _ = _setup(g, Masking(), "stage1", False)
    inf = np.inf
    lo = np.array([[-inf, -1.0], [1.0, -inf], [-inf, -inf], [-2.0, 0.5]])
    hi = np.array([[0.5, 1.0], [inf, 0.0], [inf, -3.0], [inf, inf]])
    ev = {e: functools.partial(sc.score_loss, LL, engine=e, frame=frame) for e in sc.ENGINES}
    ratios: list = []
    for order in (0, 1, 2):
        out = {e: evaluate(lo, hi, None, None, f, order=order) for e, f in ev.items()}
        assert np.all(np.isfinite(_entries(out["numba"], order)[0].lo))
        for ref in ("numba-pairs", "numpy"):
            for a, b in zip(_entries(out["numba"], order), _entries(out[ref], order)):
                _check_width(a, b, ratios)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), T=st.integers(3, 4), tau=st.integers(1, 2))
def test_certificate_matches_the_numpy_route(seed, T, tau):
    """The whole-domain certificate with the new kernel and with the numpy engine on a small model: the same
    convergence and overlapping ``[lower, upper]``."""
    rng = np.random.default_rng(seed)
    g = GeneralTopicModel(rng.dirichlet(np.full(10, 0.3), size=T), tau=min(tau, T))
    mk = Masking()
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    r = optimal_attention(g, mk, options={"family": "label"})
    x0 = (float(r.x[0]), float(r.x[1]))
    certs = {}
    try:
        for engine in ("numba", "numpy"):
            sc._DEFAULT["engine"] = engine
            certs[engine] = ig.label_split_certificate(LabelLoss(g, mk, W.left, W.right), 1e-9, 2_000, x0, 2.0)
    finally:
        sc._DEFAULT["engine"] = None
    a, b = certs["numba"], certs["numpy"]
    assert a.converged == b.converged
    assert max(a.lower, b.lower) <= min(a.upper, b.upper)


_THREADS_SCRIPT = """
import json, numpy as np
from theorycheck import GeneralTopicModel, Masking
from theorycheck.solvers import optimal_value_matrix
from theorycheck.solvers.attention import _interval_label_kernel as K
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import _corner_exps
from theorycheck.solvers.attention._interval_scores_kernel import HIGH_CORNER, LOW_CORNER
from theorycheck.solvers.attention._interval_vec import IVec
rng = np.random.default_rng(5)
g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.5), size=4), tau=2)
f = optimal_value_matrix(g, Masking(), options={"dense": False}).x
LL = LabelLoss(g, Masking(), f.left, f.right)
chunks = list(LL._chunks()) * 300  # 13,200 pairs: 52 tiles, 52 blocks
coef = K.pack_soa(chunks, 300 * LL.pairs)
S = IVec(np.array([0.5, 1.0, -np.inf]), np.array([0.9, 1.0, 2.0]))
B = IVec(np.array([-0.3, 0.2, -1.0]), np.array([0.1, 0.2, np.inf]))
xs = K.box_exponentials(_corner_exps(S, B), LOW_CORNER, HIGH_CORNER)
print(json.dumps([K.label_sums(coef, 300 * LL.pairs, xs, o, s).tobytes().hex() for o in (0, 1, 2) for s in (1, 2)]))
"""


def test_same_bits_on_one_and_two_threads():
    """The blocks depend on the number of pairs only: runs with NUMBA_NUM_THREADS=1 and 2 give the same bits."""
    outs = []
    for n in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=n, PYTHONPATH=str(ROOT))
        run = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=600, check=True)  # fmt: skip
        outs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    arr = np.frombuffer(bytes.fromhex(outs[0][4]), dtype=float).reshape(3, 12)
    assert np.all(arr[:, 0::2] <= arr[:, 1::2])


def test_pack_soa_round_trip_and_indicator_check():
    """Tile ``t`` row ``2 k`` column ``j`` holds the lower end of interval ``k`` (from ``r``) of pair ``t TILE + j``;
    a class indicator other than 0 or 1 is refused."""
    rng = np.random.default_rng(0)
    g = GeneralTopicModel(rng.dirichlet(np.full(40, 0.5), size=5), tau=2)
    LL, _, _ = _setup(g, Masking(), "stage1", False)
    chunks = list(LL._chunks())
    coef = K.pack_soa(chunks, LL.pairs)
    lo = np.concatenate([np.broadcast_to(c[12].lo, c[0].lo.shape) for c in chunks])  # Gb_11: packed interval 9
    flat = coef.transpose(1, 0, 2).reshape(K.N_ROWS, -1)[:, : LL.pairs]
    assert np.array_equal(flat[18], lo)
    bad = [list(chunks[0])]
    bad[0][9] = IVec(np.full_like(chunks[0][9].lo, 0.5))
    with pytest.raises(RuntimeError, match="exactly 0 or 1"):
        K.pack_soa(bad, chunks[0][0].lo.shape[0])


def test_generated_tiles_are_current():
    """``_interval_label_tiles.py`` is exactly what the generator writes (it is never edited by hand)."""
    assert codegen._TARGET.read_text() == codegen.source()


def test_the_default_engine_follows_the_number_of_pairs():
    """Below :data:`VECTOR_FROM` pairs the per-pair kernel (it compiles several times faster), from there on the
    vectorised one; a chosen :data:`_DEFAULT` engine wins; the choice never depends on anything but the model."""
    g = GeneralTopicModel(np.full((2, 3), 1 / 3), tau=1)
    mk = Masking()
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, W.left, W.right)
    assert LL.pairs < sc.VECTOR_FROM and sc.default_engine(LL) == "numba-pairs"
    saved = sc.VECTOR_FROM
    try:
        sc.VECTOR_FROM = LL.pairs
        assert sc.default_engine(LL) == "numba"
        sc._DEFAULT["engine"] = "numpy"
        assert sc.default_engine(LL) == "numpy"
    finally:
        sc.VECTOR_FROM, sc._DEFAULT["engine"] = saved, None


@settings(max_examples=40)
@given(sizes=st.lists(st.integers(1, 3 * K.TILE + 5), min_size=1, max_size=5), seed=st.integers(0, 2**16))
def test_pack_soa_puts_pair_p_at_tile_p_div_tile(sizes, seed):
    """The packed layout against its definition, pair by pair: pair ``p`` (counted over the chunks in order) at tile
    ``p // TILE``, column ``p % TILE``, row ``2 k`` / ``2 k + 1`` the ends of its ``k``-th coefficient; the padding
    zero; ratios' and omega's lower ends raised to 0 (chunks of any size, crossing tile edges or not)."""
    rng = np.random.default_rng(seed)
    chunks = []
    for P in sizes:
        c = [IVec(rng.normal(size=P), rng.normal(size=P)) for _ in range(22)]
        for k in range(9, 12):  # the class indicators: exactly 0 or 1
            ind = rng.integers(0, 2, P).astype(float)
            c[k] = IVec(ind, ind.copy())
        chunks.append(c)
    total = sum(sizes)
    out = K.pack_soa(chunks, total)
    assert out.shape == ((total + K.TILE - 1) // K.TILE, K.N_ROWS, K.TILE)
    p = 0
    for c in chunks:
        for j in range(c[0].lo.shape[0]):
            for k, x in enumerate(c[3:22]):
                lo = max(x.lo[j], 0.0) if (k < 6 or k == 18) else x.lo[j]
                assert out[p // K.TILE, 2 * k, p % K.TILE] == lo
                assert out[p // K.TILE, 2 * k + 1, p % K.TILE] == x.hi[j]
            p += 1
    assert not out.reshape(-1, K.N_ROWS, K.TILE).transpose(1, 0, 2).reshape(K.N_ROWS, -1)[:, total:].any()
