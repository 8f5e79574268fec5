"""Stage-1 ``W^V`` for a :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.3, §11.5).

The loss is ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1`` with ``Sigma = X X^T``, ``C = Y X^T``
(rank-``rho`` factors, :func:`theorycheck.population._moments.stage1_factors`). Three routes:

``"closed-form"``
    ``C (Sigma + reg I)^+ = Y (X^T X + reg I)^{-1} X^T`` through the thin SVD ``X = U S V^T``:
    ``W = (Y V diag(s / (s^2 + reg))) U^T`` (at ``reg = 0`` the minimum-norm ``C Sigma^+ = Y X^+``,
    equal to ``W° Pi`` of SPEC §11.3 when ``a > 0``). O(n T^2); returned as a rank ``<= T``
    :class:`LowRankMatrix` (dense when ``V1 <= 2001`` unless ``options.dense=False``).
``"lstsq"``
    Dense ``Sigma W^T = C^T`` by minimum-norm least squares (``reg = 0``) or ``C (Sigma + reg I)^{-1}``
    from the dense moments. O(V1^3).
``"cvxpy"``
    The QP ``min ||W||_F^2 s.t. W Sigma U_k = C U_k`` (``U_k`` the eigenvectors of the dense
    ``Sigma`` with non-zero eigenvalues; ``reg = 0``) or ``min L(W) + reg ||W||_F^2``; small V1.

Residuals (recomputed by our own code, certified by :func:`._certify.certify`): stationarity
``||W (Sigma + reg I) - C||_F`` (scale ``||C||_F``), loss gap ``L(W) - L*`` with
``L* = 1 - tr(Phi^T M2 Phi)`` (``a > 0``; SPEC §11.3) and the out-of-range part ``||W (I - Pi)||_F``
(scale ``||W||_F``), all from the factors (no dense moment matrix).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..._memory import check_alloc, check_work
from ..._validate import check_real
from ...population import moments
from ...population._moments import stage1_factors
from ...population._value_loss import min_value_loss
from .._certify import SOLVER_FAILURE, SUCCESS, certify, check_contract, cvxpy_status
from .._cvxpy import cvxpy
from .._result import SolveResult
from ._residuals import value_checks

__all__ = ["LowRankMatrix", "general_optimal_value_matrix", "general_value_residuals", "svd_range"]

GENERAL_VALUE_METHODS = ("closed-form", "lstsq", "cvxpy")
#: ``dense=None`` returns a dense array up to this V1, a :class:`LowRankMatrix` above.
DENSE_DEFAULT_MAX_V1 = 2001
#: Largest V1 for ``"lstsq"`` (O(V1^3)) and for ``"cvxpy"`` (V1^2 variables).
LSTSQ_MAX_V1 = 20001
CVXPY_MAX_V1 = 301
DEFAULT_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class LowRankMatrix:
    """``left @ right.T``, a ``(V1, V1)`` matrix of rank ``<= k`` stored by two ``(V1, k)`` factors.

    The structured stage-1 optimum of a general topic model (SPEC §11.3):
    ``W = Y V diag(s / (s^2 + reg)) U^T`` with rank ``<= T``. Supports ``W @ x`` in ``O(V1 k)``,
    :meth:`toarray` (guarded by a memory limit), ``shape``, ``rank`` and
    ``fro_norm = sqrt(sum((L^T L) * (R^T R)))``.

    Parameters
    ----------
    left : ndarray of shape (V1, k)
        Left factor ``L``.
    right : ndarray of shape (V1, k)
        Right factor ``R``.

    See Also
    --------
    optimal_value_matrix : Returns one for a general model with ``options={"dense": False}``.
    BlockValueMatrix : The paper's model's structured optimum.

    References
    ----------
    SPEC §11.3, §11.5 (the factored stage-1 optimum).

    Examples
    --------
    >>> from theorycheck.solvers import LowRankMatrix
    >>> W = LowRankMatrix(np.array([[1.0], [2.0], [0.0]]), np.array([[1.0], [0.0], [1.0]]))
    >>> W, W.fro_norm ** 2  # ||L R^T||_F^2 = ||L||^2 ||R||^2 at rank 1
    (LowRankMatrix(shape=(3, 3), rank=1), 10.0)
    >>> W.toarray()
    array([[1., 0., 1.],
           [2., 0., 2.],
           [0., 0., 0.]])
    >>> W @ np.ones(3)
    array([2., 4., 0.])

    The stage-1 optimum of an overlapping-topic model has rank ``T``:

    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> g = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, tau=2)
    >>> optimal_value_matrix(g, Masking(), options={"dense": False}).x
    LowRankMatrix(shape=(7, 7), rank=3)
    """

    left: np.ndarray
    right: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return (self.left.shape[0], self.right.shape[0])

    @property
    def rank(self) -> int:
        return int(self.left.shape[1])

    @property
    def fro_norm(self) -> float:
        """``||L R^T||_F = sqrt(sum((L^T L) * (R^T R)))``."""
        return math.sqrt(max(float(np.sum((self.left.T @ self.left) * (self.right.T @ self.right))), 0.0))

    def toarray(self, *, max_bytes=None) -> np.ndarray:
        """The dense matrix (checked against ``max_bytes`` first, ``theorycheck._memory.check_alloc``)."""
        check_alloc("LowRankMatrix.toarray", self.shape, max_bytes=max_bytes, alternative="the factors left, right")
        return self.left @ self.right.T

    def __array__(self, dtype=None, copy=None):
        arr = self.toarray()
        return arr if dtype is None else arr.astype(dtype)

    def __matmul__(self, x):
        return self.left @ (self.right.T @ np.asarray(x, dtype=float))

    def __repr__(self) -> str:
        return f"LowRankMatrix(shape={self.shape}, rank={self.rank})"


def svd_range(X: np.ndarray):
    """Thin SVD ``X = U S V^T`` truncated to ``s > max(X.shape) eps s_max`` (numerical rank)."""
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    keep = s > max(X.shape) * np.finfo(float).eps * s[0] if s.size else np.zeros(0, dtype=bool)
    return U[:, keep], s[keep], Vt[keep]


def _solve_closed_form(F, reg):
    U, s, Vt = svd_range(F.X)
    coef = 1.0 / s if reg == 0.0 else s / (s * s + reg)
    return LowRankMatrix((F.Y @ Vt.T) * coef, U), {"rank": int(s.size)}


def _solve_lstsq(g, mk, reg):
    Sigma, C = moments(g, mk)
    if reg == 0.0:
        X, _, rank, _ = np.linalg.lstsq(Sigma, C.T, rcond=None)
        return np.ascontiguousarray(X.T), {"rank": int(rank)}
    return np.ascontiguousarray(sla.solve(Sigma + reg * np.eye(g.V1), C.T, assume_a="pos").T), {}


def _solve_cvxpy(g, mk, reg, solver, options):
    cp = cvxpy()
    Sigma, C = moments(g, mk)
    lam, V = np.linalg.eigh(Sigma)
    keep = lam > 1e-10 * lam.max()
    Wv = cp.Variable((g.V1, g.V1))
    if reg == 0.0:
        Uk = V[:, keep]
        prob = cp.Problem(cp.Minimize(cp.sum_squares(Wv)), [Wv @ (Uk * lam[keep]) == C @ Uk])
    else:
        half = V[:, keep] * np.sqrt(lam[keep])
        prob = cp.Problem(
            cp.Minimize(cp.sum_squares(Wv @ half) - 2 * cp.sum(cp.multiply(Wv, C)) + reg * cp.sum_squares(Wv))
        )
    try:
        prob.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        return None, {"backend_status": "error", "detail": f"cvxpy solver {solver} failed: {exc}"}
    info = {"backend_status": str(prob.status), "backend_solver": solver}
    if Wv.value is None:
        return None, info
    return np.ascontiguousarray(Wv.value, dtype=float), info


def _products(W, F, U):
    """``W X``, ``||W||_F^2`` and ``||W (I - U U^T)||_F`` of a dense or factored ``W``."""
    if isinstance(W, LowRankMatrix):
        L, R = W.left, W.right
        LtL, RtR, RtU = L.T @ L, R.T @ R, R.T @ U
        out = float(np.sum(LtL * (RtR - RtU @ RtU.T)))
        return L @ (R.T @ F.X), W.fro_norm**2, math.sqrt(max(out, 0.0))
    return W @ F.X, float(np.sum(W * W)), float(np.linalg.norm(W - (W @ U) @ U.T))


def general_value_residuals(W, g, mk, reg: float, F=None) -> dict:
    """Loss and residuals of a candidate ``W`` (dense or :class:`LowRankMatrix`); keys as in
    :func:`theorycheck.solvers.optimal_value_matrix`'s ``residuals`` (module docstring)."""
    F = stage1_factors(g, mk) if F is None else F
    U, _, _ = svd_range(F.X)
    WX, W_sq, out_of_range = _products(W, F, U)
    E = WX - F.Y
    XtX = F.X.T @ F.X
    stat2 = float(np.sum((E.T @ E) * XtX)) + 2.0 * reg * float(np.sum(E * WX)) + reg * reg * W_sq
    c_fro = math.sqrt(max(float(np.sum((F.Y.T @ F.Y) * XtX)), 0.0))
    loss = float(np.sum(WX * WX)) - 2.0 * float(np.sum(WX * F.Y)) + 1.0
    stat = math.sqrt(max(stat2, 0.0))
    fro = math.sqrt(W_sq)
    res = {
        "stationarity": stat,
        "stationarity_rel": stat / c_fro if c_fro > 0 else stat,
        "loss": loss,
        "objective": loss + reg * W_sq,
    }
    if reg > 0.0:
        res["error_bound"] = stat / reg  # Hessian 2 (Sigma + reg I) >= 2 reg I
    else:
        res["loss_gap"] = loss - min_value_loss(g, mk)
        res["range_violation"] = out_of_range
        res["range_violation_rel"] = out_of_range / fro if fro > 0 else out_of_range
    return res


