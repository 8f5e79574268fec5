"""``benchmarks/bench_roofline.py``: the roofline arithmetic (AI, ceilings, bound, ratio) against hand-made records,
and the cost models against operations counted independently: the co-topic pair sums' flops and exponentials by
counting every numpy operation of their reference (:func:`pair_sums_reference`) on a tiny model; the per-pair flops
of the label pass, of the co-topic pass and of the fused training step by running their Numba kernels' Python source on
numbers that count every arithmetic operation (matrix products by numpy, counted ``2 m k n``); the interval
operation tally against a hand count."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_roofline as br

import theorycheck as tc
import theorycheck.nn._factored_squared as squared_module
import theorycheck.population._set_laws as set_laws_module
from theorycheck.nn import Trainer, preset
from theorycheck.population._attention_structured import _sq_kernel, make_evaluator
from theorycheck.population._cotopic_pairs import build_cost, pair_sums_reference
from theorycheck.population._set_laws import pass_cost
from theorycheck.solvers import optimal_value_matrix
from theorycheck.solvers.attention._interval_vec import IVec


def test_roofline_point_of_a_hand_made_record():
    peaks = {"flops": 1e10, "bandwidth": 4e9, "exp": 5e8}
    # AI = 1 flop/byte: the memory ceiling 4e9 < 1e10 binds; 1e9 flops in 0.5 s = 2e9 flop/s, half the bound
    r = br.roofline_point(1e9, 1e9, 0.5, peaks)
    assert r["AI"] == 1.0 and r["achieved"] == 2e9 and r["achieved_bytes_per_s"] == 2e9
    assert r["binding"] == "memory" and r["bound"] == 4e9 and r["ratio"] == 2.0
    # AI = 100: compute-bound at 1e10; 1e9 flops in 1 s -> ten times below
    r = br.roofline_point(1e9, 1e7, 1.0, peaks)
    assert (r["binding"], r["bound"], r["ratio"]) == ("compute", 1e10, 10.0)
    # 1e8 exponentials at 5e8/s take 0.2 s: at most 1e9 / 0.2 = 5e9 flop/s, below the compute and memory ceilings
    r = br.roofline_point(1e9, 1e7, 1.0, peaks, exps=1e8)
    assert r["ceilings"]["exp"] == 5e9 and r["binding"] == "exp" and r["ratio"] == 5.0
    with pytest.raises(ValueError, match="seconds"):
        br.roofline_point(1e9, 1e9, 0.0, peaks)


@given(
    st.floats(1e3, 1e15), st.floats(1e3, 1e15), st.floats(1e-6, 1e3), st.floats(1e8, 1e12), st.floats(1e8, 1e11),
    st.floats(1e7, 1e10), st.floats(0.0, 1e12),
)  # fmt: skip
def test_bound_is_the_lowest_ceiling_and_the_time_floor(flops, nbytes, seconds, P, B, X, exps):
    r = br.roofline_point(flops, nbytes, seconds, {"flops": P, "bandwidth": B, "exp": X}, exps=exps)
    # the bound as a time: no kernel can finish before its flops at P, its bytes at B and its exps at X
    floor = max(flops / P, nbytes / B, exps / X if exps else 0.0)
    assert math.isclose(flops / r["bound"], floor, rel_tol=1e-12)
    assert math.isclose(r["ratio"], seconds / floor, rel_tol=1e-12)
    assert math.isclose(r["AI"] * nbytes, flops, rel_tol=1e-12)


class _Counted(np.ndarray):
    """An array that tallies the floating-point work of every numpy ufunc applied to it (matmul: ``2 m k n``;
    elementwise: one per output element; ``exp`` apart)."""

    tally = {"flops": 0, "exps": 0}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [np.asarray(x) if isinstance(x, _Counted) else x for x in inputs]
        out = getattr(ufunc, method)(*args, **kwargs)
        if ufunc is np.matmul:
            a, b = args
            _Counted.tally["flops"] += 2 * a.shape[-2] * a.shape[-1] * b.shape[-1]
        elif ufunc is np.exp:
            _Counted.tally["exps"] += np.size(out)
        else:
            _Counted.tally["flops"] += np.size(out)
        return out.view(_Counted) if isinstance(out, np.ndarray) else out


@pytest.mark.parametrize("T, n", [(3, 40), (5, 90)])
def test_pair_sum_flops_match_the_counted_reference(T, n):
    phi = np.random.default_rng(T).dirichlet(np.full(n, 0.3), size=T) + 1e-9
    g = tc.GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=2)
    mk = tc.Masking()
    W = optimal_value_matrix(g, mk, options={"dense": False}).x
    pb = make_evaluator(g, mk, W, "co-topic").pb
    assert pb is not None
    plain = pair_sums_reference(pb, 0.8)
    for name in ("u", "uT", "F2"):
        setattr(pb, name, getattr(pb, name).view(_Counted))
    _Counted.tally.update(flops=0, exps=0)
    counted = pair_sums_reference(pb, 0.8)
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(counted, plain))  # the same computation
    model = br.pair_sums_flops(n, T)
    assert _Counted.tally == {"flops": model["flops"], "exps": model["exps"]}
    # build_cost (SPEC §11.8(a)) is the pair sums plus the per-query contractions, as the SPEC writes them
    k, p, q = W.rank, T + 1, (T + 1) * (T + 2) // 2
    per_query = 2 * p * p * T + 2 * p * k * T + 2 * k * k * T + 6 * k * T
    full = build_cost(n, T, k, True)
    assert full["flops"] - model["flops"] == n * (2 * per_query + 4 * k * T * T + 6 * k * T * T)
    assert full["exps"] == model["exps"] and full["gemm_flops"] == 4 * n * n * q


def test_interval_tally_against_a_hand_count():
    a = IVec(np.linspace(0.1, 0.5, 5), np.linspace(0.2, 0.6, 5))
    b = IVec(np.full(5, 1.0), np.full(5, 2.0))
    with br.count_interval_ops() as counts:
        ((a * b + a).exp() - b).recip()
    # one of each per element; every result rounded outward at both ends (exp: its product's two ends, then the sum's)
    assert {k: v for k, v in counts.items() if v} == {
        "mul": 5, "add": 5, "exp": 5, "sub": 5, "recip": 5, "nextafter": 2 * 5 * 5,
    }  # fmt: skip
    flops, exps = br.interval_flops(counts)
    assert flops == 5 * (10 + 2 + 4 + 2 + 4) and exps == 10
    a * b  # the instrumentation is gone after the block
    assert counts["mul"] == 5


def test_quick_run_writes_a_consistent_record(tmp_path, monkeypatch):
    """The script end to end (``--quick``): every kernel's record holds its roofline as :func:`roofline_point` defines
    it from the record's own flops, bytes, exponentials and time and the run's peaks, and a reason exactly when it
    is beyond the target (no timing is asserted)."""
    monkeypatch.setenv("THEORYCHECK_BENCH_OUT", str(tmp_path))
    assert br.main(["--quick"]) == 0
    data = json.loads((tmp_path / "roofline.json").read_text())
    pk = data["peaks"]
    assert pk["flops"] == pk["dgemm_flops_per_cpu_s_1t"] > 0
    assert pk["bandwidth"] == max(pk["triad_bytes_per_cpu_s"], pk["sum_bytes_per_cpu_s"]) > 0
    assert pk["exp"] == max(pk["np_exp_per_cpu_s"], pk["numba_exp_per_cpu_s"]) > 0
    assert set(data["kernels"]) == set(br.KERNELS)
    for name, rec in data["kernels"].items():
        again = br.roofline_point(rec["flops"], rec["bytes"], rec["time"], pk, rec["exps"])
        assert all(math.isclose(rec[k], again[k], rel_tol=1e-12) for k in ("AI", "achieved", "bound", "ratio")), name
        assert rec["binding"] == again["binding"] and rec["time"] == rec["cpu"] > 0
        assert (rec["reason"] is None) == (rec["ratio"] <= data["target_ratio"]), name
        if rec["exps"]:  # the exponentials' share of the time at the rate of the exp the kernel calls
            rate = pk[f"{br.EXP_ENGINE[name]}_exp_per_cpu_s"]
            assert math.isclose(rec["exp_share"], rec["exps"] / rate / rec["time"], rel_tol=1e-12), name
    li = data["kernels"]["label_interval"]
    assert li["flops_source"] == "counted in this run" and li["nextafter"] > 0 and 0 <= li["nextafter_fraction"] < 1
    assert li["flops"] == br.interval_flops(li["op_counts"])[0]


class _Num:
    """A float that counts every arithmetic operation (``+ - * /``) it takes part in; ``abs`` and negation are free."""

    __slots__ = ("v",)
    ops = 0

    def __init__(self, v):
        self.v = float(v)

    def __abs__(self):
        return _Num(abs(self.v))

    def __neg__(self):
        return _Num(-self.v)

    def __lt__(self, o):
        return self.v < (o.v if isinstance(o, _Num) else o)

    def __gt__(self, o):
        return self.v > (o.v if isinstance(o, _Num) else o)


def _counted_op(f, swap):
    def op(a, b):
        _Num.ops += 1
        x, y = (b, a) if swap else (a, b)
        return _Num(f(x.v if isinstance(x, _Num) else x, y.v if isinstance(y, _Num) else y))

    return op


for _name, _f in (
    ("add", float.__add__),
    ("sub", float.__sub__),
    ("mul", float.__mul__),
    ("truediv", float.__truediv__),
):
    setattr(_Num, f"__{_name}__", _counted_op(_f, False))
    setattr(_Num, f"__r{_name}__", _counted_op(_f, True))


def _nums(shape, rng):
    a = np.empty(shape, dtype=object)
    for idx in np.ndindex(shape):
        a[idx] = _Num(rng.uniform(0.5, 1.5))
    return a


def _object_numpy():
    """numpy with ``zeros``/``empty`` of floats made object arrays (the kernels' scratch arrays then hold counters)."""
    ns = type(sys)("np_objects")
    ns.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("__")})

    def alloc(shape, dtype=float):
        if dtype is not float:
            return np.zeros(shape, dtype=dtype)
        a = np.empty(shape, dtype=object)
        a[...] = 0.0
        return a

    ns.zeros = ns.empty = alloc
    return ns


