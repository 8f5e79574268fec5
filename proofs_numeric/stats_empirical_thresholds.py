"""The rules behind every EMPIRICAL threshold (:mod:`proofs_numeric._empirical`, issue 16 item 4 and issue 25 item 4;
DERIVED: textbook formulas) against independent routes (issue 36: a default-tier claim for each module added in the
last rounds).

1. ``prediction_k(n) = t_{0.99, n-1} sqrt(1 + 1/n)``: the t quantile (SciPy's ``stats.t.ppf`` in the module) is
   recomputed by bisection on mpmath's regularised incomplete beta function at 40 digits,
   ``P(T <= t) = 1 - I_{nu / (nu + t^2)}(nu / 2, 1 / 2) / 2``, for n = 3, 5, 7, 10, 30;
2. ``prediction_lower`` and ``prediction_deviation`` on the calibration values of two claims (the Gram block score
   of ``train.compensation`` and ``K_eff / K_u`` of ``train.stage2-approaches-Kstar``): the bound ``mean -+ k SD``
   from exact rational mean and variance (:class:`fractions.Fraction`, the square root and ``k`` in mpmath), then
   the same rounding (3 significant digits down, 2 up);
3. ``false_refutation_probability(n, k, q)`` (and the power :func:`k_of_n_power`): the binomial sum ``sum_{j<k}
   C(n, j) p^j (1 - p)^(n - j)`` in exact rationals (``p`` the float ``1 - q`` taken exactly) for the rules the
   claims use (7 of 7, 25 of 30, 4 of 5, 3 of 5);
4. ``clopper_pearson(x, n)``: the ends are the roots of ``P[Bin(n, p) >= x] = 0.025`` and ``P[Bin(n, p) <= x] =
   0.025`` (exact binomial tails in rationals at each bisection step, bisected to 1e-14) for (1, 21), (0, 7),
   (5, 20), (20, 20).

Tolerance :data:`TOL` = 1e-10 on every difference (relative where the value exceeds 1); the thresholds themselves
must agree exactly after rounding. Falsifier: the module's values shifted by 3e-10 (3 x TOL).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
from hypothesis import strategies as st

from proofs_numeric import _empirical as E
from proofs_numeric import train_compensation, train_stage2_kstar
from theorycheck.report.claims import Claim, compare_all, compare_close

TOL = 1e-10
_DPS = 40


def t_quantile(level: float, nu: int) -> float:
    """``t_{level, nu}`` by bisection on the t CDF written with mpmath's regularised incomplete beta function."""
    with mpmath.workdps(_DPS):
        target = mpmath.mpf(level)

        def cdf(t):
            x = nu / (nu + t * t)
            tail = mpmath.betainc(mpmath.mpf(nu) / 2, mpmath.mpf(1) / 2, 0, x, regularized=True) / 2
            return 1 - tail if t >= 0 else tail

        lo, hi = mpmath.mpf(0), mpmath.mpf(1000)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(mid) < target else (lo, mid)
        return float((lo + hi) / 2)


def _k(n: int) -> mpmath.mpf:
    with mpmath.workdps(_DPS):
        return mpmath.mpf(t_quantile(E.PREDICTION_LEVEL, n - 1)) * mpmath.sqrt(1 + mpmath.mpf(1) / n)


def _mean_sd(values) -> tuple[mpmath.mpf, mpmath.mpf]:
    x = [Fraction(v) for v in values]
    m = sum(x, Fraction(0)) / len(x)
    var = sum(((v - m) ** 2 for v in x), Fraction(0)) / (len(x) - 1)
    with mpmath.workdps(_DPS):
        return mpmath.mpf(m.numerator) / m.denominator, mpmath.sqrt(mpmath.mpf(var.numerator) / var.denominator)


def _round_sig(x: float, digits: int, up: bool) -> float:
    """``x > 0`` to ``digits`` significant digits, up or down, in decimal (Python's exact ``Fraction``)."""
    e = math.floor(math.log10(x)) - digits + 1
    q = Fraction(10) ** e
    n = math.ceil(Fraction(x) / q) if up else math.floor(Fraction(x) / q)
    return float(n * q)


def lower_bound(values, null: float, log: bool) -> float:
    """:func:`_empirical.prediction_lower` from exact moments: ``max(null, mean - k SD)`` (log scale if ``log``)."""
    y = [math.log(v) for v in values] if log else list(values)
    m, s = _mean_sd(y)
    with mpmath.workdps(_DPS):
        b = m - _k(len(values)) * s
        b = float(mpmath.exp(b)) if log else float(b)
    return null if not b > null else _round_sig(b, 3, up=False)


def deviation(values, reference: float) -> float:
    """:func:`_empirical.prediction_deviation` from exact moments."""
    m, s = _mean_sd([v / reference for v in values])
    with mpmath.workdps(_DPS):
        half = _k(len(values)) * s
        dev = max(abs(m + half - 1), abs(m - half - 1))
    return _round_sig(float(dev), 2, up=True)


