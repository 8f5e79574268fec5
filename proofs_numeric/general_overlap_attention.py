"""SPEC §11.6 (EMPIRICAL, signs on a sweep): the optimal attention keeps its same-topic preference when
topics overlap (each mixed with the uniform word law, weight eps).

At each (eps, tau) the exact population optimum of ``S = alpha I_w + beta G`` (``G`` the co-topic word
similarity) with the stage-1 W^V frozen (SPEC §11.4) is found by ``optimal_attention`` and its
same-topic attention preference measured (SPEC §11.6: mean per-key weight on same-topic words, the
query's own word included as in the paper's ``K/v``, minus that on different-topic words). Checked:
preference > 0 for 2 <= tau <= T - 1 at every eps < 1 of the grid; at tau = 1, where the paper's model
is indifferent (``K* = v``, preference 0), overlap makes it positive; at eps = 0 the measured
preference equals the (alpha, beta) closed form of the optimum (an independent route); every optimum
is certified. tau = T (one document law: the optimum is not identified) is left out. Needs p_c > 0
(explore: with p_c = 0, T = 3, tau = 2, p_m = 0.05 the optimum's preference is -1.7e-9, i.e. it
vanishes: no kept word tells the query its own topic) and p_r > 0.
"""

from __future__ import annotations

from ._general_common import attention_check, attention_claim, attention_domain, plot_stat

EPS = (0.0, 0.3, 0.6, 0.9)


def check(params: dict, inject: dict | None = None):
    return attention_check("overlap", params, inject)


def domain():
    """T in 3..4, v in 2..3, taus 2..T-1, eps grid (0, 0.3, 0.6, 0.9), masking on a 0.05 grid (one exact
    attention optimum over all C(T, tau) topic sets per point, ~1 s each)."""
    return attention_domain(EPS)


def plot(results):
    return plot_stat(results, "attention_preference", title="optimal alpha I + beta G under overlap: preference")


CLAIM = attention_claim(
    id="general.overlap-attention-preference",
    statement=(
        "With topics mixed with the uniform word law (eps < 1), the optimal alpha I + beta G scores keep a positive "
        "same-topic attention preference for 2 <= tau <= T-1, and overlap turns tau = 1's indifference positive"
    ),
    check=check,
    domain=domain,
    plot=plot,
    values=EPS,
    full_values=(0.0, 0.2, 0.4, 0.6, 0.8, 0.95),
)
