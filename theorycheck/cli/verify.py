"""``theorycheck verify``: run the registered claims and write the report; ``--explore N`` checks them over
their domain (:mod:`theorycheck.report.explore`); ``--claims PATH`` adds users' claim modules
(:mod:`theorycheck.report.discovery`); ``--list`` lists them."""

from __future__ import annotations

import json
import sys

from .._dask import scheduler_executor
from .._interrupt import exit_code, how
from .._io import prepare_output_dir
from .._validate import check_int
from ..report import (
    ResultCache,
    collect,
    default_jobs,
    format_table,
    run_claims,
    select_claims,
    tier_summary,
    write_report,
)
from ..report.explore import explore_claims, format_explore, write_explore_report
from ..report.runner import RunInterrupted, start_pool_server
from .common import (
    command,
    json_path,
    write_json_summary,
)
from .parsers.verify import MAX_EXPLORE


def run(args) -> int:
    check_int("--seed", args.seed, low=0)  # checked even where it is not used (without --explore)
    if args.list or args.explore is not None:
        registry = collect(args.claims)  # built-in, installed plugins (entry points), --claims PATH
        claims = select_claims(registry.claims, args.only)
        return _list_claims(claims, registry) if args.list else _explore(args, claims)
    jobs = default_jobs() if args.jobs is None else _cap_jobs(check_int("--jobs", args.jobs, low=1))
    tier = "full" if args.full else "default"
    cache = ResultCache(read=not args.no_cache)
    partial = None
    if jobs > 1 and args.scheduler is None and args.only is None:  # every claim: a pool is all but certain
        start_pool_server()  # its import of the claims overlaps ours and the hashing of their sources
    with scheduler_executor(args.scheduler) as executor:  # a bad or unreachable --scheduler fails first, in seconds
        registry = collect(args.claims)
        claims, skipped = select_claims(registry.claims, args.only), registry.skipped
        out = prepare_output_dir(args.out, force=args.force, flag="--out")  # before any claim runs
        json_file = json_path(args)
        try:
            rows = run_claims(claims, progress=not args.quiet, tier=tier, jobs=jobs, executor=executor, cache=cache)
        except RunInterrupted as exc:  # Ctrl-C or SIGTERM: the finished rows are written, the report marked partial
            rows = exc.rows
            partial = f"PARTIAL REPORT: interrupted ({how()}) after {len(rows)} of {exc.n_checks} checks"
            skipped = [partial, *skipped]
    print(format_table(rows))
    tiers = tier_summary(rows, tier)
    print(
        f"tier: {tier} ({len(rows)} checks; the default tier holds {len(tiers['default'])}, --full adds "
        f"{len(tiers['full'])})"
    )
    for reason in skipped:
        print(f"note: {reason}")
    reused = sum(r.cached is not None for r in rows)
    if reused:
        print(
            f"note: {reused} of {len(rows)} checks reused from the result cache {cache.directory} (rows marked *); "
            "--no-cache recomputes them"
        )
    out = write_report(
        rows,
        out,
        figures=not args.no_figures,
        skipped=skipped,
        force=args.force,
        command=command(args),
        tier=tier,
        jobs=jobs,
    )
    write_json_summary(json_file, json.loads((out / "results.json").read_text()))
    if partial is not None:
        print(f"theorycheck verify: {partial}; the partial report is in {out}", file=sys.stderr)
        return exit_code()
    n_bad = sum(r.verdict != "PASS" for r in rows)
    print(f"\n{len(rows) - n_bad}/{len(rows)} checks passed; report written to {out}")
    return 1 if n_bad else 0


def _cap_jobs(jobs: int) -> int:
    """``--jobs`` capped to the cores available (more worker processes than cores only add overhead)."""
    cores = default_jobs()
    if jobs > cores:
        print(f"note: --jobs {jobs} capped to the {cores} cores available", file=sys.stderr)
        return cores
    return jobs


def _list_claims(claims, registry) -> int:
    """``verify --list``: one tab-separated line per claim; a user's or plugin's claim ends with its origin."""
    for c in claims:
        dom = "domain" if c.domain is not None else "no domain"
        pre = c.precondition_text() or "-"
        where = f"\tfrom {registry.origins[c.id]}" if c.id in registry.external else ""
        print(f"{c.id}\t{c.source}\t{c.statement}\t[{dom}; preconditions: {pre}]{where}")
    return 0


def _explore(args, claims) -> int:
    """``verify --explore N [--seed S]``: N configurations per claim; a failure shrunk to a minimal counterexample."""
    n = check_int("--explore", args.explore, low=1, high=MAX_EXPLORE)
    seed = check_int("--seed", args.seed, low=0)
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    json_file = json_path(args)
    progress = None if args.quiet else (lambda r: print(format_explore([r]), flush=True))
    results = explore_claims(claims, n, seed=seed, progress=progress)
    if args.quiet:
        print(format_explore(results))
    out = write_explore_report(results, out, n=n, seed=seed, force=args.force, command=command(args))
    write_json_summary(json_file, json.loads((out / "results.json").read_text()))
    n_bad = sum(r.verdict == "REFUTED" for r in results)
    n_skip = sum(r.verdict == "SKIP" for r in results)
    print(
        f"\n{len(results) - n_bad - n_skip} claims held, {n_bad} refuted, {n_skip} skipped (no domain); report: {out}"
    )
    return 1 if n_bad else 0
