"""Vectorised outward-rounded interval arithmetic and second-order branch and bound (SPEC §4.3).

The numpy engine of :func:`theorycheck.solvers.attention.interval_certificate`: the same loss
formulas as the ``mpmath.iv`` engine (``_interval._block_loss`` / ``_interval._identity_loss``,
evaluated here on arrays of boxes at once), with

* :class:`IVec`: intervals ``[lo, hi]`` held as two float64 arrays. Every ``+ - * /`` and ``sqrt``
  is IEEE-754 correctly rounded to nearest, so the exact result lies between the neighbours of the
  computed float: each lower end is moved one float down (``np.nextafter(x, -inf)``) and each upper
  end one float up. ``exp`` is not correctly rounded; we rely on ``|exp_np(x) - e^x| <= 4 ulp``
  (libm's bound is < 1 ulp; tested against mpmath at 10^5 points in ``tests/test_interval_vec.py``)
  and widen by twice that: the relative factor ``1 -+ 2^-49`` (>= 8 ulp) plus ``2^-1070`` for
  subnormal results, then one float outward. A NaN endpoint (``0 * inf``) becomes ``-inf`` / ``+inf``
  (the whole line: always an enclosure). Requires the default round-to-nearest mode.
* :class:`T2`: a second-order Taylor object ``(f, grad f, Hess f)`` with :class:`IVec` entries
  (forward-mode automatic differentiation on intervals; ``None`` is an exact zero).
* :func:`box_bounds`: on a box ``X`` the lower bound is the best of the natural extension
  ``L(X)``, the mean-value form ``L(c) + grad L(X) . (X - c)`` and the second-order form at an
  expansion point ``p in X`` (the float minimiser ``x0`` clipped to the box):
  ``L(x) >= L(p) + sum_i (g_i d_i + c_i d_i^2 / 2) + cross`` with ``d = x - p``, ``g = grad L(p)``
  and ``Hess L(X) >= diag(c)``: with ``m_i = min_X H_ii > 0`` and
  ``theta = 1 - max_X |H_12| / sqrt(m_1 m_2) > 0``, ``c_i = theta m_i`` (then ``H - diag(c)`` is
  positive semi-definite on ``X``) and ``cross = 0``; otherwise ``c_i = m_i`` and
  ``cross = min_X H_12 d_1 d_2``. Each ``g_i d + c_i d^2/2`` with ``c_i > 0`` is bounded as
  ``c_i/2 (d + g_i/c_i)^2 - g_i^2 / (2 c_i)`` over the interval of ``d`` (exact up to rounding). In a
  convex neighbourhood of the minimiser the deficit is ``|g(p)|^2 / (2 c)``: quadratic in the
  float optimiser's error, so the gap closes to rounding level once the box holding ``x0`` is convex.
* :func:`branch_and_bound`: all open boxes are bounded in one vectorised pass per round; boxes with
  ``lower > upper`` are discarded, boxes with ``lower >= upper - settle`` are settled, the others
  are bisected along the side of largest ``max |dL/dx_i| width_i``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache, wraps

import numpy as np
from scipy.optimize import minimize

from ..._progress import bar as progress_bar
from ._interval_loss import _evaluate

__all__ = ["IVec", "T2", "ivec_exact", "evaluate", "box_bounds", "branch_and_bound", "float_minimiser"]

_INF = np.inf
_EXP_REL = 2.0**-49  # relative widening of exp: >= 8 ulp (twice the 4 ulp relied on)
_EXP_ABS = 2.0**-1070  # absolute widening for subnormal results of exp


def _quiet(fn):
    """Run ``fn`` with floating-point warnings off (overflow to inf and 0 * inf are handled explicitly)."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return wrapper


def _dn(x):
    return np.nextafter(x, -_INF)


def _up(x):
    return np.nextafter(x, _INF)


def _nan_lo(x):
    return np.where(x != x, -_INF, x) if np.isnan(x).any() else x


def _nan_hi(x):
    return np.where(x != x, _INF, x) if np.isnan(x).any() else x


