"""SPEC §6 item 13 (DERIVED, §4.1 D3): the minimum-norm tied embedding optimum is
block-constant: ``<E_i,E_j> = x`` within a topic (i = j included, so same-topic embeddings coincide),
``y`` across topics, ``E_0 = 0``, with ``x = (1/(a v))(1 - r/(T(a+r)))``, ``y = -r/(a v T (a+r))``;
its eigenvalue on ``1_W`` is ``1/(a+r)`` and its rank is T (so ``d >= T`` suffices and is needed).
Requires ``tau < T``: with a single document law the min-norm Gram is ``u u^T / (m^T u)``, rank 1.

The closed form is the library's (``theorycheck.solvers.closed_form_gram``; the claim does not
restate it), checked against an independent solve of ``min tr G`` over PSD minimisers: the semidefinite program
(cvxpy/CLARABEL, with our own duality-gap recomputation) on small vocabularies, and the exact
Schur-complement completion for the paper's configuration T = v = 10, where SPEC quotes
x = 0.115410, y = -0.000197. The figure shows this Gram beside an L-BFGS-trained one (same
identifiable part; L-BFGS leaves a non-zero [MASK] embedding, a direction the loss ignores).
"""

from __future__ import annotations

import numpy as np

from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import closed_form_gram, embedding_from_gram, optimal_embedding_gram
from theorycheck.strategies import choices, masking_grid_params, model_params, params, tau_below_T

from ._embedding_common import models, trained_embedding

TOL = 1e-6


def _formula(tm, mk):
    """The library's closed form (``theorycheck.solvers.closed_form_gram``, SPEC §4.1 D3), dense, with ``(x, y)``."""
    bg = closed_form_gram(tm, mk)
    return bg.toarray(), bg.x, bg.y


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    G_f, x, y = _formula(tm, mk)
    if "x_scale" in inject:
        x = x * inject["x_scale"]
        G_f = np.where(G_f == G_f[1, 1], x, G_f)
    ind = optimal_embedding_gram(tm, mk, method=params["method"])
    G = ind.x
    subs = [
        compare_close(
            float(np.max(np.abs(G - G_f))),
            0.0,
            TOL,
            details={
                "method": params["method"],
                "solver_status": ind.status,
                "duality_gap": ind.residuals.get("duality_gap", 0.0),
            },
            label=f"max |G ({params['method']}) - closed form| <= 1e-6",
        )
    ]
    # the SDP is accurate to its solver tolerance only: eigenvalues down to -TOL (the tolerance of the
    # Gram comparison above) are rounding of a PSD optimum, clipped to 0 (explore found -2.2e-8 at T = 2)
    W = embedding_from_gram(G, tm.V1, tol=TOL if params["method"] == "cvxpy" else None)
    words = W[:, 1:].reshape(W.shape[0], tm.T, tm.v)
    spread = float(np.max(np.abs(words - words[:, :, :1])))  # same-topic embeddings identical
    ones = np.r_[0.0, np.ones(tm.n_words)]
    eig_ones = float(ones @ G @ ones / (ones @ ones))
    lam = np.linalg.eigvalsh(G)
    rank = int(np.sum(lam > 1e-6 * lam.max()))
    subs += [
        compare_close(
            np.linalg.norm(W[:, 0]),
            0.0,
            1e-3,
            details={"mask_embedding_norm": float(np.linalg.norm(W[:, 0]))},
            label="|E_0| = 0",
        ),
        compare_close(spread, 0.0, 1e-3, details={"same_topic_spread": spread}, label="same-topic embeddings equal"),
        compare_close(eig_ones, 1 / (mk.a + mk.r), TOL, details={"eig_ones": eig_ones}, label="eig(1_W) = 1/(a+r)"),
        compare_close(rank, tm.T, 0.5, details={"rank": rank}, label="rank G = T"),
    ]
    if "quoted" in params:
        err_q = float(np.max(np.abs(np.subtract([x, y], params["quoted"]))))
        subs.append(
            compare_close(err_q, 0.0, 5e-7, details={"x": x, "y": y}, label="max |(x, y) - SPEC quote| <= 5e-7")
        )
    res = compare_all(subs)
    res.details.update(x=x, y=y)
    if params.get("figure"):
        W_l = trained_embedding(tm, mk, tm.T + 2, seed=0)
        res.data = {
            "G_closed": G_f,
            "G_lbfgs": W_l.T @ W_l,
            "v": tm.v,
            "T": tm.T,
            "lbfgs_mask_norm": float(np.linalg.norm(W_l[:, 0])),
        }
        res.details["lbfgs_mask_embedding_norm"] = res.data["lbfgs_mask_norm"]
    return res


def domain():
    """T <= 5, v <= 3, every tau, maskings on a 0.05 grid (p_c != p_r), both independent solvers
    (``method`` = the semidefinite program on V1 <= 16, or the exact Schur completion): one solve per draw."""
    return params(model_params(max_T=5, max_v=3), masking_grid_params(step=0.05), choices(method=("schur", "cvxpy")))


def falsify(params: dict) -> dict:
    """Scale the formula's same-topic value x by 1 + 1.5e-5: G is then off by a few x TOL on the default
    configurations (issue 25 item 6: a loosened TOL lets it pass)."""
    return {"x_scale": 1 + 1.5e-5}


def plot(results):
    from theorycheck.report.plots import gram_pair

    for r in results:
        if "G_closed" in r.data:
            d = r.data
            fig = gram_pair(
                d["G_closed"],
                d["G_lbfgs"],
                block=d["v"],
                titles=(
                    "min-norm optimum (closed form, E_0 = 0)",
                    f"L-BFGS-trained W_E^T W_E (d = T+2; |E_0| = {d['lbfgs_mask_norm']:.2f})",
                ),
                suptitle=(
                    f"Tied embedding Gram, T = {d['T']}, v = {d['v']}: both attain L* = 1 - 1/(tau v) "
                    "(colour scale clipped at the closed form's largest entry)"
                ),
                vmax=float(np.max(np.abs(d["G_closed"]))),
            )
            return {"gram_heatmaps": fig}
    return {}


CLAIM = Claim(
    id="embedding.min-norm-gram",
    statement=(
        "The minimum-norm tied embedding optimum is block-constant (x within topics, y across, E_0 = 0, "
        "same-topic embeddings identical), with eigenvalue 1/(a+r) on 1_W and rank T"
    ),
    source="DERIVED",
    spec="SPEC §4.1 D3, §6 item 13",
    check=check,
    default_params=(
        dict(T=5, v=3, tau=2, p_m=0.15, p_c=0.1, p_r=0.1, method="cvxpy"),
        dict(T=4, v=3, tau=1, p_m=0.3, p_c=0.2, p_r=0.3, method="cvxpy"),
        dict(T=10, v=10, tau=3, p_m=0.15, p_c=0.1, p_r=0.1, method="schur", quoted=(0.115410, -0.000197), figure=True),
    ),
    falsify=falsify,
    plot=plot,
    domain=domain,
    preconditions=(("tau < T", tau_below_T),),
)
