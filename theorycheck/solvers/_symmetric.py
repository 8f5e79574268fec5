"""Topic-symmetric (T+1) x (T+1) matrices in O(1) storage (used by the stage-1 solvers).

Every object of the uniform-attention stage-1 problem commutes with permutations of the topics:
in the orthonormal token-space basis ``Q = [1_1/sqrt(v), ..., 1_T/sqrt(v), e_0]`` the moments are
``Sigma = Q Sigma_hat Q^T``, ``C = Q C_hat Q^T`` and a block-constant ``W`` is ``Q K_hat Q^T``,
where the hatted matrices are ``(T+1) x (T+1)`` and of the form

.. math::
    M = \\begin{pmatrix} x I_T + y (J_T - I_T) & z 1_T \\\\ w 1_T^T & c \\end{pmatrix}.

Such matrices form an algebra isomorphic to ``R (+) R^{2x2}``: ``M`` acts as the scalar
``lam = x - y`` on the ``(T-1)``-dimensional space ``{(h, 0): 1^T h = 0}`` and as the 2 x 2 matrix

.. math::  M_2 = \\begin{pmatrix} x + (T-1) y & \\sqrt{T} z \\\\ \\sqrt{T} w & c \\end{pmatrix}

on the orthonormal pair ``(1_T/sqrt(T), 0), (0, 1)``. Products, transposes, pseudo-inverses,
traces and Frobenius norms are computed on ``(lam, M_2)`` in O(1), whatever T is. This is what lets
the solver certify its answer at ``T = 1000, v = 100`` (``V1 = 100001``) without a ``V1 x V1`` array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TopicSym"]


@dataclass(frozen=True)
class TopicSym:
    """A topic-symmetric ``(T+1) x (T+1)`` matrix stored as ``(lam, M2)`` (see module docstring)."""

    T: int
    lam: float
    M2: np.ndarray  # (2, 2)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_entries(cls, T: int, diag: float, off: float, col: float, row: float, corner: float) -> TopicSym:
        """From the entries: ``M[t,t] = diag``, ``M[t,s] = off`` (t != s), ``M[t,T] = col``,
        ``M[T,t] = row``, ``M[T,T] = corner``."""
        sT = math.sqrt(T)
        M2 = np.array([[diag + (T - 1) * off, sT * col], [sT * row, corner]], dtype=float)
        return cls(T, float(diag - off), M2)

    def entries(self) -> tuple[float, float, float, float, float]:
        """Inverse of :meth:`from_entries`: ``(diag, off, col, row, corner)``."""
        T, sT = self.T, math.sqrt(self.T)
        off = (self.M2[0, 0] - self.lam) / T
        return off + self.lam, off, self.M2[0, 1] / sT, self.M2[1, 0] / sT, self.M2[1, 1]

    def toarray(self) -> np.ndarray:
        """Dense ``(T+1, T+1)`` array (tests and moderate T only)."""
        d, o, z, w, c = self.entries()
        T = self.T
        M = np.full((T + 1, T + 1), o)
        M[np.arange(T), np.arange(T)] = d
        M[:T, T] = z
        M[T, :T] = w
        M[T, T] = c
        return M

    # ------------------------------------------------------------------ algebra
    def _check(self, other):
        if not isinstance(other, TopicSym) or other.T != self.T:
            raise TypeError("TopicSym operands must be TopicSym with the same T")

    def __matmul__(self, other: TopicSym) -> TopicSym:
        self._check(other)
        return TopicSym(self.T, self.lam * other.lam, self.M2 @ other.M2)

    def __add__(self, other: TopicSym) -> TopicSym:
        self._check(other)
        return TopicSym(self.T, self.lam + other.lam, self.M2 + other.M2)

    def __sub__(self, other: TopicSym) -> TopicSym:
        self._check(other)
        return TopicSym(self.T, self.lam - other.lam, self.M2 - other.M2)

    def scale(self, s: float) -> TopicSym:
        return TopicSym(self.T, s * self.lam, s * self.M2)

    @property
    def t(self) -> TopicSym:
        """Transpose."""
        return TopicSym(self.T, self.lam, self.M2.T.copy())

    def trace(self) -> float:
        return (self.T - 1) * self.lam + float(np.trace(self.M2))

    def fro(self) -> float:
        """Frobenius norm."""
        return math.sqrt((self.T - 1) * self.lam**2 + float(np.sum(self.M2 * self.M2)))

    def pinv(self, rcond: float = 1e-10) -> TopicSym:
        """Moore-Penrose pseudo-inverse; singular values below ``rcond * max`` count as zero."""
        s_all = np.linalg.svd(self.M2, compute_uv=False)
        scale = max(abs(self.lam) if self.T > 1 else 0.0, float(s_all.max()) if s_all.size else 0.0)
        cut = rcond * scale
        lam = 1.0 / self.lam if (self.T > 1 and abs(self.lam) > cut) else 0.0
        U, s, Vt = np.linalg.svd(self.M2)
        inv = np.where(s > cut, 1.0 / np.where(s > cut, s, 1.0), 0.0)
        return TopicSym(self.T, lam, (Vt.T * inv) @ U.T)

    @classmethod
    def identity(cls, T: int) -> TopicSym:
        return cls(T, 1.0, np.eye(2))

    @classmethod
    def diag_weights(cls, T: int, topic: float, last: float) -> TopicSym:
        """``diag(topic, ..., topic, last)``."""
        return cls.from_entries(T, topic, 0.0, 0.0, 0.0, last)


class TokenMatrixShape:
    """Mixin for structured ``V1 x V1`` token matrices that store ``T`` and ``v`` (no fields).

    Gives the array-like shape attributes (``V1 = T v + 1``, ``shape``, ``ndim``, ``dtype``) so
    such objects pass through code that inspects shapes before densifying them.
    """

    T: int
    v: int

    @property
    def V1(self) -> int:
        return self.T * self.v + 1

    @property
    def shape(self) -> tuple[int, int]:
        return (self.V1, self.V1)

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self):
        return np.dtype(np.float64)
