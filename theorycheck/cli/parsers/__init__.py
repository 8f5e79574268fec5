"""The parsers of the ``theorycheck`` subcommands, one module per subcommand, each with

- ``DESCRIPTION``: one line, the subcommand's help and the first line of its ``--help``;
- ``add_parser(subparsers) -> ArgumentParser``: adds its parser (flags from :mod:`theorycheck.cli.common`);
- ``IMPLEMENTATION``: the module with ``run(args) -> int`` (``theorycheck.cli.<name>``), imported when the
  command runs, not before.

They import argparse, the shared flags and a few constants from light modules only (no Numba, scipy, cvxpy or
matplotlib): ``theorycheck --help``, ``theorycheck --version`` and every ``--help`` build them in a fraction
of a second (``tests/test_lazy_imports.py``).
"""

from . import bench, benchmark, dynamics, landscape, realdata, solve, spec, train, verify

__all__ = ["bench", "benchmark", "dynamics", "landscape", "realdata", "solve", "spec", "train", "verify"]
