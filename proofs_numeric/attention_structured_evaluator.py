"""SPEC §11.8 (DERIVED): the structured evaluator of the (alpha, beta) families
(:func:`theorycheck.population.family_attention_loss`: no ``V1 x V1`` array, tables linear in the topic mixture,
a compiled per-law kernel) equals the dense evaluator :func:`theorycheck.population.attention_loss` (every topic set
enumerated, any score matrix) on the scores it represents, ``S = alpha I_w + beta B`` with ``B`` built here
independently (the same-label indicator of the dominant topics, or the co-topic cosine
:func:`theorycheck.solvers.cotopic_matrix`).

Models (general, small): unequal topic sizes (3, 4, 2), overlap eps = 0.4, Zipf s = 1 with ``mask_keys``, and a
seeded random ``phi``; the stage-1 ``W^V`` factored (``left right^T``) and, for the label family, dense; a random
decoder bias on two of them; squared loss and cross-entropy. Points ``(alpha, beta)`` include extreme scores
(``beta = -40``, ``alpha + beta = 20``). Checked:

1. values: ``|structured - dense| <= VALUE_TOL (1 + |dense|)`` with :data:`VALUE_TOL` = 1e-12;
2. the structured gradient ``(dL/dalpha, dL/dbeta)`` against central differences of the dense loss (step 1e-5;
   truncation and rounding ~1e-9): :data:`GRAD_TOL` = 1e-7 (1 + |g|).

Falsifier: the structured values shifted by 3e-12 (3 x VALUE_TOL).
"""

from __future__ import annotations

import numpy as np

from theorycheck import GeneralTopicModel, Masking
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss, family_attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import cotopic_matrix, optimal_value_matrix

VALUE_TOL = 1e-12
GRAD_TOL = 1e-7
FD_STEP = 1e-5
POINTS = ((0.0, 0.0), (1.3, -0.7), (-2.0, 3.0), (5.0, -40.0), (30.0, -10.0))


def _models():
    rng = np.random.default_rng(7)
    phi = rng.dirichlet(np.full(9, 0.6), size=4)
    return (
        ("unequal", GeneralTopicModel.unequal((3, 4, 2), tau=2), False, True),
        ("overlap", GeneralTopicModel.overlapping(3, 3, eps=0.4, tau=2), False, False),
        ("zipf", GeneralTopicModel.zipf(4, 3, 1.0, tau=2), True, False),
        ("random", GeneralTopicModel(phi, prior="uniform-tau", tau=2), False, True),
    )


def label_matrix(g) -> np.ndarray:
    z = g.dominant_topic()
    B = np.zeros((g.V1, g.V1))
    B[1:, 1:] = z[:, None] == z[None, :]
    return B


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    v_err, g_err, worst_v, worst_g = 0.0, 0.0, "", ""
    for name, g, mask_keys, with_b in _models():
        f = optimal_value_matrix(g, mk, options={"dense": False}).x
        UV, W = (f.left, f.right), f.toarray()
        b = np.random.default_rng(3).normal(0.0, 0.3, g.V1) if with_b else None
        cases = [("label", "squared", UV), ("label", "squared", W), ("co-topic", "squared", UV)]
        cases += [("label", "ce", UV)] if name in ("unequal", "zipf") else []
        for fam, loss, Wv in cases:
            B = label_matrix(g) if fam == "label" else cotopic_matrix(g)

            def dense(a, bt, B=B, loss=loss, W=W, g=g, b=b, mask_keys=mask_keys):
                return float(attention_loss(family_scores(a, bt, B), W, g, mk, b, mask_keys=mask_keys, loss=loss))

            for a, bt in POINTS:
                r = family_attention_loss(a, bt, Wv, g, mk, family=fam, b=b, mask_keys=mask_keys, loss=loss, grad=True)
                d = dense(a, bt)
                e = abs(r.value + inject.get("shift", 0.0) - d) / (1.0 + abs(d))
                tag = f"{name}/{fam}/{loss}/{'dense W' if Wv is W else 'factored W'} at ({a:g}, {bt:g})"
                if e > v_err:
                    v_err, worst_v = e, tag
                if abs(bt) > 20:  # the central difference loses its digits where the loss is flat to 1e-16
                    continue
                fd = [(dense(a + FD_STEP, bt) - dense(a - FD_STEP, bt)) / (2 * FD_STEP),
                      (dense(a, bt + FD_STEP) - dense(a, bt - FD_STEP)) / (2 * FD_STEP)]  # fmt: skip
                ge = max(abs(x - y) / (1.0 + abs(y)) for x, y in zip((r.dalpha, r.dbeta), fd))
                if ge > g_err:
                    g_err, worst_g = ge, tag
    return compare_all(
        [
            compare_close(v_err, 0.0, VALUE_TOL, label="structured loss == dense loss (relative)",
                          details={"worst value case": worst_v}),
            compare_close(g_err, 0.0, GRAD_TOL, label="structured gradient == central differences of the dense loss",
                          details={"worst gradient case": worst_g}),
        ]
    )  # fmt: skip


def falsify(params: dict) -> dict:
    """The structured values shifted by 3e-12 (3 x VALUE_TOL; a loosened tolerance lets it pass)."""
    return {"shift": 3e-12}


DEFAULT = dict(p_m=0.15, p_c=0.1, p_r=0.1)


def domain():
    """Any masking on a 0.05 grid (the models and points fixed)."""
    from theorycheck.strategies import masking_grid_params, params

    return params(masking_grid_params(step=0.05, min_p_m=0.05))


CLAIM = Claim(
    id="attention.structured-evaluator",
    statement=(
        "The structured (alpha, beta)-family evaluator (label and co-topic families, squared loss and cross-entropy, "
        "factored or dense W^V, bias, mask_keys) equals the dense exact evaluator to 1e-12, and its gradient equals "
        "central differences of the dense loss"
    ),
    source="DERIVED",
    spec="SPEC §11.8, §11.4",
    check=check,
    default_params=(DEFAULT,),
    falsify=falsify,
    domain=domain,
    cost=1.0,
)
