"""Seeds and threshold rules of the EMPIRICAL claims (not a claim module: leading underscore).

Protocol (issue 16, item 4). Every EMPIRICAL claim is *judged* on :data:`JUDGED_SEEDS` under
``theorycheck verify --full`` (the default tier judges ``seed = 0`` only, or one run for the
deterministic claims) and every threshold it fits is *calibrated* on :data:`CALIBRATION_SEEDS`,
which are never judged. ``benchmarks/calibrate_empirical.py`` runs each claim's statistic on the
calibration seeds, applies the rule named here and writes ``benchmarks/results/calibration.json``;
the claims hold the resulting thresholds as constants and their docstrings quote the calibration
values. ``tests/test_empirical_seeds.py`` checks that the two seed sets are disjoint.

Rules (one per kind of threshold; issue 25 item 4: a threshold comes from the calibration seeds'
spread, never from a fixed fraction of the measured value):

- :func:`prediction_lower` ("beat the calibration spread"): for a statistic that must exceed a
  value, the threshold is the one-sided 99% lower prediction bound of one new seed,
  ``mean - k SD`` over the ``n`` calibration seeds with ``k = t_{0.99, n-1} sqrt(1 + 1/n)``
  (:func:`prediction_k`; ``k = 4.10`` for ``n = 5``), on the log scale for ratios and growth
  factors (positive, multiplicative statistics) and on the linear scale for bounded scores, rounded
  down to 3 significant digits. When the bound does not beat the null value (no preference, no
  growth) the threshold is the null itself (the claim is the null comparison) and the claim writes
  the reason.
- :func:`prediction_deviation` ("within x%"): for a statistic that must be close to a reference,
  the relative tolerance is the larger distance to the reference of ``mean +- k SD`` (the two-sided
  99% prediction interval's ends, ``k`` as above) divided by the reference, rounded up to 2
  significant digits.
- ``"definition"``: thresholds that *define* the claim's words (a strict inequality, a CI above 0,
  "stage 2 = 10x growth", "near its init = within 50%", a convergence tolerance) are not fitted;
  the calibration seeds are run to show they pass and their values are recorded.

Floor: a fitted "exceed" threshold is never below :data:`FLOOR_FRACTION` = 2/3 of the smallest
calibration value unless the claim's ``CALIBRATION`` entry carries a written reason (a fourth
field); ``tests/test_empirical_seeds.py`` enforces it. (The former rules ``halfway``, null + half
the smallest excess, and ``twice_max_deviation`` are kept for the record: ``halfway`` put the
compensation block-score threshold at 0.48 against calibration values 0.971-0.976.)

Fraction claims. A per-seed statement that fails on some seeds (an SGD spike, say) is restated as
"holds on at least ``k`` of ``n`` seeds" and judged by :func:`at_least_k_of_n`. Its failure rate is
measured on :data:`RATE_SEEDS` (neither judged nor calibration; ``calibrate_empirical.py --rate``),
reported with a Clopper-Pearson interval (:func:`clopper_pearson`), and ``n``, ``k`` are chosen so
that :func:`false_refutation_probability` (a correct claim refuted by one block) is small at that
rate *and* the rule has power: :func:`k_of_n_power`, the probability of refuting when a seed fails
:data:`POWER_FAIL_RATE` = 30% of the time, is at least :data:`MIN_POWER_FULL` = 0.9 under
``verify --full`` (``tests/test_empirical_seeds.py``); the claim's docstring states both numbers.

All-seeds claims. A claim judged by :func:`~theorycheck.report.claims.by_seed` (every seed must pass) is the
``n``-of-``n`` rule, power ``1 - (1 - POWER_FAIL_RATE)^n``: 0.832 on five seeds, below 0.9, so
:data:`JUDGED_SEEDS` holds seven seeds (0-6), power :data:`ALL_SEEDS_POWER` = 0.918 (stated in each claim's
docstring; ``tests/test_empirical_seeds.py`` recomputes every rule's power from the binomial sum).
"""

