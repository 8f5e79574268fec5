"""``benchmarks/bench_roofline.py``: the roofline arithmetic (AI, ceilings, bound, ratio) against hand-made records,
and the cost models against operations counted independently: the co-topic pair sums' flops and exponentials by
counting every numpy operation of their reference (:func:`pair_sums_reference`) on a tiny model, the interval
operation tally against a hand count."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_roofline as br

import theorycheck as tc
from theorycheck.population._attention_structured import make_evaluator
from theorycheck.population._cotopic_pairs import pair_sums_reference
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
    # the tables' model adds the contractions on top of the pair sums, never fewer operations
    full = br.cotopic_tables_cost(n, T, W.rank)
    assert full["flops"] > model["flops"] and full["exps"] == model["exps"]


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
    li = data["kernels"]["label_interval"]
    assert li["flops_source"] == "counted in this run" and li["nextafter"] > 0 and 0 <= li["nextafter_fraction"] < 1
    assert li["flops"] == br.interval_flops(li["op_counts"])[0]