#: ``V1 x T x T`` passes of the general closed form (factors, thin SVD, residuals): the time guard's estimate.
_CLOSED_FORM_PASSES = 12


def _validate(g, mk, method, reg, tol, solver, options, dense, max_bytes):
    mk.require_masked_positions("the stage-1 value problem")
    if method not in GENERAL_VALUE_METHODS:
        raise ValueError(f"method must be one of {GENERAL_VALUE_METHODS} for a GeneralTopicModel, got {method!r}")
    reg = check_real("reg", reg, low=0.0)
    tol, options = check_contract(method, tol, solver, options, uses_solver=method == "cvxpy",
                                  uses_options=method == "cvxpy", stacklevel=9)  # fmt: skip
    if dense is not None and not isinstance(dense, bool):
        raise TypeError(f"dense must be None, True or False, got {dense!r}")
    if method == "closed-form":
        # the factors' thin SVD and the residuals: O(V1 T^2) each (T >= the rank rho), the dense moments O(T^3)
        check_work(f"optimal_value_matrix(method='closed-form') with V1 = {g.V1}, T = {g.T}",
                   _CLOSED_FORM_PASSES * g.V1 * g.T * g.T + 10 * g.T**3,
                   alternative="a smaller model (fewer topics or words)")  # fmt: skip
        dense = (g.V1 <= DENSE_DEFAULT_MAX_V1) if dense is None else dense
        if dense:
            check_alloc("optimal_value_matrix(options.dense=True): V1 x V1 W^V", (g.V1, g.V1), max_bytes=max_bytes,
                        alternative="options={'dense': False} (a LowRankMatrix of rank <= T)")  # fmt: skip
        return reg, tol, options, dense
    if dense is False:
        raise ValueError(f"options.dense=False is only available for method='closed-form' (method={method!r} is dense)")
    check_alloc(f"optimal_value_matrix(method={method!r}): Sigma, C and W, each V1 x V1", (3, g.V1, g.V1),
                max_bytes=max_bytes, alternative="method='closed-form' (a LowRankMatrix, O(n T^2))")  # fmt: skip
    limit = CVXPY_MAX_V1 if method == "cvxpy" else LSTSQ_MAX_V1
    if g.V1 > limit:
        raise ValueError(f"method={method!r} needs V1 <= {limit} for a GeneralTopicModel, got V1 = {g.V1}; "
                         "use method='closed-form'")  # fmt: skip
    return reg, tol, options, True


