"""SPEC §1.2, §5.1, §6 item 3 (the paper's experimental data, from the official code):
LDA documents with T = 10 topics of v = 10 words, lengths uniform on {100, ..., 150} and topic
proportions ``theta ~ Dirichlet(0.1 * 1_10)``; each token's topic is drawn from ``theta``.

Checks on documents from :func:`theorycheck.sampling.sample_documents` (fixed seed):

* lengths: every value in [100, 150] and none outside; chi-square test of uniformity (p > 1e-3);
* proportions: Kolmogorov-Smirnov test of ``theta_1`` against its marginal ``Beta(alpha, (T-1) alpha)``
  (p > 1e-3) and ``mean ||theta||^2`` against ``(alpha+1)/(T alpha+1)`` within 5 standard errors;
* tokens follow theta: with ``c`` the per-document topic counts, ``E||c - N theta||^2 = N (1 - ||theta||^2)``
  given theta (multinomial), so the mean of ``R = ||c - N theta||^2 / (N (1 - ||theta||^2))`` is 1
  within 5 standard errors.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from theorycheck import TopicModel
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.sampling import sample_documents

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
    p_len = float(stats.chisquare(full).pvalue)
    th = docs.theta
    p_ks = float(stats.kstest(th[:, 0], stats.beta(alpha, (T - 1) * alpha).cdf).pvalue)
    s2 = np.sum(th * th, axis=1)
    s2_expected = (alpha + 1) / (T * alpha + 1)
    z_s2 = abs(s2.mean() - s2_expected) / (s2.std(ddof=1) / np.sqrt(n))
    valid = docs.tokens >= 1
    topic = np.where(valid, (docs.tokens - 1) // v, T)
    c = np.stack([np.sum(topic == t, axis=1) for t in range(T)], axis=1).astype(float)
    R = np.sum((c - L[:, None] * th) ** 2, axis=1) / (L * (1 - s2))
    ok = 1 - s2 > 1e-9  # a document with a single topic has no multinomial spread
    R = R[ok]
    z_R = abs(R.mean() - 1.0) / (R.std(ddof=1) / np.sqrt(R.size))
    parts = [
        compare_close(float(np.sum((L < lo) | (L > hi))), 0.0, 0.5),  # no length outside [lo, hi]
        compare_close(float(np.sum(full == 0)), 0.0, 0.5),  # every length in [lo, hi] occurs
        compare_greater(p_len, P_MIN),
        compare_greater(p_ks, P_MIN),
        compare_close(z_s2, 0.0, 5.0),
        compare_close(z_R, 0.0, 5.0),
    ]
    res = compare_all(parts)
    res.expected = f"N in [{lo},{hi}] uniform; theta ~ Dir({alpha}); tokens ~ theta"
    res.measured = f"p_len={p_len:.3g}, p_KS={p_ks:.3g}, z(E||theta||^2)={z_s2:.2f}, z(R)={z_R:.2f}"
    res.details.update(
        p_lengths=p_len,
        p_ks_theta1=p_ks,
        z_theta_norm2=float(z_s2),
        z_token_spread=float(z_R),
        mean_theta_norm2=float(s2.mean()),
        expected_theta_norm2=s2_expected,
    )
    return res


def falsify(params: dict) -> dict:
    """Sample with alpha = 0.3 but test against Dirichlet(0.1)."""
    return {"alpha_sample": 0.3}


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
)
