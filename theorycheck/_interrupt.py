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

SIGTERM (what ``timeout``, ``kill`` and batch schedulers such as Slurm send) ends a command exactly as Ctrl-C does:
:func:`sigterm_as_ctrl_c` (entered by the command line's ``main``) installs a SIGTERM handler that raises
:class:`Terminated`, a ``KeyboardInterrupt``, in the main thread. Every clean-up written for Ctrl-C (the process
pools' workers ended, ``verify``'s partial report, ``train``'s checkpoint, the benchmark's own clean-up) then runs
unchanged; the command prints its one line and exits :func:`exit_code` = 128 + the signal (130 after Ctrl-C, 143
after SIGTERM), as a shell reports a process ended by that signal. :func:`stop_pool` ends a
``ProcessPoolExecutor`` after either: its workers at once, its internals joined (no leaked semaphore, no thread
traceback).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from contextlib import contextmanager

__all__ = [
    "ignore_sigint",
    "sigint_ignored",
    "end_workers",
    "stop_pool",
    "pool_stopped_on_interrupt",
    "redeliver_swallowed_ctrl_c",
    "Terminated",
    "sigterm_as_ctrl_c",
    "exit_code",
    "how",
]

#: Seconds :func:`stop_pool` waits for a pool's manager thread after its workers were ended.
POOL_JOIN_SECONDS = 10.0
#: Seconds it waits before it kills the workers still alive (one blocked on a queue lock an ended worker held).
POOL_STEP_SECONDS = 2.0


class Terminated(KeyboardInterrupt):
    """SIGTERM received (:func:`sigterm_as_ctrl_c`): a ``KeyboardInterrupt``, so that it stops a run the way
    Ctrl-C does and every handler of ``KeyboardInterrupt`` cleans up after it."""

    signum = signal.SIGTERM


#: The signals received while :func:`sigterm_as_ctrl_c` is in force (SIGTERM only; Ctrl-C is Python's own).
_received: list[int] = []
_installed_in: list[int] = []


def _on_sigterm(signum, frame):
    if _installed_in and os.getpid() != _installed_in[-1]:  # a forked child inherited the handler: die as asked
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _received.append(signum)
    raise Terminated(f"terminated by {signal.Signals(signum).name}")


@contextmanager
def sigterm_as_ctrl_c():
    """Within ``with`` (main thread only; elsewhere nothing changes): SIGTERM raises :class:`Terminated` in the main
    thread, as SIGINT raises ``KeyboardInterrupt``; the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    _installed_in.append(os.getpid())
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        _installed_in.pop()


def exit_code() -> int:
    """The exit code of a command ended by a ``KeyboardInterrupt``: 143 (128 + SIGTERM) if a SIGTERM was received
    (:func:`sigterm_as_ctrl_c`), else 130 (128 + SIGINT: Ctrl-C)."""
    return 128 + (signal.SIGTERM if signal.SIGTERM in _received else signal.SIGINT)


def how() -> str:
    """``"SIGTERM"`` if a SIGTERM ended the command (:func:`exit_code`), else ``"Ctrl-C"``: for its one line."""
    return "SIGTERM" if signal.SIGTERM in _received else "Ctrl-C"


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


def stop_pool(pool, interrupted: bool) -> None:
    """Shut down the ``ProcessPoolExecutor`` ``pool``: normally (waiting for its tasks) unless ``interrupted``; then
    its workers are ended at once (:func:`end_workers`) and the tasks not started are dropped.

    After an interruption the pool's futures must not have been cancelled one by one: the pool's manager thread
    marks every pending future broken when it sees a worker ended, and a cancelled one raises ``InvalidStateError``
    in that thread (CPython 3.11). Its internals are joined (at most :data:`POOL_JOIN_SECONDS`), so that no
    semaphore is left to the resource tracker's "leaked" warning."""
    if not interrupted:
        pool.shutdown(wait=True)
        return
    thread = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    end_workers(pool)
    pool.shutdown(wait=False)
    if thread is not None and thread is not threading.current_thread():
        thread.join(POOL_STEP_SECONDS)
        if thread.is_alive():
            # a worker that finished as the others were ended can wait forever on the result queue's lock, which an
            # ended worker held; the manager thread joins it, and so would the interpreter's exit: kill what is left
            # (seen in CI: ``dynamics --jobs 2`` with a diverging cell, SIGTERM two seconds in, hung)
            for proc in [*(getattr(pool, "_processes", None) or {}).values(), *multiprocessing.active_children()]:
                try:
                    proc.kill()
                except (OSError, ValueError, AttributeError):  # already gone, or closed
                    pass
            thread.join(POOL_JOIN_SECONDS)


@contextmanager
def pool_stopped_on_interrupt(pool):
    """``with pool_stopped_on_interrupt(ProcessPoolExecutor(...)) as pool:`` -- shut down on leaving; after a
    ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM under :func:`sigterm_as_ctrl_c`) or any other error its workers are
    ended at once instead of waited for (:func:`stop_pool`)."""
    try:
        yield pool
    except BaseException:
        stop_pool(pool, interrupted=True)
        raise
    stop_pool(pool, interrupted=False)


def _deliver_by_alarm(signum: int) -> None:
    """Raise ``signum`` in 10 ms from a one-shot ``SIGALRM`` (main thread only; the previous ``SIGALRM`` handler is
    put back when it fires): the redelivery of :func:`redeliver_swallowed_ctrl_c` when no timer thread can start."""
    previous = signal.getsignal(signal.SIGALRM)

    def on_alarm(_signum, _frame):
        signal.signal(signal.SIGALRM, previous)
        signal.raise_signal(signum)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.01)


@contextmanager
def redeliver_swallowed_ctrl_c():
    """Within ``with``: a ``KeyboardInterrupt`` that a C callback's caller would print and drop
    (``sys.unraisablehook``) raises SIGINT again instead, without printing; other unraisable errors are
    reported as before."""
    previous = sys.unraisablehook
    pending: list[threading.Timer] = []

    def deliver(signum):
        pending.clear()
        signal.raise_signal(signum)

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) or unraisable.exc_type is KeyboardInterrupt:
            # raised from another thread, so that it is handled after this hook returns (at the main thread's
            # next Python instruction; if that is in a callback again, it comes back here and is sent again);
            # one at a time: a callback called again before then adds none
            if not pending:
                signum = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
                pending.append(threading.Timer(0.01, deliver, (signum,)))
                try:
                    pending[0].start()
                except RuntimeError:  # no thread to spare (a process at its thread limit): a 10 ms alarm instead
                    pending.clear()
                    _deliver_by_alarm(signum)
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        for timer in pending:
            timer.cancel()
