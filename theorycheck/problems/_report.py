"""Benchmark outputs from the run records: table (CSV, JSON), figures (PNG) and one HTML page.

- ``results.csv`` / ``results.json``: one row per run (the traces are in ``results.json`` and the
  per-cell files only);
- ``figures/convergence_<problem>_<level>.png``: suboptimality ``f(x) - f*`` (relative, log scale)
  against wall time and against evaluations, every solver, repeat 0;
- ``figures/profile_<tol>.png``: Dolan-More performance profiles: for each solver the fraction of
  instances (problem, size, repeat) solved to relative suboptimality ``tol`` within a factor
  ``tau`` of the fastest solver's time;
- ``figures/scaling_<family>.png``: time to ``1e-8`` against the number of variables (or ``V1``
  where that is fixed, as in the structured stage-1 form), log-log, with
  the least-squares slope (the fitted exponent) in the legend;
- ``report.html``: every table and figure, the figures embedded (base64), no other file needed.

matplotlib is imported here only (optional dependency; without it the figures are skipped).
"""

from __future__ import annotations

import ast
import base64
import csv
import html
import io
import json
import math
import re
from collections import defaultdict

import numpy as np

from .._io import atomic_write_bytes, dumps_json
from .._mpl import mpl
from ._harness import FAILURES, TOLS

__all__ = ["COLUMNS", "write_outputs", "performance_profile", "fit_exponent", "size_text"]

COLUMNS = [
    "problem", "family", "model", "size", "n", "V1", "solver", "repeat", "status", "wall", "nfev", "ngev",
    "nhev", "f", "f_star", "cert_gap", "cert_kind", "subopt_abs", "subopt_rel", "violation", "distance",
    "time_to_0.0001", "time_to_1e-08", "evals_to_0.0001", "evals_to_1e-08", "message",
]  # fmt: skip


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def performance_profile(records, tol: float):
    """``(taus, {solver: fraction})`` of the Dolan-More profile at relative accuracy ``tol``.

    Instances are (problem, size, repeat) run by at least one solver; ``t_s`` is the time to ``tol``
    (infinite if never reached or failed), ``r_s = t_s / min_s t_s`` and the profile is
    ``rho_s(tau) = #{instances: r_s <= tau} / #instances``.
    """
    key = f"time_to_{tol:g}"
    inst: defaultdict[tuple, dict[str, float]] = defaultdict(dict)
    for r in records:
        t = r.get(key)
        inst[(r["problem"], r["size"], r["repeat"])][r["solver"]] = math.inf if t is None else max(float(t), 1e-9)
    solvers = sorted({r["solver"] for r in records})
    ratios: dict[str, list[float]] = {s: [] for s in solvers}
    for times in inst.values():
        best = min(times.values())
        for s in solvers:
            t = times.get(s)
            if t is None:
                continue  # solver does not apply to this instance
            ratios[s].append(math.inf if not math.isfinite(best) or not math.isfinite(t) else t / best)
    finite = [x for v in ratios.values() for x in v if math.isfinite(x)]
    top = max(finite + [2.0]) * 2
    taus = np.logspace(0, math.log10(top), 200)
    prof = {s: np.array([np.mean(np.array(v) <= tau) if v else 0.0 for tau in taus]) for s, v in ratios.items()}
    return taus, prof


def fit_exponent(n, t) -> float:
    """Least-squares slope of ``log t`` against ``log n`` (NaN with fewer than two distinct sizes)."""
    n, t = np.asarray(n, float), np.asarray(t, float)
    if len(set(n.tolist())) < 2:
        return math.nan
    return float(np.polyfit(np.log(n), np.log(t), 1)[0])


def _write_csv(records):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    return buf.getvalue()


# ----------------------------------------------------------------------------------- figures
def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    return buf.getvalue()


def _plain_log(plt, ax, base: float = 10.0) -> None:
    """Log-scale tick labels as plain text (``1e-08``, ``16``): matplotlib's default ``$10^{-8}$`` labels
    go through its mathtext parser, which took most of the report's time (a hundred figures)."""
    ticker = plt.matplotlib.ticker
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(ticker.LogFormatter(base=base if axis is ax.xaxis else 10.0))
            axis.set_minor_formatter(ticker.NullFormatter())


_LINESTYLES = ("-", "--", "-.", ":")


def _style(plt):
    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8})


