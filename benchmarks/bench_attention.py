"""Attention loss evaluators (SPEC §4.3): structured Numba kernel vs dense stacked GEMMs vs
a straightforward numpy loop vs Monte Carlo; FLOP rate vs this machine's dgemm; closed-form grid.

Run: ``python benchmarks/bench_attention.py``. All ratios are measured side by side in one run.
Nominal FLOP counts (multiply-add = 2; the same work definition for every version, so that
rates compare like for like) of the structured evaluator: ``W^T W`` (2 V1^3), the per-topic
block products ``E_k M_k`` (2 V1^3; the current kernel executes about half of them, see
:func:`quad_flops`), the topic-row products (2 T V1^2) and the per-set kernel
(~ n_sets V1 (2 tau^2 + 6 tau)); of the dense path with gradients: 6 V1^3 per topic set
(``H W^T``, ``G^T H``, ``G W``). The dgemm rate is the best ``V1 x V1 @ V1 x V1`` product time.
"dense-equiv/dgemm" divides the 2 V1^3 n_sets flops of a per-set ``H W^T`` evaluation by the
structured evaluator's time: how many dgemm-speed machines the structure replaces.

Before/after (second table): the structured kernels of commit ``BASELINE_COMMIT`` (read with
``git show``, compiled in this process) against the current ones on the same inputs, in one run
(the four timings of a configuration interleaved, best of 7 rounds):
the whole structured evaluation and the ``O(V1^3)`` group-quadratic-form kernel alone, whose
executed flops are ``2 V1^3`` before and ``~V1^3 + 2 V1^2`` after (only the upper triangle of the
symmetric ``Q[x]``; the rate column counts the flops each version executes), each against numpy's
dgemm on ``V1 x V1`` matrices measured in the same run, with the same thread settings.
"""

from __future__ import annotations

import math
import time

import numpy as np
from _common import best_time, best_times_interleaved, print_table, write_json

import theorycheck as tc
from theorycheck.population import _attention_kernels as kernels
from theorycheck.population import (
    alpha_beta_loss,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    attention_loss,
    attention_loss_grad,
    topic_sets,
)
from theorycheck.population._attention_dense import _context, _dense_sets
from theorycheck.sampling.montecarlo import mc_attention_loss

#: The last commit with the previous structured kernels (the "before" column).
BASELINE_COMMIT = "6170a39"


