"""Shared helper of the gradient claims: a :class:`theorycheck.diagnostics.GradientCheck` as a
ClaimResult (SPEC §3.1, §4.3). Not a claim."""

from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar

from theorycheck.diagnostics import check_gradient
from theorycheck.report.claims import compare_all, compare_close, compare_greater

#: the directional finite-difference test: ``|fd - <g, D>| <= RTOL (|fd| + |<g, D>|) + ATOL``
RTOL, ATOL = 1e-6, 1e-9
#: a correct gradient leaves a first-order Taylor remainder of slope 2; a wrong one slope 1
MIN_SLOPE = 1.8
#: The falsifiers' relative error of the finite-difference reference (issue 25 item 6): 6e-6, a fixed number,
#: about 3 x the difference test's ``RTOL (|fd| + |<g, D>|) ~ 2e-6 |fd|`` (a loosened RTOL lets it pass). A gradient
#: wrong by that much would also fail the Taylor-slope test, which has no tolerance to size against; an error
#: of the reference leaves the slope test alone.
FALSIFIER_FD_REL = 6e-6
_FD_REL: ContextVar[float] = ContextVar("fd_rel", default=0.0)


@contextmanager
def fd_error(rel: float):
    """Inside the block, :func:`gradient_subchecks` compares the gradient with finite differences scaled by
    ``1 + rel`` (the falsifiers' injection; 0 leaves the check unchanged)."""
    token = _FD_REL.set(float(rel))
    try:
        yield
    finally:
        _FD_REL.reset(token)


def gradient_subchecks(f, x, grad, label, seed=0, n_directions=3, h=1e-5):
    """Sub-checks of one gradient: the worst normalised difference ``err / (RTOL (|fd| + |g.D|) + ATOL)``
    must be ``<= 1`` and the smallest measurable Taylor slope ``>= MIN_SLOPE``."""
    gc = check_gradient(f, x, grad, n_directions=n_directions, h=h, rtol=RTOL, atol=ATOL, seed=seed)
    fd, errors, rel = gc.fd, gc.errors, _FD_REL.get()
    if rel:  # the falsifiers' wrong reference (fd_error)
        fd = [a * (1.0 + rel) for a in gc.fd]
        errors = [abs(a - b) for a, b in zip(fd, gc.analytic)]
    ratios = [e / (RTOL * (abs(a) + abs(b)) + ATOL) for e, a, b in zip(errors, fd, gc.analytic)]
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


__all__ = ["RTOL", "ATOL", "MIN_SLOPE", "FALSIFIER_FD_REL", "fd_error", "gradient_subchecks", "combine"]
