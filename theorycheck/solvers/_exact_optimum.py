"""Exact optimal values of the stage-1 and tied-embedding problems on any topic model (SPEC §4.0-§4.2, §11.3, §11.5).

Everything is exact rational arithmetic (:class:`fractions.Fraction`); the numbers read are the model's stored
``phi`` (each float taken as the exact binary number it is; the paper model's ``phi = 1/v`` exactly), the
Dirichlet concentration likewise, and the masking probabilities and ``reg`` read as the decimals they print as
(``Fraction(repr(p))``, as in :mod:`._rational`). :func:`round_outward` turns an exact value into the two floats
around it: a certificate built from them encloses the exact optimum (issue 36 item 1), never a float used as
both ends.

**Stage 1** (:func:`exact_stage1_value`; ``min_W E||W m_S - e_x||^2 + reg ||W||_F^2``). With ``B = [Phi, u, e_0]``
(``V1 x (T + 2)``: the topics' word laws, the uniform word law, the [MASK] token) every document has
``p_S = B c'`` and ``m_S = B c`` with ``c' = (theta, 0, 0)``, ``c = (a theta, r, q)``, so
``Sigma = B M B^T`` and ``C = E[p m^T] = B N B^T`` with ``M = E[c c^T]``, ``N = E[c' c^T]``. Keep the
independent columns ``B'`` of ``B`` (the pivots of the exact ``G = B^T B``, whose null space is ``B``'s) and
write ``B = B' R``; then, with ``M' = R M R^T``, ``N' = R N R^T``, ``G' = B'^T B'`` (all ``k x k``, ``k <= T + 2``):

- ``reg = 0``: ``W B'`` ranges over all matrices (``B'`` has full column rank), so
  ``min E||W m - p||^2 = E||p||^2 - tr(N' M'^+ N'^T G')`` and ``f* = 1 - tr(N' M'^+ N'^T G')``
  (``range(N'^T) <= range(M')``: a direction ``z`` with ``M' z = 0`` has ``c~^T z = 0`` almost surely);
- ``reg > 0``: ``f* = 1 - tr(C H^-1 C^T)``, ``H = Sigma + reg I``, and ``H^-1 B' = B' (M' G' + reg I)^-1``
  (push-through: ``H B' X = B' (M' G' + reg I) X``), so ``f* = 1 - tr(N' G' X N'^T G')`` with
  ``X = (M' G' + reg I)^-1`` (``M' G'`` has non-negative eigenvalues).

The paper's model (any ``T``) uses the block form instead (SPEC §4.2, :mod:`theorycheck.problems._value_block`):
by the topic and word symmetries a minimiser is block-constant, ``f(x) = x^T Q x - 2 b^T x + 1`` on
``x = (A, B0, gamma)``, and ``f* = 1 - b^T Q^+ b`` (3 x 3).

**Tied-embedding Gram** (:func:`exact_gram_bounds`; ``min L(G)`` over PSD ``G``). A restriction of stage 1 at
``reg = 0``: ``f*_gram >= f*_lsq``. An exact PSD point: with a single document law (``tau = T``, or ``T = 1``)
``G = p p^T / (p^T m)`` (rank 1, ``p^T m = a ||p||^2 + r/n > 0``) solves ``G m = p``, so ``f*_gram = f*_lsq``;
otherwise ``G = Phi K Phi^T`` with ``K = (a F + (r/n) 1 1^T)^+`` PSD (``F = Phi^T Phi``). Then
``G m_theta - p_theta = Phi E theta`` with ``E = K (a F + (r/n) s 1^T) - I`` (``s`` the exact row sums of
``phi``: 1 for the paper model, ``1 +- ulp`` for a stored one), so ``L(G) = 1 - tr(F E[theta theta^T]) +
tr(E^T F E E[theta theta^T])`` exactly: the upper bound, and ``rank G = rank(K F K)``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from ..models import GeneralTopicModel, Masking, TopicModel
from ._rational import RationalMatrix, _inverse, _rref, exact_pinv, rational_masking

__all__ = ["round_outward", "exact_stage1_value", "exact_gram_bounds", "GramBounds", "EXACT_DATA"]

#: How the exact values read their data (for certificates' ``method`` strings).
EXACT_DATA = "exact rationals: stored phi as exact binary numbers, masking and reg as decimals"

Mat = list  # list of lists of Fraction


def round_outward(x: Fraction) -> tuple[float, float]:
    """``(lo, hi)``: the largest float ``<= x`` and the smallest float ``>= x`` (equal iff ``x`` is a float)."""
    f = float(x)
    lo = f if Fraction(f) <= x else math.nextafter(f, -math.inf)
    hi = f if Fraction(f) >= x else math.nextafter(f, math.inf)
    return lo, hi


# =============================================================================== small exact matrices
def _mm(A: Mat, B: Mat) -> Mat:
    Bt = list(zip(*B))
    return [[sum((x * y for x, y in zip(row, col)), Fraction(0)) for col in Bt] for row in A]


def _t(A: Mat) -> Mat:
    return [list(c) for c in zip(*A)]


def _trace(A: Mat) -> Fraction:
    return sum((A[i][i] for i in range(len(A))), Fraction(0))


def _pinv(A: Mat) -> Mat:
    return [list(r) for r in exact_pinv(RationalMatrix(tuple(tuple(r) for r in A))).rows]


def _rank(A: Mat) -> int:
    return len(_rref(tuple(tuple(r) for r in A))[1]) if A else 0


# =============================================================================== the model's exact data
def _dec(x) -> Fraction:
    return Fraction(repr(float(x)))


def _scaled(row) -> tuple[list[int], int]:
    """``row`` (floats) as integers over ``2^shift``, exactly."""
    fr = [Fraction(float(x)) for x in row]
    shift = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    return [f.numerator << (shift - (f.denominator.bit_length() - 1)) for f in fr], shift


def _phi_gram(g: GeneralTopicModel) -> tuple[Mat, list[Fraction]]:
    """``F = phi phi^T`` (``T x T``) and the row sums ``s`` of the stored ``phi``, exactly."""
    rows = [_scaled(r) for r in g.phi]
    T = len(rows)
    F = [[Fraction(0)] * T for _ in range(T)]
    for i in range(T):
        for j in range(i, T):
            (x, sx), (y, sy) = rows[i], rows[j]
            F[i][j] = F[j][i] = Fraction(sum(a * b for a, b in zip(x, y) if a and b), 1 << (sx + sy))
    s = [Fraction(sum(x), 1 << sx) for x, sx in rows]
    return F, s


def _theta_moments(tm) -> tuple[list[Fraction], Mat]:
    """``(E[theta], E[theta theta^T])`` of the document law, exactly (``GeneralTopicModel.theta_moments``)."""
    T = tm.T
    if tm.prior == "uniform-tau":
        tau = tm.tau
        off = Fraction(tau - 1, tau * T * (T - 1)) if T > 1 else Fraction(0)
        return [Fraction(1, T)] * T, [[Fraction(1, tau * T) if i == j else off for j in range(T)] for i in range(T)]
    al = [Fraction(float(x)) for x in tm.concentration]
    a0 = sum(al, Fraction(0))
    return [x / a0 for x in al], [[(x * y + (x if i == j else 0)) / (a0 * (a0 + 1)) for j, y in enumerate(al)]
                                  for i, x in enumerate(al)]  # fmt: skip


def _single_law(tm) -> bool:
    return tm.T == 1 or (tm.prior == "uniform-tau" and tm.tau == tm.T)


# =============================================================================== stage 1
def exact_stage1_value(tm: GeneralTopicModel, mk: Masking, reg: float = 0.0) -> Fraction:
    """Exact ``min_W E||W m_S - e_x||^2 + reg ||W||_F^2`` (module docstring; SPEC §4.0, §4.2, §11.3)."""
    e = rational_masking(mk)
    lam = _dec(reg)
    if lam < 0:
        raise ValueError(f"reg must be >= 0, got {reg!r}")
    return _stage1_route(tm, e, lam)


@functools.singledispatch
def _stage1_route(tm: GeneralTopicModel, e, lam) -> Fraction:
    """The route by model type (as :func:`~theorycheck.solvers.optimal_value_matrix`): any topic-word matrix."""
    return _generic_value(tm, e, lam)


@_stage1_route.register
def _(tm: TopicModel, e, lam) -> Fraction:
    """The paper model with ``T >= 2``: the block form (SPEC §4.2); ``T = 1`` has no off-diagonal block."""
    return _block_value(tm, e, lam) if tm.T >= 2 else _generic_value(tm, e, lam)


def _block_value(tm: TopicModel, e: dict, lam: Fraction) -> Fraction:
    """``1 - b^T Q^+ b`` of the paper model's block form (SPEC §4.2; :func:`problems._value_block.block_quadratic`)."""
    a, r, q = e["a"], e["r"], e["q"]
    T, v = tm.T, tm.v
    _, Mth = _theta_moments(tm)
    c = _trace(Mth) - Fraction(1, T)  # E||theta||^2 - 1/T
    e_d = [a, -a, Fraction(0)]
    beta = [r / T + a / T, a + r * (T - 1) / T - a / T, q]
    D = [T * v * v, T * v * (T - 1) * v, T * v]
    Q = [[v * T * beta[i] * beta[j] + v * c * e_d[i] * e_d[j] + (lam * D[i] if i == j else 0) for j in range(3)]
         for i in range(3)]  # fmt: skip
    b = [beta[i] + c * e_d[i] for i in range(3)]
    Qp = _pinv(Q)
    return 1 - sum((b[i] * Qp[i][j] * b[j] for i in range(3) for j in range(3)), Fraction(0))


