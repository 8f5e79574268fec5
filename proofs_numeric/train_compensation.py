"""Paper overview, SPEC §0 ("embedding and attention can compensate for each other: if one is
handicapped the other still encodes topics"; EMPIRICAL, seeded finite-sample runs, preset
``compensation``): one layer, one head, trained embedding tied to the decoder, W^V from the
identity, cross-entropy, Adam lr 3e-3 on LDA documents (alpha = 0.1, T = v = 10,
N ~ U[100, 150], fresh minibatches of 40).

Tiers. The default ``verify`` trains 400 steps on seed 0 (measured ratio 1.74, block score 0.973);
``verify --full`` trains 1000 steps on seeds 0-6 (all must pass: power 0.918) (init and documents) and reports the
fraction of seeds passing and 95% t-intervals of both statistics.

Thresholds, calibrated on seeds 100-104 (never judged) by the rule ``prediction_lower`` of
:mod:`proofs_numeric._empirical` (the 99% lower prediction bound of one new seed, mean - k SD with
k = 4.10 for 5 seeds; log scale for the ratio, linear for the block score; the null value when the
bound does not beat it; null 1 = no attention preference, null 0 = no block structure):

- 400 steps: block scores 0.9732, 0.9740, 0.9730, 0.9714, 0.9718 -> 0.968 (was 0.48 by the former
  ``halfway`` rule, passed by step 10 of 400); ratios 1.474, 2.164, 1.914, 1.373, 2.297 -> the bound
  (0.70) does not beat the null, so the claim is "ratio > 1" (was 1.18);
- 1000 steps: block scores 0.9761, 0.9708, 0.9742, 0.9740, 0.9762 -> 0.965 (was 0.48); ratios
  1.863, 2.597, 2.469, 1.657, 2.866 -> bound 0.86, again the null: "ratio > 1" (was 1.32).

Written reason for the ratio (the null is 0.73 and 0.60 of the smallest calibration ratio, the
second below the floor of 2/3): the ratio's seed-to-seed spread (coefficient of variation 22%)
leaves no threshold above 1 that an unseen seed clears with 99% probability; "attention becomes
topic-aware" is the claim's word, i.e. a ratio above 1.

1. Embedding frozen at a random N(0, 1/d) matrix (no topic structure), attention trained: the
   length-normalised same-topic : different-topic attention ratio on 8 fresh documents ends
   above 1 (seed 0 measured 1.74 after 400 steps, 2.16 after 1000; see the thresholds below).
2. Attention frozen uniform, embedding trained: the block score (R^2 of the topic-block fit) of
   the Gram ``W_E^T W_E`` ends above a threshold (0.968 after 400 steps, 0.965 after 1000; seed 0
   measured 0.974), from 0.05 at the start.
"""

from __future__ import annotations

import dataclasses

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.nn import Trainer, preset
from theorycheck.report.claims import Claim, by_seed, compare_all, compare_greater
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds


def _final(cfg, steps, seed):
    cfg = cfg.replace(steps=steps, seed=seed, eval_every=steps)
    tr = Trainer(cfg, progress=False)
    tr.run()
    return tr.history[-1]


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


STATISTICS = ("attention_ratio_frozen_embedding", "gram_block_score_frozen_attention")


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    runs = dict(preset("compensation"))
    fe, fa = runs["frozen-embedding"], runs["frozen-attention"]
    if inject.get("freeze_attention_too"):
        fe = fe.replace(model=dataclasses.replace(fe.model, attention="uniform", train=("W_V",)))
    if inject.get("freeze_embedding_too"):
        fa = fa.replace(model=dataclasses.replace(fa.model, train=("W_V",)))
    r_fe = _final(fe, params["steps"], params["seed"])
    r_fa = _final(fa, params["steps"], params["seed"])
    ratio = r_fe["attn_same_topic"] / r_fe["attn_diff_topic"]
    block = r_fa["block_score_gram"] + inject.get("block_score_shift", 0.0)
    return compare_all(
        [
            compare_greater(
                ratio,
                params["min_attention_ratio"],
                label="same:different-topic attention ratio (frozen embedding) > threshold",
                details={
                    "attention_ratio_frozen_embedding": ratio,
                    "gram_block_score_frozen_embedding": r_fe["block_score_gram"],
                },
            ),
            compare_greater(
                block,
                params["min_gram_block_score"],
                label="Gram block score (frozen attention) > threshold",
                details={"gram_block_score_frozen_attention": block},
            ),
        ]
    )


def falsify(params: dict) -> dict:
    """The Gram block score read 0.01 lower (a fixed number, about 9 calibration SDs of 0.0011): it then lands
    about 0.005 below the 0.968 threshold, as far below as seed 0 is above it (issue 25 item 6: a threshold
    loosened by more than that lets it pass). (``{"freeze_attention_too": True, "freeze_embedding_too":
    True}``, handicapping both, breaks both sub-checks by far.)"""
    return {"block_score_shift": -0.01}


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, null, values per calibration seed)}``.
_RATIO_REASON = "spread (CV 22%): the 99% prediction bound does not beat the null 1; the claim is 'ratio > 1'"
CALIBRATION = {
    ("default", "min_attention_ratio"): (
        "prediction_lower_log",
        1.0,
        (1.47355, 2.16424, 1.91437, 1.37293, 2.29683),
        _RATIO_REASON,
    ),
    ("default", "min_gram_block_score"): (
        "prediction_lower",
        0.0,
        (0.973178, 0.973957, 0.973043, 0.971378, 0.971762),
    ),
    ("full", "min_attention_ratio"): (
        "prediction_lower_log",
        1.0,
        (1.86315, 2.59748, 2.46937, 1.65729, 2.86562),
        _RATIO_REASON,
    ),
    ("full", "min_gram_block_score"): ("prediction_lower", 0.0, (0.97612, 0.970828, 0.974247, 0.974042, 0.97623)),
}

DEFAULT = dict(steps=400, seed=0, min_attention_ratio=1.0, min_gram_block_score=0.968)
FULL = dict(steps=1000, seeds=JUDGED_SEEDS, min_attention_ratio=1.0, min_gram_block_score=0.965)


def domain():
    """Any seed (init, documents) at the default tier's configuration and thresholds; cost: two
    400-step runs per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.compensation",
    statement="Embedding and attention compensate: with a frozen random embedding attention becomes topic-aware; "
    "with frozen uniform attention the embedding Gram becomes block-structured",
    source="EMPIRICAL",
    spec="SPEC §0 (secondary summaries: 'the other can compensate')",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=30.0,
    falsify=falsify,
)