class IVec:
    """Arrays of intervals ``[lo, hi]`` with outward rounding (module docstring). The operations run
    with numpy's floating-point warnings off: an overflow to ``inf`` or a ``0 * inf`` made ``-inf`` /
    ``+inf`` is a valid outward bound, not an error (e.g. ``1 / [-1, -2.2e-311]`` is ``[-inf, -1]``)."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi=None):
        self.lo = np.asarray(lo, dtype=float)
        self.hi = self.lo if hi is None else np.asarray(hi, dtype=float)

    def __repr__(self):
        return f"IVec({self.lo!r}, {self.hi!r})"

    @property
    def mid(self):
        with np.errstate(all="ignore"):
            return 0.5 * self.lo + 0.5 * self.hi

    @_quiet
    def __add__(self, o):
        o = _coerce(o)
        if o is None:
            return NotImplemented
        return IVec(_dn(self.lo + o.lo), _up(self.hi + o.hi))

    __radd__ = __add__

    def __neg__(self):
        return IVec(-self.hi, -self.lo)

    @_quiet
    def __sub__(self, o):
        o = _coerce(o)
        if o is None:
            return NotImplemented
        return IVec(_dn(self.lo - o.hi), _up(self.hi - o.lo))

    def __rsub__(self, o):
        return (-self) + o

    @_quiet
    def __mul__(self, o):
        o = _coerce(o)
        if o is None:
            return NotImplemented
        a, b, c, d = self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi
        lo = np.minimum(np.minimum(a, b), np.minimum(c, d))
        hi = np.maximum(np.maximum(a, b), np.maximum(c, d))
        return IVec(_nan_lo(_dn(lo)), _nan_hi(_up(hi)))

    __rmul__ = __mul__

    @_quiet
    def recip(self):
        """``1 / x``; the whole line where the interval holds 0."""
        ok = (self.lo > 0) | (self.hi < 0)
        return IVec(np.where(ok, _dn(1.0 / self.hi), -_INF), np.where(ok, _up(1.0 / self.lo), _INF))

    def __truediv__(self, o):
        o = _coerce(o)
        if o is None:
            return NotImplemented
        return self * o.recip()

    def __rtruediv__(self, o):
        return self.recip() * o

    @_quiet
    def sq(self):
        """``x^2`` (exact range: 0 when the interval holds 0)."""
        l2, h2 = self.lo * self.lo, self.hi * self.hi
        lo = np.where(self.lo >= 0, l2, np.where(self.hi <= 0, h2, 0.0))
        return IVec(np.maximum(_dn(lo), 0.0), _up(np.maximum(l2, h2)))

    @_quiet
    def exp(self):
        """``e^x`` with the widening stated in the module docstring."""
        lo = np.maximum(_dn(np.exp(self.lo) * (1.0 - _EXP_REL)), 0.0)
        return IVec(lo, _up(np.exp(self.hi) * (1.0 + _EXP_REL) + _EXP_ABS))

    @_quiet
    def sqrt(self):
        return IVec(_dn(np.sqrt(np.maximum(self.lo, 0.0))), _up(np.sqrt(self.hi)))


@lru_cache(maxsize=4096)
def ivec_exact(x) -> IVec:
    """The tightest float interval holding the exact number ``x`` (int, float or Fraction; cached: treat
    the result as immutable)."""
    fr = Fraction(x)
    try:
        f = float(fr)
    except OverflowError:  # beyond the float range: [max float, inf] (or its negative)
        big = float(np.finfo(float).max)
        return IVec(big, _INF) if fr > 0 else IVec(-_INF, -big)
    lo = f if Fraction(f) <= fr else float(np.nextafter(f, -_INF))
    hi = f if Fraction(f) >= fr else float(np.nextafter(f, _INF))
    return IVec(lo, hi)


def constants_range(cst) -> float:
    """``max |log10 |c|| `` over the non-zero interval constants of ``cst`` and their ratios used by the
    loss (``D/rho``, ``q/eta``, ...): ``inf`` when one leaves the float range."""
    vals = [float(abs(c.lo)) for c in cst.values() if isinstance(c, IVec) and c.lo != 0]
    vals += [float(abs(c.hi)) for c in cst.values() if isinstance(c, IVec) and c.hi != 0]
    if not vals:
        return 0.0
    spread = np.log10(max(vals)) - np.log10(min(vals))
    return float(spread) if spread < 250 else np.inf


def _coerce(o):
    if isinstance(o, IVec):
        return o
    if isinstance(o, (int, float, Fraction)):
        return ivec_exact(o)
    if isinstance(o, (np.integer, np.floating)):
        return ivec_exact(o.item())
    return None


# ------------------------------------------------------------------ second-order Taylor objects
def _add(x, y):
    return y if x is None else x if y is None else x + y


def _mul(x, y):
    return None if x is None or y is None else x * y


def _pairs(n):
    return [(i, j) for i in range(n) for j in range(i, n)]


def _pair_index(i, k, n):
    """Index of the Hessian entry ``(i, k)`` in the upper triangle (``_pairs(n)`` order)."""
    return _pairs(n).index((min(i, k), max(i, k)))


class T2:
    """``(value, gradient, Hessian)`` of a function on a box, each entry an :class:`IVec`.

    ``g``: list of ``n`` entries, ``h``: the upper triangle (``_pairs(n)`` order) or ``None`` when the
    Hessian is not tracked (first order); an entry ``None`` is an exact zero.
    """

    __slots__ = ("v", "g", "h")

    def __init__(self, v, g, h):
        self.v, self.g, self.h = v, g, h

    @classmethod
    def variable(cls, x: IVec, i: int, n: int, order: int):
        g = [ivec_exact(1) if j == i else None for j in range(n)]
        return cls(x, g, [None] * len(_pairs(n)) if order >= 2 else None)

    def _scale(self, c):
        h = None if self.h is None else [_mul(x, c) for x in self.h]
        return T2(self.v * c, [_mul(x, c) for x in self.g], h)

    def __add__(self, o):
        if isinstance(o, T2):
            h = None if self.h is None else [_add(x, y) for x, y in zip(self.h, o.h)]
            return T2(self.v + o.v, [_add(x, y) for x, y in zip(self.g, o.g)], h)
        return T2(self.v + o, self.g, self.h)

    __radd__ = __add__

    def __neg__(self):
        return self._scale(ivec_exact(-1))

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def __mul__(self, o):
        if not isinstance(o, T2):
            return self._scale(_coerce(o))
        g = [_add(_mul(a, o.v), _mul(self.v, b)) for a, b in zip(self.g, o.g)]
        h = None
        if self.h is not None:
            n = len(self.g)
            h = []
            for k, (i, j) in enumerate(_pairs(n)):
                cross = _add(_mul(self.g[i], o.g[j]), _mul(self.g[j], o.g[i]))
                h.append(_add(_add(_mul(self.h[k], o.v), _mul(self.v, o.h[k])), cross))
        return T2(self.v * o.v, g, h)

    __rmul__ = __mul__

    def _chain(self, f0, f1, f2):
        """``phi(f)`` from ``phi``, ``phi'``, ``phi''`` at ``f.v``: ``phi' f_i`` and ``phi' f_ij + phi'' f_i f_j``."""
        g = [_mul(f1, x) for x in self.g]
        h = None
        if self.h is not None:
            n = len(self.g)
            h = [_add(_mul(f1, self.h[k]), _mul(f2, _mul(self.g[i], self.g[j]))) for k, (i, j) in enumerate(_pairs(n))]
        return T2(f0, g, h)

    def recip(self):
        r = self.v.recip()
        r2 = r.sq()
        return self._chain(r, -r2, r2 * r * 2) if self.h is not None else self._chain(r, -r2, None)

    def __truediv__(self, o):
        if isinstance(o, T2):
            return self * o.recip()
        return self * _coerce(o).recip()

    def __rtruediv__(self, o):
        return self.recip() * o

    def exp(self):
        e = self.v.exp()
        return self._chain(e, e, e)

    def sq(self):
        two_v = self.v * 2
        return self._chain(self.v.sq(), two_v, ivec_exact(2))


