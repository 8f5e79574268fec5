"""SPEC §4.3, §6 items 15-16, 20 (EMPIRICAL, deterministic exact population run): with W^V
frozen at the block-wise stage-1 optimum, training W^K, W^Q (d_a = V1, init N(0, 0.1^2), seed 0,
Adam lr 0.05, 300 steps, squared loss, T = 5, v = 4, tau = 2) makes the average attention between
different words of the same topic larger than between words of different topics, measured as in
the official ``inspect_result.py`` on 400 fresh unmasked documents of length 50 (seed 0), by a factor
``same / different`` above ``min_ratio`` = 4.53, calibrated below (not "> 1": the ratio is about 4.59, so a
strict "> 1" would let a ratio 4 times too small pass).

Falsification uses the theory itself: with an identity W^V (``W_00 = 0``) the optimum has
``beta <= 0`` (SPEC §4.3 (b)), so same-topic/different-word attention is *not* larger.

Tiers: the default ``verify`` runs seed 0; ``verify --full`` runs seeds 0-6 (all must pass: power 0.918) (init and
documents) and reports the fraction passing and a 95% t-interval of the same/different attention ratio.

Threshold (issue 36 item 9): ``prediction_lower`` on the log scale (:mod:`proofs_numeric._empirical`: the 99% lower
prediction bound of one new seed, k = 4.10 for 5 seeds) of the ratio on the calibration seeds 100-104 (never
judged): 4.5939, 4.5785, 4.6042, 4.5767, 4.5812 -> 4.53. The ratio's spread comes from the probe documents (the
trained scores of every seed are the same optimum to ~1e-4, see ``train.stage2-approaches-Kstar``): with 50
documents (the former probe) the seed-to-seed SD is 0.024 and five calibration seeds gave a bound (4.55) that two
of seeds 0-9 miss, so the probe now takes 400 documents (SD 0.008 over seeds 0-19, smallest 4.573). The ratio
depends on the document length (seeds 0-9: mean 4.39 at N = 20, 4.58 at N = 50, 4.65 at N = 100), so the
threshold holds for the calibrated probe (N = 50) only, and the claim's domain varies the seed alone.
"""

from __future__ import annotations

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.analysis.stats import attention_class_averages
from theorycheck.analysis.topic_structure import effective_K
from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer
from theorycheck.report.claims import Claim, by_seed, compare_greater
from theorycheck.sampling import sample_documents
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=("ratio_same_over_diff",))


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    d = DataConfig(T=params["T"], v=params["v"], tau=params["tau"], source="population")
    m = ModelConfig(V1=d.V1, attention="softmax", train=("W_K", "W_Q"), init="normal", init_scale=0.1, loss="squared")
    cfg = TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.05),
        steps=params["steps"],
        log_every=params["steps"],
        eval_every=0,
        eval_docs=0,
        init_W_V="stage1-optimum",
        seed=params["seed"],
    )
    tr = Trainer(cfg, progress=False)
    if inject.get("identity_W_V"):
        W = np.eye(d.V1)
        W[0, 0] = 0.0
        tr.model.get("layers.0.W_V")[0] = W
    res = tr.run()
    toks = sample_documents(d.topic_model(), params["n_docs"], params["N"], seed=params["seed"]).tokens
    st = attention_class_averages(res.model.attention_weights(toks), toks, d.v)
    K = effective_K(res.model.score_matrix(), d.v)
    same = st["same_topic"] * inject.get("same_topic_scale", 1.0)
    out = compare_greater(
        same / st["diff_topic"],
        params["min_ratio"],
        label="same-topic / different-topic attention > min_ratio (calibrated)",
        details={
            "attn_same_word": st["same_word"],
            "attn_same_topic": st["same_topic"],
            "attn_diff_topic": st["diff_topic"],
            "ratio_same_over_diff": st["same_topic"] / st["diff_topic"],
            "K_eff_median": float(np.median(K)),
            "final_loss": res.final["loss"],
        },
    )
    return out


def falsify(params: dict) -> dict:
    """Same-topic attention read 2% low (a fixed factor 0.98): the ratio 4.597 of seed 0 then lands at 4.505, 0.025
    below the threshold 4.53, less than its passing margin 0.067 (a threshold lowered by more than that lets it
    pass). (The theory's own falsifier, an identity W^V ``{"identity_W_V": True}`` whose optimum has beta <= 0,
    breaks it by far.)"""
    return {"same_topic_scale": 0.98}


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, null, values per calibration seed)}``.
CALIBRATION = {
    ("default", "min_ratio"): (
        "prediction_lower_log",
        1.0,
        (4.593909730064472, 4.578522110222438, 4.604240061032363, 4.576651138356573, 4.581226327429527),
    ),
}

DEFAULT = dict(T=5, v=4, tau=2, steps=300, n_docs=400, N=50, min_ratio=4.53, seed=0)
FULL = dict(T=5, v=4, tau=2, steps=300, n_docs=400, N=50, min_ratio=4.53, seeds=JUDGED_SEEDS)


def domain():
    """Any seed (init, probe documents) at the calibrated probe (400 documents of length 50: the threshold is
    calibrated there, the ratio depends on the length); cost: one 300-step exact population run per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.stage2-same-topic-attention",
    statement=(
        "After stage 2 (W^V block-wise, W^K/W^Q trained) same-topic attention exceeds different-topic attention by "
        "a factor above 4.53 (calibrated; 400 documents of length 50)"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.3, §5.1, §6 items 16, 20",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=2.0,
    falsify=falsify,
)
