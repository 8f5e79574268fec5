"""Shared helpers for the attention claims (SPEC §4.3, §6 items 15-19). Not a claim."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from theorycheck import Masking, TopicModel
from theorycheck.population import alpha_beta_loss_logK, stage1_block_constants

PAPER_MASKING = dict(p_m=0.15, p_c=0.1, p_r=0.1)


def models(params):
    tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    mk = Masking(params.get("p_m", 0.15), params.get("p_c", 0.1), params.get("p_r", 0.1))
    return tm, mk


def swapped_constants(tm, mk):
    """An anti-topic block W^V: same-topic and different-topic entries exchanged (falsification)."""
    A, B0, gamma = stage1_block_constants(tm, mk)
    return (B0, A, gamma)


def kstar(tm, mk, constants=None):
    """``(K*, L*)`` of the block-constant W^V loss along log K: dense grid + bounded Brent.

    Independent of :func:`theorycheck.solvers.optimal_attention` (own grid and refinement).
    """
    x = np.linspace(-20.0, 40.0, 12001)
    F = np.asarray(alpha_beta_loss_logK(x, tm, mk, constants=constants))
    i = int(np.argmin(F))
    f = lambda lk: float(alpha_beta_loss_logK(lk, tm, mk, constants=constants))  # noqa: E731
    lo, hi = x[max(i - 1, 0)], x[min(i + 1, x.size - 1)]
    r = optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options=dict(xatol=1e-12))
    lk = float(r.x) if r.fun <= F[i] else float(x[i])
    return math.exp(lk), f(lk)


def paper_masking_domain():
    """The single configuration p = 0.15 / 0.1 / 0.1 (the SPEC §4.3 table is computed there only)."""
    from theorycheck.strategies import choices, params

    return params(choices(**{k: (v,) for k, v in PAPER_MASKING.items()}))
