"""SPEC §5.3, seed summary "Figure 5" (EMPIRICAL, seeded finite-sample run): a 4-layer,
4-head transformer trained jointly from a small init shows the two-stage norm dynamic, W^V
first and W^K, W^Q later.

Setting: preset ``deep-4x4`` (4 layers x 4 summed heads, d_a = 16, residual + layer norm, trained
decoder, cross-entropy, plain SGD lr 1, entries N(0, 0.003^2), score factor 1; LDA alpha = 0.1,
T = v = 10, N ~ U[100, 150], fresh minibatches of 16), seed 0, 600 steps. Curves of
:func:`theorycheck.nn.stage_curves`: the norm of all value matrices together, and the largest
per-layer growth factor of ``||W_K,l||_F ||W_Q,l||_F``. Must hold:

1. in the first 30 steps ``||W^V||`` grows at least ``MIN_V_GROWTH`` = 2.59-fold while no layer's
   ``||W_K|| ||W_Q||`` grows by more than 1.5 (measured 3.20 and 1.30; seed 1: 2.81 and 1.14);
2. stage 2 (some layer's ``||W_K|| ||W_Q||`` above 10x its initial value, the norm rule of
   :func:`theorycheck.analysis.stats.detect_stages`) is reached within the 600 steps, more than
   ``MIN_STAGE2_OVER_EARLY`` = 11.7 times later than step 30 (measured step 470 for seeds 0 and 1),
   and after stage 1 ends.

Tiers: the default ``verify`` trains the first 31 steps on seed 0 (steps 0-30: part 1 reads the curves at
step 30 only, and they are bit-identical to those of a longer run, e.g. the 60 steps this tier used to
train, the calibration's, or the full tier's 600: training is sequential and nothing in the first steps
depends on the total) and checks part 1 on that one seed (a smoke check of the per-seed statement; the
falsifier breaks part 1); stage 2 needs about
470 steps, so part 2 runs in ``verify --full``: 600 steps on the block of seeds 0-33, at least 28
of which must pass both parts (the power rule below), with the fraction of seeds passing, its
Clopper-Pearson interval and 95% t-intervals of both growth factors and of the stage-2 step.
``verify --explore`` draws a block
start ``s`` and checks part 1 (31 steps) on seeds ``s .. s+4``, at least 3 passing.

Thresholds, calibrated on seeds 100-104 (never judged; :mod:`proofs_numeric._empirical`): the
``||W^V||`` growth by step 30 was 2.998, 3.192, 3.002, 3.063, 2.879 -> ``prediction_lower`` on the log
scale (the 99% lower prediction bound of one new seed, mean - k SD of the logs, k = 4.10) gives
``MIN_V_GROWTH`` = 2.59 (was 1.93 by the former ``halfway`` rule; the same step-30 values hold in
both tiers; the rate seeds' passing values are 2.74-3.23). "Near its init" (``MAX_KQ_GROWTH`` = 1.5)
is a definition, not fitted; the calibration
seeds' largest growths were 1.144, 1.257, 1.159, 1.298, 1.321. ``MIN_STAGE2_OVER_EARLY``: stage 2 started at
16, 15, 18.6667, 16, 16.3333 x the early step (600 steps) -> ``prediction_lower`` on the log scale
gives 11.7 (was 8 by ``halfway``).

Fraction claim (the per-seed statement does not hold on every seed). ``verify --explore`` found
seed 2548 where SGD at lr 1 spikes between steps 10 and 20: the loss jumps (to about 6x its initial
value at step 15), ``||W^V||`` jumps to 54x its init and layer 1's ``||W_K|| ||W_Q||`` to 32x by step
30, and the norms then stay frozen. The failure rate was measured on ``RATE_SEEDS`` 1000-1019
(neither judged nor calibration; ``benchmarks/calibrate_empirical.py --rate``, recorded under
``"failure_rates"`` in ``benchmarks/results/calibration.json``; 2548, found by search, is not
counted): part 1 fails on 1 of 20 seeds (1002: a smaller spike, ``||W^V||`` 16.8x and
``||W_K|| ||W_Q||`` 4.6x by step 30), fraction 0.05, Clopper-Pearson 95% interval [0.0013, 0.249];
part 1 or part 2 fails on 2 of 20 (1002, and 1007 whose stage 2 is not reached within 600 steps),
fraction 0.10, interval [0.012, 0.317]. The claim is therefore stated as "at least k of n seeds"
(:func:`proofs_numeric._empirical.at_least_k_of_n`; the reported row is the k-th best seed), with
``n``, ``k`` chosen for both error rates (issue 25 item 4):

- ``verify --full``: ``FULL_SEEDS`` = 34 seeds (0-33), at least ``FULL_MIN_PASSING`` = 28. Power
  (refuting when a seed fails 30% of the time, :func:`proofs_numeric._empirical.k_of_n_power`):
  ``P[Bin(34, 0.7) < 28]`` = 0.921 (3 of 5 had 0.16). False refutation at the measured rates
  (:func:`proofs_numeric._empirical.false_refutation_probability`): 0.0013 (part 1, p = 0.05) and
  0.048 (both parts, p = 0.10). 34 is the smallest n with power >= 0.9 and false refutation <= 0.05
  at p = 0.10; it costs 34 runs of 600 steps.
- ``verify --explore``: blocks of ``BLOCK_SEEDS`` = 5 consecutive seeds, part 1 only (60 steps), at
  least ``MIN_PASSING`` = 3: false refutation 0.0012 at p = 0.05, power only 0.16 (a cheap smoke
  test of many blocks, not a judgement; 4 of 5 was rejected: 0.023 per block at p = 0.05, about 0.37
  that one of the 20 blocks of ``verify --explore 20`` refutes a claim that holds at that rate). No
mechanism-level precondition is claimed: the spikes are SGD instabilities at lr 1 whose cause
(curvature at the spike) is not measured here.

Topic-aware attention is *not* part of the claim: in this model the first layer's attention stays
uniform and second-layer heads turn away from the query's topic (see the README).
"""

