"""SPEC §1.2, §5.1, §6 item 3 (the paper's experimental data, from the official code):
LDA documents with T = 10 topics of v = 10 words, lengths uniform on {100, ..., 150} and topic
proportions ``theta ~ Dirichlet(0.1 * 1_10)``; each token's topic is drawn from ``theta``.

Checks on documents from :func:`theorycheck.sampling.sample_documents` (fixed seed):

* lengths: every value in [100, 150] and none outside; chi-square test of uniformity (p > 1e-3);
* proportions: Kolmogorov-Smirnov test of ``theta_1`` against its marginal ``Beta(alpha, (T-1) alpha)``
  (p > 1e-3) and ``mean ||theta||^2`` against ``(alpha+1)/(T alpha+1)`` within 5 standard errors;
* tokens follow theta: with ``c`` the per-document topic counts, ``E||c - N theta||^2 = N (1 - ||theta||^2)``
  given theta (multinomial), so ``sum_d ||c_d - N_d theta_d||^2`` matches ``sum_d N_d (1 - ||theta_d||^2)``
  within 5 standard errors (self-normalised; see :func:`_token_spread`).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from theorycheck import TopicModel
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.sampling import sample_documents
from theorycheck.strategies import params, seeds

P_MIN = 1e-3


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    T, v, alpha = params["T"], params["v"], params["alpha"]
    lo, hi = params["N"]
    tm_sample = TopicModel(T=T, v=v, prior="dirichlet", alpha=inject.get("alpha_sample", alpha))
    docs = sample_documents(tm_sample, params["n_docs"], (lo, hi), seed=params.get("seed", 0))
    n = params["n_docs"]
    L = docs.lengths
    vals, cnt = np.unique(L, return_counts=True)
    full = np.zeros(hi - lo + 1)
    inside = (vals >= lo) & (vals <= hi)
    full[vals[inside] - lo] = cnt[inside]
    p_len = float(stats.chisquare(full).pvalue) if hi > lo else 1.0  # a single length: nothing to test
    th = docs.theta
    p_ks = _ks_theta1(th[:, 0], stats.beta(alpha, (T - 1) * alpha))
    s2 = np.sum(th * th, axis=1)
    s2_expected = (alpha + 1) / (T * alpha + 1)
    z_s2 = abs(s2.mean() - s2_expected) / (s2.std(ddof=1) / np.sqrt(n))
    valid = docs.tokens >= 1
    topic = np.where(valid, (docs.tokens - 1) // v, T)
    c = np.stack([np.sum(topic == t, axis=1) for t in range(T)], axis=1).astype(float)
    z_sum, z_R = _token_spread(c, L, th, s2)
    parts = [
        compare_close(float(np.sum((L < lo) | (L > hi))), 0.0, 0.5, label="no length outside [lo, hi]"),
        compare_close(float(np.sum(full == 0)), 0.0, 0.5, label="every length in [lo, hi] occurs"),
        compare_greater(p_len, P_MIN, label="lengths uniform: chi-square p > 1e-3"),
        compare_greater(p_ks, P_MIN, label="theta_1 ~ Beta(alpha, (T-1) alpha): KS p > 1e-3"),
        compare_close(z_s2, 0.0, 5.0, label="|z| of mean ||theta||^2 vs (alpha+1)/(T alpha+1)"),
        compare_close(z_sum, 0.0, 5.0, label="|z| of sum ||c - N theta||^2 vs sum N (1 - ||theta||^2)"),
    ]
    res = compare_all(parts)
    res.details.update(
        p_lengths=p_len,
        p_ks_theta1=p_ks,
        z_theta_norm2=float(z_s2),
        z_token_spread_sum=float(z_sum),
        z_token_spread=float(z_R),  # mean of the ratios R: informative only (heavy-tailed, see _token_spread)
        mean_theta_norm2=float(s2.mean()),
        expected_theta_norm2=s2_expected,
    )
    return res


def _ks_theta1(x, law) -> float:
    """KS p-value of the sample ``x`` of ``theta_1`` against ``law``.

    Values above ``1 - 1e-12`` are censored: a float64 ``theta_1`` within 1.1e-16 of 1 is rounded to 1
    (an atom), which at small alpha holds several percent of the draws (5% at T = 2, alpha = 0.0625)
    and alone would refute any continuous law. The statistic is then the supremum of ``|F_n - F|``
    below the censoring point (every draw counted in ``F_n``), with the full-sample Kolmogorov law
    (conservative).
    """
    cut = 1.0 - 1e-12
    if x.max() <= cut:
        return float(stats.kstest(x, law.cdf).pvalue)
    n = x.size
    keep = np.sort(x[x <= cut])
    i = np.arange(1, keep.size + 1)
    F = law.cdf(keep)
    D = max(np.max(i / n - F, initial=0.0), np.max(F - (i - 1) / n, initial=0.0), abs(keep.size / n - law.cdf(cut)))
    return float(stats.kstwo.sf(D, n))


def _token_spread(c, L, th, s2):
    """|z| of ``sum_d ||c_d - N_d theta_d||^2`` against its conditional mean ``sum_d N_d (1 - ||theta_d||^2)``
    (multinomial given theta), self-normalised by the root of the summed squared deviations: the summands
    are bounded by ``2 N^2``, so the CLT holds for every alpha. (The mean of the per-document ratios
    ``R = ||c - N theta||^2 / (N (1 - ||theta||^2))``, also returned, has infinite variance when
    ``(T - 1) alpha <= 1``: near-single-topic documents make R heavy-tailed; it refuted T = 2, N = 1,
    alpha = 0.0625 with z = 14.)"""
    X = np.sum((c - L[:, None] * th) ** 2, axis=1)
    M = L * (1 - s2)
    z_sum = abs(np.sum(X - M)) / np.sqrt(np.sum((X - M) ** 2))
    ok = 1 - s2 > 1e-9  # a document with a single topic has no multinomial spread
    R = X[ok] / M[ok]
    z_R = abs(R.mean() - 1.0) / (R.std(ddof=1) / np.sqrt(R.size))
    return float(z_sum), float(z_R)


def _lengths():
    from hypothesis import strategies as st

    return st.tuples(st.integers(1, 150), st.integers(0, 50)).map(lambda t: {"N": (t[0], t[0] + t[1])})


def domain():
    """2 <= T <= 10, v <= 5, alpha in [0.05, 5], lengths uniform on [lo, lo + w] with lo <= 150 and
    w <= 50 (w = 0: one length), seeds; 5000 documents (at most 1e6 tokens per configuration)."""
    from hypothesis import strategies as st

    model = st.fixed_dictionaries(
        {"T": st.integers(2, 10), "v": st.integers(1, 5), "alpha": st.floats(0.05, 5.0, allow_nan=False)}
    )
    return params(model, _lengths(), seeds(), n_docs=5000)


def falsify(params: dict) -> dict:
    """Sample with alpha = 0.125 but test against Dirichlet(0.1): the |z| of mean ||theta||^2 is then a few x its
    tolerance 5 (issue 25 item 6: a loosened tolerance lets it pass; alpha = 0.3 gives 27 x)."""
    return {"alpha_sample": 0.125}


CLAIM = Claim(
    id="stage1.lda-docs",
    statement=(
        "Generated LDA documents: lengths uniform on [100, 150], topic proportions ~ Dir(0.1 * 1_10), tokens drawn "
        "from them"
    ),
    source="PAPER",
    spec="SPEC §1.2, §5.1, §6 item 3 (official code)",
    check=check,
    default_params=(dict(T=10, v=10, alpha=0.1, N=(100, 150), n_docs=5000),),
    falsify=falsify,
    domain=domain,
)
