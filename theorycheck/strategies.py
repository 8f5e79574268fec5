"""Public hypothesis strategies for property tests of the theory (users' and ours).

All strategies are keyword-only with ``min_``/``max_`` pairs; ``None`` means a derived
default. Sizes are small by default so exact enumeration stays cheap. Bad arguments raise
``ValueError`` immediately (not lazily), naming the argument.

>>> from hypothesis import given
>>> from theorycheck.strategies import topic_models, maskings
>>> @given(topic_models(max_T=6), maskings())
... def test_something(tm, mk): ...
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ._validate import check_int, check_prob
from .config import Masking, TopicModel

__all__ = ["topic_models", "maskings", "matrices"]


def _order(name_lo, lo, name_hi, hi):
    if hi < lo:
        raise ValueError(f"{name_lo}={lo} must be <= {name_hi}={hi}")


def topic_models(
    *,
    min_T: int = 2,
    max_T: int | None = None,
    min_v: int = 1,
    max_v: int | None = None,
    min_tau: int = 1,
    max_tau: int | None = None,
    prior: str = "uniform-tau",
) -> st.SearchStrategy[TopicModel]:
    """Strategy for :class:`TopicModel`.

    - ``min_T``, ``max_T``: number of topics (default ``max_T = min_T + 6``).
    - ``min_v``, ``max_v``: words per topic (default ``max_v = min_v + 5``).
    - ``min_tau``, ``max_tau``: topics per document, clipped to ``[1, T]`` (default ``max_tau = T``).
    - ``prior``: ``"uniform-tau"`` or ``"dirichlet"`` (then ``alpha`` is drawn from [0.05, 5]).

    Shrinks towards the smallest T, v and tau.
    """
    min_T = check_int("min_T", min_T, low=1)
    max_T = min_T + 6 if max_T is None else check_int("max_T", max_T, low=1)
    _order("min_T", min_T, "max_T", max_T)
    min_v = check_int("min_v", min_v, low=1)
    max_v = min_v + 5 if max_v is None else check_int("max_v", max_v, low=1)
    _order("min_v", min_v, "max_v", max_v)
    min_tau = check_int("min_tau", min_tau, low=1)
    if max_tau is not None:
        max_tau = check_int("max_tau", max_tau, low=1)
        _order("min_tau", min_tau, "max_tau", max_tau)
    if min_tau > max_T:
        raise ValueError(f"min_tau={min_tau} must be <= max_T={max_T}")
    if prior not in ("uniform-tau", "dirichlet"):
        raise ValueError(f"prior must be 'uniform-tau' or 'dirichlet', got {prior!r}")

    @st.composite
    def build(draw):
        T = draw(st.integers(max(min_T, min_tau), max_T))
        v = draw(st.integers(min_v, max_v))
        if prior == "dirichlet":
            alpha = draw(st.floats(0.05, 5.0, allow_nan=False))
            return TopicModel(T=T, v=v, prior="dirichlet", alpha=alpha)
        hi = T if max_tau is None else min(T, max_tau)
        tau = draw(st.integers(min_tau, hi))
        return TopicModel(T=T, v=v, tau=tau)

    return build()


def maskings(
    *,
    min_p_m: float = 0.01,
    max_p_m: float = 1.0,
    allow_no_mask_token: bool = True,
) -> st.SearchStrategy[Masking]:
    """Strategy for :class:`Masking` with ``p_m`` in ``[min_p_m, max_p_m]``.

    - ``min_p_m``, ``max_p_m``: selection probability bounds (default ``[0.01, 1]``).
    - ``allow_no_mask_token``: if False, keep ``p_c + p_r <= 0.95`` so that ``q > 0``.

    Draws ``(p_c, p_r)`` uniformly in the simplex corner ``p_c + p_r <= 1`` and rejects
    configurations with ``a = 1 - p_m (1 - p_c) < 0.05`` (no visible document at all),
    which no loss of the paper is about. Shrinks towards the smallest ``p_m``.
    """
    min_p_m = check_prob("min_p_m", min_p_m)
    max_p_m = check_prob("max_p_m", max_p_m)
    _order("min_p_m", min_p_m, "max_p_m", max_p_m)
    cap = 1.0 if allow_no_mask_token else 0.95

    @st.composite
    def build(draw):
        p_m = draw(st.floats(min_p_m, max_p_m, allow_nan=False))
        p_c = draw(st.floats(0.0, cap, allow_nan=False))
        p_r = draw(st.floats(0.0, cap - p_c, allow_nan=False))
        mk = Masking(p_m=p_m, p_c=p_c, p_r=min(p_r, 1.0 - p_c))
        from hypothesis import assume

        assume(mk.a >= 0.05)
        return mk

    return build()


def matrices(n: int, *, scale: float = 1.0, symmetric: bool = False) -> st.SearchStrategy[np.ndarray]:
    """Strategy for finite float64 ``(n, n)`` matrices with entries in ``[-scale, scale]``.

    Drawn from a seed so that large matrices stay cheap to generate and shrink well
    (shrinks towards the matrix of seed 0).
    """
    n = check_int("n", n, low=1)
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")

    def make(seed):
        M = np.random.default_rng(seed).uniform(-scale, scale, size=(n, n))
        return (M + M.T) / 2 if symmetric else M

    return st.integers(0, 2**32 - 1).map(make)
