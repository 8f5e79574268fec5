"""The one place that sets how many threads BLAS (via ``threadpoolctl``) and Numba use.

Policy. Our matrices are small (``V1 = T v + 1`` of a few hundred at most in the claims and the
training presets), so a multi-threaded BLAS call costs more in thread wake-up than it saves, and
on a shared machine several BLAS pools oversubscribe the cores. Hence:

- **BLAS**: one thread inside the hot loops (claims, training steps, L-BFGS on small problems),
  entered with :func:`blas_threads`; the library default elsewhere.
- **Numba**: every core (Numba's own default) for the parallel kernels; one thread for tiny
  repeated calls, entered with :func:`numba_threads`.
- **BLAS called from Numba kernels** (``np.dot`` inside a parallel loop goes to SciPy's BLAS,
  which Numba loads through ``scipy.linalg.cython_blas``): always one thread, whatever else is
  asked (:func:`kernel_blas_serial`); those kernels are already parallel, and a second BLAS pool
  under every Numba worker oversubscribes the cores (measured: a 490 x 101 x 532 product ran
  ~10x slower with SciPy's OpenBLAS at 2 threads under 2 Numba threads).
- **The user's choice wins**: ``--threads N`` on every command, or the environment variable
  ``THEORYCHECK_THREADS=N``, sets both to ``N`` for the whole process (:func:`configure`) and
  replaces the "one thread" defaults above. Child processes inherit it through the environment.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from ._validate import check_int

__all__ = [
    "ENV_VAR",
    "requested",
    "configure",
    "blas_threads",
    "numba_threads",
    "small_problem",
    "kernel_blas_serial",
    "blas_serial",
    "thread_info",
    "prefer_forksafe_layer",
    "fork_is_safe",
    "numba_lock_per_process",
]

#: Environment variable read by :func:`requested` (an integer >= 1).
ENV_VAR = "THEORYCHECK_THREADS"

#: Variables set for child processes when the user asks for ``N`` threads.
_CHILD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

_state: dict = {"threads": None}


def _parse_env() -> int | None:
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be an integer >= 1, got {raw!r}") from None
    return check_int(ENV_VAR, n, low=1)


def requested() -> int | None:
    """The thread count the user asked for (:func:`configure`, else ``THEORYCHECK_THREADS``), or ``None``."""
    return _state["threads"] if _state["threads"] is not None else _parse_env()


def _max_numba() -> int:
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # numba.config sets its options at import


def configure(threads: int | None = None) -> int | None:
    """Apply the user's thread choice process-wide; return it (``None``: nothing asked, defaults kept).

    ``threads`` (``--threads``) takes precedence over ``THEORYCHECK_THREADS``. When a count ``N``
    is given: BLAS pools are limited to ``N`` (``threadpoolctl``), Numba to ``min(N, its pool
    size)``, and ``THEORYCHECK_THREADS`` plus the BLAS variables are exported for child processes.
    Raises ``ValueError`` for a count below 1 or a malformed environment value, before any change.
    """
    n = check_int("threads", threads, low=1) if threads is not None else _parse_env()
    if n is None:
        return None
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)  # not used as a context manager: stays in force
    if "numba" in sys.modules:
        sys.modules["numba"].set_num_threads(min(n, _max_numba()))
    else:  # not imported yet (``theorycheck spec`` never imports it): its pool is sized from the variable at import
        pool = int(os.environ.get("NUMBA_NUM_THREADS") or os.cpu_count() or 1)
        os.environ["NUMBA_NUM_THREADS"] = str(min(n, pool))
    os.environ[ENV_VAR] = str(n)
    for var in _CHILD_VARS:
        os.environ[var] = str(n)
    _state["threads"] = n
    return n


@contextmanager
def blas_threads(n: int | None = None):
    """Limit BLAS to ``n`` threads inside the block (default: the user's choice, else 1); restored on exit."""
    from threadpoolctl import threadpool_limits

    limit = check_int("n", n, low=1) if n is not None else (requested() or 1)
    with threadpool_limits(limits=limit, user_api="blas"):
        yield limit


@contextmanager
def numba_threads(n: int | None = None):
    """Run Numba kernels on ``n`` threads inside the block (default: the user's choice, else 1).

    Clamped to Numba's pool size; the previous count (thread-local) is restored on exit.
    """
    import numba

    limit = check_int("n", n, low=1) if n is not None else (requested() or 1)
    limit = min(limit, _max_numba())
    old = numba.get_num_threads()
    numba.set_num_threads(limit)
    try:
        yield limit
    finally:
        numba.set_num_threads(old)


@contextmanager
def small_problem(size: int, threshold: int, *, blas: bool = False, numba: bool = False):
    """Serial BLAS (``blas=True``) and/or Numba (``numba=True``) inside the block when ``size < threshold``.

    For tiny repeated calls (thread start-up outweighs the work). If the user asked for a thread
    count, that count is used instead; for ``size >= threshold`` nothing changes. Replaces the
    per-module helpers (``_kernel_threads``, ``_serial_blas``, ``single_numba_thread``).
    """
    from contextlib import ExitStack

    n = requested()
    with ExitStack() as stack:
        if n is not None or size < threshold:
            if blas:
                stack.enter_context(blas_threads(n or 1))
            if numba:
                stack.enter_context(numba_threads(n or 1))
        yield


_blas_ctl: dict = {}


@contextmanager
def blas_serial():
    """Every BLAS library at one thread inside the block, through a ``threadpoolctl`` controller made once (entering
    it costs no scan of the loaded libraries, unlike :func:`blas_threads`: for calls repeated many times, e.g. once
    per table of a search). Libraries loaded after the first call are not seen."""
    from threadpoolctl import ThreadpoolController

    if "ctl" not in _blas_ctl:
        _blas_ctl["ctl"] = ThreadpoolController()
    with _blas_ctl["ctl"].limit(limits=1, user_api="blas"):
        yield


_kernel_blas: dict = {}


def _kernel_blas_controllers():
    """threadpoolctl controllers of the BLAS that Numba's ``np.dot`` calls (SciPy's), found once."""
    if "libs" not in _kernel_blas:
        import scipy.linalg.cython_blas  # noqa: F401  (loads the library Numba's np.dot calls)
        from threadpoolctl import ThreadpoolController

        ctl = ThreadpoolController()
        libs = [
            lib
            for lib in ctl.lib_controllers
            if lib.user_api == "blas" and "scipy" in os.path.basename(os.path.dirname(lib.filepath))
        ]
        _kernel_blas["libs"] = libs
    return _kernel_blas["libs"]


@contextmanager
def kernel_blas_serial():
    """SciPy's BLAS (the one Numba kernels call) at one thread inside the block; restored on exit.

    Cheap when already serial (one ``get_num_threads`` call per library), so kernels can enter it
    on every call. NumPy's own BLAS is not touched. With a BLAS that SciPy shares with NumPy
    (e.g. a system build), both are serial inside the block."""
    changed = []
    for lib in _kernel_blas_controllers():
        n = lib.num_threads
        if n != 1:
            lib.set_num_threads(1)
            changed.append((lib, n))
    try:
        yield
    finally:
        for lib, n in changed:
            lib.set_num_threads(n)


def thread_info() -> dict:
    """Current settings: ``requested``, Numba's thread count and pool size, and BLAS libraries' counts."""
    import numba
    from threadpoolctl import threadpool_info

    blas = [
        {"library": d.get("internal_api"), "threads": d.get("num_threads")}
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]
    return {
        "requested": requested(),
        "numba_threads": numba.get_num_threads(),
        "numba_pool": _max_numba(),
        "blas": blas,
    }


def prefer_forksafe_layer() -> None:
    """Ask Numba for a fork-safe threading layer if it has not launched one yet (no effect afterwards).

    A process that forks workers (the benchmark harness's zygotes, :mod:`theorycheck.problems._zygote`) must not
    have run a parallel kernel on GNU OpenMP: a forked child that then runs one is terminated by
    Numba ("fork() called from a process already using GNU OpenMP"). ``"forksafe"`` picks TBB,
    Intel OpenMP or the built-in work queue, whichever is installed. The kernels' results do not
    depend on the layer (they give the same bits on any thread count).
    """
    import numba

    if _layer_launched() is None:
        numba.config.THREADING_LAYER = "forksafe"  # type: ignore[attr-defined]  # read when the layer launches


def _layer_launched() -> str | None:
    import numba

    try:
        return str(numba.threading_layer())
    except ValueError:  # no parallel kernel has run in this process yet
        return None


def fork_is_safe() -> bool:
    """Whether a child forked now may run Numba's parallel kernels: False once GNU OpenMP has launched here."""
    return _layer_launched() != "omp"


def numba_lock_per_process() -> None:
    """In a worker process started by ``forkserver`` or ``spawn`` (a pool initializer): no cross-process lock for
    Numba's threading-layer launch.

    Numba (0.60) launches its threads under a ``multiprocessing`` lock when the start method's *name contains*
    ``"fork"`` (so also for ``"forkserver"``, where it is not needed: the worker did not fork from a process whose
    layer was launching). That lock is a named semaphore registered with the resource tracker; a worker ended at
    once (Ctrl-C, SIGTERM: :func:`theorycheck._interrupt.stop_pool`) cannot unlink it, and the tracker prints
    "leaked semaphore objects" at exit. Numba's own choice for ``spawn`` (a no-op lock) is used instead. No effect
    under ``fork`` or once the layer is launched, nor with a Numba without this lock."""
    import multiprocessing

    from numba.np.ufunc import parallel

    if multiprocessing.get_start_method(allow_none=True) in ("forkserver", "spawn") and hasattr(parallel, "_nop"):
        if getattr(parallel, "_backend_init_process_lock", False) is None:
            parallel._backend_init_process_lock = parallel._nop()  # type: ignore[assignment]  # numba declares it None until set
