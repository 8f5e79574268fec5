"""The structured (alpha, beta) family evaluator (SPEC §11.8) against the dense evaluator of SPEC §11.4, finite
differences and the closed form of SPEC §4.3; its refusals; the structured route of ``optimal_attention``."""

from __future__ import annotations

import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck import GeneralTopicModel, Masking
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import _attention_structured as _as
from theorycheck.population import alpha_beta_loss, attention_loss_grad, family_attention_loss
from theorycheck.population._attention_structured import SCORE_MAX, make_evaluator
from theorycheck.solvers import cotopic_matrix, optimal_attention, optimal_value_matrix

REL = 1e-12


def _label_matrix(g):
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    return Z


def _factors(g, mk):
    return optimal_value_matrix(g, mk, options={"dense": False}).x


def _dense_reference(g, mk, alpha, beta, B, W, b, mask_keys, loss, kw):
    """Loss and (alpha, beta)-gradient of the dense evaluator: dL/dalpha = <dL/dS, I_w>, dL/dbeta = <dL/dS, B>."""
    r = attention_loss_grad(family_scores(alpha, beta, B), W, g, mk, b, mask_keys=mask_keys, loss=loss, **kw)
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    return float(r.loss), float(np.vdot(r.dS, I_w)), float(np.vdot(r.dS, B))  # type: ignore[arg-type]


def _close(a, b, scale):
    assert abs(a - b) <= REL * max(1.0, abs(scale)), (a, b)


def _matches(r, L, da, db):
    """The evaluator's loss and gradient ``r`` against the dense reference's ``L``, ``dL/dalpha``, ``dL/dbeta``."""
    _close(r.value, L, L)
    _close(r.dalpha, da, 1.0)
    _close(r.dbeta, db, 1.0)


maskings = st.sampled_from([Masking(), Masking(p_m=0.3, p_c=0.2, p_r=0.3), Masking(p_m=0.5, p_c=0.0, p_r=0.0)])
scores = st.floats(-4.0, 4.0)


@settings(max_examples=25)
@given(
    g=general_models(max_T=4, max_v=3, paper=True),
    mk=maskings,
    alpha=scores,
    beta=scores,
    family=st.sampled_from(["label", "co-topic"]),
    mask_keys=st.booleans(),
    with_bias=st.booleans(),
    factored=st.booleans(),
)
def test_structured_equals_dense_squared(g, mk, alpha, beta, family, mask_keys, with_bias, factored):
    """Squared loss and its (alpha, beta)-gradient: structured == dense to 1e-12 (relative), uniform-tau law."""
    Wf = _factors(g, mk)
    W = Wf.toarray()
    b = np.linspace(-0.3, 0.4, g.V1) if with_bias else None
    B = _label_matrix(g) if family == "label" else cotopic_matrix(g)
    L, da, db = _dense_reference(g, mk, alpha, beta, B, W, b, mask_keys, "squared", {})
    Wgiven = Wf if (factored or family == "co-topic") else W
    r = family_attention_loss(alpha, beta, Wgiven, g, mk, family=family, b=b, mask_keys=mask_keys, grad=True)
    assert r.exact and r.stderr == 0.0 and r.n == g.n_topic_sets
    _matches(r, L, da, db)


_far = st.one_of(st.floats(-1e4, 300.0), st.sampled_from([-1e4, -700.0, -300.0, 150.0, 300.0]))


