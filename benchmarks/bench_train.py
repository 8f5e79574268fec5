"""Training speed: the official-demo model in numpy (count-based and position-based attention)
against a PyTorch CPU implementation of the same model, side by side in one run.

The model (SPEC §5.1): one layer, one head, one-hot embedding (d = 101), uniform attention
frozen (W^K = W^Q = 0), W^V and the output bias trained, identity decoder, cross-entropy over the
selected positions, Adam lr 0.01, batch 40, documents of length U[100, 150], selected positions
hidden from the keys. PyTorch computes the full N x N attention like the official HF BERT (scores
from the frozen zero K/Q, a key mask, a softmax, ``A @ V``); our count-based path uses the fact
that with no positional encoding every query with the same input token shares one attention
distribution over the distinct key tokens weighted by their counts. Both run the same batches
(pre-sampled, masked once) and report steps per second (one step = batch preparation from the
token arrays + forward + backward + Adam update). torch is the optional ``bench`` extra
(``torch==2.13.0``); without it the torch columns are skipped.

Second table: the 4-layer x 4-head model of preset ``deep-4x4`` with identical tokens of a
document merged into one row (exact at any depth, see ``CountBatch.to_positions``) against one
row per position.

Third table: wall time of the joint two-stage run (preset ``two-stage``) until its second stage
starts, and the steps per second of the exact population gradient.

Run: ``python benchmarks/bench_train.py``.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager

import numpy as np
from _common import print_table, write_json

from theorycheck._alloc import keep_large_allocations
from theorycheck.nn import ModelConfig, Trainer, Transformer, make_batch, make_optimizer, preset
from theorycheck.sampling import mask_documents, sample_documents

#: (full run, --quick) timed steps per implementation of each model table.
N_STEPS = {"official-demo": (30, 10), "one-layer": (30, 10), "deep-4x4": (12, 6)}
EQUIV_RTOL = 1e-9
GOAL = 5.0


def one_layer_config():
    """Model (a): the official demo's setting (SPEC §5.1: LDA alpha 0.1, T = v = 10, N ~ U[100, 150],
    batch 40, one-hot embedding, identity decoder, CE averaged over all selected positions, selected
    positions hidden from the keys, Adam lr 0.01, ``U(+-1/sqrt(d))`` init) with softmax attention
    and ``W^K, W^Q, W^V`` (and ``b^dec``) trained, score factor ``1/sqrt(d_a)`` as in BERT."""
    cfg = preset("official-demo")
    m = cfg.model.to_dict()
    m.update(attention="softmax", train=["W_K", "W_Q", "W_V", "b_dec"])
    return cfg.replace(model=ModelConfig.from_dict(m))


def bench_configs() -> dict:
    """``{table: TrainConfig}``: the uniform-attention demo, model (a) and model (b) = ``deep-4x4``."""
    return {"official-demo": preset("official-demo"), "one-layer": one_layer_config(), "deep-4x4": preset("deep-4x4")}


def _batches(cfg, n, seed=0):
    """``n`` masked batches of ``cfg.batch_size`` documents, sampled once (the same for every row)."""
    tm, mk = cfg.data.topic_model(), cfg.data.masking()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        docs = sample_documents(tm, cfg.batch_size, cfg.data.N, rng=rng)
        out.append(mask_documents(docs, tm, mk, rng=rng))
    return out


def _with_form(cfg, count_based: str) -> ModelConfig:
    return ModelConfig.from_dict({**cfg.model.to_dict(), "count_based": count_based})


#: Timed passes over the batches per row; the row reports their median.
REPEATS = 3


class _Runner:
    """One row of a table: ``step(mb) -> loss`` and ``settings()``, a context manager that puts the
    thread counts of the row in force (entered around every timed pass)."""

    def __init__(self, step, settings):
        self.step, self.settings = step, settings


def _numpy_runner(cfg, count_based: str, threads: int = 1) -> _Runner:
    """Our model, one step = ``make_batch`` + forward + backward + the preset's optimizer, with
    ``threads`` Numba threads and one BLAS thread, as :class:`~theorycheck.nn.Trainer` runs it: the
    large products are row-parallel Numba kernels (:func:`theorycheck.nn._dense_kernels.matmul_rows`)
    and the per-document attention runs in parallel over documents, each calling a serial BLAS.
    (A multi-threaded BLAS next to Numba's threads halved the rate: OpenBLAS's workers keep
    spinning after each product and take the cores from Numba's.)"""
    import numba

    from theorycheck._threads import blas_threads

    mc = _with_form(cfg, count_based)
    model = Transformer(mc, seed=0)
    opt = make_optimizer(cfg.optim)
    names = model.trainable_names()
    params = {n: model.get(n) for n in names}
    grads = {n: model.grad(n) for n in names}

    def step(mb):
        b = make_batch(mc, mb.inputs, mb.selected, mb.targets, average=cfg.data.average)
        model.zero_grad()
        loss = model.loss_and_grad(b)
        opt.step(params, grads, cfg.optim.lr)
        return loss

    @contextmanager
    def settings():
        n_numba = numba.get_num_threads()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            with blas_threads(1):
                yield
        finally:
            numba.set_num_threads(n_numba)

    return _Runner(step, settings)


def _torch_runner(cfg, dtype: str, threads: int) -> _Runner:
    """The PyTorch reference (full N x N attention) from the same initial parameters."""
    import torch
    from _torch_models import TorchTransformer

    state = Transformer(cfg.model, seed=0).state_dict()
    tmodel = TorchTransformer(cfg.model, state, optim=cfg.optim, average=cfg.data.average, dtype=dtype)

    @contextmanager
    def settings():
        n_prev = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(n_prev)

    return _Runner(lambda mb: tmodel.step(mb.inputs, mb.selected, mb.targets), settings)


def _timed_interleaved(runners, batches):
    """``[(median steps/s, losses of the first pass), ...]``, one per runner: after one warm-up step
    each, :data:`REPEATS` rounds in which every runner times one pass over ``batches`` in turn.
    Interleaving the rows (instead of timing each row's passes back to back) exposes every row
    to the same drift of a shared machine's speed, so the ratios between rows are fairer."""
    for r in runners:
        with r.settings():
            r.step(batches[0])
    rates = [[] for _ in runners]
    first = [None for _ in runners]
    for _ in range(REPEATS):
        for i, r in enumerate(runners):
            with r.settings():
                t0 = time.perf_counter()
                losses = [r.step(mb) for mb in batches]
                rates[i].append(len(batches) / (time.perf_counter() - t0))
            first[i] = losses if first[i] is None else first[i]
    return [(float(np.median(rt)), f) for rt, f in zip(rates, first)]


def _measure(cfg, batches, runs):
    """Steps per second and first-pass losses of the rows ``runs`` = ``(implementation, threads,
    blas, dtype, form)`` (``form`` None: torch), timed interleaved (:func:`_timed_interleaved`)."""
    runners = [
        _torch_runner(cfg, dt, threads) if form is None else _numpy_runner(cfg, form, threads)
        for _, threads, _, dt, form in runs
    ]
    return _timed_interleaved(runners, batches)


def _equivalence(name, cfg, mb):
    """Loss and every gradient, numpy (merged / count form) vs torch float64, on one batch."""
    from _torch_models import compare_with_numpy

    rel = compare_with_numpy(_with_form(cfg, "auto"), mb.inputs, mb.selected, mb.targets, average=cfg.data.average)
    if not rel["max"] <= EQUIV_RTOL:
        raise AssertionError(f"{name}: torch and numpy disagree (relative errors {rel})")
    return rel


def _model_rows(name, cfg, batches, has_torch: bool):
    """JSON rows ``{model, implementation, threads, dtype, steps_per_s, ...}`` of one model table: our
    merged / count form at 1 and 2 threads, one row per position, torch at 1 and 2 threads."""
    first = "numpy token counts" if cfg.model.n_layers == 1 else "numpy merged tokens"
    runs = [
        (first, 1, 1, "float64", "auto"),
        (first, 2, 1, "float64", "auto"),
        ("numpy positions", 1, 1, "float64", "never"),
    ]
    if has_torch:
        import torch

        runs += [
            (f"torch {torch.__version__} positions", t, t, dt, None) for t in (1, 2) for dt in ("float32", "float64")
        ]
    rows = []
    for (impl, threads, blas, dt, _), (sps, losses) in zip(runs, _measure(cfg, batches, runs)):
        rows.append(
            dict(
                model=name,
                implementation=impl,
                threads=threads,
                blas_threads=blas,
                dtype=dt,
                steps_per_s=sps,
                loss_last=losses[-1],
            )
        )
    ref = rows[0]
    for r in rows:
        r["merged_speedup"] = ref["steps_per_s"] / r["steps_per_s"]
        r["loss_rel_diff"] = abs(r["loss_last"] - ref["loss_last"]) / abs(ref["loss_last"])
    return rows


def _print_model_table(name, cfg, rows):
    m, o = cfg.model, cfg.optim
    print(
        f"\n{name}: {m.n_layers} layer(s) x {m.n_heads} head(s), train {'/'.join(m.train)}, "
        f"{m.attention} attention, batch {cfg.batch_size}, N ~ U{list(cfg.data.N)}, {m.loss}, {o.name} lr {o.lr:g}"
    )
    headers = ["implementation", "threads", "BLAS thr", "dtype", "steps/s", "numpy merged / this", "last loss"]
    headers += ["vs numpy merged"]
    keys = ["implementation", "threads", "blas_threads", "dtype", "steps_per_s", "merged_speedup", "loss_last"]
    keys += ["loss_rel_diff"]
    print_table(headers, [[r[k] for k in keys] for r in rows])
    torch_rows = [r for r in rows if r["implementation"].startswith("torch")]
    if torch_rows:
        ours = max(
            (r for r in rows if r["implementation"] == rows[0]["implementation"]), key=lambda r: r["steps_per_s"]
        )
        best = max(torch_rows, key=lambda r: r["steps_per_s"])
        ratio = ours["steps_per_s"] / best["steps_per_s"]
        verdict = "reached" if ratio >= GOAL else "NOT reached"
        print(
            f"fastest numpy merged ({ours['threads']} thr, BLAS {ours['blas_threads']}) vs the fastest torch "
            f"setting ({best['dtype']}, {best['threads']} thr): {ratio:.2f}x (goal >= {GOAL:g}x: {verdict})"
        )


def _two_stage_time():
    cfg = preset("two-stage")
    cfg.steps = 2000  # both stage-2 rules fire before step 1800 (README)
    cfg.eval_every = 0
    cfg.eval_docs = 0
    tr = Trainer(cfg, progress=False)
    t0 = time.perf_counter()
    tr.run()
    total = time.perf_counter() - t0
    recs = tr.history
    from theorycheck.analysis.stats import detect_stages

    st = detect_stages(
        [r["step"] for r in recs],
        [r["norm_W_V"] for r in recs],
        [r["norm_KQ"] for r in recs],
        K_eff=[r["K_eff_median"] for r in recs],
        v=cfg.data.v,
    )
    # second timed run, stopped at the detected stage-2 start
    tr2 = Trainer(cfg, progress=False)
    t0 = time.perf_counter()
    tr2.run(stop_at=st.stage2_start)
    t_stage2 = time.perf_counter() - t0
    return st, total, t_stage2, cfg.steps


def _two_stage_table():
    st, total, t2, steps = _two_stage_time()
    from theorycheck.analysis.dynamics import stage2_onset

    cfg2 = preset("two-stage")
    onset = stage2_onset(cfg2.data.topic_model(), cfg2.data.masking(), lr=cfg2.optim.lr)
    row = [steps, total, steps / total, st.stage1_end, st.stage2_start, st.stage2_attention, t2]
    row.append(onset.steps_to_grow(10.0))
    headers = ["steps", "total_s", "steps/s", "stage1_end", "stage2_start (10x KQ)", "K_eff >= 1.1 v"]
    headers += ["seconds_to_stage2", "predicted steps per 10x (linearised)"]
    print(f"\njoint two-stage run (preset two-stage: exact population, T=v=10, tau=3, SGD lr {cfg2.optim.lr:g})")
    print_table(headers, [row])
    return {"headers": headers, "rows": [row]}


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main(argv=None):
    """Tables: the uniform-attention demo, model (a) (one layer, trained W^K, W^Q, W^V) and model
    (b) (``deep-4x4``), each as numpy merged tokens / numpy positions / torch float32 and float64 at
    1 and 2 threads on the same batches, after a float64 same-loss-and-gradients check of every
    parameter; then (not with ``--quick``) the two-stage run. Writes ``results/train.json``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer timed steps, no two-stage table")
    args = ap.parse_args(argv)
    # as Trainer.run does: large work arrays reused, not re-mapped each step; process-wide, so
    # the torch rows run under the same allocator settings (theorycheck._alloc)
    print(f"glibc mmap/trim thresholds raised (theorycheck._alloc): {keep_large_allocations()}")
    try:
        import torch  # noqa: F401

        has_torch = True
    except ImportError:
        has_torch = False
        print("torch not installed (optional 'bench' extra): torch rows and the equivalence check skipped")
    rows, equivalence, loads = [], {}, {"start": _load()}
    for name, cfg in bench_configs().items():
        t0 = time.perf_counter()
        batches = _batches(cfg, N_STEPS[name][1 if args.quick else 0])
        if has_torch:
            equivalence[name] = _equivalence(name, cfg, batches[0])
            err = equivalence[name]["max"]
            print(f"{name}: torch float64 vs numpy, max relative error over the loss and every gradient {err:.2e}")
        table = _model_rows(name, cfg, batches, has_torch)
        _print_model_table(name, cfg, table)
        loads[name] = _load()
        print(f"table time {time.perf_counter() - t0:.0f} s; 1-minute load average after it: {loads[name]:.2f}")
        rows += table
    two_stage = None if args.quick else _two_stage_table()
    if two_stage is not None:
        loads["two-stage"] = _load()
    print(f"\n1-minute load averages {loads} (2-core machine; timings on a shared machine are noisy)")
    payload = {"quick": args.quick, "load_average": loads, "rows": rows, "equivalence": equivalence}
    if two_stage is not None:
        payload["two_stage"] = two_stage
    print(f"\nwritten {write_json('train', payload)}")


if __name__ == "__main__":
    main()
