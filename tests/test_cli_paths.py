"""Output paths checked first (issue #26 item 4), table-driven over every subcommand of ``theorycheck.cli.COMMANDS``:
an output path that cannot be written is one line naming it, before any work; no stray ``.NAME.old-*`` or
``.NAME.tmp-*`` folder is left behind in any failure path. Root is not stopped by permission bits, so the
unwritable paths here are a path under a regular file (``file.txt/out``) or a simulated refusal (the
write probe made to fail); the chmod variants run only for a non-root user."""

from __future__ import annotations

import errno
import json
import os
import re

import pytest

from theorycheck import _io, cli
from theorycheck.cli import landscape as cli_landscape
from theorycheck.cli import solve as cli_solve
from theorycheck.cli import verify as cli_verify
from theorycheck.cli.common import leaf_parsers
from theorycheck.realdata import _deps

#: The least a subcommand needs besides its output flag (a new subcommand needing more adds a line here).
MINIMAL = {
    "verify": ["--only", "data.moments"],
    "landscape": ["--T", "3", "--v", "2", "--tau", "1", "--n-grid", "3"],
    "train": ["--preset", "stage1-population", "--steps", "2", "--quiet", "--no-figures"],
    "solve value": ["--T", "3", "--v", "2", "--tau", "1"],
    "solve embedding": ["--T", "3", "--v", "2", "--tau", "1"],
    "solve attention": ["--T", "3", "--v", "2", "--tau", "1"],
    "benchmark": ["--quick", "--quiet"],
}
LEAVES = leaf_parsers(cli.build_parser())
ROOT = os.geteuid() == 0


def _flags(name):
    return {s for a in LEAVES[name]._actions for s in a.option_strings}


def _output_cases():
    """``(leaf, flag)`` for every output flag of every leaf: ``--out`` (a folder), ``--json``/``--npz`` (a file)."""
    return [(name, flag) for name in sorted(LEAVES) for flag in ("--out", "--json", "--npz") if flag in _flags(name)]


def _skip_missing_extra(name):
    if name == "realdata" and _deps.missing():
        pytest.skip("the nlp extra is not installed (realdata reports it before the paths)")


def _entries(folder):
    return sorted(p.name for p in folder.iterdir())


def test_every_command_with_outputs_is_in_the_table():
    assert {"verify", "landscape", "train", "bench", "benchmark", "realdata", "solve value"} <= {
        n for n, _ in _output_cases()
    }


