"""Calibrate the thresholds of the EMPIRICAL claims on seeds that are never judged.

For each EMPIRICAL claim and tier, run the claim's per-seed check (``_check_one`` of its module)
on ``CALIBRATION_SEEDS`` (100-104, :mod:`proofs_numeric._empirical`), collect the statistic behind
each threshold and apply the threshold's rule (``prediction_lower[_log]``, ``prediction_deviation`` or
``definition``, see :mod:`proofs_numeric._empirical`). The result (statistic per seed, the rule,
the calibrated threshold, the threshold the claim uses now) is printed and merged into
``benchmarks/results/calibration.json``. The judged seeds (0-6) are never run here.

    python benchmarks/calibrate_empirical.py                 # every claim (long: full tiers included)
    python benchmarks/calibrate_empirical.py --only train.compensation --tier default
    python benchmarks/calibrate_empirical.py --rate --only train.deep-4x4-two-stage --tier default

``--rate`` measures instead how often a fraction claim's per-seed statement fails: its per-seed
check on ``RATE_SEEDS`` (1000-1019, neither judged nor calibration), the seeds failing, the
failure fraction with its Clopper-Pearson 95% interval and the probability that the claim's
``k``-of-``n`` rule refutes a block at that rate; stored under ``"failure_rates"``.
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import importlib
import json
import time
from pathlib import Path

from proofs_numeric._empirical import (
    CALIBRATION_SEEDS,
    RATE_SEEDS,
    clopper_pearson,
    false_refutation_probability,
    halfway,
    prediction_deviation,
    prediction_lower,
    twice_max_deviation,
)
from theorycheck import _io
from theorycheck.report.claims import over_seeds

ROOT = Path(__file__).resolve().parent.parent

OUT = ROOT / "benchmarks" / "results" / "calibration.json"

#: claim id -> (module, [(tier, [(threshold name (params key or module constant), statistic, rule, null)])]).
#: ``null`` is the null value of ``halfway``, the reference of ``twice_max_deviation``, or the
#: fixed threshold of ``definition``.
SPECS = {
    "train.compensation": (
        "train_compensation",
        [
            (
                tier,
                [
                    ("CI low > 0", "attention_log_gain_ci_low", "definition", 0.0),
                    ("min_gram_block_score", "gram_block_score_frozen_attention", "prediction_lower", 0.0),
                ],
            )
            for tier in ("default", "full")
        ],
    ),
    "train.deep-4x4-two-stage": (
        "train_deep_two_stage",
        [
            (
                "default",
                [
                    ("min_V_growth", "V_growth_early", "prediction_lower_log", 1.0),
                    ("max_KQ_growth", "KQ_growth_early", "definition", 1.5),
                ],
            ),
            (
                "full",
                [
                    ("min_V_growth", "V_growth_early", "prediction_lower_log", 1.0),
                    ("max_KQ_growth", "KQ_growth_early", "definition", 1.5),
                    ("min_stage2_over_early", "stage2_over_early", "prediction_lower_log", 1.0),
                ],
            ),
        ],
    ),
    "train.official-demo-dev-ce": (
        "train_official_demo",
        [(tier, [("rtol", "best_dev_ce", "prediction_deviation", 3.3954)]) for tier in ("default", "full")],
    ),
    "train.stage1-population-min-norm": (
        "train_stage1_population",
        [("full", [("TOL", "rel_error", "definition", 1e-6)])],
    ),
    "train.stage2-approaches-Kstar": (
        "train_stage2_kstar",
        [
            (
                tier,
                [
                    ("K_rtol", "K_eff_over_K_u", "prediction_deviation", 1.0),
                    ("min_shrink", "shrink_factor", "prediction_lower_log", 1.0),
                ],
            )
            for tier in ("default", "full")
        ],
    ),
    "train.stage2-onset-rate": (
        "train_stage2_rate",
        [
            (
                "default",
                [
                    ("rate_rtol", "rate_ratio", "prediction_deviation", 1.0),
                    ("min_reg_growth", "reg_0.5x_threshold_final_growth", "prediction_lower_log", 1.0),
                ],
            )
        ],
    ),
    "train.stage2-same-topic-attention": (
        "train_stage2_attention",
        [("default", [("min_ratio", "ratio_same_over_diff", "prediction_lower_log", 1.0)])],
    ),
    "train.two-stage-ordering": (
        "train_two_stage",
        [
            (
                tier,
                [
                    ("grad ratio >= 100", "grad_ratio_step0", "definition", 100.0),
                    ("KQ growth at stage-1 end < 2", "KQ_growth_at_stage1_end", "definition", 2.0),
                ],
            )
            for tier in ("default", "full")
        ],
    ),
    "realdata.attention-topic-gap": (
        "realdata_attention",
        [("default", [("CI low > 0", "mean_gap_ci_low", "definition", 0.0)])],
    ),
    "realdata.embedding-topic-gap": (
        "realdata_embedding",
        [
            (
                "default",
                [
                    ("cosine CI low > 0", "cosine_gap_ci_low", "definition", 0.0),
                    ("dot CI low > 0", "dot_gap_ci_low", "definition", 0.0),
                ],
            )
        ],
    ),
    "realdata.embedding-specificity": (
        "realdata_specificity",
        [("default", [("CI low (specific) - CI high (general) > 0", "ci_separation", "definition", 0.0)])],
    ),
    "realdata.synthetic-stronger": (
        "realdata_synthetic",
        [("default", [("synthetic - real signal > 0", "signal_difference", "definition", 0.0)])],
    ),
}


def tier_params(claim, tier: str) -> dict:
    """The claim's configuration of ``tier`` without its seed(s)."""
    p = dict(claim.full_params[0] if tier == "full" and claim.full_params else claim.default_params[0])
    p.pop("seed", None)
    p.pop("seeds", None)
    return p


