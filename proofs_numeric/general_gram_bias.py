"""SPEC §11.5, §4.1 D4 (DERIVED): the general model's minimum-norm tied Gram *with a decoder bias*.

On a general model (Zipfian topics, uniform-tau law) :func:`theorycheck.solvers.optimal_embedding_gram`
with ``bias=True`` returns ``G*``, a factor ``W_E`` and the bias ``b``. Checked:

1. the exact embedding loss (:func:`theorycheck.population.embedding_loss`, tied decoder, bias ``b``) at
   ``(W_E, b)`` equals the solver's predicted minimum within ``LOSS_TOL`` = 1e-10;
2. ``(W_E, b)`` is stationary: ``max |dL/dW_E|`` and ``max |dL/db|`` of
   :func:`theorycheck.population.embedding_loss_grad` are at most ``GRAD_TOL`` = 1e-9;
3. an independent route, the SDP (``method="cvxpy"``), gives the same ``G`` and ``b`` within
   ``SDP_TOL`` = 1e-7 (the conic solver's accuracy; measured 1e-10).

Falsifier: the bias shifted by ``3 GRAD_TOL / 2`` in every coordinate (``dL/db = 2 (... + b)`` moves by
3 ``GRAD_TOL``), just outside the stationarity tolerance.
"""

from __future__ import annotations

import numpy as np

from theorycheck import GeneralTopicModel, Masking
from theorycheck.population import embedding_loss, embedding_loss_grad
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import optimal_embedding_gram
from theorycheck.strategies import choices, masking_grid_params, params

LOSS_TOL = 1e-10
GRAD_TOL = 1e-9
SDP_TOL = 1e-7
#: The falsifier's bias shift: 1.5 x GRAD_TOL, a fixed number (a loosened GRAD_TOL lets it pass).
FALSIFIER_SHIFT = 1.5e-9


def _dense(x):
    return x.toarray() if hasattr(x, "toarray") else np.asarray(x)


def check(params, inject=None):
    inject = inject or {}
    g = GeneralTopicModel.zipf(params["T"], params["v"], params["s"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    res = optimal_embedding_gram(g, mk, bias=True)
    W_E, b = _dense(res.info["W_E"]), np.asarray(res.info["b"], dtype=float) + inject.get("b_shift", 0.0)
    L = embedding_loss(W_E, g, mk, b=b)
    grad = embedding_loss_grad(W_E, g, mk, b=b)
    gW, gb = grad.dW_E, grad.db
    sdp = optimal_embedding_gram(g, mk, bias=True, method="cvxpy")
    return compare_all(
        [
            compare_close(L, res.info["predicted_min_loss"], LOSS_TOL, label="loss at (W_E, b) = predicted minimum"),
            compare_close(float(np.abs(gW).max()), 0.0, GRAD_TOL, label="max |dL/dW_E| = 0"),
            compare_close(float(np.abs(gb).max()), 0.0, GRAD_TOL, label="max |dL/db| = 0"),
            compare_close(_dense(sdp.x), _dense(res.x), SDP_TOL, label="G (SDP) = G (closed form)"),
            compare_close(np.asarray(sdp.info["b"]), b, SDP_TOL, label="b (SDP) = b (closed form)"),
        ]
    )


def domain():
    """Zipfian uniform-tau models, T in 3..4, v in 2..3, tau < T, s in {0, 1, 2}, maskings on a 0.05 grid; the
    closed form and a small SDP per draw."""
    return params(choices(T=(3, 4), v=(2, 3), tau=(1, 2), s=(0.0, 1.0, 2.0)), masking_grid_params(step=0.05))


def falsify(params):
    """Shift the bias by 1.5 GRAD_TOL: dL/db moves by 3 GRAD_TOL."""
    return {"b_shift": FALSIFIER_SHIFT}


CLAIM = Claim(
    id="general.gram-bias",
    statement=(
        "General model, tied embedding with a decoder bias: the min-norm Gram's factor and bias attain the predicted "
        "minimum (1e-10), are stationary (1e-9) and agree with the SDP (1e-7)"
    ),
    source="DERIVED",
    spec="SPEC §11.5, §4.1",
    check=check,
    default_params=(dict(T=4, v=3, s=1.0, tau=2, p_m=0.15, p_c=0.1, p_r=0.1),),
    falsify=falsify,
    domain=domain,
)
