"""Stage 1 in exact rational arithmetic: the minimum-norm ``W_0 = C Sigma^+`` and the SPEC §4.2 constants.

Route and proof: :mod:`theorycheck.solvers._rational` (the shared exact core, SPEC §4.0, §4.2).
"""

from __future__ import annotations

from fractions import Fraction

from ...models import Masking, TopicModel, check_models
from .._rational import (
    RationalMatrix,
    RationalOptimum,
    _check_small,
    _eye,
    _loss,
    _stage1_parts,
    _sub,
    moments_exact,
    rational_masking,
    rational_result,
)

__all__ = ["rational_value_optimum", "rational_value_constants", "rational_value_result"]


def rational_value_optimum(tm: TopicModel, mk: Masking) -> RationalOptimum:
    """Exact minimum-norm stage-1 value matrix ``W_0 = C Sigma^+`` (SPEC §4.0, §4.2; proof in the module docstring).

    ``checks``: ``solves`` (``W_0 Sigma = C``: a minimiser), ``rows_in_range`` (``W_0 (I - P) = 0``:
    the minimum-norm one) and ``row0_zero``. ``mk.p_m > 0`` is required (the loss averages over
    selected positions).
    """
    _check_small(tm, mk, "rational_value_optimum")
    mk.require_masked_positions("the stage-1 value problem")
    Sigma, C = moments_exact(tm, mk)
    _, P, W, rank = _stage1_parts(Sigma, C)
    I_P = RationalMatrix(_sub(_eye(tm.V1), P.rows))
    checks = {
        "solves": (W @ Sigma - C).is_zero(),
        "rows_in_range": (W @ I_P).is_zero(),
        "row0_zero": all(x == 0 for x in W.rows[0]),
    }
    return RationalOptimum(W, _loss(W, Sigma, C, Fraction(1)), rank, checks)


def rational_value_constants(tm: TopicModel, mk: Masking) -> tuple[Fraction, Fraction, Fraction, str]:
    """SPEC §4.2 closed-form ``(A, B0, gamma, case)`` in exact arithmetic (``reg = 0``).

    Informative case: ``B0 = -[r(a+r) + T v q^2] / (a v T [(a+r)^2 + T v q^2])``, ``A = B0 + 1/(a v)``,
    ``gamma = q (T v B0 + 1/a)/(a + r)``. Constant context (``tau = T``, ``T = 1`` or ``a = 0``):
    ``A = B0 = (a+r)/((T v)^2 ||mu||^2)``, ``gamma = q/(T v ||mu||^2)``, ``||mu||^2 = (a+r)^2/(T v) + q^2``
    (``B0`` reported as 0 when ``T = 1``).
    """
    check_models(tm, mk)
    e = rational_masking(mk)
    a, r, q = e["a"], e["r"], e["q"]
    T, v = tm.T, tm.v
    n = T * v
    if a == 0 or T == 1 or tm.tau == T:
        mu2 = (a + r) ** 2 / n + q * q
        A = (a + r) / (n * n * mu2)
        return A, (A if T > 1 else Fraction(0)), q / (n * mu2), "constant-context"
    B0 = -(r * (a + r) + n * q * q) / (a * n * ((a + r) ** 2 + n * q * q))
    return B0 + 1 / (a * v), B0, q * (n * B0 + 1 / a) / (a + r), "informative"


def rational_value_result(tm: TopicModel, mk: Masking):
    """:func:`rational_value_optimum` as a ``SolveResult`` (``method="rational"``; ``x`` correctly rounded)."""
    return rational_result(rational_value_optimum(tm, mk), "rational")
