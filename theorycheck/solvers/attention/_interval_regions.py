"""The regions of the whole-domain label certificate, in this process or as tasks on an executor (SPEC §7,
"Distributed run").

:func:`._interval_general.label_split_certificate` cuts ``R^2`` into regions (the ring around the exclusion box,
then the unbounded boxes of :func:`._interval_general.outer_regions`) and runs one branch and bound per region
(:func:`._interval_vec.branch_and_bound`). Region ``k``'s run is a deterministic function of the loss, its box and
two inputs from the regions before it: the incumbent upper bound ``U_k`` (the best so far) and the box budget
``B_k = max(1, max_boxes - n_k)`` (``n_k`` the boxes used before it). :func:`run_regions` returns the serial run's
results, region by region, bit for bit, whatever runs them:

- ``executor=None`` (the default): each region in turn, in this process, with the exact ``(U_k, B_k)``: the serial
  run.
- an executor (any :class:`concurrent.futures.Executor`; a Dask cluster through :mod:`theorycheck._dask`): every
  region not in the checkpoint is submitted at once with a guess, the incumbent after the exclusion box ``U_0`` and
  the largest budget ``G = max(1, max_boxes - n_0)``. The results are then taken in region order; a result is used
  for region ``k`` only if it is the one the serial run computes there (:func:`._interval_checkpoint.reusable`: the
  same incumbent, and a box count that shows the budget never bit). When a region improves the incumbent (its
  ``x_best`` is not ``None``) the later regions are submitted again with the new one (the stale tasks are
  cancelled); a region whose guess fails is rerun with its exact inputs. In the usual case (the float optimum's
  upper bound is never beaten outside the exclusion box, a few hundred boxes of a budget of 20,000) every guess
  holds and all regions run at once.

**Sub-box tasks.** With an executor each region's search also runs in pieces (:class:`_Tasks`): a piece's search
stops when its next round would bound :data:`SPLIT_AT` boxes or more (its frontier; :func:`run_region` with
``stop_at``), and each frontier box becomes a piece of its own (``start``, with the region's settling width ``scale``
and the incumbent its parent ended with), down the search tree. :func:`combine` joins a piece and the searches
below it, bottom up, only when no piece was cut by its budget and none below beat the incumbent: then they evaluate
exactly the boxes of the one search from the piece's boxes (each box is bounded as if alone, and with a fixed
incumbent and no cut a box's fate depends on the box only), for every budget at least their box count (SPEC §7,
"Sub-box tasks", has the proof); otherwise the region runs whole with its exact inputs. A region's live boxes are
kept in lexicographic order (:func:`canonical`), in the serial run too: the pieces keep them in another order, and
only their hull is used. On a Dask cluster the :class:`LossSource` is scattered to the workers once (the tasks get
a future), not pickled with each of the hundreds of tasks.

**What a task ships.** A task gets a :class:`LossSource`: the inputs of :class:`._interval_label.LabelLoss` (``(g,
mk, U, V, mask_keys)``: ``phi`` of ``T x n`` floats, the masking and the ``W^V`` factors of ``V1 x k`` floats each,
about ``8 (T n + 2 V1 k)`` bytes: 6.5 MB pickled at 20 topics x 13,586 words, ``k = 20``) and the SHA-256 of the
loss's tables (:func:`._interval_checkpoint.fingerprint`). The worker builds the loss once per process (memoised by
that hash, with BLAS on the client's thread count: the tables pickle to 27 MB at that size, and the per-pair
coefficients the kernel packs, ``304 C(T, tau) n`` bytes, are built in the worker on its first evaluation and never
shipped) and checks the hash: a worker whose numpy or BLAS rounds the tables differently would give other (still
rigorous) bounds, so then the task reports the mismatch (at once for the later tasks of that worker) and the region
is sent again with the tables themselves (the loss without its coefficient cache). A :class:`LabelLoss` given
without its inputs is shipped as tables.

Each finished region (a whole task, or pieces once combined) is appended to the checkpoint at once (any order, with
the inputs it ran with; a combined region with the budget ``n + 2``), and a resumed run, serial or not, replays the
records that are the serial run's results.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import functools
import os
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..._threads import blas_threads, thread_info
from . import _interval_vec as vec
from ._interval_checkpoint import fingerprint, region_record, reusable
from ._interval_label import LabelLoss
from ._interval_scores import score_loss

__all__ = [
    "SPLIT_AT", "LossSource", "TablesMismatch", "canonical", "combine", "loss_source", "next_incumbent", "run_region",
    "run_regions",
]  # fmt: skip

#: With an executor, each region's search runs as pieces: a piece's search stops when the next round would bound this
#: many boxes or more, and each of those boxes becomes a piece (SPEC §7, "Sub-box tasks"; the result does not depend
#: on it).
SPLIT_AT = 4

#: The losses built in this worker process, by the hash of their tables (one kept: a worker serves one problem).
_MEMO: dict[str, LabelLoss] = {}
#: The hashes whose loss this process built differently (its tasks then get the tables at once).
_MISMATCH: set[str] = set()
_LOCK = threading.Lock()


class TablesMismatch(RuntimeError):
    """A worker built a :class:`LabelLoss` whose tables differ from the client's (another numpy or BLAS)."""


