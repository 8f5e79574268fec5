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
    """Per-layer, per-head heatmap of the same-minus-different-topic attention gap ``(L, H)``.

    Heads whose bootstrap CI (``gap_ci``) excludes 0 are marked ``+`` (CI above 0) or ``-`` (below). The colour
    scale is symmetric, ``[-v, v]`` with ``v`` the largest finite ``|gap|`` (1 if there is none).

    Parameters
    ----------
    gap : array_like, shape (L, H)
        ``lift(same_topic) - lift(different_topic)`` per head
        (:attr:`~theorycheck.realdata.stats.AttentionStats.gap`); NaN allowed.
    gap_ci : array_like, shape (L, H, 2), optional
        Lower and upper bootstrap bounds of the gap; no marks without it.
    title : str, default "attention lift: same topic - different topic"
        Axes title (a line on the marks is added under it).

    Returns
    -------
    matplotlib.figure.Figure
        One heatmap axes and its colourbar; not saved (the caller's job).

    See Also
    --------
    theorycheck.realdata.pipeline.attention_statistics : Computes ``gap`` and ``gap_ci``.
    attention_class_lines : The class lifts against the layer.
    attention_theory_heads : Each head's gap beside the theory's.

    Examples
    --------
    >>> from theorycheck.realdata.plots import attention_gap_heatmap
    >>> gap = np.array([[0.5, -0.2, 0.0], [0.1, 0.3, -0.4]])
    >>> fig = attention_gap_heatmap(gap, np.stack([gap - 0.1, gap + 0.1], axis=-1))
    >>> ax = fig.axes[0]
    >>> len(fig.axes), ax.get_xlabel(), ax.get_ylabel(), ax.images[0].get_clim()
    (2, 'head', 'layer', (-0.5, 0.5))
    >>> sorted(t.get_text() for t in ax.texts if t.get_text())  # CIs excluding 0: two above, two below
    ['+', '+', '-', '-']
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
    """Head-averaged attention lift ``n A[i, j]`` per pair class against the layer (log scale, 1 = uniform).

    Parameters
    ----------
    mean_lift : array_like, shape (L, H, C)
        Mean lift per layer, head and class (``AttentionStats.mean_lift``); a
        class that is NaN everywhere (empty) is left out.
    classes : sequence of str, length C
        Class names, the legend labels.

    Returns
    -------
    matplotlib.figure.Figure
        One axes: a line per non-empty class (the mean over heads of each layer) and the uniform level 1.

    See Also
    --------
    theorycheck.realdata.pipeline.attention_statistics : Computes ``mean_lift``.
    attention_gap_heatmap : The same-minus-different gap per head.
    theorycheck.realdata.stats.ATTN_CLASSES : The classes of the pipeline.

    Examples
    --------
    >>> from theorycheck.realdata.plots import attention_class_lines
    >>> classes = ("same_token", "same_topic", "different_topic", "no_topic", "top_cooccurring")
    >>> mean_lift = np.ones((3, 2, 5))
    >>> mean_lift[..., 1], mean_lift[..., 3] = 2.0, np.nan  # no_topic empty: left out
    >>> ax = attention_class_lines(mean_lift, classes).axes[0]
    >>> [line.get_label() for line in ax.get_lines()], ax.get_yscale()
    (['same_token', 'same_topic', 'different_topic', 'top_cooccurring', 'uniform'], 'log')
    >>> ax.get_lines()[1].get_ydata()  # same_topic: the head mean of each layer
    array([2., 2., 2.])
    """
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
    """Histograms (densities) of an embedding similarity per pair class, on common bin edges.

    Parameters
    ----------
    values : dict
        Class name -> 1-d array of the similarities of its pairs (empty arrays are skipped).
    metric : str, default "cosine"
        Name of the similarity, for the labels.
    bins : int, default 60
        Number of bins between the smallest and the largest value over all classes.
    exclude : collection of str, default ()
        Classes to leave out (e.g. ``same_token`` for cosine, identically 1).

    Returns
    -------
    matplotlib.figure.Figure
        One axes, a step histogram per class labelled with the class mean.

    See Also
    --------
    theorycheck.realdata.pipeline.embedding_statistics : Returns the ``values`` of each metric.
    theory_similarity : The cosine matrices of the theory and the model.
    specificity_gap : The gap of the class means against the kept fraction of topic words.

    Examples
    --------
    >>> from theorycheck.realdata.plots import similarity_distributions
    >>> rng = np.random.default_rng(0)
    >>> values = {"same_token": np.ones(5), "same_topic": rng.normal(0.4, 0.1, 200),
    ...           "different_topic": rng.normal(0.2, 0.1, 300)}
    >>> ax = similarity_distributions(values, exclude=("same_token",), bins=20).axes[0]
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['same_topic (mean 0.402)', 'different_topic (mean 0.195)']
    >>> ax.get_xlabel()
    "cosine similarity of a word pair's embeddings"
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
    """Embedding same-minus-different-topic gap (with its CI) against the kept fraction of each topic's words.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`theorycheck.realdata.pipeline.specificity_sweep`: ``top_fraction`` and, when measured,
        ``cosine`` and ``dot`` with ``gap``, ``ci_low``, ``ci_high``.

    Returns
    -------
    matplotlib.figure.Figure
        One axes (log ``x``): the cosine and dot gaps with error bars, and the level 0.

    See Also
    --------
    theorycheck.realdata.pipeline.specificity_sweep : Computes the rows.
    similarity_distributions : The class distributions at one fraction.

    Examples
    --------
    >>> from theorycheck.realdata.plots import specificity_gap
    >>> rows = [{"top_fraction": f, "cosine": {"gap": g, "ci_low": g - 0.02, "ci_high": g + 0.02},
    ...          "dot": {"gap": 2 * g, "ci_low": 2 * g - 0.05, "ci_high": 2 * g + 0.05}}
    ...         for f, g in [(0.01, 0.2), (0.05, 0.1)]]
    >>> ax = specificity_gap(rows).axes[0]
    >>> [t.get_text() for t in ax.get_legend().get_texts()], ax.get_xscale()
    (['cosine gap', 'dot gap'], 'log')
    """
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
    """Cosine similarity of topic tokens sorted by topic, theory beside the pretrained model, and their gaps.

    Left panels: the exact optimum of the tied embedding model at the fitted topics and the pretrained
    embeddings (one panel per source, topic boundaries drawn, colours clipped to the 1-99% quantiles of the
    off-diagonal entries); right: the same-minus-different-topic cosine gap with its bootstrap CI for each source.

    Parameters
    ----------
    data : dict
        ``cosine`` (source name -> ``(n, n)`` cosine matrix), ``n_words`` (``n``) and ``boundaries`` (indices
        where a new topic starts), as in :func:`theorycheck.realdata.theory.theory_comparison`'s ``figure``.
    table : list of dict
        One row per source: ``source`` and ``cosine`` with ``gap``, ``ci_low``, ``ci_high`` (its summary's
        ``table``).

    Returns
    -------
    matplotlib.figure.Figure
        One heatmap axes per source, the gap axes, and a colourbar per heatmap.

    See Also
    --------
    theorycheck.realdata.theory.theory_comparison : Computes ``data`` and ``table``.
    theorycheck.realdata.theory.format_theory_table : The same table as text.
    similarity_distributions : The distributions of the model's similarities by class.

    Examples
    --------
    >>> from theorycheck.realdata.plots import theory_similarity
    >>> z = np.repeat([0, 1], 3)  # 6 tokens, 2 topics
    >>> same = (z[:, None] == z[None, :]).astype(float)
    >>> data = {"n_words": 6, "boundaries": [3], "cosine": {"theory": 0.9 * same + 0.1, "MiniLM": 0.3 * same + 0.2}}
    >>> table = [{"source": "theory", "cosine": {"gap": 0.9, "ci_low": 0.85, "ci_high": 0.95}},
    ...          {"source": "MiniLM", "cosine": {"gap": 0.3, "ci_low": 0.2, "ci_high": 0.4}}]
    >>> fig = theory_similarity(data, table)
    >>> len(fig.axes), [t.get_text() for t in fig.axes[2].get_xticklabels()]
    (5, ['theory', 'MiniLM'])
    >>> fig.axes[0].get_title()
    'theory: 6 topic tokens sorted by topic'
    """
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
    """Measured attention lift per head (points, 95% window-bootstrap CI) against the theory's prediction (band).

    Top: the gap same - different topic; bottom: the ratio same / different topic; heads grouped by layer, one
    colour per layer; the theory's value is a horizontal line with its 95% band.

    Parameters
    ----------
    summary : dict
        :func:`theorycheck.realdata.attention_theory.attention_theory`'s summary: ``heads`` (dicts with
        ``layer``, ``head``, ``gap``, ``gap_ci``, ``ratio``, ``ratio_ci``, ordered by layer, then head),
        ``theory`` (``gap``, ``gap_ci``, ``ratio``, ``ratio_ci``), ``optimum`` (``alpha``, ``beta``) and
        optionally ``heads_definition`` (``"all_keys"``, the default, or an own-word-excluded definition).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes sharing ``x`` and one legend below them.

    See Also
    --------
    theorycheck.realdata.attention_theory.attention_theory : Computes ``summary``.
    attention_gap_heatmap : The measured gap per head as a heatmap.
    theorycheck.realdata.attention_theory.format_attention_table : The same comparison as text.

    Examples
    --------
    >>> from theorycheck.realdata.plots import attention_theory_heads
    >>> heads = [{"layer": l, "head": h, "gap": 0.1 * h, "gap_ci": [0.1 * h - 0.05, 0.1 * h + 0.05],
    ...           "ratio": 1 + 0.1 * h, "ratio_ci": [0.95 + 0.1 * h, 1.05 + 0.1 * h]}
    ...          for l in range(2) for h in range(3)]
    >>> theory = {"gap": 0.05, "gap_ci": [0.04, 0.06], "ratio": 1.05, "ratio_ci": [1.04, 1.06]}
    >>> fig = attention_theory_heads({"heads": heads, "theory": theory, "optimum": {"alpha": 8.7, "beta": 0.015}})
    >>> len(fig.axes), [t.get_text() for t in fig.axes[1].get_xticklabels()]
    (2, ['layer 0', 'layer 1'])
    >>> for t in fig.legends[0].get_texts():
    ...     print(t.get_text())
    theory gap 0.05 [0.04, 0.06] (95% band)
    MiniLM layer 0
    MiniLM layer 1
    theory ratio 1.05 [1.04, 1.06] (95% band)
    """
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
