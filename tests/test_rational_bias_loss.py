"""Issue 25 item 6: the exact loss of the rational Gram optimum *with a bias* equals its closed form.

:func:`theorycheck.solvers.gram._rational.rational_embedding_gram` with ``bias=True`` computes the loss
from the centred moments (``Sigma - mu mu^T``, ``C - u mu^T``, constant ``1 - ||u||^2``). Here it is
recomputed independently, exactly, from the *uncentred* moments and the returned bias:
``L(G, b) = tr(G Sigma G^T) - 2 tr(G C^T) + 2 b^T G mu - 2 b^T u + ||b||^2 + 1`` (``mu = E[m]``,
``u = E[e_x]``; SPEC §4.1 D4); the closed form of D4 (``x``, ``y``, ``E_0 = 0``, ``b = u``) has exactly that
loss; and the float routes agree (the closed-form solver's Gram, the exact population embedding loss at a
factor of ``G``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from theorycheck import Masking, TopicModel
from theorycheck.population import embedding_loss
from theorycheck.solvers import optimal_embedding_gram
from theorycheck.solvers._rational import moments_exact, rational_masking
from theorycheck.solvers.gram._rational import rational_embedding_result, rational_gram_constants

CASES = [
    (TopicModel(T=3, v=2, tau=1), Masking(0.15, 0.1, 0.1)),
    (TopicModel(T=4, v=2, tau=2), Masking(0.3, 0.2, 0.3)),
    (TopicModel(T=3, v=3, tau=2), Masking(0.5, 0.0, 0.4)),
]


def _uncentred_loss(G, b, Sigma, C, mu, u) -> Fraction:
    n = len(mu)
    GS = [[sum((G[i][k] * Sigma[k][j] for k in range(n)), Fraction(0)) for j in range(n)] for i in range(n)]
    t1 = sum((GS[i][j] * G[i][j] for i in range(n) for j in range(n)), Fraction(0))  # tr(G Sigma G^T)
    t2 = sum((G[i][j] * C[i][j] for i in range(n) for j in range(n)), Fraction(0))  # tr(G C^T)
    Gmu = [sum((G[i][k] * mu[k] for k in range(n)), Fraction(0)) for i in range(n)]
    bb = sum((x * x for x in b), Fraction(0))
    return (
        t1
        - 2 * t2
        + 2 * sum((x * y for x, y in zip(b, Gmu)), Fraction(0))
        - 2 * sum((x * y for x, y in zip(b, u)), Fraction(0))
        + bb
        + 1
    )


@pytest.mark.parametrize(("tm", "mk"), CASES, ids=lambda x: repr(x)[:40])
def test_rational_loss_with_bias_equals_its_uncentred_closed_form_exactly(tm, mk):
    res = rational_embedding_result(tm, mk, bias=True)
    assert res.status == 0
    Sigma, C = moments_exact(tm, mk)
    e = rational_masking(mk)
    n = tm.T * tm.v
    mu = [e["q"]] + [(e["a"] + e["r"]) / n] * n
    u = [Fraction(0)] + [Fraction(1, n)] * n
    G = res.info["x_exact"].rows
    exact = _uncentred_loss(G, res.info["b_exact"], Sigma.rows, C.rows, mu, u)
    assert res.info["loss_exact"] == exact
    # the closed form of SPEC §4.1 D4 (x, y on same / different topic pairs, E_0 = 0, b = u), evaluated exactly
    x, y = rational_gram_constants(tm, mk, bias=True)
    V1 = tm.V1
    Gcf = [[Fraction(0)] * V1 for _ in range(V1)]
    for i in range(1, V1):
        for j in range(1, V1):
            Gcf[i][j] = x if (i - 1) // tm.v == (j - 1) // tm.v else y
    assert [list(r) for r in G] == Gcf
    assert res.info["loss_exact"] == _uncentred_loss(Gcf, u, Sigma.rows, C.rows, mu, u)
    # float routes: the closed-form solver's Gram and the population loss at a factor of G
    closed = optimal_embedding_gram(tm, mk, bias=True)
    np.testing.assert_allclose(closed.x.toarray() if hasattr(closed.x, "toarray") else closed.x, res.x, atol=1e-12)
    w, V = np.linalg.eigh(res.x)
    W_E = (V * np.sqrt(np.clip(w, 0, None))).T
    assert float(exact) == pytest.approx(embedding_loss(W_E, tm, mk, b=res.info["b"]), abs=1e-12)


def test_the_uncentred_form_detects_a_wrong_bias():
    tm, mk = CASES[0]
    res = rational_embedding_result(tm, mk, bias=True)
    Sigma, C = moments_exact(tm, mk)
    e = rational_masking(mk)
    n = tm.T * tm.v
    mu = [e["q"]] + [(e["a"] + e["r"]) / n] * n
    u = [Fraction(0)] + [Fraction(1, n)] * n
    b = list(res.info["b_exact"])
    b[1] += Fraction(1, 1000)
    assert _uncentred_loss(res.info["x_exact"].rows, b, Sigma.rows, C.rows, mu, u) > res.info["loss_exact"]
