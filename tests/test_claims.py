"""Every registered claim passes on its defaults and fails on its deliberately wrong input."""

import pytest

from proofs_numeric import CLAIMS


def test_registry_not_empty():
    assert len(CLAIMS) > 0


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_passes_on_defaults(claim):
    params = claim.default_params[0]
    res = claim.run(params)
    assert res.passed, (
        f"{claim.id} failed on {params}: expected={res.expected} measured={res.measured} margin={res.margin}"
    )
    assert res.margin >= 0


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_can_fail(claim):
    params = claim.default_params[0]
    res = claim.run(params, inject=claim.falsify(params))
    assert not res.passed, f"{claim.id} still passes with a deliberately wrong input (margin={res.margin})"
    assert res.margin < 0
