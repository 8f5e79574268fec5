"""SPEC §4.5 made quantitative (DERIVED, ``theorycheck.analysis.dynamics``): at the end of stage 1
(W^V at the min-norm block optimum, uniform attention ``S = 0``) the population gradient
``G = dL/dS`` has rank ``T - 1``, its singular vectors are the topic-contrast vectors (so the first
thing attention learns is the topic pattern, with the same weight on the query word and on the
other words of its topic), and its top singular value, which sets the stage-2 growth rate, has the
closed form ``sigma_max = -L'(log K = log v) / (v (T - 1))`` from the (alpha, beta) loss.

Checked against the dense gradient of ``population.attention_loss_grad`` and its SVD (independent
code) at the paper's configuration and three others; ``tau = 1`` gives ``sigma_max = 0``.
"""

from __future__ import annotations

from theorycheck.analysis.dynamics import stage2_onset
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.strategies import masking_grid_params, model_params, params

from ._attention_common import models


def check(params, inject=None):
    inject = inject or {}
    tm, mk = models(params)
    cf = stage2_onset(tm, mk, method="closed-form")
    W_V = inject.get("W_V")
    de = stage2_onset(tm, mk, method="dense", W_V=None if W_V is None else W_V(tm))
    sigma = de.sigma_max * (1.0 + inject.get("sigma_rel", 0.0)) + inject.get("sigma_abs", 0.0)
    sig = {"sigma_closed_form": cf.sigma_max, "sigma_dense": sigma}
    if cf.sigma_max > 0:  # relative agreement
        subs = [compare_close(sigma / cf.sigma_max, 1.0, 1e-8, details=sig, label="sigma_dense / sigma_closed = 1")]
    else:  # tau = 1: no first-order drive at all
        subs = [compare_close(sigma, 0.0, 1e-12, details=sig, label="sigma_dense = 0")]
    if 1 < tm.tau < tm.T:
        subs.append(
            compare_close(
                de.multiplicity, tm.T - 1, 0.0, details={"multiplicity": de.multiplicity}, label="rank of dL/dS = T - 1"
            )
        )
        subs.append(
            compare_close(
                de.topic_alignment if de.topic_alignment is not None else 0.0,
                1.0,
                1e-9,
                details={"topic_alignment": de.topic_alignment},
                label="singular vectors = topic contrasts",
            )
        )
    res = compare_all(subs)
    res.details.update(sigma_max=cf.sigma_max)
    return res


def domain():
    """T <= 8, v <= 4, every tau, maskings on a 0.05 grid (p_c != p_r): the dense gradient enumerates
    every tau-subset, O(C(T, tau) V1^3) per point."""
    return params(model_params(max_T=8, max_v=4), masking_grid_params(step=0.05))


def falsify(params):
    """The dense top singular value off by a relative 3e-8 (3 x the relative 1e-8 tolerance), or where sigma = 0
    (tau = 1 or tau = T) by an absolute 3e-12 (3 x the absolute 1e-12): fixed numbers (issue 25 item 6: a loosened
    tolerance lets it pass). (An identity W^V, ``{"W_V": ...}``, breaks it by ~1e9 x.)"""
    return {"sigma_abs": 3e-12} if params["tau"] in (1, params["T"]) else {"sigma_rel": 3e-8}


CLAIM = Claim(
    id="dynamics.stage2-direction",
    statement=(
        "At the end of stage 1, dL/dS at S = 0 has rank T-1 along the topic-contrast vectors and sigma_max = -L'(log "
        "v)/(v(T-1))"
    ),
    source="DERIVED",
    spec="SPEC §4.5, §6 items 16, 21",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=5, v=4, tau=2, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=7, v=3, tau=4, p_m=0.3, p_c=0.2, p_r=0.05),
        dict(T=6, v=5, tau=1, p_m=0.15, p_c=0.1, p_r=0.1),
    ),
    falsify=falsify,
    domain=domain,
)