@pytest.mark.parametrize(("name", "flag"), _output_cases())
def test_an_output_under_a_regular_file_is_one_line_naming_it(name, flag, tmp_path, monkeypatch, capsys):
    _skip_missing_extra(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("mine")
    target = "file.txt/out" + (".json" if flag == "--json" else "")
    argv = [*name.split(), *MINIMAL.get(name, []), flag, target]
    if (
        flag != "--out"
        and "--out" in _flags(name)
        and name not in ("solve value", "solve embedding", "solve attention")
    ):
        argv += ["--out", "fresh"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"theorycheck {name.split()[0]}: error: {flag} "), err
    assert "file.txt" in err[0] and "not a folder" in err[0]
    assert _entries(tmp_path) == ["file.txt"]  # no output folder, no stray folder
    assert (tmp_path / "file.txt").read_text() == "mine"


def _no_work(*args, **kwargs):
    raise AssertionError("work started before the output paths were checked")


@pytest.mark.parametrize(
    ("argv", "module", "work"),
    [
        (["verify", "--only", "data.moments"], cli_verify, "run_claims"),
        (["landscape", *MINIMAL["landscape"]], cli_landscape, "write_landscape"),
        (["solve", "value", *MINIMAL["solve value"]], cli_solve, "run_solve"),
    ],
)
def test_an_unwritable_existing_folder_is_refused_before_work(argv, module, work, tmp_path, monkeypatch, capsys):
    """``--out RO --force`` (the user's folder, not writable): one line naming it, before any work, nothing left."""
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "notes.txt").write_text("mine")
    real = _io.tempfile.mkdtemp

    def refuse(*args, dir=None, **kwargs):
        if dir is not None and os.path.abspath(dir) == str(ro):
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(_io.tempfile, "mkdtemp", refuse)  # what a read-only folder does, also for root
    monkeypatch.setattr(module, work, _no_work)
    assert cli.main([*argv, "--out", str(ro), "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {str(ro)!r}: cannot write in the folder" in err[0], err
    assert "Permission denied" in err[0]
    assert _entries(ro) == ["notes.txt"] and _entries(tmp_path) == ["ro"]


@pytest.mark.skipif(ROOT, reason="permission bits do not stop root (covered by the simulated refusal above)")
@pytest.mark.parametrize("force", [False, True])
def test_a_read_only_folder_is_refused_before_work(force, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "notes.txt").write_text("mine")
    ro.chmod(0o555)
    try:
        monkeypatch.setattr(cli_landscape, "write_landscape", _no_work)
        argv = ["landscape", *MINIMAL["landscape"], "--out", str(ro)] + (["--force"] if force else [])
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(ro) in err[0], err
        assert _entries(tmp_path) == ["ro"]
    finally:
        ro.chmod(0o755)


@pytest.mark.skipif(ROOT, reason="permission bits do not stop root")
def test_a_read_only_parent_is_refused_before_work(tmp_path, monkeypatch, capsys):
    parent = tmp_path / "p"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        monkeypatch.setattr(cli_verify, "run_claims", _no_work)
        assert cli.main(["verify", "--only", "data.moments", "--out", str(parent / "report")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(parent) in err[0], err
    finally:
        parent.chmod(0o755)


def _theorycheck_folder(tmp_path):
    out = tmp_path / "land"
    assert cli.main(["landscape", *MINIMAL["landscape"], "--out", str(out), "--no-figures"]) == 0
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def test_a_failed_swap_leaves_the_old_folder_and_no_stray_folder(tmp_path, monkeypatch, capsys):
    """The rename of the old folder fails (as for a read-only folder of a non-root user): one line, the old
    folder intact, no ``.land.old-*`` or ``.land.tmp-*`` in the parent."""
    out, before = _theorycheck_folder(tmp_path)
    capsys.readouterr()
    real = _io.os.replace

    def refuse(src, dst):
        if os.fspath(src) == str(out):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(src))
        return real(src, dst)

    monkeypatch.setattr(_io.os, "replace", refuse)
    assert cli.main(["landscape", *MINIMAL["landscape"], "--out", str(out), "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"theorycheck landscape: error: Permission denied: {str(out)!r}", err
    assert _entries(tmp_path) == ["land"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_failure_while_writing_leaves_no_stray_folder(tmp_path, monkeypatch, capsys):
    out, before = _theorycheck_folder(tmp_path)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "optimum.json")

    monkeypatch.setattr("theorycheck.report.landscape.write_json", disk_full)
    assert cli.main(["landscape", *MINIMAL["landscape"], "--out", str(out), "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0], err
    assert _entries(tmp_path) == ["land"] and _entries(out) == sorted(before)


def test_a_refused_force_names_the_file_and_no_temporary_folder(tmp_path, capsys):
    """``--force`` into a folder holding the user's ``optimum.json``: refused naming it; the message points at no
    temporary folder (it is already deleted) and none is left."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "optimum.json").write_text("mine")
    assert cli.main(["landscape", *MINIMAL["landscape"], "--out", str(out), "--force", "--no-figures"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "optimum.json" in err[0], err
    assert ".tmp-" not in err[0] and ".old-" not in err[0]
    assert _entries(out) == ["optimum.json"] and (out / "optimum.json").read_text() == "mine"
    assert _entries(tmp_path) == ["mine"]


def test_an_empty_figures_folder_of_a_report_does_not_block_the_rerun(tmp_path, capsys):
    """A report without figures leaves its (empty) ``figures/``: the marker lists it, so the rerun replaces it."""
    out = tmp_path / "report"
    argv = ["verify", "--only", "data.moments", "--no-figures", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    marker = json.loads((out / _io.MARKER).read_text())
    assert all(re.fullmatch(r"[\w./-]+", f) for f in marker["files"])
    assert cli.main(argv) == 0
