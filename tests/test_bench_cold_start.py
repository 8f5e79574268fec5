"""``benchmarks/bench_cold_start.py`` counts the CPU of a whole process tree (issue #39 item 5): a command and the
processes it starts, read from ``/proc``. Checked on a tree whose CPU is known by construction (each process
spins until its own ``process_time`` reaches a target), not against a wall clock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_cold_start

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")

SPIN = "import time\nwhile time.process_time() < {t}: pass\n"
TREE = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", {child!r}])
    while time.process_time() < 0.4:
        pass
    child.wait()
    """
).format(child=SPIN.format(t=0.6))


def test_tree_cpu_counts_the_command_and_its_children():
    proc = subprocess.Popen([sys.executable, "-c", TREE])
    with bench_cold_start.TreeCPU(proc.pid, period=0.02) as tree:
        proc.wait()
    roles = tree.by_role()
    assert set(roles) == {"command", "worker"} and len(roles["worker"]) == 1
    # 0.4 s + 0.6 s spun by construction, plus two interpreter start-ups; a poll may miss a last sliver
    assert 0.9 <= tree.seconds <= 1.6, roles
    assert roles["worker"][0] >= 0.55 and roles["command"][0] >= 0.35


def test_stat_reads_this_process():
    ppid, start, cpu = bench_cold_start._stat(os.getpid())
    assert ppid == os.getppid() and start > 0 and cpu > 0