@settings(max_examples=25)
@given(
    g=general_models(max_T=4, max_v=3, paper=True),
    alpha=_far,
    beta=_far,
    family=st.sampled_from(["label", "co-topic"]),
    mask_keys=st.booleans(),
)
def test_large_scores_are_finite_and_match_dense_or_are_refused(g, alpha, beta, family, mask_keys):
    """Scores over the structured evaluator's range (|beta|, alpha, |alpha + beta| <= 300; alpha down to -600):
    finite and equal to the dense evaluator (log-sum-exp softmax) to 1e-12, also where a label holds nearly all the
    mass (the label tables would cancel: the blocked route); beyond it (alpha + beta < -300 included: a query whose
    keys are all its own word gave an infinite gradient at alpha = -356) a ValueError naming the range, before any
    work."""
    mk = Masking()
    Wf = _factors(g, mk)
    if max(alpha, abs(beta), abs(alpha + beta)) > SCORE_MAX:
        with pytest.raises(ValueError, match=r"-300 <= beta <= 300, alpha <= 300 and -300 <= alpha \+ beta <= 300"):
            family_attention_loss(alpha, beta, Wf, g, mk, family=family, mask_keys=mask_keys)
        return
    B = _label_matrix(g) if family == "label" else cotopic_matrix(g)
    L, da, db = _dense_reference(g, mk, alpha, beta, B, Wf.toarray(), None, mask_keys, "squared", {})
    r = family_attention_loss(alpha, beta, Wf, g, mk, family=family, mask_keys=mask_keys, grad=True)
    assert all(np.isfinite([r.value, r.dalpha, r.dbeta]))
    _matches(r, L, da, db)


@pytest.mark.parametrize("factored", [True, False])
def test_a_label_holding_nearly_all_the_mass_is_exact(factored):
    """A law whose keys are nearly all in one label (topic 1 puts 1 - 1e-9 on one word; the [MASK] key masked out):
    the label tables once formed ``s_0 + (e^beta - 1) M_l``, which cancels (at beta = -38: L = 16.99 instead of
    0.25); built from the other keys' own columns they give the dense loss and gradient to 1e-12, with W^V dense
    or factored, down to beta = -300."""
    phi = np.array([[0.9, 0.1], [1e-9, 1.0 - 1e-9]])
    g, mk = GeneralTopicModel(phi, tau=1), Masking()
    Wf = _factors(g, mk)
    B = _label_matrix(g)
    for beta in (-6.0, -38.0, -300.0):
        L, da, db = _dense_reference(g, mk, 0.5, beta, B, Wf.toarray(), None, True, "squared", {})
        W = Wf if factored else Wf.toarray()
        r = family_attention_loss(0.5, beta, W, g, mk, family="label", mask_keys=True, grad=True)
        _matches(r, L, da, db)


def test_a_search_box_beyond_the_structured_range_is_refused():
    """optimal_attention's structured route refuses a box whose corners leave the evaluator's score range."""
    g = GeneralTopicModel(np.array([[0.8, 0.2], [0.3, 0.7]]), tau=1)
    for box in (((-10.0, 400.0), (0.0, 1.0)), ((0.0, 1.0), (-350.0, 0.0)), ((0.0, 200.0), (0.0, 200.0))):
        with pytest.raises(ValueError, match=r"options.box: the structured evaluator takes -300 <= beta <= 300"):
            optimal_attention(g, Masking(), options={"family": "label", "box": box})


_huge = st.one_of(st.floats(-300.0, 300.0), st.sampled_from([-300.0, -52.0, 52.0, 150.0, 300.0]))


@settings(max_examples=40)
@given(
    g=general_models(max_T=4, max_v=3, paper=True),
    mk=maskings,
    beta=_huge,
    offset=st.one_of(st.floats(-8.0, 8.0), st.floats(-1e4, 300.0)),
    W_kind=st.sampled_from(["identity", "stage1"]),
    factored=st.booleans(),
    mask_keys=st.booleans(),
    with_bias=st.booleans(),
)
def test_label_family_own_word_cancellation_dense_and_factored(g, mk, beta, offset, W_kind, factored, mask_keys,
                                                               with_bias):  # fmt: skip
    """The label family at ``alpha = offset - beta`` (own word's score ``alpha + beta`` moderate while ``|beta|`` is up
    to 300, or ``alpha`` down to -1e4), ``W^V`` the identity or the stage-1 optimum, dense or factored: finite, and
    loss and (alpha, beta)-gradient equal the dense evaluator's (log-sum-exp softmax) to 1e-12 (relative). The label
    tables hold the own word's ``e^beta m'(x)`` that ``g`` takes back: with a dense ``W^V`` this once gave NaN at
    ``(-50, 52)`` and a relative error 1e-8 at ``(-10, 12)`` (only a RuntimeWarning)."""
    alpha = offset - beta
    if max(alpha, abs(alpha + beta)) > SCORE_MAX:
        with pytest.raises(ValueError, match=r"and -300 <= alpha \+ beta <= 300"):
            family_attention_loss(alpha, beta, np.eye(g.V1), g, mk, family="label", mask_keys=mask_keys)
        return
    Wd = np.eye(g.V1) if W_kind == "identity" else _factors(g, mk).toarray()
    b = np.linspace(-0.3, 0.4, g.V1) if with_bias else None
    L, da, db = _dense_reference(g, mk, alpha, beta, _label_matrix(g), Wd, b, mask_keys, "squared", {})
    W = (Wd, np.eye(g.V1)) if factored else Wd
    r = family_attention_loss(alpha, beta, W, g, mk, family="label", b=b, mask_keys=mask_keys, grad=True)
    assert all(np.isfinite([r.value, r.dalpha, r.dbeta]))
    _matches(r, L, da, db)


