"""Stage-1 value matrix problems: least squares and ridge in ``W^V`` (SPEC §4.0, §4.2; any phi §11.3).

.. math::
    L(W) = E_S E_{x \\sim p_S} \\|W m_S - e_x\\|^2 + \\lambda \\|W\\|_F^2
         = \\mathrm{tr}(W \\Sigma W^T) - 2 \\mathrm{tr}(W C^T) + 1 + \\lambda \\|W\\|_F^2,

a convex quadratic with gradient ``2 (W (Sigma + lambda I) - C)`` and Hessian-vector product
``V -> 2 V (Sigma + lambda I)``.

Certificate. ``W*`` comes from the library's closed form (``solvers.optimal_value_matrix``). Since
``C`` has its rows in ``range(Sigma)``, every ``W`` satisfies
``L(W) - L* = tr((W - W*) H (W - W*)^T) = 1/4 tr(G H^+ G^T) <= ||G||_F^2 / (4 mu)`` with ``G = grad L(W)``,
``H = Sigma + lambda I`` and ``mu`` its smallest positive eigenvalue: so
``[L(W*) - ||G||^2/(4 mu), L(W*)]`` encloses ``L*`` (evaluated in floating point; the rounding of
``L(W*)`` itself, ~1e-16 relative, is not in the bound). On the paper's model at ``lambda = 0`` with
``V1 <= 41``, ``L*`` is also computed in exact rational arithmetic (``method="rational"``) and the
certificate is that exact value, correctly rounded (gap 0).

Identifiable part: at ``lambda = 0`` only ``W P`` is fixed (``P`` the projector onto
``range(Sigma)``; adding ``Z`` with ``Z Sigma = 0`` changes nothing), at ``lambda > 0`` all of ``W``.
"""

from __future__ import annotations

import math

import numpy as np

from ..population import moments, value_loss, value_loss_grad
from ..solvers import optimal_value_matrix
from ._problem import Certificate, Problem

__all__ = ["ValueLSQ", "ValueRidge", "dense", "range_projector"]

_RATIONAL_MAX_V1 = 41
_RATIONAL_MAX_SETS = 500


def dense(x) -> np.ndarray:
    """A solver result (ndarray or structured matrix with ``toarray``) as a dense float array."""
    return np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=float)


def range_projector(Sigma: np.ndarray, rtol: float = 1e-10):
    """``(P, mu)``: projector onto ``range(Sigma)`` and the smallest eigenvalue above ``rtol * max``."""
    ev, U = np.linalg.eigh((Sigma + Sigma.T) / 2)
    keep = ev > rtol * max(ev.max(), 0.0)
    Uk = U[:, keep]
    return Uk @ Uk.T, float(ev[keep].min())


class ValueLSQ(Problem):
    """Stage-1 ``W^V`` least squares: ``min_W L(W)`` over ``V1 x V1`` matrices (SPEC §4.0, §4.2, §11.3)."""

    family = "stage1-value/lsq"
    start_doc = "seed 0: W = 0; seed k > 0: W_ij ~ N(0, 1/V1) from numpy.random.default_rng(k)"
    default_reg = 0.0

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.reg = float(size.get("reg", self.default_reg))
        self.shape = (tm.V1, tm.V1)
        self._mom = None

    def f(self, x) -> float:
        return float(value_loss(x, self.tm, self.mk, reg=self.reg))

    def grad(self, x) -> np.ndarray:
        return np.asarray(value_loss_grad(x, self.tm, self.mk, reg=self.reg)[1])

    def _moments(self):
        if self._mom is None:
            Sigma, C = moments(self.tm, self.mk)
            P, mu = range_projector(np.asarray(Sigma))
            self._mom = (np.asarray(Sigma), P, mu)
        return self._mom

    def hvp(self, x, v) -> np.ndarray:
        """``2 v (Sigma + reg I)`` (exact; the loss is quadratic)."""
        Sigma = self._moments()[0]
        v = np.asarray(v, dtype=float)
        return 2.0 * (v @ Sigma + self.reg * v)

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(self.shape)
        return np.random.default_rng(seed).standard_normal(self.shape) / math.sqrt(self.shape[0])

    def reference(self) -> np.ndarray:
        return dense(optimal_value_matrix(self.tm, self.mk, reg=self.reg).x)

    def _rational(self):
        tm = self.tm
        if self.reg != 0.0 or self.model != "paper" or tm.V1 > _RATIONAL_MAX_V1:
            return None  # the exact route's domain: the paper's model, small sizes
        if math.comb(tm.T, tm.tau) > _RATIONAL_MAX_SETS:
            return None
        return optimal_value_matrix(tm, self.mk, method="rational").info["loss_exact"]

    def _optimum(self):
        W = self.reference()
        fW = self.f(W)
        _, _, mu = self._moments()
        gnorm2 = float(np.sum(self.grad(W) ** 2))
        exact = self._rational()
        if exact is not None:
            val = float(exact)
            return Certificate("exact rational arithmetic (SPEC §4.2), correctly rounded", val, val), W
        bound = gnorm2 / (4.0 * (mu + self.reg))
        method = "closed form + a-posteriori gradient bound ||grad||^2 / (4 mu) (SPEC §4.2)"
        return Certificate(method, fW - bound, fW), W

    def identifiable(self, x) -> np.ndarray:
        if self.reg > 0:
            return np.asarray(x, dtype=float)
        return np.asarray(x, dtype=float) @ self._moments()[1]


class ValueRidge(ValueLSQ):
    """Stage-1 ``W^V`` ridge: ``min_W L(W) + reg ||W||_F^2`` (strongly convex; SPEC §4.0, §4.2, §11.3)."""

    family = "stage1-value/ridge"
    default_reg = 1e-3
