"""The attention landscape of a GeneralTopicModel (SPEC §11.4): ``S = alpha I_w + beta G`` on a grid, written by the
same writer and figure as the paper's landscape (grid.npz, landscape.png, optimum.json); finite-N gaps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

import theorycheck as tc
from theorycheck import cli
from theorycheck.analysis import landscape
from theorycheck.analysis.landscape import alpha_beta_grid, family_scores, finite_n_gap
from theorycheck.models import GeneralTopicModel as G
from theorycheck.population import alpha_beta_loss, attention_loss
from theorycheck.report.landscape import write_landscape
from theorycheck.solvers import cotopic_matrix, optimal_value_matrix

MK = tc.Masking(0.3, 0.2, 0.1)


def _dense(W):
    return W.toarray() if hasattr(W, "toarray") else np.asarray(W)


def test_family_scores_by_hand():
    Gm = np.arange(16.0).reshape(4, 4)
    S = family_scores(2.0, 0.5, Gm)
    expected = 0.5 * Gm + 2.0 * np.diag([0.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(S, expected)
    assert Gm[1, 1] == 5.0  # the input is not modified


@pytest.mark.parametrize("value", ["block", "identity"])
def test_general_grid_is_the_exact_loss(value):
    g = G.zipf(3, 2, 1.2, tau=2)
    grid = alpha_beta_grid(g, MK, value, alpha=(-2.0, 4.0, 3), beta=(-1.0, 3.0, 4))
    W = _dense(optimal_value_matrix(g, MK).x) if value == "block" else np.diag([0.0] + [1.0] * g.n_words)
    Gm = cotopic_matrix(g)
    assert grid.L.shape == (3, 4) and grid.value == value
    for i, a in enumerate(grid.alpha):
        for j, b in enumerate(grid.beta):
            S = np.zeros((g.V1, g.V1))
            S[1:, 1:] = a * np.eye(g.n_words) + b * Gm[1:, 1:]
            assert grid.L[i, j] == pytest.approx(attention_loss(S, W, g, MK), rel=1e-12)


@pytest.mark.parametrize("value", ["block", "identity"])
def test_paper_model_through_the_general_grid_is_the_closed_form(value):
    """For the paper's model G is the within-topic all-ones block, so alpha I_w + beta G is the SPEC §4.3
    family at (alpha + beta, beta): the general grid equals the closed form alpha_beta_loss."""
    tm = tc.TopicModel(T=4, v=3, tau=2)
    grid = alpha_beta_grid(G.from_topic_model(tm), MK, value, alpha=(-3.0, 6.0, 4), beta=(-2.0, 4.0, 3))
    closed = alpha_beta_loss(grid.alpha[:, None] + grid.beta[None, :], grid.beta[None, :], tm, MK, value)
    np.testing.assert_allclose(grid.L, closed, rtol=1e-11, atol=1e-12)


def _png_ok(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 400
    assert np.ptp(img[..., :3]) > 0.5  # not blank
    return img


def test_write_landscape_general(tmp_path):
    g = G.overlapping(3, 2, eps=0.2, tau=2)
    info = write_landscape(g, MK, tmp_path / "land", n_grid=9)
    out = tmp_path / "land"
    assert {"grid.npz", "landscape.png", "optimum.json", ".theorycheck.json"} <= {p.name for p in out.iterdir()}
    _png_ok(out / "landscape.png")
    z = np.load(out / "grid.npz")
    np.testing.assert_array_equal(z["G"], cotopic_matrix(g))
    assert z["L"].shape == (9, 9)
    assert json.loads((out / "optimum.json").read_text()) == json.loads(json.dumps(info))
    i, j = np.unravel_index(np.argmin(z["L"]), z["L"].shape)
    assert (info["alpha"], info["beta"], info["loss"]) == (z["alpha"][i], z["beta"][j], z["L"][i, j])
    sol = info["solver"]
    assert sol["loss"] <= info["loss"] + 1e-12  # the solver's family optimum beats the grid
    assert z["alpha"][0] <= sol["alpha"] <= z["alpha"][-1] and z["beta"][0] <= sol["beta"] <= z["beta"][-1]
    W = _dense(optimal_value_matrix(g, MK).x)
    assert info["loss_uniform"] == pytest.approx(attention_loss(np.zeros((g.V1, g.V1)), W, g, MK), rel=1e-12)
    assert info["same_topic_preferred"] == (sol["beta"] > 0) and info["model"]["n_words"] == 6


def test_write_landscape_general_dirichlet_and_errors(tmp_path):
    g = G.zipf(2, 3, 1.0, prior="dirichlet", alpha=0.5)
    info = write_landscape(g, MK, tmp_path / "d", n_grid=3, alpha=(-1.0, 1.0, 3), beta=(-1.0, 1.0, 3))
    assert info["model"]["prior"] == "dirichlet" and np.isfinite(info["loss"])
    _png_ok(tmp_path / "d" / "landscape.png")
    with pytest.raises(ValueError, match="sweep"):
        write_landscape(g, MK, tmp_path / "e", sweep=[])
    with pytest.raises(ValueError, match="n_grid"):
        write_landscape(g, MK, tmp_path / "e", n_grid=1)
    assert not (tmp_path / "e").exists()  # refused before any work


def test_cli_landscape_general_writes_the_figure(tmp_path, capsys):
    out = tmp_path / "cli"
    argv = ["landscape", "--model", "zipf:s=1.1", "--T", "3", "--v", "2", "--tau", "2", "--n-grid", "5"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    assert "landscape.png" in capsys.readouterr().out
    _png_ok(out / "landscape.png")
    assert np.load(out / "grid.npz")["L"].shape == (5, 5)


def test_finite_n_gap_general():
    g = G.unequal([2, 3], tau=1)
    Wv = _dense(optimal_value_matrix(g, MK).x)
    S = family_scores(1.0, 0.5, cotopic_matrix(g))
    res = finite_n_gap(S, Wv, g, MK, [20, 40], n_docs=3000, seed=3)
    assert res["exact"] == pytest.approx(attention_loss(S, Wv, g, MK), rel=1e-12)
    assert np.all(res["gap"] > 2 * res["stderr"])  # the O(1/N) bias is positive and resolved here
    assert np.all(np.abs(res["gap"]) < 3.0 / res["N"])


def test_cli_modules_use_the_public_solver_names():
    """The CLI modules import the solvers from the theorycheck.solvers facade, never its private modules."""
    files = sorted((Path(tc.__file__).parent / "cli").glob("*.py"))
    assert len(files) >= 8
    for path in files:
        assert not re.search(r"solvers\._", path.read_text()), path.name
    assert {"cotopic_matrix", "stage1_value_matrix"} <= set(tc.solvers.__all__)


# ------------------------------------------------------------------------- train: preset learning rates (SPEC §11.7)
def _stage1_cfg(g, mk, lr, steps):
    from theorycheck.cli.train import retarget_config
    from theorycheck.nn import OptimConfig, preset

    return retarget_config(preset("stage1-population"), g, mk).replace(
        optim=OptimConfig("sgd", lr=lr), steps=steps, log_every=1, eval_every=steps, checkpoint_every=steps
    )


def test_sgd_curvature_is_the_value_loss_hessian():
    """lambda_max(H) = 2 lambda_max(Sigma): the second difference of value_loss along the top eigenvector
    (Sigma built independently from theta_moments, SPEC §11.5: Sigma = Phi~^T M2 Phi~)."""
    from theorycheck.cli.train import sgd_curvature
    from theorycheck.population import value_loss

    g, mk = G.zipf(3, 3, 1.0, tau=2), tc.Masking()
    a, c = mk.a, np.concatenate([[mk.q], np.full(g.n_words, mk.r / g.n_words)])
    Pt = a * g.topic_token_matrix() + c[None, :]
    Sigma = Pt.T @ g.theta_moments()[1] @ Pt
    lam, vecs = np.linalg.eigh(Sigma)
    lam_H, what = sgd_curvature(g, mk, _stage1_cfg(g, mk, 1.0, 1).model)
    assert what == "W_V" and lam_H == pytest.approx(2 * lam[-1], rel=1e-12)
    D = np.zeros((g.V1, g.V1))
    D[2] = vecs[:, -1]  # one output row along the top eigenvector: ||D||_F = 1
    W0 = np.random.default_rng(0).normal(size=(g.V1, g.V1))
    t = 1e-2
    second = (value_loss(W0 + t * D, g, mk) + value_loss(W0 - t * D, g, mk) - 2 * value_loss(W0, g, mk)) / t**2
    assert second == pytest.approx(lam_H, rel=1e-7)


def test_stable_lr_bound_separates_convergence_from_divergence(tmp_path):
    """The nn's stage-1 population SGD converges just below 2/lambda_max(H) and diverges just above it."""
    from theorycheck.cli.train import sgd_curvature
    from theorycheck.nn import train

    g, mk = G.from_topic_model(tc.TopicModel(T=3, v=3, tau=2)), tc.Masking()
    bound = 2.0 / sgd_curvature(g, mk, _stage1_cfg(g, mk, 1.0, 1).model)[0]
    losses = {}
    for f in (0.95, 1.05):
        res = train(_stage1_cfg(g, mk, f * bound, 80), progress=False)
        losses[f] = [r["loss"] for r in res.history if "loss" in r]
    assert losses[0.95][-1] == pytest.approx(1.0 - np.trace(g.phi @ g.phi.T @ g.theta_moments()[1]), abs=1e-6)
    assert losses[1.05][-1] > 10 * losses[1.05][0]


