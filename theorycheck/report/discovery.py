"""Where claims come from: the built-in registry, users' claim files, and installed plugins.

``theorycheck verify`` runs the claims of three sources through the same runner, report, explore,
cache and process pool:

- the built-in registry ``proofs_numeric`` (:data:`proofs_numeric.CLAIMS`);
- users' claim modules given with ``--claims PATH`` (:func:`load_path`): a ``.py`` file, or a folder
  whose ``*.py`` files not starting with ``_`` are each a claim module. A claim module defines
  ``CLAIM = Claim(...)`` or ``CLAIMS = [Claim(...), ...]``, like ``proofs_numeric/*.py``. It is
  imported from its path under the name ``theorycheck_user_<stem>_<8 hex digits of its path>``;
  while it runs, its folder is on ``sys.path`` so that it may import sibling helper modules;
- the entry point group ``theorycheck.claims`` of installed distributions (:func:`entry_point_claims`):
  each entry point resolves to a module (with ``CLAIM``/``CLAIMS``), a :class:`Claim` or a list of them.

Worker processes import a user module by path too: the runner ships a user claim as a
:class:`ClaimRef` (module name, path, source digest, claim id), which :func:`resolve` turns back into
the claim in the worker, re-importing the file when its source changed (a long-lived Dask worker).

Every problem is a :class:`ClaimLoadError` (a ``ValueError``) naming the path or entry point: a path
that does not exist, a module that fails to import (with its error), a module with neither ``CLAIM``
nor ``CLAIMS``, a duplicate claim id (naming both origins).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .claims import Claim

__all__ = [
    "ENTRY_POINT_GROUP",
    "USER_PREFIX",
    "ClaimLoadError",
    "ClaimRef",
    "Registry",
    "collect",
    "load_path",
    "entry_point_claims",
    "origin_of",
    "external_origin",
    "shippable",
    "resolve",
]

#: The entry point group of installed claim plugins.
ENTRY_POINT_GROUP = "theorycheck.claims"
#: Prefix of the module names under which users' claim files are imported.
USER_PREFIX = "theorycheck_user_"

# claim id -> where it was defined (every claim gathered by :func:`collect` in this process)
_ORIGINS: dict[str, str] = {}
# claim id -> (module name, path) for claims loaded from users' files
_USER: dict[str, tuple[str, str]] = {}
# claim id -> origin, for claims not built in (users' files, plugins)
_EXTERNAL: dict[str, str] = {}


class ClaimLoadError(ValueError):
    """A claim source could not be loaded (the message names the path or entry point).

    A subclass of :class:`ValueError`: a path that does not exist, a module that fails to import (with
    its error), a module with neither ``CLAIM`` nor ``CLAIMS``, or a duplicate claim id (naming both
    origins). ``theorycheck verify`` prints the message instead of a traceback.

    See Also
    --------
    load_path : Loads a user's claim file or folder.
    collect : Gathers every claim source.

    Examples
    --------
    >>> from pathlib import Path
    >>> from theorycheck.report import ClaimLoadError, load_path
    >>> try:
    ...     load_path("no_such_claims.py")
    ... except ClaimLoadError as exc:
    ...     print(exc)
    --claims no_such_claims.py: no such file or folder
    >>> _ = Path("not_claims.py").write_text("x = 1\\n")
    >>> try:
    ...     load_path("not_claims.py")
    ... except ClaimLoadError as exc:
    ...     print(str(exc).split(": ", 1)[1])
    defines neither CLAIM (a Claim) nor CLAIMS (a list of Claims)
    """


@dataclass
class Registry:
    """The claims to run (sorted by id), the built-in registry's skip reasons, each claim's origin, and the
    ids of the claims that are not built in (users' files and plugins); returned by :func:`collect`.

    Parameters
    ----------
    claims : list of Claim
        The claims, sorted by id.
    skipped : list of str
        The built-in registry's one-line reasons for the claims it could not register (e.g. a missing
        extra), each once.
    origins : dict of str to str
        Claim id -> where it was defined (a module of ``proofs_numeric``, a user's file, a plugin).
    external : frozenset of str, default frozenset()
        The ids of the claims that are not built in.

    See Also
    --------
    collect : Builds it.
    run_claims : Runs ``claims``.

    References
    ----------
    SPEC §6 (the built-in checkable claims).

    Examples
    --------
    >>> from theorycheck.report import collect
    >>> reg = collect(entry_points=False)
    >>> reg.claims == sorted(reg.claims, key=lambda c: c.id), set(reg.origins) == {c.id for c in reg.claims}
    (True, True)
    >>> reg.origins["stage1.min-loss"], reg.external
    ('proofs_numeric.stage1_min_loss', frozenset())
    """

    claims: list
    skipped: list
    origins: dict
    external: frozenset = frozenset()


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _module_name(path: str) -> str:
    stem = "".join(ch if ch.isalnum() else "_" for ch in Path(path).stem)
    return f"{USER_PREFIX}{stem}_{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def import_path(path: str, name: str | None = None):
    """Import the module file ``path`` (re-executed each call) as ``name``; registered in ``sys.modules``."""
    path = os.path.realpath(path)
    name = name or _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ClaimLoadError(f"--claims {path}: not an importable Python file")
    mod = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(path)
    sys.modules[name] = mod
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(mod)
    except SystemExit as exc:  # a module that ends the process on import (a script's sys.exit): a load error
        sys.modules.pop(name, None)
        raise ClaimLoadError(
            f"--claims {path}: the module called sys.exit({exc.code!r}) while being imported (is it a script? "
            "a claim module only defines CLAIM or CLAIMS; put script code under `if __name__ == '__main__':`)"
        ) from None
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ClaimLoadError(f"--claims {path}: the module failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        if sys.path and sys.path[0] == folder:
            del sys.path[0]
    mod.__theorycheck_digest__ = _digest(path)  # type: ignore[attr-defined]  # a module attribute set at runtime
    return mod


def claims_of(obj, origin: str) -> list[Claim]:
    """The claims of a module (``CLAIM`` and/or ``CLAIMS``), a :class:`Claim` or a list of them."""
    if isinstance(obj, Claim):
        return [obj]
    if isinstance(obj, (list, tuple)):
        found = list(obj)
    elif hasattr(obj, "CLAIM") or hasattr(obj, "CLAIMS"):
        found = ([obj.CLAIM] if hasattr(obj, "CLAIM") else []) + list(getattr(obj, "CLAIMS", []))
    elif isinstance(obj, types.ModuleType):
        raise ClaimLoadError(f"{origin}: defines neither CLAIM (a Claim) nor CLAIMS (a list of Claims)")
    else:
        raise ClaimLoadError(f"{origin}: resolves to {type(obj).__name__}, not a module, a Claim or a list of Claims")
    bad = [x for x in found if not isinstance(x, Claim)]
    if bad:
        raise ClaimLoadError(f"{origin}: CLAIM/CLAIMS must hold Claim objects, got {type(bad[0]).__name__}")
    return found


def _module_files(path: str) -> list[str]:
    p = Path(path).expanduser()
    if not p.exists():
        raise ClaimLoadError(f"--claims {path}: no such file or folder")
    if p.is_file():
        if p.suffix != ".py":
            raise ClaimLoadError(f"--claims {path}: not a .py file")
        return [str(p.resolve())]
    files = sorted(str(f.resolve()) for f in p.glob("*.py") if not f.name.startswith("_"))
    if not files:
        raise ClaimLoadError(f"--claims {path}: the folder holds no claim module (*.py not starting with _)")
    return files


def load_path(path: str | os.PathLike) -> list[tuple[Claim, str]]:
    """``(claim, origin)`` of every claim in the file or folder ``path`` (origin: the module's path).

    A claim module defines ``CLAIM = Claim(...)`` or ``CLAIMS = [Claim(...), ...]``; a folder's modules
    are its ``*.py`` files not starting with ``_`` (see the module docstring for how they are imported).

    Parameters
    ----------
    path : str or path-like
        A claim module (``.py``) or a folder of them (``verify --claims PATH``).

    Returns
    -------
    list of (Claim, str)
        Every claim with the absolute path of the module defining it, modules in sorted order.

    Raises
    ------
    ClaimLoadError
        ``path`` does not exist, is not a ``.py`` file, holds no claim module, or a module fails to
        import or defines no claims.

    See Also
    --------
    collect : Built-in, plugin and file claims together, with duplicate ids refused.
    Claim : What a claim module defines.
    run_claims : Run the loaded claims.

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("my_claims.py").write_text('''
    ... from theorycheck import TopicModel
    ... from theorycheck.report import Claim, compare_close
    ...
    ... def check(params, inject=None):  # E||p||^2 = 1/(tau v) (SPEC §1.1)
    ...     tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    ...     value = tm.expected_p_norm2() if inject is None else inject["value"]
    ...     return compare_close(value, 1 / (tm.tau * tm.v), tol=1e-12)
    ...
    ... CLAIM = Claim(id="mine.p-norm", statement="E||p||^2 = 1/(tau v).", source="DERIVED",
    ...               spec="SPEC §1.1", check=check, falsify=lambda params: {"value": 0.0},
    ...               default_params=({"T": 3, "v": 2, "tau": 2},))
    ... ''')
    >>> from theorycheck.report import load_path, run_claims
    >>> [(claim.id, Path(origin).name) for claim, origin in load_path("my_claims.py")]
    [('mine.p-norm', 'my_claims.py')]
    >>> claim = load_path("my_claims.py")[0][0]
    >>> run_claims([claim], progress=False)[0].verdict
    'PASS'
    """
    out = []
    for f in _module_files(os.fspath(path)):
        mod = import_path(f)
        for c in claims_of(mod, f):
            _USER[c.id] = (mod.__name__, f)
            out.append((c, f))
    return out


def entry_point_claims(group: str = ENTRY_POINT_GROUP) -> list[tuple[Claim, str]]:
    """``(claim, origin)`` of every entry point of ``group`` (origin: ``entry point NAME = VALUE (DIST)``)."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=group):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        origin = f"entry point {ep.name} = {ep.value}" + (f" ({dist})" if dist else "")
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:
            raise ClaimLoadError(f"{origin}: failed to load: {type(exc).__name__}: {exc}") from exc
        out += [(c, origin) for c in claims_of(obj, origin)]
    return out


def _builtin() -> tuple[list[tuple[Claim, str]], list]:
    import proofs_numeric

    found = [(c, getattr(c.check, "__module__", None) or "proofs_numeric") for c in proofs_numeric.CLAIMS]
    return found, list(proofs_numeric.SKIPPED)


def collect(paths: Iterable[str | os.PathLike] = (), *, builtins: bool = True, entry_points: bool = True) -> Registry:
    """The claims ``verify`` runs: built-in (``builtins``), installed plugins (``entry_points``) and
    the claim modules under ``paths``; a duplicate id is a :class:`ClaimLoadError` naming both origins.

    Parameters
    ----------
    paths : iterable of str or path-like
        Users' claim files or folders (:func:`load_path`).
    builtins : bool
        Include the built-in registry ``proofs_numeric.CLAIMS``.
    entry_points : bool
        Include the installed plugins of the entry point group ``theorycheck.claims``.

    Returns
    -------
    Registry
        ``claims`` (sorted by id), ``skipped`` (the built-in registry's reasons for claims it could
        not register, e.g. a missing extra), ``origins`` (claim id -> where it was defined) and
        ``external`` (the ids not built in).

    Raises
    ------
    ClaimLoadError
        A source cannot be loaded, or two sources define the same claim id.

    See Also
    --------
    load_path : One user's claim file or folder.
    select_claims : Choose claims by id pattern (``verify --only``).
    run_claims : Run them.

    References
    ----------
    SPEC §6 (the built-in checkable claims).

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("my_claims.py").write_text('''
    ... from theorycheck import TopicModel
    ... from theorycheck.report import Claim, compare_close
    ...
    ... def check(params, inject=None):  # E||p||^2 = 1/(tau v) (SPEC §1.1)
    ...     tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    ...     value = tm.expected_p_norm2() if inject is None else inject["value"]
    ...     return compare_close(value, 1 / (tm.tau * tm.v), tol=1e-12)
    ...
    ... CLAIM = Claim(id="mine.p-norm", statement="E||p||^2 = 1/(tau v).", source="DERIVED",
    ...               spec="SPEC §1.1", check=check, falsify=lambda params: {"value": 0.0},
    ...               default_params=({"T": 3, "v": 2, "tau": 2},))
    ... ''')
    >>> from theorycheck.report import ClaimLoadError, collect
    >>> reg = collect(["my_claims.py"], builtins=False, entry_points=False)
    >>> [c.id for c in reg.claims], sorted(reg.external), reg.skipped
    (['mine.p-norm'], ['mine.p-norm'], [])
    >>> try:
    ...     collect(["my_claims.py", "my_claims.py"], builtins=False, entry_points=False)
    ... except ClaimLoadError as exc:
    ...     print(str(exc)[:35])
    duplicate claim id 'mine.p-norm': d
    """
    found, skipped = _builtin() if builtins else ([], [])
    n_builtin = len(found)
    if entry_points:
        found += entry_point_claims()
    for p in paths:
        found += load_path(p)
    origins: dict[str, str] = {}
    for c, origin in found:
        if c.id in origins:
            raise ClaimLoadError(f"duplicate claim id {c.id!r}: defined in {origins[c.id]} and in {origin}")
        origins[c.id] = origin
    _ORIGINS.update(origins)
    external = frozenset(c.id for c, _ in found[n_builtin:])
    _EXTERNAL.update({i: origins[i] for i in external})
    return Registry(sorted((c for c, _ in found), key=lambda c: c.id), skipped, origins, external)


def origin_of(claim_id: str) -> str | None:
    """Where a claim gathered by :func:`collect` in this process was defined (``None`` if unknown)."""
    return _ORIGINS.get(claim_id)


def external_origin(claim_id: str) -> str | None:
    """The origin of a claim gathered by :func:`collect` from a user's file or a plugin (``None`` if built in)."""
    return _EXTERNAL.get(claim_id)


@dataclass(frozen=True)
class ClaimRef:
    """A user claim to ship to a worker: the worker imports ``path`` as ``module`` and picks claim ``id``."""

    module: str
    path: str
    digest: str
    id: str


def shippable(claim):
    """A :class:`ClaimRef` for a claim loaded from a user's file (workers cannot import it by name), else ``claim``."""
    if claim.id not in _USER:
        return claim
    name, path = _USER[claim.id]
    mod = sys.modules.get(name)
    if mod is None or not any(c is claim for c in claims_of(mod, path)):
        return claim
    return ClaimRef(name, path, mod.__theorycheck_digest__, claim.id)


def resolve(claim):
    """The :class:`Claim` behind ``claim`` (itself, or a :class:`ClaimRef` imported by path here if needed)."""
    if not isinstance(claim, ClaimRef):
        return claim
    mod = sys.modules.get(claim.module)
    if mod is None or getattr(mod, "__theorycheck_digest__", None) != claim.digest:
        mod = import_path(claim.path, claim.module)
    for c in claims_of(mod, claim.path):
        if c.id == claim.id:
            return c
    raise ClaimLoadError(f"{claim.path}: no longer defines claim {claim.id!r}")
