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

Each finished task is appended to the checkpoint at once (any order, with the inputs it ran with), and a resumed
run, serial or not, replays the records that are the serial run's results.
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

from ..._threads import blas_threads, thread_info
from . import _interval_vec as vec
from ._interval_checkpoint import fingerprint, region_record, reusable
from ._interval_label import LabelLoss
from ._interval_scores import score_loss

__all__ = ["LossSource", "TablesMismatch", "loss_source", "next_incumbent", "run_region", "run_regions"]

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


def run_region(LL_or_source, k, frame, box, tol, budget, x0, upper, n_regions) -> dict:
    """Region ``k``'s branch and bound on ``box`` (``frame`` of :func:`._interval_scores.score_loss`) with the
    incumbent ``upper`` and the budget ``budget``: ``{"region", "out", "n_monotone", "upper_in", "budget", "cpu",
    "wall", "worker"}`` (``out`` the result of :func:`._interval_vec.branch_and_bound`; CPU seconds of this process).
    The task of :func:`run_regions`; ``LL_or_source`` a :class:`LabelLoss` or a :class:`LossSource`."""
    cpu, wall = time.process_time(), time.time()
    LL = LL_or_source.loss() if isinstance(LL_or_source, LossSource) else LL_or_source
    stats: dict[str, int] = {}
    out = vec.branch_and_bound(
        box, None, None, functools.partial(score_loss, LL, frame=frame), offset=0.0, tol=tol, max_boxes=budget,
        x0=x0, upper=upper, one_point=True, monotone=True, stats=stats,
        desc=f"interval certificate, region {k + 1}/{n_regions}",
    )  # fmt: skip
    return {"region": k, "out": out, "n_monotone": stats.get("n_monotone", 0), "upper_in": float(upper),
            "budget": int(budget), "cpu": time.process_time() - cpu, "wall": time.time() - wall,
            "worker": _worker()}  # fmt: skip


def _record(r: dict) -> dict:
    lower, upper, x_best, n, (lo, hi) = r["out"]
    rec = region_record(r["region"], lower, upper, x_best, n, lo, hi, r["n_monotone"], r["upper_in"], r["budget"])
    return {**rec, "cpu": r["cpu"], "wall": r["wall"], "worker": r["worker"]}


def _resubmit(pending, finished, ckpt, submit, K, guess, upper, after):
    """Submit the regions after ``after`` with the incumbent ``upper`` (cancel the tasks started with another one),
    unless a task, a finished result or a checkpoint record already has it."""
    for fut, (k, u, _) in list(pending.items()):
        if k > after and u != upper and fut.cancel():
            del pending[fut]
    for k in range(after + 1, K):
        have = any(kk == k and u == upper for kk, u, _ in pending.values())
        have = have or any(r["region"] == k and r["upper_in"] == upper for r in finished)
        if not have and (ckpt is None or ckpt.find(k, upper, guess) is None):
            submit(k, upper, guess)


def _replayed(ckpt, k, upper, budget):
    """``(out, n_monotone, timing)`` of region ``k`` from a checkpoint record made with these inputs, else ``None``."""
    rec = None if ckpt is None else ckpt.find(k, upper, budget)
    if rec is None:
        return None
    out, n_mono = ckpt.replay(k, rec)
    return out, n_mono, {"cpu": rec.get("cpu"), "wall": rec.get("wall"), "worker": rec.get("worker"), "replayed": True}


def _used(ckpt, k, hit):
    """``(out, n_monotone, timing)`` of a task's result taken for region ``k`` (recorded as used in ``ckpt``)."""
    if ckpt is not None:
        ckpt.used[k] = _record(hit)
    return hit["out"], hit["n_monotone"], {key: hit[key] for key in ("cpu", "wall", "worker")} | {"replayed": False}


def run_regions(LL, regions, x0s, *, tol, max_boxes, n0, upper0, ckpt=None, executor=None, spec=None, stats=None):
    """The serial run's result of every region, in order (module docstring): a list of ``(out, timing)``, ``out`` as
    :func:`._interval_vec.branch_and_bound` returns it, ``timing`` ``{"cpu", "wall", "worker", "replayed"}``.

    ``regions``: ``(frame, box)`` pairs; ``x0s``: per region the expansion point or ``None``; ``n0``, ``upper0``:
    the boxes used and the incumbent before the first region; ``ckpt``: a
    :class:`._interval_checkpoint.RegionCheckpoint` or ``None``; ``executor``: ``None`` (this process, in turn) or a
    :class:`concurrent.futures.Executor`; ``spec``: the inputs of ``LL`` shipped to the tasks (else its tables);
    ``stats["n_monotone"]`` receives the monotonicity discards."""
    stats = {} if stats is None else stats
    K = len(regions)
    guess = max(1, max_boxes - n0)
    pending: dict[cf.Future, tuple[int, float, int]] = {}
    finished: list[dict] = []
    source = None if executor is None else loss_source(LL, spec)

    def submit(k, upper, budget):
        frame, box = regions[k]
        pending[executor.submit(run_region, source, k, frame, box, tol, budget, x0s[k], upper, K)] = (k, upper, budget)

    def harvest():
        nonlocal source
        done, _ = cf.wait(list(pending), return_when=cf.FIRST_COMPLETED)
        for fut in done:
            k, upper, budget = pending.pop(fut)
            try:
                r = fut.result()
            except TablesMismatch:
                if source is not None and source.tables is None:
                    source = _tables(LL, source.key)
                submit(k, upper, budget)
                continue
            finished.append(r)
            if ckpt is not None:
                ckpt.append(_record(r), used=False)

    upper, n, results = float(upper0), int(n0), []
    if executor is not None:
        _resubmit(pending, finished, ckpt, submit, K, guess, upper, -1)
    try:
        for k in range(K):
            budget = max(1, max_boxes - n)
            while True:
                got = _replayed(ckpt, k, upper, budget)
                if got is not None:
                    out, n_mono, timing = got
                    break
                hit = next((r for r in finished if r["region"] == k and reusable(_record(r), upper, budget)), None)
                if hit is None and executor is None:
                    hit = run_region(LL, k, regions[k][0], regions[k][1], tol, budget, x0s[k], upper, K)
                    if ckpt is not None:
                        ckpt.append(_record(hit), used=False)
                if hit is not None:
                    out, n_mono, timing = _used(ckpt, k, hit)
                    break
                if not any(kk == k and u == upper for kk, u, _ in pending.values()):
                    submit(k, upper, budget)  # no task can give the serial result: run it with the exact inputs
                harvest()
            stats["n_monotone"] = stats.get("n_monotone", 0) + n_mono
            results.append((out, timing))
            n += int(out[3])
            new = next_incumbent(upper, out)
            if executor is not None and new != upper:
                _resubmit(pending, finished, ckpt, submit, K, guess, new, k)
            upper = new
    finally:
        for fut in pending:
            fut.cancel()
    return results
