"""Benchmark outputs from the run records: tables (CSV, JSON), figures (PNG) and one HTML page.

- ``results.csv`` / ``results.json``: one row per run (the traces are in ``results.json`` and the per-cell
  files only); ``results.json`` also holds the run's settings, the machine, the reference workload, the
  solvers' code fingerprints and the list of resumed cells;
- ``figures/``: convergence per problem and size, profiles, runtime ECDFs, scaling (:mod:`._figures`);
- ``report.html``: the summary first (per solver: runs, credited, solved, failures, medians), the ERT table
  with bootstrap intervals, failures, the solvers (display names and their files), problems and
  certificates, every figure, and the full runs table folded away. Self-contained (figures embedded).

Every statistic comes from :mod:`._stats` (one home each); this module only lays them out.
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

from .._io import atomic_write_bytes, dumps_json
from .._mpl import mpl
from . import _figures as F
from . import _stats as S
from ._execute import FAILURES
from ._harness import TOLS

__all__ = ["COLUMNS", "write_outputs", "size_text", "ert_rows", "CREDIT_RULE"]

COLUMNS = [
    "problem", "family", "model", "size", "n", "V1", "solver", "solver_name", "repeat", "status", "credited",
    "wall", "evals", "nfev", "ngev", "nhev", "f0", "f", "f_star", "f_star_lower", "cert_gap", "cert_kind",
    "subopt_abs", "subopt_rel", "below_lower", "violation", "distance", "answer_t", "answer_evals",
    "time_to_0.0001", "time_to_1e-08", "evals_to_0.0001", "evals_to_1e-08", "message",
]  # fmt: skip

CREDIT_RULE = (
    "A run earns credit only for the answer it returns (status ok or budget) and only at targets that answer "
    "meets; its time and evaluations to a target are those of the first point the oracle evaluated that met "
    "it, or of the answer's return if earlier. Points passed to the callback earn nothing; an answer after "
    "budget + grace earns nothing (status 'over budget')."
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


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


def _write_csv(records) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    return buf.getvalue()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    return buf.getvalue()


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return "" if math.isnan(v) else ("inf" if math.isinf(v) else f"{v:.3g}")
    return str(v)


def _table_html(rows, cols, title: dict | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            tip = (title or {}).get((id(r), c))
            attr = f" title='{html.escape(tip)}'" if tip else ""
            cells.append(f"<td{attr}>{html.escape(_fmt(r.get(c)))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def ert_rows(records, tol: float, names: dict, n_boot: int = 1000) -> list[dict]:
    """One row per (problem, size): per solver ``ERT [low, high]`` in evaluations and seconds at ``tol``."""
    ev = S.ert_bootstrap(records, tol, "evals", n_boot=n_boot, rng=0)
    sec = S.ert_bootstrap(records, tol, "t", n_boot=n_boot, rng=0)
    rows: dict[tuple, dict] = {}
    for (solver, prob, size), e in sorted(ev.items()):
        row = rows.setdefault((prob, size), {"problem": prob, "size": size_text(size)})
        s = sec[(solver, prob, size)]
        if math.isfinite(e.ert):
            row[names[solver]] = (
                f"{e.ert:.3g} [{e.low:.3g}, {e.high:.3g}] ev; {s.ert:.2g} [{s.low:.2g}, {s.high:.2g}] s "
                f"({e.n_success}/{e.n_runs})"
            )
        else:
            row[names[solver]] = f"inf (0/{e.n_runs})"
    return list(rows.values())


def _figures(recorder, records, names):
    """Every figure, written through ``recorder``: ``([(file, png, caption)], scaling fits)``."""
    plt = mpl("matplotlib.pyplot")
    style = F.styles(sorted({r["solver"] for r in records}))
    figures, fits = [], {}

    def add(rel, fig, cap):
        figures.append((rel, _png(fig), cap))
        plt.close(fig)

    groups = defaultdict(list)
    for r in records:
        groups[(r["problem"], r["size"])].append(r)
    for (prob, size), recs in sorted(groups.items()):
        if all(r["status"] == "not applicable" for r in recs):
            continue
        label = f"{prob} ({size_text(size)})"
        add(f"figures/convergence_{_slug(prob)}_{_slug(size)}.png", F.convergence(recs, label, names, style), label)
    add("figures/profiles.png", F.profiles(records, names, style, TOLS), "performance and data profiles")
    add("figures/ecdf.png", F.ecdfs(records, names, style), "runtime distributions (COCO)")
    for fam in sorted({r["family"] for r in records}):
        fig, fam_fits = F.scaling(records, fam, names, style)
        fits[fam] = {names[s]: e for s, e in fam_fits.items()}
        if fig is not None:
            add(f"figures/scaling_{_slug(fam)}.png", fig, f"scaling {fam}")
    for rel, data, _ in figures:
        (recorder.out / rel).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(recorder.out / rel, data)
        recorder.owned.add(rel)
    return figures, fits


_STYLE = (
    "<style>body{font-family:sans-serif;max-width:1250px;margin:auto;padding:0 1em}table{border-collapse:collapse;"
    "font-size:12px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 5px;vertical-align:top}"
    "img{max-width:100%}p.note{font-size:13px;color:#333}details{margin:1em 0}</style>"
)


def _summary_rows(records, names) -> list[dict]:
    hi, lo = S.summary_table(records, TOLS[-1]), {r["solver"]: r for r in S.summary_table(records, TOLS[0])}
    out = []
    for row in sorted(hi, key=lambda r: (-r["solved"], r["median t"] if math.isfinite(r["median t"]) else 1e300)):
        s = row["solver"]
        fails = {st: row[st] for st in FAILURES if row[st]}
        out.append({
            "solver": names[s], "instances": row["instances"], "runs": row["runs"], "n/a": row["not applicable"],
            "credited": row["credited"], f"solved {TOLS[0]:g}": lo[s]["solved"], f"solved {TOLS[-1]:g}": row["solved"],
            "median s": row["median t"], "median evals": row["median evals"], "budget": row["budget"],
            "failures": ", ".join(f"{k} {v}" for k, v in fails.items()),
        })  # fmt: skip
    return out


def machine_text(m: dict) -> str:
    """``Python 3.11.7 on Linux-..., 2 CPUs, load 0.1 / 0.2 / 0.3, theorycheck 0.1.0, 2026-11-29T08:04:10+00:00``."""
    if not m:
        return "unknown"
    load = " / ".join(f"{x:g}" for x in m.get("load_average", []))
    return (
        f"Python {m.get('python')} on {m.get('platform')}, {m.get('cpus')} CPUs, load {load}, "
        f"theorycheck {m.get('theorycheck')}, {m.get('date')}"
    )


def _archive_note(meta) -> str:
    a = meta.get("archive")
    if not a:
        return ""
    text = (
        f"Compared with the archive ({a['file']}: theorycheck {a['theorycheck']}, {a['records']} runs on these "
        f"instances; machine: {machine_text(a['machine'] or {})}). Its seconds are multiplied by "
        f"{_fmt(a['time_scale'])}, the ratio of this run's reference workload to the archive's; evaluation counts "
        "are as recorded."
    )
    if a.get("changed_since"):
        changed = ", ".join(a["changed_since"])
        text += f" The code of {changed} changed since the archive was made (its records are of the old code)."
    if a["budget_differs"]:
        text += f" Its budget was {a['budget_seconds']} s per run, not this run's: statuses may differ for that reason."
    return f"<p class='note'><b>{html.escape(text)}</b></p>"


def _head_html(meta, records, names) -> list[str]:
    """The page's head: the credit rule, the run's settings and machine, the archive, the summary tables."""
    ref = meta.get("reference", {})
    best = S.fastest(records, TOLS[-1])
    rows = _summary_rows(records, names)
    return [
        "<!doctype html><html><head><meta charset='utf-8'><title>theorycheck benchmark</title>",
        _STYLE + "</head><body>",
        "<h1>theorycheck benchmark</h1>",
        f"<p class='note'>{html.escape(CREDIT_RULE)}</p>",
        f"<p class='note'>{meta.get('cells')} runs: {meta.get('run_now')} run now, {meta.get('resumed')} resumed "
        f"from this folder (same solver code, package version and problem); budget {meta.get('budget_seconds')} s "
        f"and {meta.get('max_evals')} evaluations per run; {meta.get('repeats')} repeat(s). Machine: "
        f"{html.escape(machine_text(meta.get('machine', {})))}. Reference workload: {_fmt(ref.get('seconds'))} s "
        f"({html.escape(str(ref.get('what', '')))}); times divided by it are comparable across machines.</p>",
        _archive_note(meta),
        f"<h2>Summary (targets {TOLS[0]:g} and {TOLS[-1]:g}, every solver over the same instances)</h2>",
        _table_html(rows, list(rows[0]) if rows else []),
        f"<h2>Fastest solver to {TOLS[-1]:g} per family (median over the family's instances, unsolved = inf)</h2>",
        _table_html(
            [
                {"family": f, "solver": names[b[0]] if b else "none", "median s": b[1] if b else None}
                for f, b in best.items()
            ],
            ["family", "solver", "median s"],
        ),  # fmt: skip
    ]


def _body_html(records, flat, problems_info, extra, names) -> list[str]:
    """ERT, failures, solvers, resumed runs and problems."""
    erts = ert_rows(records, TOLS[-1], names)
    fails = [r for r in flat if r["status"] in FAILURES]
    below = [r for r in flat if r.get("below_lower")]
    parts = [
        f"<h2>Expected running time to {TOLS[-1]:g} (COCO's ERT, restarts counted; 95% bootstrap interval)</h2>",
        _table_html(erts, ["problem", "size", *sorted({k for r in erts for k in r} - {"problem", "size"})]),
        f"<h2>Failures ({len(fails)})</h2>",
        _table_html(fails, ["problem", "size", "solver_name", "repeat", "status", "wall", "message"])
        if fails
        else "<p>None.</p>",
    ]
    if below:
        parts += [
            f"<h2>Below a certified optimum ({len(below)}): a bug or an infeasible answer</h2>",
            _table_html(below, ["problem", "size", "solver_name", "repeat", "f", "f_star_lower", "violation"]),
        ]
    solvers = [{"name": d["name"], "solver": d["solver"], "code fingerprint": d["fingerprint"]}
               for d in extra.get("solvers", [])]  # fmt: skip
    parts += ["<h2>Solvers</h2>", _table_html(solvers, ["name", "solver", "code fingerprint"])]
    resumed = extra.get("resumed_cells", [])
    if resumed:
        parts.append(f"<details><summary>{len(resumed)} resumed runs</summary>")
        parts.append(_table_html(resumed, ["problem", "size", "solver", "repeat"]) + "</details>")
    probs = [{**p, "size": size_text(p["size"]), "gap": p["certificate"]["gap"],
              "certificate": f"{p['certificate']['kind']}: {p['certificate']['method']}"}
             for p in problems_info]  # fmt: skip
    parts += ["<h2>Problems and certificates</h2>",
              _table_html(probs, ["name", "size", "n", "constraint", "certificate", "gap", "start"])]  # fmt: skip
    return parts


def write_outputs(recorder, records, problems_info, meta, extra=None):
    """Write the tables, figures and HTML page through ``recorder`` (files it owns only); a summary dict."""
    extra = dict(extra or {})
    names = {d["solver"]: d["name"] for d in extra.get("solvers", [])}
    for r in records:
        names.setdefault(r["solver"], r.get("solver_name") or r["solver"])
    flat = [{k: v for k, v in r.items() if k not in ("trace", "output")} for r in records]
    recorder.write("results.csv", _write_csv(flat))
    recorder.write("results.json", dumps_json({"meta": meta, **extra, "problems": problems_info, "runs": records}))
    figures, fits = _figures(recorder, records, names)
    parts = [*_head_html(meta, records, names), *_body_html(records, flat, problems_info, extra, names)]
    parts.append("<h2>Figures</h2>")
    for _, data, cap in figures:
        b64 = base64.b64encode(data).decode()
        parts.append(f"<h3>{html.escape(cap)}</h3><img alt='{html.escape(cap)}' src='data:image/png;base64,{b64}'>")
    parts.append(f"<details><summary>All {len(flat)} runs</summary>")
    parts.append(_table_html(flat, [c for c in COLUMNS if c not in ("model", "solver")]) + "</details>")
    parts.append("</body></html>")
    recorder.write("report.html", "\n".join(parts))
    recorder.sync()
    best = {fam: (names[b[0]], b[1]) if b else None for fam, b in S.fastest(records, TOLS[-1]).items()}
    slopes = {fam: {s: e.slope for s, e in d.items()} for fam, d in fits.items()}
    return {"figures": [f[0] for f in figures], "fastest": best, "slopes": slopes}
