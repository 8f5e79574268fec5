"""The ``theorycheck`` console command: entry point ``_theorycheck_cli:main`` (pyproject.toml ``[project.scripts]``).

It lives outside the ``theorycheck`` package on purpose: importing the CLI imports numpy and the
parsers (a few tenths of a second; a command's implementation, with Numba and scipy, is imported
later, inside the command, which reports its own Ctrl-C), and a Ctrl-C while they import must end like
a Ctrl-C at any other moment, with one line ``theorycheck: interrupted`` and exit code 130, not a
traceback. Python runs a package's ``__init__`` before any of its modules, so only a module outside the
package can catch it.
``python -m theorycheck.cli`` works the same once the package is imported.
"""

import sys

#: The exit code after Ctrl-C (128 + SIGINT), as a shell reports a process ended by SIGINT.
INTERRUPTED = 130


def main(argv=None) -> int:
    """Import :mod:`theorycheck.cli` and run it with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    try:
        from theorycheck.cli import main as run  # numpy and the parsers (the implementations: when they run)

        return run(argv)
    except KeyboardInterrupt:
        print("theorycheck: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
