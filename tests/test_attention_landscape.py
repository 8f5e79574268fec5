"""landscape: grids agree with pointwise closed forms; sweeps with an Executor == serial; CLI files."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import theorycheck as tc
from theorycheck.analysis import landscape as ls
from theorycheck.cli import main
from theorycheck.population import alpha_beta_loss
from theorycheck.report import plots


def test_grid_matches_pointwise():
    tm, mk = tc.TopicModel(T=6, v=3, tau=2), tc.Masking()
    g = ls.alpha_beta_grid(tm, mk, "identity", alpha=(-3, 5, 7), beta=(-2, 2, 5))
    assert g.L.shape == (7, 5)
    i, j = 4, 1
    assert g.L[i, j] == alpha_beta_loss(g.alpha[i], g.beta[j], tm, mk, "identity")
    lk, L = ls.K_curve(tm, mk, logK=(0.0, 5.0, 11))
    assert L[3] == pytest.approx(alpha_beta_loss(lk[3], -700.0, tm, mk), abs=1e-13)


def test_sweep_with_executor_equals_serial():
    cfg = ((10, 10, 3), (20, 5, 2), (1000, 10, 30))
    serial = ls.asymptotic_sweep(cfg, tc.Masking())
    with ThreadPoolExecutor(2) as ex:
        par = ls.asymptotic_sweep(cfg, tc.Masking(), executor=ex)
    assert serial == par
    assert [r["T"] for r in serial] == [10, 20, 1000]
    assert all(1.0 < r["K_over_vtau"] < 10.0 for r in serial)


def test_growth_configs_reach_T_max():
    cfg = ls.growth_configs(T_max=100000)
    assert max(c[0] for c in cfg) == 100000 and all(2 <= c[2] <= c[0] for c in cfg)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(alpha=(1.0, 0.0, 5)), "alpha"),
        (dict(beta=(0.0, 1.0, 1)), "beta"),
        (dict(value="x"), "value"),
    ],
)
def test_grid_rejects_bad_axes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ls.alpha_beta_grid(tc.TopicModel(T=3, v=2, tau=1), tc.Masking(), **kwargs)


def test_sweep_rejects_bad_config():
    with pytest.raises(ValueError, match="tau"):
        ls.asymptotic_sweep(((10, 10, 11),))


def test_cli_landscape_writes_files(tmp_path, capsys):
    out = tmp_path / "land"
    code = main(["landscape", "--T", "6", "--v", "3", "--tau", "2", "--n-grid", "21", "--out", str(out)])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [".theorycheck.json", "grid.npz", "landscape.png", "optimum.json"]
    opt = json.loads((out / "optimum.json").read_text())
    tm, mk = tc.TopicModel(T=6, v=3, tau=2), tc.Masking()
    assert opt["loss"] == pytest.approx(alpha_beta_loss(opt["alpha"], opt["beta"], tm, mk), abs=1e-14)
    data = np.load(out / "grid.npz")
    assert data["L"].shape == (21, 21)
    assert "L*=" in capsys.readouterr().out


def test_cli_landscape_bad_value_is_an_error(tmp_path, capsys):
    assert main(["landscape", "--tau", "20", "--out", str(tmp_path / "x")]) == 2
    assert "tau" in capsys.readouterr().err


def test_plot_functions_return_figures():
    from matplotlib.figure import Figure

    rows = [
        dict(T=10, tau=3, K_over_vtau=2.3, attention_ratio=7.0),
        dict(T=100, tau=10, K_over_vtau=4.2, attention_ratio=41.0),
    ]
    assert isinstance(plots.attention_sweep(rows), Figure)
    assert isinstance(plots.finite_n_gap([10, 20], [0.1, 0.05], [0.01, 0.01]), Figure)
    A = np.linspace(0, 1, 5)
    assert isinstance(plots.attention_landscape(A, A, np.add.outer(A, A)), Figure)
    assert isinstance(plots.loss_vs_K([(3, A, A, 1.5)]), Figure)


def test_sweep_with_process_pool():
    from concurrent.futures import ProcessPoolExecutor

    cfg = ((10, 10, 3), (100, 10, 10))
    with ProcessPoolExecutor(1) as ex:
        par = ls.asymptotic_sweep(cfg, tc.Masking(), value="identity", executor=ex)
    assert par == ls.asymptotic_sweep(cfg, tc.Masking(), value="identity")
