"""``verify --explore``: claims checked over their domain, failures shrunk to minimal counterexamples."""

from __future__ import annotations

import json
import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs_numeric import CLAIMS, get_claim
from theorycheck.cli import main
from theorycheck.report.claims import Claim, compare_close
from theorycheck.report.explore import ExploreResult, explore_claim, format_explore
from theorycheck.strategies import masking_params, model_params, params, seeds, tau_below_T

BLOCK = "stage1.block-sum-identity"


def test_removed_precondition_is_refuted_with_the_minimal_counterexample():
    """Without ``tau < T`` the block-sum identity fails; explore shrinks to the smallest tau = T case."""
    claim = get_claim(BLOCK)
    res = explore_claim(claim, 10, seed=0, preconditions=())
    assert res.verdict == "REFUTED"
    cx = res.counterexample
    assert (cx["T"], cx["tau"], cx["v"]) == (2, 2, 1)  # min_T = 2 in the domain, v >= 1
    assert not tau_below_T(cx)
    assert not claim.run(cx).passed  # the counterexample really fails
    assert res.result is not None and not res.result.passed
    # the same configuration with tau < T holds: the precondition is what matters
    assert claim.run(dict(cx, tau=1)).passed


def test_claim_that_holds_has_no_counterexample_and_respects_preconditions():
    claim = get_claim(BLOCK)
    res = explore_claim(claim, 10, seed=3)
    assert res.verdict == "PASS" and res.counterexample is None
    assert len(res.explored) == 10
    assert all(p["tau"] < p["T"] and p["T"] <= 8 for p in res.explored)


def test_same_seed_same_explored_list():
    claim = get_claim(BLOCK)
    a = explore_claim(claim, 8, seed=11).explored
    b = explore_claim(claim, 8, seed=11).explored
    c = explore_claim(claim, 8, seed=12).explored
    assert a == b
    assert a != c


def test_every_builtin_claim_declares_a_domain():
    """Issue #15 item 1: every claim can be explored (a domain whose docstring states its bounds)."""
    missing = [c.id for c in CLAIMS if c.domain is None or not (c.domain.__doc__ or "").strip()]
    assert not missing, f"claims without a documented domain (verify --list shows its docstring): {missing}"


def test_claim_without_domain_is_skipped_and_says_so():
    claim = Claim(
        "zz.nodomain", "s", "DERIVED", "t", lambda p, inject=None: compare_close(0.0, 0.0, 1.0), ({},), lambda p: {}
    )
    res = explore_claim(claim, 5)
    assert res.verdict == "SKIP" and res.explored == []
    assert "no domain" in res.skipped


def test_explore_rejects_bad_n():
    with pytest.raises(ValueError, match="n"):
        explore_claim(get_claim(BLOCK), 0)


def _bad_check(params, inject=None):
    return compare_close(params["x"], 0.0, 0.5)


def _x_domain():
    from hypothesis import strategies as st

    return st.integers(0, 100).map(lambda x: {"x": x})


def test_a_failing_claim_shrinks_to_the_boundary():
    """|x| <= 0.5 fails for every x >= 1: the minimal counterexample is x = 1."""
    claim = Claim("toy.x", "x is 0", "DERIVED", "-", _bad_check, ({"x": 0},), lambda p: {}, domain=_x_domain)
    res = explore_claim(claim, 20, seed=0)
    assert res.counterexample == {"x": 1}


def test_claim_validates_preconditions_and_domain():
    with pytest.raises(TypeError, match="preconditions"):
        Claim("t", "s", "DERIVED", "-", _bad_check, ({"x": 0},), dict, preconditions=(("tau < T",),))
    with pytest.raises(TypeError, match="domain"):
        Claim("t", "s", "DERIVED", "-", _bad_check, ({"x": 0},), dict, domain=3)


def test_claims_with_domains_pickle():
    for c in CLAIMS:
        if c.domain is not None:
            assert pickle.loads(pickle.dumps(c)).id == c.id


@given(params(model_params(max_T=5), masking_params(), seeds(max_seed=9), n=2))
def test_params_strategy_merges_parts(p):
    assert set(p) == {"T", "v", "tau", "p_m", "p_c", "p_r", "seed", "n"}
    assert 1 <= p["tau"] <= p["T"] <= 5 and 0 <= p["seed"] <= 9 and p["n"] == 2
    assert p["p_c"] + p["p_r"] <= 1.0 + 1e-12 and 1 - p["p_m"] * (1 - p["p_c"]) >= 0.05


