"""Mutation check: does ``theorycheck verify`` catch plausible one-line bugs in the core formulas?

Each mutant is a textual patch (``old`` -> ``new``, ``old`` must occur exactly once in the file, so
a refactor that moves the target text makes the mutant fail loudly instead of being skipped). The
mutants are applied in turn to ONE temporary copy of ``theorycheck/`` and ``proofs_numeric/`` (the
original file is restored after each run, so Numba's on-disk cache, kept in a private
``NUMBA_CACHE_DIR`` inside the copy, is only invalidated for the patched file), and

    python -m theorycheck.cli verify --only <claims> --jobs 1 --no-cache --no-figures --quiet

runs there with ``PYTHONPATH`` pointing at the copy. A mutant is *caught* when verify exits with
status 1 (a claim failed); exit 0 means it *survived*; anything else (a crash) is reported as an
error (counted as caught by a crash, listed separately).

Usage::

    python benchmarks/mutation.py                   # every mutant, the non-training claims
    python benchmarks/mutation.py --mutants centring,ln-mean --claims gradient
    python benchmarks/mutation.py --list
    python benchmarks/mutation.py --json results/mutation.json
    python benchmarks/mutation.py --tests --mutants rat-psd    # the mutant's area tests instead of verify

The default claim set is every claim whose id starts with one of :data:`DEFAULT_CLAIMS` (the
training and real-data claims are slow and test other things). Expect about a minute per mutant
on 2 cores.

Mutants of test-only machinery (:data:`NON_NUMERICAL`: the cache key, the falsifiers, a loosened
tolerance) cannot be caught by ``verify``, which neither runs falsifiers nor reads the cache with
``--no-cache``; the tests catch them. The goal for every other mutant is that ``verify`` catches it
whenever the tests do. ``--tests`` runs, instead of ``verify``, ``pytest -x`` on the test files of the
mutant's area (:data:`AREA_TESTS`; :data:`CLAIM_TESTS` selects the mutated claim's cases of
``tests/test_claims.py``) in a temporary copy of the whole checkout. ``benchmarks/results/mutation.json``
records the issue-25 mutants: ``verify`` restricted to the claims of the mutated area (a lower bound on
what the full default set catches) and the tests of that area.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CLAIMS = "attention,stage1,embedding,data,dynamics,gradient,sampling,certificate,general,cli,problems,stats"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    old: str
    new: str
    what: str


M = Mutant
MUTANTS = (
    M("centring", "theorycheck/population/_attention_dense.py",
      'grads[0] += (H * (dH - np.einsum("nxy,nxy->nx", H, dH)[:, :, None])).sum(axis=0)',
      "grads[0] += (H * dH).sum(axis=0)", "softmax-centring term dropped from attention_loss_grad dS"),
    M("structured-bias", "theorycheck/population/_attention_kernels.py",
      "nx = nq * iz * iz + 2.0 * bw * iz + bb", "nx = nq * iz * iz + bb",
      "decoder-bias cross term 2 b.Wh dropped from the structured squared-loss kernel"),
    M("ln-mean", "theorycheck/nn/_dense_kernels.py",
      "o[k] = iv * (g[k] - m1 - y[k] * m2)",
      "o[k] = iv * (g[k] - y[k] * m2)",
      "mean term dropped from layer-norm backward (the Numba kernel)"),
    M("swap-pc-pr", "theorycheck/sampling/masking.py",
      "is_rand = selected & (u >= mk.p_c) & (u < mk.p_c + mk.p_r)",
      "is_rand = selected & (u >= mk.p_r) & (u < mk.p_c + mk.p_r)", "p_c and p_r swapped in the masking sampler"),
    M("block-5pct", "theorycheck/population/_alpha_beta.py",
      "L = p_mask * l_mask + w_same * l_same + w_other * l_other + w_out * l_out",
      "L = 1.05 * (p_mask * l_mask + w_same * l_same + w_other * l_other + w_out * l_out)",
      "5% error in the block (alpha, beta) closed form"),
    M("stage1-A", "theorycheck/population/_stage1_block.py", "A = B0 + 1.0 / (a * v)", "A = B0 + 1.0 / (a * (v + 1))",
      "wrong constant in the stage-1 block constant A"),
    M("stage1-B0-sign", "theorycheck/population/_stage1_block.py",
      "B0 = -(r * (a + r) + n * q * q) / (a * n * ((a + r) ** 2 + n * q * q))",
      "B0 = (r * (a + r) + n * q * q) / (a * n * ((a + r) ** 2 + n * q * q))", "wrong sign of the stage-1 B0"),
    M("stage1-gamma", "theorycheck/population/_stage1_block.py", "gamma = q * (n * B0 + 1.0 / a) / (a + r)",
      "gamma = q * (n * B0 + 1.0 / a) / (a + r + q)", "wrong denominator of the stage-1 gamma"),
    M("topic-rule", "theorycheck/models/layout.py", "return np.where(tokens == 0, -1, (tokens - 1) // v)",
      "return np.where(tokens == 0, -1, tokens // v)", "off-by-one in the layout's topic rule"),
    M("gram-x", "theorycheck/solvers/gram/_block.py", "x = (1.0 / (a * v)) * (1.0 - r / (T * (a + r)))",
      "x = (1.0 / (a * v)) * (1.0 - r / (T * (a + r + 1e-3)))", "Gram closed form x off by ~1e-4"),
    M("gram-y", "theorycheck/solvers/gram/_block.py", "y = -r / (a * v * T * (a + r))", "y = -r / (a * v * T * a)",
      "Gram closed form y with (a + r) -> a"),
    M("masked-density", "theorycheck/population/_moments.py", "m[1:] += mk.r / tm.n_words",
      "m[1:] += mk.r / (tm.n_words + 1)", "masked density m_S: uniform part over V1 instead of the words"),
    M("sigma-cc", "theorycheck/population/_moments.py", "Sigma[0, 0] += q * q  # c c^T",
      "Sigma[0, 0] += q  # c c^T", "Sigma: [MASK]-[MASK] entry q instead of q^2"),
    M("identity-class", "theorycheck/population/_alpha_beta.py", "+ (p_c + p_r / (T * v)) * l_xw",
      "+ (p_c + p_r / T) * l_xw", "identity closed form: wrong probability of the same-word query class"),
    M("context-eta", "theorycheck/population/_attention_dense.py",
      "return mk.a / (tau * v) + mk.r / (T * v), mk.r / (T * v), mk.q",
      "return mk.a / (tau * v) + mk.r / (T * v), mk.r / (tau * v), mk.q",
      "general evaluator: wrong out-of-document context density"),
    M("ce-omega", "theorycheck/population/_attention_dense.py",
      'per_set = np.einsum("nx,nx->n", omega, logsumexp(O, axis=2)) - np.einsum("nxy,nxy->n", OT, O)',
      'per_set = np.einsum("nx->n", logsumexp(O, axis=2)) - np.einsum("nxy,nxy->n", OT, O)',
      "cross-entropy attention loss: query-law weight dropped from the log-partition term"),
    M("decoder-db", "theorycheck/nn/rowwise.py", "db = dO.sum(axis=0)", "db = dO.mean(axis=0)",
      "decoder bias gradient averaged instead of summed"),
    M("ce-weight", "theorycheck/nn/rowwise.py", "    ex *= weight[:, None]\n",
      "    ex *= 1.0\n", "cross-entropy head gradient without the row weight"),
    M("attn-scale", "theorycheck/nn/layers.py",
      "dP = doc_attention_backward(P, A, idx, dout, W_Q.shape[1], cache[\"c\"])",
      "dP = doc_attention_backward(P, A, idx, dout, W_Q.shape[1], 1.0)",
      "attention backward (fused position path) without the score scale c"),
    M("select-rate", "theorycheck/sampling/masking.py", "selected = (rng.random(tokens.shape) < mk.p_m) & valid",
      "selected = (rng.random(tokens.shape) < 1.05 * mk.p_m) & valid", "sampler selects 5% too often"),
    M("mc-target", "theorycheck/sampling/montecarlo.py", "loss = 1.0 - 2.0 * o[targets[d, i]]",
      "loss = 1.0 - 2.0 * o[inputs[d, i]]", "Monte Carlo loss against the shown token instead of the target"),
    M("value-grad-bias", "theorycheck/population/_value_loss.py",
      "dW = 2.0 * G - 2.0 * Cm + 2.0 * np.outer(bb, mu) + 2.0 * reg * W", "dW = 2.0 * G - 2.0 * Cm + 2.0 * reg * W",
      "value_loss_grad: bias term dropped from dW"),
    # ---- issue 25 item 6: the general model, the sampler, the rational route, the interval engine, the cache,
    # the falsifiers ("kind" tells numerical code, which verify should catch, from test-only machinery)
    M("gen-dirichlet-M2", "theorycheck/models/general.py",
      "return a / a0, (np.outer(a, a) + np.diag(a)) / (a0 * (a0 + 1.0))",
      "return a / a0, (np.outer(a, a) + np.diag(a)) / (a0 * a0)", "Dirichlet E[theta theta^T] without the + 1"),
    M("gen-tau-offdiag", "theorycheck/models/general.py",
      "off = (tau - 1) / (tau * T * (T - 1)) if T > 1 else 0.0", "off = (tau - 1) / (tau * T * T) if T > 1 else 0.0",
      "uniform-tau E[theta_i theta_j] with T^2 instead of T (T - 1)"),
    M("gen-zipf-rank", "theorycheck/models/general.py", "w = np.arange(1, v + 1, dtype=np.float64) ** (-s)",
      "w = np.arange(2, v + 2, dtype=np.float64) ** (-s)", "Zipf frequencies (k + 2)^-s instead of (k + 1)^-s"),
    M("gen-moments-C", "theorycheck/population/_moments.py",
      "return (Phi_t.T @ M2) @ Phi_t, (Phi.T @ M2) @ Phi_t", "return (Phi_t.T @ M2) @ Phi_t, (Phi_t.T @ M2) @ Phi_t",
      "general moments: C from the masked context on both sides"),
    M("gen-cotopic-norm", "theorycheck/solvers/attention/_family.py", "    d = np.sqrt(np.diag(P))\n",
      "    d = np.diag(P)\n", "co-topic similarity normalised by the diagonal instead of its square root"),
    M("sampler-word-offset", "theorycheck/sampling/documents.py",
      "return 1 + np.clip(idx - topic * n, 0, _last_positive(phi)[topic])",
      "return np.clip(idx - topic * n, 0, _last_positive(phi)[topic])", "general sampler: words shifted to 0-based"),
    M("sampler-last-word", "theorycheck/sampling/documents.py",
      "words = 1 + topic * tm.v + rng.integers(0, tm.v, size=shape)",
      "words = 1 + topic * tm.v + rng.integers(0, tm.v - 1, size=shape)",
      "paper sampler never draws a topic's last word"),
    M("sampler-dirichlet-alpha", "theorycheck/sampling/documents.py",
      "theta = rng.dirichlet(np.full(tm.T, tm.alpha), size=n_docs)",
      "theta = rng.dirichlet(np.full(tm.T, 1.0), size=n_docs)", "paper sampler ignores the Dirichlet alpha"),
    M("sampler-rand-words", "theorycheck/sampling/masking.py",
      "rand_words = rng.integers(1, tm.n_words + 1, size=tokens.shape)",
      "rand_words = rng.integers(1, tm.n_words, size=tokens.shape)", "random replacement never shows the last word"),
    M("rat-rho", "theorycheck/solvers/_rational.py", 'rho = e["a"] / (tau * v) + e["r"] / (T * v)',
      'rho = e["a"] / (tau * v)', "exact moments: in-document density without the random-word part"),
    M("rat-r", "theorycheck/solvers/_rational.py", "r=p_m * p_r, q=p_m * (1 - p_c - p_r))",
      "r=p_m * p_c, q=p_m * (1 - p_c - p_r))", "exact masking constants: r = p_m p_c"),
    M("rat-pinv", "theorycheck/solvers/_rational.py",
      "inner = _mm(_inverse(_mm(G, Gt)), _mm(_inverse(_mm(Ft, F)), Ft))", "inner = _mm(_inverse(_mm(G, Gt)), Ft)",
      "exact pseudo-inverse without the (F^T F)^-1 factor"),
    M("rat-psd", "theorycheck/solvers/_rational.py", "        if p < 0:\n            return False\n",
      "        if p < -1:\n            return False\n", "exact PSD test accepts negative pivots above -1"),
    M("rat-bias-const", "theorycheck/solvers/gram/_rational.py",
      "return RationalMatrix(Sc), RationalMatrix(Cc), 1 - Fraction(1, n)",
      "return RationalMatrix(Sc), RationalMatrix(Cc), 1 - Fraction(1, n * n)",
      "exact loss with a bias: wrong constant 1 - ||u||^2"),
    M("rat-D4-x", "theorycheck/solvers/gram/_rational.py", "(Fraction(T - 1) / (a * v * T), -1 / (a * v * T))",
      "(Fraction(T) / (a * v * T), -1 / (a * v * T))", "SPEC D4 constant x = T/(a v T)"),
    M("interval-dual-div", "theorycheck/solvers/attention/_interval_loss.py",
      "return _Dual(q, [(x - q * y) / o.val for x, y in zip(self.der, o.der)])",
      "return _Dual(q, [(x + q * y) / o.val for x, y in zip(self.der, o.der)])",
      "interval AD: wrong sign in the quotient rule"),
    M("interval-face", "theorycheck/solvers/attention/_interval.py",
      "out.append((lo, lo) if g.a > 0 else (hi, hi) if g.b < 0 else (lo, hi))",
      "out.append((hi, hi) if g.a > 0 else (lo, lo) if g.b < 0 else (lo, hi))",
      "branch and bound keeps the wrong face along a monotone direction"),
    M("interval-mv", "theorycheck/solvers/attention/_interval.py",
      "lower = max(_down((F.val + offset).a), _down(mv.a))", "lower = max(_down((F.val + offset).a), _down(mv.b))",
      "mean-value lower bound from the upper end"),
    M("interval-exp-lo", "theorycheck/solvers/attention/_interval_vec.py",
      "lo = np.maximum(_dn(np.exp(self.lo) * (1.0 - _EXP_REL)), 0.0)",
      "lo = np.maximum(_dn(np.exp(self.lo) * (1.0 + 1e-6)), 0.0)", "numpy interval exp: lower end 1e-6 too high"),
    M("cache-from-import", "theorycheck/report/cache.py",
      'targets = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]', "targets = [base]",
      "cache key misses modules imported as 'from pkg import module'"),
    M("cache-params", "theorycheck/report/cache.py", '        "params": params,\n', '        "params": {},\n',
      "cache key ignores the parameters"),
    M("falsify-noop", "proofs_numeric/attention_identity_optimum.py",
      '    return {"beta_value": 3e-9} if params["T"] >= 100 else {"beta_value": 1e-9 / 3}', "    return {}",
      "a falsifier that injects nothing"),
    M("falsify-far", "proofs_numeric/general_dirichlet.py", "FALSIFIER_SHIFT = 3e-14\n", "FALSIFIER_SHIFT = 3e-10\n",
      "a falsifier far outside its claim's tolerance"),
    M("tolerance-loosened", "proofs_numeric/general_landscape_grid.py", "GRID_TOL = 1e-10\n", "GRID_TOL = 1e-8\n",
      "a claim tolerance loosened 100x"),
    # ---- issue 36: the code added in the last two rounds (benchmark statistics, oracle and records, the label
    # certificate's compiled kernel and interval sums, its branch and bound, the co-topic certificate, the structured
    # evaluator, the fused training kernel, the identity phase, the EMPIRICAL rules, the output-folder rules)
    M("stats-ert-runs", "theorycheck/problems/_stats.py",
      "ERT(total / n_s if n_s else math.inf, int(cost.size), n_s, total)",
      "ERT(total / cost.size if n_s else math.inf, int(cost.size), n_s, total)",
      "ERT divided by the number of runs instead of the successes"),
    M("stats-profile-strict", "theorycheck/problems/_stats.py",
      "hit = np.isfinite(vals)[:, :, None] & (vals[:, :, None] <= x)",
      "hit = np.isfinite(vals)[:, :, None] & (vals[:, :, None] < x)",
      "profiles count r < tau instead of r <= tau (the fastest solver never at 1)"),
    M("stats-data-n", "theorycheck/problems/_stats.py", '_reduction_hit(r, tau, viol_tol) / (int(r["n"]) + 1)',
      '_reduction_hit(r, tau, viol_tol) / int(r["n"])', "data profile in units of n instead of n + 1"),
    M("stats-credit-answer", "theorycheck/problems/_stats.py", "return np.where(m_ans <= tols, hit, np.inf)",
      "return hit", "credit rule: a hit credited although the answer misses the target"),
    M("stats-exponent-df", "theorycheck/problems/_stats.py", "half = float(stdtrit(k - 2, (1 + c) / 2)) * se",
      "half = float(stdtrit(k - 1, (1 + c) / 2)) * se", "scaling exponent interval with k - 1 degrees of freedom"),
    M("stats-first-hit-tie", "theorycheck/problems/_stats.py", 'k = np.searchsorted(-pm, -tols, side="left")',
      'k = np.searchsorted(-pm, -tols, side="right")', "first hit misses a point exactly at the target"),
    M("oracle-budget-edge", "theorycheck/problems/_oracle.py", "if k >= self.max_evals:", "if k > self.max_evals:",
      "the oracle allows one evaluation past max_evals"),
    M("oracle-thin-first", "theorycheck/problems/_oracle.py",
      "self.points = [p for p in self.points if p[0] % self.stride == 0 or p[0] == 1]",
      "self.points = [p for p in self.points if p[0] % self.stride == 0]",
      "thinning drops the first evaluated point (the start's value)"),
    M("harness-key-budget", "theorycheck/problems/_harness.py",
      "text = json.dumps([cell.problem, cell.size, cell.solver, cell.repeat, budget, max_evals, solver_fp, "
      "problem_fp],",
      "text = json.dumps([cell.problem, cell.size, cell.solver, cell.repeat, max_evals, solver_fp, problem_fp],",
      "cell key ignores the time budget: a resumed benchmark reuses a record of another budget"),
    M("harness-answer-evals", "theorycheck/problems/_harness.py",
      'rec["answer_t"], rec["answer_evals"] = out["wall"], out["evals"]',
      'rec["answer_t"], rec["answer_evals"] = out["wall"], out["nfev"]',
      "answer credited at the f-call count instead of all evaluations"),
    M("harness-subopt-scale", "theorycheck/problems/_harness.py", "return (f - f_star) / max(abs(f_star), 1e-300)",
      "return (f - f_star) / max(abs(f), 1e-300)", "relative suboptimality relative to f instead of f*"),
    M("kernel-acc-round", "theorycheck/solvers/attention/_interval_scores_kernel.py",
      "s[2 * k] = _dn(s[2 * k] + lo)", "s[2 * k] = s[2 * k] + lo",
      "label kernel: per-pair sums of the lower end not rounded down"),
    M("kernel-eps", "theorycheck/solvers/attention/_interval_scores_kernel.py", "_EPS = 2.0**-52", "_EPS = 2.0**-54",
      "label kernel: outward rounding a quarter of an ulp"),
    M("kernel-blocks", "theorycheck/solvers/attention/_interval_scores_kernel.py",
      "out[n, k] = _dn(v) if k % 2 == 0 else _up(v)", "out[n, k] = v",
      "label kernel: block partial sums combined without outward rounding"),
    M("label-isum-cancel", "theorycheck/solvers/attention/_interval_label.py",
      "ehi = _up(f * np.sum(np.abs(a.hi), axis=axes) + (n + 4) * _TINY)",
      "ehi = _up(f * np.abs(np.sum(a.hi, axis=axes)) + (n + 4) * _TINY)",
      "interval sum: error bound from |sum| instead of sum |x| (too small under cancellation)"),
    M("bb-budget", "theorycheck/solvers/attention/_interval_vec.py", "budget = max(0, (max_boxes - n_boxes) // 2)",
      "budget = max(0, max_boxes - n_boxes)", "branch and bound overshoots max_boxes (each split adds two boxes)"),
    M("cotopic-discard", "theorycheck/solvers/attention/_interval_cotopic.py",
      "((a_hi < self.alpha_range[0]) | (a_lo > self.alpha_range[1]))",
      "((a_lo < self.alpha_range[0]) | (a_hi > self.alpha_range[1]))",
      "co-topic certificate discards boxes that only partly leave the search box"),
    M("structured-rw-bias", "theorycheck/population/_attention_structured.py",
      "acc += om - 2.0 * prn * (F * iz + pbi)",
      "acc += om - 2.0 * prn * F * iz", "structured squared loss: random-word queries lose the bias term"),
    M("fused-sq-cross", "theorycheck/nn/_factored_squared.py",
      "loss += w * (q_uu + 2.0 * q_ub + bb + 1.0) - 2.0 * n * (q_yu + Yb[g, a])",
      "loss += w * (q_uu + q_ub + bb + 1.0) - 2.0 * n * (q_yu + Yb[g, a])",
      "fused squared loss: output-bias cross term without its factor 2"),
    M("fused-ce-centring", "theorycheck/nn/_factored_kernels.py",
      "dSa[b] += c * Erow[b] * (rval[k] * (HV[j, b] - h[j]))", "dSa[b] += c * Erow[b] * (rval[k] * HV[j, b])",
      "fused kernel: softmax centring dropped from the score gradient"),
    M("identity-edge", "theorycheck/analysis/identity_phase.py",
      "if beta_nonpositive(T, v, tau, mk)), T_max + 1)", "if beta_nonpositive(T, v, tau, mk)), T_max)",
      "T0 search: 'no sign change up to T_max' reported as T_max"),
    M("empirical-k-df", "proofs_numeric/_empirical.py",
      "return float(stats.t.ppf(level, n - 1) * math.sqrt(1.0 + 1.0 / n))",
      "return float(stats.t.ppf(level, n) * math.sqrt(1.0 + 1.0 / n))",
      "prediction k with n degrees of freedom instead of n - 1"),
    M("empirical-binom-k", "proofs_numeric/_empirical.py", "return float(stats.binom.cdf(k - 1, n, 1.0 - fail_rate))",
      "return float(stats.binom.cdf(k, n, 1.0 - fail_rate))", "k-of-n refutation probability off by one"),
    M("io-symlink", "theorycheck/_io.py",
      "clash = [f for f in new if f not in owned and ((out / f).exists() or (out / f).is_symlink())]",
      "clash = [f for f in new if f not in owned and (out / f).exists()]",
      "merge into an output folder replaces a user's dangling symlink"),
)  # fmt: skip


#: Mutants of test-only machinery (the cache, the falsifiers, tolerances): ``verify`` cannot catch them by
#: construction (it runs the claims, not their falsifiers or the cache key); the tests must.
NON_NUMERICAL = frozenset(
    {"cache-from-import", "cache-params", "falsify-noop", "falsify-far", "tolerance-loosened", "io-symlink"}
)


#: Issue 25 item 6: the test files of each mutated area (``--tests``: ``pytest -x`` on them, in a copy of the
#: whole checkout); a mutant's area is its name's first word. Falsifier and tolerance mutants run the one
#: claim's cases of ``tests/test_claims.py`` (``-k``), the whole file being a second full ``verify``.
AREA_TESTS = {
    "gen": ("test_general_model", "test_general_population", "test_moments", "test_general_solvers",
            "test_general_attention", "test_general_landscape", "test_phase"),
    "sampler": ("test_sampling", "test_general_sampling", "test_general_montecarlo", "test_attention_montecarlo",
                "test_stage1_montecarlo"),
    "rat": ("test_certificates", "test_rational_bias_loss", "test_solver_routes", "test_embedding_solvers",
            "test_stage1_solve_value", "test_domains_math", "test_rational_psd"),
    "interval": ("test_interval_vec", "test_interval_attach", "test_certificates", "test_interval_global",
                 "test_attention_solver", "test_interval_dual"),
    "cache": ("test_cache_reach", "test_verify_cache"),
    # issue 36
    "stats": ("test_problems_stats", "test_benchmark_archive"),
    "oracle": ("test_benchmark_sealed", "test_problems_harness"),
    "harness": ("test_benchmark_sealed", "test_problems_harness"),
    "kernel": ("test_interval_primitives", "test_interval_scores", "test_interval_split", "test_interval_label",
               "test_claims_strengthened"),
    "label": ("test_interval_primitives", "test_interval_label", "test_interval_scores", "test_interval_split"),
    "bb": ("test_interval_primitives", "test_interval_split", "test_interval_label", "test_interval_checkpoint",
           "test_interval_global"),
    "cotopic": ("test_interval_cotopic", "test_claims_strengthened"),
    "structured": ("test_structured_attention", "test_general_api"),
    "fused": ("test_nn_factored",),
    "empirical": ("test_empirical_seeds",),
    "io": ("test_output_safety", "test_user_files", "test_io", "test_edge_cases"),
}  # fmt: skip
#: Issue 36: ``verify --only`` of each new area (``--area-claims``): the claims that read the area's code, a lower
#: bound on what the full default tier catches (each takes a few seconds instead of the tier's minutes).
AREA_CLAIMS = {
    "stats": "problems,stats",
    "oracle": "problems",
    "harness": "problems",
    "kernel": "certificate,general.zipf-attention",
    "label": "certificate,general.zipf-attention",
    "bb": "certificate,general.zipf-attention",
    "cotopic": "certificate,general",
    "structured": "attention.structured-evaluator,certificate.label-kernel,general",
    "fused": "gradient,dynamics",
    "identity": "attention.identity-optimum",
    "empirical": "stats,train.stage2-same-topic-attention",
    "io": "cli",
}
#: ``-k`` selection of ``tests/test_claims.py`` for the falsifier and tolerance mutants (the mutated claim).
CLAIM_TESTS = {
    "falsify-noop": "attention.identity-optimum",
    "falsify-far": "general.dirichlet-model",
    "tolerance-loosened": "general.landscape-grid or loosened",
    "identity-edge": "attention.identity-optimum",
}
#: Issue 36: the test files of a mutant whose area has none in AREA_TESTS (``--tests`` runs these instead).
EXTRA_TESTS = {"identity-edge": ("test_edge_cases",)}


#: Tests left out of ``--tests`` runs, each with its reason (a test that fails for another cause than the mutant would
#: count it as caught).
DESELECT = {
    "tests/test_benchmark_sealed.py::test_interrupting_the_benchmark_kills_every_run_process": (
        "timing-dependent (it interrupts a live benchmark): failed in the issue-36 run under load 5-9 for four harness "
        "mutants it does not exercise, and passes in a copy of the checkout with such a mutant applied"
    ),
}


def tests_of(m: Mutant) -> tuple[list[str], str | None]:
    """``(test files, -k expression or None)`` of a mutant (:data:`AREA_TESTS`, :data:`CLAIM_TESTS`)."""
    if m.name in EXTRA_TESTS:  # a test file written for it (the claim's cases of test_claims.py are verify's)
        return [f"tests/{f}.py" for f in EXTRA_TESTS[m.name]], None
    if m.name in CLAIM_TESTS:
        return ["tests/test_claims.py"], CLAIM_TESTS[m.name]
    area = m.name.split("-")[0]
    if area not in AREA_TESTS:
        raise KeyError(f"mutant {m.name!r}: no test files listed for its area {area!r} (AREA_TESTS)")
    return [f"tests/{f}.py" for f in AREA_TESTS[area]], None


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("theorycheck", "proofs_numeric"):
        shutil.copytree(ROOT / pkg, dst / pkg, ignore=ignore)


def _apply(root: Path, m: Mutant) -> str:
    """Patch the copy; returns the original text. Refuses if ``old`` is not found exactly once."""
    path = root / m.path
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise RuntimeError(f"mutant {m.name!r}: target text occurs {n} times in {m.path} (expected once)")
    path.write_text(text.replace(m.old, m.new))
    return text


def _failed_claims(out: Path) -> list[str]:
    try:
        data = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        return []
    return sorted({c["id"] for c in data.get("claims", []) if not c.get("passed", True)})


def run_mutant(root: Path, m: Mutant, claims: str, timeout: float) -> dict:
    """Apply ``m`` to the copy at ``root``, run verify there, restore the file; a result dict."""
    original = _apply(root, m)
    out = root / f"report-{m.name}"
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(root / ".numba-cache"))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "theorycheck.cli", "verify", "--out", str(out), "--jobs", "1", "--no-cache",
           "--no-figures", "--quiet", "--only", claims]  # fmt: skip
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        rc, tail = proc.returncode, (proc.stderr or proc.stdout)[-400:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"timeout after {timeout:g} s"
    finally:
        (root / m.path).write_text(original)
    status = "error" if rc is None else {0: "survived", 1: "caught"}.get(rc, "error")
    failed = _failed_claims(out)
    shutil.rmtree(out, ignore_errors=True)
    return dict(name=m.name, what=m.what, status=status, returncode=rc, failed_claims=failed,
                seconds=round(time.perf_counter() - t0, 1), tail="" if status == "caught" else tail)  # fmt: skip


def _copy_checkout(dst: Path) -> None:
    """The whole checkout minus VCS, caches and results (the tests read docs/, pyproject.toml, ...)."""
    ignore = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".hypothesis", ".pytest_cache", "results",
                                    "_build", ".venv", "theorycheck-report", "runs")  # fmt: skip
    shutil.copytree(ROOT, dst, ignore=ignore, dirs_exist_ok=True)


def run_mutant_tests(root: Path, m: Mutant, timeout: float) -> dict:
    """Apply ``m`` to the checkout copy at ``root``, run ``pytest -x`` on its area's tests, restore the file."""
    files, kexpr = tests_of(m)
    original = _apply(root, m)
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(root / ".numba-cache"))
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *files]
    cmd += [a for t in DESELECT for a in ("--deselect", t)]
    cmd += ["-k", kexpr] if kexpr else []
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        rc, out = None, f"timeout after {timeout:g} s"
    finally:
        (root / m.path).write_text(original)
    status = "error" if rc is None else {0: "survived", 1: "caught"}.get(rc, "error")  # pytest: 1 = a test failed
    failed = [ln.split(" ", 1)[1].split(" - ")[0] for ln in out.splitlines() if ln.startswith("FAILED ")]
    return dict(name=m.name, what=m.what, status=status, returncode=rc, failed_tests=failed, files=files, k=kexpr,
                seconds=round(time.perf_counter() - t0, 1), tail="" if status == "caught" else out[-400:])  # fmt: skip


