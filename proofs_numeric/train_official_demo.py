"""SPEC §5.1 (EMPIRICAL, seeded run against the official code's number): the released demo
(one layer, uniform attention frozen, one-hot embedding, identity decoder, W^V and the output bias
trained with cross-entropy by Adam lr 0.01, batch 40, 10k static-masked LDA documents with
alpha = 0.1, T = v = 10, N ~ U[100, 150], selected positions hidden from the keys, token-averaged
loss; preset ``official-demo``) reaches a dev cross-entropy within 1.4% of the official code's
3.3954 (its logged dev loss for the same data recipe). Dev loss every 250 steps on 10k separate
documents; the best one counts, as in the official training script.

Tiers: the default ``verify`` trains 500 steps on seed 0 (measured best dev CE 3.4147, within 0.6%;
250 steps give 3.618, outside); ``verify --full`` trains 1500 steps on seeds 0-6 (all must pass: power 0.918) (init,
documents, masks) and reports the fraction passing and a 95% t-interval of the best dev cross-entropy.

Tolerance, calibrated on seeds 100-104 (never judged) by the rule ``prediction_deviation`` of
:mod:`proofs_numeric._empirical` (the larger distance of mean +- k SD of CE / 3.3954 from 1, k = 4.10,
the 99% prediction interval of one new seed; rounded up to two digits): at 500 steps best dev CE
3.40896, 3.40636, 3.41861, 3.42044, 3.42010 -> rtol 0.014 (was 0.02 by the former
``twice_max_deviation``). The 1500-step tier uses the same 0.014 (more steps only lower the best dev
CE towards the reference; its own calibration is not run, see the report).

The reference is the official code's printed value, not ours; the N -> inf Bayes cross-entropy of
this data model (3.149, README) is lower because finite documents reveal their topics only
partly.
"""

from __future__ import annotations

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.nn import Trainer, preset
from theorycheck.report.claims import Claim, by_seed, compare_close
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds

OFFICIAL_DEV_CE = 3.3954


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=("best_dev_ce",))


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    cfg = preset("official-demo")
    cfg = cfg.replace(
        steps=params["steps"],
        seed=params["seed"],
        eval_every=params["eval_every"],
        log_every=params["eval_every"],
        checkpoint_every=0,
        eval_docs=0,
    )
    if "lr" in inject:
        cfg = cfg.replace(optim=cfg.optim.replace(lr=inject["lr"]))
    res = Trainer(cfg, progress=False).run()
    best = float(res.best_dev_loss)
    return compare_close(
        best,
        OFFICIAL_DEV_CE,
        tol=params["rtol"] * OFFICIAL_DEV_CE,
        label="|best dev CE - official 3.3954| <= rtol x 3.3954",
        details={"best_dev_ce": best, "official_dev_ce": OFFICIAL_DEV_CE, "final_train_ce": res.final.get("loss")},
    )


def falsify(params: dict) -> dict:
    """Adam lr 5e-3 instead of 1e-2: after 500 steps the best dev cross-entropy is 3.621, 4.8 x the tolerance
    (1.4% of 3.3954) above the official value (issue 25 item 6: a loosened rtol lets it pass; lr 1e-4 gives
    25 x)."""
    return {"lr": 5e-3}


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, reference, values per calibration seed)}``.
CALIBRATION = {
    ("default", "rtol"): ("prediction_deviation", OFFICIAL_DEV_CE, (3.40896, 3.40636, 3.41861, 3.42044, 3.4201)),
}

DEFAULT = dict(steps=500, eval_every=250, seed=0, rtol=0.014)
FULL = dict(steps=1500, eval_every=250, seeds=JUDGED_SEEDS, rtol=0.014)


def domain():
    """Any seed (init, the 10k training and dev documents, masks) at the default tier's
    configuration; cost: one 500-step run and three dev evaluations per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.official-demo-dev-ce",
    statement=(
        "The released uniform-attention demo, retrained here, reaches the official code's dev cross-entropy 3.3954 "
        "within 1.4%"
    ),
    source="EMPIRICAL",
    spec="SPEC §5.1",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=15.0,
    falsify=falsify,
)
