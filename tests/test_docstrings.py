"""Every public object's docstring: numpydoc's validator and the docstring examples run as doctests.

The public objects are the facade's and each subpackage's ``__all__`` (the API reference documents the
same set). :data:`IGNORED` lists the validator codes not enforced, each with its reason; :data:`PENDING` lists
the objects whose docstrings are not yet complete (a ratchet: an object in it that now validates fails the
test until it is removed, so the list only shrinks). Examples run with ``doctest`` under
``NORMALIZE_WHITESPACE | ELLIPSIS`` and a float tolerance (``FloatChecker``: numbers in the output
equal to the expected ones within ``1e-9`` relative, ``1e-12`` absolute), so a value that drifts fails.

The examples' runner is ``docs/_ext/theorycheck_examples.py``: the docs build runs every example with it too (a
failure is a build error); here they run one test per object, the quick check while editing.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
import theorycheck_examples as examples  # the checks the docs build runs: one copy
from theorycheck_api import PACKAGES, documented_objects, public_objects  # test_spec_links imports public_objects

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


#: Objects whose docstrings are not complete yet (numpydoc errors outside IGNORED), by the module exporting them:
#: the public modules documented beside the packages (``theorycheck.analysis.landscape``, ``theorycheck.strategies``,
#: ``theorycheck.realdata.pipeline``, ...). A ratchet: an object that validates must leave the list (it only shrinks).
_PENDING_BY_MODULE: dict[str, str] = {}  # every documented object validates (the ratchet reached empty)
PENDING: set[str] = {f"{module}.{name}" for module, names in _PENDING_BY_MODULE.items() for name in names.split()}


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
    for qualname, obj in documented_objects():
        errs = _errors(qualname, obj)
        if errs and qualname not in PENDING:
            bad[qualname] = errs
        elif not errs and qualname in PENDING:
            done.append(qualname)
    assert not bad, f"numpydoc errors (not in PENDING): {bad}"
    assert not done, f"remove from PENDING (they validate now): {done}"
    names = {q for q, _ in documented_objects()}
    assert PENDING <= names, f"PENDING names no public object: {sorted(PENDING - names)}"


def _doctests():
    return [pytest.param(t, id=q) for q, t in examples.docstring_tests()]


@pytest.mark.parametrize("test", _doctests())
def test_docstring_examples_run(test):
    """The object's ``>>>`` examples run and print what the docstring says (floats within 1e-9 relative); a
    PENDING object's examples too."""
    report = examples.run_docstring(test)
    assert not report, "".join(report)


def test_examples_are_not_skipped():
    """An example marked ``+SKIP`` is not checked: public docstrings (outside PENDING) have none."""
    skipped = [q for q, o in documented_objects() if q not in PENDING and "doctest: +SKIP" in (o.__doc__ or "")]
    assert not skipped, skipped


# -- the documented types and the annotations (the reference shows both: the signature and the Parameters) -------

#: A word of a numpydoc type -> the annotation names that agree with it (a class name must match itself or a base).
_AGREES = {
    "int": {"int"},
    "float": {"float", "ArrayLike"},  # a float is array-like
    "bool": {"bool"},
    "str": {"str", "Literal"},
    "{": {"str", "Literal", "int"},  # a set of allowed values
    "array_like": {"ArrayLike", "ndarray", "Sequence", "Iterable"},
    "ndarray": {"ndarray", "ArrayLike"},
    "sequence": {"Sequence", "ArrayLike", "Iterable", "list", "tuple"},
    "callable": {"Callable"},
    "dict": {"dict", "Mapping"},
}
#: (object, parameter): why its documented type is wider than its annotation.
TYPE_EXCEPTIONS = {
    ("theorycheck.nn.TrainConfig", name): "a dict is converted in __post_init__; the annotation is the field's type "
    "after the conversion (what the attribute holds)"
    for name in ("data", "model", "optim")
}


