"""Figures (matplotlib, Agg). One function per figure kind; each takes data, returns a Figure.

Plots never recompute mathematics: they draw arrays and result records handed to them.
Saving is the caller's job (``fig.savefig``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["heatmap"]


def _new_figure(*args, **kwargs):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(*args, **kwargs)


def heatmap(M, *, title: str = "", block: int | None = None, ax_labels=("key / column", "query / row"),
            cmap: str = "RdBu_r", symmetric: bool = True, fig=None, ax=None):
    """Heatmap of a token-indexed matrix with optional topic-block grid lines.

    Parameters
    ----------
    M : array_like, shape (n, n)
    block : int, optional
        Words per topic ``v``; draws grid lines after token 0 ([MASK]) and every ``v`` words.
    symmetric : bool
        Colour scale symmetric around 0.
    """
    M = np.asarray(M, dtype=float)
    if fig is None:
        fig = _new_figure(figsize=(5.2, 4.4))
    if ax is None:
        ax = fig.add_subplot(1, 1, 1)
    vmax = float(np.max(np.abs(M))) if M.size else 1.0
    kw = dict(vmin=-vmax, vmax=vmax) if symmetric and vmax > 0 else {}
    im = ax.imshow(M, cmap=cmap, interpolation="nearest", **kw)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if block:
        n = M.shape[0]
        for k in range(1, n, block):
            ax.axhline(k - 0.5, color="k", lw=0.4, alpha=0.5)
            ax.axvline(k - 0.5, color="k", lw=0.4, alpha=0.5)
    ax.set_title(title)
    ax.set_xlabel(ax_labels[0])
    ax.set_ylabel(ax_labels[1])
    return fig


def heatmap_pair(left, right, *, titles=("", ""), block: int | None = None, suptitle: str = ""):
    """Two token-indexed matrices side by side on one shared symmetric colour scale.

    Parameters
    ----------
    left, right : array_like, shape (n, n)
        E.g. the closed-form ``W^V`` and an independent solution (lstsq, gradient descent).
    titles : (str, str)
    block : int, optional
        Words per topic ``v`` (topic grid lines, see :func:`heatmap`).
    """
    L = np.asarray(left, dtype=float)
    R = np.asarray(right, dtype=float)
    fig = _new_figure(figsize=(10.4, 4.4))
    vmax = float(max(np.max(np.abs(L)), np.max(np.abs(R)))) if L.size else 1.0
    axes = [fig.add_subplot(1, 2, k + 1) for k in range(2)]
    for ax, M, title in zip(axes, (L, R), titles):
        im = ax.imshow(M, cmap="RdBu_r", interpolation="nearest", vmin=-vmax, vmax=vmax)
        if block:
            for k in range(1, M.shape[0], block):
                ax.axhline(k - 0.5, color="k", lw=0.4, alpha=0.5)
                ax.axvline(k - 0.5, color="k", lw=0.4, alpha=0.5)
        ax.set_title(title)
        ax.set_xlabel("key / column")
        ax.set_ylabel("query / row")
    fig.colorbar(im, ax=axes, fraction=0.025, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def convergence(steps, series: dict, *, ylabel: str = "", title: str = "", logy: bool = True):
    """Curves ``{label: values}`` against ``steps`` (e.g. distance to an optimum during descent)."""
    fig = _new_figure(figsize=(5.6, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    for k, (label, vals) in enumerate(series.items()):
        vals = np.asarray(vals, dtype=float)
        ax.plot(np.asarray(steps)[: vals.size], vals, label=label, ls=("-", "-", "--", ":")[k % 4])
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def entry_histograms(groups: dict, *, title: str = "", xlabel: str = "entry value", bins: int = 40):
    """Overlaid histograms of groups of matrix entries, e.g. same-topic vs different-topic entries."""
    fig = _new_figure(figsize=(5.6, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    allv = np.concatenate([np.asarray(v, dtype=float).ravel() for v in groups.values()])
    lo, hi = float(allv.min()), float(allv.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    for label, vals in groups.items():
        ax.hist(np.asarray(vals, dtype=float).ravel(), bins=edges, alpha=0.6, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.legend()
    return fig


__all__ += ["heatmap_pair", "convergence", "entry_histograms"]