# ------------------------------------------------------------------ evaluation on arrays of boxes
def evaluate(lo, hi, tm, cst, value, order: int, offset: float = 0.0):
    """The loss on the boxes ``[lo[:, i], hi[:, i]]`` (arrays ``(N, n)``): an :class:`IVec` (order 0) or
    a :class:`T2` (order 1: value and gradient; order 2: and Hessian), plus ``offset``. ``value``: the paper
    model's case (``tm``, ``cst``: its constants) or a callable ``xs -> loss`` on the variables (the general
    model's label family, :class:`._interval_label.LabelLoss`; ``tm``, ``cst`` unused)."""
    n = lo.shape[1]
    xs = [IVec(lo[:, i], hi[:, i]) for i in range(n)]
    if order >= 1:
        xs = [T2.variable(x, i, n, order) for i, x in enumerate(xs)]
    with np.errstate(all="ignore"):
        out = value(xs) if callable(value) else _evaluate(xs, tm, cst, value)
        return out + offset if offset else out


def _entry(t, k):
    return t if t is not None else ivec_exact(0)


def _curvature(H, n, N):
    """``(c, ok)``: ``Hess >= diag(c)`` on each box, exactly (``cross = 0``) where ``ok`` (module docstring)."""
    m = [np.broadcast_to(_entry(H[k], 0).lo, (N,)) for k in ([0] if n == 1 else [0, 2])]
    if n == 1:
        return m, np.ones(N, bool)
    h12 = _entry(H[1], 0)
    amax = np.broadcast_to(np.maximum(np.abs(h12.lo), np.abs(h12.hi)), (N,))
    pos = (m[0] > 0) & (m[1] > 0)
    root = IVec(np.where(pos, m[0], 1.0)) * IVec(np.where(pos, m[1], 1.0))
    theta = _dn(1.0 - (IVec(amax) / root.sqrt()).hi)
    ok = pos & (theta > 0)
    return [np.where(ok, _dn(theta * x), x) for x in m], ok


