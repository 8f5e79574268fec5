"""Stage-1 ``W^V`` in its structured block form: 3 variables, ``f`` and ``grad`` in O(1) (SPEC §4.2).

On the paper's model the stage-1 problem is invariant under permutations of the topics and of the
words inside a topic, so (convex objective) a minimiser is block-constant,
``W[w, w'] = A`` (same topic), ``B0`` (other topic), ``W[w, 0] = gamma`` and ``W[0, :] = 0``
(:class:`theorycheck.solvers.BlockValueMatrix`). On that family, with ``x = (A, B0, gamma)``,
``c = E||theta||^2 - 1/T``, ``e_d = (a, -a, 0)``, ``beta = (r/T, a + r (T-1)/T, q) + e_d / T`` and
``D = T v diag(v, (T-1) v, 1)`` (so ``x^T D x = ||W||_F^2``; SPEC §4.2, the reduced objective of
``solvers.value._block._ridge_constants``):

.. math::
    f(x) = v T (\\beta^T x)^2 + v c (e_d^T x)^2 - 2 (\\beta + c e_d)^T x + 1 + \\lambda x^T D x
         = x^T Q x - 2 b^T x + 1,

``grad f = 2 (Q x - b)``, ``hvp(x, u) = 2 Q u``; ``f(x)`` equals the dense ``value_loss`` of the
block matrix (tested). Cost O(1) in ``V1``, so the ladder reaches ``T = 1000, v = 100``
(``V1 = 100,001``), where the dense problem (``10^10`` entries) cannot be stored.

Certificate: the exact optimum in rational arithmetic (the block form's ``1 - b^T Q^+ b`` with the exact
constants, :func:`theorycheck.solvers._exact_optimum.exact_stage1_value`; at ``lambda = 0`` it is
``1 - E||p||^2 = 1 - 1/(tau v)``, SPEC §4.0) rounded outward (issue 36 item 1); ``x*`` from the library's closed
form (``solvers.value_block_constants``), whose float value must lie within ``1e-10 (1 + |f*|)`` of it (a
check). Identifiable part: the projection of ``x`` onto ``range(Q)``
(at ``lambda = 0`` ``Q`` has rank 2: ``A - B0`` and ``beta^T x`` are fixed, one direction is free).
"""

from __future__ import annotations

import math

import numpy as np

from ..solvers import BlockValueMatrix, value_block_constants
from ..solvers._exact_optimum import exact_stage1_value
from ..solvers.value._block import _theta_spread as theta_spread
from ._problem import Problem
from ._value import exact_certificate

__all__ = ["ValueBlock", "ValueBlockRidge", "block_quadratic"]


def block_quadratic(tm, mk, reg: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, b)`` of the reduced objective ``f(x) = x^T Q x - 2 b^T x + 1`` (module docstring, SPEC §4.2)."""
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    c = theta_spread(tm)
    e_d = np.array([a, -a, 0.0])
    beta = np.array([r / T, a + r * (T - 1) / T, q]) + e_d / T
    D = T * v * np.array([v, (T - 1) * v, 1.0])
    Q = v * T * np.outer(beta, beta) + v * c * np.outer(e_d, e_d) + reg * np.diag(D)
    return Q, beta + c * e_d


class ValueBlock(Problem):
    """Stage-1 ``W^V`` least squares in the block form ``x = (A, B0, gamma)`` (SPEC §4.2); O(1) per evaluation."""

    family = "stage1-value/block"
    start_doc = "seed 0: x = 0; seed k > 0: x ~ N(0, I_3 / (T v)) from numpy.random.default_rng(k)"
    default_reg = 0.0
    #: the variable is not a V1 x V1 matrix: no dense-size guard
    dense = False

    def __init__(self, model, size, tm, mk):
        if tm.T < 2:
            raise ValueError(f"{self.family}: T must be >= 2 (B0 does not exist at T = 1), got {tm.T}")
        super().__init__(model, size, tm, mk)
        self.reg = float(size.get("reg", self.default_reg))
        self.shape = (3,)
        self.Q, self.b = block_quadratic(tm, mk, self.reg)

    def f(self, x) -> float:
        x = np.asarray(x, dtype=float)
        return float(x @ self.Q @ x - 2.0 * self.b @ x + 1.0)

    def grad(self, x) -> np.ndarray:
        return 2.0 * (self.Q @ np.asarray(x, dtype=float) - self.b)

    def hvp(self, x, u) -> np.ndarray:
        """``2 Q u`` (exact; the objective is quadratic)."""
        return 2.0 * (self.Q @ np.asarray(u, dtype=float))

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(3)
        return np.random.default_rng(seed).standard_normal(3) / math.sqrt(self.tm.T * self.tm.v)

    def reference(self) -> np.ndarray:
        A, B0, gamma, _ = value_block_constants(self.tm, self.mk, reg=self.reg)
        return np.array([A, B0, gamma])

    def matrix(self, x) -> BlockValueMatrix:
        """The ``V1 x V1`` block matrix of ``x`` (O(1) storage)."""
        return BlockValueMatrix(float(x[0]), float(x[1]), float(x[2]), self.tm.T, self.tm.v)

    def _range(self):
        ev, U = np.linalg.eigh(self.Q)
        keep = ev > 1e-12 * ev.max()
        return U[:, keep], float(ev[keep].min())

    def _optimum(self):
        x = self.reference()
        exact = exact_stage1_value(self.tm, self.mk, self.reg)
        return exact_certificate(self, exact, self.f(x), "the block form, SPEC §4.2"), x

    def identifiable(self, x) -> np.ndarray:
        U, _ = self._range()
        return U @ (U.T @ np.asarray(x, dtype=float))


class ValueBlockRidge(ValueBlock):
    """Stage-1 ``W^V`` ridge in the block form (``+ reg ||W||_F^2``, strongly convex; SPEC §4.2)."""

    family = "stage1-value/block-ridge"
    default_reg = 1e-3
