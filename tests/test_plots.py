"""Figures a reader can use: every axis labelled, no text cut off at the figure edge, legends off the
data, distinguishable curves and annotations, readable ticks. Figures are drawn from synthetic
inputs shaped like the real ones (metrics.jsonl records, token matrices, sweep rows)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck.analysis.phase import PhaseDiagram
from theorycheck.realdata import plots as rplots
from theorycheck.report import plots
from theorycheck.report._plots_general import phase_heatmaps, x_axis
from theorycheck.report._plotstyle import annotation_format

V = 4  # words per topic of the synthetic token matrices (T = 3: V1 = 13)


def _train_records(n=30, *, deep=False, identical_kq=True, narrow_K=True):
    recs = []
    for s in range(n):
        r = {
            "step": 10 * s,
            "loss": 1.0 - 0.03 * np.tanh(s / 3),
            "norm_W_V": 0.1 + 3.5 * np.tanh(s / 4),
            "norm_KQ": 0.1 * 1.01**s,
            "norm_W_K": 1.0 + 1e-3 * s,
            "norm_W_Q": 1.0 + 1e-3 * s if identical_kq else 1.0 + 2e-3 * s,
            "block_score_W_V": float(np.tanh(s / 2)),
            "K_eff_median": V * (1.0 + (5e-5 if narrow_K else 0.5) * s),
        }
        if s % 5 == 0:
            r["dev_loss"] = r["loss"] + 0.01
        if deep:
            r["norm_W_V_layers"] = [r["norm_W_V"] * (1 + 0.1 * li) for li in range(4)]
            r["norm_W_K_layers"] = [0.25 * 1.02 ** (s * li) for li in range(4)]
            r["norm_W_Q_layers"] = [0.25] * 4
            r["attn_topic_ratio_heads"] = list(1.0 + 1e-4 * s * np.linspace(-1, 1, 16))
        recs.append(r)
    return recs


STAGES = {"stage1_end": 40, "stage2_start": 150, "stage1_end_structure": 30, "stage2_attention": 200}


def _token_matrix(seed=0):
    rng = np.random.default_rng(seed)
    n = 3 * V + 1
    block = np.kron(np.eye(3), np.ones((V, V)))
    M = np.zeros((n, n))
    M[1:, 1:] = 0.1 * block - 0.01
    return M + 1e-3 * rng.standard_normal((n, n))


def _sweep_rows():
    return [
        dict(T=T, tau=tau, K_over_vtau=1.0 + np.log(T / tau), attention_ratio=3.0 * tau)
        for T, tau in [(10, 2), (10, 3), (100, 3), (1000, 10), (10_000, 30)]
    ]


def _phase(kind, values, taus=(1, 2, 3, 4)):
    x = np.asarray(values, float)
    corr = np.where(x[:, None] < 1.0, np.cos(x)[:, None], 0.0) * (np.asarray(taus)[None, :] < 4)
    return PhaseDiagram(kind, x, np.asarray(taus), 4, 3, {}, {"value_correlation": corr, "attention_preference": corr})


def _figures():
    a = np.linspace(-5, 12, 30)
    b = np.linspace(-8, 8, 25)
    L = 0.96 + 0.01 * np.tanh(np.add.outer(a - 2, b - 2) ** 2 / 50)
    lk = np.linspace(-3, 14, 200)
    gap = np.random.default_rng(1).normal(0.2, 0.2, (6, 12))
    lift = np.abs(np.random.default_rng(2).normal(1.0, 0.3, (6, 12, 3))) + 0.1
    spec_rows = [
        {"top_fraction": f, "cosine": {"gap": 0.05 / f, "ci_low": 0.04 / f, "ci_high": 0.06 / f}} for f in (0.1, 0.3, 1)
    ]
    return {
        "training_curves": lambda: plots.training_curves(_train_records(), stages=STAGES, v=V),
        "training_curves_plain": lambda: plots.training_curves(
            [{k: r[k] for k in ("step", "loss", "norm_W_V")} for r in _train_records()]
        ),
        "training_curves_deep": lambda: plots.training_curves(_train_records(deep=True), stages=STAGES, v=V),
        "attention_head_ratios": lambda: plots.attention_head_ratios(_train_records(deep=True), 4, 4),
        "heatmap": lambda: plots.heatmap(_token_matrix(), title="W^V", block=V, ax_labels=plots.VALUE_AXES),
        "heatmap_attention": lambda: plots.heatmap(
            0.0099 + 1e-5 * _token_matrix(), block=V, symmetric=False, cmap="viridis", ax_labels=plots.SCORE_AXES
        ),
        "heatmap_pair": lambda: plots.heatmap_pair(_token_matrix(0), _token_matrix(1), titles=("a", "b"), block=V),
        "gram_pair": lambda: plots.gram_pair(_token_matrix(0), _token_matrix(1), block=V, suptitle="Gram"),
        "attention_landscape": lambda: plots.attention_landscape(
            a, b, L, optimum=(2.0, 2.0), logK=lk, L_K=0.96 + 1e-3 * np.tanh((lk - 4) ** 2), K_star=70.05, title="T=3"
        ),
        "attention_sweep": lambda: plots.attention_sweep(_sweep_rows()),
        "finite_n_gap": lambda: plots.finite_n_gap(
            [25, 50, 100, 200, 400, 800, 1600], 0.37 / np.array([25, 50, 100, 200, 400, 800, 1600]), [2e-4] * 7
        ),
        "loss_vs_K": lambda: plots.loss_vs_K(
            [(t, lk, (lk - np.log(10 * t)) ** 2, 10.0 * t) for t in (1, 3, 10)], title="loss along K"
        ),
        "block_sum_sweep": lambda: plots.block_sum_sweep(
            [1.1, 2.0, 5.0, 20.0],
            np.c_[[1.1, 2.0, 5.0, 20.0], [1.1, 2.0, 5.0, 20.0]],
            labels=["min", "max"],
            title="a long title that used to run into the second panel: own - other vs 1/a, T=4, v=3",
            rel_error=[2e-8, 5e-8, 1e-7, 4e-7],
        ),
        "stage_grid": lambda: plots.stage_grid(
            [
                dict(
                    lr=lr,
                    init_scale=s,
                    steps=3000,
                    stage1_end=600 // lr,
                    stage2_start=42000 // lr,
                    stage2_attention=None if lr < 20 else 53000 // lr,
                )
                for lr in (10, 20, 30, 40)
                for s in (0.003, 0.01, 0.03)
            ]
        ),  # fmt: skip
        "stage2_growth": lambda: plots.stage2_growth(
            [(np.arange(0, 600, 5), 0.01 * np.exp(0.011 * np.arange(0, 600, 5)), 0.0105)] * 2
        ),
        "convergence": lambda: plots.convergence(
            np.arange(100), {"from 0": 0.8 ** np.arange(100), "from W0": 0.8 ** np.arange(100) + 1}
        ),
        "entry_histograms": lambda: plots.entry_histograms({"same": [0.1] * 50, "diff": [-0.01] * 400}),
        "realdata_gap": lambda: rplots.attention_gap_heatmap(gap, np.stack([gap - 0.1, gap + 0.1], axis=-1)),
        "realdata_classes": lambda: rplots.attention_class_lines(lift, ["same_topic", "different_topic", "no_topic"]),
        "realdata_similarity": lambda: rplots.similarity_distributions(
            {"same_topic": np.linspace(-0.2, 0.8, 500), "different_topic": np.linspace(-0.2, 0.4, 500)}
        ),
        "phase_overlap": lambda: phase_heatmaps(
            [_phase("overlap", (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0))],
            "value_correlation",
            level=0.5,
            boundaries=[np.array([1.0, 1.0, 1.0, np.nan])],
            title="overlap",
        ),
        "phase_zipf": lambda: phase_heatmaps(
            [_phase("zipf", (0.0, 0.5, 1.0, 2.0, 4.0))], "attention_preference", title="zipf"
        ),
        "realdata_specificity": lambda: rplots.specificity_gap(spec_rows),
    }


FIGURES = _figures()


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig


def _drawn(name):
    return _draw(FIGURES[name]())


def _plot_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_axis_is_labelled(name):
    fig = _drawn(name)
    for ax in _plot_axes(fig):
        assert ax.get_xlabel().strip(), f"{name}: an axis without x label (title {ax.get_title()!r})"
        assert ax.get_ylabel().strip(), f"{name}: an axis without y label (title {ax.get_title()!r})"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_text_outside_the_figure(name):
    """Tick labels, axis and colourbar labels, titles and legends all lie inside the figure."""
    fig = _drawn(name)
    r = fig.canvas.get_renderer()
    box = fig.bbox
    tol = 1.0  # pixel
    items = [(f"axes {ax.get_label() or ax.get_title()!r}", ax.get_tightbbox(r)) for ax in fig.axes]
    items += [("figure legend", leg.get_window_extent(r)) for leg in fig.legends]
    items += [(f"text {t.get_text()!r}", t.get_window_extent(r)) for t in fig.texts if t.get_text()]
    for what, bb in items:
        assert bb.x0 >= box.x0 - tol and bb.y0 >= box.y0 - tol, f"{name}: {what} cut off at left/bottom: {bb}"
        assert bb.x1 <= box.x1 + tol and bb.y1 <= box.y1 + tol, f"{name}: {what} cut off at right/top: {bb}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_legends_do_not_cover_the_curves(name):
    """A legend inside the axes covers at most 5% of the points of any drawn curve."""
    fig = _drawn(name)
    r = fig.canvas.get_renderer()
    for ax in _plot_axes(fig):
        leg = ax.get_legend()
        if leg is None:
            continue
        lb, ab = leg.get_window_extent(r), ax.get_window_extent(r)
        if lb.x1 <= ab.x0 or lb.x0 >= ab.x1 or lb.y1 <= ab.y0 or lb.y0 >= ab.y1:
            continue  # outside the axes
        for line in ax.get_lines():
            xy = line.get_xydata()
            if len(xy) < 5 or np.unique(xy[:, 0]).size == 1 or np.unique(xy[:, 1]).size == 1:
                continue  # reference lines (axhline, axvline)
            pts = ax.transData.transform(xy[np.all(np.isfinite(xy), axis=1)])
            inside = np.mean((pts[:, 0] > lb.x0) & (pts[:, 0] < lb.x1) & (pts[:, 1] > lb.y0) & (pts[:, 1] < lb.y1))
            assert inside <= 0.05, f"{name}: legend covers {inside:.0%} of {line.get_label()!r}"


def _norm_lines(fig):
    ax = fig.axes[0]
    return {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label().startswith("||")}


def test_identical_norm_curves_stay_distinguishable():
    fig = plots.training_curves(_train_records(identical_kq=True), stages=STAGES, v=V)
    lines = _norm_lines(fig)
    k = next(ln for lab, ln in lines.items() if lab.startswith("||W_K||"))
    q = next(ln for lab, ln in lines.items() if lab.startswith("||W_Q||"))
    np.testing.assert_array_equal(k.get_ydata(), q.get_ydata())
    assert (k.get_linestyle(), k.get_marker()) != (q.get_linestyle(), q.get_marker())
    assert "identical to ||W_K||" in q.get_label()
    # different curves are not called identical
    lines = _norm_lines(plots.training_curves(_train_records(identical_kq=False), stages=STAGES, v=V))
    assert not any("identical" in lab for lab in lines)


def _tick_texts(ax):
    return [t.get_text() for t in ax.get_yticklabels() if t.get_text()]


def test_narrow_ranges_have_plain_linear_ticks_wide_ranges_log():
    """K_eff / v within 1.0015 of 1: linear ticks without a x10^k factor or offset; a range of
    a decade or more: log axis."""
    fig = _draw(plots.training_curves(_train_records(narrow_K=True), stages=STAGES, v=V))
    ax_k = next(ax for ax in fig.axes if ax.get_ylabel().startswith("K_eff"))
    assert ax_k.get_yscale() == "linear"
    texts = _tick_texts(ax_k)
    assert len(texts) >= 3 and not any("times" in t or "10^" in t for t in texts), texts
    assert ax_k.yaxis.get_offset_text().get_text() == ""
    assert fig.axes[0].get_yscale() == "log"  # norms from 0.1 to 3.6
    fig = plots.training_curves(_train_records(narrow_K=False), stages=STAGES, v=V)
    ax_k = next(ax for ax in fig.axes if ax.get_ylabel().startswith("K_eff"))
    assert ax_k.get_yscale() == "log"  # K_eff / v from 1 to 15.5


def test_stage_boundaries_are_drawn_in_every_panel_and_explained_once():
    fig = plots.training_curves(_train_records(), stages=STAGES, v=V)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "stage-1 end (norm rule): step 40" and len(labels) == 4
    for ax in _plot_axes(fig):
        xs = {ln.get_xdata()[0] for ln in ax.get_lines() if np.unique(ln.get_xdata()).size == 1}
        assert {40, 150, 30, 200} <= xs


def _cell_texts(fig):
    return [t.get_text() for t in fig.axes[1].texts]


def test_head_annotations_differ_when_values_differ_at_the_4th_digit():
    ratios = [1.0, 1.001, 0.999, 1.0004, 1.0012, 0.9996, 1.002, 1.003]
    fig = plots.attention_head_ratios([{"step": 7, "attn_topic_ratio_heads": ratios}], 2, 4)
    texts = _cell_texts(fig)
    assert len(texts) == 8 and len(set(texts)) == 8, texts
    assert [float(t) for t in texts] == pytest.approx(ratios, abs=5e-6)


@given(
    st.floats(0.2, 9.0),
    st.lists(st.integers(-60, 60), min_size=2, max_size=8, unique=True),
)
def test_annotation_format_separates_values_distinct_at_4_significant_digits(base, ks):
    base = float(f"{base:.4g}")
    step = 10.0 ** (np.floor(np.log10(base)) - 3)  # one unit in the 4th significant digit
    vals = [base + k * step for k in ks]
    fmt = annotation_format(vals)
    assert len({fmt.format(x) for x in vals}) == len(vals), (fmt, vals)
    assert annotation_format([1.0, 1.0, 1.0]) == "{:.2f}"  # no extra digits without a reason


def test_head_ratio_colours_are_centred_at_one():
    fig = plots.attention_head_ratios([{"step": 0, "attn_topic_ratio_heads": [0.9, 1.0, 1.05, 1.1]}], 2, 2)
    norm = fig.axes[1].images[0].norm
    assert norm.vmin < 1 < norm.vmax and (norm.vmin + norm.vmax) / 2 == pytest.approx(1.0)
    fig = plots.attention_head_ratios([{"step": 0, "attn_topic_ratio_heads": [0.2, 1.0, 3.0, 5.0]}], 2, 2)
    norm = fig.axes[1].images[0].norm
    assert norm.vmin * norm.vmax == pytest.approx(1.0)  # geometric centre 1 on the log scale


def test_heatmap_axis_labels_follow_the_matrix_kind():
    for axes in (plots.VALUE_AXES, plots.SCORE_AXES, plots.KQ_AXES, plots.GRAM_AXES):
        ax = plots.heatmap(_token_matrix(), ax_labels=axes).axes[0]
        assert (ax.get_xlabel(), ax.get_ylabel()) == axes
    assert plots.VALUE_AXES == ("input token (column)", "output token (row)")
    assert plots.SCORE_AXES == ("key token (column)", "query token (row)")
    ax = plots.heatmap_pair(_token_matrix(), _token_matrix()).axes[0]
    assert ax.get_ylabel() == "output token (row)"  # heatmap_pair draws W^V by default
    ax = plots.heatmap(_token_matrix()).axes[0]
    assert "query" not in ax.get_ylabel() and "key" not in ax.get_xlabel()  # the default claims no role


def test_figure_functions_leave_the_data_unchanged():
    M = _token_matrix()
    before = M.copy()
    plots.heatmap(M)
    plots.heatmap_pair(M, M)
    np.testing.assert_array_equal(M, before)


def test_head_count_mismatch_names_the_expected_count():
    recs = [{"step": 0, "attn_topic_ratio_heads": [1.0, 1.1, 0.9, 1.2]}]
    with pytest.raises(ValueError, match="n_layers \\* n_heads = 6"):
        plots.attention_head_ratios(recs, 2, 3)


# ----------------------------------------------------------------------------- issue 26 item 9: trust at a glance
def _colourbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_colourbar_says_what_its_colour_shows(name):
    for cb in _colourbars(FIGURES[name]()):
        assert (cb.get_ylabel() or cb.get_xlabel()).strip(), f"{name}: a colourbar without a label"


def _overlaps(a, b):
    return not (a.x1 <= b.x0 or a.x0 >= b.x1 or a.y1 <= b.y0 or a.y0 >= b.y1)


#: figures whose legends sit beside the panels (never over data), checked geometrically
LEGENDS_OUTSIDE = ("stage2_growth", "loss_vs_K", "attention_landscape")


@pytest.mark.parametrize("name", LEGENDS_OUTSIDE)
def test_legend_lies_outside_every_panel(name):
    fig = _drawn(name)
    r = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends, f"{name}: no legend"
    for leg in legends:
        for ax in _plot_axes(fig):
            assert not _overlaps(leg.get_window_extent(r), ax.get_window_extent(r)), f"{name}: a legend over a panel"


def test_landscape_legend_outside_every_panel_and_round_colourbar_ticks():
    fig = _drawn("attention_landscape")
    r = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends, "the optimum and K* are explained in a legend"
    for leg in legends:
        for ax in _plot_axes(fig):
            assert not _overlaps(leg.get_window_extent(r), ax.get_window_extent(r)), "a legend over a panel"
    (cb,) = _colourbars(fig)
    ticks = cb.get_yticks()
    lo, hi = cb.get_ylim()
    ticks = ticks[(ticks >= lo) & (ticks <= hi)]
    assert ticks.size >= 3
    step = np.diff(ticks)
    np.testing.assert_allclose(step, step[0], rtol=1e-9)  # evenly spaced values ...
    mant = step[0] / 10.0 ** np.floor(np.log10(step[0]))
    assert any(np.isclose(mant, m) for m in (1, 2, 2.5, 5)), step[0]  # ... at a round step
    assert all(len(t.get_text().lstrip("-").replace(".", "").strip("0")) <= 4 for t in cb.get_yticklabels())
    # drawn to scale: the tick positions are linear in their values
    pos = cb.transData.transform(np.c_[np.zeros_like(ticks), ticks])[:, 1]
    np.testing.assert_allclose(np.diff(pos), np.diff(pos)[0], rtol=1e-6)


def _phase_fig(values, kind="overlap", level=0.5, boundary=(1.0, 1.0, 1.0, np.nan)):
    return phase_heatmaps(
        [_phase(kind, values)], "value_correlation", level=level, boundaries=[np.array(boundary)], title="t"
    )


def test_phase_colourbar_in_words_with_the_level_marked_and_named():
    fig = _draw(_phase_fig((0.0, 0.25, 0.5, 0.75, 1.0)))
    ax, cb = fig.axes[0], _colourbars(fig)[0]
    label = cb.get_ylabel()
    assert "value_correlation" not in label and "Pearson" in label and "unit" in label and "level 0.5" in label
    assert any(np.allclose(ln.get_ydata(), 0.5) for ln in cb.get_lines()), "the level drawn on the colourbar"
    assert "= 0.5 (the level)" in ax.get_legend().get_texts()[0].get_text()
    fig = _draw(_phase_fig((0.0, 0.5, 1.0), kind="zipf", level=0.0, boundary=(np.nan,) * 4))
    assert "never crosses the level 0" in fig.axes[0].get_title()


@pytest.mark.parametrize(
    "values",
    [(0.0, 0.5, 2.0, 8.0), (0.0, 0.3, 0.6, 0.9), (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0), (0.0, 0.5, 0.999, 1.0)],
)
def test_phase_x_axis_is_honest(values):
    """Unequal steps between the grid values are unequal distances on the axis; the cells are centred
    at the values' positions, in order; a linear axis places every value at itself."""
    kind = "zipf" if max(values) > 1 else "overlap"
    ax = _draw(_phase_fig(values, kind=kind)).axes[0]
    ticks = ax.get_xticks()
    labels = [float(t.get_text()) for t in ax.get_xticklabels()]
    assert labels == [float(f"{x:g}") for x in values if float(f"{x:g}") in labels] and len(labels) >= 2
    pos = ax.get_xticks()
    assert np.all(np.diff(pos) > 0)
    steps = np.diff(values)
    if not np.allclose(steps, steps[0]):
        assert not np.allclose(np.diff(ticks), np.diff(ticks)[0]), "unequal values equally spaced"
    to_axis, xlabel = x_axis(kind, values)
    if "log" not in xlabel:
        np.testing.assert_allclose(pos, labels)
    else:  # linear up to 0.9, one decade of 1 - eps per 0.1 beyond
        x = np.asarray(values)
        np.testing.assert_allclose(to_axis(x[x <= 0.9]), x[x <= 0.9])
        big = x[(x > 0.9) & (x < 1)]
        np.testing.assert_allclose(np.diff(to_axis(big)), 0.1 * np.diff(-np.log10(1 - big)))
        assert to_axis(1.0) > to_axis(big).max()


