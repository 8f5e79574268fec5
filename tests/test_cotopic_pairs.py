"""The co-topic family by pair sums (SPEC §11.8(a)): the pair-sum tables and the set kernel against the dense
evaluator of SPEC §11.4 (chain rule through ``dL/dS``), against the blocked tables of SPEC §11.8, the Numba kernels
against their numpy references, the ``alpha``-derivatives against finite differences, and the profile search of
``optimal_attention`` against the two-dimensional L-BFGS-B route on the blocked tables (the route before)."""

from __future__ import annotations

import numpy as np
import pytest
from _general_strategies import general_models
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking, TopicModel
from theorycheck.analysis.landscape import family_scores
from theorycheck.population import attention_loss_grad, family_attention_loss
from theorycheck.population._attention_structured import make_evaluator
from theorycheck.population._cotopic_pairs import pair_basis, pair_tables
from theorycheck.population._set_laws import set_laws, set_laws_reference
from theorycheck.solvers import cotopic_matrix, optimal_attention, optimal_value_matrix
from theorycheck.solvers.attention._family import FAMILY_BOX, FAMILY_GRID
from theorycheck.solvers.attention._structured import structured_solve

REL = 1e-12
maskings = st.sampled_from([Masking(), Masking(p_m=0.3, p_c=0.2, p_r=0.3), Masking(p_m=0.5, p_c=0.0, p_r=0.0)])
scores = st.one_of(st.floats(-6.0, 6.0), st.sampled_from([0.0, -300.0, -60.0, 60.0, 150.0]))


def _factors(g, mk):
    return optimal_value_matrix(g, mk, options={"dense": False}).x


def _dense(g, mk, alpha, beta, W, b, mask_keys, **kw):
    """Loss and (alpha, beta)-gradient of the dense evaluator: ``<dL/dS, I_w>`` and ``<dL/dS, G>``."""
    G = cotopic_matrix(g)
    r = attention_loss_grad(family_scores(alpha, beta, G), W, g, mk, b, mask_keys=mask_keys, **kw)
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    return float(r.loss), float(np.vdot(r.dS, I_w)), float(np.vdot(r.dS, G))  # type: ignore[arg-type]


def _close(a, b, scale, rel=REL):
    assert abs(a - b) <= rel * max(1.0, abs(scale)), (a, b, abs(a - b))


@settings(max_examples=40)
@given(g=general_models(max_T=4, max_v=3, paper=True), mk=maskings, alpha=scores, beta=scores,
       mask_keys=st.booleans(), with_bias=st.booleans())  # fmt: skip
def test_pair_route_equals_dense(g, mk, alpha, beta, mask_keys, with_bias):
    """The pair-sum evaluator (stage-1 W, uniform-tau sets) == the dense evaluator: loss to 1e-12 relative, gradient
    to 1e-12 (scale 1), scores up to the structured range (|beta|, |alpha + beta| <= 300, alpha <= 300)."""
    if max(alpha, abs(beta), abs(alpha + beta)) > 300.0:
        beta = float(np.clip(beta, -300.0, 300.0 - max(alpha, 0.0)))
        alpha = float(np.clip(alpha, -300.0 - beta, 300.0 - beta))
    Wf = _factors(g, mk)
    b = np.linspace(-0.3, 0.4, g.V1) if with_bias else None
    ev = make_evaluator(g, mk, Wf, "co-topic", b, mask_keys)
    assert ev.route == "pairs" and ev.alpha_cheap, ev.pair_info
    L, da, db = _dense(g, mk, alpha, beta, Wf.toarray(), b, mask_keys)
    r = ev(alpha, beta, True)
    assert r.exact and r.n == g.n_topic_sets
    _close(r.value, L, L)
    _close(r.dalpha, da, 1.0)
    _close(r.dbeta, db, 1.0)


@settings(max_examples=25)
@given(g=general_models(max_T=5, max_v=3), mk=maskings, alpha=st.floats(-8.0, 8.0), beta=st.floats(-8.0, 8.0),
       mask_keys=st.booleans(), n_alpha=st.integers(1, 4))  # fmt: skip
def test_kernels_equal_their_numpy_references(g, mk, alpha, beta, mask_keys, n_alpha):
    """The BLAS pair sums + Numba contractions == the numpy pair sums over the dense ``e^{beta G}`` + einsum
    contractions (every table); the Numba set kernel == its numpy reference over dense laws (value, both
    alpha-derivatives and the beta-derivative, several alpha in one pass)."""
    Wf = _factors(g, mk)
    ev = make_evaluator(g, mk, Wf, "co-topic", np.linspace(0.2, -0.1, g.V1), mask_keys)
    pt = ev.tables(beta, True)
    ref = pair_tables(ev.pb, ev.st, ev.op, beta, ev.b, True, reference=True)
    got = pt.as_tables()
    for name in ("word", "group", "quad", "scal"):
        x, y = getattr(got, name), getattr(ref, name)
        assert np.max(np.abs(x - y)) <= 1e-13 * max(1.0, float(np.max(np.abs(y)))), name
    alphas = alpha + np.arange(n_alpha)
    k = set_laws(ev.sets, ev.theta, pt, ev.st, mk, alphas, True)
    r = set_laws_reference(ev.theta, got, ev.st, mk, alphas, True)
    assert np.max(np.abs(k - r)) <= 1e-13 * max(1.0, float(np.max(np.abs(r))))


