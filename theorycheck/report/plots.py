"""Figures (matplotlib, Agg). One function per figure kind; each takes data and returns a Figure.

Plots never recompute mathematics: they draw arrays and result records handed to them (the only
arithmetic is presentation: axis limits, ``N x gap``, ``L - min L`` on a log axis). Saving is the
caller's job (``fig.savefig``). Every figure uses constrained layout, so tick labels, colourbar
labels and legends stay inside it; every axis is labelled.

Token-indexed matrices ``M[row, column]`` are labelled by what their rows and columns are
(pass one of these as ``ax_labels``): :data:`VALUE_AXES` for ``W^V`` (rows are outputs, columns
inputs: ``Attn(Z) = W^V Z A(Z)``), :data:`SCORE_AXES` for scores ``S[a, b]`` and attention
(rows are queries, columns keys), :data:`KQ_AXES` for ``W_K^T W_Q`` (rows keys, columns queries),
:data:`GRAM_AXES` for an embedding Gram, :data:`TOKEN_AXES` otherwise.
"""

from __future__ import annotations

import numpy as np

from .._mpl import mpl
from ..analysis.stats import power_law_fit
from ._plots_training import attention_head_ratios, stage2_growth, stage_grid, training_curves
from ._plotstyle import (
    GRAM_AXES,
    KQ_AXES,
    LINE_STYLES,
    SCORE_AXES,
    TOKEN_AXES,
    VALUE_AXES,
    colorbar,
    figure,
    legend_outside,
    log_axis,
    new_figure,
    round_ticks,
    topic_grid,
)

_new_figure = new_figure  # older name, used by claim modules that draw their own figure

__all__ = [
    "GRAM_AXES",
    "KQ_AXES",
    "SCORE_AXES",
    "TOKEN_AXES",
    "VALUE_AXES",
    "attention_head_ratios",
    "attention_landscape",
    "attention_sweep",
    "block_sum_sweep",
    "convergence",
    "entry_histograms",
    "finite_n_gap",
    "gram_pair",
    "heatmap",
    "heatmap_pair",
    "loss_vs_K",
    "stage2_growth",
    "stage_grid",
    "training_curves",
]


# ----------------------------------------------------------------------------- token matrices
def heatmap(
    M,
    *,
    title: str = "",
    block: int | None = None,
    ax_labels=TOKEN_AXES,
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    cbar_label: str = "entry value",
    fig=None,
    ax=None,
):
    """Heatmap of a token-indexed matrix ``M[row, column]`` with optional topic-block grid lines.

    Parameters
    ----------
    M : array_like, shape (n, n)
    block : int, optional
        Words per topic ``v``; draws grid lines after token 0 ([MASK]) and every ``v`` words.
    ax_labels : (str, str)
        ``(xlabel, ylabel)``: :data:`VALUE_AXES` for ``W^V``, :data:`SCORE_AXES` for a score or
        attention matrix, :data:`KQ_AXES` for ``W_K^T W_Q``, :data:`GRAM_AXES` for a Gram matrix.
    symmetric : bool
        Colour scale symmetric around 0.
    cbar_label : str
        What the colour shows, e.g. ``"W^V entry"`` or ``"attention weight"``.
    """
    M = np.asarray(M, dtype=float)
    if fig is None:
        fig = figure(5.4, 4.6)
    if ax is None:
        ax = fig.add_subplot(1, 1, 1)
    vmax = float(np.max(np.abs(M))) if M.size else 1.0
    kw = dict(vmin=-vmax, vmax=vmax) if symmetric and vmax > 0 else {}
    im = ax.imshow(M, cmap=cmap, interpolation="nearest", **kw)
    colorbar(fig, im, ax, label=cbar_label)
    topic_grid(ax, M.shape[0], block)
    ax.set_title(title)
    ax.set_xlabel(ax_labels[0])
    ax.set_ylabel(ax_labels[1])
    return fig