@pytest.mark.parametrize("want_grad, per_pair", [(False, 46), (True, br.LABEL_PAIR_FLOPS)])
def test_label_pass_flops_per_pair_counted_in_the_kernel_source(want_grad, per_pair):
    """``_sq_kernel`` run as Python on counting numbers: the flops of one more word query are the model's."""
    rng = np.random.default_rng(0)

    def ops(n_words):
        Dw, Dg, Dq = _nums((1, n_words, 7), rng), _nums((1, 1, 4), rng), _nums((1, 1, 4), rng)
        out = np.empty((4, 1), dtype=object)
        out[...] = 0.0
        _Num.ops = 0
        consts = np.array([1.3, 0.1, 1e-3, 0.5, 0.0])
        grp = np.zeros(n_words, dtype=np.int64)
        _sq_kernel.py_func(Dw, Dg, Dq, grp, _nums((6, n_words), rng), _nums((1,), rng), consts, want_grad, out)
        return _Num.ops

    assert ops(3) - ops(2) == ops(2) - ops(1) == per_pair


@pytest.mark.parametrize("want_beta", [False, True])
def test_cotopic_pass_flops_per_pair_counted_in_the_kernel_source(want_beta, monkeypatch):
    """``_set_kernel`` run as Python on counting numbers: the flops of one more word query of a set that shares all
    but its last member with the one before (a lexicographic enumeration) at one and at two ``alpha`` are
    :func:`pass_cost`'s per pair."""
    monkeypatch.setitem(set_laws_module._set_kernel.py_func.__globals__, "np", _object_numpy())
    rng = np.random.default_rng(1)
    T, tau = 5, 3

    def ops(sets, xb, n_alpha):
        sets = np.array(sets, dtype=np.int64)
        lin, quad, scal = _nums((1, 11, T, xb), rng), _nums((1, 4, T, T, xb), rng), _nums((1, 6, xb), rng)
        part = np.empty((1, n_alpha, 4, len(sets)), dtype=object)
        part[...] = 0.0
        _Num.ops = 0
        set_laws_module._set_kernel.py_func(sets, lin, quad, scal, xb, np.full(n_alpha, 1.2), np.full(n_alpha, 1.1),
                                            np.array([0.1, 1e-3]), _nums((len(sets),), rng), _Num(0.3), want_beta,
                                            part)  # fmt: skip
        return _Num.ops

    for n_alpha in (1, 2):

        def next_set(xb, n_alpha=n_alpha):  # the second set of a lexicographic pair: only its last member is read
            return ops([[0, 1, 2], [0, 1, 3]], xb, n_alpha) - ops([[0, 1, 2]], xb, n_alpha)

        per_query = next_set(2) - next_set(1)  # one more query in the block (the block's own sums cancel)
        model = pass_cost(1, T, 1, tau, n_alpha, want_beta)
        assert per_query == model["flops"], (n_alpha, per_query, model)


