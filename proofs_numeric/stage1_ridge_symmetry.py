"""SPEC §4.2, §6 item 8 (DERIVED): for every ``lambda > 0`` the ridge solution
``C (Sigma + lambda I)^{-1}`` is block-symmetric (one value per class: same topic, including the
diagonal; different topic; mask column; row 0 = 0), and the reduced three-parameter objective of
§4.2 reproduces it.

Reference: a dense Cholesky solve of ``(Sigma + lambda I) W^T = C^T``; the closed form solves the
reduced 3 x 3 quadratic. SPEC's printed example (T=5, v=3, tau=2, lambda=0.1) is checked too.
"""

from __future__ import annotations

import numpy as np

from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import optimal_value_matrix
from theorycheck.strategies import masking_params, model_params, params

from ._stage1 import SPEC_MASKING, compare_worst, entry_classes, models, spread

TOL = 1e-10
SPEC_TOL = 5e-7


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    parts = []
    measured = []
    for lam in params["regs"]:
        W = optimal_value_matrix(tm, mk, reg=lam, method="lstsq").x
        cls = entry_classes(W, tm)
        diag = np.diag(W)[1:]
        parts += [
            compare_close(
                spread(np.r_[cls["same"], diag]), 0.0, TOL, label=f"same-topic entries constant (lambda={lam:g})"
            ),
            compare_close(spread(cls["diff"]), 0.0, TOL, label=f"different-topic entries constant (lambda={lam:g})"),
            compare_close(spread(cls["mask_col"]), 0.0, TOL, label=f"mask column constant (lambda={lam:g})"),
            compare_close(np.abs(cls["row0"]).max(), 0.0, TOL, label=f"row 0 = 0 (lambda={lam:g})"),
        ]
        cf = optimal_value_matrix(
            tm, mk, reg=lam * inject.get("reg_factor", 1.0), method="closed-form", options={"dense": False}
        )
        ref = np.array([cls["same"].mean(), cls["diff"].mean(), cls["mask_col"].mean()])
        parts.append(
            compare_worst(
                np.array([cf.x.A, cf.x.B0, cf.x.gamma]),
                ref,
                TOL,
                label=f"reduced (A, B0, gamma) = dense (lambda={lam:g})",
            )
        )
        measured.append(ref.tolist())
        if "spec" in params and lam == params["spec"][0]:
            parts.append(
                compare_worst(ref, np.array(params["spec"][1:]), SPEC_TOL, label="= SPEC §4.2's printed example")
            )
    res = compare_all(parts)
    res.details.update(regs=list(params["regs"]), A_B0_gamma_per_reg=measured)
    return res


def _regs():
    from hypothesis import strategies as st

    lam = st.floats(1e-4, 10.0, allow_nan=False)
    return st.lists(lam, min_size=1, max_size=3).map(lambda xs: {"regs": tuple(xs)})


def domain():
    """T <= 10, v <= 5 (dense Cholesky reference, V1 <= 51), every tau (tau = T included) and the Dirichlet
    prior, every masking (p_c != p_r), one to three ridge parameters lambda in [1e-4, 10]."""
    return params(model_params(max_T=10, max_v=5, dirichlet=True), masking_params(), _regs())


def falsify(params: dict) -> dict:
    """Solve the reduced problem with lambda off by a relative 1e-8: the entries then differ by 2.3-5.5 x TOL on the
    default configurations (issue 25 item 6: a loosened TOL lets it pass; 1% gives 2e6-5e6 x)."""
    return {"reg_factor": 1.0 + 1e-8}


CLAIM = Claim(
    id="stage1.ridge-symmetry",
    statement=(
        "Ridge W^V = C (Sigma + lambda I)^-1 is block-symmetric for every lambda > 0 and equals the reduced (A, B0, "
        "gamma) minimiser"
    ),
    source="DERIVED",
    spec="SPEC §4.2, §6 item 8",
    check=check,
    default_params=(
        dict(T=5, v=3, tau=2, **SPEC_MASKING, regs=(0.1, 1e-3, 3.0), spec=(0.1, 0.072137, 0.011412, 0.048185)),
        dict(T=10, v=10, tau=3, **SPEC_MASKING, regs=(1e-3, 1.0)),
    ),
    falsify=falsify,
    domain=domain,
)
