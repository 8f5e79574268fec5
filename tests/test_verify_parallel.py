"""``verify --jobs N``: the same rows as a serial run, in the same order, whatever Executor runs them."""

import json
import math
import os
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from proofs_numeric import CLAIMS
from theorycheck.cli import main
from theorycheck.report import Claim, ClaimResult, run_claims, select_claims
from theorycheck.report.runner import _tasks

_REAL_CONNECT = socket.socket.connect  # captured at import, before the offline guard patches it


@pytest.fixture(autouse=True)
def _local_ipc(monkeypatch):
    """Allow Unix-domain sockets (the process pool's forkserver) and loopback (an in-process Dask cluster).

    Everything else stays refused by conftest's offline guard."""
    real = _REAL_CONNECT

    def refuse(self, address, *a, **k):  # OSError: Dask then falls back to loopback for its own address
        raise OSError(f"network access attempted in an offline test: {address}")

    def connect(self, address, *a, **k):
        local = self.family == socket.AF_UNIX or (
            self.family in (socket.AF_INET, socket.AF_INET6) and str(address[0]) in ("127.0.0.1", "::1", "localhost")
        )
        return (real if local else refuse)(self, address, *a, **k)

    monkeypatch.setattr(socket.socket, "connect", connect)


SUBSET = "data.moments,stage1.min-loss,attention.block-K-only,embedding.min-norm-gram,attention.finite-n"


def _strip(rows):
    """results.json rows without the timing fields."""
    return [{k: v for k, v in r.items() if k not in ("seconds", "cached")} for r in rows]


def test_jobs_2_equals_jobs_1_results_json(tmp_path, monkeypatch):
    monkeypatch.setenv("THEORYCHECK_CACHE_DIR", str(tmp_path / "cache"))
    outs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"rep{jobs}"
        argv = ["verify", "--only", SUBSET, "--out", str(out), "--quiet", "--no-figures", "--no-cache", "--jobs", jobs]
        assert main(argv) == 0
        outs[jobs] = json.loads((out / "results.json").read_text())
    a, b = outs["1"], outs["2"]
    assert len(a["claims"]) >= 8
    assert _strip(a["claims"]) == _strip(b["claims"])
    assert a["summary"] == b["summary"] and a["tiers"] == b["tiers"]


def test_any_executor_keeps_claim_order():
    claims = select_claims(CLAIMS, "data.moments,stage1.min-loss")
    serial = run_claims(claims, progress=False)
    with ThreadPoolExecutor(2) as ex:
        threaded = run_claims(claims, progress=False, executor=ex)
    assert [(r.claim.id, r.result.params) for r in threaded] == [(r.claim.id, r.result.params) for r in serial]
    assert [r.to_json()["measured"] for r in threaded] == [r.to_json()["measured"] for r in serial]


def _ok(params, inject=None):
    return ClaimResult(True, 0.0, float(params["x"]), 1.0)


def _boom(params, inject=None):
    raise RuntimeError("deliberate crash in a claim")


def _claim(cid, check, params, **kw):
    return Claim(cid, "test claim", "DERIVED", "test", check, tuple(params), lambda p: {}, **kw)


def test_crash_becomes_an_error_row_and_lambdas_run_locally():
    claims = [
        _claim("a.ok", _ok, [{"x": 1}, {"x": 2}]),
        _claim("b.crash", _boom, [{}]),
        _claim("c.lambda", lambda p, inject=None: ClaimResult(True, 0.0, 3.0, 1.0), [{}]),
    ]
    with ThreadPoolExecutor(2) as ex:
        rows = run_claims(claims, progress=False, executor=ex)
    assert [r.claim.id for r in rows] == ["a.ok", "a.ok", "b.crash", "c.lambda"]
    assert [r.verdict for r in rows] == ["PASS", "PASS", "ERROR", "PASS"]
    assert "deliberate crash in a claim" in rows[2].error
    assert [r.result.measured for r in rows if r.verdict == "PASS"] == [1.0, 2.0, 3.0]


def test_tiers_select_full_params():
    c = _claim("a.tiered", _ok, [{"x": 1}], full_params=({"x": 5}, {"x": 6}))
    assert [r.result.measured for r in run_claims([c], progress=False)] == [1.0]
    rows = run_claims([c], progress=False, tier="full")
    assert [(r.result.measured, r.tier) for r in rows] == [(1.0, "default"), (5.0, "full"), (6.0, "full")]
    with pytest.raises(ValueError, match="tier must be one of"):
        run_claims([c], progress=False, tier="fast")
    with pytest.raises(ValueError, match="jobs"):
        run_claims([c], progress=False, jobs=0)