from __future__ import annotations

import math

import numpy as np

from theorycheck.report.claims import ClaimResult, over_seeds

__all__ = [
    "CALIBRATION_SEEDS",
    "JUDGED_SEEDS",
    "RATE_SEEDS",
    "at_least_k_of_n",
    "clopper_pearson",
    "false_refutation_probability",
    "halfway",
    "twice_max_deviation",
    "FLOOR_FRACTION",
    "PREDICTION_LEVEL",
    "POWER_FAIL_RATE",
    "MIN_POWER_FULL",
    "prediction_k",
    "prediction_lower",
    "prediction_deviation",
    "k_of_n_power",
    "ALL_SEEDS_POWER",
]

#: Seeds the EMPIRICAL claims are judged on (``verify --full``; the default tier uses seed 0). Seven, not five:
#: a claim judged on every seed (:func:`~theorycheck.report.claims.by_seed`) is the ``n``-of-``n`` rule, whose power
#: ``1 - 0.7^n`` (:func:`k_of_n_power`) is 0.832 for ``n = 5`` and :data:`ALL_SEEDS_POWER` = 0.918 for ``n = 7``.
JUDGED_SEEDS = (0, 1, 2, 3, 4, 5, 6)

#: Seeds the thresholds are calibrated on (``benchmarks/calibrate_empirical.py``); never judged.
CALIBRATION_SEEDS = (100, 101, 102, 103, 104)


def _round_sig(x: float, digits: int, up: bool) -> float:
    """``x >= 0`` rounded up (``up``) or down to ``digits`` significant digits."""
    if x <= 0 or not math.isfinite(x):
        return x
    q = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    n = math.ceil(x / q - 1e-9) if up else math.floor(x / q + 1e-9)
    return float(f"{n * q:.{digits + 6}g}")


def halfway(values, null: float) -> float:
    """``null + (min(values) - null) / 2``, the excess rounded down to 2 significant digits.

    >>> halfway([1.47, 2.16, 1.91, 1.37, 2.30], 1.0)
    1.18
    """
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"values must be finite and non-empty, got {values!r}")
    excess = min(vals) - null
    if excess <= 0:
        raise ValueError(f"halfway: the smallest calibration value {min(vals)} does not beat the null {null}")
    return float(f"{null + _round_sig(excess / 2, 2, up=False):.12g}")


def twice_max_deviation(values, reference: float = 1.0) -> float:
    """``2 max |v / reference - 1|`` over ``values``, rounded up to 1 significant digit.

    >>> twice_max_deviation([1.041, 1.036, 0.98])
    0.09
    """
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"values must be finite and non-empty, got {values!r}")
    if reference == 0:
        raise ValueError("reference must be nonzero")
    dev = max(abs(v / reference - 1.0) for v in vals)
    return _round_sig(2.0 * dev, 1, up=True) if dev > 0 else 0.0


#: One-sided level of :func:`prediction_lower` (two-sided interval of :func:`prediction_deviation`: the same ``k``).
PREDICTION_LEVEL = 0.99

#: A fitted "exceed" threshold is at least this fraction of the smallest calibration value (else a written reason).
FLOOR_FRACTION = 2.0 / 3.0

#: The per-seed failure rate at which a k-of-n rule's power is stated, and the power required under ``--full``.
POWER_FAIL_RATE = 0.3
MIN_POWER_FULL = 0.9


def prediction_k(n: int, level: float = PREDICTION_LEVEL) -> float:
    """``k = t_{level, n-1} sqrt(1 + 1/n)``: ``mean - k SD`` of ``n`` normal values is a one-sided ``level``
    lower prediction bound of one more value.

    >>> round(prediction_k(5), 4)
    4.1046
    """
    from scipy import stats

    n = _check_count("n", n, low=2)
    return float(stats.t.ppf(level, n - 1) * math.sqrt(1.0 + 1.0 / n))


