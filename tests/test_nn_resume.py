"""Safe, complete resume: real CLI processes interrupted by SIGINT/SIGTERM/SIGKILL, then resumed,
end bit-identical to an uninterrupted run; a different config, a missing or a corrupted
checkpoint are reported (nn.checkpoint, nn.trainer, ``theorycheck train``)."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from theorycheck._validate import TheorycheckWarning
from theorycheck.cli import main
from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer, load_checkpoint

ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
CODE = "import sys; from theorycheck.cli import main; sys.exit(main(sys.argv[1:]))"
#: (preset, steps, checkpoint period): one exact-population run, one minibatch (static official-demo) run
RUNS = {"population": ("stage1-population", 800, 25), "minibatch": ("official-demo", 160, 10)}


def _args(name, out, *extra):
    preset, steps, every = RUNS[name]
    base = ["train", "--preset", preset, "--out", str(out), "--steps", str(steps)]
    return [*base, "--checkpoint-every", str(every), "--quiet", "--no-figures", *extra]


def _start(args):
    return subprocess.Popen(
        [sys.executable, "-c", CODE, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _same_run(a: Path, b: Path):
    with np.load(a / "params.npz") as za, np.load(b / "params.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for k in za.files:
            assert np.array_equal(za[k], zb[k]), f"params.npz[{k}] differs"
    ra, rb = (p / "metrics.jsonl" for p in (a, b))
    assert ra.read_text() == rb.read_text() and len(ra.read_text().splitlines()) > 3


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Uninterrupted runs of both presets (also a check that the CLI exits 0)."""
    out = {}
    for name in RUNS:
        folder = tmp_path_factory.mktemp("ref") / name
        proc = _start(_args(name, folder))
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        out[name] = folder
    return out


def _interrupt(args, folder: Path, sig) -> subprocess.CompletedProcess:
    """Start the CLI, wait for its first checkpoint, send ``sig``, wait for the exit."""
    proc = _start(args)
    deadline = time.monotonic() + 300
    while not list(folder.glob("checkpoint-*.json")):
        assert proc.poll() is None, f"run ended before its first checkpoint: {proc.communicate()}"
        assert time.monotonic() < deadline, "no checkpoint after 300 s"
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.parametrize("name", list(RUNS))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["INT", "TERM", "KILL"])
def test_interrupted_cli_run_resumes_bit_identically(tmp_path, reference, name, sig):
    if sig == signal.SIGTERM and name == "minibatch":
        pytest.skip("SIGTERM takes the SIGINT path (tested on the population run)")
    folder = tmp_path / "run"
    res = _interrupt(_args(name, folder), folder, sig)
    if sig == signal.SIGKILL:
        assert res.returncode == -signal.SIGKILL
    else:
        assert res.returncode == 128 + sig, res.stderr  # 130 after SIGINT, 143 after SIGTERM (issue #38)
        assert "interrupted at step" in res.stderr and "--resume" in res.stderr, res.stderr
        step = int(res.stderr.split("interrupted at step ")[1].split(";")[0])
        assert 0 < step < RUNS[name][1]
        assert (folder / f"checkpoint-{step}.json").exists()  # checkpoint of the interrupted step
        cmd = res.stderr.split("resume with: ")[1].strip().split()
        assert cmd[:2] == ["theorycheck", "train"] and cmd[-1] == "--resume"
    resumed = _start([*_args(name, folder), "--resume"])
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    _same_run(reference[name], folder)