def _matrix_pair(A, B, titles, block, vmax, ax_labels, suptitle, size, cbar_label):
    fig = figure(*size)
    axes = [fig.add_subplot(1, 2, k + 1) for k in range(2)]
    for ax, M, title in zip(axes, (A, B), titles):
        im = ax.imshow(M, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        topic_grid(ax, M.shape[0], block, lw=0.3)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(ax_labels[0])
        ax.set_ylabel(ax_labels[1])
    colorbar(fig, im, axes, label=cbar_label, shrink=0.8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def gram_pair(
    G_left,
    G_right,
    *,
    titles=("", ""),
    block: int | None = None,
    suptitle: str = "",
    vmax: float | None = None,
    cbar_label: str = "Gram entry <E e_i, E e_j> (shared scale)",
):
    """Two token-indexed Gram matrices side by side on a shared symmetric colour scale.

    Parameters
    ----------
    G_left, G_right : array_like, shape (V1, V1)
        E.g. the closed-form min-norm Gram (SPEC §4.1) and an L-BFGS-trained ``W_E^T W_E``.
    titles : (str, str)
    block : int, optional
        Words per topic ``v`` (grid lines after [MASK] and every ``v`` words).
    vmax : float, optional
        Colour-scale limit (entries beyond it saturate); default the largest absolute entry.
    """
    A = np.asarray(G_left, dtype=float)
    B = np.asarray(G_right, dtype=float)
    if vmax is None:
        vmax = float(max(np.max(np.abs(A)), np.max(np.abs(B)), 1e-300))
    return _matrix_pair(A, B, titles, block, vmax, GRAM_AXES, suptitle, (10.5, 4.8), cbar_label)


def heatmap_pair(
    left,
    right,
    *,
    titles=("", ""),
    block: int | None = None,
    suptitle: str = "",
    ax_labels=VALUE_AXES,
    cbar_label: str = "W^V entry (shared scale)",
):
    """Two token-indexed matrices side by side on one shared symmetric colour scale.

    Parameters
    ----------
    left, right : array_like, shape (n, n)
        E.g. the closed-form ``W^V`` (SPEC §4.2) and an independent solution (lstsq, gradient descent).
    titles : (str, str)
    block : int, optional
        Words per topic ``v`` (topic grid lines, see :func:`heatmap`).
    ax_labels : (str, str)
        ``(xlabel, ylabel)``; default :data:`VALUE_AXES` (rows are outputs, columns inputs).
    cbar_label : str
        What the shared colour scale shows (default: ``W^V`` entries).
    """
    L = np.asarray(left, dtype=float)
    R = np.asarray(right, dtype=float)
    vmax = float(max(np.max(np.abs(L)), np.max(np.abs(R)))) if L.size else 1.0
    return _matrix_pair(L, R, titles, block, vmax, ax_labels, suptitle, (10.4, 4.6), cbar_label)


# ----------------------------------------------------------------------------- attention (SPEC §4.3)
def attention_landscape(
    alpha, beta, L, *, optimum=None, value: str = "block", logK=None, L_K=None, K_star=None, title: str = ""
):
    """Contour plot of ``L(alpha, beta)`` (``L[i, j]`` at ``alpha[i], beta[j]``), optionally beside ``L(log K)``.

    ``optimum``: ``(alpha*, beta*)`` marked with a star; for the block ``W^V`` the level sets are
    the curves ``K = e^alpha + (v-1) e^beta = const`` (SPEC §4.3). The colour levels are denser
    near the minimum; the colourbar is drawn to scale (proportional spacing) with round ticks, and
    the legend sits below the panels, off the data.
    """
    alpha, beta, L = np.asarray(alpha, float), np.asarray(beta, float), np.asarray(L, float)
    two = logK is not None and L_K is not None
    fig = figure(11.0 if two else 5.8, 5.0)
    ax = fig.add_subplot(1, 2 if two else 1, 1)
    lo, hi = float(np.min(L)), float(np.quantile(L, 0.9))
    levels = lo + (hi - lo) * np.linspace(0, 1, 25) ** 2
    cs = ax.contourf(beta, alpha, L, levels=levels, cmap="viridis", extend="max")
    ax.contour(beta, alpha, L, levels=levels[::3], colors="k", linewidths=0.4)
    cb = colorbar(
        fig, cs, ax, label="population loss L(alpha, beta)\n(levels denser near the minimum)", spacing="proportional"
    )
    ticks = round_ticks(lo, hi)
    cb.set_ticks(ticks, labels=[f"{t:.6g}" for t in ticks])
    cb.ax.minorticks_off()
    handles = []
    if optimum is not None and np.all(np.isfinite(optimum)):
        (star,) = ax.plot([optimum[1]], [optimum[0]], marker="*", ms=14, color="r", ls="none")
        handles.append((star, f"optimum (alpha*, beta*) = ({optimum[0]:.4g}, {optimum[1]:.4g})"))
    ax.set_xlabel("beta (same topic, other word)")
    ax.set_ylabel("alpha (same word)")
    head = "L(alpha, beta)" if "W^V" in title else f"L(alpha, beta), W^V={value}"
    ax.set_title(head + (f"\n{title}" if title else ""), fontsize=9)
    if two:
        ax2 = fig.add_subplot(1, 2, 2)
        ax2.plot(np.exp(np.asarray(logK)), L_K, lw=1.5)
        log_axis(ax2, "x", np.exp(np.asarray(logK)))
        if K_star is not None:
            line = ax2.axvline(K_star, color="r", ls="--", lw=1)
            handles.append((line, f"K* = {K_star:.4g} (optimum along K)"))
        ax2.set_xlabel("K = e^alpha + (v-1) e^beta")
        ax2.set_ylabel("population loss L along K (block W^V)")
        ax2.set_title("loss along K", fontsize=9)
    if handles:
        fig.legend(*zip(*handles), loc="outside lower center", ncol=len(handles), fontsize=8)
    return fig


def attention_sweep(rows, *, title: str = ""):
    """``K*/(v tau)`` and the optimal per-word same:different-topic attention ratio versus T (SPEC §4.3).

    ``rows``: dicts from :func:`theorycheck.analysis.landscape.asymptotic_sweep` (keys T, tau, K_over_vtau,
    attention_ratio).
    """
    fig = figure(10.5, 4.2)
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    T = np.array([r["T"] for r in rows], float)
    tau = np.array([r["tau"] for r in rows], float)
    c = np.array([r["K_over_vtau"] for r in rows], float)
    ratio = np.array([r["attention_ratio"] for r in rows], float)
    sc = ax1.scatter(T / tau, c, c=np.log10(T), cmap="plasma")
    colorbar(fig, sc, ax1, label="log10 T")
    log_axis(ax1, "x", T / tau)
    ax1.set_xlabel("T / tau")
    ax1.set_ylabel("K* / (v tau)")
    ax1.set_title("optimal aggregate weight per topic / (v tau)", fontsize=9)
    ax2.plot(tau, ratio, "o", label="optimum K*/v")
    ax2.plot(tau, tau, "k:", lw=1, label="ratio = tau")
    log_axis(ax2, "x", tau)
    log_axis(ax2, "y", [ratio, tau])
    ax2.set_xlabel("tau")
    ax2.set_ylabel("same-topic : different-topic per-word attention")
    ax2.legend(fontsize=8, loc="upper left")
    ax2.set_title(title or "optimal attention ratio K*/v", fontsize=9)
    return fig


def finite_n_gap(N, gap, stderr, *, title: str = ""):
    """Monte Carlo finite-N loss minus the exact N -> inf loss against N (SPEC §1.1, §4.3).

    Left: the gap on log-log axes with 2-sigma error bars, the weighted power-law fit
    (:func:`theorycheck.analysis.stats.power_law_fit`, its slope and standard error in the legend)
    and the 1/N law through the fit's centre; gaps <= 0 cannot be drawn on a log axis and are
    counted in the title. Right: ``N x gap`` (flat if the gap is O(1/N)).
    """
    N, gap, stderr = (np.asarray(x, float) for x in (N, gap, stderr))
    fit = power_law_fit(N, gap, stderr)
    fig = figure(11.0, 4.6)
    ax1 = fig.add_subplot(1, 2, 1)
    pos = gap > 0
    lower = np.minimum(2 * stderr, 0.95 * gap)  # a log axis cannot show a bar reaching below 0
    ax1.errorbar(
        N[pos], gap[pos], yerr=[lower[pos], 2 * stderr[pos]], fmt="o", capsize=3, label="Monte Carlo gap (2 SE)"
    )
    if np.isfinite(fit.slope):
        grid = np.geomspace(N.min(), N.max(), 50)
        ax1.plot(grid, np.exp(fit.intercept) * grid**fit.slope, "-", color="tab:red",
                 label=f"fit: slope {fit.slope:.2f} +/- {fit.slope_stderr:.2f} ({fit.n} points)")  # fmt: skip
        u = np.average(np.log(N[pos]))
        centre = np.exp(fit.intercept + fit.slope * u)
        ax1.plot(grid, centre * np.exp(u) / grid, "k:", lw=1.2, label="1/N law (slope -1)")
    log_axis(ax1, "x", N)
    log_axis(ax1, "y", [gap[pos], (gap + 2 * stderr)[pos]])
    ax1.set_ylabel("gap L_MC(N) - L(N = inf)")
    dropped = int(np.count_nonzero(~pos))
    ax1.set_title(
        (title or "finite-document gap") + (f"\n({dropped} gaps <= 0 not drawn)" if dropped else ""), fontsize=9
    )
    handles, labels = ax1.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda k: not labels[k].startswith("Monte"))
    fig.legend([handles[k] for k in order], [labels[k] for k in order], loc="outside lower center", ncol=3, fontsize=8)
    ax2 = fig.add_subplot(1, 2, 2)
    ax2.errorbar(N, N * gap, yerr=2 * N * stderr, fmt="s-", capsize=3)
    ax2.axhline(0.0, color="k", lw=0.6)
    ax2.set_ylabel("N x gap  (flat if O(1/N))")
    ax2.set_title("gap scaled by N (error bars: 2 standard errors)", fontsize=9)
    log_axis(ax2, "x", N)
    for ax in (ax1, ax2):
        if N.size <= 8:  # ticks at the measured lengths
            ax.set_xticks(N, labels=[f"{n:g}" for n in N])
            ax.xaxis.set_minor_locator(mpl("matplotlib.ticker").NullLocator())
        ax.set_xlabel("document length N (log scale)")
    return fig


def loss_vs_K(curves, *, title: str = ""):
    """Block-``W^V`` loss minus its minimum along ``K`` for several configurations (SPEC §4.3).

    ``curves``: iterable of ``(label, logK, L, K_star)``; the optimum ``K*`` is marked. The curves
    are shifted by 1e-9 so that their minima show on the log axis.
    """
    fig = figure(7.6, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    for label, lk, L, K in curves:
        L = np.asarray(L, float)
        (line,) = ax.plot(np.exp(np.asarray(lk)), L - L.min() + 1e-9, label=f"tau={label}, K*={K:.4g}")
        ax.axvline(K, color=line.get_color(), ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("K = e^alpha + (v-1) e^beta")
    ax.set_ylabel("L(K) - min L  (+1e-9)")
    ax.set_title(title or "block W^V: loss along K", fontsize=9)
    legend_outside(ax, fontsize=8)
    return fig


# ----------------------------------------------------------------------------- embedding and stage 1
def block_sum_sweep(inv_a, measured, *, labels=None, title: str = "", log: bool = True, rel_error=None):
    """Measured own-minus-other block sums against the prediction ``1/a`` (identity line, SPEC §4.1).

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
    fig = figure(10.5 if two else 5.6, 4.6)
    ax = fig.add_subplot(1, 2 if two else 1, 1)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    grid = np.linspace(0.9 * lo, 1.1 * hi, 200)
    ax.plot(grid, grid, color="0.6", lw=1, label="prediction 1/a")
    markers = ["o", "x", "+", "s"]
    for k in range(y.shape[1]):
        lab = labels[k] if labels is not None else f"measured, column {k}"
        ax.plot(x, y[:, k], markers[k % len(markers)], ms=6, mfc="none", label=lab)
    if log:
        log_axis(ax, "x", grid)
        log_axis(ax, "y", grid)
    ax.set_xlabel("1/a = 1/(1 - p_m (1 - p_c))")
    ax.set_ylabel("own-topic minus other-topic block sum")
    ax.legend(fontsize=8, loc="upper left")
    if title:
        (fig.suptitle if two else ax.set_title)(title, fontsize=9)
    if two:
        ax2 = fig.add_subplot(1, 2, 2)
        err = np.maximum(np.asarray(rel_error, dtype=float), 1e-17)
        ax2.plot(x, err, "o", mfc="none")
        log_axis(ax2, "y", err)
        if log:
            log_axis(ax2, "x", x)
        ax2.set_xlabel("1/a")
        ax2.set_ylabel("max relative error |a (own - other) - 1|")
        ax2.set_title("relative error per masking configuration", fontsize=9)
    return fig


def convergence(steps, series: dict, *, ylabel: str = "", title: str = "", logy: bool = True):
    """Curves ``{label: values}`` against ``steps`` (e.g. distance to an optimum during descent)."""
    fig = figure(6.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    for k, (label, vals) in enumerate(series.items()):
        vals = np.asarray(vals, dtype=float)
        ls, marker, lw = LINE_STYLES[k % len(LINE_STYLES)]
        every = max(1, vals.size // 12)
        ax.plot(np.asarray(steps)[: vals.size], vals, label=label, ls=ls, marker=marker, markevery=every, mfc="none")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel or "value")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


def entry_histograms(groups: dict, *, title: str = "", xlabel: str = "entry value", bins: int = 40):
    """Overlaid histograms of groups of matrix entries, e.g. same-topic vs different-topic entries."""
    fig = figure(6.0, 4.2)
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
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return fig
