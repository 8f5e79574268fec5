"""EMPIRICAL claims: judged on >= 5 seeds under ``verify --full``, disjoint from the calibration
seeds; thresholds reproduced by their calibration rule; ``over_seeds`` fraction and t-interval."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import proofs_numeric
from proofs_numeric import _empirical
from proofs_numeric._empirical import (
    CALIBRATION_SEEDS,
    FLOOR_FRACTION,
    JUDGED_SEEDS,
    MIN_POWER_FULL,
    RATE_SEEDS,
    at_least_k_of_n,
    clopper_pearson,
    false_refutation_probability,
    halfway,
    k_of_n_power,
    prediction_deviation,
    prediction_k,
    prediction_lower,
    twice_max_deviation,
)
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
    return {
        "prediction_lower": prediction_lower,
        "prediction_lower_log": lambda v, n: prediction_lower(v, n, log=True),
        "prediction_deviation": prediction_deviation,
    }[rule](values, null)


def _calibration_tables():
    import importlib

    for claim in EMPIRICAL:
        mod = importlib.import_module(claim.check.__module__)
        for (tier, name), entry in getattr(mod, "CALIBRATION", {}).items():
            yield claim, mod, tier, name, entry


@pytest.mark.parametrize("claim", EMPIRICAL, ids=lambda c: c.id)
def test_thresholds_are_their_calibration_rule_applied_to_the_calibration_values(claim):
    """``CALIBRATION`` of a claim module: {(tier, name): (rule, null, values on CALIBRATION_SEEDS)}."""
    import importlib

    mod = importlib.import_module(claim.check.__module__)
    table = getattr(mod, "CALIBRATION", {})
    for (tier, name), (rule, null, values, *_reason) in table.items():
        assert len(values) == len(CALIBRATION_SEEDS)
        if rule == "definition":  # fixed by the claim's words; recorded, not fitted
            continue
        params = claim.params_for(tier)[-1]
        used = params.get(name, getattr(mod, name.upper(), None))
        assert used is not None, f"{claim.id}: threshold {name!r} not found"
        assert used == pytest.approx(_rule(rule, values, null), rel=1e-12), (claim.id, tier, name)


def test_fitted_thresholds_use_the_spread_rules_and_respect_the_floor_or_write_a_reason():
    """Issue 25 item 4: no threshold from a fixed fraction (``halfway``) or a multiple of the largest deviation;
    an "exceed" threshold below FLOOR_FRACTION x the smallest calibration value carries a written reason."""
    seen = 0
    for claim, _mod, tier, name, entry in _calibration_tables():
        rule, null, values = entry[:3]
        assert rule in ("definition", "prediction_lower", "prediction_lower_log", "prediction_deviation"), (
            claim.id,
            name,
            rule,
        )
        if rule.startswith("prediction_lower"):
            seen += 1
            used = _rule(rule, values, null)
            if used < FLOOR_FRACTION * min(values):
                assert len(entry) == 4 and len(entry[3]) > 20, f"{claim.id} {tier} {name}: below the floor, no reason"
    assert seen >= 6


def test_prediction_rules():
    # k of the one-sided 99% prediction bound of one new value
    assert prediction_k(5) == pytest.approx(stats.t.ppf(0.99, 4) * math.sqrt(1.2), rel=1e-12)
    x = np.array([0.973178, 0.973957, 0.973043, 0.971378, 0.971762])
    raw = x.mean() - prediction_k(5) * x.std(ddof=1)
    assert prediction_lower(x, 0.0) == pytest.approx(0.968) and 0.968 <= raw < 0.969
    # log scale, and the null when the bound does not beat it
    assert prediction_lower([2.99805, 3.19185, 3.00158, 3.06296, 2.87883], 1.0, log=True) == pytest.approx(2.59)
    assert prediction_lower([1.47355, 2.16424, 1.91437, 1.37293, 2.29683], 1.0, log=True) == 1.0
    assert prediction_deviation([1.0412, 1.04112, 1.04115, 1.04115, 1.04115]) == pytest.approx(0.042)
    assert prediction_deviation([3.40896, 3.40636, 3.41861, 3.42044, 3.4201], 3.3954) == pytest.approx(0.014)
    # the bad "halfway" threshold is far below the spread rule's (0.48 against 0.968)
    assert halfway(x, 0.0) == pytest.approx(0.48)
    assert halfway(x, 0.0) < FLOOR_FRACTION * x.min() < prediction_lower(x, 0.0)
    with pytest.raises(ValueError, match="finite"):
        prediction_lower([1.0], 0.0)
    with pytest.raises(ValueError, match="log scale"):
        prediction_lower([1.0, -1.0], 0.0, log=True)


@given(values=st.lists(st.floats(0.5, 2.0), min_size=5, max_size=5))
def test_a_new_normal_seed_clears_the_prediction_bound_at_the_stated_rate(values):
    """The bound is below the sample minimum's neighbourhood: mean - k SD <= mean, rounded down."""
    b = prediction_lower(values, 0.0)
    assert b <= float(np.mean(values)) + 1e-12


