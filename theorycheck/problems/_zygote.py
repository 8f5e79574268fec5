r"""Sealed run processes: a clean server per job slot forks one process per run, killed with everything it made.

Why a separate process, and why a *clean* one. The process that plans a benchmark computes every problem's
certified optimum (for the records). A run forked from it would hold those optima in memory, reachable by a
solver that looks for them. So each job slot has a **zygote**: a fresh interpreter (``python -c``, not a fork)
that imports theorycheck, builds problems (never their optima), warms them up (Numba compilation, caches)
and then forks **one run process per run**. The run process:

- starts a new session (``setsid``: its own process group, no controlling terminal), asks to be killed if
  the zygote dies (``PR_SET_PDEATHSIG`` on Linux), redirects its stdin from ``/dev/null`` and its stdout and
  stderr to a private file (the record keeps the last 2,000 characters), so that nothing it starts can hold
  the benchmark's terminal or pipe open;
- imports a user's solver module (before the clock; a module that raises on import is an ``error`` record),
  asks the solver's ``applies(info)``, runs it under the clock on a sealed oracle (:mod:`._execute`), then
  evaluates its outcome outside the clock and sends it to the zygote over a private pipe.

The zygote enforces the deadline: no answer :func:`~._execute.hard_limit` ``= 1.5 budget + 1 s`` after the
clock started, and the run's process group is killed (``killed``). After every run, answered or not, the
zygote kills *every* process left below it: it is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a
solver's orphaned grandchildren, even those that called ``setsid``, are reparented to it; it freezes them
(``SIGSTOP``, repeated until no new process appears) and then kills them (``SIGKILL``). Nothing a run starts
outlives the run. Without ``/proc`` and ``prctl`` (not Linux) only the run's process group is killed.

The coordinator side (:func:`guarded_run`, one zygote per calling thread, kept for later runs so that its
caches stay warm; :func:`close_workers`) waits for the zygote's answer; a zygote that dies or stops
answering is killed with its whole tree and replaced. A zygote exits when its coordinator does.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from .._threads import prefer_forksafe_layer
from ._execute import evaluate, execute, hard_limit
from ._harness import run_cell
from ._oracle import ProblemInfo
from ._registry import get
from ._solvers import SOLVERS, load_solver

__all__ = ["guarded_run", "close_workers", "live_workers", "serve", "descendants", "kill_tree", "CAN_FORK",
           "SETUP_TIMEOUT", "CHILD_SETUP_TIMEOUT", "OUTPUT_TAIL"]  # fmt: skip

CAN_FORK = hasattr(os, "fork")
#: seconds for the zygote's own set-up of a run (building and warming the problem) and for the after-run
#: evaluation of a run's outcome
SETUP_TIMEOUT = 900.0
#: seconds for a run process's set-up before its clock starts (importing the solver's module, ``applies``)
CHILD_SETUP_TIMEOUT = 300.0
#: characters of a run's stdout/stderr kept in its record
OUTPUT_TAIL = 2000
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_POLL = 0.05


# ----------------------------------------------------------------------------------- process trees
def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """``{pid: ppid}`` of every process visible in ``/proc`` (empty without ``/proc``)."""
    out: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses: split after its last ")"
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) >= 2:
            out[int(e)] = int(rest[1])
    return out


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...), from ``/proc``."""
    kids: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        kids.setdefault(ppid, []).append(pid)
    out, stack = [], list(kids.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(kids.get(pid, []))
    return out


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def kill_tree(root: int, *, include_root: bool = False) -> int:
    """Kill every process below ``root`` (and ``root`` itself if asked): freeze them all (``SIGSTOP``, repeated
    until no new one appears: a frozen process cannot fork), then ``SIGKILL``. Returns how many were killed."""
    seen: set[int] = set()
    for _ in range(50):
        new = [p for p in descendants(root) if p not in seen]
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        seen.update(new)
    if include_root:
        _signal(root, signal.SIGKILL)
    for p in seen:
        _signal(p, signal.SIGKILL)
        _signal(p, signal.SIGCONT)
    return len(seen)


def _reap_all() -> None:
    """Collect every finished child of this process (orphans reparented to a subreaper included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# ----------------------------------------------------------------------------------- the zygote
def serve(fd: int) -> None:
    """The zygote's loop (run by :class:`_Zygote` in a fresh interpreter): requests in, answers out."""
    prefer_forksafe_layer()  # before any Numba kernel: run processes forked from here may run parallel kernels
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator handles Ctrl-C and closes us
    conn = Connection(fd)
    parent = os.getppid()
    state: dict = {"problems": {}, "solvers": {}, "parent": parent, "tmp": tempfile.mkdtemp(prefix="tc-runs-")}
    try:
        while True:
            if not conn.poll(0.5):
                if os.getppid() != parent:
                    return
                continue
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg[0] == "close":
                return
            try:
                answer = _run(conn, state, *msg[1:])
            except Exception as exc:  # the harness's own failure for this run: reported, the zygote goes on
                answer = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
            conn.send(answer)
    finally:
        kill_tree(os.getpid())
        _reap_all()
        with contextlib.suppress(OSError):
            for p in Path(state["tmp"]).iterdir():
                p.unlink()
            os.rmdir(state["tmp"])


def _builtin(spec: str, state: dict):
    """A built-in solver (our code: loaded and prepared here, once, so that run processes inherit it warm)."""
    fn = SOLVERS.get(spec)
    if fn is not None and spec not in state["solvers"]:
        prepare = getattr(fn, "prepare", None)
        if prepare is not None:
            prepare()
        state["solvers"][spec] = fn
    return fn


def _run(conn, state: dict, cell, budget: float, max_evals: int):
    key = (cell.problem, tuple(sorted(cell.size.items())))
    problem = state["problems"].get(key)
    if problem is None:
        problem = state["problems"][key] = get(cell.problem, **cell.size)
    x0 = problem.start(cell.repeat)
    problem.f(x0), problem.grad(x0)  # warm-up (JIT compilation, caches) outside the clock, uncounted
    if problem.hvp is not None:
        problem.hvp(x0, x0)
    solver = _builtin(cell.solver, state)
    out_path = os.path.join(state["tmp"], f"run-{os.getpid()}-{time.monotonic_ns()}.out")
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the run process: never returns
        _child(conn, r, w, out_fd, problem, solver, cell, x0, budget, max_evals)
    os.close(w)
    os.close(out_fd)
    try:
        return _watch(pid, r, budget, state["parent"], out_path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(out_path)


def _child(conn, r, w, out_fd, problem, solver, cell, x0, budget, max_evals) -> None:
    code = 1
    try:
        os.setsid()
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        conn.close()
        os.close(r)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(null)
        os.close(out_fd)
        wc = Connection(w, readable=False)
        code = _child_run(wc, problem, solver, cell, x0, budget, max_evals)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _child_run(wc, problem, solver, cell, x0, budget, max_evals) -> int:
    try:
        if solver is None:
            solver = load_solver(cell.solver)  # a user's module: imported here, before the clock
        ok, why = getattr(solver, "applies", lambda info: (True, ""))(ProblemInfo.of(problem))
        if not ok:
            wc.send(("not applicable", str(why)))
            return 0
        prepare = getattr(solver, "prepare", None)
        if prepare is not None:
            prepare()
    except (Exception, SystemExit) as exc:
        wc.send(("error", f"setting up the solver failed: {type(exc).__name__}: {exc}"))
        return 0
    raw = execute(problem, solver, x0, budget, max_evals, lambda: wc.send(("start",)), lambda: wc.send(("stop",)))
    wc.send(("done", evaluate(problem, raw, budget)))
    return 0


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4 * OUTPUT_TAIL))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return text[-OUTPUT_TAIL:]


