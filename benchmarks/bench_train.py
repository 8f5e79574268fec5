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

import math
import os
import time

import numpy as np
from _common import print_table, write_json

from theorycheck.nn import ModelConfig, Trainer, Transformer, make_batch, make_optimizer, preset
from theorycheck.sampling import mask_documents, sample_documents

N_BATCHES = 30


def _batches(name="official-demo", n=N_BATCHES, seed=0):
    cfg = preset(name)
    tm, mk = cfg.data.topic_model(), cfg.data.masking()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        docs = sample_documents(tm, cfg.batch_size, cfg.data.N, rng=rng)
        out.append(mask_documents(docs, tm, mk, rng=rng))
    return cfg, out


def _numpy_steps_per_s(cfg, batches, count_based: str):
    mc = ModelConfig.from_dict({**cfg.model.to_dict(), "count_based": count_based})
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

    step(batches[0])
    t0 = time.perf_counter()
    losses = [step(mb) for mb in batches]
    return len(batches) / (time.perf_counter() - t0), losses


def _torch_steps_per_s(cfg, batches, dtype_name: str, threads: int):
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    V1 = cfg.model.V1
    d = V1
    W_V = torch.nn.Parameter((torch.rand(d, d, dtype=dtype) * 2 - 1) / math.sqrt(d))
    b_dec = torch.nn.Parameter(torch.zeros(V1, dtype=dtype))
    W_K = torch.zeros(d, d, dtype=dtype)  # frozen uniform attention, as the official config
    W_Q = torch.zeros(d, d, dtype=dtype)
    opt = torch.optim.Adam([W_V, b_dec], lr=0.01)
    eye = torch.eye(V1, dtype=dtype)

    def step(mb):
        inputs = torch.from_numpy(mb.inputs)
        sel = torch.from_numpy(mb.selected)
        tgt = torch.from_numpy(mb.targets)
        valid = (inputs >= 0) & ~sel
        X = eye[inputs.clamp(min=0)] * (inputs >= 0).unsqueeze(-1)  # (B, N, d) one-hot rows
        K = X @ W_K.T
        Q = X @ W_Q.T
        V = X @ W_V.T
        S = (Q @ K.transpose(1, 2)) / math.sqrt(d)
        S = S.masked_fill(~valid.unsqueeze(1), float("-inf"))
        A = torch.softmax(S, dim=-1)
        out = A @ V + b_dec  # identity decoder
        loss = torch.nn.functional.cross_entropy(out[sel], tgt[sel])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step(batches[0])
    t0 = time.perf_counter()
    losses = [step(mb) for mb in batches]
    return len(batches) / (time.perf_counter() - t0), losses


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


def main():
    cfg, batches = _batches()
    rows = []
    sps_count, l_count = _numpy_steps_per_s(cfg, batches, "auto")
    sps_pos, l_pos = _numpy_steps_per_s(cfg, batches, "never")
    assert np.allclose(l_count, l_pos, rtol=1e-10), "count and position paths disagree"
    rows.append(["numpy count-based (float64)", sps_count, 1.0, l_count[-1]])
    rows.append(["numpy position-based (float64)", sps_pos, sps_count / sps_pos, l_pos[-1]])
    try:
        import torch

        default_threads = torch.get_num_threads()
        for threads in sorted({1, default_threads}):
            for dt in ("float32", "float64"):
                sps_t, l_t = _torch_steps_per_s(cfg, batches, dt, threads)
                rows.append(
                    [
                        f"torch {torch.__version__} position-based ({dt}, {threads} thr)",
                        sps_t,
                        sps_count / sps_t,
                        l_t[-1],
                    ]
                )
    except ImportError:
        print("torch not installed (optional 'bench' extra): torch rows skipped")
    headers = ["implementation", "steps/s", "count-based speed-up", f"loss after {N_BATCHES} steps"]
    print("official-demo model, batch 40, N ~ U[100,150], CE, Adam (same batches for every row)")
    print_table(headers, rows)
    cfg3, batches3 = _batches("deep-4x4", n=8)
    sps_m, l_m = _numpy_steps_per_s(cfg3, batches3, "auto")
    sps_p, l_p = _numpy_steps_per_s(cfg3, batches3, "never")
    assert np.allclose(l_m, l_p, rtol=1e-10), "merged and position paths disagree"
    rows3 = [
        ["numpy merged tokens (one row per distinct token)", sps_m, 1.0, l_m[-1]],
        ["numpy positions (one row per position)", sps_p, sps_m / sps_p, l_p[-1]],
    ]
    headers3 = ["implementation", "steps/s", "merged speed-up", f"loss after {len(batches3)} steps"]
    print(
        f"\ndeep-4x4 model (4 layers x 4 heads, residual + LN, batch 16, N ~ U[100,150], CE, "
        f"{cfg3.optim.name} lr {cfg3.optim.lr:g})"
    )
    print_table(headers3, rows3)
    st, total, t2, steps = _two_stage_time()
    from theorycheck.analysis.dynamics import stage2_onset

    cfg2 = preset("two-stage")
    onset = stage2_onset(cfg2.data.topic_model(), cfg2.data.masking(), lr=cfg2.optim.lr)
    rows2 = [
        [
            steps,
            total,
            steps / total,
            st.stage1_end,
            st.stage2_start,
            st.stage2_attention,
            t2,
            onset.steps_to_grow(10.0),
        ]
    ]
    headers2 = [
        "steps",
        "total_s",
        "steps/s",
        "stage1_end",
        "stage2_start (10x KQ)",
        "K_eff >= 1.1 v",
        "seconds_to_stage2",
        "predicted steps per 10x (linearised)",
    ]
    print(f"\njoint two-stage run (preset two-stage: exact population, T=v=10, tau=3, SGD lr {cfg2.optim.lr:g})")
    print_table(headers2, rows2)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n1-minute load average during the run: {load:.2f} (timings on a shared machine are noisy)")
    path = write_json(
        "train",
        {
            "load_average": load,
            "official_demo": {"headers": headers, "rows": rows},
            "deep_4x4": {"headers": headers3, "rows": rows3},
            "two_stage": {"headers": headers2, "rows": rows2},
        },
    )
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