@functools.singledispatch
def _exact_phi_gram(tm: GeneralTopicModel):
    """``(Phi Phi^T, Phi 1)`` in rationals (:func:`_phi_gram`: ``phi`` read exactly from its floats)."""
    return _phi_gram(tm)


@_exact_phi_gram.register
def _(tm: TopicModel):
    """The paper model: ``Phi Phi^T = I / v`` and row sums 1, exactly (``phi = 1/v`` on a topic's words)."""
    return [[Fraction(int(i == j), tm.v) for j in range(tm.T)] for i in range(tm.T)], [Fraction(1)] * tm.T


def _basis(tm: GeneralTopicModel, e: dict):
    """``(G, M, N)`` of the module docstring over ``B = [Phi, u, e_0]`` and ``(F, s, E theta theta^T)``."""
    F, s = _exact_phi_gram(tm)  # the paper model arrives here with T = 1 (the block form covers T >= 2)
    T, n = tm.T, tm.n_words
    Eth, Mth = _theta_moments(tm)
    a, r, q = e["a"], e["r"], e["q"]
    k = T + 2
    G = [[Fraction(0)] * k for _ in range(k)]
    for i in range(T):
        for j in range(T):
            G[i][j] = F[i][j]
        G[i][T] = G[T][i] = s[i] / n
    G[T][T], G[T + 1][T + 1] = Fraction(1, n), Fraction(1)
    # c = (a theta, r, q), c' = (theta, 0, 0): M = E[c c^T], N = E[c' c^T]
    M = [[Fraction(0)] * k for _ in range(k)]
    N = [[Fraction(0)] * k for _ in range(k)]
    for i in range(T):
        for j in range(T):
            M[i][j] = a * a * Mth[i][j]
            N[i][j] = a * Mth[i][j]
        M[i][T] = M[T][i] = a * r * Eth[i]
        M[i][T + 1] = M[T + 1][i] = a * q * Eth[i]
        N[i][T], N[i][T + 1] = r * Eth[i], q * Eth[i]
    M[T][T], M[T][T + 1], M[T + 1][T], M[T + 1][T + 1] = r * r, r * q, r * q, q * q
    return G, M, N, F, s, Mth


