"""One CLI vocabulary (issue #26 item 8), table-driven over every subcommand's parser: a description line,
help text for every flag, the shared flags defined once, no deprecated choices; the subcommand table; no
package-internal imports inside functions of ``theorycheck.cli``."""

import argparse
import ast
import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from theorycheck import cli
from theorycheck.cli import spec as cli_spec
from theorycheck.cli.common import leaf_parsers

PARSER = cli.build_parser()
LEAVES = leaf_parsers(PARSER)
SUBCOMMANDS = {name: p for name, p in PARSER._subparsers._group_actions[0].choices.items()}


def _flags(p) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings if s.startswith("--")}


def test_the_table_covers_every_subcommand():
    """Every module of ``cli.COMMANDS`` is a subcommand (new ones included: the tests below iterate the parser)."""
    assert set(SUBCOMMANDS) >= {
        "verify",
        "solve",
        "landscape",
        "train",
        "dynamics",
        "realdata",
        "bench",
        "benchmark",
        "spec",
    }
    assert len(SUBCOMMANDS) == len(cli.COMMANDS)
    assert {"solve value", "solve embedding", "solve attention"} <= set(LEAVES)
    assert {name.split()[0] for name in LEAVES} == set(SUBCOMMANDS)
    for module in cli.COMMANDS:
        assert (
            callable(module.add_parser)
            and module.IMPLEMENTATION == "theorycheck.cli." + module.__name__.rsplit(".", 1)[1]
        )
        assert callable(importlib.import_module(module.IMPLEMENTATION).run)
        assert module.DESCRIPTION and "\n" not in module.DESCRIPTION


@pytest.mark.parametrize("name", sorted(set(SUBCOMMANDS) | set(LEAVES)))
def test_description_line(name, capsys):
    p = SUBCOMMANDS.get(name) or LEAVES[name]
    assert p.description and "\n" not in p.description.strip(), name
    with pytest.raises(SystemExit):
        PARSER.parse_args([*name.split(), "--help"])
    usage, first = capsys.readouterr().out.split("\n\n")[:2]
    assert usage.startswith(f"usage: theorycheck {name}")
    assert " ".join(first.split()) == p.description, name  # the first line of the help after the usage


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_every_flag_and_argument_has_help(name):
    for action in LEAVES[name]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help is not argparse.SUPPRESS, (name, action.dest)
        assert action.help.strip() == action.help and len(action.help) > 8, (name, action.dest)


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_no_deprecated_choices_and_threads_everywhere(name):
    flags = _flags(LEAVES[name])
    assert "--threads" in flags, name
    for flag, action in flags.items():
        assert "sq" not in (action.choices or ()), (name, flag)
        assert "deprecated" not in action.help, (name, flag)
    assert "--blas-threads" not in flags


@pytest.mark.parametrize(
    "flag", ["--force", "--quiet", "--no-figures", "--threads", "--jobs", "--json", "--T", "--p-m"]
)
def test_shared_flags_mean_the_same_everywhere(flag):
    """A shared flag has one definition (theorycheck.cli.common): the same help and type wherever it appears."""
    actions = [(name, _flags(p)[flag]) for name, p in LEAVES.items() if flag in _flags(p)]
    assert actions, flag
    helps = {a.help.split("(default")[0] for _, a in actions}
    assert len(helps) == 1 or flag == "--json", (flag, helps)
    assert len({(a.type, a.nargs, a.const) for _, a in actions}) == 1, flag


def test_shared_flags_where_expected():
    has = {name: set(_flags(p)) for name, p in LEAVES.items()}
    for name in ("verify", "landscape", "train", "realdata", "bench"):
        assert "--force" in has[name], name
    for name in ("verify", "train", "realdata"):
        assert {"--quiet", "--no-figures", "--seed"} <= has[name], name
    for name in ("verify", "landscape", "train"):
        assert "--scheduler" in has[name], name
    for name in ("solve value", "solve embedding", "solve attention", "landscape", "train"):
        assert {
            "--T",
            "--v",
            "--tau",
            "--prior",
            "--alpha",
            "--p-m",
            "--p-c",
            "--p-r",
            "--model",
            "--topic-word",
        } <= has[name], name