def run_tests(mutants, timeout: float = 3600.0, echo=print) -> dict:
    """``pytest -x`` on each mutant's area tests (:func:`tests_of`) in one temporary copy of the checkout."""
    with tempfile.TemporaryDirectory(prefix="theorycheck-mutation-tests-") as tmp:
        root = Path(tmp)
        _copy_checkout(root)
        for m in mutants:
            tests_of(m)
            _apply(root, m)
            (root / m.path).write_text((ROOT / m.path).read_text())
        results = []
        for m in mutants:
            r = run_mutant_tests(root, m, timeout)
            results.append(r)
            echo(f"{r['name']:18s} {r['status']:9s} {r['seconds']:7.1f} s  {', '.join(r['failed_tests'])[:90]}")
    caught = sum(r["status"] == "caught" for r in results)
    return dict(results=results, caught=caught, total=len(results), mode="tests")


def area_claims(m: Mutant) -> str:
    """The ``verify --only`` value of a mutant's area (:data:`AREA_CLAIMS`; ``KeyError`` if the area has none)."""
    area = m.name.split("-")[0]
    if area not in AREA_CLAIMS:
        raise KeyError(f"mutant {m.name!r}: no claims listed for its area {area!r} (AREA_CLAIMS)")
    return AREA_CLAIMS[area]