def test_heavy_and_grouped_tasks_first():
    light = _claim("a.light", _ok, [{"x": 1}], cost=0.1)
    heavy = _claim("b.heavy", _ok, [{"x": 1}], cost=50.0)
    g1 = _claim("c.g1", _ok, [{"x": 1}], cost=10.0, group="shared")
    g2 = _claim("d.g2", _ok, [{"x": 1}, {"x": 2}], cost=10.0, group="shared")
    checks = [(c, p, "default") for c in (light, heavy, g1, g2) for p in c.default_params]
    tasks = _tasks(checks, range(len(checks)), {})
    assert tasks == [[1], [2, 3, 4], [0]]  # heavy (50) > the group (3 x 10) > light
    assert _tasks(checks, range(len(checks)), {"a.light": 100.0})[0] == [0]  # a measured time wins


def test_process_pool_worker_lost_is_reported(tmp_path, monkeypatch):
    """A worker killed mid-run loses no row: its checks are reported as errors, the others complete."""
    mod = tmp_path / "tc_killer_claim.py"
    mod.write_text(
        "import os\n"
        "from theorycheck.report import Claim, ClaimResult\n"
        f"PARENT = {os.getpid()}\n"
        "def ok(params, inject=None):\n    return ClaimResult(True, 0.0, float(params['x']), 1.0)\n"
        "def die(params, inject=None):\n"
        "    if os.getpid() == PARENT:\n        raise RuntimeError('ran in the test process, not in a worker')\n"
        "    os._exit(3)\n"
        "def nothing(params):\n    return {}\n"
        "A = Claim('a.ok', 's', 'DERIVED', 't', ok, ({'x': 1},), nothing)\n"
        "B = Claim('b.die', 's', 'DERIVED', 't', die, ({},), nothing, cost=100.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import tc_killer_claim as m

    rows = run_claims([m.A, m.B], progress=False, jobs=2)
    assert [r.claim.id for r in rows] == ["a.ok", "b.die"]
    assert rows[1].verdict == "ERROR" and "worker lost" in rows[1].error
    assert rows[0].verdict in ("PASS", "ERROR")  # may share the broken pool; never missing
    assert not math.isfinite(rows[1].result.margin)


def test_dask_executor_gives_the_serial_rows():
    """``--scheduler``: the runner takes a Dask client's Executor (here an in-process LocalCluster on loopback)."""
    distributed = pytest.importorskip("distributed")
    claims = select_claims(CLAIMS, "data.moments,stage1.min-loss")
    serial = [r.to_json() for r in run_claims(claims, progress=False)]
    with distributed.LocalCluster(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None, protocol="tcp://", host="127.0.0.1"
    ) as lc:
        with distributed.Client(lc) as client:
            rows = run_claims(claims, progress=False, executor=client.get_executor(pure=False))
    assert _strip([r.to_json() for r in rows]) == _strip(serial)


def _seeded(params, inject=None):
    from theorycheck.report.claims import by_seed

    return by_seed(lambda p, i=None: ClaimResult(True, 0.0, float(p["seed"]), 1.0 + p["seed"]), params, inject)


def test_report_states_the_tier_and_the_seeds(tmp_path):
    from theorycheck.report import write_report

    c = _claim("a.seeded", _seeded, [{"seed": 0}], full_params=({"seeds": (0, 1, 2, 3, 4)},))
    for tier, n in (("default", 1), ("full", 2)):
        rows = run_claims([c], progress=False, tier=tier)
        out = write_report(rows, tmp_path / tier, figures=False, tier=tier)
        data = json.loads((out / "results.json").read_text())
        assert data["summary"]["tier"] == tier and len(data["claims"]) == n
        assert data["tiers"]["default"] == ["a.seeded [seed=0]"]
        assert data["tiers"]["full"] == ["a.seeded [seeds=(0, 1, 2, 3, 4)]"]
        md = (out / "report.md").read_text()
        assert f"Tier run: **{tier}" in md and "`theorycheck verify --full` adds 1 checks" in md
    assert "- seeds [0, 1, 2, 3, 4]: 5/5 passed; 95% t-intervals over seeds: margin [1.03" in md
    assert data["claims"][1]["details"]["margin_ci95"] == pytest.approx([1.0368, 4.9632], abs=1e-4)