@settings(max_examples=20)
@given(
    g=general_models(max_T=4, max_v=3, paper=True),
    mk=maskings,
    alpha=scores,
    beta=scores,
    mask_keys=st.booleans(),
    with_bias=st.booleans(),
)
def test_label_tables_without_the_own_word_equal_dense(g, mk, alpha, beta, mask_keys, with_bias):
    """The dense ``W^V``'s tables that leave the own word out (``excluded_label_tables``), forced at moderate scores
    of either sign (the evaluator takes them only where the label tables cancel): loss and gradient equal the dense
    evaluator's to 1e-12."""
    W = _factors(g, mk).toarray()
    b = np.linspace(-0.3, 0.4, g.V1) if with_bias else None
    L, da, db = _dense_reference(g, mk, alpha, beta, _label_matrix(g), W, b, mask_keys, "squared", {})
    ev = make_evaluator(g, mk, W, "label", b, mask_keys)
    ev._blocked_label = True
    assert ev.tables(beta).diag_in == 0.0
    r = ev(alpha, beta, True)
    _matches(r, L, da, db)


def test_own_word_cancellation_with_zero_query_weight_is_finite():
    """Single-word labels, ``alpha = -40``, ``beta = 40`` (the own word's weight ``e^beta + (e^alpha - 1) e^beta``
    cancels to ~1) and no word query weighted (``p_c = p_r = 0``): the size check saw 0 and the NaN of ``Z <= 0``
    went through; a non-finite result now takes the blocked tables too: finite and equal to the dense loss."""
    g, mk = GeneralTopicModel(np.array([[0.8, 0.2], [0.3, 0.7]]), tau=1), Masking(p_m=0.5, p_c=0.0, p_r=0.0)
    Wf = _factors(g, mk)
    L, da, db = _dense_reference(g, mk, -40.1953125, 40.1953125, _label_matrix(g), Wf.toarray(), None, False,
                                 "squared", {})  # fmt: skip
    r = family_attention_loss(-40.1953125, 40.1953125, Wf, g, mk, family="label", grad=True)
    assert all(np.isfinite([r.value, r.dalpha, r.dbeta]))
    _matches(r, L, da, db)


@settings(max_examples=10)
@given(
    g=general_models(max_T=3, max_v=3, prior="dirichlet"),
    alpha=scores,
    beta=scores,
    family=st.sampled_from(["label", "co-topic"]),
    loss=st.sampled_from(["squared", "ce"]),
    mask_keys=st.booleans(),
)
def test_structured_equals_dense_dirichlet(g, alpha, beta, family, loss, mask_keys):
    """Dirichlet law: the same sampled theta (seed) in both evaluators; loss (squared or CE) and gradient agree."""
    mk = Masking()
    Wf = _factors(g, mk)
    B = _label_matrix(g) if family == "label" else cotopic_matrix(g)
    kw = dict(n_theta=16, seed=5)
    L, da, db = _dense_reference(g, mk, alpha, beta, B, Wf.toarray(), None, mask_keys, loss, kw)
    r = family_attention_loss(alpha, beta, Wf, g, mk, family=family, mask_keys=mask_keys, loss=loss, grad=True, **kw)
    assert not r.exact and r.n == 16 and r.stderr > 0.0
    _matches(r, L, da, db)


