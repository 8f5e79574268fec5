"""Vectorised Numba kernel of the label family's score-coordinate interval sums (SPEC §7, §11.8): :func:`label_sums`.

The same loss, gradient and Hessian enclosures per (box, pair) as :mod:`._interval_scores_kernel` (the per-pair
kernel it replaces as the default engine of :func:`._interval_scores.score_loss`; that kernel and the numpy engine
``_interval_scores._pair_terms`` stay as references the tests compare with): with the class masses' ranges ``[h_i]``
on the box, ``r_a = 2 omega (G h)_a - E_a`` and ``rho = h . r``,

.. math::
    \\ell = \\omega (h^T G h + 1) - E \\cdot h,\\quad
    \\frac{\\partial \\ell}{\\partial \\sigma_j} = h_j (r_j - \\rho),\\quad
    \\frac{\\partial^2 \\ell}{\\partial \\sigma_j \\partial \\sigma_k}
    = \\sum_{a, b} D_{aj}\\, 2 \\omega G_{ab}\\, D_{bk} + \\delta_{jk} h_j (r_j - \\rho) - h_j h_k (r_j + r_k - 2\\rho)

(``D_aj = h_a (delta_aj - h_j)``, ``h (1 - h)`` with its exact range; the derivatives are the closed-form softmax
derivatives in the class scores ``sigma``, evaluated in interval arithmetic over the ranges ``[h_i]``), summed over
the pairs per box. What differs is the layout and the order of the loops, not the formulas:

- **Layout.** The pair coefficients are one ``(n_tiles, 38, TILE)`` array (:func:`pack_soa`: in tile ``t``, row
  ``2 k`` / ``2 k + 1`` holds the lower / upper ends of the ``k``-th of ``r`` (6), ``ind`` (3), ``Gb`` (6), ``Eb``
  (3), ``omega`` of the pairs ``t TILE ..``), so the loop over the pairs of a tile reads each row contiguously. That
  loop (innermost, one box at a time) is generated straight-line scalar code (:mod:`._interval_label_codegen` writes
  :mod:`._interval_label_tiles`: one function per order and second class), which LLVM vectorises: the lanes of a
  SIMD register are pairs. The per-pair results go to a tile buffer, then into the sums. One pass over the
  coefficients serves every box of a call (tiles outer, boxes inner: the tile stays in cache).
- **Class masses.** ``h_i = ind_i / z_i`` with ``z_i = 1 + e_a r_(2i) + e_b r_(2i+1) >= 1`` exactly (``e >= 0``,
  ``r >= 0``): its lower end is ``dn(1 / up(z))`` with the exponentials' upper ends at the box corner of its least
  value (where ``z_i`` is largest) and its upper end ``up(1 / max(1, dn(z)))`` with their lower ends at the corner of
  its largest (each ``h_i`` is monotone in each variable, :mod:`._interval_scores`); only the end needed is computed
  at each corner (the per-pair kernel computes both ends at both corners and rounds ``ind_i q`` once more). A ratio
  with upper end 0 (an empty class) makes its term exactly 0, also where the box's exponential is infinite.
  ``ind_i`` is exactly 0 or 1 (checked by :func:`pack_soa`), so ``ind_i q`` is exact. The ratios and ``omega`` are
  exactly non-negative, so :func:`pack_soa` raises their lower ends to 0.
- **Products.** Every product has a factor of known sign (a class mass, a product of masses, ``2 omega``, an entry of
  ``D``: ``h (1 - h) >= 0`` or ``-h_a h_c <= 0``), so it takes two end products chosen by the other factor's signs
  instead of four (the operations are listed in :mod:`._interval_label_codegen`).
- **Sums.** Per tile and box each result row is added in :data:`LANES` interleaved partial sums (pair ``j`` into
  sum ``j mod LANES``, a fixed order), each addition rounded outward; the partial sums pairwise, into the block's sums
  tile by tile, the blocks in block order.

**Rounding.** Every ``+ - * /`` is IEEE-754 correctly rounded to nearest, lane by lane in the vector instructions as
in scalar code (``fastmath=False``: no contraction into FMA, no reassociation; the compiled loops were checked to hold
AVX-512 ``vmulpd``/``vdivpd`` and no ``vfmadd``). Each computed end ``x`` of an operation is moved outward by
``d = fl(fl(2^-52 |x|) + 2^-1074)``, at least the gap from ``x`` to its neighbour, so ``fl(x - d) <= pred(x) <= y``
and ``fl(x + d) >= succ(x) >= y`` for the exact result ``y`` (the proof case by case in
:mod:`._interval_scores_kernel`); a NaN end (``0 * inf``, ``inf - inf``) becomes ``-inf`` in a lower end and
``+inf`` in an upper end. The kernel calls no ``exp``: the exponentials of the box corners are computed by
:meth:`._interval_vec.IVec.exp` (numpy's ``exp``, whose error bound and widening ``_EXP_REL``, ``_EXP_ABS`` are
justified and tested in :mod:`._interval_vec`), as for the reference engines. ``error_model="numpy"`` only drops
Python's division-by-zero exception (no divisor here can be 0: ``z >= 1``).

**Threads.** The pairs are cut into at most :data:`BLOCKS` blocks of whole tiles, fixed by ``P`` alone; the blocks
run in parallel (``prange``), each with its own partial sums, combined in block order: the result is the same bit
for bit on any number of threads (``tests/test_interval_label_kernel.py`` runs 1 and 2 threads in subprocesses).

Kernels never validate: the caller (:func:`._interval_scores.score_loss`) did.
"""

