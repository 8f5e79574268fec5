"""Tied-embedding Gram problems: the convex SDP in ``G`` and its nonconvex factorization (SPEC §4.1, §11.5).

``gram/sdp``: ``min L(G)`` over symmetric PSD ``G`` (``V1 x V1``), with ``L`` the stage-1 loss of
:mod:`._value` at ``W^V = G``. ``gram/factor``: ``min_{W_E} L(W_E^T W_E)`` over ``W_E`` of shape
``(d, V1)`` (:func:`theorycheck.population.embedding_loss`), ``d`` = ``min_embedding_dim`` by default.

Certificate (both; issue 36 item 1): exact rational bounds rounded outward
(:func:`theorycheck.solvers._exact_optimum.exact_gram_bounds`): the PSD constraint is a restriction of stage-1
least squares, so the exact stage-1 minimum is a lower bound; an exact PSD point (``p p^T/(p^T m)`` with a single
document law, else ``Phi K Phi^T``) gives the upper bound, equal to the lower one on the paper's model and within
~1e-30 of it on a stored ``phi`` (whose rows sum to 1 only to rounding). The factorization's certificate is the
SDP's when ``d`` is at least that point's rank (else the float value of the factored closed form, ``kind =
"numerical"``). The library's closed-form Gram (``solvers.optimal_embedding_gram``, SPEC §4.1 D3/D4) is the
reference minimiser: PSD (checked) with its float loss within ``1e-10 (1 + |f*|)`` of the bounds (a check).
Identifiable part: every minimiser satisfies ``G m_S = p_S``, which fixes ``G`` except
``P_perp G P_perp`` (``P_perp`` the projector onto ``range(Sigma)``'s complement):
``identifiable(G) = G - P_perp G P_perp``.
"""

from __future__ import annotations

import numpy as np

from ..population import embedding_loss, embedding_loss_grad, value_loss, value_loss_grad
from ..solvers import embedding_from_gram, min_embedding_dim, optimal_embedding_gram
from ..solvers._exact_optimum import EXACT_DATA, exact_gram_bounds, round_outward
from ._problem import Certificate, Problem, project_psd
from ._value import CLOSED_FORM_RTOL, ValueLSQ, dense

__all__ = ["GramSDP", "GramFactor"]

_PSD_TOL = 1e-12


class GramSDP(Problem):
    """Embedding Gram SDP: ``min L(G)`` s.t. ``G = G^T`` PSD, ``L(G) = E||G m_S - e_x||^2`` (SPEC §4.1, §11.5)."""

    family = "gram/sdp"
    constraint = "psd"
    start_doc = "seed 0: G = 0 (feasible); seed k > 0: G = A A^T / V1, A_ij ~ N(0, 1) from default_rng(k)"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.shape = (tm.V1, tm.V1)
        self._stage1 = ValueLSQ(model, {k: v for k, v in size.items() if k != "d"}, tm, mk)
        self._exact = None

    def f(self, x) -> float:
        return float(value_loss(x, self.tm, self.mk))

    def grad(self, x) -> np.ndarray:
        return np.asarray(value_loss_grad(x, self.tm, self.mk)[1])

    def hvp(self, x, v) -> np.ndarray:
        return self._stage1.hvp(x, v)

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(self.shape)
        A = np.random.default_rng(seed).standard_normal(self.shape)
        return A @ A.T / self.shape[0]

    def reference(self) -> np.ndarray:
        return dense(optimal_embedding_gram(self.tm, self.mk).x)

    def violation(self, x) -> float:
        """``max(||G - G^T||_F, -lambda_min((G + G^T)/2), 0)``."""
        x = np.asarray(x, dtype=float)
        asym = float(np.linalg.norm(x - x.T))
        lam = float(np.linalg.eigvalsh((x + x.T) / 2)[0])
        return max(asym, -lam, 0.0)

    def project(self, x) -> np.ndarray:
        """Projection onto the symmetric PSD cone (eigenvalues clipped at 0; :func:`project_psd`)."""
        return project_psd(x)

    def _optimum(self):
        G = self.reference()
        lam = float(np.linalg.eigvalsh((G + G.T) / 2)[0])
        if lam < -_PSD_TOL * max(1.0, float(np.abs(G).max())):
            raise ArithmeticError(f"{self.name}: the closed-form Gram is not PSD (lambda_min = {lam:.3g})")
        return self._bounds(self.f(G)), G

    def exact_bounds(self):
        """The exact :class:`~theorycheck.solvers._exact_optimum.GramBounds` (cached)."""
        if self._exact is None:
            self._exact = exact_gram_bounds(self.tm, self.mk)
        return self._exact

    def _bounds(self, f_ref: float, numerical_upper: float | None = None) -> Certificate:
        b = self.exact_bounds()
        lower, upper = round_outward(b.lower)[0], round_outward(b.upper)[1]
        far = not abs(f_ref - float(b.upper)) <= CLOSED_FORM_RTOL * (1.0 + abs(float(b.upper)))
        if numerical_upper is None and far:
            raise ArithmeticError(f"{self.name}: the closed form has L = {f_ref!r}, the exact optimum is "
                                  f"{float(b.upper)!r}")  # fmt: skip
        method = f"exact bounds ({EXACT_DATA}; stage-1 minimum below, an exact PSD point above; SPEC §4.1, §11.5)"
        if numerical_upper is not None:
            return Certificate(method + f"; upper: the float value of the rank-{self.size.get('d')} factor",
                               lower, max(lower, numerical_upper), kind="numerical")  # fmt: skip
        return Certificate(method + ", rounded outward", lower, upper)

    def identifiable(self, x) -> np.ndarray:
        P = self._stage1._moments()[1]
        Q = np.eye(P.shape[0]) - P
        x = np.asarray(x, dtype=float)
        return x - Q @ x @ Q


class GramFactor(Problem):
    """Nonconvex factorization: ``min_{W_E} L(W_E^T W_E)``, ``W_E`` of shape ``(d, V1)`` (SPEC §3.1, §4.1)."""

    family = "gram/factor"
    start_doc = "seed k: W_E_ij ~ 0.1 N(0, 1) from default_rng(k) (W_E = 0 is a saddle point)"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.d = int(size.get("d") or min_embedding_dim(tm, mk))
        self.size["d"] = self.d
        self.shape = (self.d, tm.V1)
        self._sdp = GramSDP(model, {k: v for k, v in size.items() if k != "d"}, tm, mk)

    def f(self, x) -> float:
        return float(embedding_loss(x, self.tm, self.mk))

    def grad(self, x) -> np.ndarray:
        return np.asarray(embedding_loss_grad(x, self.tm, self.mk).dW_E)

    def start(self, seed: int = 0) -> np.ndarray:
        return 0.1 * np.random.default_rng(seed).standard_normal(self.shape)

    def reference(self) -> np.ndarray:
        return np.asarray(embedding_from_gram(self._sdp.reference(), self.d), dtype=float)

    def _optimum(self):
        W = self.reference()
        fW = self.f(W)
        rank = self._sdp.exact_bounds().rank
        if self.d >= rank:  # every factor of the exact PSD point is feasible here: the SDP's bounds
            return self._sdp._bounds(fW), W
        return self._sdp._bounds(fW, numerical_upper=fW), W

    def identifiable(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return self._sdp.identifiable(x.T @ x)
