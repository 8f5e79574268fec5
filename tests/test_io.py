"""theorycheck._io: atomic folders and files, the marker, and the JSON policy."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck._io import MARKER, atomic_directory, dumps_json, read_marker, write_json, write_marker


def test_success_replaces_existing_theorycheck_folder(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "old.txt").write_text("old")
    write_marker(out, command="theorycheck test")
    assert read_marker(out)["files"] == ["old.txt"]
    with atomic_directory(out, command="theorycheck test") as tmp:
        assert tmp.parent == tmp_path and tmp != out
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]
    marker = read_marker(out)
    assert marker["tool"] == "theorycheck" and marker["command"] == "theorycheck test"
    assert marker["files"] == ["new.txt"] and marker["version"]


def test_failure_leaves_nothing_half_written(tmp_path):
    out = tmp_path / "rep"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(out) as tmp:
            (tmp / "partial.txt").write_text("x")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_the_old_folder(tmp_path):
    out = tmp_path / "rep"
    with atomic_directory(out) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(out) as tmp:
            (tmp / "a.txt").write_text("second")
            raise RuntimeError("boom")
    assert (out / "a.txt").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]


def test_a_marker_from_another_tool_is_not_ours(tmp_path):
    (tmp_path / MARKER).write_text(json.dumps({"tool": "other", "files": []}))
    assert read_marker(tmp_path) is None
    (tmp_path / MARKER).write_text("not json")
    assert read_marker(tmp_path) is None


def test_write_json_non_finite_is_null_and_strict(tmp_path):
    path = write_json(tmp_path / "x.json", {"a": np.float64("nan"), "b": [math.inf, -math.inf, 1.5], "c": np.int64(3)})
    text = path.read_text()
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": 3}
    assert "NaN" not in text and "Infinity" not in text


@given(st.recursive(st.floats() | st.integers() | st.text(max_size=3), lambda c: st.lists(c, max_size=3), max_leaves=8))
def test_dumps_json_round_trips_finite_values(x):
    """Any nesting of floats: finite values survive exactly, every non-finite one becomes null."""

    def expect(y):
        if isinstance(y, list):
            return [expect(z) for z in y]
        if isinstance(y, float) and not math.isfinite(y):
            return None
        return y

    assert json.loads(dumps_json(x)) == expect(x)