def _quad_min(D: IVec, g: IVec, c):
    """Lower bound of ``g d + c d^2 / 2`` over ``d in D`` (``c`` a float array)."""
    C = IVec(c)
    nat = g * D + (C * 0.5) * D.sq()
    conv_ok = c > 0
    Cs = IVec(np.where(conv_ok, c, 1.0))
    conv = (Cs * 0.5) * (D + g / Cs).sq() - g.sq() / (Cs * 2)
    return np.where(conv_ok, np.maximum(conv.lo, nat.lo), nat.lo)


@_quiet
def box_bounds(lo, hi, tm, cst, value, x0, offset=0.0, one_point=False):
    """``(lower, upper, x_upper, smear)`` on each box ``[lo, hi]`` (module docstring). ``one_point``: one point
    evaluation per box, not two: the expansion point of both forms is ``x0`` in the box holding it and the centre
    elsewhere (the general model's certificates, where a point costs a pass over every (set, word) pair); without
    ``x0`` the point is the centre either way."""
    N, n = lo.shape
    F = evaluate(lo, hi, tm, cst, value, order=2, offset=offset)
    c = _centre(lo, hi)
    if one_point and x0 is not None:
        p = c = np.where(np.all((lo <= x0) & (x0 <= hi), axis=1)[:, None], x0, c)
    else:
        p = np.clip(x0, lo, hi) if x0 is not None else c
    pts = p if p is c else np.vstack([p, c])
    P = evaluate(pts, pts, tm, cst, value, order=1, offset=offset)
    Lp = IVec(P.v.lo[:N], P.v.hi[:N])
    Lc = Lp if p is c else IVec(P.v.lo[N:], P.v.hi[N:])
    with np.errstate(all="ignore"):
        mv = Lc
        for i in range(n):
            mv = mv + _entry(F.g[i], 0) * IVec(_dn(lo[:, i] - c[:, i]), _up(hi[:, i] - c[:, i]))
        curv, ok = _curvature(F.h, n, N)
        Ds = [IVec(_dn(lo[:, i] - p[:, i]), _up(hi[:, i] - p[:, i])) for i in range(n)]
        terms = [_quad_min(Ds[i], IVec(P.g[i].lo[:N], P.g[i].hi[:N]), curv[i]) for i in range(n)]
        second = IVec(Lp.lo)
        for t in terms:
            second = second + IVec(t)
        if n == 2:
            cross = (_entry(F.h[1], 0) * Ds[0] * Ds[1]).lo
            second = second + IVec(np.where(ok, 0.0, cross))
    lower = np.fmax(np.fmax(F.v.lo, mv.lo), second.lo)  # a NaN form (inf - inf on an unbounded box) is skipped
    lower = _face_form(lower, lo, hi, c, F, tm, cst, value, offset)
    lower = np.where(np.isnan(lower), -_INF, lower)
    use_p = Lp.hi <= Lc.hi
    upper = np.where(use_p, Lp.hi, Lc.hi)
    x_up = np.where(use_p[:, None], p, c)
    mags = np.stack([np.maximum(np.abs(_entry(F.g[i], 0).lo), np.abs(_entry(F.g[i], 0).hi)) for i in range(n)], 1)
    smear = np.nan_to_num(np.broadcast_to(mags, (N, n)) * _side_length(lo, hi), nan=_INF)
    G = [IVec(P.g[i].lo[:N], P.g[i].hi[:N]) for i in range(n)]
    return lower, upper, x_up, smear, _monotone(lo, hi, F, G, Ds)


