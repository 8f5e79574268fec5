"""Fault injection, processes and signals (issue #38 items 3-4): SIGTERM -- what ``timeout``, ``kill`` and batch
schedulers send -- ends every command as Ctrl-C does: one line, its worker processes stopped, exit 143 (Ctrl-C:
130), partial results consistent; Ctrl-C on a command with worker processes stops them at once, with no thread
traceback and no "leaked semaphore" warning.

The process tests start the console command (``_theorycheck_cli.py``) in a session of its own
(``start_new_session=True``), poll until its workers are busy (never a fixed sleep), send the signal to the command
alone (``timeout``, ``kill PID``) or to its whole process group (a terminal's Ctrl-C, ``kill -TERM -PGID``), and
then require the session to be empty: no forkserver, worker or resource tracker left. Leftovers are killed in a
``finally``.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from theorycheck import _interrupt, cli
from theorycheck.cli.common import leaf_parsers
from theorycheck.report import runner

ROOT = Path(__file__).resolve().parents[1]
LEAVES = sorted(leaf_parsers(cli.build_parser()))
COMMANDS = sorted({name.split()[0] for name in LEAVES})


# ----------------------------------------------------------------------------- in-process: every command
def _signal_self(signum):
    def command(args):
        os.kill(os.getpid(), signum)
        for _ in range(100_000):  # the handler raises at the next bytecode; never reached in full
            time.sleep(0.001)
        raise AssertionError("the signal did not stop the command")

    return command


@pytest.mark.parametrize("name", COMMANDS)
def test_sigterm_in_any_command_is_one_line_and_143(name, monkeypatch, capsys):
    """The mechanism is the CLI's ``main`` (a SIGTERM handler raising a ``KeyboardInterrupt``), not each command's."""
    parser = next(m for m in cli.COMMANDS if m.add_parser.__module__.endswith(f".{name}"))
    module = importlib.import_module(parser.IMPLEMENTATION)  # the command's run(args), imported when it runs
    monkeypatch.setattr(module, "run", _signal_self(signal.SIGTERM))
    leaf = next(n for n in LEAVES if n.split()[0] == name)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(leaf.split()) == 143
    assert capsys.readouterr().err == f"theorycheck {name}: interrupted (SIGTERM)\n"
    assert signal.getsignal(signal.SIGTERM) is before  # restored: the library is untouched outside the CLI


def _spec():
    """The implementation module of ``theorycheck spec`` (imported when the command runs)."""
    return importlib.import_module("theorycheck.cli.spec")


def test_ctrl_c_after_a_sigterm_run_is_130_again(monkeypatch, capsys):
    monkeypatch.setattr(_spec(), "run", _signal_self(signal.SIGTERM))
    assert cli.main(["spec"]) == 143
    monkeypatch.setattr(_spec(), "run", _signal_self(signal.SIGINT))
    assert cli.main(["spec"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "theorycheck spec: interrupted"


def test_a_sigterm_swallowed_by_a_c_callback_still_ends_the_command(monkeypatch, capsys):
    """SIGTERM while Python runs inside a C callback (libc's qsort, as in a Numba compilation): the callback's caller
    prints and drops the exception; it is delivered again as SIGTERM (not as Ctrl-C), so the exit code is 143."""
    libc = ctypes.CDLL(None)
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def cmp(a, b):
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    def command(args):
        arr = (ctypes.c_int * 3)(3, 1, 2)
        libc.qsort(arr, 3, ctypes.sizeof(ctypes.c_int), compare(cmp))
        for _ in range(10_000):  # the signal is delivered again (from another thread) while this runs
            time.sleep(0.001)
        raise AssertionError("the SIGTERM was lost in the callback")

    monkeypatch.setattr(_spec(), "run", command)
    assert cli.main(["spec"]) == 143
    assert capsys.readouterr().err == "theorycheck spec: interrupted (SIGTERM)\n"


def test_the_sigterm_handler_is_the_main_threads_only():
    """Installed from another thread it changes nothing (Python allows handlers in the main thread only)."""
    seen = []

    def other():
        with _interrupt.sigterm_as_ctrl_c():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [signal.getsignal(signal.SIGTERM)]


_IMPORT_CHILD = textwrap.dedent(
    """
    import importlib.abc, os, signal, sys

    class Term(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "numpy":
                os.kill(os.getpid(), signal.SIGTERM)
            return None

    sys.meta_path.insert(0, Term())
    import _theorycheck_cli
    sys.exit(_theorycheck_cli.main(["spec"]))
    """
)


def test_sigterm_while_the_package_imports_is_one_line_and_143():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", _IMPORT_CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 143, res.stderr
    assert res.stderr == "theorycheck: interrupted\n"


# ----------------------------------------------------------------------------- the pool after an interruption
def _busy(seconds: float) -> float:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


def test_stop_pool_ends_busy_workers_at_once_without_a_thread_traceback(monkeypatch):
    """Workers running 120 s tasks and tasks queued behind them: ``stop_pool`` ends them at once; the pool's
    manager thread raises nothing (CPython 3.11 raised InvalidStateError on futures cancelled one by one)."""
    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda a: errors.append(a.exc_value))
    pool = runner.process_pool(2)
    procs = []
    try:
        futures = [pool.submit(_busy, 120.0) for _ in range(6)]
        deadline = time.monotonic() + 120
        while sum(f.running() for f in futures) < 2:  # two tasks handed to the workers
            assert time.monotonic() < deadline
            time.sleep(0.01)
        procs = list(pool._processes.values())
        t0 = time.monotonic()
        _interrupt.stop_pool(pool, interrupted=True)
        for p in procs:
            p.join(30)
        assert time.monotonic() - t0 < 30  # not the 120 s of the tasks
        assert all(not p.is_alive() for p in procs)
        assert errors == []
        assert all(f.done() for f in futures)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()


def test_pool_stopped_on_interrupt_waits_normally_otherwise():
    with _interrupt.pool_stopped_on_interrupt(ProcessPoolExecutor(1)) as pool:
        fut = pool.submit(_busy, 0.05)
    assert fut.result() == 0.05


# ----------------------------------------------------------------------------- real signals, real workers
def _session(pid: int) -> dict[int, str]:
    """``{pid: command line}`` of every live process of the session ``pid`` leads (zombies excluded)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, sid = fields[0], int(fields[3])
        if sid == pid and state != "Z":
            found[int(entry)] = cmd
    return found


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(argv, env=None):
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    environ.update(env or {})
    return subprocess.Popen(
        [sys.executable, str(ROOT / "_theorycheck_cli.py"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C reaches the command
    )


def _workers(proc) -> list[int]:
    """The pool's worker processes: children of the forkserver, itself a child of the command."""
    procs = _session(proc.pid)
    servers = [p for p, cmd in procs.items() if "forkserver" in cmd and _ppid(p) == proc.pid]
    return [p for p in procs if _ppid(p) in servers]


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def _signal_when(proc, ready, signum, *, group: bool, timeout: float = 600):
    """Poll ``ready()`` until true (the command still running), then send ``signum`` to the command or its group;
    return ``(returncode, stdout, stderr, seconds to exit, processes of the session left 30 s after)``."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the command ended before it was ready: {proc.returncode}\n{out}\n{err}")
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.05)
    (os.killpg if group else os.kill)(proc.pid, signum)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - t0
    end = time.monotonic() + 30
    while _session(proc.pid) and time.monotonic() < end:  # the forkserver and tracker go when their pipes close
        time.sleep(0.05)
    return proc.returncode, out, err, took, _session(proc.pid)


def _kill_session(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


#: A user's claim module for ``verify --claims``: four checks that each run 300 s (so that the pool is used and
#: is busy when the signal comes), each writing a file when it starts (the test's readiness signal), and a quick
#: one whose cost hint puts it first in the queue: the one row finished when the slow ones have started.
_SLOW_CLAIMS = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    from theorycheck.report import Claim, ClaimResult

    def check(p, inject=None):
        Path(os.environ["TC_STARTED"], f"{p['k']}-{os.getpid()}").write_text("")
        end = time.monotonic() + 300
        while time.monotonic() < end:
            pass
        return ClaimResult(True, 1.0, 1.0, 1.0)

    def fast(p, inject=None):
        return ClaimResult(True, 1.0, 1.0, 1.0)

    CLAIMS = [
        Claim(id="zz.fast", statement="fast", source="DERIVED", spec="test", check=fast,
              default_params=({},), falsify=lambda p: {}, cost=1000.0),
        Claim(id="zz.slow", statement="slow", source="DERIVED", spec="test", check=check,
              default_params=tuple({"k": k} for k in range(4)), falsify=lambda p: {}, cost=300.0),
    ]
    """
)


@pytest.mark.parametrize(
    ("signum", "group"),
    [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGINT, True)],
    ids=["SIGTERM-to-the-command", "SIGTERM-to-the-group", "Ctrl-C"],
)
def test_verify_jobs_2_stops_its_workers_on_a_signal(tmp_path, signum, group):
    """``verify --jobs 2`` with both workers busy: one line (the partial report), exit 128 + signal, the partial
    report written and consistent (the one finished check, marked partial), and nothing left of the session."""
    (tmp_path / "started").mkdir()
    (tmp_path / "slow_claims.py").write_text(_SLOW_CLAIMS)
    out = tmp_path / "rep"
    argv = ["verify", "--claims", str(tmp_path / "slow_claims.py"), "--only", "zz.", "--jobs", "2"]
    argv += ["--quiet", "--no-figures", "--out", str(out)]
    cache = tmp_path / "cache"  # a fresh result cache: the finished row is stored there, which the test can see
    proc = _start(argv, env={"TC_STARTED": str(tmp_path / "started"), "THEORYCHECK_CACHE_DIR": str(cache)})

    def ready():  # both workers busy, and the quick check's row received by the command (stored in the cache)
        stored = [p for p in cache.rglob("*.json") if p.name != "timings.json" and not p.name.startswith(".")]
        return len(list((tmp_path / "started").iterdir())) >= 2 and bool(stored)

    try:
        code, stdout, err, took, left = _signal_when(proc, ready, signum, group=group)
    finally:
        _kill_session(proc)
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    assert code == 128 + signum, err
    partial = f"PARTIAL REPORT: interrupted ({name}) after 1 of 5 checks"
    assert err == f"theorycheck verify: {partial}; the partial report is in {out}\n"
    assert took < 60  # not the 300 s of the running checks
    assert left == {}, left
    data = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in data["claims"]] == ["zz.fast"]
    assert data["skipped"][0].startswith(partial)


@pytest.mark.parametrize(
    ("signum", "group"), [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["SIGTERM-to-the-command", "Ctrl-C"]
)
def test_dynamics_jobs_2_stops_its_workers_on_a_signal(tmp_path, signum, group):
    """``dynamics --jobs 2`` with two cells of 100,000 steps running: one line, exit 128 + signal, within seconds
    (Ctrl-C used to wait 17 s for the running cells), nothing left of the session and no output folder."""
    out = tmp_path / "dyn"
    argv = ["dynamics", "--jobs", "2", "--lr", "10,20", "--init-scale", "0.01", "--steps", "100000"]
    proc = _start([*argv, "--quiet", "--no-figures", "--out", str(out)])
    try:
        ready = lambda: (w := _workers(proc)) and len(w) == 2 and min(map(_cpu_seconds, w)) > 1.0  # noqa: E731
        code, stdout, err, took, left = _signal_when(proc, ready, signum, group=group)
    finally:
        _kill_session(proc)
    assert code == 128 + signum, err
    assert err == f"theorycheck dynamics: interrupted{' (SIGTERM)' if signum == signal.SIGTERM else ''}\n"
    assert took < 60
    assert left == {}, left
    assert not out.exists() or not any(out.iterdir())


def test_a_swallowed_sigterm_is_still_delivered_when_no_thread_can_start(monkeypatch, capsys):
    """The redelivery normally uses a timer thread; a process at its thread limit (``RuntimeError: can't start new
    thread``, seen once in CI) flags the signal in the main thread instead: still one line and exit 143."""
    libc = ctypes.CDLL(None)
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def cmp(a, b):
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    def command(args):
        arr = (ctypes.c_int * 3)(3, 1, 2)
        libc.qsort(arr, 3, ctypes.sizeof(ctypes.c_int), compare(cmp))
        for _ in range(10_000):
            time.sleep(0.001)
        raise AssertionError("the SIGTERM was lost in the callback")

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Timer, "start", no_thread)
    monkeypatch.setattr(_spec(), "run", command)
    assert cli.main(["spec"]) == 143
    assert capsys.readouterr().err == "theorycheck spec: interrupted (SIGTERM)\n"
