"""dynamics.py: the linearised stage-2 onset.

- closed form ``sigma_max = -L'(log v) / (v (T-1))`` == top singular value of the dense population
  gradient ``dL/dS`` at ``S = 0`` (hypothesis over T, v, tau, masking);
- the singular subspace is the topic-contrast span, of dimension T - 1;
- one SGD step of the *model* (its own hand-written backward, on the exact population batch)
  from K, Q placed in the top mode multiplies ||W_K^T W_Q|| by the predicted factor;
- the dense ``G`` against directional differences of the exact population loss;
- bad input.
"""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings

import theorycheck as tc
from proofs_numeric import _spec_route
from theorycheck.analysis.dynamics import stage2_onset, topic_contrast_basis
from theorycheck.diagnostics import check_gradient
from theorycheck.nn import ModelConfig, Transformer, population_batch
from theorycheck.population import attention_loss
from theorycheck.strategies import maskings, topic_models


@settings(max_examples=25)
@given(topic_models(min_T=2, max_T=5, max_v=4), maskings(min_p_m=0.05))
@example(tc.TopicModel(T=3, v=1, tau=2), tc.Masking(p_m=0.5, p_c=1e-11, p_r=0.0))  # sigma ~ 2.5e-12, not 0
@example(tc.TopicModel(T=3, v=1, tau=2), tc.Masking(p_m=0.5, p_c=7.3108e-09, p_r=0.0))  # sigma ~ 1.8e-9
@example(tc.TopicModel(T=3, v=3, tau=2), tc.Masking(p_m=0.7734375, p_c=1e-08, p_r=0.0))  # noise 1.1e-15
@example(tc.TopicModel(T=3, v=1, tau=2), tc.Masking(p_m=0.5, p_c=1e-08, p_r=0.75))  # dense multiplicity 1
def test_closed_form_equals_dense_svd(tm, mk):
    cf = stage2_onset(tm, mk, method="closed-form")
    de = stage2_onset(tm, mk, method="dense")
    assert math.isfinite(cf.sigma_max) and cf.sigma_max >= 0
    assert cf.sigma_max == pytest.approx(de.sigma_max, rel=1e-8, abs=1e-13)
    if 1 < tm.tau < tm.T and de.sigma_max > 1e-10:
        # the T-th singular value is round-off: relative to sigma_max, with an absolute floor of the dense
        # gradient's own noise for tiny sigma_max (p_c ~ 1e-8; 1.1e-15 seen at T = v = 3, tau = 2)
        assert de.singular_values[tm.T - 1] < 1e-10 * de.sigma_max + 1e-14
    if 1 < tm.tau < tm.T and de.sigma_max > 1e-5:
        # rank T - 1, along the topic-contrast vectors only. The dense multiplicity counts singular values
        # within 1e-9 sigma_max: resolvable only when the ~1e-15 noise is below that (hypothesis's random
        # profile drew sigma_max ~ 3e-10 at p_c = 1e-8, where the dense SVD splits the double value)
        assert de.multiplicity == tm.T - 1 == cf.multiplicity
        assert de.topic_alignment == pytest.approx(1.0, abs=1e-9)
    if 1 < tm.tau < tm.T and cf.sigma_max > 0:
        assert cf.multiplicity == tm.T - 1  # the closed form's multiplicity is exact at any sigma_max
    if tm.tau in (1, tm.T):
        assert cf.sigma_max == 0.0 and de.sigma_max == 0.0 and cf.multiplicity == 0


def test_paper_configuration_gradient_pattern(tm_paper, mk_spec):
    """T = v = 10, tau = 3: G's word block is -gamma (B - J/T), zero [MASK] row/column (module docstring)."""
    tm, mk = tm_paper, mk_spec
    de = stage2_onset(tm, mk, method="dense")
    G = de.G
    gamma = de.sigma_max / tm.v
    topic = tm.topic_of(np.arange(1, tm.V1))
    B = (topic[:, None] == topic[None, :]).astype(float)
    np.testing.assert_allclose(G[1:, 1:], -gamma * (B - 1.0 / tm.T), atol=1e-12 * gamma * 1e3, rtol=0)
    assert np.abs(G[0]).max() < 1e-15 and np.abs(G[:, 0]).max() < 1e-15
    assert de.multiplicity == 9
    # SPEC §4.5 item 3 by the independent mpmath route (not a number this code printed): 4.963962035e-5
    route = float(_spec_route.sigma_max(_spec_route.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)))
    assert stage2_onset(tm, mk).sigma_max == pytest.approx(route, rel=1e-9)


def test_dense_G_is_the_score_gradient_of_the_population_loss(tm_small, mk_spec):
    """``G`` of the dense method against directional differences of the exact loss at ``S = 0``."""
    de = stage2_onset(tm_small, mk_spec, method="dense")
    W_V = tc.solvers.optimal_value_matrix(tm_small, mk_spec).x

    def f(S):
        return attention_loss(S, W_V, tm_small, mk_spec)

    check_gradient(f, np.zeros((tm_small.V1, tm_small.V1)), de.G, h=1e-3, rtol=1e-6, atol=1e-12).assert_ok()