def _finite_values(values, name: str, need_positive: bool = False) -> np.ndarray:
    x = np.asarray([float(v) for v in values], dtype=float)
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: values must be finite, at least two, got {values!r}")
    if need_positive and not np.all(x > 0):
        raise ValueError(f"{name}: values must be > 0 on the log scale, got {values!r}")
    return x


def prediction_lower(values, null: float, *, log: bool = False, level: float = PREDICTION_LEVEL) -> float:
    """``max(null, mean - k SD)`` (:func:`prediction_k`), on the log scale when ``log`` (``exp`` of the
    bound of the logs), rounded down to 3 significant digits; ``null`` when the bound does not beat it.

    >>> prediction_lower([0.973178, 0.973957, 0.973043, 0.971378, 0.971762], 0.0)
    0.968
    >>> prediction_lower([2.99805, 3.19185, 3.00158, 3.06296, 2.87883], 1.0, log=True)
    2.59
    """
    x = _finite_values(values, "prediction_lower", need_positive=log)
    y = np.log(x) if log else x
    bound = float(y.mean() - prediction_k(x.size, level) * y.std(ddof=1))
    bound = math.exp(bound) if log else bound
    if not bound > null:
        return float(null)
    return _round_sig(bound, 3, up=False) if bound > 0 else bound


def prediction_deviation(values, reference: float = 1.0, *, level: float = PREDICTION_LEVEL) -> float:
    """``max |mean +- k SD - reference| / |reference|`` over the values divided by ``reference``
    (:func:`prediction_k` with the one-sided ``level``), rounded up to 2 significant digits.

    >>> prediction_deviation([1.0412, 1.04112, 1.04115, 1.04115, 1.04115])
    0.042
    """
    if reference == 0:
        raise ValueError("reference must be nonzero")
    x = _finite_values(values, "prediction_deviation") / reference
    half = prediction_k(x.size, level) * x.std(ddof=1)
    dev = max(abs(x.mean() + half - 1.0), abs(x.mean() - half - 1.0))
    return _round_sig(dev, 2, up=True)


def k_of_n_power(n: int, k: int, fail_rate: float = POWER_FAIL_RATE) -> float:
    """Power of the ``k``-of-``n`` rule: the probability that it refutes when each seed fails with
    probability ``fail_rate`` (default 30%), ``P[Bin(n, 1 - fail_rate) < k]``
    (:func:`false_refutation_probability` read as a power).

    >>> round(k_of_n_power(5, 3), 4)
    0.1631
    >>> round(k_of_n_power(30, 25), 3)
    0.923
    """
    return false_refutation_probability(n, k, fail_rate)


#: Power of the all-seeds rule on :data:`JUDGED_SEEDS` (``1 - 0.7^7`` = 0.91765, to 3 digits as the claims state it).
ALL_SEEDS_POWER = 0.918


#: Seeds on which the failure rate of a per-seed statement is measured (``benchmarks/calibrate_empirical.py
#: --rate``); never judged, disjoint from :data:`JUDGED_SEEDS` and :data:`CALIBRATION_SEEDS`.
RATE_SEEDS = tuple(range(1000, 1020))


