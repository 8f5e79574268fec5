"""SPEC §1.1, §4.3 (DERIVED): the exact N -> inf attention loss is the limit of the
finite-document loss, with an O(1/N) gap.

Finite documents are simulated by an independent code path (``theorycheck.sampling.montecarlo``:
sampled topic sets and words, BERT masking, attention over the actual positions, the query's own
position among the keys). The claim: the gap ``L_MC(N) - L(inf)`` scales like 1/N, i.e.
``N * gap`` at N = 400 equals ``N * gap`` at N = 50 within 4 combined standard errors plus 25%
(room for the O(1/N^2) term), with or without masked keys (``mask_keys``).

Precondition found by ``verify --explore``: with ``mask_keys`` a document whose every position is
selected and not kept has no visible key (probability ``(1 - a)^N``), which decays exponentially, not
like 1/N; when ``1 - a`` is large it dominates the gap at N = 50. Minimal counterexample: T = 2, v = 1,
tau = 1, p_m = 0.95, p_c = p_r = 0, alpha = beta = 0: exact loss 180.97, Monte Carlo 167.23 at N = 50
(0.95^50 = 7.7% of documents without a key) and 180.97 at N = 400, so N gap is -687 at N = 50 and 2e-9
at N = 400. The same holds for documents without a selected position (probability ``(1 - p_m)^N``, conditioned
away): T = 2, v = 1, tau = 1, p_m = 0.05, p_c = 0.85, alpha = 4 gives N gap 0.00316 at N = 50 and
0.00144 at N = 400. The claim's 1/N scaling therefore needs ``(1 - p_m)^50 <= 1e-6`` and, when keys
are masked, ``(1 - a)^50 <= 1e-6`` (derived in SPEC §4.3(c)); the exact kind needs neither.

``figure_Ns`` (default parameters only) adds lengths drawn in the figure, a log-log plot of the gap
with its fitted slope; they never enter the verdict.

That first check cannot tell 1/N from 1/N^2 decay. The second configuration (``kind="exact"``) is
sharp: at each of several fixed N the Monte Carlo mean must equal the exact finite-N expectation
``E_N`` (:func:`theorycheck.sampling.finite_exact.exact_finite_loss`: every masked document of a tiny
model enumerated, position-level softmax, conditioned on at least one selected position) within
4 Monte Carlo standard errors, at random S, W, b (not the (alpha, beta) family). The standard
error is about 0.1% of the loss, so an O(1/N) bias, an off-by-one in N or a 0.5% error fails it.
"""

from __future__ import annotations

import numpy as np

from theorycheck.analysis.landscape import finite_n_gap
from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.sampling.finite_exact import exact_finite_loss
from theorycheck.sampling.montecarlo import mc_attention_loss
from theorycheck.strategies import choices, masking_grid_params, model_params, params, seeds

from ._attention_common import models

NS = (50, 400)
#: rounding floor of a loss value: where every document has the same loss (T = 2, v = 1, tau = 1, found by
#: ``verify --explore``) the standard error is 0 and the gap is rounding (4e-15, i.e. 1.6e-12 for N gap at N = 400);
#: the tolerances add ROUND to a loss and N * ROUND to N gap
ROUND = 1e-13


def _random_point(tm, seed):
    rng = np.random.default_rng(seed)
    V1 = tm.V1
    return rng.normal(size=(V1, V1)), 0.5 * rng.normal(size=(V1, V1)), 0.3 * rng.normal(size=V1)


def check_exact(params, inject):
    """Monte Carlo vs the exact finite-N expectation at each N, within 4 standard errors."""
    tm, mk = models(params)
    S, W, b = _random_point(tm, params["seed"])
    subs = []
    for N in params["Ns"]:
        exact = exact_finite_loss(S, W, tm, mk, N + inject.get("N_offset", 0), b) + inject.get("exact_shift", 0.0)
        est = mc_attention_loss(S, W, tm, mk, N=N, n_docs=params["n_docs"], b=b, seed=params["seed"] + N)
        subs.append(
            compare_close(
                est.mean,
                exact,
                4.0 * est.stderr + ROUND,
                details={f"E_N[N={N}]": exact, f"mc[N={N}]": est.mean, f"z[N={N}]": (est.mean - exact) / est.stderr},
                label=f"Monte Carlo = exact E_N at N = {N} (4 SE)",
            )
        )
    res = compare_all(subs)
    res.details["L_inf"] = attention_loss(S, W, tm, mk, b)
    return res


