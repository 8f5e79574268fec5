"""Opt-in mutation check (``THEORYCHECK_MUTATION=1``): a couple of one-line bugs from
``benchmarks/mutation.py`` must make ``theorycheck verify`` fail (exit code 1) on a temporary copy
of the package. Slow (a verify run per mutant), so skipped unless asked for; every mutant's target
text is checked on every run (cheap), so a refactor cannot silently disable a mutant."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("theorycheck_benchmarks_mutation", ROOT / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("theorycheck_benchmarks_mutation", mutation)
_spec.loader.exec_module(mutation)


@pytest.mark.parametrize("m", mutation.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_target_exists_once(m):
    assert (ROOT / m.path).read_text().count(m.old) == 1, f"{m.name}: target text not found once in {m.path}"


def test_there_are_at_least_20_distinct_mutants():
    assert len({m.name for m in mutation.MUTANTS}) == len(mutation.MUTANTS) >= 20


@pytest.mark.skipif(not os.environ.get("THEORYCHECK_MUTATION"), reason="slow: set THEORYCHECK_MUTATION=1")
@pytest.mark.parametrize(
    "name, claims",
    [("centring", "gradient.attention-loss"), ("swap-pc-pr", "sampling"), ("block-5pct", "attention.kstar")],
)
def test_verify_catches_mutant(name, claims):
    m = next(m for m in mutation.MUTANTS if m.name == name)
    res = mutation.run([m], claims=claims, timeout=900, echo=lambda *_: None)
    assert res["results"][0]["status"] == "caught", res["results"][0]
