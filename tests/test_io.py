"""atomic_directory: all or nothing."""

import pytest

from theorycheck._io import atomic_directory


def test_success_replaces_existing_folder(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with atomic_directory(out) as tmp:
        assert tmp.parent == tmp_path and tmp != out
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]


def test_failure_leaves_nothing_half_written(tmp_path):
    out = tmp_path / "rep"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(out) as tmp:
            (tmp / "partial.txt").write_text("x")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
