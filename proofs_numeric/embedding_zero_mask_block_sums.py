"""SPEC §6 item 12 (DERIVED, §4.1 D2): tied minimisers with a zero [MASK] embedding
(``E_0 = 0``, no bias) have fixed block sums

``sum_{j in t(i)} <E_i,E_j> = (1/a)(1 - r/(T(a+r)))`` and ``sum_{j in t'} <E_i,E_j> = -r/(a T (a+r))``.

The predicted values are taken from the library's closed form (``closed_form_gram``: ``v x`` and
``v y``), not restated here. Checked on generic minimisers with ``E_0 = 0`` found by L-BFGS from a
large random init (the [MASK] column held at 0), i.e. not the min-norm optimum. ``details.free_E0_deviation`` shows that
the premise matters: a minimiser with a free [MASK] embedding generally violates these values.
"""

from __future__ import annotations

import numpy as np

from theorycheck.analysis.stats import topic_block_sums
from theorycheck.report.claims import Claim, compare_close
from theorycheck.solvers import closed_form_gram

from ._embedding_common import models, perturb, trained_embedding, trained_embedding_zero_mask

TOL = 1e-5


def _own_other(W, tm):
    Y = topic_block_sums(W, tm)[1:]
    t = np.arange(tm.n_words) // tm.v
    own = Y[np.arange(tm.n_words), t]
    mask = np.ones_like(Y, dtype=bool)
    mask[np.arange(tm.n_words), t] = False
    return own, Y[mask]


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    # predicted block sums: those of the library's min-norm Gram (SPEC §4.1 D3), v x and v y
    bg = closed_form_gram(tm, mk)
    own_pred, other_pred = tm.v * bg.x, tm.v * bg.y
    errs = []
    for seed in range(params["n_inits"]):
        W = trained_embedding_zero_mask(tm, mk, params["d"], seed=seed, init_scale=1.0)
        if "perturb" in inject:
            W = perturb(W, inject["perturb"])
        own, other = _own_other(W, tm)
        errs.append(max(np.max(np.abs(own - own_pred)), np.max(np.abs(other - other_pred))))
    W_free = trained_embedding(tm, mk, params["d"], seed=0, init_scale=0.3)
    own_f, other_f = _own_other(W_free, tm)
    free_dev = float(max(np.max(np.abs(own_f - own_pred)), np.max(np.abs(other_f - other_pred))))
    res = compare_close(
        max(errs),
        0.0,
        TOL,
        details={
            "own_predicted": own_pred,
            "other_predicted": other_pred,
            "free_E0_deviation": free_dev,
            "free_E0_norm": float(np.linalg.norm(W_free[:, 0])),
        },
    )
    res.expected = f"own = {own_pred:.6g}, other = {other_pred:.6g}"
    return res


def falsify(params: dict) -> dict:
    """Perturb the trained embeddings by 1e-3 * N(0,1): no longer a minimiser."""
    return {"perturb": 1e-3}


CLAIM = Claim(
    id="embedding.zero-mask-block-sums",
    statement=(
        "Tied minimisers with E_0 = 0 and no bias have own-topic block sum (1/a)(1 - r/(T(a+r))) and "
        "other-topic block sum -r/(aT(a+r)) in every word row"
    ),
    source="DERIVED",
    spec="SPEC §4.1 D2, §6 item 12",
    check=check,
    default_params=(
        dict(T=5, v=4, tau=2, p_m=0.15, p_c=0.1, p_r=0.1, d=8, n_inits=2),
        dict(T=4, v=3, tau=1, p_m=0.5, p_c=0.2, p_r=0.3, d=6, n_inits=2),
    ),
    falsify=falsify,
)
