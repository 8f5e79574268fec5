"""SPEC §6 item 15 (DERIVED): with the stage-1 block W^V the loss depends on (alpha, beta)
only through K = e^alpha + (v - 1) e^beta, and L(K = v) = 1 - 1/(tau v) (uniform attention is
the stage-1 optimum).

Checked with the *general* evaluator (arbitrary S), not the closed form: pairs (alpha, beta) on
the same level set of K must give the same loss, and alpha = beta = 0 must give 1 - 1/(tau v).
"""

from __future__ import annotations

import math

import numpy as np

from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.strategies import masking_params, model_params, params

from ._attention_common import models

TOL = 1e-12


def _pairs(K, v, n=4):
    """(alpha, beta) with e^alpha + (v-1) e^beta = K, spreading the weight differently (v = 1: alpha =
    log K and several beta, which then scores no pair and must not matter)."""
    if v == 1:
        return [(math.log(K), b) for b in np.linspace(-3.0, 3.0, n)]
    out = []
    for frac in np.linspace(0.05, 0.95, n):  # fraction of K on the same word
        a = math.log(frac * K)
        b = math.log((1 - frac) * K / (v - 1))
        out.append((a, b))
    return out


def check(params, inject=None):
    inject = inject or {}
    tm, mk = models(params)
    W = inject.get("W")
    if W is None:
        W = alpha_beta_value_matrix(tm, mk, "block")
    spreads = []
    curve = []
    for K in (0.3 * tm.v, 3.0 * tm.v, 30.0 * tm.v):
        vals = [attention_loss(alpha_beta_score_matrix(a, b, tm), W, tm, mk) for a, b in _pairs(K, tm.v)]
        spreads.append(max(vals) - min(vals))
        curve.append((K, vals))
    L_uniform = attention_loss(np.zeros((tm.V1, tm.V1)), W, tm, mk)
    r1 = compare_close(
        max(spreads),
        0.0,
        TOL,
        details={"max_spread_on_level_set": max(spreads)},
        label="spread of L on a K level set = 0",
    )
    r2 = compare_close(
        L_uniform, 1.0 - 1.0 / (tm.tau * tm.v), TOL, details={"L_K_equals_v": L_uniform}, label="L(K=v) = 1 - 1/(tau v)"
    )
    res = compare_all([r1, r2])
    return res


def domain():
    """T <= 6, v <= 4, every tau, every masking (p_c != p_r): the general evaluator enumerates every
    tau-subset, O(C(T, tau) V1^2) per point."""
    return params(model_params(max_T=6, max_v=4), masking_params())


#: The falsifier's perturbation (issue 25 item 6): a fixed number sized so that the level-set spread is
#: 2-6 x TOL on the default configurations (a loosened TOL lets it pass).
FALSIFIER_EPS = 1.5e-11


def falsify(params):
    """Add FALSIFIER_EPS I to the block W^V: the same-word score then matters on its own, by a few x TOL."""
    tm, mk = models(params)
    return {"W": alpha_beta_value_matrix(tm, mk, "block") + FALSIFIER_EPS * np.eye(tm.V1)}


CLAIM = Claim(
    id="attention.block-K-only",
    statement="Block stage-1 W^V: L(alpha, beta) depends only on K = e^alpha + (v-1)e^beta, and L(K=v) = 1 - 1/(tau v)",
    source="DERIVED",
    spec="SPEC §4.3, §6 item 15",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=6, v=4, tau=2, p_m=0.3, p_c=0.2, p_r=0.2),
    ),
    falsify=falsify,
    domain=domain,
)
