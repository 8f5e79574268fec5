"""``theorycheck verify --explore N [--seed S]``: claims over their domain (:mod:`theorycheck.report.explore`)."""

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
