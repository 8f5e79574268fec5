"""The one place the solvers import cvxpy (SPEC §4.1, §4.2, §11.3, §11.5: the convex-program methods).

cvxpy is a dependency, but importing it costs about a second; the solvers that use it (``method="cvxpy"``
of :func:`~theorycheck.solvers.optimal_value_matrix` and :func:`~theorycheck.solvers.optimal_embedding_gram`)
call :func:`cvxpy` when they run, so ``import theorycheck`` stays fast.
"""

from __future__ import annotations

import importlib

__all__ = ["cvxpy"]


def cvxpy():
    """The ``cvxpy`` module (imported on first use)."""
    return importlib.import_module("cvxpy")
