"""Shared helpers of the embedding claims (not a claim: the leading underscore hides it)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from theorycheck import Masking, TopicModel
from theorycheck.population import embedding_loss_grad
from theorycheck.population._embedding_loss import _kernel_threads
from theorycheck.solvers import optimal_embedding_gram
from theorycheck.solvers.gram._solve import _serial_blas


def models(params: dict) -> tuple[TopicModel, Masking]:
    return TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking(
        params["p_m"], params["p_c"], params["p_r"]
    )


def trained_embedding(tm, mk, d, *, seed=0, init_scale=1e-2) -> np.ndarray:
    """Tied embedding trained by L-BFGS on the exact population loss (a minimiser; d >= T)."""
    res = optimal_embedding_gram(tm, mk, method="factorized", d=d, options={"seed": seed, "init_scale": init_scale})
    if not res.success:
        raise RuntimeError(f"L-BFGS did not reach the optimum: {res.message}")
    return res.info["W_E"]


def lbfgs_embedding(tm, mk, d, *, seed=0, init_scale=1e-2, fix_mask=False) -> np.ndarray:
    """Tied embedding ``W_E`` (d x V1) from L-BFGS on the exact population loss, any ``d >= 1``.

    ``fix_mask=True`` holds the [MASK] embedding at ``E_0 = 0`` (column 0 starts at 0 and its
    gradient is discarded). Entries start as ``init_scale * N(0, 1/d)``.
    """
    rng = np.random.default_rng(seed)
    W0 = init_scale * rng.standard_normal((d, tm.V1)) / np.sqrt(d)
    if fix_mask:
        W0[:, 0] = 0.0
    shape = W0.shape

    def fg(w):
        out = embedding_loss_grad(w.reshape(shape), tm, mk)
        g = out.dW_E.copy()
        if fix_mask:
            g[:, 0] = 0.0
        return out.loss, g.ravel()

    with _kernel_threads(tm.V1), _serial_blas(W0.size):
        opt = minimize(
            fg,
            W0.ravel(),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 20_000, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30},
        )
    return opt.x.reshape(shape)


def trained_embedding_zero_mask(tm, mk, d, *, seed=0, init_scale=1.0) -> np.ndarray:
    """Generic minimiser with ``E_0 = 0`` (L-BFGS from a large init, [MASK] column held at 0)."""
    return lbfgs_embedding(tm, mk, d, seed=seed, init_scale=init_scale, fix_mask=True)


def perturb(W: np.ndarray, eps: float, seed: int = 12345) -> np.ndarray:
    """``W + eps * N(0, 1)`` (used by ``falsify`` to leave the minimiser set)."""
    return W + eps * np.random.default_rng(seed).standard_normal(W.shape)


def with_dim(strategy, *, extra=(0, 3), key="d"):
    """Add ``key = T + k`` (k drawn in ``extra``, shrinking to ``extra[0]``) to a strategy of params dicts."""
    from hypothesis import strategies as st

    return st.tuples(strategy, st.integers(*extra)).map(lambda t: {**t[0], key: t[0]["T"] + t[1]})
