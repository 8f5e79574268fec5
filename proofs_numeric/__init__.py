"""The claims registry: one module per claim (theorem, lemma, derived fact).

Every module ``proofs_numeric/<name>.py`` (not starting with ``_``) defines ``CLAIM`` (a
:class:`theorycheck.claims.Claim`) or ``CLAIMS`` (a list of them). :data:`CLAIMS` collects them
all, sorted by id. Tests parametrise over it; ``theorycheck verify`` runs it.
"""

from __future__ import annotations

import importlib
import pkgutil

from theorycheck.claims import Claim

__all__ = ["CLAIMS", "get_claim"]


def _discover() -> list[Claim]:
    found: list[Claim] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "CLAIM"):
            found.append(mod.CLAIM)
        found.extend(getattr(mod, "CLAIMS", []))
    ids = [c.id for c in found]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise RuntimeError(f"duplicate claim ids: {sorted(dup)}")
    return sorted(found, key=lambda c: c.id)


CLAIMS: list[Claim] = _discover()


def get_claim(claim_id: str) -> Claim:
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim with id {claim_id!r}; known: {[c.id for c in CLAIMS]}")
