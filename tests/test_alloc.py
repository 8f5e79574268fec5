"""theorycheck._alloc: the glibc thresholds keep a training step's work arrays in the heap.

The property is measured, not assumed: the minor page faults of a loop that allocates, writes and
frees 30 arrays of 0.16-3.2 MB, in a fresh process, with and without :func:`keep_large_allocations`."""

import platform
import subprocess
import sys

import pytest

_SCRIPT = """
import resource, sys
import numpy as np
from theorycheck._alloc import keep_large_allocations
applied = keep_large_allocations() if sys.argv[1] == "1" else False
rng = np.random.default_rng(0)
sizes = rng.integers(20_000, 400_000, size=30)
def step():
    keep = [np.empty(int(n)) for n in sizes]
    for a in keep:
        a.fill(1.0)
step()
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) / 10)
"""


def _faults(apply: bool, env=None):
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "1" if apply else "0"], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    return out[0] == "True", float(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc mallopt only")
def test_keep_large_allocations_removes_the_page_faults_of_reused_arrays():
    applied, tuned = _faults(True)
    _, plain = _faults(False)
    assert applied
    # each array is ~40-800 pages: untuned, most steps map them afresh; tuned, the heap reuses them
    assert plain > 1000, plain
    assert tuned < plain / 20, (tuned, plain)


def test_keep_large_allocations_can_be_disabled(monkeypatch):
    import os

    env = dict(os.environ, THEORYCHECK_MALLOPT="0")
    applied, _ = _faults(True, env=env)
    assert applied is False


def test_keep_large_allocations_is_applied_once(monkeypatch):
    from theorycheck import _alloc

    monkeypatch.setattr(_alloc, "_state", {})
    first = _alloc.keep_large_allocations()
    monkeypatch.setattr(_alloc.ctypes, "CDLL", lambda *a: (_ for _ in ()).throw(AssertionError("called twice")))
    assert _alloc.keep_large_allocations() is first
