"""``--topic-word FILE.npy`` / ``--model SPEC`` on ``solve``, ``landscape``, ``train`` (SPEC §11), via cli.main."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

import theorycheck as tc
from theorycheck import cli
from theorycheck.analysis.landscape import family_scores
from theorycheck.cli.common import general_models, parse_model_spec
from theorycheck.models import GeneralTopicModel

UNIFORM = {"prior": "uniform-tau", "tau": 2}


def _args(**kw):
    base = dict(T=3, v=2, tau=None, prior="uniform-tau", alpha=None, p_m=0.15, p_c=0.1, p_r=0.1)
    base.update(topic_word=None, model_spec=None)
    base.update(kw)
    return types.SimpleNamespace(**base)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("paper", GeneralTopicModel.from_topic_model(tc.TopicModel(T=3, v=2, tau=2))),
        ("overlapping:eps=0.2", GeneralTopicModel.overlapping(3, 2, eps=0.2, tau=2)),
        ("overlapping:n_shared=1", GeneralTopicModel.overlapping(3, 2, n_shared=1, tau=2)),
        ("zipf:s=1.1", GeneralTopicModel.zipf(3, 2, 1.1, tau=2)),
        ("unequal:sizes=3,4,5", GeneralTopicModel.unequal([3, 4, 5], tau=2)),
    ],
)
def test_model_specs(spec, expected):
    assert parse_model_spec(spec, T=3, v=2, law=UNIFORM) == expected
    g, mk = general_models(_args(model_spec=spec, tau=2))
    assert g == expected and mk == tc.Masking()


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("blobs:eps=1", "--model must start with one of"),
        ("zipf:q=1", "--model zipf: takes s="),
        ("zipf", "zipf needs s="),
        ("overlapping:eps=0.1;n_shared=1", "exactly one"),
        ("overlapping:eps=2", "--model 'overlapping:eps=2': eps must lie in"),
        ("overlapping:n_shared=x", "--model: n_shared must be an integer"),
        ("unequal:sizes=3,0", "sizes\\[1\\]"),
        ("paper:eps=1", "no parameters"),
    ],
)
def test_bad_model_spec_names_the_flag(spec, match):
    with pytest.raises(ValueError, match=match):
        general_models(_args(model_spec=spec))


def test_topic_word_file_and_its_errors(tmp_path):
    phi = np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])
    np.save(tmp_path / "phi.npy", phi)
    g, _ = general_models(_args(topic_word=str(tmp_path / "phi.npy")))
    assert g == GeneralTopicModel(phi, tau=2)  # default tau = min(3, T)
    g, _ = general_models(_args(topic_word=str(tmp_path / "phi.npy"), prior="dirichlet", alpha=0.3))
    np.testing.assert_array_equal(g.alpha, [0.3, 0.3])
    np.save(tmp_path / "bad.npy", phi * 2)
    with pytest.raises(ValueError, match="--topic-word .*bad.npy.*row-stochastic"):
        general_models(_args(topic_word=str(tmp_path / "bad.npy")))
    with pytest.raises(ValueError, match="--topic-word .*cannot read"):
        general_models(_args(topic_word=str(tmp_path / "missing.npy")))
    with pytest.raises(ValueError, match="--topic-word or --model, not both"):
        general_models(_args(topic_word=str(tmp_path / "phi.npy"), model_spec="paper"))
    with pytest.raises(ValueError, match="--alpha is required"):
        general_models(_args(model_spec="paper", prior="dirichlet"))


def test_solve_value_general_and_the_paper_model_through_it(tmp_path, capsys):
    args = ["solve", "value", "--T", "3", "--v", "2", "--tau", "2"]
    assert cli.main([*args, "--json", str(tmp_path / "sym.json")]) == 0
    assert cli.main([*args, "--model", "paper", "--json", str(tmp_path / "gen.json")]) == 0
    sym, gen = (json.loads((tmp_path / f).read_text()) for f in ("sym.json", "gen.json"))
    assert gen["model"]["general"] and gen["model"]["n_words"] == 6
    assert gen["fun"] == pytest.approx(sym["fun"], abs=1e-12)  # the same minimum loss (SPEC §11.3)
    np.save(tmp_path / "phi.npy", GeneralTopicModel.overlapping(3, 2, eps=0.3, tau=2).phi)
    out = tmp_path / "opt"
    code = cli.main(["solve", "value", "--topic-word", str(tmp_path / "phi.npy"), "--tau", "2", "--npz", str(out)])
    assert code == 0
    W = np.load(tmp_path / "opt.npz")["W"]
    g = GeneralTopicModel.overlapping(3, 2, eps=0.3, tau=2)
    mk = tc.Masking()
    assert tc.population.value_loss(W, g, mk) == pytest.approx(1.0 - np.trace(g.phi @ g.phi.T @ g.theta_moments()[1]))


def test_solve_embedding_and_attention_general(tmp_path, capsys):
    for problem in ("embedding", "attention"):
        path = tmp_path / f"{problem}.json"
        argv = ["solve", problem, "--model", "unequal:sizes=2,3", "--tau", "1", "--json", str(path)]
        argv += ["--out", str(tmp_path / problem)]
        assert cli.main(argv) == 0
        s = json.loads(path.read_text())
        assert s["success"] and s["model"]["n_words"] == 5
    assert np.load(tmp_path / "embedding" / "optimum.npz")["G"].shape == (6, 6)


def test_solve_bad_model_error_names_the_flag(capsys):
    assert cli.main(["solve", "value", "--model", "zipf:s=-1"]) == 2
    assert "--model 'zipf:s=-1'" in capsys.readouterr().err


def test_landscape_general_grid_is_the_exact_loss(tmp_path, capsys):
    out = tmp_path / "land"
    argv = ["landscape", "--model", "overlapping:eps=0.1", "--T", "3", "--v", "2", "--tau", "2"]
    assert cli.main([*argv, "--n-grid", "3", "--out", str(out)]) == 0
    z = np.load(out / "grid.npz")
    info = json.loads((out / "optimum.json").read_text())
    g, mk = GeneralTopicModel.overlapping(3, 2, eps=0.1, tau=2), tc.Masking()
    W = tc.solvers.optimal_value_matrix(g, mk).x
    W = W.toarray() if hasattr(W, "toarray") else np.asarray(W)
    i, j = 2, 0
    S = family_scores(z["alpha"][i], z["beta"][j], z["G"])
    assert z["L"][i, j] == pytest.approx(tc.population.attention_loss(S, W, g, mk), rel=1e-10)
    assert info["loss"] == pytest.approx(z["L"].min()) and info["solver"]["loss"] <= info["loss"] + 1e-12
    assert info["loss_uniform"] == pytest.approx(tc.population.attention_loss(np.zeros_like(S), W, g, mk))
    capsys.readouterr()
    assert cli.main([*argv, "--sweep", "spec", "--out", str(tmp_path / "x")]) == 2
    assert "--sweep needs the paper's symmetric TopicModel" in capsys.readouterr().err
    # --scheduler runs the sweep (SPEC §4.3 table of the paper's models): refused before any connection
    assert cli.main([*argv, "--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path / "x")]) == 2
    assert "--scheduler (it runs the --sweep)" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_train_general_preset(tmp_path, capsys):
    out = tmp_path / "run"
    # stage2-population: W^V frozen at the general C Sigma^+ (SPEC §11.3), W^K, W^Q by Adam on the exact population
    argv = ["train", "--preset", "stage2-population", "--model", "zipf:s=1.0", "--T", "3", "--v", "3", "--tau", "2"]
    assert cli.main([*argv, "--steps", "30", "--out", str(out), "--quiet", "--no-figures"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    g = GeneralTopicModel.zipf(3, 3, 1.0, tau=2)
    np.testing.assert_allclose(cfg["data"]["phi"], g.phi, rtol=1e-15, atol=0)  # renormalised rows: last-bit only
    assert cfg["init_W_V"] == "stage1-optimum"
    summary = json.loads((out / "summary.json").read_text())
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert recs[-1]["loss"] < recs[0]["loss"]
    assert recs[0]["block_contrast_W_V"] > 0  # the general stage-1 optimum favours same-dominant-topic words
    assert summary["runs"][0]["model"]["n_words"] == 9
    assert cli.main([*argv, "--steps", "30", "--out", str(tmp_path / "g"), "--seeds", "0,1"]) == 2
    assert "--seeds" in capsys.readouterr().err
