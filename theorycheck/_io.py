"""Every file theorycheck writes goes through here: one JSON policy, one atomic-write strategy.

- :func:`jsonable` / :func:`dumps_json` / :func:`write_json`: numpy scalars and arrays become
  Python numbers and lists; **every non-finite float (nan, +inf, -inf) is written as ``null``**
  (strict JSON, readable by any parser), in ``results.json``, ``optimum.json``, ``summary.json``
  and every line of ``metrics.jsonl`` alike.
- :func:`atomic_write_bytes` / :func:`atomic_write_text` / :func:`write_json`: write to a
  temporary file in the same folder, ``fsync``, then ``os.replace`` onto the target (atomic on
  POSIX): a reader sees the old file or the new one, never half of one.
- :func:`atomic_directory`: the same for a whole output folder.
- :func:`prepare_output_dir`: validate an output path *before* any work (missing parent created,
  a file given where a folder is expected and vice versa refused, a folder holding files
  theorycheck did not write refused unless ``force``). Every folder theorycheck writes carries a
  marker file :data:`MARKER` (tool, version, command, date and the files written); a folder is
  replaced only if it is empty or every file in it is listed in its marker. With ``force`` the
  outputs are written *into* the folder, replacing only theorycheck's own files and keeping every
  other file; the current directory (or one of its parents) is never renamed or removed.
  A file the marker does not list is the user's: no writer here (:func:`atomic_write_bytes`,
  :func:`remove_file`, the merge) replaces or removes it, whatever ``force`` says; the command
  fails naming it (:func:`check_not_foreign`). A single-file output (``kind="file"``) that exists
  is refused unless ``force``.
- :func:`distinct_outputs`: within a command, every output path (``--out``, ``--json``, ``--npz``, ``--checkpoint``)
  is claimed as it is checked (:func:`claim_output`, called by :func:`prepare_output_dir`): two outputs that are
  the same file, or one inside the other's folder, are refused before any work.
- Files are created ``0o666 & ~umask`` and folders ``0o777 & ~umask`` (0644 / 0755 under umask
  022), not the 0600 / 0700 of temporary files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ._version import __version__

__all__ = [
    "jsonable",
    "dumps_json",
    "write_json",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_directory",
    "prepare_output_dir",
    "write_marker",
    "read_marker",
    "MARKER",
    "check_not_foreign",
    "remove_file",
    "distinct_outputs",
    "claim_output",
]

#: Name of the marker file written into every output folder.
MARKER = ".theorycheck.json"


def jsonable(x):
    """``x`` with numpy types converted, tuples as lists and non-finite floats as ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, complex):
        raise TypeError(f"complex value {x!r} cannot be written as JSON")
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    return str(x)


