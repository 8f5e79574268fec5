"""Explore a claim over its whole domain (``theorycheck verify --explore N``).

A claim with a ``domain`` (a hypothesis strategy of parameter dicts) and ``preconditions`` is
checked at N configurations drawn from the domain restricted to its preconditions, with
hypothesis (``database=None``, phases generate + shrink, seeded by ``seed``: the same seed draws
the same configurations). When a configuration fails (or raises), hypothesis shrinks it to a
minimal failing configuration, the *counterexample*.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .._io import atomic_directory, dumps_json, jsonable
from .._validate import check_int
from .claims import Claim, ClaimResult
from .runner import decided_by

__all__ = ["ExploreResult", "explore_claim", "explore_claims", "format_explore", "write_explore_report"]


@dataclass
class ExploreResult:
    """Outcome of exploring one claim.

    ``explored``: the configurations checked before the first failure (all N if none failed);
    ``counterexample``: the shrunk minimal failing configuration, or None; ``result``: its
    :class:`ClaimResult` (None if it raised: then ``error`` holds the traceback's last line);
    ``skipped``: why the claim was not explored (no domain); ``preconditions``: the preconditions the
    exploration used (``explore_claim``'s override, or ``None`` for the claim's own), which ``to_json``,
    :attr:`used_preconditions` and :func:`format_explore` report.

    Parameters
    ----------
    claim : Claim
        The claim explored.
    explored : list of dict
        The configurations checked before the first failure (all of them if none failed).
    counterexample : dict, optional
        The shrunk minimal failing configuration; ``None`` if none failed.
    result : ClaimResult, optional
        The check's result at the counterexample (``None`` if it raised, or without counterexample).
    error : str, optional
        The last line of the exception the check raised at the counterexample.
    skipped : str, optional
        Why the claim was not explored (``"no domain declared"``).
    preconditions : tuple of (str, callable), optional
        The preconditions used when they replaced ``claim.preconditions``; ``None``: the claim's own.

    See Also
    --------
    explore_claim : Computes it.
    format_explore : One line per result.
    write_explore_report : The report files of a list of results.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    A toy claim, ``n^2 < 1000``, over ``n`` in ``0 .. 100``: without its precondition ``n < 32`` it is
    refuted, with the minimal counterexample ``n = 32``:

    >>> from hypothesis import strategies as st
    >>> from theorycheck.report import Claim, compare_greater
    >>> def check(params, inject=None):  # the claim: 1000 - n^2 > 0
    ...     n = params["n"] if inject is None else inject["n"]
    ...     return compare_greater(float(1000 - n * n), 0.0)
    >>> claim = Claim(
    ...     id="demo.square", statement="n^2 < 1000.", source="DERIVED", spec="SPEC §6", check=check,
    ...     falsify=lambda p: {"n": 40}, default_params=({"n": 1},),
    ...     domain=lambda: st.fixed_dictionaries({"n": st.integers(0, 100)}),
    ...     preconditions=(("n < 32", lambda p: p["n"] < 32),),
    ... )
    >>> from theorycheck.report.explore import ExploreResult, explore_claim
    >>> r = explore_claim(claim, 20, preconditions=())
    >>> isinstance(r, ExploreResult), r.verdict, r.counterexample, r.result.measured
    (True, 'REFUTED', {'n': 32}, -24.0)
    >>> cx = r.to_json()["counterexample"]
    >>> cx["params"], cx["decided_by"]
    ({'n': 32}, 'measured > expected')
    >>> r.to_json()["preconditions"], claim.precondition_text()  # the ones used, not the claim's own
    ([], 'n < 32')
    """

    claim: Claim
    explored: list = field(default_factory=list)
    counterexample: dict | None = None
    result: ClaimResult | None = None
    error: str | None = None
    skipped: str | None = None
    preconditions: tuple | None = None

    @property
    def used_preconditions(self) -> tuple:
        """The ``(description, predicate)`` pairs the exploration used: the override, else the claim's own."""
        return tuple(self.claim.preconditions if self.preconditions is None else self.preconditions)

    @property
    def verdict(self) -> str:
        """``"SKIP"`` (not explored), ``"PASS"`` (no failing configuration) or ``"REFUTED"``."""
        if self.skipped:
            return "SKIP"
        return "PASS" if self.counterexample is None else "REFUTED"

    def to_json(self) -> dict:
        """The record of ``results.json``: id, preconditions, verdict, the configurations explored, and
        the counterexample with its expected and measured values and the deciding sub-check.

        Returns
        -------
        dict
            JSON-serialisable (``theorycheck._io.jsonable``).
        """
        cx = None
        if self.counterexample is not None:
            cx = {"params": jsonable(self.counterexample), "error": self.error}
            if self.result is not None:
                r = self.result
                cx.update(expected=jsonable(r.expected), measured=jsonable(r.measured), margin=jsonable(r.margin))
                cx["decided_by"] = decided_by(r)
        return {
            "id": self.claim.id,
            "preconditions": [d for d, _ in self.used_preconditions],
            "verdict": self.verdict,
            "n_explored": len(self.explored),
            "explored": jsonable(self.explored),
            "counterexample": cx,
            "skipped": self.skipped,
        }


class _Refuted(Exception):
    """Raised inside the property so that hypothesis shrinks the failing configuration."""


def explore_claim(claim: Claim, n: int, *, seed: int = 0, preconditions: tuple | None = None) -> ExploreResult:
    """Check ``claim`` at ``n`` configurations of ``claim.domain()`` satisfying its preconditions.

    ``preconditions`` overrides ``claim.preconditions`` (``()`` drops them: used to show that a
    precondition is needed). Deterministic for a given ``seed``.

    Parameters
    ----------
    claim : Claim
        The claim; without a ``domain`` it is skipped.
    n : int, n >= 1
        The number of configurations to draw (hypothesis' ``max_examples``).
    seed : int, seed >= 0, default 0
        The seed of the draw (the same seed draws the same configurations).
    preconditions : tuple of (str, callable), optional
        ``(description, predicate(params) -> bool)`` pairs replacing ``claim.preconditions``.

    Returns
    -------
    ExploreResult
        The configurations explored and, if one failed or raised, the shrunk counterexample with its
        result or error.

    Raises
    ------
    ValueError
        ``n < 1`` or ``seed < 0``.

    See Also
    --------
    explore_claims : Explore several claims.
    ExploreResult : The result.
    theorycheck.report.Claim : A claim's ``domain`` and ``preconditions``.

    References
    ----------
    SPEC §6 (the checkable claims); this module's docstring (generation and shrinking).

    Examples
    --------
    >>> from hypothesis import strategies as st
    >>> from theorycheck.report import Claim, compare_greater
    >>> def check(params, inject=None):  # the claim: 1000 - n^2 > 0
    ...     n = params["n"] if inject is None else inject["n"]
    ...     return compare_greater(float(1000 - n * n), 0.0)
    >>> claim = Claim(
    ...     id="demo.square", statement="n^2 < 1000.", source="DERIVED", spec="SPEC §6", check=check,
    ...     falsify=lambda p: {"n": 40}, default_params=({"n": 1},),
    ...     domain=lambda: st.fixed_dictionaries({"n": st.integers(0, 100)}),
    ...     preconditions=(("n < 32", lambda p: p["n"] < 32),),
    ... )
    >>> from theorycheck.report.explore import explore_claim
    >>> r = explore_claim(claim, 20, seed=0)
    >>> r.verdict, r.counterexample, all(p["n"] < 32 for p in r.explored)
    ('PASS', None, True)
    >>> r = explore_claim(claim, 20, seed=0, preconditions=())  # the precondition is needed
    >>> r.verdict, r.counterexample
    ('REFUTED', {'n': 32})
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    n = check_int("n", n, low=1)
    seed = check_int("seed", seed, low=0)
    out = ExploreResult(claim, preconditions=None if preconditions is None else tuple(preconditions))
    if claim.domain is None:
        out.skipped = "no domain declared"
        return out
    pres = out.used_preconditions
    strategy = claim.domain()
    for _, pred in pres:
        strategy = strategy.filter(pred)
    failing: list = []

    @hseed(seed)
    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(strategy)
    def prop(params):
        if not failing:
            out.explored.append(dict(params))
        res: ClaimResult | None
        try:
            res, err = claim.run(params), None
        except Exception as exc:  # a claim raising on a domain point is a finding too
            res, err = None, traceback.format_exception_only(type(exc), exc)[-1].strip()
        if res is None or not res.passed:  # res is None exactly when the claim raised (err)
            failing.append((dict(params), res, err))
            raise _Refuted(claim.id)

    try:
        prop()
    except _Refuted:
        out.counterexample, out.result, out.error = failing[-1]
    return out


def explore_claims(claims, n: int, *, seed: int = 0, progress=None) -> list[ExploreResult]:
    """:func:`explore_claim` on each claim in turn; ``progress(result)`` is called after each.

    Parameters
    ----------
    claims : iterable of Claim
        The claims, explored in order.
    n : int, n >= 1
        Configurations per claim.
    seed : int, seed >= 0, default 0
        The seed of every claim's draw.
    progress : callable, optional
        ``progress(result)`` after each claim (e.g. to print a line).

    Returns
    -------
    list of ExploreResult
        One per claim, in order.

    Raises
    ------
    ValueError
        ``n < 1`` or ``seed < 0``.

    See Also
    --------
    explore_claim : One claim.
    format_explore : The results as text.
    write_explore_report : The results as report files.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    >>> from hypothesis import strategies as st
    >>> from theorycheck.report import Claim, compare_greater
    >>> def check(params, inject=None):  # the claim: 1000 - n^2 > 0
    ...     n = params["n"] if inject is None else inject["n"]
    ...     return compare_greater(float(1000 - n * n), 0.0)
    >>> claim = Claim(
    ...     id="demo.square", statement="n^2 < 1000.", source="DERIVED", spec="SPEC §6", check=check,
    ...     falsify=lambda p: {"n": 40}, default_params=({"n": 1},),
    ...     domain=lambda: st.fixed_dictionaries({"n": st.integers(0, 100)}),
    ...     preconditions=(("n < 32", lambda p: p["n"] < 32),),
    ... )
    >>> from theorycheck.report.explore import explore_claims
    >>> rs = explore_claims([claim], 20, progress=lambda r: print(r.claim.id, r.verdict))
    demo.square PASS
    >>> len(rs)
    1
    """
    results = []
    for c in claims:
        r = explore_claim(c, n, seed=seed)
        results.append(r)
        if progress is not None:
            progress(r)
    return results


def format_explore(results: list[ExploreResult], *, markdown: bool = False) -> str:
    """One line (or markdown table row) per claim: verdict, number explored, preconditions, counterexample.

    Parameters
    ----------
    results : list of ExploreResult
        The explorations.
    markdown : bool, default False
        A markdown table (with a header) instead of aligned lines.

    Returns
    -------
    str
        The lines, newline-separated; a counterexample is followed by the deciding sub-check with the
        expected and measured values (or the error), a skipped claim by the reason. The preconditions are
        those the exploration used (:attr:`ExploreResult.used_preconditions`). In a markdown cell ``|`` and
        ``\\`` are backslash-escaped (GFM), so the text is kept and the table keeps its columns.

    See Also
    --------
    explore_claims : Computes the results.
    write_explore_report : Writes this table into ``report.md``.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    >>> from hypothesis import strategies as st
    >>> from theorycheck.report import Claim, compare_greater
    >>> def check(params, inject=None):  # the claim: 1000 - n^2 > 0
    ...     n = params["n"] if inject is None else inject["n"]
    ...     return compare_greater(float(1000 - n * n), 0.0)
    >>> claim = Claim(
    ...     id="demo.square", statement="n^2 < 1000.", source="DERIVED", spec="SPEC §6", check=check,
    ...     falsify=lambda p: {"n": 40}, default_params=({"n": 1},),
    ...     domain=lambda: st.fixed_dictionaries({"n": st.integers(0, 100)}),
    ...     preconditions=(("n < 32", lambda p: p["n"] < 32),),
    ... )
    >>> from theorycheck.report.explore import explore_claim, format_explore
    >>> r = explore_claim(claim, 20, preconditions=())
    >>> print(format_explore([r]))
    REFUTED  demo.square ... {n=32} (measured > expected: expected 0.0, measured -24.0)
    >>> print(format_explore([r], markdown=True).splitlines()[0])
    | claim | verdict | explored | preconditions | counterexample |
    >>> r = explore_claim(claim, 5, preconditions=(("|n| < 32", lambda p: abs(p["n"]) < 32),))
    >>> print(format_explore([r], markdown=True).splitlines()[-1])
    | demo.square | PASS | 5 | \\|n\\| < 32 |  |
    """
    lines = []
    if markdown:
        lines += ["| claim | verdict | explored | preconditions | counterexample |", "|---|---|---|---|---|"]
    for r in results:
        cx = "" if r.counterexample is None else _fmt_params(r.counterexample)
        if r.counterexample is not None:
            res = r.result  # None exactly when the claim raised (r.error)
            why = r.error
            if not r.error and res is not None:
                why = f"{decided_by(res)}: expected {res.expected}, measured {res.measured}"
            cx += f" ({why})"
        pre = " and ".join(d for d, _ in r.used_preconditions) or "-"
        note = r.skipped or cx
        if markdown:
            cells = (r.claim.id, r.verdict, str(len(r.explored)), pre, note)
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        else:
            lines.append(f"{r.verdict:8s} {r.claim.id:40s} explored {len(r.explored):3d}  pre: {pre}  {note}")
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    """``text`` as a Markdown table cell: ``\\`` and ``|`` backslash-escaped (GFM), so a ``|`` in the text neither
    splits the cell nor is lost, and unescaping (``\\X -> X``) gives the text back."""
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _fmt_params(p: dict) -> str:
    def one(v):
        return f"{v:.6g}" if isinstance(v, float) else repr(v)

    return "{" + ", ".join(f"{k}={one(v)}" for k, v in p.items()) + "}"


def write_explore_report(
    results: list[ExploreResult], out, *, n: int, seed: int, force: bool = False, command: str = ""
):
    """Write ``report.md`` and ``results.json`` (``"explored"``, ``"counterexample"`` per claim) into ``out``.

    The folder is written atomically (``theorycheck._io.atomic_directory``, with its marker file).

    Parameters
    ----------
    results : list of ExploreResult
        The explorations.
    out : str or os.PathLike
        The output folder (created; an existing one only with theorycheck's files, or with ``force``).
    n : int
        The configurations per claim (recorded in the summary).
    seed : int
        The seed used (recorded in the summary).
    force : bool, default False
        Write into an existing folder holding other files.
    command : str, optional
        The command recorded in the marker; default ``theorycheck verify --explore N --seed S``.

    Returns
    -------
    pathlib.Path
        The resolved output folder.

    Raises
    ------
    ValueError
        ``out`` is an existing file, or a folder holding other files while ``force`` is False
        (``theorycheck._io.prepare_output_dir``; the message says what to do instead).

    See Also
    --------
    explore_claims : Computes the results.
    format_explore : The table of ``report.md``.

    References
    ----------
    SPEC §6 (the checkable claims).

    Examples
    --------
    >>> from hypothesis import strategies as st
    >>> from theorycheck.report import Claim, compare_greater
    >>> def check(params, inject=None):  # the claim: 1000 - n^2 > 0
    ...     n = params["n"] if inject is None else inject["n"]
    ...     return compare_greater(float(1000 - n * n), 0.0)
    >>> claim = Claim(
    ...     id="demo.square", statement="n^2 < 1000.", source="DERIVED", spec="SPEC §6", check=check,
    ...     falsify=lambda p: {"n": 40}, default_params=({"n": 1},),
    ...     domain=lambda: st.fixed_dictionaries({"n": st.integers(0, 100)}),
    ...     preconditions=(("n < 32", lambda p: p["n"] < 32),),
    ... )
    >>> import json
    >>> from theorycheck.report.explore import explore_claims, write_explore_report
    >>> rs = explore_claims([claim], 20)
    >>> path = write_explore_report(rs, "explore_report", n=20, seed=0)
    >>> sorted(p.name for p in path.iterdir())
    ['.theorycheck.json', 'report.md', 'results.json']
    >>> json.loads((path / "results.json").read_text())["summary"]
    {'n': 20, 'seed': 0, 'claims': 1, 'passed': 1, 'refuted': 0, 'skipped': 0}
    """
    counts = {v: sum(r.verdict == v for r in results) for v in ("PASS", "REFUTED", "SKIP")}
    summary = {"n": n, "seed": seed, "claims": len(results), "passed": counts["PASS"]}
    summary.update(refuted=counts["REFUTED"], skipped=counts["SKIP"])
    with atomic_directory(
        out, force=force, command=command or f"theorycheck verify --explore {n} --seed {seed}"
    ) as tmp:
        doc = {"summary": summary, "claims": [r.to_json() for r in results]}
        (tmp / "results.json").write_text(dumps_json(doc) + "\n")
        md = [
            "# theorycheck exploration report",
            "",
            f"Each claim with a domain was checked at up to {n} configurations drawn from it (seed {seed}) "
            "that satisfy its preconditions; a failing configuration is shrunk to a minimal counterexample.",
            "",
            f"{counts['PASS']} passed, {counts['REFUTED']} refuted, {counts['SKIP']} skipped (no domain).",
            "",
            format_explore(results, markdown=True),
            "",
        ]
        (tmp / "report.md").write_text("\n".join(md))
    return Path(os.fspath(out)).expanduser().resolve()
