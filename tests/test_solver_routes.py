"""The solvers' routes: each closed form for the paper's model against the generic route, the route
registries, the options objects' validation, and the layout rules of ``theorycheck/solvers``.

Tolerances. ``W^V`` and the Gram: the closed forms and the generic low-rank formulas (thin SVD /
eigendecomposition of ``(T+1)``-column factors) agree to 1e-12 relative to ``max |W|`` (round-off of a
few dozen flops on O(1) numbers; observed ~3e-16). Attention: both routes minimise the same loss by
different optimisers (bounded Brent over ``log K`` on the closed form; L-BFGS-B over the family
coefficients, gradient tolerance 1e-10, on the exact population loss), so the optimal losses agree to
1e-9 relative (observed ~1e-16) and ``K`` to 1e-4 relative (the loss is flat to second order at the
optimum: an error ``e`` in the loss allows ``sqrt(e)`` in ``log K``).
"""

from __future__ import annotations

import ast
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_code_shape import GENERATED

import theorycheck as tc
from theorycheck.models import GeneralTopicModel, TopicModel
from theorycheck.solvers import AttentionOptions, GramOptions, ValueOptions
from theorycheck.solvers.attention._solve import _optimal_attention
from theorycheck.solvers.gram._block import _min_embedding_dim
from theorycheck.solvers.gram._solve import _optimal_embedding_gram
from theorycheck.solvers.value._solve import _optimal_value_matrix

S = tc.solvers
SOLVERS_DIR = pathlib.Path(tc.solvers.__file__).parent


@st.composite
def paper_models(draw, max_T=4, max_v=3):
    """A small paper model (tau < T, so that the context is informative) and a masking with ``a > 0``."""
    T = draw(st.integers(2, max_T))
    v = draw(st.integers(1, max_v))
    tau = draw(st.integers(1, T - 1))
    p_m = draw(st.sampled_from([0.15, 0.3, 0.6]))
    p_c, p_r = draw(st.sampled_from([(0.1, 0.1), (0.2, 0.05), (0.5, 0.5), (0.0, 0.0)]))
    return TopicModel(T=T, v=v, tau=tau), tc.Masking(p_m=p_m, p_c=p_c, p_r=p_r)


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(a))), 1e-300))


# ----------------------------------------------------------------------------- registries
@pytest.mark.parametrize(
    "impl", [_optimal_value_matrix, _optimal_embedding_gram, _optimal_attention, _min_embedding_dim]
)
def test_each_registry_has_a_generic_route_and_a_paper_fast_path(impl):
    generic = impl.dispatch(GeneralTopicModel)
    assert impl.dispatch(TopicModel) is not generic
    assert set(impl.registry) == {object, TopicModel}  # the generic route is the base function (any model)
    assert generic is impl.registry[object]


# ----------------------------------------------------------------------------- W^V
@settings(max_examples=20)
@given(paper_models(), st.sampled_from([0.0, 0.05]))
def test_value_closed_form_equals_generic_route(models, reg):
    tm, mk = models
    fast = S.optimal_value_matrix(tm, mk, reg=reg, options={"dense": True})
    generic = _optimal_value_matrix.dispatch(GeneralTopicModel)(
        tm, mk, "closed-form", reg, 1e-6, None, ValueOptions(dense=True)
    )
    public = S.optimal_value_matrix(GeneralTopicModel.from_topic_model(tm), mk, reg=reg, options={"dense": True})
    assert fast.status == generic.status == public.status == 0
    assert _rel(fast.x, generic.x) <= 1e-12
    assert _rel(fast.x, public.x) <= 1e-12
    assert math.isclose(fast.fun, public.fun, rel_tol=1e-12, abs_tol=1e-14)


# ----------------------------------------------------------------------------- Gram
@settings(max_examples=20)
@given(paper_models(), st.booleans())
def test_gram_closed_form_equals_generic_route(models, bias):
    tm, mk = models
    fast = S.optimal_embedding_gram(tm, mk, bias=bias)
    g = GeneralTopicModel.from_topic_model(tm)
    public = S.optimal_embedding_gram(g, mk, bias=bias)
    generic = _optimal_embedding_gram.dispatch(GeneralTopicModel)(
        tm, mk, "closed-form", 0.0, 1e-6, None, GramOptions(), None, bias
    )
    assert fast.status == public.status == generic.status == 0
    dense = np.asarray(fast.x)
    assert _rel(dense, public.x.toarray()) <= 1e-12
    assert _rel(dense, generic.x.toarray()) <= 1e-12
    assert math.isclose(fast.fun, public.fun, rel_tol=1e-12, abs_tol=1e-14)  # the loss can be 0 (v = 1)
    assert S.min_embedding_dim(tm, mk, bias=bias) == S.min_embedding_dim(g, mk, bias=bias)
    if bias:
        assert np.max(np.abs(fast.info["b"] - public.info["b"])) <= 1e-12


