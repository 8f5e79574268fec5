"""Interval certificate of the (alpha, beta) attention optimum (SPEC §4.3): numpy engine vs mpmath.iv.

For the paper's configuration (T = v = 10, tau = 3, p = .15/.1/.1) and three others, the block
(variable log K) and identity (variables alpha, beta) value matrices, over the default search boxes
of ``optimal_attention``, side by side in one run:

- ``mpmath`` (before): the scalar ``mpmath.iv`` best-first branch and bound (natural + mean-value
  forms) with ``--mp-boxes`` boxes (default 20000 block, 3000 identity);
- ``numpy`` (after): the vectorised outward-rounded engine with a second-order bound at the float
  minimiser (``theorycheck.solvers.attention._interval_vec``), target gap ``--tol`` (default 1e-9).

Reported per row: lower, upper, gap, boxes, seconds, and whether the solver's float optimum lies in
``[lower, lower + 2e-9]``. Writes ``results/interval.json``.

Run: ``python benchmarks/bench_interval.py [--quick] [--tol 1e-9] [--skip-mpmath]``.

``--attach`` (issue #25 item 2): the certificate attached by ``optimal_attention(certify="interval")``,
CPU seconds (``time.process_time``, best of 3) side by side in one run: the box certificate with its
enlargement alone (the attached certificate before the whole-domain one), the whole-domain
certificate alone, and the Arb re-check (python-flint, when installed), with the ratio
``(box + whole domain) / box``. Writes ``results/interval_attach.json``.
"""

from __future__ import annotations

import argparse
import time

from _common import print_table, write_json

import theorycheck as tc
from theorycheck.solvers import optimal_attention
from theorycheck.solvers.attention import _alpha_beta, _arb, global_certificate, interval_certificate

CONFIGS = [
    ("paper", (10, 10, 3), (0.15, 0.1, 0.1)),
    ("tau=2", (10, 10, 2), (0.15, 0.1, 0.1)),
    ("small p_c!=p_r", (4, 3, 2), (0.3, 0.2, 0.05)),
    ("T=20 v=5 tau=4", (20, 5, 4), (0.2, 0.1, 0.3)),
]


def _row(name, value, engine, tm, mk, tol, max_boxes):
    t0 = time.perf_counter()
    cert = interval_certificate(tm, mk, value, tol=tol, max_boxes=max_boxes, engine=engine)
    sec = time.perf_counter() - t0
    sol = optimal_attention(tm, mk, value=value, options={"check_general": False})
    ok = cert.lower <= sol.fun <= cert.lower + 2e-9
    return dict(
        config=name,
        value=value,
        engine=engine,
        lower=cert.lower,
        upper=cert.upper,
        gap=cert.gap,
        boxes=cert.n_boxes,
        seconds=sec,
        solver_fun=sol.fun,
        solver_certified=ok,
    )


def _cpu(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


ATTACH_CONFIGS = [
    ((10, 10, 3), "block"), ((10, 10, 2), "block"), ((100000, 10, 300), "block"), ((10, 10, 3), "identity"),
    ((100, 10, 3), "identity"),
]  # fmt: skip


def attach_rows():
    """CPU seconds of the attached certificate's parts (module docstring), the paper's masking."""
    rows = []
    for (T, v, tau), value in ATTACH_CONFIGS:
        tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(0.15, 0.1, 0.1)
        box_only = lambda tm=tm, mk=mk, value=value: _alpha_beta._certified_box(tm, mk, value, None, {})  # noqa: E731
        t_box, (cert, _, _) = _cpu(box_only)
        x0 = cert.x_best
        t_glob, g = _cpu(lambda tm=tm, mk=mk, value=value, x0=x0: global_certificate(tm, mk, value, x0=x0))
        row = dict(config=f"T={T} v={v} tau={tau}", value=value, box_s=t_box, whole_domain_s=t_glob,
                   ratio=(t_box + t_glob) / t_box, global_lower=g.lower, global_gap=g.gap)  # fmt: skip
        if _arb.HAVE_FLINT:
            t_arb, (lo, up, _, _) = _cpu(lambda: _arb.arb_recheck(T, v, tau, 0.15, 0.1, 0.1, value, tol=1e-9), 1)
            row.update(arb_s=t_arb, arb_discrepancy=max(abs(lo - g.lower), abs(up - g.upper)))
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the paper's configuration only, mpmath with 300/2000 boxes")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--skip-mpmath", action="store_true")
    ap.add_argument("--attach", action="store_true", help="CPU time of the attached certificate's parts only")
    args = ap.parse_args()
    if args.attach:
        path = write_json("interval_attach", {"rows": attach_rows()})
        print(f"\nwrote {path}")
        return
    configs = CONFIGS[:1] if args.quick else CONFIGS
    mp_boxes = {"block": 2000, "identity": 300} if args.quick else {"block": 20000, "identity": 3000}
    rows = []
    for name, (T, v, tau), p in configs:
        tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*p)
        for value in ("block", "identity"):
            engines = ["numpy"] if args.skip_mpmath else ["mpmath", "numpy"]
            for engine in engines:
                budget = mp_boxes[value] if engine == "mpmath" else 200_000
                rows.append(_row(name, value, engine, tm, mk, args.tol, budget))
                r = rows[-1]
                print(f"{name:>16} {value:>8} {engine:>6}: gap {r['gap']:.2e} in {r['seconds']:.2f} s", flush=True)
    keys = ["config", "value", "engine", "lower", "upper", "gap", "boxes", "seconds", "solver_certified"]
    print()
    print_table(keys, [[r[k] for k in keys] for r in rows])
    path = write_json("interval", {"tol": args.tol, "configs": [c[0] for c in configs], "rows": rows})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
