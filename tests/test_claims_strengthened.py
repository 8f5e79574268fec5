"""Issue 36 items 6-9: the restated EMPIRICAL claims against independent routes, and the former, weaker readings
fail them (each restated claim's falsifier is sized in ``tests/test_claims.py``); and the sub-checks added for the
mutants ``verify`` missed (``kernel-blocks``, ``cotopic-discard``, ``identity-edge``), each failing under its
injection."""

from __future__ import annotations

import numpy as np
import pytest

import theorycheck as tc
from proofs_numeric import CLAIMS, general_overlap_attention, general_zipf_attention, train_compensation
from proofs_numeric import _general_common as gc
from proofs_numeric import certificate_cotopic as cotopic
from proofs_numeric import certificate_label_kernel as label_kernel
from proofs_numeric import train_stage2_attention as same_topic
from proofs_numeric import train_stage2_kstar as kstar
from theorycheck.analysis.phase import phase_model
from theorycheck.analysis.stats import attention_class_averages
from theorycheck.analysis.topic_structure import attention_preference, effective_K
from theorycheck.nn import Trainer, preset
from theorycheck.population import alpha_beta_loss, attention_loss
from theorycheck.sampling import sample_documents
from theorycheck.solvers import optimal_attention, stage1_value_matrix
from theorycheck.solvers.attention._family import cotopic_matrix
from theorycheck.solvers.attention._interval_cotopic import CotopicLoss
from theorycheck.solvers.attention._interval_vec import IVec

MK = tc.Masking(0.15, 0.1, 0.1)


# ----------------------------------------------------------------------------- item 6: train.stage2-approaches-Kstar
def test_unrestricted_optimum_is_an_optimum_of_the_dense_loss_from_any_start():
    """K_u does not depend on the L-BFGS start (the family optimum, S = 0, a random S), and L_u is the dense
    evaluator's loss at S_u (an independent evaluation), below the family's closed-form L*."""
    tm = tc.TopicModel(5, 4, 2)
    g = tc.GeneralTopicModel(tm.phi, prior="uniform-tau", tau=2)
    ref = kstar.unrestricted_optimum(5, 4, 2, MK.p_m, MK.p_c, MK.p_r)
    starts = [np.zeros((tm.V1, tm.V1)), np.random.default_rng(0).normal(0.0, 0.5, (tm.V1, tm.V1))]
    for S0 in starts:
        r = optimal_attention(g, MK, method="lbfgs", value="stage1", options={"x0": S0})
        assert r.status == 0
        assert float(np.median(effective_K(r.x, tm.v))) == pytest.approx(ref["K_u"], rel=1e-6)
        assert r.fun == pytest.approx(ref["L_u"], abs=1e-12)
    r = optimal_attention(g, MK, method="lbfgs", value="stage1")
    W = stage1_value_matrix(g, MK)
    W = W if isinstance(W, np.ndarray) else W.toarray()
    assert attention_loss(r.x, W, tm, MK) == pytest.approx(ref["L_u"], abs=1e-12)
    K = ref["K_star"]
    L_star = float(alpha_beta_loss(np.log(K - (tm.v - 1)), 0.0, tm, MK, "block"))
    assert L_star == pytest.approx(ref["L_star"], abs=1e-10)
    assert ref["L_u"] < L_star - 1e-5 and ref["K_u"] > 1.04 * K


def test_kstar_claim_against_the_family_optimum_fails_by_the_offset():
    """The former reading (K_eff against the family's K*) is off by the fixed offset, hundreds of K_rtol."""
    res = kstar.CLAIM.run(kstar.DEFAULT, {"reference": "family"})
    assert not res.passed
    assert abs(res.details["K_eff_over_K_u"] - 1.0) > 300 * kstar.DEFAULT["K_rtol"]


def test_kstar_claim_fails_when_training_stops_while_adam_overshoots():
    res = kstar.CLAIM.run(kstar.DEFAULT, {"steps": 20})
    assert not res.passed


def test_kstar_window_median():
    steps = [0, 10, 20, 30, 40, 50, 60]
    gaps = [9.0, 5.0, 4.0, 3.0, 1.0, 2.0, 0.5]
    assert kstar.window_median(steps, gaps, 10, 40) == 3.0  # (10, 40]: 4, 3, 1
    assert kstar.window_median(steps, gaps, 40, 60) == 1.25  # (40, 60]: 2, 0.5
    assert np.isnan(kstar.window_median(steps, gaps, 61, 70))


