"""The certified problem library: gradients, Hessian-vector products, certificates, names (issue #23)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import problems
from theorycheck.models import GeneralTopicModel, Masking, TopicModel
from theorycheck.population import family_attention_loss, value_loss, value_loss_grad
from theorycheck.problems import Certificate
from theorycheck.problems._attention import AlphaBetaCotopic
from theorycheck.solvers import optimal_value_matrix

ALL = [d["name"] for d in problems.list()]

# small sizes for every model: T topics, v words per topic, tau topics per document (tau < T)
sizes = st.tuples(st.integers(2, 4), st.integers(2, 4)).flatmap(
    lambda tv: st.builds(lambda tau: {"T": tv[0], "v": tv[1], "tau": tau}, st.integers(1, tv[0] - 1))
)


def _fd_check(p, x, seed, rtol):
    """Central difference of f along a random direction against <grad f(x), e> (h = 1e-6)."""
    e = np.random.default_rng(seed).standard_normal(p.shape)
    h = 1e-6
    fd = (p.f(x + h * e) - p.f(x - h * e)) / (2 * h)
    an = float(np.sum(p.grad(x) * e))
    # central differences: truncation O(h^2 |f'''|) + rounding O(eps |f| / h) ~ 1e-10 |f|
    assert abs(fd - an) <= rtol * max(1.0, abs(an), float(np.linalg.norm(e))), (p.name, fd, an)


@pytest.mark.parametrize("name", [n for n in ALL if not n.startswith(("attention-ab", "attention-S"))])
@settings(max_examples=8)
@given(size=sizes, seed=st.integers(0, 10))
def test_gradient_matches_finite_differences(name, size, seed):
    p = problems.get(name, **size)
    _fd_check(p, p.start(seed + 1), seed, 1e-6)


@pytest.mark.parametrize("name", [n for n in ALL if n.startswith(("attention-ab", "attention-S"))])
@settings(max_examples=5)
@given(T=st.integers(2, 4), v=st.integers(1, 3), seed=st.integers(0, 10))
def test_attention_gradient_matches_finite_differences(name, T, v, seed):
    # the (alpha, beta) gradient is an independent route (dense dL/dS contracted with A and B)
    p = problems.get(name, T=T, v=v, tau=1)
    _fd_check(p, p.start(seed + 1), seed, 1e-6)


@pytest.mark.parametrize("name", [n for n in ALL if problems.get(n).hvp is not None])
def test_hvp_matches_gradient_differences(name):
    p = problems.get(name)
    x, v = p.start(1), p.start(2)
    fd = (p.grad(x + 1e-5 * v) - p.grad(x - 1e-5 * v)) / 2e-5
    np.testing.assert_allclose(p.hvp(x, v), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ALL)
def test_minimiser_attains_certified_value(name):
    p = problems.get(name)
    c = p.certificate
    assert isinstance(c, Certificate) and c.lower <= c.upper
    assert p.f_star == c.upper
    if c.kind == "upper-bound":
        assert p.minimiser is None and c.lower == 0.0  # the (alpha, beta) optimum is only an upper bound
        assert abs(p.f(p.reference()) - c.upper) <= 1e-12
        return
    x = p.minimiser
    # f(x*) = f* within the certificate's gap plus the rounding of one evaluation (~1e-16 |f|)
    assert c.lower - 1e-14 <= p.f(x) <= c.upper + 1e-14
    assert abs(p.suboptimality(x)) <= c.gap + 1e-14
    assert p.distance(x) == 0.0
    assert p.violation(x) <= 1e-12
    # the documented start is not optimal: the problems are not trivial
    assert p.suboptimality(p.x0) > 1e-3


def test_certificate_gaps_are_tight_where_rigorous():
    for name in ("stage1-value/lsq:paper", "gram/sdp:paper", "attention-ab/block:paper", "attention-ab/identity:paper"):
        c = problems.get(name).certificate
        assert c.kind == "certified" and c.gap <= 1e-13, (name, c)  # attention: lower bounds inf over R^2 (item 1)
    assert problems.get("attention-ab/block-ce:paper").certificate.kind == "numerical"


def test_stage1_value_is_one_minus_expected_purity():
    # SPEC §4.0: min L = 1 - E||p||^2; uniform-tau paper model: E||p||^2 = 1 / (tau v)
    p = problems.get("stage1-value/lsq:paper", T=4, v=3, tau=2)
    assert math.isclose(p.f_star, 1 - 1 / 6, rel_tol=0, abs_tol=1e-15)


def test_identifiable_part_ignores_the_null_space():
    p = problems.get("stage1-value/lsq:paper")
    x = p.minimiser
    P = p._moments()[1]
    z = np.random.default_rng(0).standard_normal(p.shape) @ (np.eye(p.shape[0]) - P)  # rows in null(Sigma)
    assert abs(p.f(x + z) - p.f_star) <= 1e-13
    assert p.distance(x + z) <= 1e-10
    assert problems.get("stage1-value/ridge:paper").distance(x + z) > 1e-3


def test_block_attention_identifiable_part_is_logK():
    p = problems.get("attention-ab/block:paper")
    a, b = p.minimiser
    v = p.tm.v
    # move along the flat direction: same K = e^a + (v - 1) e^b
    a2 = math.log(math.exp(a) + (v - 1) * (math.exp(b) - math.exp(b - 0.5)))
    y = np.array([a2, b - 0.5])
    assert abs(p.f(y) - p.f_star) <= 1e-13
    assert p.distance(y) <= 1e-12


def test_psd_violation():
    p = problems.get("gram/sdp:paper")
    G = p.minimiser
    assert p.violation(G) <= 1e-12
    assert p.violation(G - 0.1 * np.eye(p.shape[0])) >= 0.1 - 1e-12


def test_starts_are_seeded_and_documented():
    for name in ALL:
        p = problems.get(name)
        np.testing.assert_array_equal(p.start(3), p.start(3))
        assert p.x0.shape == p.shape and p.start_doc
    assert not np.array_equal(problems.get("gram/factor:paper").start(1), problems.get("gram/factor:paper").start(2))


def test_unknown_problem_names_the_closest():
    with pytest.raises(ValueError, match=r"closest: 'stage1-value/lsq:paper'"):
        problems.get("stage1-value/lqs:paper")
    with pytest.raises(ValueError, match="unknown size parameter"):
        problems.get("gram/sdp:paper", d=3)
    with pytest.raises(ValueError, match="level"):
        problems.get("gram/sdp:paper", level=99)
    with pytest.raises(ValueError, match="no problem matches"):
        problems.match(["nothing*"])


def test_list_has_every_family_and_ladders():
    fams = {d["family"] for d in problems.list()}
    assert {"stage1-value/lsq", "stage1-value/ridge", "gram/sdp", "gram/factor", "attention-ab/block",
            "attention-ab/identity", "attention-S/full"} <= fams  # fmt: skip
    for d in problems.list():
        V1 = [s["T"] * s["v"] + 1 for s in d["sizes"]]
        assert V1 == sorted(V1) and len(V1) >= 3
    assert {d["model"] for d in problems.list() if d["family"] == "stage1-value/lsq"} >= {"paper", "zipf", "overlap"}


def test_sizes_beyond_the_guard_are_refused_before_work():
    with pytest.raises(ValueError, match="refused before any work"):
        problems.get("stage1-value/lsq:paper", T=100, v=100, tau=2)


DENSE_CONVEX = ("stage1-value/lsq", "stage1-value/ridge", "gram/sdp")


@pytest.mark.parametrize("name", [n for n in ALL if n.startswith(DENSE_CONVEX)])
def test_independent_solver_does_not_beat_the_certificate(name):
    # an independent route (dense lstsq for stage 1, cvxpy/CLARABEL for the SDP) lands on f* and never
    # below the certified lower bound (beyond the rounding of one evaluation)
    p = problems.get(name, level=1)
    solver = problems.SOLVERS["lstsq" if name.startswith("stage1") else "cvxpy-CLARABEL"]
    if not solver.applies(p)[0]:
        pytest.skip(solver.applies(p)[1])
    x = solver(p, problems.Budget(60.0), lambda x: None)
    assert p.f(x) >= p.certificate.lower - 1e-14
    assert p.suboptimality(x) <= (1e-12 if name.startswith("stage1") else 1e-7)
    assert p.violation(x) <= 1e-7


# ----------------------------------------------------------------------------- structured stage-1 form (SPEC §4.2)
@pytest.mark.parametrize("fam", ["stage1-value/block", "stage1-value/block-ridge"])
@settings(max_examples=10)
@given(size=sizes, seed=st.integers(0, 100))
def test_block_form_equals_the_dense_loss_of_its_matrix(fam, size, seed):
    # f(A, B0, gamma) in O(1) against the library's dense value_loss of the V1 x V1 block matrix, and
    # grad f against the dense gradient contracted with the block pattern (chain rule)
    if size["T"] < 2:
        return
    p = problems.get(f"{fam}:paper", **size)
    x = np.random.default_rng(seed).standard_normal(3)
    W = p.matrix(x).toarray()
    assert math.isclose(p.f(x), value_loss(W, p.tm, p.mk, reg=p.reg), rel_tol=1e-12, abs_tol=1e-12)
    G = value_loss_grad(W, p.tm, p.mk, reg=p.reg)[1]
    basis = [p.matrix(e).toarray() for e in np.eye(3)]
    np.testing.assert_allclose(p.grad(x), [np.sum(G * B) for B in basis], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("level", range(5))
def test_block_form_optimum_matches_the_closed_form_minimum_up_to_V1_100001(level):
    p = problems.get("stage1-value/block:paper", level=level)
    c = p.certificate
    # SPEC §4.0: min L = 1 - E||p||^2 = 1 - 1/(tau v) (uniform-tau), an independent value
    assert c.lower - 1e-14 <= 1 - 1 / (p.tm.tau * p.tm.v) <= c.upper + 1e-14
    assert c.gap <= 1e-12
    # an independent route: the minimum-norm solution of Q x = b
    xs = np.linalg.lstsq(p.Q, p.b, rcond=1e-12)[0]
    assert p.f(xs) >= c.lower - 1e-13 and p.suboptimality(xs) <= 1e-12
    assert p.distance(xs) <= 1e-6 * (1 + np.linalg.norm(p.identifiable(xs)))
    assert p.suboptimality(p.x0) > 1e-3
    if level == 4:
        assert p.tm.V1 == 100_001 and p.n == 3


def test_block_form_has_a_null_direction_only_without_ridge():
    p, r = problems.get("stage1-value/block:paper", level=1), problems.get("stage1-value/block-ridge:paper", level=1)
    ev, U = np.linalg.eigh(p.Q)
    z = U[:, 0] * 0.7  # the null direction of Q at reg = 0 (rank 2)
    assert ev[0] <= 1e-12 * ev[-1]
    assert abs(p.f(p.minimiser + z) - p.f_star) <= 1e-13 and p.distance(p.minimiser + z) <= 1e-10
    assert r.f(r.minimiser + z) - r.f_star > 1e-8 and r.distance(r.minimiser + z) > 0.5


def test_block_form_agrees_with_the_dense_problem():
    size = dict(T=4, v=5, tau=2)
    b, d = problems.get("stage1-value/block-ridge:paper", **size), problems.get("stage1-value/ridge:paper", **size)
    assert math.isclose(b.f_star, d.f_star, rel_tol=1e-12)
    np.testing.assert_allclose(b.matrix(b.minimiser).toarray(), d.minimiser, atol=1e-12)
    # the dense solvers do not apply to the structured form; Newton-CG does and reaches f*
    assert not problems.SOLVERS["lstsq"].applies(b)[0] and not problems.SOLVERS["cvxpy-CLARABEL"].applies(b)[0]
    x = problems.SOLVERS["Newton-CG"](b, problems.Budget(30.0), lambda x: None)
    assert b.suboptimality(x) <= 1e-10


# ----------------------------------------------------------------------------- attention on general models (SPEC §11.4)
def test_cotopic_family_on_the_paper_model_is_the_certified_alpha_beta_landscape():
    # on the paper's model G = A + B, so alpha I_w + beta G = (alpha + beta) A + beta B: the generic
    # dense route of the co-topic problem against the O(1) closed form of attention-ab/block
    tm, mk = TopicModel(3, 4, 2), Masking()
    gen = AlphaBetaCotopic("paper-as-general", dict(T=3, v=4, tau=2), GeneralTopicModel.from_topic_model(tm), mk)
    ab = problems.get("attention-ab/block:paper", T=3, v=4, tau=2)
    for x in np.random.default_rng(0).uniform(-3, 6, size=(5, 2)):
        y = np.array([x[0] + x[1], x[1]])
        assert math.isclose(gen.f(x), ab.f(y), rel_tol=1e-12)
        np.testing.assert_allclose(gen.grad(x), [ab.grad(y)[0], ab.grad(y).sum()], rtol=1e-9, atol=1e-12)
    c = gen.certificate
    assert c.kind == "numerical" and c.lower == c.upper and "numerical" in c.method
    # the numerical optimum of the generic route is the certified optimum (to the solver's accuracy) and
    # never below its certified lower bound
    assert ab.certificate.lower - 1e-13 <= gen.f_star <= ab.f_star + 1e-9


@pytest.mark.parametrize("model", ["zipf", "overlap", "unequal"])
def test_cotopic_optimum_beats_the_grid_and_uniform_attention(model):
    p = problems.get(f"attention-ab/cotopic:{model}")
    grid = [p.f(np.array([a, b])) for a in np.linspace(-5, 10, 7) for b in np.linspace(-5, 10, 7)]  # fmt: skip
    assert p.f_star <= min(grid) + 1e-12 and p.f_star < p.f(p.x0) - 1e-3
    assert p.certificate.kind == "numerical"
    # a stationary point (the optimum lies inside the search box [-60, 60]^2 for these models)
    assert np.max(np.abs(p.minimiser)) < 59.0 and np.linalg.norm(p.grad(p.minimiser)) <= 1e-5


@pytest.mark.parametrize("model", ["overlap", "unequal"])
def test_factorization_on_general_models_reaches_the_sdp_optimum(model):
    # gram/factor on the overlap and unequal models: the factor of the closed-form Gram attains the
    # SDP's certified value, and L-BFGS-B from the documented start lands on it (d = rank bound)
    p = problems.get(f"gram/factor:{model}")
    assert p.shape[0] == p.d and abs(p.f(p.minimiser) - problems.get(f"gram/sdp:{model}").f_star) <= 1e-12
    x = problems.SOLVERS["L-BFGS-B"](p, problems.Budget(30.0), lambda x: None)
    assert p.certificate.lower - 1e-13 <= p.f(x) and p.suboptimality(x) <= 1e-8


def test_highs_solves_the_stage1_qp():
    # HiGHS (a QP backend of cvxpy) applies to the dense stage-1 problems only (not the PSD cone)
    s = problems.SOLVERS["cvxpy-HIGHS"]
    p = problems.get("stage1-value/lsq:paper")
    if not s.applies(p)[0]:
        pytest.skip(s.applies(p)[1])
    assert not s.applies(problems.get("gram/sdp:paper"))[0]
    assert not s.applies(problems.get("stage1-value/block:paper"))[0]
    x = s(p, problems.Budget(60.0), lambda x: None)
    assert p.f(x) >= p.certificate.lower - 1e-14 and p.suboptimality(x) <= 1e-8


def test_an_uncertified_interval_bound_is_only_an_upper_bound():
    """The interval certificate's bounds hold on its search box; when it does not certify the optimum
    (status 3, "bound on the box": at v = 1 the loss is flat in beta), the problem's f* is an upper
    bound only (kind "upper-bound", trivial lower bound 0 for the squared loss)."""
    flat = problems.get("attention-ab/identity:paper", T=3, v=1, tau=2)
    assert flat.certificate.kind == "upper-bound" and flat.certificate.lower == 0.0
    assert flat.f(flat.minimiser) <= flat.certificate.upper + 1e-12
    sharp = problems.get("attention-ab/identity:paper", T=3, v=4, tau=2)
    assert sharp.certificate.kind == "certified" and sharp.certificate.gap < 1e-10


# ----------------------------------------------------------------------------- the fitted-LDA model
def test_lda_model_is_the_shipped_fit_restricted_and_renormalised():
    """Package data, no nlp extra: rows of the shipped fit on the chosen words, renormalised; v words per topic."""
    from theorycheck.problems._lda import lda_model, lda_phi, lda_words

    full = lda_phi()
    assert full.shape == (10, 633) and np.all(full > 0) and not full.flags.writeable
    for T, v in ((3, 4), (4, 5), (10, 40)):
        cols = lda_words(T, v)
        assert len(cols) == len(set(cols)) == T * v
        for t in range(T):  # round-robin: every topic's v most probable words are chosen
            assert set(np.argsort(-full[t], kind="stable")[:v].tolist()) <= set(cols), (T, v, t)
        g = lda_model(T, v, 2)
        assert (g.T, g.V1, g.tau) == (T, T * v + 1, 2)
        np.testing.assert_allclose(g.phi * full[:T, cols].sum(axis=1, keepdims=True), full[:T, cols], rtol=1e-14)
        assert lda_model(T, v, 2) == g  # deterministic
    with pytest.raises(ValueError, match="T must be in"):
        lda_model(11, 2, 2)


@pytest.mark.parametrize("name", ["stage1-value/lsq:lda", "stage1-value/ridge:lda", "gram/sdp:lda", "gram/factor:lda"])
def test_lda_problems_are_certified_and_attained(name):
    p = problems.get(name, level=1)
    c = p.certificate
    assert c.kind == "certified" and 0 <= c.gap <= 1e-12
    assert abs(p.f(p.minimiser) - p.f_star) <= 1e-12
    # an independent route: the normal equations of the stage-1 quadratic in W, solved by lstsq
    Sigma, C = (np.asarray(m) for m in __import__("theorycheck").population.moments(p.tm, p.mk))
    W = np.linalg.lstsq(Sigma + p.size.get("reg", 1e-3 if "ridge" in name else 0.0) * np.eye(len(Sigma)), C.T,
                        rcond=None)[0].T  # fmt: skip
    assert p.f_star <= value_loss(W, p.tm, p.mk, reg=getattr(p, "reg", 0.0)) + 1e-12


@pytest.mark.parametrize("model", ["zipf", "unequal", "lda"])
def test_label_problem_is_certified_over_the_plane(model):
    """attention-ab/label: f and its gradient from the dense loss agree with the structured evaluator; f* is
    certified over R^2 (gap <= 1e-9), no point of a wide grid is below its lower bound, and the minimiser is
    stationary."""
    p = problems.get(f"attention-ab/label:{model}")
    c = p.certificate
    assert c.kind == "certified" and c.gap <= 1e-9 and "rigorous" in c.method
    W = optimal_value_matrix(p.tm, p.mk, options={"dense": False}).x
    for a, b in ((0.5, -1.0), (3.0, 2.0)):
        r = family_attention_loss(a, b, W, p.tm, p.mk, family="label", grad=True)
        assert abs(p.f(np.array([a, b])) - r.value) <= 1e-12
        np.testing.assert_allclose(p.grad(np.array([a, b])), [r.dalpha, r.dbeta], rtol=1e-8, atol=1e-12)
    grid = [p.f(np.array([a, b])) for a in np.linspace(-10, 30, 9) for b in np.linspace(-20, 20, 9)]
    assert min(grid) >= c.lower - 1e-12 and p.f_star < p.f(p.x0) - 1e-4
    assert np.linalg.norm(p.grad(p.minimiser)) <= 1e-6


def test_label_problem_with_its_infimum_at_infinity_is_an_upper_bound():
    """On the overlap model the label family's infimum is a limit (beta -> -inf at fixed alpha + beta): the
    certificate does not close, f* is an upper bound only (no minimiser), attained by the reference to 1e-12."""
    p = problems.get("attention-ab/label:overlap")
    c = p.certificate
    assert c.kind == "upper-bound" and c.lower == 0.0 and p.minimiser is None and "not certified" in c.method
    x = p.reference()
    assert abs(p.f(x) - c.upper) <= 1e-12 and p.f(x + np.array([5.0, -5.0])) - p.f(x) <= 1e-12
