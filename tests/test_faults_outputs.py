"""Fault injection, output folders (issue #38 items 1-2, 9): no file of the user's is ever deleted, and no two
outputs of one command are the same file.

The README promises that theorycheck "never deletes files it did not write". A folder's marker
(``.theorycheck.json``) is what makes a later command replace it: these tests put a file of the user's into a run
folder (after a finished run, after a run killed before its marker, during a run), resume the run, and then point
another command's ``--out`` at the folder: it must refuse (or, with ``--force``, keep the file), and the marker must
list exactly the files theorycheck wrote.
"""

from __future__ import annotations

import os
import re

import pytest

from theorycheck._io import MARKER, claim_output, read_marker
from theorycheck.cli import main
from theorycheck.cli import train as cli_train
from theorycheck.cli import verify as cli_verify
from theorycheck.nn import Trainer, preset

TRAIN = ["train", "--preset", "official-demo", "--steps", "20", "--checkpoint-every", "10", "--quiet", "--no-figures"]
LANDSCAPE = ["landscape", "--T", "3", "--v", "2", "--tau", "1", "--n-grid", "3", "--quiet", "--no-figures"]


def _files(folder) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {MARKER}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _later_commands_keep(run, capsys) -> None:
    """``landscape --out RUN`` refuses the folder (naming the user's file), and with ``--force`` writes next to it."""
    assert main([*LANDSCAPE, "--out", str(run)]) == 2
    line = _one_line(capsys)
    assert "notes.txt" in line and "did not write" in line, line
    assert (run / "notes.txt").read_text() == "mine\n"
    assert main([*LANDSCAPE, "--out", str(run), "--force"]) == 0
    assert (run / "notes.txt").read_text() == "mine\n"
    assert "notes.txt" not in read_marker(run)["files"]


def test_resume_does_not_adopt_a_file_added_after_the_run(tmp_path, capsys):
    """The issue's sequence: train; echo x > R/notes.txt; train --resume; landscape --out R (used to delete it)."""
    run = tmp_path / "R"
    assert main([*TRAIN, "--out", str(run)]) == 0
    ours = _files(run)
    (run / "notes.txt").write_text("mine\n")
    assert main([*TRAIN, "--out", str(run), "--resume"]) == 0
    assert set(read_marker(run)["files"]) == ours  # exactly theorycheck's files
    capsys.readouterr()
    _later_commands_keep(run, capsys)


def test_resume_after_a_kill_does_not_adopt_a_file_added_meanwhile(tmp_path, capsys):
    """A run killed before its marker (``stop_at``: no final checkpoint, no marker), a file of the user's added,
    then ``--resume``: the marker lists the run's files (checkpoints of the killed run included), not the user's."""
    run = tmp_path / "R"
    cfg = preset("official-demo").replace(steps=20, checkpoint_every=10)
    Trainer(cfg, run, progress=False).run(stop_at=10)
    assert read_marker(run) is None and (run / "checkpoint-10.json").is_file()
    (run / "notes.txt").write_text("mine\n")
    assert main([*TRAIN, "--out", str(run), "--resume"]) == 0
    assert set(read_marker(run)["files"]) == _files(run) - {"notes.txt"}
    assert {"checkpoint-10.json", "params.npz", "metrics.jsonl"} <= set(read_marker(run)["files"])
    capsys.readouterr()
    _later_commands_keep(run, capsys)


def test_a_file_written_during_the_run_is_not_adopted(tmp_path, monkeypatch, capsys):
    run = tmp_path / "R"
    real = cli_train.run_preset

    def user_writes_meanwhile(name, out, **kw):
        summary = real(name, out, **kw)
        (out / "notes.txt").write_text("mine\n")  # written by the user while the run was going on
        return summary

    monkeypatch.setattr(cli_train, "run_preset", user_writes_meanwhile)
    assert main([*TRAIN, "--out", str(run)]) == 0
    assert set(read_marker(run)["files"]) == _files(run) - {"notes.txt"}
    monkeypatch.undo()
    capsys.readouterr()
    _later_commands_keep(run, capsys)


def test_a_train_runs_marker_lists_every_file_it_wrote(tmp_path):
    """Run folders under ``--seeds`` with figures: the marker lists every file there (the names the run writes are
    recognised, :data:`theorycheck.cli.train._TRAIN_OUTPUT`), so a rerun may replace them."""
    run = tmp_path / "R"
    argv = ["train", "--preset", "stage1-population", "--steps", "4", "--checkpoint-every", "2", "--seeds", "0,1"]
    assert main([*argv, "--quiet", "--out", str(run)]) == 0
    files = _files(run)
    assert any(f.endswith(".png") for f in files) and any("/checkpoint-" in f for f in files)
    assert set(read_marker(run)["files"]) == files


