"""Sweeps and training grids on Dask ``distributed`` (theorycheck._dask): equal to the local run, bit for bit.

Against a real ``LocalCluster`` (2 worker processes) and against a scheduler and two workers started
as separate processes on loopback; a worker killed mid-sweep loses no result. Every wait is bounded
and every process started here is terminated in a ``finally``.
"""

import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from _loopback import allow_loopback_only

import theorycheck as tc
from theorycheck import _dask
from theorycheck.analysis.landscape import DEFAULT_SWEEP, asymptotic_sweep, finite_n_gap
from theorycheck.cli import main
from theorycheck.nn import run_preset

distributed = pytest.importorskip("distributed")

WAIT = 120.0  # generous bound for any start-up on a loaded 2-core machine
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Overrides conftest's: connections to loopback only (the clusters here), anything else raises."""
    allow_loopback_only(monkeypatch)


def test_offline_guard_refuses_non_loopback():
    with socket.socket() as s, pytest.raises(RuntimeError, match="offline"):
        s.connect(("192.0.2.1", 80))


def _exact(obj) -> str:
    """Canonical text of a result: equal strings <=> equal values bit for bit (repr round-trips floats)."""
    return json.dumps(obj, sort_keys=True, default=lambda a: np.asarray(a).tolist())


def _without_seconds(summary) -> str:
    return _exact([{k: v for k, v in r.items() if k != "seconds"} for r in summary["runs"]])


def _folder_files(root: Path) -> dict:
    """Every deterministic file of a training output folder (summary and marker excluded)."""
    skip = {"summary.json", "summary.md", ".theorycheck-output"}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip and not p.name.startswith(".")
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gap_problem():
    tm = tc.TopicModel(T=4, v=3, tau=2)
    rng = np.random.default_rng(7)
    S = rng.normal(size=(tm.V1, tm.V1))
    W = rng.normal(size=(tm.V1, tm.V1)) / tm.V1
    return S, W, tm, tc.Masking()


# ----------------------------------------------------------------------------- errors, no cluster
def test_missing_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "theorycheck\[dask\]"'):
        _dask.require_distributed()
    with pytest.raises(ImportError, match=r"theorycheck\[dask\]"):
        _dask.get_client("tcp://127.0.0.1:8786")
    assert _dask.get_client(None) is None  # a local run needs nothing


def test_bad_scheduler_arguments_are_refused_before_work(tmp_path):
    with pytest.raises(TypeError, match="scheduler must be a distributed.Client, a scheduler address"):
        _dask.get_client(8786)
    with pytest.raises(ValueError, match="scheduler must be an address"):
        _dask.get_client("  ")
    with pytest.raises(ValueError, match="timeout"):
        _dask.get_client("tcp://127.0.0.1:8786", timeout=0.0)
    with pytest.raises(ValueError, match="client_or_address"):
        _dask.client_executor(None)
    with pytest.raises(ValueError, match="either executor= or client="):
        asymptotic_sweep([(4, 3, 2)], executor=object(), client="tcp://127.0.0.1:8786")
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor"):
        asymptotic_sweep([(4, 3, 2)], executor=42)
    with pytest.raises(TypeError, match="scheduler must be"):
        asymptotic_sweep([(4, 3, 2)], client=3.5)
    with pytest.raises(ValueError, match="seed or seeds"):
        run_preset("ablation", tmp_path / "unused", seed=1, seeds=[0, 1])
    with pytest.raises(ValueError, match="distinct"):
        run_preset("ablation", tmp_path / "unused", seeds=[0, 0])
    with pytest.raises(ValueError, match="seeds"):
        run_preset("ablation", tmp_path / "unused", seeds=[0, -1])
    assert not (tmp_path / "unused").exists()


def test_unreachable_scheduler_names_the_address(tmp_path, monkeypatch, capsys):
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(_dask.SchedulerUnreachable, match=f"scheduler at {address}") as info:
        _dask.get_client(address, timeout=1.0)
    assert isinstance(info.value, ConnectionError) and isinstance(info.value, ValueError)
    monkeypatch.setattr(_dask, "DEFAULT_TIMEOUT", 1.0)
    code = main(
        ["landscape", "--T", "4", "--v", "3", "--tau", "2", "--scheduler", address, "--out", str(tmp_path / "x")]
    )
    assert code == 2
    assert address in capsys.readouterr().err
    assert not (tmp_path / "x" / "grid.npz").exists()


