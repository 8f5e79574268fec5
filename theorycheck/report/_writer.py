"""Write the verification report (DESIGN.md, "Verification report"); claims run in :mod:`.runner`.

The report folder holds ``report.md``, ``results.json`` and ``figures/*.png``. It is written
under a temporary name in the same parent directory and renamed at the end, so an interrupted
run never leaves a half-written report. ``results.json`` follows the package's JSON policy
(:mod:`theorycheck._io`): every non-finite float is written as ``null``.
"""

from __future__ import annotations

import difflib
import fnmatch
import io
import os
from collections.abc import Iterable
from pathlib import Path

from .._io import atomic_directory, dumps_json
from .._mpl import mpl
from .claims import Claim
from .discovery import external_origin, resolve, shippable
from .runner import ReportRow, _picklable, close_pool, process_pool

__all__ = ["write_report", "format_table", "select_claims", "tier_summary"]

COLUMNS = ("claim", "statement", "decided by", "expected", "measured", "margin", "verdict")


def select_claims(claims: list[Claim], only: str | None) -> list[Claim]:
    """Claims whose id matches one of the comma-separated globs or substrings ``only`` (all if ``None``).

    An empty pattern, or one matching no claim, is a ``ValueError`` naming the closest ids.

    Parameters
    ----------
    claims : list of Claim
        The claims to choose from.
    only : str or None
        Comma-separated patterns (``verify --only``): each a glob (``"stage1.*"``) or a substring of
        the ids; ``None``: every claim.

    Returns
    -------
    list of Claim
        The claims matching at least one pattern, in their given order.

    Raises
    ------
    ValueError
        An empty pattern, or a pattern that matches no claim (the message lists the closest ids).

    See Also
    --------
    collect : The claims to select from.
    run_claims : Run the selected claims.

    Examples
    --------
    >>> from theorycheck.report import Claim, ClaimResult, select_claims
    >>> def make(cid):
    ...     return Claim(id=cid, statement="-", source="DERIVED", spec="-", default_params=({},),
    ...                  check=lambda p, inject=None: ClaimResult(True, 0, 0, 0.0), falsify=lambda p: {})
    >>> claims = [make("stage1.minnorm-block"), make("stage1.loss"), make("stage2.attention-gap")]
    >>> [c.id for c in select_claims(claims, "stage1.*")]
    ['stage1.minnorm-block', 'stage1.loss']
    >>> [c.id for c in select_claims(claims, "gap,loss")]
    ['stage1.loss', 'stage2.attention-gap']
    >>> select_claims(claims, "stage3")
    Traceback (most recent call last):
        ...
    ValueError: --only 'stage3' matches no claim; closest ids: ...
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


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _verdict_cell(row: ReportRow, markdown: bool) -> str:
    if row.cached is None:
        return row.verdict
    return f"{row.verdict} (cached {row.cached})" if markdown else f"{row.verdict}*"


def _label(claim: Claim, params: dict) -> str:
    return f"{claim.id} [" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"


def tier_summary(rows: list[ReportRow], tier: str) -> dict:
    """Which checks each tier holds, for the claims in ``rows``: ``{"ran": tier, "default": [...], "full": [...]}``.

    ``"full"`` lists the checks ``--full`` adds to the default tier (``claim [params]`` labels).

    Parameters
    ----------
    rows : list of ReportRow
        Rows of a run; their claims (each once) are summarised.
    tier : {"default", "full"}
        The tier that ran (recorded as ``"ran"``).

    Returns
    -------
    dict
        ``{"ran": tier, "default": [labels], "full": [labels]}`` with labels ``"id [k=v,...]"``.

    See Also
    --------
    write_report : Writes this summary into both report files.
    run_claims : Runs the checks of a tier.

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close, run_claims
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):  # the stage-1 minimum is 1 - 1/(tau v) (SPEC §4.2)
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=lambda p: {"W_V": np.zeros((7, 7))},
    ...     default_params=({"T": 3, "v": 2, "tau": 2},), full_params=({"T": 4, "v": 3, "tau": 2},),
    ... )
    >>> from theorycheck.report import tier_summary
    >>> tier_summary(run_claims([claim], progress=False), "default")
    {'ran': 'default', 'default': ['demo.stage1-minimum [T=3,v=2,tau=2]'],
     'full': ['demo.stage1-minimum [T=4,v=3,tau=2]']}
    """
    claims = list({id(r.claim): r.claim for r in rows}.values())
    return {
        "ran": tier,
        "default": [_label(c, p) for c in claims for p in c.default_params],
        "full": [_label(c, p) for c in claims for p in c.full_params],
    }


def format_table(rows: list[ReportRow], *, markdown: bool = False, width: int = 60, label_width: int = 40) -> str:
    """Table with the fixed column order (claim, statement, decided by, expected, measured, margin, verdict).

    ``decided by`` names the sub-check whose expected value, measured value and margin the row shows
    (:attr:`ReportRow.decided_by`: the result's ``label``, else generated from the comparison); the
    console cuts the statement to ``width`` characters and the sub-check to ``label_width``.

    A row reused from the result cache shows its verdict as ``PASS*`` (console) or
    ``PASS (cached <date>)`` (markdown).

    Parameters
    ----------
    rows : list of ReportRow
        The rows, in the order shown.
    markdown : bool
        A Markdown table (``report.md``: the claim labelled with its parameters, nothing cut) instead
        of the aligned console table.
    width : int
        Console: the statement is cut to this many characters.
    label_width : int
        Console: the ``decided by`` cell is cut to this many characters.

    Returns
    -------
    str
        The table, one line per row after the header (and, on the console, a footnote for cached rows).

    See Also
    --------
    write_report : Writes the Markdown table into ``report.md``.
    decided_by : The ``decided by`` column.

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close, run_claims
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):  # the stage-1 minimum is 1 - 1/(tau v) (SPEC §4.2)
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=lambda p: {"W_V": np.zeros((7, 7))},
    ...     default_params=({"T": 3, "v": 2, "tau": 2},), full_params=({"T": 4, "v": 3, "tau": 2},),
    ... )
    >>> from theorycheck.report import format_table
    >>> rows = run_claims([claim], progress=False, tier="full")
    >>> print(format_table(rows, markdown=True))
    | claim | statement | decided by | expected | measured | margin | verdict |
    |---|---|---|---|---|---|---|
    | demo.stage1-minimum [T=3,v=2,tau=2] | The stage-1 minimum is 1 - 1/(tau v).
      | \\|measured - expected\\| <= 1e-12 | 0.75 | 0.75 | 1e-12 | PASS |
    | demo.stage1-minimum [T=4,v=3,tau=2] | The stage-1 minimum is 1 - 1/(tau v).
      | \\|measured - expected\\| <= 1e-12 | 0.833333 | 0.833333 | 1e-12 | PASS |
    >>> print(format_table(rows[:1], width=20))
    claim                statement             decided by                      expected  measured  margin  verdict
    --------------------------------------------------------------------------------------------------------------
    demo.stage1-minimum  The stage-1 minim...  |measured - expected| <= 1e-12  0.75      0.75      1e-12   PASS
    """
    body = []
    for row in rows:
        st, by = row.claim.statement, row.decided_by
        if not markdown:
            st, by = _cut(st, width), _cut(by, label_width)
        body.append(
            [
                _label(row.claim, row.result.params) if markdown else row.claim.id,
                st,
                by,
                _fmt(row.result.expected),
                _fmt(row.result.measured),
                _fmt(row.result.margin),
                _verdict_cell(row, markdown),
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
    cached = sorted({r.cached for r in rows if r.cached})
    if cached:
        out.append(f"* reused from the result cache (stored {', '.join(cached)}); --no-cache recomputes")
    return "\n".join(out)


def write_report(
    rows: list[ReportRow],
    out: str | os.PathLike,
    *,
    figures: bool = True,
    skipped: Iterable[str] = (),
    force: bool = False,
    command: str = "theorycheck verify",
    tier: str = "default",
    jobs: int = 1,
) -> Path:
    """Write ``report.md``, ``results.json`` and figures into ``out`` atomically; return the path.

    ``skipped`` lists one-line reasons for claims that could not be registered here (e.g. an
    optional extra is missing); they appear in both files. ``out`` is replaced only if it is
    new, empty or theorycheck's own; ``force`` writes into a folder holding other files, keeping
    them (``theorycheck._io.atomic_directory``). ``command`` is recorded in the folder's marker.
    ``tier`` names the tier that ran; both files list the checks each tier holds (:func:`tier_summary`)
    and mark rows reused from the result cache with their date. ``jobs``: worker processes drawing the figures
    (when at least ``PARALLEL_FIGURES_MIN`` claims have a plot).

    Parameters
    ----------
    rows : list of ReportRow
        The rows of a run (:func:`run_claims`).
    out : str or path-like
        The report folder.
    figures : bool
        Draw every claim's figures (``claim.plot``) into ``figures/``.
    skipped : iterable of str
        One-line reasons for claims not registered here.
    force : bool
        Write into a folder holding other files (kept).
    command : str
        The command recorded in the folder's marker file.
    tier : {"default", "full"}
        The tier that ran.
    jobs : int
        Worker processes drawing the figures, ``jobs >= 1``.

    Returns
    -------
    pathlib.Path
        The report folder, absolute.

    Raises
    ------
    FileExistsError
        ``out`` holds files that are not theorycheck's and ``force`` is false.

    See Also
    --------
    run_claims : The rows to write.
    format_table : The table of ``report.md``.
    tier_summary : The tiers' checks, listed in both files.

    References
    ----------
    SPEC §6 (the checkable claims the report lists).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.report import Claim, compare_close, run_claims
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> def check(params, inject=None):  # the stage-1 minimum is 1 - 1/(tau v) (SPEC §4.2)
    ...     tm, mk = TopicModel(T=params["T"], v=params["v"], tau=params["tau"]), Masking()
    ...     W = stage1_value_matrix(tm, mk) if inject is None else inject["W_V"]
    ...     return compare_close(value_loss(W, tm, mk), 1 - 1 / (tm.tau * tm.v), tol=1e-12)
    >>> claim = Claim(
    ...     id="demo.stage1-minimum", statement="The stage-1 minimum is 1 - 1/(tau v).",
    ...     source="DERIVED", spec="SPEC §4.2", check=check, falsify=lambda p: {"W_V": np.zeros((7, 7))},
    ...     default_params=({"T": 3, "v": 2, "tau": 2},), full_params=({"T": 4, "v": 3, "tau": 2},),
    ... )
    >>> import json, os
    >>> from theorycheck.report import write_report
    >>> path = write_report(run_claims([claim], progress=False), "report")
    >>> path.name, sorted(os.listdir("report"))
    ('report', ['.theorycheck.json', 'figures', 'report.md', 'results.json'])
    >>> json.load(open("report/results.json"))["summary"]
    {'total': 1, 'passed': 1, 'failed': 0, 'tier': 'default', 'claims': 1, 'checks': 1, 'cached': 0}
    >>> open("report/report.md").read().splitlines()[2]
    '1 claim, 1 check: 1 passed.'
    """
    with atomic_directory(out, force=force, command=command) as tmp:
        fig_paths = _write_figures(rows, tmp / "figures", jobs) if figures else {}
        n_pass = sum(r.verdict == "PASS" for r in rows)
        n_claims = len({r.claim.id for r in rows})
        n_cached = sum(r.cached is not None for r in rows)
        tiers = tier_summary(rows, tier)
        (tmp / "results.json").write_text(dumps_json(_results(rows, skipped, tiers, n_pass, n_cached)) + "\n")
        md = [
            "# theorycheck verification report",
            "",
            _summary_text(rows, n_claims),
            "",
            _tier_text(tiers, n_cached),
            "",
            "Each row shows the sub-check that decided it (`decided by`: the one closest to failure), with "
            "its expected value, measured value and margin. Margins are distances to the failure threshold: "
            ">= 0 means passed (tolerance minus error for equalities, difference for strict inequalities).",
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
            if external_origin(c.id):
                md += [f"Defined outside theorycheck: {external_origin(c.id)}.", ""]
            md += [f"Tiers: {len(c.default_params)} default check(s); `--full` adds {len(c.full_params)}.", ""]
            dom = "declared (`verify --explore N`)" if c.domain is not None else "none (not explored)"
            md += [f"Preconditions: {c.precondition_text() or 'none'}. Domain: {dom}.", ""]
            md += _seed_lines([x for x in rows if x.claim is c])
            for name in fig_paths.get(c.id, []):
                md += [f"![{c.id} {name}](figures/{name})", ""]
        if skipped:
            md += ["## Skipped", ""] + [f"- {reason}" for reason in skipped] + [""]
        errors = [(r.claim.id, r.error) for r in rows if r.error]
        if errors:
            md += ["## Errors", ""]
            for cid, err in errors:
                md += [f"### {cid}", "", "```", err, "```", ""]
        (tmp / "report.md").write_text("\n".join(md))
    return Path(os.fspath(out)).expanduser().resolve()


def _summary_text(rows: list[ReportRow], n_claims: int) -> str:
    """``"44 claims, 85 checks: 85 passed."`` (failures and errors counted when there are any)."""
    n_fail = sum(r.verdict == "FAIL" for r in rows)
    n_err = sum(r.verdict == "ERROR" for r in rows)
    parts = [f"{len(rows) - n_fail - n_err} passed"]
    parts += [f"{n_fail} failed"] if n_fail else []
    parts += [f"{n_err} raised an error"] if n_err else []
    return f"{_plural(n_claims, 'claim')}, {_plural(len(rows), 'check')}: " + ", ".join(parts) + "."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _results(rows, skipped, tiers: dict, n_pass: int, n_cached: int) -> dict:
    summary = {"total": len(rows), "passed": n_pass, "failed": len(rows) - n_pass, "tier": tiers["ran"]}
    summary.update(claims=len({r.claim.id for r in rows}), checks=len(rows))
    summary["cached"] = n_cached
    return {"summary": summary, "claims": [r.to_json() for r in rows], "skipped": list(skipped), "tiers": tiers}


def _seed_lines(rows: list[ReportRow]) -> list[str]:
    """For multi-seed checks (:func:`~theorycheck.report.claims.over_seeds`): seeds passing and 95% t-intervals."""
    out = []
    for r in rows:
        d = r.result.details
        if "fraction_passed" not in d or "n_seeds" not in d:
            continue
        n = int(d["n_seeds"])
        cis = [f"{k[:-5]} [{_fmt(v[0])}, {_fmt(v[1])}]" for k, v in d.items() if k.endswith("_ci95") and len(v) == 2]
        out.append(
            f"- seeds {d['seeds']}: {round(d['fraction_passed'] * n)}/{n} passed; 95% t-intervals over seeds: "
            + "; ".join(cis)
        )
    return out + [""] if out else []


def _tier_text(tiers: dict, n_cached: int) -> str:
    extra = (
        f"`theorycheck verify --full` adds {len(tiers['full'])} checks (long and multi-seed runs): "
        + "; ".join(f"`{x}`" for x in tiers["full"])
        + "."
        if tiers["full"]
        else "No check is reserved for `--full`."
    )
    ran = "full (default + `--full` checks)" if tiers["ran"] == "full" else "default"
    cached = f" {n_cached} row(s) reused from the result cache are marked with their date." if n_cached else ""
    return f"Tier run: **{ran}**. The default tier holds {len(tiers['default'])} checks; {extra}{cached}"


#: Figures are drawn in worker processes (:func:`render_figures`, one task per claim) when ``jobs > 1`` and at least
#: this many claims have a plot: drawing and PNG encoding cost 0.3-0.7 s of CPU per figure, about 12 s for the
#: default tier's 21, which one process would add to the end of the run.
PARALLEL_FIGURES_MIN = 4


def render_figures(claim, results: list) -> dict[str, bytes]:
    """The PNG files of ``claim.plot(results)`` by name (``claim`` may be a
    :class:`~theorycheck.report.discovery.ClaimRef`); module-level so that a worker process can run it."""
    claim = resolve(claim)
    plt = mpl("matplotlib.pyplot")
    out = {}
    for name, fig in claim.plot(results).items():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        out[name] = buf.getvalue()
    return out


def _write_figures(rows: list[ReportRow], folder: Path, jobs: int = 1) -> dict[str, list[str]]:
    """Every claim's figures as ``figures/<claim>.<name>.png``, drawn in ``jobs`` worker processes when there are
    enough (:data:`PARALLEL_FIGURES_MIN`; a claim that cannot be pickled is drawn here), the same bytes either way."""
    folder.mkdir(parents=True, exist_ok=True)
    by_claim: dict[str, list[ReportRow]] = {}
    for r in rows:
        if r.error is None and r.claim.plot is not None:
            by_claim.setdefault(r.claim.id, []).append(r)
    tasks = {cid: (shippable(crow[0].claim), [r.result for r in crow]) for cid, crow in by_claim.items()}
    remote = [cid for cid, task in tasks.items() if _picklable(task)] if jobs > 1 else []
    pngs: dict[str, dict[str, bytes]] = {}
    if len(remote) >= PARALLEL_FIGURES_MIN:
        pool, interrupted = process_pool(min(jobs, len(remote))), False
        try:
            futures = {cid: pool.submit(render_figures, *tasks[cid]) for cid in remote}
            pngs = {cid: fut.result() for cid, fut in futures.items()}
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            close_pool(pool, interrupted)
    written: dict[str, list[str]] = {}
    for cid, crow in by_claim.items():
        files = pngs[cid] if cid in pngs else render_figures(crow[0].claim, tasks[cid][1])
        for name, data in files.items():
            fname = f"{cid}.{name}.png"
            (folder / fname).write_bytes(data)
            written.setdefault(cid, []).append(fname)
    return written
