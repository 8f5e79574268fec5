"""The claims registry: one module per claim (theorem, lemma, derived fact).

Every module ``proofs_numeric/<name>.py`` (not starting with ``_``) defines ``CLAIM`` (a
:class:`theorycheck.report.Claim`) or ``CLAIMS`` (a list of them). :data:`CLAIMS` collects them
all, sorted by id (a claim id defined twice is a ``ValueError`` naming both modules). Tests
parametrise over it; ``theorycheck verify`` runs it, together with users' claims
(``verify --claims PATH``) and installed plugins (:mod:`theorycheck.report.discovery`).

Every claim's ``falsify`` is sized (issue 25 item 6; the rule and its exemptions are in
``tests/test_claims.py``): it breaks the deciding equality by 1-10 x its tolerance, or moves a
tolerance-0 check's quantity at most 10 passing margins past its threshold, by a fixed number written
in the module, so that a loosened tolerance or threshold lets the falsifier pass and the test fail.

A module whose claims cannot run here (an optional extra is missing) registers none and sets
``SKIPPED`` to a one-line reason; :data:`SKIPPED` lists those reasons (each once) so that the
report says what was left out and how to enable it.
"""

from __future__ import annotations

import importlib
import pkgutil

from theorycheck.report.claims import Claim

__all__ = ["CLAIMS", "SKIPPED", "get_claim"]


def _discover() -> tuple[list[Claim], list[str]]:
    found: list[Claim] = []
    skipped: list[str] = []
    origins: dict[str, str] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mine = ([mod.CLAIM] if hasattr(mod, "CLAIM") else []) + list(getattr(mod, "CLAIMS", []))
        for c in mine:
            if c.id in origins:
                raise ValueError(f"duplicate claim id {c.id!r}: defined in {origins[c.id]} and in {mod.__name__}")
            origins[c.id] = mod.__name__
        found.extend(mine)
        reason = getattr(mod, "SKIPPED", None)
        if reason and reason not in skipped:
            skipped.append(reason)
    return sorted(found, key=lambda c: c.id), skipped


CLAIMS: list[Claim]
SKIPPED: list[str]
CLAIMS, SKIPPED = _discover()


def get_claim(claim_id: str) -> Claim:
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim with id {claim_id!r}; known: {[c.id for c in CLAIMS]}")