def _generic_value(tm: GeneralTopicModel, e: dict, lam: Fraction) -> Fraction:
    G, M, N, *_ = _basis(tm, e)
    R_full, piv = _rref(tuple(tuple(r) for r in G))
    R = [list(R_full[i]) for i in range(len(piv))]  # B = B[:, piv] R (null(G) = null(B))
    Rt = _t(R)
    Mp, Np = _mm(_mm(R, M), Rt), _mm(_mm(R, N), Rt)
    Gp = [[G[i][j] for j in piv] for i in piv]
    if lam == 0:
        inner = _pinv(Mp)
        return 1 - _trace(_mm(_mm(_mm(Np, inner), _t(Np)), Gp))
    shifted = tuple(tuple(x + (lam if i == j else 0) for j, x in enumerate(row)) for i, row in enumerate(_mm(Mp, Gp)))
    X = [list(r) for r in _inverse(shifted)]  # G has e_0's column: piv is never empty
    return 1 - _trace(_mm(_mm(_mm(_mm(Np, Gp), X), _t(Np)), Gp))


# =============================================================================== Gram
@dataclass(frozen=True)
class GramBounds:
    """``lower <= min_{G PSD} L(G) <= upper`` exactly; ``rank``: the rank of the exact PSD point attaining ``upper``."""

    lower: Fraction
    upper: Fraction
    rank: int


def exact_gram_bounds(tm: GeneralTopicModel, mk: Masking) -> GramBounds:
    """Exact bounds on the tied-embedding Gram optimum (module docstring; SPEC §4.1, §11.5). ``a > 0`` required."""
    mk.require_informative("exact_gram_bounds")
    e = rational_masking(mk)
    lower = exact_stage1_value(tm, mk, 0.0)
    if _single_law(tm):
        return GramBounds(lower, lower, 1)
    F, s = _exact_phi_gram(tm)
    T, n, a, r = tm.T, tm.n_words, e["a"], e["r"]
    _, Mth = _theta_moments(tm)
    K = _pinv([[a * F[i][j] + r / n for j in range(T)] for i in range(T)])
    A = [[a * F[i][j] + r / n * s[i] for j in range(T)] for i in range(T)]
    E = _mm(K, A)
    for i in range(T):
        E[i][i] -= 1
    purity = _trace(_mm(F, Mth))
    upper = 1 - purity + _trace(_mm(_mm(_mm(_t(E), F), E), Mth))
    if upper < lower:  # L(G) of a feasible point below the relaxation's minimum: a bug, never a bound
        raise ArithmeticError(f"exact_gram_bounds: L(G) = {float(upper)!r} < stage-1 minimum {float(lower)!r}")
    return GramBounds(lower, upper, _rank(_mm(_mm(K, F), K)))