@_quiet
def _monotone(lo, hi, F, Gp, Ds):
    """Bounded boxes on which some ``dL/dx_i`` has one strict sign: they hold no critical point of ``L`` (the
    monotonicity test of :func:`branch_and_bound`). The enclosure of ``dL/dx_i`` on the box is the natural one
    intersected with the mean-value form ``dL/dx_i(p) + sum_k Hess_ik(X) (X_k - p_k)`` (``Gp`` the gradient at the
    expansion point ``p``, ``Ds`` the ranges of ``X - p``): an order narrower on small boxes, where the natural
    extension of the per-pair formulas is loose."""
    N, n = lo.shape
    sign = np.zeros(N, bool)
    for i in range(n):
        nat = _entry(F.g[i], 0)
        mv = Gp[i]
        for k in range(n):
            hk = _entry(F.h[_pair_index(i, k, n)], 0) if F.h is not None else ivec_exact(0)
            mv = mv + hk * Ds[k]
        glo = np.fmax(np.broadcast_to(nat.lo, (N,)), mv.lo)
        ghi = np.fmin(np.broadcast_to(nat.hi, (N,)), mv.hi)
        sign |= (glo > 0) | (ghi < 0)
    return sign & np.all(np.isfinite(lo) & np.isfinite(hi), axis=1)


@_quiet
def _face_form(lower, lo, hi, c, F, tm, cst, value, offset):
    """On boxes with an infinite side, the mean-value form in the finite sides only: with ``x'`` the point ``x`` with
    its finite coordinates moved to the centre ``c``, ``L(x) = L(x') + sum_i dL/dx_i(xi) (x_i - c_i)`` over the
    finite sides ``i`` (the segment from ``x'`` to ``x`` lies in the box), so ``L >= min_face L + sum_i
    (grad L(X))_i (X_i - c_i)``, the face ``{c_finite} x (the infinite sides)`` bounded by the natural extension:
    there the class masses move only along the infinite sides, where the loss has stopped changing."""
    unb = ~np.all(np.isfinite(lo) & np.isfinite(hi), axis=1)
    if not unb.any():
        return lower
    k = np.flatnonzero(unb)
    fin = np.isfinite(lo[k]) & np.isfinite(hi[k])
    face = evaluate(np.where(fin, c[k], lo[k]), np.where(fin, c[k], hi[k]), tm, cst, value, order=0, offset=offset)
    for i in range(lo.shape[1]):
        g = _entry(F.g[i], 0)
        gi = IVec(np.broadcast_to(g.lo, lo.shape[:1])[k], np.broadcast_to(g.hi, lo.shape[:1])[k])
        d = IVec(np.where(fin[:, i], _dn(lo[k, i] - c[k, i]), 0.0), np.where(fin[:, i], _up(hi[k, i] - c[k, i]), 0.0))
        face = face + gi * d
    out = lower.copy()
    out[k] = np.fmax(lower[k], face.lo)
    return out


@_quiet
def _point(x, tm, cst, value, order):
    """Midpoint value (and gradient, Hessian) of the loss at the float point ``x``."""
    t = evaluate(x[None], x[None], tm, cst, value, order=order)
    if order == 0:
        return float(t.mid[0])
    n = len(x)
    g = np.array([float(_entry(t.g[i], 0).mid.ravel()[0]) for i in range(n)])
    if order == 1:
        return float(t.v.mid[0]), g
    H = np.zeros((n, n))
    for k, (i, j) in enumerate(_pairs(n)):
        H[i, j] = H[j, i] = float(_entry(t.h[k], 0).mid.ravel()[0])
    return float(t.v.mid[0]), g, H


@_quiet
def float_minimiser(box, tm, cst, value, n_grid: int = 81, n_newton: int = 4):
    """A float minimiser of the loss on the box: best grid point, L-BFGS-B, then Newton steps, all on
    the interval evaluator's midpoints (a heuristic: the bounds are rigorous whatever it returns)."""
    box = np.asarray(box, float)
    axes = [np.linspace(lo, hi, n_grid if len(box) == 2 else 50 * n_grid) for lo, hi in box]
    pts = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], 1)
    with np.errstate(all="ignore"):
        vals = evaluate(pts, pts, tm, cst, value, order=0).mid
    x = pts[int(np.nanargmin(vals))]
    res = minimize(lambda y: _point(y, tm, cst, value, 1), x, jac=True, method="L-BFGS-B", bounds=box)
    x = np.clip(res.x, box[:, 0], box[:, 1]) if np.isfinite(res.fun) else x
    for _ in range(n_newton):  # quadratic convergence from L-BFGS-B's point, kept only if it improves
        f, g, H = _point(x, tm, cst, value, 2)
        if not np.all(np.linalg.eigvalsh(H) > 0):
            break
        y = np.clip(x - np.linalg.solve(H, g), box[:, 0], box[:, 1])
        if _point(y, tm, cst, value, 0) > f or np.all(y == x):
            break
        x = y
    return x


