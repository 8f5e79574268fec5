"""Fault injection, clean errors (issue #38 items 8-9): no traceback and no misleading success.

- a diverging training run is a result (``dynamics``: the cell's ``diverged`` step; ``train``: one line, exit 1),
  never a ``FloatingPointError`` traceback;
- ``benchmark --budget`` must be finite and at most a day, ``--sizes ''`` is refused (it ran the default set);
- a claim module that calls ``sys.exit`` is a load error naming it (it ended ``verify`` silently with its code);
- ``bench --dir`` on a folder without benchmark scripts is refused (it exited 0 having run nothing);
- the library names the parameter: an array passed as ``value=``, a ragged ``phi``/``W``/``S``, documents holding
  tokens outside the model's vocabulary.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck._validate import check_choice
from theorycheck.cli import benchmark as cli_benchmark
from theorycheck.cli import main
from theorycheck.cli import train as cli_train
from theorycheck.cli.parsers.benchmark import MAX_BUDGET
from theorycheck.nn import Trainer, TrainingDiverged, stage_grid
from theorycheck.nn.stage_grid import grid_config
from theorycheck.report import run_claims
from theorycheck.report.claims import Claim
from theorycheck.sampling import Documents, mask_documents, sample_documents
from theorycheck.sampling.documents import PAD


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def _no_work(*args, **kwargs):
    raise AssertionError("work started before the flags were checked")


# ----------------------------------------------------------------------------- diverging runs (item 8)
def test_a_diverging_dynamics_cell_is_a_result(tmp_path, capsys):
    """``--lr 1e18``: the cell's row says where the loss left the floats, the same step at which the trainer itself
    stops on the cell's configuration; the other cell is unaffected; no warning, no traceback, exit 0."""
    out = tmp_path / "d"
    argv = ["dynamics", "--lr", "1e18,30", "--init-scale", "0.01", "--steps", "20", "--quiet", "--no-figures"]
    assert main([*argv, "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    rows = json.loads((out / "stage_grid.json").read_text())["rows"]
    with pytest.raises(TrainingDiverged) as info, np.errstate(all="ignore"):
        Trainer(grid_config(1e18, 0.01, steps=20), progress=False).run()
    assert rows[0]["diverged"] == info.value.step and not math.isfinite(info.value.loss)
    assert rows[0]["final_loss"] is None and rows[0]["stage1_end"] is None
    assert rows[1]["diverged"] is None and math.isfinite(rows[1]["final_loss"])
    assert "| 1e+18 | 0.01 | - | - | - | - | - | " in (out / "stage_grid.md").read_text()


def test_stage_grid_reports_divergence_in_the_api():
    (row,) = stage_grid([1e18], [0.01], steps=10, progress=False)
    assert isinstance(row["diverged"], int) and 0 <= row["diverged"] < 10
    assert issubclass(TrainingDiverged, FloatingPointError)  # ``except FloatingPointError`` still catches it


def test_train_divergence_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    def diverges(*args, **kwargs):
        raise TrainingDiverged(4, math.nan)

    monkeypatch.setattr(cli_train, "run_preset", diverges)
    out = tmp_path / "run"
    assert main(["train", "--preset", "stage1-population", "--quiet", "--out", str(out)]) == 1
    line = _one_line(capsys)
    assert line.startswith("theorycheck train: the training diverged: non-finite loss nan at step 4"), line


# ----------------------------------------------------------------------------- benchmark flags (items 8, 9)
@pytest.mark.parametrize("budget", ["inf", "1e9", "1e18", "nan", "-1", "0", str(MAX_BUDGET * 2)])
def test_benchmark_budget_is_finite_and_bounded(budget, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_benchmark, "run_benchmark", _no_work)
    assert main(["benchmark", "--budget", budget, "--out", str(tmp_path / "b")]) == 2
    line = _one_line(capsys)
    assert "--budget must" in line, line
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("sizes", ["", " ", " , "])
def test_benchmark_empty_sizes_is_refused(sizes, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_benchmark, "run_benchmark", _no_work)
    assert main(["benchmark", "--sizes", sizes, "--out", str(tmp_path / "b")]) == 2
    assert "--sizes" in _one_line(capsys)


def test_benchmark_budget_at_the_cap_is_accepted(tmp_path, monkeypatch):
    seen = {}

    def record(out, **kw):
        seen.update(kw)
        return [], {"resumed": 0, "run_now": 0, "fastest": {}}

    monkeypatch.setattr(cli_benchmark, "run_benchmark", record)
    assert main(["benchmark", "--budget", str(MAX_BUDGET), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert seen["budget"] == MAX_BUDGET


# ----------------------------------------------------------------------------- misleading exits (item 9)
def test_a_claim_module_calling_sys_exit_is_a_load_error(tmp_path, capsys):
    path = tmp_path / "script.py"
    path.write_text("import sys\nsys.exit(3)\n")
    assert main(["verify", "--claims", str(path), "--out", str(tmp_path / "r"), "--quiet"]) == 2
    line = _one_line(capsys)
    assert str(path) in line and "sys.exit(3)" in line, line
    assert not (tmp_path / "r").exists()


def test_a_check_calling_sys_exit_is_an_error_row():
    def check(p, inject=None):
        raise SystemExit(3)

    claim = Claim(
        id="zz.exits", statement="exits", source="DERIVED", spec="test", check=check, default_params=({},),
        falsify=lambda p: {},
    )  # fmt: skip
    (row,) = run_claims([claim], progress=False)
    assert row.verdict != "PASS" and "SystemExit: 3" in row.error


@pytest.mark.parametrize("folder", ["empty", "/proc"])
def test_bench_dir_without_scripts_is_refused(folder, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    where = str(tmp_path / folder) if folder == "empty" else folder
    for extra in ([], ["--list"]):
        assert main(["bench", "--dir", where, *extra]) == 2
        line = _one_line(capsys)
        assert "holds no benchmark scripts (bench_*.py)" in line and where in line, line


# ----------------------------------------------------------------------------- the library names the parameter
def test_an_array_where_a_choice_is_expected_names_the_parameter():
    tm, mk = tc.TopicModel(T=2, v=2, tau=1), tc.Masking()
    with pytest.raises(TypeError, match=r"value must be one of 'block', 'identity', got ndarray of shape \(5, 5\)"):
        tc.solvers.optimal_attention(tm, mk, value=np.eye(5))
    with pytest.raises(TypeError, match=r"loss must be one of .*got list"):
        tc.solvers.optimal_attention(tm, mk, loss=["squared"])
    with pytest.raises(ValueError, match="method must be one of"):
        check_choice("method", None, ("a", "b"))  # a scalar that is not a choice stays a ValueError


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: tc.GeneralTopicModel([[0.5, 0.5], [1.0]], prior="uniform-tau", tau=1), "phi"),
        (lambda: tc.population.value_loss([[1.0, 0.0], [0.0]], tc.TopicModel(T=2, v=2, tau=1), tc.Masking()), "W"),
        (lambda: tc.population.attention_loss([[1.0], [0.0, 1.0]], np.eye(5), tc.TopicModel(T=2, v=2, tau=1),
                                              tc.Masking()), "S"),
    ],
)  # fmt: skip
def test_a_ragged_array_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must be a rectangular array.*ragged"):
        call()


TM = tc.TopicModel(T=2, v=2, tau=1)


def _docs(tokens) -> Documents:
    tokens = np.asarray(tokens, dtype=np.int64)
    return Documents(tokens, (tokens != PAD).sum(axis=1).astype(np.int64), None, None)


@given(st.lists(st.integers(-3, 8), min_size=1, max_size=12))
def test_mask_documents_accepts_exactly_the_models_words(row):
    """Tokens 1..n_words (and padding) are accepted; anything else is refused naming its position."""
    tokens = np.array([row])
    outside = [(j, t) for j, t in enumerate(row) if t != PAD and not 1 <= t <= TM.n_words]
    mk = tc.Masking(p_m=0.5)
    if not outside:
        batch = mask_documents(_docs(tokens), TM, mk, seed=0, at_least_one=False)
        assert batch is not None
        return
    j, t = outside[0]
    with pytest.raises(ValueError, match=rf"docs\.tokens\[0, {j}\] = {t} is not a word of the model: words are 1\.\.4"):
        mask_documents(_docs(tokens), TM, mk, seed=0, at_least_one=False)


def test_documents_of_another_model_are_refused():
    docs = sample_documents(tc.TopicModel(T=5, v=5, tau=1), 4, 10, seed=0)
    with pytest.raises(ValueError, match="not a word of the model"):
        mask_documents(docs, TM, tc.Masking(), seed=0)
