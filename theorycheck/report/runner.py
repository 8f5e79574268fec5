"""Run claims for the verification report: tiers, a process pool (or any Executor) and the result cache.

A *check* is one claim on one parameter set. :func:`run_claims` runs the checks of a tier
(``"default"``: every claim's ``default_params``; ``"full"``: plus its ``full_params``), returns one
:class:`ReportRow` per check in claim/parameter order whatever order they finished in, and turns
an exception inside a check (or a lost worker) into an ERROR row.

Parallel runs. With ``jobs > 1`` the checks go to a :class:`concurrent.futures.ProcessPoolExecutor`
(``forkserver`` start: workers fork from a clean server that imported the claims once, never from a
parent whose BLAS/Numba threads are running); any other Executor (a Dask ``distributed`` client's
``get_executor()``) may be passed instead. Each local worker pins BLAS to one thread and Numba to
``max(1, cores // jobs)`` threads (:mod:`theorycheck._threads`; the user's ``--threads`` wins), and
uses Numba's on-disk cache (``cache=True`` kernels compile once per machine, not per worker).
Heavy checks are submitted first: by the seconds measured on the last run (the cache's
``timings.json``), else by the claim's static ``cost`` hint. Checks of claims sharing a ``group``
form one task (run in order in one worker, sharing in-process caches). A few quick checks
(:data:`POOL_MIN_SECONDS`) run in the calling process. A claim whose functions cannot be
pickled (a lambda) runs in the calling process. A claim loaded from a user's file (``verify --claims``)
travels as a :class:`~theorycheck.report.discovery.ClaimRef` that each worker imports by path.

Every check computes the same thing in a worker as in the calling process, so the rows (apart from
timings) do not depend on ``jobs``; the Numba thread count can change the rounding of parallel
reductions (a few ulps), never a verdict.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import time
import traceback
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import forkserver

import numba
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from .. import _threads
from .._interrupt import ignore_sigint, sigint_ignored, stop_pool
from .._io import jsonable
from .._threads import blas_threads
from .._validate import check_int
from ..nn import TrainingInterrupted
from .cache import ResultCache, SourceHasher, cacheable, check_key
from .claims import TIERS, Claim, ClaimResult
from .discovery import origin_of, resolve, shippable

__all__ = [
    "ReportRow",
    "RunInterrupted",
    "decided_by",
    "run_claims",
    "default_jobs",
    "process_pool",
    "start_pool_server",
    "close_pool",
    "POOL_MIN_SECONDS",
]

#: A local process pool is started only when the checks to run are expected to take at least this
#: many seconds in all (measured times, else ``Claim.cost`` hints): below it, start-up would dominate.
POOL_MIN_SECONDS = 5.0


@dataclass
class ReportRow:
    """One check's outcome. ``tier``: the smallest tier holding it; ``cached``: the date of a reused result.

    Parameters
    ----------
    claim : Claim
        The claim checked.
    result : ClaimResult
        Its result on one parameter set (``result.params``).
    seconds : float
        Duration of the check (of the original run for a cached row).
    error : str or None
        The exception and traceback of a check that raised (an ERROR row), else ``None``.
    tier : {"default", "full"}
        The smallest tier holding the check.
    cached : str or None
        The date a reused result was stored in the result cache; ``None``: computed in this run.

    See Also
    --------
    run_claims : Returns one ``ReportRow`` per check.
    format_table : The rows as a table.
    write_report : The rows as ``report.md`` and ``results.json``.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close, run_claims
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):  # the stage-1 minimum is 1 - 1/(tau v) (SPEC §4.2)
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=lambda p: {"W_V": np.zeros((7, 7))},
    ...     default_params=({"T": 3, "v": 2, "tau": 2},), full_params=({"T": 4, "v": 3, "tau": 2},),
    ... )
    >>> row = run_claims([claim], progress=False)[0]
    >>> row.verdict, row.decided_by, row.tier, row.cached
    ('PASS', '|measured - expected| <= 1e-12', 'default', None)
    >>> {k: row.to_json()[k] for k in ("id", "params", "expected", "passed")}
    {'id': 'demo.stage1-minimum', 'params': {'T': 3, 'v': 2, 'tau': 2}, 'expected': 0.75, 'passed': True}
    """

    claim: Claim
    result: ClaimResult
    seconds: float
    error: str | None = None
    tier: str = "default"
    cached: str | None = None

    @property
    def decided_by(self) -> str:
        """The sub-check that decided, in words: :func:`decided_by` of the result (``"raised"`` for an ERROR row)."""
        return "raised an exception" if self.error is not None else decided_by(self.result)

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "ERROR"
        return "PASS" if self.result.passed else "FAIL"

    def to_json(self) -> dict:
        r = self.result
        return {
            "id": self.claim.id,
            "statement": self.claim.statement,
            "source": self.claim.source,
            "spec": self.claim.spec,
            "tier": self.tier,
            "origin": origin_of(self.claim.id),
            "preconditions": [d for d, _ in self.claim.preconditions],
            "has_domain": self.claim.domain is not None,
            "params": jsonable(r.params),
            "decided_by": self.decided_by,
            "expected": jsonable(r.expected),
            "measured": jsonable(r.measured),
            "margin": jsonable(r.margin),
            "tolerance": jsonable(r.tolerance),
            "passed": bool(r.passed and self.error is None),
            "details": jsonable(r.details),
            "seconds": round(self.seconds, 4),
            "cached": self.cached,
            "error": self.error,
        }


def decided_by(result: ClaimResult) -> str:
    """The deciding sub-check in words: ``result.label`` when set, else generated from the comparison.

    An equality (``tolerance > 0``, :func:`~.claims.compare_close`) reads ``|measured - expected| <= tol``,
    a strict inequality (:func:`~.claims.compare_greater`) ``measured > expected``. When ``expected`` is a
    sentence (the claim's prediction in words) the measured value is an error or a statistic:
    ``error <= tol``, or ``inequality: margin > 0``.

    Parameters
    ----------
    result : ClaimResult
        A check's result.

    Returns
    -------
    str
        The sub-check in words (the ``decided by`` column of the report).

    See Also
    --------
    ReportRow : Its ``decided_by`` property (``"raised an exception"`` for an ERROR row).
    compare_all : Keeps the label of the sub-check that decided.

    Examples
    --------
    >>> from theorycheck.report import compare_close, compare_greater, decided_by
    >>> decided_by(compare_close(0.75, 0.75, tol=1e-12))
    '|measured - expected| <= 1e-12'
    >>> decided_by(compare_greater(0.3, 0.1))
    'measured > expected'
    >>> decided_by(compare_greater(0.3, 0.1, label="gap > 0.1"))
    'gap > 0.1'
    """
    if result.label:
        return str(result.label)
    tol = float(result.tolerance or 0.0)
    if isinstance(result.expected, str) and not result.expected.startswith("array("):
        return f"error <= {tol:.3g}" if tol > 0 else "inequality: margin > 0"
    return f"|measured - expected| <= {tol:.3g}" if tol > 0 else "measured > expected"


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during :func:`run_claims`: the run stopped. ``rows``: the checks that finished (cached
    or computed), in claim/parameter order; ``n_checks``: the checks the run held."""

    def __init__(self, rows: list, n_checks: int):
        self.rows, self.n_checks = rows, n_checks
        super().__init__(f"interrupted after {len(rows)} of {n_checks} checks")


def default_jobs() -> int:
    """The machine's cores available to this process.

    Returns
    -------
    int
        ``len(os.sched_getaffinity(0))`` (the cores this process may run on), else ``os.cpu_count()``;
        at least 1. The default of ``theorycheck verify --jobs``.

    See Also
    --------
    run_claims : Its ``jobs`` argument.

    Examples
    --------
    >>> from theorycheck.report import default_jobs
    >>> default_jobs() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _init_worker(numba_threads: int) -> None:
    """Process-pool initializer: Ctrl-C left to the parent (:func:`theorycheck._interrupt.ignore_sigint`), one
    BLAS thread, ``numba_threads`` Numba threads (the user's choice wins)."""
    ignore_sigint()
    _threads.numba_lock_per_process()  # a worker ended at once leaves no semaphore behind
    if _threads.requested() is not None:
        _threads.configure()
        return
    threadpool_limits(limits=1, user_api="blas")
    numba.set_num_threads(max(1, min(numba_threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]  # set at numba import


def start_pool_server():
    """Start the ``forkserver`` the pools of :func:`process_pool` fork their workers from, if it is not running; its
    import of the claims (seconds) then runs in parallel with this process. ``theorycheck verify`` calls it before
    it collects the claims and hashes their sources. Returns the multiprocessing context."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["proofs_numeric", "theorycheck.report.runner"])
    with sigint_ignored():  # the forkserver (and the workers it forks) leave Ctrl-C to this process
        forkserver.ensure_running()
    return ctx


def process_pool(jobs: int):
    """A ``forkserver`` :class:`~concurrent.futures.ProcessPoolExecutor` of ``jobs`` workers set up for claims."""
    ctx = start_pool_server()
    numba_threads = max(1, default_jobs() // jobs)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker, initargs=(numba_threads,))


def close_pool(pool, interrupted: bool) -> None:
    """Shut down a pool of :func:`process_pool`; after Ctrl-C or SIGTERM its workers are ended at once (the checks
    they run are not waited for, :func:`theorycheck._interrupt.stop_pool`)."""
    stop_pool(pool, interrupted)


def _cancel(futures, ours: bool) -> None:
    """After Ctrl-C: the futures of a caller's executor are cancelled; a pool of ours is stopped whole instead
    (:func:`close_pool`: cancelled futures would make its manager thread raise ``InvalidStateError``)."""
    if not ours:
        for fut in futures:
            fut.cancel()


def execute(claim: Claim, params: dict) -> tuple[ClaimResult, float, str | None]:
    """Run one check with BLAS on one thread (:func:`theorycheck._threads.blas_threads`).

    Returns ``(result, seconds, error)``; an exception becomes a failed result and its traceback. Ctrl-C
    is not a result: a training claim's :class:`~theorycheck.nn.TrainingInterrupted` (the trainer's SIGINT
    handler) is raised again as :class:`KeyboardInterrupt`, which stops the run.
    ``claim`` may be a :class:`~theorycheck.report.discovery.ClaimRef` (a user's claim file, imported
    here by path). Module-level so that process pools and Dask can ship it to workers.
    """
    t0 = time.perf_counter()
    try:
        claim = resolve(claim)
        with blas_threads():
            res = claim.run(params)
        err = None
    except TrainingInterrupted as exc:  # Ctrl-C inside a training claim: stop the run, not one claim's ERROR
        raise KeyboardInterrupt(str(exc)) from exc
    except (Exception, SystemExit) as exc:  # a crashing claim (or one calling sys.exit) is reported, not hidden
        res = ClaimResult(False, "", "", -math.inf, params=dict(params))
        err = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    return res, time.perf_counter() - t0, err


def execute_many(pairs) -> list[tuple[ClaimResult, float, str | None]]:
    """:func:`execute` for each ``(claim, params)`` in turn, in one process (one task of a group)."""
    return [execute(c, p) for c, p in pairs]


def _lost(claim: Claim, params: dict, exc: BaseException) -> tuple[ClaimResult, float, str]:
    res = ClaimResult(False, "", "", -math.inf, params=dict(params))
    return res, 0.0, f"worker lost: {type(exc).__name__}: {exc}"


def _timing_key(claim: Claim, tier: str) -> str:
    return claim.id if tier == "default" else f"{claim.id} --full"


def _estimate(check, timings) -> float:
    """Expected seconds of one check: measured last time (by claim and tier), else the claim's ``cost`` hint
    times its number of seeds."""
    claim, params, tier = check
    return timings.get(_timing_key(claim, tier), claim.cost * max(1, len(params.get("seeds", ()))))


def _tasks(checks, todo, timings) -> list[list[int]]:
    """Checks to run, grouped (a claim ``group`` is one task), heaviest task first."""
    groups: dict = {}
    for i in todo:
        g = checks[i][0].group
        groups.setdefault(("g", g) if g is not None else ("i", i), []).append(i)
    return sorted(groups.values(), key=lambda t: -sum(_estimate(checks[i], timings) for i in t))


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False


def _checks(claims, tier: str) -> list[tuple[Claim, dict, str]]:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    out = []
    for c in claims:
        out += [(c, dict(p), "default") for p in c.default_params]
        if tier == "full":
            out += [(c, dict(p), "full") for p in c.full_params]
    return out


def _lookup(checks, cache):
    """Cache keys (``None``: not cacheable, :func:`~theorycheck.report.cache.cacheable`) and the cached rows (by check
    index)."""
    if cache is None:
        return [None] * len(checks), {}
    hasher = SourceHasher()
    keys = [check_key(c, p, hasher) if cacheable(c, hasher) else None for c, p, _ in checks]
    hits = {}
    for i, ((c, _p, t), k) in enumerate(zip(checks, keys)):
        got = None if k is None else cache.get(k, c.id)
        if got is not None:
            res, secs, created = got
            hits[i] = ReportRow(c, res, secs, None, t, created)
    return keys, hits


def run_claims(
    claims: list[Claim],
    *,
    progress: bool = True,
    tier: str = "default",
    jobs: int = 1,
    executor: Executor | None = None,
    cache: ResultCache | None = None,
) -> list[ReportRow]:
    """Run every check of ``tier`` (see the module docstring); rows in claim/parameter order.

    ``jobs``: worker processes (1: in this process); ``executor``: any Executor to use instead
    (not shut down here); ``cache``: a :class:`~theorycheck.report.cache.ResultCache` to reuse and
    store results (``None``: compute everything, store nothing). ERROR rows are never cached. Ctrl-C stops
    the run: ``RunInterrupted`` carries the rows that finished.

    Parameters
    ----------
    claims : list of Claim
        The claims to check.
    progress : bool
        Show a progress bar over the checks.
    tier : {"default", "full"}
        ``"default"``: every claim's ``default_params``; ``"full"``: also its ``full_params``.
    jobs : int
        Worker processes, ``jobs >= 1`` (a pool starts only for several tasks expected to take at least
        ``POOL_MIN_SECONDS`` in all).
    executor : concurrent.futures.Executor, optional
        An executor to run the checks on instead (e.g. a Dask client's ``get_executor()``).
    cache : ResultCache, optional
        The result cache to reuse and store results.

    Returns
    -------
    list of ReportRow
        One row per check, in claim/parameter order (default parameters first); an exception inside a
        check, or a lost worker, is an ERROR row (``verdict == "ERROR"``, never cached).

    Raises
    ------
    ValueError
        ``jobs < 1`` or an unknown ``tier``.
    RunInterrupted
        Ctrl-C during the run (a :class:`KeyboardInterrupt` carrying the finished rows).

    See Also
    --------
    write_report : Write the rows as a report folder.
    format_table : The rows as the console table.
    collect : The claims ``theorycheck verify`` runs.
    ResultCache : Reuse results whose sources did not change.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close, run_claims
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):  # the stage-1 minimum is 1 - 1/(tau v) (SPEC §4.2)
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=lambda p: {"W_V": np.zeros((7, 7))},
    ...     default_params=({"T": 3, "v": 2, "tau": 2},), full_params=({"T": 4, "v": 3, "tau": 2},),
    ... )
    >>> rows = run_claims([claim], progress=False, tier="full")
    >>> [(r.tier, r.result.params["T"], round(r.result.expected, 6), r.verdict) for r in rows]
    [('default', 3, 0.75, 'PASS'), ('full', 4, 0.833333, 'PASS')]

    A check that raises is reported as an ERROR row, not raised:

    >>> def broken(params, inject=None):
    ...     raise RuntimeError("no closed form here")
    >>> bad = Claim(id="demo.broken", statement="Raises.", source="DERIVED", spec="-", check=broken,
    ...             falsify=lambda p: {}, default_params=({},))
    >>> row = run_claims([bad], progress=False)[0]
    >>> row.verdict, row.error.splitlines()[0]
    ('ERROR', 'RuntimeError: no closed form here')
    """
    jobs = check_int("jobs", jobs, low=1)
    checks = _checks(claims, tier)
    keys, rows = _lookup(checks, cache)
    todo = [i for i in range(len(checks)) if i not in rows]
    timings = cache.timings() if cache is not None else {}
    tasks = _tasks(checks, todo, timings)
    est = sum(_estimate(checks[i], timings) for i in todo)
    bar = tqdm(total=len(checks), initial=len(rows), desc="claims", unit="check", disable=not progress)

    def done(task, outs):
        for i, (res, secs, err) in zip(task, outs):
            claim, _, t = checks[i]
            rows[i] = ReportRow(claim, res, secs, err, t)
            if cache is not None and err is None and keys[i] is not None:
                cache.put(keys[i], claim.id, res, secs)
            bar.set_postfix_str(claim.id, refresh=False)
            bar.update(1)

    pool = executor
    if pool is None and jobs > 1 and len(tasks) > 1 and est >= POOL_MIN_SECONDS:
        pool = process_pool(jobs)
    pairs = {id(t): [(shippable(checks[i][0]), checks[i][1]) for i in t] for t in tasks}
    remote = [t for t in tasks if pool is not None and _picklable(pairs[id(t)])]
    local = [t for t in tasks if not any(t is r for r in remote)]
    interrupted, futures = False, {}
    try:
        if pool is not None:
            futures = {pool.submit(execute_many, pairs[id(t)]): t for t in remote}
        for t in local:
            done(t, execute_many(pairs[id(t)]))
        for fut in as_completed(futures):
            t = futures[fut]
            try:
                outs = fut.result()
            except Exception as exc:  # a worker died (killed, out of memory): report, never hide
                outs = [_lost(*checks[i][:2], exc) for i in t]
            done(t, outs)
    except KeyboardInterrupt:
        interrupted = True
        _cancel(futures, ours=pool is not executor)
        raise RunInterrupted([rows[i] for i in sorted(rows)], len(checks)) from None
    finally:
        if pool is not None and pool is not executor:
            close_pool(pool, interrupted)
        bar.close()
    if cache is not None:
        measured: dict[str, float] = {}
        for i in todo:
            k = _timing_key(checks[i][0], checks[i][2])
            measured[k] = max(measured.get(k, 0.0), rows[i].seconds)
        cache.record_timings(measured)
    return [rows[i] for i in range(len(checks))]
