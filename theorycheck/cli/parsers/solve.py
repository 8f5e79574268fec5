"""``theorycheck solve value|embedding|attention``: its parsers (the command: :mod:`theorycheck.cli.solve`)."""

from __future__ import annotations

from ..common import add_json_flag, add_model_flags, add_out_flags, add_scheduler_flag

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.solve"


DESCRIPTION = "compute a certified optimum: value | embedding | attention (SPEC §4.1-4.3)"


_SOLVE_HELP = {
    "value": "stage-1 optimal value matrix W^V under uniform attention (SPEC §4.2)",
    "embedding": "optimal tied token-embedding Gram, Theorem 1 setting (SPEC §4.1)",
    "attention": "stage-2 optimal attention (alpha*, beta*, K*) for a frozen W^V, with certificate (SPEC §4.3)",
}


def add_solve_flags(p, problem: str) -> None:
    """Flags of ``solve <problem>``: the shared model flags, the solver contract, outputs."""
    add_model_flags(p)
    g = p.add_argument_group("solver (keyword contract of theorycheck.solvers)")
    g.add_argument("--method", default=None, help="solver method (default: the solver's closed form)")
    g.add_argument("--reg", type=float, default=None, help="L2 coefficient (default 0: minimum-norm optimum)")
    g.add_argument("--tol", type=float, default=None, help="certification tolerance (default: the solver's)")
    g.add_argument("--solver", default=None, help="cvxpy backend, e.g. CLARABEL or SCS (method cvxpy)")
    if problem == "embedding":
        g.add_argument("--d", type=int, default=None, help="embedding dimension (method factorized)")
        g.add_argument("--bias", action="store_true", help="free decoder bias (SPEC §4.1 D4)")
    if problem == "attention":
        g.add_argument("--value", choices=("block", "identity"), default="block", help="frozen W^V (SPEC §4.3)")
        g.add_argument("--loss", choices=("squared", "ce"), default="squared", help="SPEC §2.2 (default: %(default)s)")
        g.add_argument("--n-grid", type=int, default=None, help=_N_GRID_HELP)
        g.add_argument("--family", choices=("co-topic", "label"), default=None,
                       help="--model/--topic-word: the score family alpha I + beta G (default: co-topic)")  # fmt: skip
        g.add_argument("--mask-keys", action="store_true", help="hide selected positions as keys (official code)")
        c = p.add_argument_group("interval certificate (SPEC §7)")
        c.add_argument("--certify", choices=("interval",), default=None,
                       help="rigorous bounds lower <= min L <= upper by interval branch and bound")  # fmt: skip
        c.add_argument("--certify-scope", choices=("global", "local"), default=None,
                       help="--family label: all of R^2 (default) or a certified local minimum")  # fmt: skip
        c.add_argument("--max-pairs", type=int, default=None,
                       help="--family label, global: most (set, word) pairs (default 2,000,000)")  # fmt: skip
        c.add_argument("--checkpoint", default=None, metavar="FILE",
                       help="--family label, global: record finished regions in FILE and resume from it")  # fmt: skip
        add_scheduler_flag(c, "the regions of the --family label global certificate (--certify interval)")
    add_out_flags(p, None, "output folder for summary.json and optimum.npz")
    add_json_flag(p, "the summary (same keys for every problem)")
    p.add_argument(
        "--npz",
        default=None,
        metavar="FILE",
        help="write the optimum and residuals to this .npz file (suffix added; an existing file needs --force)",
    )
    p.set_defaults(problem=problem)


def add_parser(sub):
    p = sub.add_parser("solve", help=DESCRIPTION, description=DESCRIPTION)
    targets = p.add_subparsers(dest="target", required=True, metavar="PROBLEM")
    for problem, text in _SOLVE_HELP.items():
        add_solve_flags(targets.add_parser(problem, help=text, description=text), problem)
    return p


_N_GRID_HELP = (
    "certificate grid points (default: the solver's): in [11, 1000000] with --value block, [11, 2001] "
    "with --value identity, [1, 25] per axis with --model/--topic-word"
)