def check(params, inject=None):
    inject = inject or {}
    if params.get("kind") == "exact":
        return check_exact(params, inject)
    tm, mk = models(params)
    S = alpha_beta_score_matrix(params["alpha"], params["beta"], tm)
    W = alpha_beta_value_matrix(tm, mk)
    mask_keys = params.get("mask_keys", False)
    # figure-only lengths come after NS: child seeds are per index, so N = 50 and 400 (the verdict) are unchanged
    Ns = NS + tuple(params.get("figure_Ns", ()))
    g = finite_n_gap(S, W, tm, mk, Ns, n_docs=params["n_docs"], seed=params["seed"], mask_keys=mask_keys)
    exact = g["exact"] + inject.get("exact_shift", 0.0)
    gap_all, se_all = g["mc"] - exact, g["stderr"]
    gap, g = gap_all[: len(NS)], {"mc": g["mc"][: len(NS)], "stderr": se_all[: len(NS)]}
    ng = np.array(NS) * gap
    se = np.array(NS) * g["stderr"]
    tol = 4.0 * float(np.hypot(*se)) + 0.25 * abs(ng[0]) + NS[1] * ROUND
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
        label="N gap at N = 400 = N gap at N = 50 (4 SE + 25%)",
    )
    order = np.argsort(Ns)
    res.data["gap"] = (np.array(Ns)[order], gap_all[order], se_all[order])
    return res


def visible_keys_likely(p: dict) -> bool:
    """Precondition of the O(1/N) kind only (SPEC §4.3(c), derived there): exponentially rare documents
    are negligible at N = 50: without a selected position, ``(1 - p_m)^50 <= 1e-6``, and with
    ``mask_keys`` without a visible key, ``(1 - a)^50 <= 1e-6`` (``a = 1 - p_m (1 - p_c)``). The exact
    kind needs none: ``E_N`` is computed under the same conditioning as the Monte Carlo estimate, so
    nothing is excluded at N = 2..5 (issue 25 item 3)."""
    if p.get("kind") == "exact":
        return True
    if (1.0 - p["p_m"]) ** NS[0] > 1e-6:  # documents without a selected position (conditioned away)
        return False
    return not p.get("mask_keys", False) or (p["p_m"] * (1.0 - p["p_c"])) ** NS[0] <= 1e-6


def domain():
    """Either kind on small models, maskings on a 0.05 grid (p_c != p_r), any seed. O(1/N) kind: T <= 4,
    v <= 3, (alpha, beta) on a grid, with or without masked keys, 3000 documents at N = 50 and 400.
    Exact kind: T <= 3, v <= 2 (at most 48^3 enumerated documents), N = 2, 3, 20000 documents each."""
    ab = choices(alpha=(0.0, 1.0, 2.0, 4.0), beta=(0.0, -1.0, 1.0), mask_keys=(False, True))
    grid = masking_grid_params(step=0.05)
    gap_kind = params(model_params(max_T=4, max_v=3), grid, ab, seeds(max_seed=1000), n_docs=3000)
    exact_kind = params(
        model_params(max_T=3, max_v=2), grid, seeds(max_seed=1000), kind="exact", Ns=(2, 3), n_docs=20000
    )
    return gap_kind | exact_kind


def falsify(params):
    """Compare with a limit off the exact loss by a fixed amount (issue 25 item 6: the falsified error is a few
    x the tolerance, so a loosened tolerance lets it pass): 0.003 for the O(1/N) kind (the N gap at N = 400
    then moves by 350 x 0.003, about 3 x its tolerance), 0.02 for the exact kind (about 3 x its 4 standard
    errors). (``{"N_offset": -1}``, E_{N-1} instead of E_N, breaks the exact kind by 18 x.)"""
    return {"exact_shift": 0.02} if params.get("kind") == "exact" else {"exact_shift": 0.003}


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
        "The finite-document (Monte Carlo) attention loss converges to the exact N -> inf loss with an O(1/N) gap, "
        "and equals the exact finite-N expectation within 4 standard errors at N = 2..5"
    ),
    source="DERIVED",
    spec="SPEC §1.1 (N -> inf limit), §2.2, §4.3",
    check=check,
    default_params=(
        dict(
            T=4,
            v=3,
            tau=2,
            p_m=0.3,
            p_c=0.2,
            p_r=0.2,
            alpha=2.0,
            beta=1.0,
            n_docs=3000,
            seed=7,
            figure_Ns=(25, 100, 200, 800, 1600),
        ),
        dict(kind="exact", T=2, v=2, tau=1, p_m=0.4, p_c=0.2, p_r=0.3, Ns=(2, 3, 4, 5), n_docs=100000, seed=11),
    ),
    falsify=falsify,
    plot=plot,
    domain=domain,
    preconditions=(("O(1/N) kind: (1 - p_m)^50 <= 1e-6 and, with mask_keys, (1 - a)^50 <= 1e-6", visible_keys_likely),),
    cost=3.5,  # CPU seconds of one check in a cold start (Numba compilation included; bench_cold_start.py)
)
