"""The theory's attention at the fitted topics beside MiniLM's heads (theorycheck.realdata.attention_theory,
SPEC §11.8-§11.9), and the solver pieces it uses (warm start ``options.x0`` of the family method, the sampling
covariance of the optimum over sampled laws).

- the predicted lifts (sparse class sums, SPEC §11.9) == a dense enumeration of ``kappa_theta(x, y)`` over every
  ordered pair of distinct topic tokens with the measurement's classes (:func:`stats.pair_classes`);
- uniform scores give lift 1 in both classes; the intervals contain the point and widen with the optimum's error;
- the warm-started structured optimum == the dense evaluator's optimum of the same family and laws;
- the sandwich standard error of the optimum matches the spread of optima over independent law samples;
- the MiniLM ratio CI (window bootstrap) == a direct bootstrap with the same replicates;
- the comparison's summary, table and figure have one entry per layer and head.

No optional package is needed (fake attention statistics); the pipeline's end-to-end test lives in
tests/test_realdata_theory.py (nlp extra).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import GeneralTopicModel, Masking
from theorycheck.realdata import attention_theory as AT
from theorycheck.realdata import plots
from theorycheck.realdata import stats as S
from theorycheck.solvers import optimal_attention


def _model(T, n, conc, seed):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n, 0.5), size=T)
    return GeneralTopicModel(phi, prior="dirichlet", alpha=conc)


def _dense_terms(g, alpha, beta, rows, membership, theta):
    """Direct enumeration: kappa over all words, classes of the topic tokens as the measurement's."""
    z = g.dominant_topic()
    n = g.n_words
    Sc = beta * (z[:, None] == z[None, :]) + alpha * np.eye(n)
    ids = np.arange(len(rows))
    V = np.zeros((len(rows), membership.shape[1]), bool)
    V[ids] = membership
    cls = S.pair_classes(ids, V)  # 1 same topic, 2 different topic (distinct tokens)
    out = np.zeros((4, len(theta)))
    for k, th in enumerate(theta):
        p = th @ g.phi
        kappa = np.exp(Sc) / (np.exp(Sc) @ p)[:, None]  # kappa[x, y] = e^{S[x,y]} / sum_z p_z e^{S[x,z]}
        pr, kr = p[rows], kappa[np.ix_(rows, rows)]
        w = np.outer(pr, pr)
        for c, code in ((0, 1), (2, 2)):
            sel = cls == code
            out[c, k] = np.sum((w * kr)[sel])
            out[c + 1, k] = np.sum(w[sel])
    return out


@settings(max_examples=25)
@given(
    T=st.integers(2, 4), n=st.integers(4, 12), n_tok=st.integers(2, 12), K=st.integers(1, 4),
    alpha=st.floats(-3.0, 9.0), beta=st.floats(-3.0, 3.0), seed=st.integers(0, 99),
)  # fmt: skip
def test_lift_terms_equal_dense_enumeration(T, n, n_tok, K, alpha, beta, seed):
    """SPEC §11.9's sparse class sums == the pairwise definition, for any phi, classes (overlapping topic sets
    included), alpha and beta."""
    g = _model(T, n, 0.3, seed)
    rng = np.random.default_rng(seed + 1)
    rows = rng.choice(n, size=min(n_tok, n), replace=False)
    M = rng.random((rows.size, K)) < 0.5
    M[:, 0] |= ~M.any(axis=1)  # every topic token has a topic set
    theta = rng.dirichlet(np.full(T, 0.3), size=5)
    got = AT.lift_terms(g, alpha, beta, rows, M, theta)
    want = _dense_terms(g, alpha, beta, rows, M, theta)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-15)


def _setup(T=3, n=12, seed=3, n_theta=300):
    g = _model(T, n, 0.3, seed)
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    M = np.zeros((n, T), bool)
    M[rows, g.dominant_topic()] = True
    M[0, (g.dominant_topic()[0] + 1) % T] = True  # one word in two topic sets
    theta = rng.dirichlet(g.concentration, size=n_theta)
    return g, rows, M, theta


