"""Phase-diagram figures for general topic-word matrices (SPEC §11.6): one heatmap per (conclusion, sweep).

Presentation only: the numbers come from :func:`theorycheck.analysis.phase.phase_diagram` and
:func:`theorycheck.analysis.phase.diagram_boundaries`.

The x axis is honest: every grid value sits at its true position (cells reach halfway to the
neighbours), on a linear axis when the grid is spread out. An overlap grid crowding towards
``eps = 1`` (e.g. 0.9, 0.99, 0.999, 1) is drawn on a linear axis up to ``eps = 0.9`` and a
logarithmic one in ``1 - eps`` beyond it, each decade as wide as 0.1 of eps (:func:`x_axis`); the
switch is marked and named in the axis label. The colourbar names the statistic in words with its
unit, and the level of the conclusion is drawn on it and named in the legend.
"""

from __future__ import annotations

import numpy as np

from ._plotstyle import colorbar, figure

__all__ = ["phase_heatmaps", "phase_figures", "CONCLUSIONS", "STAT_LABELS", "x_axis"]

AXIS_LABELS = {"overlap": "overlap eps (mixing with the uniform word law)", "zipf": "Zipf exponent s"}
#: statistic -> (colourbar label in words, with its unit; short name used for the level)
STAT_LABELS = {
    "value_correlation": (
        "block correlation of W^V: Pearson r of entries with\nthe same-topic indicator (no unit; 1 = perfect blocks)",
        "W^V block correlation",
    ),
    "gram_correlation": (
        "block correlation of the Gram: Pearson r of entries with\n"
        "the same-topic indicator (no unit; 1 = perfect blocks)",
        "Gram block correlation",
    ),
    "value_gap": ("W^V same-topic minus different-topic mean entry\n(units of W^V entries)", "W^V gap"),
    "gram_gap": ("Gram same-topic minus different-topic mean entry\n(units of Gram entries)", "Gram gap"),
    "value_energy": ("W^V energy explained by topic blocks (fraction, 0 to 1)", "W^V block energy"),
    "gram_energy": ("Gram energy explained by topic blocks (fraction, 0 to 1)", "Gram block energy"),
    "attention_preference": (
        "same-topic minus different-topic attention per key\n(units of the uniform weight 1/N; 0 = no preference)",
        "attention preference",
    ),
    "attention_alpha": ("optimal alpha: score of the same word (logit units)", "alpha"),
    "attention_beta": ("optimal beta: score per unit co-topic similarity (logit units)", "beta"),
}
#: conclusion -> (statistic drawn, level of the conclusion, title)
CONCLUSIONS = {
    "value": ("value_correlation", 0.0, "min-norm stage-1 W^V: same-topic vs different-topic (block correlation)"),
    "gram": ("gram_correlation", 0.0, "min-norm tied embedding Gram: same vs different topic (block correlation)"),
    "attention": ("attention_preference", 0.0, "optimal scores alpha I + beta G: same-topic attention preference"),
}
_SWITCH = 0.9  # overlap: linear in eps up to here, then logarithmic in 1 - eps
_MIN_CELL = 0.04  # a linear axis whose narrowest cell is below this fraction of the range is too crowded


def x_axis(kind: str, values) -> tuple:
    """``(to_axis, xlabel)``: the map from grid values to axis positions and the axis label.

    Linear (the values themselves) unless an overlap grid crowds towards 1 (a cell narrower than 4%
    of the range): then positions are ``eps`` up to 0.9 and ``0.9 + 0.1 log10(0.1 / (1 - eps))``
    beyond (one decade of ``1 - eps`` per 0.1), with ``eps = 1`` one decade past the last ``eps < 1``.
    """
    x = np.asarray(values, dtype=float)
    label = AXIS_LABELS.get(kind, "x")
    gaps = np.diff(np.sort(x))
    span = float(x.max() - x.min()) if x.size else 0.0
    if kind != "overlap" or x.size < 2 or span <= 0 or gaps.min() >= _MIN_CELL * span or x.max() <= _SWITCH:
        return (lambda e: np.asarray(e, dtype=float)), label
    below = 1.0 - x[x < 1.0]
    floor = 0.1 * float(below.min()) if below.size else 1e-3  # where eps = 1 is drawn: a decade further
    floor = min(floor, 0.01)

    def to_axis(e):
        e = np.asarray(e, dtype=float)
        d = np.maximum(1.0 - e, floor)
        return np.where(e <= _SWITCH, e, _SWITCH + 0.1 * np.log10(0.1 / d))

    return to_axis, f"{label};\nlinear to {_SWITCH:g}, then log in 1 - eps (dotted line; eps = 1 a decade past)"


def _edges(pos):
    """Cell edges halfway between neighbouring positions, the outer cells as wide as their neighbour's half gap."""
    if pos.size == 1:
        return np.array([pos[0] - 0.5, pos[0] + 0.5])
    mid = 0.5 * (pos[1:] + pos[:-1])
    return np.concatenate([[pos[0] - (mid[0] - pos[0])], mid, [pos[-1] + (pos[-1] - mid[-1])]])


