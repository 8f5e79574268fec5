"""The whole-domain interval certificate (issue #25 item 2, SPEC §7) and the interval engines against a
loss written independently of theirs (issue #25 item 5): :mod:`proofs_numeric._spec_route` (the SPEC
formulas retyped in mpmath) and, where python-flint is installed, the Arb re-check
(:mod:`theorycheck.solvers.attention._arb`, its own loss code and branch and bound).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from proofs_numeric import _spec_route as R
from theorycheck.solvers.attention import _arb, global_certificate, interval_certificate, interval_loss
from theorycheck.solvers.attention import _interval_vec as vec
from theorycheck.solvers.attention._interval import _to_chart
from theorycheck.solvers.attention._interval_loss import _evaluate, _setup
from theorycheck.strategies import maskings, topic_models

P = (0.15, 0.1, 0.1)
needs_flint = pytest.mark.skipif(not _arb.HAVE_FLINT, reason="python-flint (the certify extra) not installed")


def _route(tm, mk):
    return R.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)


def _contains(lo, hi, x, slack=1e-30):
    return float(lo) - slack <= x <= float(hi) + slack


def _k(tm, mk):
    c = _route(tm, mk)
    return float((1 - c["rho"] * tm.v) / c["rho"])


@st.composite
def _points(draw):
    tm = draw(topic_models(max_T=5, max_v=4))
    mk = draw(maskings(min_p_m=0.05))
    a = draw(st.floats(-8.0, 12.0))
    b = draw(st.floats(-12.0, 8.0))
    return tm, mk, a, b


@settings(max_examples=40)
@given(_points())
def test_engines_enclose_the_independent_route(case):
    """mpmath.iv and numpy engines, original coordinates and compact chart: each enclosure holds the
    route's value (SPEC formulas in mpmath, 40 digits)."""
    tm, mk, a, b = case
    if mk.a <= 0 or mk.p_m <= 0:
        return
    c = _route(tm, mk)
    lk = math.log(math.exp(a) + (tm.v - 1) * math.exp(b))
    with mp.workdps(40):
        L_block = R.block_loss(mp.exp(mp.mpf(lk)), c)
        L_id = R.identity_loss(a, b, c)
    Lb = interval_loss((lk,), tm, mk, "block")
    Li = interval_loss((a, b), tm, mk, "identity")
    assert _contains(Lb.a, Lb.b, L_block, 1e-14) and _contains(Li.a, Li.b, L_id, 1e-14)
    x = np.array([[lk]])
    cst = _setup(tm, mk, "block", make=vec.ivec_exact)
    Vb = vec.evaluate(x, x, tm, cst, "block", order=0)
    assert _contains(Vb.lo[0], Vb.hi[0], float(L_block), 1e-14)
    y = np.array([[a, b]])
    Vi = vec.evaluate(y, y, tm, _setup(tm, mk, "identity", make=vec.ivec_exact), "identity", order=0)
    assert _contains(Vi.lo[0], Vi.hi[0], float(L_id), 1e-14)
    if (1 - c["rho"] * tm.v) == 0:
        return  # degenerate chart (the loss does not depend on the scores)
    k = _k(tm, mk)
    for value, pt, L in (("block", (lk,), L_block), ("identity", (a, b), L_id)):
        y = np.array([_to_chart(pt, k, tm.v)])
        chart = "block-u" if value == "block" else "identity-uw"
        V = vec.evaluate(y, y, tm, _setup(tm, mk, chart, make=vec.ivec_exact), chart, order=0)
        # the chart point is the float image of the point: the enclosure holds L up to the chart's rounding
        assert _contains(V.lo[0], V.hi[0], float(L), 1e-9), (value, V.lo[0], V.hi[0], float(L))
        I = _evaluate([mp.iv.mpf(float(t)) for t in y[0]], tm, _setup(tm, mk, chart), chart)
        assert _contains(I.a, I.b, float(L), 1e-9)