def general_optimal_value_matrix(g, mk, method, reg, tol, solver, opts) -> SolveResult:
    """Optimal stage-1 ``W^V`` of any model (SPEC §11.3, §11.5), the generic route of
    :func:`theorycheck.solvers.optimal_value_matrix` (arguments validated there; module docstring for the methods).

    ``x``: ndarray or :class:`LowRankMatrix`; ``fun``: ``L(W) + reg ||W||_F^2`` recomputed from the
    factors; ``info["predicted_min_loss"]`` is ``L*`` (SPEC §11.3).
    """
    max_bytes = opts.max_bytes
    reg, tol, options, dense = _validate(g, mk, method, reg, tol, solver, opts.solver_options, opts.dense, max_bytes)
    t0 = time.perf_counter()
    F = stage1_factors(g, mk)
    backend, detail = SUCCESS, ""
    if method == "closed-form":
        W, info = _solve_closed_form(F, reg)
        W = W.toarray(max_bytes=max_bytes) if dense else W
    elif method == "lstsq":
        W, info = _solve_lstsq(g, mk, reg)
    else:
        W, info = _solve_cvxpy(g, mk, reg, solver or "CLARABEL", options)
        backend = SOLVER_FAILURE if W is None else cvxpy_status(info["backend_status"])
        detail = info.pop("detail", f"backend status {info['backend_status']}")
    elapsed = time.perf_counter() - t0
    if W is None:
        status, message, _ = certify({}, tol, backend=backend, detail=detail)
        return SolveResult(None, math.nan, status, method, message, 0, elapsed, {}, info)
    res = general_value_residuals(W, g, mk, reg, F)
    status, message, rel = certify(value_checks(res), tol, backend=backend, detail=detail)
    info.update(reg=reg, tol=tol, relative_residuals=rel, predicted_min_loss=min_value_loss(g, mk), general=True)
    cert = {"error_bound": res["error_bound"]} if reg > 0.0 else None
    return SolveResult(W, res["objective"], status, method, message, 0, elapsed, res, info, cert)
