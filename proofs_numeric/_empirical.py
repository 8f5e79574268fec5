"""Seeds and threshold rules of the EMPIRICAL claims (not a claim module: leading underscore).

Protocol (issue 16, item 4). Every EMPIRICAL claim is *judged* on :data:`JUDGED_SEEDS` under
``theorycheck verify --full`` (the default tier judges ``seed = 0`` only, or one run for the
deterministic claims) and every threshold it fits is *calibrated* on :data:`CALIBRATION_SEEDS`,
which are never judged. ``benchmarks/calibrate_empirical.py`` runs each claim's statistic on the
calibration seeds, applies the rule named here and writes ``benchmarks/results/calibration.json``;
the claims hold the resulting thresholds as constants and their docstrings quote the calibration
values. ``tests/test_empirical_seeds.py`` checks that the two seed sets are disjoint.

Rules (one per kind of threshold):

- :func:`halfway` ("beat the null"): for a statistic that must exceed a null value ``v0`` (a ratio
  of 1 = no preference, a growth of 1 = no growth, an R^2 of 0 = no block structure), the threshold
  is ``v0 + (min over calibration seeds - v0) / 2``, rounded towards ``v0`` to two significant
  digits of the excess: half of the smallest calibration excess is kept as margin for unseen seeds.
- :func:`twice_max_deviation` ("within x%"): for a statistic that must be close to a reference
  (``K_eff / K*``, a measured / predicted rate, a dev loss / the official value), the relative
  tolerance is ``2 max over calibration seeds |value / reference - 1|``, rounded up to one
  significant digit.
- ``"definition"``: thresholds that *define* the claim's words (a strict inequality, a CI above 0,
  "stage 2 = 10x growth", "near its init = within 50%", a convergence tolerance) are not fitted;
  the calibration seeds are run to show they pass and their values are recorded.
"""

from __future__ import annotations

import math

__all__ = ["CALIBRATION_SEEDS", "JUDGED_SEEDS", "halfway", "twice_max_deviation"]

#: Seeds the EMPIRICAL claims are judged on (``verify --full``; the default tier uses seed 0).
JUDGED_SEEDS = (0, 1, 2, 3, 4)

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
