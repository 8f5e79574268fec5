"""Paper overview, SPEC §0 ("embedding and attention can compensate for each other: if one is
handicapped the other still encodes topics"; EMPIRICAL, seeded finite-sample runs, preset
``compensation``): one layer, one head, trained embedding tied to the decoder, W^V from the
identity, cross-entropy, Adam lr 3e-3 on LDA documents (alpha = 0.1, T = v = 10,
N ~ U[100, 150], fresh minibatches of 40).

Tiers. The default ``verify`` trains 400 steps on seed 0 (measured: pooled ratio 0.99996 untrained, 1.917 trained,
95% interval of the paired log gain [0.588, 0.717]; block score 0.9724); ``verify --full`` trains 1000 steps on
seeds 0-6 (all must pass: power 0.918) (init and documents) and reports the fraction of seeds passing and 95%
t-intervals of the statistics.

Thresholds (calibration seeds 100-104, never judged; :mod:`proofs_numeric._empirical`):

- the block score by ``prediction_lower`` (the 99% lower prediction bound of one new seed, mean - k SD, k = 4.10
  for 5 seeds): 400 steps 0.9732, 0.9740, 0.9730, 0.9714, 0.9718 -> 0.968; 1000 steps 0.9761, 0.9708, 0.9742,
  0.9740, 0.9762 -> 0.965;
- the attention sub-check is a paired comparison whose threshold is its definition (the interval's lower end
  above 0; issue 36 item 7). Its lower ends on the calibration seeds: 400 steps 0.432, 0.656, 0.578, 0.335, 0.547;
  1000 steps 0.621, 0.897, 0.790, 0.500, 0.744. The former "ratio > 1 on 8 documents" had no baseline (the
  untrained model's ratio is 1.0000 +- 0.0001, so any noise above 1 passed) and no calibrated threshold above 1
  (the ratio's seed-to-seed CV is 22%).

1. Embedding frozen at a random N(0, 1/d) matrix (no topic structure), attention trained: a paired comparison
   with the *untrained* model of the same seed (the init, before step 1) on the same ``n_probe`` = 64 fresh probe
   documents (their own rng, never trained on): the pooled, length-normalised same-topic : different-topic
   attention ratio (:func:`theorycheck.analysis.stats.attention_class_averages`) rises by training, i.e. the
   95% bootstrap interval (2000 document resamples, the same documents for both models) of
   ``log ratio(trained) - log ratio(untrained)`` lies above 0.
2. Attention frozen uniform, embedding trained: the block score (R^2 of the topic-block fit) of
   the Gram ``W_E^T W_E`` ends above a threshold (0.968 after 400 steps, 0.965 after 1000; seed 0
   measured 0.9724), from about 0.05 at the init.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.analysis.stats import attention_class_averages
from theorycheck.nn import Trainer, preset
from theorycheck.report.claims import Claim, by_seed, compare_all, compare_greater
from theorycheck.sampling import sample_documents
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds

#: Probe documents of the paired comparison and bootstrap replicates of its interval.
N_PROBE = 64
N_BOOT = 2000


def _final(cfg, steps, seed):
    cfg = cfg.replace(steps=steps, seed=seed, eval_every=steps)
    tr = Trainer(cfg, progress=False)
    tr.run()
    return tr.history[-1]


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


STATISTICS = ("attention_log_gain_ci_low", "attention_ratio_frozen_embedding", "gram_block_score_frozen_attention")


def class_sums(model, tokens, labels) -> np.ndarray:
    """Per document ``b``: ``(same-topic attention sum, same-topic pairs, different-topic sum, pairs)``, shape
    ``(B, 4)``, length-normalised (:func:`theorycheck.analysis.stats.attention_class_averages` on each document)."""
    maps = model.attention_maps(tokens)[0, 0]
    out = np.zeros((len(tokens), 4))
    for b in range(len(tokens)):
        st = attention_class_averages(maps[b : b + 1], tokens[b : b + 1], normalise=True, labels=labels)
        for j, k in enumerate(("same_topic", "diff_topic")):
            n = st[f"n_{k}"]
            out[b, 2 * j : 2 * j + 2] = (st[k] * n if n else 0.0, n)
    return out


def pooled_log_ratio(sums: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``log((sum_same / n_same) / (sum_diff / n_diff))`` pooled over documents, each weighted by ``weights``
    (``(R, B)`` bootstrap multiplicities; one unweighted value if None)."""
    w = np.ones((1, len(sums))) if weights is None else weights
    t = w @ sums
    return np.log(t[:, 0] / t[:, 1]) - np.log(t[:, 2] / t[:, 3])


