"""SPEC §4.5, §6 items 21-22 (EMPIRICAL, deterministic exact population run): joint training
of W^K, W^Q, W^V from a small init (entries N(0, 0.01^2), seed 0; one-hot, identity decoder,
squared loss, SGD lr 5, T = 5, v = 4, tau = 2) shows two stages:

1. at step 0 the W^V gradient dominates: ``||grad W^V|| >= 100 max(||grad W^K||, ||grad W^Q||)``;
2. ``||W^V||`` reaches 90% of its pre-stage-2 plateau while ``||W^K^T W^Q||`` is still below twice
   its initial value;
3. stage 2 happens: ``||W^K^T W^Q||`` later exceeds 10 x its initial value, strictly after stage 1
   ends (rule of :func:`theorycheck.analysis.stats.detect_stages`).

Tiers: the default ``verify`` trains 600 steps on seed 0 (stage 1 ends at step 20, stage 2 starts
at step 450, as in the 1500-step run); ``verify --full`` trains 1500 steps on seeds 0-6 (all must pass: power 0.918)
and reports the fraction passing and a 95% t-interval of the step-0 gradient ratio. The thresholds (100x, 2x,
10x) are the claim's definitions, not fitted to a seed; calibration seeds 100-104 (never judged) all
pass at 600 steps: step-0 gradient ratios 4327, 2035, 2353, 3491, 2390; ||W^K^T W^Q|| growth at the
end of stage 1: 1.006, 0.990, 0.994, 1.008, 1.019.
"""

from __future__ import annotations

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.analysis.stats import detect_stages
from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer
from theorycheck.report.claims import Claim, ClaimResult, by_seed, compare_all, compare_greater
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds


def run(params: dict, inject: dict | None = None):
    inject = inject or {}
    d = DataConfig(T=params["T"], v=params["v"], tau=params["tau"], source="population")
    m = ModelConfig(
        V1=d.V1,
        attention="softmax",
        train=("W_K", "W_Q", "W_V"),
        init="normal",
        init_scale=params["init_scale"],
        loss=params["loss"],
        scale="none",
    )
    cfg = TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=params["lr"]),
        steps=params["steps"],
        log_every=params["log_every"],
        eval_every=0,
        eval_docs=0,
        seed=params["seed"],
    )
    tr = Trainer(cfg, progress=False)
    f = inject.get("scale_KQ", 1.0)
    tr.model.get("layers.0.W_K")[...] *= f
    tr.model.get("layers.0.W_Q")[...] *= f
    tr.run()
    return tr.history


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=("grad_ratio_step0", "KQ_growth_at_stage1_end"))


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    recs = run(params, inject)
    steps = np.array([r["step"] for r in recs])
    nV = np.array([r["norm_W_V"] for r in recs])
    nKQ = np.array([r["norm_KQ"] for r in recs])
    st = detect_stages(steps, nV, nKQ, frac=0.9, kq_factor=10.0)
    r0 = recs[0]
    ratio0 = r0["gradnorm_W_V"] / (max(r0["gradnorm_W_K"], r0["gradnorm_W_Q"]) * inject.get("KQ_grad_scale", 1.0))
    sub = [
        compare_greater(
            np.log10(ratio0),
            2.0,
            details={"grad_ratio_step0": ratio0},
            label="log10(||grad W^V|| / max(||grad W^K||, ||grad W^Q||)) at step 0 > 2",
        )
    ]
    if st.stage1_end is None or st.stage2_start is None:
        sub.append(
            ClaimResult(
                False,
                "detected",
                "not detected",
                -1.0,
                details={"stage1_end": st.stage1_end, "stage2_start": st.stage2_start},
                label="stage 2 detected",
            )
        )
    else:
        i1 = int(np.flatnonzero(steps == st.stage1_end)[0])
        kq_growth = float(nKQ[i1] / nKQ[0])
        sub.append(
            ClaimResult(
                kq_growth < 2.0,
                "< 2 (KQ growth at stage-1 end)",
                kq_growth,
                2.0 - kq_growth,
                details={"KQ_growth_at_stage1_end": kq_growth},
                label="||W^K^T W^Q|| growth at the end of stage 1 < 2",
            )
        )
        sub.append(
            compare_greater(
                st.stage2_start,
                st.stage1_end,
                details={"stage1_end": st.stage1_end, "stage2_start": st.stage2_start},
                label="stage-2 start > stage-1 end",
            )
        )
    res = compare_all(sub)
    res.data = {
        "steps": steps,
        "loss": np.array([r["loss"] for r in recs]),
        "norm_W_V": nV,
        "norm_KQ": nKQ,
        "stages": st.to_dict(),
    }
    return res


def falsify(params: dict) -> dict:
    """The step-0 W^K, W^Q gradient norms read 30x larger (a fixed factor, what a 30x larger W^K, W^Q init does to
    them): seed 0's ratio 1811 becomes 60, log10 0.22 below the threshold 2 where it was 1.26 above it (issue 25
    item 6: a threshold loosened by more than that lets it pass). (``{"scale_KQ": 30.0}``, the 30x larger init
    itself, also delays stage 2 beyond the 600 steps.)"""
    return {"KQ_grad_scale": 30.0}


def plot(results):
    from theorycheck.report.plots import training_curves

    out = {}
    for i, r in enumerate(results):
        d = r.data
        recs = [
            {"step": int(s), "loss": float(l), "norm_W_V": float(a), "norm_KQ": float(b)}
            for s, l, a, b in zip(d["steps"], d["loss"], d["norm_W_V"], d["norm_KQ"])
        ]
        out[f"two_stage_{i}"] = training_curves(recs, stages=d["stages"], keys=("norm_W_V", "norm_KQ"))
    return out


#: Calibration runs on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``). The thresholds are
#: the claim's definitions, so nothing is fitted: ``{(tier, threshold): ("definition", value, values per seed)}``.
CALIBRATION = {
    ("default", "grad ratio >= 100"): ("definition", 100.0, (4327.08, 2035.44, 2352.67, 3491.07, 2390.42)),
    ("default", "KQ growth at stage-1 end < 2"): ("definition", 2.0, (1.00607, 0.989886, 0.994473, 1.0075, 1.01882)),
}

DEFAULT = dict(T=5, v=4, tau=2, init_scale=0.01, lr=5.0, steps=600, log_every=10, loss="squared", seed=0)
FULL = dict(T=5, v=4, tau=2, init_scale=0.01, lr=5.0, steps=1500, log_every=10, loss="squared", seeds=JUDGED_SEEDS)


def domain():
    """Any seed (the init draw) at the default configuration; cost: one 600-step exact population
    run per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.two-stage-ordering",
    statement=(
        "Joint training from small init: W^V gradient dominates at first and ||W^V|| plateaus before ||W^K^T W^Q|| "
        "grows (stage 2 later)"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.5, §5.2, §6 items 21-22",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=8.0,
    falsify=falsify,
    plot=plot,
)
