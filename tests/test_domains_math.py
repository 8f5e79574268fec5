"""Domains and preconditions of the mathematical claims (attention, certificate, dynamics, embedding).

A precondition is data: removing it must let ``explore_claim`` refute the claim with a minimal
(shrunk) counterexample; and every domain draws configurations that ``check`` accepts.
"""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proofs_numeric import CLAIMS, get_claim
from theorycheck.report.explore import explore_claim

MATH_PREFIXES = ("attention.", "certificate.", "dynamics.", "embedding.")
MATH = [c for c in CLAIMS if c.id.startswith(MATH_PREFIXES)]
WITH_DOMAIN = [c for c in MATH if c.domain is not None]


def test_kstar_needs_identified_K():
    """Without its precondition K* is explored at a flat loss: only [MASK] queries (p_c = p_r = 0)."""
    claim = get_claim("attention.kstar")
    out = explore_claim(claim, 20, seed=0, preconditions=())
    assert out.verdict == "REFUTED"
    assert out.counterexample == {"T": 2, "v": 1, "tau": 1, "p_m": 0.05, "p_c": 0.0, "p_r": 0.0}
    assert out.result.label == "K*_solver / K*_own = 1"
    assert explore_claim(claim, 20, seed=0).verdict == "PASS"


def test_kstar_precondition_cases():
    from proofs_numeric.attention_kstar import kstar_identified

    base = {"T": 4, "v": 2, "tau": 2, "p_m": 0.5, "p_c": 0.2, "p_r": 0.1}
    assert kstar_identified(base)
    assert not kstar_identified({**base, "p_c": 0.0, "p_r": 0.0})  # only [MASK] queries
    assert not kstar_identified({**base, "p_c": 1.0, "p_r": 0.0})  # K* = inf
    assert not kstar_identified({**base, "tau": 4, "p_c": 0.95, "p_r": 0.05})  # tau = T, q = 0 (rounded)
    assert not kstar_identified({**base, "T": 2, "tau": 2, "p_c": 0.3, "p_r": 0.3})  # q (Tv+1) = 1
    assert kstar_identified({**base, "tau": 4})


def test_identity_optimum_needs_kept_queries():
    """With p_c = 0 and p_r = 0 the scores never matter: alpha* is arbitrary (the solver returns -5)."""
    claim = get_claim("attention.identity-optimum")
    out = explore_claim(claim, 20, seed=0, preconditions=())
    assert out.verdict == "REFUTED"
    assert out.counterexample["p_c"] == 0.0 and out.counterexample["T"] == 2 and out.counterexample["tau"] == 1
    assert out.result.label == "e^alpha* > v"


def test_identity_beta_positive_for_few_topics():
    """The finding behind dropping beta* <= 0 from the domain: certified beta* > 0 at T = 2, v = 3, tau = 1."""
    from theorycheck import Masking, TopicModel
    from theorycheck.solvers import optimal_attention

    res = optimal_attention(TopicModel(T=2, v=3, tau=1), Masking(0.05, 0.05, 0.05), value="identity")
    assert res.status == 0 and res.beta > 0.3


@pytest.mark.parametrize("claim", WITH_DOMAIN, ids=lambda c: c.id)
def test_domain_draws_fit_check(claim):
    """Draws carry the keys of the defaults that ``check`` reads; the domain docstring states the bound."""
    assert claim.domain.__doc__ and claim.domain.__doc__.strip()
    assert list(inspect.signature(claim.check).parameters)[:2] == ["params", "inject"]
    keys = set().union(*(set(p) for p in claim.default_params))
    optional = {"K_table", "L_table", "alpha_spec", "beta_spec", "alpha_first_form", "L_spec", "L0_spec", "quoted"}
    optional |= {"figure", "figure_Ns", "kind", "Ns", "alpha", "beta", "box", "seed", "seeds", "route"}
    seen = []

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(claim.domain())
    def draw(p):
        assert isinstance(p, dict)
        assert keys - optional <= set(p), sorted(keys - optional - set(p))
        seen.append(p)

    draw()
    assert seen


#: Six claims whose domain draws run in seconds (pinned: the claims' cost hints were corrected to cold-start
#: seconds, issue #39, which would otherwise have swapped attention.finite-n out of a selection by cost).
CHEAP_DOMAINS = (
    "attention.asymptotic",
    "attention.block-K-only",
    "attention.decoder-bias",
    "attention.finite-n",
    "attention.general-evaluator",
    "attention.identity-optimum",
)


@pytest.mark.parametrize("claim", [c for c in WITH_DOMAIN if c.id in CHEAP_DOMAINS], ids=lambda c: c.id)
def test_domain_draws_pass(claim):
    """Two draws satisfying the preconditions pass ``check`` (the full exploration is verify --explore)."""
    strategy = claim.domain()
    for _, pred in claim.preconditions:
        strategy = strategy.filter(pred)

    @settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy)
    def run(p):
        assert claim.run(p).passed, p

    run()


