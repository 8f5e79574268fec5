"""The result cache of ``theorycheck verify``: a check is not recomputed while nothing it depends on changed.

A check (one claim on one parameter set) is keyed by the SHA-256 of

- the claim id and its parameters (canonical JSON);
- the user running it (:func:`cache_user`);
- the package version and the versions of Python, NumPy, SciPy and Numba;
- the source of every module the claim's functions live in (a user's claim file, an installed plugin's
  module) and, transitively, of every module those
  import (every ``import`` statement, at module level or inside a function, found by parsing the
  source with :mod:`ast`), followed within ``theorycheck``, ``proofs_numeric`` and any other module
  that is not installed third-party code (not under the interpreter's ``stdlib`` / ``site-packages``).

Editing the claim module or any library module it reaches therefore changes the key. Following every
import statement over-approximates what a check uses: a cache hit may be missed, never trusted wrongly.
Data files read at run time are not hashed.

The cache lives under ``$THEORYCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/theorycheck``, else
``~/.cache/theorycheck`` (:func:`cache_dir`), in one folder per user and package version,
``verify/<user>/<version>/`` (``ResultCache.directory``); never in a report folder. Results are
never shared between users or versions: besides the folder and the key, an entry records both and is
reused only if they match and, on POSIX, only if its file belongs to the user running (a cache folder
shared by several users, e.g. one ``$HOME`` or ``$XDG_CACHE_HOME`` on a shared machine, is safe).
``theorycheck verify`` says on one line how many checks it reused and from where (``--no-cache``
recomputes them). One JSON file per check, written atomically (:func:`theorycheck._io.write_json`);
floats, non-finite values and arrays (``ClaimResult.data``, for figures) are stored losslessly. An entry
that cannot be read, or does not match its key, is ignored with a :class:`CacheWarning` and the check
reruns.
"""

from __future__ import annotations

import ast
import base64
import datetime as _dt
import getpass
import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import sysconfig
import warnings
from pathlib import Path

try:
    import pwd  # POSIX only
except ImportError:  # pragma: no cover (Windows)
    pwd = None  # type: ignore[assignment]

import numba
import numpy as np
import scipy

from .._io import dumps_json, write_json
from .._version import __version__
from .claims import Claim, ClaimResult

__all__ = [
    "ENV_VAR",
    "CacheWarning",
    "ResultCache",
    "cache_dir",
    "cache_user",
    "cacheable",
    "check_key",
    "SourceHasher",
]

#: Environment variable overriding the cache folder.
ENV_VAR = "THEORYCHECK_CACHE_DIR"

_FORMAT = 2  # 2: keyed and filed by user and version
_OWN_ROOTS = ("theorycheck", "proofs_numeric")


class CacheWarning(UserWarning):
    """A cache entry was unreadable or inconsistent and is ignored (the check reruns).

    Also warned when the cache folder cannot be written (the report does not need it). An entry is
    inconsistent when its key, claim, format, user or version does not match, its checksum does not
    match its content, or its stored verdict disagrees with its margin.

    See Also
    --------
    ResultCache : The cache that warns.
    run_claims : Recomputes a check whose entry was ignored.

    Examples
    --------
    >>> import warnings
    >>> from pathlib import Path
    >>> from theorycheck.report import CacheWarning, ResultCache
    >>> cache = ResultCache("cache")
    >>> cache.directory.mkdir(parents=True)
    >>> _ = (cache.directory / "0123abcd.json").write_text("{not json")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     print(cache.get("0123abcd", "demo.claim"))
    None
    >>> [w.category.__name__ for w in caught]
    ['CacheWarning']
    """


def cache_dir() -> Path:
    """``$THEORYCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/theorycheck``, else ``~/.cache/theorycheck``.

    Returns
    -------
    pathlib.Path
        The root folder of the result cache (``~`` expanded); it is not created here.

    See Also
    --------
    ResultCache : Keeps its entries under ``cache_dir() / "verify" / <user> / <version>`` by default.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> from theorycheck.report import cache_dir
    >>> with mock.patch.dict(os.environ, {"THEORYCHECK_CACHE_DIR": "my-cache"}):
    ...     print(cache_dir().as_posix())
    my-cache
    >>> with mock.patch.dict(os.environ, {"THEORYCHECK_CACHE_DIR": "", "XDG_CACHE_HOME": "xdg"}):
    ...     print(cache_dir().as_posix())
    xdg/theorycheck
    """
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "theorycheck"


