"""Dask ``distributed`` as a :class:`concurrent.futures.Executor` for sweeps, training grids and claims.

Every parallel entry point of the package takes an ``Executor`` (DESIGN "Scale-out"); this module
turns what a user has -- a :class:`distributed.Client`, a scheduler address such as
``"tcp://127.0.0.1:8786"``, or nothing -- into one, with ``distributed``'s own futures
(:meth:`distributed.Client.get_executor`; no job system of ours). A task lost with a worker is
rescheduled by the scheduler on another worker (``distributed.scheduler.allowed-failures``), so a
map over an executor from here returns every result, in order.

Results do not depend on where a task runs: each task is a pure function of its arguments (the
seeds are derived before submission), so a sweep on a cluster equals the serial run bit for bit.
Workers must import the same ``theorycheck`` version; tasks that write files (training grids) need
the output folder on a file system the workers share.

``distributed`` is the optional ``dask`` extra: without it the functions here raise
:class:`ImportError` naming ``pip install "theorycheck[dask]"``.
"""

from __future__ import annotations

import concurrent.futures as cf
import re
import socket
import time
from contextlib import contextmanager

from ._validate import MissingExtra, check_real

__all__ = [
    "INSTALL_HINT",
    "DEFAULT_TIMEOUT",
    "SchedulerUnreachable",
    "require_distributed",
    "is_client",
    "get_client",
    "ClusterExecutor",
    "client_executor",
    "scheduler_executor",
    "resolve_executor",
]

#: How to install the optional dependency (quoted in every "not installed" error).
INSTALL_HINT = 'pip install "theorycheck[dask]"'

#: Seconds to wait for a scheduler to answer, and for it to have at least one worker.
DEFAULT_TIMEOUT = 30.0

#: Seconds a first TCP connection to a scheduler's host and port may take (a refused or silent port fails
#: within this, before ``distributed``'s retries): a bad or unreachable ``--scheduler`` ends in seconds.
CONNECT_TIMEOUT = 3.0

_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
_HOST_PORT = re.compile(r"^(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.\-]+)):(?P<port>[0-9]{1,5})/?$")
_EXAMPLE = "an address such as 'tcp://127.0.0.1:8786' (SCHEME://HOST:PORT, scheme one of " + ", ".join(_SCHEMES) + ")"


class SchedulerUnreachable(ConnectionError, ValueError):
    """No Dask scheduler answered at the given address within the timeout (or it has no worker).

    Also a :class:`ValueError` so that the command line reports it as a bad ``--scheduler`` value."""


def require_distributed():
    """Import and return ``distributed``; :class:`~theorycheck._validate.MissingExtra` (an ``ImportError``) naming the
    ``dask`` extra if missing."""
    try:
        import distributed
    except ImportError as exc:
        raise MissingExtra(
            f"running on a Dask cluster (--scheduler) needs the optional 'distributed' package, which is not "
            f"installed: {INSTALL_HINT}"
        ) from exc
    return distributed


def is_client(obj) -> bool:
    """True if ``obj`` is a :class:`distributed.Client` (without importing ``distributed`` otherwise)."""
    import sys

    mod = sys.modules.get("distributed")
    return mod is not None and isinstance(obj, mod.Client)


def _check_address(scheduler) -> str:
    if not isinstance(scheduler, str):
        raise TypeError(
            "scheduler must be a distributed.Client, a scheduler address string such as "
            f"'tcp://127.0.0.1:8786', or None; got {type(scheduler).__name__}"
        )
    address = scheduler.strip()
    if not address or any(c.isspace() for c in address):
        raise ValueError(f"scheduler must be {_EXAMPLE}, got {scheduler!r}")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address  # distributed's default scheme
    if scheme not in _SCHEMES:
        raise ValueError(f"scheduler must be {_EXAMPLE}, got {scheduler!r} (unknown scheme {scheme!r})")
    if scheme != "inproc":
        m = _HOST_PORT.match(rest)
        if m is None or not 1 <= int(m["port"]) <= 65535:
            raise ValueError(f"scheduler must be {_EXAMPLE}, got {scheduler!r} (no HOST:PORT with a port 1-65535)")
    return address


