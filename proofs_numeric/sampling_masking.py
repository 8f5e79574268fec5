"""SPEC §2.1 (DERIVED from the masking rule): BERT-style masking
(``theorycheck.sampling.mask_documents``) selects a position w.p. ``p_m``; a selected position shows
its own word w.p. ``p_c + p_r/(T v)`` (kept, or replaced by a uniformly random word that happens to
be the same), [MASK] w.p. ``1 - p_c - p_r`` and a different word w.p. ``p_r (1 - 1/(T v))``.

Checked with ``p_c != p_r`` (both orders), without the at-least-one conditioning: each observed
frequency must lie within 5 binomial standard errors ``sqrt(p (1 - p) / n)`` of its probability
(``n`` = positions, or selected positions). The random replacements must also be uniform over the
``T v`` words: the chi-square statistic of their counts over the topics must be below the 1e-6 upper
quantile of its chi-square(T - 1) law (skipped when no word was replaced). A frequency of binomial
variance ``n p (1 - p) < 25`` (rare events, e.g. ``p_r`` tiny) is judged by the normal quantile of its
exact two-sided binomial tail instead (:func:`_stage1.binomial_z`; the same false-alarm level).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.sampling import mask_documents, sample_documents
from theorycheck.strategies import masking_params, model_params, params, seeds

from ._stage1 import RARE_VARIANCE, binomial_z, models

Z = 5.0


def _freq(count, n, p, label):
    details = {f"{label}_freq": count / n, f"{label}_prob": p}
    if n * p * (1.0 - p) < RARE_VARIANCE:  # too few expected events for the normal approximation
        z = float(binomial_z(count, n, p))
        return compare_close(z, 0.0, Z, label=f"{label} frequency: exact binomial |z|", details=details)
    se = math.sqrt(p * (1.0 - p) / n)
    return compare_close(count / n, p, Z * se, label=f"{label} frequency within 5 s.e.", details=details)


def check(params, inject=None):
    inject = inject or {}
    tm, mk = models(params)
    docs = sample_documents(tm, params["n_docs"], params["N"], seed=params["seed"])
    batch = mask_documents(docs, tm, mk, seed=params["seed"] + 1, at_least_one=False)
    valid = docs.tokens >= 0
    sel = batch.selected & valid
    n, k = int(valid.sum()), int(sel.sum())
    shown, orig = batch.inputs[sel], batch.targets[sel]
    p_c, p_r = (mk.p_r, mk.p_c) if inject.get("swap") else (mk.p_c, mk.p_r)
    nw = tm.n_words
    same, masked = int(np.sum(shown == orig)), int(np.sum(shown == 0))
    replaced = shown[(shown != orig) & (shown != 0)]
    p_own = p_c + p_r / nw
    if inject.get("own_word_shift_se"):  # falsifier: the own-word probability moved by this many standard errors
        p_own += float(inject["own_word_shift_se"]) * math.sqrt(p_own * (1.0 - p_own) / k)
    subs = [
        _freq(k, n, mk.p_m, "selected"),
        _freq(same, k, p_own, "own_word"),
        _freq(masked, k, 1.0 - p_c - p_r, "mask"),
        _freq(replaced.size, k, p_r * (1.0 - 1.0 / nw), "other_word"),
    ]
    if replaced.size:  # no replacement (p_r tiny): nothing to test for uniformity
        counts = np.bincount(tm.topic_of(replaced), minlength=tm.T)
        chi2 = float(stats.chisquare(counts).statistic)
        limit = float(stats.chi2.isf(1e-6, tm.T - 1))
        details = {"replacement_topic_chi2": chi2}
        subs.append(compare_greater(limit, chi2, label="chi2 quantile > replacement-topic chi2", details=details))
    return compare_all(subs)


def domain():
    """T <= 8, v <= 5, every tau and the Dirichlet prior, every masking (p_c != p_r), seeds, document
    length 5 <= N <= 40 and 5000 documents (at most 2e5 positions per configuration)."""
    from hypothesis import strategies as st

    length = st.integers(5, 40).map(lambda N: {"N": N})
    model = model_params(max_T=8, max_v=5, dirichlet=True)
    return params(model, masking_params(), seeds(), length, n_docs=5000)


def falsify(params):
    """Move the own-word probability by 8 binomial standard errors (the tolerance is 5): the falsified error is
    about 1.6 x the tolerance, so a tolerance loosened to 10 x lets it pass. (The former falsifier, p_c and p_r
    exchanged, ``{"swap": True}``, still works; it misses by 56-120 x the tolerance.)"""
    return {"own_word_shift_se": 8.0}


_BASE = dict(T=5, v=4, tau=2, N=40, n_docs=5000, p_m=0.3)

CLAIM = Claim(
    id="sampling.masking-frequencies",
    statement=(
        "mask_documents selects w.p. p_m and shows the own word, [MASK] or another word with the masking "
        "probabilities (p_c != p_r, within 5 binomial standard errors); replacement words are uniform"
    ),
    source="DERIVED",
    spec="SPEC §2.1",
    check=check,
    default_params=(dict(_BASE, p_c=0.5, p_r=0.1, seed=1), dict(_BASE, p_c=0.05, p_r=0.6, seed=2)),
    falsify=falsify,
    domain=domain,
)
