"""The ``theorycheck`` console command: entry point ``_theorycheck_cli:main`` (pyproject.toml ``[project.scripts]``).

It lives outside the ``theorycheck`` package on purpose: importing the CLI imports numpy and the
parsers (a few tenths of a second; a command's implementation, with Numba and scipy, is imported
later, inside the command, which reports its own Ctrl-C), and a Ctrl-C while they import must end like
a Ctrl-C at any other moment, with one line ``theorycheck: interrupted`` and exit code 130 (SIGTERM: 143),
not a traceback. Python runs a package's ``__init__`` before any of its modules, so only a module outside the
package can catch it.
``python -m theorycheck.cli`` works the same once the package is imported.
"""

import signal
import sys
import threading

#: The exit code after Ctrl-C (128 + SIGINT), as a shell reports a process ended by SIGINT.
INTERRUPTED = 130
#: The exit code after SIGTERM (128 + SIGTERM): ``timeout`` and batch schedulers stop a job with SIGTERM.
TERMINATED = 143

_terminated: list[int] = []


def _on_sigterm(signum, frame):
    """SIGTERM while the package imports: a ``KeyboardInterrupt`` (once imported, :mod:`theorycheck._interrupt`)."""
    _terminated.append(signum)
    raise KeyboardInterrupt


def main(argv=None) -> int:
    """Import :mod:`theorycheck.cli` and run it with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        from theorycheck.cli import main as run  # numpy and the parsers (the implementations: when they run)

        return run(argv)
    except KeyboardInterrupt:
        print("theorycheck: interrupted", file=sys.stderr)
        return TERMINATED if _terminated else INTERRUPTED
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    sys.exit(main())
