"""Resumable whole-domain label certificates: the finished regions, on disk (SPEC §7, "Checkpoints").

The split certificate (:func:`._interval_general.label_split_certificate`) runs one branch and bound per region
(the ring around the exclusion box, then the unbounded regions) in a fixed order. At corpus size a region takes
minutes to an hour, and the whole certificate hours. With ``certify_options={"checkpoint": PATH}`` each finished
region's result (its bounds, best point, box count, live boxes and monotonicity count, with its CPU and wall
seconds) is appended to ``PATH`` as one line of JSON, flushed and synced; a later call with the same problem and
the same ``PATH`` replays those lines in order instead of recomputing them and continues with the next region.
A region's branch and bound depends on the earlier ones only through the best upper bound so far and the box budget
left (``max_boxes`` minus the boxes of the regions before it), which the replay restores exactly (JSON floats round
trip), so a resumed certificate equals an uninterrupted one.

Each record also holds the inputs its region ran with (``upper_in``, the incumbent upper bound, and ``budget``), so a
run on an executor (:mod:`._interval_regions`), whose regions finish in any order and may run on a guessed
incumbent, appends them as they finish; a record is replayed for region ``k`` only when it is the result the serial
run would compute there (:func:`reusable`). Records of an older file without those inputs were written in region
order by a serial run and are replayed as a prefix, as before.

The file's first line names the problem by a fingerprint: SHA-256 of every interval array of the
:class:`~._interval_label.LabelLoss` (the model, masking, ``W^V`` and ``mask_keys`` enter only through them), of
the expansion point, ``tol``, radius and ``max_boxes``, the region list's constants and the package version. A file
written for another problem is refused (``ValueError`` naming it); a last line cut short by a kill is ignored.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from ..._io import atomic_write_text
from ..._version import __version__

#: Written in the header; a file of another format is refused.
FORMAT = "theorycheck label split certificate checkpoint v1"


def check_checkpoint(value) -> Path | None:
    """``certify_options['checkpoint']``: ``None`` or a file path (``str`` or path-like) in an existing folder."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError(f"certify_options['checkpoint'] must be None or a file path, got {value!r}")
    path = Path(value)
    if path.is_dir():
        raise ValueError(f"certify_options['checkpoint'] must be a file path, got the folder {path}")
    if not path.parent.is_dir():
        raise ValueError(f"certify_options['checkpoint']: the folder {path.parent} does not exist")
    if path.exists() and (not path.is_file() or not os.access(path, os.R_OK | os.W_OK)):
        raise ValueError(f"certify_options['checkpoint']: {path} is not a file this process can read and write")
    try:  # written atomically (a temporary file in its folder, renamed): tried for real before any work
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"certify_options['checkpoint']: cannot write in the folder {path.parent} ({exc.strerror or exc}); "
            "choose a writable location"
        ) from None
    return path


def fingerprint(LL, *constants) -> str:
    """SHA-256 (hex) of ``LL``'s arrays (``numpy`` arrays and the ``lo``/``hi`` of interval vectors, by attribute
    name), of ``constants`` (their ``repr``) and of the package version."""
    h = hashlib.sha256()
    h.update(f"{FORMAT}|{__version__}|{constants!r}".encode())
    for name in sorted(vars(LL)):
        value = getattr(LL, name)
        parts = [value] if isinstance(value, np.ndarray) else [getattr(value, "lo", None), getattr(value, "hi", None)]
        for a in parts:
            if isinstance(a, np.ndarray):
                h.update(name.encode())
                h.update(str((a.dtype, a.shape)).encode())
                h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def reusable(rec: dict, upper: float, budget: int) -> bool:
    """Whether the region result ``rec`` is the one :func:`._interval_vec.branch_and_bound` returns with the
    incumbent ``upper`` and the budget ``budget`` (the serial run's inputs at that region).

    The incumbent must be the same float. The budget enters only through the cut ``len(split) > (budget - n) // 2``
    of a round that has evaluated ``n`` boxes so far; a run that never cut evaluates ``n_{i+1} = n_i + 2 len(split_i)``
    boxes by its round ``i + 1``, so a run with another budget ``B`` takes the same rounds iff ``n_{i+1} <= B`` at every
    splitting round, i.e. iff its final count ``n <= B``. A run with budget ``G`` that cut once ends with ``n`` in
    ``{G - 1, G}`` (the cut fills the budget to within one box, and every later round is cut to nothing), so
    ``n <= G - 2`` proves it never cut. Hence: the same budget, or ``n <= min(budget, G - 2)``. A record of an older
    file (no ``upper_in``) was written in order by a serial run and is reusable as part of its prefix."""
    if "upper_in" not in rec:
        return bool(rec.get("_serial_prefix"))
    if float(rec["upper_in"]) != float(upper):
        return False
    g, n = int(rec["budget"]), int(rec["n_boxes"])
    return g == budget or n <= min(budget, g - 2)