def test_strategy_arguments_are_checked():
    with pytest.raises(TypeError, match="part 0"):
        params({"T": 2})
    with pytest.raises(ValueError, match="max_seed"):
        seeds(max_seed=-1)


def test_cli_explore_writes_explored_and_counterexample(tmp_path, capsys):
    out = tmp_path / "ex"
    code = main(["verify", "--explore", "3", "--seed", "2", "--only", BLOCK, "--out", str(out), "--quiet"])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    (row,) = doc["claims"]
    assert row["verdict"] == "PASS" and len(row["explored"]) == 3 and row["counterexample"] is None
    assert row["preconditions"] == ["tau < T"]
    assert "tau < T" in (out / "report.md").read_text()
    assert "1 claims held" in capsys.readouterr().out


def test_cli_list_shows_preconditions(capsys):
    assert main(["verify", "--list", "--only", BLOCK]) == 0
    assert "preconditions: tau < T" in capsys.readouterr().out


# ----------------------------------------------------------------------------- preconditions reported (issue: fix19)
def test_overridden_preconditions_are_the_ones_reported():
    """``preconditions=`` replaces the claim's: the result, its JSON and both tables report the ones used."""
    claim = get_claim(BLOCK)
    assert claim.precondition_text() == "tau < T"
    dropped = explore_claim(claim, 3, seed=0, preconditions=())
    assert dropped.to_json()["preconditions"] == [] and dropped.used_preconditions == ()
    assert "pre: -" in format_explore([dropped]) and "tau < T" not in format_explore([dropped])
    assert "| - |" in format_explore([dropped], markdown=True)
    other = (("T <= 4", lambda p: p["T"] <= 4),)
    res = explore_claim(claim, 3, seed=0, preconditions=other)
    assert all(p["T"] <= 4 for p in res.explored)  # the override is what filtered the draw
    assert res.to_json()["preconditions"] == ["T <= 4"]
    assert "pre: T <= 4 " in format_explore([res]) and "tau < T" not in format_explore([res], markdown=True)
    own = explore_claim(claim, 3, seed=0)  # no override: the claim's own (the CLI's path, explore_claims)
    assert own.to_json()["preconditions"] == ["tau < T"] and "pre: tau < T " in format_explore([own])


def _split_md_row(row: str) -> list[str]:
    """Cells of a GFM table row: split at the ``|`` not escaped by a backslash (a backslash escapes the next char)."""
    cells, cur, i = [], "", 0
    while i < len(row):
        if row[i] == "\\" and i + 1 < len(row):
            cur, i = cur + row[i : i + 2], i + 2
        elif row[i] == "|":
            cells.append(cur)
            cur, i = "", i + 1
        else:
            cur, i = cur + row[i], i + 1
    return [*cells, cur]


def _md_unescape(cell: str) -> str:
    return re.sub(r"\\([\\|])", r"\1", cell)


_CELL_TEXT = st.text(st.sampled_from("ab |\\x<>=-"), min_size=1, max_size=12).filter(lambda s: s.strip() == s)


@given(_CELL_TEXT, _CELL_TEXT)
def test_markdown_table_escapes_pipes_and_round_trips(pre_text, error):
    """A ``|`` (or ``\\``) in a precondition or an error keeps the table's columns and the text (GFM escapes)."""
    claim = Claim("toy.pipe", "s", "DERIVED", "-", _bad_check, ({"x": 0},), lambda p: {}, domain=_x_domain,
                  preconditions=((pre_text, lambda p: True),))  # fmt: skip
    results = [
        ExploreResult(claim, explored=[{"x": 1}], counterexample={"x": 1}, error=error),
        ExploreResult(claim, explored=[{"x": 0}]),
    ]
    rows = format_explore(results, markdown=True).splitlines()
    cells = [_split_md_row(r) for r in rows]
    assert {len(c) for c in cells} == {7}  # 5 columns: 6 unescaped separators on every row, header included
    for row in cells[2:]:
        assert row[0] == "" and row[-1] == ""
        assert _md_unescape(row[4].strip()) == pre_text
    assert _md_unescape(cells[2][5].strip()) == f"{{x=1}} ({error})"
    assert _md_unescape(cells[3][5].strip()) == ""
