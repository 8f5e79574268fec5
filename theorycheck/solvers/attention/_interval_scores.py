"""The label family's rigorous loss in score coordinates ``(s, beta) = (alpha + beta, beta)`` (SPEC §7, §11.8).

:class:`._interval_label.LabelLoss` writes each (law, word) pair's loss as a quadratic in the attention masses
``h = (h_1, h_2, h_3)`` of the query's three key classes (own word, the rest of its label, all other keys):
``ell = omega (h^T G h + 1) - E . h``. The class scores are ``(alpha + beta, beta, 0) = (s, beta, 0)``, so ``h`` is
the softmax of ``sigma + log m`` with ``sigma = (s, beta, 0)`` and the pair's class masses ``m``. In these
coordinates the derivatives of ``h`` are polynomials in ``h`` (``dh_a/dsigma_j = h_a (delta_aj - h_j)``), and with
``r = 2 omega G h - E`` and ``rho = h . r``:

.. math::
    \\frac{\\partial \\ell}{\\partial \\sigma_j} = h_j (r_j - \\rho),\\qquad
    \\frac{\\partial^2 \\ell}{\\partial \\sigma_j \\partial \\sigma_k}
    = \\sum_{a, b} D_{aj}\\, 2 \\omega G_{ab}\\, D_{bk} + \\delta_{jk} h_j (r_j - \\rho) - h_j h_k (r_j + r_k - 2\\rho),
    \\quad D_{aj} = h_a (\\delta_{aj} - h_j)

for ``j, k in {s, beta}``. On a box of ``(s, beta)`` each ``h_i`` is monotone in ``s`` and in ``beta`` separately
(``h_1 = 1/(1 + r_12 e^(beta - s) + r_13 e^-s)`` increases in ``s`` and decreases in ``beta``, ``h_2 = 1/(1 +
r_21 e^(s - beta) + r_23 e^-beta)`` the reverse, ``h_3 = 1/(1 + r_31 e^s + r_32 e^beta)`` decreases in both), so
its range on the box is the hull of its four corner values (outward rounded). The value, gradient and Hessian are
the natural interval extensions of the formulas above over those ranges (``h (1 - h)`` with its exact range),
summed over the pairs with outward rounding. Unlike forward-mode interval differentiation of the chain
``exp -> + -> 1/x -> quadratic`` (:meth:`LabelLoss.original`), every ``h`` enters through its exact range, and the
Hessian enclosures are an order of magnitude narrower on the same box (``benchmarks/bench_interval_label.py``).
The loss is smooth on all of ``R^2`` in these coordinates (no chart singularity), which makes it the evaluator of
the local certificate and of the inner region of the whole-domain certificate (:mod:`._interval_general`).

Three engines evaluate the per-(box, pair) terms: the vectorised Numba kernel of :mod:`._interval_label_kernel`
(``"numba"``), the per-pair Numba kernel of :mod:`._interval_scores_kernel` (``"numba-pairs"``) and numpy
(``"numpy"``, the reference); the coefficients of the pairs come from ``LabelLoss._chunks()`` in all three. When
no engine is given, the number of pairs chooses (:data:`VECTOR_FROM`): the vectorised kernel is the faster per
(box, pair), but its straight-line generated code takes several times longer to compile than the per-pair kernel
(measured in ``benchmarks/results/interval_label_kernel.json``), which only a certificate over many pairs repays.
The choice depends on the model alone, so a distributed run's workers choose as the serial run does.
"""

from __future__ import annotations

import weakref
from fractions import Fraction

import numpy as np

from ..._memory import default_max_bytes
from ..._threads import small_problem
from ._interval_label import LabelLoss, _clip01, _row_sum
from ._interval_label_kernel import N_ROWS, TILE, box_exponentials, label_sums, pack_soa
from ._interval_scores_kernel import HIGH_CORNER, LOW_CORNER, N_COEF, pack_coefficients, score_sums
from ._interval_vec import T2, IVec, ivec_exact

__all__ = ["ENGINES", "FRAMES", "packed_chunks", "score_loss", "to_scores"]


