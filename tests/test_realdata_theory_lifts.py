"""The theory's lifts under each definition of the comparison (theorycheck.realdata.theory_lifts, SPEC §11.9).

- the label family's sparse class sums == a brute-force enumeration of ``kappa`` written from the definitions
  (``all_keys``: every word in the normaliser; ``excl_own``: words ``z != x``, weight ``1 - p_x``; ``masked``:
  uniform), and the own-word share likewise;
- the dense route for any score matrix == the label family's sparse route on label scores;
- the closed form of ``excl_own`` == the measurement (:class:`lifts.LiftAccumulator`) of the theory's own
  attention on windows sampled from the model, within the Monte Carlo error and the ``O((e^beta - 1)/n)``
  finite-window bias; ``masked`` is exactly 1; the finite window's ``all_keys`` lift is not the limit's;
- the sub-model keeps each topic's most probable topic tokens, renormalised.

No optional package is needed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel
from theorycheck.realdata import stats as S
from theorycheck.realdata import theory_lifts as TL


def _model(T, n, conc, seed):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n, 0.5), size=T)
    return GeneralTopicModel(phi, prior="dirichlet", alpha=conc)


def _brute(g, alpha, beta, rows, M, theta, definition):
    """Loops over laws, query tokens x, key tokens y, normaliser words z (the definitions, written out)."""
    z = g.dominant_topic()
    n = g.n_words

    def score(x, y):
        return alpha * (x == y) + beta * (z[x] == z[y])

    ids = np.arange(len(rows))
    V = np.zeros((len(rows), M.shape[1]), bool)
    V[ids] = M
    cls = S.pair_classes(ids, V)
    terms, own = np.zeros(4), np.zeros(2)
    for th in theta:
        p = th @ g.phi
        for i, x in enumerate(rows):
            tot = sum(p[w] * np.exp(score(x, w)) for w in range(n))
            excl = sum(p[w] * np.exp(score(x, w)) for w in range(n) if w != x)
            for j, y in enumerate(rows):
                if cls[i, j] not in (1, 2):
                    continue
                if definition == "all_keys":
                    kap = np.exp(score(x, y)) / tot
                elif definition == "excl_own":
                    kap = (1 - p[x]) * np.exp(score(x, y)) / excl
                else:
                    kap = 1.0
                c = 2 * (cls[i, j] - 1)
                terms[c] += p[x] * p[y] * kap
                terms[c + 1] += p[x] * p[y]
            share = p[x] if definition == "masked" else np.exp(alpha + beta) * p[x] / tot
            own += p[x] * share, p[x]
    return terms, own


@settings(max_examples=20, deadline=None)
@given(T=st.integers(2, 4), n=st.integers(4, 10), n_tok=st.integers(2, 8), K=st.integers(1, 3),
       alpha=st.floats(-3.0, 9.0), beta=st.floats(-3.0, 3.0), definition=st.sampled_from(TL.DEFINITIONS),
       seed=st.integers(0, 99))  # fmt: skip
def test_label_family_terms_equal_brute_force(T, n, n_tok, K, alpha, beta, definition, seed):
    g = _model(T, n, 0.3, seed)
    rng = np.random.default_rng(seed + 1)
    rows = rng.choice(n, size=min(n_tok, n), replace=False)
    M = rng.random((rows.size, K)) < 0.5
    M[:, 0] |= ~M.any(axis=1)
    theta = rng.dirichlet(np.full(T, 0.3), size=3)
    bt, bo = _brute(g, alpha, beta, rows, M, theta, definition)
    got = TL.lift_terms(g, alpha, beta, rows, M, theta, definition)
    np.testing.assert_allclose(got.sum(axis=1), bt, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(TL.own_word_terms(g, alpha, beta, rows, theta, definition).sum(axis=1), bo,
                               rtol=1e-10, atol=1e-15)  # fmt: skip
    z = g.dominant_topic()
    Sc = alpha * np.eye(n) + beta * (z[:, None] == z[None, :])
    dt, do = TL.dense_lift_terms(g, Sc, rows, M, theta, definition)
    np.testing.assert_allclose(dt, got, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(do.sum(axis=1), bo, rtol=1e-10, atol=1e-15)


def test_excl_own_does_not_depend_on_alpha_and_masked_is_one():
    g = _model(3, 12, 0.3, 2)
    rows = np.arange(12)
    M = np.zeros((12, 3), bool)
    M[rows, g.dominant_topic()] = True
    theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)
    a = TL.predicted_lifts(g, 1.0, 0.7, rows, M, theta, n_boot=20, rng=np.random.default_rng(0), definition="excl_own")
    b = TL.predicted_lifts(g, 9.0, 0.7, rows, M, theta, n_boot=20, rng=np.random.default_rng(0), definition="excl_own")
    assert a["ratio"] == pytest.approx(b["ratio"], rel=1e-13) and a["ratio"] > 1
    assert b["own_word"] > a["own_word"]  # the removed mass grows with alpha
    m = TL.predicted_lifts(g, 9.0, 0.7, rows, M, theta, n_boot=20, rng=np.random.default_rng(0), definition="masked")
    assert m["same_topic"] == m["different_topic"] == 1.0 and m["gap"] == 0.0 and m["ratio"] == 1.0
    assert m["ratio_ci"] == (1.0, 1.0)
    with pytest.raises(ValueError, match="definition"):
        TL.lift_terms(g, 1.0, 0.7, rows, M, theta, "own")


@pytest.mark.parametrize("beta", [0.05, 0.4])
def test_closed_form_equals_the_measurement_on_sampled_windows(beta):
    """``excl_own``: the closed form (N -> inf) against LiftAccumulator on the theory's own attention over 600
    windows of 200 words; tolerance 4 Monte Carlo standard errors (window bootstrap ⊕ law bootstrap) plus the
    finite-window bias bound ``|e^beta - 1| / length``. ``all_keys`` on those windows also weighs the own position
    by ``e^{alpha + beta}``: far from the limit at ``e^alpha = e^6 ~ 400 > length``."""
    g = _model(4, 40, 0.2, 5)
    rng = np.random.default_rng(1)
    rows = np.sort(rng.choice(40, size=25, replace=False))
    M = np.zeros((25, 4), bool)
    M[np.arange(25), g.dominant_topic()[rows]] = True
    M[:5, 0] = True  # some tokens in two topic sets: classes are not the labels
    alpha, length = 6.0, 200
    theta = rng.dirichlet(g.concentration, size=4000)
    th = TL.predicted_lifts(g, alpha, beta, rows, M, theta, n_boot=200, rng=rng, definition="excl_own")
    win = TL.sampled_window_lifts(g, alpha, beta, rows, {"sets": M}, n_windows=600, length=length, seed=3)
    ex = win.lifts["sets"]["excl_own"]
    se = np.hypot(np.diff(ex["ratio_ci"].ravel())[0], np.diff(th["ratio_ci_laws"])[0]) / (2 * 1.96)
    tol = 4 * se + abs(np.expm1(beta)) / length
    assert abs(ex["ratio"].item() - th["ratio"]) < tol, (ex["ratio"].item(), th["ratio"], tol)
    assert ex["ratio"].item() > 1 and tol < 0.5 * (th["ratio"] - 1)  # the check has power against "no preference"
    al = TL.predicted_lifts(g, alpha, beta, rows, M, theta, n_boot=200, rng=rng, definition="all_keys")
    assert abs(win.lifts["sets"]["all_keys"]["ratio"].item() - al["ratio"]) > 3 * tol
    assert win.own_position.item() + win.own_word.item() > 0.5  # the own word takes most of the attention


def test_sub_model():
    g = _model(3, 30, 0.2, 8)
    rows = np.arange(5, 25)
    M = np.zeros((20, 3), bool)
    M[np.arange(20), np.arange(20) % 3] = True
    gs, rs, Ms = TL.sub_model(g, rows, M, per_topic=3)
    top = {int(rows[k]) for t in range(3) for k in np.argsort(-g.phi[t, rows])[:3]}
    assert gs.n_words == len(top) and np.array_equal(rs, np.arange(len(top)))
    words = np.array(sorted(top))
    np.testing.assert_allclose(gs.phi, g.phi[:, words] / g.phi[:, words].sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(Ms, M[np.searchsorted(rows, words)])
    np.testing.assert_array_equal(gs.concentration, g.concentration)


def test_default_rng_gives_the_same_points_as_a_seeded_one():
    """``rng=None`` (the default) draws from a fresh generator (it raised AttributeError before): the point
    values, which do not depend on the bootstrap, equal those of a seeded call, and the intervals contain them."""
    g = _model(3, 8, 0.4, 5)
    rows = np.array([0, 2, 3, 5, 7])
    M = np.eye(3, dtype=bool)[g.dominant_topic()[rows]]
    theta = np.random.default_rng(1).dirichlet(g.concentration, size=40)
    z = g.dominant_topic()
    Sc = 1.5 * np.eye(8) + 0.7 * (z[:, None] == z[None, :])
    for default, seeded in (
        (TL.predicted_lifts(g, 1.5, 0.7, rows, M, theta), TL.predicted_lifts(g, 1.5, 0.7, rows, M, theta,
                                                                               rng=np.random.default_rng(2))),
        (TL.dense_predicted_lifts(g, Sc, rows, M, theta), TL.dense_predicted_lifts(g, Sc, rows, M, theta,
                                                                                    rng=np.random.default_rng(2))),
    ):  # fmt: skip
        for key in ("same_topic", "different_topic", "gap", "ratio", "own_word"):
            assert default[key] == seeded[key], key
        lo, hi = default["ratio_ci"]
        assert lo <= default["ratio"] <= hi
