"""SPEC §1.1, §4.3 (DERIVED): the exact N -> inf attention loss is the limit of the
finite-document loss, with an O(1/N) gap.

Finite documents are simulated by an independent code path (``theorycheck.montecarlo``:
sampled topic sets and words, BERT masking, attention over the actual positions, the query's own
position among the keys). The claim: the gap ``L_MC(N) - L(inf)`` scales like 1/N, i.e.
``N * gap`` at N = 400 equals ``N * gap`` at N = 50 within 4 combined standard errors plus 25%
(room for the O(1/N^2) term).
"""

from __future__ import annotations

import numpy as np

from theorycheck.analysis.landscape import finite_n_gap
from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix
from theorycheck.report.claims import Claim, compare_close

from ._attention_common import models

NS = (50, 400)


def check(params, inject=None):
    inject = inject or {}
    tm, mk = models(params)
    S = alpha_beta_score_matrix(params["alpha"], params["beta"], tm)
    W = alpha_beta_value_matrix(tm, mk)
    g = finite_n_gap(S, W, tm, mk, NS, n_docs=params["n_docs"], seed=params["seed"])
    exact = g["exact"] + inject.get("exact_shift", 0.0)
    gap = g["mc"] - exact
    ng = np.array(NS) * gap
    se = np.array(NS) * g["stderr"]
    tol = 4.0 * float(np.hypot(*se)) + 0.25 * abs(ng[0])
    res = compare_close(
        ng[1],
        ng[0],
        tol,
        details={
            "N_gap_50": float(ng[0]),
            "N_gap_400": float(ng[1]),
            "exact": float(exact),
            "mc_400": float(g["mc"][1]),
        },
    )
    res.data["gap"] = (np.array(NS), gap, g["stderr"])
    return res


def falsify(params):
    """Compare with a limit 0.01 off the exact loss: the gap then no longer decays like 1/N."""
    return {"exact_shift": 0.01}


def plot(results):
    from theorycheck.report.plots import finite_n_gap as fig_gap

    for r in results:
        if "gap" in r.data:
            N, gap, se = r.data["gap"]
            return {"attention_finite_n_gap": fig_gap(N, gap, se, title="Monte Carlo (finite N) - exact (N = inf)")}
    return {}


CLAIM = Claim(
    id="attention.finite-n",
    statement=(
        "The finite-document (Monte Carlo) attention loss converges to the exact N -> inf loss with an O(1/N) gap"
    ),
    source="DERIVED",
    spec="SPEC §1.1 (N -> inf limit), §4.3",
    check=check,
    default_params=(dict(T=4, v=3, tau=2, p_m=0.3, p_c=0.2, p_r=0.2, alpha=2.0, beta=1.0, n_docs=3000, seed=7),),
    falsify=falsify,
    plot=plot,
)
