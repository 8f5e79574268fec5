"""Figures of the real-data experiment (SPEC §5.4): data in, Figure out, no mathematics (see theorycheck.report.plots).

Constrained layout throughout, so colourbars, tick labels and legends stay inside the figure.
"""

from __future__ import annotations

import numpy as np

from ..report._plotstyle import colorbar, figure, log_axis

__all__ = [
    "attention_gap_heatmap",
    "attention_class_lines",
    "similarity_distributions",
    "specificity_gap",
    "theory_similarity",
    "attention_theory_heads",
]


def attention_gap_heatmap(gap, gap_ci=None, *, title: str = "attention lift: same topic - different topic"):
    """Per-layer, per-head heatmap of the same-minus-different attention gap ``(L, H)``.

    Heads whose bootstrap CI (``gap_ci``, shape ``(L, H, 2)``) excludes 0 are marked ``+``/``-``.
    """
    gap = np.asarray(gap, dtype=float)
    fig = figure(2.2 + 0.5 * gap.shape[1], 1.6 + 0.45 * gap.shape[0])
    ax = fig.add_subplot(1, 1, 1)
    finite = np.abs(gap[np.isfinite(gap)])
    v = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    im = ax.imshow(gap, cmap="RdBu_r", vmin=-v, vmax=v, aspect="auto")
    colorbar(fig, im, ax, label="lift n·A: same topic - different topic\n(units of the uniform weight 1/n)")
    if gap_ci is not None:
        ci = np.asarray(gap_ci, dtype=float)
        for (l, h), _g in np.ndenumerate(gap):
            mark = "+" if ci[l, h, 0] > 0 else ("-" if ci[l, h, 1] < 0 else "")
            ax.text(h, l, mark, ha="center", va="center", fontsize=8)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(gap.shape[1]))
    ax.set_yticks(range(gap.shape[0]))
    marked = "\n+ / -: bootstrap CI above / below 0" if gap_ci is not None else ""
    ax.set_title(title + marked, fontsize=9)
    return fig


