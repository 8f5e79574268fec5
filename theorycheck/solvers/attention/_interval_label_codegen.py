"""Generator of :mod:`._interval_label_tiles`, the straight-line pair loops of the label interval kernel (SPEC §7,
§11.8; :mod:`._interval_label_kernel`).

LLVM vectorises a loop over the pairs of a tile only when its body is straight-line scalar code: no call left at
vectorisation time and no tuple values (a Numba helper returning an interval as a tuple, even inlined, keeps the
loop scalar). So the per-pair formulas are written here once, with interval operations on pairs of variable names,
and :func:`source` expands them into one scalar statement per rounded operation: the generated module holds a
function per (order, second class) whose loop body has no call but ``_dn``, ``_up`` (scalar, inlined), ``abs``,
``min`` and ``max``. The file is generated, never edited: ``python -m
theorycheck.solvers.attention._interval_label_codegen`` rewrites it, and ``tests/test_interval_label_kernel.py``
checks it equals :func:`source`.

Interval operations (each end rounded outward by ``_dn`` / ``_up``, :mod:`._interval_label_kernel` states why that is
rigorous): ``add``, ``sub``; ``dbl`` (``2 a``, exact but for an overflow); ``mulh`` (a product ``x y`` with ``x``
in ``a`` exactly non-negative, ``b_lo <= y <= b_hi``: ``x y >= a_lo b_lo`` when ``b_lo >= 0`` (``a_lo b_lo <=
max(a_lo, 0) b_lo <= x y``; ``a_lo`` may be a rounded ``-2^-1074``) and ``x y >= x b_lo >= a_hi b_lo`` otherwise; ``x y
<= a_hi b_hi`` when ``b_hi >= 0`` and ``x y <= x b_hi <= min(a_lo, 0) b_hi <= a_lo b_hi`` otherwise); ``muls`` (with an
interval of one sign: non-negative, or non-positive when its lower end is ``< 0``); ``mulp`` (two intervals in
``[0, 1]``: the ends multiply); ``negprod`` (``-(x y)`` for ``x, y`` in ``[0, 1]``, upper end clamped to 0);
``sq01`` (``x^2`` on ``[0, 1]``); ``omx`` (``x (1 - x)``, its exact range: concave, least at an end, largest at
``1/2`` when held).
"""

from __future__ import annotations

import pathlib

#: Pairs per tile.
TILE = 256
_TARGET = pathlib.Path(__file__).with_name("_interval_label_tiles.py")


