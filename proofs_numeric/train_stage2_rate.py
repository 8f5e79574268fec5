"""SPEC §4.5 (EMPIRICAL against a DERIVED prediction, deterministic exact population runs):
in joint training from a small init, once W^V has its stage-1 value the topic part of the score
matrix ``S = W_Q^T W_K`` (its projection on the topic-contrast vectors, both sides) grows by the
factor ``(1 + lr (sigma_max - 2 reg))^2`` per step predicted by :func:`theorycheck.analysis.dynamics.stage2_onset`
from the exact population gradient, and an L2 term above ``sigma_max / 2`` prevents stage 2.

Setting: one-hot, identity decoder, squared loss, ``scale="none"``, entries N(0, 0.01^2), seed 0,
SGD, T = 5, v = 4, tau = 2, lr 5 (the ``train.two-stage-ordering`` setting). Measured rate: the
median of the per-step log growth over the logged steps at which the topic part lies between 10x
and 50x its initial size (before, the decaying partner mode still contaminates it; after, the
non-linear regime starts). Relative tolerance ``RATE_RTOL`` = 1.6%. The L2 runs use ``reg = 0.5`` and
``2`` times the threshold (on every trained matrix) and must end with the topic part above
``MIN_REG_GROWTH`` = 4.68x / below 1x its initial size.

Tiers: the default ``verify`` runs seed 0; ``verify --full`` runs seeds 0-6 (all must pass: power 0.918) (init draws)
and reports the fraction passing and 95% t-intervals of the measured rate, measured / predicted rate and the
regularised growth.

Calibration (seeds 100-104, never judged; rules of :mod:`proofs_numeric._empirical`): measured /
predicted rate 1.00779, 1.00494, 1.00135, 1.00333, 1.00032 -> ``prediction_deviation`` (mean +- k SD,
k = 4.10, the 99% prediction interval of one new seed) gives RATE_RTOL = 0.016 (was 0.02 by the former
``twice_max_deviation``); final growth under ``reg = 0.5`` x threshold 19.15, 14.35, 9.30, 14.00, 12.85
-> ``prediction_lower`` on the log scale (mean - k SD of the logs, k = 4.10) gives MIN_REG_GROWTH = 4.68
(was 5.1 by the former ``halfway``). Written reason for going below 2/3 of the smallest calibration
value (the floor of :mod:`proofs_numeric._empirical`): the regularised run's final growth varies
2-fold across seeds (9.3-19.1, SD of the logs 0.26), so a bound that one new seed clears with 99%
probability lies at 4.7; the claim's words ("L2 below the threshold does not prevent stage 2") need
growth well above 1, which 4.68 keeps. The prediction
itself is derived, not fitted; "< 1 with L2 at 2x the threshold" is the claim's definition.
"""

from __future__ import annotations

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.analysis.dynamics import stage2_onset, topic_contrast_basis
from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, train
from theorycheck.report.claims import Claim, ClaimResult, by_seed, compare_all, compare_close
from theorycheck.report.plots import stage2_growth
from theorycheck.strategies import params as params_of
from theorycheck.strategies import seeds

#: Growth factor the ``reg = 0.5`` x threshold run must exceed (calibrated on seeds 100-104, see above).
MIN_REG_GROWTH = 4.68
#: Relative tolerance of measured / predicted rate (calibrated, see the docstring).
RATE_RTOL = 0.016

#: Calibration on seeds 100-104 (never judged; ``benchmarks/calibrate_empirical.py``):
#: ``{(tier, threshold): (rule, null or reference, values per calibration seed)}``.
CALIBRATION = {
    ("default", "rate_rtol"): ("prediction_deviation", 1.0, (1.00779, 1.00494, 1.00135, 1.00333, 1.00032)),
    ("default", "min_reg_growth"): (
        "prediction_lower_log",
        1.0,
        (19.1484, 14.3506, 9.30209, 13.9963, 12.8464),
        "2-fold spread across seeds (9.3-19.1): the 99% prediction bound is 4.68, still well above no growth (1)",
    ),
}


def topic_part_curve(params: dict, reg: float = 0.0, scale: str = "none"):
    """``(steps, ||P^T S P||_F)`` of a joint population run (``P`` the topic-contrast basis)."""
    d = DataConfig(T=params["T"], v=params["v"], tau=params["tau"], source="population")
    m = ModelConfig(
        V1=d.V1,
        attention="softmax",
        train=("W_K", "W_Q", "W_V"),
        init="normal",
        init_scale=params["init_scale"],
        loss="squared",
        scale=scale,
        reg=reg,
    )
    cfg = TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=params["lr"]),
        steps=params["steps"],
        log_every=params["log_every"],
        eval_every=0,
        eval_docs=0,
        seed=params["seed"],
    )
    P = topic_contrast_basis(d.topic_model())

    def topic_part(model, ctx):
        """Probe: ``||P^T S P||_F`` of the score matrix at every logged step."""
        return {"topic_part_S": float(np.linalg.norm(P.T @ model.score_matrix() @ P))}

    res = train(cfg, probes=[topic_part], progress=False)
    return np.array([r["step"] for r in res.history]), np.array([r["topic_part_S"] for r in res.history])


