"""Attention at a real corpus's size, end to end, in one run: the default family's optimum and the label family's
whole-domain certificate at 20 topics x 13,586 words, as times and as ratios to a reference workload.

Not a ``bench_*`` run for ``theorycheck bench`` by default (the certificate needs several GB and minutes of both
cores); run it by hand on an otherwise idle machine. In one process, one after another (CPU seconds from
``time.process_time``: all threads summed; wall seconds; the load average before and after each step):

1. the machine probes and the **reference workload** of :func:`bench_cotopic_corpus.probes` (32 single-threaded
   dgemms of the pair-sum product's shape): every time below is also divided by the reference's CPU seconds, a
   number comparable between machines;
2. the **default family's optimum** ``optimal_attention(g, mk)`` (the co-topic family by pair sums, SPEC §11.8(a))
   on the seeded Dirichlet(0.1) model ``dirichlet_model(20, 13586, 3, floor=1e-12)`` under uniform-tau, tau = 3;
3. the **label family's whole-domain certificate** ``optimal_attention(g, mk, options={"family": "label",
   "certify": "interval"})`` on the same model (SPEC §7, §11.8), from an empty checkpoint file, serially;
4. with ``--workers N`` the same certificate with its regions as tasks on a Dask ``LocalCluster`` of ``N``
   single-threaded workers (``--scheduler ADDRESS``: an existing scheduler instead), and whether its certified
   result equals the serial run's bit for bit (status, lower and upper bounds, point, boxes).

The goals of the issue this answers are recorded beside the measurements (``goals``): the optimum within 60 s and
the certificate within 15 minutes of wall time on an idle 2-core machine; ``met`` compares the wall times, which
only mean something when ``load_before`` was low.

Writes ``results/corpus_scale.json``. Run: ``python benchmarks/bench_corpus_scale.py [--words 13586]
[--workers 2 | --scheduler ADDRESS] [--skip-certificate] [--threads 2]``. With ``--against-recorded`` (and
``--workers`` or ``--scheduler``) only step 4 runs, compared with the serial certificate recorded in that file (the
same model; each record carries the commit it ran at): the two halves of a comparison that takes over half an hour
can then run apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from _common import dirichlet_model, write_json
from bench_cotopic_corpus import probes

import theorycheck as tc
from theorycheck._threads import configure
from theorycheck.solvers import optimal_attention

MK = tc.Masking()
T, TAU = 20, 3
#: The issue's goals in wall seconds on an idle 2-core machine.
GOALS = {"optimum_wall": 60.0, "certificate_wall": 15 * 60.0}


def _commit() -> str | None:
    """The checkout's commit (``None`` outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _timed(fn):
    load0, w, c = _load(), time.perf_counter(), time.process_time()
    out = fn()
    return dict(cpu=time.process_time() - c, wall=time.perf_counter() - w, load_before=load0, load_after=_load()), out


def _certificate(g, executor=None) -> tuple[dict, dict]:
    """The label certificate from an empty checkpoint; returns its record and the result's comparable key."""
    with tempfile.TemporaryDirectory() as tmp:
        copts = {"max_pairs": 20_000_000, "checkpoint": str(Path(tmp) / "regions.jsonl")}
        if executor is not None:
            copts["executor"] = executor
        opts = {"family": "label", "certify": "interval", "certify_options": copts}
        times, r = _timed(lambda: optimal_attention(g, MK, options=opts))
    cert = r.certificate
    key = dict(status=r.status, x=r.x.tolist(), fun=r.fun, lower=cert["lower"], upper=cert["upper"],
               n_boxes=cert["global"]["n_boxes"])  # fmt: skip
    return dict(times, **key, gap=cert["gap"], kind=cert["kind"], commit=_commit()), key


def _distributed(g, workers: int, scheduler: str | None) -> tuple[dict, dict]:
    from distributed import Client, LocalCluster  # the dask extra; imported only when asked for

    if scheduler:
        with Client(scheduler, timeout="10s") as client:
            rec, key = _certificate(g, client)
        return dict(rec, scheduler=scheduler), key
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster, Client(cluster) as client:
        rec, key = _certificate(g, client)
    return dict(rec, workers=workers), key