@dataclass(frozen=True)
class LossSource:
    """What a region task needs to get the loss in a worker (module docstring): ``key`` the hash of the tables,
    and ``spec = (g, mk, U, V, mask_keys)`` or the ``tables`` themselves."""

    key: str
    spec: tuple | None = None
    tables: LabelLoss | None = None
    blas: int | None = None

    def loss(self) -> LabelLoss:
        """The loss: the tables shipped, or built here from ``spec`` once per process (checked against ``key``),
        with BLAS on the client's thread count (``blas``: a BLAS product's rounding can depend on it)."""
        if self.tables is not None:
            return self.tables
        with _LOCK:
            if self.key in _MISMATCH:
                raise TablesMismatch(f"worker {_worker()}: the label loss built here differs from the client's")
            LL = _MEMO.get(self.key)
            if LL is None:
                assert self.spec is not None
                with blas_threads(self.blas) if self.blas else contextlib.nullcontext():
                    LL = LabelLoss(*self.spec)
                if fingerprint(LL) != self.key:
                    _MISMATCH.add(self.key)
                    raise TablesMismatch(f"worker {_worker()}: the label loss built here differs from the client's")
                _MEMO.clear()
                _MEMO[self.key] = LL
        return LL


def loss_source(LL: LabelLoss, spec: tuple | None) -> LossSource:
    """The :class:`LossSource` of ``LL``: its inputs ``spec`` when given (with this process's BLAS thread count),
    else its tables."""
    if spec is None:
        return _tables(LL, fingerprint(LL))
    blas = [b["threads"] for b in thread_info()["blas"] if isinstance(b.get("threads"), int)]
    return LossSource(fingerprint(LL), spec=spec, blas=max(blas) if blas else None)


def _tables(LL: LabelLoss, key: str) -> LossSource:
    light = copy.copy(LL)  # the same tables, without the per-pair coefficient cache
    light._cache = None
    return LossSource(key, tables=light)


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def next_incumbent(upper: float, out) -> float:
    """The best upper bound after a region's result ``out`` (``x_best`` not ``None``: it found a better point)."""
    _, up_r, xb_r, _, _ = out
    return float(up_r) if xb_r is not None and up_r <= upper else upper


def canonical(out):
    """``out`` (a :func:`._interval_vec.branch_and_bound` result) with its live boxes in lexicographic order of
    ``(lo, hi)``: the order in which a search keeps them carries no information (the certificate uses their hull),
    and a search run as sub-box tasks keeps them in another order (SPEC §7, "Sub-box tasks")."""
    lower, upper, x_best, n, (lo, hi) = out
    lo, hi = np.asarray(lo, float).reshape(-1, 2), np.asarray(hi, float).reshape(-1, 2)
    order = np.lexsort((hi[:, 1], hi[:, 0], lo[:, 1], lo[:, 0]))
    return lower, upper, x_best, n, (lo[order], hi[order])