def _poll(rc, pid: int, budget: float, parent: int) -> tuple:
    """Read the run process's messages under its deadlines: ``(answer, status, killed, phase, t0)``."""
    phase, t0 = "setup", time.monotonic()
    deadline = t0 + CHILD_SETUP_TIMEOUT
    answer, status = None, None
    while answer is None:
        now = time.monotonic()
        if now > deadline or os.getppid() != parent:
            return None, status, True, phase, t0
        try:
            msg = rc.recv() if rc.poll(min(_POLL, max(deadline - now, 0.0))) else None
        except (EOFError, OSError):
            _, status = os.waitpid(pid, 0)
            return None, status, False, phase, t0
        if msg is not None:
            if msg[0] == "start":
                phase, t0 = "run", time.monotonic()
                deadline = t0 + hard_limit(budget)
            elif msg[0] == "stop":
                phase, deadline = "after", time.monotonic() + SETUP_TIMEOUT
            else:
                answer = msg
            continue
        wpid, st = os.waitpid(pid, os.WNOHANG)
        if wpid:  # gone: read what it sent before it went (a grandchild may hold the pipe open)
            while answer is None and rc.poll(0):
                try:
                    msg = rc.recv()
                except (EOFError, OSError):
                    break
                answer = msg if msg[0] not in ("start", "stop") else None
            return answer, st, False, phase, t0
    return answer, status, False, phase, t0


