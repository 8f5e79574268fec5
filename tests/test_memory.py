"""theorycheck._memory.check_alloc: sizes with Python ints, limits from argument / environment."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck._memory import MAX_BYTES_ENV, check_alloc, default_max_bytes


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
