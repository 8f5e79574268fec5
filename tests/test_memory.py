"""theorycheck._memory.check_alloc: sizes with Python ints, limits from argument / environment."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck import _memory
from theorycheck._memory import MAX_BYTES_ENV, _cgroup_bytes, check_alloc, default_max_bytes


@given(st.integers(1, 10**7), st.integers(1, 100))
def test_refuses_above_the_limit_and_names_the_alternative(T, v):
    V1 = T * v + 1
    need = V1 * V1 * 8
    limit = 10**9
    if need > limit:
        with pytest.raises(ValueError, match="BlockValueMatrix"):
            check_alloc("W", (V1, V1), max_bytes=limit, alternative="BlockValueMatrix")
    else:
        assert check_alloc("W", (V1, V1), max_bytes=limit) == need


def test_environment_variable(monkeypatch):
    monkeypatch.setenv(MAX_BYTES_ENV, "1M")
    assert default_max_bytes() == 2**20
    with pytest.raises(ValueError, match=r"1\.0 MiB"):
        check_alloc("x", (1000, 1000))
    monkeypatch.setenv(MAX_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match=MAX_BYTES_ENV):
        default_max_bytes()


def test_bad_max_bytes():
    with pytest.raises(ValueError, match="max_bytes"):
        check_alloc("x", (2, 2), max_bytes=-1)
    with pytest.raises(TypeError, match="max_bytes"):
        check_alloc("x", (2, 2), max_bytes="1G")


# ----- the available budget: MemAvailable, RLIMIT_AS and the cgroup limits (issue #26 item 3) -----
def _write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_minus_usage(tmp_path):
    _write(tmp_path, "memory.max", "1073741824\n")
    _write(tmp_path, "memory.current", "73741824\n")
    assert _cgroup_bytes(str(tmp_path)) == 1_000_000_000


def test_cgroup_v2_max_is_no_limit(tmp_path):
    _write(tmp_path, "memory.max", "max\n")
    _write(tmp_path, "memory.current", "123\n")
    assert _cgroup_bytes(str(tmp_path)) is None


def test_cgroup_v1_limit_minus_usage_and_unlimited(tmp_path):
    _write(tmp_path, "memory/memory.limit_in_bytes", "2000\n")
    _write(tmp_path, "memory/memory.usage_in_bytes", "500\n")
    assert _cgroup_bytes(str(tmp_path)) == 1500
    _write(tmp_path, "memory/memory.limit_in_bytes", "9223372036854771712\n")  # v1 "unlimited"
    assert _cgroup_bytes(str(tmp_path)) is None


def test_cgroup_usage_above_limit_and_no_files(tmp_path):
    assert _cgroup_bytes(str(tmp_path)) is None
    _write(tmp_path, "memory.max", "100")
    _write(tmp_path, "memory.current", "250")
    assert _cgroup_bytes(str(tmp_path)) == 0


def test_available_is_the_minimum(monkeypatch):
    monkeypatch.setattr(_memory, "_meminfo_bytes", lambda: 10**10)
    monkeypatch.setattr(_memory, "_rlimit_bytes", lambda: 3 * 10**9)
    monkeypatch.setattr(_memory, "_cgroup_bytes", lambda: None)
    assert _memory._available_bytes() == 3 * 10**9
    monkeypatch.setattr(_memory, "_cgroup_bytes", lambda: 10**9)
    assert _memory._available_bytes() == 10**9
    monkeypatch.delenv(MAX_BYTES_ENV, raising=False)
    assert default_max_bytes() == 10**9 // 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ulimit -v and /proc/self/status")
def test_address_space_limit_gives_the_guard_error_not_memory_error():
    code = (
        "import theorycheck as tc\n"
        "try:\n"
        "    tc.population.moments(tc.TopicModel(T=199, v=100, tau=3), tc.Masking())\n"
        "except ValueError as e:\n"
        "    print('GUARD', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != MAX_BYTES_ENV}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    cmd = f"ulimit -v 4000000; exec {shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MemoryError" not in r.stderr
    assert r.stdout.startswith("GUARD moments"), r.stdout
    assert "memory limit" in r.stdout and "value_loss" in r.stdout  # names the structured alternative
