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
    ``skipped``: why the claim was not explored (no domain).
    """

    claim: Claim
    explored: list = field(default_factory=list)
    counterexample: dict | None = None
    result: ClaimResult | None = None
    error: str | None = None
    skipped: str | None = None

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "SKIP"
        return "PASS" if self.counterexample is None else "REFUTED"

    def to_json(self) -> dict:
        cx = None
        if self.counterexample is not None:
            cx = {"params": jsonable(self.counterexample), "error": self.error}
            if self.result is not None:
                r = self.result
                cx.update(expected=jsonable(r.expected), measured=jsonable(r.measured), margin=jsonable(r.margin))
                cx["decided_by"] = decided_by(r)
        return {
            "id": self.claim.id,
            "preconditions": [d for d, _ in self.claim.preconditions],
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
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    n = check_int("n", n, low=1)
    seed = check_int("seed", seed, low=0)
    out = ExploreResult(claim)
    if claim.domain is None:
        out.skipped = "no domain declared"
        return out
    pres = claim.preconditions if preconditions is None else tuple(preconditions)
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
    """:func:`explore_claim` on each claim in turn; ``progress(result)`` is called after each."""
    results = []
    for c in claims:
        r = explore_claim(c, n, seed=seed)
        results.append(r)
        if progress is not None:
            progress(r)
    return results


def format_explore(results: list[ExploreResult], *, markdown: bool = False) -> str:
    """One line (or markdown table row) per claim: verdict, number explored, preconditions, counterexample."""
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
        pre = r.claim.precondition_text() or "-"
        note = r.skipped or cx
        if markdown:
            lines.append(f"| {r.claim.id} | {r.verdict} | {len(r.explored)} | {pre} | {note.replace('|', '/')} |")
        else:
            lines.append(f"{r.verdict:8s} {r.claim.id:40s} explored {len(r.explored):3d}  pre: {pre}  {note}")
    return "\n".join(lines)


def _fmt_params(p: dict) -> str:
    def one(v):
        return f"{v:.6g}" if isinstance(v, float) else repr(v)

    return "{" + ", ".join(f"{k}={one(v)}" for k, v in p.items()) + "}"


def write_explore_report(
    results: list[ExploreResult], out, *, n: int, seed: int, force: bool = False, command: str = ""
):
    """Write ``report.md`` and ``results.json`` (``"explored"``, ``"counterexample"`` per claim) into ``out``."""
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
