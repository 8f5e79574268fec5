"""General topic-word matrices (SPEC §11.2, §11.5): moments and the stage-1 optimum at LDA-sized vocabularies.

For random topic-word matrices (Dirichlet rows, T = 50 topics, uniform tau = 2 law) and n_words in the
ladder (default 500, 2000, 5000), side by side in one run:

- moments ``(Sigma, C)``: closed form from ``E[theta theta^T]`` (O(T n^2)) vs enumeration over every
  tau-subset (O(C(T, tau) n^2)), and their max-abs difference;
- stage-1 ``W^V`` (reg = 0): closed form as a rank-T factored matrix (O(n T^2)), the same densified,
  dense ``lstsq`` (O(V1^3)); the max-abs distance of lstsq to the closed form, and each route's ``fun``
  against ``L* = 1 - tr(Phi^T M2 Phi)``;
- the min-norm tied embedding Gram (closed form).

Times include our residual certification. Routes above ``--budget`` seconds (predicted by their cost
model from the previous size) are skipped and reported as null. Writes ``results/general.json``.

Run: ``python benchmarks/bench_general.py [--quick] [--budget 900] [--T 50] [--tau 2]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import dirichlet_model, print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_embedding_gram, optimal_value_matrix

MK = tc.Masking()
#: cost exponent in n of each route (to skip a run predicted above the budget)
EXPONENT = {"moments-closed-form": 2.0, "moments-enumerate": 2.0, "lstsq": 3.0, "closed-form-dense": 2.0}


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


class Budget:
    """Skip a route whose predicted time (last time x (n / last n)^exponent) exceeds the budget."""

    def __init__(self, budget):
        self.budget, self.last = budget, {}

    def run(self, name, n, fn):
        if name in self.last:
            t_prev, n_prev = self.last[name]
            if t_prev * (n / n_prev) ** EXPONENT.get(name, 1.0) > self.budget:
                return None, None
        t, out = _timed(fn)
        self.last[name] = (t, n)
        return t, out


def _one_size(g, budget):
    n = g.n_words
    row = {"n_words": n, "T": g.T, "tau": g.tau, "V1": g.V1}
    t_cf, (S1, C1) = budget.run("moments-closed-form", n, lambda: tc.population.moments(g, MK))
    row["moments_closed_form_s"] = t_cf
    t_en, mom = budget.run("moments-enumerate", n, lambda: tc.population.moments(g, MK, method="enumerate"))
    row["moments_enumerate_s"] = t_en
    row["moments_max_abs_diff"] = (
        None if mom is None else float(max(np.abs(S1 - mom[0]).max(), np.abs(C1 - mom[1]).max()))
    )
    del mom, S1, C1
    t_lr, r_lr = _timed(lambda: optimal_value_matrix(g, MK, options={"dense": False}))
    row["W_closed_form_factored_s"], row["W_rank"] = t_lr, r_lr.x.rank
    t_de, _ = budget.run("closed-form-dense", n, lambda: optimal_value_matrix(g, MK, options={"dense": True}))
    row["W_closed_form_dense_s"] = t_de
    t_ls, r_ls = budget.run("lstsq", n, lambda: optimal_value_matrix(g, MK, method="lstsq"))
    row["W_lstsq_s"] = t_ls
    L_star = r_lr.info["predicted_min_loss"]
    row["L_star"], row["fun_closed_form_minus_L_star"] = L_star, r_lr.fun - L_star
    row["closed_form_status"] = r_lr.status
    if r_ls is not None:
        row["fun_lstsq_minus_L_star"] = r_ls.fun - L_star
        row["lstsq_status"] = r_ls.status
        row["lstsq_max_abs_diff"] = float(np.abs(r_ls.x - r_lr.x.toarray()).max())
    t_g, r_g = _timed(lambda: optimal_embedding_gram(g, MK))
    row["gram_closed_form_s"], row["gram_rank"], row["gram_status"] = t_g, r_g.info["rank"], r_g.status
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n_words = 300, 1000 only")
    ap.add_argument("--budget", type=float, default=900.0, help="skip a route predicted above this many seconds")
    ap.add_argument("--T", type=int, default=50)
    ap.add_argument("--tau", type=int, default=2)
    args = ap.parse_args(argv)
    sizes = [300, 1000] if args.quick else [500, 2000, 5000]
    budget, rows = Budget(args.budget), []
    for n in sizes:
        rows.append(_one_size(dirichlet_model(args.T, n, args.tau, floor=1e-9), budget))
        print(f"n_words={n} done", flush=True)
    keys = ["moments_closed_form_s", "moments_enumerate_s", "W_closed_form_factored_s", "W_closed_form_dense_s",
            "W_lstsq_s", "gram_closed_form_s"]  # fmt: skip
    headers = ["n_words", "mom cf", "mom enum", "W cf (factored)", "W cf (dense)", "W lstsq", "Gram cf",
               "|lstsq - cf|", "fun - L*"]  # fmt: skip
    table = [[r["n_words"], *[("-" if r[k] is None else r[k]) for k in keys], r.get("lstsq_max_abs_diff", "-"),
              r["fun_closed_form_minus_L_star"]] for r in rows]  # fmt: skip
    print_table(headers, table)
    path = write_json("general", {"masking": MK.to_dict(), "budget_s": args.budget, "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