# ----------------------------------------------------------------------------- two outputs, one path (item 2)
def _no_work(*args, **kwargs):
    raise AssertionError("work started before the outputs were checked")


@pytest.mark.parametrize(
    "argv, same",
    [
        (["solve", "value", "--npz", "{d}/x.npz", "--json", "{d}/x.npz"], ("--json", "--npz")),
        (["solve", "value", "--npz", "{d}/x", "--json", "{d}/x.npz"], ("--json", "--npz")),  # suffix added
        (["solve", "value", "--out", "{d}/D", "--json", "{d}/D/s.json"], ("--out", "--json")),
        (["solve", "value", "--out", "{d}/D", "--npz", "{d}/D/optimum"], ("--out", "--npz")),
        (["solve", "embedding", "--json", "{d}/alias/x.npz", "--npz", "{d}/x.npz"], ("--json", "--npz")),  # symlink
        (["landscape", "--out", "{d}/L", "--json", "{d}/L/optimum.json"], ("--out", "--json")),
        (["verify", "--out", "{d}/R", "--json", "{d}/R/results.json"], ("--out", "--json")),
        (["dynamics", "--out", "{d}/D", "--json", "{d}/D/stage_grid.json"], ("--out", "--json")),
        (["train", "--preset", "stage1-population", "--out", "{d}/R", "--json", "{d}/R/summary.json"], ("--out",)),
        (["solve", "attention", "--model", "zipf:s=1", "--T", "3", "--v", "3", "--tau", "1", "--family", "label",
          "--certify", "interval", "--checkpoint", "{d}/c.json", "--json", "{d}/c.json"], ("--checkpoint", "--json")),
    ],
)  # fmt: skip
def test_two_outputs_of_one_command_are_never_the_same_path(argv, same, tmp_path, monkeypatch, capsys):
    for module, name in ((cli_verify, "run_claims"), (cli_train, "run_preset")):
        monkeypatch.setattr(module, name, _no_work)
    os.symlink(tmp_path, tmp_path / "alias")  # the same folder under another name
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([a.replace("{d}", str(tmp_path)) for a in argv]) == 2
    line = _one_line(capsys)
    assert "two outputs of one command must be different files" in line, line
    assert all(flag in line for flag in same), line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no folder made


def test_resume_with_json_inside_the_run_folder_is_refused(tmp_path, capsys):
    run = tmp_path / "R"
    argv = ["train", "--preset", "stage1-population", "--steps", "2", "--quiet", "--no-figures", "--out", str(run)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--resume", "--json", str(run / "new.json")]) == 2
    assert "is inside the --out folder" in _one_line(capsys)


def test_distinct_outputs_are_accepted(tmp_path, capsys):
    argv = ["solve", "value", "--T", "3", "--v", "2", "--tau", "1", "--out", str(tmp_path / "D")]
    assert main([*argv, "--json", str(tmp_path / "s.json"), "--npz", str(tmp_path / "D2" / "x")]) == 0
    assert (tmp_path / "s.json").is_file() and (tmp_path / "D2" / "x.npz").is_file()


def test_outputs_are_only_tracked_within_a_command(tmp_path):
    """The library's own writers (outside a command) are not restricted: a path may be claimed twice."""
    claim_output(tmp_path / "a.json", "--json")
    claim_output(tmp_path / "a.json", "--npz")


# ----------------------------------------------------------------------------- --checkpoint checked first (item 9)
@pytest.mark.parametrize("where", ["/proc/x", "{d}/ro/ckpt.jsonl", "{d}/adir"])
def test_an_unwritable_checkpoint_is_refused_before_any_work(where, tmp_path, monkeypatch, capsys):
    (tmp_path / "ro").mkdir()
    (tmp_path / "adir").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    if os.access(tmp_path / "ro", os.W_OK) and "ro" in where:
        pytest.skip("running as a user who can write anywhere (root without a read-only mount)")
    monkeypatch.setattr("theorycheck.solvers.attention._family.attach_general_interval", _no_work)
    argv = ["solve", "attention", "--model", "zipf:s=1", "--T", "3", "--v", "3", "--tau", "1", "--family", "label"]
    path = where.replace("{d}", str(tmp_path))
    assert main([*argv, "--certify", "interval", "--checkpoint", path]) == 2
    line = _one_line(capsys)
    assert "--checkpoint" in line and path.rsplit("/", 1)[0] in line, line
    assert not re.search(r"\.tmp|\.probe", line)
