"""The whole-domain label certificate's regions as tasks on an executor (``certify_options={"executor": ...}``,
``solve attention --scheduler``; SPEC §7 "Distributed run"): the run on a process pool and on a Dask LocalCluster
equals the serial run bit for bit (bounds, points, boxes per region, argmin); a guessed incumbent that an earlier
region beats is rerun; the budget rule that lets a task run with the largest budget is checked against the branch
and bound itself; a checkpoint written by a distributed run (regions in any order) resumes serially to the same
result; a worker whose rebuilt loss differs gets the tables; bad executors and scheduler addresses are refused in
one line before any work."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import math
import multiprocessing
import socket
import time

import numpy as np
import pytest
from _loopback import allow_loopback_only
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_interval_label import _model

from theorycheck import GeneralTopicModel, Masking
from theorycheck.cli import main
from theorycheck.solvers import optimal_attention
from theorycheck.solvers.attention import _interval_regions as regions_mod
from theorycheck.solvers.attention import _interval_vec as vec
from theorycheck.solvers.attention._interval_checkpoint import region_record, reusable
from theorycheck.solvers.attention._interval_general import label_split_certificate
from theorycheck.solvers.attention._interval_label import LabelLoss
from theorycheck.solvers.attention._interval_scores import score_loss, to_scores

OPTS = {"family": "label", "certify": "interval"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Overrides conftest's (as in test_dask): connections to loopback only (the clusters here)."""
    allow_loopback_only(monkeypatch)


@pytest.fixture(scope="module")
def pool():
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as ex:
        yield ex


class Inline(cf.Executor):
    """Runs each task at submission, in this process (the order of completion is the order of submission)."""

    def __init__(self):
        self.calls: list[tuple[int, float, int]] = []

    def submit(self, fn, /, *args, **kwargs):
        fut: cf.Future = cf.Future()
        self.calls.append((args[1], args[7], args[5]))  # region, incumbent, budget (run_region's arguments)
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as exc:  # delivered through the future, as an executor does
            fut.set_exception(exc)
        return fut


def _exact(res) -> str:
    """Everything the result says except the seconds and the checkpoint's file summary."""
    cert = json.loads(json.dumps(res.certificate, default=lambda a: np.asarray(a).tolist()))
    split = cert["global"]["split"]
    split.pop("checkpoint"), split.pop("tasks")
    return json.dumps([cert, np.asarray(res.x).tolist(), res.fun, res.status, res.message], sort_keys=True)


def _run(g, mask_keys=False, **copts):
    return optimal_attention(g, Masking(), options={**OPTS, "mask_keys": mask_keys, "certify_options": copts})


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16), mask_keys=st.booleans(), conc=st.sampled_from([0.3, 1.0]))
def test_process_pool_run_equals_the_serial_run(pool, seed, mask_keys, conc):
    rng = np.random.default_rng(seed)
    g = GeneralTopicModel(rng.dirichlet(np.full(10, conc), size=3), tau=2)
    assume(np.bincount(g.dominant_topic(), minlength=3).min() >= 2)  # the split certificate (not the line one)
    serial = _run(g, mask_keys)
    dist = _run(g, mask_keys, executor=pool)
    assert _exact(dist) == _exact(serial)
    tasks = dist.certificate["global"]["split"]["tasks"]
    assert len(tasks) == len(serial.certificate["global"]["split"]["boxes_per_region"]) - 1
    assert all(t["cpu"] >= 0 and not t["replayed"] for t in tasks)
    assert serial.certificate["global"]["split"]["tasks"] is None


def _far_start():
    """A label loss and a start far from the optimum: no exclusion box settles, and regions improve the incumbent
    (the guesses of a distributed run fail and are rerun)."""
    g = _model()
    U, V = np.eye(g.V1), np.eye(g.V1)
    spec = (g, Masking(), U, V, False)
    return LabelLoss(*spec), spec, (4.0, -3.0)


