"""Exact-arithmetic helpers of the certified problem families (SPEC §4.6): outward rounding and moments.

Certificates are computed in :class:`fractions.Fraction` and rounded outward to floats at the end, so
``lower <= f* <= upper`` holds for the exact numbers, not only up to floating-point error.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["round_down", "round_up", "sqrt_up", "exact_theta_moment"]


def round_down(x: Fraction) -> float:
    """The largest float ``<= x``."""
    f = float(x)
    return f if Fraction(f) <= x else float(np.nextafter(f, -math.inf))


def round_up(x: Fraction) -> float:
    """The smallest float ``>= x``."""
    f = float(x)
    return f if Fraction(f) >= x else float(np.nextafter(f, math.inf))


def sqrt_up(x: Fraction) -> Fraction:
    """A rational ``s >= sqrt(x)`` for ``x >= 0`` (a float just above ``sqrt``, checked by squaring)."""
    if x < 0:
        raise ValueError(f"sqrt_up needs x >= 0, got {float(x)}")
    s = Fraction(float(np.nextafter(math.sqrt(float(x)), math.inf)))
    while s * s < x:
        s *= Fraction(1 + 2**-40)
    return s


def exact_theta_moment(tm) -> list[list[Fraction]]:
    """``E[theta theta^T]`` of the document law in exact rational arithmetic (SPEC §11.2).

    Uniform-``tau``: ``1/(tau T)`` on the diagonal, ``(tau - 1)/(tau T (T - 1))`` off it. Dirichlet
    (``alpha`` read as the floats stored): ``(alpha alpha^T + diag alpha) / (alpha_0 (alpha_0 + 1))``.
    """
    T = tm.T
    if tm.tau is not None:
        tau = tm.tau
        off = Fraction(tau - 1, tau * T * (T - 1)) if T > 1 else Fraction(0)
        return [[Fraction(1, tau * T) if i == j else off for j in range(T)] for i in range(T)]
    a = [Fraction(float(x)) for x in np.asarray(tm.concentration, dtype=float)]
    a0 = sum(a)
    den = a0 * (a0 + 1)
    return [[(a[i] * a[j] + (a[i] if i == j else 0)) / den for j in range(T)] for i in range(T)]
