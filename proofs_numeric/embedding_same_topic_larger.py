"""SPEC §6 item 14 (PAPER): the embedding layer encodes topics as a higher average inner
product (and cosine similarity) between same-topic words than between different-topic words.

Source: the paper's abstract [TXT in SPEC §0]; the exact wording of Theorem 1's conclusion 3
could not be read (SPEC §4.1, [INF]). We check it on the tied model's optima that training
reaches (L-BFGS from a small init on the exact population loss) and on the minimum-norm optimum,
with the paper's pair classes (distinct tokens; [MASK] excluded). It is NOT a property of every
minimiser: adding ``c P_w`` (within-topic zero-mean projector, a direction the loss ignores) keeps
the loss optimal and reverses the sign for c > v(x - y) = 1/a; ``falsify`` does exactly that. Needs ``tau < T``: with a
single document law the min-norm Gram is constant on words (no topic structure, gap 0).
"""

from __future__ import annotations

import numpy as np

from theorycheck.analysis.stats import embedding_topic_stats
from theorycheck.report.claims import Claim, compare_greater
from theorycheck.solvers import closed_form_gram, embedding_from_gram
from theorycheck.strategies import masking_grid_params, model_params, params, seeds, tau_below_T

from ._embedding_common import models, trained_embedding, with_dim


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    d = params["d"]
    W_train = trained_embedding(tm, mk, d, seed=params.get("seed", 0))
    W_min = embedding_from_gram(closed_form_gram(tm, mk), d)
    gaps = {}
    for name, W in (("trained", W_train), ("min_norm", W_min)):
        if "null_scale" in inject:  # G + c P_w: same loss, reversed within-topic structure
            G = W.T @ W
            Pw = np.zeros_like(G)
            Pw[1:, 1:] = np.eye(tm.n_words) - np.kron(np.eye(tm.T), np.ones((tm.v, tm.v)) / tm.v)
            W = embedding_from_gram(G + inject["null_scale"] * Pw, tm.V1)
        s = embedding_topic_stats(W, tm)
        gaps[f"{name}.gap_dot"] = s.gap_dot
        gaps[f"{name}.gap_cos"] = s.gap_cos
        gaps[f"{name}.same_topic_dot"] = s.same_topic_dot
        gaps[f"{name}.diff_topic_dot"] = s.diff_topic_dot
    name, worst = min(((k, v) for k, v in gaps.items() if "gap" in k), key=lambda kv: kv[1])
    kind = "inner product" if name.endswith("dot") else "cosine"
    return compare_greater(worst, 0.0, details=gaps, label=f"{name.split('.')[0]} same - different topic {kind} > 0")


def domain():
    """T <= 6, 2 <= v <= 4 (the same-topic distinct-token class needs v >= 2), every tau, maskings on a 0.05
    grid (p_c != p_r), d = T..T+3, any init seed: one L-BFGS run on the exact loss (V1 <= 25) per draw."""
    base = params(model_params(max_T=6, min_v=2, max_v=4), masking_grid_params(step=0.05), seeds(max_seed=1000))
    return with_dim(base, extra=(0, 3))


def falsify(params: dict) -> dict:
    """Add 3 P_w to the Gram (still an optimum): same-topic distinct-token products drop by 3/v."""
    return {"null_scale": 3.0}


CLAIM = Claim(
    id="embedding.same-topic-larger",
    statement=(
        "Trained tied embeddings have larger mean inner product and cosine similarity for same-topic "
        "word pairs than for different-topic pairs (small-init and min-norm optima)"
    ),
    source="PAPER",
    spec="SPEC §0 (abstract), §4.1 conclusion 3 [INF], §6 item 14",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1, d=12),
        dict(T=6, v=4, tau=2, p_m=0.4, p_c=0.3, p_r=0.3, d=8),
    ),
    falsify=falsify,
    domain=domain,
    preconditions=(("tau < T", tau_below_T),),
)