def test_uniform_scores_give_lift_one_and_intervals_contain_the_point():
    g, rows, M, theta = _setup()
    u = AT.predicted_lifts(g, 0.0, 0.0, rows, M, theta, n_boot=50, rng=np.random.default_rng(0))
    assert u["same_topic"] == pytest.approx(1.0, abs=1e-13) and u["different_topic"] == pytest.approx(1.0, abs=1e-13)
    assert u["gap"] == pytest.approx(0.0, abs=1e-13) and u["ratio"] == pytest.approx(1.0, abs=1e-13)
    a = AT.predicted_lifts(g, 2.0, 1.0, rows, M, theta, n_boot=50, rng=np.random.default_rng(0))
    assert a["weight_ratio"] == pytest.approx(np.e)
    for k in ("gap", "ratio"):
        lo, hi = a[f"{k}_ci"]
        assert lo < a[k] < hi and (lo, hi) == pytest.approx(a[f"{k}_ci_laws"], rel=0, abs=1e-15)
        assert a[f"{k}_se_optimum"] == 0.0
    cov = np.array([[0.04, 0.01], [0.01, 0.02]])
    b = AT.predicted_lifts(g, 2.0, 1.0, rows, M, theta, n_boot=50, rng=np.random.default_rng(0), cov=cov)
    for k in ("gap", "ratio"):  # same laws, same replicates: the optimum's error only widens the interval
        assert b[f"{k}_ci_laws"] == a[f"{k}_ci_laws"] and b[f"{k}_se_optimum"] > 0
        assert b[f"{k}_ci"][0] < a[f"{k}_ci"][0] and b[f"{k}_ci"][1] > a[f"{k}_ci"][1]
    # delta method: the gap's error equals sqrt(d^T cov d) with d by wider central differences
    h = 1e-3
    d = [
        (AT.predicted_lifts(g, 2.0 + h * e[0], 1.0 + h * e[1], rows, M, theta, rng=np.random.default_rng(0))["gap"]
         - AT.predicted_lifts(g, 2.0 - h * e[0], 1.0 - h * e[1], rows, M, theta, rng=np.random.default_rng(0))["gap"])
        / (2 * h) for e in ((1, 0), (0, 1))
    ]  # fmt: skip
    assert b["gap_se_optimum"] == pytest.approx(float(np.sqrt(np.array(d) @ cov @ np.array(d))), rel=1e-5)


def test_warm_started_structured_optimum_equals_the_dense_route():
    """The label family from ``options.x0`` on the structured route (SPEC §11.8) == the same family given as a
    basis list (dense evaluator, grid start) on the same sampled laws."""
    g = _model(3, 8, 0.4, 7)
    mk = Masking()
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    z = g.dominant_topic()
    Z = np.zeros((g.V1, g.V1))
    Z[1:, 1:] = z[:, None] == z[None, :]
    opts = dict(n_theta=200, seed=5)
    dense = optimal_attention(g, mk, value="stage1", options=dict(opts, family=[I_w, Z]))
    assert dense.info["route"] == "dense" and dense.status == 0
    warm = optimal_attention(g, mk, value="stage1", options=dict(opts, family="label", x0=dense.x + [0.7, -0.4]))
    assert warm.info["route"] == "structured" and warm.info["start"] == "x0" and warm.status == 0
    np.testing.assert_allclose(warm.x, dense.x, atol=2e-5)
    assert warm.fun == pytest.approx(dense.fun, rel=1e-12)
    assert warm.info["x_stderr"].shape == (2,) and np.all(warm.info["x_stderr"] > 0)


def test_sandwich_stderr_matches_the_spread_over_law_samples():
    """The optimum's sampling covariance (``info['x_cov']``) predicts the spread of optima over 12 independent
    law samples (within a factor 2: the spread of 12 draws is itself uncertain by ~20%)."""
    g = _model(3, 8, 0.4, 11)
    mk = Masking()
    first = optimal_attention(g, mk, value="stage1", options=dict(family="label", n_theta=300, seed=0))
    xs, ses = [], []
    for s in range(1, 13):
        r = optimal_attention(g, mk, value="stage1", options=dict(family="label", n_theta=300, seed=s, x0=first.x))
        assert r.status == 0
        xs.append(r.x)
        ses.append(r.info["x_stderr"])
    spread = np.std(np.array(xs), axis=0, ddof=1)
    ratio = spread / np.mean(ses, axis=0)
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio


def test_x0_is_validated():
    g = _model(3, 8, 0.4, 7)
    with pytest.raises(ValueError, match="x0 must lie in the box"):
        optimal_attention(g, Masking(), value="stage1", options=dict(family="label", n_theta=20, seed=0, x0=[99, 0]))
    with pytest.raises(ValueError, match="x0"):
        optimal_attention(g, Masking(), value="stage1", options=dict(family="label", n_theta=20, seed=0, x0=[1.0]))


