"""SPEC §11.6 (EMPIRICAL, signs on a sweep): Zipfian words keep the optimal attention's same-topic
preference for 2 <= tau <= T - 1, but reverse it at tau = 1.

As :mod:`general_overlap_attention` with ``phi_t(k) ∝ (k + 1)^(-s)`` (disjoint topics). At tau = 1 the
paper's model (s = 0) is indifferent (``K* = v``); for every s > 0 of the grid the optimal scores put
LESS per-key weight on same-topic words than on different-topic words: there the paper's attention
conclusion does not hold (the boundary is s* = 0).
"""

from __future__ import annotations

from theorycheck.report.claims import Claim
from theorycheck.strategies import p_c_positive

from ._general_common import attention_check, attention_domain, attention_falsify, p_r_positive, plot_stat

S_GRID = (0.0, 0.5, 1.0, 2.0)


def check(params: dict, inject: dict | None = None):
    return attention_check("zipf", params, inject)


def domain():
    return attention_domain(S_GRID)


def plot(results):
    return plot_stat(results, "attention_preference", title="optimal alpha I + beta G, Zipfian topics: preference")


CLAIM = Claim(
    id="general.zipf-attention-preference",
    statement=(
        "With Zipfian words (s in [0, 2]), the optimal alpha I + beta G scores keep a positive same-topic attention "
        "preference for 2 <= tau <= T-1, but at tau = 1 the preference is negative for every s > 0"
    ),
    source="EMPIRICAL",
    spec="SPEC §11.6, §11.4, §4.3",
    check=check,
    default_params=(dict(T=4, v=3, taus=(1, 2, 3), values=S_GRID, p_m=0.15, p_c=0.1, p_r=0.1),),
    full_params=(
        dict(T=5, v=3, taus=(1, 2, 3, 4), values=(0.0, 0.25, 0.5, 1.0, 1.5, 2.0), p_m=0.15, p_c=0.1, p_r=0.1),
    ),  # fmt: skip
    falsify=attention_falsify,
    plot=plot,
    domain=domain,
    preconditions=(("p_r > 0", p_r_positive), ("p_c > 0", p_c_positive)),
    cost=4.0,
)