def test_seeds_label_the_runs_and_set_their_seed():
    from theorycheck.nn.presets import _configs

    runs = _configs("deep-4x4", steps=7, seed=None, checkpoint_every=None, seeds=[3, 1])
    assert [(label, c.seed, c.steps) for label, c in runs] == [("seed3", 3, 7), ("seed1", 1, 7)]
    grid = _configs("ablation", steps=None, seed=None, checkpoint_every=None, seeds=[0, 1])
    assert len(grid) == 16 and grid[1][0] == "sgd-squared-reg0-seed1" and grid[1][1].seed == 1


def test_cli_train_bad_seeds_and_unreachable_scheduler(tmp_path, monkeypatch, capsys):
    assert main(["train", "--preset", "ablation", "--seeds", "0,x", "--out", str(tmp_path / "a")]) == 2
    assert "--seeds must be comma-separated integers" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    monkeypatch.setattr(_dask, "DEFAULT_TIMEOUT", 1.0)
    address = f"tcp://127.0.0.1:{_free_port()}"
    argv = ["train", "--preset", "ablation", "--steps", "1", "--quiet", "--scheduler", address]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 2
    assert address in capsys.readouterr().err
    assert not list((tmp_path / "b").glob("*/metrics.jsonl"))


# ----------------------------------------------------------------------------- LocalCluster
@pytest.fixture(scope="module")
def client():
    old = {k: os.environ.get(k) for k in ENV}
    os.environ.update({k: ENV[k] for k in old})  # inherited by the worker processes
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    c = distributed.Client(cluster, timeout=WAIT)
    try:
        c.wait_for_workers(2, timeout=WAIT)
        yield c
    finally:
        c.close()
        cluster.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_local_cluster_sweep_equals_local_run(client):
    local = asymptotic_sweep(DEFAULT_SWEEP)
    assert len(local) == len(DEFAULT_SWEEP)
    for how in (dict(client=client), dict(executor=client), dict(client=client.scheduler.address)):
        assert _exact(asymptotic_sweep(DEFAULT_SWEEP, **how)) == _exact(local), how
    with _dask.scheduler_executor(client) as ex:
        assert _exact(asymptotic_sweep(DEFAULT_SWEEP, value="identity", executor=ex)) == _exact(
            asymptotic_sweep(DEFAULT_SWEEP, value="identity")
        )
    assert client.status == "running"  # a client we were given is left open


def _cancels(client) -> list:
    return [msg["count"] for _, msg in client.get_events(client.id) if msg.get("action") == "cancel"]


def _cancels_after(client, before: int) -> list:
    """The cancel counts logged after the first ``before``, up to a sentinel: a cancel of 7 futures
    sent on the same ordered stream, so once it is logged every earlier cancel is too (bounded wait)."""
    client.cancel(client.map(abs, range(7), pure=False, resources={"no-worker-has-this": 1}))  # never run
    deadline = time.monotonic() + WAIT
    while 7 not in (new := _cancels(client)[before:]):
        assert time.monotonic() < deadline, "the sentinel cancel never reached the scheduler"
        time.sleep(0.05)
    return new[: new.index(7)]


def _slow_square(x):
    time.sleep(x)
    return x * x


def test_cluster_executor_map_sends_no_empty_cancel(client):
    """distributed's own map ends with ``cancel([])``, which the scheduler reports to every client
    (and a client connecting then fails); ours cancels only futures that are still pending."""
    before = len(_cancels(client))
    list(client.get_executor(pure=False).map(abs, [-1, -2]))
    assert _cancels_after(client, before) == [0]  # the behaviour worked around: this can fail
    before = len(_cancels(client))
    with _dask.scheduler_executor(client) as ex:
        assert isinstance(ex, _dask.ClusterExecutor)
        assert list(ex.map(abs, [-1, -2, -3])) == [1, 2, 3]
        assert ex.submit(abs, -4).result(WAIT) == 4
    assert _cancels_after(client, before) == []
    before = len(_cancels(client))
    with _dask.scheduler_executor(client) as ex:  # stopped early: what is left is cancelled
        it = ex.map(_slow_square, [0.0, 4.0, 4.0, 4.0, 4.0])
        assert next(it) == 0.0
        it.close()  # two workers: at least the last two of the four 4-second tasks have not finished
    new = _cancels_after(client, before)
    assert len(new) == 1 and 2 <= new[0] <= 4, new
    with _dask.scheduler_executor(client) as ex, pytest.raises(cf.TimeoutError):
        list(ex.map(_slow_square, [4.0], timeout=0.5))


def test_local_cluster_finite_n_gap_equals_local_run(client):
    S, W, tm, mk = _gap_problem()
    local = finite_n_gap(S, W, tm, mk, [4, 8, 16, 32], n_docs=300, seed=3)
    remote = finite_n_gap(S, W, tm, mk, [4, 8, 16, 32], n_docs=300, seed=3, client=client)
    assert _exact(remote) == _exact(local)
    assert np.all(np.isfinite(local["gap"]))