def run(mutants, claims: str | None = DEFAULT_CLAIMS, timeout: float = 1800.0, echo=print) -> dict:
    """Run ``mutants`` in turn on one temporary copy; returns ``{"results": [...], "caught": k, "total": n}``.
    ``claims=None``: each mutant against its area's claims (:func:`area_claims`)."""
    with tempfile.TemporaryDirectory(prefix="theorycheck-mutation-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        for m in mutants:  # check every target before spending minutes on the first run
            _apply(root, m)
            (root / m.path).write_text((ROOT / m.path).read_text())
        results = []
        for m in mutants:
            mine = area_claims(m) if claims is None else claims
            r = run_mutant(root, m, mine, timeout)
            r["claims"] = mine
            results.append(r)
            echo(f"{r['name']:18s} {r['status']:9s} {r['seconds']:7.1f} s  {', '.join(r['failed_claims'])[:90]}")
    caught = sum(r["status"] == "caught" for r in results)
    return dict(results=results, caught=caught, total=len(results), claims=claims or "per area (AREA_CLAIMS)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", help="comma-separated mutant names (default: all)")
    ap.add_argument("--claims", default=DEFAULT_CLAIMS, help="verify --only value (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per verify run")
    ap.add_argument("--json", help="write the results to this JSON file")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument(
        "--tests",
        action="store_true",
        help="run each mutant's area tests (pytest -x, AREA_TESTS / CLAIM_TESTS) instead of verify",
    )
    ap.add_argument(
        "--area-claims",
        action="store_true",
        help="verify each mutant against its area's claims (AREA_CLAIMS) instead of --claims",
    )
    args = ap.parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:18s} {m.path:48s} {m.what}")
        return 0
    chosen: tuple[Mutant, ...] = MUTANTS
    if args.mutants:
        names = args.mutants.split(",")
        unknown = sorted(set(names) - {m.name for m in MUTANTS})
        if unknown:
            ap.error(f"unknown mutants {unknown}; --list shows them")
        chosen = tuple(m for m in MUTANTS if m.name in names)
    if args.tests:
        res = run_tests(chosen, args.timeout)
        what = "the tests"
    else:
        res = run(chosen, None if args.area_claims else args.claims, args.timeout)
        what = "verify (claims: per area)" if args.area_claims else f"verify (claims: {args.claims})"
    survivors = [r["name"] for r in res["results"] if r["status"] == "survived"]
    errors = [r["name"] for r in res["results"] if r["status"] == "error"]
    print(f"\n{what} caught {res['caught']}/{res['total']} mutants")
    print(f"survivors: {', '.join(survivors) or 'none'}; errors (crash/timeout): {', '.join(errors) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
