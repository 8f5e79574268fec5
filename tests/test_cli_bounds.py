"""Sizes bounded before work (issue #26 item 3): ``solve attention --n-grid`` and ``landscape --n-grid`` are
refused with one line naming the flag and the allowed range (or the memory guard) before anything runs."""

import re

import pytest

from theorycheck._memory import check_grid
from theorycheck.cli import landscape as cli_landscape
from theorycheck.cli import main
from theorycheck.cli import solve as cli_solve


def _no_work(*args, **kwargs):
    raise AssertionError("work started before --n-grid was checked")


@pytest.mark.parametrize(
    "extra, n, message",
    [
        ([], "100000000", r"--n-grid must lie in \[11, 1000000\] for the paper's model with --value block"),
        ([], "3", r"--n-grid must lie in \[11, 1000000\]"),
        (["--value", "identity"], "5000", r"--n-grid must lie in \[11, 2001\] for the paper's model with --value id"),
        (["--model", "zipf:s=1.1", "--T", "3", "--v", "2"], "100", r"--n-grid must lie in \[1, 25\] with --model"),
    ],
)
def test_solve_attention_n_grid_refused_before_work(extra, n, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_solve, "run_solve", _no_work)
    out, js = tmp_path / "x.npz", tmp_path / "s.json"
    assert main(["solve", "attention", *extra, "--n-grid", n, "--npz", str(out), "--json", str(js)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(message, err), err
    assert not out.exists() and not js.exists()


def test_solve_attention_n_grid_checked_against_the_memory_guard(monkeypatch, capsys):
    monkeypatch.setattr(cli_solve, "run_solve", _no_work)
    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "10M")
    assert main(["solve", "attention", "--n-grid", "1000000"]) == 2
    err = capsys.readouterr().err
    assert "--n-grid 1000000: the grid's arrays" in err and "above the memory limit 10.0 MiB" in err
    assert "pass a smaller --n-grid (allowed [11, 1000000]" in err


@pytest.mark.parametrize(
    "extra, n, message",
    [
        ([], "5000", r"--n-grid must lie in [2, 2001] for the paper's model, got 5000"),
        ([], "1", r"--n-grid must lie in [2, 2001]"),
        (["--model", "zipf:s=1.1", "--T", "3", "--v", "2"], "1000", "--n-grid must lie in [2, 101] with --model"),
    ],
)
def test_landscape_n_grid_refused_before_work(extra, n, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_landscape, "write_landscape", _no_work)
    out = tmp_path / "land"
    assert main(["landscape", *extra, "--n-grid", n, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_landscape_n_grid_checked_against_the_memory_guard(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_landscape, "write_landscape", _no_work)
    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "100M")
    assert main(["landscape", "--n-grid", "2000", "--out", str(tmp_path / "land")]) == 2
    err = capsys.readouterr().err
    assert "--n-grid 2000: the grid's arrays" in err and "above the memory limit 100.0 MiB" in err
    assert list(tmp_path.iterdir()) == []


def test_check_grid_accepts_in_range_and_rejects_non_integers():
    assert check_grid("--n", 5, low=2, high=10, dims=2) == 5
    with pytest.raises(TypeError, match="--n must be an integer"):
        check_grid("--n", 5.0, low=2, high=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"--n must lie in \[2, 10\] here, got 11"):
        check_grid("--n", 11, low=2, high=10, where="here")
