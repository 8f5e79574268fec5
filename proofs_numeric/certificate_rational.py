"""SPEC §4.0, §4.1 D3/D4, §4.2 (DERIVED): the closed-form minimum-norm stage-1 value matrix
(``A``, ``B0``, ``gamma``) and the closed-form minimum-norm tied-embedding Gram (``x``, ``y``) are the
exact optima, with zero error in rational arithmetic.

Independent route (:mod:`theorycheck.solvers._rational` and the ``_rational`` modules of
:mod:`theorycheck.solvers.value` and :mod:`theorycheck.solvers.gram`): the moments ``Sigma``, ``C`` are summed
exactly over every tau-subset (masking probabilities read as decimal rationals, 0.15 = 3/20); the
optimum ``C Sigma^+`` (exact pseudo-inverse by a full-rank factorisation) and the minimum-trace PSD
completion ``X A^+ X^T`` are computed in ``Fraction`` arithmetic and certified by exact identities
(``W Sigma = C``, rows in ``range(Sigma)``, PSD by exact elimination). The SPEC formulas evaluated in
rational arithmetic must equal them entry by entry; the float closed forms must agree to 1e-14
relative (rounding level). Configurations: small (T, v, tau) with default and unequal masking, and
the degenerate tau = T (constant context).

Issue 25 item 6 (sub-checks that catch one-line bugs of the exact route):

* free decoder bias (SPEC §4.1 D4): the exact minimum-trace Gram of the centred moments equals the D4
  block ``x = (T-1)/(a v T)``, ``y = -1/(a v T)`` (0 for a single law) exactly and is certified; the float
  closed form agrees to 1e-14 relative; and its exact loss (centred moments plus ``1 - ||u||^2``) equals the
  float population loss :func:`theorycheck.population.embedding_loss` at a factor of ``G`` with the returned
  bias, within ``64 V1^2 eps (1 + ||G||_F)^2 (1 + ||b||)^2`` (the size of the summed terms times the rounding
  of a float sum of ``V1^2`` products; the loss is stationary in ``G``, so the factor's error enters squared);
* the exact PSD test (``is_psd_exact``) against float eigenvalues: on ``G +- s I`` (``s = 1/64``) for both
  Grams, its verdict must equal ``lambda_min >= 0`` of ``numpy.linalg.eigvalsh``
  wherever ``|lambda_min| > 64 V1 eps ||M||_F`` (beyond the eigensolver's backward error); ``G - s I`` is
  indefinite (``G`` has rank at most ``T < V1``), ``G + s I`` positive definite: both verdicts are exercised.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from theorycheck.population import embedding_loss
from theorycheck.report.claims import Claim, compare_all, compare_close
from theorycheck.solvers import closed_form_gram, value_block_constants
from theorycheck.solvers._rational import (
    RationalMatrix,
    is_psd_exact,
    rational_block_matrix,
)
from theorycheck.solvers.gram import (
    rational_embedding_gram,
    rational_embedding_result,
    rational_gram_constants,
)
from theorycheck.solvers.value import (
    rational_value_constants,
    rational_value_optimum,
)
from theorycheck.strategies import masking_grid_params, model_params, params

from ._stage1 import SPEC_MASKING, models

FLOAT_RTOL = 1e-14
EPS = float(np.finfo(float).eps)


def _rel(floats, exact) -> float:
    """Largest relative difference of floats to exact rationals (absolute where the exact value is 0)."""
    out = 0.0
    for f, e in zip(floats, exact):
        d = abs(Fraction(f) - e)
        out = max(out, float(d / abs(e)) if e else float(d))
    return out


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    T, v = tm.T, tm.v
    shift = Fraction(inject.get("A_shift", 0))
    A, B0, gamma, case = rational_value_constants(tm, mk)
    opt = rational_value_optimum(tm, mk)
    value_err = (opt.x - rational_block_matrix(T, v, A + shift, B0, gamma)).max_abs()
    x, y = rational_gram_constants(tm, mk)
    gram = rational_embedding_gram(tm, mk)
    gram_err = (gram.x - rational_block_matrix(T, v, x, y)).max_abs()
    cf = closed_form_gram(tm, mk)
    rel_value = _rel(value_block_constants(tm, mk)[:3], (A, B0, gamma))
    rel_gram = _rel((cf.x, cf.y), (x, y))
    rows = (  # (measured, tolerance, details, label): each must be 0 within its tolerance
        (float(value_err), 0.0, {"value_exact_error": str(value_err)}, "C Sigma^+ = §4.2 block (exact)"),
        (float(gram_err), 0.0, {"gram_exact_error": str(gram_err)}, "min-trace Gram = §4.1 D3 (exact)"),
        (float(not opt.certified), 0.0, {"value_checks": opt.checks}, "C Sigma^+ certified"),
        (float(not gram.certified), 0.0, {"gram_checks": gram.checks}, "Gram certified PSD"),
        (float(opt.loss - (1 - Fraction(1, tm.tau * v))), 0.0, {}, "L* = 1 - 1/(tau v)"),
        (rel_value, FLOAT_RTOL, {"value_float_rel_error": rel_value}, "float (A, B0, gamma) rel error <= 1e-14"),
        (rel_gram, FLOAT_RTOL, {"gram_float_rel_error": rel_gram}, "float (x, y) rel error <= 1e-14"),
    )
    parts = [compare_close(m, 0.0, tol, details=d, label=lab) for m, tol, d, lab in rows]
    parts += _bias_parts(tm, mk) + [_psd_part([gram.x])]
    res = compare_all(parts)
    res.details.update(case=case, A=str(A), B0=str(B0), gamma=str(gamma), x=str(x), y=str(y), rank=opt.rank_sigma)
    return res


def _bias_parts(tm, mk):
    """SPEC §4.1 D4 sub-checks (module docstring): exact Gram = D4 block, certified, float closed form, and the
    exact loss with a bias against the float population loss."""
    res = rational_embedding_result(tm, mk, bias=True)
    x4, y4 = rational_gram_constants(tm, mk, bias=True)
    G4 = res.info["x_exact"]
    err = (G4 - rational_block_matrix(tm.T, tm.v, x4, y4)).max_abs()
    cf = closed_form_gram(tm, mk, bias=True)
    rel = _rel((cf.x, cf.y), (x4, y4))
    G = G4.toarray()
    w, V = np.linalg.eigh(G)
    W_E = (V * np.sqrt(np.clip(w, 0.0, None))).T
    b = res.info["b"]
    L_float = embedding_loss(W_E, tm, mk, b=b)
    L_exact = res.info["loss_exact"]
    V1 = tm.V1
    tol = 64 * V1 * V1 * EPS * (1 + float(np.linalg.norm(G))) ** 2 * (1 + float(np.linalg.norm(b))) ** 2
    d = {"bias_loss_exact": str(L_exact), "bias_loss_float": L_float, "bias_loss_tol": tol}
    return [
        compare_close(float(err), 0.0, 0.0, details={"bias_gram_exact_error": str(err)},
                      label="min-trace Gram with a bias = §4.1 D4 block (exact)"),
        compare_close(float(res.status != 0), 0.0, 0.0, details={"bias_checks": res.info["checks"]},
                      label="Gram with a bias certified PSD"),
        compare_close(rel, 0.0, FLOAT_RTOL, details={"bias_gram_float_rel_error": rel},
                      label="float D4 (x, y) rel error <= 1e-14"),
        compare_close(float(L_exact), L_float, tol, details=d, label="exact loss with a bias = float population loss"),
        _psd_part([G4]),
    ]  # fmt: skip


def _psd_part(grams):
    """``is_psd_exact`` on ``G +- s I`` against the sign of float ``lambda_min`` where that sign is decided."""
    wrong, decided, margins = 0, 0, []
    for G in grams:
        n = G.shape[0]
        s = Fraction(1, 64)
        for sign in (-1, 1):
            M = RationalMatrix(
                tuple(tuple(G.rows[i][j] + (sign * s if i == j else 0) for j in range(n)) for i in range(n))
            )
            Mf = M.toarray()
            lam = float(np.linalg.eigvalsh(Mf)[0])
            if abs(lam) > 64 * n * EPS * float(np.linalg.norm(Mf)):
                decided += 1
                wrong += int(is_psd_exact(M) != (lam > 0))
                margins.append(lam)
    return compare_close(float(wrong), 0.0, 0.0, details={"psd_decided": decided, "psd_lambda_min": margins},
                         label="exact PSD test = sign of float lambda_min (G +- s I)")  # fmt: skip


def domain():
    """T <= 5, v <= 3, every tau (tau = T included: the constant-context case), maskings on a 0.05 grid
    (short decimals, p_c != p_r, q = 0 and r = 0 included): exact enumeration of at most 10 topic
    sets and Fraction linear algebra on V1 <= 16 per draw."""
    return params(model_params(max_T=5, max_v=3), masking_grid_params(step=0.05))


def falsify(params: dict) -> dict:
    """Shift the rational same-topic entry A by 1/10^20: the exact comparison must see it."""
    return {"A_shift": Fraction(1, 10**20)}


UNEQUAL = dict(p_m=0.3, p_c=0.2, p_r=0.05)

CLAIM = Claim(
    id="certificate.rational",
    statement=(
        "Exact rational C Sigma^+ and min-trace PSD Gram (enumerated moments) equal the SPEC §4.2 / §4.1 D3 closed"
        " forms with zero error; the float closed forms agree to 1e-14; with a free bias the exact Gram is the §4.1"
        " D4 block and its exact loss the float population loss; the exact PSD test agrees with float eigenvalues"
    ),
    source="DERIVED",
    spec="SPEC §4.0, §4.1 D3, §4.1 D4, §4.2",
    check=check,
    default_params=(
        dict(T=4, v=3, tau=2, **SPEC_MASKING),
        dict(T=2, v=2, tau=1, **SPEC_MASKING),
        dict(T=3, v=2, tau=2, **UNEQUAL),
        dict(T=5, v=2, tau=3, **SPEC_MASKING),
        dict(T=5, v=2, tau=3, **UNEQUAL),
        dict(T=4, v=3, tau=2, **UNEQUAL),
        dict(T=3, v=2, tau=3, **SPEC_MASKING),
        dict(T=4, v=2, tau=4, **UNEQUAL),
    ),
    falsify=falsify,
    domain=domain,
)
