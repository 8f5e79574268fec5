"""``--quiet`` silences the progress bars inside library routines (theorycheck._progress), e.g. the structured
attention search's "attention grid" bar that ``theorycheck benchmark`` certificates and claims reach."""

from __future__ import annotations

import os

import numpy as np

from theorycheck import GeneralTopicModel, Masking, _progress
from theorycheck.cli import build_parser
from theorycheck.cli.common import run_command
from theorycheck.solvers import optimal_attention


def _solve():
    rng = np.random.default_rng(2)
    g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.4), size=3), tau=2)
    return optimal_attention(g, Masking(), options={"family": "label"})


def test_attention_grid_bar_follows_quiet(capsys, monkeypatch):
    monkeypatch.delenv(_progress.ENV_VAR, raising=False)
    _solve()
    assert "attention grid" in capsys.readouterr().err  # the bar is there without --quiet
    with _progress.quiet():
        assert _progress.is_quiet()
        _solve()
    assert "attention grid" not in capsys.readouterr().err
    assert not _progress.is_quiet()  # restored


def test_cli_quiet_flag_sets_the_switch_for_the_command_only(monkeypatch):
    monkeypatch.delenv(_progress.ENV_VAR, raising=False)
    seen = []
    for argv in (["benchmark", "--quiet"], ["benchmark"], ["verify", "--quiet"]):
        args = build_parser().parse_args(argv)
        args.argv = argv
        args.func = lambda a: seen.append((_progress.is_quiet(), os.environ.get(_progress.ENV_VAR))) or 0
        assert run_command(args) == 0
        assert not _progress.is_quiet()
    assert seen == [(True, "1"), (False, None), (True, "1")]


def test_environment_variable_is_honoured(monkeypatch):
    monkeypatch.setenv(_progress.ENV_VAR, "1")
    assert _progress.is_quiet() and _progress.bar(total=3).disable
    monkeypatch.setenv(_progress.ENV_VAR, "0")
    assert not _progress.is_quiet()