def test_old_loss_name_is_rejected(tm_small, mk_spec):
    with pytest.raises(ValueError, match="loss"):
        stage2_onset(tm_small, mk_spec, loss="sq")


def test_topic_contrast_basis(tm_small):
    tm = tm_small
    P = topic_contrast_basis(tm)
    assert P.shape == (tm.V1, 3)
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-14)
    assert np.abs(P[0]).max() == 0  # [MASK]
    np.testing.assert_allclose(P[1:].sum(axis=0), 0, atol=1e-14)  # sums to zero over the words
    for t in range(tm.T):  # constant on each topic's words
        blk = P[1 + t * tm.v : 1 + (t + 1) * tm.v]
        np.testing.assert_allclose(blk, np.broadcast_to(blk[0], blk.shape), atol=1e-14)


@pytest.mark.parametrize("reg_frac", [0.0, 0.5, 1.5])
@pytest.mark.parametrize("scale", ["none", "sqrt"])
def test_one_model_step_grows_by_predicted_factor(reg_frac, scale, tm_small, mk_spec):
    """W^V frozen at the stage-1 optimum, (W_Q, W_K) = eps (-z u^T, z v^T) along the top singular
    pair of G: one SGD step of the Transformer on the exact population batch multiplies
    ||W_K^T W_Q|| by (1 + lr (c sigma - 2 reg))^2, up to O(eps^2)."""
    tm, mk = tm_small, mk_spec
    d_a = 3
    c = 1.0 if scale == "none" else 1.0 / math.sqrt(d_a)
    de = stage2_onset(tm, mk, method="dense", score_factor=c)
    reg = reg_frac * de.reg_threshold
    lr = 50.0
    pred = stage2_onset(tm, mk, lr=lr, reg=reg, score_factor=c)
    cfg = ModelConfig(V1=tm.V1, d_a=d_a, train=("W_K", "W_Q"), init="zero", scale=scale, reg=reg)
    model = Transformer(cfg, seed=0)
    lay = model.layers[0]
    lay.params["W_V"][0] = tc.solvers.optimal_value_matrix(tm, mk).x
    eps = 1e-5
    z = np.array([0.6, 0.0, 0.8])
    lay.params["W_Q"][0] = -eps * np.outer(z, de.U[:, 0])
    lay.params["W_K"][0] = eps * np.outer(z, de.Vt[0])
    batch = population_batch(tm, mk)

    def kq():
        return np.linalg.norm(lay.params["W_K"][0].T @ lay.params["W_Q"][0])

    before = kq()
    model.zero_grad()
    model.loss_and_grad(batch)
    for name in ("W_K", "W_Q"):
        lay.params[name] -= lr * lay.grads[name]
    ratio = kq() / before
    assert math.log(ratio) == pytest.approx(pred.growth_per_step, abs=1e-6)
    if reg_frac > 1:
        assert ratio < 1  # the L2 term wins: no stage 2 from a small init
    elif reg_frac < 1:
        assert ratio > 1


def test_steps_to_grow_and_rates():
    tm, mk = tc.TopicModel(T=5, v=4, tau=2), tc.Masking()
    r = stage2_onset(tm, mk, lr=5.0)
    assert r.rate == pytest.approx(2 * r.sigma_max)
    assert r.steps_to_grow(10.0) == pytest.approx(math.log(10.0) / (2 * math.log1p(5.0 * r.sigma_max)))
    assert r.reg_threshold == pytest.approx(r.sigma_max / 2)
    above = stage2_onset(tm, mk, lr=5.0, reg=2 * r.reg_threshold)
    assert above.rate < 0 and above.steps_to_grow(10.0) == math.inf
    with pytest.raises(ValueError, match="needs lr"):
        stage2_onset(tm, mk).steps_to_grow(10.0)
    with pytest.raises(ValueError, match="factor"):
        r.steps_to_grow(0.5)


def test_bad_input(tm_small, mk_spec):
    tm, mk = tm_small, mk_spec
    with pytest.raises(ValueError, match="method"):
        stage2_onset(tm, mk, method="svd")
    with pytest.raises(ValueError, match="lr"):
        stage2_onset(tm, mk, lr=0.0)
    with pytest.raises(ValueError, match="reg"):
        stage2_onset(tm, mk, reg=-1.0)
    with pytest.raises(ValueError, match="score_factor"):
        stage2_onset(tm, mk, score_factor=0.0)
    with pytest.raises(ValueError, match="closed-form"):
        stage2_onset(tm, mk, loss="ce")
    with pytest.raises(ValueError, match="loss must be one of"):
        stage2_onset(tm, mk, loss="mse")
    with pytest.raises(ValueError, match="uniform-tau"):
        stage2_onset(tc.TopicModel(T=4, v=3, prior="dirichlet", alpha=0.1), mk)
    with pytest.raises(ValueError, match="T >= 2"):
        stage2_onset(tc.TopicModel(T=1, v=3, tau=1), mk)
    with pytest.raises(ValueError, match="W_V must have shape"):
        stage2_onset(tm, mk, method="dense", W_V=np.eye(3))
