"""The result cache: hits skip the work, any edit of the claim or of a module it imports reruns it."""

import json
import math
import os
import textwrap
import time

import numpy as np
import pytest

from theorycheck._version import __version__
from theorycheck.cli import main
from theorycheck.report import CacheWarning, ResultCache, cache_dir, run_claims
from theorycheck.report import cache as cache_module
from theorycheck.report.cache import SourceHasher, _decode, _digest, _encode, cache_user, check_key

try:
    import pwd
except ImportError:  # Windows
    pwd = None  # type: ignore[assignment]
from theorycheck.report.claims import ClaimResult, over_seeds, t_interval

HELPER = "FACTOR = {factor}\n"
CLAIM = textwrap.dedent(
    """
    import numpy as np
    import tc_cache_helper
    from theorycheck.report import Claim, ClaimResult

    RUNS = []
    VERSION = {version}

    def check(params, inject=None):
        RUNS.append(params["x"])
        m = tc_cache_helper.FACTOR * params["x"]
        return ClaimResult(True, 0.0, float(m), 1.0, details={{"inf": float("inf")}}, data={{"a": np.arange(3.0)}})

    CLAIM = Claim("zz.cached", "a cached claim", "DERIVED", "test", check, ({{"x": 2}},), lambda p: {{}})
    """
)