@settings(max_examples=10)
@given(g=general_models(max_T=3, max_v=2), alpha=scores, beta=scores, with_bias=st.booleans())
def test_structured_ce_equals_dense(g, alpha, beta, with_bias):
    mk = Masking()
    Wf = _factors(g, mk)
    b = np.linspace(0.2, -0.5, g.V1) if with_bias else None
    B = cotopic_matrix(g)
    L, da, db = _dense_reference(g, mk, alpha, beta, B, Wf.toarray(), b, False, "ce", {})
    r = family_attention_loss(alpha, beta, Wf, g, mk, family="co-topic", b=b, loss="ce", grad=True)
    _matches(r, L, da, db)


@pytest.mark.parametrize("family", ["label", "co-topic"])
@pytest.mark.parametrize("loss", ["squared", "ce"])
def test_gradient_matches_finite_differences(family, loss):
    rng = np.random.default_rng(3)
    g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.5), size=4), tau=2)
    mk = Masking()
    Wf = _factors(g, mk)
    b = rng.normal(size=g.V1) * 0.2
    a0, b0, h = 0.8, -0.6, 1e-5
    r = family_attention_loss(a0, b0, Wf, g, mk, family=family, b=b, loss=loss, grad=True)

    def f(a, bt):
        return family_attention_loss(a, bt, Wf, g, mk, family=family, b=b, loss=loss).value

    fa = (f(a0 + h, b0) - f(a0 - h, b0)) / (2 * h)
    fb = (f(a0, b0 + h) - f(a0, b0 - h)) / (2 * h)
    assert abs(r.dalpha - fa) <= 1e-8 and abs(r.dbeta - fb) <= 1e-8
    assert abs(r.dalpha) + abs(r.dbeta) > 1e-6  # a non-trivial gradient


@settings(max_examples=15)
@given(
    T=st.integers(2, 5),
    v=st.integers(1, 4),
    data=st.data(),
    alpha=scores,
    beta=scores,
    family=st.sampled_from(["label", "co-topic"]),
)
def test_paper_model_equals_closed_form(T, v, data, alpha, beta, family):
    """On the paper's model both families are SPEC §4.3's with alpha_sym = alpha + beta, beta_sym = beta."""
    tau = data.draw(st.integers(1, T))
    tm = tc.TopicModel(T=T, v=v, tau=tau)
    mk = Masking()
    g = GeneralTopicModel.from_topic_model(tm)
    r = family_attention_loss(alpha, beta, _factors(g, mk), tm, mk, family=family)
    L = alpha_beta_loss(alpha + beta, beta, tm, mk, "block")
    _close(r.value, L, L)


def test_dense_and_factored_W_agree_and_refusals():
    rng = np.random.default_rng(0)
    g = GeneralTopicModel(rng.dirichlet(np.full(9, 0.6), size=3), tau=2)
    mk = Masking()
    Wf = _factors(g, mk)
    r1 = family_attention_loss(1.0, 0.3, Wf, g, mk, grad=True)
    r2 = family_attention_loss(1.0, 0.3, Wf.toarray(), g, mk, grad=True)
    r3 = family_attention_loss(1.0, 0.3, (Wf.left, Wf.right), g, mk, grad=True)
    _close(r1.value, r2.value, 1.0)
    assert r1 == r3
    with pytest.raises(ValueError, match="factored"):
        family_attention_loss(1.0, 0.3, Wf.toarray(), g, mk, family="co-topic")
    with pytest.raises(ValueError, match="factored"):
        family_attention_loss(1.0, 0.3, Wf.toarray(), g, mk, loss="ce")
    with pytest.raises(ValueError, match="family"):
        family_attention_loss(1.0, 0.3, Wf, g, mk, family="cosine")
    with pytest.raises(ValueError, match="factors must both have shape"):
        family_attention_loss(1.0, 0.3, (Wf.left, Wf.right[:-1]), g, mk)
    with pytest.raises(ValueError, match="seed"):
        family_attention_loss(1.0, 0.3, Wf, GeneralTopicModel(g.phi, prior="dirichlet", alpha=0.5), mk)
    with pytest.raises(ValueError, match="above the memory limit"):
        family_attention_loss(1.0, 0.3, Wf, g, mk, max_bytes=1000)


