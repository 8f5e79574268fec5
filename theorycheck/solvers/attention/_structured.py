"""The structured route of the general model's (alpha, beta) family search (SPEC §11.8).

For the label family ``S = alpha I_w + beta Z`` and the co-topic family ``S = alpha I_w + beta G`` with the
stage-1 ``W^V`` (factored, rank <= T), the identity or a given dense ``W^V`` (label family, squared loss),
:func:`theorycheck.solvers.optimal_attention` minimises the exact loss of
:func:`theorycheck.population.family_attention_loss` and its exact ``(alpha, beta)``-gradient: the coarse grid
of :mod:`._family` (``beta`` outer, so the ``beta``-tables are built once per grid column), then L-BFGS-B
from the best grid points, as the dense route does. No ``V1 x V1`` array is formed (``info["S"]`` and a
dense ``info["W"]`` only when ``V1 <=`` :data:`DENSE_INFO_MAX`).

A start ``x0`` (``options.x0`` of length 2, e.g. the optimum on fewer laws) replaces the grid: one L-BFGS-B run
from it (the basin is then the caller's choice). For sampled laws (Dirichlet, sampled sets) ``info`` also carries
the sampling covariance of the optimum (:func:`optimum_covariance`, the M-estimator sandwich).

What is certified: the projected gradient (exact, not finite differences) at the returned point and the
coarse grid (no point of it is below the optimum); with ``options.certify="interval"`` (squared loss,
uniform-tau) rigorous bounds: the label family's on all of ``R^2``, the co-topic family's on the search box (small
models) (:mod:`._interval_general`, SPEC §7).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ..._memory import check_alloc, check_work
from ..._progress import bar as progress_bar
from ..._validate import check_array
from ...population._attention_structured import make_evaluator, point_operations
from ...population._cotopic_pairs import build_cost
from .._options import ValueOptions
from ..value._solve import DEFAULT_TOL as VALUE_TOL
from ..value._solve import _optimal_value_matrix
from ._profile import profile_solve

__all__ = [
    "structured_family",
    "structured_solve",
    "optimum_covariance",
    "settle_at_infinity",
    "project_gradient",
    "DENSE_INFO_MAX",
    "FAMILY_NAMES",
    "RAY_DIRECTIONS",
]

#: Largest ``V1`` for which the structured route also returns the dense ``S`` and ``W`` in ``info``.
DENSE_INFO_MAX = 2001
_N_STARTS = 3
FAMILY_NAMES = {"label": "alpha I_w + beta Z (labels)", "co-topic": "alpha I_w + beta G (co-topic)"}
#: Rays ``c + t d`` (``t >= 0``) from a family optimum along which :func:`settle_at_infinity` looks for a limit at
#: infinity. The label family's key weights ``(e^{alpha+beta}, e^beta, 1)`` tend, along these eight directions, to
#: every vertex of their simplex and to the point of each edge through ``c`` (``(1, -1)``: ``beta -> -inf`` at fixed
#: ``alpha + beta``; ``(-1, 0)``: ``alpha + beta -> -inf`` at fixed ``beta``; ``(0, 1)``: ``beta -> +inf`` at fixed
#: ``alpha``; SPEC §11.8 and the compact chart of :mod:`._interval_label`).
RAY_DIRECTIONS = ((1.0, -1.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, 1.0), (-1.0, -1.0))
#: A ray's value at the box ``<= L(c) + TAIL_TOL max(1, |L(c)|)``: the loss does not rise along it (float resolution).
TAIL_TOL = 1e-13


def structured_family(family, value, loss):
    """The structured family name (``"label"`` / ``"co-topic"``) when the structured route applies, else None."""
    fam = "co-topic" if family is None else family
    if not isinstance(fam, str) or fam not in FAMILY_NAMES:
        return None
    if isinstance(value, str) and value in ("stage1", "block"):
        return fam
    return fam if (fam == "label" and loss == "squared") else None  # a dense W^V: label family, squared loss


def _value(g, mk, value):
    if isinstance(value, str) and value in ("stage1", "block"):
        opts = ValueOptions(dense=False)
        return _optimal_value_matrix(g, mk, "closed-form", 0.0, VALUE_TOL, None, opts).x, "stage1"
    if isinstance(value, str):  # "identity" (checked by the caller)
        check_alloc("optimal_attention: identity W^V", (g.V1, g.V1), alternative="value='stage1' (factored)")
        W = np.eye(g.V1)
        W[0, 0] = 0.0
        return W, "identity"
    return check_array("value", value, shape=(g.V1, g.V1)), "given"


def optimum_covariance(ev, c, *, rel_step: float = 1e-4):
    """Sampling covariance of the minimiser ``c`` of an average over sampled laws (the M-estimator sandwich).

    With ``L_n(c) = (1/n) sum_i l_i(c)`` and ``grad L_n(c_n) = 0``, ``c_n - c_inf ~ -H^{-1} (1/n) sum_i grad l_i``,
    so

    .. math:: \\mathrm{Cov}(c_n) \\approx H^{-1} \\frac{\\widehat{\\mathrm{Cov}}(\\nabla l_i(c_n))}{n} H^{-1},

    ``H`` the Hessian of ``L_n`` by central differences of its exact gradient (steps ``rel_step max(1, |c_k|)``,
    symmetrised), ``nabla l_i`` the exact per-law gradients (SPEC §11.8). ``None`` when ``H`` is not positive
    definite (no local minimum to expand around).
    """
    c = np.asarray(c, dtype=float)
    H = np.zeros((2, 2))
    for k in range(2):
        h = rel_step * max(1.0, abs(c[k]))
        up, dn = c.copy(), c.copy()
        up[k] += h
        dn[k] -= h
        gu, gd = (ev(float(p[0]), float(p[1]), True) for p in (up, dn))
        H[:, k] = (np.array([gu.dalpha, gu.dbeta]) - np.array([gd.dalpha, gd.dbeta])) / (2 * h)
    H = (H + H.T) / 2
    if not np.all(np.linalg.eigvalsh(H) > 0):
        return None
    _, da, db = ev.per_law(float(c[0]), float(c[1]), True)
    Hi = np.linalg.inv(H)
    return Hi @ (np.cov(np.stack([da, db])) / len(da)) @ Hi


def _ray_exit(c, d, lo, hi) -> float:
    """The largest ``t >= 0`` with ``c + t d`` in the box ``[lo, hi]``."""
    return float(min(((hi[k] if d[k] > 0 else lo[k]) - c[k]) / d[k] for k in range(len(c)) if d[k] != 0))


def settle_at_infinity(loss, c, L, box):
    """Whether the loss's infimum is a limit at infinity (or beyond the box) along a ray from the solver's point ``c``.

    For each direction ``d`` of :data:`RAY_DIRECTIONS` the ray ``c + t d`` is evaluated at a quarter, half and all of
    its way to the box's edge: when the loss there is finite and not above ``L = L(c)`` (within :data:`TAIL_TOL`)
    while some point behind ``c`` on the same line, ``c - t d`` with ``t = 1, 2, 4, ...`` inside the box, is above it,
    the loss falls towards ``c`` and does not rise beyond it: ``c`` is a point of a plateau whose infimum is a limit
    at infinity (e.g. the label family's ``beta -> -inf`` at fixed ``alpha + beta``, where the gradient ``~ e^beta``
    passes below any tolerance at a finite, arbitrary ``beta``), not an attained optimum. A loss constant along the
    whole line (every label a single word: ``L`` depends on ``alpha + beta`` only, a line of minimisers) is not
    flagged, nor is a ray with a non-finite value.

    Parameters
    ----------
    loss : callable
        ``loss(c) -> float`` on the family's coefficients.
    c : ndarray, shape (2,)
        The solver's point (inside ``box``).
    L : float
        ``loss(c)``.
    box : list of (lo, hi)
        The search box.

    Returns
    -------
    dict or None
        ``None`` when no ray qualifies; otherwise, for the qualifying ray of lowest edge value, ``direction``
        (``d``), ``edge`` (its point on the box's edge), ``fun_edge`` (the loss there), ``behind`` (the point behind
        ``c`` found above ``L``), ``fun_behind`` (the loss there), ``from`` (``c``) and ``fun_from`` (``L``).
    """
    c = np.asarray(c, dtype=float)
    lo, hi = np.array(box, dtype=float).T
    eps = TAIL_TOL * max(1.0, abs(L))
    best = None
    for d in map(np.array, RAY_DIRECTIONS):
        t_edge = _ray_exit(c, d, lo, hi)
        vals: list[float] = []
        for f in (1.0, 0.5, 0.25):  # the edge first: one evaluation per ray when the loss rises (the usual case)
            vals.insert(0, float(loss(np.clip(c + f * t_edge * d, lo, hi))) if t_edge > 0 else math.inf)
            if not (math.isfinite(vals[0]) and vals[0] <= L + eps):
                break
        if len(vals) < 3 or not (math.isfinite(vals[0]) and vals[0] <= L + eps):
            continue
        if best is not None and vals[-1] >= best["fun_edge"]:
            continue
        t_back, t_max = 1.0, _ray_exit(c, -d, lo, hi)
        while t_back <= t_max:
            Lb = float(loss(c - t_back * d))
            if math.isfinite(Lb) and Lb > L + eps:
                best = dict(direction=d.tolist(), edge=np.clip(c + t_edge * d, lo, hi).tolist(), fun_edge=vals[-1])
                best.update({"behind": (c - t_back * d).tolist(), "fun_behind": Lb, "from": c.tolist(), "fun_from": L})
                break
            t_back *= 2.0
    return best


def project_gradient(c, grad, box):
    """The gradient with its outward components on the box's faces set to 0 (KKT), and whether ``c`` is on a face."""
    lo, hi = np.array(box).T
    on_lo, on_hi = c <= lo + 1e-6, c >= hi - 1e-6
    return np.where((on_lo & (grad > 0)) | (on_hi & (grad < 0)), 0.0, grad), bool(np.any(on_lo | on_hi))