def run_region(LL_or_source, k, frame, box, tol, budget, x0, upper, n_regions, stop_at=None, start=None,
               scale=None) -> dict:  # fmt: skip
    """Region ``k``'s branch and bound on ``box`` (``frame`` of :func:`._interval_scores.score_loss`) with the
    incumbent ``upper`` and the budget ``budget``: ``{"region", "out", "n_monotone", "upper_in", "budget", "cpu",
    "wall", "worker", "start", "frontier", "scale"}`` (``out`` the result of :func:`._interval_vec.branch_and_bound`;
    CPU seconds of this process, ``start`` its ``time.time()`` at the start). The task of :func:`run_regions`;
    ``LL_or_source`` a :class:`LabelLoss` or a :class:`LossSource`. ``stop_at``, ``start``, ``scale``: a piece of the
    search (the first rounds up to a frontier of ``stop_at`` boxes, or the search from the frontier boxes ``start``;
    :func:`._interval_vec.branch_and_bound`)."""
    cpu, wall = time.process_time(), time.time()
    LL = LL_or_source.loss() if isinstance(LL_or_source, LossSource) else LL_or_source
    stats: dict = {}
    out = vec.branch_and_bound(
        box, None, None, functools.partial(score_loss, LL, frame=frame), offset=0.0, tol=tol, max_boxes=budget,
        x0=x0, upper=upper, one_point=True, monotone=True, stats=stats,
        desc=f"interval certificate, region {k + 1}/{n_regions}", stop_at=stop_at, start=start, scale=scale,
    )  # fmt: skip
    return {"region": k, "out": out, "n_monotone": stats.get("n_monotone", 0), "upper_in": float(upper),
            "budget": int(budget), "cpu": time.process_time() - cpu, "wall": time.time() - wall,
            "worker": _worker(), "start": wall, "frontier": stats["frontier"], "scale": stats["scale"]}  # fmt: skip


def _record(r: dict) -> dict:
    lower, upper, x_best, n, (lo, hi) = r["out"]
    rec = region_record(r["region"], lower, upper, x_best, n, lo, hi, r["n_monotone"], r["upper_in"], r["budget"])
    return {**rec, "cpu": r["cpu"], "wall": r["wall"], "worker": r["worker"]}


def _piece(r: dict) -> list[dict]:
    """The tasks behind a result: its ``"pieces"``, or the task itself (seconds, worker, start, boxes, path)."""
    if "pieces" in r:
        return r["pieces"]
    info = {key: r[key] for key in ("cpu", "wall", "worker", "start")}
    return [info | {"boxes": int(r["out"][3]), "path": list(r.get("path", ()))}]


def combine(prefix: dict, subs: list[dict], guess: int) -> dict | None:
    """The result of a search run as pieces (SPEC §7, "Sub-box tasks"): ``prefix`` its first rounds (with the
    incumbent ``U`` and budget ``guess``), ``subs`` the searches from its frontier boxes (each with the incumbent the
    prefix ended with; each a task's result or itself combined from pieces). ``None`` unless the pieces provably give
    the one search's result: no piece cut by its budget (the prefix's boxes and frontier ``<= guess - 2``, each
    sub-search's boxes ``<= guess - 2``; a combined one was checked piece by piece) and no sub-search beating the
    incumbent (``x_best`` ``None``). Then the search from the prefix's boxes with ``U`` evaluates exactly the boxes
    of the pieces, for every budget ``>= n`` (its box count): the result is recorded with ``budget = n + 2``, which
    :func:`._interval_checkpoint.reusable` takes for every budget ``>= n``."""
    lo_p, up_p, xb_p, n_p, (plo, phi) = prefix["out"]
    if n_p + len(prefix["frontier"][0]) > guess - 2:
        return None
    if any(s["out"][2] is not None or s["out"][3] > guess - 2 or s["upper_in"] != up_p for s in subs):
        return None
    n = n_p + sum(int(s["out"][3]) for s in subs)
    lower = min([float(lo_p)] + [float(s["out"][0]) for s in subs])
    live = (np.vstack([plo] + [s["out"][4][0] for s in subs]), np.vstack([phi] + [s["out"][4][1] for s in subs]))
    pieces = [p for r in [prefix, *subs] for p in _piece(r)]
    return {"region": prefix["region"], "out": canonical((lower, up_p, xb_p, n, live)),
            "n_monotone": prefix["n_monotone"] + sum(s["n_monotone"] for s in subs), "upper_in": prefix["upper_in"],
            "budget": n + 2, "cpu": sum(p["cpu"] for p in pieces), "wall": sum(p["wall"] for p in pieces),
            "worker": prefix["worker"], "start": prefix["start"], "pieces": pieces}  # fmt: skip


def _replayed(ckpt, k, upper, budget):
    """``(out, n_monotone, timing)`` of region ``k`` from a checkpoint record made with these inputs, else ``None``."""
    rec = None if ckpt is None else ckpt.find(k, upper, budget)
    if rec is None:
        return None
    out, n_mono = ckpt.replay(k, rec)
    timing = {"cpu": rec.get("cpu"), "wall": rec.get("wall"), "worker": rec.get("worker"), "replayed": True}
    return canonical(out), n_mono, timing


