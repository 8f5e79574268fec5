"""Ctrl-C at any moment (issue #26 item 5): one line and exit 130 for every subcommand, while the package imports
(the console command's launcher ``_theorycheck_cli``), while parsing, and in ``train`` before its first
checkpoint; the trainer keeps a Ctrl-C that arrives on the last step."""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import _theorycheck_cli
from theorycheck import cli
from theorycheck._interrupt import end_workers
from theorycheck.cli import spec as cli_spec
from theorycheck.cli import train as cli_train
from theorycheck.cli.common import leaf_parsers
from theorycheck.nn import Trainer, TrainingInterrupted, preset
from theorycheck.report import runner

ROOT = Path(__file__).resolve().parents[1]


LEAVES = sorted(leaf_parsers(cli.build_parser()))

#: A child that raises KeyboardInterrupt (what SIGINT does) when it first imports ``MODULE``, then runs the launcher.
_CHILD = textwrap.dedent(
    """
    import importlib.abc, sys

    class CtrlC(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == sys.argv[1]:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    import _theorycheck_cli
    sys.exit(_theorycheck_cli.main(sys.argv[2:]))
    """
)


@pytest.mark.parametrize(
    ("module", "argv", "line"),
    [
        # while the launcher imports the CLI (its parsers: numpy, the models)
        ("numpy", ["spec"], "theorycheck: interrupted"),
        ("theorycheck.nn", ["--version"], "theorycheck: interrupted"),
        # while a command imports its implementation (theorycheck.cli.Run, inside the command)
        ("theorycheck.cli.verify", ["verify", "--list"], "theorycheck verify: interrupted"),
        ("scipy.optimize", ["solve", "value"], "theorycheck solve: interrupted"),
        ("numba", ["train", "--list"], "theorycheck train: interrupted"),
    ],
)
def test_ctrl_c_while_the_package_imports_is_one_line_and_130(module, argv, line):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, module, *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert res.returncode == 130, res.stderr
    assert res.stderr == line + "\n"


def test_the_launcher_runs_the_cli(capsys):
    assert _theorycheck_cli.main(["spec"]) == 0
    assert "§4.3" in capsys.readouterr().out


@pytest.mark.parametrize("name", LEAVES)
def test_ctrl_c_in_any_subcommand_is_one_line_and_130(name, monkeypatch, capsys):
    subcommands = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    run = subcommands[name.split()[0]].get_default("func")
    command = importlib.import_module(run.module)  # the implementation, imported when the command runs

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "run", interrupted)  # cli.Run looks the module's run up at each call
    assert cli.main(name.split()) == 130
    assert capsys.readouterr().err == f"theorycheck {name.split()[0]}: interrupted\n"


def test_ctrl_c_while_parsing_is_one_line_and_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["spec"]) == 130
    assert capsys.readouterr().err == "theorycheck: interrupted\n"


def test_train_ctrl_c_before_its_first_checkpoint_says_start_again(tmp_path, monkeypatch, capsys):
    """Ctrl-C in train's first moments (before the trainer's own handler): one line, exit 130, and no --resume
    offered when there is nothing to resume; the command it offers runs."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_train, "run_preset", interrupted)
    out = tmp_path / "run"
    argv = ["train", "--preset", "stage1-population", "--steps", "3", "--quiet", "--no-figures", "--out", str(out)]
    assert cli.main(argv) == 130
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("theorycheck train: interrupted before its first checkpoint; start again with: ")
    assert "--resume" not in line
    monkeypatch.undo()
    again = line.split("start again with: theorycheck ")[1].split()
    assert cli.main([*again, "--quiet", "--no-figures"]) == 0


def test_train_real_sigint_is_one_line_and_130(tmp_path):
    """A real SIGINT to a running ``theorycheck train`` (the launcher, as the console command runs): one line."""
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(ROOT / "_theorycheck_cli.py"), "train", "--preset", "two-stage", "--steps", "100000"]
    proc = subprocess.Popen(
        [*cmd, "--quiet", "--no-figures", "--out", str(out)], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        for _ in range(3000):  # until the first metrics line is written (the training loop runs)
            if (out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").stat().st_size > 0:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("theorycheck train: interrupted at step "), err


def test_trainer_keeps_a_ctrl_c_on_the_last_step(tmp_path):
    """SIGINT during the last step: TrainingInterrupted with a checkpoint at the end (not dropped); resume finishes."""
    cfg = preset("stage1-population").replace(steps=4, checkpoint_every=0, log_every=1, eval_every=0)

    def ctrl_c_on_last_step(model, ctx):
        if ctx.step == cfg.steps - 1:
            os.kill(os.getpid(), signal.SIGINT)
        return {}

    out = tmp_path / "run"
    with pytest.raises(TrainingInterrupted) as info:
        Trainer(cfg, out, probes=[ctrl_c_on_last_step], progress=False).run()
    assert info.value.step == cfg.steps and info.value.checkpoint is not None
    assert not (out / "params.npz").exists()
    res = Trainer(cfg, out, progress=False).run(resume=True)
    assert res.steps == cfg.steps and (out / "params.npz").is_file()


def _ctrl_c_inside_a_c_callback():
    """A KeyboardInterrupt raised in a Python function called back from C (libc's qsort), as in a Numba
    compilation: ctypes reports it through ``sys.unraisablehook`` and carries on."""
    libc = ctypes.CDLL(None)
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def cmp(a, b):
        raise KeyboardInterrupt

    arr = (ctypes.c_int * 3)(3, 1, 2)
    libc.qsort(arr, 3, ctypes.sizeof(ctypes.c_int), compare(cmp))


def test_a_ctrl_c_swallowed_by_a_c_callback_still_ends_the_command(monkeypatch, capsys):
    ran_on = []

    def command(args):
        _ctrl_c_inside_a_c_callback()
        for _ in range(10_000):  # the SIGINT is delivered again (from another thread) while this runs
            ran_on.append(1)
            time.sleep(0.001)
        return 0

    monkeypatch.setattr(cli_spec, "run", command)
    assert cli.main(["spec"]) == 130
    assert capsys.readouterr().err == "theorycheck spec: interrupted\n"
    assert len(ran_on) < 10_000


def test_pool_workers_leave_ctrl_c_to_the_parent():
    """verify's process pool: the forkserver and its workers ignore SIGINT (no traceback of theirs on Ctrl-C)."""
    pool = runner.process_pool(2)
    try:
        assert pool.submit(signal.getsignal, signal.SIGINT).result(timeout=300) == signal.SIG_IGN
    finally:
        end_workers(pool)
        pool.shutdown(wait=True)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # this process unchanged