def test_prediction_bound_coverage_by_simulation():
    """Coverage of mean - k SD for one new normal draw is 99% (20000 simulated calibrations, 3 SE)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 6))
    cal, new = x[:, :5], x[:, 5]
    bound = cal.mean(axis=1) - prediction_k(5) * cal.std(axis=1, ddof=1)
    cover = float(np.mean(new >= bound))
    assert abs(cover - 0.99) <= 3 * math.sqrt(0.99 * 0.01 / 20000)


def test_every_k_of_n_rule_under_full_has_power_at_least_0_9():
    """Issue 25 item 4: P[refute | a seed fails 30% of the time] >= 0.9 for every k-of-n rule of --full."""
    rules = 0
    for claim in EMPIRICAL:
        for p in claim.full_params:
            if "min_passing" in p:
                rules += 1
                power = k_of_n_power(len(p["seeds"]), p["min_passing"])
                assert power >= MIN_POWER_FULL, (claim.id, len(p["seeds"]), p["min_passing"], power)
    assert rules >= 1
    assert k_of_n_power(5, 3) == pytest.approx(1 - stats.binom.sf(2, 5, 0.7))  # the old rule: 0.16


def _binomial_power(n: int, k: int, fail: float) -> float:
    """``P[fewer than k of n seeds pass]`` when each seed fails with probability ``fail``: the binomial sum."""
    return sum(math.comb(n, j) * (1 - fail) ** j * fail ** (n - j) for j in range(k))


ALL_EMPIRICAL = [c for c in proofs_numeric.CLAIMS if c.source == "EMPIRICAL"]


@pytest.mark.parametrize("claim", ALL_EMPIRICAL, ids=lambda c: c.id)
def test_every_full_tier_seed_rule_has_power_at_least_0_9_and_states_it(claim):
    """Issue 25 item 4, for every EMPIRICAL claim: each multi-seed check of ``--full`` is a k-of-n rule
    (``min_passing`` = k, else every seed must pass: k = n, :func:`by_seed`); its power, the probability of
    refuting when a seed fails 30% of the time, recomputed here from the binomial sum, is >= 0.9, agrees with
    :func:`k_of_n_power`, and the claim module's docstring states it (3 digits)."""
    import importlib

    assert _empirical.POWER_FAIL_RATE == 0.3 and MIN_POWER_FULL == 0.9
    doc = " ".join((importlib.import_module(claim.check.__module__).__doc__ or "").split())
    for p in claim.full_params:
        if "seeds" not in p:  # a deterministic computation (no seed enters it): no seed rule to judge
            assert not any("seed" in q for q in claim.default_params), claim.id
            continue
        n = len(set(p["seeds"]))
        k = p.get("min_passing", n)
        power = _binomial_power(n, k, 0.3)
        assert power >= 0.9, (claim.id, n, k, power)
        assert k_of_n_power(n, k) == pytest.approx(power, abs=1e-12)
        assert "power" in doc and f"{power:.3f}" in doc, (claim.id, f"docstring does not state power {power:.3f}")
    # the all-seeds rule on the judged seeds; five seeds would not do (0.832)
    assert _binomial_power(len(JUDGED_SEEDS), len(JUDGED_SEEDS), 0.3) == pytest.approx(
        _empirical.ALL_SEEDS_POWER, abs=5e-4
    )
    assert _binomial_power(5, 5, 0.3) < MIN_POWER_FULL <= _binomial_power(7, 7, 0.3)


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


# --- fraction claims: "the per-seed statement holds on at least k of n seeds" -------------------------


