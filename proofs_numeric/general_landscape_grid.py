"""SPEC §11.4, §4.3 (DERIVED): the general model's (alpha, beta) landscape grid equals the paper's closed form.

:func:`theorycheck.analysis.landscape.alpha_beta_grid` on a :class:`~theorycheck.models.GeneralTopicModel`
takes the generic route (:func:`~theorycheck.analysis.landscape.general_grid`: the exact attention loss
of ``S = alpha I_w + beta G`` with ``G`` the co-topic similarity, unit diagonal, one dense evaluation per
point). On the paper's model converted to a general one (:meth:`GeneralTopicModel.from_topic_model`)
``G`` is the same-topic indicator, so the point ``(alpha, beta)`` scores the same word ``alpha + beta``
and another word of its topic ``beta``: every grid value must equal the closed form of SPEC §4.3
(:func:`theorycheck.population.alpha_beta_loss`) at ``(alpha + beta, beta)`` within ``GRID_TOL`` = 1e-10,
for the block and the identity ``W^V``.

Falsifier: the general grid shifted by 3 ``GRID_TOL`` (a wrong constant just outside the tolerance).
"""

from __future__ import annotations

import numpy as np

from theorycheck import GeneralTopicModel, Masking, TopicModel
from theorycheck.analysis.landscape import alpha_beta_grid
from theorycheck.population import alpha_beta_loss
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.strategies import masking_grid_params, model_params, params

GRID_TOL = 1e-10
#: The falsifier's shift: 3 x GRID_TOL, a fixed number (a loosened GRID_TOL lets it pass).
FALSIFIER_SHIFT = 3e-10
AXES = dict(alpha=(-2.0, 6.0, 5), beta=(-3.0, 3.0, 4))


def check(params, inject=None):
    inject = inject or {}
    tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    g = GeneralTopicModel.from_topic_model(tm)
    subs = []
    for value in ("block", "identity"):
        grid = alpha_beta_grid(g, mk, value, **AXES)
        general = grid.L + inject.get("shift", 0.0)
        closed = np.array([[alpha_beta_loss(a + b, b, tm, mk, value) for b in grid.beta] for a in grid.alpha])
        subs.append(compare_close(general, closed, GRID_TOL, label=f"general grid = closed form [{value} W^V]"))
    res = compare_all(subs)
    res.details["grid_points"] = int(np.prod([a[2] for a in AXES.values()]))
    return res


def domain():
    """The paper's model with T <= 4, v <= 3, every tau, maskings on a 0.05 grid; 40 dense evaluations per draw."""
    return params(model_params(max_T=4, max_v=3), masking_grid_params(step=0.05))


def falsify(params):
    """Shift the general grid by 3 GRID_TOL."""
    return {"shift": FALSIFIER_SHIFT}


CLAIM = Claim(
    id="general.landscape-grid",
    statement=(
        "The general model's (alpha, beta) landscape grid (exact loss per point) equals the paper's closed form "
        "on the paper's model, block and identity W^V (1e-10)"
    ),
    source="DERIVED",
    spec="SPEC §11.4, §4.3",
    check=check,
    default_params=(
        dict(T=4, v=3, tau=2, p_m=0.15, p_c=0.1, p_r=0.1),
        dict(T=3, v=2, tau=1, p_m=0.3, p_c=0.3, p_r=0.2),
    ),
    falsify=falsify,
    domain=domain,
)
