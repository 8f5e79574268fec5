"""Flags and helpers shared by every ``theorycheck`` command (defined once, used by all)."""

from __future__ import annotations

import shlex

from ._cli_model import add_general_model_flags, general_models, wants_general

__all__ = ["_add_model_flags", "_models", "_add_out_flags", "_add_threads_flag", "_command"]


def _add_model_flags(p) -> None:
    """The topic-model and masking flags, identical for every command that builds a model."""
    g = p.add_argument_group("topic model (SPEC §1) and masking (SPEC §2.1)")
    g.add_argument("--T", type=int, default=10, help="number of topics (default: %(default)s)")
    g.add_argument("--v", type=int, default=10, help="words per topic (default: %(default)s)")
    g.add_argument("--tau", type=int, default=None, help="topics per document, prior uniform-tau (default: 3)")
    g.add_argument(
        "--prior", choices=("uniform-tau", "dirichlet"), default="uniform-tau", help="document prior (SPEC §1.2)"
    )
    g.add_argument("--alpha", type=float, default=None, help="Dirichlet concentration (prior dirichlet)")
    g.add_argument("--p-m", type=float, default=0.15, help="selection probability (default: %(default)s)")
    g.add_argument("--p-c", type=float, default=0.1, help="keep probability (default: %(default)s)")
    g.add_argument("--p-r", type=float, default=0.1, help="random-word probability (default: %(default)s)")
    add_general_model_flags(g)  # --topic-word FILE.npy | --model SPEC (SPEC §11)


def _models(args):
    """``(TopicModel, Masking)`` from the shared flags (validated by their constructors); a
    ``GeneralTopicModel`` with ``--topic-word`` or ``--model`` (:mod:`theorycheck._cli_model`)."""
    from .models import Masking, TopicModel

    if wants_general(args):
        return general_models(args)
    tau = 3 if args.tau is None and args.prior == "uniform-tau" else args.tau
    tm = TopicModel(T=args.T, v=args.v, tau=tau, prior=args.prior, alpha=args.alpha)
    return tm, Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)


def _add_out_flags(p, default: str | None, what: str = "output folder") -> None:
    """``--out DIR`` and ``--force`` for commands that write a folder."""
    p.add_argument(
        "--out", default=default, help=f"{what}; replaced only if new, empty or theorycheck's (default: %(default)s)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a folder holding other files: only theorycheck's files are replaced, none deleted",
    )


def _add_threads_flag(p) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS and Numba threads (default: $THEORYCHECK_THREADS, else 1 BLAS thread in loops, Numba all cores)",
    )


def _command(args) -> str:
    """The command line being run, for the output folder's marker."""
    return "theorycheck " + shlex.join(getattr(args, "argv", None) or [args.command])
