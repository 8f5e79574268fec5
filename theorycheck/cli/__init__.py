"""Command line: ``theorycheck verify | solve value|embedding|attention | landscape | train | dynamics | realdata |
bench | spec``.

The CLI parses, builds configurations, calls the library and writes files; no mathematics lives
here. Each subcommand is two modules:

- its parser, ``theorycheck/cli/parsers/<name>.py``: ``DESCRIPTION`` (one line, the subcommand's help and
  the first line of its ``--help``), ``add_parser(subparsers) -> ArgumentParser`` (flags from :mod:`.common`)
  and ``IMPLEMENTATION``, the name of the module below;
- its implementation, ``theorycheck/cli/<name>.py``: ``run(args) -> int``, the exit code.

The parsers import no Numba, scipy, cvxpy or matplotlib, and an implementation is imported only when its
command runs (:class:`Run`): ``theorycheck --help``, ``--version`` and every ``--help`` answer in a fraction
of a second, and ``theorycheck spec`` does not load the solvers (``tests/test_lazy_imports.py``).

The shared vocabulary (model flags, ``--out``, ``--force``, ``--quiet``, ``--threads``, ``--seed``,
``--scheduler``, ``--jobs``, ``--json``, building the model from flags, error handling) is defined
once in :mod:`theorycheck.cli.common`. Conventions:

- the topic model and masking flags ``--T --v --tau --prior --alpha --p-m --p-c --p-r``, and
  ``--model``/``--topic-word`` for a general topic-word matrix (SPEC §1, §2.1, §11);
- ``--threads N`` (or ``THEORYCHECK_THREADS``) on every command sets BLAS and Numba threads
  (:mod:`theorycheck._threads`);
- output paths are checked before any work (:func:`theorycheck._io.prepare_output_dir`): a folder is
  replaced only if it is new, empty or written by theorycheck; ``--force`` writes into a folder
  holding other files and never deletes them;
- a bad flag or value prints the library's own ``ValueError``/``TypeError`` text on one line and
  exits 2; a result that is not certified (or a failing claim) exits 1;
- Ctrl-C at any moment is one line and exit 130: during a command (:func:`~.common.run_command`; ``verify``
  writes the finished rows marked partial, ``train`` checkpoints), during parsing (:func:`main`) and while
  the package imports (the console command's launcher ``_theorycheck_cli.py``, outside the package);
  SIGTERM does the same with exit 143 (:mod:`theorycheck._interrupt`: it raises a ``KeyboardInterrupt``).

Adding a subcommand (e.g. ``benchmark``): write ``theorycheck/cli/parsers/benchmark.py`` with ``DESCRIPTION``,
``add_parser`` and ``IMPLEMENTATION = "theorycheck.cli.benchmark"``, and ``theorycheck/cli/benchmark.py`` with
``run``, as above; import the parser in ``parsers/__init__.py`` and add it to :data:`COMMANDS` below, one line::

    COMMANDS = (..., parsers.benchmark)

``build_parser`` gives it ``--threads`` and, as the function to call, :class:`Run` of its implementation; the
table-driven test of ``tests/test_cli_vocabulary.py`` then checks its description line and the help text of
its flags.
Optional third-party libraries are not imported here: Dask's ``distributed`` only in
:mod:`theorycheck._dask`, the nlp stack only in :mod:`theorycheck.realdata._deps` and its users.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .._interrupt import exit_code, sigterm_as_ctrl_c
from .._version import __version__
from . import parsers
from .common import OneLineParser, add_threads_flag, leaf_parsers, run_command

__all__ = ["main", "build_parser", "COMMANDS", "Run"]

#: The subcommands' parser modules, in the order of ``theorycheck --help``.
COMMANDS = (
    parsers.verify,
    parsers.solve,
    parsers.landscape,
    parsers.train,
    parsers.dynamics,
    parsers.realdata,
    parsers.bench,
    parsers.benchmark,
    parsers.spec,
)


class Run:
    """The function a subcommand's parser calls (its ``func`` default): imports the implementation module
    ``module`` when the command runs, then calls its ``run(args)`` (looked up at each call)."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __call__(self, args) -> int:
        return importlib.import_module(self.module).run(args)

    def __repr__(self) -> str:
        return f"Run({self.module!r})"


def build_parser() -> argparse.ArgumentParser:
    """The ``theorycheck`` parser: one subparser per module of :data:`COMMANDS`, ``--threads`` on every leaf.
    No subcommand's implementation is imported."""
    parser = OneLineParser(  # parse errors are one line, like every other error
        prog="theorycheck",
        description="Exact, certified checks of 'How Do Transformers Learn Topic Structure' (ICML 2023).",
    )
    parser.add_argument("--version", action="version", version=f"theorycheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub).set_defaults(func=Run(module.IMPLEMENTATION))
    for leaf in leaf_parsers(parser).values():
        add_threads_flag(leaf)  # every command takes --threads
    return parser


def main(argv=None) -> int:
    """Run ``theorycheck`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code. SIGTERM is handled as
    Ctrl-C (:func:`theorycheck._interrupt.sigterm_as_ctrl_c`): one line, workers stopped, exit 143 (Ctrl-C: 130)."""
    with sigterm_as_ctrl_c():
        try:
            argv = list(sys.argv[1:] if argv is None else argv)
            args = build_parser().parse_args(argv)
            args.argv = argv
            return run_command(args)
        except KeyboardInterrupt:  # outside the command (parsing, or while a handler reports): the same one line
            print("theorycheck: interrupted", file=sys.stderr)
            return exit_code()
