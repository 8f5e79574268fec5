"""Issue 25 item 6: every module a claim reaches, however imported, is in its cache key.

The key's module set (:class:`theorycheck.report.cache.SourceHasher`) follows import statements by
parsing source. An independent route reads the *runtime* bindings instead: every module object bound
in a reached module's namespace (``import pkg.mod``, ``from pkg import mod``, ``import mod as m``) and
the defining module of every function or class bound there (``from mod import f``), recursively,
restricted to our own code. That set must be contained in the key's. A synthetic package pins the
``from pkg import module`` form: editing the submodule changes the key.
"""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from proofs_numeric import CLAIMS
from theorycheck.report.cache import SourceHasher, _module_file, check_key, claim_modules

OWN = ("theorycheck", "proofs_numeric")


def _own(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in OWN and name in sys.modules and _module_file(name) is not None


def runtime_reach(roots) -> set[str]:
    """Own-code modules reachable from ``roots`` through runtime namespace bindings (module docstring)."""
    todo, seen = [r for r in roots if r in sys.modules], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for value in list(vars(sys.modules[name]).values()):
            if isinstance(value, types.ModuleType):
                target = value.__name__
            else:
                target = getattr(value, "__module__", None) if callable(value) else None
            if isinstance(target, str) and _own(target) and target not in seen:
                todo.append(target)
    return seen


@pytest.fixture(scope="module")
def hasher():
    return SourceHasher()


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_module_a_claim_reaches_at_run_time_is_in_its_key(claim, hasher):
    roots = claim_modules(claim)
    keyed = set(hasher.digests(roots))
    reached = runtime_reach(roots)
    assert reached, claim.id
    missing = sorted(reached - keyed)
    assert not missing, f"{claim.id}: modules reached but not in the cache key: {missing}"


def test_runtime_reach_sees_from_package_import_module():
    """The independent route itself follows ``from pkg import module`` (a sanity check of the test)."""
    reached = runtime_reach(["proofs_numeric.attention_identity_optimum"])
    assert "theorycheck.analysis.identity_phase" in reached
    assert "theorycheck.solvers.attention._solve" in reached or "theorycheck.solvers" in reached


PKG_INIT = ""
SUB = "FACTOR = {factor}\n"
USER = textwrap.dedent(
    """
    from tc_reach_pkg import sub
    from theorycheck.report import Claim, ClaimResult

    def check(params, inject=None):
        return ClaimResult(True, 0.0, float(sub.FACTOR), 1.0)

    CLAIM = Claim("zz.reach", "reach", "DERIVED", "test", check, ({"x": 1},), lambda p: {})
    """
)


def test_from_pkg_import_module_edits_change_the_key(tmp_path, monkeypatch):
    pkg = tmp_path / "tc_reach_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PKG_INIT)
    (pkg / "sub.py").write_text(SUB.format(factor=1))
    (tmp_path / "tc_reach_user.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import tc_reach_user

        key = check_key(tc_reach_user.CLAIM, {"x": 1})
        assert "tc_reach_pkg.sub" in SourceHasher().digests(["tc_reach_user"])
        (pkg / "sub.py").write_text(SUB.format(factor=2))
        assert check_key(tc_reach_user.CLAIM, {"x": 1}) != key
    finally:
        for name in ("tc_reach_user", "tc_reach_pkg", "tc_reach_pkg.sub"):
            sys.modules.pop(name, None)