def _used(ckpt, k, hit):
    """``(out, n_monotone, timing)`` of a task's result taken for region ``k`` (recorded as used in ``ckpt``)."""
    if ckpt is not None:
        ckpt.used[k] = _record(hit)
    timing = {key: hit[key] for key in ("cpu", "wall", "worker", "start")} | {"replayed": False}
    if "pieces" in hit:
        timing["pieces"] = hit["pieces"]
    return canonical(hit["out"]), hit["n_monotone"], timing


class _Tasks:
    """The tasks of one distributed run (:func:`run_regions`): whole regions, or regions as pieces (each piece's
    search stops at a frontier of ``split_at`` boxes or more, and each frontier box becomes a piece of its own, down
    the search tree; SPEC §7, "Sub-box tasks"), with their futures and finished results. A pending task is
    ``(region, incumbent, budget, kind, box)``, ``kind`` ``"whole"`` or ``"piece"``, ``box`` ``None`` for a
    region's first piece, else ``(path, lo, hi, scale, incumbent of the piece)`` (``path``: the frontier indices
    from the region's first piece down)."""

    def __init__(self, LL, regions, x0s, executor, source, *, tol, guess, ckpt, split_at, upper):
        self.LL, self.regions, self.x0s, self.ex, self.source = LL, regions, x0s, executor, source
        self.tol, self.guess, self.ckpt, self.split_at, self.upper = tol, guess, ckpt, split_at, upper
        self.pending: dict[cf.Future, tuple] = {}
        self.finished: list[dict] = []
        self.nodes: dict[tuple, dict] = {}  # (region, incumbent, path) -> a piece with a frontier, its children so far
        self.shipped = self._ship(source)

    def _ship(self, source):
        """What the tasks get for the loss: on a Dask cluster the source scattered once to every worker (a future:
        not pickled again with each of the many sub-box tasks), else the source itself."""
        client = getattr(self.ex, "_client", None)
        return source if client is None or source is None else client.scatter(source, broadcast=True, hash=False)

    def submit(self, k, upper, budget, kind="whole", box=None):
        frame, region_box = self.regions[k]
        args = [self.shipped, k, frame, region_box, self.tol, budget, self.x0s[k], upper, len(self.regions)]
        stop = self.split_at if kind == "piece" else None
        if box is not None:
            _, lo, hi, scale, args[7] = box
            fut = self.ex.submit(run_region, *args, stop, (lo, hi), scale)
        else:
            fut = self.ex.submit(run_region, *args, stop)
        self.pending[fut] = (k, upper, budget, kind, box)

    def in_flight(self, k, upper) -> bool:
        return any(p[0] == k and p[1] == upper for p in self.pending.values())

    def resubmit(self, upper, after):
        """Guess the regions after ``after`` with the incumbent ``upper`` (cancel the tasks started with another
        one), unless a task, a finished result or a checkpoint record already has it."""
        self.upper = upper
        for fut, p in list(self.pending.items()):
            if p[0] > after and p[1] != upper and fut.cancel():
                del self.pending[fut]
        kind = "whole" if self.split_at is None else "piece"
        for k in range(after + 1, len(self.regions)):
            have = self.in_flight(k, upper) or any(r["region"] == k and r["upper_in"] == upper for r in self.finished)
            if not have and (self.ckpt is None or self.ckpt.find(k, upper, self.guess) is None):
                self.submit(k, upper, self.guess, kind)

    def harvest(self):
        """Wait for a task and file its result: a region's, or a piece's (whose frontier boxes become pieces)."""
        done, _ = cf.wait(list(self.pending), return_when=cf.FIRST_COMPLETED)
        for fut in done:
            k, upper, budget, kind, box = self.pending.pop(fut)
            try:
                r = fut.result()
            except TablesMismatch:
                if self.source is not None and self.source.tables is None:
                    self.source = _tables(self.LL, self.source.key)
                    self.shipped = self._ship(self.source)
                self.submit(k, upper, budget, kind, box)
                continue
            if kind == "whole":
                self._finish(r)
            elif upper == self.upper:  # else stale: a region's pieces with an incumbent that has since changed
                self._piece_done(k, upper, () if box is None else box[0], r)

    def _finish(self, r):
        self.finished.append(r)
        if self.ckpt is not None:
            self.ckpt.append(_record(r), used=False)

    def _piece_done(self, k, upper, path, r):
        r["path"] = path
        lo, hi = r["frontier"]
        if not len(lo):
            self._complete(k, upper, path, r)
            return
        self.nodes[(k, upper, path)] = {"piece": r, "children": {}}
        for j in range(len(lo)):
            box = (path + (j,), lo[j : j + 1], hi[j : j + 1], r["scale"], r["out"][1])
            self.submit(k, upper, r["budget"], "piece", box)

    def _complete(self, k, upper, path, got):
        """The search from a piece's boxes is complete (``got``: the piece's, or combined): hand it to the piece
        above, or finish the region."""
        if path == ():
            self._finish(got)
            return
        node = self.nodes.get((k, upper, path[:-1]))
        if node is None:
            return
        node["children"][path[-1]] = got
        if len(node["children"]) == len(node["piece"]["frontier"][0]):
            del self.nodes[(k, upper, path[:-1])]
            got = combine(node["piece"], [node["children"][i] for i in range(len(node["children"]))], self.guess)
            if got is not None:  # else nothing: the region then runs whole, with its exact inputs
                self._complete(k, upper, path[:-1], got)

    def cancel_all(self):
        for fut in self.pending:
            fut.cancel()


