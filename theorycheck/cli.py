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


# ----------------------------------------------------------------------------- landscape
def _add_landscape(sub):
    p = sub.add_parser("landscape", help="attention loss landscape L(alpha, beta), L(K) and the certified optimum")
    p.add_argument("--T", type=int, default=10, help="topics (default: %(default)s)")
    p.add_argument("--v", type=int, default=10, help="words per topic (default: %(default)s)")
    p.add_argument("--tau", type=int, default=3, help="topics per document (default: %(default)s)")
    p.add_argument("--p-m", type=float, default=0.15, help="selection probability (default: %(default)s)")
    p.add_argument("--p-c", type=float, default=0.1, help="keep probability (default: %(default)s)")
    p.add_argument("--p-r", type=float, default=0.1, help="random-word probability (default: %(default)s)")
    p.add_argument("--value", choices=("block", "identity"), default="block", help="frozen W^V (default: %(default)s)")
    p.add_argument("--loss", choices=("sq", "ce"), default="sq", help="squared loss or cross-entropy (default: %(default)s)")
    p.add_argument("--n-grid", type=int, default=201, help="grid points per axis (default: %(default)s)")
    p.add_argument("--out", default="theorycheck-landscape", help="output folder (default: %(default)s)")
    p.set_defaults(func=_cmd_landscape)


def _cmd_landscape(args) -> int:
    from .config import Masking, TopicModel
    from .landscape import write_landscape

    tm = TopicModel(T=args.T, v=args.v, tau=args.tau)
    mk = Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)
    info = write_landscape(tm, mk, args.out, value=args.value, n_grid=args.n_grid, loss=args.loss)
    print(f"W^V={args.value}, loss={args.loss}: alpha*={info['alpha']:.6g} beta*={info['beta']:.6g} K*={info['K']:.6g} "
          f"L*={info['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}")
    print(f"written {args.out}/grid.npz, landscape.png, optimum.json")
    return 0 if info["status"] in (0, 1) else 1


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="theorycheck",
        description="Exact, certified checks of 'How Do Transformers Learn Topic Structure' (ICML 2023).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_verify(sub)
    _add_landscape(sub)
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