def to_scores(alpha, beta):
    """``(s, beta) = (alpha + beta, beta)``."""
    return float(alpha) + float(beta), float(beta)


def _omx(x: IVec) -> IVec:
    """``x (1 - x)`` with its exact range on ``x`` in ``[0, 1]`` (concave: the minimum at an end, the maximum at
    ``1/2`` when the interval holds it)."""
    one = ivec_exact(1)
    a, b = IVec(x.lo) * (one - IVec(x.lo)), IVec(x.hi) * (one - IVec(x.hi))
    lo = np.maximum(np.minimum(a.lo, b.lo), 0.0)
    hi = np.where((x.lo <= 0.5) & (x.hi >= 0.5), 0.25, np.maximum(a.hi, b.hi))
    return IVec(lo, hi)


def _times(e: IVec, r: IVec) -> IVec:
    """``e r``, exactly 0 where ``r = [0, 0]`` (an empty class; also for an infinite ``e``)."""
    p = e * r
    zero = (r.lo == 0) & (r.hi == 0)
    return IVec(np.where(zero, 0.0, p.lo), np.where(zero, 0.0, p.hi))


def _ranges(cf, exps):
    """The class masses' ranges ``[h_i]`` on each box: hulls of the corner values (module docstring)."""
    r, ind = cf[3:9], cf[9:12]
    lo, hi = [np.inf] * 3, [-np.inf] * 3
    for e in exps:
        hs = (
            (_times(e["b-s"], r[0]) + _times(e["-s"], r[1]) + 1).recip() * ind[0],
            (_times(e["s-b"], r[2]) + _times(e["-b"], r[3]) + 1).recip() * ind[1],
            (_times(e["s"], r[4]) + _times(e["b"], r[5]) + 1).recip() * ind[2],
        )
        for i in range(3):
            hc = _clip01(hs[i])
            lo[i], hi[i] = np.minimum(lo[i], hc.lo), np.maximum(hi[i], hc.hi)
    return [IVec(lo[i], hi[i]) for i in range(3)]


def _pair_terms(cf, h, order, second=1):
    """``[ell, (dell/ds, dell/dbeta), (d2 ss, d2 s beta, d2 beta beta)]`` per (box, pair) on the ranges ``h``; with
    ``second = 2`` the derivatives in ``(alpha, -beta)`` instead (the classes of the two variables are ``0,
    second``: the scores ``(s, beta, 0)`` and ``(alpha, 0, -beta)`` give the same softmax)."""
    cls = (0, second)
    Gb, Eb, om = cf[12:18], cf[18:21], cf[21]
    G = ((Gb[0], Gb[1], Gb[2]), (Gb[1], Gb[3], Gb[4]), (Gb[2], Gb[4], Gb[5]))
    q = (h[0].sq() * Gb[0] + h[1].sq() * Gb[3] + h[2].sq() * Gb[5]
         + (h[0] * h[1] * Gb[1] + h[0] * h[2] * Gb[2] + h[1] * h[2] * Gb[4]) * 2)  # fmt: skip
    out = [(q + 1) * om - (h[0] * Eb[0] + h[1] * Eb[1] + h[2] * Eb[2])]
    if order == 0:
        return out
    om2 = om * 2
    r = [om2 * (G[a][0] * h[0] + G[a][1] * h[1] + G[a][2] * h[2]) - Eb[a] for a in range(3)]
    rho = r[0] * h[0] + r[1] * h[1] + r[2] * h[2]
    g = [h[c] * (r[c] - rho) for c in cls]
    out += g
    if order == 1:
        return out
    D = [[_omx(h[a]) if a == c else -(h[a] * h[c]) for c in cls] for a in range(3)]  # D_aj = h_a (delta_ac - h_c)
    GD = [[om2 * (G[a][0] * D[0][j] + G[a][1] * D[1][j] + G[a][2] * D[2][j]) for j in range(2)] for a in range(3)]
    for j, k in ((0, 0), (0, 1), (1, 1)):
        cj, ck = cls[j], cls[k]
        term = D[0][j] * GD[0][k] + D[1][j] * GD[1][k] + D[2][j] * GD[2][k] - h[cj] * h[ck] * (r[cj] + r[ck] - rho * 2)
        out.append(term + g[j] if j == k else term)
    return out


