"""The whole-domain label certificate's regions as tasks on an executor (``certify_options={"executor": ...}``,
``solve attention --scheduler``; SPEC §7 "Distributed run", "Sub-box tasks"): the run on a process pool, on a Dask
LocalCluster and on a scheduler and workers started as separate processes (the API and the CLI) equals the serial
run bit for bit (bounds, points, boxes per region, argmin); regions cut into sub-box tasks (down to every box a task)
too, with the lemma it rests on (a box is bounded as if alone) and each region searched in pieces against its whole
search; a guessed incumbent that an earlier region beats is rerun; the budget rule that lets a task run with the
largest budget is checked against the branch and bound itself; a checkpoint written by a distributed run (regions in
any order) resumes serially to the same result; a worker whose rebuilt loss differs gets the tables; bad executors
and scheduler addresses are refused in one line before any work."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import math
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _loopback import allow_loopback_only
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_interval_label import _model

from theorycheck import GeneralTopicModel, Masking
from theorycheck.cli import main
from theorycheck.solvers import optimal_attention, optimal_value_matrix
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


# ----------------------------------------------------------------------------- sub-box tasks (SPEC §7)
@functools.cache
def _serial_regions():
    """The serial run of :func:`_model`'s certificate (stage-1 ``W^V``), region by region: ``(LL, regions,
    [(incumbent, out)])``."""
    g = _model()
    W = optimal_value_matrix(g, Masking(), options={"dense": False}).x
    LL = LabelLoss(g, Masking(), W.left, W.right, False)
    x0 = _run(g).x
    regions, got = [], []

    def spy(LL_, regs, x0s, **kw):
        regions.extend(regs)
        done = real(LL_, regs, x0s, **kw)
        upper = kw["upper0"]
        for out, _ in done:
            got.append((upper, out))
            upper = regions_mod.next_incumbent(upper, out)
        return done

    real = regions_mod.run_regions
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("theorycheck.solvers.attention._interval_general.run_regions", spy)
        label_split_certificate(LL, 1e-9, 20_000, x0, 2.0)
    return LL, regions, got


def _same_out(a, b) -> bool:
    return json.dumps(region_record(0, *a[:4], *a[4], 0)) == json.dumps(region_record(0, *b[:4], *b[4], 0))


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_box_bound_does_not_depend_on_the_other_boxes_of_its_round(data):
    """The lemma's premise (SPEC §7, "Sub-box tasks"): the score evaluator bounds each box of a batch as if alone,
    bit for bit (boxes with finite and infinite ends, both frames)."""
    LL, _, _ = _serial_regions()
    frame = data.draw(st.sampled_from(["scores", "original"]))
    engine = data.draw(st.sampled_from(["numba", "numba-pairs"]))  # both compiled kernels (the default chooses)
    ends = st.floats(-30, 30, allow_nan=False)
    boxes = []
    for _ in range(data.draw(st.integers(2, 6))):
        a, b, c, d = (data.draw(ends) for _ in range(4))
        lo0, hi0 = (min(a, b), max(a, b) + 0.5) if not data.draw(st.booleans()) else (-math.inf, max(a, b))
        boxes.append(((lo0, hi0), (min(c, d), max(c, d) + 0.25)))
    lo = np.array([[b[0][0], b[1][0]] for b in boxes])
    hi = np.array([[b[0][1], b[1][1]] for b in boxes])
    f = functools.partial(score_loss, LL, frame=frame, engine=engine)
    batch = vec.box_bounds(lo, hi, None, None, f, None, one_point=True)
    for i in range(len(boxes)):
        alone = vec.box_bounds(lo[i : i + 1], hi[i : i + 1], None, None, f, None, one_point=True)
        for x, y in zip(batch, alone):
            assert np.array_equal(np.asarray(x)[i : i + 1], np.asarray(y), equal_nan=True)


@pytest.mark.parametrize("stop_at", [2, 5, 16])
def test_a_search_in_pieces_is_the_whole_search(stop_at):
    """Every region of the serial run, searched as its first rounds then one search per frontier box (with the
    incumbent the first rounds end with), combined: the region's serial result bit for bit (bounds, best point,
    boxes, live boxes as a set, monotonicity count), whenever :func:`combine` accepts; and it accepts wherever the
    search keeps the incumbent it was given (every region here)."""
    LL, regions, got = _serial_regions()
    n_split = 0
    for k, ((frame, box), (upper, whole)) in enumerate(zip(regions, got)):
        args = (LL, k, frame, box, 1e-9, 20_000, None, upper, len(regions))
        prefix = regions_mod.run_region(*args, stop_at)
        flo, fhi = prefix["frontier"]
        if not len(flo):
            assert _same_out(regions_mod.canonical(prefix["out"]), whole)
            continue
        n_split += 1
        subs = []
        for j in range(len(flo)):
            a = list(args)
            a[7] = prefix["out"][1]
            subs.append(regions_mod.run_region(*a, None, (flo[j : j + 1], fhi[j : j + 1]), prefix["scale"]))
        comb = regions_mod.combine(prefix, subs, 20_000)
        if comb is None:  # refused only where the search beats its incumbent (then the region runs whole)
            assert whole[2] is not None
            continue
        assert _same_out(comb["out"], whole), k
        whole_mono = vec.branch_and_bound  # the monotonicity count: the whole search again, counted
        stats: dict = {}
        whole_mono(box, None, None, functools.partial(score_loss, LL, frame=frame), offset=0.0, tol=1e-9,
                   max_boxes=20_000, x0=None, upper=upper, one_point=True, monotone=True, stats=stats)  # fmt: skip
        assert comb["n_monotone"] == stats["n_monotone"]
        assert comb["budget"] == whole[3] + 2 and len(comb["pieces"]) == len(flo) + 1
    assert n_split >= 2


def test_combine_refuses_pieces_that_are_not_the_whole_search():
    LL, regions, got = _serial_regions()
    k = max(range(len(got)), key=lambda i: got[i][1][3])  # the largest region
    frame, box = regions[k]
    upper, whole = got[k]
    args = (LL, k, frame, box, 1e-9, 20_000, None, upper, len(regions))
    prefix = regions_mod.run_region(*args, 4)
    flo, fhi = prefix["frontier"]

    def subs(up, budget):
        a = list(args)
        a[5], a[7] = budget, up
        return [regions_mod.run_region(*a, None, (flo[j : j + 1], fhi[j : j + 1]), prefix["scale"])
                for j in range(len(flo))]  # fmt: skip

    assert regions_mod.combine(prefix, subs(upper, 20_000), 20_000) is not None
    assert regions_mod.combine(prefix, subs(math.inf, 20_000), 20_000) is None  # sub-searches find better points
    small = whole[3] // 4  # a budget that cuts the sub-searches: refused, whatever the pieces say
    assert regions_mod.combine(prefix, subs(upper, small), small) is None
    assert regions_mod.combine(prefix, subs(upper, 20_000), prefix["out"][3] + len(flo) + 1) is None  # prefix cut


def test_sub_box_tasks_give_the_serial_result(monkeypatch, pool):
    """More tasks than regions (the frontier boxes), on a process pool and inline, with a start that makes the
    guesses fail (regions beat the incumbent) and with budgets that bite: always the serial result."""
    g = _model()
    serial = _run(g)
    for split_at in (2, 16):  # every box a task (pieces of pieces), or a few
        monkeypatch.setattr(regions_mod, "SPLIT_AT", split_at)
        ex = Inline()
        dist = _run(g, executor=ex)
        assert _exact(dist) == _exact(serial)
        assert len(ex.calls) > 2 * 9
        tasks = dist.certificate["global"]["split"]["tasks"]
        assert sum(len(t.get("pieces", [])) for t in tasks) > 9
        assert _exact(_run(g, executor=pool)) == _exact(serial)
    monkeypatch.setattr(regions_mod, "SPLIT_AT", 3)
    LL, spec, x0 = _far_start()
    far = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0)
    dist = label_split_certificate(LL, 1e-9, 20_000, x0, 2.0, executor=Inline(), spec=spec)
    assert (dist.lower, dist.upper, dist.n_boxes, dist.argmin, dist.x_best) == (far.lower, far.upper, far.n_boxes,
                                                                                 far.argmin, far.x_best)  # fmt: skip
    assert dist.info["split"]["boxes_per_region"] == far.info["split"]["boxes_per_region"]
    LL2 = LabelLoss(g, Masking(), np.eye(g.V1), np.eye(g.V1), False)
    spec2 = (g, Masking(), np.eye(g.V1), np.eye(g.V1), False)
    for max_boxes in (40, 200, 420):
        s = label_split_certificate(LL2, 1e-9, max_boxes, serial.x, 2.0)
        d = label_split_certificate(LL2, 1e-9, max_boxes, serial.x, 2.0, executor=Inline(), spec=spec2)
        assert (d.lower, d.upper, d.n_boxes, d.argmin) == (s.lower, s.upper, s.n_boxes, s.argmin)
        assert d.info["split"]["boxes_per_region"] == s.info["split"]["boxes_per_region"]


# ----------------------------------------------------------------------------- scheduler and workers as processes
@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    """A ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on loopback (``benchmarks/_common.py``)."""
    distributed = pytest.importorskip("distributed")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from _common import separate_cluster
    finally:
        sys.path.pop(0)
    with separate_cluster(tmp_path_factory.mktemp("cluster"), 2) as (address, procs):
        with distributed.Client(address, timeout=120) as c:
            c.wait_for_workers(2, timeout=120)
        yield address, procs


def test_separate_processes_give_the_serial_certificate(separate, tmp_path, monkeypatch):
    """The CLI with ``--scheduler tcp://127.0.0.1:PORT`` and the API with a ``distributed.Client`` to a scheduler and
    two workers started as processes: the serial certificate bit for bit, with sub-box tasks on both workers."""
    distributed = pytest.importorskip("distributed")
    address, procs = separate
    assert address.startswith("tcp://127.0.0.1:")
    monkeypatch.setattr(regions_mod, "SPLIT_AT", 4)
    g = _model()
    serial = _run(g)
    with distributed.Client(address, timeout=120) as client:
        dist = _run(g, executor=client)
        pids = set(client.run(os.getpid).values())
    assert _exact(dist) == _exact(serial)
    assert pids == {p.pid for p in procs[1:]}
    pieces = [p for t in dist.certificate["global"]["split"]["tasks"] for p in t.get("pieces", [])]
    assert len(pieces) > 9 and {int(p["worker"].rsplit(":", 1)[1]) for p in pieces} <= pids
    argv = ["solve", "attention", "--topic-word", _phi_file(tmp_path), "--tau", "2", "--family", "label",
            "--certify", "interval"]  # fmt: skip
    assert main([*argv, "--json", str(tmp_path / "s.json")]) == 0
    assert main([*argv, "--scheduler", address, "--json", str(tmp_path / "d.json")]) == 0
    s, d = (json.loads((tmp_path / f).read_text()) for f in ("s.json", "d.json"))
    tasks = d["certificate"]["global"]["split"].pop("tasks")
    assert s["certificate"]["global"]["split"].pop("tasks") is None and len(tasks) == 9
    assert json.dumps(s, sort_keys=True) == json.dumps(d, sort_keys=True)
