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


def heatmap(
    M,
    *,
    title: str = "",
    block: int | None = None,
    ax_labels=("key / column", "query / row"),
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    fig=None,
    ax=None,
):
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


def training_curves(
    records,
    *,
    stages=None,
    keys=("norm_W_V", "norm_KQ", "norm_W_K", "norm_W_Q", "norm_W_E"),
    title: str = "parameter norms during training",
    v: int | None = None,
):
    """Norm curves of a training run (log scale), topic structure and loss, with the stage boundaries.

    When the records carry ``block_score_W_V`` or ``K_eff_median`` a middle panel shows the
    structural view of the two stages: the block score of ``W^V`` and ``K_eff / v`` (needs ``v``,
    words per topic; 1 = no preference for the query's topic).

    Parameters
    ----------
    records : list of dict
        Lines of ``metrics.jsonl`` (need ``step``, ``loss`` and some of ``keys``).
    stages : dict, optional
        ``StageBoundaries.to_dict()``; vertical lines at the boundaries it found.
    """
    steps = np.array([r["step"] for r in records], dtype=float)

    def curve(k):
        vals = [r.get(k) for r in records]
        return np.asarray(vals, float) if vals and all(x is not None for x in vals) else None

    bs, Ke = curve("block_score_W_V"), curve("K_eff_median")
    structure = bs is not None or Ke is not None
    fig = _new_figure(figsize=(14.0 if structure else 9.5, 3.8))
    n = 3 if structure else 2
    ax1 = fig.add_subplot(1, n, 1)
    ax2 = fig.add_subplot(1, n, n)
    axes = [ax1, ax2]
    if records and "norm_W_V_layers" in records[0] and "norm_W_K_layers" in records[0]:
        # deep model: one colour per layer, ||W^V_l|| solid, ||W_K,l|| ||W_Q,l|| dashed (the
        # curves the deep norm rule reads, see theorycheck.nn._train.stage_curves)
        nV = np.array([r["norm_W_V_layers"] for r in records], dtype=float)
        nKQ = np.array([r["norm_W_K_layers"] for r in records], dtype=float) * np.array(
            [r["norm_W_Q_layers"] for r in records], dtype=float
        )
        for li in range(nV.shape[1]):
            col = f"C{li % 10}"
            ax1.plot(steps, nV[:, li], color=col, label=f"||W_V|| layer {li}")
            ax1.plot(
                steps,
                np.where(nKQ[:, li] > 0, nKQ[:, li], np.nan),
                color=col,
                ls="--",
                label=f"||W_K|| ||W_Q|| layer {li}",
            )
        ax1.legend(fontsize=6, ncol=2)
    else:
        for k in keys:
            arr = curve(k)
            if arr is not None and arr.max() > 0:
                ax1.plot(steps, np.where(arr > 0, arr, np.nan), label=k.replace("norm_", "||") + "||")
    ax1.set_yscale("log")
    ax1.set_xlabel("step")
    ax1.set_title(title)
    if structure:
        ax3 = fig.add_subplot(1, n, 2)
        axes.insert(1, ax3)
        if bs is not None:
            ax3.plot(steps, bs, color="tab:blue", label="block score of W^V (R^2)")
        ax3.set_ylim(-0.05, 1.05)
        ax3.set_xlabel("step")
        ax3.set_title("topic structure")
        if Ke is not None and v is not None:
            tw = ax3.twinx()
            tw.plot(steps, Ke / v, color="tab:green", label="K_eff / v (attention to own topic)")
            tw.set_yscale("log")
            tw.legend(fontsize=7, loc="center right")
    ax2.plot(steps, [r["loss"] for r in records], label="train loss", color="k")
    dev = [(r["step"], r["dev_loss"]) for r in records if r.get("dev_loss") is not None]
    if dev:
        ax2.plot(*zip(*dev), "o-", label="dev loss", color="tab:red")
    ax2.set_xlabel("step")
    ax2.set_title("loss")
    lines = (
        ("stage1_end", "tab:blue", "--", "stage-1 end (norm rule)"),
        ("stage2_start", "tab:orange", "--", "stage-2 start (norm rule)"),
        ("stage1_end_structure", "tab:purple", "-.", "W^V block pattern formed"),
        ("stage2_attention", "tab:green", ":", "attention favours topic (K_eff >= 1.1 v)"),
    )
    for ax in axes:
        for key, color, ls, label in lines:
            if stages and stages.get(key) is not None:
                ax.axvline(stages[key], color=color, ls=ls, lw=1, label=label)
        ax.legend(fontsize=7, loc="upper left" if ax is not ax2 else "upper right")
    fig.tight_layout()
    return fig


