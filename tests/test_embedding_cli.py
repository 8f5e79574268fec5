"""``theorycheck embedding``: printed/JSON summary agrees with the library; bad input exits 2."""

import json

import theorycheck as tc
from theorycheck.cli import main
from theorycheck.solvers import closed_form_gram


def test_embedding_command_json_matches_closed_form(tmp_path, capsys):
    out = tmp_path / "emb.json"
    code = main(["embedding", "--T", "5", "--v", "3", "--tau", "2", "--p-m", "0.3", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    G = closed_form_gram(tc.TopicModel(T=5, v=3, tau=2), tc.Masking(0.3, 0.1, 0.1))
    assert data["same_topic"] == G.x and data["different_topic"] == G.y
    assert data["rank"] == data["min_embedding_dim"] == 5
    assert abs(data["loss"] - data["L_star"]) <= 1e-12
    # the pair-class statistics of an embedding with this Gram reproduce x and y
    assert abs(data["same_topic_dot"] - G.x) <= 1e-12 and abs(data["diff_topic_dot"] - G.y) <= 1e-12
    assert "same_topic" in capsys.readouterr().out


def test_embedding_command_rejects_small_d(capsys):
    code = main(["embedding", "--T", "4", "--v", "3", "--tau", "2", "--method", "factorized", "--d", "2"])
    assert code == 2
    assert "d=2 is too small" in capsys.readouterr().err


def test_embedding_command_rejects_bad_masking(capsys):
    assert main(["embedding", "--p-m", "1.5"]) == 2
    assert "p_m must lie in" in capsys.readouterr().err