def apply_rule(rule: str, values, null: float) -> float:
    if rule == "prediction_lower":
        return prediction_lower(values, null)
    if rule == "prediction_lower_log":
        return prediction_lower(values, null, log=True)
    if rule == "prediction_deviation":
        return prediction_deviation(values, null)
    if rule == "halfway":
        return halfway(values, null)
    if rule == "twice_max_deviation":
        return twice_max_deviation(values, null)
    if rule == "definition":
        return null
    raise ValueError(f"unknown rule {rule!r}")


RULE_TEXT = {
    "prediction_lower": "threshold = max(null, mean - k SD), k = t_{0.99,n-1} sqrt(1 + 1/n) (rounded down, 3 digits)",
    "prediction_lower_log": "threshold = max(null, exp(mean - k SD of the logs)), k as prediction_lower (3 digits)",
    "prediction_deviation": "tolerance = max |mean +- k SD - ref| / ref, k as prediction_lower (up, 2 digits)",
    "halfway": "threshold = null + (min over calibration seeds - null) / 2 (excess rounded down, 2 digits)",
    "twice_max_deviation": "tolerance = 2 max |value / reference - 1| over calibration seeds (rounded up, 1 digit)",
    "definition": "fixed by the claim's definition (not fitted); calibration seeds must pass",
}


def calibrate(claim_id: str, tier: str, seeds=CALIBRATION_SEEDS) -> dict:
    modname, tiers = SPECS[claim_id]
    mod = importlib.import_module(f"proofs_numeric.{modname}")
    claim = next(c for c in (getattr(mod, "CLAIMS", None) or [mod.CLAIM]) if c.id == claim_id)
    thresholds = dict(tiers)[tier]
    params = dict(tier_params(claim, tier), seeds=tuple(seeds))
    t0 = time.perf_counter()
    res = over_seeds(mod._check_one, params, statistics=tuple(s for _, s, _, _ in thresholds))
    out = {"claim": claim_id, "tier": tier, "params": _io.jsonable(params), "all_seeds_pass": bool(res.passed)}
    out["thresholds"] = []
    for name, stat, rule, null in thresholds:
        values = res.details[f"{stat}_per_seed"]
        current = tier_params(claim, tier).get(name, getattr(mod, name, None))
        out["thresholds"].append(
            {
                "name": name,
                "statistic": stat,
                "per_seed": values,
                "rule": rule,
                "rule_text": RULE_TEXT[rule],
                "null_or_reference": null,
                "calibrated": apply_rule(rule, values, null),
                "in_claim": current,
            }
        )
    out["seconds"] = time.perf_counter() - t0
    return out


#: Fraction claims whose per-seed failure rate ``--rate`` measures: claim id -> (module, tiers, statistics).
RATE_SPECS = {
    "train.deep-4x4-two-stage": (
        "train_deep_two_stage",
        ("default", "full"),
        ("V_growth_early", "KQ_growth_early"),
    ),
}


