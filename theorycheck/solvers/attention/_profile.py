"""Profile search of an (alpha, beta) family whose ``alpha`` is cheap at fixed ``beta`` (SPEC §11.8(a)).

On the pair-sum route over uniform-tau sets (:attr:`FamilyEvaluator.alpha_cheap`) the ``V1^2``-sized work is the
``beta``-tables; at fixed ``beta`` a pass over the (query, set) pairs gives the loss and its first two
``alpha``-derivatives (for several ``alpha`` at once). So the search works on the profile

.. math::  L^*(\\beta) = \\min_{\\alpha \\in [a_{lo}, a_{hi}]} L(\\alpha, \\beta):

- the coarse grid of :mod:`._family`, clipped to the search box (``beta`` outer: one set of tables per column, with
  their ``beta``-derivatives, every ``alpha`` of the column in one pass), then in every column a safeguarded Newton
  search over ``alpha`` from the column's best grid point (:func:`min_alpha`) and the profile's exact slope there;
- the local minima of the cubic Hermite interpolant of neighbouring columns (values and slopes; also a minimum that
  hides between two columns whose values show no dip) and the box's ends when an end column's slope points out: in
  at most :data:`MAX_SEARCHES` of these brackets Brent's method (:func:`brent_min`) from the predicted minimiser, each
  new ``beta`` one set of tables and a Newton search over ``alpha`` started on the line through the two nearest
  ``beta`` already solved;
- the exact gradient at the best result (``beta``-derivative tables once), for the projected-gradient residual.

A minimiser of the profile is a minimiser of ``L`` (and ``dL*/dbeta = dL/dbeta`` at ``alpha*(beta)``), so the
result is a stationary point of the same loss the two-dimensional L-BFGS-B route minimises, at a fraction of the
tables: ``n_grid - 1`` grid columns (``beta = 0`` costs ``O(n T q)``) plus about seven Brent steps, against one set
per L-BFGS-B evaluation (40 to 130 of them).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ..._progress import bar as progress_bar

__all__ = ["min_alpha", "profile_solve", "brent_min", "ALPHA_TOL", "ALPHA_FTOL", "BETA_TOL", "BETA_ATOL", "FTOL",
           "NOISE", "MAX_SEARCHES"]  # fmt: skip

#: Newton search over ``alpha`` stops when its step is below ``ALPHA_TOL * max(1, |alpha|)`` or the Newton step
#: would gain less than ``ALPHA_FTOL * max(1, |L|)`` (``L'^2 / (2 L'')``, the Newton decrement).
ALPHA_TOL = 1e-10
ALPHA_FTOL = 1e-16
#: Brent over ``beta`` stops when the minimiser is located to ``2 (BETA_TOL |beta| + BETA_ATOL)``: the loss is then
#: within ``~ L'' (BETA_TOL |beta| + BETA_ATOL)^2`` of the profile's minimum (1e-13 for ``L'' <= 1``, ``|beta| <= 60``).
BETA_TOL = 1e-9
BETA_ATOL = 1e-7
#: ... or when the parabola through the three best points predicts a gain below ``FTOL max(1, |L|)`` for a step
#: below ``1e-4 (1 + |beta|)`` (converged in the loss; near the minimum the profile is that parabola).
FTOL = 1e-15
#: Differences of the profile below ``NOISE max(1, |L|)`` are rounding (a flat profile; a bound taken only beyond it).
NOISE = 1e-14
#: Largest number of Brent searches (one per predicted local minimum of the profile, best first; the L-BFGS-B route
#: started from the three best grid points).
MAX_SEARCHES = 3
_MAX_NEWTON = 80


class _Counter:
    def __init__(self):
        self.tables = 0  # distinct beta (one set of tables each)
        self.passes = 0  # passes over the (query, set) pairs
        self.points = 0  # (alpha, beta) points evaluated


def min_alpha(ev, beta, lo, hi, x, fx, a=None, b=None, counter=None):
    """Safeguarded Newton search for ``min_{alpha in [a, b]} L(alpha, beta)`` from ``x`` with ``fx = (L, L', L'')``
    (``[a, b]`` defaults to ``[lo, hi]``): a Newton step when ``L'' > 0`` and it lands strictly inside the bracket,
    else the midpoint toward descent; the bracket shrinks by the values (the lower point stays the centre). Returns
    ``(alpha, (L, L', L''))``."""
    a = lo if a is None else a
    b = hi if b is None else b
    for _ in range(_MAX_NEWTON):
        L, d1, d2 = fx
        if abs(d1) <= NOISE * max(1.0, abs(L)):
            break  # stationary to rounding (also a loss that ignores alpha)
        xn = x - d1 / d2 if d2 > 0.0 else math.nan
        if a < xn < b:
            if 0.5 * d1 * d1 / d2 <= ALPHA_FTOL * max(1.0, abs(L)):
                break  # the Newton step would gain less than rounding: converged in the loss
        else:
            xn = 0.5 * (a + x) if d1 > 0.0 else 0.5 * (x + b)
        if abs(xn - x) <= ALPHA_TOL * max(1.0, abs(x)) or d1 == 0.0:
            break
        fn = tuple(float(v) for v in ev.alpha_scan([xn], beta)[0, :3])
        if counter is not None:
            counter.passes += 1
            counter.points += 1
        if fn[0] <= L:
            if xn < x:
                b = x
            else:
                a = x
            x, fx = xn, fn
        elif xn < x:
            a = xn
        else:
            b = xn
    return x, fx


def _column(ev, beta, A, lo, hi, counter):
    """Grid column at ``beta``: the loss at every ``alpha`` of ``A`` (one pass), the Newton search from the best, and
    the profile's slope ``dL*/dbeta = dL/dbeta`` at ``alpha*`` (the tables with their ``beta``-derivatives); returns
    ``(values at A, alpha*, L*, dL*/dbeta)``."""
    ev.tables(beta, True)
    sc = ev.alpha_scan(A, beta)
    counter.tables += 1
    counter.passes += 1
    counter.points += len(A)
    i = int(np.argmin(sc[:, 0]))
    d1 = sc[i, 1]
    a = (A[i - 1] if i > 0 else lo) if d1 > 0.0 else A[i]
    b = A[i] if d1 > 0.0 else (A[i + 1] if i + 1 < len(A) else hi)
    x, fx = min_alpha(ev, beta, lo, hi, float(A[i]), tuple(float(v) for v in sc[i, :3]), a, b, counter)
    slope = float(ev.alpha_scan([x], beta, True)[0, 3])
    counter.passes += 1
    return sc[:, 0], x, fx[0], slope


def _hermite_minima(b0, b1, f0, f1, d0, d1):
    """Local minima ``(beta, predicted L*)`` in ``[b0, b1]`` of the cubic through the two columns' values and slopes."""
    h = b1 - b0
    # p(s) = f0 + h d0 s + c2 s^2 + c3 s^3 on s in [0, 1]
    c3 = 2.0 * (f0 - f1) + h * (d0 + d1)
    c2 = 3.0 * (f1 - f0) - h * (2.0 * d0 + d1)
    roots = np.roots([3.0 * c3, 2.0 * c2, h * d0]) if (c3 != 0.0 or c2 != 0.0) else np.zeros(0)
    out = []
    for s in roots:
        if abs(s.imag) < 1e-12 and 0.0 <= s.real <= 1.0 and 6.0 * c3 * s.real + 2.0 * c2 > 0.0:
            t = float(s.real)
            out.append((b0 + h * t, f0 + h * d0 * t + c2 * t * t + c3 * t**3))
    return out


def _candidates(betas, prof, slope, blo, bhi, noise):
    """Brackets ``(a, b, start, predicted)`` of the profile's local minima at the grid's resolution: the minima of
    the cubic Hermite interpolant of each pair of neighbouring columns (values and exact slopes), and the box's ends
    when the first (last) column's slope points outward; best predicted first, at most :data:`MAX_SEARCHES`."""
    cands = []
    for k in range(len(betas) - 1):
        for x, f in _hermite_minima(betas[k], betas[k + 1], prof[k], prof[k + 1], slope[k], slope[k + 1]):
            cands.append((betas[k], betas[k + 1], x, f))
    if slope[0] > noise and blo < betas[0]:
        cands.append((blo, betas[0], betas[0], prof[0]))
    if slope[-1] < -noise and betas[-1] < bhi:
        cands.append((betas[-1], bhi, betas[-1], prof[-1]))
    if not cands:  # no interior minimum at this resolution (a flat profile): the best column
        k = int(np.argmin(prof))
        cands.append((betas[max(k - 1, 0)], betas[min(k + 1, len(betas) - 1)], betas[k], prof[k]))
    return sorted(cands, key=lambda c: c[3])[:MAX_SEARCHES]


def profile_solve(ev, box, grid, n_grid):
    """Grid, Newton over ``alpha`` per column, Brent over ``beta`` on the profile (module docstring).

    Returns ``(c, L, projected gradient, at_boundary, result, pts, counts)``: ``result`` a
    :class:`scipy.optimize.OptimizeResult` (``status`` 1 when Brent reached its iteration limit), ``pts`` the grid
    points ``(L, index, (alpha, beta))`` as the L-BFGS-B route lists them, ``counts`` the tables, passes, points and
    searches.
    """
    (alo, ahi), (blo, bhi) = box
    A = np.linspace(grid[0][0], grid[0][1], n_grid) if n_grid >= 2 else np.zeros(1)
    B = np.linspace(grid[1][0], grid[1][1], n_grid) if n_grid >= 2 else np.zeros(1)
    A, B = np.unique(np.clip(A, alo, ahi)), np.unique(np.clip(B, blo, bhi))  # the search stays in the box
    counter = _Counter()
    solved: dict[float, tuple[float, float]] = {}  # beta -> (alpha*, L*)
    slope = []
    pts = []
    with progress_bar(total=len(B), desc="attention grid (profile)", unit="col", leave=False) as bar:
        for j, bt in enumerate(B):
            vals, x, Lx, d = _column(ev, float(bt), A, alo, ahi, counter)
            pts += [(float(v), i * len(B) + j, np.array([A[i], bt])) for i, v in enumerate(vals)]
            solved[float(bt)] = (x, Lx)
            slope.append(d)
            bar.update()

    def profile(beta):
        beta = float(beta)
        if beta not in solved:
            near = sorted(solved, key=lambda s: abs(s - beta))[:2]  # alpha*(beta) is smooth: the line through two
            if len(near) == 1:
                x0 = solved[near[0]][0]
            else:
                (b0, (a0, _)), (b1, (a1, _)) = [(s, solved[s]) for s in near]
                x0 = float(np.clip(a0 + (a1 - a0) * (beta - b0) / (b1 - b0), alo, ahi))
            f0 = tuple(float(v) for v in ev.alpha_scan([x0], beta)[0, :3])
            counter.tables += 1
            counter.passes += 1
            counter.points += 1
            x, fx = min_alpha(ev, beta, alo, ahi, x0, f0, counter=counter)
            solved[beta] = (x, fx[0])
        return solved[beta][1]

    betas = [float(b) for b in B]
    prof = np.array([solved[b][1] for b in betas])
    noise = NOISE * max(1.0, float(np.max(np.abs(prof))))
    runs = []
    if len(betas) > 1 and float(np.ptp(prof)) <= noise and max(abs(d) for d in slope) <= noise:
        k = int(np.argmin(prof))  # a flat profile (the loss ignores the scores): the best column
        runs.append(optimize.OptimizeResult(x=betas[k], fun=prof[k], status=0, nit=0, success=True))
    else:
        for a, b, x0, _ in _candidates(betas, prof, slope, blo, bhi, noise):
            runs.append(_brent(profile, a, b, x0, blo, bhi, betas, prof, noise))
    res = min(runs, key=lambda rr: rr.fun)
    beta = float(res.x)
    alpha = solved[beta][0]
    r = ev(alpha, beta, True)
    counter.points += 1
    grad = np.array([r.dalpha, r.dbeta])
    c = np.array([alpha, beta])
    lo, hi = np.array(box).T
    on_lo, on_hi = c <= lo + 1e-6, c >= hi - 1e-6
    proj = np.where((on_lo & (grad > 0)) | (on_hi & (grad < 0)), 0.0, grad)
    res.x, res.fun = c, r.value
    res.status = max(rr.status for rr in runs)
    counts = {"beta_tables": counter.tables, "alpha_passes": counter.passes, "points": counter.points,
              "beta_searches": len(runs)}  # fmt: skip
    return c, r.value, proj, bool(np.any(on_lo | on_hi)), res, pts, counts


def _brent(profile, a, b, x0, blo, bhi, betas, prof, noise):
    """Brent's method on the profile in ``[a, b]`` from the predicted minimiser ``x0`` (evaluated first; the columns
    ``a``, ``b`` give the first parabola). When the result is within the tolerance of the box, the box's bound is
    evaluated too (a minimum on the bound), and taken only when lower by more than the rounding ``noise``."""
    known = [(u, float(f)) for u, f in zip(betas, prof) if u in (a, b)]
    fx0 = profile(x0)
    x, fx, nit, ok = brent_min(profile, a, b, x0, fx0, known)
    for bound in (blo, bhi):
        if abs(x - bound) <= 4.0 * (BETA_TOL * abs(x) + BETA_ATOL) and profile(bound) < fx - noise:
            x, fx = bound, profile(bound)
    for u, f in zip(betas, prof):  # never worse than a column
        if f < fx:
            x, fx = u, float(f)
    return optimize.OptimizeResult(x=x, fun=fx, status=0 if ok else 1, nit=nit, success=ok)


_CGOLD = 0.3819660112501051


def brent_min(f, a, b, x, fx, known=(), maxiter=200):
    """Brent's (1973) minimiser of ``f`` on ``[a, b]`` from the interior point ``x`` (``fx = f(x)``): parabolic steps
    through the three best points, golden sections otherwise; stops when ``x`` is within ``2 (BETA_TOL |x| +
    BETA_ATOL)`` of the bracket's centre or the parabola's step gains less than :data:`FTOL`. ``known``: up to two
    more points ``(u, f(u))`` (the first parabola).
    Returns ``(x, f(x), iterations, converged)``."""
    w = v = x
    fw = fv = fx
    for u, fu in sorted(known, key=lambda t: t[1])[:2]:
        if w == x:
            w, fw = u, fu
        else:
            v, fv = u, fu
    d = e = b - a  # the last two steps: large, so that the first two steps may be parabolic
    for it in range(maxiter):
        m = 0.5 * (a + b)
        tol1 = BETA_TOL * abs(x) + BETA_ATOL
        tol2 = 2.0 * tol1
        if abs(x - m) <= tol2 - 0.5 * (b - a):
            return x, fx, it, True
        golden = True
        if abs(e) > tol1 and w != x and v != x and v != w:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            if abs(p) < abs(0.5 * q * e) and q * (a - x) < p < q * (b - x):
                e, d = d, p / q
                curv = ((fw - fx) / (w - x) - (fv - fx) / (v - x)) / (w - v)  # half the parabola's f''
                if curv > 0.0 and curv * d * d <= FTOL * max(1.0, abs(fx)) and abs(d) <= 1e-4 * (1.0 + abs(x)):
                    return x, fx, it, True  # the parabola's vertex gains less than FTOL: converged in the loss
                u = x + d
                if u - a < tol2 or b - u < tol2:
                    d = tol1 if m >= x else -tol1
                golden = False
        if golden:
            e = (a - x) if x >= m else (b - x)
            d = _CGOLD * e
        u = x + (d if abs(d) >= tol1 else (tol1 if d > 0.0 else -tol1))
        fu = f(u)
        if fu <= fx:
            if u >= x:
                a = x
            else:
                b = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu
    return x, fx, maxiter, False