def _doc_words(doc_type: str) -> list[str]:
    """The type words of a numpydoc type (``"float or array_like, shape (n,)"`` -> ``["float", "array_like"]``;
    ``{"a", "b"}`` -> ``"{"``): the part before the first comma outside braces, split on "or"."""
    head = re.split(r",(?![^{]*})", doc_type)[0]
    words = []
    for alt in re.split(r"\s+or\s+", head.strip()):
        word = "{" if alt.startswith("{") else re.split(r"\s+of\s+|\s|\(", alt.strip())[0].strip("`~")
        words.append(word.rsplit(".", 1)[-1])
    return words


def _agrees(word: str, annotation: str, module) -> bool:
    names = {n.rsplit(".", 1)[-1] for n in re.findall(r"[A-Za-z_][\w.]*", annotation)}
    if word.lower() in _AGREES:
        return bool(_AGREES[word.lower()] & names)
    if not word[:1].isupper() or word in names:
        return not word[:1].isupper() or word in names  # a lower-case word we do not know: not checked
    documented = _class(word, module)
    return documented is not None and any(
        (base := _class(n, module)) is not None and issubclass(documented, base) for n in names
    )


def _class(name: str, module) -> type | None:
    """The class a type word names: in the object's module, else in a public facade."""
    for where in (module, *(importlib.import_module(p) for p in PACKAGES)):
        obj = getattr(where, name, None)
        if isinstance(obj, type):
            return obj
    return None


def _parameter_types(obj):
    """(parameter, documented type, annotation string) of the documented, annotated parameters of ``obj``; the
    names of a shared entry (``tm, mk : TopicModel, Masking``) paired with the types in order."""
    from numpydoc.docscrape import NumpyDocString

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    out = []
    for entry in NumpyDocString(inspect.getdoc(obj) or "")["Parameters"]:
        names = [n.strip().lstrip("*") for n in entry.name.split(",")]
        types = [entry.type] * len(names)
        parts = [t.strip() for t in re.split(r",(?![^{(]*[})])", entry.type)]
        if (
            len(names) > 1
            and len(parts) == len(names)
            and not any(re.match(r"shape|default|optional", t) for t in parts)
        ):
            types = parts  # one type each, in order
        for name, doc_type in zip(names, types):
            p = sig.parameters.get(name)
            if p is not None and p.annotation is not inspect.Parameter.empty:
                ann = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)
                out.append((name, doc_type, ann))
    return out


def test_documented_types_agree_with_the_annotations():
    """Each type word of a Parameters entry (``int``, ``array_like``, a class, ...) agrees with the parameter's
    annotation (shown in the signature): the reference never states two types. Annotations ``Any``/``object``
    say nothing to disagree with."""
    pytest.importorskip("numpydoc")
    bad = []
    for qualname, obj in public_objects():
        module = sys.modules[obj.__module__]
        for name, doc_type, ann in _parameter_types(obj):
            if (qualname, name) in TYPE_EXCEPTIONS or re.fullmatch(r"(Any|object)( \| None)?", ann):
                continue
            wrong = [w for w in _doc_words(doc_type) if w != "None" and not _agrees(w, ann, module)]
            if wrong:
                bad.append(f"{qualname}({name}): documented {doc_type!r}, annotated {ann!r}")
    assert not bad, "\n".join(bad)


def test_the_type_comparison_sees_a_disagreement():
    module = sys.modules["theorycheck"]
    assert _doc_words("float or array_like, shape (n,)") == ["float", "array_like"]
    assert _doc_words('{"a", "b"}, default "a"') == ["{"]
    assert _agrees("float", "ArrayLike | None", module) and _agrees("TopicModel", "GeneralTopicModel", module)
    assert not _agrees("int", "float", module) and not _agrees("GeneralTopicModel", "TopicModel", module)
    assert not _agrees("bool", "str", module) and not _agrees("array_like", "int", module)
