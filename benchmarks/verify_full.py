"""Run ``theorycheck verify --full`` with each check's CPU time recorded, and summarise the EMPIRICAL claims.

Two steps (issue 25 item 4: the ``--full`` tier run with the spread-calibrated thresholds):

    # one or more runs (e.g. the deep claim in one process, everything else in another), each in this
    # process (--jobs 1) so that process_time() around a check is that check's CPU, compile included
    nice -n 10 python benchmarks/verify_full.py run cpu_deep.jsonl -- --full --no-cache --jobs 1 \\
        --only train.deep-4x4-two-stage --json full_deep.json --out rep_deep
    python benchmarks/verify_full.py summarize --results full_deep.json full_rest.json \\
        --cpu cpu_deep.jsonl cpu_rest.jsonl [--note "..."]     # -> benchmarks/results/verify_full.json

``summarize`` keeps, for every check of the full tier (and the totals of both tiers): the seeds judged,
pass/fail, the deciding sub-check's measured value against its threshold, the per-seed values and
95% t-intervals of the claim's statistics, the k-of-n rule (``min_passing``, else every seed: k = n)
with its power (:func:`proofs_numeric._empirical.k_of_n_power`, a seed failing 30% of the time), the
calibration entries of the claim's ``full`` tier and the CPU seconds of the check.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def run(log: str, verify_args: list[str]) -> int:
    """``theorycheck verify <verify_args>`` in this process, one JSON line per check appended to ``log``:
    claim id, params, CPU seconds (``time.process_time``), wall seconds, passed, error."""
    from theorycheck.cli import main
    from theorycheck.report import runner

    original = runner.execute
    out = open(log, "a")

    def execute(claim, params):
        t0, w0 = time.process_time(), time.perf_counter()
        res = original(claim, params)
        row = {
            "claim": getattr(claim, "id", str(claim)),
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
            "cpu": time.process_time() - t0,
            "wall": time.perf_counter() - w0,
            "passed": bool(res[0].passed),
            "error": res[2],
        }
        out.write(json.dumps(row) + "\n")
        out.flush()
        return res

    runner.execute = execute  # execute_many looks it up at call time (jobs = 1: every check runs here)
    try:
        return main(["verify", *verify_args])
    finally:
        out.close()


def _claim_and_module(claim_id: str):
    import proofs_numeric

    claim = next(c for c in proofs_numeric.CLAIMS if c.id == claim_id)
    return claim, importlib.import_module(claim.check.__module__)


def _one_seed_params(params: dict, seed: int) -> dict:
    """The dict :func:`~theorycheck.report.claims.over_seeds` (and ``at_least_k_of_n``) hand ``_check_one``."""
    return dict({k: v for k, v in params.items() if k not in ("seeds", "min_passing")}, seed=seed)


def _claim_seed(folder: Path, seed: int) -> bool:
    """Take ``seed`` for this process (``seed<s>.lock`` created exclusively); ``False`` if it is done or taken."""
    if (folder / f"seed{seed}.pkl").exists():
        return False
    try:
        os.close(os.open(folder / f"seed{seed}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def run_seeds(claim_id: str, folder: str, lo: int, hi: int) -> None:
    """The per-seed checks (``_check_one`` of the claim module) of seeds ``[lo, hi)`` of the claim's
    ``full_params[0]["seeds"]``, each pickled to ``folder/seed<s>.pkl`` with its CPU seconds: the seeds of one
    check split over processes (a seed another process took, ``seed<s>.lock``, or finished is skipped, so
    several processes may share one range). :func:`assemble` then runs the claim's own ``check`` on the stored
    results."""
    import pickle

    from theorycheck._threads import blas_threads

    claim, mod = _claim_and_module(claim_id)
    params = claim.full_params[0]
    Path(folder).mkdir(parents=True, exist_ok=True)
    for s in params["seeds"][lo:hi]:
        if not _claim_seed(Path(folder), s):  # done, or taken by another process
            continue
        t0, w0 = time.process_time(), time.perf_counter()
        with blas_threads():
            res = mod._check_one(_one_seed_params(params, s), None)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        Path(folder, f"seed{s}.pkl").write_bytes(pickle.dumps({"result": res, "cpu": cpu, "wall": wall}))
        print(f"seed {s}: passed {res.passed} cpu {cpu:.1f} s", flush=True)


def assemble(claim_id: str, folder: str, results_json: str, cpu_log: str) -> None:
    """Run the claim's ``check`` on ``full_params[0]`` with ``_check_one`` answering from the results
    :func:`run_seeds` stored (the parameters it is asked for are checked against them); write the row as
    ``verify --json`` writes it (``{"claims": [row]}``) and one CPU line (the sum over seeds)."""
    import pickle

    from theorycheck.report.claims import over_seeds
    from theorycheck.report.runner import ReportRow

    claim, mod = _claim_and_module(claim_id)
    params = dict(claim.full_params[0])
    done = [s for s in params["seeds"] if Path(folder, f"seed{s}.pkl").exists()]
    stored = {s: pickle.loads(Path(folder, f"seed{s}.pkl").read_bytes()) for s in done}
    incomplete = None
    if len(done) < len(params["seeds"]):  # not every seed ran: judge nothing, record what is decided already
        n, k = len(params["seeds"]), params.get("min_passing", len(params["seeds"]))
        n_pass = sum(bool(v["result"].passed) for v in stored.values())
        n_fail = len(done) - n_pass
        verdict = "PASS" if n_pass >= k else "FAIL" if n_fail > n - k else "undecided"
        incomplete = {"seeds_run": done, "n_passed": n_pass, "n_failed": n_fail, "rule_k": k, "rule_n": n}
        incomplete["decided"] = verdict
        params = {key: v for key, v in params.items() if key != "min_passing"} | {"seeds": tuple(done)}

    def stored_check_one(p, inject=None):
        assert inject is None and p == _one_seed_params(params, p["seed"]), p
        return stored[p["seed"]]["result"]

    original = mod._check_one
    mod._check_one = stored_check_one
    try:
        # an incomplete block is summarised over the seeds run (every seed's values), never judged by the k-of-n rule
        res = claim.run(dict(params)) if incomplete is None else over_seeds(stored_check_one, params)
    finally:
        mod._check_one = original
    cpu = sum(v["cpu"] for v in stored.values())
    row = ReportRow(claim, res, sum(v["wall"] for v in stored.values()), None, "full").to_json()
    row["details"]["cpu_seconds_per_seed"] = [round(stored[s]["cpu"], 2) for s in params["seeds"]]
    if incomplete is not None:
        row["passed"] = None
        row["incomplete"] = incomplete
    Path(results_json).write_text(json.dumps({"claims": [row]}, indent=1))
    line = {"claim": claim_id, "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}}
    line.update(cpu=cpu, wall=row["seconds"], passed=row["passed"], error=None)
    with open(cpu_log, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(f"{claim_id}: passed {row['passed']}, {row['details'].get('n_passed')} of {len(params['seeds'])} seeds")


def _key(claim_id: str, params: dict) -> str:
    return claim_id + " " + json.dumps(params, sort_keys=True)


def _stat_summary(details: dict) -> dict:
    """Per-statistic mean and 95% t-interval over seeds (``<stat>_mean``, ``<stat>_ci95`` of ``over_seeds``)."""
    out = {}
    for k, v in details.items():
        if k.endswith("_mean") and k != "margin_mean":
            name = k[: -len("_mean")]
            out[name] = {"mean": v, "ci95": details.get(f"{name}_ci95")}
    return out


def _calibration(claim_id: str) -> dict:
    import proofs_numeric

    claim = next(c for c in proofs_numeric.CLAIMS if c.id == claim_id)
    mod = importlib.import_module(claim.check.__module__)
    table = getattr(mod, "CALIBRATION", {})
    out = {}
    for (tier, name), (rule, null, values, *reason) in table.items():
        if tier != "full":
            continue
        used = claim.full_params[-1].get(name, getattr(mod, name.upper(), None))
        out[name] = {"rule": rule, "null_or_reference": null, "calibration_values": list(values), "threshold": used}
        if reason:
            out[name]["reason"] = reason[0]
    return out


def summarize(results: list[str], cpu_logs: list[str], note: str | None, out: Path) -> dict:
    from proofs_numeric._empirical import POWER_FAIL_RATE, k_of_n_power

    by_key: dict = {}  # a check in several files (runs split by hand) counts once: the first file's row
    for f in results:
        for r in json.loads(Path(f).read_text())["claims"]:
            by_key.setdefault(_key(r["id"], r["params"]), r)
    rows = list(by_key.values())
    cpu = {}
    for f in cpu_logs:
        for line in Path(f).read_text().splitlines():
            d = json.loads(line)
            cpu[_key(d["claim"], d["params"])] = d
    checks, tot = (
        [],
        {"default": {"cpu": 0.0, "checks": 0, "failed": 0}, "full": {"cpu": 0.0, "checks": 0, "failed": 0}},
    )
    for r in rows:
        c = cpu.get(_key(r["id"], r["params"]), {})
        t = tot[r["tier"]]
        t["cpu"] += c.get("cpu", 0.0)
        t["checks"] += 1
        t["failed"] += r["passed"] is False
        if r["tier"] != "full":
            continue
        d = r["details"] or {}
        seeds = r["params"].get("seeds")
        entry = {
            "claim": r["id"],
            "source": r["source"],
            "passed": r["passed"],
            "error": r["error"],
            "decided_by": r["decided_by"],
            "expected": r["expected"],
            "measured": r["measured"],
            "margin": r["margin"],
            "incomplete": r.get("incomplete"),
            "cpu_seconds": round(c["cpu"], 2) if c else None,
            "wall_seconds": round(c["wall"], 2) if c else r["seconds"],
        }
        if seeds:
            n, k = len(seeds), r["params"].get("min_passing", len(seeds))
            if r.get("incomplete"):  # the rule of the whole block, of which only some seeds ran
                n, k = r["incomplete"]["rule_n"], r["incomplete"]["rule_k"]
            entry.update(
                seeds=seeds,
                rule=f"at least {k} of {n} seeds pass" if k < n else f"all {n} seeds pass",
                power_at_30pct_seed_failure=round(k_of_n_power(n, k, POWER_FAIL_RATE), 4),
                n_passed=d.get("n_passed", sum(d.get("passed_per_seed", []))),
                passed_per_seed=d.get("passed_per_seed"),
                measured_per_seed=d.get("measured_per_seed"),
                statistics=_stat_summary(d),
            )
        cal = _calibration(r["id"]) if r["source"] == "EMPIRICAL" else {}
        if cal:
            entry["calibrated_thresholds"] = cal
        checks.append(entry)
    for t in tot.values():
        t["cpu"] = round(t["cpu"], 1)
    data = {
        "what": "theorycheck verify --full --no-cache (issue 25 item 4): every check of the full tier with its "
        "seed rule, power, measured values against thresholds and CPU seconds (process_time, cold Numba cache)",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0]},
        "note": note,
        "totals_by_tier": tot,
        "full_checks": checks,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        if len(argv) < 2:
            raise SystemExit("usage: verify_full.py run LOG -- VERIFY_ARGS...")
        rest = argv[2:]
        return run(argv[1], rest[1:] if rest[:1] == ["--"] else rest)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sd = sub.add_parser("seeds", help="per-seed checks of seeds [lo, hi) of a claim's full tier")
    sd.add_argument("claim")
    sd.add_argument("folder")
    sd.add_argument("lo", type=int)
    sd.add_argument("hi", type=int)
    asm = sub.add_parser("assemble", help="the claim's check on the stored per-seed results")
    asm.add_argument("claim")
    asm.add_argument("folder")
    asm.add_argument("results_json")
    asm.add_argument("cpu_log")
    s = sub.add_parser("summarize")
    s.add_argument("--results", nargs="+", required=True, help="results JSON files of verify --json")
    s.add_argument("--cpu", nargs="*", default=[], help="CPU logs written by 'run'")
    s.add_argument("--note", default=None)
    s.add_argument("--out", default=str(RESULTS / "verify_full.json"))
    a = ap.parse_args(argv)
    if a.cmd == "seeds":
        run_seeds(a.claim, a.folder, a.lo, a.hi)
        return 0
    if a.cmd == "assemble":
        assemble(a.claim, a.folder, a.results_json, a.cpu_log)
        return 0
    data = summarize(a.results, a.cpu, a.note, Path(a.out))
    for e in data["full_checks"]:
        verdict = {True: "PASS", False: "FAIL"}.get(e["passed"], "INCOMPLETE")
        print(
            f"{e['claim']:40s} {verdict} cpu {e['cpu_seconds']}s "
            f"{e.get('rule', '')} power {e.get('power_at_30pct_seed_failure', '-')}"
        )
    print(data["totals_by_tier"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
