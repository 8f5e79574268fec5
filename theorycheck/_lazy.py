"""Lazy facades (PEP 562; the pattern of scipy and of Scientific Python's SPEC 1, "lazy loading of submodules
and functions"): a package's public names imported on first access, not when the package is imported.

A facade lists its names in one module-level table ``_LAZY = {name: (module, attribute)}`` (``module`` relative
to the package; ``attribute`` ``None`` for the module itself) and binds::

    __getattr__, __dir__ = lazy_facade(__name__, _LAZY)

``package.name`` then imports ``module`` once and caches the value in the package's namespace; ``dir()``,
``from package import name`` and ``from package import *`` (over ``__all__``) behave as with eager imports.

One case needs care: a name that is both a submodule and the function it exports (``theorycheck.nn.stage_grid``).
Importing the submodule makes Python set ``package.stage_grid = <the module>``; an eager facade overwrote it with
the function right after, a lazy one would keep the module. The package's module type therefore turns that
assignment into the function (:func:`lazy_facade` gives the package a subclass of ``ModuleType`` whose
``__setattr__`` does it), so the facade's names mean the same whatever was imported first.
The table sits at the top of the module, so every dependency stays visible there; ``tests/test_import_graph.py``
reads it as import edges (layers), and ``tests/test_lazy_imports.py`` checks that every entry resolves.
"""

from __future__ import annotations

import importlib
import sys
import types
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

    class LazyFacade(types.ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            entry = table.get(name)
            if (
                entry is not None
                and entry[1] is not None
                and isinstance(value, types.ModuleType)
                and value.__name__ == f"{package}.{name}"
            ):  # the import system binding a submodule over the name it exports: keep the export
                value = getattr(value, entry[1])
            super().__setattr__(name, value)

    LazyFacade.__qualname__ = LazyFacade.__name__ = f"LazyFacade[{package}]"
    sys.modules[package].__class__ = LazyFacade
    return __getattr__, __dir__