@_quiet
def _centre(lo, hi):
    """A finite point of each box: the midpoint of each side; of an infinite side its finite end (0 for the whole
    line)."""
    mid = 0.5 * lo + 0.5 * hi
    return np.where(np.isfinite(mid), mid, np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi, 0.0)))


@_quiet
def _side_length(lo, hi):
    """``hi - lo``; for a half-line the length of the bounded piece :func:`_split_point` cuts off it (so a side
    whose far part no longer changes the loss, ``|dL/dx| ~ 0`` there, is not cut again), ``inf`` for the whole
    line."""
    half = np.isfinite(lo) != np.isfinite(hi)
    return np.where(half, np.abs(_split_point(lo, hi) - np.where(np.isfinite(lo), lo, hi)), hi - lo)


@_quiet
def _split_point(lo, hi):
    """Where a side is cut: its midpoint; ``a + max(1, |a|)`` for ``[a, inf]`` (geometric steps outward),
    ``b - max(1, |b|)`` for ``[-inf, b]``, 0 for the whole line."""
    big = np.finfo(float).max
    out = _centre(lo, hi)
    step = np.minimum(np.maximum(1.0, np.abs(out)), big / 2)
    out = np.where(np.isinf(hi) & np.isfinite(lo), np.minimum(lo + step, big), out)
    return np.where(np.isinf(lo) & np.isfinite(hi), np.maximum(hi - step, -big), out)


def _bisect(lo, hi, smear, widest_if_unbounded=False):
    """Children of each box, bisected along its side of largest smear (then width) at
    :func:`_split_point`; with ``widest_if_unbounded``, along its widest side when no smear of the box is finite
    (widths and smears of a half-line: :func:`_side_length`)."""
    w = _side_length(lo, hi)
    key = np.where(np.isfinite(smear), smear, np.finfo(float).max) + 1e-300 * w
    if widest_if_unbounded:
        bounded = np.isfinite(smear) & (smear < np.finfo(float).max)
        key = np.where(np.any(bounded, axis=1, keepdims=True), key, w)
    axis = np.argmax(key, axis=1)
    rows = np.arange(len(lo))
    mid = _split_point(lo[rows, axis], hi[rows, axis])
    hi_left, lo_right = hi.copy(), lo.copy()
    hi_left[rows, axis] = mid
    lo_right[rows, axis] = mid
    return np.vstack([lo, lo_right]), np.vstack([hi_left, hi])


def tiny_scale(lo, hi) -> float:
    """Width below which :func:`branch_and_bound` settles a box: ``1e-14 max(1, max |finite end|)`` over the boxes
    ``[lo, hi]`` it starts from."""
    finite = np.where(np.isfinite(lo), np.abs(lo), 0.0) + np.where(np.isfinite(hi), np.abs(hi), 0.0)
    return 1e-14 * max(1.0, float(np.max(finite)))


