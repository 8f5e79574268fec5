"""Every numeric flag of every command, probed with NaN, inf, a negative, a huge and a non-numeric value (issue
#38): each is refused before any work with one line naming the flag, no traceback, exit code 2 -- or it is a
valid value, listed in :data:`ACCEPTED` with the reason. The flags are read from the parser, so a new flag or
command is probed without editing this file."""

from __future__ import annotations

import argparse

import pytest

from theorycheck import cli
from theorycheck.cli.common import leaf_parsers

LEAVES = leaf_parsers(cli.build_parser())
SMALL = ["--T", "3", "--v", "2", "--tau", "1"]

#: A cheap valid command line per leaf; ``{out}`` is a path that must not exist after a refusal.
BASE = {
    "solve value": ["solve", "value", *SMALL, "--json", "{out}"],
    "solve embedding": ["solve", "embedding", *SMALL, "--json", "{out}"],
    "solve attention": ["solve", "attention", *SMALL, "--json", "{out}"],
    "landscape": ["landscape", *SMALL, "--n-grid", "3", "--quiet", "--no-figures", "--out", "{out}"],
    "train": ["train", "--preset", "stage1-population", "--steps", "2", "--quiet", "--no-figures", "--out", "{out}"],
    "dynamics": ["dynamics", "--lr", "10", "--init-scale", "0.01", "--steps", "2", "--quiet", "--no-figures"]
    + ["--out", "{out}"],
    "verify": ["verify", "--only", "data.moments", "--quiet", "--no-figures", "--no-cache", "--out", "{out}"],
    "realdata": ["realdata", "--quiet", "--out", "{out}"],
    "benchmark": ["benchmark", "--quick", "--problems", "stage1-value/lsq:paper", "--solvers", "closed-form"]
    + ["--sizes", "0", "--quiet", "--out", "{out}"],
    "bench": ["bench", "--list", "--out", "{out}"],
    "spec": ["spec", "4.3"],
}

#: Flags typed as strings that hold numbers (comma-separated lists).
NUMERIC_STRINGS = {"--lr", "--init-scale", "--seeds", "--sizes"}
VALUES = ["nan", "inf", "-1", "1e30", "abc"]

#: Probes whose value is valid, and why (they would run the command, so they are not run here).
ACCEPTED = {
    ("dynamics", "--lr", "1e30"): "a diverging cell is a result: its row says the step (test_faults_errors)",
    ("dynamics", "--init-scale", "1e30"): "a diverging cell is a result: its row says the step",
    ("solve value", "--reg", "1e30"): "any finite reg >= 0 is a problem with an answer (W ~ 0)",
}


def _numeric_flags(p: argparse.ArgumentParser) -> list[str]:
    out = []
    for a in p._actions:
        flags = [s for s in a.option_strings if s.startswith("--")]
        if flags and a.nargs != 0 and (a.type in (int, float) or flags[0] in NUMERIC_STRINGS):
            out.append(flags[0])
    return out


PROBES = [
    (leaf, flag, value)
    for leaf in sorted(LEAVES)
    for flag in _numeric_flags(LEAVES[leaf])
    for value in VALUES
    if (leaf, flag, value) not in ACCEPTED
]


def test_every_command_has_a_base_line():
    assert set(BASE) == set(LEAVES)
    assert len(PROBES) > 300  # the table really is every flag of every command


def _argv(leaf, flag, value, out) -> list[str]:
    base = [a.replace("{out}", str(out)) for a in BASE[leaf]]
    if flag in base:  # the probe replaces the base line's own value
        i = base.index(flag)
        base = base[:i] + base[i + 2 :]
    extra = ["--model", "paper"] if leaf == "train" and flag in {"--T", "--v", "--tau", "--alpha"} | {
        "--p-m", "--p-c", "--p-r"} else []  # fmt: skip
    return [*base, *extra, flag, value]


@pytest.mark.parametrize(("leaf", "flag", "value"), PROBES)
def test_a_bad_numeric_value_is_one_line_exit_2(leaf, flag, value, tmp_path, capsys):
    out = tmp_path / "out"
    try:
        code = cli.main(_argv(leaf, flag, value, out))
    except SystemExit as exc:  # argparse: a value that is not a number of the flag's type
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    name = flag.lstrip("-")
    assert name in err[0] or name.replace("-", "_") in err[0], err[0]  # the flag (or its parameter) is named
    assert not out.exists()  # refused before any work
