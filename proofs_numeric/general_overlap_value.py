"""SPEC §11.6 (DERIVED): overlapping topics (each mixed with the uniform word law, weight eps) keep the
stage-1 topic structure of the minimum-norm W^V exactly, for every eps < 1.

For ``phi_t = (1 - eps) 1_t / v + eps 1_W / (T v)`` and ``tau < T`` the word block of the minimum-norm
``W^V = C Sigma^+`` (SPEC §11.5) is ``(1/(a v)) 1[same topic] + const``: the same-minus-different gap is
``1/(a v)`` (the paper's ``A - B0``) and the block correlation is 1, independently of eps and tau; at
``eps = 1`` (identical topics) and at ``tau = T`` the gap is 0. Measured on the closed-form optimum
over a grid of eps x tau; the bisection of the correlation level 1/2 on the exact objects ends at eps = 1.
"""

from __future__ import annotations

from ._general_common import overlap_claim, overlap_plot, overlap_structure_check


def check(params: dict, inject: dict | None = None):
    return overlap_structure_check(params, inject, "value")


def plot(results):
    return overlap_plot(results, "value", "min-norm stage-1 W^V under overlap: block correlation")


CLAIM = overlap_claim(
    id="general.overlap-value-structure",
    statement=(
        "For topics mixed with the uniform word law (weight eps), the min-norm stage-1 W^V has same-topic minus "
        "different-topic gap exactly 1/(a v) and block correlation 1 for every eps < 1 and tau < T; it loses the "
        "structure only at eps = 1 (identical topics) and at tau = T"
    ),
    spec="SPEC §11.6, §11.5, §4.2",
    check=check,
    plot=plot,
)
