"""``theorycheck solve embedding``."""

import json

import pytest

import theorycheck as tc
from theorycheck.cli import main
from theorycheck.solvers import closed_form_gram

ARGS = ["--T", "5", "--v", "3", "--tau", "2", "--p-m", "0.3"]


def test_solve_embedding_json_matches_closed_form(tmp_path, capsys):
    out = tmp_path / "emb.json"
    assert main(["solve", "embedding", *ARGS, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    G = closed_form_gram(tc.TopicModel(T=5, v=3, tau=2), tc.Masking(0.3, 0.1, 0.1))
    opt = data["optimum"]
    assert opt["same_topic"] == G.x and opt["different_topic"] == G.y
    assert opt["rank"] == opt["min_embedding_dim"] == 5
    assert abs(data["fun"] - opt["L_star"]) <= 1e-12
    # the pair-class statistics of an embedding with this Gram reproduce x and y
    assert abs(opt["same_topic_dot"] - G.x) <= 1e-12 and abs(opt["diff_topic_dot"] - G.y) <= 1e-12
    assert data["status"] == 0 and data["success"] is True and data["problem"] == "embedding"
    assert "same_topic" in capsys.readouterr().out


def test_the_old_alias_is_gone(capsys):
    """``theorycheck embedding`` was the alias of ``solve embedding`` before 0.1.0: removed, not deprecated."""
    with pytest.raises(SystemExit):
        main(["embedding", *ARGS])
    assert "invalid choice: 'embedding'" in capsys.readouterr().err


def test_exits_1_when_the_solver_is_not_certified(monkeypatch, capsys):
    """status != 0 means exit 1."""
    from theorycheck import solvers
    from theorycheck.solvers import SolveResult

    def failing(tm, mk, **kw):
        return SolveResult(x=None, fun=float("nan"), status=2, method=kw.get("method", "closed-form"))

    monkeypatch.setattr(solvers, "optimal_embedding_gram", failing)
    assert main(["solve", "embedding", "--T", "3", "--v", "2", "--tau", "1"]) == 1
    assert "not certified (status 2)" in capsys.readouterr().err


def test_embedding_command_rejects_small_d(capsys):
    code = main(["solve", "embedding", "--T", "4", "--v", "3", "--tau", "2", "--method", "factorized", "--d", "2"])
    assert code == 2
    assert "d=2 is too small" in capsys.readouterr().err


def test_embedding_command_rejects_bad_masking(capsys):
    assert main(["solve", "embedding", "--p-m", "1.5"]) == 2
    assert "p_m must lie in" in capsys.readouterr().err