def test_scale_preset_lr_rule():
    from theorycheck.cli.train import retarget_config, scale_preset_lr
    from theorycheck.nn import preset

    mk = tc.Masking()
    small = G.zipf(3, 3, 1.0, tau=2)
    paper = G.from_topic_model(tc.TopicModel(T=10, v=10, tau=3))
    wide = G.overlapping(10, 20, eps=0.3, tau=3)  # smaller lambda_max(Sigma) than the paper's size
    recs = {}
    for name in ("stage1-population", "two-stage", "embedding", "stage2-population"):
        base = preset(name)
        for key, g in (("small", small), ("paper", paper), ("wide", wide)):
            cfg, rec = scale_preset_lr(base, retarget_config(base, g, mk))
            assert cfg.optim.lr == rec["lr"]
            recs[name, key] = rec
    for name in ("stage1-population", "two-stage", "embedding"):
        assert recs[name, "paper"]["lr"] == pytest.approx(preset(name).optim.lr, rel=1e-12)  # the preset's own model
        small_rec = recs[name, "small"]
        assert small_rec["lr"] < small_rec["stable_lr"] < small_rec["preset_lr"]  # scaled below the bound
        ratio = small_rec["lr"] * 2 / small_rec["stable_lr"]
        assert ratio == pytest.approx(small_rec["preset_lr"] * 2 / small_rec["preset_stable_lr"], rel=1e-12)
    assert recs["stage1-population", "wide"]["lr"] > 40.0  # exact rule: raised with the bound
    assert recs["two-stage", "wide"]["lr"] == 30.0  # near-init bound only: never raised
    assert recs["stage2-population", "small"] == {
        "preset_lr": 0.05, "lr": 0.05, "rule": "unchanged (no SGD squared-loss curvature bound; SPEC §11.7)"
    }  # fmt: skip


