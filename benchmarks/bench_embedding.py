"""Optimal tied embedding Gram: closed form vs Schur completion vs cvxpy SDP vs L-BFGS, as V1 grows.

All methods run side by side in one process on the same configurations (tau = 2, default
masking). Errors are against the closed form (SPEC §4.1 D3): max |G - G_closed| for the
min-norm methods, max difference of the identifiable part (``identifiable_part``) for L-BFGS
(which reaches a different minimiser in the loss's null directions), plus the loss gap
``L(G) - L*`` recomputed by ``value_loss``. ``formula_us`` is the bare closed form (a
:class:`BlockGram`, O(1)); ``certified_ms`` is ``optimal_embedding_gram(method="closed-form")``
including its residual checks (dense ``value_loss`` and minimiser check for V1 <= 2001, O(1)
structured checks above). Every other method also recomputes its residuals, so the ratios
time(method) / certified time compare like with like.
Run: ``python benchmarks/bench_embedding.py``.
"""

from __future__ import annotations

import math
import time

import numpy as np
from _common import best_time, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import closed_form_gram, identifiable_part, optimal_embedding_gram

SIZES = [(3, 2), (4, 3), (5, 4), (6, 5), (8, 5), (10, 10), (20, 10), (30, 10), (50, 20), (100, 100), (1000, 100)]
CVXPY_MAX_V1 = 41  # the interior-point SDP (CLARABEL) grows too slow beyond this size; see the JSON
SCS_MAX_V1 = 101
LBFGS_MAX_V1 = 301
SCHUR_MAX_V1 = 1001


def _once(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main():
    mk = tc.Masking()
    warm = tc.TopicModel(T=3, v=2, tau=2)  # imports, JIT, cvxpy canonicalisation caches
    for method, kw in (
        ("schur", {}),
        ("cvxpy", {"solver": "CLARABEL"}),
        ("cvxpy", {"solver": "SCS"}),
        ("factorized", {"d": 5}),
    ):
        optimal_embedding_gram(warm, mk, method=method, **kw)
    rows, records = [], []
    for T, v in SIZES:
        tm = tc.TopicModel(T=T, v=v, tau=2)
        V1 = tm.V1
        t_formula = best_time(lambda: closed_form_gram(tm, mk), repeat=5, min_time=0.02)
        t_cf = best_time(lambda: optimal_embedding_gram(tm, mk), repeat=3, min_time=0.02)
        cf = optimal_embedding_gram(tm, mk)
        rec = {
            "T": T,
            "v": v,
            "V1": V1,
            "formula_s": t_formula,
            "closed_form_s": t_cf,
            "closed_form_loss_gap": cf.residuals["loss_gap"],
        }
        Gc = closed_form_gram(tm, mk).toarray() if V1 <= SCHUR_MAX_V1 else None
        row = [V1, t_formula * 1e6, t_cf * 1e3]
        if V1 <= SCHUR_MAX_V1:
            sc, t = _once(lambda: optimal_embedding_gram(tm, mk, method="schur"))
            rec.update(schur_s=t, schur_err=float(np.max(np.abs(sc.x - Gc))))
            row += [t / t_cf, rec["schur_err"]]
        else:
            row += [math.nan, math.nan]
        for name, limit, solver in (("clarabel", CVXPY_MAX_V1, "CLARABEL"), ("scs", SCS_MAX_V1, "SCS")):
            if V1 <= limit:
                cv, t = _once(lambda: optimal_embedding_gram(tm, mk, method="cvxpy", solver=solver))
                err = float(np.max(np.abs(cv.x - Gc))) if cv.x is not None else math.nan
                rec.update(
                    {
                        f"{name}_s": t,
                        f"{name}_err": err,
                        f"{name}_status": cv.status,
                        f"{name}_duality_gap": cv.residuals.get("duality_gap", math.nan),
                    }
                )
                row += [t / t_cf, err]
            else:
                row += [math.nan, math.nan]
        if V1 <= LBFGS_MAX_V1:
            fz, t = _once(lambda: optimal_embedding_gram(tm, mk, method="factorized", d=T + 2))
            err = float(np.max(np.abs(identifiable_part(fz.x, tm, mk) - identifiable_part(Gc, tm, mk))))
            rec.update(
                lbfgs_s=t,
                lbfgs_ident_err=err,
                lbfgs_loss_gap=fz.residuals["loss_gap"],
                lbfgs_nit=fz.nit,
                lbfgs_mask_norm=fz.info["mask_embedding_norm"],
            )
            row += [t / t_cf, err, fz.residuals["loss_gap"]]
        else:
            row += [math.nan, math.nan, math.nan]
        rows.append(row)
        records.append(rec)
        print(f"V1={V1} done", flush=True)
    headers = [
        "V1",
        "formula_us",
        "certified_ms",
        "schur/cf",
        "schur_err",
        "clarabel/cf",
        "clarabel_err",
        "scs/cf",
        "scs_err",
        "lbfgs/cf",
        "lbfgs_ident_err",
        "lbfgs_loss_gap",
    ]
    print()
    print_table(headers, rows)
    path = write_json("embedding", {"headers": headers, "rows": rows, "records": records})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
