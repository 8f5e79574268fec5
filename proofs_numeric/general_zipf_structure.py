"""SPEC §11.6 (EMPIRICAL, a threshold on a sweep): Zipfian words inside disjoint topics weaken but keep
the topic structure of the minimum-norm stage-1 W^V and tied Gram.

For ``phi_t(k) ∝ (k + 1)^(-s)`` (disjoint topics of ``v`` words) and ``tau < T``: the same-minus-different
gap stays > 0 on the whole grid (s up to 8); the block correlation does not rise with s, checked end to
end (correlation at s = 8 <= that at s = 0 + 1e-12 for every tau < T, W^V and Gram): it falls at the
default T = 4, v = 3 (by >= 0.76 for W^V, 0.44 for the Gram), is flat for the Gram at T = v = 2,
p_m = 0.05, p_c = p_r = 0 (found by ``verify --explore``: "falls" there was refuted), and is not always
monotone between grid points (+7e-4 at T = 2, v = 5, p_m = 0.05, p_c = p_r = 0). The s* where the
W^V block correlation falls to 1/2 (bisection on the exact closed-form optimum) is reported, not
claimed: about 5.45 for T = 4, v = 3 with the paper's masking, but 1.88 for T = 2, v = 5, p_m = 0.05,
p_c = p_r = 0 (found by ``verify --explore``; a former sub-check "s* > 2" was refuted there). The
statistics do not depend on tau < T (the optimum depends on the law only through the span of the
masked topic densities); at tau = T (one document law) there is no topic structure (the off-diagonal
gap is slightly negative).
"""

from __future__ import annotations

import numpy as np

from theorycheck.report.claims import Claim

from ._general_common import plot_stat, structure_domain, zipf_structure_check

S_GRID = tuple(float(s) for s in np.arange(0.0, 8.5, 1.0))


def check(params: dict, inject: dict | None = None):
    return zipf_structure_check(params, inject)


def domain():
    """T in 2..6, v in 2..5, every tau, s in 0..8, masking on a 0.05 grid with a >= 0.05 (closed forms:
    cheap)."""
    return structure_domain("zipf", S_GRID)


def plot(results):
    figs = plot_stat(results, "value_correlation", level=0.5, boundary_key="boundary",
                     title="min-norm stage-1 W^V, Zipfian topics: block correlation")  # fmt: skip
    figs.update(plot_stat(results, "gram_correlation", title="min-norm tied Gram, Zipfian topics: block correlation"))
    return figs


def falsify(params: dict) -> dict:
    """Both gaps lowered by 3.5e-3 (a fixed number): the Gram's smallest gap (1.7e-3 at s = 8, tau < T, the passing
    margin) then ends 1.7e-3 below 0, as far below as it was above (issue 25 item 6: a threshold loosened by more
    than that lets it pass). (The planted layout error ``{"layout": True}`` breaks the gaps by far.)"""
    return {"gap_shift": -3.5e-3}


CLAIM = Claim(
    id="general.zipf-structure",
    statement=(
        "With Zipfian words in disjoint topics (exponent s), the min-norm W^V and tied Gram keep same-topic > "
        "different-topic (gap > 0) for tau < T on the whole grid s <= 8; the block correlation does not rise from "
        "s = 0 to s = 8 (it falls at T = 4, v = 3; the s* where it reaches 1/2 is reported)"
    ),
    source="EMPIRICAL",
    spec="SPEC §11.6, §11.5",
    check=check,
    default_params=(dict(T=4, v=3, taus=(1, 2, 3, 4), values=S_GRID, p_m=0.15, p_c=0.1, p_r=0.1),),
    full_params=(dict(T=8, v=6, taus=tuple(range(1, 9)), values=S_GRID, p_m=0.15, p_c=0.1, p_r=0.1),),
    falsify=falsify,
    plot=plot,
    domain=domain,
    cost=0.5,
)
