"""Training figures (SPEC §5.2): norm curves with the stage boundaries, per-head attention ratios.

Data in (``metrics.jsonl`` records), Figure out; re-exported by :mod:`theorycheck.report.plots`.
"""

from __future__ import annotations

import numpy as np

from .._mpl import mpl
from ._plotstyle import LINE_STYLES, annotation_format, auto_scale, colorbar, figure, legend_outside

__all__ = ["attention_head_ratios", "stage2_growth", "stage_grid", "training_curves"]

_NORM_LABELS = {
    "norm_W_V": "||W^V||",
    "norm_KQ": "||W_K^T W_Q||",
    "norm_W_K": "||W_K||",
    "norm_W_Q": "||W_Q||",
    "norm_W_E": "||W_E||",
}
_STAGE_LINES = (
    ("stage1_end", "tab:blue", "--", "stage-1 end (norm rule)"),
    ("stage2_start", "tab:orange", "--", "stage-2 start (norm rule)"),
    ("stage1_end_structure", "tab:purple", "-.", "W^V block pattern formed"),
    ("stage2_attention", "tab:green", ":", "attention favours topic (K_eff >= 1.1 v)"),
)


def _curve(records, key):
    vals = [r.get(key) for r in records]
    return np.asarray(vals, float) if vals and all(x is not None for x in vals) else None


_LAYER_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")


def _visual_gap(a, b, lo, hi, log):
    """Largest distance between curves ``a`` and ``b`` as a fraction of the axis height."""
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.abs(np.log10(a / b)) / max(np.log10(hi / lo), 1e-12)
    else:
        d = np.abs(a - b) / max(hi - lo, 1e-300)
    d = d[np.isfinite(d)]
    return float(d.max()) if d.size else 0.0


