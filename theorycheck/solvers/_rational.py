"""Exact rational certificates of the stage-1 and embedding optima (SPEC §1.1, §2.1, §4.0, §4.1, §4.2).

Everything here is computed in exact rational arithmetic (:class:`fractions.Fraction`, Python
integers; no floating point anywhere before the final, correctly rounded conversion). The
masking probabilities are read as the decimal numbers they print as: ``Fraction(repr(p))``, so
``0.15 -> 3/20`` (the float ``0.15`` itself differs from 3/20 by about ``5.6e-18``).

Route (independent of the closed forms it certifies):

1. **Moments by enumeration** (SPEC §1.1, §2.1, §4.0). For every ``tau``-subset ``S`` of the topics,
   ``m_S = a p_S + r u + q e_0`` has three distinct entries (``rho = a/(tau v) + r/(T v)`` on the
   document's words, ``eta = r/(T v)`` on the other words, ``q`` on [MASK]). With ``L`` the least
   common denominator, ``z_S = L m_S`` is an integer vector and
   ``Sigma = (1/(n L^2)) sum_S z_S z_S^T``, ``C = (1/(n tau v L)) sum_S 1_{W_S} z_S^T``
   (``n = C(T, tau)``), accumulated in Python integers.
2. **Exact pseudo-inverse** by a full-rank factorisation (:func:`exact_pinv`).
3. **Stage 1** (SPEC §4.0, §4.2): the minimum-norm minimiser of ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1``
   is ``W_0 = C Sigma^+``. Proof: every minimiser solves ``W Sigma = C`` (the gradient is
   ``2 (W Sigma - C)``); ``W_0 Sigma = C P`` with ``P = Sigma Sigma^+``, which equals ``C`` because the
   rows of ``C`` lie in ``range(Sigma)`` (checked exactly, ``C (I - P) = 0``). Any other solution is
   ``W_0 + Z`` with ``Z Sigma = 0``; the rows of ``Z`` lie in ``null(Sigma)``, those of ``W_0`` in
   ``range(Sigma^+) = range(Sigma)``, so ``||W_0 + Z||_F^2 = ||W_0||_F^2 + ||Z||_F^2``.
4. **Tied embedding** (SPEC §4.1 D3, D4): the minimum-trace PSD ``G`` with ``G Sigma = C`` is
   ``G* = X A^+ X^T`` with ``X = C Sigma^+`` and ``A = P X`` (:func:`rational_embedding_gram`).

The closed forms' constants are also written here in rational arithmetic from SPEC §4.2 and §4.1 D3/D4
(:func:`rational_value_constants`, :func:`rational_gram_constants`) so that a claim can compare them
with the enumerated optimum with zero error. Small sizes only: ``V1 <= MAX_V1`` and at most
``MAX_SETS`` topic sets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..models import Masking, TopicModel, check_models, require_symmetric
from ._certify import NOT_CERTIFIED, SUCCESS
from ._result import SolveResult

__all__ = [
    "MAX_V1",
    "MAX_SETS",
    "RationalMatrix",
    "RationalOptimum",
    "rational_masking",
    "rational_moments",
    "moments_exact",
    "exact_pinv",
    "is_psd_exact",
    "rational_block_matrix",
    "rational_result",
]

#: Largest vocabulary ``V1 = T v + 1`` accepted (exact elimination is O(V1^3) Fraction operations).
MAX_V1 = 41
#: Largest number of enumerated topic sets ``C(T, tau)``.
MAX_SETS = 500

Rows = tuple  # tuple of tuples of Fraction


# =============================================================================== exact matrices
@dataclass(frozen=True)
class RationalMatrix:
    """An exact matrix: ``rows`` is a tuple of equal-length tuples of :class:`~fractions.Fraction`.

    ``==`` is exact equality; :meth:`toarray` rounds each entry correctly to float64.
    """

    rows: Rows

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.rows), len(self.rows[0]) if self.rows else 0)

    def __getitem__(self, ij):
        i, j = ij
        return self.rows[i][j]

    def toarray(self) -> np.ndarray:
        """Float64 array, each entry the float nearest to the exact value (``float(Fraction)``)."""
        return np.array([[float(x) for x in row] for row in self.rows], dtype=np.float64).reshape(self.shape)

    def __array__(self, dtype=None, copy=None):
        arr = self.toarray()
        return arr if dtype is None else arr.astype(dtype)

    def __matmul__(self, other: RationalMatrix) -> RationalMatrix:
        return RationalMatrix(_mm(self.rows, other.rows))

    def __sub__(self, other: RationalMatrix) -> RationalMatrix:
        return RationalMatrix(_sub(self.rows, other.rows))

    @property
    def T(self) -> RationalMatrix:
        return RationalMatrix(_tr(self.rows))

    def trace(self) -> Fraction:
        return sum((self.rows[i][i] for i in range(min(self.shape))), Fraction(0))

    def is_zero(self) -> bool:
        return all(x == 0 for row in self.rows for x in row)

    def max_abs(self) -> Fraction:
        return max((abs(x) for row in self.rows for x in row), default=Fraction(0))


def _mm(A: Rows, B: Rows) -> Rows:
    Bt = _tr(B)
    return tuple(tuple(sum((x * y for x, y in zip(row, col) if x and y), Fraction(0)) for col in Bt) for row in A)


def _tr(A: Rows) -> Rows:
    return tuple(zip(*A)) if A else ()


def _sub(A: Rows, B: Rows) -> Rows:
    return tuple(tuple(x - y for x, y in zip(ra, rb)) for ra, rb in zip(A, B))


def _eye(n: int) -> Rows:
    return tuple(tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n))


def _rref(A: Rows) -> tuple[list[list[Fraction]], list[int]]:
    """Reduced row echelon form (exact Gauss-Jordan) and the pivot columns."""
    R = [list(row) for row in A]
    m, n = len(R), len(R[0]) if R else 0
    piv: list[int] = []
    i = 0
    for j in range(n):
        k = next((k for k in range(i, m) if R[k][j] != 0), None)
        if k is None:
            continue
        R[i], R[k] = R[k], R[i]
        p = R[i][j]
        R[i] = [x / p for x in R[i]]
        for k in range(m):
            if k != i and R[k][j] != 0:
                f = R[k][j]
                R[k] = [x - f * y for x, y in zip(R[k], R[i])]
        piv.append(j)
        i += 1
        if i == m:
            break
    return R, piv


def _inverse(A: Rows) -> Rows:
    """Inverse of a non-singular square matrix by Gauss-Jordan on ``[A | I]``."""
    n = len(A)
    R, piv = _rref(tuple(tuple(row) + e for row, e in zip(A, _eye(n))))
    if piv[:n] != list(range(n)):
        raise ValueError("matrix is singular")
    return tuple(tuple(row[n:]) for row in R)


def exact_pinv(M: RationalMatrix) -> RationalMatrix:
    """Exact Moore-Penrose pseudo-inverse by a full-rank factorisation.

    With ``M = F G`` (``F`` = the pivot columns of ``M``, full column rank ``r``; ``G`` = the non-zero
    rows of the reduced row echelon form, full row rank ``r``),

    .. math:: M^+ = G^T (G G^T)^{-1} (F^T F)^{-1} F^T.

    Proof: with ``X`` the right-hand side, ``M X = F (F^T F)^{-1} F^T`` and ``X M = G^T (G G^T)^{-1} G``
    are symmetric, ``M X M = F G = M`` and ``X M X = X``: the four Penrose conditions, which determine
    ``M^+`` uniquely. ``rank M = 0`` gives the zero matrix.
    """
    m, n = M.shape
    R, piv = _rref(M.rows)
    if not piv:
        return RationalMatrix(tuple(tuple(Fraction(0) for _ in range(m)) for _ in range(n)))
    F = tuple(tuple(row[j] for j in piv) for row in M.rows)
    G = tuple(tuple(R[i]) for i in range(len(piv)))
    Ft, Gt = _tr(F), _tr(G)
    inner = _mm(_inverse(_mm(G, Gt)), _mm(_inverse(_mm(Ft, F)), Ft))
    return RationalMatrix(_mm(Gt, inner))


def is_psd_exact(M: RationalMatrix) -> bool:
    """Exact PSD test of a symmetric matrix by symmetric Gaussian elimination.

    Eliminate with a positive diagonal pivot (Schur complement ``A - a a^T / a_kk``, PSD iff ``A`` is);
    a negative diagonal entry, or a zero diagonal entry with a non-zero row, proves indefiniteness
    (a 2 x 2 principal minor is negative). Non-symmetric input returns False.
    """
    A = [list(row) for row in M.rows]
    if any(A[i][j] != A[j][i] for i in range(len(A)) for j in range(i)):
        return False
    idx = list(range(len(A)))
    while idx:
        k = idx.pop(0)
        p = A[k][k]
        if p < 0:
            return False
        if p == 0:
            if any(A[k][j] != 0 for j in idx):
                return False
            continue
        for i in idx:
            if A[i][k]:
                f = A[i][k] / p
                for j in idx:
                    A[i][j] -= f * A[k][j]
    return True


# =============================================================================== moments
def _frac(p: float) -> Fraction:
    return Fraction(repr(float(p)))


def rational_masking(mk: Masking) -> dict:
    """Exact ``p_m, p_c, p_r`` (``Fraction(repr(p))``) and ``a, r, q`` of SPEC §2.1.

    ``a = 1 - p_m (1 - p_c)``, ``r = p_m p_r``, ``q = p_m (1 - p_c - p_r)``; ``a + r + q = 1`` exactly.
    """
    p_m, p_c, p_r = _frac(mk.p_m), _frac(mk.p_c), _frac(mk.p_r)
    return dict(p_m=p_m, p_c=p_c, p_r=p_r, a=1 - p_m * (1 - p_c), r=p_m * p_r, q=p_m * (1 - p_c - p_r))


def _check_small(tm: TopicModel, mk: Masking, where: str) -> None:
    check_models(tm, mk)
    require_symmetric(tm, where, "optimal_value_matrix / optimal_embedding_gram (float methods)")
    if tm.prior != "uniform-tau":
        raise ValueError(f"{where} needs a TopicModel with prior='uniform-tau' (it enumerates the tau-subsets)")
    if tm.V1 > MAX_V1:
        raise ValueError(f"{where}: V1 = T*v+1 = {tm.V1} exceeds the exact-arithmetic size limit MAX_V1 = {MAX_V1}")
    if tm.n_topic_sets > MAX_SETS:
        raise ValueError(
            f"{where}: C(T={tm.T}, tau={tm.tau}) = {tm.n_topic_sets} topic sets exceeds the limit MAX_SETS = {MAX_SETS}"
        )


def rational_moments(tm: TopicModel, mk: Masking) -> tuple[RationalMatrix, RationalMatrix]:
    """Exact ``(Sigma, C) = (E[m_S m_S^T], E[p_S m_S^T])`` by enumerating the tau-subsets (SPEC §4.0).

    Uniform-tau prior, ``V1 <= MAX_V1``, ``C(T, tau) <= MAX_SETS``; raises ``ValueError`` otherwise.
    See the module docstring for the integer accumulation.
    """
    _check_small(tm, mk, "rational_moments")
    return moments_exact(tm, mk)


def moments_exact(tm: TopicModel, mk: Masking) -> tuple[RationalMatrix, RationalMatrix]:
    """:func:`rational_moments` on trusted arguments (the exact solvers' internal path)."""
    T, v, tau, V1 = tm.T, tm.v, tm.tau, tm.V1
    e = rational_masking(mk)
    rho = e["a"] / (tau * v) + e["r"] / (T * v)
    eta = e["r"] / (T * v)
    L = math.lcm(rho.denominator, eta.denominator, e["q"].denominator)
    z_in, z_out, z_q = int(rho * L), int(eta * L), int(e["q"] * L)
    sets = list(itertools.combinations(range(T), tau))
    Z = np.full((len(sets), V1), z_out, dtype=object)
    Ind = np.zeros((len(sets), V1), dtype=object)
    Z[:, 0] = z_q
    for k, S in enumerate(sets):
        for t in S:
            Z[k, 1 + t * v : 1 + (t + 1) * v] = z_in
            Ind[k, 1 + t * v : 1 + (t + 1) * v] = 1
    n = len(sets)
    ZZ, IZ = Z.T.dot(Z), Ind.T.dot(Z)
    sig = tuple(tuple(Fraction(int(x), n * L * L) for x in row) for row in ZZ)
    cc = tuple(tuple(Fraction(int(x), n * tau * v * L) for x in row) for row in IZ)
    return RationalMatrix(sig), RationalMatrix(cc)


# =============================================================================== optima
@dataclass(frozen=True)
class RationalOptimum:
    """An exactly computed optimum and its exact certificates.

    Attributes
    ----------
    x : RationalMatrix
        ``W_0 = C Sigma^+`` (value) or ``G*`` (embedding).
    loss : Fraction
        ``L(x) = tr(x Sigma x^T) - 2 tr(x C^T) + 1`` (centred moments plus ``1 - ||u||^2`` with a bias).
    rank_sigma : int
    checks : dict
        Name -> bool of the exact identities that make ``x`` the claimed optimum (all must be True).
    """

    x: RationalMatrix
    loss: Fraction
    rank_sigma: int
    checks: dict

    @property
    def certified(self) -> bool:
        return all(self.checks.values())


def _loss(X: RationalMatrix, Sigma: RationalMatrix, C: RationalMatrix, const: Fraction) -> Fraction:
    return (X @ Sigma @ X.T).trace() - 2 * (X @ C.T).trace() + const


def _stage1_parts(Sigma: RationalMatrix, C: RationalMatrix):
    """``(Sigma^+, P = Sigma Sigma^+, X = C Sigma^+, rank)``."""
    Sp = exact_pinv(Sigma)
    P = Sigma @ Sp
    return Sp, P, C @ Sp, len(_rref(Sigma.rows)[1])


# =============================================================================== shared helpers
def rational_block_matrix(T: int, v: int, same, diff, mask_col=Fraction(0)) -> RationalMatrix:
    """``V1 x V1`` block matrix: ``same`` / ``diff`` on word pairs of equal / different topics,
    ``mask_col`` in column 0 of the word rows, row 0 zero."""
    V1 = T * v + 1
    zero = Fraction(0)
    rows = [tuple(zero for _ in range(V1))]
    for i in range(1, V1):
        ti = (i - 1) // v
        rows.append((Fraction(mask_col),) + tuple(Fraction(same if (j - 1) // v == ti else diff) for j in range(1, V1)))
    return RationalMatrix(tuple(rows))


def rational_result(opt: RationalOptimum, method: str) -> SolveResult:
    """An exact optimum as a :class:`SolveResult` (``x`` correctly rounded; status 0 iff every exact check holds)."""
    return SolveResult(
        x=opt.x.toarray(),
        fun=float(opt.loss),
        status=SUCCESS if opt.certified else NOT_CERTIFIED,
        method=method,
        residuals={k: 0.0 if ok else 1.0 for k, ok in opt.checks.items()},
        info={"x_exact": opt.x, "loss_exact": opt.loss, "rank_sigma": opt.rank_sigma, "checks": dict(opt.checks)},
    )
