"""Issue #13 item 1: every public function that takes a topic model takes a ``GeneralTopicModel``.

One table (:data:`TABLE`) lists every public function or class of the facades that takes a topic
model (``tm`` / ``g``), with how it treats a general model (SPEC §11):

- ``"same"``: it works, and for the paper's model passed through the general path
  (``GeneralTopicModel.from_topic_model(tm)``) it returns the symmetric path's numbers to 1e-12; it
  also runs on an overlapping model with finite output;
- ``"property"``: it works (general-only or not comparable with a symmetric counterpart) and an
  independent property of its output is checked;
- ``"refuses"``: symmetric-only by nature (closed forms of the disjoint, equal, uniform topics); it
  raises ``TypeError`` saying it needs the symmetric ``TopicModel`` and naming the general alternative.

``status`` records the audit (``"works"``, ``"refuses"``, or ``"fixed"`` where this audit made it
work or refuse clearly). :func:`test_every_public_function_taking_a_model_is_in_the_table` walks the
facades' ``__all__`` (and the public methods of exported classes) so that a new public function that
takes a model must be added here, i.e. must either work or refuse clearly.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass

import numpy as np
import pytest

import theorycheck as tc
from theorycheck import sampling
from theorycheck.analysis import dynamics, landscape, stats
from theorycheck.analysis import topic_structure as ts
from theorycheck.models import token_topic
from theorycheck.nn import probes
from theorycheck.nn.config import DataConfig
from theorycheck.report.landscape import write_landscape
from theorycheck.sampling import finite_exact, montecarlo

GM = tc.GeneralTopicModel
P, S = tc.population, tc.solvers
MK = tc.Masking(p_m=0.3, p_c=0.1, p_r=0.2)  # p_c != p_r
G_OVERLAP = GM.overlapping(3, 2, eps=0.2, tau=2)
SYMMETRIC = {
    "T3v2tau2": tc.TopicModel(T=3, v=2, tau=2),
    "T4v1tau1": tc.TopicModel(T=4, v=1, tau=1),
    "T3v2dir": tc.TopicModel(T=3, v=2, prior="dirichlet", alpha=0.7),
}


def _rand(shape, salt: int, scale: float = 0.4) -> np.ndarray:
    return scale * np.random.default_rng([shape[0], shape[-1], salt]).standard_normal(shape)


def _W(m):
    return _rand((m.V1, m.V1), 1)


def _S(m):
    return _rand((m.V1, m.V1), 2)


def _WE(m):
    return _rand((3, m.V1), 3)


def _set_or_theta(m):
    if m.prior == "uniform-tau":
        return {"topics": list(range(m.tau))}
    return {"theta": np.arange(1.0, m.T + 1) / (m.T * (m.T + 1) / 2)}


def _or_empty_class(call):
    """``call()``, or ``None`` when a pair class is empty (v = 1: no same-topic pair of distinct words)."""
    try:
        return call()
    except ValueError as exc:
        assert "class is empty" in str(exc)
        return None


def _flat(x) -> list:
    """Numbers of a result, in a fixed order (arrays, scalars, tuples, dataclasses, SolveResult)."""
    if isinstance(x, S.SolveResult):
        return [np.asarray(x.fun, dtype=float), *_flat(np.asarray(x.x, dtype=float))]
    if is_dataclass(x):
        return [v for f in fields(x) if not f.name.startswith("_") for v in _flat(getattr(x, f.name))]
    if isinstance(x, tuple | list):
        return [v for item in x for v in _flat(item)]
    if x is None:
        return []
    return [np.asarray(x, dtype=float)]


# ----------------------------------------------------------------------------- property checks
def _check_sample(docs, g, mk):
    assert docs.tokens.shape == (5, 7) and docs.tokens.min() >= 1 and docs.tokens.max() <= g.n_words
    gp = GM.from_topic_model(tc.TopicModel(T=4, v=2, tau=1))  # tau = 1: a document stays in its one topic
    d = sampling.sample_documents(gp, 20, 6, seed=1)
    z = token_topic(d.tokens, 2)
    assert np.all(z == z[:, :1])


def _check_mask(batch, g, mk):
    docs = sampling.sample_documents(g, 5, 7, seed=0)
    sel = batch.selected
    np.testing.assert_array_equal(batch.inputs[~sel], docs.tokens[~sel])
    np.testing.assert_array_equal(batch.targets[sel], docs.tokens[sel])


def _check_mc(est, g, mk):
    exact = P.attention_loss(_S(g), _W(g), g, mk)
    assert est.stderr > 0 and abs(est.mean - exact) < 5 * est.stderr + 2.0 / 40, (est, exact)


def _check_estimate(est, g, mk):
    assert est.exact and est.stderr == 0.0
    assert est.value == pytest.approx(P.attention_loss(_S(g), _W(g), g, mk), abs=1e-12)


def _check_optimal_attention(res, g, mk):
    assert res.status == 0, res.message
    Sopt, W = res.info["S"], res.info["W"]  # x: the family's coefficients (alpha, beta)
    np.testing.assert_allclose(W, S.stage1_value_matrix(g, mk), atol=1e-12)
    np.testing.assert_allclose(Sopt, landscape.family_scores(*res.x, S.cotopic_matrix(g)), atol=1e-12)
    assert res.fun == pytest.approx(P.attention_loss(Sopt, W, g, mk), abs=1e-12)
    assert res.fun <= P.attention_loss(np.zeros((g.V1, g.V1)), W, g, mk) + 1e-12


def _check_cotopic(G, g, mk):
    np.testing.assert_allclose(G, G.T, atol=0)
    np.testing.assert_allclose(np.diag(G)[1:], 1.0, atol=1e-12)
    gp = GM.from_topic_model(tc.TopicModel(T=3, v=2, tau=2))
    z = token_topic(np.arange(1, gp.V1), 2)
    np.testing.assert_allclose(S.cotopic_matrix(gp)[1:, 1:], (z[:, None] == z[None, :]).astype(float), atol=1e-15)


def _check_stage1_value(W, g, mk):
    np.testing.assert_allclose(W, probes.stage1_reference(g, mk), atol=1e-10)
    assert P.value_loss(W, g, mk) <= P.value_loss(W + _rand(W.shape, 9, 1e-3), g, mk)


def _check_min_dim(d, g, mk):
    assert d == g.T  # phi of rank T: every minimiser has G m_theta = p_theta
    assert S.min_embedding_dim(g, mk, bias=True) == g.T - 1
    flat = GM.overlapping(3, 2, eps=1.0, tau=2)  # identical topics: one document law
    assert S.min_embedding_dim(flat, mk) == 1 and S.min_embedding_dim(flat, mk, bias=True) == 0


def _check_word_topics(z, g, mk):
    np.testing.assert_array_equal(z, g.dominant_topic())
    gp = GM.from_topic_model(tc.TopicModel(T=3, v=2, tau=2))
    np.testing.assert_array_equal(ts.word_topics(gp), token_topic(np.arange(1, gp.V1), 2))


def _block(g, same=1.0):
    z = ts.word_topics(g)
    M = np.zeros((g.V1, g.V1))
    M[1:, 1:] = same * (z[:, None] == z[None, :])
    return M


def _check_gap(gap, g, mk):
    assert gap == pytest.approx(0.0, abs=1e-15)  # computed on a constant matrix
    assert ts.topic_gap(_block(g, 2.5), g) == pytest.approx(2.5, abs=1e-12)


def _check_stats(st, g, mk):
    assert st.gap == pytest.approx(2.5, abs=1e-12) and st.correlation == pytest.approx(1.0, abs=1e-12)
    assert st.energy == pytest.approx(1.0, abs=1e-12)


def _check_preference(pref, g, mk):
    assert pref == pytest.approx(0.0, abs=1e-12)  # uniform attention (S = 0) prefers nothing
    assert ts.attention_preference(_block(g, 2.0), g, mk) > 0


def _check_preference_terms(terms, g, mk):
    weights, differences = terms  # S = 0: kappa = 1 for every key, so no difference
    np.testing.assert_allclose(differences, 0.0, atol=1e-12)
    assert weights.sum() == pytest.approx(mk.p_c + mk.p_r, abs=1e-12)  # word queries: kept or replaced


def _check_grid(grid, g, mk):
    W = landscape.general_value_matrix(g, mk, grid.value)
    G = S.cotopic_matrix(g)
    for i, j in [(0, 0), (2, 1)]:
        Sij = landscape.family_scores(grid.alpha[i], grid.beta[j], G)
        assert grid.L[i, j] == pytest.approx(P.attention_loss(Sij, W, g, mk), abs=1e-12)


def _check_gap_curve(out, g, mk):
    np.testing.assert_allclose(out["gap"], out["mc"] - out["exact"], atol=1e-15)
    assert out["exact"] == pytest.approx(P.attention_loss(_S(g), _W(g), g, mk), abs=1e-12)


def _check_landscape(info, g, mk, tmp_path):
    assert (tmp_path / "out" / "grid.npz").exists() and info["model"]["general"] is True
    opt = json.loads((tmp_path / "out" / "optimum.json").read_text())
    W, G = S.stage1_value_matrix(g, mk), S.cotopic_matrix(g)
    grid_best = P.attention_loss(landscape.family_scores(opt["alpha"], opt["beta"], G), W, g, mk)
    assert opt["loss"] == pytest.approx(grid_best, abs=1e-12)
    assert opt["loss_uniform"] == pytest.approx(P.attention_loss(np.zeros_like(W), W, g, mk), abs=1e-12)
    assert opt["solver"]["loss"] <= min(opt["loss"], opt["loss_uniform"]) + 1e-12


def _population_batch_ref(g, mk):
    """Contexts and query groups straight from SPEC §11.1, by loops (independent of the package): topic set
    ``S`` -> key density ``m = a p_S + r u + q e_0``; query [MASK] -> ``p_mask p_S``, query word ``w`` ->
    ``(p_r / n) p_S + p_c p_S(w) e_w``, all over ``C(T, tau)``; zero-weight groups dropped."""
    Phi, n = g.topic_token_matrix(), g.n_words
    sets = list(itertools.combinations(range(g.T), g.tau))
    K, ctx, qtok, Y = [], [], [], []
    for c, topics in enumerate(sets):
        p = Phi[list(topics)].sum(axis=0) / len(topics)
        K.append(mk.a * p + np.concatenate([[mk.q], np.full(n, mk.r / n)]))
        for x in range(g.V1):
            y = (1.0 - mk.p_c - mk.p_r) * p if x == 0 else (mk.p_r / n) * p
            if x > 0:
                y[x] += mk.p_c * p[x]
            if y.sum() > 0:
                ctx.append(c), qtok.append(x), Y.append(y / len(sets))
    Y = np.array(Y)
    return {"K": np.array(K), "ctx": np.array(ctx), "qtok": np.array(qtok), "weight": Y.sum(axis=1), "Y": Y}


def _check_population_batch(b, g, mk):
    ref = _population_batch_ref(g, mk)
    for name in ("K", "ctx", "qtok", "weight", "Y"):
        np.testing.assert_allclose(getattr(b, name), ref[name], atol=1e-15)
    # the batch's total target weight is the masked fraction's: every selected position counted once
    assert b.weight.sum() == pytest.approx(1.0, abs=1e-12)


def _check_references(refs, g, mk):
    np.testing.assert_allclose(refs.W_V, S.stage1_value_matrix(g, mk), atol=1e-10)
    assert refs.K_star() is None  # K* belongs to the symmetric (alpha, beta) family


def _check_data_config(d, g, mk):
    assert d.topic_model() == g and d.masking() == mk and d.V1 == g.V1


# ----------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Entry:
    name: str  # module-qualified public name
    kind: str  # "same" | "property" | "refuses"
    status: str  # "works" | "refuses" | "fixed"
    call: Callable  # call(model, mk) (property checks with tmp_path get it as a third argument)
    check: Callable | None = None  # property(result, g, mk)
    alternative: str = ""  # a name the refusal message must contain
    uniform_only: bool = False  # "same" compared only on uniform-tau models


def _same(name, call, status="works", uniform_only=False):
    return Entry(name, "same", status, call, uniform_only=uniform_only)


def _prop(name, call, check, status="works"):
    return Entry(name, "property", status, call, check)


def _refuses(name, call, alternative, status="fixed"):
    return Entry(name, "refuses", status, call, alternative=alternative)


_ZERO = lambda m: np.zeros((m.V1, m.V1))  # noqa: E731

TABLE = [
    # population
    _same("population.masked_density", lambda m, mk: P.masked_density(m, mk, **_set_or_theta(m))),
    _same("population.topic_density", lambda m, mk: P.topic_density(m, **_set_or_theta(m))),
    _same("population.topic_sets", lambda m, mk: P.topic_sets(m), uniform_only=True),
    _same("population.expected_pp", lambda m, mk: P.expected_pp(m)),
    _same("population.moments", lambda m, mk: P.moments(m, mk)),
    _same("population.value_loss", lambda m, mk: P.value_loss(_W(m), m, mk)),
    _same("population.value_loss_grad", lambda m, mk: P.value_loss_grad(_W(m), m, mk)),
    _same("population.attention_loss", lambda m, mk: P.attention_loss(_S(m), _W(m), m, mk), uniform_only=True),
    _same(
        "population.attention_loss_grad",
        lambda m, mk: P.attention_loss_grad(_S(m), _W(m), m, mk, loss="ce"),
        uniform_only=True,
    ),
    _prop(
        "population.attention_loss_estimate",
        lambda m, mk: P.attention_loss_estimate(_S(m), _W(m), m, mk),
        _check_estimate,
    ),
    _same(
        "population.family_attention_loss",
        lambda m, mk: P.family_attention_loss(1.0, 0.5, _W(m), m, mk, grad=True),
        uniform_only=True,
    ),
    _same("population.embedding_loss", lambda m, mk: P.embedding_loss(_WE(m), m, mk)),
    _same("population.embedding_loss_grad", lambda m, mk: P.embedding_loss_grad(_WE(m), m, mk)),
    _same(
        "population.population_contexts", lambda m, mk: P.population_contexts(m, mk), status="fixed", uniform_only=True
    ),
    _refuses("population.alpha_beta_loss", lambda m, mk: P.alpha_beta_loss(1.0, 0.5, m, mk), "family_scores"),
    _refuses("population.alpha_beta_loss_logK", lambda m, mk: P.alpha_beta_loss_logK(1.0, m, mk), "alpha_beta_grid"),
    _refuses(
        "population.alpha_beta_score_matrix", lambda m, mk: P.alpha_beta_score_matrix(1.0, 0.5, m), "cotopic_matrix"
    ),
    _refuses(
        "population.alpha_beta_value_matrix", lambda m, mk: P.alpha_beta_value_matrix(m, mk), "stage1_value_matrix"
    ),
    _refuses("population.alpha_beta_ce_loss", lambda m, mk: P.alpha_beta_ce_loss(1.0, 0.5, m, mk), "attention_loss"),
    _refuses(
        "population.stage1_block_constants", lambda m, mk: P.stage1_block_constants(m, mk), "optimal_value_matrix"
    ),
    _refuses(
        "population.symmetric_attention_loss",
        lambda m, mk: P.symmetric_attention_loss(None, None, m, mk),
        "attention_loss",
    ),
    _refuses(
        "population.alpha_beta_symmetric_loss",
        lambda m, mk: P.alpha_beta_symmetric_loss(1.0, 0.5, m, mk),
        "attention_loss",
    ),
    # solvers
    _same("solvers.optimal_value_matrix", lambda m, mk: S.optimal_value_matrix(m, mk)),
    _same("solvers.optimal_embedding_gram", lambda m, mk: S.optimal_embedding_gram(m, mk)),
    _prop("solvers.optimal_attention", lambda m, mk: S.optimal_attention(m, mk), _check_optimal_attention),
    _prop("solvers.cotopic_matrix", lambda m, mk: S.cotopic_matrix(m), _check_cotopic),
    _prop("solvers.stage1_value_matrix", lambda m, mk: S.stage1_value_matrix(m, mk), _check_stage1_value),
    _same("solvers.min_embedding_dim", lambda m, mk: S.min_embedding_dim(m, mk), status="fixed", uniform_only=True),
    _refuses("solvers.closed_form_gram", lambda m, mk: S.closed_form_gram(m, mk), "optimal_embedding_gram"),
    _refuses(
        "solvers.embedding_minimiser_violation",
        lambda m, mk: S.embedding_minimiser_violation(_WE(m), m, mk),
        "optimal_embedding_gram",
    ),
    _refuses(
        "solvers.identifiable_part", lambda m, mk: S.identifiable_part(np.eye(m.V1), m, mk), "optimal_embedding_gram"
    ),
    _refuses("solvers.minimiser_violation", lambda m, mk: S.minimiser_violation(_W(m), m, mk), "value_loss_grad"),
    _refuses("solvers.value_block_constants", lambda m, mk: S.value_block_constants(m, mk), "optimal_value_matrix"),
    # sampling, Monte Carlo, finite N
    _prop("sampling.sample_documents", lambda m, mk: sampling.sample_documents(m, 5, 7, seed=0), _check_sample),
    _prop(
        "sampling.mask_documents",
        lambda m, mk: sampling.mask_documents(sampling.sample_documents(m, 5, 7, seed=0), m, mk, seed=0),
        _check_mask,
    ),
    _same("sampling.check_sample_size", lambda m, mk: sampling.check_sample_size("docs", m, 5, 7)),
    _prop(
        "montecarlo.mc_attention_loss",
        lambda m, mk: montecarlo.mc_attention_loss(_S(m), _W(m), m, mk, N=40, n_docs=3000, seed=0),
        _check_mc,
    ),
    _refuses(
        "finite_exact.exact_finite_loss",
        lambda m, mk: finite_exact.exact_finite_loss(_S(m), _W(m), m, mk, 2),
        "mc_attention_loss",
    ),
    # analysis
    _prop("analysis.topic_structure.word_topics", lambda m, mk: ts.word_topics(m), _check_word_topics),
    _prop("analysis.topic_structure.topic_gap", lambda m, mk: ts.topic_gap(np.ones((m.V1, m.V1)), m), _check_gap),
    _prop(
        "analysis.topic_structure.matrix_topic_stats",
        lambda m, mk: ts.matrix_topic_stats(_block(m, 2.5), m),
        _check_stats,
    ),
    _prop(
        "analysis.topic_structure.attention_preference",
        lambda m, mk: ts.attention_preference(_ZERO(m), m, mk),
        _check_preference,
    ),
    _prop(
        "analysis.topic_structure.attention_preference_terms",
        lambda m, mk: ts.attention_preference_terms(_ZERO(m), m, mk),
        _check_preference_terms,
    ),
    _same(
        "analysis.stats.embedding_topic_stats",
        lambda m, mk: _or_empty_class(lambda: stats.embedding_topic_stats(_WE(m), m)),
        status="fixed",
    ),
    _same("analysis.stats.topic_block_sums", lambda m, mk: stats.topic_block_sums(_WE(m), m), status="fixed"),
    _same(
        "analysis.stats.own_minus_other_block_sums",
        lambda m, mk: stats.own_minus_other_block_sums(_WE(m), m),
        status="fixed",
    ),
    _refuses("analysis.dynamics.stage2_onset", lambda m, mk: dynamics.stage2_onset(m, mk), "attention_loss_grad"),
    _refuses("analysis.dynamics.topic_contrast_basis", lambda m, mk: dynamics.topic_contrast_basis(m), "word_topics"),
    _prop(
        "analysis.landscape.alpha_beta_grid",
        lambda m, mk: landscape.alpha_beta_grid(m, mk, alpha=(-1.0, 1.0, 3), beta=(-1.0, 1.0, 3)),
        _check_grid,
    ),
    _refuses(
        "analysis.landscape.K_curve", lambda m, mk: landscape.K_curve(m, mk, logK=(0.0, 1.0, 3)), "alpha_beta_grid"
    ),
    _prop(
        "analysis.landscape.finite_n_gap",
        lambda m, mk: landscape.finite_n_gap(_S(m), _W(m), m, mk, [4], n_docs=200),
        _check_gap_curve,
    ),
    _prop(
        "analysis.landscape.landscape_data",
        lambda m, mk, tmp: write_landscape(m, mk, tmp / "out", n_grid=3),  # landscape_data, written to files
        _check_landscape,
    ),
    # nn
    _prop("nn.population_batch", lambda m, mk: tc.nn.population_batch(m, mk), _check_population_batch, "fixed"),
    _same("nn.stage1_reference", lambda m, mk: tc.nn.stage1_reference(m, mk)),
    _prop(
        "nn.probes.References",
        lambda m, mk: probes.References(_stage1_cfg(m, mk), m, mk),
        _check_references,
        "fixed",
    ),
    _prop("nn.DataConfig.from_model", lambda m, mk: DataConfig.from_model(m, mk), _check_data_config),
]

#: public names that take something called ``g``/``tm`` that is not a topic model, or that only
#: carry one built elsewhere (each with the reason and where it is exercised)
NOT_MODEL_TAKERS = {
    "solvers.MinimiserViolation": "g is the fitted vector of the symmetric identities, not a model",
    "nn.ProbeContext": "a record the Trainer builds, for any model (tests/test_general_training.py)",
    "nn.probes.ProbeContext": "as nn.ProbeContext",
    "models.check_models": "the symmetric-only validator itself (its message names the general alternatives)",
    "models.require_symmetric": "the refusal helper itself",
    "models.GeneralTopicModel.from_topic_model": "a constructor copying any model's phi and law "
    "(tests/test_general_model.py)",
}


def _stage1_cfg(m, mk):
    from theorycheck.nn import ModelConfig, TrainConfig

    mc = ModelConfig(V1=m.V1, attention="softmax", train=("W_K", "W_Q"), loss="squared")
    return TrainConfig(data=DataConfig.from_model(m, mk), model=mc, init_W_V="stage1-optimum", steps=2)


_BY_NAME = {e.name: e for e in TABLE}


def _run(e: Entry, m, mk, tmp_path):
    return e.call(m, mk, tmp_path) if len(inspect.signature(e.call).parameters) == 3 else e.call(m, mk)


# ----------------------------------------------------------------------------- tests
def test_table_names_are_unique_and_kinds_valid():
    assert len(_BY_NAME) == len(TABLE)
    for e in TABLE:
        assert e.kind in ("same", "property", "refuses") and e.status in ("works", "refuses", "fixed"), e
        assert (e.kind == "refuses") == bool(e.alternative), e
        assert (e.kind == "property") == (e.check is not None), e


@pytest.mark.parametrize("entry", [e for e in TABLE if e.kind == "same"], ids=lambda e: e.name)
@pytest.mark.parametrize("key", list(SYMMETRIC))
def test_general_path_equals_symmetric_path(entry, key, tmp_path):
    tm = SYMMETRIC[key]
    if entry.uniform_only and tm.prior != "uniform-tau":
        pytest.skip("uniform-tau law only (a finite mixture of topic sets)")
    want = _flat(_run(entry, tm, MK, tmp_path))
    got = _flat(_run(entry, GM.from_topic_model(tm), MK, tmp_path))
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("entry", [e for e in TABLE if e.kind == "same"], ids=lambda e: e.name)
def test_same_entries_run_on_an_overlapping_model(entry, tmp_path):
    out = _flat(_run(entry, G_OVERLAP, MK, tmp_path))
    assert out and all(np.all(np.isfinite(a)) for a in out)


@pytest.mark.parametrize("entry", [e for e in TABLE if e.kind == "property"], ids=lambda e: e.name)
def test_general_property(entry, tmp_path):
    res = _run(entry, G_OVERLAP, MK, tmp_path)
    if len(inspect.signature(entry.check).parameters) == 4:
        entry.check(res, G_OVERLAP, MK, tmp_path)
    else:
        entry.check(res, G_OVERLAP, MK)


@pytest.mark.parametrize("entry", [e for e in TABLE if e.kind == "refuses"], ids=lambda e: e.name)
def test_symmetric_only_refuses_with_the_general_alternative(entry, tmp_path):
    fn = entry.name.rsplit(".", 1)[1]
    with pytest.raises(TypeError) as info:
        _run(entry, G_OVERLAP, MK, tmp_path)
    msg = str(info.value)
    assert "symmetric TopicModel" in msg and fn in msg and entry.alternative in msg, msg
    assert "SPEC §11" in msg
    # and it still works on the paper's model (the refusal is only for general models)
    if fn not in ("symmetric_attention_loss",):  # needs score/value callables, exercised elsewhere
        _run(entry, SYMMETRIC["T3v2tau2"], MK, tmp_path)


# ----------------------------------------------------------------------------- completeness
FACADES = {
    "population": tc.population,
    "solvers": tc.solvers,
    "sampling": sampling,
    "montecarlo": montecarlo,
    "finite_exact": finite_exact,
    "analysis": tc.analysis,
    "analysis.stats": stats,
    "analysis.dynamics": dynamics,
    "analysis.landscape": landscape,
    "analysis.phase": tc.analysis.phase,
    "analysis.topic_structure": ts,
    "nn": tc.nn,
    "nn.probes": probes,
    "diagnostics": __import__("theorycheck.diagnostics", fromlist=["x"]),
    "models": tc.models,
}
_MODEL_PARAMS = ("tm", "g")


def _takes_model(obj) -> bool:
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name in _MODEL_PARAMS or "TopicModel" in str(p.annotation) for p in params)


def _public_model_takers() -> dict:
    """``{qualified name: object}`` of every public callable of the facades taking a topic model."""
    found = {}
    for prefix, mod in FACADES.items():
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not callable(obj):
                continue
            if _takes_model(obj):
                found[f"{prefix}.{name}"] = obj
            if inspect.isclass(obj):
                for meth, attr in vars(obj).items():
                    if not meth.startswith("_") and isinstance(attr, classmethod | staticmethod):
                        if _takes_model(getattr(obj, meth)):
                            found[f"{prefix}.{name}.{meth}"] = getattr(obj, meth)
    return found


def _resolve(name: str):
    """The object a table name refers to (longest facade prefix, then attributes)."""
    prefix = max((p for p in FACADES if name.startswith(p + ".")), key=len)
    obj = FACADES[prefix]
    for part in name[len(prefix) + 1 :].split("."):
        obj = getattr(obj, part)
    return getattr(obj, "__func__", obj)


def _listed() -> set[int]:
    return {id(_resolve(n)) for n in [*_BY_NAME, *NOT_MODEL_TAKERS]}


def test_every_public_function_taking_a_model_is_in_the_table():
    takers = _public_model_takers()
    assert len(takers) > 40, "the walk found too few functions: did the facades change?"
    listed = _listed()
    missing = sorted(n for n, obj in takers.items() if id(getattr(obj, "__func__", obj)) not in listed)
    assert not missing, (
        "public functions taking a topic model without an entry in tests/test_general_api.py TABLE "
        "(make each work on a GeneralTopicModel or refuse it with models.require_symmetric): " + ", ".join(missing)
    )


def test_every_table_entry_is_a_public_model_taker():
    takers = {id(getattr(o, "__func__", o)) for o in _public_model_takers().values()}
    for name in [*_BY_NAME, *NOT_MODEL_TAKERS]:
        assert id(_resolve(name)) in takers, name


# ----------------------------------------------------------------------------- training probes
LAYOUT_PROBES = ("value_structure", "embedding_structure", "effective_K", "attention_classes")


def _general_probe_context():
    from theorycheck.nn import ModelConfig, TrainConfig, Trainer

    mc = ModelConfig(V1=G_OVERLAP.V1, attention="softmax", loss="squared")
    cfg = TrainConfig(data=DataConfig.from_model(G_OVERLAP, MK, source="population"), model=mc, steps=2)
    tr = Trainer(cfg, progress=False)
    return tr, probes.ProbeContext(0, 1.0, 0.01, True, cfg, tr.tm, tr.mk, tr.stream, tr.refs)


def test_probes_run_on_a_general_run_by_dominant_topics():
    """The built-in probes read topics from ``ctx.tm.token_topics()`` (dominant topics for a general
    model, SPEC §11.1), never the (T, v) layout of ``cfg.data.v``; the Trainer uses them for every model."""
    tr, ctx = _general_probe_context()
    labels = tr.tm.token_topics()
    assert tr.probes == list(probes.DEFAULT_PROBES)
    for name in LAYOUT_PROBES:
        rec = getattr(probes, name)(tr.model, ctx)
        assert all(k.split("_")[0] in ("block", "attn", "topic", "dist") for k in rec), (name, rec)
    S = tr.model.score_matrix()
    assert probes.effective_K(tr.model, ctx) == {
        "topic_attention_ratio_median": float(np.median(ts.topic_attention_ratio(S, labels)))
    }
    assert probes.norms(tr.model, ctx)["norm_W_V"] >= 0.0
