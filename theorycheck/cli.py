"""Command line: ``theorycheck verify|landscape|solve|train|bench``.

The CLI parses, builds configurations, calls the library and writes files; no mathematics
lives here. A bad flag or value prints the library's own ``ValueError`` text and exits 2.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


# ----------------------------------------------------------------------------- verify
def _add_verify(sub):
    p = sub.add_parser("verify", help="run every registered claim and write the report")
    p.add_argument("--out", default="theorycheck-report", help="output folder (default: %(default)s)")
    p.add_argument("--only", default=None, help="comma-separated globs/substrings of claim ids")
    p.add_argument("--list", action="store_true", help="list claim ids and exit")
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_verify)


def _cmd_verify(args) -> int:
    from proofs_numeric import CLAIMS

    from .report import format_table, run_claims, select_claims, write_report

    claims = select_claims(CLAIMS, args.only)
    if args.list:
        for c in claims:
            print(f"{c.id}\t{c.source}\t{c.statement}")
        return 0
    rows = run_claims(claims, progress=not args.quiet)
    print(format_table(rows))
    out = write_report(rows, args.out, figures=not args.no_figures)
    n_bad = sum(r.verdict != "PASS" for r in rows)
    print(f"\n{len(rows) - n_bad}/{len(rows)} checks passed; report written to {out}")
    return 1 if n_bad else 0


# ----------------------------------------------------------------------------- train
def _add_train(sub):
    p = sub.add_parser("train", help="train the numpy transformer on a preset (see --list)")
    p.add_argument("--list", action="store_true", help="print the preset names, one per line, and exit")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--out", default=None, help="run folder (metrics.jsonl, params.npz, figures/)")
    p.add_argument("--steps", type=int, default=None, help="override the number of steps")
    p.add_argument("--seed", type=int, default=None, help="override the seed")
    p.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train)


def _cmd_train(args) -> int:
    import json

    from .train import PRESETS, run_preset

    if args.list:
        for name in PRESETS:
            print(name)
        return 0
    if args.preset is None:
        raise ValueError(f"--preset is required (one of {', '.join(PRESETS)}); use --list to see them")
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {', '.join(PRESETS)}, got {args.preset!r}")
    if args.out is None:
        raise ValueError("--out is required (the run folder)")
    summary = run_preset(args.preset, args.out, steps=args.steps, seed=args.seed, progress=not args.quiet,
                         resume=args.resume)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="theorycheck",
        description="Exact, certified checks of 'How Do Transformers Learn Topic Structure' (ICML 2023).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_verify(sub)
    _add_train(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError) as exc:
        print(f"theorycheck {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