def dumps_json(obj, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text of ``obj`` under the package's policy (non-finite -> ``null``)."""
    return json.dumps(jsonable(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)


#: Most files of the user's that ``--force`` writes next to (each is recorded, :data:`_FOREIGN`).
MAX_FOREIGN = 100_000

#: Files found in an output folder by :func:`prepare_output_dir` that its marker does not list (the
#: user's): absolute path -> ``(st_dev, st_ino)``. No theorycheck writer replaces or removes them
#: while they are the same file (:func:`check_not_foreign`), whatever ``force`` says.
_FOREIGN: dict[str, tuple[int, int]] = {}


def _umask() -> int:
    """The process umask, read without changing it where the system allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _protect(folder: Path, entries) -> None:
    """Record the files ``entries`` (relative POSIX paths under ``folder``) as the user's (:data:`_FOREIGN`)."""
    for rel in entries:
        if rel.endswith("/"):
            continue
        path = folder / rel
        ident = _identity(path)
        if ident is not None:
            _FOREIGN[os.path.abspath(path)] = ident


#: The outputs claimed by the command being run (:func:`distinct_outputs`): ``(real path, flag, kind)``; ``None``
#: outside a command (library calls are not tracked).
_CLAIMS: list[tuple[Path, str, str]] | None = None


@contextmanager
def distinct_outputs():
    """Within ``with`` (one command's run): every output path checked by :func:`prepare_output_dir` or given to
    :func:`claim_output` must differ from the others, and no output may lie inside another's output folder."""
    global _CLAIMS
    previous, _CLAIMS = _CLAIMS, []
    try:
        yield
    finally:
        _CLAIMS = previous


def claim_output(path, flag: str, kind: str = "file") -> None:
    """Record ``path`` as an output of the command being run (:func:`distinct_outputs`; nothing outside one).

    Raises ``ValueError`` naming both flags if ``path`` is (after symlinks) an output already claimed by another
    flag, lies inside a claimed output folder, or is a folder (``kind="dir"``) holding a claimed output. Claiming
    the same path again with the same flag and kind (a folder checked once more when it is written) is allowed."""
    if _CLAIMS is None:
        return
    p = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    for q, other, other_kind in _CLAIMS:
        if p == q and (flag, kind) == (other, other_kind):
            return
        if p == q:
            why = f"is the same {'folder' if kind == 'dir' else 'file'} as {other} {str(q)!r}"
        elif other_kind == "dir" and q in p.parents:
            why = f"is inside the {other} folder {str(q)!r}"
        elif kind == "dir" and p in q.parents:
            why = f"holds the {other} output {str(q)!r}"
        else:
            continue
        raise ValueError(
            f"{flag} {str(path)!r} {why}: two outputs of one command must be different files; give each its own path"
        )
    _CLAIMS.append((p, flag, kind))


def check_not_foreign(path) -> Path:
    """``path``, or a ``ValueError`` naming it if it is a file of the user's that theorycheck must not replace.

    A file is the user's when :func:`prepare_output_dir` found it in the output folder and the
    folder's marker :data:`MARKER` did not list it; it stays the user's while it is the same file
    (same device and inode). Every writer and remover of this module calls this first.
    """
    path = Path(os.fspath(path))
    key = os.path.abspath(path)
    ident = _FOREIGN.get(key)
    if ident is not None:
        if _identity(path) == ident:
            raise ValueError(
                f"refusing to overwrite {str(path)!r}: theorycheck did not write it (its folder's {MARKER} does not "
                "list it), and --force replaces only theorycheck's own files; move it away or choose a new --out folder"
            )
        del _FOREIGN[key]
    return path


def remove_file(path) -> None:
    """Delete the file ``path`` if it exists, unless it is the user's (:func:`check_not_foreign`)."""
    check_not_foreign(path).unlink(missing_ok=True)


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename).

    The file is readable as the umask allows (``0o666 & ~umask``: 0644 under umask 022), not the
    0600 of a temporary file. A file of the user's (:func:`check_not_foreign`) is refused.
    """
    path = check_not_foreign(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask())
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path, obj, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """Write ``obj`` as strict JSON (:func:`dumps_json`) to ``path`` atomically."""
    return atomic_write_text(path, dumps_json(obj, indent=indent, sort_keys=sort_keys) + "\n")


def read_marker(folder) -> dict | None:
    """The marker of ``folder`` (a dict) if theorycheck wrote it, else ``None``."""
    try:
        data = json.loads((Path(os.fspath(folder)) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "theorycheck" or not isinstance(data.get("files"), list):
        return None
    return data


def _walk(folder: Path):
    """Relative POSIX paths of the entries under ``folder``: files, symlinks and empty folders (``"x/"``)."""
    for root, dirs, files in os.walk(folder):
        base = Path(root)
        links = [d for d in dirs if (base / d).is_symlink()]
        dirs[:] = sorted(d for d in dirs if d not in links)
        for name in sorted(files + links):
            yield (base / name).relative_to(folder).as_posix()
        if not dirs and not files and not links and base != folder:
            yield base.relative_to(folder).as_posix() + "/"


def _list_files(folder) -> list[str]:
    """Every file under ``folder`` except the marker (relative POSIX paths, sorted)."""
    return sorted(f for f in _walk(Path(os.fspath(folder))) if f != MARKER and not f.endswith("/"))


def _list_entries(folder) -> list[str]:
    """Every file and empty folder (``"x/"``) under ``folder`` except the marker: what a marker lists by default,
    so that an empty folder theorycheck made (``figures/`` of a report without figures) is not taken for the user's."""
    return sorted(f for f in _walk(Path(os.fspath(folder))) if f != MARKER)


def _foreign_entries(folder: Path, limit: int | None = 5) -> list[str]:
    """Up to ``limit`` (``None``: all) entries of ``folder`` its marker does not list (all if no marker)."""
    marker = read_marker(folder)
    owned = set(marker["files"]) if marker else set()
    found = []
    for rel in _walk(folder):
        if rel != MARKER and rel not in owned:
            found.append(rel)
            if limit is not None and len(found) >= limit:
                break
    return found


def write_marker(folder, *, command: str, files=None) -> Path:
    """Write the marker :data:`MARKER` into ``folder``: tool, version, command, UTC date and ``files``.

    ``files`` (relative POSIX paths) defaults to every file and empty folder (``"x/"``) now in the folder;
    only files listed there may later be replaced or removed by theorycheck.
    """
    folder = Path(os.fspath(folder))
    data = {
        "tool": "theorycheck",
        "version": __version__,
        "command": str(command),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": sorted(_list_entries(folder) if files is None else files),
    }
    return write_json(folder / MARKER, data)


def _holds_cwd(path: Path) -> bool:
    """Whether ``path`` is the current directory or one of its parents (never renamed or removed)."""
    cwd = Path.cwd().resolve()
    return path == cwd or path in cwd.parents


def _make_parent(p: Path, flag: str) -> None:
    parent = p.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(
            f"{flag} {str(p)!r}: its parent {str(parent)!r} is not a folder (a file is in the way)"
        ) from None
    except PermissionError:
        raise ValueError(
            f"{flag} {str(p)!r}: cannot create the parent folder {str(parent)!r} (permission denied)"
        ) from None
    _check_writable(parent, p, flag)


def _check_writable(folder: Path, p: Path, flag: str) -> None:
    """A ``ValueError`` naming ``flag`` and ``p`` unless a file can be created in ``folder``: tried for real (a
    probe folder made and removed at once), so that read-only mounts, immutable folders and ACLs are caught
    as well as permission bits, also for root, before any work."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".theorycheck-probe-", dir=folder))
    except OSError as exc:
        what = "the folder" if folder == p else "its folder"
        raise ValueError(
            f"{flag} {str(p)!r}: cannot write in {what} {str(folder)!r} ({exc.strerror or exc}); "
            "choose a writable location"
        ) from None


def prepare_output_dir(path, *, force: bool = False, kind: str = "dir", suffix: str | None = None, flag: str = "--out"):
    """Validate an output path before any work; return the path that will really be written.

    ``kind="dir"`` (an output folder): an existing *file* is refused; a missing parent is created;
    an existing folder is accepted if it is empty or holds only files its marker lists (it will be
    replaced), or, with ``force=True``, if it holds other files too (they are kept; theorycheck's
    own files are replaced). Returns the resolved folder.

    ``kind="file"`` (e.g. ``--json FILE``, ``--out FILE.npz``): ``suffix`` is appended if the name
    does not already end with it; an existing *folder* is refused; a missing parent is created;
    an existing file is refused unless ``force=True`` (then it is replaced atomically, when written
    through this module). Returns the path with the suffix, as given otherwise (print it: it is the
    real name).

    Files found in an existing folder that its marker does not list are recorded as the user's:
    whatever ``force`` says, no writer of this module replaces or removes them
    (:func:`check_not_foreign`); a command that writes such a name fails naming the file.

    Raises ``ValueError`` naming ``flag``, the path and what to do instead.
    """
    if kind not in ("dir", "file"):
        raise ValueError(f"kind must be 'dir' or 'file', got {kind!r}")
    if path is None or not os.fspath(path).strip():
        raise ValueError(f"{flag}: empty path; give a {'folder' if kind == 'dir' else 'file'} name")
    p = Path(os.fspath(path)).expanduser()
    if kind == "file":
        if suffix and not p.name.endswith(suffix):
            p = p.with_name(p.name + suffix)
        if p.is_dir():
            raise ValueError(
                f"{flag} {str(p)!r} is an existing folder; give a file name, "
                f"e.g. {str(p / ('out' + (suffix or '.json')))!r}"
            )
        if p.exists() or p.is_symlink():
            if not force:
                raise ValueError(
                    f"{flag} {str(p)!r} already exists; pass --force to replace it, or give a new file name"
                )
            check_not_foreign(p)
        claim_output(p, flag, "file")
        _make_parent(p, flag)
        return p
    if p.exists() and not p.is_dir():
        raise ValueError(f"{flag} {str(p)!r} is an existing file, not a folder; give a new folder name")
    p = p.resolve()
    claim_output(p, flag, "dir")
    _make_parent(p, flag)
    if p.is_dir():
        _check_writable(p, p, flag)  # written into (--force, or --out .) or renamed away: both need it writable
    if p.is_dir() and force:
        foreign = _foreign_entries(p, limit=MAX_FOREIGN + 1)
        if len(foreign) > MAX_FOREIGN:
            raise ValueError(
                f"{flag} folder {str(p)!r} holds more than {MAX_FOREIGN} files theorycheck did not write; "
                "choose a new folder name (--force writes into a folder only while theorycheck can list what it keeps)"
            )
        _protect(p, foreign)
    if p.is_dir() and not force:
        foreign = _foreign_entries(p)
        if foreign:
            raise ValueError(
                f"{flag} folder {str(p)!r} already holds files theorycheck did not write "
                f"({', '.join(foreign)}{', ...' if len(foreign) >= 5 else ''}); choose a new folder name, or pass "
                "--force to write theorycheck's files into it (files theorycheck did not write are never deleted)"
            )
    return p


def _install_replace(tmp: Path, out: Path, command: str) -> None:
    """Marker into ``tmp``, then swap ``tmp`` in for ``out`` (two renames on one file system)."""
    write_marker(tmp, command=command)
    if not out.exists():
        os.replace(tmp, out)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        os.replace(out, trash / "old")
    except BaseException:
        os.rmdir(trash)  # nothing moved: no stray ``.NAME.old-*`` folder is left behind
        raise
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(trash / "old", out)  # the old folder back (if even this fails, it stays in ``trash``)
        os.rmdir(trash)
        raise
    shutil.rmtree(trash, ignore_errors=True)


def _install_merge(tmp: Path, out: Path, command: str) -> None:
    """Move ``tmp``'s files into ``out``, replacing only files ``out``'s marker lists; keep all others."""
    new = _list_files(tmp)
    marker = read_marker(out)
    owned = set(marker["files"]) if marker else set()
    clash = [f for f in new if f not in owned and ((out / f).exists() or (out / f).is_symlink())]
    clash += [f for f in new if any(q.exists() and not q.is_dir() for q in (out / f).parents if out in q.parents)]
    if clash:
        raise ValueError(
            f"refusing to overwrite files theorycheck did not write in {str(out)!r}: {', '.join(sorted(set(clash)))}; "
            "nothing was written: move them away or choose a new --out folder"
        )
    for f in sorted(owned - set(new)):
        target = out / f
        if target.is_symlink() or target.is_file():
            remove_file(target)
        for q in target.parents:
            if q == out or out not in q.parents:
                break
            try:
                q.rmdir()  # only if empty
            except OSError:
                break
    for f in new:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / f, out / f)
    write_marker(out, command=command, files=new)
    shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def atomic_directory(out, *, force: bool = False, command: str = "theorycheck"):
    """Context manager yielding a fresh temporary folder whose contents become ``out`` on success.

    ``out`` is checked with :func:`prepare_output_dir` first. On success a marker is added and
    the folder is installed: replaced as a whole (temporary folder next to the target, then
    renamed; atomic on POSIX) when ``out`` is missing, empty or holds only theorycheck's files;
    otherwise (``force=True``, or ``out`` is the current directory or a parent of it) the files
    are moved into ``out``, replacing only files its marker lists and refusing to overwrite any
    other file. On any exception the temporary folder is removed and ``out`` is left untouched.

    >>> with atomic_directory("report", command="theorycheck verify") as tmp:   # doctest: +SKIP
    ...     (tmp / "results.json").write_text("{}")
    """
    out = prepare_output_dir(out, force=force)
    in_place = _holds_cwd(out) or (out.is_dir() and bool(_foreign_entries(out, limit=1)))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name or 'out'}.tmp-", dir=out if in_place else out.parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # the folder installed as ``out``: 0755 under umask 022, not mkdtemp's 0700
        yield tmp
        if not in_place and out.is_dir() and _foreign_entries(out, limit=1):
            if not force:
                prepare_output_dir(out, force=False)  # raises: a foreign file appeared meanwhile
            in_place = True
        if in_place:
            _install_merge(tmp, out, command)
        else:
            _install_replace(tmp, out, command)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
