"""One result type for every solver (in the spirit of ``scipy.optimize.OptimizeResult``).

The status table (:data:`STATUS_MESSAGES`) and its codes live in :mod:`theorycheck.solvers._certify`,
the one place where a result is certified; ``success`` is always ``status == 0``, a property.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._certify import STATUS_MESSAGES

__all__ = ["SolveResult", "STATUS_MESSAGES"]


@dataclass
class SolveResult:
    """Result of an optimum computation (the one solver contract, SPEC §4.1-§4.3).

    Every solver of :mod:`theorycheck.solvers` returns one; ``success`` is ``status == 0`` (a property,
    never set on its own), and the entries of ``info`` are also attributes (``res.alpha``).

    Parameters
    ----------
    x : ndarray or structured matrix or None
        The optimum (``W^V``, a Gram matrix, or the ``(alpha, beta)`` vector); ``None`` when the backend
        returned no point.
    fun : float
        Objective value at ``x`` (recomputed by our own numpy code, not the backend's); NaN without a point.
    status : int
        A key of :data:`STATUS_MESSAGES`; ``0`` is success.
    method : str
        The method that produced ``x``.
    message : str, default ""
        Human-readable status (from :data:`STATUS_MESSAGES` plus details; ``""``: the table's message).
    nit : int, default 0
        Iterations used by the backend (0 for closed forms).
    time : float, default 0.0
        Wall time in seconds.
    residuals : dict, optional
        Named optimality residuals recomputed independently of the backend (absolute values; the
        relative values the status was judged on are in ``info["relative_residuals"]``).
    info : dict, optional
        Anything method-specific (closed-form scalars, backend status, ...); entries are also
        attributes (``res.alpha``).
    certificate : dict or None, default None
        An a-posteriori optimality certificate where one exists (duality gap and dual point of a
        convex program, error bound of a strongly convex problem, grid lower bound).

    Attributes
    ----------
    success : bool
        ``status == 0``.

    See Also
    --------
    optimal_value_matrix : Stage-1 ``W^V`` solver returning a SolveResult.
    optimal_embedding_gram : Tied-embedding Gram solver returning a SolveResult.
    optimal_attention : ``(alpha, beta)`` attention solver returning a SolveResult.

    References
    ----------
    SPEC §4.1-§4.3 (the optima) and §7 (certificates); the contract follows ``scipy.optimize.OptimizeResult``.

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> res = optimal_value_matrix(TopicModel(T=3, v=4, tau=2), Masking())
    >>> res.success, res.status, res.method
    (True, 0, 'closed-form')
    >>> round(res.fun, 12), round(res.A - res.B0, 6)  # L* = 1 - 1/(tau v); info entries are attributes
    (0.875, 0.289017)
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
    certificate: dict | None = None

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
        for k, v in (self.certificate or {}).items():
            if not isinstance(v, (np.ndarray, dict, list)):
                lines.append(f"  cert.{k}: {fmt(v)}")
        for k, v in self.info.items():
            if not isinstance(v, (np.ndarray, dict)):
                lines.append(f"  {k}: {fmt(v)}")
        return "SolveResult(\n" + "\n".join(lines) + "\n)"
