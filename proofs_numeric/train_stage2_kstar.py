"""SPEC §4.3, §6 item 15 (EMPIRICAL against the solver, deterministic exact population run):
with W^V frozen at the stage-1 optimum, training W^K, W^Q from a small random init (preset
``stage2-population``: T = v = 10, tau = 3, squared loss, d_a = V1, entries N(0, 0.1^2), Adam
lr 0.05, 400 steps, seed 0) approaches the optimum of :func:`theorycheck.solvers.optimal_attention`:

1. the median effective same-topic weight ``K_eff`` (:func:`theorycheck.analysis.topic_structure.effective_K`) of
   the trained scores is within ``K_rtol`` (calibrated below: 3.6%) of ``K*`` (measured 72.5 against K* = 70.05);
2. the exact population loss is at most ``L* + 1e-6``. It is in fact *below* ``L*`` (0.9617266 <
   0.9617702): unrestricted scores may also raise the [MASK]-key score, which the (alpha, beta)
   family fixes at 0 (the finding tested in ``tests/test_train_crosscheck.py``).

Tiers: the default ``verify`` runs the same recipe on the smaller model T = 5, v = 4, tau = 2,
300 steps, seed 0 (measured K_eff 18.83 against K* = 18.09, loss 0.8662105 < L* = 0.8662474; the
falsifier gives K_eff 35.3); ``verify --full`` runs the preset's T = v = 10, tau = 3, 400 steps on
seeds 0-6 (all must pass: power 0.918) (the W^K, W^Q init) with the fraction passing and 95% t-intervals of K_eff,
K_eff / K* and the loss.

Calibration (seeds 100-104, never judged; rule ``prediction_deviation`` of
:mod:`proofs_numeric._empirical`: tolerance = the larger distance of mean +- k SD of K_eff / K* from 1,
k = 4.10 (the 99% prediction interval of one new seed), rounded up to two digits): default tier
K_eff / K* = 1.0412, 1.04112, 1.04115, 1.04115, 1.04115 -> K_rtol 0.042 (was 0.09 by the former
``twice_max_deviation``); full tier (T = v = 10, tau = 3) K_eff / K* = 1.03518, 1.03515, 1.03519,
1.03511, 1.03513 -> K_rtol 0.036 (was 0.08). The seed-to-seed spread is tiny (SD 3e-5): the
tolerance is the systematic K_eff / K* - 1 = 4.1% (3.5%) of finite training plus the spread.
The loss bound ``L* + 1e-6`` is the claim's definition (not fitted).
"""

from __future__ import annotations

import dataclasses

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.nn import Trainer, preset
from theorycheck.report.claims import Claim, ClaimResult, by_seed, compare_all, compare_close
from theorycheck.solvers import optimal_attention
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=("K_eff", "K_eff_over_K_star", "loss"))


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    cfg = preset("stage2-population").replace(
        steps=inject.get("steps", params["steps"]), seed=params["seed"], log_every=10, eval_every=0, eval_docs=0
    )
    if "T" in params:  # a smaller topic model (the default tier); the preset's T = v = 10, tau = 3 otherwise
        d = dataclasses.replace(cfg.data, T=params["T"], v=params["v"], tau=params["tau"])
        cfg = cfg.replace(data=d, model=dataclasses.replace(cfg.model, V1=d.V1, d=None, d_a=None))
    tr = Trainer(cfg, progress=False)
    tr.run()
    model = tr.model
    loss = float(model.loss(tr.batch_at(cfg.steps)))
    opt = optimal_attention(cfg.data.topic_model(), cfg.data.masking(), value="block")
    K_star, L_star = float(opt.K), float(opt.loss)
    K_eff = float(tr.metrics(cfg.steps, loss, 0.0, full=False)["K_eff_median"]) * inject.get("K_eff_scale", 1.0)
    details = {"K_eff": K_eff, "K_star": K_star, "K_eff_over_K_star": K_eff / K_star, "loss": loss, "L_star": L_star}
    sub = [
        compare_close(K_eff / K_star, 1.0, params["K_rtol"], details=details, label="K_eff / K* within K_rtol of 1"),
        ClaimResult(
            loss <= L_star + 1e-6,
            "<= L* + 1e-6",
            loss,
            L_star + 1e-6 - loss,
            details=details,
            label="loss <= L* + 1e-6",
        ),
    ]
    return compare_all(sub)


def falsify(params: dict) -> dict:
    """K_eff read 12% too large (a fixed factor): K_eff / K* - 1 is then about 0.17, 4 x K_rtol = 0.042 (issue 25
    item 6: a loosened K_rtol lets it pass). (``{"steps": 20}``, stopping while Adam has overshot, gives
    ``K_eff`` 198 and a loss above L*, 23 x K_rtol.)"""
    return {"K_eff_scale": 1.12}


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, reference, values per calibration seed)}``.
CALIBRATION = {
    ("default", "K_rtol"): ("prediction_deviation", 1.0, (1.0412, 1.04112, 1.04115, 1.04115, 1.04115)),
    ("full", "K_rtol"): ("prediction_deviation", 1.0, (1.03518, 1.03515, 1.03519, 1.03511, 1.03513)),
}

DEFAULT = dict(steps=300, seed=0, K_rtol=0.042, T=5, v=4, tau=2)
FULL = dict(steps=400, seeds=JUDGED_SEEDS, K_rtol=0.036)


def domain():
    """Any seed (the W^K, W^Q init) at the default tier's small model (T = 5, v = 4, tau = 2,
    300 exact-population Adam steps per draw)."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.stage2-approaches-Kstar",
    statement=(
        "Training W^K, W^Q with W^V frozen at the stage-1 optimum reaches K_eff within 4.2% (--full: 3.6%) of the "
        "solver's K* and a loss no worse than L*"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.3, §6 item 15",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=7.5,  # CPU seconds of a cold start (Numba compilation included; benchmarks/bench_cold_start.py)
    falsify=falsify,
)
