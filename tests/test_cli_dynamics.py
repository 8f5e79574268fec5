"""``theorycheck dynamics`` and :func:`theorycheck.nn.stage_grid`: a tiny grid writes its table and figure,
and its boundaries equal those of a direct training run of the same cell with a run folder
(``stages.json``); local worker processes give the serial rows; bad input exits 2 before any work."""

import json

import pytest

from theorycheck import cli
from theorycheck.nn import stage_grid, train
from theorycheck.nn.stage_grid import MAX_CELLS, grid_config

STEPS = 40  # stage 1 ends within 20-30 steps at lr 30-40 (the norm rule needs the plateau)


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_grid_command_writes_table_and_figure_and_matches_a_direct_run(tmp_path, capsys):
    out = tmp_path / "grid"
    argv = ["dynamics", "--lr", "30,40", "--init-scale", "0.01", "--steps", str(STEPS), "--out", str(out), "--quiet"]
    assert cli.main([*argv, "--json", str(tmp_path / "grid.json")]) == 0
    printed = capsys.readouterr().out
    assert "| lr | init_scale | stage1_end" in printed
    for name in ("stage_grid.md", "stage_grid.json", "figures/stage_grid.png"):
        assert (out / name).is_file(), name
    assert (out / "figures/stage_grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "stage_grid.json").read_text())
    assert summary == json.loads((tmp_path / "grid.json").read_text())
    rows = summary["rows"]
    assert [(r["lr"], r["init_scale"]) for r in rows] == [(30.0, 0.01), (40.0, 0.01)]
    direct = train(grid_config(40.0, 0.01, steps=STEPS), tmp_path / "direct", progress=False)
    assert direct.stages is not None and direct.stages["stage1_end"] is not None
    assert rows[1]["stage1_end"] == direct.stages["stage1_end"]
    assert rows[1]["stage2_start"] == direct.stages["stage2_start"]
    assert rows[1]["final_loss"] == direct.final["loss"]
    table = (out / "stage_grid.md").read_text()
    assert f"| 40 | 0.01 | {direct.stages['stage1_end']} |" in table


def test_grid_on_worker_processes_equals_the_serial_grid(tmp_path, capsys):
    out = tmp_path / "grid"
    argv = ["dynamics", "--lr", "40", "--init-scale", "0.01,0.02", "--steps", "25", "--quiet", "--no-figures"]
    assert cli.main([*argv, "--out", str(out), "--jobs", "2"]) == 0
    rows = json.loads((out / "stage_grid.json").read_text())["rows"]
    assert not (out / "figures").exists()
    assert _strip(rows) == _strip(stage_grid([40.0], [0.01, 0.02], steps=25, progress=False))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--lr", "a,b"], "--lr must be comma-separated numbers"),
        (["--lr", "0,30"], "lrs must be a non-empty sequence of finite numbers > 0"),
        (["--init-scale", "-0.01"], "init_scales[]"),
        (["--lr", "30,30"], "lrs must not repeat a value"),
        (["--steps", "0"], "--steps"),
        (["--seed", "-1"], "--seed"),
        (["--jobs", "0"], "--jobs"),
        (["--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"], "not both"),
        (["--lr", ",".join(str(i + 1) for i in range(MAX_CELLS + 1))], "cells; at most"),
    ],
)
def test_bad_input_exits_2_naming_it(tmp_path, capsys, extra, message):
    assert cli.main(["dynamics", "--out", str(tmp_path / "o"), "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_stage_grid_rejects_bad_arguments():
    with pytest.raises(TypeError, match="lrs must be a sequence"):
        stage_grid("30", [0.01])
    with pytest.raises(ValueError, match="init_scales must be a non-empty"):
        stage_grid([30.0], [])
    with pytest.raises(ValueError, match="steps"):
        stage_grid([30.0], [0.01], steps=0)
