"""Phase diagrams over overlap eps / Zipf s x tau (SPEC §11.6): derived values, executors, bisection, figures."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck import Masking
from theorycheck.analysis.landscape import family_scores
from theorycheck.analysis.phase import diagram_boundaries, find_boundary, phase_diagram, phase_model, phase_point
from theorycheck.population import attention_loss
from theorycheck.report._plots_general import STAT_LABELS, phase_figures, phase_heatmaps
from theorycheck.solvers import cotopic_matrix, optimal_attention, stage1_value_matrix

MK = tc.Masking()


@settings(max_examples=20)
@given(st.integers(2, 5), st.integers(2, 4), st.floats(0.0, 0.999), st.data())
def test_overlap_gap_is_one_over_av_for_every_eps_below_one(T, v, eps, data):
    """SPEC §11.6: W^V and G* word blocks are (1/(a v)) 1[same topic] + const for eps < 1, tau < T."""
    tau = data.draw(st.integers(1, T - 1))
    p = phase_point(("overlap", eps, T, v, tau, MK.to_dict(), False))
    for obj in ("value", "gram"):
        assert p[f"{obj}_gap"] == pytest.approx(1.0 / (MK.a * v), rel=1e-9)
        assert p[f"{obj}_correlation"] == pytest.approx(1.0, abs=1e-9)
    assert math.isnan(p["attention_preference"])


@pytest.mark.parametrize("eps, tau", [(1.0, 2), (0.3, 4), (1.0, 4)])
def test_identical_topics_or_single_law_have_no_structure(eps, tau):
    p = phase_point(("overlap", eps, 4, 3, tau, MK.to_dict(), False))
    for obj in ("value", "gram"):
        assert abs(p[f"{obj}_gap"]) < 1e-12 and p[f"{obj}_correlation"] == 0.0


def test_phase_model_labels_are_the_dominant_topics_below_eps_one():
    for kind, x in (("overlap", 0.7), ("zipf", 1.5)):
        g, z = phase_model(kind, x, 4, 3, 2)
        assert np.array_equal(z, g.dominant_topic())


def test_executor_gives_the_serial_result_bit_for_bit():
    kw = dict(T=3, v=2, taus=[1, 2])
    serial = phase_diagram("zipf", [0.0, 1.0], **kw)
    with ThreadPoolExecutor(2) as ex:
        par = phase_diagram("zipf", [0.0, 1.0], executor=ex, **kw)
    for k in serial.data:
        assert np.array_equal(serial.data[k], par.data[k], equal_nan=True)
    assert serial.data["attention_preference"].shape == (2, 2)
    # uniform topics (zipf exponent 0) with tau = 2: the co-topic loss falls towards a limit beta -> -inf at fixed
    # alpha + beta (status 3, test below); every other cell an attained optimum
    assert serial.data["attention_status"].tolist() == [[0, 3], [0, 0]]


def test_the_status_3_cell_is_a_limit_at_infinity():
    """The cell of status 3 above, checked by the dense loss (not the solver's evaluator): along the solver's ray
    ``beta -> -inf`` at fixed ``alpha + beta`` the loss never rises above the reported value, while behind the
    point it is higher: the reported point is on a plateau whose infimum is not attained at a finite point."""
    g, _ = phase_model("zipf", 0.0, 3, 2, 2)
    mk = Masking()
    r = optimal_attention(g, mk)
    assert r.status == 3 and r.info["limit_at_infinity"]["direction"] == [1.0, -1.0]
    G, W = cotopic_matrix(g), stage1_value_matrix(g, mk)

    def dense(a, b):
        return float(attention_loss(family_scores(a, b, G), W, g, mk))

    a, b = r.x
    assert dense(a, b) == pytest.approx(r.fun, rel=1e-12)
    beyond = [dense(a + t, b - t) for t in (5.0, 15.0, 40.0)]
    assert max(beyond) <= r.fun + 1e-13 * abs(r.fun)
    assert dense(a - 4.0, b + 4.0) > r.fun + 1e-13 * abs(r.fun)


def test_paper_point_attention_matches_the_symmetric_optimum():
    """eps = 0 is the paper's model: pref sign == sign(K*/v - 1) of the certified (alpha, beta) optimum."""
    p = phase_point(("overlap", 0.0, 4, 3, 2, MK.to_dict(), True))
    sym = tc.solvers.optimal_attention(tc.TopicModel(T=4, v=3, tau=2), MK)
    assert sym.K / 3 > 1 and p["attention_preference"] > 0


def test_bisection_brackets_the_crossing():
    """Zipf: the W^V block correlation falls through 0.5 between s = 5 and 6 (T=4, v=3, tau=2)."""
    x, (f_lo, f_hi) = find_boundary("zipf", "value_correlation", 4.0, 7.0, T=4, v=3, tau=2, level=0.5, xtol=1e-6)
    assert f_lo > 0.5 > f_hi and 4.0 < x < 7.0
    at = lambda s: phase_point(("zipf", s, 4, 3, 2, MK.to_dict(), False))["value_correlation"]  # noqa: E731
    assert at(x - 1e-5) > 0.5 > at(x + 1e-5)
    none, _ = find_boundary("zipf", "value_correlation", 0.0, 2.0, T=4, v=3, tau=2, level=0.5)
    assert math.isnan(none)


def test_diagram_boundaries_refine_and_midpoint():
    d = phase_diagram("zipf", [0.0, 4.0, 8.0], T=4, v=3, taus=[1, 4], attention=False)
    mid = diagram_boundaries(d, "value_correlation", level=0.5, refine=False)
    assert mid[0] == 6.0 and math.isnan(mid[1])
    fine = diagram_boundaries(d, "value_correlation", level=0.5, xtol=1e-4)
    assert 4.0 < fine[0] < 8.0 and math.isnan(fine[1])
    assert fine[0] == pytest.approx(find_boundary("zipf", "value_correlation", 4.0, 8.0, T=4, v=3, tau=1,
                                                  level=0.5, xtol=1e-4)[0])  # fmt: skip


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="kind"):
        phase_diagram("lda", [0.1])
    with pytest.raises(ValueError, match="eps"):
        phase_diagram("overlap", [0.5, 1.5])
    with pytest.raises(ValueError, match="s"):
        phase_diagram("zipf", [-1.0])
    with pytest.raises(ValueError, match="T"):
        phase_diagram("zipf", [0.0], T=30)
    with pytest.raises(ValueError, match="taus"):
        phase_diagram("zipf", [0.0], T=3, taus=[4])
    with pytest.raises(ValueError, match="stat"):
        find_boundary("zipf", "nonsense", 0.0, 1.0, T=3, v=2, tau=1)
    with pytest.raises(ValueError, match="lo must be < hi"):
        find_boundary("zipf", "value_gap", 1.0, 1.0, T=3, v=2, tau=1)
    with pytest.raises(TypeError, match="mk"):
        phase_diagram("zipf", [0.0], mk="default")


def test_figures_one_per_conclusion(tmp_path):
    d1 = phase_diagram("overlap", [0.0, 0.5, 1.0], T=3, v=2, taus=[1, 2, 3])
    d2 = phase_diagram("zipf", [0.0, 2.0], T=3, v=2, taus=[1, 2, 3], attention=False)
    b = {("value", "zipf"): np.array([1.0, np.nan, np.nan])}
    figs = phase_figures([d1, d2], boundaries=b)
    assert set(figs) == {"phase_value", "phase_gram", "phase_attention"}
    assert len(figs["phase_value"].axes) == 4 and len(figs["phase_attention"].axes) == 2  # panels + colourbars
    for name, fig in figs.items():
        fig.savefig(tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    fig = phase_heatmaps([d2], "gram_gap", title="t")
    assert STAT_LABELS["gram_gap"][0] in fig.axes[1].get_ylabel()  # the statistic in words, with its unit