# ----------------------------------------------------------------------------- (alpha, beta) attention
@settings(max_examples=4, deadline=None)
@given(paper_models(max_T=3, max_v=3))
def test_attention_closed_form_equals_generic_route(models):
    """Block ``W^V``: the generic family ``alpha I_w + beta G`` is the (alpha, beta) family with
    ``alpha_sym = alpha + beta``, ``beta_sym = beta`` (``G`` the within-topic all-ones block)."""
    tm, mk = models
    fast = S.optimal_attention(tm, mk, value="block")
    g = GeneralTopicModel.from_topic_model(tm)
    generic = S.optimal_attention(g, mk, value="stage1")
    if fast.status != 0 or generic.status != 0:
        return  # an optimum at infinity (status 3) has no finite point to compare
    assert math.isclose(fast.fun, generic.fun, rel_tol=1e-9, abs_tol=1e-14)
    if not fast.certificate["flat_in_K"]:
        K_generic = math.exp(generic.alpha + generic.beta) + (tm.v - 1) * math.exp(generic.beta)
        assert math.isclose(fast.K, K_generic, rel_tol=1e-4)


def test_attention_identity_value_closed_form_equals_generic_route():
    tm, mk = TopicModel(T=3, v=3, tau=2), tc.Masking(0.15, 0.1, 0.1)
    fast = S.optimal_attention(tm, mk, value="identity")
    generic = _optimal_attention.dispatch(GeneralTopicModel)(
        tm, mk, "family", 0.0, 1e-6, None, AttentionOptions(), "identity", "squared"
    )
    assert fast.status == generic.status == 0
    assert math.isclose(fast.fun, generic.fun, rel_tol=1e-9, abs_tol=1e-14)
    assert math.isclose(fast.alpha, generic.alpha + generic.beta, rel_tol=1e-6)
    assert math.isclose(fast.beta, generic.beta, rel_tol=1e-4, abs_tol=1e-6)


# ----------------------------------------------------------------------------- options objects
TM, MK = TopicModel(T=3, v=2, tau=2), tc.Masking(0.15, 0.1, 0.1)

BAD_OPTIONS = [
    # (solver, options, exception, text the message must contain)
    ("attention", {"n_gird": 5}, ValueError, "n_gird"),
    ("attention", {"maxiter": 5}, ValueError, "solver_options"),
    ("attention", {"n_grid": 0}, ValueError, "n_grid"),
    ("attention", {"n_grid": 5}, ValueError, "n_grid"),  # >= 11 on the paper model's grid
    ("attention", {"n_grid": 2.5}, ValueError, "n_grid"),
    ("attention", {"check_general": "yes"}, TypeError, "check_general"),
    ("attention", {"certify": "exact"}, ValueError, "certify"),
    ("attention", {"certify_options": {"tol": 1e-9}}, ValueError, "certify_options"),
    ("attention", {"certify": "interval", "certify_options": [1]}, TypeError, "certify_options"),
    ("attention", {"mask_keys": 1}, TypeError, "mask_keys"),
    ("attention", {"n_theta": 1}, ValueError, "n_theta"),
    ("attention", {"seed": -1}, ValueError, "seed"),
    ("attention", {"solver_options": [1]}, TypeError, "solver_options"),
    ("attention", {"box": (1.0, 0.0)}, ValueError, "box"),
    ("attention", {"family": "co-topic"}, ValueError, "family"),  # generic route only
    ("attention", {"mask_keys": True}, ValueError, "mask_keys"),  # generic route only
    ("attention", [("n_grid", 11)], TypeError, "AttentionOptions"),
    ("value", {"dense": "yes"}, TypeError, "dense"),
    ("value", {"max_bytes": 0}, ValueError, "max_bytes"),
    ("value", {"maxiter": 3}, ValueError, "maxiter"),
    ("value", {"solver_options": "fast"}, TypeError, "solver_options"),
    ("gram", {"init_scale": 0.0}, ValueError, "init_scale"),
    ("gram", {"maxiter": 0}, ValueError, "maxiter"),
    ("gram", {"seed": -2}, ValueError, "seed"),
    ("gram", {"dense": True}, ValueError, "dense"),
    ("gram", {"max_bytes": -1}, ValueError, "max_bytes"),
]
CALL = {"attention": S.optimal_attention, "value": S.optimal_value_matrix, "gram": S.optimal_embedding_gram}


