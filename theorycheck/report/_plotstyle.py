"""Shared drawing helpers of the figure modules: layout, axis scales, ticks, legends, annotations.

Presentation only (limits, tick positions, label text); nothing here computes a result.
"""

from __future__ import annotations

import numpy as np

from .._mpl import mpl

__all__ = [
    "LINE_STYLES",
    "colorbar",
    "GRAM_AXES",
    "KQ_AXES",
    "SCORE_AXES",
    "TOKEN_AXES",
    "VALUE_AXES",
    "annotation_format",
    "auto_scale",
    "figure",
    "legend_outside",
    "log_axis",
    "new_figure",
    "round_ticks",
    "topic_grid",
]

# (xlabel, ylabel) of token-indexed matrices M[row, column] (SPEC §2 column convention)
VALUE_AXES = ("input token (column)", "output token (row)")  # W^V: Attn(Z) = W^V Z A(Z)
SCORE_AXES = ("key token (column)", "query token (row)")  # S[a, b] and softmax rows: query a, key b
KQ_AXES = ("query token (column)", "key token (row)")  # W_K^T W_Q: entry [b, a] = (W_K e_b) . (W_Q e_a)
GRAM_AXES = ("token j (column)", "token i (row)")  # symmetric Gram G[i, j] = <E e_i, E e_j>
TOKEN_AXES = ("token (column)", "token (row)")  # any other token-indexed matrix

# (line style, marker, line width): curves that coincide stay distinguishable
LINE_STYLES = (("-", "", 2.6), ("--", "o", 1.8), ("-.", "s", 1.6), (":", "^", 1.6), ((0, (6, 2, 1, 2)), "v", 1.4))


def new_figure(*args, **kwargs):
    """A matplotlib ``Figure`` on the Agg canvas (no pyplot state)."""
    return mpl("matplotlib.figure").Figure(*args, **kwargs)


def figure(width: float, height: float):
    """A figure with constrained layout: tick labels, colourbars and outside legends stay inside it."""
    engine = mpl("matplotlib.layout_engine").ConstrainedLayoutEngine(h_pad=0.08, w_pad=0.08)
    return new_figure(figsize=(width, height), layout=engine)


def _positive(values) -> np.ndarray:
    parts = [np.ravel(np.asarray(v, dtype=float)) for v in values] if isinstance(values, list | tuple) else [values]
    v = np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts]) if parts else np.empty(0)
    return v[np.isfinite(v) & (v > 0)]


def log_axis(ax, which: str, values) -> None:
    """Log scale on axis ``which`` ("x" or "y") with readable ticks.

    Majors at 1, 2, 5 x 10^k when the data span fewer than three decades (one label per decade
    otherwise), every major labelled: plain numbers ("200", "0.05") between 1e-3 and 1e5, short
    scientific text ("2e-9", "1e-8") outside, no minor tick labels.
    """
    ticker = mpl("matplotlib.ticker")
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    v = _positive(values)
    if v.size == 0:
        return
    lo, hi = float(v.min()), float(v.max())
    if np.log10(hi / lo) < 3:
        axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_formatter(ticker.NullFormatter())
    if lo >= 1e-3 and hi <= 1e5:
        axis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: f"{x:.6g}"))
    else:
        axis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: _short_sci(x)))


def _short_sci(x: float) -> str:
    """``2e-9``, ``1e+12``, ``2.5e-7``: a tick value as short scientific text (no mathtext)."""
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    mant, exp = f"{x:.6e}".split("e")
    return f"{float(mant):g}e{int(exp)}" if int(exp) < 0 else f"{float(mant):g}e+{int(exp)}"


def auto_scale(ax, which: str, values, *, decades: float = 1.0) -> None:
    """Log scale (see :func:`log_axis`) when the positive data span more than ``decades`` decades,
    else a linear scale without an offset (a narrow range near 1 reads 1.0000, 1.0002, ...)."""
    v = _positive(values)
    if v.size and np.log10(v.max() / v.min()) > decades:
        log_axis(ax, which, v)
        return
    fmt = mpl("matplotlib.ticker").ScalarFormatter(useOffset=False)
    (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(fmt)


def legend_outside(ax, **kw):
    """Legend to the right of the axes (never over the data); returns it, or None without labels."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    kw.setdefault("fontsize", 7)
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)


def topic_grid(ax, n: int, block: int | None, *, lw: float = 0.4) -> None:
    """Grid lines after token 0 ([MASK]) and every ``block`` words (topic blocks, SPEC §2)."""
    if not block:
        return
    for k in range(1, n, block):
        ax.axhline(k - 0.5, color="k", lw=lw, alpha=0.5)
        ax.axvline(k - 0.5, color="k", lw=lw, alpha=0.5)


def annotation_format(values, *, min_decimals: int = 2, max_decimals: int = 8) -> str:
    """Fixed-point format with the fewest decimals (>= ``min_decimals``) that keeps apart every
    pair of values distinct at 4 significant digits, e.g. ``"{:.5f}"`` for 1.0012 and 1.0004."""
    v = np.ravel(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    target = len({f"{x:.4g}" for x in v})
    for d in range(min_decimals, max_decimals + 1):
        if len({f"{x:.{d}f}" for x in v}) >= target:
            return "{:." + str(d) + "f}"
    return "{:." + str(max_decimals) + "f}"


def colorbar(fig, mappable, ax, label: str = "", **kw):
    """``fig.colorbar`` beside ``ax`` (an axes or a list), with its label padded off the tick labels."""
    cb = fig.colorbar(mappable, ax=ax, shrink=kw.pop("shrink", 0.92), **kw)
    if label:
        cb.set_label(label, labelpad=6)
    return cb


def round_ticks(lo: float, hi: float, n: int = 6) -> np.ndarray:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) inside ``[lo, hi]``, at least two of them."""
    ticker = mpl("matplotlib.ticker")
    for bins in (n, n + 2, n + 4):
        t = ticker.MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        span = max(abs(hi - lo), 1e-300)
        t = t[(t >= lo - 1e-9 * span) & (t <= hi + 1e-9 * span)]
        if t.size >= 2:
            return t
    return np.array([lo, hi])
