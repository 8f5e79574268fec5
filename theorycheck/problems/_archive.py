"""The reference archive: the built-in solvers' records on the default set, shipped with the package.

``theorycheck benchmark --archive FILE`` writes one (gzipped JSON: format, package version, date, command,
budget, machine, the reference workload's seconds, and one compact record per run);
``theorycheck benchmark --solver my.py:solve --compare-archive [FILE]`` runs only the user's solvers and ranks
them against the archive's (the shipped one, :data:`SHIPPED`, by default) without rerunning the built-ins.

**Compact records** keep every field the statistics read (:mod:`._stats`) and, of the trace, only the points
that decide a hitting time: the first point at or below each of COCO's 51 targets and each More-Wild
reduction target of the report, and the first point. So every profile, ECDF and ERT at those targets is the
same from the compact record as from the full one (tested).

**Across machines** seconds are not comparable; the archive stores the seconds of the reference workload
(:func:`~._run.reference_workload`) measured in the same run, and :func:`rescale` multiplies the archive's
times by ``ours / theirs`` (evaluation counts are kept as they are). The report says so, and flags a budget
that differs from the current run's (a record's status depends on its budget).
"""

from __future__ import annotations

import gzip
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np

from .._io import atomic_write_bytes, dumps_json
from .._version import __version__
from ._harness import TOLS
from ._stats import COCO_TARGETS, target_level

__all__ = ["compact", "write_archive", "load_archive", "rescale", "SHIPPED", "FORMAT", "KEYS", "ARCHIVE_TAG"]

FORMAT = 1
#: the archive shipped as package data (the default of ``--compare-archive``)
SHIPPED = "problems/data/archive.json.gz"
#: appended to the display name of an archived solver in a comparison
ARCHIVE_TAG = " (archive)"
KEYS = (
    "problem", "family", "model", "size", "n", "V1", "solver", "solver_name", "repeat", "status", "credited",
    "budget_seconds", "max_evals", "wall", "evals", "nfev", "ngev", "nhev", "f0", "f", "subopt_abs", "subopt_rel",
    "violation", "f_star", "f_star_lower", "cert_gap", "cert_kind", "below_lower", "answer_t", "answer_evals",
    "time_to_0.0001", "time_to_1e-08", "evals_to_0.0001", "evals_to_1e-08", "message",
)  # fmt: skip


def _num(x) -> float:
    return math.nan if x is None else float(x)


def compact(rec: dict) -> dict:
    """``rec`` with its trace cut to the points that decide a hitting time (module docstring)."""
    out = {k: rec.get(k) for k in KEYS}
    out["message"] = (rec.get("message") or "")[:200]
    trace = rec.get("trace") or []
    if not trace:
        out["trace"] = []
        return out
    levels = np.array([target_level(_num(p["subopt_rel"]), _num(p["violation"])) for p in trace])
    keep = {0}
    for tol in COCO_TARGETS:
        hit = np.flatnonzero(levels <= tol)
        if hit.size:
            keep.add(int(hit[0]))
    f_star, f0 = _num(rec.get("f_star")), _num(rec.get("f0"))
    for tau in TOLS:  # More-Wild's test f <= f* + tau (f0 - f*), as the data profiles read it
        ok = [i for i, p in enumerate(trace) if _num(p["f"]) <= f_star + tau * (f0 - f_star)]
        if ok:
            keep.add(ok[0])
    out["trace"] = [
        {k: trace[i].get(k) for k in ("t", "evals", "f", "subopt_rel", "subopt_abs", "violation")} for i in sorted(keep)
    ]
    return out


def write_archive(path, records, meta: dict) -> Path:
    """Write the compact records and the run's settings to ``path`` (gzipped JSON, atomically)."""
    doc = {
        "format": FORMAT,
        "theorycheck": __version__,
        "command": meta.get("command"),
        "budget_seconds": meta.get("budget_seconds"),
        "max_evals": meta.get("max_evals"),
        "repeats": meta.get("repeats"),
        "machine": meta.get("machine"),
        "reference": meta.get("reference"),
        "solvers": {s["solver"]: s["fingerprint"] for s in meta.get("solvers", [])},
        "records": [compact(r) for r in records],
    }
    data = gzip.compress(dumps_json(doc, indent=None).encode(), mtime=0)
    return atomic_write_bytes(Path(path), data)


def load_archive(path=None) -> dict:
    """An archive (the shipped one without ``path``); ``ValueError`` naming the file if it is not one."""
    where = str(path) if path is not None else f"theorycheck/{SHIPPED}"
    try:
        if path is None:
            raw = resources.files("theorycheck").joinpath(SHIPPED).read_bytes()
        else:
            raw = Path(path).read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(
            f"--compare-archive: {where} is not a readable archive ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("records"), list):
        raise ValueError(f"--compare-archive: {where} is not a theorycheck archive of format {FORMAT}")
    return doc


def rescale(doc: dict, our_reference_seconds: float) -> list[dict]:
    """The archive's records as solvers of a comparison: times multiplied by ``ours / theirs`` reference
    seconds, the solver named ``<name> (archive)`` (its key prefixed ``archive:``)."""
    theirs = _num((doc.get("reference") or {}).get("seconds"))
    factor = our_reference_seconds / theirs if theirs > 0 and our_reference_seconds > 0 else 1.0
    out = []
    for r in doc["records"]:
        r = dict(r)
        for k in ("wall", "answer_t", "time_to_0.0001", "time_to_1e-08"):
            if r.get(k) is not None:
                r[k] = float(r[k]) * factor
        r["trace"] = [{**p, "t": float(p["t"]) * factor} for p in r.get("trace") or []]
        r["solver"] = "archive:" + str(r["solver"])
        r["solver_name"] = str(r.get("solver_name") or r["solver"]) + ARCHIVE_TAG
        r["archive_scale"] = factor
        out.append(r)
    return out