def _claim_module(claim_id: str, specs: dict):
    mod = importlib.import_module(f"proofs_numeric.{specs[claim_id][0]}")
    claim = next(c for c in (getattr(mod, "CLAIMS", None) or [mod.CLAIM]) if c.id == claim_id)
    return mod, claim


def rate_entry(claim_id: str, tier: str, seeds, passed, per_seed_stats: dict, n: int, k: int) -> dict:
    """The ``"failure_rates"`` entry of one claim and tier from its per-seed outcomes ``passed``."""
    seeds = [int(s) for s in seeds]
    fails = [s for s, ok in zip(seeds, passed, strict=True) if not ok]
    rate = len(fails) / len(seeds)
    ci = clopper_pearson(len(fails), len(seeds))
    return {
        "claim": claim_id,
        "tier": tier,
        "seeds": seeds,
        "passed_per_seed": [bool(ok) for ok in passed],
        "failing_seeds": fails,
        "failure_fraction": rate,
        "failure_ci95_clopper_pearson": ci,
        "per_seed": per_seed_stats,
        "block": {"n": n, "k": k},
        "false_refutation_probability": false_refutation_probability(n, k, rate),
        "false_refutation_probability_at_ci_high": false_refutation_probability(n, k, ci[1]),
    }


def measure_rate(claim_id: str, tier: str, seeds=RATE_SEEDS) -> dict:
    """Run the claim's per-seed check ``_check_one`` on ``seeds`` at ``tier``'s configuration."""
    mod, claim = _claim_module(claim_id, RATE_SPECS)
    stats = RATE_SPECS[claim_id][2]
    params = {k: v for k, v in tier_params(claim, tier).items() if k != "min_passing"}
    t0 = time.perf_counter()
    res = over_seeds(mod._check_one, dict(params, seeds=tuple(seeds)), statistics=stats)
    per_seed = {s: res.details[f"{s}_per_seed"] for s in stats}
    e = rate_entry(claim_id, tier, seeds, res.details["passed_per_seed"], per_seed, mod.BLOCK_SEEDS, mod.MIN_PASSING)
    e["params"] = _io.jsonable(params)
    e["seconds"] = time.perf_counter() - t0
    return e


def merge(entries: list[dict], path: Path = OUT, key: str = "results") -> dict:
    """Merge ``entries`` into ``path`` (under a file lock: several calibrations may run at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault("calibration_seeds", list(CALIBRATION_SEEDS))
        data.setdefault(key, {})
        for e in entries:
            data[key][f"{e['claim']}[{e['tier']}]"] = e
        _io.write_json(path, data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="*", help="glob of claim ids")
    ap.add_argument("--tier", choices=("default", "full", "all"), default="all")
    ap.add_argument("--rate", action="store_true", help="measure per-seed failure rates on RATE_SEEDS instead")
    args = ap.parse_args(argv)
    if args.rate:
        return main_rate(args)
    for cid, (_, tiers) in SPECS.items():
        if not fnmatch.fnmatch(cid, args.only) and args.only not in cid:
            continue
        for tier, _ in tiers:
            if args.tier not in ("all", tier):
                continue
            e = calibrate(cid, tier)
            merge([e])
            for t in e["thresholds"]:
                vals = ", ".join(f"{v:.4g}" for v in t["per_seed"])
                print(
                    f"{cid}[{tier}] {t['name']}: {t['statistic']} = [{vals}] -> {t['rule']}: "
                    f"{t['calibrated']:.4g} (claim uses {t['in_claim']}); all pass: {e['all_seeds_pass']}",
                    flush=True,
                )
    return 0


def main_rate(args) -> int:
    for cid, (_, tiers, _) in RATE_SPECS.items():
        if not fnmatch.fnmatch(cid, args.only) and args.only not in cid:
            continue
        for tier in tiers:
            if args.tier not in ("all", tier):
                continue
            e = measure_rate(cid, tier)
            merge([e], key="failure_rates")
            lo, hi = e["failure_ci95_clopper_pearson"]
            print(
                f"{cid}[{tier}]: fails on {len(e['failing_seeds'])} of {len(e['seeds'])} seeds {e['failing_seeds']}, "
                f"fraction {e['failure_fraction']:.3g}, 95% CI [{lo:.3g}, {hi:.3g}]; a {e['block']['k']}-of-"
                f"{e['block']['n']} block is falsely refuted with probability {e['false_refutation_probability']:.3g}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
