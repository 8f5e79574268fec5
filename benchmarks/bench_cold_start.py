"""The README's first command from a cold start: ``theorycheck verify`` with an empty Numba cache and an empty
result cache (issue 39 item 5), as a fresh clone runs it.

Each run gets a new temporary ``NUMBA_CACHE_DIR`` and ``THEORYCHECK_CACHE_DIR`` (so every kernel compiles and
every check computes) and a new output folder, and runs ``python -m theorycheck.cli verify --quiet`` in a child
process. Recorded per run:

- wall seconds, and the **CPU seconds of the whole process tree** (user + system of the command, its forkserver
  and its worker processes; also per process: the command's own share is the part that does not run in
  parallel): read from ``/proc`` every 0.05 s for every process descended from the command and
  summed over processes (``/usr/bin/time`` would miss the workers: they are the forkserver's children, and it
  is not waited for). A process that lives less than one poll is missed (well under 1% here);
- the load average before and after and the cores: on a shared machine the wall time depends on the load,
  the CPU time much less;
- the Numba kernels compiled (index files written to the fresh cache), and the 10 slowest checks
  (``results.json``: seconds of wall time inside their worker, compilation included).

Usage::

    python benchmarks/bench_cold_start.py                  # 1 run, --jobs as verify chooses (the cores)
    python benchmarks/bench_cold_start.py --runs 3 --jobs 1 --extra=--no-figures --label "one process"

Appends a record (date, commit, ``--label``, the runs) to ``cold_start.json`` (``benchmarks/results/``, or
``$THEORYCHECK_BENCH_OUT``), keeping the earlier records. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from _common import write_json

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, float] | None:
    """``(ppid, start time, cpu seconds)`` of a live process, from ``/proc/<pid>/stat``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    ppid, utime, stime, start = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[19])
    return ppid, start, (utime + stime) / _TICK


class TreeCPU:
    """Polls ``/proc`` for the processes descended from ``root`` and keeps each one's latest CPU seconds."""

    def __init__(self, root: int, period: float = 0.05) -> None:
        self.root, self.period = root, period
        self.cpu: dict[tuple[int, int], float] = {}  # (pid, start time) -> cpu seconds
        self.role: dict[tuple[int, int], str] = {}  # the command, its forkserver, a worker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _poll(self) -> None:
        table = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (st := _stat(int(entry))) is not None:
                table[int(entry)] = st
        for pid, (_ppid, start, cpu) in table.items():
            p, seen = pid, set()
            while p in table and p not in seen and p != self.root:
                seen.add(p)
                p = table[p][0]
            if p == self.root:
                self.cpu[(pid, start)] = max(cpu, self.cpu.get((pid, start), 0.0))
                if (pid, start) not in self.role:
                    self.role[(pid, start)] = self._role(pid)

    def _role(self, pid: int) -> str:
        if pid == self.root:
            return "command"
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return "other"
        if "resource_tracker" in cmd:
            return "resource tracker"
        st = _stat(pid)
        return "forkserver" if "forkserver" in cmd and st is not None and st[0] == self.root else "worker"

    def by_role(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for key, cpu in self.cpu.items():
            out.setdefault(self.role.get(key, "other"), []).append(round(cpu, 2))
        return {k: sorted(v, reverse=True) for k, v in sorted(out.items())}

    def _run(self) -> None:
        while not self._stop.is_set():
            self._poll()
            time.sleep(self.period)

    def __enter__(self) -> TreeCPU:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.cpu.values())

    @property
    def processes(self) -> int:
        return len(self.cpu)


def one_run(jobs: int | None, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="tc-cold-") as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=f"{tmp}/numba", THEORYCHECK_CACHE_DIR=f"{tmp}/results")
        argv = [sys.executable, "-m", "theorycheck.cli", "verify", "--quiet", "--out", f"{tmp}/report", *extra]
        if jobs is not None:
            argv += ["--jobs", str(jobs)]
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with TreeCPU(proc.pid) as tree:
            out, _ = proc.communicate()
            tree._poll()
        wall = time.perf_counter() - t0
        report = Path(tmp, "report", "results.json")
        rows = json.loads(report.read_text())["claims"] if report.is_file() else []
        kernels = len(list(Path(tmp, "numba").rglob("*.nbi")))
        slow = sorted(rows, key=lambda r: -r["seconds"])[:10]
        return {
            "command": shlex.join(["theorycheck", *argv[3:]]),
            "exit_code": proc.returncode,
            "wall_seconds": round(wall, 2),
            "cpu_seconds_tree": round(tree.seconds, 2),
            "processes": tree.processes,
            "cpu_seconds_by_process": tree.by_role(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "checks": len(rows),
            "numba_kernels_compiled": kernels,
            "slowest_checks": [{"claim": r["id"], "seconds": round(r["seconds"], 2)} for r in slow],
            "tail": out.strip().splitlines()[-2:],
        }


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_HERE)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _earlier_records() -> list:
    """The records of the results file this run appends to (none if it does not exist yet)."""
    folder = Path(os.environ.get("THEORYCHECK_BENCH_OUT") or _HERE / "results")
    try:
        return list(json.loads((folder / "cold_start.json").read_text()).get("records", []))
    except (OSError, ValueError):
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="cold runs (default: 1)")
    ap.add_argument("--jobs", type=int, default=None, help="verify --jobs (default: verify's own, the cores)")
    ap.add_argument("--extra", default="", help="more verify arguments, e.g. --extra=--no-figures")
    ap.add_argument("--label", default="", help="what this record measures, e.g. 'before the change'")
    args = ap.parse_args()
    runs = []
    for k in range(args.runs):
        r = one_run(args.jobs, shlex.split(args.extra))
        print(
            f"run {k}: exit {r['exit_code']}, wall {r['wall_seconds']} s, CPU {r['cpu_seconds_tree']} s over "
            f"{r['processes']} processes, load {r['load_before'][0]} -> {r['load_after'][0]}, "
            f"{r['numba_kernels_compiled']} kernels compiled",
            flush=True,
        )
        runs.append(r)
    record = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": _commit(),
        "label": args.label,
        "cores": os.cpu_count(),
        "jobs": args.jobs,
        "extra": args.extra,
        "runs": runs,
    }
    path = write_json(
        "cold_start",
        {
            "benchmark": "cold start of `theorycheck verify` (empty Numba cache, empty result cache)",
            "records": [*_earlier_records(), record],  # every record kept: before/after comparisons stay readable
        },
    )
    print(f"written {path}")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
