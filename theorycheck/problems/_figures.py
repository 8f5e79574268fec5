"""The benchmark's figures, drawn from the statistics of :mod:`._stats` (nothing is computed here).

- :func:`convergence`: per (problem, size), the credited level ``max(subopt_rel, violation)`` of each solver
  against evaluations and against seconds: the median over ``--repeats`` and, with three repeats or more,
  the 25-75% band; a solver whose evaluated points went *below* ``f*`` is named under the plot;
- :func:`profiles`: Dolan-More performance profiles (seconds) and More-Wild data profiles (evaluations in
  units of ``n + 1``), one denominator for every solver (the legend says how many instances a solver did
  not apply to);
- :func:`ecdfs`: COCO's runtime distributions over 51 relative targets (evaluations / n and seconds);
- :func:`scaling`: per family, the median seconds to ``1e-8`` against the number of variables with the
  fitted exponent and its 95% interval (three sizes or more).

One colour, marker and line style per solver across every figure (:func:`styles`). matplotlib is imported
through :mod:`theorycheck._mpl` only.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import numpy as np

from .._mpl import mpl
from . import _stats as S

__all__ = ["styles", "convergence", "profiles", "ecdfs", "scaling", "FLOOR_LEVEL"]

#: levels below this (exact hits, or f below f*) are drawn at this value on the log axes
FLOOR_LEVEL = 1e-17
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")
_LINES = ("-", "--", "-.", ":")


def styles(solvers) -> dict[str, dict]:
    """``{solver: {"color", "marker", "ls"}}``, the same in every figure of a report (sorted solver order)."""
    plt = mpl("matplotlib.pyplot")
    cmap = plt.get_cmap("tab20" if len(solvers) > 10 else "tab10")
    n = 20 if len(solvers) > 10 else 10
    return {
        s: {"color": cmap(i % n), "marker": _MARKERS[i % len(_MARKERS)], "ls": _LINES[i % len(_LINES)]}
        for i, s in enumerate(sorted(solvers))
    }


#: The report's figure style, applied inside each figure function only (never to the caller's matplotlib state:
#: a global update changed every later figure of the process, e.g. a verify report drawn after a benchmark).
_RC = {"font.size": 10, "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8}


def _styled(fn):
    """Run a figure function under :data:`_RC` (``matplotlib.rc_context``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mpl("matplotlib.pyplot").rc_context(_RC):
            return fn(*args, **kwargs)

    return wrapper


def _setup():
    return mpl("matplotlib.pyplot")


def _log_axes(plt, ax, xbase: float = 10.0) -> None:
    """Plain log tick labels (``1e-08``, ``16``; mathtext labels cost most of a report's time); an axis that
    spans less than two decades labels some minor ticks too, so that every axis has readable values."""
    ticker = plt.matplotlib.ticker
    for axis, base, lim in ((ax.xaxis, xbase, ax.get_xlim()), (ax.yaxis, 10.0, ax.get_ylim())):
        if axis.get_scale() == "log":
            axis.set_major_locator(ticker.LogLocator(base=base))
            axis.set_major_formatter(ticker.LogFormatter(base=base))
            lo, hi = sorted(abs(v) for v in lim)
            if base == 10.0 and lo > 0 and hi / lo < 100:
                axis.set_minor_formatter(ticker.LogFormatter(base=base, labelOnlyBase=False, minor_thresholds=(2, 1)))
            else:
                axis.set_minor_formatter(ticker.NullFormatter())


def _legend(ax) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


@_styled
def convergence(records, title: str, names: dict, style: dict, tols=(1e-4, 1e-8)):
    """Median (and 25-75% band over repeats) of the credited level against evaluations and seconds."""
    plt = _setup()
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.3))
    below = []
    by = defaultdict(list)
    for r in records:
        if r["status"] != "not applicable":
            by[r["solver"]].append(r)
    for s in sorted(by):
        recs = by[s]
        st = style[s]
        if any(row["subopt_rel"] is not None and row["subopt_rel"] < -1e-12 for r in recs for row in r["trace"]):
            below.append(names[s])
        for ax, measure in zip(axes, ("evals", "t"), strict=True):
            band = S.quantile_band(recs, measure)
            x = np.maximum(band.grid, 1.0 if measure == "evals" else 1e-6)
            med = np.clip(band.quantiles[1], FLOOR_LEVEL, None)
            label = f"{names[s]} ({band.n_credited}/{band.n_runs} credited)"
            if not np.isfinite(med).any():
                ax.plot([], [], color=st["color"], ls=st["ls"], marker=st["marker"], label=label + ": no target met")
                continue
            ax.step(x, np.where(np.isfinite(med), med, np.nan), where="post", color=st["color"], ls=st["ls"],
                    lw=1.5, label=label)  # fmt: skip
            k = int(np.flatnonzero(np.isfinite(med))[-1])
            ax.plot(x[k], med[k], st["marker"], color=st["color"], ms=5)
            if band.n_runs >= 3:
                lo = np.clip(band.quantiles[0], FLOOR_LEVEL, None)
                hi = np.clip(band.quantiles[2], FLOOR_LEVEL, None)
                hi = np.where(np.isfinite(hi), hi, np.nan)
                ax.fill_between(x, lo, hi, step="post", color=st["color"], alpha=0.15, lw=0)
    for ax, xl in zip(axes, ("evaluations (f + grad + hvp)", "seconds"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axes(plt, ax)
        ax.set_xlabel(xl)
        ax.set_ylabel("level reached: max((f - f*) / |f*|, violation)")
        for tol in tols:
            ax.axhline(tol, color="grey", ls=":", lw=0.8)
    _legend(axes[1])
    note = "median over repeats (band: 25-75%); a run counts only what its returned answer earns (credit rule)"
    if below:
        note += f"; f < f* evaluated by: {', '.join(sorted(set(below)))}"
    fig.text(0.01, 0.005, note, fontsize=7.5)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _profile_axes(plt, ax, prof, names, style, xlabel, title, base):
    for s in sorted(prof.fraction):
        st = style[s]
        na = prof.not_applicable[s] + prof.not_run[s]
        label = names[s] + (f" (n/a on {na})" if na else "")
        x = np.where(np.isfinite(prof.x), prof.x, np.nan)
        ax.step(x, prof.fraction[s], where="post", color=st["color"], ls=st["ls"], lw=1.8, label=label)
        ax.plot(x[-1:], prof.fraction[s][-1:], st["marker"], color=st["color"], ms=5)
    ax.set_xscale("log", base=base)
    _log_axes(plt, ax, xbase=base)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"fraction of the {prof.denominator} instances")
    ax.set_title(title, fontsize=10)


@_styled
def profiles(records, names: dict, style: dict, tols=(1e-4, 1e-8)):
    """Dolan-More (seconds) and More-Wild (evaluations / (n + 1)) profiles at each target, one figure."""
    plt = _setup()
    fig, axes = plt.subplots(2, len(tols), figsize=(6.2 * len(tols) + 2.5, 8.2), squeeze=False)
    for j, tol in enumerate(tols):
        p = S.performance_profile(records, tol, "t")
        _profile_axes(plt, axes[0, j], p, names, style, "tau (seconds / the fastest solver's seconds)",
                      f"performance profile, target {tol:g}", 2.0)  # fmt: skip
        d = S.data_profile(records, tol)
        _profile_axes(plt, axes[1, j], d, names, style, "kappa (evaluations / (n + 1))",
                      f"data profile, f(x) - f* <= {tol:g} (f(x0) - f*)", 10.0)  # fmt: skip
    _legend(axes[0, -1])
    fig.text(0.01, 0.005, "Dolan & More 2002; More & Wild 2009. Every solver divided by the same instances: "
             "one a solver does not apply to counts as unsolved.", fontsize=7.5)  # fmt: skip
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


@_styled
def ecdfs(records, names: dict, style: dict):
    """COCO runtime ECDFs over the 51 relative targets 1e2 .. 1e-8: evaluations / n and seconds."""
    plt = _setup()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    for ax, measure, xl in zip(axes, ("evals", "t"), ("evaluations / n", "seconds"), strict=True):
        e = S.runtime_ecdf(records, measure=measure)
        lo = min((float(v[0]) for v in e.runtimes.values() if len(v)), default=1.0)
        hi = max((float(v[-1]) for v in e.runtimes.values() if len(v)), default=10.0)
        for s in sorted(e.runtimes):
            st = style[s]
            rt = e.runtimes[s]
            x = np.concatenate([[min(lo, hi) / 2], rt, [hi * 2]]) if len(rt) else np.array([lo / 2, hi * 2])
            y = e.fraction(s, x)
            ax.step(x, y, where="post", color=st["color"], ls=st["ls"], lw=1.8, label=names[s])
            ax.plot(x[-1:], y[-1:], st["marker"], color=st["color"], ms=5)
        ax.set_xscale("log")
        _log_axes(plt, ax)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(xl)
        ax.set_ylabel(f"fraction of {e.denominator} (instance, target) pairs")
    _legend(axes[1])
    fig.suptitle("runtime distributions (COCO): 51 relative targets 1e2 .. 1e-8")
    fig.tight_layout()
    return fig


@_styled
def scaling(records, family: str, names: dict, style: dict, tol: float = 1e-8):
    """Median seconds to ``tol`` against ``n`` per solver, with the fitted exponent; ``(figure or None, fits)``."""
    mine = [r for r in records if r["family"] == family]
    axis = "n" if len({r["n"] for r in mine}) > 1 else "V1"  # the structured form: n fixed, V1 grows
    fits = {s: e for (_, s), e in S.scaling_exponents(mine, tol, "t", size_key=axis).items()}
    drawable = {s: e for s, e in fits.items() if len(e.sizes) >= 2}
    if not drawable:
        return None, fits
    plt = _setup()
    fig, ax = plt.subplots(figsize=(8, 4.3))
    sizes: set[float] = set()
    for s, e in sorted(drawable.items()):
        st = style[s]
        lab = names[s]
        lab += f": exponent {e.slope:.2f} [{e.low:.2f}, {e.high:.2f}]" if math.isfinite(e.slope) else " (< 3 sizes)"
        ax.plot(e.sizes, e.medians, color=st["color"], ls=st["ls"], marker=st["marker"], label=lab)
        sizes.update(float(v) for v in e.sizes)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axes(plt, ax)
    ticks = sorted(sizes)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{int(t):,}" for t in ticks], rotation=30, ha="right")
    ax.xaxis.set_minor_formatter(plt.matplotlib.ticker.NullFormatter())
    ax.set_xlabel("number of variables n" if axis == "n" else "vocabulary size V1 (n fixed)")
    ax.set_ylabel(f"median seconds to {tol:g} (solved runs)")
    ax.set_title(f"{family}: scaling, t ~ C {axis}^k (k with its 95% interval)", fontsize=10)
    _legend(ax)
    fig.tight_layout()
    return fig, fits