@settings(max_examples=20)
@given(g=general_models(max_T=4, max_v=3), alpha=st.floats(-4.0, 6.0), beta=st.floats(-5.0, 5.0),
       mask_keys=st.booleans())  # fmt: skip
def test_alpha_derivatives_match_finite_differences(g, alpha, beta, mask_keys):
    """``alpha_scan``'s ``dL/dalpha`` and ``d2L/dalpha2`` == central differences of the loss and of ``dL/dalpha``
    (step 1e-4: truncation ~1e-8 relative)."""
    mk = Masking()
    ev = make_evaluator(g, mk, _factors(g, mk), "co-topic", None, mask_keys)
    h = 1e-4
    lo, mid, hi = ev.alpha_scan([alpha - h, alpha, alpha + h], beta)
    fd1 = (hi[0] - lo[0]) / (2 * h)
    fd2 = (hi[1] - lo[1]) / (2 * h)
    scale = max(1e-6, abs(mid[1]), abs(mid[2]))
    assert abs(mid[1] - fd1) <= 1e-6 * scale + 1e-12
    assert abs(mid[2] - fd2) <= 1e-6 * scale + 1e-12


@settings(max_examples=20)
@given(g=general_models(max_T=4, max_v=3, paper=True), mk=maskings, alpha=st.floats(-6.0, 6.0),
       beta=st.floats(-6.0, 6.0), mask_keys=st.booleans())  # fmt: skip
def test_pair_route_equals_blocked_route_sampled_and_dirichlet(g, mk, alpha, beta, mask_keys):
    """Sampled topic sets (set kernel) and the Dirichlet law (pair tables in the word-major layout, dense laws):
    the pair route == the blocked tables of SPEC §11.8 on the same laws, loss and gradient to 1e-12."""
    Wf = _factors(g, mk)
    for kw, model in [(dict(n_sets=7, seed=3), g),
                      (dict(n_theta=9, seed=4), GeneralTopicModel(g.phi, prior="dirichlet", alpha=0.7))]:  # fmt: skip
        Wm = Wf if model is g else _factors(model, mk)
        a = family_attention_loss(alpha, beta, Wm, model, mk, family="co-topic", mask_keys=mask_keys, grad=True,
                                  **kw)  # fmt: skip
        ev = make_evaluator(model, mk, Wm, "co-topic", None, mask_keys, pairs=False, **kw)
        b = ev(alpha, beta, True)
        _close(a.value, b.value, b.value)
        _close(a.dalpha, b.dalpha, 1.0)
        _close(a.dbeta, b.dbeta, 1.0)
        assert a.n == b.n and abs(a.stderr - b.stderr) <= 1e-12


def test_a_right_factor_outside_the_feature_span_uses_the_blocked_tables():
    """A factored W whose right factor is not linear in (phi, 1): the pair route refuses it (residual reported) and
    the evaluator falls back to the blocked tables, still equal to the dense evaluator."""
    rng = np.random.default_rng(0)
    g = GeneralTopicModel(rng.dirichlet(np.full(9, 0.5), size=3), tau=2)
    mk = Masking()
    U, V = rng.normal(size=(g.V1, 3)), rng.normal(size=(g.V1, 3))
    ev = make_evaluator(g, mk, (U, V), "co-topic")
    assert ev.route == "blocked" and not ev.pair_info["applies"] and ev.pair_info["residual"] > 1e-3
    L, da, db = _dense(g, mk, 0.7, 1.3, U @ V.T, None, False)
    r = ev(0.7, 1.3, True)
    _close(r.value, L, L)
    _close(r.dbeta, db, 1.0)
    op_basis, info = pair_basis(ev.op, ev.st, g.phi, False, mk.a, mk.r)
    assert op_basis is None and "residual" in info["reason"]


def test_beta_zero_tables_equal_the_product():
    """beta = 0 takes the O(n T q) route (prefix sums, rank-T product); its tables == the dense product's."""
    rng = np.random.default_rng(1)
    g = GeneralTopicModel(rng.dirichlet(np.full(15, 0.2), size=4), tau=2)
    mk = Masking()
    ev = make_evaluator(g, mk, _factors(g, mk), "co-topic")
    got, ref = ev.tables(0.0, True).as_tables(), pair_tables(ev.pb, ev.st, ev.op, 0.0, ev.b, True, reference=True)
    for name in ("word", "group", "quad", "scal"):
        x, y = getattr(got, name), getattr(ref, name)
        assert np.max(np.abs(x - y)) <= 1e-14 * max(1.0, float(np.max(np.abs(y)))), name


