"""The certified problem library: gradients, Hessian-vector products, certificates, names (issue #23)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import problems
from theorycheck.problems import Certificate

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
        assert c.kind == "certified" and c.gap <= 1e-14, (name, c)
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


@pytest.mark.parametrize("name", [n for n in ALL if n.startswith(("stage1-value", "gram/sdp"))])
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