from __future__ import annotations

import numpy as np

from proofs_numeric._empirical import at_least_k_of_n
from theorycheck.analysis.stats import detect_stages
from theorycheck.nn import OptimConfig, Trainer, preset, stage_curves
from theorycheck.report.claims import Claim, ClaimResult, by_seed, compare_all, compare_greater
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds

#: Part 1: ``||W^V||`` growth by the early step must reach this (calibrated, see the docstring).
MIN_V_GROWTH = 2.59
#: Part 1: "W^K, W^Q near their init" means no layer's ``||W_K|| ||W_Q||`` grew by more than this (definition).
MAX_KQ_GROWTH = 1.5
#: Part 2: stage 2 must start later than this multiple of the early step (calibrated).
MIN_STAGE2_OVER_EARLY = 11.7
#: Fraction rule: the claim is judged on blocks of this many consecutive seeds ...
BLOCK_SEEDS = 5
#: ... of which at least this many must pass (chosen from the failure rate on RATE_SEEDS, see the docstring).
MIN_PASSING = 3
#: ``verify --full`` judges this many seeds (0, 1, ...) ...
FULL_SEEDS = 34
#: ... of which at least this many must pass: power 0.921 at a 30% per-seed failure rate (docstring).
FULL_MIN_PASSING = 28


def run(params: dict, inject: dict | None = None):
    inject = inject or {}
    cfg = preset("deep-4x4").replace(
        steps=inject.get("steps", params["steps"]),
        seed=params["seed"],
        log_every=params["log_every"],
        eval_every=0,
        eval_docs=0,
    )
    if "optimizer" in inject:
        cfg = cfg.replace(optim=OptimConfig(inject["optimizer"], lr=inject["lr"]))
    tr = Trainer(cfg, progress=False)
    tr.run()
    return tr.history


def check(params: dict, inject: dict | None = None):
    """One seed (``seed``): the per-seed statement; a block (``seeds``, ``min_passing``): at least
    ``min_passing`` of the seeds pass (:func:`proofs_numeric._empirical.at_least_k_of_n`)."""
    stats = ("V_growth_early", "KQ_growth_early") + (("stage2_over_early",) if params.get("stage2", True) else ())
    if "min_passing" in params:
        return at_least_k_of_n(_check_one, params, inject, statistics=stats)
    return by_seed(_check_one, params, inject, statistics=stats)


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    recs = run(params, inject)
    steps = np.array([r["step"] for r in recs])
    nV, nKQ = (np.asarray(c) for c in stage_curves(recs))
    early = params["early_step"]
    i = int(np.flatnonzero(steps == early)[0])
    v_growth, kq_growth = float(nV[i] / nV[0]) * inject.get("V_growth_scale", 1.0), float(nKQ[i])
    g_v, g_kq = params.get("min_V_growth", MIN_V_GROWTH), params.get("max_KQ_growth", MAX_KQ_GROWTH)
    details = {"V_growth_early": v_growth, "KQ_growth_early": kq_growth, "early_step": early}
    sub = [
        ClaimResult(
            v_growth >= g_v,
            f">= {g_v:g}",
            v_growth,
            v_growth - g_v,
            details=details,
            label="||W^V|| growth by the early step",
        ),
        ClaimResult(
            kq_growth <= g_kq,
            f"<= {g_kq:g}",
            kq_growth,
            g_kq - kq_growth,
            details=details,
            label="largest ||W_K|| ||W_Q|| growth by the early step",
        ),
    ]
    st = detect_stages(steps, nV, nKQ, frac=0.9, kq_factor=10.0)
    if params.get("stage2", True):  # the default tier checks part 1 only
        sub.extend(_part2(st, early, params.get("min_stage2_over_early", MIN_STAGE2_OVER_EARLY)))
    res = compare_all(sub)
    res.data = {"records": recs, "stages": st.to_dict()}
    return res


