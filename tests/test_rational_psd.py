"""The exact PSD test (``is_psd_exact``, the certificate of SPEC §4.1 D3/D4) against float eigenvalues.

Issue 25 item 6: accepting negative pivots above -1 (mutant ``rat-psd``) passed the hand-picked 2 x 2 cases of
``tests/test_certificates.py`` (their negative pivots are below -1). Here: random symmetric rational matrices,
small entries, and scaled copies, whose verdict must equal the sign of ``numpy.linalg.eigvalsh``'s smallest
eigenvalue wherever that sign is decided (``|lambda_min| > 64 n eps ||M||_F``, beyond the eigensolver's backward
error); and the exact Grams of the solver minus / plus ``I/64``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.solvers._rational import RationalMatrix, is_psd_exact
from theorycheck.solvers.gram import rational_embedding_gram

EPS = float(np.finfo(float).eps)


def _sym(entries, n, scale):
    it = iter(entries)
    A = [[Fraction(0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            A[i][j] = A[j][i] = Fraction(next(it)) * scale
    return RationalMatrix(tuple(tuple(r) for r in A))


def _float_verdict(M: RationalMatrix):
    Mf = M.toarray()
    lam = float(np.linalg.eigvalsh(Mf)[0])
    decided = abs(lam) > 64 * Mf.shape[0] * EPS * float(np.linalg.norm(Mf))
    return decided, lam >= 0


@given(
    n=st.integers(1, 5),
    entries=st.lists(st.integers(-9, 9), min_size=15, max_size=15),
    scale=st.sampled_from([Fraction(1), Fraction(1, 10), Fraction(1, 1000)]),
    gram=st.booleans(),
)
def test_exact_psd_verdict_equals_the_float_eigenvalue_sign(n, entries, scale, gram):
    M = _sym(entries, n, scale)
    if gram:  # a PSD matrix M^T M shifted down by s^2/4: often indefinite with small negative pivots
        P = [[sum((M.rows[k][i] * M.rows[k][j] for k in range(n)), Fraction(0)) for j in range(n)] for i in range(n)]
        M = RationalMatrix(tuple(tuple(P[i][j] - (scale * scale / 4 if i == j else 0) for j in range(n))
                                 for i in range(n)))  # fmt: skip
    decided, psd = _float_verdict(M)
    assume(decided)
    assert is_psd_exact(M) == psd


@pytest.mark.parametrize(("T", "v", "tau", "bias"), [(4, 3, 2, False), (3, 2, 1, True), (5, 2, 3, True)])
def test_exact_grams_minus_and_plus_a_small_shift(T, v, tau, bias):
    G = rational_embedding_gram(tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(0.15, 0.1, 0.1), bias=bias).x
    n = G.shape[0]
    for sign in (-1, 1):
        M = RationalMatrix(tuple(tuple(G.rows[i][j] + (Fraction(sign, 64) if i == j else 0) for j in range(n))
                                 for i in range(n)))  # fmt: skip
        decided, psd = _float_verdict(M)
        assert decided and psd == (sign > 0)  # G is singular PSD: G - I/64 indefinite, G + I/64 definite
        assert is_psd_exact(M) == psd