def test_masking_grid_params_values():
    from theorycheck.strategies import masking_grid_params

    @settings(max_examples=30, deadline=None, database=None)
    @given(masking_grid_params(step=0.1), st.just(None))
    def prop(p, _):
        for k in ("p_m", "p_c", "p_r"):
            assert p[k] == 0.0 or p[k] >= 0.1 - 1e-12
        assert p["p_c"] + p["p_r"] <= 1.0 + 1e-12 and p["p_m"] > 0

    prop()
    with pytest.raises(ValueError, match="step"):
        masking_grid_params(step=0.0)


def test_embedding_block_sum_identity_needs_tau_below_T():
    """Without tau < T the smallest single-law case tau = T = 2 refutes the 1/a identity."""
    claim = get_claim("embedding.block-sum-identity")
    out = explore_claim(claim, 20, seed=0, preconditions=())
    assert out.verdict == "REFUTED"
    cx = out.counterexample
    assert (cx["T"], cx["v"], cx["tau"], cx["d"]) == (2, 1, 2, 2)
    assert out.result.label == "max |a (own - other) - 1| <= 1e-5"


NEW_DOMAINS = (
    "attention.finite-n",
    "certificate.interval",
    "certificate.rational",
    "embedding.bias-min-norm",
    "embedding.gd-small-init",
    "embedding.min-dim",
    "embedding.min-norm-gram",
    "embedding.same-topic-larger",
    "embedding.zero-mask-block-sums",
)


def test_every_math_claim_has_a_documented_domain():
    """Every attention/certificate/dynamics/embedding claim declares a domain whose docstring states its bound."""
    ids = {c.id for c in MATH}
    assert set(NEW_DOMAINS) <= ids
    missing = [c.id for c in MATH if c.domain is None]
    assert not missing, missing
    undocumented = [c.id for c in MATH if not (c.domain.__doc__ or "").strip()]
    assert not undocumented, undocumented


@pytest.mark.parametrize(
    ("claim_id", "label"),
    [
        ("embedding.bias-min-norm", "max |G (SDP) - formula| <= 1e-6"),
        ("embedding.min-norm-gram", "rank G = T"),
    ],
)
def test_embedding_optima_need_tau_below_T(claim_id, label):
    """Without tau < T the single-law case refutes the generic block form: the minimal tau = T = 2, v = 1."""
    claim = get_claim(claim_id)
    assert [d for d, _ in claim.preconditions] == ["tau < T"]
    out = explore_claim(claim, 20, seed=0, preconditions=())
    assert out.verdict == "REFUTED"
    cx = out.counterexample
    assert (cx["T"], cx["v"], cx["tau"]) == (2, 1, 2)
    assert (cx["p_m"], cx["p_c"], cx["p_r"]) == (0.05, 0.0, 0.0)
    assert out.result.label == label
    assert not claim.satisfies(cx)


def test_zero_mask_block_sums_skips_stalled_lbfgs():
    """The explore finding: from the large init at d = T, L-BFGS seed 0 stalls (loss gap 1/9) at T = 3, v = 3,
    tau = 1, p = 0.05/0/0; the claim measures only certified minimisers, and its check passes there."""
    from proofs_numeric._embedding_common import trained_embedding_zero_mask
    from proofs_numeric.embedding_zero_mask_block_sums import GAP_TOL, _certified_minimisers
    from theorycheck import Masking, TopicModel
    from theorycheck.population import embedding_loss

    tm, mk = TopicModel(T=3, v=3, tau=1), Masking(0.05, 0.0, 0.0)
    stalled = trained_embedding_zero_mask(tm, mk, 3, seed=0, init_scale=1.0)
    assert embedding_loss(stalled, tm, mk) - tm.min_value_loss() > 0.1
    (W,) = _certified_minimisers(tm, mk, 3, 1)
    assert embedding_loss(W, tm, mk) - tm.min_value_loss() <= GAP_TOL
    params = dict(T=3, v=3, tau=1, p_m=0.05, p_c=0.0, p_r=0.0, d=3, n_inits=1)
    assert get_claim("embedding.zero-mask-block-sums").run(params).passed


def test_certificate_interval_at_tau_equal_T():
    """The explore finding (fixed in interval_certificate): at tau = T the certificate bounds the
    constant-context loss, so the minimal counterexample T = 2, v = 1, tau = 2 now passes."""
    claim = get_claim("certificate.interval")
    cx = dict(T=2, v=1, tau=2, p_m=0.05, p_c=0.05, p_r=0.0, value="block", tol=1e-9, max_boxes=2000, max_gap=2e-9)
    assert claim.satisfies(cx)
    assert claim.run(cx).passed
