"""Phase-diagram figures for general topic-word matrices (SPEC §11.6): one heatmap per (conclusion, sweep).

Presentation only: the numbers come from :func:`theorycheck.analysis.phase.phase_diagram` and
:func:`theorycheck.analysis.phase.diagram_boundaries`.
"""

from __future__ import annotations

import numpy as np

from ._plotstyle import colorbar, figure

__all__ = ["phase_heatmaps", "phase_figures", "CONCLUSIONS"]

AXIS_LABELS = {"overlap": "overlap eps (mixing with the uniform word law)", "zipf": "Zipf exponent s"}
#: conclusion -> (statistic drawn, level of the conclusion, title)
CONCLUSIONS = {
    "value": ("value_correlation", 0.0, "min-norm stage-1 W^V: same-topic vs different-topic (block correlation)"),
    "gram": ("gram_correlation", 0.0, "min-norm tied embedding Gram: same vs different topic (block correlation)"),
    "attention": ("attention_preference", 0.0, "optimal scores alpha I + beta G: same-topic attention preference"),
}


def _panel(fig, ax, diagram, stat, level, boundary):
    Z = diagram.data[stat]
    lim = float(np.nanmax(np.abs(Z))) if np.isfinite(Z).any() else 1.0
    lim = lim if lim > 0 else 1.0
    n_x, n_t = diagram.values.size, diagram.taus.size
    # one column per grid value (the grid may be non-uniform); the boundary is placed by interpolation
    mesh = ax.pcolormesh(np.arange(n_x + 1) - 0.5, np.arange(n_t + 1) - 0.5, Z.T, cmap="RdBu_r", vmin=-lim, vmax=lim)
    for i in range(n_x):
        for j in range(n_t):
            z = Z[i, j]
            txt = "n/a" if not np.isfinite(z) else (f"{z:.2g}" if abs(z) >= 1e-3 else ("0" if z == 0 else f"{z:.0e}"))
            dark = np.isfinite(z) and abs(z) > 0.6 * lim
            ax.text(i, j, txt, ha="center", va="center", fontsize=8, color="w" if dark else "k")
    if boundary is not None and np.isfinite(boundary).any():
        ok = np.isfinite(boundary)
        pos = np.interp(boundary[ok], diagram.values, np.arange(n_x))
        xs = ", ".join(f"{b:.3g}" for b in boundary[ok])
        ax.plot(
            pos, np.arange(n_t)[ok], "k-", lw=2.5, marker="D", ms=7, label=f"boundary ({stat} = {level:g}): x* = {xs}"
        )
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)
    note = "" if boundary is not None and np.isfinite(boundary).any() else ": no crossing of the level in the range"
    ax.set_title(f"T={diagram.T}, v={diagram.v}{note}", fontsize=9)
    ax.set_xlabel(AXIS_LABELS[diagram.kind])
    ax.set_ylabel("tau (topics per document)")
    ax.set_xticks(np.arange(n_x), [f"{x:g}" for x in diagram.values])
    ax.set_yticks(np.arange(n_t), [str(t) for t in diagram.taus])
    colorbar(fig, mesh, ax, label=stat)


def phase_heatmaps(diagrams, stat: str, *, level: float = 0.0, boundaries=None, title: str = ""):
    """One heatmap per :class:`~theorycheck.analysis.phase.PhaseDiagram` of ``stat`` over
    (x, tau), every cell annotated, with the boundary (x* per tau; NaN: none) drawn as a line."""
    diagrams = list(diagrams)
    boundaries = [None] * len(diagrams) if boundaries is None else list(boundaries)
    fig = figure(6.4 * len(diagrams), 4.8)
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
