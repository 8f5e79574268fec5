"""Every file theorycheck writes goes through here: one JSON policy, one atomic-write strategy.

- :func:`jsonable` / :func:`dumps_json` / :func:`write_json`: numpy scalars and arrays become
  Python numbers and lists; **every non-finite float (nan, +inf, -inf) is written as ``null``**
  (strict JSON, readable by any parser), in ``results.json``, ``optimum.json``, ``summary.json``
  and every line of ``metrics.jsonl`` alike.
- :func:`atomic_write_bytes` / :func:`atomic_write_text` / :func:`write_json`: write to a
  temporary file in the same folder, ``fsync``, then ``os.replace`` onto the target (atomic on
  POSIX): a reader sees the old file or the new one, never half of one.
- :func:`atomic_directory`: the same for a whole output folder.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = [
    "jsonable",
    "dumps_json",
    "write_json",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_directory",
]


def jsonable(x):
    """``x`` with numpy types converted, tuples as lists and non-finite floats as ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, complex):
        raise TypeError(f"complex value {x!r} cannot be written as JSON")
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    return str(x)


def dumps_json(obj, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text of ``obj`` under the package's policy (non-finite -> ``null``)."""
    return json.dumps(jsonable(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = Path(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path, obj, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """Write ``obj`` as strict JSON (:func:`dumps_json`) to ``path`` atomically."""
    return atomic_write_text(path, dumps_json(obj, indent=indent, sort_keys=sort_keys) + "\n")


@contextmanager
def atomic_directory(out):
    """Context manager yielding a fresh temporary folder that replaces ``out`` on success.

    The temporary folder lives next to the target (same file system, so the final
    ``os.replace`` is atomic on POSIX) and is removed on any exception.

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
