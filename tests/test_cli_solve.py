"""``theorycheck solve value|embedding|attention``: one flag set, one JSON shape, honest exit codes."""

import json
import re

import numpy as np
import pytest

import theorycheck as tc
from theorycheck.cli import main
from theorycheck.population import alpha_beta_loss
from theorycheck.solvers import optimal_attention, optimal_value_matrix

KEYS = {
    "problem",
    "spec",
    "model",
    "masking",
    "method",
    "status",
    "success",
    "message",
    "fun",
    "nit",
    "residuals",
    "certificate",
    "info",
    "optimum",
}
SMALL = ["--T", "4", "--v", "3", "--tau", "2"]


def test_solve_attention_prints_and_writes_the_certified_optimum(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["solve", "attention", "--T", "10", "--v", "10", "--tau", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    opt = data["optimum"]
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking()
    # independent recomputation: the closed-form loss at the reported (alpha*, beta*) is L*, and K* matches
    assert opt["L"] == pytest.approx(float(alpha_beta_loss(opt["alpha"], opt["beta"], tm, mk)), abs=1e-14)
    assert opt["K"] == pytest.approx(np.exp(opt["alpha"]) + 9 * np.exp(opt["beta"]), rel=1e-12)
    assert opt["L"] < opt["loss_uniform"]
    ref = optimal_attention(tm, mk, value="block", loss="squared")
    assert opt["K"] == ref.K and data["fun"] == ref.fun
    cert = data["certificate"]
    assert cert["grid_lower_bound"] <= opt["L"] <= cert["grid_min"] and cert["tails_above_optimum"] is True
    assert data["status"] == 0 and data["success"] is True
    for key in ("K ", "L ", "alpha ", "beta ", "cert.grid_lower_bound", f"written to {out}"):
        assert key in text


@pytest.mark.parametrize("problem", ["value", "embedding", "attention"])
def test_every_problem_has_the_same_json_keys(problem, tmp_path):
    out = tmp_path / f"{problem}.json"
    assert main(["solve", problem, *SMALL, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) == KEYS
    assert data["problem"] == problem and data["model"]["T"] == 4 and data["masking"]["p_m"] == 0.15
    assert data["status"] == 0 and all(np.isfinite(v) for v in data["residuals"].values())


def test_solve_value_optimum_scalars_match_the_library(tmp_path):
    out = tmp_path / "v.json"
    assert main(["solve", "value", *SMALL, "--reg", "0.01", "--json", str(out)]) == 0
    opt = json.loads(out.read_text())["optimum"]
    res = optimal_value_matrix(tc.TopicModel(T=4, v=3, tau=2), tc.Masking(), reg=0.01)
    assert (opt["A"], opt["B0"], opt["gamma"]) == (res.info["A"], res.info["B0"], res.info["gamma"])
    assert opt["fro_norm"] == pytest.approx(np.linalg.norm(res.x), rel=1e-14)


def test_npz_suffix_is_added_and_the_printed_path_is_real(tmp_path, capsys):
    stem = tmp_path / "w"
    assert main(["solve", "value", *SMALL, "--npz", str(stem)]) == 0
    assert f"written to {stem}.npz" in capsys.readouterr().out
    assert not stem.exists() and (tmp_path / "w.npz").is_file()
    d = np.load(tmp_path / "w.npz")
    assert int(d["status"]) == 0 and d["W"].shape == (13, 13)
    assert main(["solve", "attention", *SMALL, "--npz", str(tmp_path / "a.npz")]) == 0
    a = np.load(tmp_path / "a.npz")
    assert a["x"].shape == (2,) and float(a["K"]) > 0


def test_not_certified_exits_1(monkeypatch, capsys):
    from theorycheck import solvers
    from theorycheck.solvers import SolveResult

    def boundary(tm, mk, **kw):
        return SolveResult(x=np.zeros(2), fun=1.0, status=3, method="grid", info={"alpha": 0.0, "beta": -1e4})

    monkeypatch.setattr(solvers, "optimal_attention", boundary)
    assert main(["solve", "attention", *SMALL]) == 1
    assert "not certified (status 3)" in capsys.readouterr().err


def test_a_flag_the_solver_does_not_take_is_an_error(tmp_path, monkeypatch, capsys):
    from theorycheck import solvers

    def narrow(tm, mk, *, value="block", loss="squared"):  # a solver without tol
        raise AssertionError("called despite an inapplicable flag")

    monkeypatch.setattr(solvers, "optimal_attention", narrow)
    out = tmp_path / "x.json"
    assert main(["solve", "attention", *SMALL, "--tol", "1e-3", "--json", str(out)]) == 2
    assert "--tol does not apply" in capsys.readouterr().err
    assert not out.exists()


def test_library_range_errors_pass_through(capsys):
    assert main(["solve", "attention", *SMALL, "--reg", "-1"]) == 2
    assert "reg" in capsys.readouterr().err


def test_bad_model_flags_exit_2_before_any_file(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["solve", "attention", "--T", "3", "--tau", "5", "--json", str(out)]) == 2
    assert "tau must lie in" in capsys.readouterr().err and not out.exists()


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"theorycheck {tc.__version__}"


def test_verify_only_empty_is_an_error(tmp_path, capsys):
    assert main(["verify", "--only", "", "--out", str(tmp_path / "r")]) == 2
    assert "empty pattern" in capsys.readouterr().err
    assert main(["verify", "--only", "data.moments,", "--out", str(tmp_path / "r")]) == 2
    assert "empty pattern" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_verify_only_unknown_lists_close_ids(tmp_path, capsys):
    assert main(["verify", "--only", "data.moment", "--list"]) == 0  # substring: fine
    capsys.readouterr()
    assert main(["verify", "--only", "data.momnets", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "matches no claim" in err and "closest ids: data.moments" in err


def test_every_command_takes_threads(capsys):
    for cmd in (["verify"], ["solve", "value"], ["solve", "attention"], ["landscape"], ["train"], ["bench"]):
        with pytest.raises(SystemExit):
            main([*cmd, "--help"])
        assert "--threads" in capsys.readouterr().out, cmd
    assert main(["solve", "value", *SMALL, "--threads", "0"]) == 2
    assert "threads must lie in" in capsys.readouterr().err


def test_model_flags_are_shared(capsys):
    """Every command that builds a model exposes exactly the same model and masking flags."""
    flags = ("--T", "--v", "--tau", "--prior", "--alpha", "--p-m", "--p-c", "--p-r")
    for cmd in (["solve", "value"], ["solve", "embedding"], ["solve", "attention"], ["landscape"]):
        with pytest.raises(SystemExit):
            main([*cmd, "--help"])
        text = capsys.readouterr().out
        assert all(f in text for f in flags), cmd


def _label_phi(tmp_path):
    """A 3-topic, 12-word phi with at least two words per label (a certified whole-domain optimum)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        phi = rng.dirichlet(np.full(12, 0.5), size=3)
        if np.bincount(phi.argmax(0), minlength=3).min() >= 2:
            np.save(tmp_path / "phi.npy", phi)
            return tc.GeneralTopicModel(phi, tau=2), str(tmp_path / "phi.npy")
    raise AssertionError("no model with two words per label")


def test_solve_attention_interval_certificate_of_a_general_model_resumes(tmp_path, capsys):
    """``--family label --certify interval --checkpoint F``: the library's certificate (same bounds as the API
    call), every region recorded in F; run again, every region is replayed and the bounds are the same."""
    g, phi = _label_phi(tmp_path)
    ck, out = tmp_path / "cert.jsonl", tmp_path / "s.json"
    argv = ["solve", "attention", "--topic-word", phi, "--tau", "2", "--family", "label", "--certify", "interval",
            "--checkpoint", str(ck), "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert "cert.kind             certified optimum" in capsys.readouterr().out
    first = json.loads(out.read_text())
    cert = first["certificate"]
    api = optimal_attention(g, tc.Masking(), options={"family": "label", "certify": "interval"}).certificate
    assert (cert["lower"], cert["upper"]) == (api["lower"], api["upper"])
    assert cert["lower"] <= first["fun"] <= cert["upper"] and cert["gap"] <= 1e-9 and first["status"] == 0
    regions = len(ck.read_text().splitlines()) - 1
    assert regions == len(cert["global"]["split"]["regions"]) == 9
    assert main([*argv, "--force"]) == 0
    again = json.loads(out.read_text())["certificate"]
    assert again["global"]["split"]["checkpoint"]["regions_replayed"] == regions
    assert (again["lower"], again["upper"]) == (cert["lower"], cert["upper"])


@pytest.mark.parametrize(
    "extra, general, match",
    [
        (["--checkpoint", "c.jsonl"], True, r"--checkpoint needs --certify interval"),
        (["--certify-scope", "local", "--max-pairs", "9"], True, r"--certify-scope, --max-pairs needs --certify"),
        (["--family", "label"], False, r"--family applies to a general model"),
        (["--mask-keys"], False, r"--mask-keys applies to a general model"),
        (["--family", "label", "--certify", "interval", "--certify-scope", "local", "--checkpoint", "c.jsonl"], True,
         r"--checkpoint records the regions of the label family's whole-domain certificate"),  # the flag's name
        (["--family", "label", "--certify", "interval", "--max-pairs", "10"], True, r"36 \(set, word\) pairs"),
    ],
)  # fmt: skip
def test_solve_attention_certificate_flags_are_refused_before_any_work(tmp_path, capsys, extra, general, match):
    model = ["--topic-word", _label_phi(tmp_path)[1], "--tau", "2"] if general else SMALL
    out = tmp_path / "s.json"
    assert main(["solve", "attention", *model, *extra, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert not out.exists() and not (tmp_path / "c.jsonl").exists()
