"""Nothing of the user's is overwritten (issue #26 item 1) and outputs are readable as the umask allows (item 7).

``--force`` replaces only files listed in theorycheck's own marker; a same-named file the marker does
not list is refused, naming it, whatever the flag. Single-file outputs refuse an existing file
unless ``--force``. Files are ``0o666 & ~umask``, folders ``0o777 & ~umask``.
"""

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from theorycheck._io import (
    atomic_directory,
    atomic_write_bytes,
    atomic_write_text,
    check_not_foreign,
    prepare_output_dir,
    remove_file,
    write_json,
)
from theorycheck.cli import main
from theorycheck.cli import train as cli_train

USER_FILES = (
    "config.json",
    "metrics.jsonl",
    "params.npz",
    "summary.json",
    "stages.json",
    "figures/norms.png",
    "checkpoint-50.json",
    "checkpoint-50.npz",
)
SMALL = ["--T", "3", "--v", "4", "--tau", "2"]


def _user_folder(folder, names=USER_FILES):
    """A folder of the user's: ``names`` with their own contents; returns ``{name: (bytes, mtime_ns)}``."""
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(f"the user's {name}\n".encode())
    return _snapshot(folder, names)


def _snapshot(folder, names):
    return {n: ((folder / n).read_bytes(), (folder / n).stat().st_mtime_ns) for n in names}


