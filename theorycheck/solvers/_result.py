"""One result type for every solver (in the spirit of ``scipy.optimize.OptimizeResult``).

Status codes (module-level table, shared by all solvers):

==== ==========================================================================
code meaning
==== ==========================================================================
0    converged; independent residual checks passed
1    iteration or time limit reached
2    the backend reported infeasible / unbounded / failure
3    the backend claimed success but our own residual check failed (downgraded)
4    numerical trouble (non-finite values encountered)
==== ==========================================================================

``success`` is always ``status == 0``; it is a property, never set on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SolveResult", "STATUS_MESSAGES"]

STATUS_MESSAGES = {
    0: "Optimisation terminated successfully; residuals within tolerance.",
    1: "Iteration or time limit reached before convergence.",
    2: "The backend solver reported failure (infeasible, unbounded or error).",
    3: "The backend reported success but the independent residual check failed.",
    4: "Numerical trouble: non-finite values encountered.",
}


@dataclass
class SolveResult:
    """Result of an optimum computation.

    Attributes
    ----------
    x : ndarray or float or None
        The optimum (a matrix such as ``W_V`` or a Gram matrix, or a parameter vector).
    fun : float
        Objective value at ``x`` (recomputed by our own numpy code, not the backend's).
    status : int
        See the module table; ``0`` is success.
    message : str
        Human-readable status (from :data:`STATUS_MESSAGES` plus details).
    method : str
        The method that produced ``x``.
    nit : int
        Iterations used by the backend (0 for closed forms).
    time : float
        Wall time in seconds.
    residuals : dict
        Named optimality residuals recomputed independently of the backend, e.g.
        ``{"stationarity": ||W (Sigma + reg I) - C||_F}``.
    info : dict
        Anything method-specific (closed-form scalars, backend status, duality gap, ...).
    """

    x: Any
    fun: float
    status: int
    method: str
    message: str = ""
    nit: int = 0
    time: float = 0.0
    residuals: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.message:
            self.message = STATUS_MESSAGES.get(self.status, "unknown status")

    @property
    def success(self) -> bool:
        return self.status == 0

    def __getattr__(self, name):
        # Expose info entries as attributes (e.g. ``res.alpha``), like OptimizeResult.
        info = self.__dict__.get("info", {})
        if name in info:
            return info[name]
        raise AttributeError(name)

    def __repr__(self) -> str:
        def fmt(v):
            if isinstance(v, float):
                return f"{v:.6g}"
            if isinstance(v, np.ndarray):
                return f"ndarray(shape={v.shape}, dtype={v.dtype})"
            return repr(v)

        lines = [
            f"  message: {self.message}",
            f"  success: {self.success}",
            f"   status: {self.status}",
            f"   method: {self.method}",
            f"      fun: {fmt(self.fun)}",
            f"        x: {fmt(self.x)}",
            f"      nit: {self.nit}",
            f"     time: {self.time:.3g} s",
        ]
        for k, v in self.residuals.items():
            lines.append(f"  resid.{k}: {fmt(v)}")
        for k, v in self.info.items():
            if not isinstance(v, np.ndarray):
                lines.append(f"  {k}: {fmt(v)}")
        return "SolveResult(\n" + "\n".join(lines) + "\n)"