def baseline_kernels():
    """The kernels module of :data:`BASELINE_COMMIT` (``git show``; Numba cache off), or ``None``."""
    import subprocess
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    path = "theorycheck/population/_attention_kernels.py"
    try:
        src = subprocess.run(
            ["git", "show", f"{BASELINE_COMMIT}:{path}"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    src = src.replace("from .._memory import", "from theorycheck._memory import").replace("cache=True", "cache=False")
    mod = types.ModuleType("attention_kernels_baseline")
    exec(compile(src, f"{BASELINE_COMMIT}:{path}", "exec"), mod.__dict__)
    return mod


def before_after(rng, mk):
    """Rows ``[config, V1, dgemm GF/s, struct ms before/after, speedup, quad GF/s before/after, quad/dgemm]``."""
    old = baseline_kernels()
    if old is None:
        print("(git or the baseline commit unavailable: before/after table skipped)")
        return None, None
    rows = []
    for T, v, tau in [(10, 10, 3), (25, 20, 2), (100, 10, 2)]:
        tmx = tc.TopicModel(T=T, v=v, tau=tau)
        V1 = tmx.V1
        S = rng.normal(size=(V1, V1))
        W = rng.normal(size=(V1, V1)) / math.sqrt(V1)
        args = (
            S,
            W,
            None,
            topic_sets(tmx),
            tmx.token_topics(),
            _context(tmx, mk, False),
            (mk.p_mask, mk.p_c, mk.p_r),
            T,
            v,
        )
        E, M = kernels._score_tables(S, T, v)["E"], W.T @ W
        err = abs(old.structured_sq(*args).mean() / kernels.structured_sq(*args).mean() - 1.0)
        g = gemm_rate(V1, rng)
        t_old, t_new, q_old, q_new = best_times_interleaved(
            [
                lambda: old.structured_sq(*args),
                lambda: kernels.structured_sq(*args),
                lambda: old._group_quad_nb(E, M, T, v),
                lambda: kernels._group_quad_nb(E, M, T, v),
            ]
        )
        fl_old, fl_new = 2.0 * V1**3 + 2.0 * V1**2 * (T + 1), quad_flops(V1, T, v)
        rows.append([f"T={T} v={v} tau={tau}", V1, g / 1e9, t_old * 1e3, t_new * 1e3, t_old / t_new, err,
                     fl_old / q_old / 1e9, fl_new / q_new / 1e9, fl_old / q_old / g, fl_new / q_new / g,
                     q_old / q_new])  # fmt: skip
    headers = ["config", "V1", "dgemm GF/s", "struct ms before", "struct ms after", "speedup", "rel diff",
               "quad GF/s before", "quad GF/s after", "quad/dgemm before", "quad/dgemm after",
               "quad speedup"]  # fmt: skip
    return headers, rows


def quad_flops(V1, T, v):
    """Flops the current group-quadratic-form kernel executes: per query token and group ``k``,
    ``|G_k|`` multiply-adds on each column ``j >= min G_k`` (upper triangle), then one product and
    one group-sum add per column (the previous kernel: ``2 V1^3 + 2 V1^2 (T + 1)``)."""
    cols = [V1] + [V1 - 1 - (k - 1) * v for k in range(1, T + 1)]
    rows = [1] + [v] * T
    return V1 * sum(2 * r * c + 2 * c for r, c in zip(rows, cols))


def naive_numpy(S, W, tm, mk, sets):
    """Straightforward numpy: per topic set, softmax rows, O = H W^T, losses via row norms."""
    V1, n = tm.V1, tm.n_words
    tot = 0.0
    for st in sets:
        p = np.zeros(V1)
        for t in st:
            p[1 + t * tm.v : 1 + (t + 1) * tm.v] = 1.0 / (tm.tau * tm.v)
        m = mk.a * p
        m[1:] += mk.r / n
        m[0] += mk.q
        with np.errstate(divide="ignore"):
            Lg = S + np.log(m)
        H = np.exp(Lg - Lg.max(1, keepdims=True))
        H /= H.sum(1, keepdims=True)
        O = H @ W.T
        nrm = np.einsum("ij,ij->i", O, O)
        po = O @ p
        l_mask = nrm[0] - 2 * po[0] + 1
        w = np.arange(1, V1)
        l_keep = np.sum(p[1:] * (nrm[1:] - 2 * O[w, w])) + 1
        l_rand = np.mean(nrm[1:] - 2 * po[1:]) + 1
        tot += mk.p_mask * l_mask + mk.p_c * l_keep + mk.p_r * l_rand
    return tot / len(sets)


def gemm_rate(V1, rng):
    A, B = rng.normal(size=(V1, V1)), rng.normal(size=(V1, V1))
    t = best_time(lambda: A @ B, repeat=5, min_time=0.05)
    return 2.0 * V1**3 / t


def main():
    rng = np.random.default_rng(0)
    mk = tc.Masking()
    out = {}

    # 1. evaluators at the paper configuration
    tm = tc.TopicModel(T=10, v=10, tau=3)
    S = rng.normal(size=(tm.V1, tm.V1))
    W = rng.normal(size=(tm.V1, tm.V1)) / math.sqrt(tm.V1)
    sets = topic_sets(tm)
    exact = attention_loss(S, W, tm, mk)
    t_struct = best_time(lambda: attention_loss(S, W, tm, mk))
    t_dense = best_time(lambda: _dense_sets(S, W, None, sets, tm, mk, False), repeat=3)
    t_grad = best_time(lambda: attention_loss_grad(S, W, tm, mk), repeat=3)
    t_naive = best_time(lambda: naive_numpy(S, W, tm, mk, sets), repeat=3)
    err_naive = abs(naive_numpy(S, W, tm, mk, sets) - exact)
    err_dense = abs(_dense_sets(S, W, None, sets, tm, mk, False)[0].mean() - exact)
    rows = [
        ["structured Numba (attention_loss)", t_struct * 1e3, 1.0, 0.0],
        ["dense stacked GEMM (loss only)", t_dense * 1e3, t_dense / t_struct, err_dense],
        ["dense stacked GEMM (loss + dS, dW, db)", t_grad * 1e3, t_grad / t_struct, 0.0],
        ["straightforward numpy loop", t_naive * 1e3, t_naive / t_struct, err_naive],
    ]
    # Monte Carlo: time to reach a given standard error (its O(1/N) bias comes on top)
    Sab = alpha_beta_score_matrix(4.0, 1.0, tm)
    Wab = alpha_beta_value_matrix(tm, mk)
    ex_ab = attention_loss(Sab, Wab, tm, mk)
    mc_attention_loss(Sab, Wab, tm, mk, N=(100, 150), n_docs=200, seed=0)  # JIT warm-up
    t0 = time.perf_counter()
    est = mc_attention_loss(Sab, Wab, tm, mk, N=(100, 150), n_docs=4000, seed=1)
    t_mc = time.perf_counter() - t0
    t_mc_1e3 = t_mc * (est.stderr / 1e-3) ** 2
    t_mc_1e10 = t_mc * (est.stderr / 1e-10) ** 2
    rows.append(
        [
            f"Monte Carlo N=100-150, 4000 docs (SE {est.stderr:.1e}, bias {est.mean - ex_ab:+.1e})",
            t_mc * 1e3,
            t_mc / t_struct,
            abs(est.mean - ex_ab),
        ]
    )
    rows.append(
        ["Monte Carlo, extrapolated to SE = 1e-10 (bias ignored)", t_mc_1e10 * 1e3, t_mc_1e10 / t_struct, 1e-10]
    )
    headers = ["T=v=10, tau=3 (V1=101, 120 sets)", "ms", "x structured", "|err| vs exact"]
    print_table(headers, rows)
    out["evaluators"] = dict(headers=headers, rows=rows, mc_seconds_to_se_1em3=t_mc_1e3)

    # 2. FLOP rate vs dgemm
    frows = []
    for T, v, tau in [(10, 10, 3), (25, 20, 2), (100, 10, 2)]:
        tmx = tc.TopicModel(T=T, v=v, tau=tau)
        V1, n_sets = tmx.V1, tmx.n_topic_sets
        Sx = rng.normal(size=(V1, V1))
        Wx = rng.normal(size=(V1, V1)) / math.sqrt(V1)
        g = gemm_rate(V1, rng)
        ts = best_time(lambda: attention_loss(Sx, Wx, tmx, mk), repeat=3, min_time=0.02)
        fl_s = 4.0 * V1**3 + 2.0 * T * V1**2 + n_sets * V1 * (2 * tau**2 + 6 * tau)
        sub = topic_sets(tmx)[: max(2, min(n_sets, int(1e10 / (6.0 * V1**3))))]
        td = best_time(lambda: _dense_sets(Sx, Wx, None, sub, tmx, mk, False, want_grad=True), repeat=2, min_time=0.02)
        fl_d = 6.0 * V1**3 * len(sub)
        eff = 2.0 * V1**3 * n_sets / ts  # flops a per-set H W^T evaluation would need, per second
        frows.append(
            [
                f"T={T} v={v} tau={tau}",
                V1,
                n_sets,
                g / 1e9,
                ts * 1e3,
                fl_s / ts / 1e9,
                fl_s / ts / g,
                eff / g,
                fl_d / td / 1e9,
                fl_d / td / g,
            ]
        )
    fh = [
        "config",
        "V1",
        "sets",
        "dgemm GF/s",
        "struct ms",
        "struct GF/s",
        "struct/dgemm",
        "dense-equiv/dgemm",
        "dense+grad GF/s",
        "dense/dgemm",
    ]
    print()
    print_table(fh, frows)
    out["flops"] = dict(headers=fh, rows=frows)

    # 2b. before/after: the previous structured kernels against the current ones, same inputs, one run
    bh, brows = before_after(rng, mk)
    if brows is not None:
        print(f"\nstructured kernels before ({BASELINE_COMMIT}) / after, same inputs, this run")
        print_table(bh, brows)
        out["before_after"] = dict(baseline_commit=BASELINE_COMMIT, headers=bh, rows=brows)

    # 3. closed-form landscape throughput
    A = np.linspace(-20, 20, 1000)
    grows = []
    for value in ("block", "identity"):
        t = best_time(lambda: alpha_beta_loss(A[:, None], A[None, :], tm, mk, value), repeat=3, min_time=0.1)
        grows.append([value, 1e6 / t / 1e6, t * 1e3])
    gh = ["closed form, 1000 x 1000 grid", "Mpoints/s", "ms per grid"]
    print()
    print_table(gh, grows)
    out["closed_form_grid"] = dict(headers=gh, rows=grows)
    import os

    out["load_average"] = os.getloadavg()
    path = write_json("attention", out)
    print(f"\nload average {out['load_average']}; written {path}")


if __name__ == "__main__":
    main()
