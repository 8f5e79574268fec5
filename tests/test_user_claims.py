"""Users' own claims: ``verify --claims PATH`` and the ``theorycheck.claims`` entry point group.

The user module below states two claims about the stage-1 minimum loss (SPEC §4.0):

- ``user.min-loss`` (true): the minimum loss under uniform attention is ``1 - 1/(tau v)``, measured
  at the least-squares minimiser (independent of the closed form);
- ``user.beats-uniform`` (false at tau = T): the minimum loss is strictly below ``1 - 1/(T v)``,
  the loss of predicting a uniform word. At ``tau = T`` the two are equal, so explore must find a
  counterexample and shrink it to the smallest model with ``tau = T``: ``T = tau = 2, v = 1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from theorycheck.cli import main
from theorycheck.report import run_claims
from theorycheck.report.cache import check_key
from theorycheck.report.discovery import ClaimLoadError, ClaimRef, collect, load_path, resolve, shippable

USER_MODULE = textwrap.dedent(
    '''
    """A user's claims about the stage-1 minimum loss (SPEC §4.0)."""
    import os

    from theorycheck import Masking, TopicModel
    from theorycheck.population import value_loss
    from theorycheck.report import Claim, compare_close, compare_greater
    from theorycheck.solvers import optimal_value_matrix
    from theorycheck.strategies import masking_params, model_params, params

    COST = {cost}


    def _models(p):
        return TopicModel(T=p["T"], v=p["v"], tau=p["tau"]), Masking(p["p_m"], p["p_c"], p["p_r"])


    def check_min_loss(p, inject=None):
        tm, mk = _models(p)
        L = value_loss(optimal_value_matrix(tm, mk, method="lstsq").x, tm, mk)
        res = compare_close(L, 1 - 1 / (p["tau"] * p["v"]), 1e-10, label="L* = 1 - 1/(tau v)")
        res.details["pid"] = os.getpid()
        return res


    def check_beats_uniform(p, inject=None):
        tm, mk = _models(p)
        L = value_loss(optimal_value_matrix(tm, mk).x, tm, mk)
        res = compare_greater(1 - 1 / (p["T"] * p["v"]) - L, 1e-9, label="1 - 1/(T v) - L* > 1e-9")
        res.details["pid"] = os.getpid()
        return res


    def domain():
        return params(model_params(max_T=6, max_v=3), masking_params())


    def falsify(p):
        return {{}}


    SPEC = dict(T=4, v=2, tau=2, p_m=0.15, p_c=0.1, p_r=0.1)
    CLAIMS = [
        Claim("user.min-loss", "min loss is 1 - 1/(tau v)", "DERIVED", "SPEC §4.0", check_min_loss, (SPEC,),
              falsify, domain=domain, cost=COST),
        Claim("user.beats-uniform", "min loss < 1 - 1/(T v)", "DERIVED", "SPEC §4.0", check_beats_uniform, ({tau},),
              falsify, domain=domain, cost=COST),
    ]
    '''
)


def _write(folder: Path, *, cost: float = 0.5, tau: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "my_claims.py"
    path.write_text(USER_MODULE.format(cost=cost, tau=f"dict(SPEC, tau={tau})"))
    return path


def _results(out: Path) -> dict:
    return {row["id"]: row for row in json.loads((out / "results.json").read_text())["claims"]}


def test_explore_refutes_the_false_user_claim_with_the_minimal_counterexample(tmp_path, capsys):
    folder = tmp_path / "claims"
    _write(folder)
    out = tmp_path / "explored"
    code = main(["verify", "--claims", str(folder), "--only", "user.", "--explore", "10", "--out", str(out), "--quiet"])
    assert code == 1  # a refuted claim
    rows = _results(out)
    assert set(rows) == {"user.min-loss", "user.beats-uniform"}
    assert rows["user.min-loss"]["verdict"] == "PASS" and rows["user.min-loss"]["n_explored"] == 10
    bad = rows["user.beats-uniform"]
    assert bad["verdict"] == "REFUTED"
    cx = bad["counterexample"]
    assert (cx["params"]["T"], cx["params"]["tau"], cx["params"]["v"]) == (2, 2, 1)
    assert cx["measured"] == pytest.approx(0.0, abs=1e-12) and cx["expected"] == 1e-9
    assert cx["decided_by"] == "1 - 1/(T v) - L* > 1e-9"
    printed = capsys.readouterr().out
    assert "REFUTED  user.beats-uniform" in printed and "T=2, v=1, tau=2" in printed
    assert "user.beats-uniform" in (out / "report.md").read_text()
    # the counterexample really fails, and the same configuration with tau < T holds
    (claim,) = [c for c, _ in load_path(folder) if c.id == "user.beats-uniform"]
    assert not claim.run(cx["params"]).passed
    assert claim.run(dict(cx["params"], tau=1)).passed


def test_verify_runs_user_claims_with_the_built_in_ones(tmp_path, capsys):
    path = _write(tmp_path / "src")
    out = tmp_path / "rep"
    argv = ["verify", "--claims", str(path), "--only", "user.*,data.moments", "--out", str(out), "--quiet"]
    assert main(argv + ["--no-figures", "--jobs", "1"]) == 0
    rows = _results(out)
    assert {"user.min-loss", "user.beats-uniform", "data.moments"} <= set(rows)
    assert rows["user.min-loss"]["passed"] and rows["user.min-loss"]["decided_by"] == "L* = 1 - 1/(tau v)"
    assert rows["user.min-loss"]["expected"] == pytest.approx(0.75)  # 1 - 1/(2 * 2)
    assert rows["user.min-loss"]["origin"] == str(path.resolve())
    assert rows["data.moments"]["origin"] == "proofs_numeric.data_moments"
    md = (out / "report.md").read_text()
    assert f"Defined outside theorycheck: {path.resolve()}." in md
    assert "L* = 1 - 1/(tau v)" in capsys.readouterr().out


def test_a_failing_user_claim_exits_1(tmp_path):
    path = _write(tmp_path / "src", tau=4)  # beats-uniform's default is tau = T = 4: it fails
    out = tmp_path / "rep"
    assert main(["verify", "--claims", str(path), "--only", "user.", "--out", str(out), "--quiet", "--no-figures"]) == 1
    rows = _results(out)
    assert rows["user.min-loss"]["passed"] is True
    assert rows["user.beats-uniform"]["passed"] is False
    assert rows["user.beats-uniform"]["measured"] == pytest.approx(0.0, abs=1e-12)


def test_list_names_the_file_a_user_claim_comes_from(tmp_path, capsys):
    path = _write(tmp_path / "src")
    assert main(["verify", "--claims", str(path), "--list", "--only", "user."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.endswith(f"from {path.resolve()}") for line in lines)


def _key(path: Path) -> str:
    (claim,) = [c for c, _ in load_path(path) if c.id == "user.min-loss"]
    return check_key(claim, claim.default_params[0])


def test_the_cache_key_holds_the_user_module_source(tmp_path):
    path = _write(tmp_path / "src")
    before = _key(path)
    path.write_text(path.read_text() + "\n# edited\n")
    edited = _key(path)
    assert edited != before
    path.write_text(path.read_text().replace("\n# edited\n", ""))
    assert _key(path) == before


def test_the_cache_reruns_a_user_claim_when_its_file_changes(tmp_path):
    path = _write(tmp_path / "src")
    argv = ["verify", "--claims", str(path), "--only", "user.min-loss", "--quiet", "--no-figures", "--jobs", "1"]
    for attempt in range(3):  # other modules of a shared working tree may change between runs: retry then
        key = _key(path)
        assert main(argv + ["--out", str(tmp_path / f"a{attempt}")]) == 0
        assert main(argv + ["--out", str(tmp_path / f"b{attempt}")]) == 0
        if _key(path) == key:
            break
    assert _results(tmp_path / f"b{attempt}")["user.min-loss"]["cached"] is not None  # unchanged: reused
    path.write_text(path.read_text() + "\n# edited\n")
    assert main(argv + ["--out", str(tmp_path / "c")]) == 0
    assert _results(tmp_path / "c")["user.min-loss"]["cached"] is None  # edited: recomputed


def test_worker_processes_import_user_claims_by_path(tmp_path):
    """Claims loaded from a file travel as ClaimRef; pool workers import the file themselves."""
    path = _write(tmp_path / "src", cost=4.0)  # 2 checks x 4 s hint >= POOL_MIN_SECONDS: a process pool
    claims = collect([path], builtins=False, entry_points=False).claims
    refs = [shippable(c) for c in claims]
    assert all(isinstance(r, ClaimRef) and r.path == str(path.resolve()) for r in refs)
    assert [resolve(r) for r in refs] == claims
    rows = run_claims(claims, progress=False, jobs=2)
    pids = {r.result.details["pid"] for r in rows}
    assert os.getpid() not in pids  # computed in workers
    serial = run_claims(claims, progress=False, jobs=1)
    assert [r.result.measured for r in rows] == [r.result.measured for r in serial]
    assert [r.verdict for r in rows] == ["PASS", "PASS"]


def test_verify_with_user_claims_in_a_subprocess(tmp_path):
    folder = tmp_path / "claims"
    _write(folder, tau=4)
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "theorycheck.cli", "verify", "--claims", str(folder), "--only", "user."]
    proc = subprocess.run(
        cmd + ["--out", str(out), "--quiet", "--no-figures", "--no-cache"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1, proc.stderr
    rows = _results(out)
    assert rows["user.min-loss"]["passed"] and not rows["user.beats-uniform"]["passed"]
    assert "1 - 1/(T v) - L* > 1e-9" in proc.stdout


# ----------------------------------------------------------------------------- entry points
PLUGIN = textwrap.dedent(
    """
    from theorycheck.report import Claim, compare_close

    def check(p, inject=None):
        return compare_close(p["x"] * 2, p["x"] + p["x"], 0.0, label="2x = x + x")

    CLAIM = Claim("plugin.double", "2x = x + x", "DERIVED", "-", check, ({"x": 1.5},), lambda p: {})
    MORE = [Claim("plugin.more", "2x = x + x", "DERIVED", "-", check, ({"x": 2.5},), lambda p: {})]
    """
)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A fake installed distribution ``tc-plugin`` with three ``theorycheck.claims`` entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "tc_plugin_claims.py").write_text(PLUGIN)
    info = site / "tc_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tc-plugin\nVersion: 0.1\n")
    eps = "[theorycheck.claims]\nmodule = tc_plugin_claims\none = tc_plugin_claims:CLAIM\n"
    (info / "entry_points.txt").write_text(eps)
    monkeypatch.syspath_prepend(str(site))
    yield info
    sys.modules.pop("tc_plugin_claims", None)


def test_entry_point_claims_run_through_verify(plugin, tmp_path):
    # the module entry point and the Claim entry point name the same claim: a duplicate, reported clearly
    with pytest.raises(ClaimLoadError, match="duplicate claim id 'plugin.double'.*entry point module.*entry point one"):
        collect(builtins=False)
    (plugin / "entry_points.txt").write_text(
        "[theorycheck.claims]\nmodule = tc_plugin_claims\nlist = tc_plugin_claims:MORE\n"
    )
    reg = collect(builtins=False)
    assert [c.id for c in reg.claims] == ["plugin.double", "plugin.more"]
    assert reg.origins["plugin.more"] == "entry point list = tc_plugin_claims:MORE (tc-plugin)"
    out = tmp_path / "rep"
    assert main(["verify", "--only", "plugin.", "--out", str(out), "--quiet", "--no-figures", "--jobs", "1"]) == 0
    rows = _results(out)
    assert rows["plugin.more"]["decided_by"] == "2x = x + x" and rows["plugin.more"]["measured"] == 5.0


def test_entry_point_that_fails_to_load_names_itself(plugin, capsys):
    (plugin / "entry_points.txt").write_text("[theorycheck.claims]\nbroken = tc_plugin_claims:NOPE\n")
    assert main(["verify", "--list"]) == 2
    err = capsys.readouterr().err
    assert "entry point broken = tc_plugin_claims:NOPE (tc-plugin): failed to load: AttributeError" in err


def test_entry_point_points_at_something_else(plugin):
    (plugin / "entry_points.txt").write_text("[theorycheck.claims]\nodd = tc_plugin_claims:check\n")
    with pytest.raises(ClaimLoadError, match="resolves to function, not a module, a Claim or a list of Claims"):
        collect(builtins=False)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "body, message",
    [
        ("X = 1\n", "defines neither CLAIM (a Claim) nor CLAIMS (a list of Claims)"),
        ("raise RuntimeError('boom')\n", "the module failed to import: RuntimeError: boom"),
        ("CLAIMS = [1]\n", "CLAIM/CLAIMS must hold Claim objects, got int"),
    ],
)
def test_bad_claim_modules_are_clear_errors(tmp_path, capsys, body, message):
    path = tmp_path / "bad.py"
    path.write_text(body)
    assert main(["verify", "--claims", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path.resolve()) in err


def test_missing_path_and_empty_folder(tmp_path, capsys):
    missing = tmp_path / "nope.py"
    assert main(["verify", "--claims", str(missing), "--list"]) == 2
    assert f"--claims {missing}: no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["verify", "--claims", str(tmp_path / "empty"), "--list"]) == 2
    assert "holds no claim module" in capsys.readouterr().err
    with pytest.raises(ClaimLoadError, match="not a .py file"):
        (tmp_path / "x.txt").write_text("")
        load_path(tmp_path / "x.txt")


def test_duplicate_id_names_the_id_and_both_origins(tmp_path):
    path = tmp_path / "dup.py"
    src = "from proofs_numeric import get_claim\nCLAIM = get_claim('data.moments')\n"
    path.write_text(src)
    with pytest.raises(
        ValueError,
        match=f"duplicate claim id 'data.moments': defined in proofs_numeric.data_moments and in {path.resolve()}",
    ):
        collect([path], entry_points=False)
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a)
    _write(b)
    with pytest.raises(ValueError, match="duplicate claim id 'user.min-loss'") as info:
        collect([a, b], builtins=False, entry_points=False)
    assert str((a / "my_claims.py").resolve()) in str(info.value) and str((b / "my_claims.py").resolve()) in str(
        info.value
    )


# ----------------------------------------------------------------------------- the guide's worked example
README = Path(__file__).resolve().parent.parent / "docs" / "guide" / "verify.md"


def test_readme_worked_example_prints_what_the_readme_shows(tmp_path, capsys):
    text = README.read_text()
    block = re.search(r"Saved as `my_claims/beats_uniform.py`:\n\n```python\n(.*?)```", text, re.S).group(1)
    folder = tmp_path / "my_claims"
    folder.mkdir()
    (folder / "beats_uniform.py").write_text(block)
    argv = ["verify", "--claims", str(folder), "--only", "mine", "--explore", "20"]
    assert main(argv + ["--out", str(tmp_path / "explored")]) == 1
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("REFUTED")]
    assert " ".join(line.split()) in " ".join(text.split())  # the guide pastes the real output (wrapped)
    cx = _results(tmp_path / "explored")["mine.beats-uniform"]["counterexample"]["params"]
    assert (cx["T"], cx["v"], cx["tau"]) == (2, 1, 2)
    # with the precondition tau < T the statement holds on 20 configurations
    fixed = block.replace("params\n", "params, tau_below_T\n", 1).replace(
        "    domain=", '    preconditions=(("tau < T", tau_below_T),),\n    domain=', 1
    )
    (folder / "beats_uniform.py").write_text(fixed)
    assert main(argv + ["--out", str(tmp_path / "fixed")]) == 0
    assert _results(tmp_path / "fixed")["mine.beats-uniform"]["n_explored"] == 20


def test_a_plugin_module_is_hashed_wherever_it_is_installed():
    """A claim's own module enters the key even from the standard library / site-packages; what it imports
    from there does not (installed third-party code is covered by the versions in the key)."""
    from theorycheck.report.cache import SourceHasher

    got = SourceHasher().digests(["json.decoder"])
    assert "json.decoder" in got and "json.scanner" not in got and "json" not in got
