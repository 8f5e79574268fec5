"""Recovery messages that are true (issue #26 item 6), each tested against what it claims."""

from __future__ import annotations

import hashlib
import io
import json
import re

import numpy as np
import pytest

from theorycheck import cli
from theorycheck._validate import TheorycheckWarning
from theorycheck.cli import verify as cli_verify
from theorycheck.cli.common import leaf_parsers
from theorycheck.nn import Trainer, config_diff, preset, train

TRAIN = ["train", "--preset", "stage1-population", "--quiet", "--no-figures"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_rerun_into_a_killed_run_mentions_resume(tmp_path, capsys):
    """A run killed before its end (no marker): a rerun without --resume says to resume, not that the files
    are the user's; with --force too (its files are not overwritten as if foreign); --resume continues it."""
    out = tmp_path / "run"
    cfg = preset("stage1-population").replace(steps=6, checkpoint_every=2)
    Trainer(cfg, out, progress=False).run(stop_at=4)  # killed after step 4: checkpoints, no marker
    argv = [*TRAIN, "--steps", "6", "--checkpoint-every", "2", "--out", str(out)]
    for extra in ([], ["--force"]):
        assert cli.main([*argv, *extra]) == 2
        line = _one_line(capsys)
        assert "--resume" in line and "checkpoint-4.json, step 4" in line, line
        assert "did not write" not in line
    assert cli.main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["steps"] == 6


def test_a_plain_text_topic_word_file_gets_the_numpy_save_hint(tmp_path, capsys):
    phi = tmp_path / "phi.txt"
    phi.write_text("0.5 0.5 0 0\n0 0 0.5 0.5\n")
    assert cli.main(["solve", "value", "--topic-word", str(phi)]) == 2
    line = _one_line(capsys)
    assert "not a .npy file" in line and "numpy.save" in line and "numpy.loadtxt" in line
    assert "allow_pickle" not in line and "unsafe" not in line
    np.save(tmp_path / "phi.npy", np.loadtxt(phi))  # the conversion the message gives works
    assert cli.main(["solve", "value", "--topic-word", str(tmp_path / "phi.npy"), "--tau", "1"]) == 0


def test_a_pickled_topic_word_file_is_not_loaded_and_no_pickle_hint(tmp_path, capsys):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert cli.main(["solve", "value", "--topic-word", str(tmp_path / "obj.npy")]) == 2
    line = _one_line(capsys)
    assert "holds Python objects" in line and "numpy.save" in line and "allow_pickle" not in line


def _drop_a_parameter(npz_path, js_path):
    """Rewrite a checkpoint without its first parameter, its SHA-256 updated (intact, but not fitting the model)."""
    with np.load(npz_path) as z:
        arrays = {k: z[k] for k in z.files}
    dropped = next(k for k in arrays if k.startswith("param/"))
    del arrays[dropped]
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    npz_path.write_bytes(buf.getvalue())
    meta = json.loads(js_path.read_text())
    meta["npz_sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    js_path.write_text(json.dumps(meta))
    return dropped[len("param/") :]


def test_a_checkpoint_that_does_not_fit_the_model_is_named_and_skipped(tmp_path):
    cfg = preset("stage1-population").replace(steps=6, checkpoint_every=2)
    out = tmp_path / "run"
    Trainer(cfg, out, progress=False).run(stop_at=4)
    name = _drop_a_parameter(out / "checkpoint-4.npz", out / "checkpoint-4.json")
    with pytest.warns(TheorycheckWarning, match=r"checkpoint-4\.npz does not fit the model") as record:
        res = train(cfg, out, resume=True, progress=False)
    text = str(record[0].message)
    assert repr(name) in text and "using the previous checkpoint checkpoint-2.json (step 2)" in text
    assert res.steps == 6
    ref = train(cfg, tmp_path / "ref", progress=False)  # resumed from step 2: the same run
    for k, v in ref.model.state_dict().items():
        np.testing.assert_array_equal(res.model.state_dict()[k], v)


def test_config_diff_abbreviates_a_topic_word_matrix():
    phi_a = np.full((20, 60), 1 / 60).tolist()
    phi_b = np.full((20, 60), 1 / 60 + 1e-9).tolist()
    (line,) = config_diff({"data": {"phi": phi_a}}, {"data": {"phi": phi_b}})
    assert line.startswith("data.phi: <20 x 60 array [[") and len(line) < 300, line
    assert config_diff({"seed": 0}, {"seed": 5}) == ["seed: 0 -> 5"]


def test_resume_with_another_general_model_names_phi_briefly(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [*TRAIN, "--T", "4", "--v", "30", "--steps", "2", "--checkpoint-every", "1", "--out", str(out)]
    assert cli.main([*argv, "--model", "zipf:s=1.1"]) == 0
    capsys.readouterr()
    assert cli.main([*argv, "--model", "zipf:s=1.3", "--resume"]) == 2
    line = _one_line(capsys)
    assert "data.phi: <4 x 120 array" in line and len(line) < 1000, line


def test_a_malformed_max_bytes_is_one_error_up_front(monkeypatch, capsys, tmp_path):
    def no_work(*args, **kwargs):
        raise AssertionError("checks ran")

    monkeypatch.setenv("THEORYCHECK_MAX_BYTES", "abc")
    monkeypatch.setattr(cli_verify, "run_claims", no_work)
    assert cli.main(["verify", "--out", str(tmp_path / "r")]) == 2
    line = _one_line(capsys)
    assert line == (
        "theorycheck verify: error: THEORYCHECK_MAX_BYTES='abc' is not a positive size; use bytes such as 8e9, "
        "512M or 16G"
    )
    assert not (tmp_path / "r").exists()


def test_a_refusal_names_only_flags_the_command_has(tmp_path, capsys):
    """bench into a folder of the user's: the message's advice (--force) is a flag bench accepts, and it works."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert cli.main(["bench", "--out", str(out), "no-such-benchmark"]) == 2
    assert "unknown benchmark" in _one_line(capsys)
    assert cli.main(["bench", "--out", str(out), "--list"]) == 0
    capsys.readouterr()
    assert cli.main(["bench", "--out", str(out), "--extra=--help", "stage1"]) == 2
    line = _one_line(capsys)
    flags = {s for a in leaf_parsers(cli.build_parser())["bench"]._actions for s in a.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))
    assert "--force" in named and named <= flags, (named, line)


@pytest.mark.parametrize(
    "argv",
    [
        ["landscape", "--model", "zipf:s=1", "--T", "60", "--v", "3", "--tau", "10", "--n-grid", "3"],
        ["solve", "attention", "--model", "zipf:s=1", "--T", "60", "--v", "3", "--tau", "10"],
    ],
)
def test_too_many_topic_sets_names_flags_the_command_has(argv, tmp_path, capsys):
    """The library's advice ``pass n_sets`` is not a flag of the CLI: the command names --T/--tau instead."""
    assert cli.main([*argv, *(["--out", str(tmp_path / "l")] if argv[0] == "landscape" else [])]) == 2
    line = _one_line(capsys)
    assert "n_sets" not in line and "--T 60 --tau 10" in line and "C(T, tau) = 75,394,027,566" in line
    assert not (tmp_path / "l").exists()