def test_train_force_touches_no_file_of_the_user(tmp_path, capsys, monkeypatch):
    """The issue's reproduction: all 8 files were overwritten with exit 0. Now refused before any work, naming them."""

    def no_work(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(cli_train, "run_preset", no_work)
    out = tmp_path / "run"
    before = _user_folder(out)
    assert main(["train", "--preset", "two-stage", "--steps", "60", "--out", str(out), "--force", "--quiet"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "checkpoint-50.json" in err and "config.json" in err and "did not write" in err
    assert "--force never replaces them" in err
    assert _snapshot(out, USER_FILES) == before


@pytest.mark.parametrize("name", ["summary.json", "figures/norms.png"])
def test_train_force_refuses_each_output_name_of_the_user(tmp_path, capsys, name):
    out = tmp_path / "run"
    before = _user_folder(out, (name,))
    assert main(["train", "--preset", "two-stage", "--steps", "10", "--out", str(out), "--force", "--quiet"]) == 2
    assert name in capsys.readouterr().err
    assert _snapshot(out, (name,)) == before


def test_force_writes_new_names_but_never_a_foreign_file(tmp_path):
    out = tmp_path / "mine"
    before = _user_folder(out, ("notes.txt", "data/x.csv"))
    assert prepare_output_dir(out, force=True) == out.resolve()
    write_json(out / "results.json", {"a": 1})  # a new name: fine
    atomic_write_text(out / "results.json", "{}\n")  # theorycheck's own file: replaced
    for writer in (
        lambda p: atomic_write_text(p, "x"),
        lambda p: atomic_write_bytes(p, b"x"),
        lambda p: write_json(p, {}),
        remove_file,
        check_not_foreign,
    ):
        for name in before:
            with pytest.raises(ValueError, match=f"refusing to overwrite .*{name}.*did not write it"):
                writer(out / name)
    assert _snapshot(out, before) == before


def test_a_file_the_marker_lists_is_replaced_with_force(tmp_path):
    out = tmp_path / "mine"
    with atomic_directory(out) as tmp:
        (tmp / "results.json").write_text("old")
    _user_folder(out, ("notes.txt",))
    prepare_output_dir(out, force=True)
    atomic_write_text(out / "results.json", "new")
    assert (out / "results.json").read_text() == "new"


def test_a_foreign_file_removed_by_the_user_is_free_again(tmp_path):
    out = tmp_path / "mine"
    _user_folder(out, ("summary.json",))
    prepare_output_dir(out, force=True)
    (out / "summary.json").unlink()
    write_json(out / "summary.json", {"ok": True})
    assert (out / "summary.json").read_text().startswith("{")


def test_merge_refusal_says_nothing_was_written(tmp_path):
    out = tmp_path / "mine"
    before = _user_folder(out, ("results.json",))
    with pytest.raises(ValueError, match="results.json; nothing was written") as exc:
        with atomic_directory(out, force=True) as tmp:
            (tmp / "results.json").write_text("{}")
    assert ".tmp-" not in str(exc.value)
    assert _snapshot(out, before) == before
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


# ----------------------------------------------------------------------------- single-file outputs
def test_an_existing_file_is_refused_unless_force(tmp_path):
    f = tmp_path / "summary.json"
    f.write_text("mine")
    with pytest.raises(ValueError, match=r"--json '.*summary.json' already exists; pass --force"):
        prepare_output_dir(f, kind="file", flag="--json")
    with pytest.raises(ValueError, match=r"--out '.*w.npz' already exists"):
        (tmp_path / "w.npz").write_bytes(b"mine")
        prepare_output_dir(tmp_path / "w", kind="file", suffix=".npz")
    assert prepare_output_dir(f, kind="file", force=True, flag="--json") == f
    assert f.read_text() == "mine"


@pytest.mark.parametrize(("flag", "name"), [("--json", "s.json"), ("--npz", "w.npz")])
def test_solve_refuses_an_existing_output_file(tmp_path, capsys, flag, name):
    f = tmp_path / name
    before = _user_folder(tmp_path, (name,))
    assert main(["solve", "value", *SMALL, flag, str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {str(f)!r} already exists" in err and "--force" in err
    assert _snapshot(tmp_path, (name,)) == before
    assert main(["solve", "value", *SMALL, flag, str(f), "--force"]) == 0
    assert f.read_bytes() != before[name][0]
    if name.endswith(".npz"):
        assert "A" in np.load(f)


# ----------------------------------------------------------------------------- permissions (item 7)
@pytest.fixture
def umask():
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize(("mask", "fmode", "dmode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_outputs_are_readable_as_the_umask_allows(tmp_path, umask, mask, fmode, dmode):
    umask(mask)
    assert _mode(atomic_write_text(tmp_path / "a.txt", "x")) == fmode
    assert _mode(write_json(tmp_path / "a.json", {})) == fmode
    out = tmp_path / "report"
    with atomic_directory(out, command="test") as tmp:
        (tmp / "results.json").write_text("{}")
    assert _mode(out) == dmode
    assert _mode(out / ".theorycheck.json") == fmode


def test_solve_and_train_outputs_are_0644_under_umask_022(tmp_path, umask):
    umask(0o022)
    assert main(["solve", "value", *SMALL, "--json", str(tmp_path / "s.json"), "--npz", str(tmp_path / "w")]) == 0
    assert _mode(tmp_path / "s.json") == 0o644 and _mode(tmp_path / "w.npz") == 0o644
    assert main(["solve", "value", *SMALL, "--out", str(tmp_path / "sol")]) == 0
    assert _mode(tmp_path / "sol") == 0o755 and _mode(tmp_path / "sol" / "optimum.npz") == 0o644
    run = tmp_path / "run"
    assert main(["train", "--preset", "two-stage", "--steps", "10", "--out", str(run), "--quiet"]) == 0
    files = [p for p in run.rglob("*") if p.is_file()]
    assert files and {p.name: _mode(p) for p in files} == {p.name: 0o644 for p in files}
    assert {_mode(p) for p in [run, *run.rglob("*")] if p.is_dir()} == {0o755}


def test_force_into_a_folder_with_too_many_foreign_files_is_refused(tmp_path, monkeypatch):
    import theorycheck._io as io_mod

    monkeypatch.setattr(io_mod, "MAX_FOREIGN", 2)
    out = tmp_path / "home"
    before = _user_folder(out, ("a", "b", "c"))
    with pytest.raises(ValueError, match="more than 2 files theorycheck did not write"):
        prepare_output_dir(out, force=True)
    assert _snapshot(out, before) == before


def test_bench_force_keeps_a_result_file_of_the_user(tmp_path, capfd):
    """``bench --out DIR --force``: a benchmark script (another process) does not overwrite a file of the user's."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    common = Path(__file__).resolve().parents[1] / "benchmarks"
    (folder / "bench_fake.py").write_text(
        f"import sys\nsys.path.insert(0, {str(common)!r})\nimport _common\n_common.write_json('fake', {{'x': 1}})\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "fake.json").write_text("mine")
    argv = ["bench", "--dir", str(folder), "--out", str(out), "--force"]
    assert main(argv) == 1
    assert "refusing to overwrite" in capfd.readouterr().err and (out / "fake.json").read_text() == "mine"
    (out / "fake.json").unlink()
    assert main(argv) == 0 and json.loads((out / "fake.json").read_text())["x"] == 1
    assert main(argv) == 0  # the marker now lists it: a rerun replaces it
