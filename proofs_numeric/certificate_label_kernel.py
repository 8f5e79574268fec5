"""SPEC §7, §11.8 (DERIVED): the compiled score-coordinate kernel of the label certificate
(``solvers/attention/_interval_scores_kernel.py``) encloses the exact sums it bounds, at a realistic size, and the
certificate built on it encloses the dense evaluator's minimum (issue 36: compiled kernels' rounding checked against
exact arithmetic at realistic sizes, not only tiny ones).

1. **Rounding at size.** The pair coefficients of a Zipf model with ``T = 5``, 30 words per topic, ``tau = 2``
   (10 topic sets x 150 words = 1,500 (law, word) pairs: 6 tiles of 256 and 6 parallel blocks, the kernel's
   pairwise sums at both levels), each interval collapsed to its lower end so that the inputs are floats, and the
   class exponentials at the point ``(s, beta) = (2.3, -1.4)`` taken as the floats ``exp`` returns. The kernel's
   sums of the value and the gradient must contain the exact sums of the same formulas (each pair in exact
   rationals, :class:`fractions.Fraction`; the sum in 400-bit mpmath, 1e-120 relative) and be at most
   :data:`WIDTH_TOL` = 1e-12 relative wide (an enclosure, not the whole line). Second input, the combination of
   the blocks' partial sums (:func:`blocks_check`; issue 36, mutation ``kernel-blocks``): with these realistic inputs
   a lost rounding step where the blocks are combined stays inside the slack the pairs' and tiles' roundings left
   (hundreds of units), so 64 blocks of 256 pairs (16,384 pairs, the kernel's largest number of blocks) are fed
   pairs of empty classes (value ``omega`` exactly) with ``omega = 1`` ending the first block and ``0.7 x 2^-52``
   (0.7 of the running total's rounding unit) in each other block: the exact sum ``1 + 44.1 x 2^-52`` must be
   enclosed (unit-free, also 1e-12 wide at most); rounded to nearest, each of the 63 additions moves the lower end
   0.3 units up and it ends 8.9 units above the exact sum.
2. **The primitives at size.** The kernel's accumulation step (``_acc``: every addition of its sums) on 2,000
   additions of realistic magnitudes, and the interval sum ``isum`` of the coefficient tables over four arrays of
   3,001 terms that cancel (the float sum loses every digit), each against exact rationals: every result must be
   enclosed (an end rounded to nearest instead of outward misses about half the time; an error bound from ``|sum x|``
   instead of ``sum |x|`` misses under cancellation). End to end (item 1) such a lost rounding step stays inside the
   slack of the other operations, so it is checked here, where it is visible.
3. **The certificate.** On a smaller Zipf model (T = 3, v = 2, tau = 2, default masking) the label certificate
   (status 0; the float solve started at (2, -1), the certificate is over all of R^2) satisfies
   ``lower <= min over a 21 x 21 grid of the dense float loss`` (:func:`attention_loss` on
   ``S = alpha I_w + beta Z``, around the optimum; allowance :data:`FLOAT_TOL` = 1e-12 for the dense loss's rounding)
   and ``upper >= lower``; the returned ``fun`` equals the dense loss at the returned point within ``FLOAT_TOL``. The
   branch and bound on the score box around the optimum stopped by a budget of 40 boxes evaluates at most 40 boxes
   (its documented guarantee) and its lower bound is still below the grid minimum.

Falsifier: the kernel's value enclosures narrowed to their midpoints (the rounding allowance dropped); the exact
sums then lie outside them: the Zipf sum by 0.5 units of 2^-52 relative, the blocks' sum by 2.9 (the falsified
size, within 10 x the exact comparison's scale 2^-52).
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.solvers import optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._interval_label import LabelLoss, isum
from theorycheck.solvers.attention._interval_scores import packed_chunks, score_loss
from theorycheck.solvers.attention._interval_scores_kernel import BLOCKS, N_COEF, TILE, _acc, score_sums
from theorycheck.solvers.attention._interval_vec import IVec, branch_and_bound

WIDTH_TOL = 1e-12
FLOAT_TOL = 1e-12
POINT = (2.3, -1.4)


def _exps(s: float, b: float) -> list[float]:
    """``e^(b - s), e^-s, e^(s - b), e^-b, e^s, e^b`` as floats (the kernel's slots 0..5)."""
    return [float(np.exp(x)) for x in (b - s, -s, s - b, -b, s, b)]


def exact_pair(cf, ex) -> tuple[Fraction, Fraction, Fraction]:
    """Value and gradient ``(s, beta)`` of one pair in exact rationals, from its (float) coefficients: the kernel's
    formulas (``h_i = clip01(ind_i / (e_a r_2i + e_b r_2i+1 + 1))``, ``omega (h^T G h + 1) - E . h``,
    ``g_j = h_c (r_c - rho)``, ``r_a = 2 omega (G h)_a - E_a``)."""
    F = [Fraction(float(x)) for x in cf[0::2]]  # lower ends (the inputs are degenerate)
    r, ind, gb, E, om = F[0:6], F[6:9], F[9:15], F[15:18], F[18]
    e = [Fraction(x) for x in ex]
    h = [min(max(ind[i] / (e[2 * i] * r[2 * i] + e[2 * i + 1] * r[2 * i + 1] + 1), Fraction(0)), Fraction(1))
         for i in range(3)]  # fmt: skip
    idx = {(0, 0): 0, (0, 1): 1, (0, 2): 2, (1, 1): 3, (1, 2): 4, (2, 2): 5}
    G = [[gb[idx[(min(a, b), max(a, b))]] for b in range(3)] for a in range(3)]
    quad = sum((G[a][b] * h[a] * h[b] for a in range(3) for b in range(3)), Fraction(0))
    value = om * (quad + 1) - sum((E[a] * h[a] for a in range(3)), Fraction(0))
    ra = [2 * om * sum((G[a][b] * h[b] for b in range(3)), Fraction(0)) - E[a] for a in range(3)]
    rho = sum((h[a] * ra[a] for a in range(3)), Fraction(0))
    return value, h[0] * (ra[0] - rho), h[1] * (ra[1] - rho)


def kernel_check(inject: dict) -> dict:
    mk = Masking()
    g = GeneralTopicModel.zipf(5, 30, 1.0, tau=2)
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, f.left, f.right, False)
    coef = np.concatenate(list(packed_chunks(LL)))
    coef[:, 1::2] = coef[:, 0::2]  # degenerate intervals: the lower ends as exact inputs
    exps = _exps(*POINT)
    ex = np.zeros((1, 4, 6, 2))
    ex[0, :, :, 0] = ex[0, :, :, 1] = exps
    out = score_sums(coef, ex, np.array([1], dtype=np.int64), 1)[0]
    if inject.get("narrow"):
        for q in range(3):
            mid = 0.5 * (out[2 * q] + out[2 * q + 1])
            out[2 * q] = out[2 * q + 1] = mid
    with mpmath.workprec(400):
        tot = [mpmath.mpf(0)] * 3
        for cf in coef:
            for q, x in enumerate(exact_pair(cf, exps)):
                tot[q] += mpmath.mpf(x.numerator) / x.denominator
        miss, width = 0.0, 0.0
        for q in range(3):
            lo, hi = mpmath.mpf(float(out[2 * q])), mpmath.mpf(float(out[2 * q + 1]))
            scale = max(abs(tot[q]), 1)
            miss = max(miss, float(max(lo - tot[q], tot[q] - hi, 0) / scale))
            width = max(width, float((hi - lo) / scale))
    return {"pairs": int(coef.shape[0]), "miss": miss, "width": width, "exact value sum": float(tot[0])}


