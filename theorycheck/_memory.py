"""Memory guards: refuse a dense allocation that cannot fit, before any work, with a clear message.

Every function that would build a dense ``V1 x V1`` (or larger) array calls :func:`check_alloc`
with the array's shape first. The limit is, in this order:

1. the function's own ``max_bytes=`` argument (when it has one),
2. the environment variable ``THEORYCHECK_MAX_BYTES`` (bytes; ``8e9``, ``512M``, ``16G`` accepted),
3. half of the memory currently available: the smallest of ``MemAvailable`` of ``/proc/meminfo``
   (physical memory where that file does not exist), the address-space limit ``RLIMIT_AS`` (``ulimit -v``)
   minus the process's current size, and the container's cgroup memory limit minus its usage
   (v2: ``memory.max - memory.current``; v1: ``memory.limit_in_bytes - memory.usage_in_bytes``),
   as on cluster and Dask workers.

Sizes are computed with Python integers, so a request for ``(10**7)**2`` entries is refused
with a ``ValueError``, never attempted (a ``MemoryError`` or an overflowed shape).

``THEORYCHECK_MAX_BYTES`` is validated (:func:`check_env`): a positive size no larger than the machine's memory
(physical plus swap); a larger value would switch the guard off and end in a ``MemoryError``.

Work is bounded the same way where it can be large for a small memory (:func:`check_work`): an entry point
that would run for days estimates its operations from its arguments and refuses above ``THEORYCHECK_MAX_SECONDS``
(default one day) at :data:`OPS_PER_SECOND`, with the estimate and the limit.
"""

from __future__ import annotations

import math
import os

try:  # POSIX only
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "MAX_BYTES_ENV",
    "MAX_SECONDS_ENV",
    "OPS_PER_SECOND",
    "check_env",
    "check_work",
    "default_max_bytes",
    "resolve_max_bytes",
    "check_alloc",
    "check_grid",
    "format_bytes",
]

MAX_BYTES_ENV = "THEORYCHECK_MAX_BYTES"
#: Environment variable: the longest estimated run accepted by :func:`check_work`, in seconds.
MAX_SECONDS_ENV = "THEORYCHECK_MAX_SECONDS"
#: The default of :data:`MAX_SECONDS_ENV`: one day.
DEFAULT_MAX_SECONDS = 86_400.0
#: Floating-point operations a second assumed by :func:`check_work`: one core's dense BLAS throughput, within a
#: factor of a few of what the structured kernels reach on the machines we measured (a conservative rate makes
#: the estimate long, never short by orders of magnitude).
OPS_PER_SECOND = 1e9
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units (``'74.5 GiB'``)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024.0 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.3g} EiB"  # pragma: no cover


