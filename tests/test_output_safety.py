"""Output folders and files: validated before any work; only theorycheck's own files are replaced."""

import json
import os
from pathlib import Path

import pytest

from theorycheck._io import MARKER, atomic_directory, prepare_output_dir, read_marker
from theorycheck.cli import main


def _thesis(folder):
    folder.mkdir()
    (folder / "thesis.tex").write_text("\\documentclass{article}")
    (folder / "sub").mkdir()
    (folder / "sub" / "data.csv").write_text("1,2\n")


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_verify_refuses_a_foreign_folder_before_running_claims(tmp_path, monkeypatch, capsys):
    import theorycheck.report as report

    out = tmp_path / "mine"
    _thesis(out)
    before = _tree(out)
    monkeypatch.setattr(report, "run_claims", lambda *a, **k: pytest.fail("claims ran before the path was checked"))
    assert main(["verify", "--out", str(out), "--only", "data.moments", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(out) in err and "thesis.tex" in err and "--force" in err and "new folder name" in err
    assert _tree(out) == before and (out / "thesis.tex").read_text() == "\\documentclass{article}"


def test_force_writes_into_a_foreign_folder_and_keeps_its_files(tmp_path):
    out = tmp_path / "mine"
    _thesis(out)
    argv = ["verify", "--out", str(out), "--only", "data.moments", "--quiet", "--no-figures", "--force"]
    assert main(argv) == 0
    assert {"thesis.tex", "sub/data.csv", "results.json", "report.md", MARKER} <= set(_tree(out))
    assert read_marker(out)["files"] == ["report.md", "results.json"]
    # a second forced run replaces theorycheck's files, still keeps the others, leaves no temporary folder
    assert main(argv) == 0
    assert sorted(_tree(out)) == sorted(["thesis.tex", "sub", "sub/data.csv", "results.json", "report.md", MARKER])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_force_refuses_to_overwrite_a_foreign_file(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.json").write_text("my own results")
    with pytest.raises(ValueError, match="refusing to overwrite files theorycheck did not write.*results.json"):
        with atomic_directory(out, force=True) as tmp:
            (tmp / "results.json").write_text("{}")
    assert (out / "results.json").read_text() == "my own results"


def test_rerun_into_a_theorycheck_folder_replaces_it(tmp_path):
    out = tmp_path / "rep"
    argv = ["verify", "--out", str(out), "--only", "data.moments", "--quiet", "--no-figures"]
    assert main(argv) == 0
    first = read_marker(out)
    assert first["command"].startswith("theorycheck verify") and first["tool"] == "theorycheck"
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
    assert json.loads((out / "results.json").read_text())["summary"]["passed"] >= 1


def test_a_file_added_to_a_theorycheck_folder_makes_it_foreign(tmp_path, capsys):
    out = tmp_path / "rep"
    argv = ["verify", "--out", str(out), "--only", "data.moments", "--quiet", "--no-figures"]
    assert main(argv) == 0
    (out / "notes.txt").write_text("mine")
    assert main(argv) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"


def test_out_dot_never_deletes_the_current_directory(tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "work"
    _thesis(cwd)
    monkeypatch.chdir(cwd)
    before = _tree(cwd)
    argv = ["verify", "--out", ".", "--only", "data.moments", "--quiet", "--no-figures"]
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err and _tree(cwd) == before
    assert main([*argv, "--force"]) == 0
    assert set(before) < set(_tree(cwd)) and (cwd / "results.json").is_file()
    assert os.getcwd() == str(cwd) and cwd.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_out_dot_in_an_empty_directory_writes_in_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with atomic_directory(".") as tmp:
        (tmp / "a.txt").write_text("a")
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER, "a.txt"]
    assert os.getcwd() == str(tmp_path)


def test_missing_parent_is_created(tmp_path):
    out = tmp_path / "a" / "b" / "rep"
    assert main(["verify", "--out", str(out), "--only", "data.moments", "--quiet", "--no-figures"]) == 0
    assert (out / "results.json").is_file()


def test_existing_file_as_out_folder_is_an_error(tmp_path, capsys):
    f = tmp_path / "report.txt"
    f.write_text("x")
    assert main(["verify", "--out", str(f), "--only", "data.moments", "--quiet"]) == 2
    assert "is an existing file, not a folder" in capsys.readouterr().err
    assert f.read_text() == "x"


def test_parent_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="--out .*is not a folder"):
        prepare_output_dir(tmp_path / "f" / "rep")


def test_empty_paths_are_errors():
    with pytest.raises(ValueError, match="--out: empty path"):
        prepare_output_dir("")
    with pytest.raises(ValueError, match="--json: empty path"):
        prepare_output_dir("  ", kind="file", flag="--json")


def test_directory_as_json_file_is_an_error(tmp_path, capsys):
    assert main(["solve", "value", "--T", "3", "--v", "2", "--tau", "1", "--json", str(tmp_path)]) == 2
    assert "--json" in (err := capsys.readouterr().err) and "is an existing folder" in err


def test_file_suffix_is_added_only_if_missing(tmp_path):
    assert prepare_output_dir(tmp_path / "w", kind="file", suffix=".npz") == tmp_path / "w.npz"
    assert prepare_output_dir(tmp_path / "w.npz", kind="file", suffix=".npz") == tmp_path / "w.npz"
    with pytest.raises(ValueError, match="kind must be"):
        prepare_output_dir(tmp_path, kind="folder")


def test_landscape_refuses_a_foreign_folder_before_work(tmp_path, monkeypatch, capsys):
    import theorycheck.solvers

    out = tmp_path / "mine"
    _thesis(out)
    monkeypatch.setattr(
        theorycheck.solvers, "optimal_attention", lambda *a, **k: pytest.fail("solved before the path check")
    )
    assert main(["landscape", "--T", "4", "--v", "3", "--tau", "2", "--out", str(out)]) == 2
    assert "thesis.tex" in capsys.readouterr().err and _tree(out) == ["sub", "sub/data.csv", "thesis.tex"]


def test_landscape_force_keeps_foreign_files(tmp_path):
    out = tmp_path / "mine"
    _thesis(out)
    argv = ["landscape", "--T", "4", "--v", "3", "--tau", "2", "--n-grid", "11", "--out", str(out), "--force"]
    assert main(argv) == 0
    assert read_marker(out)["files"] == ["grid.npz", "landscape.png", "optimum.json"]
    assert {"thesis.tex", "sub/data.csv"} <= set(_tree(out))
    assert json.loads((out / "optimum.json").read_text())["status"] == 0


def test_bench_out_checked_before_running(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    bench = Path(__file__).resolve().parent.parent / "benchmarks"  # also when theorycheck is installed
    assert main(["bench", "stage1", "--dir", str(bench), "--out", str(f)]) == 2
    captured = capsys.readouterr()
    assert "is an existing file" in captured.err and "==> bench" not in captured.out


def test_solve_json_into_missing_parent(tmp_path):
    out = tmp_path / "new" / "deep" / "a.json"
    assert main(["solve", "attention", "--T", "4", "--v", "3", "--tau", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["problem"] == "attention"
