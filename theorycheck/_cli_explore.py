"""``theorycheck verify --explore N [--seed S]``: claims over their domain (:mod:`theorycheck.report.explore`);
``--claims PATH`` (users' claim modules, :mod:`theorycheck.report.discovery`) and ``--list``."""

from __future__ import annotations


def _add_explore_flags(p):
    p.add_argument(
        "--explore",
        type=int,
        default=None,
        metavar="N",
        help="check N configurations per claim drawn from its domain; shrink a failure to a minimal counterexample",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --explore (same seed, same configurations)")
    p.add_argument(
        "--claims",
        action="append",
        default=[],
        metavar="PATH",
        help="also run your claim modules: a .py file defining CLAIM or CLAIMS, or a folder of them (repeatable)",
    )


def _list_claims(claims, registry) -> int:
    """``verify --list``: one tab-separated line per claim; a user's or plugin's claim ends with its origin."""
    for c in claims:
        dom = "domain" if c.domain is not None else "no domain"
        pre = c.precondition_text() or "-"
        where = f"\tfrom {registry.origins[c.id]}" if c.id in registry.external else ""
        print(f"{c.id}\t{c.source}\t{c.statement}\t[{dom}; preconditions: {pre}]{where}")
    return 0


def _cmd_explore(args, claims) -> int:
    from ._cli_common import _command
    from ._io import prepare_output_dir
    from ._validate import check_int
    from .report.explore import explore_claims, format_explore, write_explore_report

    n = check_int("--explore", args.explore, low=1)
    seed = check_int("--seed", args.seed, low=0)
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    progress = None if args.quiet else (lambda r: print(format_explore([r]), flush=True))
    results = explore_claims(claims, n, seed=seed, progress=progress)
    if args.quiet:
        print(format_explore(results))
    out = write_explore_report(results, out, n=n, seed=seed, force=args.force, command=_command(args))
    n_bad = sum(r.verdict == "REFUTED" for r in results)
    n_skip = sum(r.verdict == "SKIP" for r in results)
    print(
        f"\n{len(results) - n_bad - n_skip} claims held, {n_bad} refuted, {n_skip} skipped (no domain); report: {out}"
    )
    return 1 if n_bad else 0