def _counting_numpy(tally):
    """:func:`_object_numpy` with ``full`` too, ``dot`` by numpy on the values (``2 m k n`` flops) and ``exp`` counted
    apart (into ``tally["exps"]``)."""
    ns = _object_numpy()

    def full(shape, value, dtype=float):
        a = np.empty(shape, dtype=object)
        a[...] = _Num(value)
        return a

    def values(a):
        return np.vectorize(lambda x: x.v if isinstance(x, _Num) else x, otypes=[float])(a)

    def dot(a, b):
        A, B = values(a), values(b)
        _Num.ops += 2 * A.shape[0] * A.shape[-1] * (B.shape[1] if B.ndim == 2 else 1)
        out = np.dot(A, B)
        return _nums_of(out) if out.ndim else _Num(out)

    def exp(x):
        tally["exps"] += 1
        return _Num(math.exp(x.v))

    ns.full, ns.dot, ns.exp = full, dot, exp
    return ns


def _nums_of(a):
    out = np.empty(np.shape(a), dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = _Num(a[idx])
    return out


def test_train_step_flops_counted_in_the_kernel_source(monkeypatch):
    """``_squared_step`` (with ``_forward_tables``) run as Python on counting numbers, on the ``two-stage`` preset's
    population batch at 3 topics x 2 words: its flops and exponentials are :func:`train_step_cost`'s."""
    cfg = preset("two-stage")
    cfg = replace(cfg, data=replace(cfg.data, T=3, v=2, tau=2), model=replace(cfg.model, V1=7, d=7), steps=1)
    fk = Trainer(cfg, progress=False).batch_at(0).key_factors()
    g = fk.grid
    rng = np.random.default_rng(2)
    V1 = d = 7
    tally = {"exps": 0}
    fake = _counting_numpy(tally)
    monkeypatch.setitem(squared_module._squared_step.py_func.__globals__, "np", fake)
    monkeypatch.setitem(squared_module._squared_step.py_func.__globals__, "_forward_tables",
                        squared_module._forward_tables.py_func)  # fmt: skip
    outs = [_nums_of(np.zeros(shape)) for shape in ((V1, V1), (V1, d), (d,))]
    VtT = rng.normal(size=(V1, d))
    _Num.ops = 0
    squared_module._squared_step.py_func(
        _nums_of(rng.normal(size=(V1, V1))), _nums_of(VtT[fk.ridx]), _nums_of(rng.normal(size=d)), 0.7, fk.rptr,
        fk.ridx, fk.rval, fk.support, g.xptr, g.xidx, _nums_of(g.BX), _nums_of(fk.U), _nums_of(g.UUw), _nums_of(g.UU),
        g.pj, g.pk, _nums_of(g.TU), _nums_of(g.Theta), _nums_of(g.N), _nums_of(g.W), g.present, _Num(g.sumw),
        _nums_of(g.db_targets), *outs,
    )  # fmt: skip
    G, r = fk.U.shape
    model = br.train_step_cost(V1=V1, d=d, G=G, r=r, nnz=len(fk.ridx), n_support=len(fk.support),
                               s=g.Theta.shape[1], nx=len(g.xidx))  # fmt: skip
    assert (_Num.ops, tally["exps"]) == (model["flops"], model["exps"])


class _Tally:
    """A float that counts the arithmetic done with it (class-wide) and compares like its value."""

    ops = 0

    def __init__(self, v):
        self.v = float(v)

    @staticmethod
    def _val(x):
        return x.v if isinstance(x, _Tally) else x

    def _op(self, other, f, swap=False):
        _Tally.ops += 1
        a, b = self.v, self._val(other)
        return _Tally(f(b, a) if swap else f(a, b))

    __add__ = lambda s, o: s._op(o, float.__add__)  # noqa: E731
    __radd__ = lambda s, o: s._op(o, float.__add__, True)  # noqa: E731
    __sub__ = lambda s, o: s._op(o, float.__sub__)  # noqa: E731
    __rsub__ = lambda s, o: s._op(o, float.__sub__, True)  # noqa: E731
    __mul__ = lambda s, o: s._op(o, float.__mul__)  # noqa: E731
    __rmul__ = lambda s, o: s._op(o, float.__mul__, True)  # noqa: E731
    __truediv__ = lambda s, o: s._op(o, float.__truediv__)  # noqa: E731
    __rtruediv__ = lambda s, o: s._op(o, float.__truediv__, True)  # noqa: E731
    __neg__ = lambda s: _Tally(-s.v)  # noqa: E731
    __lt__ = lambda s, o: s.v < _Tally._val(o)  # noqa: E731
    __le__ = lambda s, o: s.v <= _Tally._val(o)  # noqa: E731
    __gt__ = lambda s, o: s.v > _Tally._val(o)  # noqa: E731
    __ge__ = lambda s, o: s.v >= _Tally._val(o)  # noqa: E731
    __eq__ = lambda s, o: s.v == _Tally._val(o)  # noqa: E731
    __hash__ = lambda s: hash(s.v)  # noqa: E731


@pytest.mark.parametrize("values", ["positive", "mixed"])
def test_label_certificate_flops_counted_by_running_the_generated_loop(values, monkeypatch):
    """The order-2 pair loop of the vectorised kernel run as Python on counting numbers (roundings counted apart):
    per pair exactly the operators and roundings :func:`tile_flops` reads from its source (a conditional expression
    counted by its costlier branch: here every one either costs the same both ways or takes that branch)."""
    from theorycheck.solvers.attention import _interval_label_tiles as tiles

    calls = {"n": 0}

    def rounding(x):
        calls["n"] += 1
        return x

    monkeypatch.setattr(tiles, "_up", rounding)
    monkeypatch.setattr(tiles, "_dn", rounding)
    rng = np.random.default_rng(1)
    lo = 0.05 if values == "positive" else -0.5

    def run(L):
        c = np.empty((38, 256), dtype=object)
        for idx in np.ndindex(c.shape):
            c[idx] = _Tally(rng.uniform(max(lo, 0.05) if idx[0] % 2 == 0 else 0.6, 1.5))
        xs = np.empty((1, 12), dtype=object)
        for idx in np.ndindex(xs.shape):
            xs[idx] = _Tally(rng.uniform(0.1, 2.0))
        buf = np.empty(12 * 256, dtype=object)
        _Tally.ops, calls["n"] = 0, 0
        tiles.tile_2_1.py_func(c, L, xs, 0, buf)
        return _Tally.ops, calls["n"]

    (o1, r1), (o2, r2) = run(1), run(2)
    model = br.tile_flops()
    per_op, per_round = o2 - o1, r2 - r1
    assert (per_op, per_round) == (model["operators"], model["roundings"])