def _settle(ev, c, L, at_boundary, box):
    """:func:`settle_at_infinity` on the float evaluator (not on the box's faces): ``(at_boundary, ray or None)``; a
    limit at infinity counts as on the boundary (status ``ON_BOUNDARY``; the point stays the solver's)."""
    if at_boundary:
        return at_boundary, None
    ray = settle_at_infinity(lambda x: ev(float(x[0]), float(x[1])).value, c, L, box)
    return ray is not None, ray


def _check_grid_work(g, ev, fam, loss, n: int) -> None:
    """The time guard on the ``n x n`` grid of starts (``n`` beta-tables, ``n^2`` points; the refinement adds tens
    of points): a lower bound of the solve's work, refused above ``THEORYCHECK_MAX_SECONDS`` before the grid."""
    per_beta, per_point = point_operations(g, ev.op, fam, loss, len(ev.theta))
    check_work(
        f"optimal_attention ({fam} family, {loss} loss, V1 = {g.V1}): the {n} x {n} grid of starts",
        n * per_beta + n * n * per_point,
        alternative="family='label' with the squared loss, a smaller --n-grid / options.n_grid, or a smaller model",
    )


def structured_solve(g, mk, fam, value, loss, mask_keys, n_theta, seed, box, n_grid, grid, options, x0=None,
                     pairs=None):  # fmt: skip
    """Grid (or the start ``x0``) + L-BFGS-B on the structured loss, or, when the evaluator is ``alpha_cheap`` (the
    co-topic family by pair sums over uniform-tau sets, SPEC §11.8(a)) and neither ``x0`` nor L-BFGS-B options are
    given, the profile search of :mod:`._profile`; ``(c, L, projected gradient, at_boundary, scipy result, info, W,
    ev)`` (``W`` the ``W^V`` used, ``ev`` the float evaluator, for the interval certificate). ``pairs=False``: the
    blocked tables and L-BFGS-B (the route before SPEC §11.8(a))."""
    W, value_kind = _value(g, mk, value)
    kw = dict(n_theta=n_theta, seed=seed) if g.prior == "dirichlet" else {}
    ev = make_evaluator(g, mk, W, fam, None, bool(mask_keys), loss, pairs=pairs, **kw)  # type: ignore[arg-type]
    if ev.alpha_cheap and x0 is None and not options:
        k = ev.op.U.shape[1] if ev.op.factored else g.V1
        check_work(  # the profile search builds about n_grid + 10 sets of beta-tables (SPEC §11.8(a) cost model)
            f"optimal_attention (co-topic family by pair sums, V1 = {g.V1}): about {max(n_grid, 1) + 10} table builds",
            (max(n_grid, 1) + 10) * build_cost(g.V1 - 1, g.T, k, True)["flops"],
            alternative="a smaller model, or family='label'",
        )
        c, L, proj, at_boundary, r, pts, counts = profile_solve(ev, box, grid, n_grid)
        at_boundary, ray = _settle(ev, c, L, at_boundary, box)
        info = _info(g, fam, value_kind, ev, c, pts, W, at_boundary)
        info["limit_at_infinity"] = ray
        info.update(search="profile", **counts)
        info["nfev"] += counts["points"]
        info["start"] = "grid"
        info["tables_route"] = ev.route
        return c, L, proj, at_boundary, r, info, W, ev
    _check_grid_work(g, ev, fam, loss, 1 if x0 is not None else max(n_grid, 1))

    def fg(c):
        r = ev(float(c[0]), float(c[1]), True)
        return r.value, np.array([r.dalpha, r.dbeta])

    A = np.linspace(grid[0][0], grid[0][1], n_grid) if n_grid >= 2 else np.zeros(1)
    B = np.linspace(grid[1][0], grid[1][1], n_grid) if n_grid >= 2 else np.zeros(1)
    pts = []
    if x0 is not None:  # a warm start replaces the grid
        A = B = np.zeros(0)
        pts.append((ev(float(x0[0]), float(x0[1])).value, 0, np.asarray(x0, dtype=float)))
    with progress_bar(
        total=len(A) * len(B), desc="attention grid", unit="pt", leave=False, disable=x0 is not None
    ) as bar:
        for j, b in enumerate(B):  # beta outer: one set of beta-tables per column
            for i, a in enumerate(A):
                pts.append((ev(float(a), float(b)).value, i * len(B) + j, np.array([a, b])))
                bar.update()
    starts = [c for _, _, c in sorted(pts, key=lambda t: t[:2])[:_N_STARTS]]
    opts = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 1000, **options}
    runs = [optimize.minimize(fg, c0, jac=True, method="L-BFGS-B", bounds=box, options=opts) for c0 in starts]
    r = min(runs, key=lambda rr: rr.fun)
    c = np.asarray(r.x, dtype=float)
    L, grad = fg(c)
    proj, at_boundary = project_gradient(c, grad, box)
    at_boundary, ray = _settle(ev, c, L, at_boundary, box)
    info = _info(g, fam, value_kind, ev, c, pts, W, at_boundary)
    info["nfev"] = len(pts) + sum(int(rr.nfev) for rr in runs) + 3 + info["nfev"]
    info["start"] = "x0" if x0 is not None else "grid"
    info.update(search="lbfgs", tables_route=ev.route, limit_at_infinity=ray)
    return c, L, proj, at_boundary, r, info, W, ev


