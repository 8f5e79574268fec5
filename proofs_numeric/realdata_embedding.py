"""SPEC §5.4, §6 item 24 (EMPIRICAL): in a pretrained BERT-family model (MiniLM-L6, bundled
offline), input token embeddings of same-topic words (LDA topics fitted to gensim's Wikipedia
fragment) have a larger mean dot product and cosine similarity than different-topic words.

Pass criterion: the lower end of the 95% bootstrap CI (resampling tokens) of
``mean(same topic) - mean(different topic)`` is above 0, for both dot product and cosine.
Registered only when the optional ``nlp`` extra is installed (see ``_realdata_common``).

Seeds: the default ``verify`` judges seed 0; ``verify --full`` judges seeds 0-6 (all must pass: power 0.918), where a
seed draws the LDA fit, the window sample, the bootstrap resamples (and the synthetic documents), see
``_realdata_common``; the threshold is the claim's definition (nothing fitted); calibration seeds
100-104 are recorded by ``benchmarks/calibrate_empirical.py``.
"""

from __future__ import annotations

import numpy as np

from proofs_numeric import _realdata_common as common
from theorycheck.report.claims import Claim, by_seed, compare_all, compare_greater

STATISTICS = ("cosine_gap_ci_low", "dot_gap_ci_low", "cosine_gap", "dot_gap")


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


def _check_one(params: dict, inject: dict | None = None):
    from theorycheck.realdata.pipeline import embedding_statistics

    prep, _ = common.prepared(params)
    M = common.membership(prep, inject)
    rng = np.random.default_rng(params["seed"])
    emb, values, _ = embedding_statistics(prep, M, n_no_topic=500, n_boot=params["n_boot"], rng=rng)
    subs = []
    details = {}
    for metric in ("cosine", "dot"):
        g = emb["gap"][metric]
        details[f"{metric}_gap"] = g.mean
        details[f"{metric}_gap_ci"] = [g.ci_low, g.ci_high]
        details[f"{metric}_gap_ci_low"] = g.ci_low
        for c in ("same_topic", "different_topic", "no_topic"):
            details[f"{metric}_{c}_mean"] = emb[metric][c].mean
            details[f"{metric}_{c}_std"] = emb[metric][c].std
        subs.append(compare_greater(g.ci_low, 0.0, label=f"CI low of the same-minus-different {metric} gap > 0"))
    res = compare_all(subs)
    res.details = dict(details, relative_margin=res.details["relative_margin"])
    res.data = {"values": values}
    return res


def falsify(params: dict) -> dict:
    """Permute the topic sets among the topic tokens: the topic-embedding link is destroyed."""
    return {"permute_topics_seed": 1}


def plot(results):
    from theorycheck.realdata.plots import similarity_distributions

    return {
        "cosine": similarity_distributions(
            results[0].data["values"]["cosine"], metric="cosine", exclude=("same_token",)
        )
    }


SKIPPED = common.SKIP_REASON
CLAIMS = []
if common.AVAILABLE:
    CLAIMS.append(
        Claim(
            id="realdata.embedding-topic-gap",
            statement="Pretrained MiniLM input embeddings: same-topic word pairs (LDA on Wikipedia) have "
            "larger mean dot "
            "product and cosine than different-topic pairs (95% bootstrap CI above 0)",
            source="EMPIRICAL",
            spec="SPEC §5.4, §6 item 24",
            check=check,
            default_params=(dict(common.DEFAULTS),),
            full_params=(common.full_params(),),
            domain=common.domain,
            falsify=falsify,
            group="realdata",  # one worker runs all realdata checks: they share the encoder pass
            plot=plot,
        )
    )
