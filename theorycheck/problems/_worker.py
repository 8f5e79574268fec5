"""Cells in worker processes under a deadline: a solver that hangs or overruns its budget is killed.

:func:`guarded_run` sends a cell to a worker process (one per calling thread, forked from the
calling process and kept for later cells, so that its caches stay warm) and waits for its record.
The worker reports when the clock starts and when the solver returns; with no return within
:func:`~._harness.overrun_limit` (``1.5 budget + 1 s``) after the clock started, the worker is
killed (``SIGKILL``), the cell is recorded as ``overrun`` ("exceeded budget ... killed", no answer,
no trace) and a fresh worker serves the next cell. A worker that dies by itself (a solver calling
``os._exit`` or crashing the interpreter) gives an ``error`` record naming its exit status. Either
way the benchmark goes on.

The set-up before the clock (building the problem, its certificate) and the evaluation of the
recorded iterates after it are not under the deadline (at most :data:`SETUP_TIMEOUT` each). Works
wherever ``os.fork`` exists (Linux, macOS), in a Dask worker too (the task runs this function there);
without ``os.fork`` the cell runs in the calling process and an overrun is flagged when the solver
returns (:func:`~._harness.run_cell`). A process that has run a Numba parallel kernel on GNU OpenMP
must not fork workers that run one (Numba terminates them): ``theorycheck benchmark`` asks for a
fork-safe threading layer when it starts (:func:`theorycheck._threads.prefer_forksafe_layer`).
"""

from __future__ import annotations

import atexit
import math
import os
import signal
import threading
import time
import traceback
import warnings
from multiprocessing.connection import Connection, Pipe

from ._harness import Cell, failure_record, overrun_limit, run_cell

__all__ = ["guarded_run", "close_workers", "SETUP_TIMEOUT", "CAN_FORK"]

#: seconds a worker may take to set a cell up (problem, certificate) or to evaluate its iterates
SETUP_TIMEOUT = 900.0
CAN_FORK = hasattr(os, "fork")

_local = threading.local()
_workers: set[_Worker] = set()
_lock = threading.Lock()


def _serve(conn) -> None:
    """The worker's loop: a cell in, ``("start", header)``, ``("stop", None)``, ``("done", record)`` out."""
    parent = os.getppid()
    while True:
        while not conn.poll(1.0):
            if os.getppid() != parent:  # the process that forked us is gone: nobody will read our answer
                return
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        cell, budget, max_evals = msg
        hooks = (lambda head: conn.send(("start", head)), lambda: conn.send(("stop", None)))
        try:
            rec = run_cell(cell, budget, max_evals, hooks=hooks)
        except Exception as exc:  # set-up failed (not the solver: run_cell records those)
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))
            continue
        conn.send(("done", rec))


class _Worker:
    """One forked process serving cells over a pipe."""

    conn: Connection
    pid: int
    ended: str | None

    def __init__(self):
        # The pipe is made, the process forked and the parent's copy of the worker's end closed under one
        # lock: a worker forked by another thread must never inherit this pipe's ends, or this worker's death
        # would not reach us as EOF (its pipe held open by a sibling) and a run could hang.
        with _lock, warnings.catch_warnings():
            ours, theirs = Pipe()
            warnings.simplefilter("ignore", DeprecationWarning)  # "process is multi-threaded" (3.12+)
            pid = os.fork()
            if pid == 0:  # the worker
                code = 0
                try:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
                    for w in _workers:  # other workers' pipes: their EOF must not depend on us
                        w.conn.close()
                    ours.close()
                    _serve(theirs)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            _workers.add(self)
            theirs.close()
        self.pid, self.conn, self.ended = pid, ours, None

    def kill(self) -> str:
        """Kill (if alive), reap and forget the worker; return how it ended."""
        with _lock:
            _workers.discard(self)
            if self.ended is not None:  # killed already (by close_workers while a thread waited on it)
                return self.ended
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(self.pid, 0)
            self.ended = (
                f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit code {os.WEXITSTATUS(status)}"
            )
            self.conn.close()  # under the lock: no worker forked from now on inherits this end
        return self.ended

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.kill()

    def _recv(self, timeout: float):
        """The next message, ``("timeout", None)`` or ``("dead", None)``."""
        try:
            if not self.conn.poll(max(timeout, 0.0)):
                return "timeout", None
            return self.conn.recv()
        except (EOFError, OSError):
            return "dead", None

    def run(self, cell: Cell, budget: float, max_evals: int) -> tuple[dict, bool]:
        """``(record, alive)``: the cell's record; ``alive`` False if the worker was killed or died."""
        self.conn.send((cell, budget, max_evals))
        limit = overrun_limit(budget)
        head: dict = {}
        phase, t0, deadline = "setup", math.nan, time.monotonic() + SETUP_TIMEOUT
        while True:
            kind, payload = self._recv(deadline - time.monotonic())
            if kind == "start":
                phase, head, t0 = "run", payload, time.monotonic()
                deadline = t0 + limit
            elif kind == "stop":
                phase, deadline = "after", time.monotonic() + SETUP_TIMEOUT
            elif kind == "done":
                return payload, True
            elif kind == "error":
                self.kill()
                raise RuntimeError(f"setting up {cell.problem} {cell.size} for {cell.solver} failed: {payload}")
            elif phase == "setup":  # timed out or died before the clock started
                how = self.kill()
                raise RuntimeError(f"the worker setting up {cell.problem} {cell.size} ended ({kind}, {how})")
            elif phase == "run" and kind == "timeout":
                self.kill()
                wall = time.monotonic() - t0
                msg = (
                    f"exceeded budget: no answer after {wall:.3g} s (budget {budget:g} s, limit {limit:.3g} s); killed"
                )
                return failure_record(head, "overrun", msg, wall), False
            else:  # died during the run, or hung after the solver returned
                how = self.kill()
                msg = f"the worker process ended {'during' if phase == 'run' else 'after'} the run ({kind}, {how})"
                return failure_record(head, "error", msg, time.monotonic() - t0), False


def guarded_run(cell: Cell, budget: float, max_evals: int) -> dict:
    """Run ``cell`` in this thread's worker process under the deadline (module docstring); its record."""
    if not CAN_FORK:
        return run_cell(cell, budget, max_evals)
    w = getattr(_local, "worker", None)
    if w is None or w not in _workers:
        w = _local.worker = _Worker()
    rec, alive = w.run(cell, budget, max_evals)
    if not alive:
        _local.worker = None
    return rec


def close_workers() -> None:
    """Stop every worker process this process started (they also exit when it does)."""
    with _lock:
        workers = list(_workers)
    for w in workers:
        w.close()


atexit.register(close_workers)