@pytest.fixture
def user_claim(tmp_path, monkeypatch):
    """A claim module and a helper module it imports, importable from a tmp folder."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "tc_cache_helper.py").write_text(HELPER.format(factor=3))
    (src / "tc_cache_claim.py").write_text(CLAIM.format(version=1))
    monkeypatch.syspath_prepend(str(src))
    import tc_cache_claim

    yield tc_cache_claim, src
    import sys

    sys.modules.pop("tc_cache_claim", None)
    sys.modules.pop("tc_cache_helper", None)


def _edit(path, text):
    path.write_text(text)
    time.sleep(0.01)


def test_hit_skips_the_work_and_marks_the_row(user_claim, tmp_path):
    mod, _ = user_claim
    cache = ResultCache(tmp_path / "cache")
    first = run_claims([mod.CLAIM], progress=False, cache=cache)
    second = run_claims([mod.CLAIM], progress=False, cache=cache)
    assert mod.RUNS == [2]  # the second run computed nothing
    assert first[0].cached is None and second[0].cached is not None
    assert second[0].result.measured == first[0].result.measured == 6.0
    assert second[0].result.details["inf"] == math.inf  # non-finite values kept exactly
    np.testing.assert_array_equal(second[0].result.data["a"], np.arange(3.0))
    assert second[0].to_json()["cached"] == second[0].cached
    assert run_claims([mod.CLAIM], progress=False, cache=ResultCache(tmp_path / "cache", read=False))
    assert mod.RUNS == [2, 2]  # --no-cache recomputes


@pytest.mark.parametrize("edited", ["tc_cache_claim.py", "tc_cache_helper.py"])
def test_editing_the_claim_or_an_imported_module_reruns(user_claim, tmp_path, edited):
    mod, src = user_claim
    cache = ResultCache(tmp_path / "cache")
    run_claims([mod.CLAIM], progress=False, cache=cache)
    key = check_key(mod.CLAIM, {"x": 2})
    text = CLAIM.format(version=2) if edited == "tc_cache_claim.py" else HELPER.format(factor=4)
    _edit(src / edited, text)
    assert check_key(mod.CLAIM, {"x": 2}) != key
    rows = run_claims([mod.CLAIM], progress=False, cache=cache)
    assert mod.RUNS == [2, 2] and rows[0].cached is None


def test_parameters_and_sources_enter_the_key(user_claim):
    mod, _ = user_claim
    assert check_key(mod.CLAIM, {"x": 2}) != check_key(mod.CLAIM, {"x": 3})
    names = SourceHasher().digests(["tc_cache_claim"])
    assert {"tc_cache_claim", "tc_cache_helper", "theorycheck.report.claims"} <= set(names)
    assert not any(n.startswith("numpy") for n in names)  # third-party code is keyed by its version


@pytest.mark.parametrize("damage", ["truncate", "wrong-verdict", "wrong-key", "edited-value"])
def test_corrupted_entry_warns_and_reruns(user_claim, tmp_path, damage):
    mod, _ = user_claim
    cache = ResultCache(tmp_path / "cache")
    run_claims([mod.CLAIM], progress=False, cache=cache)
    (path,) = cache.directory.glob("[0-9a-f]*.json")
    entry = json.loads(path.read_text())
    if damage == "truncate":
        path.write_text(path.read_text()[:40])
    elif damage == "wrong-verdict":
        entry["result"]["margin"] = -1.0  # stored passed=True contradicts the margin
        entry["digest"] = _digest(entry["result"])
        path.write_text(json.dumps(entry))
    elif damage == "edited-value":
        entry["result"]["measured"] = 7.0  # caught by the checksum
        path.write_text(json.dumps(entry))
    else:
        entry["key"] = "0" * 64
        path.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="ignoring corrupted cache entry"):
        rows = run_claims([mod.CLAIM], progress=False, cache=cache)
    assert mod.RUNS == [2, 2] and rows[0].cached is None and rows[0].verdict == "PASS"


def test_errors_are_not_cached(tmp_path):
    from theorycheck.report import Claim

    def boom(params, inject=None):
        raise RuntimeError("no")

    c = Claim("zz.err", "s", "DERIVED", "t", boom, ({},), lambda p: {})
    cache = ResultCache(tmp_path / "cache")
    assert run_claims([c], progress=False, cache=cache)[0].verdict == "ERROR"
    assert not list((tmp_path / "cache").rglob("[0-9a-f]*.json"))  # timings.json only


def test_cache_dir_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("THEORYCHECK_CACHE_DIR", str(tmp_path / "a"))
    assert cache_dir() == tmp_path / "a"
    monkeypatch.delenv("THEORYCHECK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "theorycheck"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache_dir() == tmp_path / "h" / ".cache" / "theorycheck"


def test_encoding_is_lossless():
    x = {"a": np.array([[1.5, np.nan], [np.inf, -0.0]]), "b": [1, "s", None, True], "c": -math.inf, "d": np.int64(4)}
    y = _decode(json.loads(json.dumps(_encode(x))))
    np.testing.assert_array_equal(y["a"], x["a"])
    assert y["a"].dtype == np.float64 and y["b"] == x["b"] and y["c"] == -math.inf and y["d"] == 4


def test_over_seeds_fraction_and_t_interval():
    from scipy import stats

    def one(params, inject=None):
        m = params["seed"] - 1.5  # seeds 0, 1 fail; 2, 3, 4 pass
        return ClaimResult(m > 0, 0.0, m + 10, m, details={"stat": 2.0 * params["seed"]})

    res = over_seeds(one, {"seeds": [0, 1, 2, 3, 4]}, statistics=("stat",))
    assert not res.passed and res.margin == -1.5
    assert res.details["fraction_passed"] == pytest.approx(0.6)
    lo, hi = stats.t.interval(0.95, 4, loc=4.0, scale=stats.sem([0, 2, 4, 6, 8]))
    assert res.details["stat_ci95"] == pytest.approx([lo, hi], rel=1e-12)
    assert res.details["stat_mean"] == 4.0 and res.details["n_seeds"] == 5
    assert all(math.isnan(v) for v in t_interval([1.0]))
    assert over_seeds(one, {"seeds": [2, 3]}).passed
    with pytest.raises(ValueError, match="seeds"):
        over_seeds(one, {"seeds": []})


def test_a_cache_hit_keeps_the_deciding_label(tmp_path):
    """The row of a cached check names the same deciding sub-check as the fresh run; an entry written
    before labels were stored still loads (with no label)."""
    from theorycheck.report import Claim
    from theorycheck.report.claims import compare_all, compare_close, compare_greater

    def check(params, inject=None):
        return compare_all([compare_greater(2.0, 0.0, label="first > 0"), compare_close(1.0, 1.01, 0.02, label="x")])

    c = Claim("zz.label", "s", "DERIVED", "t", check, ({},), lambda p: {})
    cache = ResultCache(tmp_path / "cache")
    fresh = run_claims([c], progress=False, cache=cache)[0]
    hit = run_claims([c], progress=False, cache=cache)[0]
    assert fresh.result.label == "x" and hit.cached is not None and hit.result.label == "x"
    (path,) = cache.directory.glob("[0-9a-f]*.json")
    entry = json.loads(path.read_text())
    del entry["result"]["label"]
    entry["digest"] = _digest(entry["result"])
    path.write_text(json.dumps(entry))
    old = run_claims([c], progress=False, cache=cache)[0]
    assert old.cached is not None and old.result.label == "" and old.verdict == "PASS"


# ------------------------------------------------------------------------ per user and version (issue #39 item 3)
def test_the_cache_folder_is_per_user_and_version(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    assert cache.directory == tmp_path / "cache" / "verify" / cache_user() / __version__
    if hasattr(os, "getuid"):
        assert cache_user() == pwd.getpwuid(os.getuid()).pw_name


def test_a_result_of_another_version_is_not_reused(user_claim, tmp_path, monkeypatch):
    mod, _ = user_claim
    monkeypatch.setattr(cache_module, "__version__", "0.0.1")
    run_claims([mod.CLAIM], progress=False, cache=ResultCache(tmp_path / "cache"))
    monkeypatch.undo()
    rows = run_claims([mod.CLAIM], progress=False, cache=ResultCache(tmp_path / "cache"))
    assert mod.RUNS == [2, 2] and rows[0].cached is None  # recomputed
    assert (tmp_path / "cache" / "verify" / cache_user() / "0.0.1").is_dir()


def test_a_result_of_another_user_is_not_reused(user_claim, tmp_path, monkeypatch):
    mod, _ = user_claim
    monkeypatch.setattr(cache_module, "cache_user", lambda: "alice")
    run_claims([mod.CLAIM], progress=False, cache=ResultCache(tmp_path / "cache"))
    assert (tmp_path / "cache" / "verify" / "alice").is_dir()
    monkeypatch.undo()
    rows = run_claims([mod.CLAIM], progress=False, cache=ResultCache(tmp_path / "cache"))
    assert mod.RUNS == [2, 2] and rows[0].cached is None


def test_an_entry_copied_from_another_user_is_not_reused(user_claim, tmp_path, monkeypatch):
    """Even in this user's folder and under the right key: an entry recording another user warns and is not
    used, and a file owned by another user id is not read at all."""
    mod, _ = user_claim
    cache = ResultCache(tmp_path / "cache")
    run_claims([mod.CLAIM], progress=False, cache=cache)
    (path,) = cache.directory.glob("[0-9a-f]*.json")
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "user": "alice"}))
    with pytest.warns(CacheWarning, match="written by user 'alice'"):
        assert run_claims([mod.CLAIM], progress=False, cache=cache)[0].cached is None
    assert mod.RUNS == [2, 2]
    if not hasattr(os, "getuid"):
        return
    run_claims([mod.CLAIM], progress=False, cache=cache)  # a fresh entry of this user: a hit
    assert run_claims([mod.CLAIM], progress=False, cache=cache)[0].cached is not None
    monkeypatch.setattr(cache_module, "_uid", lambda: path.stat().st_uid + 1)  # the same file, another owner
    assert run_claims([mod.CLAIM], progress=False, cache=cache)[0].cached is None


def test_verify_says_what_it_reused_and_how_to_recompute(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(cache_module.ENV_VAR, str(tmp_path / "cache"))  # empty: another test may have run the claim
    argv = ["verify", "--only", "data.moments", "--quiet", "--no-figures", "--out"]
    assert main([*argv, str(tmp_path / "r1")]) == 0
    first = capsys.readouterr().out
    assert "reused" not in first
    assert main([*argv, str(tmp_path / "r2")]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if "reused from the result cache" in ln]
    n = json.loads((tmp_path / "r2" / "results.json").read_text())["summary"]["cached"]
    assert n >= 1 and len(notes) == 2  # the table's footnote to the * and the one-line notice
    (notice,) = [ln for ln in notes if ln.startswith("note:")]
    assert f"note: {n} of " in notice and str(ResultCache().directory) in notice and "--no-cache" in notice
    assert main([*argv, str(tmp_path / "r3"), "--no-cache"]) == 0
    assert "reused" not in capsys.readouterr().out


def test_a_claim_defined_without_a_source_file_is_never_served_from_the_cache(tmp_path):
    """A claim built in an interactive session (here: functions whose module is ``__main__`` without a file, as in
    ``python -c`` or a notebook) has no source the key could hash: changing its check must change the verdict, not
    return the first run's cached PASS (found while writing the report's examples)."""
    import subprocess
    import sys

    code = """
from theorycheck.report import Claim, ResultCache, compare_close, run_claims
def mk(value):
    def check(params, inject=None):
        return compare_close(value, 1.0, tol=1e-9)
    return Claim(id="nb.claim", statement="s", source="DERIVED", spec="-", check=check,
                 falsify=lambda p: {}, default_params=({},))
c = ResultCache(CACHE)
first = run_claims([mk(1.0)], progress=False, cache=c)[0]
second = run_claims([mk(2.0)], progress=False, cache=c)[0]
print(first.verdict, second.verdict, second.cached is None)
"""
    code = code.replace("CACHE", repr(str(tmp_path / "cache")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["PASS", "FAIL", "True"], out.stdout