def _against_recorded(args) -> None:
    """Step 4 alone, compared with the serial certificate of ``results/corpus_scale.json`` (same model)."""
    path = Path(__file__).parent / "results" / "corpus_scale.json"
    out = json.loads(path.read_text())
    rec = out.get("certificate")
    g = dirichlet_model(T, args.words, TAU, floor=1e-12)
    model = f"dirichlet_model({T}, {args.words}, {TAU}, floor=1e-12), uniform-tau"
    if rec is None or rec.get("model") != model:
        raise SystemExit(f"{path} holds no serial certificate of {model}: run without --against-recorded first")
    key = {k: rec[k] for k in ("status", "x", "fun", "lower", "upper", "n_boxes")}
    drec, dkey = _distributed(g, args.workers, args.scheduler)
    out["certificate_distributed"] = dict(drec, same_as_serial=dkey == key, wall_over_serial=drec["wall"] / rec["wall"],
                                          serial_commit=rec.get("commit"))  # fmt: skip
    print("distributed", {k: drec[k] for k in ("cpu", "wall", "status")}, "same:", dkey == key, flush=True)
    out.pop("machine", None)
    write_json("corpus_scale", out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=int, default=13586)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0, help="also the certificate on a LocalCluster of N workers")
    ap.add_argument("--scheduler", default=None, help="also the certificate on this Dask scheduler")
    ap.add_argument("--skip-certificate", action="store_true", help="only the probes and the optimum")
    ap.add_argument(
        "--against-recorded",
        action="store_true",
        help="only the distributed certificate, compared with the serial one in results/corpus_scale.json",
    )
    args = ap.parse_args()
    if args.words < 2 or args.threads < 1 or args.workers < 0:
        ap.error("--words must be >= 2, --threads >= 1, --workers >= 0")
    if args.against_recorded and not (args.workers or args.scheduler):
        ap.error("--against-recorded needs --workers N or --scheduler ADDRESS")
    configure(args.threads)
    if args.against_recorded:
        _against_recorded(args)
        return
    q = (T + 1) * (T + 2) // 2
    out: dict = dict(threads=args.threads, load_start=_load(), goals=GOALS)
    m = out["machine_probes"] = probes(args.words, q, args.threads)
    ref = m["reference_cpu"]
    print(f"reference workload: {ref:.3g} s CPU ({m['reference_what']})", flush=True)
    g = dirichlet_model(T, args.words, TAU, floor=1e-12)
    model = f"dirichlet_model({T}, {args.words}, {TAU}, floor=1e-12), uniform-tau"
    times, r = _timed(lambda: optimal_attention(g, MK))
    met = times["wall"] <= GOALS["optimum_wall"]
    out["optimum"] = dict(times, model=model, family="co-topic", x=r.x.tolist(), fun=r.fun, status=r.status,
                          gradient_norm=r.residuals["gradient_norm"], cpu_over_reference=times["cpu"] / ref,
                          wall_over_reference=times["wall"] / ref, met=met)  # fmt: skip
    print("optimum", {k: out["optimum"][k] for k in ("cpu", "wall", "fun", "status", "met")}, flush=True)
    write_json("corpus_scale", dict(out, load_end=_load()))
    if not args.skip_certificate:
        rec, key = _certificate(g)
        out["certificate"] = dict(rec, model=model, family="label", cpu_over_reference=rec["cpu"] / ref,
                                  wall_over_reference=rec["wall"] / ref,
                                  met=rec["wall"] <= GOALS["certificate_wall"])  # fmt: skip
        print("certificate", {k: rec[k] for k in ("cpu", "wall", "status", "gap", "n_boxes")}, flush=True)
        write_json("corpus_scale", dict(out, load_end=_load()))  # kept if the distributed run is stopped
        if args.workers or args.scheduler:
            drec, dkey = _distributed(g, args.workers, args.scheduler)
            out["certificate_distributed"] = dict(drec, same_as_serial=dkey == key,
                                                  wall_over_serial=drec["wall"] / rec["wall"])  # fmt: skip
            print("distributed", {k: drec[k] for k in ("cpu", "wall", "status")}, "same:", dkey == key, flush=True)
    out["load_end"] = _load()
    write_json("corpus_scale", out)


if __name__ == "__main__":
    main()