def _old_route(g, mk, mask_keys=False, box=None):
    """The route before SPEC §11.8(a): blocked tables, grid + L-BFGS-B from the three best grid points."""
    box = [FAMILY_BOX] * 2 if box is None else box
    c, L, proj, at_b, r, info, W, ev = structured_solve(g, mk, "co-topic", "stage1", "squared", mask_keys, None, 0,
                                                        box, 7, FAMILY_GRID, {}, None, pairs=False)  # fmt: skip
    return c, L, at_b, info


@settings(max_examples=8)
@given(g=general_models(max_T=4, max_v=3, paper=True), mk=st.sampled_from([Masking(), Masking(0.3, 0.2, 0.3)]),
       mask_keys=st.booleans())  # fmt: skip
def test_profile_optimum_equals_the_lbfgs_route(g, mk, mask_keys):
    """optimal_attention's co-topic optimum (profile search on the pair tables) == the L-BFGS-B route on the blocked
    tables to 1e-10 in the loss, or lower: on a multimodal landscape the 2-D search from three grid points can stop in
    a worse local minimum (the profile search then reached a lower one, whose loss the dense evaluator confirms);
    never higher. A stationary point (status 0) unless on the box."""
    new = optimal_attention(g, mk, options={"mask_keys": mask_keys})
    assert new.info["search"] == "profile" and new.info["tables_route"] == "pairs"
    c, L, at_b, _ = _old_route(g, mk, mask_keys)
    assert new.fun <= L + 1e-10, (new.x, c, new.fun, L)
    if new.fun < L - 1e-10:
        W = _factors(g, mk).toarray()
        _close(_dense(g, mk, float(new.x[0]), float(new.x[1]), W, None, mask_keys)[0], new.fun, 1.0)
    assert new.fun <= new.info["grid_min"] + 1e-15
    if not new.info["at_boundary"]:
        assert new.status == 0, new.message


def test_profile_finds_the_basin_the_grid_columns_hide():
    """A profile with two local minima, the better one between two columns whose values alone show no dip (the
    model hypothesis found: T = 3, three words, tau = 3): the columns' exact slopes reveal it, and
    the search reaches the L-BFGS-B route's (lower) optimum."""
    g = GeneralTopicModel(np.random.default_rng(3).dirichlet(np.full(3, 0.7), size=3), tau=3)
    mk = Masking()
    new = optimal_attention(g, mk)
    c, L, _, _ = _old_route(g, mk)
    assert abs(new.fun - L) <= 1e-10 and abs(new.x[1] - c[1]) <= 1e-3 and new.info["beta_searches"] >= 2


def test_profile_optimum_on_a_box_edge_and_against_the_dense_route():
    """A box that cuts the optimum off in beta: the profile search stops on the edge (status 3), with the old route's
    loss; and a free optimum equals the dense route's (given W and G: the dense evaluator, L-BFGS-B)."""
    rng = np.random.default_rng(2)
    g = GeneralTopicModel(rng.dirichlet(np.full(12, 0.4), size=3), tau=2)
    mk = Masking()
    free = optimal_attention(g, mk)
    d = optimal_attention(g, mk, value=free.info["W"], options={"family": cotopic_matrix(g)[1:, 1:]})
    assert d.info["route"] == "dense" and abs(free.fun - d.fun) <= 1e-10
    box = (FAMILY_BOX, (free.x[1] + 1.0, free.x[1] + 5.0))
    edge = optimal_attention(g, mk, options={"box": box})
    _, L, at_b, _ = _old_route(g, mk, box=box)
    assert at_b and edge.status == 3 and edge.info["at_boundary"]
    assert abs(edge.x[1] - box[1][0]) <= 1e-6 and abs(edge.fun - L) <= 1e-10


def test_paper_model_profile_matches_the_closed_form():
    """The paper's model as a general one: the co-topic family is SPEC §4.3's (alpha + beta, beta) family, whose
    optimum depends on K = e^{alpha_sym} + (v - 1) e^{beta_sym} only: the profile search reaches its loss."""
    tm = TopicModel(T=4, v=3, tau=2)
    mk = Masking()
    ref = optimal_attention(tm, mk)
    r = optimal_attention(GeneralTopicModel.from_topic_model(tm), mk)
    assert r.info["search"] == "profile" and abs(r.fun - ref.fun) <= 1e-10


@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_give_the_same_bits_on_any_thread_count(threads, monkeypatch):
    """Fixed query blocks and chunk order: the tables and the per-law losses do not depend on the thread count."""
    rng = np.random.default_rng(4)
    g = GeneralTopicModel(rng.dirichlet(np.full(700, 0.3), size=5), tau=2)
    mk = Masking()
    W = _factors(g, mk)

    def run(n):
        monkeypatch.setenv("THEORYCHECK_THREADS", str(n))
        ev = make_evaluator(g, mk, W, "co-topic")
        pt = ev.tables(1.7, True)
        return pt, set_laws(ev.sets, ev.theta, pt, ev.st, mk, [0.3, 2.0], True)

    (p1, o1), (p2, o2) = run(1), run(threads)
    assert np.array_equal(p1.quad, p2.quad) and np.array_equal(p1.lin, p2.lin) and np.array_equal(o1, o2)