def attention_class_lines(mean_lift, classes):
    """Head-averaged attention lift ``n A`` per class against the layer (``mean_lift`` (L, H, C))."""
    m = np.asarray(mean_lift, dtype=float)
    fig = figure(5.8, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    for c, name in enumerate(classes):
        if np.all(np.isnan(m[..., c])):  # empty class (no such pair in the data)
            continue
        ax.plot(np.arange(m.shape[0]), m[..., c].mean(axis=1), marker="o", label=name)
    ax.axhline(1.0, color="k", lw=0.6, ls=":", label="uniform")
    log_axis(ax, "y", [m[np.isfinite(m)], 1.0])
    ax.set_xlabel("layer")
    ax.set_ylabel("mean n·A[i, j] (head average)")
    ax.legend(fontsize=7)
    return fig


def similarity_distributions(values: dict, *, metric: str = "cosine", bins: int = 60, exclude=()):
    """Histograms (densities) of a similarity per pair class; ``values`` maps class -> 1-d array.

    ``exclude`` names classes to leave out (e.g. ``same_token`` for cosine, identically 1).
    """
    values = {k: v for k, v in values.items() if k not in exclude}
    fig = figure(5.8, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    arrays = [np.asarray(v, dtype=float) for v in values.values() if len(v)]
    if arrays:
        lo = min(a.min() for a in arrays)  # common bin edges for every class
        hi = max(a.max() for a in arrays)
        edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
        for name, v in values.items():
            v = np.asarray(v, dtype=float)
            if v.size:
                ax.hist(v, bins=edges, density=True, histtype="step", label=f"{name} (mean {v.mean():.3g})")
    ax.set_xlabel(f"{metric} similarity of a word pair's embeddings")
    ax.set_ylabel("density")
    ax.set_title(f"embedding {metric} similarity by pair class", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def specificity_gap(rows: list):
    """Embedding same-minus-different-topic gap (with CI) against the kept fraction of each topic's
    words (``rows`` from :func:`theorycheck.realdata.pipeline.specificity_sweep`)."""
    fig = figure(5.8, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    for m, mk in (("cosine", "o"), ("dot", "s")):
        pts = [r for r in rows if m in r]
        if not pts:
            continue
        x = np.array([r["top_fraction"] for r in pts])
        y = np.array([r[m]["gap"] for r in pts])
        lo = y - np.array([r[m]["ci_low"] for r in pts])
        hi = np.array([r[m]["ci_high"] for r in pts]) - y
        ax.errorbar(x, y, yerr=[lo, hi], marker=mk, capsize=3, label=f"{m} gap")
    ax.axhline(0.0, color="k", lw=0.6, ls=":")
    log_axis(ax, "x", [r["top_fraction"] for r in rows])
    ax.set_xlabel("top fraction of each topic's words given the topic")
    ax.set_ylabel("same topic - different topic")
    ax.legend(fontsize=7)
    return fig


def theory_similarity(data: dict, table: list):
    """Cosine similarity of topic tokens sorted by topic: the exact optimum of the tied embedding model at
    the fitted topics (left) and the pretrained embeddings (middle), topic boundaries drawn; right: the
    same-minus-different-topic cosine gap with its bootstrap CI for each source (``data`` and ``table``
    from :func:`theorycheck.realdata.theory.theory_comparison`)."""
    names = list(data["cosine"])
    fig = figure(4.0 * len(names) + 3.0, 4.2)
    axes = fig.subplots(1, len(names) + 1, width_ratios=[4.0] * len(names) + [2.2])
    n = data["n_words"]
    for ax, name in zip(axes, names):
        C = np.asarray(data["cosine"][name], dtype=float)
        off = C[~np.eye(n, dtype=bool)]
        lo, hi = np.quantile(off, [0.01, 0.99]) if off.size else (-1.0, 1.0)
        im = ax.imshow(C, cmap="viridis", vmin=lo, vmax=hi, interpolation="nearest")
        for b in data["boundaries"]:
            ax.axhline(b - 0.5, color="w", lw=0.3)
            ax.axvline(b - 0.5, color="w", lw=0.3)
        colorbar(fig, im, ax, label="cosine")
        ax.set_title(f"{name}: {n} topic tokens sorted by topic", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    ax = axes[-1]
    for k, r in enumerate(table):
        c = r["cosine"]
        ax.errorbar([k], [c["gap"]], yerr=[[c["gap"] - c["ci_low"]], [c["ci_high"] - c["gap"]]], marker="o", capsize=4)
    ax.axhline(0.0, color="k", lw=0.6, ls=":")
    ax.set_xticks(range(len(table)))
    ax.set_xticklabels([r["source"] for r in table])
    ax.set_xlim(-0.6, len(table) - 0.4)
    ax.set_ylabel("cosine: same topic - different topic (95% CI)")
    return fig


def attention_theory_heads(summary: dict):
    """Measured attention lift per MiniLM head (points, 95% window-bootstrap CI) against the theory's prediction
    (line, 95% band); top: gap same - different topic, bottom: ratio same / different topic. ``summary`` is
    :func:`theorycheck.realdata.attention_theory.attention_theory`'s (heads ordered by layer, then head)."""
    heads, th = summary["heads"], summary["theory"]
    n_layers = 1 + max(h["layer"] for h in heads)
    n_heads = 1 + max(h["head"] for h in heads)
    x = np.array([h["layer"] * (n_heads + 1) + h["head"] for h in heads], dtype=float)
    fig = figure(max(6.0, 0.11 * x.size + 2.0), 6.4)
    axes = fig.subplots(2, 1, sharex=True)
    colours = [f"C{k % 10}" for k in range(n_layers)]
    all_keys = summary.get("heads_definition", "all_keys") == "all_keys"
    lift = "lift n·A" if all_keys else "lift, own word excl."
    for ax, key, ref, label in (
        (axes[0], "gap", 0.0, f"{lift}:\nsame - different topic"),
        (axes[1], "ratio", 1.0, f"{lift}:\nsame / different topic"),
    ):
        y = np.array([h[key] for h in heads], dtype=float)
        ci = np.array([h[f"{key}_ci"] for h in heads], dtype=float)
        for layer in range(n_layers):
            sel = np.array([h["layer"] == layer for h in heads])
            ax.errorbar(x[sel], y[sel], yerr=[y[sel] - ci[sel, 0], ci[sel, 1] - y[sel]], fmt="o", ms=3, lw=0.8,
                        capsize=1.5, color=colours[layer], label=f"MiniLM layer {layer}")  # fmt: skip
        lo, hi = th[f"{key}_ci"]
        ax.axhspan(lo, hi, color="k", alpha=0.15, lw=0)
        style = dict(color="k", lw=1.2, ls="-" if key == "gap" else "--")
        ax.axhline(th[key], **style, label=f"theory {key} {th[key]:.4g} [{lo:.4g}, {hi:.4g}] (95% band)")
        ax.axhline(ref, color="k", lw=0.6, ls=":")
        ax.set_ylabel(label, fontsize=8)
    o = summary["optimum"]
    axes[0].set_title(
        f"theory: optimal alpha I + beta Z at the fitted topics (alpha* = {o['alpha']:.3g}, beta* = {o['beta']:.3g}); "
        "MiniLM: per head, 95% CI"
        + ("" if all_keys else "\nboth sides: the query's own position and own word excluded, other keys renormalised"),
        fontsize=9,
    )
    handles, labels = axes[0].get_legend_handles_labels()
    h1, l1 = axes[1].get_legend_handles_labels()
    theory = [k for k, lab in enumerate(l1) if lab.startswith("theory")]
    handles += [h1[k] for k in theory]
    labels += [l1[k] for k in theory]
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7)  # below the panels, off the data
    axes[1].set_xticks([layer * (n_heads + 1) + (n_heads - 1) / 2 for layer in range(n_layers)])
    axes[1].set_xticklabels([f"layer {layer}" for layer in range(n_layers)])
    axes[1].set_xlabel("MiniLM head (grouped by layer, heads 0.. left to right)")
    return fig
