"""The one switch that silences the progress bars of library code (``--quiet``).

Progress bars inside library routines (e.g. the ``"attention grid"`` bar of the structured attention search,
reached from ``theorycheck benchmark`` certificates and from claims) have no ``progress`` argument of their own;
they are made with :func:`bar`, which is disabled while :func:`quiet` is on. The CLI turns it on for a command
run with ``--quiet`` (:func:`theorycheck.cli.common.run_command`). The setting is kept in the environment
variable :data:`ENV_VAR` so that worker processes (forked or spawned) inherit it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from tqdm.auto import tqdm

__all__ = ["ENV_VAR", "is_quiet", "set_quiet", "quiet", "bar"]

#: Environment variable: ``1`` silences the library's progress bars (inherited by child processes).
ENV_VAR = "THEORYCHECK_QUIET"


def is_quiet() -> bool:
    """True when the library's progress bars are off (:data:`ENV_VAR` set to a non-empty value other than 0)."""
    return os.environ.get(ENV_VAR, "").strip() not in ("", "0")


def set_quiet(on: bool = True) -> None:
    """Turn the library's progress bars off (``on=True``) or back on, for this process and its children."""
    if on:
        os.environ[ENV_VAR] = "1"
    else:
        os.environ.pop(ENV_VAR, None)


@contextmanager
def quiet(on: bool = True):
    """``with quiet():`` the library's progress bars are off inside the block (the previous setting is restored)."""
    old = os.environ.get(ENV_VAR)
    set_quiet(on)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


def bar(*args, disable: bool = False, **kwargs) -> tqdm:
    """``tqdm(*args, **kwargs)``, disabled when ``disable`` or :func:`is_quiet`."""
    return tqdm(*args, disable=disable or is_quiet(), **kwargs)