#: The block check's pair values: ``BLOCK_HEAD`` ends the first block, ``BLOCK_STEP`` (0.7 of the rounding unit
#: 2^-52 of the running total in [1, 2)) lies in each of the other blocks.
BLOCK_HEAD, BLOCK_STEP = 1.0, 0.7 * 2.0**-52


def blocks_check(inject: dict) -> dict:
    """The combination of the blocks' partial sums (item 1, second input): :data:`BLOCKS` blocks of one tile each
    (``BLOCKS x TILE`` = 16,384 pairs, the kernel's largest number of blocks), every pair of an empty class (``ind =
    0``: ``h = 0``, the value is ``omega``, exactly), ``omega = BLOCK_HEAD`` for the last pair of the first block,
    ``BLOCK_STEP`` for the first pair of each other block, 0 elsewhere. Each block adds less than a rounding unit of
    the running total, so the combination of the blocks must round outward to enclose the exact sum ``1 + 63 x 0.7 x
    2^-52`` (rounded to nearest, each addition moves the lower end 0.3 units up: about 9 units past it). The exact
    sum: :func:`exact_pair` per distinct coefficient row, times its count."""
    P = TILE * BLOCKS
    coef = np.zeros((P, 2 * N_COEF))
    coef[TILE - 1, 36:38] = BLOCK_HEAD
    coef[TILE::TILE, 36:38] = BLOCK_STEP
    exps = _exps(*POINT)
    ex = np.zeros((1, 4, 6, 2))
    ex[0, :, :, 0] = ex[0, :, :, 1] = exps
    out = score_sums(coef, ex, np.array([1], dtype=np.int64), 0)[0]
    lo, hi = Fraction(float(out[0])), Fraction(float(out[1]))
    if inject.get("narrow"):
        lo = hi = Fraction(float(0.5 * out[0] + 0.5 * out[1]))
    rows, counts = np.unique(coef, axis=0, return_counts=True)
    exact = sum((exact_pair(r, exps)[0] * int(c) for r, c in zip(rows, counts)), Fraction(0))
    scale = max(abs(exact), 1)
    return {"pairs": P, "blocks": BLOCKS, "miss": float(max(lo - exact, exact - hi, 0) / scale),
            "width": float((hi - lo) / scale), "exact sum - 1": float(exact - 1)}  # fmt: skip