def _failing_on(bad):
    """A per-seed check failing exactly on the seeds in ``bad`` (margin ``-1 - s``), else margin ``s + 0.5``."""

    def check_one(params, inject=None):
        s = params["seed"]
        return compare_greater(-1.0 - s if s in bad else s + 0.5, 0.0, label="value > 0", details={"stat": 1.0 * s})

    return check_one


def test_rate_seeds_are_neither_judged_nor_calibration_seeds():
    assert len(RATE_SEEDS) >= 20
    assert not set(RATE_SEEDS) & (set(JUDGED_SEEDS) | set(CALIBRATION_SEEDS))


@pytest.mark.parametrize("n, k", [(5, 3), (5, 4), (7, 5), (3, 1)])
def test_k_of_n_passes_with_one_failing_seed_when_k_allows_it_and_fails_with_n_minus_k_plus_one(n, k):
    seeds = tuple(range(10, 10 + n))
    one_bad = at_least_k_of_n(_failing_on({seeds[2]}), {"seeds": seeds, "min_passing": k}, statistics=("stat",))
    assert one_bad.passed and one_bad.margin >= 0 and one_bad.details["n_passed"] == n - 1
    too_many = set(seeds[: n - k + 1])
    res = at_least_k_of_n(_failing_on(too_many), {"seeds": seeds, "min_passing": k})
    assert not res.passed and res.margin < 0 and res.details["n_passed"] == k - 1
    # the same check under over_seeds (every seed must pass) fails on the single bad seed
    assert not over_seeds(_failing_on({seeds[2]}), {"seeds": seeds}).passed


@given(bad=st.sets(st.integers(0, 7)), k=st.integers(1, 8))
def test_k_of_n_passes_iff_at_least_k_seeds_pass_and_reports_the_kth_best_seed(bad, k):
    seeds = tuple(range(8))
    res = at_least_k_of_n(_failing_on(bad), {"seeds": seeds, "min_passing": k})
    n_pass = 8 - len(bad)
    assert res.passed == (n_pass >= k)
    assert (res.margin >= 0) == res.passed
    # k-th best: passing seeds by decreasing margin (s + 0.5), then failing ones by decreasing margin (-1 - s)
    ranked = sorted(set(seeds) - bad, reverse=True) + sorted(bad)
    assert res.details["deciding_seed"] == ranked[k - 1]
    assert res.details["worst_seed"] == ranked[-1]
    assert res.details["n_passed"] == n_pass and res.details["fraction_passed"] == pytest.approx(n_pass / 8)
    assert res.label == f"value > 0 ({_empirical._ordinal(k)} best of 8 seeds, >= {k} must pass: seed {ranked[k - 1]})"


def test_ordinals():
    got = [_empirical._ordinal(k) for k in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)]
    assert got == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]


def test_k_of_n_keeps_the_over_seeds_statistics_and_adds_a_clopper_pearson_interval():
    seeds = (0, 1, 2, 3, 4)
    res = at_least_k_of_n(_failing_on({3}), {"seeds": seeds, "min_passing": 4}, statistics=("stat",))
    ref = over_seeds(_failing_on({3}), {"seeds": seeds}, statistics=("stat",))
    for key in ("stat_ci95", "stat_mean", "margin_ci95", "passed_per_seed", "measured_per_seed"):
        assert res.details[key] == ref.details[key]
    lo, hi = res.details["fraction_ci95"]
    # exact interval: the tails at the endpoints are each 2.5%
    assert stats.binom.sf(3, 5, lo) == pytest.approx(0.025, rel=1e-9)
    assert stats.binom.cdf(4, 5, hi) == pytest.approx(0.025, rel=1e-9)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"seeds": (0, 1, 2), "min_passing": 4}, r"min_passing.*\[1, 3\]"),
        ({"seeds": (0, 1, 2), "min_passing": 0}, r"min_passing.*\[1, 3\]"),
        ({"seeds": (0, 1, 2), "min_passing": 2.0}, "min_passing"),
        ({"seeds": (0, 1, 2)}, "min_passing"),
        ({"seeds": (), "min_passing": 1}, "at least one seed"),
    ],
)
def test_k_of_n_refuses_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        at_least_k_of_n(_failing_on(set()), params)