def _take(tasks, LL, regions, x0s, ckpt, k, upper, budget, tol):
    """Region ``k``'s result with the serial inputs ``(upper, budget)``: replayed, a task's that is the serial one,
    computed here (``tasks`` ``None``), or a task with these exact inputs waited for."""
    while True:
        got = _replayed(ckpt, k, upper, budget)
        if got is not None:
            return got
        finished = [] if tasks is None else tasks.finished
        hit = next((r for r in finished if r["region"] == k and reusable(_record(r), upper, budget)), None)
        if hit is None and tasks is None:
            hit = run_region(LL, k, regions[k][0], regions[k][1], tol, budget, x0s[k], upper, len(regions))
            if ckpt is not None:
                ckpt.append(_record(hit), used=False)
        if hit is not None:
            return _used(ckpt, k, hit)
        assert tasks is not None
        if not tasks.in_flight(k, upper):
            tasks.submit(k, upper, budget)  # no task can give the serial result: run it whole with the exact inputs
        tasks.harvest()


def run_regions(LL, regions, x0s, *, tol, max_boxes, n0, upper0, ckpt=None, executor=None, spec=None, stats=None):
    """The serial run's result of every region, in order (module docstring): a list of ``(out, timing)``, ``out`` as
    :func:`._interval_vec.branch_and_bound` returns it (its live boxes in :func:`canonical` order), ``timing``
    ``{"cpu", "wall", "worker", "replayed"}`` (and ``"pieces"``, per task, for a region run as pieces).

    ``regions``: ``(frame, box)`` pairs; ``x0s``: per region the expansion point or ``None``; ``n0``, ``upper0``:
    the boxes used and the incumbent before the first region; ``ckpt``: a
    :class:`._interval_checkpoint.RegionCheckpoint` or ``None``; ``executor``: ``None`` (this process, in turn) or a
    :class:`concurrent.futures.Executor`; ``spec``: the inputs of ``LL`` shipped to the tasks (else its tables);
    ``stats["n_monotone"]`` receives the monotonicity discards; with an executor each region's search runs as pieces cut
    at a frontier of :data:`SPLIT_AT` boxes (``None``: whole regions; the result is the same)."""
    stats = {} if stats is None else stats
    upper, n, results = float(upper0), int(n0), []
    tasks = None
    if executor is not None:
        tasks = _Tasks(LL, regions, x0s, executor, loss_source(LL, spec), tol=tol, guess=max(1, max_boxes - n0),
                       ckpt=ckpt, split_at=SPLIT_AT, upper=upper)  # fmt: skip
        tasks.resubmit(upper, -1)
    try:
        for k in range(len(regions)):
            out, n_mono, timing = _take(tasks, LL, regions, x0s, ckpt, k, upper, max(1, max_boxes - n), tol)
            stats["n_monotone"] = stats.get("n_monotone", 0) + n_mono
            results.append((out, timing))
            n += int(out[3])
            new = next_incumbent(upper, out)
            if tasks is not None and new != upper:
                tasks.resubmit(new, k)
            upper = new
    finally:
        if tasks is not None:
            tasks.cancel_all()
    return results
