"""Minimum-norm tied embedding Gram for a :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.5).

Tied decoder, uniform attention, ``W^V = I``, squared loss, N -> inf: ``L(G) = value_loss(G, g, mk, b)``
over PSD ``G = (W^E)^T W^E``. With the factors ``Sigma = X X^T``, ``C = Y X^T`` of SPEC §11.5
(``a > 0``), ``G`` attains ``L* = 1 - tr(Phi^T M2 Phi)`` iff ``G X = Y``; ``X^T Y = L^T K L`` with
``K = a Phi Phi^T + (r/n) 1 1^T`` is symmetric PSD, and the least-trace (minimum ``||W^E||_F^2``) PSD
solution is

.. math::  G^* = Y (X^T Y)^+ Y^T \\quad (\\text{rank} \\le T).

With a free decoder bias (``bias=True``) the conditions are ``G d = d / a`` on
``D = Phi^T range(Cov theta)`` and ``b = E[p] - G E[m]``; the least-trace ``G`` is ``Pi_D / a``.

Methods: ``"closed-form"`` (the formulas, O(n T^2), a :class:`~theorycheck.solvers.LowRankMatrix` ``F F^T``;
``info["W_E"] = F^T`` is an optimal embedding of dimension ``rank``) and ``"cvxpy"`` (independent:
the SDP ``min tr G`` s.t. ``G >= 0``, ``G U_k = C U_k Lambda_k^{-1}`` from the eigen-decomposition
``Sigma U_k = U_k Lambda_k`` of the dense (centred, with a bias) moments; small V1).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ..._memory import check_alloc
from ..._validate import check_int, check_real
from ...population import moments
from ...population._moments import stage1_factors
from ...population._value_loss import min_value_loss
from .._certify import SOLVER_FAILURE, SUCCESS, certify, check_contract, cvxpy_status
from .._cvxpy import cvxpy
from .._result import SolveResult
from ..value._lowrank import LowRankMatrix

__all__ = ["general_optimal_embedding_gram", "general_gram_residuals", "general_closed_form_gram"]

GENERAL_GRAM_METHODS = ("closed-form", "cvxpy")
#: Largest V1 for the SDP (a V1 x V1 PSD cone).
CVXPY_MAX_V1 = 81
DEFAULT_TOL = 1e-6


def general_closed_form_gram(g, mk, *, bias: bool = False):
    """``(G, b)``: the minimum-norm optimal Gram as ``LowRankMatrix(F, F)`` and the optimal bias (or None)."""
    if not bias:
        F = stage1_factors(g, mk)
        K = F.X.T @ F.Y
        lam, V = np.linalg.eigh((K + K.T) / 2)
        keep = lam > max(K.shape) * np.finfo(float).eps * lam.max() if lam.size else lam > 0
        factor = (F.Y @ V[:, keep]) / np.sqrt(lam[keep])
        return LowRankMatrix(factor, factor), None
    Fc = stage1_factors(g, mk, centred=True)
    U, s, _ = np.linalg.svd(Fc.Y, full_matrices=False)
    # absolute threshold: Y_c = Phi^T L_c can vanish (identical topics) up to round-off of ||Phi|| ||L_c||
    scale = np.linalg.norm(g.phi, 2) * (np.linalg.norm(Fc.L, 2) if Fc.L.size else 0.0)
    factor = U[:, s > max(Fc.Y.shape) * np.finfo(float).eps * scale] / math.sqrt(mk.a)
    G = LowRankMatrix(factor, factor)
    return G, Fc.Ep - G @ Fc.Em


def _loss(GX, GEm, F, b) -> float:
    loss = float(np.sum(GX * GX)) - 2.0 * float(np.sum(GX * F.Y)) + 1.0
    if b is not None:
        loss += 2.0 * float(b @ GEm) + float(b @ b) - 2.0 * float(b @ F.Ep)
    return loss


def general_gram_residuals(G, g, mk, b=None) -> tuple[dict, float]:
    """``(residuals, loss)`` of a candidate Gram (dense or :class:`LowRankMatrix`) and bias.

    ``loss_gap = L(G, b) - L*``; ``min_eig`` (0 for a factored ``F F^T``, PSD by construction);
    ``asymmetry``; ``minimiser_violation = ||G X - Y||_F`` (no bias) or
    ``||G X_c - Y_c||_F + ||G E[m] + b - E[p]||`` (centred factors, bias), scale
    ``max(||Y||_F, ||E[p]||)``.
    """
    F = stage1_factors(g, mk)
    Fz = stage1_factors(g, mk, centred=True) if b is not None else F
    if isinstance(G, LowRankMatrix):
        min_eig, asym, gnorm = 0.0, float(np.max(np.abs(G.left - G.right), initial=0.0)), G.fro_norm
    else:
        min_eig = float(np.linalg.eigvalsh((G + G.T) / 2)[0])
        asym, gnorm = float(np.max(np.abs(G - G.T))), float(np.linalg.norm(G))
    loss = _loss(G @ F.X, G @ F.Em, F, b)
    viol = float(np.linalg.norm(G @ Fz.X - Fz.Y))
    if b is not None:
        viol += float(np.linalg.norm(G @ F.Em + b - F.Ep))
    res = {
        "loss": loss,
        "loss_gap": loss - min_value_loss(g, mk),
        "min_eig": min_eig,
        "asymmetry": asym,
        "gram_norm": gnorm,
        "minimiser_violation": viol,
        "minimiser_violation_rel": viol / max(float(np.linalg.norm(Fz.Y)), float(np.linalg.norm(F.Ep))),
    }
    return res, loss


def _checks(res: dict) -> dict:
    scale = max(res["gram_norm"], 1e-300)
    return {
        "loss_gap": (res["loss_gap"], 1.0),
        "min_eig": (min(res["min_eig"], 0.0), scale),
        "asymmetry": (res["asymmetry"], scale),
        "minimiser_violation": (res["minimiser_violation_rel"], 1.0),
    }


def _solve_cvxpy(g, mk, bias, solver, options):
    cp = cvxpy()
    Sigma, C = moments(g, mk)
    F = stage1_factors(g, mk)
    scale = float(np.trace(Sigma))  # >= the largest eigenvalue of the raw and the centred moment
    if bias:  # centred moments: G (m - E m) = p - E p
        Sigma, C = Sigma - np.outer(F.Em, F.Em), C - np.outer(F.Ep, F.Em)
    lam, V = np.linalg.eigh((Sigma + Sigma.T) / 2)
    keep = lam > 1e-10 * scale
    if not keep.any():
        G = np.zeros((g.V1, g.V1))
        return G, (F.Ep.copy() if bias else None), {"backend_status": "optimal", "detail": "trivial problem: G = 0"}
    # basis Q = [range(Sigma), null(Sigma)]: G Q[:, :k] = B fixes the first k columns of Gp = Q^T G Q;
    # each symmetric entry is constrained once (no redundant equalities)
    Q = np.hstack([V[:, keep], V[:, ~keep]])
    n, k = g.V1, int(keep.sum())
    target_full = Q.T @ ((C @ Q[:, :k]) / lam[keep])
    target_full[:k] = (target_full[:k] + target_full[:k].T) / 2
    rows, cols = np.nonzero(np.tril(np.ones((n, n)))[:, :k])
    Gv = cp.Variable((n, n), PSD=True)
    cons = cp.vec(Gv, order="F")[cols * n + rows] == target_full[rows, cols]
    prob = cp.Problem(cp.Minimize(cp.trace(Gv)), [cons])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            prob.solve(solver=solver, **options)
        except cp.error.SolverError as exc:
            return None, None, {"backend_status": "error", "detail": f"cvxpy solver {solver} failed: {exc}"}
    info = {"backend_status": str(prob.status), "backend_solver": solver}
    if Gv.value is None:
        return None, None, info
    G = Q @ ((Gv.value + Gv.value.T) / 2) @ Q.T
    return G, (F.Ep - G @ F.Em if bias else None), info


def _validate(g, mk, method, reg, tol, solver, options, d, bias, extras, max_bytes):
    mk.require_informative("optimal_embedding_gram")
    if method not in GENERAL_GRAM_METHODS:
        raise ValueError(f"method must be one of {GENERAL_GRAM_METHODS} for a GeneralTopicModel, got {method!r}")
    reg = check_real("reg", reg, low=0.0)
    if reg != 0.0:
        raise ValueError(f"reg={reg!r}: for a GeneralTopicModel only the minimum-norm (reg = 0) Gram is available")
    tol, options = check_contract(method, tol, solver, options, uses_solver=method == "cvxpy",
                                  uses_options=method == "cvxpy", stacklevel=9)  # fmt: skip
    given = [n for n, val in extras.items() if val is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: only used by method='factorized' (symmetric TopicModel only)")
    if not isinstance(bias, bool | np.bool_):
        raise TypeError(f"bias must be a bool, got {bias!r}")
    if d is not None:
        d = check_int("d", d, low=1)
        rank = general_closed_form_gram(g, mk, bias=bool(bias))[0].rank  # O(n T^2)
        if d < rank:
            raise ValueError(f"d={d} is too small: every optimal Gram has rank >= {rank}, so d must be >= {rank}")
    if method == "cvxpy":
        k = g.V1 * (g.V1 + 1) // 2
        check_alloc("optimal_embedding_gram(method='cvxpy')", (k, k), max_bytes=max_bytes,
                    alternative="method='closed-form' (a LowRankMatrix, O(n T^2))")  # fmt: skip
        if g.V1 > CVXPY_MAX_V1:
            raise ValueError(f"method='cvxpy' needs V1 <= {CVXPY_MAX_V1}, got V1 = {g.V1}; use method='closed-form'")
    return tol, options, d, bool(bias)


def general_optimal_embedding_gram(g, mk, method, reg, tol, solver, opts, d, bias) -> SolveResult:
    """Minimum-norm optimal tied Gram of any model (SPEC §11.5), the generic route of
    :func:`theorycheck.solvers.optimal_embedding_gram` (``reg = 0``; methods ``"closed-form"``, ``"cvxpy"``).

    ``x``: :class:`LowRankMatrix` (closed form) or ndarray (cvxpy); ``info``: ``b`` (bias or None),
    ``rank``, ``trace``, ``W_E`` (closed form: an optimal ``(rank, V1)`` embedding); ``d < rank`` raises.
    """
    extras = {"seed": opts.seed, "init_scale": opts.init_scale, "maxiter": opts.maxiter}
    tol, options, d, bias = _validate(
        g, mk, method, reg, tol, solver, opts.solver_options, d, bias, extras, opts.max_bytes
    )
    t0 = time.perf_counter()
    backend, detail = SUCCESS, ""
    if method == "closed-form":
        G, b = general_closed_form_gram(g, mk, bias=bias)
        rank = G.rank
        info = {"b": b, "rank": rank, "trace": float(np.sum(G.left * G.left)), "W_E": G.left.T.copy()}
    else:
        G, b, info = _solve_cvxpy(g, mk, bias, solver or "CLARABEL", options)
        backend = SOLVER_FAILURE if G is None else cvxpy_status(info["backend_status"])
        detail = info.pop("detail", f"backend status {info['backend_status']}")
        if G is not None:
            rank = int(np.sum(np.linalg.eigvalsh(G) > 1e-8 * max(np.abs(G).max(), 1e-300)))
            info.update(b=b, rank=rank, trace=float(np.trace(G)))
    elapsed = time.perf_counter() - t0
    if G is None:
        status, message, _ = certify({}, tol, backend=backend, detail=detail)
        return SolveResult(None, math.nan, status, method, message, 0, elapsed, {}, info)
    res, loss = general_gram_residuals(G, g, mk, b)
    status, message, rel = certify(_checks(res), tol, backend=backend, detail=detail)
    info.update(tol=tol, relative_residuals=rel, predicted_min_loss=min_value_loss(g, mk), general=True)
    return SolveResult(G, loss, status, method, message, 0, elapsed, res, info)