# ----------------------------------------------------------------------------- item 7: train.compensation
def test_pooled_log_ratio_is_the_pooled_class_average_ratio():
    """Per-document class sums pooled equal the library's pooled class averages over the whole batch (an
    independent route), and unit bootstrap weights give the unweighted value."""
    fe = dict(preset("compensation"))["frozen-embedding"].replace(steps=1, seed=3)
    tr = Trainer(fe, progress=False)
    labels = tr.tm.token_topics()
    toks = sample_documents(tr.tm, 12, fe.data.N, rng=np.random.default_rng(1)).tokens
    sums = train_compensation.class_sums(tr.model, toks, labels)
    st = attention_class_averages(tr.model.attention_maps(toks)[0, 0], toks, normalise=True, labels=labels)
    direct = np.log(st["same_topic"] / st["diff_topic"])
    assert train_compensation.pooled_log_ratio(sums)[0] == pytest.approx(direct, rel=1e-12, abs=1e-14)
    assert train_compensation.pooled_log_ratio(sums, np.ones((3, 12))) == pytest.approx(np.full(3, direct), rel=1e-12)
    # a document resampled twice counts twice: weights (2, 0, 1, ...) equal the batch with that document repeated
    w = np.ones(12)
    w[0], w[1] = 2.0, 0.0
    rep = np.concatenate([toks[:1], toks[:1], toks[2:]])
    st2 = attention_class_averages(tr.model.attention_maps(rep)[0, 0], rep, normalise=True, labels=labels)
    assert train_compensation.pooled_log_ratio(sums, w[None])[0] == pytest.approx(
        np.log(st2["same_topic"] / st2["diff_topic"]), rel=1e-12
    )


def test_paired_gain_is_zero_when_attention_cannot_train():
    """Attention frozen uniform in the frozen-embedding run: trained and untrained ratios are the same, the paired
    interval is [0, 0] and the attention sub-check fails (the former "ratio > 1" could pass on noise)."""
    fe = dict(preset("compensation"))["frozen-embedding"]
    fe = fe.replace(model=fe.model.__class__(**{**fe.model.__dict__, "attention": "uniform", "train": ("W_V",)}))
    att = train_compensation.paired_attention_gain(fe, 2, 0, {})
    assert att["attention_log_gain"] == 0.0 and att["attention_log_gain_ci95"] == [0.0, 0.0]
    res = train_compensation._check_one(dict(steps=2, seed=0, min_gram_block_score=0.0), {"freeze_attention_too": True})
    assert not res.passed and "paired" in res.label


# ----------------------------------------------------------------------------- item 8: general.*-attention-preference
@pytest.mark.parametrize("s", [0.5, 2.0])
def test_zipf_cotopic_family_is_the_label_family(s):
    g, z = phase_model("zipf", s, 4, 3, 2)
    assert np.array_equal(cotopic_matrix(g), gc.label_matrix(z))


def test_certified_zipf_point_agrees_with_the_float_cotopic_optimum():
    """s = 0.5, tau = 1: the label certificate (status 0) and the float optimum of the co-topic family (the former
    route) give the same preference; it is negative at every corner of the certified argmin box."""
    g, z = phase_model("zipf", 0.5, 4, 3, 1)
    pt = gc.certified_zipf_point(g, z, 0.5, 1, MK)
    assert pt["status"] == 0
    r = optimal_attention(g, MK)
    assert pt["preference"] == pytest.approx(attention_preference(r.info["S"], g, MK, topics=z), abs=1e-7)
    assert pt["pref_min"] <= pt["preference"] <= pt["pref_max"] < 0


def test_zipf_scan_agrees_with_certified_points():
    p = dict(general_zipf_attention.CLAIM.default_params[0])
    sc = gc.zipf_tau1_scan(p, {})
    for k in (2, 6):
        s = float(sc["s"][k])
        g, z = phase_model("zipf", s, p["T"], p["v"], 1)
        pt = gc.certified_zipf_point(g, z, s, 1, MK)
        assert pt["status"] == 0
        assert sc["preference"][k] == pytest.approx(pt["preference"], rel=1e-4)  # float optima: 2e-5 apart