def test_sampled_sets_have_a_standard_error():
    rng = np.random.default_rng(1)
    g = GeneralTopicModel(rng.dirichlet(np.full(10, 0.6), size=5), tau=2)
    mk = Masking()
    Wf = _factors(g, mk)
    exact = family_attention_loss(0.5, 1.0, Wf, g, mk)
    est = family_attention_loss(0.5, 1.0, Wf, g, mk, n_sets=400, seed=0)
    assert est.n == 400 and not est.exact and est.stderr > 0
    assert abs(est.value - exact.value) <= 5 * est.stderr


@pytest.mark.parametrize("family", ["label", "co-topic"])
def test_optimal_attention_structured_route_matches_dense(family):
    """The solver's structured route (stage-1 W) reaches the dense route's optimum (a given W: dense route)."""
    rng = np.random.default_rng(2)
    g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.4), size=3), tau=2)
    mk = Masking()
    s = optimal_attention(g, mk, options={"family": family})
    assert s.info["route"] == "structured" and s.status in (0, 3)
    W = s.info["W"]
    B = _label_matrix(g) if family == "label" else cotopic_matrix(g)
    d = optimal_attention(g, mk, value=W, options={"family": B[1:, 1:]})
    assert d.info["route"] == "dense"
    assert abs(s.fun - d.fun) <= 1e-9
    _close(s.fun, tc.population.attention_loss(s.info["S"], W, g, mk), 1.0)


def test_optimal_attention_refuses_a_dense_request_before_work():
    g = GeneralTopicModel(np.full((2, 30000), 1 / 30000), tau=1)
    with pytest.raises(ValueError, match="structured route"):
        optimal_attention(g, Masking(), method="lbfgs")


@pytest.mark.parametrize("v", [1, 2])
def test_own_word_cancellation_regime_is_exact(v):
    """alpha << 0 << beta (the own word's weight e^{alpha+beta} far below e^beta): the label tables' subtraction
    would lose ~eps e^{2 beta}; the evaluator detects it and uses the blocked tables (the closed form holds)."""
    tm = tc.TopicModel(T=2 + v, v=v, tau=1)
    mk = Masking(0.15, 0.1, 0.1)
    Wf = _factors(GeneralTopicModel.from_topic_model(tm), mk)
    for a, b in [(-11.67, 11.67), (-20.0, 25.0)]:
        L = alpha_beta_loss(a + b, b, tm, mk, "block")
        for family in ("label", "co-topic"):
            r = family_attention_loss(a, b, Wf, tm, mk, family=family)
            # non-negative up to the rounding of its O(1) summands (here L = 0 for v = 1); the cancelling label
            # tables were off by ~eps e^{2 beta}, 1e-6 and more
            assert r.value >= -8 * np.finfo(float).eps
            assert abs(r.value - L) <= 1e-12 * max(1.0, L)


def test_a_non_finite_result_is_an_error_not_a_number(monkeypatch):
    """Inside the score box the evaluator's sums could still overflow for a query whose key mass sits in a class of
    tiny weight (no model of the tests reaches it); whatever the route returns, an infinite loss or gradient is a
    FloatingPointError naming the scores, never a number handed on."""
    g, mk = GeneralTopicModel(np.array([[0.8, 0.2], [0.3, 0.7]]), tau=1), Masking()
    ev = make_evaluator(g, mk, _factors(g, mk), "label")
    real = _as._sq_laws

    def poisoned(*args):
        out = real(*args)
        out[1][:] = np.inf
        return out

    monkeypatch.setattr(_as, "_sq_laws", poisoned)
    with pytest.raises(FloatingPointError, match=r"non-finite loss or gradient at alpha=-1.5, beta=0.5"):
        ev(-1.5, 0.5, True)