def clopper_pearson(successes: int, n: int, level: float = 0.95) -> list:
    """Exact (Clopper-Pearson) ``level`` interval ``[low, high]`` of a binomial proportion ``successes / n``.

    ``low = Beta_{(1-level)/2}(x, n-x+1)`` (0 if x = 0), ``high = Beta_{(1+level)/2}(x+1, n-x)`` (1 if x = n).

    >>> [round(b, 4) for b in clopper_pearson(1, 21)]
    [0.0012, 0.2382]
    """
    from scipy import stats

    n = _check_count("n", n, low=1)
    x = _check_count("successes", successes, low=0)
    if x > n:
        raise ValueError(f"successes must be in [0, n = {n}], got {successes!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    ci = stats.binomtest(x, n).proportion_ci(confidence_level=level, method="exact")
    return [float(ci.low), float(ci.high)]


def false_refutation_probability(n: int, k: int, fail_rate: float) -> float:
    """Probability that a block of ``n`` independent seeds has fewer than ``k`` passing seeds when each
    seed fails with probability ``fail_rate``: ``P[Bin(n, 1 - fail_rate) < k] = sum_{j < k} C(n, j) q^j (1-q)^(n-j)``
    with ``q = 1 - fail_rate``, i.e. the chance that the ``k``-of-``n`` rule refutes a claim that holds
    at that per-seed rate.

    >>> round(false_refutation_probability(5, 4, 0.05), 6)
    0.022593
    """
    from scipy import stats

    n = _check_count("n", n, low=1)
    k = _check_count("k", k, low=1)
    if k > n:
        raise ValueError(f"k must be in [1, n = {n}], got {k!r}")
    if not 0 <= fail_rate <= 1:
        raise ValueError(f"fail_rate must be in [0, 1], got {fail_rate!r}")
    return float(stats.binom.cdf(k - 1, n, 1.0 - fail_rate))


def _check_count(name: str, value, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def at_least_k_of_n(check_one, params: dict, inject=None, *, statistics=()) -> ClaimResult:
    """Judge a fraction claim "the per-seed statement holds on at least ``k`` of ``n`` seeds".

    ``params["seeds"]`` lists the ``n`` seeds, ``params["min_passing"]`` is ``k`` (``1 <= k <= n``);
    ``check_one(dict(params, seed=s), inject)`` checks one seed (as in :func:`over_seeds`, whose
    fraction, per-seed values and t-intervals are kept in ``details``). Passes iff at least ``k``
    seeds pass. The deciding seed is the ``k``-th best (seeds ordered by pass, then relative margin):
    its expected and measured values, margin and label are reported, so ``margin >= 0`` iff the
    claim holds. ``details`` add ``min_passing``, ``n_passed``, ``deciding_seed``, the worst seed and
    its margin, and ``fraction_ci95``, the Clopper-Pearson interval (:func:`clopper_pearson`) of the
    per-seed pass rate.
    """
    seeds = [int(s) for s in params.get("seeds", ())]
    if not seeds:
        raise ValueError("params['seeds'] must list at least one seed")
    k = params.get("min_passing")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(seeds):
        raise ValueError(f"params['min_passing'] must be an integer in [1, {len(seeds)}] (the seeds given), got {k!r}")
    results: list[ClaimResult] = []

    def capture(p, inj):
        results.append(check_one(p, inj))
        return results[-1]

    agg = over_seeds(
        capture, {key: v for key, v in params.items() if key != "min_passing"}, inject, statistics=statistics
    )
    order = sorted(range(len(seeds)), key=lambda i: (results[i].passed, _rel_margin(results[i])), reverse=True)
    dec, worst = results[order[k - 1]], results[order[-1]]
    n_passed = sum(r.passed for r in results)
    details = dict(agg.details)
    details.update(
        min_passing=int(k),
        n_passed=int(n_passed),
        fraction_ci95=clopper_pearson(n_passed, len(seeds)),
        deciding_seed=seeds[order[k - 1]],
        worst_seed=seeds[order[-1]],
        worst_margin=float(worst.margin),
        worst_label=worst.label,
        relative_margin=_rel_margin(dec),
    )
    rank = f"{_ordinal(k)} best of {len(seeds)} seeds, >= {k} must pass"
    label = f"{dec.label} ({rank}: seed {seeds[order[k - 1]]})" if dec.label else rank
    return ClaimResult(
        passed=n_passed >= k and dec.passed,
        expected=dec.expected,
        measured=dec.measured,
        margin=dec.margin,
        tolerance=dec.tolerance,
        details=details,
        data=agg.data,
        label=label,
    )


def _ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ..., ``11th``, ``12th``, ``13th``, ``21st``."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _rel_margin(r: ClaimResult) -> float:
    """The scale-free margin ``compare_all`` records, else the margin itself."""
    m = r.details.get("relative_margin", r.margin)
    try:
        m = float(m)
    except (TypeError, ValueError):
        return -math.inf
    return -math.inf if math.isnan(m) else m
