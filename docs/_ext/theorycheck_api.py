"""The public API, as the documentation site and the docstring checks see it (no Sphinx needed: the tests import it).

- :data:`PACKAGES`: the facade and each subpackage; their ``__all__`` make the *public objects*
  (:func:`public_objects`), the objects ``tests/test_spec_links.py`` holds to the SPEC.
- :data:`FACADES`: every module whose ``__all__`` the API reference documents (the packages and their public
  modules: ``theorycheck.analysis.landscape``, ``theorycheck.realdata.pipeline``, ...); their objects are the
  *documented objects* (:func:`documented_objects`): numpydoc's validator and the doctests run over all of them.
"""

from __future__ import annotations

import importlib
import types

#: The packages whose ``__all__`` make the public objects (the API reference documents the same set).
PACKAGES = (
    "theorycheck",
    "theorycheck.models",
    "theorycheck.sampling",
    "theorycheck.population",
    "theorycheck.solvers",
    "theorycheck.problems",
    "theorycheck.nn",
    "theorycheck.analysis",
    "theorycheck.report",
    "theorycheck.realdata",
)

#: The facades whose ``__all__`` the API reference documents. A name's home page is the first facade
#: in this order that exports it; the others link there (so every object is documented once).
FACADES = [
    "theorycheck.models",
    "theorycheck.population",
    "theorycheck.sampling",
    "theorycheck.solvers",
    "theorycheck.problems",
    "theorycheck.analysis.topic_structure",
    "theorycheck.analysis.stats",
    "theorycheck.analysis.dynamics",
    "theorycheck.analysis.landscape",
    "theorycheck.analysis.phase",
    "theorycheck.analysis",
    "theorycheck.strategies",
    "theorycheck.diagnostics",
    "theorycheck.spec",
    "theorycheck.nn",
    "theorycheck.report",
    "theorycheck.report.explore",
    "theorycheck.realdata",
    "theorycheck.realdata.corpus",
    "theorycheck.realdata.tokenizer",
    "theorycheck.realdata.encoder",
    "theorycheck.realdata.mapping",
    "theorycheck.realdata.topics",
    "theorycheck.realdata.stats",
    "theorycheck.realdata.theory",
    "theorycheck.realdata.attention_theory",
    "theorycheck.realdata.lifts",
    "theorycheck.realdata.theory_lifts",
    "theorycheck.realdata.output",
    "theorycheck.realdata.plots",
    "theorycheck.realdata.pipeline",
    "theorycheck",
]


def public_objects() -> list[tuple[str, object]]:
    """(qualified name, object) of every callable in a public ``__all__`` of :data:`PACKAGES`, first occurrence
    only."""
    seen, out = set(), []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            out.append((f"{pkg}.{name}", obj))
    return out


def documented_objects() -> list[tuple[str, object]]:
    """The public objects, then every other function and class the API reference documents (the ``__all__`` of
    :data:`FACADES`), each once, by the first name that exports it."""
    out = public_objects()
    seen = {id(obj) for _, obj in out}
    for facade in FACADES:
        mod = importlib.import_module(facade)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and not isinstance(obj, types.ModuleType) and id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{facade}.{name}", obj))
    return out