def _cell_text(z):
    if not np.isfinite(z):
        return "n/a"
    return f"{z:.2g}" if abs(z) >= 1e-3 else ("0" if z == 0 else f"{z:.0e}")


def _panel(fig, ax, diagram, stat, level, boundary):
    Z = diagram.data[stat]
    lim = float(np.nanmax(np.abs(Z))) if np.isfinite(Z).any() else 1.0
    lim = max(lim if lim > 0 else 1.0, abs(level))
    to_axis, xlabel = x_axis(diagram.kind, diagram.values)
    pos = to_axis(diagram.values)
    edges = _edges(pos)
    n_x, n_t = diagram.values.size, diagram.taus.size
    mesh = ax.pcolormesh(edges, np.arange(n_t + 1) - 0.5, Z.T, cmap="RdBu_r", vmin=-lim, vmax=lim)
    width = np.diff(edges) / (edges[-1] - edges[0])
    fs = 8 if n_x <= 10 else 6
    for i in range(n_x):
        for j in range(n_t):
            z = Z[i, j]
            txt = _cell_text(z)
            if width[i] * 6.4 * 72 < 0.62 * fs * len(txt):  # the cell (points) is narrower than its text
                continue
            dark = np.isfinite(z) and abs(z) > 0.6 * lim
            ax.text(pos[i], j, txt, ha="center", va="center", fontsize=fs, color="w" if dark else "k")
    words, short = STAT_LABELS.get(stat, (stat, stat))
    found = boundary is not None and np.isfinite(boundary).any()
    if found:
        ok = np.isfinite(boundary)
        xs = ", ".join(f"{b:.3g}" for b in boundary[ok])
        ax.plot(to_axis(boundary[ok]), np.arange(n_t)[ok], "k-", lw=2.5, marker="D", ms=7,
                label=f"boundary where {short} = {level:g} (the level): x* = {xs}")  # fmt: skip
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=8, frameon=False)
    note = "" if found else f": {short} never crosses the level {level:g} in this range"
    ax.set_title(f"T={diagram.T}, v={diagram.v}{note}", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tau (topics per document)")
    if xlabel != AXIS_LABELS.get(diagram.kind):
        ax.axvline(_SWITCH, color="k", ls=":", lw=1, alpha=0.6)
    ax.set_xlim(edges[0], edges[-1])
    crowded = width * 6.4 * 72 < 0.62 * 8 * np.array([len(f"{x:g}") for x in diagram.values])
    ticks = [i for i in range(n_x) if not crowded[i] or i in (0, n_x - 1)]
    ax.set_xticks(pos[ticks], [f"{diagram.values[i]:g}" for i in ticks])
    ax.set_yticks(np.arange(n_t), [str(t) for t in diagram.taus])
    cb = colorbar(fig, mesh, ax, label=f"{words}\n(black bar: the level {level:g})")
    cb.ax.axhline(level, color="k", lw=2.5)


def phase_heatmaps(diagrams, stat: str, *, level: float = 0.0, boundaries=None, title: str = ""):
    """One heatmap per :class:`~theorycheck.analysis.phase.PhaseDiagram` of ``stat`` over
    (x, tau), every cell annotated where it fits, with the boundary (x* per tau, where ``stat``
    crosses ``level``; NaN: none) drawn as a line. Cells sit at their true x (:func:`x_axis`); the
    colourbar names the statistic and its unit (:data:`STAT_LABELS`) and marks ``level``."""
    diagrams = list(diagrams)
    boundaries = [None] * len(diagrams) if boundaries is None else list(boundaries)
    fig = figure(6.8 * len(diagrams), 5.2)
    axes = fig.subplots(1, len(diagrams), squeeze=False)[0]
    for ax, d, b in zip(axes, diagrams, boundaries):
        _panel(fig, ax, d, stat, level, None if b is None else np.asarray(b, dtype=float))
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def phase_figures(diagrams, *, boundaries: dict | None = None) -> dict:
    """The three conclusion figures (:data:`CONCLUSIONS`) over the given diagrams (e.g. overlap and zipf).

    ``boundaries[(conclusion, kind)]``: the per-tau boundary array to draw (optional).
    Returns ``{"phase_value": fig, "phase_gram": fig, "phase_attention": fig}`` (attention only if computed).
    """
    boundaries = boundaries or {}
    out = {}
    for name, (stat, level, title) in CONCLUSIONS.items():
        ds = [d for d in diagrams if np.isfinite(d.data[stat]).any()]
        if ds:
            bs = [boundaries.get((name, d.kind)) for d in ds]
            out[f"phase_{name}"] = phase_heatmaps(ds, stat, level=level, boundaries=bs, title=title)
    return out