#: Engines of :func:`score_loss`: the vectorised kernel (:mod:`._interval_label_kernel`), the per-pair kernel
#: (:mod:`._interval_scores_kernel`) and numpy; the last two are the references.
ENGINES = ("numba", "numba-pairs", "numpy")
#: Below this many (box, pair) evaluations per call the kernel runs on one thread (thread start-up outweighs it).
SERIAL_BELOW = 1_000_000
#: Packed coefficients (:func:`._interval_scores_kernel.pack_coefficients`) kept per :class:`LabelLoss` (weakly).
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: The tiled coefficients of the vectorised kernel (:func:`._interval_label_kernel.pack_soa`), per :class:`LabelLoss`.
_TILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _numpy_sums(LL: LabelLoss, S: IVec, B: IVec, order: int, frame: str):
    """The per-box interval sums over the pairs of ``[ell, grad, Hess]`` (derivatives in ``(s, beta)``) by numpy
    (the reference engine)."""
    N = S.lo.shape[0]
    per = max(1, 60_000 // N)
    ex = _corner_exps(S, B, frame)
    points = bool(np.array_equal(S.lo, S.hi) and np.array_equal(B.lo, B.hi))  # one corner per box then
    exps = [{name: IVec(ex[:, c, k, 0, None], ex[:, c, k, 1, None]) for k, name in enumerate(_EXP_NAMES)}
            for c in range(1 if points else 4)]  # fmt: skip
    acc: list | None = None
    for c in LL._chunks():
        P = c[0].lo.shape[0]
        for p0 in range(0, P, per):
            sl = slice(p0, min(P, p0 + per))
            cf = [IVec(x.lo[None, sl], x.hi[None, sl]) for x in c]
            terms = _pair_terms(cf, _ranges(cf, exps), order, _SECOND[frame])
            sums = [_row_sum(t, (N, sl.stop - sl.start)) for t in terms]
            acc = sums if acc is None else [a + b for a, b in zip(acc, sums)]
    assert acc is not None
    return acc


#: The corner exponentials, in the kernel's order: ``e^(beta - s), e^-s, e^(s - beta), e^-beta, e^s, e^beta``.
_EXP_NAMES = ("b-s", "-s", "s-b", "-b", "s", "b")


#: Per frame the class of the second variable in the kernel's derivative sums (``(s, beta)``: 1, ``(alpha, -beta)``:
#: 2; :func:`._interval_scores_kernel.score_sums`).
_SECOND = {"scores": 1, "original": 2}
#: The frames of :func:`score_loss`: the box variables ``(x_1, x_2)`` are ``(s, beta)`` or ``(alpha, beta)``.
FRAMES = ("scores", "original")
#: Per frame and class ``i``: the class's exponentials as functions of ``(x_1, x_2)`` and the box corners (ends of
#: ``x_1``, ``x_2``: 0 low, 1 high) of the least and the largest ``h_i``. ``h_1 = 1/(1 + r_12 e^(beta - s) + r_13
#: e^-s)`` increases in ``s`` and decreases in ``beta`` at fixed ``s`` but increases in ``beta`` at fixed ``alpha``
#: (``e^(beta - s) = e^-alpha``, ``e^-s = e^(-alpha - beta)``); ``h_2 = 1/(1 + r_21 e^(s - beta) + r_23 e^-beta)``,
#: ``h_3 = 1/(1 + r_31 e^s + r_32 e^beta)`` likewise.
_CLASSES = {
    "scores": ((lambda s, b: (b - s, -s), (0, 1), (1, 0)), (lambda s, b: (s - b, -b), (1, 0), (0, 1)),
               (lambda s, b: (s, b), (1, 1), (0, 0))),
    "original": ((lambda a, b: (-a, -a - b), (0, 0), (1, 1)), (lambda a, b: (a, -b), (1, 0), (0, 1)),
                 (lambda a, b: (a + b, b), (1, 1), (0, 0))),
}  # fmt: skip


def _corner_exps(X1: IVec, X2: IVec, frame: str = "scores") -> np.ndarray:
    """``(N, 4, 6, 2)``: per box, slot and class the enclosures (:meth:`IVec.exp`, as the numpy engine) of the
    class's exponentials ``e^(beta - s), e^-s | e^(s - beta), e^-beta | e^s, e^beta`` at the corner of its least
    ``h_i`` (in slot :data:`._interval_scores_kernel.LOW_CORNER` ``[i]``, and in the two slots neither table uses) and
    of its largest (slot ``HIGH_CORNER[i]``): the kernel reads those two slots, the numpy engine the hull of all
    four; both are the exact range of ``h_i`` (monotone in each variable, :data:`_CLASSES`). Only those two corners
    enter, so a box may have infinite ends: every exponent is then a sum of ends of the same sign
    (``e^(beta - s)`` at ``(s_lo, beta_hi)``, never ``inf - inf``) and ``h_i`` is its limit there."""
    N = X1.lo.shape[0]
    ex = np.empty((N, 4, 6, 2))
    ends = ((X1.lo, X1.hi), (X2.lo, X2.hi))
    for i, (fn, low, high) in enumerate(_CLASSES[frame]):
        pts = {}
        for corner in (low, high):
            x1, x2 = IVec(ends[0][corner[0]]), IVec(ends[1][corner[1]])
            pts[corner] = [e.exp() for e in fn(x1, x2)]
        for slot in range(4):
            corner = high if slot == HIGH_CORNER[i] else low
            for k, e in enumerate(pts[corner]):
                ex[:, slot, 2 * i + k, 0], ex[:, slot, 2 * i + k, 1] = e.lo, e.hi
    return ex


def packed_chunks(LL: LabelLoss):
    """The pair coefficients of ``LL`` packed for the kernel, chunk by chunk; kept (per ``LL``) after a complete
    pass when all of them fit half the memory limit (:func:`theorycheck._memory.default_max_bytes`: half the available
    memory unless ``THEORYCHECK_MAX_BYTES`` says otherwise), else recomputed by numpy on every evaluation."""
    if LL in _PACKED:
        yield from _PACKED[LL]
        return
    keep: list | None = [] if LL.pairs * 2 * N_COEF * 8 <= default_max_bytes() // 2 else None
    for c in LL._chunks():
        p = pack_coefficients(c)
        if keep is not None:
            keep.append(p)
        yield p
    if keep is not None:
        _PACKED[LL] = keep


def _numba_sums(LL: LabelLoss, S: IVec, B: IVec, order: int, frame: str):
    """The same sums by the Numba kernel (:mod:`._interval_scores_kernel`)."""
    N = S.lo.shape[0]
    ex = _corner_exps(S, B, frame)
    nc = np.where((S.lo == S.hi) & (B.lo == B.hi), 1, 4).astype(np.int64)
    nq = (1, 3, 6)[order]
    acc: list | None = None
    for coef in packed_chunks(LL):
        with small_problem(coef.shape[0] * N, SERIAL_BELOW, numba=True):
            out = score_sums(coef, ex, nc, order, _SECOND[frame])
        sums = [IVec(out[:, 2 * q], out[:, 2 * q + 1]) for q in range(nq)]
        acc = sums if acc is None else [a + b for a, b in zip(acc, sums)]
    assert acc is not None
    return acc


def tiled_chunks(LL: LabelLoss):
    """``(coefficients, pairs)`` for :func:`._interval_label_kernel.label_sums`: all pairs in one tiled array, kept
    (per ``LL``) when it fits half the memory limit (:func:`theorycheck._memory.default_max_bytes`), else one chunk
    of :meth:`LabelLoss._chunks` at a time, packed on every evaluation."""
    if LL in _TILED:
        yield _TILED[LL], LL.pairs
        return
    if (LL.pairs + TILE) * N_ROWS * 8 <= default_max_bytes() // 2:
        _TILED[LL] = pack_soa(LL._chunks(), LL.pairs)
        yield _TILED[LL], LL.pairs
        return
    for c in LL._chunks():
        P = c[0].lo.shape[0]
        yield pack_soa([c], P), P


def _tiled_sums(LL: LabelLoss, S: IVec, B: IVec, order: int, frame: str):
    """The same sums by the vectorised kernel (:mod:`._interval_label_kernel`, the default engine)."""
    N = S.lo.shape[0]
    xs = box_exponentials(_corner_exps(S, B, frame), LOW_CORNER, HIGH_CORNER)
    nq = (1, 3, 6)[order]
    acc: list | None = None
    for coef, P in tiled_chunks(LL):
        with small_problem(P * N, SERIAL_BELOW, numba=True):
            out = label_sums(coef, P, xs, order, _SECOND[frame])
        sums = [IVec(out[:, 2 * q], out[:, 2 * q + 1]) for q in range(nq)]
        acc = sums if acc is None else [a + b for a, b in zip(acc, sums)]
    assert acc is not None
    return acc


_SUMS = {"numba": _tiled_sums, "numba-pairs": _numba_sums, "numpy": _numpy_sums}
#: The engine :func:`score_loss` uses when none is given (the certificates'; the tests and benchmarks set it to run a
#: whole certificate on one engine): ``None`` chooses by the number of pairs (:func:`default_engine`).
_DEFAULT: dict[str, str | None] = {"engine": None}
#: From this many (law, word) pairs on, the default engine is the vectorised kernel (below, the per-pair kernel,
#: which compiles several times faster: a certificate of a few hundred boxes over fewer pairs would spend longer
#: compiling the vectorised kernel than it saves).
VECTOR_FROM = 20_000


def default_engine(LL: LabelLoss) -> str:
    """The engine used when none is given: ``"numba"`` from :data:`VECTOR_FROM` pairs on, else ``"numba-pairs"``
    (unless :data:`_DEFAULT` names one)."""
    chosen = _DEFAULT["engine"]
    if chosen is not None:
        return chosen
    return "numba" if LL.pairs >= VECTOR_FROM else "numba-pairs"


def score_loss(LL: LabelLoss, xs, engine: str | None = None, frame: str = "scores"):
    """The loss on arrays of boxes (module docstring): an :class:`IVec` for :class:`IVec` variables, a :class:`T2`
    (gradient; Hessian when the variables carry one) for :class:`T2` variables (the evaluator protocol of
    :func:`._interval_vec.evaluate`). ``frame``: the variables are ``(s, beta)`` (``"scores"``) or ``(alpha, beta)``
    (``"original"``); a box may have infinite ends (:func:`_corner_exps`: the value and derivative enclosures stay
    finite, as polynomials in the class masses). ``engine``: ``"numba"`` (the vectorised kernel of
    :mod:`._interval_label_kernel`), ``"numba-pairs"`` (the per-pair kernel of :mod:`._interval_scores_kernel`) or
    ``"numpy"`` (the references; the same formulas, enclosures equal up to rounding); ``None``:
    :func:`default_engine`."""
    engine = default_engine(LL) if engine is None else engine
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if frame not in FRAMES:
        raise ValueError(f"frame must be one of {FRAMES}, got {frame!r}")
    order = 0 if isinstance(xs[0], IVec) else (1 if xs[0].h is None else 2)
    S, B = (x if isinstance(x, IVec) else x.v for x in xs)
    acc = _SUMS[engine](LL, S, B, order, frame)
    inv = ivec_exact(Fraction(1, LL.n_laws))
    v = (acc[0] + LL._const) * inv
    if order == 0:
        return v
    g = [a * inv for a in acc[1:3]]
    H = None if order == 1 else [a * inv for a in acc[3:6]]
    if frame == "original":  # the sums are in (alpha, -beta): d/dbeta = -d/d(-beta)
        g, H = [g[0], -g[1]], None if H is None else [H[0], -H[1], H[2]]
    return T2(v, g, H)