def test_chart_edges_are_the_limits_at_infinity():
    """u = 0, 1 (block) and the square's edges (identity) equal the route at |scores| -> infinity."""
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    c = _route(tm, mk)
    cst = _setup(tm, mk, "block-u", make=vec.ivec_exact)
    ends = vec.evaluate(np.array([[0.0], [1.0]]), np.array([[0.0], [1.0]]), tm, cst, "block-u", order=0)
    assert _contains(ends.lo[0], ends.hi[0], float(R.block_loss(mp.mpf("1e-40"), c)), 1e-15)
    assert _contains(ends.lo[1], ends.hi[1], float(R.block_loss(mp.mpf("1e40"), c)), 1e-15)
    cst = _setup(tm, mk, "identity-uw", make=vec.ivec_exact)
    pts = np.array([[1.0, 0.5], [0.3, 0.0], [0.0, 1.0]])  # alpha -> +inf; beta -> -inf at finite alpha; beta -> +inf
    V = vec.evaluate(pts, pts, tm, cst, "identity-uw", order=0)
    k = _k(tm, mk)
    alpha_w0 = math.log(k * 0.3 / 0.7)  # u = 0.3, w = 0: e^alpha = k u / (1 - u), e^beta = 0
    for i, (a, b) in enumerate(((100, 0), (alpha_w0, -mp.inf), (0, 100))):
        assert _contains(V.lo[i], V.hi[i], float(R.identity_loss(a, b, c)), 1e-12)


@pytest.mark.parametrize(
    "T,v,tau,value", [(10, 10, 3, "block"), (10, 10, 2, "block"), (100000, 10, 300, "block"), (10, 10, 3, "identity")]
)
def test_global_certificate_holds_the_route_optimum_and_is_finite(T, v, tau, value):
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*P)
    g = global_certificate(tm, mk, value)
    c = _route(tm, mk)
    if value == "block":
        K, L = R.kstar(c, hi=14)
        x = (float(mp.log(K)),)
    else:
        a, b, L = R.identity_optimum(c)
        x = (float(a), float(b))
    assert g.converged and g.gap <= 1e-9 and not g.info["at_infinity"]
    assert _contains(g.lower, g.upper, float(L), 1e-15)
    for xi, (lo, hi) in zip(x, g.info["argmin_original"]):  # the route's minimiser lies in the certified argmin
        assert lo - 1e-9 <= xi <= hi + 1e-9
    box = interval_certificate(tm, mk, value)  # the box's enclosure intersects the whole domain's
    assert max(box.lower, g.lower) <= min(box.upper, g.upper) + 1e-15


def test_global_certificate_beta_to_minus_infinity():
    """T = 100 (identity): the infimum is a limit beta -> -inf; certified as such (argmin on the edge w = 0)."""
    tm, mk = tc.TopicModel(T=100, v=10, tau=3), tc.Masking(*P)
    g = global_certificate(tm, mk, "identity")
    _, L_edge = R.identity_optimum_beta_inf(_route(tm, mk))
    assert g.converged and g.info["at_infinity"] and g.argmin[1][0] == 0.0
    assert g.info["argmin_original"][1][0] == -math.inf
    assert _contains(g.lower, g.upper, float(L_edge), 1e-15)


def test_global_lower_bounds_far_points():
    """The whole-domain lower bound is below the loss anywhere, far outside the solver's boxes too."""
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    c = _route(tm, mk)
    gb, gi = global_certificate(tm, mk, "block"), global_certificate(tm, mk, "identity")
    for lk in (-500.0, -60.0, 80.0, 700.0):
        assert gb.lower <= float(R.block_loss(mp.exp(lk), c))
    for a, b in ((300.0, -300.0), (-50.0, 60.0), (45.0, 45.0), (4.7, -300.0)):
        assert gi.lower <= float(R.identity_loss(a, b, c))


def test_global_mpmath_engine_agrees():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    g_np = global_certificate(tm, mk, "block")
    g_mp = global_certificate(tm, mk, "block", engine="mpmath", tol=1e-7, max_boxes=3000)
    assert max(g_np.lower, g_mp.lower) <= min(g_np.upper, g_mp.upper)


def test_offset_lifts_the_global_certificate():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    g0, g1 = global_certificate(tm, mk, "block"), global_certificate(tm, mk, "block", offset=1e-6)
    assert g1.lower - g0.lower == pytest.approx(1e-6, abs=1e-12)


