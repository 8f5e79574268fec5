"""A/B timing of the paper model's closed forms in two source trees, interleaved (issue #22).

The one-model redesign must keep the symmetric closed forms exactly as fast as before. This script
times the same public calls in two checkouts (``--a`` and ``--b``, e.g. a worktree of the commit
before the redesign and this one): each round starts one worker process per tree (imports and JIT
caches warmed, not timed) in alternating order A B, B A, ...; each worker reports the best-of-3
time of every case (:func:`_common.best_time`). The result per case is the best time of each tree
over all rounds and the ratio B / A; the machine's drift hits both trees alike.

Usage::

    git worktree add /tmp/before <commit>
    python benchmarks/bench_ab.py --a /tmp/before --b . [--rounds 5]

Writes ``results/bench_ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name -> (setup, statement); public API only (it must run in both trees)
CASES = {
    "TopicModel + Masking construction": ("", "tc.TopicModel(T=10, v=10, tau=3); tc.Masking()"),
    "masked_density T=v=10": ("", "P.masked_density(tm, mk, [0, 1, 2])"),
    "moments T=v=10 (closed form)": ("", "P.moments(tm, mk)"),
    "value_loss T=v=10 (block sums)": (
        "W = np.random.default_rng(0).normal(size=(101, 101))",
        "P.value_loss(W, tm, mk)",
    ),
    "value_loss_grad T=v=10": ("W = np.random.default_rng(0).normal(size=(101, 101))", "P.value_loss_grad(W, tm, mk)"),
    "alpha_beta_loss block, 1000 points": (
        "a = np.linspace(-5, 5, 1000); b = np.linspace(-3, 3, 1000)",
        "P.alpha_beta_loss(a, b, tm, mk)",
    ),
    "alpha_beta_loss identity, 1000 points": (
        "a = np.linspace(-5, 5, 1000); b = np.linspace(-3, 3, 1000)",
        "P.alpha_beta_loss(a, b, tm, mk, value='identity')",
    ),
    "attention_loss T=v=10 (structured)": (
        "S = np.random.default_rng(1).normal(size=(101, 101)); W = np.eye(101)",
        "P.attention_loss(S, W, tm, mk)",
    ),
    "optimal_value_matrix closed form T=v=10": ("", "S_.optimal_value_matrix(tm, mk)"),
    "optimal_value_matrix closed form T=1000, v=100": (
        "big = tc.TopicModel(T=1000, v=100, tau=30)",
        "S_.optimal_value_matrix(big, mk)",
    ),
    "optimal_embedding_gram closed form T=v=10": ("", "S_.optimal_embedding_gram(tm, mk)"),
    "optimal_attention block T=v=10": ("", "S_.optimal_attention(tm, mk)"),
}

_WORKER = """
import json, sys
import numpy as np
sys.path.insert(0, {bench!r})
import theorycheck as tc
from theorycheck import population as P, solvers as S_
from _common import best_time
tm = tc.TopicModel(T=10, v=10, tau=3); mk = tc.Masking()
out = {{}}
for name, (setup, stmt) in {cases!r}.items():
    ns = dict(np=np, tc=tc, P=P, S_=S_, tm=tm, mk=mk)
    exec(setup, ns)
    code = compile(stmt, name, "exec")
    out[name] = best_time(lambda: exec(code, ns), repeat=3, min_time=0.05)
print(json.dumps({{"file": tc.__file__, "times": out}}))
"""


def _run(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = _WORKER.format(bench=str(HERE), cases=CASES)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tree.anchor
    )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if not res["file"].startswith(str(tree.resolve())):
        raise RuntimeError(f"worker imported {res['file']}, not from {tree}")
    return res["times"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, type=Path, help="source tree A (before)")
    ap.add_argument("--b", required=True, type=Path, help="source tree B (after)")
    ap.add_argument("--rounds", type=int, default=5, help="worker pairs, order alternating (default 5)")
    args = ap.parse_args(argv)
    best = {"a": {}, "b": {}}
    for r in range(args.rounds):
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            for name, t in _run(getattr(args, side).resolve()).items():
                best[side][name] = min(best[side].get(name, float("inf")), t)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    sys.path.insert(0, str(HERE))
    from _common import print_table, write_json

    rows = [(n, best["a"][n] * 1e6, best["b"][n] * 1e6, best["b"][n] / best["a"][n]) for n in CASES]
    print_table(["case", "A us", "B us", "B/A"], rows)
    write_json(
        "bench_ab",
        {
            "a": str(args.a),
            "b": str(args.b),
            "rounds": args.rounds,
            "cases": [{"case": n, "a_s": a / 1e6, "b_s": b / 1e6, "ratio": q} for n, a, b, q in rows],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
