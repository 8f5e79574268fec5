"""Resumable whole-domain label certificates (``certify_options={"checkpoint": PATH}``, SPEC §7 "Checkpoints"):
a certificate interrupted after some regions and resumed from its file equals the uninterrupted one and reruns
only the regions not recorded; a line cut short by a kill is rerun; a file of another problem and bad paths are
refused; region records round-trip floats exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_interval_label import _model

from theorycheck import GeneralTopicModel, Masking
from theorycheck._validate import TheorycheckWarning
from theorycheck.solvers import optimal_attention
from theorycheck.solvers.attention import _interval_vec as vec
from theorycheck.solvers.attention._interval_checkpoint import region_record, region_result

OPTS = {"family": "label", "certify": "interval"}


def _run(path=None, mask_keys=False, **copts):
    if path is not None:
        copts["checkpoint"] = path
    return optimal_attention(_model(), Masking(), options={**OPTS, "mask_keys": mask_keys, "certify_options": copts})


def _counting(monkeypatch, stop_at=None):
    """Count the branch-and-bound calls; raise KeyboardInterrupt at call number ``stop_at`` (a kill mid-region)."""
    calls = []
    real = vec.branch_and_bound

    def bnb(*a, **k):
        calls.append(1)
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(vec, "branch_and_bound", bnb)
    return calls


def _without_checkpoint(cert) -> str:
    g = json.loads(json.dumps(cert["global"], default=lambda a: np.asarray(a).tolist()))
    g["info"]["split"].pop("checkpoint") if "info" in g else g["split"].pop("checkpoint")
    return json.dumps(g, sort_keys=True)


def test_interrupted_certificate_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch):
    whole = _run()
    calls = _counting(monkeypatch)
    _run()
    n_regions = len(calls)  # the ring's four boxes and the five outer regions
    assert n_regions == 9
    path = tmp_path / "cert.jsonl"
    calls = _counting(monkeypatch, stop_at=4)
    with pytest.raises(KeyboardInterrupt):
        _run(path)
    assert len(path.read_text().splitlines()) == 1 + 3  # header and three finished regions
    calls = _counting(monkeypatch)
    resumed = _run(path)
    assert len(calls) == n_regions - 3  # only the regions not recorded ran
    assert resumed.status == whole.status == 0
    assert resumed.certificate["lower"] == whole.certificate["lower"]
    assert resumed.certificate["upper"] == whole.certificate["upper"]
    assert _without_checkpoint(resumed.certificate) == _without_checkpoint(whole.certificate)
    split = resumed.certificate["global"]["split"]
    assert split["checkpoint"]["regions_replayed"] == 3
    calls = _counting(monkeypatch)
    again = _run(path)  # everything recorded: nothing runs
    assert calls == [] and again.certificate["global"]["split"]["checkpoint"]["regions_replayed"] == n_regions
    assert _without_checkpoint(again.certificate) == _without_checkpoint(whole.certificate)


def _untimed(lines):
    return [{k: v for k, v in json.loads(line).items() if k not in ("cpu", "wall")} for line in lines]


def test_a_line_cut_short_is_rerun(tmp_path, monkeypatch):
    path = tmp_path / "cert.jsonl"
    whole = _run(path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5]) + "\n" + lines[5][:17])  # four regions whole, the fifth cut mid-line
    calls = _counting(monkeypatch)
    resumed = _run(path)
    assert len(calls) == len(lines) - 1 - 4
    assert resumed.certificate["global"]["split"]["checkpoint"]["regions_replayed"] == 4
    assert _without_checkpoint(resumed.certificate) == _without_checkpoint(whole.certificate)
    assert _untimed(path.read_text().splitlines()) == _untimed(lines)  # the file is whole again


def test_a_file_of_another_problem_is_refused(tmp_path):
    path = tmp_path / "cert.jsonl"
    _run(path)
    with pytest.raises(ValueError, match=r"checkpoint'\]: .*cert.jsonl was written for another problem"):
        _run(path, mask_keys=True)
    with pytest.raises(ValueError, match="written for another problem"):
        _run(path, tol=1e-8)
    (tmp_path / "other.txt").write_text("not a checkpoint\n")
    with pytest.raises(ValueError, match="written for another problem"):
        _run(tmp_path / "other.txt")


@pytest.mark.parametrize(
    "value, extra, match",
    [
        (3, {}, r"certify_options\['checkpoint'\] must be None or a file path, got 3"),
        ("  ", {}, r"must be None or a file path"),
        ("DIR", {}, r"must be a file path, got the folder"),
        ("DIR/missing/cert.jsonl", {}, r"the folder .*missing does not exist"),
        ("DIR/cert.jsonl", {"scope": "local"}, r"checkpoint'\] records the regions of the label family's whole-domain"),
    ],
)
def test_bad_checkpoints_are_refused_before_any_work(tmp_path, value, extra, match):
    value = value.replace("DIR", str(tmp_path)) if isinstance(value, str) and value.strip() else value
    with pytest.raises(ValueError, match=match):
        _run(value, **extra)
    assert list(tmp_path.iterdir()) == []


def test_cotopic_certificate_refuses_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match=r"checkpoint'\] records the regions"):
        opts = {"family": "co-topic", "certify": "interval", "certify_options": {"checkpoint": tmp_path / "c"}}
        optimal_attention(_model(), Masking(), options=opts)


finite = st.floats(allow_nan=False, allow_infinity=False)
maybe_inf = st.one_of(finite, st.sampled_from([math.inf, -math.inf]))


@settings(max_examples=50, deadline=None)
@given(
    lower=maybe_inf, upper=maybe_inf, xb=st.one_of(st.none(), st.tuples(finite, finite)), n=st.integers(0, 10**6),
    live=st.lists(st.tuples(maybe_inf, maybe_inf, maybe_inf, maybe_inf), max_size=4), mono=st.integers(0, 10**6),
)  # fmt: skip
def test_region_records_round_trip_exactly(lower, upper, xb, n, live, mono):
    lo = np.array([t[:2] for t in live], dtype=float).reshape(-1, 2)
    hi = np.array([t[2:] for t in live], dtype=float).reshape(-1, 2)
    rec = json.loads(json.dumps(region_record(5, lower, upper, xb, n, lo, hi, mono)))
    (lo_r, up_r, xb_r, n_r, (rlo, rhi)), mono_r = region_result(rec)
    assert (lo_r, up_r, n_r, mono_r) == (lower, upper, n, mono)
    assert (xb_r is None) == (xb is None) and (xb is None or xb_r.tolist() == list(xb))
    assert np.array_equal(rlo, lo) and np.array_equal(rhi, hi) and rlo.shape == (len(live), 2)


def test_every_label_single_warns_that_the_checkpoint_is_not_used(tmp_path):
    phi = np.eye(3) + 0.1
    g = GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=2)
    opts = {**OPTS, "certify_options": {"checkpoint": tmp_path / "c.jsonl"}}
    with pytest.warns(TheorycheckWarning, match=r"checkpoint'\] is not used: every label is a single word"):
        r = optimal_attention(g, Masking(), options=opts)
    assert r.certificate["kind"] == "certified optimum (a line of minimisers)" and not (tmp_path / "c.jsonl").exists()
