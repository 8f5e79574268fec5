"""Calibrate the thresholds of the EMPIRICAL claims on seeds that are never judged.

For each EMPIRICAL claim and tier, run the claim's per-seed check (``_check_one`` of its module)
on ``CALIBRATION_SEEDS`` (100-104, :mod:`proofs_numeric._empirical`), collect the statistic behind
each threshold and apply the threshold's rule (``halfway``, ``twice_max_deviation`` or
``definition``, see :mod:`proofs_numeric._empirical`). The result (statistic per seed, the rule,
the calibrated threshold, the threshold the claim uses now) is printed and merged into
``benchmarks/results/calibration.json``. The judged seeds (0-4) are never run here.

    python benchmarks/calibrate_empirical.py                 # every claim (long: full tiers included)
    python benchmarks/calibrate_empirical.py --only train.compensation --tier default
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import importlib
import json
import time
from pathlib import Path

from proofs_numeric._empirical import CALIBRATION_SEEDS, halfway, twice_max_deviation
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
                    ("min_attention_ratio", "attention_ratio_frozen_embedding", "halfway", 1.0),
                    ("min_gram_block_score", "gram_block_score_frozen_attention", "halfway", 0.0),
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
                    ("min_V_growth", "V_growth_early", "halfway", 1.0),
                    ("max_KQ_growth", "KQ_growth_early", "definition", 1.5),
                ],
            ),
            (
                "full",
                [
                    ("min_V_growth", "V_growth_early", "halfway", 1.0),
                    ("max_KQ_growth", "KQ_growth_early", "definition", 1.5),
                    ("min_stage2_over_early", "stage2_over_early", "halfway", 1.0),
                ],
            ),
        ],
    ),
    "train.official-demo-dev-ce": (
        "train_official_demo",
        [(tier, [("rtol", "best_dev_ce", "twice_max_deviation", 3.3954)]) for tier in ("default", "full")],
    ),
    "train.stage1-population-min-norm": (
        "train_stage1_population",
        [("full", [("TOL", "rel_error", "definition", 1e-6)])],
    ),
    "train.stage2-approaches-Kstar": (
        "train_stage2_kstar",
        [(tier, [("K_rtol", "K_eff_over_K_star", "twice_max_deviation", 1.0)]) for tier in ("default", "full")],
    ),
    "train.stage2-onset-rate": (
        "train_stage2_rate",
        [
            (
                "default",
                [
                    ("rate_rtol", "rate_ratio", "twice_max_deviation", 1.0),
                    ("min_reg_growth", "reg_0.5x_threshold_final_growth", "halfway", 1.0),
                ],
            )
        ],
    ),
    "train.stage2-same-topic-attention": (
        "train_stage2_attention",
        [("default", [("ratio > 1", "ratio_same_over_diff", "definition", 1.0)])],
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
    if rule == "halfway":
        return halfway(values, null)
    if rule == "twice_max_deviation":
        return twice_max_deviation(values, null)
    if rule == "definition":
        return null
    raise ValueError(f"unknown rule {rule!r}")


RULE_TEXT = {
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


def merge(entries: list[dict], path: Path = OUT) -> dict:
    """Merge ``entries`` into ``path`` (under a file lock: several calibrations may run at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault("calibration_seeds", list(CALIBRATION_SEEDS))
        data.setdefault("results", {})
        for e in entries:
            data["results"][f"{e['claim']}[{e['tier']}]"] = e
        _io.write_json(path, data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="*", help="glob of claim ids")
    ap.add_argument("--tier", choices=("default", "full", "all"), default="all")
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