def _norm_curves(steps, records, keys):
    """``[(label, values, plot style)]`` of the norm panel."""
    if records and "norm_W_V_layers" in records[0] and "norm_W_K_layers" in records[0]:
        # deep model: colour and marker per layer, ||W^V_l|| solid, ||W_K,l|| ||W_Q,l|| dashed
        nV = np.array([r["norm_W_V_layers"] for r in records], dtype=float)
        nK = np.array([r["norm_W_K_layers"] for r in records], dtype=float)
        nQ = np.array([r["norm_W_Q_layers"] for r in records], dtype=float)
        every, n_layers = max(1, len(steps) // 8), nV.shape[1]
        curves = []
        for li in range(n_layers):
            style = dict(color=f"C{li % 10}", marker=_LAYER_MARKERS[li % len(_LAYER_MARKERS)], mfc="none", ms=5)
            style["markevery"] = (li * every // n_layers, every)
            curves.append((f"||W^V|| layer {li}", nV[:, li], dict(style, ls="-")))
            curves.append((f"||W_K|| ||W_Q|| layer {li}", nK[:, li] * nQ[:, li], dict(style, ls="--")))
        return curves
    curves, every = [], max(1, len(steps) // 12)
    for k in keys:
        arr = _curve(records, k)
        if arr is not None and arr.max() > 0:
            ls, marker, lw = LINE_STYLES[len(curves) % len(LINE_STYLES)]
            offset = (len(curves) * max(1, every // 4) % every, every)  # markers staggered between curves
            style = dict(ls=ls, marker=marker, markevery=offset, mfc="none", ms=5, lw=lw)
            curves.append((_NORM_LABELS.get(k, k), arr, style))
    return curves


def _norm_panel(ax, steps, records, keys):
    """Norm curves; coinciding curves keep distinct line styles and markers and say so in the legend."""
    curves = _norm_curves(steps, records, keys)
    pos = np.concatenate([a[a > 0] for _, a, _ in curves]) if curves else np.empty(0)
    lo, hi = (float(pos.min()), float(pos.max())) if pos.size else (1.0, 1.0)
    log = pos.size > 0 and np.log10(hi / lo) > 1.0  # the rule of auto_scale
    for n, (label, arr, style) in enumerate(curves):
        legend = label
        for prev_label, prev, _ in curves[:n]:
            if prev.shape != arr.shape:
                continue
            if np.array_equal(prev, arr):
                legend += f"\n(identical to {prev_label})"
                break
            if _visual_gap(arr, prev, lo, hi, log) < 0.01:  # within 1% of the axis height: drawn on top of each other
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel = float(np.nanmax(np.abs(arr / np.where(prev != 0, prev, np.nan) - 1.0)))
                legend += f"\n(overlaps {prev_label}: within {rel:.2%})"
                break
        ax.plot(steps, np.where(arr > 0, arr, np.nan), label=legend, **style)
    auto_scale(ax, "y", [a for _, a, _ in curves])
    ax.set_ylabel("Frobenius norm")


def _structure_panels(fig, slots, steps, bs, Ke, v):
    axes = []
    if bs is not None:
        ax = fig.add_subplot(slots.pop(0))
        ax.plot(steps, bs, color="tab:blue")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("block score of W^V (R^2)")
        ax.set_title("W^V topic structure", fontsize=9)
        axes.append(ax)
    if Ke is not None and v is not None:
        ax = fig.add_subplot(slots.pop(0))
        ax.plot(steps, Ke / v, color="tab:green")
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
        auto_scale(ax, "y", [Ke / v])
        ax.set_ylabel("K_eff / v (1 = no topic preference)")
        ax.set_title("attention to the query's topic", fontsize=9)
        axes.append(ax)
    return axes


def training_curves(
    records,
    *,
    stages=None,
    keys=("norm_W_V", "norm_KQ", "norm_W_K", "norm_W_Q", "norm_W_E"),
    title: str = "parameter norms during training",
    v: int | None = None,
):
    """Norm curves of a training run, topic structure and loss, with the stage boundaries (SPEC §5.2).

    Panels: the norms (log axis only when they span more than a decade; curves that coincide,
    e.g. ``||W_K|| = ||W_Q||``, keep distinct line styles and staggered markers and are marked
    "identical", or "overlaps" with their largest relative difference when they lie within 1% of
    the axis height; a deep model: colour and marker per layer), the block score of ``W^V`` and
    ``K_eff / v`` when the records carry ``block_score_W_V`` / ``K_eff_median`` (``K_eff / v``
    needs ``v``, words per topic; 1 = no preference for the query's topic), and the loss, in a
    grid (two panels side by side; three: the norms across the top row; four: 2 x 2). Legends sit outside the axes; the
    stage boundaries are drawn in every panel and explained once below them.

    Parameters
    ----------
    records : list of dict
        Lines of ``metrics.jsonl`` (need ``step``, ``loss`` and some of ``keys``).
    stages : dict, optional
        ``StageBoundaries.to_dict()``; vertical lines at the boundaries it found.
    """
    steps = np.array([r["step"] for r in records], dtype=float)
    bs, Ke = _curve(records, "block_score_W_V"), _curve(records, "K_eff_median")
    n = 2 + (bs is not None) + (Ke is not None and v is not None)
    rows, cols = (1, 2) if n == 2 else (2, 2)
    fig = figure(6.2 * cols, 4.0 * rows)
    grid = fig.add_gridspec(rows, cols)
    # three panels: the norms across the top row, the other two below
    slots = [grid[0, :]] + [grid[1, 0], grid[1, 1]] if n == 3 else [grid[k // cols, k % cols] for k in range(n)]
    ax1 = fig.add_subplot(slots.pop(0))
    _norm_panel(ax1, steps, records, keys)
    ax1.set_title(title, fontsize=9)
    ax2 = fig.add_subplot(slots.pop(-1))
    axes = [ax1, *_structure_panels(fig, slots, steps, bs, Ke, v), ax2]
    ax2.plot(steps, [r["loss"] for r in records], label="train loss", color="k")
    dev = [(r["step"], r["dev_loss"]) for r in records if r.get("dev_loss") is not None]
    if dev:
        ax2.plot(*zip(*dev), "o-", ms=3, label="dev loss", color="tab:red")
    ax2.set_ylabel("loss")
    ax2.set_title("loss", fontsize=9)
    for ax in axes:
        ax.set_xlabel("step")
        legend_outside(ax)
    _stage_lines(fig, axes, stages)
    return fig


def _stage_lines(fig, axes, stages):
    """Vertical lines at the stage boundaries in every panel, explained once below the panels."""
    handles = []
    for key, color, ls, label in _STAGE_LINES:
        if stages and stages.get(key) is not None:
            for ax in axes:
                line = ax.axvline(stages[key], color=color, ls=ls, lw=1, label=f"_{label}")
            handles.append((line, f"{label}: step {stages[key]:g}"))
    if handles:
        fig.legend(*zip(*handles), loc="outside lower center", ncol=min(len(handles), 4), fontsize=8)


def _ratio_norm(last):
    """Diverging colour scale centred at 1: linear for ratios within a factor 2 of 1, else logarithmic."""
    colors = mpl("matplotlib.colors")
    finite = last[np.isfinite(last) & (last > 0)]
    span = max(float(np.max(np.abs(np.log(finite)))) if finite.size else 1.0, 1e-6)
    if span < np.log(2.0):
        dev = max(float(np.max(np.abs(finite - 1.0))), 1e-6)
        return colors.Normalize(vmin=1.0 - dev, vmax=1.0 + dev)
    return colors.LogNorm(vmin=np.exp(-span), vmax=np.exp(span))


def attention_head_ratios(records, n_layers: int, n_heads: int, *, title: str = ""):
    """Same-topic : different-topic attention ratio of every layer and head during training.

    ``records``: ``metrics.jsonl`` lines; those with ``attn_topic_ratio_heads`` (layer-major, length
    ``n_layers * n_heads``, length-normalised class averages so 1 = no topic preference) are used.
    Left: one curve per head (colour = layer); right: the last evaluation as a layer x head map on a
    diverging colour scale centred at 1, each cell annotated (grids up to 64 cells) with enough
    decimals to tell apart values that differ at the 4th significant digit.
    """
    rows = [r for r in records if r.get("attn_topic_ratio_heads")]
    fig = figure(11.0, 4.2)
    ax = fig.add_subplot(1, 2, 1)
    ax.set_xlabel("step")
    ax.set_ylabel("same-topic / different-topic attention")
    if not rows:
        ax.text(0.5, 0.5, "no per-head attention statistics logged", ha="center", va="center")
        return fig
    steps = np.array([r["step"] for r in rows], dtype=float)
    R = np.array([[np.nan if x is None else x for x in r["attn_topic_ratio_heads"]] for r in rows], dtype=float)
    if R.shape[1] != n_layers * n_heads:
        raise ValueError(f"records hold {R.shape[1]} heads, expected n_layers * n_heads = {n_layers * n_heads}")
    for li in range(n_layers):
        for hi in range(n_heads):
            label = f"layer {li}" if hi == 0 else None
            ax.plot(steps, R[:, li * n_heads + hi], color=f"C{li % 10}", lw=1, label=label)
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    auto_scale(ax, "y", [R])
    ax.set_title("per head (1 = no topic preference)" + (f"\n{title}" if title else ""), fontsize=9)
    legend_outside(ax)
    ax2 = fig.add_subplot(1, 2, 2)
    last = R[-1].reshape(n_layers, n_heads)
    norm = _ratio_norm(last)
    im = ax2.imshow(last, cmap="RdBu_r", norm=norm, interpolation="nearest")
    cb = colorbar(fig, im, ax2, label="same / different (last step)")
    ticks = np.geomspace(norm.vmin, norm.vmax, 5) if norm.__class__.__name__ == "LogNorm" else None
    if ticks is not None:
        cb.set_ticks(ticks, labels=[f"{t:.3g}" for t in ticks])
        cb.ax.minorticks_off()
    else:
        cb.ax.yaxis.set_major_formatter(mpl("matplotlib.ticker").ScalarFormatter(useOffset=False))
    if last.size <= 64:
        fmt = annotation_format(last)
        for (i, j), val in np.ndenumerate(last):
            ax2.text(j, i, fmt.format(val), ha="center", va="center", fontsize=7 if last.size <= 16 else 5)
    ax2.set_xlabel("head")
    ax2.set_ylabel("layer")
    ax2.set_xticks(range(n_heads))
    ax2.set_yticks(range(n_layers))
    ax2.set_title(f"step {int(steps[-1])}", fontsize=9)
    return fig


_GRID_PANELS = (
    ("stage1_end", "stage-1 end (norm rule)"),
    ("stage2_start", "stage-2 start (norm rule)"),
    ("stage2_attention", "attention favours topic (K_eff >= 1.1 v)"),
)


def stage_grid(rows):
    """Stage boundaries over a learning-rate x init-scale grid (rows of :func:`theorycheck.nn.stage_grid`):
    one panel per boundary, cells coloured by the step (log scale over the steps shown) and labelled
    with it and with ``lr x step`` (constant along a column when a boundary scales like ``1/lr``),
    grey with ``-`` where the rule did not fire within the run. Labels are black on light cells and
    white on dark ones."""
    lrs = sorted({r["lr"] for r in rows})
    scales = sorted({r["init_scale"] for r in rows})
    colors = mpl("matplotlib.colors")
    fig = figure(4.2 * len(_GRID_PANELS) + 0.6, 0.75 * len(lrs) + 2.2)
    axes = fig.subplots(1, len(_GRID_PANELS), squeeze=False)[0]
    steps = max((r.get("steps") or 1 for r in rows), default=1)
    found = [float(r[k]) for r in rows for k, _ in _GRID_PANELS if r.get(k) is not None]
    lo = max(min(found, default=1.0), 1.0)
    norm = colors.LogNorm(vmin=lo, vmax=max(steps, 2 * lo))
    cmap = mpl("matplotlib").colormaps["viridis"].with_extremes(bad="0.9")
    for ax, (key, title) in zip(axes, _GRID_PANELS):
        M = np.full((len(lrs), len(scales)), np.nan)
        for r in rows:
            if r.get(key) is not None:
                M[lrs.index(r["lr"]), scales.index(r["init_scale"])] = max(float(r[key]), 1.0)
        im = ax.imshow(np.ma.masked_invalid(M), origin="lower", aspect="auto", cmap=cmap, norm=norm)
        for i in range(len(lrs)):
            for j in range(len(scales)):
                if np.isnan(M[i, j]):
                    ax.text(j, i, "-", ha="center", va="center", fontsize=9, color="black")
                    continue
                red, green, blue, _ = cmap(norm(M[i, j]))
                ink = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
                ax.text(j, i + 0.1, f"{int(M[i, j])}", ha="center", va="center", fontsize=9, color=ink)
                lt = f"lr x step = {lrs[i] * M[i, j]:,.0f}"
                ax.text(j, i - 0.2, lt, ha="center", va="center", fontsize=7, color=ink)
        ax.set_xticks(range(len(scales)), [f"{s:g}" for s in scales])
        ax.set_yticks(range(len(lrs)), [f"{x:g}" for x in lrs])
        ax.set_xlabel("init scale s (entries N(0, s^2))")
        ax.set_ylabel("SGD learning rate")
        ax.set_title(title, fontsize=10)
    cb = colorbar(fig, im, list(axes), label="step")
    decades = 10.0 ** np.arange(np.floor(np.log10(norm.vmin)), np.ceil(np.log10(norm.vmax)) + 1)
    ticks = np.outer(decades, [1.0, 2.0, 5.0]).ravel()
    ticks = ticks[(ticks >= norm.vmin) & (ticks <= norm.vmax)]
    if ticks.size >= 2:
        cb.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
        cb.ax.minorticks_off()
    fig.suptitle(f"two-stage dynamics (exact population): stage boundaries, {steps} steps per cell (-: not reached)")
    return fig


def stage2_growth(runs, *, window=(10.0, 50.0)):
    """Stage-2 onset (SPEC §4.5): the measured growth of the topic part of the score matrix over its
    initial value against the linearised prediction ``exp(rate * step)`` (slope only), log scale.

    ``runs``: iterable of ``(steps, topic_part, rate)``; ``window``: the growth range over which the
    rate is measured (shaded). The legend sits to the right of the axes."""
    fig = figure(7.4, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    for k, (steps, part, rate) in enumerate(runs):
        steps, part = np.asarray(steps, float), np.asarray(part, float)
        tag = f" (run {k + 1})" if k else ""
        (line,) = ax.semilogy(steps, part / part[0], label=f"measured (topic part of S){tag}")
        pred = f"linearised prediction, slope only{tag}"
        ax.semilogy(steps, np.exp(rate * steps), ls="--", color=line.get_color(), label=pred)
    ax.axhspan(*window, color="0.9", zorder=0, label="measurement window")
    ax.set_xlabel("step")
    ax.set_ylabel("growth over initial value")
    ax.set_title("stage-2 onset: predicted vs measured growth", fontsize=9)
    legend_outside(ax)
    return fig
