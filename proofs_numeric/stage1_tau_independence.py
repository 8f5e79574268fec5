"""SPEC §4.2, §6 item 6 (DERIVED): the minimum-norm stage-1 W^V does not depend on tau
(for tau < T) nor on the Dirichlet alpha: the set of minimisers ``{W: W m = p for every document}``
is the same for every topic law whose mixtures affinely span the simplex.

Measured with dense least squares ``C pinv(Sigma)`` for each law (independent of the closed form).
The statement is false at ``tau = T`` (every document has all topics, ``Sigma`` has rank one and the
min-norm W carries no topic structure); :func:`falsify` adds ``tau = T`` to the list to show it.
"""

from __future__ import annotations

import numpy as np

from theorycheck import TopicModel
from theorycheck.report.claims import Claim, compare_close
from theorycheck.solvers import optimal_value_matrix
from theorycheck.strategies import masking_params, params

from ._stage1 import models

TOL = 1e-10


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    _, mk = models(dict(params, tau=1))
    T, v = params["T"], params["v"]
    taus = inject.get("taus", list(range(1, T)))
    laws = [TopicModel(T=T, v=v, tau=t) for t in taus] + [
        TopicModel(T=T, v=v, prior="dirichlet", alpha=al) for al in params["alphas"]
    ]
    Ws = [optimal_value_matrix(tm, mk, method="lstsq").x for tm in laws]
    ref = Ws[0]
    devs = [float(np.abs(W - ref).max()) for W in Ws]
    devs[-1] += inject.get("dev_shift", 0.0)
    res = compare_close(
        max(devs),
        0.0,
        TOL,
        label=f"max |W_law - W_(tau=1)| = 0 over tau in {taus[0]}..{taus[-1]}, alpha in {list(params['alphas'])}",
        details={"max_dev_per_law": devs, "laws": [str(t) for t in taus] + [f"alpha={a}" for a in params["alphas"]]},
    )
    return res


def domain():
    """2 <= T <= 8 and v <= 4 (one dense lstsq per law: T - 1 tau-laws and up to three Dirichlet alphas in
    [0.05, 5]), every masking (p_c != p_r)."""
    from hypothesis import strategies as st

    alphas = st.lists(st.floats(0.05, 5.0, allow_nan=False), min_size=1, max_size=3).map(tuple)
    model = st.fixed_dictionaries({"T": st.integers(2, 8), "v": st.integers(1, 4), "alphas": alphas})
    return params(model, masking_params())


def falsify(params: dict) -> dict:
    """One law's W off by 3e-10 (3 x TOL, a fixed number; issue 25 item 6: a loosened TOL lets it pass).
    (``{"taus": 1..T}``, including tau = T where the min-norm W is rank one, breaks it by 2.5e9 x TOL.)"""
    return {"dev_shift": 3e-10}


CLAIM = Claim(
    id="stage1.tau-independence",
    statement="The min-norm stage-1 W^V is the same for every tau < T and every Dirichlet alpha",
    source="DERIVED",
    spec="SPEC §4.2, §6 item 6",
    check=check,
    default_params=(dict(T=8, v=4, p_m=0.15, p_c=0.1, p_r=0.1, alphas=(0.1, 1.0, 10.0)),),
    falsify=falsify,
    domain=domain,
)