def _fake_attention(L=2, H=3, seed=0):
    """An AttentionStats from planted attention (beta_true per head) over random windows."""
    rng = np.random.default_rng(seed)
    V, K = 40, 4
    M = np.zeros((V, K), bool)
    M[np.arange(V), np.arange(V) % K] = True
    acc = S.AttentionAccumulator(L, H, M)
    betas = np.linspace(-0.5, 1.0, L * H).reshape(L, H)
    for _ in range(30):
        ids = rng.choice(V, 16, replace=False)
        same = (ids[:, None] % K) == (ids[None, :] % K)
        A = np.exp(betas[:, :, None, None] * same + 0.3 * rng.standard_normal((L, H, 16, 16)))
        A /= A.sum(-1, keepdims=True)
        acc.add(A, ids, np.ones(16, bool))
    return acc, acc.result(n_boot=200, seed=1)


def test_minilm_ratio_ci_is_the_bootstrap_of_the_same_replicates():
    acc, att = _fake_attention()
    i, j = S.ATTN_CLASSES.index("same_topic"), S.ATTN_CLASSES.index("different_topic")
    lift, cnt = np.stack(acc._lift), np.stack(acc._cnt)
    W = S.bootstrap_weights(cnt.shape[0], 200, np.random.default_rng(1))
    li = np.einsum("bs,slh->blh", W, lift[..., i]) / (W @ cnt[:, i])[:, None, None]
    lj = np.einsum("bs,slh->blh", W, lift[..., j]) / (W @ cnt[:, j])[:, None, None]
    np.testing.assert_allclose(att.ratio_ci, np.moveaxis(np.quantile(li / lj, [0.025, 0.975], axis=0), 0, -1))
    np.testing.assert_allclose(att.ratio, att.mean_lift[..., i] / att.mean_lift[..., j])
    assert np.all(att.ratio_ci[..., 0] <= att.ratio) and np.all(att.ratio <= att.ratio_ci[..., 1])
    # planted: the most negative head's ratio CI is below 1, the most positive head's above
    assert att.ratio_ci[0, 0, 1] < 1 < att.ratio_ci[-1, -1, 0]


