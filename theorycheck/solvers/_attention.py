"""Certified optimum of the (alpha, beta) attention family (SPEC §4.3, §6 items 15-18).

``optimal_attention(tm, mk, value)`` minimises the closed form
:func:`theorycheck.population.alpha_beta_loss` and returns a :class:`SolveResult` whose ``info``
entries are also attributes (``res.alpha``, ``res.beta``, ``res.K``, ``res.loss``, ...).

Certificate (both values):

1. a dense grid (1-d over ``log K`` for the block ``W^V``, 2-d over ``(alpha, beta)`` for the
   identity) and a *grid lower bound*: on each grid cell the loss is at least the cell's smaller
   endpoint value minus ``Lip * h / 2`` (1-d) / ``Lip * diam / 2`` (2-d), with ``Lip`` twice the
   largest finite-difference slope seen on the grid; the minimum over cells is the bound.
   This is a numerical certificate (the Lipschitz constant is estimated, with a safety factor 2),
   not a proof.
2. the limits of the loss outside the grid (``|log K|``, ``|alpha|``, ``|beta|`` -> 1e4) must
   exceed the optimum, so the minimiser is not at infinity;
3. local refinement (scipy bounded Brent / L-BFGS-B) from the best grid point, a
   finite-difference stationarity residual, and (when affordable) the loss recomputed at the
   optimum by the general evaluator :func:`theorycheck.population.attention_loss`.

For the block ``W^V`` the loss depends only on ``K = e^alpha + (v - 1) e^beta`` (a flat direction):
the canonical representative reported is ``alpha* = beta* = log(K*/v)`` (uniform per-word weight
``K*/v`` on the query's own topic), and ``info["flat_direction"]`` says so.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import optimize

from .._validate import check_choice, check_int
from ..config import Masking, TopicModel
from ..population._alpha_beta import (
    LOSSES,
    _check,
    alpha_beta_loss,
    alpha_beta_loss_logK,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
)
from ._result import SolveResult

__all__ = ["optimal_attention"]

_FAR = 1.0e4
_GENERAL_CHECK_MAX_WORK = 5.0e8  # C(T, tau) * V1^2 * tau^2-ish budget for the general-evaluator residual


def _local_max(a, axis):
    """Max of ``a`` over each entry and its two neighbours along ``axis`` (edges replicated)."""
    lo = np.take(a, [0], axis=axis)
    hi = np.take(a, [-1], axis=axis)
    p = np.concatenate([lo, a, hi], axis=axis)
    n = a.shape[axis]
    sl = lambda s: np.take(p, np.arange(s, s + n), axis=axis)  # noqa: E731
    return np.maximum(np.maximum(sl(0), sl(1)), sl(2))


def _lower_bound_1d(x, f):
    """Per-cell bound ``min(f_i, f_{i+1}) - Lip_i h / 2``, ``Lip_i`` = 2 x max neighbouring slope."""
    h = np.diff(x)
    lip = 2.0 * _local_max(np.abs(np.diff(f)) / h, 0)
    cell_min = np.minimum(f[:-1], f[1:]) - lip * h / 2.0
    return float(cell_min.min()), float(lip.max())


def _lower_bound_2d(F, ha, hb):
    """Per-cell bound ``min(corners) - Lip_cell diam / 2`` with locally estimated ``Lip_cell``."""
    sa = np.abs(np.diff(F, axis=0)) / ha  # (na-1, nb)
    sb = np.abs(np.diff(F, axis=1)) / hb  # (na, nb-1)
    ca = np.maximum(sa[:, :-1], sa[:, 1:])
    cb = np.maximum(sb[:-1, :], sb[1:, :])
    lip = 2.0 * _local_max(_local_max(np.maximum(ca, cb), 0), 1)
    corners = np.minimum.reduce([F[:-1, :-1], F[1:, :-1], F[:-1, 1:], F[1:, 1:]])
    diam = math.hypot(ha, hb)
    return float((corners - lip * diam / 2.0).min()), float(lip.max())


def _general_residual(alpha, beta, L, tm, mk, value, loss):
    work = tm.n_topic_sets * tm.V1 * (tm.V1 + tm.tau**2)
    if loss == "ce":
        work = tm.n_topic_sets * tm.V1**3
    if tm.V1 > 2001 or work > _GENERAL_CHECK_MAX_WORK:
        return None
    from ..population._attention_loss import attention_loss

    S = alpha_beta_score_matrix(alpha, beta, tm)
    W = alpha_beta_value_matrix(tm, mk, value)
    return abs(attention_loss(S, W, tm, mk, loss=loss) - L)


def optimal_attention(
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    loss: str = "sq",
    n_grid: int | None = None,
    check_general: bool = True,
    tol: float = 1e-9,
) -> SolveResult:
    """Global minimiser of ``L(alpha, beta)`` with a grid certificate (SPEC §4.3).

    Parameters
    ----------
    tm, mk : TopicModel, Masking
    value : {"block", "identity"}
        Frozen ``W^V`` (see :func:`theorycheck.population.alpha_beta_loss`).
    loss : {"sq", "ce"}
        Squared loss (the theory) or cross-entropy (the paper's experiments); both closed forms.
    n_grid : int, optional
        Grid points per axis (default 20001 over ``log K in [-30, 60]`` for block; 401 per axis
        over ``alpha in [-10, 40] x beta in [-40, 20]`` for identity).
    check_general : bool
        Recompute the loss at the optimum with the general evaluator when affordable.
    tol : float
        Tolerance on the stationarity and general-evaluator residuals.

    Returns
    -------
    SolveResult
        ``x = [alpha, beta]``, ``fun = L*``; ``info`` (also attributes): ``alpha``, ``beta``,
        ``K``, ``logK``, ``loss``, ``loss_uniform`` (``L(0, 0)``), ``gap_to_uniform``,
        ``attention_ratio`` (per-word same-topic : different-topic weight ``K/v``),
        ``same_word_weight`` (``e^alpha``), ``same_topic_weight`` (``e^beta``), ``certificate``
        (dict), ``flat_direction`` (str), ``at_boundary`` (bool).

    Status codes: 0 certified; 1 the minimiser sits on the search box (e.g. ``beta* -> -inf``,
    reported with the box value); 3 a residual check failed; 4 non-finite values.
    """
    _check(tm, mk, value)
    check_choice("loss", loss, LOSSES)
    t0 = time.perf_counter()
    if value == "block":
        res = _solve_block(tm, mk, n_grid or 20001, tol, loss)
    else:
        res = _solve_identity(tm, mk, n_grid or 401, tol, loss)
    res.info["loss_kind"] = loss
    alpha, beta, Lstar = res.info["alpha"], res.info["beta"], res.info["loss"]
    if check_general:
        r = _general_residual(alpha, beta, Lstar, tm, mk, value, loss)
        if r is not None:
            res.residuals["general_evaluator"] = r
            if not r <= 1e-10:
                res.status = 3
    if not all(np.isfinite(v) for v in (alpha, beta, Lstar)):
        res.status = 4
    res.message = _message(res)
    res.time = time.perf_counter() - t0
    return res


def _message(res):
    from ._result import STATUS_MESSAGES

    msg = STATUS_MESSAGES[res.status]
    if res.info.get("beta_to_minus_inf"):
        msg += " beta* = -inf (reported as beta = -1e4): same-topic other-word attention does not help."
    elif res.info.get("at_boundary"):
        msg += " The minimiser lies on the search box (the optimum is at infinity along that direction)."
    return msg


def _common_info(tm, mk, value, alpha, beta, loss, kind="sq"):
    L0 = float(alpha_beta_loss(0.0, 0.0, tm, mk, value, loss=kind))
    logK = float(np.logaddexp(alpha, math.log(tm.v - 1) + beta)) if tm.v > 1 else alpha
    K = math.exp(logK) if logK < 700 else math.inf
    return dict(
        alpha=float(alpha),
        beta=float(beta),
        K=K,
        logK=logK,
        loss=float(loss),
        loss_uniform=L0,
        gap_to_uniform=L0 - float(loss),
        attention_ratio=K / tm.v,
        same_word_weight=math.exp(min(alpha, 700.0)),
        same_topic_weight=math.exp(min(beta, 700.0)),
    )


def _solve_block(tm, mk, n_grid, tol, kind="sq"):
    n_grid = check_int("n_grid", n_grid, low=11)
    f = lambda lk: float(alpha_beta_loss_logK(lk, tm, mk, loss=kind))  # noqa: E731
    x = np.linspace(-30.0, 60.0, n_grid)
    F = np.asarray(alpha_beta_loss_logK(x, tm, mk, loss=kind))
    flat = bool(np.ptp(F) <= 1e-14 * max(1.0, abs(float(F[0]))))
    if flat:  # e.g. only [MASK] queries, or a context of document words only: L does not depend on K
        i = int(np.argmin(np.abs(x - math.log(tm.v))))
    else:
        i = int(np.argmin(F))
    lo, hi = x[max(i - 1, 0)], x[min(i + 1, n_grid - 1)]
    r = optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options=dict(xatol=1e-12))
    lk = float(r.x) if (r.fun <= F[i] and not flat) else float(x[i])
    if flat:
        lk = math.log(tm.v)
    Lstar = f(lk)
    lb, lip = _lower_bound_1d(x, F)
    tails = (f(-_FAR), f(_FAR))
    h = 1e-4
    d1 = (f(lk + h) - f(lk - h)) / (2 * h)
    d2 = (f(lk + h) - 2 * Lstar + f(lk - h)) / (h * h)
    at_boundary = i in (0, n_grid - 1)
    cert = dict(
        grid=[float(x[0]), float(x[-1]), n_grid],
        grid_min=float(F[i]),
        grid_lower_bound=lb,
        lipschitz_est=lip,
        certified_gap=Lstar - lb,
        tail_logK_minus=tails[0],
        tail_logK_plus=tails[1],
        tails_above_optimum=bool(min(tails) > Lstar),
        dL_dlogK=d1,
        d2L_dlogK2=d2,
        flat_in_K=flat,
    )
    alpha = beta = lk - math.log(tm.v)  # canonical: K* spread evenly over the v words of the topic
    status = 0
    if flat:
        at_boundary = False  # every K is optimal; canonical K* = v (uniform attention)
    elif at_boundary:
        status = 1
    elif not (cert["tails_above_optimum"] and abs(d1) <= max(tol, 1e-6) and lb <= Lstar + 1e-15):
        status = 3
    info = _common_info(tm, mk, "block", alpha, beta, Lstar, kind)
    info.update(
        certificate=cert,
        at_boundary=at_boundary,
        flat_direction=(
            "L depends on (alpha, beta) only through K = e^alpha + (v-1) e^beta; any (alpha, beta) with this K "
            "is optimal. Reported canonical representative: alpha* = beta* = log(K*/v)."
        ),
    )
    return SolveResult(
        x=np.array([alpha, beta]),
        fun=Lstar,
        status=status,
        method="grid+brent(logK)",
        nit=int(r.nit),
        residuals={"dL_dlogK": abs(d1), "grid_gap": Lstar - lb},
        info=info,
    )


def _solve_identity(tm, mk, n_grid, tol, kind="sq"):
    n_grid = check_int("n_grid", n_grid, low=11)
    A = np.linspace(-10.0, 40.0, n_grid)
    B = np.linspace(-40.0, 20.0, n_grid)
    F = np.asarray(alpha_beta_loss(A[:, None], B[None, :], tm, mk, "identity", loss=kind))
    i, j = np.unravel_index(int(np.argmin(F)), F.shape)
    fun = lambda z: float(alpha_beta_loss(z[0], z[1], tm, mk, "identity", loss=kind))  # noqa: E731
    box = [(-60.0, 60.0), (-60.0, 60.0)]
    r = optimize.minimize(
        fun, x0=[A[i], B[j]], method="L-BFGS-B", bounds=box, options=dict(ftol=1e-15, gtol=1e-11, maxiter=2000)
    )
    z = np.asarray(r.x) if r.fun <= F[i, j] else np.array([A[i], B[j]])
    r2 = optimize.minimize(fun, x0=z, method="Nelder-Mead", options=dict(xatol=1e-9, fatol=1e-15, maxiter=4000))
    if r2.fun < fun(z) and all(lo <= zz <= hi for zz, (lo, hi) in zip(r2.x, box)):
        z = np.asarray(r2.x)
    beta_to_minus_inf = fun([z[0], -_FAR]) <= fun(z) + 1e-13
    if beta_to_minus_inf:  # same-topic other-word attention useless: optimise alpha with beta = -1e4
        r3 = optimize.minimize_scalar(
            lambda a_: fun([a_, -_FAR]), bounds=(z[0] - 5.0, z[0] + 5.0), method="bounded", options=dict(xatol=1e-10)
        )
        z = np.array([float(r3.x), -_FAR])
    alpha, beta = float(z[0]), float(z[1])
    Lstar = fun(z)
    lb, lip = _lower_bound_2d(F, A[1] - A[0], B[1] - B[0])
    h = 1e-5
    g = np.array([(fun(z + h * e) - fun(z - h * e)) / (2 * h) for e in np.eye(2)])
    tails = [fun([s * _FAR, t * _FAR]) for s in (-1, 0, 1) for t in (-1, 0, 1) if (s, t) != (0, 0)]
    tails += [fun([_FAR, beta]), fun([-_FAR, beta]), fun([alpha, _FAR])]
    if not beta_to_minus_inf:
        tails.append(fun([alpha, -_FAR]))
    else:
        g[1] = 0.0  # derivative along beta vanishes in the limit
    at_boundary = beta_to_minus_inf or any(abs(zz - lo) < 1e-6 or abs(zz - hi) < 1e-6 for zz, (lo, hi) in zip(z, box))
    cert = dict(
        grid=[[float(A[0]), float(A[-1])], [float(B[0]), float(B[-1])], n_grid],
        grid_min=float(F[i, j]),
        grid_lower_bound=lb,
        lipschitz_est=lip,
        certified_gap=Lstar - lb,
        tail_min=float(min(tails)),
        tails_above_optimum=bool(min(tails) > Lstar),
        gradient=g.tolist(),
    )
    status = 0
    if at_boundary:
        status = 1
    elif not (cert["tails_above_optimum"] and np.max(np.abs(g)) <= max(tol, 1e-6) and lb <= Lstar + 1e-15):
        status = 3
    info = _common_info(tm, mk, "identity", alpha, beta, Lstar, kind)
    info.update(
        certificate=cert,
        at_boundary=at_boundary,
        beta_to_minus_inf=bool(beta_to_minus_inf),
        flat_direction="none (alpha and beta are identified)",
    )
    return SolveResult(
        x=np.array([alpha, beta]),
        fun=Lstar,
        status=status,
        method="grid+L-BFGS-B+Nelder-Mead",
        nit=int(r.nit) + int(r2.nit),
        residuals={"gradient_norm": float(np.max(np.abs(g))), "grid_gap": Lstar - lb},
        info=info,
    )