__all__ += ["attention_head_ratios"]


def attention_head_ratios(records, n_layers: int, n_heads: int, *, title: str = ""):
    """Same-topic : different-topic attention ratio of every layer and head during training.

    ``records``: ``metrics.jsonl`` lines; those with ``attn_topic_ratio_heads`` (layer-major, length
    ``n_layers * n_heads``, length-normalised class averages so 1 = no topic preference) are used.
    Left: one curve per head (colour = layer); right: the last evaluation as a layer x head map on a
    log colour scale centred at 1.
    """
    from matplotlib.colors import LogNorm

    rows = [r for r in records if r.get("attn_topic_ratio_heads")]
    fig = _new_figure(figsize=(10.5, 3.9))
    ax = fig.add_subplot(1, 2, 1)
    if not rows:
        ax.text(0.5, 0.5, "no per-head attention statistics logged", ha="center", va="center")
        return fig
    steps = np.array([r["step"] for r in rows], dtype=float)
    R = np.array([[np.nan if x is None else x for x in r["attn_topic_ratio_heads"]] for r in rows], dtype=float)
    if R.shape[1] != n_layers * n_heads:
        raise ValueError(f"records hold {R.shape[1]} heads, expected n_layers * n_heads = {n_layers * n_heads}")
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray"]
    for li in range(n_layers):
        for hi in range(n_heads):
            ax.plot(
                steps,
                R[:, li * n_heads + hi],
                color=colors[li % len(colors)],
                lw=1,
                label=f"layer {li}" if hi == 0 else None,
            )
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("same-topic / different-topic attention")
    ax.set_title("per head (1 = no topic preference)" + (f"\n{title}" if title else ""), fontsize=9)
    ax.legend(fontsize=7)
    ax2 = fig.add_subplot(1, 2, 2)
    last = R[-1].reshape(n_layers, n_heads)
    finite = last[np.isfinite(last) & (last > 0)]
    span = float(np.max(np.abs(np.log(finite)))) if finite.size else 1.0
    span = max(span, 1e-3)
    im = ax2.imshow(last, cmap="RdBu_r", norm=LogNorm(vmin=np.exp(-span), vmax=np.exp(span)), interpolation="nearest")
    fig.colorbar(im, ax=ax2, fraction=0.046, pad=0.04)
    for (i, j), val in np.ndenumerate(last):
        ax2.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=7)
    ax2.set_xlabel("head")
    ax2.set_ylabel("layer")
    ax2.set_xticks(range(n_heads))
    ax2.set_yticks(range(n_layers))
    ax2.set_title(f"step {int(steps[-1])}", fontsize=9)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- attention (SPEC §4.3)
