"""EMPIRICAL claims: judged on >= 5 seeds under ``verify --full``, disjoint from the calibration
seeds; thresholds reproduced by their calibration rule; ``over_seeds`` fraction and t-interval."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import proofs_numeric
from proofs_numeric import _empirical
from proofs_numeric._empirical import CALIBRATION_SEEDS, JUDGED_SEEDS, halfway, twice_max_deviation
from theorycheck.report.claims import ClaimResult, compare_greater, over_seeds

CALIBRATION_JSON = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "calibration.json"
EMPIRICAL = [c for c in proofs_numeric.CLAIMS if c.source == "EMPIRICAL" and c.id.startswith(("train.", "realdata."))]


def test_the_empirical_claims_are_registered():
    ids = {c.id for c in EMPIRICAL}
    assert len([i for i in ids if i.startswith("train.")]) == 8


def test_judged_and_calibration_seeds_are_disjoint():
    assert len(JUDGED_SEEDS) >= 5
    assert not set(JUDGED_SEEDS) & set(CALIBRATION_SEEDS)


@pytest.mark.parametrize("claim", EMPIRICAL, ids=lambda c: c.id)
def test_full_tier_judges_at_least_five_seeds_none_of_them_calibration_seeds(claim):
    calibration = set(CALIBRATION_SEEDS)
    if CALIBRATION_JSON.exists():
        calibration |= set(json.loads(CALIBRATION_JSON.read_text()).get("calibration_seeds", []))
    multi = [p for p in claim.full_params if "seeds" in p]
    assert multi, f"{claim.id}: no multi-seed configuration in full_params"
    for p in multi:
        assert len(set(p["seeds"])) >= 5
        assert not set(p["seeds"]) & calibration, f"{claim.id} is judged on calibration seeds"
    for p in claim.params_for("full"):
        seeds = p.get("seeds", (p.get("seed", 0),))
        assert not set(seeds) & calibration, f"{claim.id} is judged on calibration seeds"


@pytest.mark.parametrize("claim", EMPIRICAL, ids=lambda c: c.id)
def test_default_tier_runs_at_most_two_seeds_and_has_a_domain(claim):
    for p in claim.default_params:
        assert len(p.get("seeds", (p.get("seed"),))) <= 2
    assert claim.domain is not None


def _rule(rule, values, null):
    return {"halfway": halfway, "twice_max_deviation": twice_max_deviation}[rule](values, null)


@pytest.mark.parametrize("claim", EMPIRICAL, ids=lambda c: c.id)
def test_thresholds_are_their_calibration_rule_applied_to_the_calibration_values(claim):
    """``CALIBRATION`` of a claim module: {(tier, name): (rule, null, values on CALIBRATION_SEEDS)}."""
    import importlib

    mod = importlib.import_module(claim.check.__module__)
    table = getattr(mod, "CALIBRATION", {})
    for (tier, name), (rule, null, values) in table.items():
        assert len(values) == len(CALIBRATION_SEEDS)
        if rule == "definition":  # fixed by the claim's words; recorded, not fitted
            continue
        params = claim.params_for(tier)[-1]
        used = params.get(name, getattr(mod, name.upper(), None))
        assert used is not None, f"{claim.id}: threshold {name!r} not found"
        assert used == pytest.approx(_rule(rule, values, null), rel=1e-12), (claim.id, tier, name)


def test_calibration_rules():
    assert halfway([1.47, 2.16, 1.91, 1.37, 2.30], 1.0) == pytest.approx(1.18)
    assert halfway([0.9714, 0.974], 0.0) == pytest.approx(0.48)
    assert twice_max_deviation([1.0412, 1.0411]) == pytest.approx(0.09)
    assert twice_max_deviation([3.4147, 3.40], 3.3954) == pytest.approx(0.02)
    with pytest.raises(ValueError, match="does not beat the null"):
        halfway([0.9, 1.2], 1.0)
    with pytest.raises(ValueError, match="finite"):
        twice_max_deviation([math.nan])
    assert _empirical._round_sig(0.0123, 2, up=True) == pytest.approx(0.013)


def _synthetic_check(params, inject=None):
    """Passes iff ``seed != 3``; measured value ``seed + 0.5``; detail ``stat = 2 seed``."""
    s = params["seed"]
    res = compare_greater(s + 0.5 if s != 3 else -1.0, 0.0, label="value > 0", details={"stat": 2.0 * s})
    return res


def test_over_seeds_reports_the_fraction_passing_and_a_t_interval():
    res = over_seeds(_synthetic_check, {"seeds": (0, 1, 2, 3, 4)}, statistics=("stat",))
    assert isinstance(res, ClaimResult)
    assert not res.passed
    d = res.details
    assert d["n_seeds"] == 5
    assert d["fraction_passed"] == pytest.approx(0.8)
    assert d["passed_per_seed"] == [True, True, True, False, True]
    assert res.measured == -1.0 and res.label == "value > 0"
    vals = np.array([0.0, 2.0, 4.0, 6.0, 8.0])
    half = stats.t.ppf(0.975, 4) * vals.std(ddof=1) / np.sqrt(5)
    assert d["stat_ci95"] == pytest.approx([4.0 - half, 4.0 + half], rel=1e-12)
    assert d["stat_mean"] == pytest.approx(4.0)
    margins = np.array([0.5, 1.5, 2.5, -1.0, 4.5])
    hm = stats.t.ppf(0.975, 4) * margins.std(ddof=1) / np.sqrt(5)
    assert d["margin_ci95"] == pytest.approx([margins.mean() - hm, margins.mean() + hm], rel=1e-12)


def test_over_seeds_passes_when_every_seed_passes():
    res = over_seeds(_synthetic_check, {"seeds": (0, 1, 2, 4, 5)}, statistics=("stat",))
    assert res.passed and res.details["fraction_passed"] == 1.0
    assert res.margin == pytest.approx(0.5)