def test_clopper_pearson_endpoints_and_edges():
    for x, n in [(1, 20), (2, 20), (0, 20), (20, 20), (7, 11)]:
        lo, hi = clopper_pearson(x, n)
        assert 0 <= lo <= x / n <= hi <= 1
        if x > 0:
            assert stats.binom.sf(x - 1, n, lo) == pytest.approx(0.025, rel=1e-8)
        else:
            assert lo == 0
        if x < n:
            assert stats.binom.cdf(x, n, hi) == pytest.approx(0.025, rel=1e-8)
        else:
            assert hi == 1
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(3, 2)
    with pytest.raises(ValueError, match="level"):
        clopper_pearson(1, 2, level=1.5)


@given(n=st.integers(1, 12), data=st.data(), p=st.floats(0, 1))
def test_false_refutation_probability_is_the_binomial_sum(n, data, p):
    k = data.draw(st.integers(1, n))
    q = 1 - p
    direct = sum(math.comb(n, j) * q**j * p ** (n - j) for j in range(k))
    assert false_refutation_probability(n, k, p) == pytest.approx(direct, abs=1e-12)


def test_false_refutation_probability_refuses_bad_input():
    with pytest.raises(ValueError, match="k must be"):
        false_refutation_probability(5, 6, 0.1)
    with pytest.raises(ValueError, match="fail_rate"):
        false_refutation_probability(5, 3, -0.1)
    with pytest.raises(ValueError, match="n must be"):
        false_refutation_probability(0, 1, 0.1)


def test_deep_two_stage_is_a_three_of_five_block_claim_whose_rate_is_recorded():
    from proofs_numeric import train_deep_two_stage as deep

    assert deep.FULL["seeds"] == tuple(range(34)) and deep.FULL["min_passing"] == deep.FULL_MIN_PASSING == 28
    assert k_of_n_power(34, 28) == pytest.approx(0.921, abs=5e-4)
    assert false_refutation_probability(34, 28, 0.10) < 0.05
    assert deep.MIN_PASSING == 3 and deep.BLOCK_SEEDS == 5  # the explore block
    assert deep.seed_block({"seed": 7}) == {"seeds": (7, 8, 9, 10, 11), "min_passing": 3}
    if not CALIBRATION_JSON.exists():
        pytest.skip("benchmarks/results/calibration.json not present")
    rates = json.loads(CALIBRATION_JSON.read_text()).get("failure_rates", {})
    for tier in ("default", "full"):
        e = rates[f"train.deep-4x4-two-stage[{tier}]"]
        assert e["seeds"] == list(RATE_SEEDS)
        n_fail = len(e["failing_seeds"])
        assert e["failure_ci95_clopper_pearson"] == pytest.approx(clopper_pearson(n_fail, len(RATE_SEEDS)))
        p = false_refutation_probability(5, 3, e["failure_fraction"])
        assert e["false_refutation_probability"] == pytest.approx(p)
        assert p < 0.01  # the block rule rarely refutes a claim holding at the measured rate


def test_over_seeds_statistics_skip_a_seed_without_the_value_and_the_deep_claim_records_nan():
    """A seed without a value (NaN: deep-4x4's stage 2 not reached within the budget) is skipped by the block's
    mean and t-interval and counted, instead of crashing the whole --full check (found by the --full run: seeds
    19 and 30 of 0-33 have no stage-2 ratio)."""
    from proofs_numeric import train_deep_two_stage as deep
    from theorycheck.analysis.stats import StageBoundaries

    def one(params, inject=None):
        s = params["seed"]
        return compare_greater(s + 1.0, 0.0, details={"stat": math.nan if s == 2 else 2.0 * s})

    res = over_seeds(one, {"seeds": (0, 1, 2, 3)}, statistics=("stat",))
    assert res.passed
    assert math.isnan(res.details["stat_per_seed"][2]) and res.details["stat_n_finite"] == 3
    assert res.details["stat_mean"] == pytest.approx(np.mean([0.0, 2.0, 6.0]))
    assert res.details["stat_ci95"] == pytest.approx(_t_ci([0.0, 2.0, 6.0]))
    full = over_seeds(one, {"seeds": (0, 1, 3)}, statistics=("stat",))
    assert "stat_n_finite" not in full.details  # unchanged when every seed has the value

    st = StageBoundaries(stage1_end=350, stage2_start=None, plateau_V=1.0, initial_KQ=1.0, rule="test")
    (missing,) = deep._part2(st, 30, deep.MIN_STAGE2_OVER_EARLY)
    assert not missing.passed and math.isnan(missing.details["stage2_over_early"])


def _t_ci(vals):
    x = np.asarray(vals)
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return [x.mean() - half, x.mean() + half]
