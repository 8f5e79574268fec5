r"""The factorised tied-embedding loss at large ``V1``, evaluated through the rank-``T`` factors (SPEC §4.6(c)).

``gram/factor-structured``: ``min_{W_E} f(W_E) = L(W_E^T W_E)``, ``W_E`` of shape ``(d, V1)``, the
nonconvex problem of ``gram/factor`` without any ``V1 x V1`` array. With the factors of SPEC §11.5,
``Sigma = X X^T`` and ``C = Y X^T`` (``X, Y`` of shape ``(V1, rho)``, ``rho <= T``;
:func:`~theorycheck.population._moments.stage1_factors`), ``P = W X``, ``Q = W Y`` (``d x rho``) and
``K = W W^T`` (``d x d``):

.. math::
    f(W) = \|W^T P\|_F^2 - 2 \langle W^T P, Y\rangle + 1 = \langle P, K P\rangle - 2 \langle P, Q\rangle + 1,

    \nabla f(W) = 2 \big[(K P - Q) X^T + P P^T W - P Y^T\big]

(``dL/dG = 2 (G X - Y) X^T`` and ``grad_W = W (D + D^T)``), and the Hessian-vector product is its
directional derivative (with ``P' = V X``, ``Q' = V Y``, ``K' = V W^T + W V^T``):
``2 [(K' P + K P' - Q') X^T + (P' P^T + P P'^T) W + P P^T V - P' Y^T]``. Cost ``O(V1 d (d + rho))`` time and
``O(V1 (d + rho))`` memory (tested against the dense ``gram/factor`` and by ``tracemalloc``).

Certificate (closed form). ``f* = L* = 1 - E||p||^2 = 1 - sum_{t,s} M2_{ts} <phi_t, phi_s>``: a lower bound
for every map ``M`` (bias-variance, SPEC §4.0, §11.3) and attained by the factor of the minimum-norm Gram
``G* = Y (X^T Y)^+ Y^T`` (SPEC §4.1 D3, §11.5) whenever ``d >= rank G*`` (checked at construction).
``M2`` is taken exactly (Fractions: uniform-``tau`` or Dirichlet with the float ``alpha`` read exactly),
``phi`` as its float64 entries; the ``T x T`` products ``<phi_t, phi_s>`` are computed in floating point
and enclosed with the a-priori dot-product bound ``|fl(x.y) - x.y| <= gamma_n |x|.|y|``,
``gamma_n = n u / (1 - n u)`` (Higham 2002, §3.1), the rest exactly; the ends are rounded outward.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..population._moments import stage1_factors
from ..solvers import embedding_from_gram, min_embedding_dim, optimal_embedding_gram
from ._exact import exact_theta_moment, round_down, round_up
from ._problem import Certificate, Problem

__all__ = ["GramFactorStructured", "exact_min_loss_enclosure"]

_U = 2.0**-53  # unit round-off of float64


def exact_min_loss_enclosure(tm) -> tuple[Fraction, Fraction]:
    """Rational ``(lo, hi)`` with ``lo <= 1 - E||p||^2 <= hi`` (module docstring; ``phi`` as stored).

    ``E||p||^2 = sum_{t,s} M2_{ts} <phi_t, phi_s>``: ``M2`` exact; each computed ``P_ts = fl(<phi_t, phi_s>)``
    is within ``gamma_n |phi_t|.|phi_s| <= 2 gamma_n A_ts`` of the exact product (``A = fl(|phi| |phi|^T)``,
    itself within a factor ``1 / (1 - gamma_n)`` of the exact one; any summation order, Higham 2002 §3.1).
    """
    phi = np.asarray(tm.phi, dtype=float)
    T, n = phi.shape
    nu = Fraction(n, 2**53)
    gamma = nu / (1 - nu)
    if gamma > Fraction(1, 4):
        raise ValueError(f"exact_min_loss_enclosure: {n} words is too many for the a-priori bound")
    P = phi @ phi.T
    A = np.abs(phi) @ np.abs(phi).T
    M2 = exact_theta_moment(tm)
    if any(M2[i][j] < 0 for i in range(T) for j in range(T)):
        raise ArithmeticError("E[theta theta^T] has a negative entry")
    mid = sum((M2[i][j] * Fraction(float(P[i, j])) for i in range(T) for j in range(T)), Fraction(0))
    rad = sum((M2[i][j] * 2 * gamma * Fraction(float(A[i, j])) for i in range(T) for j in range(T)), Fraction(0))
    return 1 - mid - rad, 1 - mid + rad


class GramFactorStructured(Problem):
    """Factorised tied-embedding loss ``min_{W_E} L(W_E^T W_E)`` through the rank-T factors (SPEC §4.6(c)).

    ``W_E`` of shape ``(d, V1)`` (``d = min_embedding_dim`` by default); ``O(V1 d (d + T))`` per
    evaluation, no ``V1 x V1`` array; nonconvex; f* = ``1 - E||p||^2`` certified in closed form.
    """

    family = "gram/factor-structured"
    start_doc = "seed k: W_E_ij ~ N(0, 1) / sqrt(V1) from default_rng(k) (rows of norm ~1; W_E = 0 is a saddle point)"
    #: the variable is not a V1 x V1 matrix: no dense-size guard
    dense = False

    def __init__(self, model, size, tm, mk):
        mk.require_informative(self.family)
        super().__init__(model, size, tm, mk)
        rank = int(min_embedding_dim(tm, mk))
        self.d = int(size.get("d") or rank)
        if self.d < rank:
            raise ValueError(f"{self.family}: d must be >= rank G* = {rank} (f* = L* needs it), got d={self.d}")
        self.size["d"] = self.d
        self.shape = (self.d, tm.V1)
        F = stage1_factors(tm, mk)
        self._X, self._Y = np.ascontiguousarray(F.X), np.ascontiguousarray(F.Y)

    # -- objective ------------------------------------------------------------------------------
    def _parts(self, W):
        W = np.asarray(W, dtype=float)
        return W, W @ self._X, W @ self._Y, W @ W.T

    def f(self, x) -> float:
        _, P, Q, K = self._parts(x)
        return float(np.sum(P * (K @ P)) - 2.0 * np.sum(P * Q) + 1.0)

    def grad(self, x) -> np.ndarray:
        W, P, Q, K = self._parts(x)
        return 2.0 * ((K @ P - Q) @ self._X.T + (P @ P.T) @ W - P @ self._Y.T)

    def hvp(self, x, v) -> np.ndarray:
        """Directional derivative of :meth:`grad` along ``v`` (exact; module docstring)."""
        W, P, Q, K = self._parts(x)
        V = np.asarray(v, dtype=float)
        Pv, Qv = V @ self._X, V @ self._Y
        Kv = V @ W.T
        Kv = Kv + Kv.T
        PPt = P @ P.T
        out = (Kv @ P + K @ Pv - Qv) @ self._X.T + (Pv @ P.T + P @ Pv.T) @ W + PPt @ V - Pv @ self._Y.T
        return 2.0 * out

    def start(self, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(self.shape) / math.sqrt(self.tm.V1)

    def reference(self) -> np.ndarray:
        """A factor of the min-norm optimal Gram (``solvers.optimal_embedding_gram``, closed form), padded to ``d``."""
        res = optimal_embedding_gram(self.tm, self.mk)
        if "W_E" not in res.info:  # the paper's model: a BlockGram, factored in O(d V1)
            return np.asarray(embedding_from_gram(res.x, self.d), dtype=float)
        WE = np.asarray(res.info["W_E"], dtype=float)
        W = np.zeros(self.shape)
        W[: WE.shape[0]] = WE
        return W

    def _optimum(self):
        lo, hi = exact_min_loss_enclosure(self.tm)
        W = self.reference()
        fW = self.f(W)
        slack = 1e-10 * max(1.0, abs(fW))
        if not (float(lo) - slack <= fW <= float(hi) + slack):
            raise ArithmeticError(
                f"{self.name}: the closed-form factor has f = {fW!r}, outside [{float(lo)}, {float(hi)}]"
            )
        method = (
            f"closed form L* = 1 - E||p||^2 (SPEC §4.0 lower bound; attained by the factor of G*, §4.1 D3 / §11.5, "
            f"d = {self.d} >= rank G*), exact moments with an a-priori float bound on phi phi^T, rounded outward"
        )
        return Certificate(method, round_down(lo), round_up(hi)), W

    def identifiable(self, x) -> np.ndarray:
        """``W^T W X`` (``V1 x rho``): ``G X`` is fixed at every minimiser (``G X = Y``, SPEC §11.5); O(V1 d rho)."""
        W = np.asarray(x, dtype=float)
        return W.T @ (W @ self._X)
