"""value_loss: Numba block-sum kernel vs the dense-moment numpy reference vs one pass over W.

The exact uniform-attention loss needs only the topic-block column sums of W (SPEC §4.0),
so its cost is one read of W: the bound is the time of ``W.sum()`` (a single streaming pass).
Run: ``python benchmarks/bench_value_loss.py``.
"""

from __future__ import annotations

import numpy as np
from _common import best_time, print_table, write_json

import theorycheck as tc
from theorycheck.population import value_loss
from theorycheck.population._value_loss import _value_loss_ref


def main():
    mk = tc.Masking()
    rows = []
    for T, v in [(10, 10), (20, 25), (40, 50), (50, 80)]:
        tm = tc.TopicModel(T=T, v=v, tau=3)
        W = np.random.default_rng(0).normal(size=(tm.V1, tm.V1))
        t_kernel = best_time(lambda: value_loss(W, tm, mk))
        t_pass = best_time(lambda: W.sum())
        t_ref = best_time(lambda: _value_loss_ref(W, tm, mk), repeat=2) if tm.V1 <= 2100 else float("nan")
        err = abs(value_loss(W, tm, mk) - _value_loss_ref(W, tm, mk)) if tm.V1 <= 2100 else float("nan")
        gbs = 8 * tm.V1**2 / t_kernel / 1e9
        rows.append([tm.V1, t_kernel * 1e3, t_pass * 1e3, t_kernel / t_pass, t_ref / t_kernel, gbs, err])
    headers = ["V1", "kernel_ms", "W.sum_ms", "kernel/pass", "ref/kernel", "kernel_GB/s", "|kernel-ref|"]
    print_table(headers, rows)
    path = write_json("value_loss", {"headers": headers, "rows": rows})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