from __future__ import annotations

import numba
import numpy as np

from ..._memory import check_alloc
from . import _interval_label_tiles as T
from ._interval_label_tiles import TILE, _dn, _up

__all__ = ["label_sums", "pack_soa", "N_ROWS", "TILE", "LANES", "BLOCKS"]

#: Rows of the packed layout: the two ends of 19 intervals per pair.
N_ROWS = 38
#: Interleaved partial sums per tile.
LANES = 8
#: Largest number of blocks (parallel units with their own partial sums).
BLOCKS = 64


def pack_soa(chunks, pairs: int) -> np.ndarray:
    """The pair coefficients of the chunks (each 22 :class:`IVec` of shape ``(P_c,)``, layout of
    :mod:`._interval_label`) as one ``(n_tiles, 38, TILE)`` array: tile ``t`` holds the pairs ``t TILE ..``, row
    ``2 k`` / ``2 k + 1`` the lower / upper ends of the ``k``-th of ``r`` (6), ``ind`` (3), ``Gb`` (6), ``Eb`` (3),
    ``omega`` (the last tile padded with zeros, never read). The exactly non-negative ratios and ``omega`` get their
    lower ends raised to 0 (``dn(0) < 0`` otherwise); raises if a class indicator is not exactly 0 or 1 (the kernel
    relies on both)."""
    ntile = (pairs + TILE - 1) // TILE
    check_alloc("label interval kernel: packed pair coefficients", (ntile, N_ROWS, TILE), alternative="a smaller model")
    out = np.zeros((ntile, N_ROWS, TILE))
    flat = out.reshape(ntile, N_ROWS, TILE)
    p0 = 0
    for c in chunks:
        P = c[0].lo.shape[0]
        rows = np.empty((N_ROWS, P))
        for k, x in enumerate(c[3:22]):
            rows[2 * k], rows[2 * k + 1] = np.broadcast_to(x.lo, (P,)), np.broadcast_to(x.hi, (P,))
        rows[0:12:2] = np.maximum(rows[0:12:2], 0.0)
        rows[36] = np.maximum(rows[36], 0.0)
        ind = rows[12:18]
        if not np.all((ind == 0.0) | (ind == 1.0)) or not np.array_equal(ind[0::2], ind[1::2]):
            raise RuntimeError("class indicators must be exactly 0 or 1")
        _put(flat, rows, p0)
        p0 += P
    if p0 != pairs:
        raise RuntimeError(f"packed {p0} pairs, expected {pairs}")
    return out


def _put(out, rows, p0: int) -> None:
    """Write the pairs ``p0 ..`` (the columns of ``rows``, ``(38, P)``) into the tiles of ``out``: the tiles they
    fill whole in one strided copy, the partial tiles at either end by slices."""
    P, j = rows.shape[1], 0
    while j < P:
        t, o = divmod(p0 + j, TILE)
        if o == 0 and P - j >= TILE:
            k = (P - j) // TILE
            out[t : t + k] = rows[:, j : j + k * TILE].reshape(N_ROWS, k, TILE).transpose(1, 0, 2)
            j += k * TILE
        else:
            n = min(TILE - o, P - j)
            out[t, :, o : o + n] = rows[:, j : j + n]
            j += n


