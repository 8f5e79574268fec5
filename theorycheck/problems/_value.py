"""Stage-1 value matrix problems: least squares and ridge in ``W^V`` (SPEC §4.0, §4.2; any phi §11.3).

.. math::
    L(W) = E_S E_{x \\sim p_S} \\|W m_S - e_x\\|^2 + \\lambda \\|W\\|_F^2
         = \\mathrm{tr}(W \\Sigma W^T) - 2 \\mathrm{tr}(W C^T) + 1 + \\lambda \\|W\\|_F^2,

a convex quadratic with gradient ``2 (W (Sigma + lambda I) - C)`` and Hessian-vector product
``V -> 2 V (Sigma + lambda I)``.

Certificate (issue 36 item 1: every certified interval encloses the exact optimum). ``L*`` is computed in exact
rational arithmetic for every model and ``lambda >= 0`` (:func:`theorycheck.solvers._exact_optimum.exact_stage1_value`:
the stored ``phi`` taken as exact, the masking and ``lambda`` as decimals; a ``(T + 2)``-dimensional reduction,
or the 3-variable block form on the paper's model) and rounded outward: ``lower`` the largest float ``<= L*``,
``upper`` the smallest ``>= L*`` (equal only when ``L*`` is a float). ``W*`` comes from the library's closed form
(``solvers.optimal_value_matrix``); its float loss must lie within ``1e-10 (1 + |L*|)`` of ``L*`` (else
``ArithmeticError``: the closed form is wrong), a check, not part of the bound.

Identifiable part: at ``lambda = 0`` only ``W P`` is fixed (``P`` the projector onto
``range(Sigma)``; adding ``Z`` with ``Z Sigma = 0`` changes nothing), at ``lambda > 0`` all of ``W``.
"""

from __future__ import annotations

import math

import numpy as np

from ..population import moments, value_loss, value_loss_grad
from ..solvers import optimal_value_matrix
from ..solvers._exact_optimum import EXACT_DATA, exact_stage1_value, round_outward
from ._problem import Certificate, Problem

__all__ = ["ValueLSQ", "ValueRidge", "dense", "range_projector", "exact_certificate"]

#: How far the float loss of the library's closed-form minimiser may sit from the exact optimum (a check).
CLOSED_FORM_RTOL = 1e-10


def dense(x) -> np.ndarray:
    """A solver result (ndarray or structured matrix with ``toarray``) as a dense float array."""
    return np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=float)


def range_projector(Sigma: np.ndarray, rtol: float = 1e-10):
    """``(P, mu)``: projector onto ``range(Sigma)`` and the smallest eigenvalue above ``rtol * max``."""
    ev, U = np.linalg.eigh((Sigma + Sigma.T) / 2)
    keep = ev > rtol * max(ev.max(), 0.0)
    Uk = U[:, keep]
    return Uk @ Uk.T, float(ev[keep].min())


def exact_certificate(problem, exact, f_ref: float, what: str = "SPEC §4.0, §4.2, §11.3") -> Certificate:
    """The certificate ``[round_down(L*), round_up(L*)]`` of the exact optimum ``L*`` (a Fraction); ``f_ref``, the
    float loss of the library's closed-form minimiser, must lie within :data:`CLOSED_FORM_RTOL` of it."""
    lower, upper = round_outward(exact)
    if not abs(f_ref - float(exact)) <= CLOSED_FORM_RTOL * (1.0 + abs(float(exact))):
        raise ArithmeticError(f"{problem.name}: the closed-form minimiser has L = {f_ref!r}, the exact optimum is "
                              f"{float(exact)!r}")  # fmt: skip
    return Certificate(f"exact optimum ({EXACT_DATA}; {what}), rounded outward", lower, upper)


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

    def _optimum(self):
        W = self.reference()
        return exact_certificate(self, exact_stage1_value(self.tm, self.mk, self.reg), self.f(W)), W

    def identifiable(self, x) -> np.ndarray:
        if self.reg > 0:
            return np.asarray(x, dtype=float)
        return np.asarray(x, dtype=float) @ self._moments()[1]


class ValueRidge(ValueLSQ):
    """Stage-1 ``W^V`` ridge: ``min_W L(W) + reg ||W||_F^2`` (strongly convex; SPEC §4.0, §4.2, §11.3)."""

    family = "stage1-value/ridge"
    default_reg = 1e-3