def test_overlapping_norm_curves_are_called_so_and_stay_distinguishable():
    recs = _train_records(identical_kq=True)
    for r in recs:
        r["norm_W_Q"] *= 1.002  # 0.2% apart: on top of each other at any readable size
    lines = _norm_lines(plots.training_curves(recs, stages=STAGES, v=V))
    k = next(ln for lab, ln in lines.items() if lab.startswith("||W_K||"))
    q = next(ln for lab, ln in lines.items() if lab.startswith("||W_Q||"))
    assert "overlaps ||W_K||: within 0.20%" in q.get_label()
    assert (k.get_linestyle(), k.get_marker()) != (q.get_linestyle(), q.get_marker())
    assert k.get_markevery() != q.get_markevery()  # markers staggered, not stacked
    far = _norm_lines(plots.training_curves(_train_records(identical_kq=False), stages=STAGES, v=V))
    assert not any("overlaps ||W_V" in lab for lab in far)


def test_deep_model_figure_is_a_grid_not_a_strip():
    deep = [{k: r[k] for k in r if k != "K_eff_median"} for r in _train_records(deep=True)]  # three panels
    for fig in (plots.training_curves(deep, stages=STAGES), plots.training_curves(_train_records(deep=True), v=V)):
        w, h = fig.get_size_inches()
        assert w / h <= 2.0, (w, h)
        norms = _plot_axes(fig)[0]
        lines = [ln for ln in norms.get_lines() if ln.get_label().startswith("||")]
        styles = {(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in lines}
        assert len(styles) == len(lines) == 8  # every layer and matrix drawn differently


def test_finite_n_figure_is_log_log_with_a_fitted_slope():
    fig = FIGURES["finite_n_gap"]()
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    fit = next(t for t in labels if t.startswith("fit: slope"))
    assert float(fit.split()[2]) == pytest.approx(-1.0, abs=0.01)  # synthetic 0.37 / N
    assert any("1/N" in t for t in labels)


def test_heatmaps_name_their_matrix_and_colour():
    fig = plots.heatmap_pair(_token_matrix(0), _token_matrix(1), titles=("a", "b"), suptitle="W^V")
    assert "W^V" in _colourbars(fig)[0].get_ylabel()
    fig = plots.gram_pair(_token_matrix(0), _token_matrix(1))
    assert "Gram" in _colourbars(fig)[0].get_ylabel()