# ------------------------------------------------------------------ tiles, lanes, blocks
@numba.njit(cache=True, fastmath=False, error_model="numpy")
def _sum_dn(buf, o, L):
    """A lower bound of ``sum buf[o : o + L]``: entry ``j`` into the partial sum ``j mod 8`` (each addition rounded
    down), then the eight partial sums in order (:data:`LANES`)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    full = L - L % LANES
    for j in range(o, o + full, LANES):
        s0, s1, s2, s3 = _dn(s0 + buf[j]), _dn(s1 + buf[j + 1]), _dn(s2 + buf[j + 2]), _dn(s3 + buf[j + 3])
        s4, s5, s6, s7 = _dn(s4 + buf[j + 4]), _dn(s5 + buf[j + 5]), _dn(s6 + buf[j + 6]), _dn(s7 + buf[j + 7])
    for j in range(o + full, o + L):
        s0 = _dn(s0 + buf[j])
    return _dn(_dn(_dn(s0 + s1) + _dn(s2 + s3)) + _dn(_dn(s4 + s5) + _dn(s6 + s7)))


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def _sum_up(buf, o, L):
    """An upper bound of ``sum buf[o : o + L]`` (:func:`_sum_dn` with every addition rounded up)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    full = L - L % LANES
    for j in range(o, o + full, LANES):
        s0, s1, s2, s3 = _up(s0 + buf[j]), _up(s1 + buf[j + 1]), _up(s2 + buf[j + 2]), _up(s3 + buf[j + 3])
        s4, s5, s6, s7 = _up(s4 + buf[j + 4]), _up(s5 + buf[j + 5]), _up(s6 + buf[j + 6]), _up(s7 + buf[j + 7])
    for j in range(o + full, o + L):
        s0 = _up(s0 + buf[j])
    return _up(_up(_up(s0 + s1) + _up(s2 + s3)) + _up(_up(s4 + s5) + _up(s6 + s7)))


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def _block(c, P, t0, t1, xs, second, order, part):
    """Sums over the tiles ``t0 .. t1 - 1`` (in order) into ``part[box, 12]`` (zeroed by the caller)."""
    N = xs.shape[0]
    nq = 2 if order == 0 else (6 if order == 1 else 12)
    buf = np.empty(12 * TILE)
    for t in range(t0, t1):
        L = min(P - t * TILE, TILE)
        ct = c[t]  # (38, TILE): in the pair loop every index is a constant row and the loop counter
        for n in range(N):
            if order == 0:
                T.tile_0_1(ct, L, xs, n, buf)
            elif order == 1 and second == 1:
                T.tile_1_1(ct, L, xs, n, buf)
            elif order == 1:
                T.tile_1_2(ct, L, xs, n, buf)
            elif second == 1:
                T.tile_2_1(ct, L, xs, n, buf)
            else:
                T.tile_2_2(ct, L, xs, n, buf)
            for q in range(0, nq, 2):
                part[n, q] = _dn(part[n, q] + _sum_dn(buf, q * TILE, L))
                part[n, q + 1] = _up(part[n, q + 1] + _sum_up(buf, (q + 1) * TILE, L))


@numba.njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def _label_sums_nb(c, P, xs, second, order, nblk):
    N = xs.shape[0]
    ntile = (P + TILE - 1) // TILE
    part = np.zeros((nblk, N, 12))
    for b in numba.prange(nblk):
        _block(c, P, (b * ntile) // nblk, ((b + 1) * ntile) // nblk, xs, second, order, part[b])
    out = np.zeros((N, 12))
    for b in range(nblk):
        for n in range(N):
            for k in range(12):
                v = out[n, k] + part[b, n, k]
                out[n, k] = _dn(v) if k % 2 == 0 else _up(v)
    return out


def box_exponentials(ex: np.ndarray, low, high) -> np.ndarray:
    """``(N, 12)`` per box from the corner enclosures ``ex`` ``(N, 4, 6, 2)`` of
    :func:`._interval_scores._corner_exps`: per class ``i`` the upper ends of its two exponentials in slot
    ``low[i]`` (the corner of its least mass), then the lower ends in slot ``high[i]``."""
    N = ex.shape[0]
    out = np.empty((N, 12))
    for i in range(3):
        out[:, 2 * i : 2 * i + 2] = ex[:, low[i], 2 * i : 2 * i + 2, 1]
        out[:, 6 + 2 * i : 8 + 2 * i] = ex[:, high[i], 2 * i : 2 * i + 2, 0]
    return out


def label_sums(coef: np.ndarray, pairs: int, xs: np.ndarray, order: int, second: int = 1) -> np.ndarray:
    """Per box the interval sums over the pairs of ``coef`` (:func:`pack_soa`) of the value, gradient
    (``order >= 1``) and Hessian (``order == 2``): an ``(N, 12)`` array, columns ``2 q``, ``2 q + 1`` the ends of
    quantity ``q`` (value, 2 gradient entries, Hessian ``11, 12, 22``; unused ones 0). ``xs``: ``(N, 12)`` the boxes'
    corner exponentials (:func:`box_exponentials`); ``second``: the class of the second variable (1: derivatives in
    ``(s, beta)``; 2: in ``(alpha, -beta)``)."""
    P = int(pairs)
    nblk = max(1, min(BLOCKS, (P + TILE - 1) // TILE))
    return _label_sums_nb(coef, P, np.ascontiguousarray(xs, dtype=float), int(second), int(order), nblk)
