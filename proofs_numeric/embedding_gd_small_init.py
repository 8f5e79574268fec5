"""SPEC §4.1 D2 (DERIVED there from numerical runs): "gradient descent from small init drives
the [MASK] embedding to ~0" — more precisely, plain gradient descent on the exact population loss
from an ``init_scale``-small init lands on the minimum-norm Gram up to O(init_scale^2), keeping
``|E_0|`` at the init scale.

Mechanism: components of ``W_E`` along within-topic zero-mean directions have velocity
``-2 W_E Sigma W_E^T`` applied to them (they can only shrink), and the [MASK] column starts small.
The statement is about the optimiser's path, not about the loss: L-BFGS from the same init reaches
a different minimiser (``details.lbfgs_*``; at T = v = 10 its ``|E_0|`` is 1.45), and ``falsify``
starts GD from a large init, which also ends away from the min-norm Gram.
"""

from __future__ import annotations

import numpy as np

from theorycheck.population import embedding_loss, embedding_loss_grad, moments
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import closed_form_gram
from theorycheck.strategies import masking_grid_params, model_params, params, seeds

from ._embedding_common import lbfgs_embedding, models, with_dim


def stable_lr(tm, mk, G_star) -> float:
    """``min(1, 1 / (4 lambda_max(G*) lambda_max(Sigma)))``: the loss ``tr(G Sigma G) - 2 tr(G C^T)`` in
    ``G = W^T W`` has Hessian norm ``<= 8 lambda_max(G*) lambda_max(Sigma)`` at the optimum, so GD is
    stable there for ``lr < 2 / (8 lambda_max(G*) lambda_max(Sigma))``."""
    Sigma, _ = moments(tm, mk)
    return min(1.0, 1.0 / (4.0 * np.linalg.eigvalsh(G_star)[-1] * np.linalg.eigvalsh(Sigma)[-1]))


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    scale = inject.get("init_scale", params["init_scale"])
    G_star = closed_form_gram(tm, mk).toarray()
    lr, steps = params["lr"], params["steps"]
    if lr == "auto":  # the stable step size, and as many steps as keep the gradient-flow time lr * steps
        lr = stable_lr(tm, mk, G_star)
        steps = int(np.ceil(steps / lr))
    W = scale * np.random.default_rng(params["seed"]).standard_normal((params["d"], tm.V1))
    for _ in range(steps):
        W = W - lr * embedding_loss_grad(W, tm, mk).dW_E
    gap = embedding_loss(W, tm, mk) - tm.min_value_loss()
    dist = float(np.max(np.abs(W.T @ W - G_star)))
    e0 = float(np.linalg.norm(W[:, 0]))
    W_l = lbfgs_embedding(
        tm, mk, params["d"], seed=params["seed"], init_scale=params["init_scale"] * np.sqrt(params["d"])
    )
    res = compare_all(
        [
            compare_close(gap, 0.0, 1e-10, details={"gd_loss_gap": gap}, label="GD loss gap <= 1e-10"),
            compare_close(dist, 0.0, 1e-4, details={"gd_dist_min_norm": dist}, label="max |G_GD - G*| <= 1e-4"),
            compare_close(
                e0,
                0.0,
                10 * params["init_scale"],
                details={"gd_mask_norm": e0},
                label=f"|E_0| <= 10 init_scale = {10 * params['init_scale']:g}",
            ),
        ]
    )
    res.details.update(
        lbfgs_dist_min_norm=float(np.max(np.abs(W_l.T @ W_l - G_star))),
        lbfgs_mask_norm=float(np.linalg.norm(W_l[:, 0])),
        lr=lr,
        steps=steps,
    )
    return res


def domain():
    """T <= 4, 2 <= v <= 3, every tau, maskings on a 0.05 grid with p_m <= 0.5 (p_c != p_r; a >= 0.5 keeps
    lambda_max(G*) <= 2, so lr >= 1/8), d = T..T+2, any init seed, init 1e-3, the stable step size
    ``lr="auto"`` (:func:`stable_lr`) for gradient-flow time 800 (``ceil(800 / lr)`` steps): at most 6400
    exact gradients and one L-BFGS run on V1 <= 13.

    Found by explore: a fixed lr = 1 oscillates at v = 1 (T = 2, v = 1, tau = 1, p = 0.05/0/0 ends with
    loss gap 0.69); at v = 1 (no within-topic directions) the stable descent is also slower than the
    budget (loss gap 1.3e-10 > 1e-10 after time 800 at T = 2, v = 1, tau = 1, p = 0.05/0.15/0)."""
    fixed = dict(init_scale=1e-3, lr="auto", steps=800)
    base = params(
        model_params(max_T=4, min_v=2, max_v=3),
        masking_grid_params(step=0.05, max_p_m=0.5),
        seeds(max_seed=1000),
        **fixed,
    )
    return with_dim(base, extra=(0, 2))


def falsify(params: dict) -> dict:
    """Start gradient descent from a 20x larger init (std 0.02): the Gram's distance to G* (3.7e-4) and E_0
    (0.019) then exceed their tolerances 1e-4 and 0.01 by 3.7 x and 1.9 x (issue 25 item 6: a loosened tolerance
    lets it pass; std 0.5 gives 6.7e3 x)."""
    return {"init_scale": 0.02}


CLAIM = Claim(
    id="embedding.gd-small-init",
    statement=(
        "Gradient descent on the tied embedding loss from a small init converges to the minimum-norm Gram "
        "(E_0 stays at the init scale); L-BFGS need not"
    ),
    source="DERIVED",
    spec="SPEC §4.1 D2 ('gradient descent from small init drives it to ~0'), §7",
    check=check,
    default_params=(
        dict(T=3, v=2, tau=1, p_m=0.15, p_c=0.1, p_r=0.1, d=5, init_scale=1e-3, lr=1.0, steps=800, seed=0),
    ),
    falsify=falsify,
    domain=domain,
)