def _uid() -> int | None:
    """The real user id of this process (``None`` where the OS has none, e.g. Windows)."""
    return os.getuid() if hasattr(os, "getuid") else None


def cache_user() -> str:
    """The user the cache is kept for: the login name of this process's user id (POSIX; ``uid<N>`` when the
    id has no name, e.g. in a container), else :func:`getpass.getuser`. Environment variables such as
    ``$USER`` are not trusted (two users may share them)."""
    uid = _uid()
    if uid is None:
        try:
            return getpass.getuser()
        except Exception:  # no user name in the environment (getpass raises OSError or KeyError)
            return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name  # type: ignore[union-attr]  # pwd exists where getuid does
    except (AttributeError, KeyError):
        return f"uid{uid}"


def _folder_name(text: str) -> str:
    """``text`` as one safe path component."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "_"


def _third_party_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(dirs))


_THIRD_PARTY = _third_party_dirs()


def _module_file(name: str, root: bool = False) -> str | None:
    """The source file of module ``name`` if it is our own code or ``root`` (a claim's module), else ``None``."""
    mod = sys.modules.get(name)
    path = getattr(mod, "__file__", None) if mod is not None else None
    if path is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            return None
        path = spec.origin if spec is not None and spec.has_location else None
    if not path or not path.endswith(".py"):
        return None
    real = os.path.realpath(path)
    if not root and name.split(".")[0] not in _OWN_ROOTS:
        if "site-packages" in real or "dist-packages" in real or real.startswith(_THIRD_PARTY):
            return None
    return real


def _imported_names(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """Every module name an import statement of module ``name`` may load (parents included)."""
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base_parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join(p for p in base_parts + ([node.module] if node.module else []) if p)
            else:
                base = node.module or ""
            targets = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        else:
            continue
        for t in targets:
            bits = t.split(".")
            out.update(".".join(bits[:i]) for i in range(1, len(bits) + 1))
    return out


class SourceHasher:
    """Digests of module sources and their transitive own-code imports (memoised per instance).

    One instance per run: a file is read and parsed once however many claims reach it.
    """

    def __init__(self):
        self._file: dict[str, tuple[str, str, bool] | None] = {}
        self._parsed: dict[str, tuple[str, set[str]]] = {}

    def _info(self, name: str, root: bool = False):
        if name not in self._file or (root and self._file[name] is None):
            path = _module_file(name, root)
            self._file[name] = None if path is None else (path, name, path.endswith("__init__.py"))
        return self._file[name]

    def _parse(self, path: str, name: str, is_package: bool) -> tuple[str, set[str]]:
        if path not in self._parsed:
            data = Path(path).read_bytes()
            try:
                names = _imported_names(ast.parse(data), name, is_package)
            except SyntaxError:
                names = set()
            self._parsed[path] = (hashlib.sha256(data).hexdigest(), names)
        return self._parsed[path]

    def digests(self, modules) -> dict[str, str]:
        """``{module name: sha256 of its source}`` for ``modules`` (wherever installed: a plugin's claim module
        in ``site-packages`` too) and everything they import (own code)."""
        roots = set(modules)
        todo, seen, out = list(modules), set(), {}
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            info = self._info(name, name in roots)
            if info is None:
                continue
            digest, names = self._parse(*info)
            out[name] = digest
            todo.extend(n for n in names if n not in seen)
        return dict(sorted(out.items()))


def claim_modules(claim: Claim) -> list[str]:
    """The modules defining the claim's functions (check, falsify, plot)."""
    fns = (claim.check, claim.falsify, claim.plot)
    mods = (getattr(f, "__module__", None) for f in fns if f is not None)
    return sorted({m for m in mods if m is not None})


def cacheable(claim: Claim, hasher: SourceHasher | None = None) -> bool:
    """Whether the cache key can cover the claim's code: each of its functions (check, falsify, plot) names a module
    whose source file is found. A claim defined in an interactive session (``python -c``, a notebook: ``__main__``
    without a file) or through an object without a module is never cached: its key could not see a change of its
    code, and a stale result would come back."""
    hasher = hasher or SourceHasher()
    for f in (claim.check, claim.falsify, claim.plot):
        if f is None:
            continue
        mod = getattr(f, "__module__", None)
        if mod is None or hasher._info(mod, True) is None:
            return False
    return True


def _environment() -> dict:
    return {
        "theorycheck": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
    }


def check_key(claim: Claim, params: dict, hasher: SourceHasher | None = None) -> str:
    """The cache key of one check (see the module docstring for what it covers)."""
    hasher = hasher or SourceHasher()
    payload = {
        "format": _FORMAT,
        "user": cache_user(),
        "claim": claim.id,
        "params": params,
        "environment": _environment(),
        "sources": hasher.digests(claim_modules(claim)),
    }
    return hashlib.sha256(dumps_json(payload, indent=None, sort_keys=True).encode()).hexdigest()


# ----------------------------------------------------------------------------- lossless encoding
class _Unencodable(TypeError):
    pass


def _encode(x):
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise _Unencodable(f"array of dtype {x.dtype}")
        arr = np.ascontiguousarray(x)
        return {"__ndarray__": base64.b64encode(arr.tobytes()).decode(), "dtype": arr.dtype.str, "shape": arr.shape}
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise _Unencodable("dict with non-string keys")
        return {k: _encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    raise _Unencodable(f"value of type {type(x).__name__}")


def _decode(x):
    if isinstance(x, list):
        return [_decode(v) for v in x]
    if isinstance(x, dict):
        if "__ndarray__" in x:
            raw = base64.b64decode(x["__ndarray__"])
            return np.frombuffer(raw, dtype=np.dtype(x["dtype"])).reshape(x["shape"]).copy()
        if "__float__" in x:
            return float(x["__float__"])
        return {k: _decode(v) for k, v in x.items()}
    return x


def _digest(encoded) -> str:
    return hashlib.sha256(json.dumps(encoded, sort_keys=True, allow_nan=False).encode()).hexdigest()


_RESULT_FIELDS = ("passed", "expected", "measured", "margin", "tolerance", "params", "details", "data", "label")
#: Fields an entry written before they existed may lack (the ClaimResult default is used).
_OPTIONAL_FIELDS = ("label",)


class ResultCache:
    """One JSON file per check under ``root / "verify" / <user> / <version>`` (``root``: default
    :func:`cache_dir`): ``directory``, which also holds the measured seconds (``timings.json``).

    ``read=False`` (``verify --no-cache``): nothing is reused, fresh results are still stored.

    A check's key covers the claim id, its parameters, the user, the versions of the package, Python,
    NumPy, SciPy and Numba, and the source of the claim's module and of every module it imports (see the
    module docstring): editing any of them means a recomputation, never a stale result.

    Parameters
    ----------
    directory : str or path-like, optional
        The cache's root folder; ``None``: :func:`cache_dir`.
    read : bool
        Reuse stored results (``False``: only store).

    See Also
    --------
    run_claims : Its ``cache`` argument reuses and stores results.
    cache_dir : The default root folder.
    CacheWarning : Warned for an entry that is ignored.

    References
    ----------
    SPEC §6 (the checks whose results are cached).

    Examples
    --------
    :func:`run_claims` computes each check's key and calls :meth:`get` and :meth:`put`; stored results come
    back exactly (floats, non-finite values and arrays):

    >>> from theorycheck.report import ClaimResult, ResultCache
    >>> cache = ResultCache("cache")
    >>> res = ClaimResult(True, 0.75, 0.75, 1e-12, tolerance=1e-12, details={"ratio": float("inf")},
    ...                   data={"curve": np.linspace(0.0, 1.0, 3)})
    >>> key = "0" * 64  # run_claims uses the SHA-256 of the claim, parameters, versions and sources
    >>> cache.put(key, "demo.claim", res, seconds=0.5)
    True
    >>> back, seconds, created = cache.get(key, "demo.claim")
    >>> back.passed, back.margin, back.details, back.data["curve"], seconds
    (True, 1e-12, {'ratio': inf}, array([0. , 0.5, 1. ]), 0.5)
    >>> ResultCache("cache", read=False).get(key, "demo.claim") is None  # verify --no-cache
    True
    """

    def __init__(self, directory: str | os.PathLike | None = None, *, read: bool = True):
        #: The cache's root folder (``$THEORYCHECK_CACHE_DIR`` or its defaults).
        self.root = Path(directory).expanduser() if directory is not None else cache_dir()
        #: The user and package version this cache serves.
        self.user, self.version = cache_user(), __version__
        #: This user's and version's folder: the entries and ``timings.json``.
        self.directory = self.root / "verify" / _folder_name(self.user) / _folder_name(self.version)
        self.read = bool(read)

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str, claim_id: str):
        """``(ClaimResult, seconds, created)`` of a valid entry of this user and version, else ``None`` (a bad
        one warns; a file of another user is not read)."""
        path = self._path(key)
        if not self.read or not path.exists():
            return None
        uid = _uid()
        if uid is not None and path.stat().st_uid != uid:  # written by another user: never reused
            return None
        try:
            entry = json.loads(path.read_text())
            if entry.get("key") != key or entry.get("claim") != claim_id or entry.get("format") != _FORMAT:
                raise ValueError("key, claim or format does not match the file name")
            if entry.get("user") != self.user or entry.get("version") != self.version:
                raise ValueError(f"written by user {entry.get('user')!r}, version {entry.get('version')!r}")
            if entry.get("digest") != _digest(entry["result"]):
                raise ValueError("content does not match its checksum")
            r = _decode(entry["result"])
            res = ClaimResult(**{k: r[k] for k in _RESULT_FIELDS if k in r or k not in _OPTIONAL_FIELDS})
            margin = float(res.margin)
            if res.passed != bool(r["passed"]) or (res.passed and not margin >= 0) or (not res.passed and margin > 0):
                raise ValueError("stored verdict disagrees with its margin")
            return res, float(entry["seconds"]), str(entry["created"])
        except Exception as exc:  # any defect: never trust the entry
            warnings.warn(f"ignoring corrupted cache entry {path}: {type(exc).__name__}: {exc}", CacheWarning, 2)
            return None

    def put(self, key: str, claim_id: str, result: ClaimResult, seconds: float) -> bool:
        """Store a result atomically; ``False`` (nothing written) if it holds values JSON cannot keep exactly."""
        try:
            enc = _encode({k: getattr(result, k) for k in _RESULT_FIELDS})
        except _Unencodable:
            return False
        created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        entry = {"format": _FORMAT, "key": key, "claim": claim_id, "user": self.user, "version": self.version}
        entry.update(created=created, seconds=seconds)
        entry["result"] = enc
        entry["digest"] = _digest(enc)
        return self._write(self._path(key), entry)

    def _write(self, path: Path, obj) -> bool:
        """Atomic JSON write; an unwritable cache folder warns and is skipped (the report does not need it)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json(path, obj)
            return True
        except OSError as exc:
            warnings.warn(f"result cache not written ({path}): {exc}", CacheWarning, 3)
            return False

    def timings(self) -> dict[str, float]:
        """Measured seconds by claim id (``"<id> --full"`` for full-tier checks; the largest), for scheduling."""
        path = self.directory / "timings.json"
        try:
            data = json.loads(path.read_text())
            return {str(k): float(v) for k, v in data.items()}
        except (OSError, ValueError, AttributeError, TypeError):
            return {}

    def record_timings(self, seconds: dict[str, float]) -> None:
        """Merge measured seconds by claim id into ``timings.json`` (atomic)."""
        data = self.timings()
        data.update({k: float(v) for k, v in seconds.items()})
        self._write(self.directory / "timings.json", dict(sorted(data.items())))
