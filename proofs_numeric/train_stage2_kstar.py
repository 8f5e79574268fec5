"""SPEC §4.3 ("Beyond the family"), §6 item 15 (EMPIRICAL against an independent optimum, deterministic exact
population run): with W^V frozen at the stage-1 optimum, training W^K, W^Q from a small random init (preset
``stage2-population``: T = v = 10, tau = 3, squared loss, d_a = V1, entries N(0, 0.1^2), Adam lr 0.05, 400 steps,
seed 0) converges to the optimum of the exact loss over **all** score matrices, not to the (alpha, beta) family's.

The reference is computed independently of training: the unrestricted optimum ``S_u`` of the exact population loss
(:func:`theorycheck.solvers.optimal_attention` on the general model with ``method="lbfgs"``: L-BFGS over all
``V1^2`` scores, started at the family optimum; status 0 = gradient max-norm below its tolerance), its median
effective same-topic weight ``K_u`` (:func:`theorycheck.analysis.topic_structure.effective_K`) and loss ``L_u``.
Checked (``K_eff(t)`` the trained scores' median ``K_eff`` after ``t`` steps, ``gap(t) = |K_eff(t) / K_u - 1|``):

1. the gap ends within ``K_rtol`` (calibrated below: 1.1e-4 on the default tier, 1.7e-4 on the full tier) of the
   unrestricted optimum;
2. the gap shrinks with steps: its median over the logged steps in ``(2n/3, n]`` is at least ``min_shrink``
   (calibrated: 16.4, full tier 469) times smaller than over ``(n/6, n/3]`` (``n`` steps, every 10 steps logged);
3. the final exact loss is below the family's optimum ``L*`` (training uses what the family cannot: the score
   of the [MASK] key for word queries; ``tests/test_train_crosscheck.py``);
4. the unrestricted optimum itself is found (status 0) and lies above the family's ``K*`` with a lower loss
   (``K_u / K* - 1`` = +4.115% on the default tier, +3.518% at T = v = 10, tau = 3; ``L* - L_u`` = 3.7e-5 and
   4.4e-5): this is the fixed offset that the former check (K_eff within 4.2% of K*) measured, so the former
   tolerance tested an offset, not convergence.

Tiers: the default ``verify`` runs T = 5, v = 4, tau = 2, 300 steps, seed 0 (measured: K_u = 18.83372,
K* = 18.08933, final gap 5.4e-7, shrink factor ~50, loss 0.8662105 < L* = 0.8662474; the unrestricted solve
takes ~0.2 s); ``verify --full`` runs the preset (T = v = 10, tau = 3, K_u = 72.515 against K* = 70.051, 400
steps) on seeds 0-6 (all must pass: power 0.918) with 95% t-intervals of the final gap, the shrink factor and the
loss; its unrestricted solve (~30 s CPU) is computed once per process.

Calibration (seeds 100-104, never judged; ``benchmarks/calibrate_empirical.py``; rules of
:mod:`proofs_numeric._empirical`): ``K_rtol`` by ``prediction_deviation`` of ``K_eff(n) / K_u`` (reference 1),
``min_shrink`` by ``prediction_lower`` on the log scale of the shrink factor (null 1: "does not shrink"); the
values are in :data:`CALIBRATION`. The strict ``loss < L*`` is the claim's definition (not fitted).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck import GeneralTopicModel, Masking, TopicModel
from theorycheck.analysis.topic_structure import effective_K
from theorycheck.nn import Trainer, preset
from theorycheck.report.claims import Claim, by_seed, compare_all, compare_close, compare_greater
from theorycheck.solvers import optimal_attention
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds

#: Steps between two logged records (the gap's trajectory).
LOG_EVERY = 10

STATISTICS = ("K_eff_over_K_u", "gap_final", "shrink_factor", "loss")


def check(params: dict, inject: dict | None = None):
    return by_seed(_check_one, params, inject, statistics=STATISTICS)


@functools.lru_cache(maxsize=4)
def unrestricted_optimum(T: int, v: int, tau: int, p_m: float, p_c: float, p_r: float) -> dict:
    """The unrestricted optimum of the exact loss (stage-1 W^V frozen): ``K_u`` (median ``K_eff`` of ``S_u``),
    ``L_u``, its status and gradient norm, and the family optimum ``K*``, ``L*`` (cached per model: the full tier
    judges seven seeds on one model)."""
    mk = Masking(p_m, p_c, p_r)
    tm = TopicModel(T, v, tau)
    fam = optimal_attention(tm, mk, value="block")
    g = GeneralTopicModel(tm.phi, prior="uniform-tau", tau=tau)
    r = optimal_attention(g, mk, method="lbfgs", value="stage1")
    return {
        "K_u": float(np.median(effective_K(r.x, v))),
        "L_u": float(r.fun),
        "status_u": int(r.status),
        "gradient_norm_u": float(r.residuals["gradient_norm"]),
        "K_star": float(fam.K),
        "L_star": float(fam.loss),
    }


def _config(params: dict, inject: dict):
    cfg = preset("stage2-population").replace(
        steps=inject.get("steps", params["steps"]), seed=params["seed"], log_every=LOG_EVERY, eval_every=0, eval_docs=0
    )
    if "T" in params:  # a smaller topic model (the default tier); the preset's T = v = 10, tau = 3 otherwise
        d = dataclasses.replace(cfg.data, T=params["T"], v=params["v"], tau=params["tau"])
        cfg = cfg.replace(data=d, model=dataclasses.replace(cfg.model, V1=d.V1, d=None, d_a=None))
    return cfg


def window_median(steps, gaps, lo: float, hi: float) -> float:
    """Median of ``gaps`` over the logged ``steps`` in ``(lo, hi]`` (NaN if none)."""
    s, g = np.asarray(steps, float), np.asarray(gaps, float)
    sel = (s > lo) & (s <= hi)
    return float(np.median(g[sel])) if sel.any() else float("nan")


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    cfg = _config(params, inject)
    d, mk = cfg.data, cfg.data.masking()
    ref = unrestricted_optimum(d.T, d.v, d.tau, mk.p_m, mk.p_c, mk.p_r)
    K_u = ref["K_star"] if inject.get("reference") == "family" else ref["K_u"]  # the former reading (test hook)
    tr = Trainer(cfg, progress=False)
    tr.run()
    n = cfg.steps
    loss = float(tr.model.loss(tr.batch_at(n)))
    scale = inject.get("K_eff_scale", 1.0)
    K_final = float(tr.metrics(n, loss, 0.0, full=False)["K_eff_median"]) * scale
    steps = [r["step"] for r in tr.history if r.get("K_eff_median") is not None] + [n]
    K_traj = [float(r["K_eff_median"]) * scale for r in tr.history if r.get("K_eff_median") is not None] + [K_final]
    gaps = np.abs(np.asarray(K_traj) / K_u - 1.0)
    early, late = window_median(steps, gaps, n / 6, n / 3), window_median(steps, gaps, 2 * n / 3, n)
    shrink = early / late if late > 0 else float("inf")
    details = dict(ref, K_eff=K_final, K_eff_over_K_u=K_final / K_u, gap_final=float(gaps[-1]),
                   gap_early_median=early, gap_late_median=late, shrink_factor=shrink, loss=loss,
                   loss_minus_L_u=loss - ref["L_u"], K_u_over_K_star=ref["K_u"] / ref["K_star"])  # fmt: skip
    data = {"steps": np.asarray(steps, float), "gap": gaps}
    sub = [
        compare_close(K_final / K_u, 1.0, params["K_rtol"], label="K_eff(n) / K_u within K_rtol of 1 (unrestricted)"),
        compare_greater(
            np.log(shrink),
            np.log(params["min_shrink"]),
            label="log(gap median (n/6, n/3] / gap median (2n/3, n]) > log(min_shrink)",
        ),  # fmt: skip
        compare_greater(ref["L_star"] - loss, 0.0, label="loss(n) < L* (below the (alpha, beta) family's optimum)"),
        compare_close(ref["status_u"], 0, 0.5, label="unrestricted optimum found (status 0)"),
        compare_greater(ref["K_u"] - ref["K_star"], 0.0, label="K_u > K* (the family is not optimal)"),
    ]
    res = compare_all(sub)
    res.details.update(details)
    res.data = data
    return res


def falsify(params: dict) -> dict:
    """K_eff read 0.05% too large (a fixed factor 1.0005): the final gap is then ~4.5 x the default tier's
    K_rtol = 1.1e-4 (a loosened K_rtol lets it pass). (``{"reference": "family"}``, the former reading against
    K*, fails by the offset 4.1%, ~370 x K_rtol; ``{"steps": 20}``, stopping while Adam overshoots, fails the
    gap and the loss.)"""
    return {"K_eff_scale": 1.0005}


#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, reference or null, values per calibration seed)}``.
_SHRINK_REASON = (
    "the late window's median gap follows Adam's oscillation about the optimum (1e-7 to 1e-4), so the factors "
    "spread over 30x on the log scale; the 99% bound is still a 16-fold (full: 469-fold) shrink"
)
CALIBRATION = {
    ("default", "K_rtol"): (
        "prediction_deviation",
        1.0,
        (1.0000440664636727, 0.9999725208107284, 1.0000013878510163, 0.9999999310819105, 1.0000001490258343),
    ),
    ("default", "min_shrink"): (
        "prediction_lower_log",
        1.0,
        (877.0057601035952, 2138.1200168465275, 3524.917321980552, 1939.5283730585213, 26732.335782496037),
        _SHRINK_REASON,
    ),
    ("full", "K_rtol"): (
        "prediction_deviation",
        1.0,
        (0.9999964212437227, 0.9999655463959524, 1.00000513630258, 0.9999282060969794, 0.9999486984922916),
    ),
    ("full", "min_shrink"): (
        "prediction_lower_log",
        1.0,
        (1421.434623082475, 1172.669740431878, 2299.7521315830522, 1342.796209475575, 1205.7288298220415),
        _SHRINK_REASON,
    ),
}

DEFAULT = dict(steps=300, seed=0, K_rtol=1.1e-4, min_shrink=16.4, T=5, v=4, tau=2)
FULL = dict(steps=400, seeds=JUDGED_SEEDS, K_rtol=1.7e-4, min_shrink=469.0)


def domain():
    """Any seed (the W^K, W^Q init) at the default tier's small model (T = 5, v = 4, tau = 2,
    300 exact-population Adam steps per draw)."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.stage2-approaches-Kstar",
    statement=(
        "Training W^K, W^Q with W^V frozen at the stage-1 optimum converges to the unrestricted optimum of the "
        "exact loss (all score matrices): the K_eff gap to it shrinks with steps and ends within K_rtol, and the "
        "loss ends below the (alpha, beta) family's L* (whose K* is a fixed 4.1% below the unrestricted K_eff)"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.3 (beyond the family), §6 item 15",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=7.5,  # CPU seconds of a cold start (Numba compilation included; benchmarks/bench_cold_start.py)
    falsify=falsify,
)
