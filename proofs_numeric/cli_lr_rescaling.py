"""SPEC §11.7 (DERIVED): the CLI's learning-rate rescaling for a preset trained on a general model.

``theorycheck train --preset P --model ...`` retargets the preset to the user's model
(:func:`theorycheck.cli.train.retarget_config`) and scales a plain-SGD squared-loss rate so that
``lr * lambda_max(H)`` keeps the preset's value (:func:`theorycheck.cli.train.scale_preset_lr`), with
``lambda_max(H) = 2 (lambda_max(Sigma) + reg)`` for the stage-1 value model
(:func:`theorycheck.cli.train.sgd_curvature`). Checked for the preset ``stage1-population``
(``W^V`` only, uniform attention: the exact rule, both ways) on a general model:

1. ``lr * lambda_max(H)`` after scaling equals the preset's ``lr * lambda_max(H)`` on the paper's
   model within ``RULE_RTOL`` = 1e-12 (relative);
2. the curvature the rule uses equals the largest eigenvalue of the value loss's Hessian computed
   independently, column by column from central differences of :func:`theorycheck.population.value_loss_grad`
   (the loss is quadratic, so the differences are exact up to rounding), within ``HESS_RTOL`` = 1e-8;
3. the scaled rate is below the stability limit ``2 / lambda_max(H)`` (the preset's ratio is 0.89).

Falsifier: the scaled rate off by a factor ``1 + 3 RULE_RTOL``.
"""

from __future__ import annotations

import numpy as np

from theorycheck import GeneralTopicModel, Masking
from theorycheck.cli.train import retarget_config, scale_preset_lr, sgd_curvature
from theorycheck.nn import preset
from theorycheck.population import value_loss_grad
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.strategies import choices, masking_grid_params, params

RULE_RTOL = 1e-12
HESS_RTOL = 1e-8
#: The falsifier's relative rate error: 3 x RULE_RTOL, a fixed number (a loosened RULE_RTOL lets it pass).
FALSIFIER_REL_ERROR = 3e-12


def hessian_lambda_max(g, mk, reg: float, h: float = 1e-3) -> float:
    """Largest eigenvalue of the value loss's Hessian from central differences of its gradient: the
    Hessian acts row by row (``D -> 2 D (Sigma + reg I)``), so row 0's block is built from ``V1``
    directions ``e_0 e_j^T``."""
    V1 = g.V1
    W0 = np.zeros((V1, V1))
    cols = []
    for j in range(V1):
        D = np.zeros((V1, V1))
        D[0, j] = 1.0
        gp = value_loss_grad(W0 + h * D, g, mk, reg=reg)[1]
        gm = value_loss_grad(W0 - h * D, g, mk, reg=reg)[1]
        cols.append((gp - gm)[0] / (2 * h))
    Hb = np.array(cols).T
    return float(np.linalg.eigvalsh(0.5 * (Hb + Hb.T))[-1])


def check(params, inject=None):
    inject = inject or {}
    g = GeneralTopicModel.zipf(params["T"], params["v"], params["s"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    base = preset(params["preset"])
    cfg, rec = scale_preset_lr(base, retarget_config(base, g, mk))
    lr = float(cfg.optim.lr) * (1.0 + inject.get("lr_rel_error", 0.0))
    ours, _ = sgd_curvature(g, mk, cfg.model)
    ref, _ = sgd_curvature(base.data.topic_model(), base.data.masking(), base.model)
    target = float(base.optim.lr) * ref
    lam = hessian_lambda_max(g, mk, cfg.model.reg)
    return compare_all(
        [
            compare_close(lr * ours / target, 1.0, RULE_RTOL, label="lr x lambda_max(H) = the preset's (relative)"),
            compare_close(ours / lam, 1.0, HESS_RTOL, label="lambda_max(H) = finite-difference Hessian (relative)"),
            compare_greater(2.0 / lam, lr, label="scaled lr < 2 / lambda_max(H)", details={"lr": lr, **rec}),
        ]
    )


def domain():
    """The preset ``stage1-population`` on Zipfian models, T in 3..5, v in 2..4, tau in 1..2, s in {0, 1, 2},
    maskings on a 0.05 grid; V1 gradient pairs per draw."""
    return params(
        choices(T=(3, 4, 5), v=(2, 3, 4), tau=(1, 2), s=(0.0, 1.0, 2.0)),
        masking_grid_params(step=0.05),
        preset="stage1-population",
    )


def falsify(params):
    """The scaled rate off by a relative 3 RULE_RTOL."""
    return {"lr_rel_error": FALSIFIER_REL_ERROR}


CLAIM = Claim(
    id="cli.lr-rescaling",
    statement=(
        "train --preset on a general model: the SGD rate is rescaled so that lr x lambda_max(H) keeps the preset's "
        "value (1e-12), lambda_max(H) = 2 (lambda_max(Sigma) + reg) matches the finite-difference Hessian (1e-8), "
        "and the rate stays below 2 / lambda_max(H)"
    ),
    source="DERIVED",
    spec="SPEC §11.7",
    check=check,
    default_params=(dict(preset="stage1-population", T=4, v=3, s=1.0, tau=2, p_m=0.15, p_c=0.1, p_r=0.1),),
    falsify=falsify,
    domain=domain,
)
