"""theorycheck._threads: one place for BLAS and Numba thread counts."""

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import numba
import pytest
from threadpoolctl import threadpool_info

from theorycheck import _threads


def _blas_counts():
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


@pytest.fixture
def no_request(monkeypatch):
    monkeypatch.delenv(_threads.ENV_VAR, raising=False)
    monkeypatch.setitem(_threads._state, "threads", None)


def test_requested_reads_the_environment(no_request, monkeypatch):
    assert _threads.requested() is None
    monkeypatch.setenv(_threads.ENV_VAR, "3")
    assert _threads.requested() == 3
    for bad, msg in (("zero", "must be an integer >= 1"), ("0", "must lie in")):
        monkeypatch.setenv(_threads.ENV_VAR, bad)
        with pytest.raises(ValueError, match=f"THEORYCHECK_THREADS {msg}|THEORYCHECK_THREADS must"):
            _threads.requested()


def test_configure_without_a_request_changes_nothing(no_request):
    before = (_blas_counts(), numba.get_num_threads())
    assert _threads.configure(None) is None
    assert (_blas_counts(), numba.get_num_threads()) == before


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, ValueError), ("2", TypeError)])
def test_configure_rejects_bad_counts(bad, exc, no_request):
    with pytest.raises(exc, match="threads"):
        _threads.configure(bad)


def test_blas_threads_default_is_one_and_restored(no_request):
    if not _blas_counts():
        pytest.skip("no BLAS library visible to threadpoolctl")
    before = _blas_counts()
    with _threads.blas_threads() as n:
        assert n == 1 and set(_blas_counts()) == {1}
    assert _blas_counts() == before


def test_blas_threads_follows_the_request(no_request, monkeypatch):
    monkeypatch.setenv(_threads.ENV_VAR, "2")
    with _threads.blas_threads() as n:
        assert n == 2
    with _threads.blas_threads(1) as n:
        assert n == 1


def test_numba_threads_clamped_and_restored(no_request):
    before = numba.get_num_threads()
    with _threads.numba_threads(10_000) as n:
        assert n == numba.config.NUMBA_NUM_THREADS == numba.get_num_threads()
    with _threads.numba_threads() as n:
        assert n == 1 == numba.get_num_threads()
    assert numba.get_num_threads() == before
    with pytest.raises(ValueError, match="n must lie in"):
        with _threads.numba_threads(0):
            pass