@_quiet
def branch_and_bound(box, tm, cst, value, *, offset, tol, max_boxes, x0, settle=0.01, widest_if_unbounded=False,
                     upper=np.inf, one_point=False, monotone=False, stats=None,
                     desc="interval branch and bound", start=None, scale=None, stop_at=None):  # fmt: skip
    """Rigorous ``(lower, upper, x_best, n_boxes, live)`` for ``min L`` over ``box`` (module docstring).

    ``live``: ``(lo, hi)`` arrays of the boxes with ``lower <= upper`` when the search stopped (their
    hull encloses every global minimiser). Boxes are settled at ``lower >= upper - settle * tol``.
    ``widest_if_unbounded``: see :func:`_bisect` (the general model's certificates). ``upper``: a rigorous
    upper bound known from elsewhere (another region of a split domain; ``x_best`` is ``None`` while no point
    of this box beats it). ``one_point``: see :func:`box_bounds`.

    ``monotone`` (only for a minimum over all of ``R^n``, where every finite box is interior): the monotonicity
    test, a bounded box on which some ``dL/dx_i`` has one strict sign (:func:`_monotone`) is discarded. It holds
    no critical point, so no global minimiser when the infimum is attained (a minimiser of ``L`` over ``R^n`` is a
    critical point); when the infimum is a limit at infinity it is approached in the unbounded boxes, which the
    test never discards. Either way the kept boxes still bound ``inf L`` from below. ``stats``: a dict that receives
    ``n_monotone``, the boxes so discarded, ``scale`` (:func:`tiny_scale`) and ``frontier``. ``desc``: the progress
    bar's label (boxes done, and after each round the boxes still to split and the gap ``upper - lower`` so far).

    Pieces of one search (SPEC §7, "Sub-box tasks"): ``stop_at``: stop as soon as the next round would bound
    ``stop_at`` boxes or more; those boxes (not bounded, not counted) go to ``stats["frontier"]`` (``(lo, hi)``,
    empty when the search finished) and the result covers the rest. ``start``: ``(lo, hi)`` arrays ``(N, n)`` of
    the boxes to start from instead of ``box`` (a frontier); ``scale``: the settling width of the search they came
    from (default :func:`tiny_scale` of the start).
    """
    if start is None:
        lo, hi = np.array([[b[0] for b in box]], float), np.array([[b[1] for b in box]], float)
    else:
        lo, hi = (np.array(a, float).reshape(-1, len(box)) for a in start)
    x0 = None if x0 is None else np.asarray(x0, float)
    upper, x_best = float(upper), None
    if x0 is not None:
        u0 = float(evaluate(x0[None], x0[None], tm, cst, value, order=0, offset=offset).hi[0])
        if u0 < upper:
            upper, x_best = u0, x0
    kept_lower, kept_lo, kept_hi = [], [], []
    scale = tiny_scale(lo, hi) if scale is None else float(scale)
    n_boxes, n_mono, frontier = 0, 0, (lo[:0], hi[:0])
    pbar = progress_bar(desc=desc, unit="box", leave=False, delay=2.0)  # no total: max_boxes is a cap, not a forecast
    settled = np.inf  # least lower bound of the boxes settled so far
    while len(lo):  # the budget below keeps n_boxes <= max_boxes; every child is evaluated
        lower, up, x_up, smear, mono = box_bounds(lo, hi, tm, cst, value, x0, offset, one_point)
        n_boxes += len(lo)
        pbar.update(len(lo))
        k = int(np.argmin(up))
        if up[k] < upper:
            upper, x_best = float(up[k]), x_up[k].copy()
        keep = lower <= upper
        if monotone:
            n_mono += int(np.count_nonzero(keep & mono))
            keep &= ~mono
        done = keep & ((lower >= upper - settle * tol) | (np.max(hi - lo, axis=1) <= scale))
        split = np.flatnonzero(keep & ~done)
        budget = max(0, (max_boxes - n_boxes) // 2)
        if len(split) > budget:  # out of budget: split the lowest ones, keep the rest as they are
            order = split[np.argsort(lower[split], kind="stable")]
            split, rest = order[:budget], order[budget:]
            done[rest] = True
        kept_lower.append(lower[done])
        kept_lo.append(lo[done])
        kept_hi.append(hi[done])
        settled = min(settled, float(np.min(lower[done], initial=np.inf)))
        floor = min(settled, float(np.min(lower[split], initial=np.inf)), upper)
        pbar.set_postfix(to_split=len(split), gap=f"{upper - floor:.2g}", refresh=False)
        if len(split) == 0:
            break
        lo, hi = _bisect(lo[split], hi[split], smear[split], widest_if_unbounded)
        if stop_at is not None and len(lo) >= stop_at:
            frontier = (lo, hi)
            break
    pbar.close()
    if stats is not None:
        stats["n_monotone"] = stats.get("n_monotone", 0) + n_mono
        stats["scale"], stats["frontier"] = scale, frontier
    lows = np.concatenate(kept_lower) if kept_lower else np.zeros(0)
    lower = float(min(np.min(lows, initial=np.inf), upper))
    los, his = np.vstack(kept_lo) if kept_lo else lo, np.vstack(kept_hi) if kept_hi else hi
    live = lows <= upper
    return lower, upper, x_best, n_boxes, (los[live], his[live])