def attention_landscape(
    alpha, beta, L, *, optimum=None, value: str = "block", logK=None, L_K=None, K_star=None, title: str = ""
):
    """Contour plot of ``L(alpha, beta)`` (``L[i, j]`` at ``alpha[i], beta[j]``), optionally beside ``L(log K)``.

    ``optimum``: ``(alpha*, beta*)`` marked with a star; for the block ``W^V`` the level sets are
    the curves ``e^alpha + (v-1) e^beta = const``.
    """
    alpha, beta, L = np.asarray(alpha, float), np.asarray(beta, float), np.asarray(L, float)
    two = logK is not None and L_K is not None
    fig = _new_figure(figsize=(10.5 if two else 5.6, 4.4))
    ax = fig.add_subplot(1, 2 if two else 1, 1)
    lo, hi = float(np.min(L)), float(np.quantile(L, 0.9))
    levels = lo + (hi - lo) * np.linspace(0, 1, 25) ** 2
    cs = ax.contourf(beta, alpha, L, levels=levels, cmap="viridis", extend="max")
    ax.contour(beta, alpha, L, levels=levels[::3], colors="k", linewidths=0.4)
    fig.colorbar(cs, ax=ax, fraction=0.046, pad=0.04, label="L")
    if optimum is not None and np.all(np.isfinite(optimum)):
        ax.plot([optimum[1]], [optimum[0]], marker="*", ms=14, color="r", label="optimum")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("beta (same topic, other word)")
    ax.set_ylabel("alpha (same word)")
    ax.set_title(f"L(alpha, beta), W^V={value}" + (f"\n{title}" if title else ""), fontsize=9)
    if two:
        ax2 = fig.add_subplot(1, 2, 2)
        ax2.plot(np.exp(np.asarray(logK)), L_K, lw=1.5)
        ax2.set_xscale("log")
        if K_star is not None:
            ax2.axvline(K_star, color="r", ls="--", lw=1, label=f"K* = {K_star:.4g}")
            ax2.legend(fontsize=8)
        ax2.set_xlabel("K = e^alpha + (v-1) e^beta")
        ax2.set_ylabel("L (block W^V)")
        ax2.set_title("loss along K", fontsize=9)
    fig.tight_layout()
    return fig


def attention_sweep(rows, *, title: str = ""):
    """``K*/(v tau)`` and the optimal per-word same:different-topic attention ratio versus T.

    ``rows``: dicts from :func:`theorycheck.analysis.landscape.asymptotic_sweep` (keys T, tau, K_over_vtau,
    attention_ratio).
    """
    fig = _new_figure(figsize=(10, 4))
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    T = np.array([r["T"] for r in rows], float)
    tau = np.array([r["tau"] for r in rows], float)
    c = np.array([r["K_over_vtau"] for r in rows], float)
    ratio = np.array([r["attention_ratio"] for r in rows], float)
    sc = ax1.scatter(T / tau, c, c=np.log10(T), cmap="plasma")
    fig.colorbar(sc, ax=ax1, label="log10 T")
    ax1.set_xscale("log")
    ax1.set_xlabel("T / tau")
    ax1.set_ylabel("K* / (v tau)")
    ax1.set_title("optimal aggregate weight per topic / (v tau)", fontsize=9)
    ax2.loglog(tau, ratio, "o")
    ax2.loglog(tau, tau, "k:", lw=1, label="ratio = tau")
    ax2.set_xlabel("tau")
    ax2.set_ylabel("same-topic : different-topic per-word attention")
    ax2.legend(fontsize=8)
    ax2.set_title(title or "optimal attention ratio K*/v", fontsize=9)
    fig.tight_layout()
    return fig


def finite_n_gap(N, gap, stderr, *, title: str = ""):
    """Monte Carlo finite-N loss minus the exact N -> inf loss, with 2-sigma error bars, and N x gap."""
    N, gap, stderr = (np.asarray(x, float) for x in (N, gap, stderr))
    fig = _new_figure(figsize=(10, 4))
    ax1 = fig.add_subplot(1, 2, 1)
    ax1.errorbar(N, gap, yerr=2 * stderr, fmt="o-", capsize=3)
    ax1.axhline(0.0, color="k", lw=0.6)
    ax1.set_xscale("log")
    ax1.set_xlabel("document length N")
    ax1.set_ylabel("L_MC(N) - L(N = inf)")
    ax1.set_title(title or "finite-document gap", fontsize=9)
    ax2 = fig.add_subplot(1, 2, 2)
    ax2.errorbar(N, N * gap, yerr=2 * N * stderr, fmt="s-", capsize=3)
    ax2.set_xscale("log")
    ax2.set_xlabel("document length N")
    ax2.set_ylabel("N x gap  (flat if O(1/N))")
    fig.tight_layout()
    return fig