def test_cli_train_stage1_preset_on_a_small_general_model(tmp_path, capsys):
    """`stage1-population` (lr 40 at V1 = 101) diverged at V1 = 10; with the scaled rate it reaches C Sigma^+."""
    out = tmp_path / "run"
    argv = ["train", "--preset", "stage1-population", "--model", "paper", "--T", "3", "--v", "3", "--tau", "2"]
    assert cli.main([*argv, "--steps", "60", "--out", str(out), "--quiet", "--no-figures"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    row = summary["runs"][0]
    assert row["lr"]["lr"] < row["lr"]["stable_lr"] < 40.0 == row["lr"]["preset_lr"]
    assert json.loads((out / "config.json").read_text())["optim"]["lr"] == row["lr"]["lr"]
    assert row["final"]["dist_W_V_opt"] < 1e-6  # geometric convergence: 1e-7 after 60 steps


@pytest.mark.parametrize("T,v,tau", [(3, 2, 1), (4, 3, 2), (3, 3, 3)])
@pytest.mark.parametrize("mask_keys", [False, True])
def test_finite_n_exact_loss_fast_path_equals_the_generic_route(T, v, tau, mask_keys):
    """finite_n_gap's N -> inf loss: the paper model's route (exact, no sampling) and the generic route
    on the same model agree to 1e-12 relative (the uniform-tau law: both are exact sums over topic sets)."""
    tm = tc.TopicModel(T=T, v=v, tau=tau)
    rng = np.random.default_rng(T * 10 + v)
    S, W = rng.standard_normal((tm.V1, tm.V1)), rng.standard_normal((tm.V1, tm.V1))
    fast = landscape._exact_loss(tm, S, W, MK, mask_keys, 0)
    generic = landscape._exact_loss.dispatch(G)(tm, S, W, MK, mask_keys, 0)
    assert fast == pytest.approx(generic, rel=1e-12)
    assert landscape._exact_loss(G.from_topic_model(tm), S, W, MK, mask_keys, 0) == pytest.approx(fast, rel=1e-12)
