"""Ctrl-C, the same at every moment: one place for what makes a SIGINT end a run with one line.

A terminal sends SIGINT to every process of the foreground group: the command and its worker processes.
The command stops the run and reports it on one line (:func:`theorycheck.cli.common.run_command`); the
helpers here keep everything else quiet:

- :func:`ignore_sigint`: a pool initializer (and the state a helper process inherits, :func:`sigint_ignored`):
  the worker leaves Ctrl-C to its parent instead of printing a ``KeyboardInterrupt`` traceback of its own;
- :func:`sigint_ignored`: SIGINT ignored in this process while a helper process is started (the
  ``forkserver`` of a process pool inherits the ignore, and so do the workers it forks), main thread only;
- :func:`end_workers`: after Ctrl-C, the worker processes of a ``ProcessPoolExecutor`` are ended at once
  (SIGTERM), so that the command exits without waiting for the checks they run;
- :func:`redeliver_swallowed_ctrl_c`: a ``KeyboardInterrupt`` raised inside a C callback (a Numba
  compilation calls Python back) is printed and dropped by the callback's caller; this delivers the
  SIGINT again instead, silently, so that it reaches the command.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

__all__ = ["ignore_sigint", "sigint_ignored", "end_workers", "redeliver_swallowed_ctrl_c"]


def ignore_sigint(*_args) -> None:
    """Ignore SIGINT in this process (a worker: its parent handles Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def sigint_ignored():
    """SIGINT ignored within ``with`` (in the main thread; elsewhere nothing changes): a process started here
    inherits the ignore through ``exec`` (Python then installs no ``KeyboardInterrupt`` handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def end_workers(pool) -> None:
    """End the worker processes of the ``ProcessPoolExecutor`` ``pool`` now (SIGTERM; none if it has none)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.terminate()
        except (OSError, ValueError):  # already gone, or closed
            pass


@contextmanager
def redeliver_swallowed_ctrl_c():
    """Within ``with``: a ``KeyboardInterrupt`` that a C callback's caller would print and drop
    (``sys.unraisablehook``) raises SIGINT again instead, without printing; other unraisable errors are
    reported as before."""
    previous = sys.unraisablehook
    pending: list[threading.Timer] = []

    def deliver():
        pending.clear()
        signal.raise_signal(signal.SIGINT)

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) or unraisable.exc_type is KeyboardInterrupt:
            # raised from another thread, so that it is handled after this hook returns (at the main thread's
            # next Python instruction; if that is in a callback again, it comes back here and is sent again);
            # one at a time: a callback called again before then adds none
            if not pending:
                pending.append(threading.Timer(0.01, deliver))
                pending[0].start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        for timer in pending:
            timer.cancel()