def test_comparison_summary_table_and_figure(tmp_path):
    g, rows, M, _ = _setup(T=4, n=12, seed=5)
    _, att = _fake_attention(L=2, H=3)
    out = AT.attention_theory(g, Masking(), rows, M, att, n_pilot=64, n_laws=200, n_lift=300, n_boot=50, seed=2)
    s = out.summary
    assert len(s["heads"]) == 6 and [(h["layer"], h["head"]) for h in s["heads"]] == [
        (layer, head) for layer in range(2) for head in range(3)
    ]
    for k in ("gap", "ratio"):
        assert sum(s["counts"][k].values()) == 6
        lo, hi = s["theory"][f"{k}_ci"]
        assert lo < s["theory"][k] < hi
    for h in s["heads"]:
        assert h["gap"] == pytest.approx(h["same_topic"] - h["different_topic"], rel=1e-12, abs=1e-15)
        assert h["gap_ci"][0] <= h["gap"] <= h["gap_ci"][1]
    o = s["optimum"]
    assert o["status"] == 0 and o["alpha_se"] > 0 and o["beta_se"] > 0 and o["loss"] < o["loss_uniform"]
    assert out.timing["attention_theory_cpu_s"] > 0
    table = AT.format_attention_table(s)
    lines = [ln for ln in table.splitlines() if ln.startswith("| ")]
    assert len(lines) == 1 + 1 + 6 and lines[1].startswith("| theory |")
    again = AT.attention_theory(g, Masking(), rows, M, att, n_pilot=64, n_laws=200, n_lift=300, n_boot=50, seed=2)
    assert again.summary == s  # seeded
    fig = plots.attention_theory_heads(s)
    fig.savefig(tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
    with pytest.raises(TypeError, match="att must be an AttentionStats"):
        AT.attention_theory(g, Masking(), rows, M, {}, n_laws=20)


def _fake_lifts(M_tok, rows, n_words, L=2, H=3, seed=0):
    """Text and masked LiftStats over random windows of the model's words (token id = LDA word index)."""
    from theorycheck.realdata import lifts as LF

    rng = np.random.default_rng(seed)
    sets = np.zeros((n_words + 1, M_tok.shape[1]), bool)
    sets[rows] = M_tok
    labels = np.zeros_like(sets)
    labels[rows, np.argmax(M_tok, axis=1)] = True
    ms = {"topic_sets": sets, "labels": labels}
    text, masked = LF.LiftAccumulator(L, H, ms), LF.LiftAccumulator(L, H, ms)
    for _ in range(20):
        ids = rng.integers(0, n_words, 14)
        A = rng.dirichlet(np.full(14, 0.5), size=(L, H, 14))
        valid = np.ones(14, bool)
        text.add(A, ids, valid)
        m = LF.mask_positions(valid, 0.3, rng)
        masked.add(A, np.where(m, n_words, ids), valid, masked=m, hidden_ids=ids)
    return {"text": text.result(n_boot=50, seed=1), "masked": masked.result(n_boot=50, seed=2)}


def test_like_for_like_comparison_and_sensitivity():
    """Every comparison row: the theory's lift at the optimum under that definition and class set (SPEC §11.9),
    MiniLM's from the LiftStats of the matching pass; masked: exactly 1 for the theory; the per-head rows use
    excl_own; the sensitivity's sub-model label/stage-1 row == the sparse label route on the sub-model."""
    from theorycheck.realdata import theory_lifts as TL

    g, rows, M, _ = _setup(T=4, n=12, seed=5)
    _, att = _fake_attention(L=2, H=3)
    lifts = _fake_lifts(M, rows, g.n_words)
    out = AT.attention_theory(g, Masking(), rows, M, att, n_pilot=64, n_laws=200, n_lift=300, n_boot=50, seed=2,
                              lifts=lifts, sensitivity_laws=100)  # fmt: skip
    s = out.summary
    o = s["optimum"]
    theta = np.random.default_rng(AT._law_seed(2, 1)).dirichlet(g.concentration, size=300)
    z = g.dominant_topic()[rows]
    Mz = np.zeros_like(M)
    Mz[np.arange(rows.size), z] = True
    assert [(r["definition"], r["class_set"]) for r in s["comparison"]] == [
        (d, c) for d in TL.DEFINITIONS for c in ("topic_sets", "labels")
    ]
    for r in s["comparison"]:
        MM = M if r["class_set"] == "topic_sets" else Mz
        t = TL.lift_terms(g, o["alpha"], o["beta"], rows, MM, theta, r["definition"]).sum(axis=1)
        assert r["theory"]["gap"] == pytest.approx(t[0] / t[1] - t[2] / t[3], rel=1e-10, abs=1e-14)
        ls = lifts["masked" if r["definition"] == "masked" else "text"]
        norm = "all_keys" if r["definition"] == "all_keys" else "excl_own"
        want = ls.lifts[r["class_set"]][norm]
        assert r["minilm"]["mean_gap"] == pytest.approx(float(np.mean(want["gap"])), rel=1e-12)
        assert r["minilm"]["own_word"] == pytest.approx(float(np.mean(ls.own_word)), rel=1e-12)
        if r["definition"] == "masked":
            assert r["theory"]["gap"] == 0.0 and r["theory"]["ratio"] == 1.0
    assert s["heads_definition"] == "excl_own"
    np.testing.assert_allclose(
        [h["gap"] for h in s["heads"]], lifts["text"].lifts["topic_sets"]["excl_own"]["gap"].ravel()
    )
    sens = s["sensitivity"]
    assert [(r["model"][:3], r["family"], r["value"]) for r in sens] == [
        ("ful", "label", "stage1"), ("ful", "label", "identity"), ("sub", "label", "stage1"),
        ("sub", "label", "identity"), ("sub", "co-topic", "stage1"), ("sub", "co-topic", "identity"),
    ]  # fmt: skip
    assert sens[0]["alpha"] == o["alpha"] and all(r["status"] == 0 for r in sens)
    gs, rs, Ms = TL.sub_model(g, rows, M, per_topic=8)
    ths = np.random.default_rng(AT._law_seed(2, 7)).dirichlet(gs.concentration, size=300)
    t = TL.lift_terms(gs, sens[2]["alpha"], sens[2]["beta"], rs, Ms, ths, "excl_own").sum(axis=1)
    assert sens[2]["excl_own"]["ratio"] == pytest.approx((t[0] / t[1]) / (t[2] / t[3]), rel=1e-10)
    table = AT.format_attention_table(s)
    assert AT.MODEL_NOTE in table and "| masked | labels | 0 |" in table and "| sub-model" in table
