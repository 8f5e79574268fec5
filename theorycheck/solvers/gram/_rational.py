"""The tied-embedding Gram in exact rational arithmetic: the minimum-trace ``G*`` and the SPEC §4.1 D3/D4 constants.

Route and proof: :mod:`theorycheck.solvers._rational` (the shared exact core) and :func:`rational_embedding_gram`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...models import Masking, TopicModel, check_models
from .._rational import (
    RationalMatrix,
    RationalOptimum,
    _check_small,
    _eye,
    _loss,
    _stage1_parts,
    _sub,
    exact_pinv,
    is_psd_exact,
    moments_exact,
    rational_masking,
    rational_result,
)

__all__ = ["rational_embedding_gram", "rational_gram_constants", "rational_embedding_result"]


def _centred(tm, mk, Sigma, C):
    """``Sigma - mu mu^T``, ``C - u mu^T`` and ``1 - ||u||^2`` (free decoder bias ``b = u - G mu``)."""
    e = rational_masking(mk)
    n = tm.T * tm.v
    mu = [e["q"]] + [(e["a"] + e["r"]) / n] * n
    u = [Fraction(0)] + [Fraction(1, n)] * n
    Sc = tuple(tuple(Sigma.rows[i][j] - mu[i] * mu[j] for j in range(tm.V1)) for i in range(tm.V1))
    Cc = tuple(tuple(C.rows[i][j] - u[i] * mu[j] for j in range(tm.V1)) for i in range(tm.V1))
    return RationalMatrix(Sc), RationalMatrix(Cc), 1 - Fraction(1, n)


def rational_embedding_gram(tm: TopicModel, mk: Masking, *, bias: bool = False) -> RationalOptimum:
    """Exact minimum-trace PSD ``G`` with ``G Sigma = C`` (tied embedding, SPEC §4.1 D3; ``bias``: D4).

    With ``P = Sigma Sigma^+`` and ``X = C Sigma^+``: ``G Sigma = C`` iff ``G P = X`` (given
    ``C (I - P) = 0``). Split ``G`` along ``range(Sigma)`` and its complement: ``A = P X`` (fixed,
    must be symmetric), ``B = (I - P) X`` (fixed), ``D = (I - P) G (I - P)`` free. ``G`` is PSD iff
    ``A >= 0``, ``B A^+ A = B`` and ``D >= B A^+ B^T`` (generalised Schur complement), so the unique
    minimum-trace choice is ``D = B A^+ B^T`` and ``G* = (A + B) A^+ (A + B)^T = X A^+ X^T``.
    All the conditions used are checked exactly (``checks``), plus ``G* Sigma = C`` and ``G* >= 0``.
    With ``bias=True`` the centred moments ``Sigma - mu mu^T``, ``C - u mu^T`` are used (optimal
    ``b = u - G mu``). Requires ``p_m > 0`` and ``a > 0``.
    """
    _check_small(tm, mk, "rational_embedding_gram")
    mk.require_informative("rational_embedding_gram")
    Sigma, C = moments_exact(tm, mk)
    const = Fraction(1)
    if bias:
        Sigma, C, const = _centred(tm, mk, Sigma, C)
    _, P, X, rank = _stage1_parts(Sigma, C)
    I_P = RationalMatrix(_sub(_eye(tm.V1), P.rows))
    A, B = P @ X, I_P @ X
    Ap = exact_pinv(A)
    G = X @ Ap @ X.T
    checks = {
        "C_rows_in_range": (C @ I_P).is_zero(),
        "A_symmetric": A == A.T,
        "A_psd": is_psd_exact(A),
        "range_condition": (B @ Ap @ A - B).is_zero(),
        "solves": (G @ Sigma - C).is_zero(),
        "G_psd": is_psd_exact(G),
    }
    return RationalOptimum(G, _loss(G, Sigma, C, const), rank, checks)


def rational_gram_constants(tm: TopicModel, mk: Masking, *, bias: bool = False) -> tuple[Fraction, Fraction]:
    """SPEC §4.1 D3 (``bias=False``) / D4 (``bias=True``) min-norm Gram entries ``(x, y)``, exactly.

    D3: ``x = (1/(a v)) (1 - r/(T (a+r)))``, ``y = -r/(a v T (a+r))``; single law (``tau = T`` or
    ``T = 1``): ``x = y = 1/(T v (a+r))``. D4: ``x = (T-1)/(a v T)``, ``y = -1/(a v T)``; single law: 0.
    """
    check_models(tm, mk)
    e = rational_masking(mk)
    a, r, T, v = e["a"], e["r"], tm.T, tm.v
    single = T == 1 or tm.tau == T
    if bias:
        return (Fraction(0), Fraction(0)) if single else (Fraction(T - 1) / (a * v * T), -1 / (a * v * T))
    if single:
        x = 1 / (T * v * (a + r))
        return x, x
    return (1 / (a * v)) * (1 - r / (T * (a + r))), -r / (a * v * T * (a + r))


def rational_embedding_result(tm: TopicModel, mk: Masking, *, bias: bool = False):
    """:func:`rational_embedding_gram` as a ``SolveResult`` (``method="rational"``; ``info["b"]`` with a bias)."""
    res = rational_result(rational_embedding_gram(tm, mk, bias=bias), "rational")
    res.info["b"] = None
    if bias:
        e = rational_masking(mk)
        n = tm.T * tm.v
        mu = [e["q"]] + [(e["a"] + e["r"]) / n] * n
        G = res.info["x_exact"].rows
        b = [-sum((g * m for g, m in zip(G[0], mu)), Fraction(0))]
        b += [Fraction(1, n) - sum((g * m for g, m in zip(row, mu)), Fraction(0)) for row in G[1:]]
        res.info["b_exact"] = tuple(b)
        res.info["b"] = np.array([float(x) for x in b])
    return res