class RegionCheckpoint:
    """The regions finished so far for one problem (``key``: :func:`fingerprint`), in a JSON-lines file: the records
    in the order they were written (any region order), each with the inputs it ran with."""

    def __init__(self, path, key: str):
        self.path = Path(path)
        self.key = key
        self.records: list[dict] = self._read()
        self.replayed = 0
        self.used: dict[int, dict] = {}

    def _read(self) -> list[dict]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        lines = self.path.read_text().splitlines()
        try:
            head = json.loads(lines[0])
        except json.JSONDecodeError:
            head = {}
        if head.get("format") != FORMAT or head.get("key") != self.key:
            raise ValueError(
                f"certify_options['checkpoint']: {self.path} was written for another problem or by another "
                f"theorycheck version (its header: {lines[0][:120]!r}); delete it or pass another path"
            )
        records: list[dict] = []
        prefix = True  # records of an older file: in region order from 0
        for k, line in enumerate(lines[1:]):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # cut short by a kill (only the last line can be): that region runs again
            if not isinstance(rec, dict) or not isinstance(rec.get("region"), int):
                break
            if "upper_in" not in rec:
                prefix = prefix and rec["region"] == k
                if not prefix:
                    break
                rec["_serial_prefix"] = True
            records.append(rec)
        return records

    def find(self, k: int, upper: float, budget: int) -> dict | None:
        """A record of region ``k`` reusable with the incumbent ``upper`` and the budget ``budget``
        (:func:`reusable`), or ``None``."""
        return next((r for r in self.records if r["region"] == k and reusable(r, upper, budget)), None)

    def replay(self, k: int, rec: dict):
        """Region ``k``'s result from ``rec`` (counted as replayed)."""
        self.replayed += 1
        self.used[k] = rec
        return region_result(rec)

    def append(self, record: dict, used: bool = True) -> None:
        """Add a finished region's record (any region, any order); ``used``: it enters this call's result."""
        if self._file_lines() != len(self.records) + 1:  # a new file, or a line cut short: header and regions again
            self._rewrite()
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(record)
        if used:
            self.used[record["region"]] = record

    def summary(self) -> dict:
        """The file, the regions replayed from it by this call, and the CPU and wall seconds of each region's record
        used (by region; ``None`` for an older record without them)."""
        ks = sorted(self.used)
        return {
            "path": str(self.path),
            "regions_replayed": self.replayed,
            "cpu_per_region": [self.used[k].get("cpu") for k in ks],
            "wall_per_region": [self.used[k].get("wall") for k in ks],
        }

    def _file_lines(self) -> int:
        return len(self.path.read_text().splitlines()) if self.path.exists() else 0

    def _rewrite(self) -> None:
        lines = [json.dumps({"format": FORMAT, "key": self.key, "theorycheck": __version__})]
        lines += [json.dumps({k: v for k, v in r.items() if k != "_serial_prefix"}) for r in self.records]
        atomic_write_text(self.path, "\n".join(lines) + "\n")


def open_checkpoint(path, LL, *constants) -> RegionCheckpoint | None:
    """The checkpoint at ``path`` for the problem of ``LL`` and ``constants`` (:func:`fingerprint`), or ``None``."""
    return None if path is None else RegionCheckpoint(path, fingerprint(LL, *constants))


def region_record(k, lower, upper, x_best, n, lo, hi, n_monotone, upper_in=math.inf, budget=0) -> dict:
    """One region's result as JSON-ready values (``inf`` as JSON's ``Infinity``; floats round trip), with the inputs
    it ran with: the incumbent ``upper_in`` and the box budget ``budget`` (:func:`reusable`)."""
    return {
        "region": k,
        "upper_in": float(upper_in),
        "budget": int(budget),
        "lower": float(lower),
        "upper": float(upper),
        "x_best": None if x_best is None else [float(v) for v in x_best],
        "n_boxes": int(n),
        "live_lo": np.asarray(lo, dtype=float).reshape(-1, 2).tolist(),
        "live_hi": np.asarray(hi, dtype=float).reshape(-1, 2).tolist(),
        "n_monotone": int(n_monotone),
    }


def region_result(rec: dict):
    """The branch and bound's ``(lower, upper, x_best, n, (lo, hi))`` and the monotonicity count of a record."""
    xb = None if rec["x_best"] is None else np.array(rec["x_best"])
    lo = np.array(rec["live_lo"], dtype=float).reshape(-1, 2)
    hi = np.array(rec["live_hi"], dtype=float).reshape(-1, 2)
    return (rec["lower"], rec["upper"], xb, rec["n_boxes"], (lo, hi)), rec["n_monotone"]