def binom_cdf_exact(k: int, n: int, p: Fraction) -> Fraction:
    """``P[Bin(n, p) <= k]`` in exact rationals."""
    return sum((math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(0, k + 1)), Fraction(0))


def clopper_pearson_exact(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Ends of the exact interval as roots of the binomial tails (each tail in rationals), by bisection."""
    a = Fraction(1 - level) / 2

    def root(f) -> float:  # f increasing in p, f(lo) < 0 < f(hi)
        lo, hi = Fraction(0), Fraction(1)
        while hi - lo > Fraction(1, 10**14):
            mid = Fraction(float((lo + hi) / 2))
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return float((lo + hi) / 2)

    low = 0.0 if x == 0 else root(lambda p: (1 - binom_cdf_exact(x - 1, n, p)) - a)  # P[X >= x] grows in p
    high = 1.0 if x == n else root(lambda p: a - binom_cdf_exact(x, n, p))  # P[X <= x] falls in p
    return low, high


#: (n, k, per-seed failure rate) of the k-of-n rules in the claims' docstrings and tests.
RULES = ((7, 7, 0.3), (30, 25, 0.3), (5, 4, 0.05), (5, 3, 0.3))
#: (successes, n) of the Clopper-Pearson checks.
CP_CASES = ((1, 21), (0, 7), (5, 20), (20, 20))


def _calibration_sets():
    kc = train_stage2_kstar.CALIBRATION
    cc = train_compensation.CALIBRATION
    return (
        ("compensation block score (lower)", cc[("default", "min_gram_block_score")][2], 0.0, "lower", False),
        ("stage-2 shrink factor (lower, log)", kc[("default", "min_shrink")][2], 1.0, "lower", True),
        ("stage-2 K_eff / K_u (deviation)", kc[("default", "K_rtol")][2], 1.0, "deviation", False),
        ("stage-2 K_eff / K_u full (deviation)", kc[("full", "K_rtol")][2], 1.0, "deviation", False),
    )


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    shift = inject.get("shift", 0.0)
    errs: dict[str, float] = {}
    for n in params["ns"]:
        mine = E.prediction_k(n) + shift
        errs[f"prediction_k({n})"] = abs(mine - float(_k(n))) / max(1.0, abs(mine))
    thr_err = 0.0
    for name, values, null, kind, log in _calibration_sets():
        if kind == "lower":
            mine, ref = E.prediction_lower(values, null, log=log), lower_bound(values, null, log)
        else:
            mine, ref = E.prediction_deviation(values, null), deviation(values, null)
        thr_err = max(thr_err, abs(mine + shift - ref) / max(1.0, abs(ref)))
        errs[f"threshold: {name}"] = abs(mine + shift - ref) / max(1.0, abs(ref))
    for n, k, q in RULES:
        exact = binom_cdf_exact(k - 1, n, Fraction(1.0 - q))
        errs[f"false_refutation({n}, {k}, {q})"] = abs(E.false_refutation_probability(n, k, q) + shift - float(exact))
        errs[f"power({n}, {k})"] = abs(E.k_of_n_power(n, k) + shift - float(binom_cdf_exact(k - 1, n, Fraction(0.7))))
    for x, n in CP_CASES:
        lo, hi = clopper_pearson_exact(x, n)
        mine = E.clopper_pearson(x, n)
        errs[f"clopper_pearson({x}, {n})"] = max(abs(mine[0] + shift - lo), abs(mine[1] + shift - hi))
    worst_key = max(errs, key=errs.get)
    res = compare_all(
        [
            compare_close(
                max(errs.values()),
                0.0,
                TOL,
                label="EMPIRICAL rules == independent formulas (mpmath t quantile, exact binomial sums, exact moments)",
                details={"worst": worst_key, "errors": errs},
            ),
        ]
    )
    return res


def domain():
    """``ns``: 1 to 5 sample sizes ``n`` in [2, 1000] for the prediction factor ``k(n)`` (``n - 1`` degrees of
    freedom, so ``n >= 2``); the calibration sets, k-of-n rules and Clopper-Pearson cases are fixed."""
    return st.fixed_dictionaries({"ns": st.lists(st.integers(2, 1000), min_size=1, max_size=5).map(tuple)})


def falsify(params: dict) -> dict:
    """Every value of the module shifted by 3e-10 (3 x TOL; a loosened TOL lets it pass)."""
    return {"shift": 3e-10}


DEFAULT = dict(ns=(3, 5, 7, 10, 30))

CLAIM = Claim(
    id="stats.empirical-thresholds",
    statement=(
        "The EMPIRICAL threshold rules (prediction k, prediction bounds, k-of-n refutation probabilities and power, "
        "Clopper-Pearson intervals) equal independent computations (mpmath t quantile, exact rational binomial sums "
        "and moments) to 1e-10"
    ),
    source="DERIVED",
    spec="proofs_numeric/_empirical.py (issue 16 item 4, issue 25 item 4)",
    check=check,
    default_params=(DEFAULT,),
    falsify=falsify,
    cost=0.5,
    domain=domain,
)
