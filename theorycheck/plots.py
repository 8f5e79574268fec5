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