def paired_attention_gain(fe, steps: int, seed: int, inject: dict) -> dict:
    """The frozen-embedding run of ``seed``: the pooled ratio of the untrained and the trained model on the same
    probe documents, and the percentile bootstrap interval of the paired log gain (documents resampled)."""
    tr = Trainer(fe.replace(steps=steps, seed=seed, eval_every=0), progress=False)
    labels = tr.tm.token_topics()
    toks = sample_documents(tr.tm, N_PROBE, fe.data.N, rng=np.random.default_rng([seed, 36])).tokens
    before = class_sums(tr.model, toks, labels)
    tr.run()
    after = class_sums(tr.model, toks, labels)
    W = np.random.default_rng([seed, 37]).multinomial(N_PROBE, np.full(N_PROBE, 1.0 / N_PROBE), size=N_BOOT)
    W = W.astype(np.float64)
    shift = inject.get("log_gain_shift", 0.0)
    gain = float(pooled_log_ratio(after)[0] - pooled_log_ratio(before)[0]) + shift
    reps = pooled_log_ratio(after, W) - pooled_log_ratio(before, W) + shift
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return {"attention_ratio_untrained": float(np.exp(pooled_log_ratio(before)[0])),
            "attention_ratio_frozen_embedding": float(np.exp(pooled_log_ratio(after)[0])),
            "attention_log_gain": gain, "attention_log_gain_ci95": [float(lo), float(hi)],
            "attention_log_gain_ci_low": float(lo)}  # fmt: skip


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    runs = dict(preset("compensation"))
    fe, fa = runs["frozen-embedding"], runs["frozen-attention"]
    if inject.get("freeze_attention_too"):
        fe = fe.replace(model=dataclasses.replace(fe.model, attention="uniform", train=("W_V",)))
    if inject.get("freeze_embedding_too"):
        fa = fa.replace(model=dataclasses.replace(fa.model, train=("W_V",)))
    att = paired_attention_gain(fe, params["steps"], params["seed"], inject)
    r_fa = _final(fa, params["steps"], params["seed"])
    block = r_fa["block_score_gram"] + inject.get("block_score_shift", 0.0)
    return compare_all(
        [
            compare_greater(
                att["attention_log_gain_ci_low"],
                0.0,
                label="frozen embedding: 95% CI of log ratio(trained) - log ratio(untrained) above 0 (paired)",
                details=att,
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
CALIBRATION = {
    ("default", "CI low > 0"): (
        "definition",
        0.0,
        (0.43165514458911763, 0.6562455656614412, 0.5776467745670492, 0.3347146482975809, 0.5474726044933205),
    ),
    ("default", "min_gram_block_score"): (
        "prediction_lower",
        0.0,
        (0.9731779924781174, 0.9739572458440592, 0.9730432437083303, 0.9713777525977866, 0.9717624607166458),
    ),
    ("full", "CI low > 0"): (
        "definition",
        0.0,
        (0.6209871225836762, 0.8972663649640914, 0.7895455272677285, 0.500099221615748, 0.7439961605692155),
    ),
    ("full", "min_gram_block_score"): (
        "prediction_lower",
        0.0,
        (0.9761203504111527, 0.9708277759132625, 0.9742466977736498, 0.9740420673559017, 0.9762296800353599),
    ),
}

DEFAULT = dict(steps=400, seed=0, min_gram_block_score=0.968)
FULL = dict(steps=1000, seeds=JUDGED_SEEDS, min_gram_block_score=0.965)


def domain():
    """Any seed (init, documents) at the default tier's configuration and thresholds; cost: two
    400-step runs per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.compensation",
    statement="Embedding and attention compensate: with a frozen random embedding, training raises attention's "
    "same:different-topic ratio above the untrained model's (paired, 95% CI on 64 probe documents); with frozen "
    "uniform attention the embedding Gram becomes block-structured",
    source="EMPIRICAL",
    spec="SPEC §0 (secondary summaries: 'the other can compensate')",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=30.0,
    falsify=falsify,
)