@pytest.mark.parametrize("solver,options,exc,text", BAD_OPTIONS)
def test_bad_options_raise_naming_the_field(solver, options, exc, text):
    with pytest.raises(exc, match=text):
        CALL[solver](TM, MK, options=options)


def test_unknown_option_lists_the_allowed_fields():
    with pytest.raises(ValueError, match="allowed: n_grid, box, check_general") as err:
        S.optimal_attention(TM, MK, options={"grid": 41, "n_gird": 3})
    assert "grid, n_gird" in str(err.value)


def test_options_are_frozen_and_documented_in_one_place():
    import dataclasses

    for cls in (AttentionOptions, ValueOptions, GramOptions):
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().solver_options = {}
        for f in dataclasses.fields(cls):  # every field in the class docstring, with its default
            assert f"{f.name} :" in cls.__doc__ and "default" in cls.__doc__.split(f"{f.name} :")[1].split("\n")[0]


def test_dict_and_object_options_give_the_same_result():
    a = S.optimal_attention(TM, MK, value="identity", options={"n_grid": 41, "check_general": False})
    b = S.optimal_attention(TM, MK, value="identity", options=AttentionOptions(n_grid=41, check_general=False))
    assert a.fun == b.fun and a.alpha == b.alpha and a.beta == b.beta
    c = S.optimal_value_matrix(TM, MK, options={"dense": False})
    d = S.optimal_value_matrix(TM, MK, options=ValueOptions(dense=False))
    assert (c.x.A, c.x.B0, c.x.gamma) == (d.x.A, d.x.B0, d.x.gamma)


def test_paper_model_numbers_are_unchanged():
    """Pinned values of the paper model's routes (T = v = 10, tau = 3, masking 0.15 / 0.1 / 0.1)."""
    tm, mk = TopicModel(T=10, v=10, tau=3), tc.Masking(0.15, 0.1, 0.1)
    res = S.optimal_attention(tm, mk, value="block")
    assert res.status == 0 and abs(res.K - 70.05) < 0.01 and abs(res.fun - 0.961770) < 1e-6
    W = S.optimal_value_matrix(tm, mk, options={"dense": False}).x
    assert (W.A, W.B0, W.gamma) == S.value_block_constants(tm, mk)[:3]


# ----------------------------------------------------------------------------- layout rules
def _solver_sources():
    return sorted(SOLVERS_DIR.rglob("*.py"))


def test_no_type_switch_on_the_model_in_solvers():
    for path in _solver_sources():
        text = path.read_text()
        assert "is_general(" not in text, path
        for name in ("tm", "g", "model"):
            for cls in ("TopicModel", "GeneralTopicModel"):
                assert f"isinstance({name}, {cls})" not in text, path


def test_no_package_internal_import_inside_functions_in_solvers():
    for path in _solver_sources():
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (
                    node.level > 0 or (node.module or "").startswith("theorycheck")
                ):
                    pytest.fail(f"{path.name}:{node.lineno}: import inside {fn.name}")
                if isinstance(node, ast.Import):
                    pytest.fail(f"{path.name}:{node.lineno}: import inside {fn.name}")


def test_modules_stay_under_800_lines():
    for path in _solver_sources():
        assert len(path.read_text().splitlines()) <= 800 or path in GENERATED, path


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(SOLVERS_DIR.parent.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_solvers_import_graph_has_no_cycle():
    """Module-level imports between ``theorycheck.solvers`` modules form a DAG (a package's
    ``__init__`` counts as the package)."""
    graph = {}
    for path in _solver_sources():
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            deps |= {t for t in targets if t.startswith("theorycheck.solvers") and t != name}
        graph[name] = deps
    state = {}

    def visit(n, stack):
        if state.get(n) == "done" or n not in graph:
            return
        assert state.get(n) != "active", " -> ".join([*stack, n])
        state[n] = "active"
        for m in graph[n]:
            visit(m, [*stack, n])
        state[n] = "done"

    for n in graph:
        visit(n, [])