#: Additions checked one by one (the kernel's accumulation ``_acc``) and length of the cancelling interval sums.
N_ACC, N_SUM = 2000, 1500
#: The branch and bound's box budget in the budget check.
BUDGET = 40


def primitives_check(seed: int = 0) -> dict:
    """The accumulation step of the kernel's sums and the numpy interval sum ``isum`` against exact rationals: each
    of :data:`N_ACC` additions of realistic magnitudes (partial sums up to 1e3, terms 1e-6 .. 1) must enclose its exact
    result (a rounded-to-nearest end is outside about half the time); ``isum`` over four arrays of ``2 N_SUM + 1``
    terms that cancel (the float sum loses every digit) must enclose the exact sum."""
    rng = np.random.default_rng(seed)
    miss = 0
    s = np.zeros(2)
    for _ in range(N_ACC):
        lo = float(rng.uniform(1.0, 1e3))
        x = float(10.0 ** rng.uniform(-6, 0))
        s[0] = s[1] = lo
        _acc(s, 0, x, x)
        exact = Fraction(lo) + Fraction(x)
        miss += not (Fraction(float(s[0])) <= exact <= Fraction(float(s[1])))
    sum_miss = 0
    for _ in range(4):
        a = rng.uniform(-1.0, 1.0, N_SUM)
        a = np.concatenate([a, -a[::-1] * (1 + 2.0**-52), [1e-17]])  # cancels to ~1e-15 (terms up to 1)
        rng.shuffle(a)
        t = isum(IVec(a, a), 0)
        exact = sum((Fraction(float(x)) for x in a), Fraction(0))
        sum_miss += not (Fraction(float(t.lo)) <= exact <= Fraction(float(t.hi)))
    return {"acc misses": int(miss), "isum misses": int(sum_miss)}