def measured_rate(steps, vals, lo=10.0, hi=50.0):
    """Median per-step log growth over the logged intervals inside ``[lo, hi] x`` the initial value."""
    g = np.diff(np.log(vals)) / np.diff(steps)
    rel = vals[:-1] / vals[0]
    win = (rel >= lo) & (vals[1:] / vals[0] <= hi)
    return float(np.median(g[win])) if win.any() else float("nan"), int(win.sum())


def check(params: dict, inject: dict | None = None):
    stats = ("rate_measured", "rate_ratio") + (
        ("reg_0.5x_threshold_final_growth",) if params.get("check_reg", True) else ()
    )
    return by_seed(_check_one, params, inject, statistics=stats)


def _check_one(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm = DataConfig(T=params["T"], v=params["v"], tau=params["tau"], source="population").topic_model()
    mk = DataConfig().masking()
    pred = stage2_onset(tm, mk, lr=params["lr"])
    steps, vals = topic_part_curve(params, scale=inject.get("scale", "none"))
    rate, n = measured_rate(steps, vals)
    predicted = pred.growth_per_step * inject.get("pred_scale", 1.0)
    subs = [
        compare_close(
            rate / predicted,
            1.0,
            params.get("rate_rtol", RATE_RTOL),
            label="measured / predicted growth rate within rate_rtol of 1",
            details={
                "rate_ratio": rate / predicted,
                "rate_measured": rate,
                "rate_predicted": predicted,
                "window_logs": n,
                "sigma_max": pred.sigma_max,
            },
        )
    ]
    res_data = {"steps": steps, "topic_part": vals, "pred": pred.growth_per_step}
    if params.get("check_reg", True):
        for frac, want_growth in ((0.5, True), (2.0, False)):
            reg = frac * pred.reg_threshold
            s2, v2 = topic_part_curve(params, reg=reg)
            final = float(v2[-1] / v2[0])
            g = float(params.get("min_reg_growth", MIN_REG_GROWTH))
            passed = final > g if want_growth else final < 1.0
            subs.append(
                ClaimResult(
                    passed,
                    f"> {g:g}" if want_growth else "< 1",
                    final,
                    (final - g) / g if want_growth else 1.0 - final,
                    details={f"reg_{frac:g}x_threshold_final_growth": final, "reg": reg},
                    label=f"final topic-part growth with L2 = {frac:g} x sigma_max/2",
                )
            )
    res = compare_all(subs)
    res.data = res_data
    return res


def falsify(params: dict) -> dict:
    """A predicted rate 5% too large (a slip in the prediction's constant, a fixed factor): measured / predicted
    is then 0.955, 2.8 x RATE_RTOL from 1 (issue 25 item 6: a loosened RATE_RTOL lets it pass). (``{"scale":
    "sqrt"}``, training with the score factor 1/sqrt(d_a) while predicting with c = 1, makes the rate
    unmeasurable.)"""
    return {"pred_scale": 1.05}


def plot(results):
    runs = [(r.data["steps"], r.data["topic_part"], r.data["pred"]) for r in results if "steps" in r.data]
    fig = stage2_growth(runs)
    return {"stage2_rate": fig}


DEFAULT = dict(T=5, v=4, tau=2, init_scale=0.01, lr=5.0, steps=600, log_every=5, seed=0)
FULL = dict(T=5, v=4, tau=2, init_scale=0.01, lr=5.0, steps=600, log_every=5, seeds=JUDGED_SEEDS)


def domain():
    """Any seed (the init draw) at the default configuration; cost: three 600-step exact
    population runs per draw."""
    return params_of(seeds(), **{k: v for k, v in DEFAULT.items() if k != "seed"})


CLAIM = Claim(
    id="train.stage2-onset-rate",
    statement=(
        "Joint training: the topic part of W_Q^T W_K grows at the predicted (1 + lr sigma_max)^2 per step; L2 above "
        "sigma_max/2 prevents stage 2"
    ),
    source="EMPIRICAL",
    spec="SPEC §4.5, §6 items 21-23",
    check=check,
    default_params=(DEFAULT,),
    full_params=(FULL,),
    domain=domain,
    cost=10.0,
    falsify=falsify,
    plot=plot,
)
