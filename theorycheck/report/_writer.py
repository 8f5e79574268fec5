"""Run claims and write the verification report (DESIGN.md, "Verification report").

The report folder holds ``report.md``, ``results.json`` and ``figures/*.png``. It is written
under a temporary name in the same parent directory and renamed at the end, so an interrupted
run never leaves a half-written report. ``results.json`` follows the package's JSON policy
(:mod:`theorycheck._io`): every non-finite float is written as ``null``.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from .._io import atomic_directory, dumps_json, jsonable
from .claims import Claim, ClaimResult

__all__ = ["ReportRow", "run_claims", "write_report", "format_table", "select_claims"]

COLUMNS = ("claim", "statement", "expected", "measured", "margin", "verdict")


@dataclass
class ReportRow:
    claim: Claim
    result: ClaimResult
    seconds: float
    error: str | None = None

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "ERROR"
        return "PASS" if self.result.passed else "FAIL"

    def to_json(self) -> dict:
        r = self.result
        return {
            "id": self.claim.id,
            "statement": self.claim.statement,
            "source": self.claim.source,
            "spec": self.claim.spec,
            "params": jsonable(r.params),
            "expected": jsonable(r.expected),
            "measured": jsonable(r.measured),
            "margin": jsonable(r.margin),
            "tolerance": jsonable(r.tolerance),
            "passed": bool(r.passed and self.error is None),
            "details": jsonable(r.details),
            "seconds": round(self.seconds, 4),
            "error": self.error,
        }


def select_claims(claims: list[Claim], only: str | None) -> list[Claim]:
    """Claims whose id matches one of the comma-separated globs or substrings ``only`` (all if ``None``).

    An empty pattern, or one matching no claim, is a ``ValueError`` naming the closest ids.
    """
    if only is None:
        return list(claims)
    pats = [p.strip() for p in str(only).split(",")]
    if not any(pats) or not all(pats):
        raise ValueError(f"--only {only!r}: empty pattern; give claim ids or globs, e.g. --only 'stage1.*'")
    ids = [c.id for c in claims]
    for p in pats:
        if not any(fnmatch.fnmatch(i, p) or p in i for i in ids):
            close = difflib.get_close_matches(p, ids, n=5, cutoff=0.4)
            hint = f"closest ids: {', '.join(close)}" if close else "use --list to see every id"
            raise ValueError(f"--only {p!r} matches no claim; {hint}")
    return [c for c in claims if any(fnmatch.fnmatch(c.id, p) or p in c.id for p in pats)]


def run_claims(claims: list[Claim], *, progress: bool = True) -> list[ReportRow]:
    """Run every claim on each of its default parameter sets; exceptions become ERROR rows.

    BLAS runs on one thread inside each claim (small matrices; :func:`theorycheck._threads.blas_threads`)
    unless the user asked for a thread count (``--threads`` / ``THEORYCHECK_THREADS``).
    """
    from tqdm.auto import tqdm

    from .._threads import blas_threads

    jobs = [(c, p) for c in claims for p in c.default_params]
    rows = []
    bar = tqdm(jobs, desc="claims", unit="check", disable=not progress)
    for claim, params in bar:
        bar.set_postfix_str(claim.id, refresh=False)
        t0 = time.perf_counter()
        try:
            with blas_threads():
                res = claim.run(params)
            err = None
        except Exception as exc:  # a crashing claim is reported, not hidden
            res = ClaimResult(False, "", "", -math.inf, params=dict(params))
            err = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        rows.append(ReportRow(claim, res, time.perf_counter() - t0, err))
    return rows


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def format_table(rows: list[ReportRow], *, markdown: bool = False, width: int = 60) -> str:
    """Table with the fixed column order (claim, statement, expected, measured, margin, verdict)."""
    body = []
    for row in rows:
        st = row.claim.statement
        if not markdown and len(st) > width:
            st = st[: width - 3] + "..."
        params = ",".join(f"{k}={v}" for k, v in row.result.params.items())
        body.append(
            [
                f"{row.claim.id} [{params}]" if markdown else row.claim.id,
                st,
                _fmt(row.result.expected),
                _fmt(row.result.measured),
                _fmt(row.result.margin),
                row.verdict,
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body]
        return "\n".join(lines)
    widths = [
        max(len(COLUMNS[i]), *(len(r[i]) for r in body)) if body else len(COLUMNS[i]) for i in range(len(COLUMNS))
    ]
    line = "  ".join(COLUMNS[i].ljust(widths[i]) for i in range(len(COLUMNS)))
    out = [line, "-" * len(line)]
    out += ["  ".join(r[i].ljust(widths[i]) for i in range(len(COLUMNS))) for r in body]
    return "\n".join(out)


def write_report(
    rows: list[ReportRow],
    out: str | os.PathLike,
    *,
    figures: bool = True,
    skipped=(),
    force: bool = False,
    command: str = "theorycheck verify",
) -> Path:
    """Write ``report.md``, ``results.json`` and figures into ``out`` atomically; return the path.

    ``skipped`` lists one-line reasons for claims that could not be registered here (e.g. an
    optional extra is missing); they appear in both files. ``out`` is replaced only if it is
    new, empty or theorycheck's own; ``force`` writes into a folder holding other files, keeping
    them (:func:`theorycheck._io.atomic_directory`). ``command`` is recorded in the folder's marker.
    """
    with atomic_directory(out, force=force, command=command) as tmp:
        fig_paths = _write_figures(rows, tmp / "figures") if figures else {}
        n_pass = sum(r.verdict == "PASS" for r in rows)
        results = {
            "summary": {"total": len(rows), "passed": n_pass, "failed": len(rows) - n_pass},
            "claims": [r.to_json() for r in rows],
            "skipped": list(skipped),
        }
        (tmp / "results.json").write_text(dumps_json(results) + "\n")
        md = [
            "# theorycheck verification report",
            "",
            f"{n_pass} of {len(rows)} checks passed.",
            "",
            "Margins are distances to the failure threshold: >= 0 means passed "
            "(tolerance minus error for equalities, difference for strict inequalities).",
            "",
            format_table(rows, markdown=True),
            "",
            "## Claims",
            "",
        ]
        seen = set()
        for r in rows:
            c = r.claim
            if c.id in seen:
                continue
            seen.add(c.id)
            md += [f"### {c.id} ({c.source})", "", c.statement, "", f"Source: {c.spec}.", ""]
            for name in fig_paths.get(c.id, []):
                md += [f"![{c.id} {name}](figures/{name})", ""]
        if skipped:
            md += ["## Skipped", ""] + [f"- {reason}" for reason in skipped] + [""]
        errors = [r for r in rows if r.error]
        if errors:
            md += ["## Errors", ""]
            for r in errors:
                md += [f"### {r.claim.id}", "", "```", r.error, "```", ""]
        (tmp / "report.md").write_text("\n".join(md))
    return Path(os.fspath(out)).expanduser().resolve()


def _write_figures(rows: list[ReportRow], folder: Path) -> dict[str, list[str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    by_claim: dict[str, list[ReportRow]] = {}
    for r in rows:
        if r.error is None and r.claim.plot is not None:
            by_claim.setdefault(r.claim.id, []).append(r)
    written: dict[str, list[str]] = {}
    for cid, crow in by_claim.items():
        figs = crow[0].claim.plot([r.result for r in crow])
        for name, fig in figs.items():
            fname = f"{cid}.{name}.png"
            fig.savefig(folder / fname, dpi=110, bbox_inches="tight")
            plt.close(fig)
            written.setdefault(cid, []).append(fname)
    return written