def test_local_cluster_training_grid_equals_local_run(client, tmp_path):
    local = run_preset("ablation", tmp_path / "local", steps=3, progress=False)
    remote = run_preset("ablation", tmp_path / "dask", steps=3, progress=False, client=client)
    assert len(remote["runs"]) == 8
    assert _without_seconds(remote) == _without_seconds(local)
    files = _folder_files(tmp_path / "local")
    assert any(k.endswith("metrics.jsonl") for k in files)
    assert _folder_files(tmp_path / "dask") == files


def test_local_cluster_multi_seed_runs_equal_local_run(client, tmp_path):
    kw = dict(steps=2, seeds=[0, 5], progress=False)
    local = run_preset("compensation", tmp_path / "local", **kw)
    remote = run_preset("compensation", tmp_path / "dask", executor=client.get_executor(), **kw)
    assert [r["run"] for r in local["runs"]] == [
        f"{m}-seed{s}" for m in ("both", "frozen-embedding", "frozen-attention") for s in (0, 5)
    ]
    assert _without_seconds(remote) == _without_seconds(local)
    assert _folder_files(tmp_path / "dask") == _folder_files(tmp_path / "local")
    # the seeds matter: two seeds of one run differ
    assert local["runs"][0]["final_loss"] != local["runs"][1]["final_loss"]


# ----------------------------------------------------------------------------- separate processes
def _start(cmd, log: Path):
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=ENV, cwd=log.parent)


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=20)