def test_cli_resume_refuses_a_different_config_and_a_missing_checkpoint(tmp_path, capsys):
    folder = tmp_path / "run"
    args = ["train", "--preset", "stage1-population", "--out", str(folder), "--steps", "12", "--quiet", "--no-figures"]
    assert main([*args, "--checkpoint-every", "5"]) == 0
    metrics = (folder / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main([*args, "--checkpoint-every", "5", "--seed", "5", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "seed: 0 -> 5" in err and "checkpoint-12.json" in err
    assert main([*args[:-4], "--steps", "13", "--quiet", "--checkpoint-every", "5", "--resume"]) == 2
    assert "steps: 12 -> 13" in capsys.readouterr().err
    assert (folder / "metrics.jsonl").read_text() == metrics
    # no checkpoint at all: a clear error, the folder untouched
    bare = tmp_path / "bare"
    bargs = ["train", "--preset", "stage1-population", "--out", str(bare), "--steps", "6", "--quiet", "--no-figures"]
    assert main([*bargs, "--checkpoint-every", "0"]) == 0
    before = (bare / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main([*bargs, "--checkpoint-every", "0", "--resume"]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert (bare / "metrics.jsonl").read_text() == before
    assert main([*bargs[:4], str(tmp_path / "nowhere"), *bargs[5:], "--resume"]) == 2
    assert "does not exist" in capsys.readouterr().err


def _small_cfg(seed=0):
    d = DataConfig(T=3, v=3, tau=2, N=(5, 8), source="fresh")
    m = ModelConfig(V1=d.V1, n_heads=2, train=("W_K", "W_Q", "W_V", "b_dec"), init_scale=0.3, loss="ce")
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.05),
        steps=14,
        batch_size=4,
        log_every=2,
        eval_every=4,
        checkpoint_every=3,
        eval_docs=3,
        seed=seed,
    )


def test_only_the_last_two_checkpoints_are_kept(tmp_path):
    Trainer(_small_cfg(), tmp_path, progress=False).run()
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == [
        "checkpoint-12.json",
        "checkpoint-12.npz",
        "checkpoint-14.json",
        "checkpoint-14.npz",
    ]
    meta = json.loads((tmp_path / "checkpoint-14.json").read_text())
    assert meta["step"] == 14 and len(meta["config_hash"]) == 64 and meta["theorycheck_version"]


@pytest.mark.parametrize("damage", ["truncate", "random", "json"])
def test_a_corrupted_checkpoint_is_named_and_the_previous_one_used(tmp_path, damage):
    ref, run = tmp_path / "ref", tmp_path / "run"
    Trainer(_small_cfg(), ref, progress=False).run()
    Trainer(_small_cfg(), run, progress=False).run(stop_at=10)  # crash after step 10: checkpoints 6 and 9
    npz, js = run / "checkpoint-9.npz", run / "checkpoint-9.json"
    if damage == "truncate":
        npz.write_bytes(npz.read_bytes()[:100])
    elif damage == "random":
        npz.write_bytes(np.random.default_rng(0).bytes(npz.stat().st_size))
    else:
        js.write_text('{"step": 9, "npz": ')
    with pytest.warns(TheorycheckWarning, match=r"checkpoint-9\.(npz|json).*previous checkpoint checkpoint-6\.json"):
        ck = load_checkpoint(run, _small_cfg())
    assert ck.step == 6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TheorycheckWarning)
        Trainer(_small_cfg(), run, progress=False).run(resume=True)
    _same_run(ref, run)


def test_every_checkpoint_damaged_is_an_error(tmp_path):
    Trainer(_small_cfg(), tmp_path, progress=False).run(stop_at=7)
    for p in tmp_path.glob("checkpoint-*.npz"):
        p.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="every checkpoint.*checkpoint-6.npz.*checkpoint-3.npz"):
        load_checkpoint(tmp_path, _small_cfg())


def test_library_resume_refuses_another_seed_listing_the_field(tmp_path):
    Trainer(_small_cfg(), tmp_path, progress=False).run(stop_at=7)
    with pytest.raises(ValueError, match="seed: 0 -> 5"):
        Trainer(_small_cfg(seed=5), tmp_path, progress=False).run(resume=True)
    # checkpoint_every may differ (it does not change the numbers)
    Trainer(_small_cfg().replace(checkpoint_every=4), tmp_path, progress=False).run(resume=True)
