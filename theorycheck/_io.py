"""Atomic output folders: write under a temporary name, rename at the end.

An interrupted or failing writer never leaves a half-written folder behind: the temporary
folder lives next to the target (same file system, so the final ``os.replace`` is atomic on
POSIX) and is removed on any exception.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_directory"]


@contextmanager
def atomic_directory(out):
    """Context manager yielding a fresh temporary folder that replaces ``out`` on success.

    >>> with atomic_directory("report") as tmp:   # doctest: +SKIP
    ...     (tmp / "results.json").write_text("{}")
    """
    out = Path(os.fspath(out)).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