class _Emit:
    """Scalar statements for interval operations on pairs of variable names."""

    def __init__(self):
        self.lines: list[str] = []
        self.k = 0

    def let(self, expr: str) -> str:
        name = f"v{self.k}"
        self.k += 1
        self.lines.append(f"{name} = {expr}")
        return name

    def coef(self, k):
        """Interval ``k`` of the pair (0-5 ``r``, 6-8 ``ind``, 9-14 ``Gb``, 15-17 ``Eb``, 18 ``omega``)."""
        return self.let(f"c[{2 * k}, p]"), self.let(f"c[{2 * k + 1}, p]")

    def add(self, a, b):
        return self.let(f"_dn({a[0]} + {b[0]})"), self.let(f"_up({a[1]} + {b[1]})")

    def sub(self, a, b):
        return self.let(f"_dn({a[0]} - {b[1]})"), self.let(f"_up({a[1]} - {b[0]})")

    def dbl(self, a):
        """``2 a``: exact, except an overflow to the wrong side (``+inf`` in a lower end, ``-inf`` in an upper end)
        or a NaN, which become the whole line's end."""
        lo, hi = self.let(f"2.0 * {a[0]}"), self.let(f"2.0 * {a[1]}")
        return self.let(f"{lo} if {lo} < _INF else -_INF"), self.let(f"{hi} if {hi} > -_INF else _INF")

    def mulh(self, a, b):
        lo = self.let(f"_dn({a[0]} * {b[0]} if {b[0]} >= 0.0 else {a[1]} * {b[0]})")
        return lo, self.let(f"_up({a[1]} * {b[1]} if {b[1]} >= 0.0 else {a[0]} * {b[1]})")

    def muls(self, d, b):
        pos = self.mulh(d, b)
        neg = self.mulh((self.let(f"-{d[1]}"), self.let(f"-{d[0]}")), b)
        lo = self.let(f"{pos[0]} if {d[0]} >= 0.0 else -{neg[1]}")
        return lo, self.let(f"{pos[1]} if {d[0]} >= 0.0 else -{neg[0]}")

    def mulp(self, a, b):
        return self.let(f"_dn({a[0]} * {b[0]})"), self.let(f"_up({a[1]} * {b[1]})")

    def negprod(self, a, b):
        q = self.mulp(a, b)
        return self.let(f"-{q[1]}"), self.let(f"-max({q[0]}, 0.0)")

    def sq01(self, a):
        return self.let(f"max(_dn({a[0]} * {a[0]}), 0.0)"), self.let(f"_up({a[1]} * {a[1]})")

    def omx(self, a):
        u = self.mulh((a[0], a[0]), (self.let(f"_dn(1.0 - {a[0]})"), self.let(f"_up(1.0 - {a[0]})")))
        v = self.mulh((a[1], a[1]), (self.let(f"_dn(1.0 - {a[1]})"), self.let(f"_up(1.0 - {a[1]})")))
        lo = self.let(f"max(min({u[0]}, {v[0]}), 0.0)")
        return lo, self.let(f"0.25 if ({a[0]} <= 0.5) & ({a[1]} >= 0.5) else max({u[1]}, {v[1]})")

    def mass(self, i):
        """``[h_i]``: lower end ``dn(1 / up(z))`` from the upper ends ``x[2i], x[2i+1]`` of the exponentials at the
        corner of the least ``h_i``, upper end ``up(1 / max(1, dn(z)))`` from the lower ends ``x[6+2i], x[7+2i]`` at
        the corner of the largest (``z = 1 + e_a r_a + e_b r_b >= 1``; a term is exactly 0 when its ratio is
        ``[0, 0]``, a NaN lower end of a term (``inf * 0``) becomes 0), times the exact 0/1 indicator."""
        ra, rb, ind = self.coef(2 * i), self.coef(2 * i + 1), self.let(f"c[{2 * (6 + i)}, p]")
        ea, eb, fa, fb = (f"x{k}" for k in (2 * i, 2 * i + 1, 6 + 2 * i, 7 + 2 * i))
        ta = self.let(f"0.0 if {ra[1]} == 0.0 else _up({ea} * {ra[1]})")
        tb = self.let(f"0.0 if {rb[1]} == 0.0 else _up({eb} * {rb[1]})")
        z = self.let(f"_up(_up({ta} + {tb}) + 1.0)")
        lo = self.let(f"min(max(_dn(1.0 / {z}), 0.0), 1.0) * {ind}")
        sa = self.let(f"0.0 if {ra[1]} == 0.0 else max(_dn({fa} * {ra[0]}), 0.0)")
        sb = self.let(f"0.0 if {rb[1]} == 0.0 else max(_dn({fb} * {rb[0]}), 0.0)")
        w = self.let(f"max(_dn(_dn({sa} + {sb}) + 1.0), 1.0)")
        return lo, self.let(f"min(_up(1.0 / {w}), 1.0) * {ind}")


