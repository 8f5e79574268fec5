"""Shared helper of the gradient claims: a :class:`theorycheck.diagnostics.GradientCheck` as a
ClaimResult (SPEC §3.1, §4.3). Not a claim."""

from __future__ import annotations

import math

from theorycheck.diagnostics import check_gradient
from theorycheck.report.claims import compare_all, compare_close, compare_greater

#: the directional finite-difference test: ``|fd - <g, D>| <= RTOL (|fd| + |<g, D>|) + ATOL``
RTOL, ATOL = 1e-6, 1e-9
#: a correct gradient leaves a first-order Taylor remainder of slope 2; a wrong one slope 1
MIN_SLOPE = 1.8


def gradient_subchecks(f, x, grad, label, seed=0, n_directions=3, h=1e-5):
    """Sub-checks of one gradient: the worst normalised difference ``err / (RTOL (|fd| + |g.D|) + ATOL)``
    must be ``<= 1`` and the smallest measurable Taylor slope ``>= MIN_SLOPE``."""
    gc = check_gradient(f, x, grad, n_directions=n_directions, h=h, rtol=RTOL, atol=ATOL, seed=seed)
    ratios = [e / (RTOL * (abs(a) + abs(b)) + ATOL) for e, a, b in zip(gc.errors, gc.fd, gc.analytic)]
    worst = float(max(ratios))
    fd_label = f"{label}: finite differences within tolerance"
    subs = [compare_close(worst, 0.0, 1.0, label=fd_label, details={f"fd_ratio[{label}]": worst})]
    slopes = [s for s in gc.slopes if not math.isnan(s)]
    if slopes:
        slope_label = f"{label}: Taylor slope > {MIN_SLOPE}"
        subs.append(
            compare_greater(min(slopes), MIN_SLOPE, label=slope_label, details={f"taylor_slope[{label}]": min(slopes)})
        )
    return subs


def combine(subs):
    """All sub-checks, the report's worst one first (``compare_all``)."""
    return compare_all(subs)


__all__ = ["RTOL", "ATOL", "MIN_SLOPE", "gradient_subchecks", "combine"]