def test_a_failed_guess_is_rerun_with_the_serial_inputs():
    LL, spec, x0 = _far_start()
    serial = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0)
    ex = Inline()
    dist = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0, executor=ex, spec=spec)
    for key in ("lower", "upper", "n_boxes", "argmin", "x_best"):
        assert getattr(dist, key) == getattr(serial, key), key
    info_s, info_d = serial.info, dist.info
    assert info_d["split"]["boxes_per_region"] == info_s["split"]["boxes_per_region"]
    assert info_d["x_best_original"] == info_s["x_best_original"] and info_d["at_infinity"] == info_s["at_infinity"]
    assert info_s["split"]["exclusion_box"] is None  # the whole score box first: later regions start at inf
    n_regions = len(info_s["split"]["regions"])
    assert len(ex.calls) > n_regions  # some guesses failed and were submitted again
    assert len({c[1] for c in ex.calls}) > 1  # with another incumbent


def test_tiny_budget_is_honoured_exactly():
    """With a budget that bites (max_boxes just above the boxes the exclusion box and the first regions use) the
    tasks' guess (the largest budget) is not the serial budget: the results must still agree."""
    g = _model()
    spec = (g, Masking(), np.eye(g.V1), np.eye(g.V1), False)
    LL = LabelLoss(*spec)
    x0 = _run(g).x
    for max_boxes in (40, 200, 420):
        serial = label_split_certificate(LL, 1e-9, max_boxes, x0, 2.0)
        dist = label_split_certificate(LL, 1e-9, max_boxes, x0, 2.0, executor=Inline(), spec=spec)
        assert (dist.lower, dist.upper, dist.n_boxes, dist.argmin) == (serial.lower, serial.upper, serial.n_boxes,
                                                                        serial.argmin)  # fmt: skip
        assert dist.info["split"]["boxes_per_region"] == serial.info["split"]["boxes_per_region"]


@functools.cache
def _ring_box():
    g = _model()
    LL = LabelLoss(g, Masking(), np.eye(g.V1), np.eye(g.V1), False)
    xs = np.array(to_scores(*_run(g).x))
    box = ((xs[0] - 2.0, xs[0] - 0.05), (xs[1] - 2.0, xs[1] + 2.0))
    return LL, box


def _bnb(budget, upper=math.inf):
    LL, box = _ring_box()
    f = functools.partial(score_loss, LL)
    return vec.branch_and_bound(box, None, None, f, offset=0.0, tol=1e-9, max_boxes=budget, x0=None, upper=upper,
                                one_point=True, monotone=True)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(g_budget=st.integers(1, 90), b_budget=st.integers(1, 90))
def test_the_budget_rule_against_the_branch_and_bound(g_budget, b_budget):
    """:func:`reusable`: a result computed with budget G is declared the result with budget B only when it is."""
    out_g, out_b = _bnb(g_budget), _bnb(b_budget)
    lower, upper, xb, n, (lo, hi) = out_g
    rec = region_record(0, lower, upper, xb, n, lo, hi, 0, math.inf, g_budget)
    same = json.dumps(rec) == json.dumps(region_record(0, *out_b[:4], *out_b[4], 0, math.inf, g_budget))
    if reusable(rec, math.inf, b_budget):
        assert same
    assert not reusable(rec, 1.0, b_budget)  # another incumbent: never


def test_the_budget_rule_is_not_vacuous():
    n_free = _bnb(10_000)[3]  # the region's natural size
    assert n_free > 10
    rec = region_record(0, *_bnb(10_000)[:4], *_bnb(10_000)[4], 0, math.inf, 10_000)
    assert reusable(rec, math.inf, n_free) and not reusable(rec, math.inf, n_free - 1)


