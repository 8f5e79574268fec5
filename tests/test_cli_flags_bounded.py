"""Issue #26 items 2 and 3 on ``train`` and ``verify``: every flag acts or is refused by name, and every size
a user controls is checked against a documented cap before any work."""

from __future__ import annotations

import json

import pytest

from theorycheck.cli import main
from theorycheck.cli.train import MAX_STEPS
from theorycheck.cli.verify import MAX_EXPLORE
from theorycheck.report import default_jobs

TRAIN = ["train", "--preset", "stage1-population", "--quiet", "--no-figures"]


@pytest.mark.parametrize(
    "flags,named",
    [
        (["--T", "-5"], "--T"),
        (["--T", "10"], "--T"),  # even the usual default: a preset has its own model
        (["--v", "4"], "--v"),
        (["--p-m", "0.5"], "--p-m"),
        (["--p-c", "0.2"], "--p-c"),
        (["--p-r", "0.2"], "--p-r"),
        (["--tau", "99"], "--tau"),
        (["--alpha", "nan"], "--alpha"),
        (["--prior", "dirichlet"], "--prior"),
        (["--prior", "dirichlet", "--alpha", "0.5"], "--prior, --alpha"),
    ],
)
def test_train_model_flags_without_a_general_model_are_refused_by_name(tmp_path, capsys, flags, named):
    out = tmp_path / "run"
    assert main([*TRAIN, "--steps", "2", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert f"{named}: only used with --model/--topic-word" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # refused before any work


def test_train_resume_with_a_model_flag_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*TRAIN, "--steps", "2", "--out", str(out)]) == 0
    before = (out / "config.json").read_text()
    capsys.readouterr()
    assert main([*TRAIN, "--steps", "2", "--out", str(out), "--resume", "--T", "8"]) == 2
    assert "--T: only used with --model/--topic-word" in capsys.readouterr().err
    assert (out / "config.json").read_text() == before
    assert json.loads(before)["data"]["T"] == 10


def test_train_model_flags_apply_with_a_general_model(tmp_path):
    out = tmp_path / "run"
    argv = [*TRAIN, "--model", "paper", "--T", "3", "--v", "3", "--tau", "2", "--p-m", "0.5"]
    assert main([*argv, "--steps", "1", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["data"]["p_m"] == 0.5 and cfg["data"]["tau"] == 2 and len(cfg["data"]["phi"]) == 3


def test_train_model_flags_with_a_general_model_are_validated(tmp_path, capsys):
    argv = [*TRAIN, "--model", "paper", "--T", "3", "--v", "3", "--steps", "1", "--out", str(tmp_path / "r")]
    assert main([*argv, "--p-m", "nan"]) == 2
    assert "p_m" in capsys.readouterr().err
    assert main([*argv, "--tau", "99"]) == 2
    assert "tau" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_help_names_the_model_only_flags_and_their_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps after a hyphen
    assert "number of topics (default: 10) (with --model/--topic-word only" in out
    assert "selection probability (default: 0.15) (with --model/--topic-word only" in out
    assert "default: None" not in out
    assert f"0 to {MAX_STEPS:,}" in out


@pytest.mark.parametrize("steps", [str(MAX_STEPS + 1), "1000000000000", "-1"])
def test_train_steps_is_capped_before_any_work(tmp_path, capsys, steps):
    out = tmp_path / "run"
    assert main([*TRAIN, "--steps", steps, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--steps must lie in [0, {MAX_STEPS}]" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("n", [str(MAX_EXPLORE + 1), "1000000000", "0"])
def test_verify_explore_is_capped_before_any_work(tmp_path, capsys, n):
    out = tmp_path / "rep"
    assert main(["verify", "--explore", n, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--explore must lie in [1, {MAX_EXPLORE}]" in err
    assert not out.exists()


def test_verify_help_documents_the_explore_cap(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    assert f"1 to {MAX_EXPLORE:,}" in " ".join(capsys.readouterr().out.split())


def test_verify_jobs_above_the_cores_is_capped_with_a_note(tmp_path, capsys, monkeypatch):
    import theorycheck.cli.verify as verify

    seen = {}

    def fake_run_claims(claims, *, jobs, **kw):
        seen["jobs"] = jobs
        return []

    monkeypatch.setattr(verify, "run_claims", fake_run_claims)
    out = tmp_path / "rep"
    assert main(["verify", "--jobs", "100000", "--out", str(out), "--quiet", "--no-figures"]) == 0
    cores = default_jobs()
    assert seen["jobs"] == cores
    err = capsys.readouterr().err
    assert f"note: --jobs 100000 capped to the {cores} cores available" in err
    assert sum("--jobs" in ln for ln in err.splitlines()) == 1
    capsys.readouterr()
    assert main(["verify", "--jobs", "1", "--out", str(out), "--force", "--quiet", "--no-figures"]) == 0
    assert seen["jobs"] == 1 and "capped" not in capsys.readouterr().err


def test_train_resume_with_a_changed_model_flag_on_a_general_model_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [*TRAIN, "--model", "paper", "--v", "3", "--tau", "2", "--steps", "2", "--out", str(out)]
    assert main([*argv, "--T", "3"]) == 0
    capsys.readouterr()
    assert main([*argv, "--T", "4", "--resume"]) == 2
    assert "data.T: 3 -> 4" in capsys.readouterr().err