def certificate_check() -> dict:
    mk = Masking()
    g = GeneralTopicModel.zipf(3, 2, 1.0, tau=2)
    r = optimal_attention(g, mk, options={"family": "label", "certify": "interval", "x0": [2.0, -1.0]})
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    W = r.info["W"]
    a0, b0 = r.info["alpha"], r.info["beta"]
    grid = [float(attention_loss(family_scores(a, b, Z), W, g, mk))
            for a in np.linspace(a0 - 1, a0 + 1, 21) for b in np.linspace(b0 - 1, b0 + 1, 21)]  # fmt: skip
    c = r.certificate
    # the branch and bound on the score box around the optimum with a budget of BUDGET boxes (s = alpha + beta)
    f = optimal_value_matrix(g, mk, options={"dense": False}).x
    LL = LabelLoss(g, mk, f.left, f.right, False)
    xs = np.array([a0 + b0, b0])
    q = [(xs[0] - 1.0, xs[0] + 1.0), (xs[1] - 1.0, xs[1] + 1.0)]
    lo_b, up_b, _, n_boxes, _ = branch_and_bound(q, None, None, lambda z: score_loss(LL, z), offset=0.0, tol=1e-9,
                                                 max_boxes=BUDGET, x0=xs, one_point=True)  # fmt: skip
    return {"status": r.status, "lower": c["lower"], "upper": c["upper"], "grid_min": min(grid),
            "fun_error": abs(r.fun - float(attention_loss(family_scores(a0, b0, Z), W, g, mk))),
            "budget boxes": int(n_boxes), "budget lower": lo_b, "budget upper": up_b}  # fmt: skip


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    k = kernel_check(inject)
    kb = blocks_check(inject)
    p = primitives_check(int(params.get("seed", 0)))
    c = certificate_check()
    return compare_all(
        [
            compare_close(
                p["acc misses"] + p["isum misses"],
                0,
                0.5,
                label="kernel accumulation and interval sums enclose exact rational results",
                details=p,
            ),
            compare_close(
                max(c["budget boxes"] - BUDGET, 0), 0, 0.5, label=f"branch and bound within its budget ({BUDGET} boxes)"
            ),
            compare_greater(
                c["grid_min"] + FLOAT_TOL - c["budget lower"], 0.0, label="budget-stopped lower <= dense grid min"
            ),
            compare_close(
                max(k["miss"], kb["miss"]),
                0.0,
                0.0,
                label="kernel sums enclose the exact sums (1,500 Zipf pairs; 64 blocks of 256)",
                details={**k, **{f"blocks {key}": v for key, v in kb.items()}},
            ),
            compare_greater(
                WIDTH_TOL - max(k["width"], kb["width"]), 0.0, label="kernel enclosure width < 1e-12 relative"
            ),
            compare_close(c["status"], 0, 0.5, label="label certificate status 0", details=c),
            compare_greater(c["grid_min"] + FLOAT_TOL - c["lower"], 0.0, label="certificate lower <= dense grid min"),
            compare_greater(c["upper"] - c["lower"] + FLOAT_TOL, 0.0, label="certificate upper >= lower"),
            compare_close(c["fun_error"], 0.0, FLOAT_TOL, label="fun == dense loss at the returned point"),
        ]
    )


def domain():
    """``seed`` in [0, 10^6]: the random draws of the accumulation and cancellation cases (:func:`primitives_check`;
    the default configuration uses seed 0); the Zipf pairs, the 64 blocks and the certificate are fixed inputs."""
    return st.fixed_dictionaries({"seed": st.integers(0, 10**6)})


def falsify(params: dict) -> dict:
    """The kernel's enclosures narrowed to their midpoints (the outward rounding dropped)."""
    return {"narrow": True}


CLAIM = Claim(
    id="certificate.label-kernel",
    statement=(
        "The label certificate's compiled kernel encloses the exact sums of its formulas at a realistic size "
        "(1,500 pairs, and 64 blocks whose combination must round outward; exact rationals), and the certificate's "
        "lower bound is below the dense evaluator's minimum"
    ),
    source="DERIVED",
    spec="SPEC §7, §11.8",
    check=check,
    default_params=(dict(),),
    falsify=falsify,
    cost=2.0,
    domain=domain,
)
