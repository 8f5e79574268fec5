"""Allocator tuning for the training loop: reuse large work arrays instead of re-mapping them.

A training step allocates a few dozen work arrays of 0.1-2 MB (projections ``P``, their gradient
``dP``, attention stores, products). glibc's ``malloc`` serves blocks above its mmap threshold
(128 KiB at start, raised dynamically up to the size of a freed block) with ``mmap`` and returns
them with ``munmap``, so a step can map fresh pages and take a page fault on the first write to
each 4 KiB page: measured on the ``deep-4x4`` preset, ~290 minor faults and ~1 ms of system time
per step, and the faults of two Numba threads serialise on the kernel's memory-map lock.

:func:`keep_large_allocations` raises the mmap threshold to 32 MiB (glibc's maximum on 64-bit)
and the trim threshold to 128 MiB with ``mallopt``: the arrays are then carved from the heap and
reused step after step (measured: ~15 faults per step). The cost is that up to 128 MiB of freed
memory may stay with the process. It is process-wide, applied once, only on glibc, and only by the
training entry points (:meth:`theorycheck.nn.Trainer.run`, the training benchmark); set
``THEORYCHECK_MALLOPT=0`` to leave the allocator alone.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["ENV_VAR", "keep_large_allocations"]

#: ``THEORYCHECK_MALLOPT=0`` disables :func:`keep_large_allocations`.
ENV_VAR = "THEORYCHECK_MALLOPT"

_M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 128 * 1024 * 1024

_state: dict = {}


def keep_large_allocations() -> bool:
    """Apply the glibc thresholds above (once per process); ``True`` if they are in force.

    ``False`` (nothing changed) off glibc, when ``THEORYCHECK_MALLOPT=0``, or if ``mallopt``
    refuses a value."""
    if "applied" in _state:
        return _state["applied"]
    ok = False
    if os.environ.get(ENV_VAR, "1").strip() != "0" and platform.libc_ver()[0] == "glibc":
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            mallopt.restype = ctypes.c_int
            ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    _state["applied"] = ok
    return ok