def _part2(st, early: int, min_ratio: float) -> list:
    """Stage 2 reached, after stage 1 ends and later than ``min_ratio`` x the early step."""
    det = {"stage1_end": st.stage1_end, "stage2_start": st.stage2_start}
    if st.stage2_start is None or st.stage1_end is None:  # no ratio: NaN, so that the block's statistics skip it
        det["stage2_over_early"] = float("nan")
        return [ClaimResult(False, "detected", "not detected", -1.0, details=det, label="stage 2 within the budget")]
    det["stage2_over_early"] = st.stage2_start / early
    return [
        compare_greater(st.stage2_start, st.stage1_end, details=det, label="stage-2 start > stage-1 end"),
        compare_greater(
            st.stage2_start / early, min_ratio, details=det, label="stage-2 start / early step > threshold"
        ),
    ]


def falsify(params: dict) -> dict:
    """The ||W^V|| growth by the early step read 25% lower (a fixed factor): seed 0's 3.20 becomes 2.40, about 0.19
    below MIN_V_GROWTH = 2.59, as far below as the closest sub-check passes (issue 25 item 6: a threshold loosened
    by more than that lets it pass). (Adam lr 0.003 instead of SGD, ``{"optimizer": "adam", "lr": 0.003,
    "steps": early_step + 10}``, makes W^K, W^Q grow from the first steps: part 1 fails by far.)"""
    return {"V_growth_scale": 0.75}


def plot(results):
    from theorycheck.report.plots import training_curves

    return {
        f"deep_two_stage_{i}": training_curves(
            r.data["records"], stages=r.data["stages"], title="4 layers x 4 heads: norms per layer"
        )
        for i, r in enumerate(results)
    }


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, null, values per calibration seed)}``.
CALIBRATION = {
    ("default", "min_V_growth"): ("prediction_lower_log", 1.0, (2.99805, 3.19185, 3.00158, 3.06296, 2.87883)),
    ("default", "max_KQ_growth"): ("definition", 1.5, (1.14355, 1.25693, 1.15895, 1.29826, 1.32123)),
    ("full", "min_stage2_over_early"): ("prediction_lower_log", 1.0, (16, 15, 18.6667, 16, 16.3333)),
}

#: Part 1 only: ``early_step + 1`` steps (the values at ``early_step`` are those of any longer run; see the docstring).
DEFAULT = dict(steps=31, log_every=10, early_step=30, seed=0, stage2=False)
FULL = dict(steps=600, log_every=10, early_step=30, seeds=tuple(range(FULL_SEEDS)), min_passing=FULL_MIN_PASSING)


def seed_block(start: dict) -> dict:
    """``{"seed": s}`` -> the block ``{"seeds": (s, ..., s + BLOCK_SEEDS - 1), "min_passing": MIN_PASSING}``."""
    s = int(start["seed"])
    return {"seeds": tuple(range(s, s + BLOCK_SEEDS)), "min_passing": MIN_PASSING}


def domain():
    """Any block of ``BLOCK_SEEDS`` consecutive seeds (init, documents) at the default tier's
    configuration (part 1, 31 steps of the 4 x 4 model per seed), at least ``MIN_PASSING`` passing."""
    return params_of(seeds().map(seed_block), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.deep-4x4-two-stage",
    statement="4-layer x 4-head transformer, SGD (lr 1) from small init, in at least 28 of 34 seeds (--full; "
    "power 0.92 against a 30% per-seed failure rate): "
    "||W^V|| grows first while every layer's W^K, W^Q stay near their init; some layer's W^K, W^Q grow 10x "
    "only much later (an SGD spike breaks it on some seeds)",
    source="EMPIRICAL",
    spec="SPEC §5.3 (Figure 5), §4.5",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=23.0,  # CPU seconds of a cold start (Numba compilation included; benchmarks/bench_cold_start.py)
    falsify=falsify,
    plot=plot,
)