@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    """A ``dask scheduler`` and two ``dask worker --no-nanny`` processes on loopback: ``(address, workers)``."""
    d = tmp_path_factory.mktemp("cluster")
    sfile = d / "scheduler.json"
    procs = []
    try:
        procs.append(
            _start(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0"]
                + ["--no-dashboard", "--scheduler-file", str(sfile)],
                d / "scheduler.log",
            )
        )
        deadline = time.monotonic() + WAIT
        while not sfile.exists() and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.2)
        assert sfile.exists(), (d / "scheduler.log").read_text()
        time.sleep(0.2)  # the file is written in one go, but give the writer a moment
        address = json.loads(sfile.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            procs.append(
                _start(
                    [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny"]
                    + ["--no-dashboard", "--host", "127.0.0.1", "--local-directory", str(d / f"w{i}")],
                    d / f"worker{i}.log",
                )
            )
        with distributed.Client(address, timeout=WAIT) as c:
            c.wait_for_workers(2, timeout=WAIT)
        yield address, procs[1:]
    finally:
        _stop(procs)


def test_separate_processes_cli_landscape_and_train(separate, tmp_path):
    address, _ = separate
    model = ["--T", "4", "--v", "3", "--tau", "2", "--n-grid", "11"]
    assert main(["landscape", *model, "--sweep", "spec", "--out", str(tmp_path / "local")]) == 0
    assert main(["landscape", *model, "--scheduler", address, "--out", str(tmp_path / "dask")]) == 0
    sweep = (tmp_path / "dask" / "sweep.json").read_bytes()
    assert sweep == (tmp_path / "local" / "sweep.json").read_bytes()
    assert len(json.loads(sweep)["rows"]) == len(DEFAULT_SWEEP)

    train = ["train", "--preset", "compensation", "--steps", "2", "--quiet", "--no-figures"]
    assert main([*train, "--out", str(tmp_path / "t-local")]) == 0
    assert main([*train, "--scheduler", address, "--out", str(tmp_path / "t-dask")]) == 0
    local = json.loads((tmp_path / "t-local" / "summary.json").read_text())
    remote = json.loads((tmp_path / "t-dask" / "summary.json").read_text())
    assert _without_seconds(remote) == _without_seconds(local)
    assert _folder_files(tmp_path / "t-dask") == _folder_files(tmp_path / "t-local")


def test_worker_killed_mid_sweep_loses_no_result(separate):
    address, workers = separate
    S, W, tm, mk = _gap_problem()
    Ns, kw = [40, 41, 42, 43, 44, 45], dict(n_docs=40000, seed=11)
    local = finite_n_gap(S, W, tm, mk, Ns, **kw)
    with distributed.Client(address, timeout=WAIT) as c:
        pids = c.run(os.getpid)  # worker address -> pid
        assert sorted(pids.values()) == sorted(p.pid for p in workers)
        out, errors = {}, []

        def run():
            try:
                out["res"] = finite_n_gap(S, W, tm, mk, Ns, client=c, **kw)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        t = threading.Thread(target=run)
        t.start()
        victim, deadline = None, time.monotonic() + WAIT
        while victim is None and time.monotonic() < deadline and t.is_alive():
            busy = [w for w, keys in c.processing().items() if keys]
            victim = busy[0] if busy else None
            time.sleep(0.05)
        assert victim is not None, "no task ever started"
        os.kill(pids[victim], signal.SIGKILL)
        t.join(timeout=WAIT)
        assert not t.is_alive() and not errors, errors
    assert _exact(out["res"]) == _exact(local)
    assert sum(p.poll() is not None for p in workers) == 1  # one worker really died


# ----------------------------------------------------------------------------- bad or unreachable scheduler: fast
def _refused_address() -> str:
    """A loopback port that was bound then closed: connecting to it is refused."""
    return f"tcp://127.0.0.1:{_free_port()}"


def test_refused_scheduler_port_fails_within_seconds_at_the_default_timeout():
    address = _refused_address()
    t0 = time.perf_counter()
    with pytest.raises(_dask.SchedulerUnreachable, match=f"could not connect to the Dask scheduler at {address}"):
        _dask.get_client(address)  # DEFAULT_TIMEOUT = 30 s: the probe does not wait for it
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize(
    "address,msg",
    [
        ("garbage", "no HOST:PORT"),
        ("tcp://127.0.0.1", "no HOST:PORT"),
        ("tcp://127.0.0.1:70000", "no HOST:PORT"),
        ("foo://127.0.0.1:8786", "unknown scheme 'foo'"),
    ],
)
def test_malformed_scheduler_address_is_refused_at_once(address, msg):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=f"scheduler must be an address such as .*{msg}"):
        _dask.get_client(address)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("bad", ["garbage", "refused"])
def test_cli_verify_bad_scheduler_fails_within_seconds_with_one_line(tmp_path, capsys, bad):
    address = _refused_address() if bad == "refused" else bad
    out = tmp_path / "rep"
    t0 = time.perf_counter()
    assert main(["verify", "--quiet", "--no-figures", "--scheduler", address, "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 5.0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and address in err
    assert ("could not connect" if bad == "refused" else "scheduler must be an address") in err
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written, no stray folder


# ----------------------------------------------------------------------------- theorycheck benchmark --scheduler
_HANG = "import time\n\ndef hang(problem, budget, callback):\n    time.sleep(10**6)\n"


def _bench_key(records):
    return sorted((r["solver"].rsplit(":", 1)[-1], r["status"], r["f"]) for r in records)


def test_local_cluster_benchmark_equals_local_run(client, tmp_path, capsys):
    """Cells as Dask tasks: the same records as locally; a hanging solver is killed on the Dask worker too."""
    from theorycheck.problems._run import run_benchmark

    user = tmp_path / "hang.py"
    user.write_text(_HANG)
    # budget 3 s: the closed form takes ~0.5 s idle, and an answer after budget + grace is "over budget"
    kw = dict(problems=["attention-ab/block:paper"], solvers=["closed-form", "Nelder-Mead", f"{user}:hang"],
              levels=[0], budget=3.0, progress=False)  # fmt: skip
    local, _ = run_benchmark(tmp_path / "local", **kw)
    remote, summary = run_benchmark(tmp_path / "dask", scheduler=client, **kw)
    assert _bench_key(remote) == _bench_key(local)
    hang = [r for r in remote if r["solver"].endswith(":hang")][0]
    assert hang["status"] == "killed" and hang["message"].endswith("killed")
    assert summary["scheduler"] == client.scheduler.address and summary["run_now"] == 3
    out = tmp_path / "cli"
    argv = ["benchmark", "--problems", "attention-ab/block:paper", "--solvers", "closed-form", "--sizes", "0",
            "--budget", "5", "--quiet", "--scheduler", client.scheduler.address, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 runs (0 resumed" in text and "1 run now), 0 failed" in text
    assert json.loads((out / "results.json").read_text())["meta"]["scheduler"] == client.scheduler.address


@pytest.mark.parametrize("bad", ["garbage", "refused"])
def test_cli_benchmark_bad_scheduler_fails_within_seconds_with_one_line(tmp_path, capsys, bad):
    address = _refused_address() if bad == "refused" else bad
    out = tmp_path / "bench"
    t0 = time.perf_counter()
    argv = ["benchmark", "--quick", "--quiet", "--scheduler", address, "--out", str(out)]
    assert main(argv) == 2
    assert time.perf_counter() - t0 < 5.0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and address in err
    assert ("could not connect" if bad == "refused" else "scheduler must be an address") in err
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing written, no stray folder