def loss_vs_K(curves, *, title: str = ""):
    """Block-``W^V`` loss minus its minimum along ``K`` for several configurations.

    ``curves``: iterable of ``(label, logK, L, K_star)``; the optimum ``K*`` is marked.
    """
    fig = _new_figure(figsize=(5.6, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    for label, lk, L, K in curves:
        L = np.asarray(L, float)
        (line,) = ax.plot(np.exp(np.asarray(lk)), L - L.min() + 1e-9, label=f"tau={label}, K*={K:.4g}")
        ax.axvline(K, color=line.get_color(), ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("K = e^alpha + (v-1) e^beta")
    ax.set_ylabel("L(K) - min L")
    ax.set_title(title or "block W^V: loss along K", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


__all__ += ["attention_landscape", "attention_sweep", "finite_n_gap", "loss_vs_K"]
# ----------------------------------------------------------------------------- embedding figures (issue #3)
__all__ += ["gram_pair", "block_sum_sweep"]


def gram_pair(
    G_left, G_right, *, titles=("", ""), block: int | None = None, suptitle: str = "", vmax: float | None = None
):
    """Two token-indexed Gram matrices side by side on a shared symmetric colour scale.

    Parameters
    ----------
    G_left, G_right : array_like, shape (V1, V1)
        E.g. the closed-form min-norm Gram and an L-BFGS-trained ``W_E^T W_E``.
    titles : (str, str)
    block : int, optional
        Words per topic ``v`` (grid lines after [MASK] and every ``v`` words).
    vmax : float, optional
        Colour-scale limit (entries beyond it saturate); default the largest absolute entry.
    """
    A = np.asarray(G_left, dtype=float)
    B = np.asarray(G_right, dtype=float)
    fig = _new_figure(figsize=(10.5, 4.6))
    if vmax is None:
        vmax = float(max(np.max(np.abs(A)), np.max(np.abs(B)), 1e-300))
    for k, (M, title) in enumerate(zip((A, B), titles)):
        ax = fig.add_subplot(1, 2, k + 1)
        im = ax.imshow(M, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        if block:
            for j in range(1, M.shape[0], block):
                ax.axhline(j - 0.5, color="k", lw=0.3, alpha=0.4)
                ax.axvline(j - 0.5, color="k", lw=0.3, alpha=0.4)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("token j")
        ax.set_ylabel("token i")
    fig.colorbar(im, ax=fig.axes, fraction=0.025, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def block_sum_sweep(inv_a, measured, *, labels=None, title: str = "", log: bool = True, rel_error=None):
    """Measured own-minus-other block sums against the prediction ``1/a`` (identity line).

    Parameters
    ----------
    inv_a : array_like, shape (n,)
        Predicted ``1/a = 1/(1 - p_m (1 - p_c))`` per masking configuration.
    measured : array_like, shape (n,) or (n, k)
        Measured own-minus-other block sums (columns: e.g. min / max over words and topics).
    labels : sequence of str, optional
        One label per column of ``measured``.
    log : bool
        Logarithmic axes (``1/a`` spans 1 to ~20 in a masking sweep).
    rel_error : array_like, shape (n,), optional
        Relative errors ``max |a * measured - 1|``, drawn in a second panel.
    """
    x = np.asarray(inv_a, dtype=float)
    y = np.asarray(measured, dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    two = rel_error is not None
    fig = _new_figure(figsize=(10.0 if two else 5.4, 4.4))
    ax = fig.add_subplot(1, 2 if two else 1, 1)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    grid = np.linspace(0.9 * lo, 1.1 * hi, 200)
    ax.plot(grid, grid, color="0.6", lw=1, label="prediction 1/a")
    markers = ["o", "x", "+", "s"]
    for k in range(y.shape[1]):
        lab = labels[k] if labels is not None else None
        ax.plot(x, y[:, k], markers[k % len(markers)], ms=6, mfc="none", label=lab)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("1/a = 1/(1 - p_m (1 - p_c))")
    ax.set_ylabel("measured own-topic minus other-topic block sum")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    if two:
        ax2 = fig.add_subplot(1, 2, 2)
        err = np.maximum(np.asarray(rel_error, dtype=float), 1e-17)
        ax2.semilogy(x, err, "o", mfc="none")
        ax2.set_xscale("log" if log else "linear")
        ax2.set_xlabel("1/a")
        ax2.set_ylabel("max relative error |a (own - other) - 1|")
        ax2.set_title("relative error per masking configuration", fontsize=9)
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
