"""SPEC §5.4, §6 item 25 [SEC] (EMPIRICAL): the embedding topic effect is stronger for
topic-specific words. When only the top 0.25% of each LDA topic's words (the most topic-specific)
get a topic, the MiniLM input-embedding cosine gap ``mean(same topic) - mean(different topic)`` is
larger than when the top 5% do.

Pass criterion: the 95% bootstrap CIs are disjoint in that order (CI low at 0.25% > CI high at 5%).
Registered only when the optional ``nlp`` extra is installed (see ``_realdata_common``).

Seeds: the default ``verify`` judges seed 0; ``verify --full`` judges seeds 0-6 (all must pass: power 0.918), where a
seed draws the LDA fit, the window sample, the bootstrap resamples (and the synthetic documents), see
``_realdata_common``; the threshold is the claim's definition (nothing fitted); calibration seeds
100-104 are recorded by ``benchmarks/calibrate_empirical.py``.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np

from proofs_numeric import _realdata_common as common
from theorycheck.report.claims import Claim, by_seed, compare_greater

STATISTICS = ("ci_separation",)


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


def _check_one(params: dict, inject: dict | None = None):
    from theorycheck.realdata.pipeline import specificity_sweep

    base = {k: params[k] for k in common.DEFAULTS}
    prep, _ = common.prepared(base)
    if inject and "permute_words_seed" in inject:
        perm = np.random.default_rng(inject["permute_words_seed"]).permutation(len(prep.fit.vocab))
        prep = dataclasses.replace(prep, fit=dataclasses.replace(prep.fit, phi=prep.fit.phi[:, perm]))
    rows = specificity_sweep(
        prep,
        (params["specific"], params["general"]),
        n_boot=params["n_boot"],
        rng=np.random.default_rng(params["seed"]),
    )
    spec, gen = rows[0]["cosine"], rows[1]["cosine"]
    specific, general = params["specific"], params["general"]
    res = compare_greater(
        spec["ci_low"],
        gen["ci_high"],
        label=f"CI low of the cosine gap (top {100 * specific:g}%) > CI high (top {100 * general:g}%)",
    )
    res.details = {"rows": rows, "ci_separation": spec["ci_low"] - gen["ci_high"]}
    return res


def falsify(params: dict) -> dict:
    """Shuffle the words' columns of the topic-word matrix: topic 'specificity' becomes random."""
    return {"permute_words_seed": 1}


SKIPPED = common.SKIP_REASON
CLAIMS = []
if common.AVAILABLE:
    CLAIMS.append(
        Claim(
            id="realdata.embedding-specificity",
            statement="MiniLM embedding cosine gap (same minus different topic) is larger for the most topic-specific "
            "words (top 0.25% per topic) than for the top 5% (disjoint 95% bootstrap CIs)",
            source="EMPIRICAL",
            spec="SPEC §5.4, §6 item 25",
            check=check,
            default_params=(dict(common.DEFAULTS, specific=0.0025, general=0.05),),
            full_params=(common.full_params(specific=0.0025, general=0.05),),
            domain=partial(common.domain, specific=0.0025, general=0.05),
            falsify=falsify,
            group="realdata",  # one worker runs all realdata checks: they share the encoder pass
        )
    )
