"""SPEC §5.4-5.5, §6 item 25 (EMPIRICAL): pretrained MiniLM attention, averaged over its 72
heads, puts more length-normalised weight ``n A[i, j]`` on same-topic word pairs than on
different-topic pairs of Wikipedia text (stop words and sub-word pieces skipped).

Pass criterion: the lower end of the 95% bootstrap CI (resampling windows) of the head-averaged
gap is above 0. Details report per-head counts and the co-occurrence comparison (§5.5).
Registered only when the optional ``nlp`` extra is installed (see ``_realdata_common``).

Seeds: the default ``verify`` judges seed 0; ``verify --full`` judges seeds 0-6 (all must pass: power 0.918), where a
seed draws the LDA fit, the window sample, the bootstrap resamples (and the synthetic documents), see
``_realdata_common``; the threshold is the claim's definition (nothing fitted); calibration seeds
100-104 are recorded by ``benchmarks/calibrate_empirical.py``.
"""

from __future__ import annotations

import numpy as np

from proofs_numeric import _realdata_common as common
from theorycheck.report.claims import Claim, by_seed, compare_greater

STATISTICS = ("mean_gap_ci_low", "mean_gap")


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


def _check_one(params: dict, inject: dict | None = None):
    from theorycheck.realdata import stats as S
    from theorycheck.realdata.pipeline import _nanmean, attention_statistics, cooccurrence_statistics

    prep, encoded = common.prepared(params)
    M = common.membership(prep, inject)
    pairs, cooc = cooccurrence_statistics(prep, M, n_cooccur=100)
    c = prep.model.config
    att = attention_statistics(
        encoded,
        M,
        pairs,
        n_layers=c.num_hidden_layers,
        n_heads=c.num_attention_heads,
        n_boot=params["n_boot"],
        rng=np.random.default_rng(params["seed"]),
    )
    lo, hi = att.mean_gap_ci
    res = compare_greater(lo, 0.0, label="CI low of the head-mean same-minus-different attention gap > 0")
    ia, ib, ic = (S.ATTN_CLASSES.index(k) for k in ("same_topic", "different_topic", "top_cooccurring"))
    res.details = {
        "mean_gap": _nanmean(att.gap),
        "mean_gap_ci_low": lo,
        "mean_gap_ci": [lo, hi],
        "heads_ci_above_0": int(np.sum(att.gap_ci[..., 0] > 0)),
        "heads_ci_below_0": int(np.sum(att.gap_ci[..., 1] < 0)),
        "lift_same_topic": _nanmean(att.mean_lift[..., ia]),
        "lift_different_topic": _nanmean(att.mean_lift[..., ib]),
        "lift_top_cooccurring": _nanmean(att.mean_lift[..., ic]),
        "top_cooccurring_same_topic_fraction": cooc["fraction_same_topic"],
        "windows": att.n_sequences,
    }
    if not inject:  # null reference: the same statistic with topic sets permuted among topic tokens
        null = attention_statistics(
            encoded,
            common.membership(prep, falsify(params)),
            None,
            n_layers=c.num_hidden_layers,
            n_heads=c.num_attention_heads,
            n_boot=params["n_boot"],
            rng=np.random.default_rng(params["seed"]),
        )
        res.details["null_permuted_mean_gap"] = _nanmean(null.gap)
        res.details["null_permuted_mean_gap_ci"] = list(null.mean_gap_ci)
    res.data = {"gap": att.gap, "gap_ci": att.gap_ci}
    return res


def falsify(params: dict) -> dict:
    """Permute the topic sets among the topic tokens: same/different topic no longer means anything."""
    return {"permute_topics_seed": 1}


def plot(results):
    from theorycheck.realdata.plots import attention_gap_heatmap

    r = results[0]
    return {"gap": attention_gap_heatmap(r.data["gap"], r.data["gap_ci"])}


SKIPPED = common.SKIP_REASON
CLAIMS = []
if common.AVAILABLE:
    CLAIMS.append(
        Claim(
            id="realdata.attention-topic-gap",
            statement="Pretrained MiniLM attention (mean over 6x12 heads) is larger between same-topic "
            "than different-topic "
            "words of Wikipedia text (95% bootstrap CI above 0)",
            source="EMPIRICAL",
            spec="SPEC §5.4, §5.5, §6 item 25",
            check=check,
            default_params=(dict(common.DEFAULTS),),
            full_params=(common.full_params(),),
            domain=common.domain,
            falsify=falsify,
            group="realdata",  # one worker runs all realdata checks: they share the encoder pass
            cost=25.0,
            plot=plot,
        )
    )