#: The most bytes a Dask scheduler's first message (its handshake, a few hundred bytes) may announce.
_HANDSHAKE_MAX = 1 << 20


def _probe(address: str, timeout: float) -> None:
    """One TCP connection to the host and port of ``address`` (``tcp``), closed at once, within
    ``min(timeout, CONNECT_TIMEOUT)`` seconds for the connection and as long again for the scheduler's first message:
    a refused, silent or unresolvable address, or a service that is not a Dask scheduler (an HTTP server, a
    database), raises :class:`SchedulerUnreachable` without waiting for ``distributed``'s connection retries.

    A Dask scheduler speaks first: on every new connection it sends its handshake (``distributed.comm``: an 8-byte
    little-endian length, then frames holding a msgpack map with the key ``pickle-protocol``). Another service
    sends nothing (it waits for a request) or something else; ``distributed`` would then wait for minutes, or read
    the first 8 bytes of the reply as a length (an ``HTTP/1.1 ...`` reply announces 3 EiB)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return
    m = _HOST_PORT.match(rest)
    assert m is not None  # _check_address
    host, port = m["ip6"] or m["host"], int(m["port"])
    wait = min(timeout, CONNECT_TIMEOUT)
    try:
        sock = socket.create_connection((host, port), timeout=wait)
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        raise SchedulerUnreachable(
            f"could not connect to the Dask scheduler at {address} ({why} within {wait:g} s); "
            f"is 'dask scheduler' running there?"
        ) from exc
    with sock:
        if scheme != "tcp":  # TLS and websockets speak their own handshake first: left to distributed
            return
        problem = _handshake_problem(sock, wait)
    if problem is not None:
        raise SchedulerUnreachable(
            f"{address} answers, but not as a Dask scheduler ({problem}); is another service on that port? "
            "Give the address 'dask scheduler' prints (tcp://HOST:PORT, default port 8786)"
        )


def _handshake_problem(sock: socket.socket, wait: float) -> str | None:
    """``None`` if the first bytes read from ``sock`` within ``wait`` seconds are a Dask handshake, else what is
    wrong with them."""
    data = b""
    deadline = time.monotonic() + wait
    try:
        while len(data) < 8 or len(data) < 8 + min(int.from_bytes(data[:8], "little"), _HANDSHAKE_MAX):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) >= 8 and int.from_bytes(data[:8], "little") > _HANDSHAKE_MAX:
                break
    except OSError:
        pass
    if not data:
        return f"nothing received within {wait:g} s"
    if len(data) < 8 or int.from_bytes(data[:8], "little") > _HANDSHAKE_MAX or b"pickle-protocol" not in data:
        head = data[:40].decode("ascii", "replace")
        shown = repr(head) if head.isprintable() or any(c.isalpha() for c in head) else f"{len(data)} bytes"
        return f"its first bytes are {shown}, not a Dask handshake"
    return None


def _wait_for_worker(client, address, timeout: float) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError) as exc:
        raise SchedulerUnreachable(
            f"the Dask scheduler at {address} has no worker after {timeout:g} s; start one with: dask worker {address}"
        ) from exc


def get_client(scheduler, *, timeout: float | None = None):
    """A :class:`distributed.Client` for ``scheduler``, or ``None`` for a local run.

    ``scheduler``: a ``Client`` (returned as is, after checking it is running and has a worker), a
    scheduler address string (``"tcp://HOST:PORT"``; a new client is connected -- close it when
    done, or use :func:`scheduler_executor`), or ``None`` (returns ``None``). An address that does
    not answer within ``timeout`` seconds (``None``: :data:`DEFAULT_TIMEOUT`), or a scheduler
    without any worker by then, raises :class:`SchedulerUnreachable` naming the address.
    """
    if scheduler is None:
        return None
    timeout = check_real("timeout", DEFAULT_TIMEOUT if timeout is None else timeout, low=0.1, high=3600.0)
    if is_client(scheduler):
        if scheduler.status not in ("running", "connecting", "newly-created"):
            raise ValueError(f"scheduler: the distributed.Client is {scheduler.status}, not running")
        _wait_for_worker(scheduler, scheduler.scheduler.address, timeout)
        return scheduler
    address = _check_address(scheduler)
    distributed = require_distributed()
    _probe(address, timeout)
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachable(
            f"could not connect to the Dask scheduler at {address} within {timeout:g} s ({exc}); "
            f"is 'dask scheduler' running there?"
        ) from exc
    try:
        _wait_for_worker(client, address, timeout)
    except BaseException:
        client.close()
        raise
    return client


class ClusterExecutor(cf.Executor):
    """``client.get_executor(pure=False)`` whose ``map`` never asks the scheduler to cancel nothing.

    ``distributed.cfexecutor.ClientExecutor.map`` ends every result iterator with
    ``client.cancel(remaining)``, also when nothing remains. The scheduler answers even an empty
    cancel with a ``cancelled-keys`` report to *every* connected client, and a client connecting at
    that moment reads it batched with its ``stream-start`` and fails ``assert len(msg) == 1`` in
    ``Client._ensure_connected`` (distributed 2026.8; seen once in our CI when a sweep on one client
    was followed at once by a new client to the same scheduler). Here futures that are not done are
    cancelled only if there are any. ``submit`` and ``shutdown`` are distributed's.
    """

    def __init__(self, client):
        self._client = client
        self._inner = client.get_executor(pure=False)

    def submit(self, fn, /, *args, **kwargs):
        return self._inner.submit(fn, *args, **kwargs)

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """``map(fn, *iterables)`` on the cluster, results in order; ``timeout`` (seconds) bounds the whole map."""
        futures = self._client.map(fn, *iterables, pure=False)
        end = None if timeout is None else time.monotonic() + timeout

        def results():
            try:
                for future in futures:
                    wait = None if end is None else max(0.0, end - time.monotonic())
                    try:
                        yield future.result(wait)
                    except TimeoutError as exc:
                        raise cf.TimeoutError from exc
            finally:
                pending = [f for f in futures if not f.done()]
                if pending:
                    self._client.cancel(pending)

        return results()

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._inner.shutdown(wait=wait)


def client_executor(client_or_address, *, timeout: float | None = None) -> cf.Executor:
    """A :class:`concurrent.futures.Executor` running on a Dask cluster (:meth:`distributed.Client.get_executor`).

    ``client_or_address``: a ``Client`` or a scheduler address (see :func:`get_client`; a client
    created here lives as long as the executor's user keeps it -- prefer :func:`scheduler_executor`
    for an address). Every call is its own task (``pure=False``): nothing is deduplicated or cached.
    """
    if client_or_address is None:
        raise ValueError("client_or_address must be a distributed.Client or a scheduler address, got None")
    return ClusterExecutor(get_client(client_or_address, timeout=timeout))


@contextmanager
def scheduler_executor(scheduler=None, *, timeout: float | None = None):
    """``with scheduler_executor(scheduler) as ex:`` -- an Executor on the cluster, or ``None`` locally.

    ``scheduler``: ``None`` (yields ``None``: run in this process), a ``Client`` (used, left open) or
    an address string (a client is connected and closed on exit). This is the helper behind the
    ``--scheduler ADDRESS`` flags.
    """
    client = get_client(scheduler, timeout=timeout)
    if client is None:
        yield None
        return
    try:
        yield ClusterExecutor(client)
    finally:
        if client is not scheduler:
            client.close()


@contextmanager
def resolve_executor(executor=None, client=None, *, timeout: float | None = None):
    """The executor a library function should use, given its ``executor=`` and ``client=`` arguments.

    ``executor``: ``None`` or any :class:`concurrent.futures.Executor`; a ``Client`` or an address
    string passed here is treated as ``client``. ``client``: a ``Client`` or a scheduler address.
    Passing both raises :class:`ValueError`. Yields ``None`` for a serial local run.
    """
    if executor is not None and (is_client(executor) or isinstance(executor, str)):
        executor, client = (None, executor) if client is None else (executor, client)
    if executor is not None and client is not None:
        raise ValueError("pass either executor= or client=, not both")
    if executor is not None:
        if not isinstance(executor, cf.Executor) and not callable(getattr(executor, "map", None)):
            raise TypeError(
                "executor must be a concurrent.futures.Executor, a distributed.Client or a scheduler address, "
                f"got {type(executor).__name__}"
            )
        yield executor
        return
    with scheduler_executor(client, timeout=timeout) as ex:
        yield ex
