"""SPEC §4.2, §6 item 9 (EMPIRICAL run of our trainer; deterministic): exact population gradient
descent on W^V from W = 0 (uniform attention, one-hot, identity decoder, squared loss) converges to
the minimum-norm minimizer ``C Sigma^+``.

The trainer's population batch (every tau-subset as a weighted context) is used, so this checks the
whole training stack (model, population batch, SGD) against the independent reference
``C @ pinv(Sigma)`` from the exact moments. Step size ``2/(lambda_min + lambda_max)`` of the
Hessian ``2 Sigma`` on its range; tolerance 1e-6 relative (Frobenius).

Seeds. From W = 0 no seed enters the run (exact population batch, deterministic GD): the default
tier is that one run. What is random in the paper's setting is a *small* init: ``verify --full``
starts from W^V with entries N(0, s^2), s = ``init_scale`` = 1e-9, drawn by seeds 0-6 (all must pass: power 0.918),
and checks the same tolerance (GD leaves the init's component in the null space of Sigma untouched, so the limit
is the min-norm minimizer up to ``s sqrt(V1^2) / ||C Sigma^+||``, far below 1e-6). The tolerance
1e-6 is a convergence tolerance (a definition, not fitted); calibration seeds 100-104 (never judged)
end at relative errors 7.2e-9 to 7.5e-9 (``CALIBRATION``).

Domain (``verify --explore``): any T <= 6, v <= 4, tau <= T and masking with p_m >= 0.05, W = 0,
300 steps (one exact population run per draw), under the precondition that GD contracts enough in
``steps`` steps: ``((kappa - 1) / (kappa + 1))^steps <= 1e-7`` with ``kappa`` the condition number of
``2 Sigma`` on its range (GD with step ``2/(lambda_min + lambda_max)`` shrinks the error on the range
by that factor per step). Exploring without it found T = 2, v = 1, tau = 1, p_m = 0.875, p_c = p_r = 0:
``kappa`` = 99, relative error 0.00233 after 300 steps = ``(98/100)^300`` exactly (a finite-step
effect, not a wrong limit).
"""

from __future__ import annotations

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck import Masking, TopicModel
from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer
from theorycheck.population import moments
from theorycheck.report.claims import Claim, by_seed, compare_close
from theorycheck.strategies import masking_params, model_params, seeds
from theorycheck.strategies import params as params_of

TOL = 1e-6


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=("rel_error",))


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    mk = Masking(params["p_m"], params["p_c"], params["p_r"])
    Sigma, C = moments(tm, mk)
    ev = np.linalg.eigvalsh(2.0 * Sigma)
    pos = ev[ev > 1e-10 * ev.max()]
    lr = 2.0 / (pos.min() + pos.max())
    d = DataConfig(T=tm.T, v=tm.v, tau=tm.tau, p_m=mk.p_m, p_c=mk.p_c, p_r=mk.p_r, source="population")
    if "init_scale" in params:  # a small random init drawn by the seed (the full tier)
        init = dict(init="normal", init_scale=params["init_scale"], init_V="same")
    else:
        init = dict(init_V="zero")
    m = ModelConfig(V1=tm.V1, attention="uniform", train=("W_V",), loss="squared", **init)
    cfg = TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=lr),
        steps=params["steps"],
        log_every=params["steps"],
        eval_every=0,
        eval_docs=0,
        seed=params["seed"],
    )
    tr = Trainer(cfg, progress=False)
    if "init_W_V" in inject:
        tr.model.get("layers.0.W_V")[0] = inject["init_W_V"]
    res = tr.run()
    ref = C @ np.linalg.pinv(Sigma)
    W = res.model.get("layers.0.W_V")[0]
    rel = float(np.linalg.norm(W - ref) / np.linalg.norm(ref))
    out = compare_close(
        rel,
        0.0,
        TOL,
        label="||W - C pinv(Sigma)|| / ||C pinv(Sigma)|| <= 1e-6",
        details={
            "rel_error": rel,
            "lr": lr,
            "steps": params["steps"],
            "final_loss": res.final["loss"],
            "min_loss": tm.min_value_loss(),
        },
    )
    out.data = {"W_V": W, "reference": ref}
    return out


def falsify(params: dict) -> dict:
    """Start from a small random W (entries N(0, (4e-7)^2)) instead of 0: GD then converges to another minimizer
    (its null-space component never decays), about 3 x TOL from the minimum-norm one (issue 25 item 6: a
    loosened TOL lets it pass; scale 0.1 gives 7e5 x)."""
    V1 = params["T"] * params["v"] + 1
    return {"init_W_V": np.random.default_rng(0).normal(scale=4e-7, size=(V1, V1))}


#: Calibration runs on seeds 100-104 (never judged): the tolerance is a convergence tolerance (definition):
#: ``{(tier, threshold): ("definition", value, relative errors per seed)}``.
CALIBRATION = {
    ("full", "TOL"): ("definition", 1e-06, (7.27871e-09, 7.4129e-09, 7.48547e-09, 7.3108e-09, 7.22495e-09)),
}

DEFAULT = dict(T=5, v=4, tau=2, p_m=0.15, p_c=0.1, p_r=0.1, steps=300, seed=0)
FULL = dict(T=5, v=4, tau=2, p_m=0.15, p_c=0.1, p_r=0.1, steps=300, init_scale=1e-9, seeds=JUDGED_SEEDS)


def gd_converges(p: dict) -> bool:
    """Precondition: ``((kappa - 1) / (kappa + 1))^steps <= 1e-7`` (``kappa``: condition number of
    ``2 Sigma`` on its range), i.e. ``steps`` GD steps reach a tenth of the tolerance."""
    tm = TopicModel(T=p["T"], v=p["v"], tau=p["tau"])
    Sigma, _ = moments(tm, Masking(p["p_m"], p["p_c"], p["p_r"]))
    ev = np.linalg.eigvalsh(2.0 * Sigma)
    pos = ev[ev > 1e-10 * ev.max()]
    kappa = float(pos.max() / pos.min())
    return ((kappa - 1.0) / (kappa + 1.0)) ** p["steps"] <= TOL / 10


def domain():
    """T <= 6, v <= 4, any tau <= T, masking with p_m >= 0.05, any seed, W = 0 and 300 steps (one
    exact population run per draw)."""
    return params_of(model_params(max_T=6, max_v=4), masking_params(min_p_m=0.05), seeds(), steps=300)


CLAIM = Claim(
    id="train.stage1-population-min-norm",
    statement=(
        "Exact population GD on W^V from W = 0 (uniform attention, squared loss) converges to the min-norm W^V = C "
        "Sigma^+"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.2, §6 items 9-10",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    preconditions=(("GD contraction ((kappa-1)/(kappa+1))^steps <= 1e-7", gd_converges),),
    falsify=falsify,
)