def test_degenerate_chart_returns_none():
    """p_c = 1, tau = 1: the context is the query's topic only (1 - rho v = 0), the loss is flat."""
    tm, mk = tc.TopicModel(T=3, v=2, tau=1), tc.Masking(0.5, 1.0, 0.0)
    assert global_certificate(tm, mk, "block") is None


def test_attached_certificate_reports_the_whole_domain():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    res = tc.solvers.optimal_attention(tm, mk, value="identity", options={"certify": "interval"})
    c = res.certificate
    assert res.status == 0 and c["global"]["converged"] and not c["global"]["at_infinity"]
    assert c["global_lower"] <= res.fun <= c["global_lower"] + 1e-9
    res = tc.solvers.optimal_attention(tc.TopicModel(T=100, v=10, tau=3), mk, value="identity",
                                       options={"certify": "interval"})  # fmt: skip
    assert res.status == 3 and res.certificate["global"]["at_infinity"]
    assert res.certificate["global_lower"] <= res.fun


@needs_flint
@pytest.mark.parametrize(
    "T,v,tau,value",
    [(10, 10, 2, "block"), (10, 10, 3, "block"), (10, 10, 5, "block"), (100, 10, 3, "block"), (100, 10, 10, "block"),
     (1000, 10, 30, "block"), (1000, 50, 30, "block"), (10000, 10, 100, "block"), (100000, 10, 300, "block"),
     (10, 10, 3, "identity"), (100, 10, 3, "identity"), (4, 3, 2, "identity"), (3, 1, 2, "identity")],
)  # fmt: skip
def test_arb_recheck_agrees_with_the_certificate(T, v, tau, value):
    """Every SPEC §4.3 configuration: the Arb re-check's enclosure intersects the numpy certificate's and
    holds the route's optimum; the two agree to 2e-9."""
    tm, mk = tc.TopicModel(T=T, v=v, tau=tau), tc.Masking(*P)
    g = global_certificate(tm, mk, value)
    lo, up, n, argmin = _arb.arb_recheck(T, v, tau, *P, value=value, tol=1e-9)
    assert max(lo, g.lower) <= min(up, g.upper)
    assert max(abs(lo - g.lower), abs(up - g.upper)) <= 2e-9


@needs_flint
@settings(max_examples=30)
@given(_points())
def test_arb_loss_encloses_the_route(case):
    """The Arb loss (its own code) at a chart point holds the route's value at the mapped point."""
    tm, mk, a, b = case
    if mk.a <= 0 or mk.p_m <= 0:
        return
    c = _route(tm, mk)
    if (1 - c["rho"] * tm.v) == 0:
        return
    cst = _arb._constants(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)
    k = float((1 - cst["rho"] * tm.v) / cst["rho"])
    u = 1.0 / (1.0 + k * math.exp(-a))  # block: u = K/(K + k) with log K = a
    Lb = _arb.arb_loss([_arb.flint.arb(u)], tm.T, tm.v, tm.tau, cst, "block")
    K = k * u / (1 - u)  # the exact K of the float u
    assert _contains(Lb.lower(), Lb.upper(), float(R.block_loss(mp.mpf(K), c)), 1e-13)
    (uu, ww) = _to_chart((a, b), k, tm.v)
    Li = _arb.arb_loss([_arb.flint.arb(uu), _arb.flint.arb(ww)], tm.T, tm.v, tm.tau, cst, "identity")
    assert _contains(Li.lower(), Li.upper(), float(R.identity_loss(a, b, c)), 1e-9)  # up to the chart's rounding


@needs_flint
def test_recheck_option_attaches_the_arb_bounds():
    tm, mk = tc.TopicModel(T=10, v=10, tau=3), tc.Masking(*P)
    opts = {"certify": "interval", "certify_options": {"recheck": True}}
    res = tc.solvers.optimal_attention(tm, mk, value="block", options=opts)
    r = res.certificate["recheck"]
    assert r["agrees"] and r["lower"] <= res.fun and r["discrepancy"] <= 2e-9


def test_recheck_without_flint_says_how_to_install(monkeypatch):
    monkeypatch.setattr(_arb, "HAVE_FLINT", False)
    with pytest.raises(ImportError, match="python-flint"):
        _arb.arb_recheck(10, 10, 3, *P)
