"""SPEC §11.5, §3.1 (DERIVED): the fused exact-population training kernel (``theorycheck/nn/_factored_kernels.py`` and
the squared loss's Gram forms, ``_factored_squared.py``: one-layer, one-head model with the identity decoder on the
population count batch, the key and target laws linear in the topic mixture) computes the same loss and gradients as
the layer-by-layer route (``Transformer.fused = False``: the dense ``E x V1`` attention, decoder and loss head), and
its loss is the exact population loss of the dense evaluator :func:`theorycheck.population.attention_loss` at the
model's own scores ``S = c (W^Q e_a)^T (W^K e_b)``, value ``W^V`` and decoder bias (three independent routes).

Cases: the paper's model (T = 4, v = 3, tau = 2) and a seeded random ``phi`` (T = 3, 7 words, tau = 2), squared loss
and cross-entropy, ``mask_keys`` off and on, a random init (scale 0.7) and a random bias. Checked: the loss of the
fused route against both routes (relative :data:`LOSS_TOL` = 1e-12) and every trainable gradient against the
layer-by-layer route (max error over the largest entry: :data:`GRAD_TOL` = 1e-10). Falsifier: the fused loss shifted
by 3e-12 relative (3 x LOSS_TOL).
"""

from __future__ import annotations

import numpy as np

from theorycheck.models import GeneralTopicModel, Masking, TopicModel
from theorycheck.nn import ModelConfig, Transformer, population_batch
from theorycheck.population import attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close

LOSS_TOL = 1e-12
GRAD_TOL = 1e-10


def _models():
    rng = np.random.default_rng(11)
    phi = rng.dirichlet(np.full(7, 0.5), size=3)
    return (("paper", TopicModel(4, 3, 2)), ("random phi", GeneralTopicModel(phi, prior="uniform-tau", tau=2)))


def _model(V1: int, loss: str, seed: int) -> Transformer:
    cfg = ModelConfig(V1=V1, d=V1, embedding="one-hot", loss=loss, train=("W_K", "W_Q", "W_V", "b_dec"),
                      init_scale=0.7, scale="none")  # fmt: skip
    m = Transformer(cfg, seed=seed)
    m.decoder.params["b_dec"][...] = np.random.default_rng(seed + 1).normal(0.0, 0.2, V1)
    return m


def _loss_grads(m, batch, fused):
    m.fused = fused
    m.zero_grad()
    loss = m.loss_and_grad(batch)
    return loss, {n: m.grad(n).copy() for n in m.trainable_names()}


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    l_err, g_err, wl, wg, not_fused = 0.0, 0.0, "", "", []
    for name, tm in _models():
        for loss in ("squared", "ce"):
            for mask_keys in (False, True):
                tag = f"{name}/{loss}/mask_keys={mask_keys}"
                batch = population_batch(tm, mk, mask_keys=mask_keys)
                m = _model(tm.V1, loss, params["seed"])
                if not m.fused_route(batch):
                    not_fused.append(tag)
                l_f, g_f = _loss_grads(m, batch, True)
                l_f *= 1.0 + inject.get("loss_shift", 0.0)
                l_l, g_l = _loss_grads(m, batch, False)
                W = m.get("layers.0.W_V")[0]
                l_d = float(attention_loss(m.score_matrix(), W, tm, mk, m.decoder.params["b_dec"],
                                           mask_keys=mask_keys, loss=loss))  # fmt: skip
                e = max(abs(l_f - l_l), abs(l_f - l_d)) / max(1.0, abs(l_d))
                if e > l_err:
                    l_err, wl = e, tag
                scale = max(float(np.max(np.abs(g))) for g in g_l.values())
                e = max(float(np.max(np.abs(g_f[k] - g_l[k]))) for k in g_l) / scale
                if e > g_err:
                    g_err, wg = e, tag
    return compare_all(
        [
            compare_close(len(not_fused), 0, 0.5, label="every case takes the fused route",
                          details={"not fused": not_fused}),
            compare_close(l_err, 0.0, LOSS_TOL, label="fused loss == layer-by-layer loss == dense exact loss",
                          details={"worst loss case": wl}),
            compare_close(g_err, 0.0, GRAD_TOL, label="fused gradients == layer-by-layer gradients",
                          details={"worst gradient case": wg}),
        ]
    )  # fmt: skip


def falsify(params: dict) -> dict:
    """The fused loss shifted by 3e-12 relative (3 x LOSS_TOL; a loosened tolerance lets it pass)."""
    return {"loss_shift": 3e-12}


DEFAULT = dict(p_m=0.3, p_c=0.1, p_r=0.2, seed=0)


def domain():
    """Any init seed and masking on a 0.05 grid."""
    from theorycheck.strategies import masking_grid_params, params, seeds

    return params(seeds(), masking_grid_params(step=0.05, min_p_m=0.05))


CLAIM = Claim(
    id="gradient.fused-population",
    statement=(
        "The fused exact-population training kernel gives the loss and gradients of the layer-by-layer route, and "
        "its loss is the dense evaluator's exact population loss at the model's scores"
    ),
    source="DERIVED",
    spec="SPEC §11.5, §3.1",
    check=check,
    default_params=(DEFAULT,),
    falsify=falsify,
    domain=domain,
    cost=0.5,
)