def test_a_subcommand_is_one_line_in_the_table(monkeypatch, capsys):
    """The documented way to add a subcommand (cli/__init__.py): a parser module with DESCRIPTION, add_parser and
    IMPLEMENTATION, the module with run, imported when the command runs (not when the parser is built)."""

    def add_parser(sub):
        p = sub.add_parser("fake-command", help=fake.DESCRIPTION, description=fake.DESCRIPTION)
        p.add_argument("--n", type=int, default=1, help="how many")
        return p

    fake = types.SimpleNamespace(DESCRIPTION="a test subcommand", add_parser=add_parser, IMPLEMENTATION="fake_impl")
    impl = types.ModuleType("fake_impl")
    impl.run = lambda args: args.n + 3  # type: ignore[attr-defined]
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, fake))
    assert "--threads" in _flags(leaf_parsers(cli.build_parser())["fake-command"])
    with pytest.raises(ModuleNotFoundError):  # nothing imported it while building the parser
        cli.main(["fake-command", "--n", "2"])
    monkeypatch.setitem(sys.modules, "fake_impl", impl)
    assert cli.main(["fake-command", "--n", "2"]) == 5


def test_errors_are_one_line_exit_2(capsys):
    assert cli.main(["solve", "value", "--T", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("theorycheck solve: error: ")


def test_python_m_and_version():
    res = subprocess.run([sys.executable, "-m", "theorycheck.cli", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("theorycheck ")


def _package_of(module: str) -> bool:
    return module.startswith("theorycheck")


def test_no_package_imports_inside_functions():
    """Imports of the package sit at the top of the CLI modules and of theorycheck.spec (issue #22 item 4)."""
    root = Path(cli.__file__).parent
    offenders = []
    for path in [*sorted(root.rglob("*.py")), root.parent / "spec.py"]:
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.level > 0 or _package_of(node.module or "")):
                    offenders.append(f"{path.name}:{node.lineno}")
                if isinstance(node, ast.Import) and any(_package_of(a.name) for a in node.names):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


def test_no_model_type_switch_in_the_cli():
    root = Path(cli.__file__).parent
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        assert "is_general" not in text and "isinstance(tm" not in text, path.name


def test_json_summary_on_landscape_and_train(tmp_path, capsys):
    """``--json FILE`` wherever a summary is printed: the printed record, also written; the path checked first."""
    land = tmp_path / "land.json"
    argv = ["landscape", "--T", "3", "--v", "2", "--tau", "1", "--n-grid", "3", "--out", str(tmp_path / "l")]
    assert cli.main([*argv, "--json", str(land)]) == 0
    assert json.loads(land.read_text()) == json.loads((tmp_path / "l" / "optimum.json").read_text())
    run = tmp_path / "run"
    argv = ["train", "--preset", "stage1-population", "--steps", "3", "--quiet", "--no-figures", "--out", str(run)]
    assert cli.main([*argv, "--json", str(tmp_path / "train.json")]) == 0
    assert json.loads((tmp_path / "train.json").read_text()) == json.loads((run / "summary.json").read_text())
    (tmp_path / "adir").mkdir()
    capsys.readouterr()
    assert cli.main([*argv[:-1], str(tmp_path / "run2"), "--json", str(tmp_path / "adir")]) == 2
    assert "--json" in capsys.readouterr().err and not (tmp_path / "run2").exists()


def test_interrupt_is_one_line_exit_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_spec, "run", interrupted)
    assert cli.main(["spec"]) == 130
    assert capsys.readouterr().err == "theorycheck spec: interrupted\n"


# ----------------------------------------------------------------------------- one vocabulary (issue #26 item 8)
#: Leaves that print no summary (so take no ``--json FILE``), and why.
NO_SUMMARY = {
    "spec": "prints a section of SPEC.md, no summary",
    "bench": "runs the benchmark scripts, which print and write their own results",
}
#: Leaves with an output folder but no progress bar of their own (so no ``--quiet``), and why.
NO_PROGRESS_BAR = {
    "bench": "the scripts print their own progress",
    "solve value": "one solver call",
    "solve embedding": "one solver call",
    "solve attention": "one solver call",
}
#: The leaves that write PNG figures (``--no-figures``) and those drawing random numbers (``--seed``).
FIGURES = {"verify", "landscape", "train", "dynamics", "realdata"}
SEEDED = {"verify", "train", "dynamics", "realdata"}
OUTPUT_FLAGS = ("--out", "--json", "--npz")


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_one_vocabulary(name):
    """The same names for the same things on every leaf: ``--out`` a folder, ``--json FILE`` wherever a summary is
    printed, ``--force`` wherever something is written, ``--quiet`` wherever a progress bar is shown."""
    flags = _flags(LEAVES[name])
    if "--out" in flags:
        assert "folder" in flags["--out"].help, (name, flags["--out"].help)
        if name not in NO_PROGRESS_BAR:
            assert "--quiet" in flags, name
    if name not in NO_SUMMARY:
        assert "--json" in flags and flags["--json"].metavar == "FILE", name
    if any(f in flags for f in OUTPUT_FLAGS):
        assert "--force" in flags, name
    for flag in ("--json", "--npz"):
        if flag in flags:
            assert flags[flag].metavar == "FILE" and "file" in flags[flag].help, (name, flag)
    assert ("--no-figures" in flags) == (name in FIGURES), name
    if name in SEEDED:
        assert "--seed" in flags, name
    assert not {"--blas-threads", "--output", "--outdir", "--json-out", "--n-threads"} & set(flags), name


@pytest.mark.parametrize("name", sorted(set(FIGURES) | {"benchmark"}))
def test_quiet_and_no_figures_where_expected(name):
    flags = _flags(LEAVES[name])
    assert "--quiet" in flags and flags["--quiet"].help == "no progress bar", name


def test_no_message_names_a_flag_no_command_has():
    """Every ``--flag`` in a string of the package (messages, help, hints) is a flag of some subcommand: no error
    points at a flag that does not exist (an ``n_sets`` or a ``--force`` of another command)."""
    flags = {s for p in LEAVES.values() for a in p._actions for s in a.option_strings} | {"--version"}
    pip_flags = {"--no-deps"}  # the install hint of the nlp extra
    root = Path(cli.__file__).parents[1]
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for tok in re.findall(r"(?<![\w-])--[a-z][a-z-]*", node.value):
                    if tok not in flags | pip_flags:
                        bad.append(f"{path.relative_to(root)}: {tok}")
    assert not bad, bad


def test_solve_out_is_a_folder_and_npz_a_file(tmp_path, capsys):
    small = ["solve", "value", "--T", "3", "--v", "2", "--tau", "1"]
    out, js = tmp_path / "sol", tmp_path / "s.json"
    assert cli.main([*small, "--out", str(out), "--json", str(js), "--npz", str(tmp_path / "w")]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".theorycheck.json", "optimum.npz", "summary.json"]
    assert json.loads((out / "summary.json").read_text()) == json.loads(js.read_text())
    with np.load(out / "optimum.npz") as a, np.load(tmp_path / "w.npz") as b:
        assert sorted(a.files) == sorted(b.files) and float(a["A"]) == float(b["A"])
    capsys.readouterr()
    assert cli.main([*small, "--out", str(tmp_path / "x.npz")]) == 2  # the old single-file --out
    err = capsys.readouterr().err
    assert "--out is an output folder" in err and "--npz" in err and not (tmp_path / "x.npz").exists()


def test_seeds_help_names_the_folders_it_writes(tmp_path, capsys):
    (seeds,) = [a for a in LEAVES["train"]._actions if "--seeds" in a.option_strings]
    assert "seed<s> for a single-run preset" in seeds.help and "<run>-seed<s>" in seeds.help
    out = tmp_path / "run"
    argv = ["train", "--preset", "stage1-population", "--steps", "2", "--seeds", "0,3", "--quiet", "--no-figures"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir() if p.is_dir()} == {"seed0", "seed3"}


def test_landscape_quiet_and_no_figures(tmp_path, capsys):
    out = tmp_path / "l"
    argv = ["landscape", "--T", "3", "--v", "2", "--tau", "1", "--n-grid", "3", "--quiet", "--no-figures"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".theorycheck.json", "grid.npz", "optimum.json"]
    assert "landscape.png" not in capsys.readouterr().out
