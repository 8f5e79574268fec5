"""SPEC §7, §11.8 (DERIVED): the co-topic family's interval certificate bounds the minimum over its search box, and
keeps every box that holds a point of it (issue 36, mutation ``cotopic-discard``: no default claim ran this
certificate).

The co-topic family ``S = alpha I_w + beta G`` (``G`` the co-topic cosine, SPEC §11.4) of a general model with
overlapping topics (3 topics drawn from Dirichlet(0.5) over 6 words, seed 2, ``tau = 1``, default masking; the
stage-1 ``W^V`` frozen) has no finite chart of ``R^2``: its certificate
(:func:`theorycheck.solvers.attention._interval_general.cotopic_box_certificate`) bounds the minimum over a search
box ``B`` of ``(alpha, beta)``, here :data:`BOX` = ``[0, 4] x [-2, 2]`` (the optimum ``(1.881, -0.224)`` inside),
branch-and-bound target 1e-9, at most 20,000 boxes. It runs in ``(u, beta) = (alpha + beta, beta)`` on a box
holding ``B``'s image and discards (value ``+inf``) only the boxes that hold **no** point of it. Checked against the
dense evaluator :func:`theorycheck.population.attention_loss` (an independent float route):

1. the branch and bound converged, its argmin (mapped back to ``(alpha, beta)``) lies inside ``B`` off its edges, and
   the dense loss at its best point exceeds ``lower`` by at most :data:`GAP_TOL` = 2e-9 (either way: the lower
   bound is the minimum to that accuracy);
2. ``lower <=`` the least dense loss on a 21 x 21 grid of ``B`` (+ :data:`FLOAT_TOL` = 1e-12 for the dense loss's
   rounding);
3. the discard rule: on a box of ``(u, beta)`` that straddles an edge ``alpha = a0`` or ``alpha = a1`` of ``B``
   (``alpha = u - beta`` over ``[a - 0.75, a + 0.75]``, ``beta`` over ``[0.05, 0.55]``), the enclosure contains the
   dense loss at the point ``alpha`` 0.2 inside the edge, ``beta = 0.3`` (within :data:`FLOAT_TOL`). Discarding a
   box that only partly leaves the image (the mutant) drops such points: the enclosure is ``+inf``, and the
   certificate's first box, which straddles both edges, is dropped, so ``lower`` (0.61506) rises above the grid's
   minimum (0.61476).

Falsifier: ``lower`` raised by 6e-9 (3 x :data:`GAP_TOL`): item 1 fails by 3 x its tolerance.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.population import attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.solvers import cotopic_matrix, optimal_value_matrix
from theorycheck.solvers.attention._interval_cotopic import CotopicLoss
from theorycheck.solvers.attention._interval_general import cotopic_box_certificate
from theorycheck.solvers.attention._interval_vec import evaluate

#: The search box of ``(alpha, beta)``.
BOX = ((0.0, 4.0), (-2.0, 2.0))
#: The certificate's target gap and its allowance against the dense loss at the best point.
TOL, GAP_TOL = 1e-9, 2e-9
#: Rounding allowance of the dense float loss (a sum of O(1) terms).
FLOAT_TOL = 1e-12
#: Budget of the branch and bound (it converges in about 3,700 boxes).
MAX_BOXES = 20_000
#: Straddling boxes: half-widths in ``u`` and ``beta``, the centre's ``beta`` and the inside point's distance.
HALF_U, HALF_B, BETA_C, INSIDE = 0.5, 0.25, 0.3, 0.2


def _model():
    rng = np.random.default_rng(2)
    return GeneralTopicModel(rng.dirichlet(np.full(6, 0.5), size=3), tau=1), Masking()


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    g, mk = _model()
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    W = f.toarray()
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    G = cotopic_matrix(g)

    def dense(a: float, b: float) -> float:
        return float(attention_loss(a * I_w + b * G, W, g, mk))

    CL = CotopicLoss(g, mk, f.left, f.right, False)
    c = cotopic_box_certificate(CL, BOX, TOL, MAX_BOXES, (0.0, 0.0))
    lower = c.lower + inject.get("lower_shift", 0.0)
    (a0, a1), (b0, b1) = BOX
    (al0, al1), (be0, be1) = c.info["argmin_original"]
    interior = c.converged and a0 < al0 and al1 < a1 and b0 < be0 and be1 < b1
    best = tuple(c.info["x_best_original"])
    d_best = dense(*best)
    grid_min = min(dense(a, b) for a in np.linspace(a0, a1, 21) for b in np.linspace(b0, b1, 21))
    # the discard rule: boxes of (u, beta) straddling each alpha edge, an inside point of each
    CL.alpha_range = (a0, a1)
    miss, straddle = 0.0, []
    beta_c, inside = float(params.get("beta_c", BETA_C)), float(params.get("inside", INSIDE))
    for edge, inward in ((a0, inside), (a1, -inside)):
        lo = np.array([[edge + beta_c - HALF_U, beta_c - HALF_B]])
        hi = np.array([[edge + beta_c + HALF_U, beta_c + HALF_B]])
        e = evaluate(lo, hi, None, None, CL.original, order=0)
        d = dense(edge + inward, beta_c)
        miss = max(miss, float(e.lo[0]) - d, d - float(e.hi[0]), 0.0)
        straddle.append({"alpha_edge": edge, "enclosure": [float(e.lo[0]), float(e.hi[0])], "dense_inside": d})
    details = {"lower": lower, "upper": c.upper, "n_boxes": c.n_boxes, "argmin": c.info["argmin_original"],
               "x_best": list(best), "dense_at_best": d_best, "grid_min": grid_min}  # fmt: skip
    return compare_all(
        [
            compare_close(float(interior), 1.0, 0.5, label="converged, argmin inside the box off its edges"),
            compare_close(
                d_best - lower, 0.0, GAP_TOL, details=details, label="dense loss at the best point - lower <= 2e-9"
            ),
            compare_greater(grid_min + FLOAT_TOL - lower, 0.0, label="lower <= dense 21 x 21 grid minimum"),
            compare_close(
                miss,
                0.0,
                FLOAT_TOL,
                details={"straddling boxes": straddle},
                label="a box straddling the box's alpha edge encloses the dense loss at its inside point",
            ),
        ]
    )


def domain():
    """The straddling boxes of item 3: ``beta_c`` in [-1.7, 1.7] (their centre's ``beta``; the box's ``beta`` range
    stays inside ``[-2, 2]``) and ``inside`` in [0.05, 0.45] (the inside point's distance from the edge; within the
    box's half-width 0.5 in ``u``). Defaults 0.3 and 0.2; the model and the search box are fixed."""
    return st.fixed_dictionaries(
        {"beta_c": st.floats(-1.7, 1.7, allow_nan=False), "inside": st.floats(0.05, 0.45, allow_nan=False)}
    )


def falsify(params: dict) -> dict:
    """``lower`` raised by 3 x :data:`GAP_TOL` (a certificate claiming more than it proved)."""
    return {"lower_shift": 6e-9}


CLAIM = Claim(
    id="certificate.cotopic-box",
    statement=(
        "The co-topic family's interval certificate over a search box of (alpha, beta) (overlapping topics) bounds "
        "the box's minimum from below (the dense evaluator on a grid and at its best point, within 2e-9), and keeps "
        "every box holding a point of the search box"
    ),
    source="DERIVED",
    spec="SPEC §7, §11.8",
    check=check,
    default_params=(dict(),),
    falsify=falsify,
    cost=3.0,
    domain=domain,
)
