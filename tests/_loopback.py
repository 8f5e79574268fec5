"""Network guard for tests that run local services (Dask clusters, a fake scheduler): loopback only."""

from __future__ import annotations

import socket

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def allow_loopback_only(monkeypatch) -> None:
    """Connections to loopback addresses only (the local services of the test); anything else raises."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    connect, create = socket.socket.connect, socket.create_connection

    def _check(address):
        if not (isinstance(address, tuple) and address[0] in LOOPBACK):
            raise RuntimeError(f"network access attempted in an offline test: {address!r}")

    def guarded_connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _check(address)
        return connect(self, address)

    def guarded_create(address, *a, **k):
        _check(address)
        return create(address, *a, **k)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "create_connection", guarded_create)