def _info(g, fam, value_kind, ev, c, pts, W, at_boundary=False):
    """The ``info`` fields both searches report (the uniform loss, the grid minimum, the dense ``S`` and ``W`` of a
    small model, the sampling covariance for sampled laws); ``nfev`` counts the evaluations made here."""
    stderr = ev(float(c[0]), float(c[1])).stderr  # first: the tables at c are cached
    info = dict(
        family=FAMILY_NAMES[fam],
        value_kind=value_kind,
        loss_uniform=ev(0.0, 0.0).value,
        route="structured",
        grid_min=float(min(p[0] for p in pts)) if pts else None,
        loss_stderr=stderr,
        n_laws=len(ev.theta),
        nfev=2,
    )
    if ev.sampled:  # the optimum's sampling error (the laws are a sample)
        cov = None if at_boundary else optimum_covariance(ev, c)
        info["x_cov"] = cov
        info["x_stderr"] = None if cov is None else np.sqrt(np.diag(cov))
        info["nfev"] += 0 if cov is None else 5
    if g.V1 <= DENSE_INFO_MAX:
        Bm = ev.rows(1, g.V1)  # (n, V1) word rows of Z or G
        S = np.zeros((g.V1, g.V1))
        S[1:] = c[1] * Bm
        S[np.arange(1, g.V1), np.arange(1, g.V1)] += c[0]
        info["S"] = S
        info["W"] = W if isinstance(W, np.ndarray) else W.toarray()
    else:
        info["S"], info["W"] = None, W
    return info
