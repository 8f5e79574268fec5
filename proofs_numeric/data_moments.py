"""SPEC §6 item 2 (DERIVED): the second moment of the topic density is block-structured,

``E[p_S p_S^T] = (1/(tau T v^2)) [(1 - kappa) B + kappa J]``, ``kappa = (tau-1)/(T-1)``,

and hence the closed forms of ``Sigma = E[m m^T]`` and ``C = E[p m^T]`` (§4.0) hold exactly.
Checked against brute-force enumeration of every tau-subset.
"""

from __future__ import annotations

from theorycheck import Masking, TopicModel
from theorycheck.population import moments
from theorycheck.report.claims import Claim, compare_close
from theorycheck.strategies import masking_params, model_params, params

TOL = 1e-13


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    Sigma_cf, C_cf = inject.get("closed_form") or moments(tm, mk, method="closed-form")
    Sigma_en, C_en = moments(tm, mk, method="enumerate")
    err_S = abs(Sigma_cf - Sigma_en).max()
    err_C = abs(C_cf - C_en).max()
    res = compare_close(
        max(err_S, err_C),
        0.0,
        TOL,
        label="max |closed form - enumeration| of Sigma, C",
        details={"err_Sigma": float(err_S), "err_C": float(err_C)},
    )
    return res


def domain():
    """Every tau <= T <= 10 (enumeration of the tau-subsets stays cheap), v <= 5, every masking."""
    return params(model_params(max_T=10, max_v=5), masking_params())


#: The falsifier's error: 3 x TOL, a fixed number (issue 25 item 6: a loosened TOL lets it pass).
FALSIFIER_SHIFT = 3e-13


def falsify(params: dict) -> dict:
    """Add FALSIFIER_SHIFT (3 TOL) to one word entry of Sigma: a wrong value just outside the tolerance."""
    tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    Sigma, C = moments(tm, mk)
    Sigma = Sigma.copy()
    Sigma[1, 1] += FALSIFIER_SHIFT
    return {"closed_form": (Sigma, C)}


CLAIM = Claim(
    id="data.moments",
    statement=(
        "E[p p^T] = (1/(tau T v^2))[(1-kappa)B + kappa J]; Sigma and C closed forms equal enumeration over all "
        "tau-subsets"
    ),
    source="DERIVED",
    spec="SPEC §1.1, §4.0, §6 item 2",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=7, v=3, tau=4, p_m=0.3, p_c=0.2, p_r=0.3),
    ),
    falsify=falsify,
    domain=domain,
)