def test_zipf_claim_fails_for_negated_scores():
    res = general_zipf_attention.CLAIM.run(general_zipf_attention.CLAIM.default_params[0], {"negate": True})
    assert not res.passed


def test_overlap_claim_does_not_call_its_optima_certified():
    st = general_overlap_attention.CLAIM.statement
    assert "not certified" in st and "certified" not in st.replace("not certified", "")


# ----------------------------------------------------------------------------- item 9: same-topic attention threshold
def test_same_topic_threshold_catches_a_ratio_four_percent_low():
    """The former strict "> 1" passed a same-topic attention read at 25% of its value; the calibrated threshold
    fails one read 4% low."""
    p = same_topic.DEFAULT
    assert same_topic.CLAIM.run(p, {"same_topic_scale": 0.25}).measured > 1.0
    assert not same_topic.CLAIM.run(p, {"same_topic_scale": 0.96}).passed


# ----------------------------------------------------------------------------- issue 36: the verify survivors
def test_identity_scan_edge_injection_fails_by_twice_its_tolerance():
    """The scan's edge (a scan stopped at T0 - 1 reports T_max + 1): reporting T_max instead (``edge_shift = -1``)
    fails the sub-check by 2 x its tolerance of half a step, on the configuration outside the region (T0 = 11)."""
    claim = next(c for c in CLAIMS if c.id == "attention.identity-optimum")
    p = claim.default_params[2]
    reported = [v for k, v in claim.run(p).details.items() if k.endswith(".scan_reported")]
    assert reported == [11]
    res = claim.run(p, {"edge_shift": -1})
    assert not res.passed and "reports T_max + 1" in res.label
    assert (res.tolerance - res.margin) / res.tolerance == pytest.approx(2.0)


def test_label_kernel_blocks_need_the_outward_combination():
    """The block check's exact sum is 1 + 63 x 0.7 x 2^-52 (inexact in floats); the kernel's enclosure holds it and
    the midpoint misses it by a few units of 2^-52 (the rounding of the blocks' combination matters at this size);
    the same 64 sums added in round-to-nearest (the mutant ``kernel-blocks``) end above it."""
    from fractions import Fraction

    r = label_kernel.blocks_check({})
    assert r["miss"] == 0.0 and 0 < r["width"] < label_kernel.WIDTH_TOL
    assert r["exact sum - 1"] == pytest.approx(63 * label_kernel.BLOCK_STEP, rel=1e-12)
    assert 1 < label_kernel.blocks_check({"narrow": True})["miss"] / 2.0**-52 <= 10
    s = 1.0  # round to nearest: each step adds a whole unit 2^-52 instead of 0.7 of it
    for _ in range(63):
        s += label_kernel.BLOCK_STEP
    assert s == 1.0 + 63 * 2.0**-52 and Fraction(s) > 1 + 63 * Fraction(label_kernel.BLOCK_STEP)


def test_cotopic_certificate_claim_catches_a_discarded_straddling_box(monkeypatch):
    """The discard rule: a box of (u, beta) only partly outside the search box's image discarded (value +inf, as the
    mutant ``cotopic-discard`` does) fails the straddling-box sub-check; the falsifier fails item 1 by 3 x."""
    claim = cotopic.CLAIM
    res = claim.run({}, claim.falsify({}))
    assert not res.passed and (res.tolerance - res.margin) / res.tolerance == pytest.approx(3.0, rel=0.01)
    orig = CotopicLoss.original

    def discard_partly_outside(self, xs):
        out = orig(self, xs)
        if self.alpha_range is None or not isinstance(xs[0], IVec) or xs[0].lo[0] == xs[0].hi[0]:
            return out  # the straddling boxes of the claim's item 3 (order 0, one box each)
        a_lo, a_hi = xs[0].lo[0] - xs[1].hi[0], xs[0].hi[0] - xs[1].lo[0]
        partly = a_lo < self.alpha_range[0] or a_hi > self.alpha_range[1]
        return IVec(np.full(1, np.inf), np.full(1, np.inf)) if partly else out

    monkeypatch.setattr(CotopicLoss, "original", discard_partly_outside)
    res = cotopic.check({})
    assert not res.passed
