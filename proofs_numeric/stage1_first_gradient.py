"""SPEC §4.2, §4.5, §6 item 9 (DERIVED): at ``W = 0`` the population gradient is ``-2C``,
already block-patterned: same-topic entries ``-2[a/(tau T v^2) + r/(T v)^2]``, different-topic
``-2[a kappa/(tau T v^2) + r/(T v)^2]`` (``kappa = (tau-1)/(T-1)``), mask column ``-2q/(T v)``,
row 0 zero.

Measured: the gradient from the block-sum kernel (:func:`value_loss_grad`) against the dense
moments ``C`` (enumerated over all topic sets) and against the entry formulas written out here.
"""

from __future__ import annotations

import numpy as np

from theorycheck.population import moments, value_loss_grad
from theorycheck.report.claims import Claim, compare_all
from theorycheck.strategies import masking_params, model_params, params

from ._stage1 import SPEC_MASKING, compare_worst, entry_classes, models, spread

TOL = 1e-14


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    T, v, tau = tm.T, tm.v, tm.tau
    a, r, q = mk.a, mk.r, mk.q
    _, G, _ = value_loss_grad(np.zeros((tm.V1, tm.V1)), tm, mk)
    _, C = moments(tm, mk, method="enumerate")
    kappa = inject.get("kappa", (tau - 1) / (T - 1))
    same = -2 * (a / (tau * T * v * v) + r / (T * v) ** 2)
    diff = -2 * (a * kappa / (tau * T * v * v) + r / (T * v) ** 2) + inject.get("diff_shift", 0.0)
    mask = -2 * q / (T * v)
    cls = entry_classes(G, tm)
    parts = [
        compare_worst(G, -2 * C, TOL, label="grad L(0) = -2C (enumerated)"),
        compare_worst(cls["same"], same, TOL, label="same-topic entries = formula"),
        compare_worst(cls["diff"], diff, TOL, label="different-topic entries = formula"),
        compare_worst(cls["mask_col"], mask, TOL, label="mask column = -2q/(T v)"),
        compare_worst(cls["row0"], 0.0, TOL, label="row 0 = 0"),
    ]
    res = compare_all(parts)
    res.details.update(
        same_formula=same,
        diff_formula=diff,
        mask_formula=mask,
        same_mean=float(cls["same"].mean()),
        diff_mean=float(cls["diff"].mean()),
        mask_mean=float(cls["mask_col"].mean()),
        same_spread=spread(cls["same"]),
        diff_spread=spread(cls["diff"]),
        same_minus_diff=float(cls["same"].mean() - cls["diff"].mean()),
    )
    return res


def domain():
    """Every tau <= T <= 10 (C is enumerated over the tau-subsets), v <= 5, every masking (p_c != p_r).

    The tau-topic prior only: the entry formulas are those of the uniform tau-subset law.
    """
    return params(model_params(max_T=10, max_v=5), masking_params())


def falsify(params: dict) -> dict:
    """Shift the different-topic formula by 3e-14 (3 x TOL, a fixed number; issue 25 item 6: a loosened TOL lets
    it pass). (``{"kappa": tau / T}``, a plausible slip, breaks it by 4e9-1e11 x TOL.)"""
    return {"diff_shift": 3e-14}


CLAIM = Claim(
    id="stage1.first-gradient",
    statement=(
        "The population gradient at W = 0 is -2C, block-patterned with the closed-form same/different-topic and mask "
        "entries"
    ),
    source="DERIVED",
    spec="SPEC §4.2, §4.5, §6 item 9",
    check=check,
    default_params=(dict(T=10, v=10, tau=3, **SPEC_MASKING), dict(T=7, v=2, tau=4, p_m=0.3, p_c=0.3, p_r=0.2)),
    falsify=falsify,
    domain=domain,
)
