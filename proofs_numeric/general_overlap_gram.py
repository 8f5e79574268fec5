"""SPEC §11.6 (DERIVED): overlapping topics (each mixed with the uniform word law, weight eps) keep the
topic structure of the minimum-norm tied embedding Gram exactly, for every eps < 1 (Theorem 1's conclusion).

For ``phi_t = (1 - eps) 1_t / v + eps 1_W / (T v)`` and ``tau < T`` the word block of the minimum-norm
tied Gram ``G* = Y (X^T Y)^+ Y^T`` (SPEC §11.5) is ``(1/(a v)) 1[same topic] + const``: the
same-minus-different inner-product gap is ``1/(a v)`` (as for the paper's model, SPEC §4.1) and the
block correlation is 1, independently of eps and tau; at ``eps = 1`` (identical topics) and at
``tau = T`` the gap is 0. Measured on the closed-form optimum over a grid of eps x tau (up to
eps = 0.999: the closed form's round-off grows like u / (1 - eps)^2); the bisection of the correlation
level 1/2 on the exact objects ends at eps = 1.
"""

from __future__ import annotations

from ._general_common import overlap_claim, overlap_plot, overlap_structure_check


def check(params: dict, inject: dict | None = None):
    return overlap_structure_check(params, inject, "gram")


def plot(results):
    return overlap_plot(results, "gram", "min-norm tied Gram under overlap: block correlation")


CLAIM = overlap_claim(
    id="general.overlap-gram-structure",
    statement=(
        "For topics mixed with the uniform word law (weight eps), the min-norm tied Gram has same-topic minus "
        "different-topic gap exactly 1/(a v) and block correlation 1 for every eps < 1 and tau < T; it loses the "
        "structure only at eps = 1 (identical topics) and at tau = T"
    ),
    spec="SPEC §11.6, §11.5, §4.1",
    check=check,
    plot=plot,
)