def _convergence(plt, recs, title):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    cmap = plt.get_cmap("tab10")
    floor, below = 1e-17, False
    for i, r in enumerate(sorted(recs, key=lambda r: r["solver"])):
        tr = [p for p in r["trace"] if p["subopt_rel"] is not None]
        if not tr:
            continue
        y = np.maximum(np.abs([p["subopt_rel"] for p in tr]), floor)
        t = np.maximum(np.array([p["t"] for p in tr], dtype=float), 1e-6)
        ev = np.maximum(np.array([p["evals"] for p in tr], dtype=float), 1)
        lab = r["solver"] + ("" if r["status"] in ("ok", "budget") else f" [{r['status']}]")
        # colour and line style both change from one solver to the next: curves on top of each other stay apart
        kw = dict(color=cmap(i % 10), ls=_LINESTYLES[i % len(_LINESTYLES)], label=lab, ms=4, lw=1.4)
        kw["marker"] = "o" if len(tr) < 3 else None
        axes[0].step(t, y, where="post", **kw)
        axes[1].step(ev, y, where="post", **kw)
        neg = np.array([p["subopt_rel"] < -1e-12 for p in tr])  # below f*: only possible where f* is an upper bound
        if neg.any():
            below = True
            axes[0].plot(t[neg], y[neg], "v", color=cmap(i % 10), ms=5)
            axes[1].plot(ev[neg], y[neg], "v", color=cmap(i % 10), ms=5)
    if below:
        fig.text(0.01, 0.01, "v markers: f(x) < f* (f* is only an upper bound here)", fontsize=8)
    for ax, xl in zip(axes, ("wall time [s]", "evaluations (f + grad + hvp)"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(plt, ax)
        ax.set_xlabel(xl)
        ax.set_ylabel("|f(x) - f*| / |f*|")
        for tol in TOLS:
            ax.axhline(tol, color="grey", ls=":", lw=0.8)
    axes[1].plot([], [], color="grey", ls=":", lw=0.8, label="accuracy targets " + ", ".join(f"{t:g}" for t in TOLS))
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _profile(plt, records, tol):
    taus, prof = performance_profile(records, tol)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, (s, y) in enumerate(sorted(prof.items())):
        ls = _LINESTYLES[i % len(_LINESTYLES)]  # colour and style: solvers at the same fraction stay apart
        ax.step(taus, y, where="post", label=s, color=cmap(i % 10), ls=ls, lw=2.2 - 0.15 * (i % 5))
    ax.set_xscale("log", base=2)
    _plain_log(plt, ax, base=2.0)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau (time / fastest solver's time)")
    ax.set_ylabel(f"fraction of instances solved to {tol:g}")
    ax.set_title(f"Dolan-More performance profile, relative suboptimality <= {tol:g}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _scaling(plt, recs, family):
    # size axis: the number of variables n, or V1 where n does not grow (the structured stage-1 form)
    axis = "n" if len({r["n"] for r in recs}) > 1 else "V1"
    by = defaultdict(list)
    for r in recs:
        t = r.get("time_to_1e-08")
        if t is not None:
            by[r["solver"]].append((r[axis], max(float(t), 1e-6)))
    if not by or len({n for pts in by.values() for n, _ in pts}) < 2:
        return None, {}  # one size: no exponent to fit
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cmap = plt.get_cmap("tab10")
    slopes = {}
    for i, (s, pts) in enumerate(sorted(by.items())):
        med = defaultdict(list)
        for n_, t_ in pts:
            med[n_].append(t_)
        n = sorted(med)
        t = [float(np.median(med[k])) for k in n]  # median over models and repeats at each size
        k = fit_exponent(n, t)
        slopes[s] = k
        ax.plot(n, t, "o-", color=cmap(i % 10), label=f"{s} (exponent {k:.2f})" if math.isfinite(k) else s)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log(plt, ax)
    ax.set_xlabel("number of variables n" if axis == "n" else "vocabulary size V1 (n fixed)")
    ax.set_ylabel("time to 1e-8 [s] (median over models, repeats)")
    ax.set_title(f"{family}: scaling (fitted exponent of t ~ {axis}^k)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig, slopes


# ----------------------------------------------------------------------------------- summary
def fastest(records, tol=1e-8):
    """Per family: ``(solver, median time to tol)`` of the solver with the smallest median (None if none)."""
    key = f"time_to_{tol:g}"
    by: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by[r["family"]][r["solver"]].append(math.inf if r.get(key) is None else float(r[key]))
    out = {}
    for fam, d in sorted(by.items()):
        med = {s: float(np.median(v)) for s, v in d.items()}
        s = min(med, key=lambda k: med[k])
        out[fam] = (s, med[s]) if math.isfinite(med[s]) else None
    return out


def _table_html(rows, cols):
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            if isinstance(v, float):
                v = f"{v:.3g}"
            cells.append(f"<td>{html.escape('' if v is None else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def size_text(size) -> str:
    """A problem size for a title: ``{"T": 3, "v": 4}`` (a dict, or its JSON or Python text, as the
    records store it) reads ``T = 3, v = 4``; anything else is returned as text."""
    d = size
    if isinstance(size, str):
        try:
            d = json.loads(size)
        except ValueError:
            try:
                d = ast.literal_eval(size)
            except (ValueError, SyntaxError):
                return size
    if not isinstance(d, dict):
        return str(size)
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in d.items())


def _figures(recorder, records):
    """Convergence, profile and scaling PNGs written through ``recorder``: ``(figures, slopes)``."""
    figures = []
    plt = mpl("matplotlib.pyplot")
    slopes = {}
    _style(plt)
    groups = defaultdict(list)
    for r in records:
        if r["repeat"] == 0:
            groups[(r["problem"], r["size"])].append(r)
    for (prob, size), recs in sorted(groups.items()):
        label = f"{prob} ({size_text(size)})"
        fig = _convergence(plt, recs, label)
        figures.append((f"figures/convergence_{_slug(prob)}_{_slug(size)}.png", _png(fig), label))
        plt.close(fig)
    for tol in TOLS:
        fig = _profile(plt, records, tol)
        figures.append((f"figures/profile_{tol:g}.png", _png(fig), f"performance profile {tol:g}"))
        plt.close(fig)
    fams = defaultdict(list)
    for r in records:
        fams[r["family"]].append(r)
    for fam, recs in sorted(fams.items()):
        fig, sl = _scaling(plt, recs, fam)
        slopes[fam] = sl
        if fig is not None:
            figures.append((f"figures/scaling_{_slug(fam)}.png", _png(fig), f"scaling {fam}"))
            plt.close(fig)
    for rel, data, _ in figures:
        (recorder.out / rel).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(recorder.out / rel, data)
        recorder.owned.add(rel)
    return figures, slopes


def write_outputs(recorder, records, problems_info, meta, extra=None):
    """Write the table, figures and HTML page through ``recorder`` (files it owns only)."""
    flat = [{k: v for k, v in r.items() if k != "trace"} for r in records]
    recorder.write("results.csv", _write_csv(flat))
    recorder.write(
        "results.json", dumps_json({"meta": meta, **(extra or {}), "problems": problems_info, "runs": records})
    )
    figures, slopes = _figures(recorder, records)
    best = fastest(records)
    fails = [r for r in flat if r["status"] in FAILURES]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>theorycheck benchmark</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;"
        "font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px}img{max-width:100%}</style></head><body>",
        "<h1>theorycheck benchmark</h1>",
        _table_html([meta], list(meta)),
        "<h2>Fastest solver to relative suboptimality 1e-8 (median over runs)</h2>",
        _table_html(
            [
                {"family": f, "solver": b[0] if b else "none", "median time [s]": b[1] if b else None}
                for f, b in best.items()
            ],
            ["family", "solver", "median time [s]"],
        ),  # fmt: skip
        "<h2>Problems and certificates</h2>",
        _table_html(
            [
                {
                    **p,
                    "certificate": f"{p['certificate']['kind']}: {p['certificate']['method']}",
                    "gap": p["certificate"]["gap"],
                }
                for p in problems_info
            ],  # fmt: skip
            ["name", "size", "n", "constraint", "certificate", "gap", "start"],
        ),
        f"<h2>Failures ({len(fails)})</h2>",
        _table_html(fails, ["problem", "size", "solver", "repeat", "status", "message"]),
        "<h2>Runs</h2>",
        _table_html(flat, [c for c in COLUMNS if c not in ("message", "model")]),
        "<h2>Figures</h2>",
    ]
    for _, data, cap in figures:
        b64 = base64.b64encode(data).decode()
        parts.append(f"<h3>{html.escape(cap)}</h3><img src='data:image/png;base64,{b64}'>")
    parts.append("</body></html>")
    recorder.write("report.html", "\n".join(parts))
    recorder.sync()
    return {"figures": [f[0] for f in figures], "fastest": best, "slopes": slopes}
