"""Every public object's docstring: numpydoc's validator and the docstring examples run as doctests.

The public objects are the facade's and each subpackage's ``__all__`` (the API reference documents the
same set). :data:`IGNORED` lists the validator codes not enforced, each with its reason; :data:`PENDING` lists
the objects whose docstrings are not yet complete (a ratchet: an object in it that now validates fails the
test until it is removed, so the list only shrinks). Examples run with ``doctest`` under
``NORMALIZE_WHITESPACE | ELLIPSIS`` and a float tolerance (:class:`_FloatChecker`: numbers in the output
equal to the expected ones within ``1e-9`` relative, ``1e-12`` absolute), so a value that drifts fails.
"""

from __future__ import annotations

import doctest
import importlib
import re

import numpy as np
import pytest

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

#: numpydoc validator codes not enforced, with the reason.
IGNORED = {
    "GL01": "house style: the summary starts on the line of the opening quotes (ruff's D212)",
    "GL02": "house style: the closing quotes may follow the last line",
    "GL03": "blank lines inside formulas' displays are the renderer's, not errors",
    "ES01": "an extended summary is optional when the summary states the formula",
    "SS05": "summaries of functions that compute a quantity name it ('The population loss ...')",
    "SS06": "summaries state a formula and may wrap to a second line",
    "PR08": "parameter descriptions may start with a symbol or a number (``T``, ``0 < p``)",
    "PR09": "parameter descriptions may end with a formula or a reference",
    "RT02": "Returns entries name the value (``L : float``) as numpydoc's own guide allows",
}


def public_objects():
    """(qualified name, object) of every callable in a public ``__all__``, first occurrence only."""
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


#: Objects whose docstrings are not complete yet (numpydoc errors outside IGNORED). Only shrinks.
PENDING: set[str] = set()


def _errors(qualname, obj):
    """numpydoc codes outside IGNORED, validating the object at its home (``module.qualname``): the public name
    can resolve to something else (``theorycheck.nn.stage_grid`` is also a module's name)."""
    validate = pytest.importorskip("numpydoc.validate").validate
    res = validate(f"{obj.__module__}.{obj.__qualname__}")
    assert res["type"] != "module", (qualname, "validated a module, not the object")
    return sorted({code for code, _ in res["errors"]} - set(IGNORED))


def test_numpydoc_validation_of_every_public_object():
    """Each public object validates (codes outside IGNORED) unless PENDING; a PENDING object that validates
    must leave the list."""
    bad, done = {}, []
    for qualname, obj in public_objects():
        errs = _errors(qualname, obj)
        if errs and qualname not in PENDING:
            bad[qualname] = errs
        elif not errs and qualname in PENDING:
            done.append(qualname)
    assert not bad, f"numpydoc errors (not in PENDING): {bad}"
    assert not done, f"remove from PENDING (they validate now): {done}"
    names = {q for q, _ in public_objects()}
    assert PENDING <= names, f"PENDING names no public object: {sorted(PENDING - names)}"


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


class _FloatChecker(doctest.OutputChecker):
    """Doctest output equal up to floats: every number equal within rtol 1e-9, atol 1e-12, the rest exact."""

    def check_output(self, want, got, optionflags):
        if super().check_output(want, got, optionflags):
            return True
        w, g = _NUMBER.findall(want), _NUMBER.findall(got)
        if len(w) != len(g) or not super().check_output(_NUMBER.sub("0", want), _NUMBER.sub("0", got), optionflags):
            return False
        return bool(np.allclose(np.array(w, float), np.array(g, float), rtol=1e-9, atol=1e-12))


def _doctests():
    finder = doctest.DocTestFinder(recurse=False)
    out = []
    for qualname, obj in public_objects():
        for t in finder.find(obj, qualname, globs={}):
            if t.examples and qualname not in PENDING:  # PENDING objects' examples are checked when they leave it
                out.append(pytest.param(t, id=qualname))
    return out


@pytest.mark.parametrize("test", _doctests())
def test_docstring_examples_run(test, tmp_path, monkeypatch):
    """The object's ``>>>`` examples run and print what the docstring says (floats within 1e-9 relative)."""
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    runner = doctest.DocTestRunner(checker=_FloatChecker(), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    test.globs = {"np": np}  # as in numpy's and scipy's docs; everything else is imported by the example
    result = runner.run(test, out=lambda s: pytest.fail(s, pytrace=False))
    assert result.failed == 0


def test_examples_are_not_skipped():
    """An example marked ``+SKIP`` is not checked: public docstrings (outside PENDING) have none."""
    skipped = [q for q, o in public_objects() if q not in PENDING and "doctest: +SKIP" in (o.__doc__ or "")]
    assert not skipped, skipped