def _watch(pid: int, r: int, budget: float, parent: int, out_path: str):
    """Wait for the run process ``pid`` under its deadlines; kill whatever is left; the answer for the
    coordinator: ``("done", outcome, output)``, ``("not applicable", why)``, ``("error", why)``,
    ``("killed", phase, wall, output)`` or ``("died", how, phase, wall, output)``."""
    rc = Connection(r, writable=False)
    answer, status, killed, phase, t0 = None, None, False, "setup", time.monotonic()
    try:
        answer, status, killed, phase, t0 = _poll(rc, pid, budget, parent)
    finally:
        wall = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        kill_tree(os.getpid())  # everything the run left, setsid'd grandchildren included (we are their subreaper)
        if status is None:
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(pid, 0)
        _reap_all()
        rc.close()
    output = _tail(out_path)
    if answer is not None:
        return ("done", answer[1], output) if answer[0] == "done" else answer
    if killed:
        return ("killed", phase, wall, output)
    how = "unknown"
    if status is not None:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit code {os.WEXITSTATUS(status)}"
    return ("died", how, phase, wall, output)


# ----------------------------------------------------------------------------------- the coordinator side
_zygotes: set[_Zygote] = set()
_idle: list[_Zygote] = []
_lock = threading.Lock()


class _Zygote:
    """The coordinator's handle on one zygote process."""

    def __init__(self):
        a, b = socket.socketpair()
        pkg_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([pkg_root, *filter(None, [env.get("PYTHONPATH")])])
        self.log = tempfile.TemporaryFile()
        code = "import sys; from theorycheck.problems._zygote import serve; serve(int(sys.argv[1]))"
        with _lock:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(b.fileno())],
                pass_fds=(b.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.log,
                start_new_session=True,  # Ctrl-C at the terminal reaches the coordinator only
                env=env,
            )
            b.close()
            _zygotes.add(self)
        self.conn = Connection(a.detach())

    @property
    def alive(self) -> bool:
        return self in _zygotes and self.proc.poll() is None

    def _log_tail(self) -> str:
        try:
            self.log.seek(0)
            return self.log.read().decode("utf-8", "replace")[-1500:]
        except (OSError, ValueError):
            return ""

    def run(self, cell, budget: float, max_evals: int):
        """The zygote's answer for one run (see :func:`_watch`), or ``("died", ...)`` if the zygote failed."""
        t0 = time.monotonic()
        limit = 2 * SETUP_TIMEOUT + CHILD_SETUP_TIMEOUT + hard_limit(budget) + 60.0
        try:
            self.conn.send(("run", cell, budget, max_evals))
            while True:
                if self.conn.poll(0.2):
                    return self.conn.recv()
                if not self.alive:
                    raise EOFError
                if time.monotonic() - t0 > limit:
                    self.kill()
                    return ("died", f"no answer from the run's server within {limit:.0f} s", "setup", math.nan, "")
        except (EOFError, OSError):
            self.kill()
            why = f"the run's server process ended (exit code {self.proc.returncode})"
            tail = self._log_tail()
            if tail.strip():
                why += ": " + tail.strip().splitlines()[-1]
            return ("died", why, "setup", time.monotonic() - t0, tail)

    def kill(self) -> None:
        """Kill the zygote and every process below it."""
        with _lock:
            _zygotes.discard(self)
            if self in _idle:
                _idle.remove(self)
        kill_tree(self.proc.pid, include_root=True)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(OSError, ValueError):
            self.log.close()

    def close(self) -> None:
        """Ask the zygote to stop (it kills what is below it), then make sure."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(("close",))
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.kill()


def _acquire() -> _Zygote:
    with _lock:
        while _idle:
            z = _idle.pop()
            if z.proc.poll() is None:
                return z
    return _Zygote()


def guarded_run(cell, budget: float, max_evals: int):
    """Run ``cell`` in a sealed run process of an idle zygote (module docstring); the zygote's answer.

    Zygotes are kept between runs, one per concurrent caller, until :func:`close_workers` (the benchmark calls
    it when it ends, however it ends; a zygote also exits when this process does).
    Without ``os.fork`` the cell runs in this process (:func:`~._harness.run_cell`, no isolation) and its
    record is returned as ``("record", rec)``.
    """
    if not CAN_FORK:
        return ("record", run_cell(cell, budget, max_evals))
    z = _acquire()
    answer = z.run(cell, budget, max_evals)
    if z.alive:
        with _lock:
            _idle.append(z)
    return answer


def close_workers() -> None:
    """Stop every zygote this process started and everything below them."""
    with _lock:
        zs = list(_zygotes)
    for z in zs:
        z.close()


def live_workers() -> int:
    """How many zygotes this process has running."""
    with _lock:
        return sum(z.proc.poll() is None for z in _zygotes)


atexit.register(close_workers)