def _meminfo_bytes() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` (physical memory where that file does not exist)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 8 * 2**30


def _read_int(path: str) -> int | None:
    """The integer in file ``path``; ``None`` if missing, unreadable, ``max`` (no limit) or not a number."""
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _cgroup_bytes(root: str = "/sys/fs/cgroup") -> int | None:
    """Memory left under the cgroup limit: v2 ``memory.max - memory.current``, else v1
    ``memory/memory.limit_in_bytes - memory/memory.usage_in_bytes``; ``None`` without a limit.

    A v1 limit of ``2**62`` or more (the kernel's "unlimited", a page-rounded ``LONG_MAX``) is no limit.
    """
    for limit_file, usage_file in (
        ("memory.max", "memory.current"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
    ):
        limit = _read_int(os.path.join(root, limit_file))
        if limit is None or limit >= 2**62:
            continue
        usage = _read_int(os.path.join(root, usage_file)) or 0
        return max(limit - usage, 0)
    return None


def _rlimit_bytes(status: str = "/proc/self/status") -> int | None:
    """Address space left under ``RLIMIT_AS`` (soft limit minus the process's ``VmSize``); ``None`` without one."""
    if resource is None:  # pragma: no cover - Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = 0
    try:
        with open(status) as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return max(soft - used, 0)


def _available_bytes() -> int:
    """The memory this process can still allocate: the minimum of ``MemAvailable``, the ``RLIMIT_AS``
    headroom and the cgroup (v2 or v1) headroom (the last two where set)."""
    limits = [_meminfo_bytes(), _rlimit_bytes(), _cgroup_bytes()]
    return min(x for x in limits if x is not None)


def _machine_bytes() -> int | None:
    """Physical memory plus swap (``MemTotal + SwapTotal`` of ``/proc/meminfo``; ``None`` where unknown)."""
    total = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "SwapTotal"):
                    total[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return sum(total.values()) if "MemTotal" in total else None


def _parse_bytes(text: str) -> int:
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    suffix = s[-1] if s and s[-1] in _SUFFIX else ""
    number = s[: len(s) - len(suffix)] if suffix else s
    try:
        value = float(number) * _SUFFIX[suffix]
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{MAX_BYTES_ENV}={text!r} is not a positive size; use bytes such as 8e9, 512M or 16G")
    machine = _machine_bytes()
    if machine is not None and value > machine:
        raise ValueError(
            f"{MAX_BYTES_ENV}={text!r} ({format_bytes(value)}) is more than this machine's memory "
            f"({format_bytes(machine)} with swap): the guard would let through what cannot be allocated; "
            f"use at most {format_bytes(machine)}"
        )
    return int(value)


def _max_seconds() -> float:
    """``THEORYCHECK_MAX_SECONDS`` (a positive finite number of seconds) or :data:`DEFAULT_MAX_SECONDS`."""
    text = os.environ.get(MAX_SECONDS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{MAX_SECONDS_ENV}={text!r} is not a positive number of seconds (e.g. 3600)")
    return value


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            n = seconds / size
            return f"{n:.3g} {unit if f'{n:.3g}' != '1' else unit[:-1]}"
    return f"{seconds:.3g} s"


def check_work(what: str, operations, *, alternative: str = "") -> float:
    """Raise ``ValueError`` if ``operations`` (floating-point operations, a Python number of any size) would take
    longer than ``THEORYCHECK_MAX_SECONDS`` (default one day) at :data:`OPS_PER_SECOND`; return the estimate in
    seconds. The message gives the estimate, the rate and the limit, and ``alternative`` if given."""
    seconds = float(operations) / OPS_PER_SECOND
    limit = _max_seconds()
    if seconds > limit:
        msg = (
            f"{what}: about {float(operations):.3g} operations, an estimated {_duration(seconds)} at "
            f"{OPS_PER_SECOND:.0e} a second, above the time limit {_duration(limit)} (${MAX_SECONDS_ENV})"
        )
        raise ValueError(msg + (f". Use {alternative} instead" if alternative else ""))
    return seconds


def check_env() -> None:
    """Raise the ``ValueError`` of a malformed ``THEORYCHECK_MAX_BYTES`` now: a command calls this before any work,
    so that a bad value is one error up front, not the error of every check that allocates."""
    env = os.environ.get(MAX_BYTES_ENV)
    if env:
        _parse_bytes(env)
    _max_seconds()


def default_max_bytes() -> int:
    """The limit without an explicit argument: ``THEORYCHECK_MAX_BYTES`` or half the available memory
    (the smallest of ``MemAvailable``, the ``RLIMIT_AS`` headroom and the cgroup headroom)."""
    env = os.environ.get(MAX_BYTES_ENV)
    if env:
        return _parse_bytes(env)
    return _available_bytes() // 2


def resolve_max_bytes(max_bytes=None) -> int:
    """``max_bytes`` validated (a positive number), or :func:`default_max_bytes` when ``None``."""
    if max_bytes is None:
        return default_max_bytes()
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, float)):
        raise TypeError(f"max_bytes must be a positive number of bytes or None, got {type(max_bytes).__name__}")
    if not (max_bytes > 0 and math.isfinite(max_bytes)):
        raise ValueError(f"max_bytes must be a positive finite number of bytes, got {max_bytes!r}")
    return int(max_bytes)


def check_alloc(what: str, shape, *, itemsize: int = 8, max_bytes=None, alternative: str = "") -> int:
    """Raise ``ValueError`` if an array of ``shape`` (``itemsize`` bytes per entry) exceeds the limit.

    Parameters
    ----------
    what : str
        What would be allocated, for the message (``"alpha_beta_value_matrix: dense W^V"``).
    shape : tuple of int
        The array's shape (Python ints of any size).
    alternative : str
        The structured route that avoids the allocation, named in the message.

    Returns
    -------
    int
        The number of bytes the array needs.
    """
    n = 1
    for s in shape:
        n *= int(s)
    need = n * int(itemsize)
    limit = resolve_max_bytes(max_bytes)
    if need > limit:
        dims = " x ".join(f"{int(s):,}" for s in shape)
        msg = (
            f"{what}: a dense {dims} array needs {format_bytes(need)}, above the memory limit "
            f"{format_bytes(limit)} (max_bytes= or ${MAX_BYTES_ENV}; default half the available memory)"
        )
        if alternative:
            msg += f". Use {alternative} instead"
        raise ValueError(msg)
    return need


def check_grid(
    flag: str, n: int, *, low: int, high: int, dims: int = 1, bytes_per_point: int = 8, where: str = "", max_bytes=None
) -> int:
    """A user's grid size checked before any work: ``low <= n <= high`` (a documented cap), then the grid's
    arrays (``n**dims`` points, ``bytes_per_point`` bytes each alive at once) against the memory guard.

    Both refusals are one-line ``ValueError`` s naming ``flag`` and the allowed range; ``where`` names the
    route the cap is for (``"for the paper's model with --value block"``).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{flag} must be an integer, got {n!r}")
    route = f" {where}" if where else ""
    if not low <= n <= high:
        raise ValueError(f"{flag} must lie in [{low}, {high}]{route}, got {n}")
    try:
        what = f"{flag} {n}: the grid's arrays ({bytes_per_point} bytes a point)"
        check_alloc(what, (n,) * dims, itemsize=bytes_per_point, max_bytes=max_bytes)
    except ValueError as e:
        hint = f"pass a smaller {flag} (allowed [{low}, {high}]{route}, and within the memory limit)"
        raise ValueError(f"{e}; {hint}") from None
    return n
