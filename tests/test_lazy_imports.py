"""``theorycheck --help``, ``--version``, every ``--help`` and ``theorycheck spec`` import no heavy library (issue
#39 item 1): the parsers are light (:mod:`theorycheck.cli.parsers`), a command's implementation is imported when it
runs (:class:`theorycheck.cli.Run`) and the facades are lazy (:mod:`theorycheck._lazy`). The structure is asserted
(which modules a fresh interpreter holds), never a wall-clock time; ``benchmarks/bench_cold_start.py`` measures it.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

import theorycheck as tc
import theorycheck.nn

#: Libraries that take seconds to import (with Numba's and cvxpy's start-up) and a parser does not need.
HEAVY = ("numba", "scipy", "cvxpy", "matplotlib", "sklearn", "llvmlite", "hypothesis", "distributed")


def _child(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object as its last line."""
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=env
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


_PROBE = """
import contextlib, io, json, sys
HEAVY = {heavy!r}

def heavy():
    return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
"""


def test_help_version_and_spec_import_no_heavy_library():
    out = _child(
        _PROBE.format(heavy=HEAVY)
        + """
        import theorycheck
        after = {"import theorycheck": sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", *HEAVY))}
        from theorycheck import cli
        from theorycheck.cli.common import leaf_parsers
        parser = cli.build_parser()
        after["build_parser"] = heavy()
        for name, leaf in leaf_parsers(parser).items():
            assert "usage: theorycheck" in leaf.format_help(), name
        for argv in (["--help"], ["--version"], ["verify", "--help"], ["solve", "attention", "--help"]):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                cli.main(argv)
        after["every --help, --version"] = heavy()
        with contextlib.redirect_stdout(io.StringIO()) as text:
            code = cli.main(["spec", "4.3"])
        after["spec 4.3"] = heavy()
        after["spec output"] = [code, "§4.3" in text.getvalue()]
        impls = sorted(m for m in sys.modules if m.startswith("theorycheck.cli.") and ".parsers" not in m)
        after["implementations"] = impls
        print(json.dumps(after))
        """.replace("\n        ", "\n"),
        # a thread count in the environment (a user's, or exported by an earlier command of the test session)
        # must not make the parsers or ``spec`` import Numba to apply it
        env={**os.environ, "THEORYCHECK_THREADS": "2"},
    )
    assert out.pop("spec output") == [0, True]
    assert out.pop("implementations") == ["theorycheck.cli.common", "theorycheck.cli.spec"]
    assert out == {k: [] for k in out}, out


def test_the_probe_sees_a_command_that_loads_the_solvers():
    """The positive control: running a command imports its implementation and the libraries it needs, so the
    probe above would see a parser that imported them."""
    out = _child(
        _PROBE.format(heavy=HEAVY)
        + """
        from theorycheck import cli
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["solve", "value", "--T", "3", "--v", "2", "--tau", "1"])
        print(json.dumps({"code": code, "heavy": heavy(), "impl": "theorycheck.cli.solve" in sys.modules}))
        """.replace("\n        ", "\n")
    )
    assert out["code"] == 0 and out["impl"]
    assert {"numba", "scipy"} <= {m.split(".")[0] for m in out["heavy"]}


@pytest.mark.parametrize("facade", [tc, theorycheck.nn], ids=lambda m: m.__name__)
def test_a_lazy_facade_serves_every_name(facade):
    """Every name of ``__all__`` resolves to the object its module defines; ``dir`` lists them; an unknown name is
    an AttributeError naming it (not an ImportError)."""
    for name in facade.__all__:
        value = getattr(facade, name)
        module, attribute = facade._LAZY.get(name, (None, None))
        if module is not None and attribute is not None:
            assert value is getattr(importlib.import_module(module, facade.__name__), attribute), name
    assert set(facade.__all__) <= set(dir(facade))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = facade.no_such_name


def test_the_public_api_contract_through_the_lazy_facade():
    tm = tc.TopicModel(T=3, v=2, tau=1)
    mk = tc.Masking(p_m=0.15, p_c=0.1, p_r=0.1)
    Sigma, C = tc.population.moments(tm, mk)
    assert Sigma.shape == (tm.V1, tm.V1) and C.shape == (tm.V1, tm.V1)
    assert tc.solvers.optimal_value_matrix(tm, mk).success
    assert tc.stats is tc.analysis.stats and tc.landscape is tc.analysis.landscape
    assert issubclass(tc.TheorycheckWarning, UserWarning)


def test_a_submodule_imported_first_does_not_shadow_the_function_it_exports():
    """``theorycheck.nn.stage_grid`` is a module and the function the facade exports: importing the module first
    (as ``theorycheck dynamics`` does) still leaves the function on the facade, as an eager facade did."""
    out = _child(
        """
        import json, types
        import theorycheck.nn.stage_grid
        from theorycheck import nn
        from theorycheck.nn import stage_grid
        print(json.dumps([isinstance(nn.stage_grid, types.FunctionType), stage_grid is nn.stage_grid]))
        """.replace("\n        ", "\n")
    )
    assert out == [True, True]