def test_a_distributed_checkpoint_resumes_serially(pool, tmp_path, monkeypatch):
    g = _model()
    whole = _run(g)
    path = tmp_path / "cert.jsonl"
    dist = _run(g, executor=pool, checkpoint=path)
    assert _exact(dist) == _exact(whole)
    lines = path.read_text().splitlines()
    recs = [json.loads(line) for line in lines[1:]]
    assert sorted(r["region"] for r in recs) == list(range(9))  # one record per region (every guess held)
    calls = []
    real = vec.branch_and_bound
    monkeypatch.setattr(vec, "branch_and_bound", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = _run(g, checkpoint=path)  # serial, everything recorded
    assert calls == [] and again.certificate["global"]["split"]["checkpoint"]["regions_replayed"] == 9
    assert _exact(again) == _exact(whole)
    keep = [line for line in lines[1:] if json.loads(line)["region"] not in (0, 6)]
    path.write_text("\n".join([lines[0], *keep[::-1]]) + "\n")  # two regions lost, the rest in reverse order
    resumed = _run(g, checkpoint=path)
    assert len(calls) == 2
    assert _exact(resumed) == _exact(whole)
    assert resumed.certificate["global"]["split"]["checkpoint"]["regions_replayed"] == 7


def test_a_worker_whose_loss_differs_gets_the_tables():
    LL, spec, x0 = _far_start()
    serial = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0)
    wrong = (*spec[:4], True)  # mask_keys flipped: the loss built from it has another fingerprint
    regions_mod._MEMO.clear()
    ex = Inline()
    dist = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0, executor=ex, spec=wrong)
    assert (dist.lower, dist.upper, dist.n_boxes) == (serial.lower, serial.upper, serial.n_boxes)
    assert dist.info["split"]["boxes_per_region"] == serial.info["split"]["boxes_per_region"]
    with pytest.raises(regions_mod.TablesMismatch, match="differs from the client's"):
        regions_mod.loss_source(LL, wrong).loss()


@pytest.mark.parametrize(
    "value, extra, match",
    [
        ("tcp://127.0.0.1:8786", {}, r"executor'\] must be None, a concurrent.futures.Executor .*scheduler_executor"),
        (3, {}, r"executor'\] must be None, a concurrent.futures.Executor or a distributed.Client, got 3"),
        ("POOL", {"scope": "local"}, r"executor'\] runs the regions of the label family's whole-domain"),
    ],
)
def test_bad_executors_are_refused_before_any_work(value, extra, match, monkeypatch):
    calls = []
    monkeypatch.setattr(vec, "branch_and_bound", lambda *a, **k: calls.append(1))
    ex = Inline()
    with pytest.raises(ValueError, match=match):
        _run(_model(), executor=ex if value == "POOL" else value, **extra)
    assert calls == [] and ex.calls == []


def _phi_file(tmp_path):
    path = tmp_path / "phi.npy"
    np.save(path, _model().phi)
    return str(path)


@pytest.mark.parametrize("bad", ["garbage", "refused", "no-certify"])
def test_cli_bad_scheduler_fails_in_one_line(tmp_path, capsys, bad):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}" if bad == "refused" else "garbage"
    argv = ["solve", "attention", "--topic-word", _phi_file(tmp_path), "--tau", "2", "--family", "label"]
    argv += [] if bad == "no-certify" else ["--certify", "interval"]
    t0 = time.perf_counter()
    assert main([*argv, "--scheduler", address, "--out", str(tmp_path / "o")]) == 2
    assert time.perf_counter() - t0 < 10.0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    expect = {
        "garbage": "scheduler must be an address",
        "refused": "could not connect",
        "no-certify": "needs --certify",
    }
    assert expect[bad] in err and not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- a Dask LocalCluster
def test_local_cluster_run_equals_the_serial_run(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    g = _model()
    serial = _run(g)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       host="127.0.0.1")  # fmt: skip
    try:
        with distributed.Client(cluster, timeout=120) as client:
            client.wait_for_workers(2, timeout=120)
            dist = _run(g, executor=client)
            assert _exact(dist) == _exact(serial)
            workers = {t["worker"] for t in dist.certificate["global"]["split"]["tasks"]}
            assert len(workers) >= 1 and all(":" in w for w in workers)
            argv = ["solve", "attention", "--topic-word", _phi_file(tmp_path), "--tau", "2", "--family", "label",
                    "--certify", "interval"]  # fmt: skip
            assert main([*argv, "--json", str(tmp_path / "s.json")]) == 0
            assert main([*argv, "--scheduler", cluster.scheduler_address, "--json", str(tmp_path / "d.json")]) == 0
            s, d = (json.loads((tmp_path / f).read_text()) for f in ("s.json", "d.json"))
            tasks = d["certificate"]["global"]["split"].pop("tasks")
            assert s["certificate"]["global"]["split"].pop("tasks") is None and len(tasks) == 9
            assert json.dumps(s, sort_keys=True) == json.dumps(d, sort_keys=True)
    finally:
        cluster.close()
