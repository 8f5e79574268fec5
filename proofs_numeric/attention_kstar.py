"""SPEC §6 item 16 (DERIVED): with the stage-1 block W^V, tau = 1 gives K* = v (uniform
attention is already optimal) and tau >= 2 gives K* > v (more per-word weight on the query's
topic). At the paper's configuration (T = v = 10, tau = 3, p = .15/.1/.1) the SPEC §4.3
table gives K* = 70.05, L* = 0.961770; we recompute them (own grid + Brent on log K,
independent of ``optimal_attention``), compare at half a unit of the printed digits, require the
certified solver to agree, and re-evaluate the closed form at K* and K = v by the independent
symmetric route (``theorycheck.population._symmetry``) within 1e-10.

Precondition found by us (hypothesis, tests/test_attention_closed_form.py): K* > v needs
p_c > 0. Without kept queries (p_c = 0) the shown query token is independent of the target and
uniform attention K = v is optimal for every tau; the third default configuration checks this.
"""

from __future__ import annotations

import math

from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.solvers import optimal_attention

from ._attention_common import kstar, models, swapped_constants
from .attention_asymptotic import route_checks, unit4


def check(params, inject=None):
    inject = inject or {}
    tm, mk = models(params)
    K, L = kstar(tm, mk, constants=inject.get("constants"))
    sol = optimal_attention(tm, mk, value="block", check_general=False)
    subs = [compare_close(sol.K / K, 1.0, 1e-5, details={"K_solver": sol.K, "K_own": K})]
    # independent route (topic-permutation symmetry, one set evaluated densely) at K* and K = v
    subs += route_checks(tm, mk, (math.log(K), math.log(tm.v)), inject.get("constants"), f"tau={tm.tau}")
    if tm.tau == 1 or mk.p_c == 0.0:
        subs.append(compare_close(K / tm.v, 1.0, 1e-3, details={"K_star_over_v": K / tm.v}))
    else:
        subs.append(compare_greater(K / tm.v, 1.0, details={"K_star_over_v": K / tm.v}))
    if "K_table" in params:  # SPEC §4.3 table, 4 significant digits / 6 decimals: half a unit
        subs.append(compare_close(K, params["K_table"], 0.5 * unit4(params["K_table"]), details={"K_star": K}))
        subs.append(compare_close(L, params["L_table"], 5e-7 + 1e-12, details={"L_star": L}))
    res = compare_all(subs)
    res.details.update(K_star=K, L_star=L)
    from theorycheck.analysis.landscape import K_curve

    lk, LK = K_curve(tm, mk, logK=(-2.0, 12.0, 400))
    res.data["curve"] = (f"{tm.tau}, p_c={mk.p_c:g}", lk, LK, K)
    return res


def plot(results):
    from theorycheck.report.plots import loss_vs_K

    curves = [r.data["curve"] for r in results if "curve" in r.data]
    return {"attention_loss_vs_K": loss_vs_K(curves)} if curves else {}


def falsify(params):
    """Anti-topic block W^V (same- and different-topic entries exchanged): K* drops below v."""
    tm, mk = models(params)
    return {"constants": swapped_constants(tm, mk)}


CLAIM = Claim(
    id="attention.kstar",
    statement=(
        "Block W^V: tau = 1 (or p_c = 0) gives K* = v; tau >= 2 with p_c > 0 gives K* > v; T=v=10, tau=3: K* = 70.05,"
        " L* = 0.961770"
    ),
    source="DERIVED",
    spec="SPEC §4.3 table, §6 item 16",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1, K_table=70.05, L_table=0.961770),
        dict(T=10, v=10, tau=1, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.0, p_r=0.2),
        dict(T=100, v=10, tau=10, p_m=0.15, p_c=0.1, p_r=0.1, K_table=416.8, L_table=0.981893),
    ),
    falsify=falsify,
    plot=plot,
)
