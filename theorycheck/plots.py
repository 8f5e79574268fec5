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


# ----------------------------------------------------------------------------- training (train area)
__all__ += ["training_curves"]


def training_curves(records, *, stages=None, keys=("norm_W_V", "norm_KQ", "norm_W_K", "norm_W_Q", "norm_W_E"),
                    title: str = "parameter norms during training"):
    """Norm curves of a training run (log scale) and the loss, with the detected stage boundaries.

    Parameters
    ----------
    records : list of dict
        Lines of ``metrics.jsonl`` (need ``step``, ``loss`` and some of ``keys``).
    stages : dict, optional
        ``StageBoundaries.to_dict()``; vertical lines at ``stage1_end`` and ``stage2_start``.
    """
    fig = _new_figure(figsize=(9.5, 3.8))
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    steps = np.array([r["step"] for r in records], dtype=float)
    for k in keys:
        vals = [r.get(k) for r in records]
        if vals and all(x is not None for x in vals) and max(vals) > 0:
            arr = np.asarray(vals, float)
            ax1.plot(steps, np.where(arr > 0, arr, np.nan), label=k.replace("norm_", "||") + "||")
    ax1.set_yscale("log")
    ax1.set_xlabel("step")
    ax1.set_title(title)
    ax2.plot(steps, [r["loss"] for r in records], label="train loss", color="k")
    dev = [(r["step"], r["dev_loss"]) for r in records if r.get("dev_loss") is not None]
    if dev:
        ax2.plot(*zip(*dev), "o-", label="dev loss", color="tab:red")
    ax2.set_xlabel("step")
    ax2.set_title("loss")
    for ax in (ax1, ax2):
        if stages:
            if stages.get("stage1_end") is not None:
                ax.axvline(stages["stage1_end"], color="tab:blue", ls="--", lw=1, label="stage-1 end")
            if stages.get("stage2_start") is not None:
                ax.axvline(stages["stage2_start"], color="tab:orange", ls="--", lw=1, label="stage-2 start")
            if stages.get("stage2_attention") is not None:
                ax.axvline(stages["stage2_attention"], color="tab:green", ls=":", lw=1,
                           label="attention favours topic (K_eff >= 1.1 v)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