def _pair(E: _Emit, order: int, second: int):
    """The per-pair formulas (module docstring of :mod:`._interval_label_kernel`): the intervals to store."""
    h = [E.mass(i) for i in range(3)]
    G = {k: E.coef(k) for k in range(9, 15)}  # 11, 12, 13, 22, 23, 33
    Gm = [[G[9], G[10], G[11]], [G[10], G[12], G[13]], [G[11], G[13], G[14]]]
    Eb, om = [E.coef(k) for k in (15, 16, 17)], E.coef(18)
    q = E.add(E.add(E.mulh(E.sq01(h[0]), G[9]), E.mulh(E.sq01(h[1]), G[12])), E.mulh(E.sq01(h[2]), G[14]))
    x = E.add(E.mulh(E.mulp(h[0], h[1]), G[10]), E.mulh(E.mulp(h[0], h[2]), G[11]))
    x = E.add(x, E.mulh(E.mulp(h[1], h[2]), G[13]))
    q = E.add(E.add(q, E.dbl(x)), ("1.0", "1.0"))
    e = E.add(E.add(E.mulh(h[0], Eb[0]), E.mulh(h[1], Eb[1])), E.mulh(h[2], Eb[2]))
    out = [E.sub(E.mulh(om, q), e)]
    if order == 0:
        return out
    o2 = E.dbl(om)
    r = []
    for a in range(3):
        d = E.add(E.add(E.mulh(h[0], Gm[a][0]), E.mulh(h[1], Gm[a][1])), E.mulh(h[2], Gm[a][2]))
        r.append(E.sub(E.mulh(o2, d), Eb[a]))
    rho = E.add(E.add(E.mulh(h[0], r[0]), E.mulh(h[1], r[1])), E.mulh(h[2], r[2]))
    cls = (0, second)
    g = [E.mulh(h[c], E.sub(r[c], rho)) for c in cls]
    out += g
    if order == 1:
        return out
    D = [[E.omx(h[a]) if a == c else E.negprod(h[a], h[c]) for a in range(3)] for c in cls]  # D[j][a] = D_aj
    GD = [[E.mulh(o2, E.add(E.add(E.muls(D[j][0], Gm[a][0]), E.muls(D[j][1], Gm[a][1])), E.muls(D[j][2], Gm[a][2])))
           for a in range(3)] for j in range(2)]  # fmt: skip
    rho2 = E.dbl(rho)
    for j, k in ((0, 0), (0, 1), (1, 1)):
        cj, ck = cls[j], cls[k]
        s = E.add(E.add(E.muls(D[j][0], GD[k][0]), E.muls(D[j][1], GD[k][1])), E.muls(D[j][2], GD[k][2]))
        s = E.sub(s, E.mulh(E.mulp(h[cj], h[ck]), E.sub(E.add(r[cj], r[ck]), rho2)))
        out.append(E.add(s, g[j]) if j == k else s)
    return out


def _function(order: int, second: int) -> str:
    E = _Emit()
    out = _pair(E, order, second)
    name = f"tile_{order}_{second}"
    head = [
        "",
        "",
        "@numba.njit(cache=True, fastmath=False, error_model='numpy')",
        f"def {name}(c, L, xs, n, buf):  # pragma: no cover - compiled",
        f'    """Order {order}, second class {second}: the ``L`` pairs of the tile ``c`` on box ``n`` into ``buf``."""',
    ]
    head += [f"    x{k} = xs[n, {k}]" for k in range(12)]
    body = ["    for p in range(L):", "        u = np.uint64(p)"]
    body += [f"        {line}" for line in E.lines]
    for q, (lo, hi) in enumerate(out):
        body.append(f"        buf[u + np.uint64({2 * q * TILE})] = {lo}")
        body.append(f"        buf[u + np.uint64({(2 * q + 1) * TILE})] = {hi}")
    return "\n".join(head + body)


def source() -> str:
    """The text of :mod:`._interval_label_tiles`."""
    head = f'''"""Generated by :mod:`._interval_label_codegen` (do not edit): the pair loops of the label kernel.

``tile_<order>_<second>(c, L, xs, n, buf)``: for the first ``L`` pairs ``p`` of the tile ``c`` ``(38, TILE)`` of
packed coefficients on box ``n`` (corner exponentials ``xs[n]``), the value (and gradient,
Hessian) intervals into the flat ``buf`` ``(12 TILE,)``: ``buf[2 q TILE + p]`` / ``buf[(2 q + 1) TILE + p]`` the
lower / upper ends of quantity ``q`` (unsigned indices: no negative-index wraparound, so LLVM sees one store stream
at constant offsets and vectorises the loop). ``_dn``, ``_up``: one outward step (:mod:`._interval_label_kernel`,
"Rounding").
"""

# fmt: off
from __future__ import annotations

import numba
import numpy as np

TILE = {TILE}
_EPS = 2.0**-52
_ETA = 2.0**-1074
_INF = np.inf


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def _dn(x):  # pragma: no cover - compiled
    y = x - (abs(x) * _EPS + _ETA)
    return y if y == y else -_INF


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def _up(x):  # pragma: no cover - compiled
    y = x + (abs(x) * _EPS + _ETA)
    return y if y == y else _INF'''
    fns = [_function(order, second) for order, second in ((0, 1), (1, 1), (1, 2), (2, 1), (2, 2))]
    return head + "\n".join(fns) + "\n"


if __name__ == "__main__":
    _TARGET.write_text(source())
    print(f"wrote {_TARGET}")