def test_configure_in_a_fresh_process():
    """--threads N: BLAS and Numba at N process-wide, exported to child processes."""
    code = (
        "import json, os; from theorycheck import _threads as t; n = t.configure(1); i = t.thread_info(); "
        "print(json.dumps([n, i['numba_threads'], [b['threads'] for b in i['blas']], "
        "os.environ['THEORYCHECK_THREADS'], os.environ['OPENBLAS_NUM_THREADS']]))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("THEORYCHECK_THREADS", "NUMBA_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    n, nb, blas, exported, openblas = json.loads(out)
    assert n == 1 and nb == 1 and set(blas) <= {1} and exported == "1" and openblas == "1"


def test_cli_threads_flag_is_applied(monkeypatch, no_request, capsys):
    """``--threads`` reaches :func:`configure` before the command runs."""
    from theorycheck import cli

    seen = []
    monkeypatch.setattr(_threads, "configure", lambda n: seen.append(n))
    assert cli.main(["solve", "attention", "--T", "3", "--v", "2", "--tau", "1", "--threads", "1"]) == 0
    assert seen == [1]


def test_small_problem_serial_below_threshold_only(no_request, monkeypatch):
    import theorycheck._threads as t

    calls = []
    monkeypatch.setattr(t, "numba_threads", lambda n: _record(calls, ("numba", n)))
    monkeypatch.setattr(t, "blas_threads", lambda n: _record(calls, ("blas", n)))
    with t.small_problem(10, 512, blas=True, numba=True):
        pass
    with t.small_problem(512, 512, blas=True, numba=True):
        pass
    assert calls == [("blas", 1), ("numba", 1)]
    monkeypatch.setenv(t.ENV_VAR, "2")
    with t.small_problem(10**6, 512, numba=True):
        pass
    assert calls[-1] == ("numba", 2)


def _record(calls, item):
    from contextlib import nullcontext

    calls.append(item)
    return nullcontext()


def _counts_by_path():
    """``{filepath: num_threads}`` of every BLAS library (read afresh by threadpoolctl)."""
    return {d["filepath"]: d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"}


@contextmanager
def _scipy_blas_at(n: int):
    """SciPy's BLAS (the libraries ``kernel_blas_serial`` controls) at ``n`` threads inside the block
    (skips the test if that is impossible here), the previous counts restored afterwards."""
    libs = _threads._kernel_blas_controllers()
    if not libs:
        pytest.skip("no SciPy BLAS visible to threadpoolctl")
    before = [lib.num_threads for lib in libs]
    try:
        for lib in libs:
            lib.set_num_threads(n)
        if any(lib.num_threads != n for lib in libs):
            pytest.skip(f"SciPy's BLAS cannot run {n} threads here")
        yield libs
    finally:
        for lib, k in zip(libs, before):
            lib.set_num_threads(k)


@pytest.fixture
def scipy_blas_at_two():
    """SciPy's BLAS at 2 threads for the test (the test environment may pin BLAS to 1)."""
    with _scipy_blas_at(2) as libs:
        yield {lib.filepath for lib in libs}


def test_kernel_blas_serial_finds_only_scipys_blas():
    import scipy.linalg.cython_blas  # noqa: F401

    libs = _threads._kernel_blas_controllers()
    assert libs, "SciPy's BLAS (loaded by scipy.linalg.cython_blas) not found"
    assert all(lib.user_api == "blas" and "scipy" in os.path.basename(os.path.dirname(lib.filepath)) for lib in libs)
    assert {lib.filepath for lib in libs} <= set(_counts_by_path())


def test_kernel_blas_serial_one_thread_inside_restored_after(scipy_blas_at_two, no_request, monkeypatch):
    """SciPy's BLAS at 2 -> 1 inside the block (even with THEORYCHECK_THREADS=2: always serial), the
    other BLAS libraries (NumPy's own) untouched, 2 again after the block."""
    monkeypatch.setenv(_threads.ENV_VAR, "2")
    before = _counts_by_path()
    assert all(before[p] == 2 for p in scipy_blas_at_two)
    with _threads.kernel_blas_serial():
        inside = _counts_by_path()
    assert all(inside[p] == 1 for p in scipy_blas_at_two)
    assert {p: n for p, n in inside.items() if p not in scipy_blas_at_two} == {
        p: n for p, n in before.items() if p not in scipy_blas_at_two
    }
    assert _counts_by_path() == before


def test_kernel_blas_serial_restores_on_exception(scipy_blas_at_two):
    before = _counts_by_path()
    with pytest.raises(KeyError, match="boom"):
        with _threads.kernel_blas_serial():
            assert all(_counts_by_path()[p] == 1 for p in scipy_blas_at_two)
            raise KeyError("boom")
    assert _counts_by_path() == before


def test_kernel_blas_serial_is_a_no_op_when_already_serial(monkeypatch):
    """Already at 1 (and nested inside itself): no ``set_num_threads`` call, nothing changed on exit."""
    with _scipy_blas_at(1) as libs:
        calls = []
        with monkeypatch.context() as mp:
            for lib in libs:
                mp.setattr(lib, "set_num_threads", lambda n, lib=lib: calls.append((lib.filepath, n)))
            counts = _counts_by_path()
            with _threads.kernel_blas_serial():
                with _threads.kernel_blas_serial():
                    assert _counts_by_path() == counts
        assert calls == [] and _counts_by_path() == counts


def test_kernel_blas_serial_nested_restores_the_outer_count(scipy_blas_at_two):
    """The inner block sees 1 already and changes nothing; the outer one restores 2."""
    with _threads.kernel_blas_serial():
        with _threads.kernel_blas_serial():
            assert all(_counts_by_path()[p] == 1 for p in scipy_blas_at_two)
        assert all(_counts_by_path()[p] == 1 for p in scipy_blas_at_two)
    assert all(_counts_by_path()[p] == 2 for p in scipy_blas_at_two)


def test_matmul_kernels_leave_the_blas_count_as_they_found_it(scipy_blas_at_two):
    """``matmul_rows`` / ``matmul_tn`` enter ``kernel_blas_serial``: SciPy's count is 2 again after them."""
    import numpy as np

    from theorycheck.nn._dense_kernels import matmul_rows, matmul_tn

    before = _counts_by_path()
    A = np.ones((300, 5))
    assert np.all(matmul_rows(A, np.ones((5, 3))) == 5.0) and np.all(matmul_tn(A, A) == 300.0)
    assert _counts_by_path() == before
