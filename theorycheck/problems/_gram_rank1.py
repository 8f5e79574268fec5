r"""The one-dimensional tied embedding with weight decay: a multimodal landscape, certified (SPEC §4.6(b)).

``gram/rank1``: the Theorem 1 setting (uniform attention, tied decoder, squared loss; SPEC §4.1) with
embedding dimension ``d = 1 < T`` and the L2 term ``reg ||W^E||_F^2`` (SPEC §2.2), restricted to
topic-constant embeddings: the variable is ``w = (E_0, e_1, ..., e_T)`` (the [MASK] embedding and one
number per topic; every word of topic ``t`` has embedding ``e_t``). With ``d = 1`` the embedding has to
choose one direction, and two kinds of local minima compete: a *frequency* mode (all topics alike,
``e_t`` one sign, carrying the mean prediction and the [MASK] token) and a *contrast* mode (``e``
orthogonal to ``1``, separating topics; a circle/sphere of minima on the paper's model). In the
heavy-masking regime of the family (defaults ``p_m = 0.9``, ``p_c = 0.1``, ``p_r = 0.6``, ``reg = 0.01``,
``tau = 1``) both are local minima with values ~0.035 apart; local methods from random starts end in
either.

Reduced loss (disjoint topics, uniform within a topic; topic ``t`` has ``v_t`` words, ``n = sum v_t``):
with ``m~ = (q, a theta + r nu)`` (``nu_t = v_t / n``), ``theta~ = (0, theta)``, ``D = diag(1, v_1..v_T)``,
``A = E[m~ m~^T]``, ``B = E[m~ theta~^T]`` and ``C = B + B^T - reg D``,

.. math::
    f(w) = (w^T D w)(w^T A w) - w^T C w + 1,

which equals the word-level :func:`~theorycheck.population.embedding_loss` of the lifted embedding
with ``reg`` (tested). Every word-level local minimum has topic-constant embeddings (within-topic
deviations ``delta`` add ``sum (delta . z)^2 + reg ||delta||^2 >= 0``), so the reduction loses no minimum.

Certificate (whole domain). (i) Outside ``P(w) = w^T D w <= R^2`` the loss exceeds the upper bound
``U``: by Cauchy-Schwarz ``w^T B w = E[(w.m~)(theta~.w)] <= sqrt(Q(w) theta* P(w))`` with ``Q = w^T A w`` and
``theta* = max_i sum_j E[theta_i theta_j]`` (Gershgorin), so
``f >= (sqrt(PQ) - sqrt(theta*))^2 - theta* + reg P + 1 >= 1 - theta* + reg P``, and ``f > U`` once
``P > R^2 = (U - 1 + theta*) / reg``. (ii) ``f(w) = f(-w)``: search ``E_0 >= 0``. (iii) Interval branch
and bound on the box ``|E_0| <= R``, ``|e_t| <= R / sqrt(v_t)``: on each box a second-order centred form
``f(c) + g(c).delta + 1/2 delta^T [H] delta`` with the interval Hessian ``[H]`` over the box (outward
rounded :class:`~theorycheck.solvers.attention._interval_vec.IVec` arithmetic; the final scalar steps in
floats with an explicit ``(k + 4) u`` relative error allowance), plus the natural extension; a box whose
interval gradient excludes 0 in some coordinate holds no stationary point, hence no global minimiser,
and is dropped. The constants ``A, B, D, theta*`` are exact rationals (the masking constants read as the
floats the problem evaluates with), enclosed in floats outward. ``U`` is a rigorous upper bound of
``f`` at the best point found. The certificate's ``lower`` is the least lower bound of the boxes left.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import scipy.optimize

from ..models import Masking
from ..solvers.attention._interval_vec import IVec, ivec_exact
from ._exact import exact_theta_moment, round_up, sqrt_up
from ._problem import Certificate, Problem

__all__ = ["GramRank1", "rank1_constants", "topic_sizes", "rank1_branch_and_bound"]

_U = 2.0**-53
#: the family's masking and weight decay (heavy masking: both modes are local minima)
DEFAULTS = {"p_m": 0.9, "p_c": 0.1, "p_r": 0.6, "reg": 0.01}
_MAX_BOXES = 2_000_000


def topic_sizes(tm) -> tuple[np.ndarray, np.ndarray]:
    """``(v_t, topic of each word)`` for a model whose topics are disjoint and uniform within a topic.

    Raises ``ValueError`` otherwise (the reduction to topic-constant embeddings needs exchangeable words).
    """
    phi = np.asarray(tm.phi, dtype=float)
    nz = phi > 0
    if not np.all(nz.sum(axis=0) == 1):
        raise ValueError("gram/rank1 needs disjoint topics (every word in exactly one topic)")
    topic = nz.argmax(axis=0)
    sizes = nz.sum(axis=1)
    if not np.allclose(phi[topic, np.arange(phi.shape[1])], 1.0 / sizes[topic], rtol=1e-12, atol=0):
        raise ValueError("gram/rank1 needs words uniform within each topic (exchangeable words)")
    return sizes, topic


def rank1_constants(tm, mk: Masking, reg: float, sizes) -> dict:
    """Exact ``D`` (diagonal), ``A``, ``C`` and ``theta*`` of the reduced loss (module docstring), as Fractions."""
    T = tm.T
    a, r, q = Fraction(mk.a), Fraction(mk.r), Fraction(mk.q)
    lam = Fraction(reg)
    M2 = exact_theta_moment(tm)
    mu = [sum(row) for row in M2]  # E[theta_i] = E[theta_i sum_j theta_j]
    n = int(sum(sizes))
    nu = [Fraction(int(s), n) for s in sizes]
    D = [Fraction(1)] + [Fraction(int(s)) for s in sizes]
    N = T + 1
    A = [[Fraction(0)] * N for _ in range(N)]
    B = [[Fraction(0)] * N for _ in range(N)]
    A[0][0] = q * q
    for i in range(T):
        A[0][i + 1] = A[i + 1][0] = q * (a * mu[i] + r * nu[i])
        B[0][i + 1] = q * mu[i]
        for j in range(T):
            A[i + 1][j + 1] = a * a * M2[i][j] + a * r * (mu[i] * nu[j] + nu[i] * mu[j]) + r * r * nu[i] * nu[j]
            B[i + 1][j + 1] = a * M2[i][j] + r * nu[i] * mu[j]
    C = [[B[i][j] + B[j][i] - (lam * D[i] if i == j else 0) for j in range(N)] for i in range(N)]
    theta_star = max(mu)
    return {"D": D, "A": A, "C": C, "theta_star": theta_star, "reg": lam}


def _as_float(K) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([float(x) for x in K["D"]]), np.array([[float(x) for x in r] for r in K["A"]]),
            np.array([[float(x) for x in r] for r in K["C"]]))  # fmt: skip


# ---------------------------------------------------------------------------------- interval bounds
class _IConst:
    """The constants as outward float intervals (scalars), for the box arithmetic."""

    def __init__(self, K):
        self.n = len(K["D"])
        self.D = [ivec_exact(x) for x in K["D"]]
        self.A = [[ivec_exact(x) for x in r] for r in K["A"]]
        self.C = [[ivec_exact(x) for x in r] for r in K["C"]]


def _quad(M, w, n):
    """``w^T M w`` over boxes (symmetric ``M``; squares exact)."""
    out = M[0][0] * w[0].sq()
    for i in range(1, n):
        out = out + M[i][i] * w[i].sq()
    for i, j in itertools.combinations(range(n), 2):
        out = out + (M[i][j] * 2) * (w[i] * w[j])
    return out


def _matvec(M, w, n):
    rows = []
    for i in range(n):
        acc = M[i][0] * w[0]
        for j in range(1, n):
            acc = acc + M[i][j] * w[j]
        rows.append(acc)
    return rows


def _parts(lo, hi, kc: _IConst):
    """``(P, Q, R, D w, A w, C w)`` enclosed over the boxes ``[lo, hi]`` (arrays ``(N, n)``)."""
    n = kc.n
    w = [IVec(lo[:, i], hi[:, i]) for i in range(n)]
    Dw = [kc.D[i] * w[i] for i in range(n)]
    P = Dw[0] * w[0]
    for i in range(1, n):
        P = P + kc.D[i] * w[i].sq()
    P = IVec(np.maximum(P.lo, 0.0), P.hi)
    return P, _quad(kc.A, w, n), _quad(kc.C, w, n), Dw, _matvec(kc.A, w, n), _matvec(kc.C, w, n)


def interval_value(lo, hi, kc: _IConst) -> IVec:
    """Natural interval extension of ``f = P Q - R + 1`` over the boxes."""
    P, Q, R, *_ = _parts(lo, hi, kc)
    return P * Q - R + 1


def _safe(x, k):
    """``x`` lowered by ``(k + 4) u |x|`` plus a tiny absolute term: covers ``k`` float operations."""
    return x - (k + 4) * _U * np.abs(x) - 1e-300


def box_lower(lo, hi, kc: _IConst):
    """Rigorous lower bounds of ``f`` on the boxes, and a mask of boxes whose interval gradient excludes 0."""
    n = kc.n
    c = 0.5 * (lo + hi)
    h = np.nextafter(np.maximum(c - lo, hi - c), np.inf)  # rounded up: [lo, hi] - c lies in [-h, h]
    Pc, Qc, Rc, Dwc, Awc, Cwc = _parts(c, c, kc)
    fc = (Pc * Qc - Rc + 1).lo
    gc = [(Qc * Dwc[i] + Pc * Awc[i] - Cwc[i]) * 2 for i in range(n)]
    P, Q, R, Dw, Aw, Cw = _parts(lo, hi, kc)
    natural = (P * Q - R + 1).lo
    gX = [(Q * Dw[i] + P * Aw[i] - Cw[i]) * 2 for i in range(n)]
    excluded = np.zeros(lo.shape[0], dtype=bool)
    for g in gX:
        excluded |= (g.lo > 0) | (g.hi < 0)
    total = fc.copy()
    terms_abs = np.abs(fc)
    off = np.zeros(lo.shape[0])
    for i in range(n):
        for j in range(i, n):
            Hij = (Q * kc.D[i] * 2 if i == j else ivec_exact(0)) + P * kc.A[i][j] * 2
            Hij = Hij + (Dw[i] * Aw[j] + Aw[i] * Dw[j]) * 4 - kc.C[i][j] * 2
            if i == j:
                G = np.maximum(np.abs(gc[i].lo), np.abs(gc[i].hi))
                Hd = Hij.lo
                hi_ = h[:, i]
                with np.errstate(divide="ignore", invalid="ignore"):
                    convex = np.maximum(-(G * G) / (2 * Hd), -G * hi_)
                term = np.where(Hd > 0, convex, -G * hi_ + 0.5 * Hd * hi_ * hi_)
                term = _safe(term, 4)
            else:
                M = np.maximum(np.abs(Hij.lo), np.abs(Hij.hi))
                off += M * h[:, i] * h[:, j]  # sum of positive terms: 2 ops each
                continue
            total = total + term
            terms_abs = terms_abs + np.abs(term)
    off = off * (1 + (2 * n * n + 4) * _U)
    total = total - off
    terms_abs = terms_abs + off
    centred = total - (n + 6) * _U * terms_abs - 1e-300
    lower = np.maximum(np.where(np.isfinite(centred), centred, -np.inf), natural)
    return lower, excluded


def _sorted_pairs(sizes) -> list[tuple[int, int]]:
    """Coordinate pairs ``(i, j)`` (in ``x``) with ``e_i >= e_j`` imposed: consecutive topics of equal size
    (``f`` is invariant under permuting them, so a minimiser with that order exists)."""
    return [(t + 1, t + 2) for t in range(len(sizes) - 1) if sizes[t] == sizes[t + 1]]


def rank1_branch_and_bound(K, x_best, tol: float = 1e-9, max_boxes: int = _MAX_BOXES, sizes=None):
    """Whole-domain enclosure ``[lower, upper]`` of ``min f`` (module docstring); ``x_best`` a good point.

    Returns ``(lower, upper, info)``; ``info["certified"]`` is False if ``max_boxes`` was reached (then
    ``lower`` is the least bound of the boxes left, still valid).
    """
    kc = _IConst(K)
    xb = np.asarray(x_best, dtype=float)[None, :]
    upper = float(interval_value(xb, xb, kc).hi[0])
    # (i) the region P(w) <= R^2 (exact rational radius, rounded up)
    R2 = (Fraction(upper) - 1 + K["theta_star"]) / K["reg"]
    if R2 <= 0:
        raise ArithmeticError(f"gram/rank1: empty search region (U = {upper})")
    half = np.array([round_up(sqrt_up(R2 / d)) for d in K["D"]])  # |w_i| <= sqrt(P / D_i)
    lo = -half[None, :].copy()
    hi = half[None, :].copy()
    lo[:, 0] = 0.0  # (ii) f(w) = f(-w)
    pairs = _sorted_pairs(sizes) if sizes is not None else []
    settled_min = math.inf
    n_boxes = 0
    rounds = 0
    while lo.shape[0]:
        rounds += 1
        n_boxes += lo.shape[0]
        lower, excluded = box_lower(lo, hi, kc)
        c = 0.5 * (lo + hi)
        fcu = interval_value(c, c, kc).hi
        k = int(np.argmin(fcu))
        if fcu[k] < upper:
            upper, xb = float(fcu[k]), c[k : k + 1].copy()
        keep = (lower <= upper) & ~excluded
        for i, j in pairs:  # (iv) the box lies where e_i < e_j: a permuted copy holds its points
            keep &= hi[:, i] >= lo[:, j]
        settled = keep & (lower >= upper - tol)
        if settled.any():
            settled_min = min(settled_min, float(lower[settled].min()))
        split = keep & ~settled
        lo, hi, lower = lo[split], hi[split], lower[split]
        if n_boxes > max_boxes and lo.shape[0]:
            return (
                min(settled_min, float(lower.min()), upper),
                upper,
                {"certified": False, "boxes": n_boxes, "rounds": rounds, "argmin": xb[0], "open": lo.shape[0]},
            )
        if not lo.shape[0]:
            break
        # bisect along the side with the largest width (scaled by the region's half-widths)
        axis = np.argmax((hi - lo) / half[None, :], axis=1)
        rows = np.arange(lo.shape[0])
        mid = 0.5 * (lo[rows, axis] + hi[rows, axis])
        lo2, hi2 = lo.copy(), hi.copy()
        hi[rows, axis] = mid
        lo2[rows, axis] = mid
        lo, hi = np.concatenate([lo, lo2]), np.concatenate([hi, hi2])
    lower_all = min(settled_min, upper)
    return lower_all, upper, {"certified": True, "boxes": n_boxes, "rounds": rounds, "argmin": xb[0], "open": 0}


class GramRank1(Problem):
    """One-dimensional tied embedding with weight decay, topic-constant (SPEC §4.1, §4.6(b)); nonconvex, multimodal.

    ``x = (E_0, e_1, ..., e_T)``; masking ``(p_m, p_c, p_r)`` and ``reg`` are size parameters (defaults
    ``0.9, 0.1, 0.6, 0.01``). f* certified over all of ``R^{T+1}`` by interval branch and bound.
    """

    family = "gram/rank1"
    start_doc = "seed k: x ~ N(0, I_{T+1}) from default_rng(k)"
    #: the variable has T + 1 entries: no dense-size guard
    dense = False

    def __init__(self, model, size, tm, mk):
        params = {k: float(size.get(k, v)) for k, v in DEFAULTS.items()}
        if not params["reg"] > 0:
            raise ValueError(
                f"{self.family}: reg must be > 0 (the loss is not coercive at reg = 0), got {params['reg']!r}"
            )
        mk = Masking(params["p_m"], params["p_c"], params["p_r"])
        mk.require_informative(self.family)
        if tm.tau is not None and not tm.tau < tm.T:
            raise ValueError(f"{self.family}: needs tau < T (informative documents), got tau={tm.tau}, T={tm.T}")
        super().__init__(model, size, tm, mk)
        self.size.update(params)
        self.reg = params["reg"]
        self.sizes, self.word_topic = topic_sizes(tm)
        self.shape = (tm.T + 1,)
        self._K = rank1_constants(tm, mk, self.reg, self.sizes)
        self._D, self._A, self._C = _as_float(self._K)

    # -- objective ------------------------------------------------------------------------------
    def f(self, x) -> float:
        w = np.asarray(x, dtype=float)
        return float((w @ (self._D * w)) * (w @ self._A @ w) - w @ self._C @ w + 1.0)

    def grad(self, x) -> np.ndarray:
        w = np.asarray(x, dtype=float)
        Dw, Aw = self._D * w, self._A @ w
        return 2.0 * ((w @ Aw) * Dw + (w @ Dw) * Aw - self._C @ w)

    def hvp(self, x, v) -> np.ndarray:
        """``H v`` with ``H = 2 Q D + 2 P A + 4 (D w)(A w)^T + 4 (A w)(D w)^T - 2 C`` (exact)."""
        w, u = np.asarray(x, dtype=float), np.asarray(v, dtype=float)
        Dw, Aw = self._D * w, self._A @ w
        P, Q = w @ Dw, w @ Aw
        return 2 * Q * (self._D * u) + 2 * P * (self._A @ u) + 4 * Dw * (Aw @ u) + 4 * Aw * (Dw @ u) - 2 * (self._C @ u)

    def lift(self, x) -> np.ndarray:
        """The word-level embedding ``W_E`` (``1 x V1``): ``E_0`` on [MASK], ``e_t`` on every word of topic ``t``."""
        w = np.asarray(x, dtype=float)
        return np.concatenate([[w[0]], w[1:][self.word_topic]])[None, :]

    def start(self, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(self.shape)

    def reference(self) -> np.ndarray:
        """Best of a direction scan and BFGS: ``f(t w) = P Q t^4 - R t^2 + 1`` is minimised in ``t`` in closed
        form (``1 - R^2 / (4 P Q)`` when ``R > 0``) on a grid of unit directions; the 8 best are refined."""
        n = self.shape[0]
        k = {3: 41, 4: 17, 5: 9, 6: 7}.get(n, 5)
        ang = np.linspace(-1.0, 1.0, k)
        dirs = np.array(list(itertools.product(ang, repeat=n)))
        dirs = dirs[np.linalg.norm(dirs, axis=1) > 0]
        Pd = np.einsum("ki,i,ki->k", dirs, self._D, dirs)
        Qd = np.einsum("ki,ij,kj->k", dirs, self._A, dirs)
        Rd = np.einsum("ki,ij,kj->k", dirs, self._C, dirs)
        ok = (Rd > 0) & (Qd > 0)
        best = np.argsort(np.where(ok, -(Rd * Rd) / (4 * Pd * Qd + 1e-300), np.inf))[:8]
        cands = []
        for i in best:
            t = math.sqrt(max(Rd[i], 0.0) / (2 * Pd[i] * Qd[i])) if ok[i] else 0.0
            res = scipy.optimize.minimize(self.f, t * dirs[i], jac=self.grad, method="BFGS", options={"gtol": 1e-12})
            cands.append((float(res.fun), res.x))
        fx, x = min(cands, key=lambda c: c[0])
        return x * (1.0 if x[0] >= 0 else -1.0)

    def _optimum(self):
        x = self.reference()
        lower, upper, info = rank1_branch_and_bound(self._K, x, sizes=self.sizes)
        if not info["certified"]:
            method = f"interval branch and bound (SPEC §4.6(b)) stopped at {info['boxes']} boxes: upper bound only"
            return Certificate(method, lower, upper, kind="upper-bound"), x
        method = (
            f"interval branch and bound over all of R^{self.shape[0]} (SPEC §4.6(b)): exterior bound, sign "
            f"symmetry, second-order centred forms; {info['boxes']} boxes"
        )
        best = np.asarray(info["argmin"], dtype=float)
        return Certificate(method, lower, upper), best if self.f(best) < self.f(x) else x

    def identifiable(self, x) -> np.ndarray:
        """``w w^T`` (the loss is even: ``w`` is fixed up to sign)."""
        w = np.asarray(x, dtype=float)
        return np.outer(w, w)
