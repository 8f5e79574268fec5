"""Lazy facades (PEP 562; the pattern of scipy and of Scientific Python's SPEC 1, "lazy loading of submodules
and functions"): a package's public names imported on first access, not when the package is imported.

A facade lists its names in one module-level table ``_LAZY = {name: (module, attribute)}`` (``module`` relative
to the package; ``attribute`` ``None`` for the module itself) and binds::

    __getattr__, __dir__ = lazy_facade(__name__, _LAZY)

``package.name`` then imports ``module`` once and caches the value in the package's namespace; ``dir()``,
``from package import name`` and ``from package import *`` (over ``__all__``) behave as with eager imports.
The table sits at the top of the module, so every dependency stays visible there; ``tests/test_import_graph.py``
reads it as import edges (layers), and ``tests/test_lazy_imports.py`` checks that every entry resolves.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_facade"]


def lazy_facade(
    package: str, table: Mapping[str, tuple[str, str | None]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` of the package ``package`` serving the names of ``table`` lazily."""

    def __getattr__(name: str) -> object:
        try:
            module, attribute = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value: object = importlib.import_module(module, package)
        if attribute is not None:
            value = getattr(value, attribute)
        setattr(sys.modules[package], name, value)  # cached: the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
