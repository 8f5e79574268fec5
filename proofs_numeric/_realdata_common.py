"""Shared, cached inputs of the ``realdata_*`` claims (not a claim module: leading underscore).

The claims are registered only when the optional ``nlp`` extra imports
(:func:`theorycheck.realdata.available`); without it they are absent from the registry, so
``theorycheck verify`` and the generic claim tests never touch the optional packages.

The Wikipedia fragment, the LDA fit, the token mapping and the encoder attentions of a seeded
sample of windows are computed once per process and parameter set (``functools.lru_cache``),
so the three claims and their falsifications share one encoder pass.

Seeds. What is random in these claims is everything ``seed`` drives (:class:`RealDataConfig`): the
LDA fit (its initialisation, hence the fitted topics and the word-topic membership), the random
order in which 128-token windows are drawn up to ``max_tokens``, the bootstrap resamples, the
no-topic token sample, and (``realdata.synthetic-stronger``) the synthetic LDA documents. The
corpus fragment and the pretrained model are fixed. The default tier judges seed 0;
``verify --full`` judges seeds 0-6 (:data:`proofs_numeric._empirical.JUDGED_SEEDS`), each a fresh
LDA fit and encoder pass, and reports the fraction of seeds passing and 95% t-intervals of the
statistics. The thresholds (a CI above 0, disjoint CIs, synthetic > real) are the claims'
definitions, not fitted; ``benchmarks/calibrate_empirical.py`` records them on seeds 100-104.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from proofs_numeric._empirical import JUDGED_SEEDS
from theorycheck.realdata import available
from theorycheck.realdata._deps import INSTALL_HINT, missing

AVAILABLE = available()

#: Why the realdata claims are not registered (None when they are); shown by ``theorycheck verify``.
SKIP_REASON = (
    None
    if AVAILABLE
    else (
        f"realdata.* claims skipped: the optional 'nlp' extra is not installed (missing: {', '.join(missing())}); "
        f"install with: {INSTALL_HINT}"
    )
)

DEFAULTS = dict(n_topics=20, max_tokens=3072, n_boot=100, seed=0)


def full_params(**extra) -> dict:
    """The ``verify --full`` configuration: :data:`DEFAULTS` (and ``extra``) over the judged seeds."""
    p = {k: v for k, v in DEFAULTS.items() if k != "seed"}
    return dict(p, seeds=JUDGED_SEEDS, **extra)


def domain(**extra):
    """Any seed (LDA fit, windows, bootstrap; see the module docstring) at :data:`DEFAULTS` and
    ``extra``; cost: one LDA fit and one encoder pass of ``max_tokens`` tokens per draw."""
    from theorycheck.strategies import params, seeds

    return params(seeds(), **{k: v for k, v in DEFAULTS.items() if k != "seed"}, **extra)


def config(params: dict):
    from theorycheck.realdata.pipeline import RealDataConfig

    return RealDataConfig(
        n_topics=params["n_topics"],
        max_tokens=params["max_tokens"],
        n_boot=params["n_boot"],
        seed=params["seed"],
        n_no_topic=500,
    )


@lru_cache(maxsize=8)  # the 7 judged seeds of verify --full, shared by the four claims
def _prepared(key: tuple):
    from theorycheck._threads import blas_threads
    from theorycheck.realdata.pipeline import encode_windows, prepare, select_windows

    params = dict(key)
    cfg = config(params)
    with blas_threads(cfg.blas_threads):
        prep = prepare(cfg)
        rng = np.random.default_rng(cfg.seed)
        chosen = select_windows(prep.windows, cfg.max_tokens, rng)
        encoded = [(w, a.copy()) for w, a in encode_windows(prep.model, chosen)]
    return prep, encoded


def prepared(params: dict):
    """``(Prepared, [(window, attentions)])`` for the claim parameters (cached)."""
    return _prepared(tuple(sorted(params.items())))


def membership(prep, inject: dict | None):
    """Token-topic membership, or a seeded permutation of it among topic tokens (the falsifier)."""
    M = prep.token_topics.vocab_membership
    if inject and "permute_topics_seed" in inject:
        ids = prep.token_topics.token_ids
        perm = np.random.default_rng(inject["permute_topics_seed"]).permutation(ids.size)
        M = M.copy()
        M[ids] = M[ids[perm]]
    return M
