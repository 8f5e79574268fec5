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


# ----------------------------------------------------------------------------- attention (PAPER_SPEC §4.3)
def attention_landscape(alpha, beta, L, *, optimum=None, value: str = "block", logK=None, L_K=None,
                        K_star=None, title: str = ""):
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

    ``rows``: dicts from :func:`theorycheck.landscape.asymptotic_sweep` (keys T, tau, K_over_vtau,
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
        line, = ax.plot(np.exp(np.asarray(lk)), L - L.min() + 1e-9, label=f"tau={label}, K*={K:.4g}")
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
