"""The co-topic certificate's ``beta``-tables on a box, by a compiled exponential pass and BLAS products (SPEC §11.8,
"Interval certificate (co-topic family)"; :class:`._interval_cotopic.CotopicLoss`).

For a ``beta`` interval ``[b0, b1]`` and every word query ``x`` the tables are the per-topic sums over the other keys

.. math::
    R_o[x, t] = \\sum_{y \\ne x} e^{\\beta G_{xy}} G_{xy}^o\\, m'_t(y),\\qquad
    P_o[x, j, t] = \\sum_{y \\ne x} e^{\\beta G_{xy}} G_{xy}^o\\, m'_t(y) V_{yj}\\qquad (o \\le 2)

(the ``o``-th ``beta``-derivatives of ``R`` and ``P``), and ``R'_o`` of ``R'(beta) = sum_{y != x} m_y e^{beta (G_xy -
G_xx + sigma)}``. Every key has its own weight, so this is the ``V1``-sized work of a box; a (topic set, word) pair
then adds ``tau`` rows (the assembly of :class:`._interval_cotopic.CotopicLoss`). The pass is in two steps:

* :func:`exp_rows` (Numba, ``cache=True``, float64, no fastmath): for a block of query rows the non-negative interval
  matrices ``E_o[x, y] = e^{beta G_xy} G_xy^o`` (0 on the own key), with the exponential enclosed like
  :meth:`._interval_vec.IVec.exp` (``exp`` of the ends, here libm's through Numba, within 1 ulp, widened by
  ``2^-49`` relative and ``2^-1070`` absolute: 8 ulp) and every product rounded outward
  (:func:`._interval_scores_kernel._dn` / ``_up``: one float step away or more).
  :func:`exp_rows_reference` is the same in numpy :class:`._interval_vec.IVec` arithmetic (the tests' reference).
* :func:`nonneg_imatmul`: ``{E B : E in [E_lo, E_hi], B in [B_lo, B_hi]}`` for ``E >= 0``: a term ``e b`` is least at
  ``e_lo b_lo`` when ``b_lo >= 0`` and at ``e_hi b_lo`` otherwise, so ``lo = E_lo max(B_lo, 0) + E_hi min(B_lo, 0)`` and
  ``hi = E_hi max(B_hi, 0) + E_lo min(B_hi, 0)`` exactly; the float products (BLAS, any order of summation, FMA or
  not) are widened by the a priori bound ``2 (N + 4) u (1 + 2 (N + 4) u) E_hi |B| + (N + 4) 2^-1021`` (``u = 2^-53``,
  ``|B| = max(|B_lo|, |B_hi|)``; Higham §3.1 for each of the two products and the addition; the constant as
  :func:`._interval_label.imatmul`), one widening per entry instead of one per operation.

In the certificate's coordinates (``coords="sum"``, ``sigma = 1``) ``R'`` is ``c_x R`` with ``c_x = e^{beta
delta_x}``, ``delta_x = 1 - G_xx``: an exact identity (``e^{beta (G_xy - G_xx + 1)} = e^{beta G_xy} e^{beta
delta_x}``), so ``R'_1 = c (delta R_0 + R_1)`` and ``R'_2 = c (delta^2 R_0 + 2 delta R_1 + R_2)``, no second pass.
``G_xx`` is 1 up to the rounding of the cosine (``|delta_x| ~ 1e-16``), so the product of the two ranges is wider
than ``R'``'s range by the factor ``e^{|delta_x| (b1 - b0)}`` only: ``h``'s interval stays its range up to rounding.
In ``coords="original"`` (``delta_x = -G_xx``) that product would lose the dependency, and ``R'`` takes its own pass
(:func:`exp_rows` with the shift ``d_x = delta_x``, the ``T`` columns ``m'_t``).

**Cost model** (per ``beta`` interval; ``n`` words, ``T`` topics, ``k = rank W``, ``c = T (1 + k)`` columns, ``o`` the
order carried): ``2 n V1`` exponentials, ``2 o n V1`` outward-rounded products, the BLAS products ``E_lo [.]``
(``2 c`` columns) and ``E_hi [.]`` (``3 c``): ``10 (o + 1) n V1 c`` flops; memory ``2 (o + 1) ROWS V1`` floats for
a block of :data:`ROWS` query rows and ``2 (o + 1) n c`` for the tables. ``R'`` adds ``O(n T)`` (``coords="sum"``).
The tables of a ``beta`` interval serve every box with that interval (children split along ``alpha + beta`` keep
it): :class:`TableCache`.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numba
import numpy as np

from ._interval_label import imatmul
from ._interval_scores_kernel import _dn, _mul, _up
from ._interval_vec import _EXP_ABS, _EXP_REL, IVec

__all__ = ["exp_rows", "exp_rows_reference", "nonneg_imatmul", "beta_tables", "TableCache", "ROWS"]

#: Query rows per block of the exponential pass (memory ``2 (o + 1) ROWS V1`` floats).
ROWS = 256
#: ``beta`` intervals whose tables :class:`TableCache` keeps.
CACHE_SIZE = 12
_U = 2.0**-53
_TINY = 2.0**-1021


@numba.njit(cache=True, fastmath=False)
def _exp_lo(x):
    return max(_dn(math.exp(x) * (1.0 - _EXP_REL)), 0.0)


@numba.njit(cache=True, fastmath=False)
def _exp_hi(x):
    return _up(math.exp(x) * (1.0 + _EXP_REL) + _EXP_ABS)


@numba.njit(cache=True, fastmath=False)
def exp_rows(b0, b1, Gw, dlo, dhi, x0, order, lo, hi):
    """Fill ``lo, hi`` (``(order + 1, rows, V1)``) with ``E_o[x, y] = e^{beta w_xy} w_xy^o``, ``w_xy = G_xy + d_x``
    (``d_x`` in ``[dlo[x], dhi[x]]``; 0 for the tables ``R``, ``P``), for the query rows ``x = x0, ..., x0 + rows - 1``
    of ``Gw`` (``(n, V1)``; query ``x`` is the word ``x + 1``), ``beta in [b0, b1]``; 0 on the own key ``y = x + 1``
    (module docstring)."""
    rows, V1 = lo.shape[1], lo.shape[2]
    for i in range(rows):
        x = x0 + i
        for y in range(V1):
            if y == x + 1:
                for o in range(order + 1):
                    lo[o, i, y] = 0.0
                    hi[o, i, y] = 0.0
                continue
            wl, wh = Gw[x, y], Gw[x, y]
            if dlo[x] != 0.0 or dhi[x] != 0.0:
                wl, wh = _dn(wl + dlo[x]), _up(wh + dhi[x])
            el, eh = _mul(b0, b1, wl, wh)
            el, eh = _exp_lo(el), _exp_hi(eh)
            lo[0, i, y] = el
            hi[0, i, y] = eh
            for o in range(1, order + 1):
                el, eh = _mul(el, eh, wl, wh)
                lo[o, i, y] = el
                hi[o, i, y] = eh


def exp_rows_reference(b0, b1, Gw, dlo, dhi, x0, rows, order):
    """The numpy reference of :func:`exp_rows`: the list of :class:`IVec` ``E_o`` ``(rows, V1)`` by
    :class:`._interval_vec.IVec` arithmetic (``(beta w).exp() * off``, then ``* w`` per order)."""
    G = Gw[x0 : x0 + rows]
    off = np.ones(G.shape)
    off[np.arange(rows), np.arange(x0, x0 + rows) + 1] = 0.0
    w = IVec(G) + IVec(dlo[x0 : x0 + rows, None], dhi[x0 : x0 + rows, None])
    E = [(IVec(np.full(G.shape, b0), np.full(G.shape, b1)) * w).exp() * IVec(off)]
    for _ in range(order):
        E.append(E[-1] * w)
    return E


def nonneg_imatmul(Elo, Ehi, Bsplit):
    """An enclosure of ``{E B}`` for the non-negative interval matrix ``[Elo, Ehi]`` and ``B`` given by
    :func:`split_columns` (module docstring): ``(lo, hi)``."""
    BloP, BhiN, BloN, BhiP, Babs = Bsplit
    N = Elo.shape[-1]
    f = 2.0 * (N + 4) * _U
    c = BloP.shape[1]
    with np.errstate(all="ignore"):
        A = Elo @ np.hstack([BloP, BhiN])
        B = Ehi @ np.hstack([BloN, BhiP, Babs])
        lo = A[:, :c] + B[:, :c]
        hi = B[:, c : 2 * c] + A[:, c:]
        rad = np.nextafter(f * B[:, 2 * c :] * (1.0 + f) + (N + 4) * _TINY, np.inf)
        lo, hi = np.nextafter(lo - rad, -np.inf), np.nextafter(hi + rad, np.inf)
    return np.where(np.isnan(lo), -np.inf, lo), np.where(np.isnan(hi), np.inf, hi)


def split_columns(B: IVec):
    """``(max(B_lo, 0), min(B_hi, 0), min(B_lo, 0), max(B_hi, 0), max(|B_lo|, |B_hi|))`` of an interval matrix."""
    return (np.maximum(B.lo, 0.0), np.minimum(B.hi, 0.0), np.minimum(B.lo, 0.0), np.maximum(B.hi, 0.0),
            np.maximum(np.abs(B.lo), np.abs(B.hi)))  # fmt: skip


def beta_tables(Gw, B: IVec, b0, b1, order, rows=ROWS, shift=None, split=None):
    """``[lo, hi]`` of ``sum_{y != x} E_o[x, y] B[y, :]`` for ``o <= order``: arrays ``(order + 1, n, cols)``, by
    blocks of ``rows`` query rows (:func:`exp_rows` with ``d = shift``, a pair of ``(n,)`` arrays, default 0;
    :func:`nonneg_imatmul` with ``split = split_columns(B)``; a block of ``E_o`` with a negative entry, ``w_xy < 0``
    and ``o`` odd, takes the midpoint-radius :func:`._interval_label.imatmul` instead)."""
    n, V1 = Gw.shape
    dlo, dhi = (np.zeros(n), np.zeros(n)) if shift is None else shift
    split = split_columns(B) if split is None else split
    cols = B.lo.shape[1]
    lo, hi = np.empty((order + 1, n, cols)), np.empty((order + 1, n, cols))
    Elo, Ehi = np.empty((order + 1, rows, V1)), np.empty((order + 1, rows, V1))
    for x0 in range(0, n, rows):
        r = min(rows, n - x0)
        exp_rows(float(b0), float(b1), Gw, dlo, dhi, x0, order, Elo[:, :r], Ehi[:, :r])
        for o in range(order + 1):
            if Elo[o, :r].min() >= 0.0:
                lo[o, x0 : x0 + r], hi[o, x0 : x0 + r] = nonneg_imatmul(Elo[o, :r], Ehi[o, :r], split)
            else:
                prod = imatmul(IVec(Elo[o, :r], Ehi[o, :r]), B)
                lo[o, x0 : x0 + r], hi[o, x0 : x0 + r] = prod.lo, prod.hi
    return lo, hi


class TableCache:
    """The tables of the last :data:`CACHE_SIZE` ``beta`` intervals (least recently used dropped), each at the
    highest order computed so far: a box whose ``beta`` interval was seen reuses them. ``compute(b0, b1, order)``
    returns ``(lo, hi)`` arrays ``(order' + 1, n, cols)``, ``order' >= order``."""

    def __init__(self, compute, size=CACHE_SIZE):
        self.compute, self.size = compute, size
        self.store: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    def get(self, b0, b1, order):
        key = (float(b0), float(b1))
        got = self.store.get(key)
        if got is not None and got[0].shape[0] > order:
            self.store.move_to_end(key)
            self.hits += 1
            return got
        self.misses += 1
        got = self.compute(key[0], key[1], order)
        self.store[key] = got
        self.store.move_to_end(key)
        while len(self.store) > self.size:
            self.store.popitem(last=False)
        return got
