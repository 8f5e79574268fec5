"""Public hypothesis strategies for property tests of the theory (users' and ours).

All strategies are keyword-only with ``min_``/``max_`` pairs; ``None`` means a derived
default. Sizes are small by default so exact enumeration stays cheap. Bad arguments raise
``ValueError`` immediately (not lazily), naming the argument.

>>> from hypothesis import given
>>> from theorycheck.strategies import topic_models, maskings
>>> @given(topic_models(max_T=6), maskings())
... def test_something(tm, mk): ...

Claim domains (``Claim.domain``, explored by ``theorycheck verify --explore``) are strategies of
parameter *dicts*, composed with :func:`params`:

>>> from theorycheck.strategies import params, model_params, masking_params, seeds
>>> domain = params(model_params(max_T=8, max_v=4), masking_params(), seeds(), n_minimisers=2)
>>> # draws e.g. {"T": 3, "v": 2, "tau": 2, "p_m": 0.4, "p_c": 0.1, "p_r": 0.25, "seed": 7, "n_minimisers": 2}

Strategies of arrays for claims and tests: :func:`score_matrices` (general scores S, up to 1e4),
:func:`value_matrices`, :func:`decoder_biases` (None or a vector); :func:`choices` draws a claim
subject's optional arguments (``loss``, ``mask_keys``, ...) as a dict.

Preconditions are module-level predicates of such dicts (:func:`tau_below_T`, :func:`p_c_positive`).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ._validate import check_int, check_prob
from .models import Masking, TopicModel

__all__ = [
    "topic_models",
    "maskings",
    "matrices",
    "score_matrices",
    "value_matrices",
    "decoder_biases",
    "model_params",
    "masking_params",
    "seeds",
    "choices",
    "params",
    "tau_below_T",
    "p_c_positive",
    "masking_grid_params",
]


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

    Examples
    --------
    >>> from theorycheck.strategies import topic_models
    >>> topic_models(max_T=4, prior="dirichlet").example()  # doctest: +SKIP
    TopicModel(T=3, v=2, tau=None, prior='dirichlet', alpha=0.5)
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

    Examples
    --------
    >>> from theorycheck.strategies import maskings
    >>> maskings(min_p_m=0.1, allow_no_mask_token=False).example()  # doctest: +SKIP
    Masking(p_m=0.5, p_c=0.25, p_r=0.1)
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
        assume(mk.a >= 0.05)
        return mk

    return build()


def matrices(n: int, *, scale: float = 1.0, symmetric: bool = False) -> st.SearchStrategy[np.ndarray]:
    """Strategy for finite float64 ``(n, n)`` matrices with entries in ``[-scale, scale]``.

    Drawn from a seed so that large matrices stay cheap to generate and shrink well
    (shrinks towards the matrix of seed 0).

    Examples
    --------
    >>> from theorycheck.strategies import matrices
    >>> matrices(4, scale=2.0, symmetric=True).example().shape  # doctest: +SKIP
    (4, 4)
    """
    n = check_int("n", n, low=1)
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")

    def make(seed):
        M = np.random.default_rng(seed).uniform(-scale, scale, size=(n, n))
        return (M + M.T) / 2 if symmetric else M

    return st.integers(0, 2**32 - 1).map(make)


def model_params(
    *,
    min_T: int = 2,
    max_T: int = 8,
    min_v: int = 1,
    max_v: int = 4,
    min_tau: int = 1,
    max_tau: int | None = None,
    dirichlet: bool = False,
) -> st.SearchStrategy[dict]:
    """Strategy for topic-model parameter dicts ``{"T", "v", "tau"}`` (SPEC §2).

    Same bounds as :func:`topic_models`; with ``dirichlet=True`` some draws are
    ``{"T", "v", "prior": "dirichlet", "alpha"}`` with ``alpha`` in ``[0.05, 5]``.
    Shrinks towards the smallest T, v, tau.

    Examples
    --------
    >>> model_params(max_T=4).example()  # doctest: +SKIP
    {'T': 3, 'v': 1, 'tau': 3}
    """
    kinds = [topic_models(min_T=min_T, max_T=max_T, min_v=min_v, max_v=max_v, min_tau=min_tau, max_tau=max_tau)]
    if dirichlet:
        kinds.append(topic_models(min_T=min_T, max_T=max_T, min_v=min_v, max_v=max_v, prior="dirichlet"))

    def as_dict(tm: TopicModel) -> dict:
        if tm.prior == "dirichlet":
            return {"T": tm.T, "v": tm.v, "prior": "dirichlet", "alpha": tm.alpha}
        return {"T": tm.T, "v": tm.v, "tau": tm.tau}

    return st.one_of(kinds).map(as_dict)


def masking_params(
    *, min_p_m: float = 0.01, max_p_m: float = 1.0, allow_no_mask_token: bool = True
) -> st.SearchStrategy[dict]:
    """Strategy for masking parameter dicts ``{"p_m", "p_c", "p_r"}`` (SPEC §2.2), ``p_c != p_r`` allowed.

    Drawn by :func:`maskings` (``a = 1 - p_m (1 - p_c) >= 0.05``).

    Examples
    --------
    >>> masking_params(min_p_m=0.1).example()  # doctest: +SKIP
    {'p_m': 0.5, 'p_c': 0.0, 'p_r': 0.25}
    """
    inner = maskings(min_p_m=min_p_m, max_p_m=max_p_m, allow_no_mask_token=allow_no_mask_token)
    return inner.map(lambda mk: {"p_m": mk.p_m, "p_c": mk.p_c, "p_r": mk.p_r})


def seeds(*, max_seed: int = 2**16 - 1) -> st.SearchStrategy[dict]:
    """Strategy for ``{"seed": s}`` with ``0 <= s <= max_seed`` (shrinks towards seed 0).

    Examples
    --------
    >>> seeds(max_seed=9).example()  # doctest: +SKIP
    {'seed': 4}
    """
    max_seed = check_int("max_seed", max_seed, low=0)
    return st.integers(0, max_seed).map(lambda s: {"seed": s})


def _seeded_uniform(shape, scale, seed) -> np.ndarray:
    """Entries uniform in ``[-scale, scale]`` from ``default_rng(seed)`` (float64, finite)."""
    return np.random.default_rng(seed).uniform(-scale, scale, size=shape)


def _check_scale(name, value, *, cap=1e4) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= cap:
        raise ValueError(f"{name} must be a number in (0, {cap:g}], got {value!r}")
    return float(value)


def score_matrices(
    V1: int, *, max_scale: float = 10.0, min_scale: float | None = None
) -> st.SearchStrategy[np.ndarray]:
    """Strategy for general attention score matrices ``S`` of shape ``(V1, V1)`` (SPEC §4.3).

    ``S[a, b]`` is the score of key token b for query token a. A scale ``s`` is drawn in
    ``[min_scale, max_scale]`` (``max_scale <= 1e4``: large scores saturate the softmax; default
    ``min_scale = max_scale / 100``) and the entries are uniform in ``[-s, s]`` from a drawn seed.
    Shrinks towards the smallest scale and seed 0.

    Examples
    --------
    >>> from theorycheck.strategies import score_matrices
    >>> S = score_matrices(7, max_scale=1e4).example()  # doctest: +SKIP
    >>> S.shape, bool(abs(S).max() <= 1e4)  # doctest: +SKIP
    ((7, 7), True)
    """
    V1 = check_int("V1", V1, low=1)
    max_scale = _check_scale("max_scale", max_scale)
    min_scale = max_scale / 100 if min_scale is None else _check_scale("min_scale", min_scale)
    _order("min_scale", min_scale, "max_scale", max_scale)
    scale = st.floats(min_scale, max_scale, allow_nan=False, allow_infinity=False)
    return st.tuples(scale, st.integers(0, 2**32 - 1)).map(lambda t: _seeded_uniform((V1, V1), t[0], t[1]))


def value_matrices(V1: int, *, scale: float = 1.0) -> st.SearchStrategy[np.ndarray]:
    """Strategy for value matrices ``W`` (``W^V``, or ``W^dec W^V``) of shape ``(V1, V1)`` (SPEC §4.0, §4.3).

    Entries uniform in ``[-scale, scale]`` (``0 < scale <= 1e4``) from a drawn seed; shrinks to seed 0.

    Examples
    --------
    >>> from theorycheck.strategies import value_matrices
    >>> value_matrices(5, scale=0.5).example().shape  # doctest: +SKIP
    (5, 5)
    """
    V1 = check_int("V1", V1, low=1)
    scale = _check_scale("scale", scale)
    return st.integers(0, 2**32 - 1).map(lambda seed: _seeded_uniform((V1, V1), scale, seed))


def decoder_biases(V1: int, *, scale: float = 1.0, allow_none: bool = True) -> st.SearchStrategy:
    """Strategy for decoder biases ``b^dec``: ``None`` (no bias; only if ``allow_none``) or a float64
    vector of shape ``(V1,)`` with entries uniform in ``[-scale, scale]`` (SPEC §3, §4.3). Shrinks to None.

    Examples
    --------
    >>> from theorycheck.strategies import decoder_biases
    >>> b = decoder_biases(5, allow_none=False).example()  # doctest: +SKIP
    >>> b.shape  # doctest: +SKIP
    (5,)
    """
    V1 = check_int("V1", V1, low=1)
    scale = _check_scale("scale", scale)
    vectors = st.integers(0, 2**32 - 1).map(lambda seed: _seeded_uniform((V1,), scale, seed))
    return st.one_of(st.none(), vectors) if allow_none else vectors


def choices(**options) -> st.SearchStrategy[dict]:
    """Strategy for dicts drawing each keyword's value from its non-empty sequence of options
    (e.g. a claim subject's optional arguments); shrinks to the first option of each.

    Examples
    --------
    >>> from theorycheck.strategies import choices, model_params, params
    >>> choices(loss=("squared", "ce"), mask_keys=(False, True)).example()  # doctest: +SKIP
    {'loss': 'ce', 'mask_keys': False}
    >>> domain = params(model_params(max_T=4), choices(loss=("squared", "ce")))
    """
    parts = {}
    for key, opts in options.items():
        if isinstance(opts, (str, bytes)) or not hasattr(opts, "__len__") or len(opts) == 0:
            raise ValueError(f"choices: {key} must be a non-empty sequence of options, got {opts!r}")
        parts[key] = st.sampled_from(tuple(opts))
    return st.fixed_dictionaries(parts)


def params(*parts: st.SearchStrategy[dict], **fixed) -> st.SearchStrategy[dict]:
    """Merge strategies of dicts (later keys win) and the fixed entries ``fixed`` into one dict strategy.

    Examples
    --------
    >>> params(model_params(), masking_params(), n_minimisers=2).example()  # doctest: +SKIP
    {'T': 2, 'v': 1, 'tau': 1, 'p_m': 0.01, 'p_c': 0.0, 'p_r': 0.0, 'n_minimisers': 2}
    """
    for i, part in enumerate(parts):
        if not isinstance(part, st.SearchStrategy):
            raise TypeError(f"params: part {i} must be a hypothesis strategy, got {type(part).__name__}")

    def merge(dicts) -> dict:
        out: dict = {}
        for d in dicts:
            out.update(d)
        out.update(fixed)
        return out

    return st.tuples(*parts).map(merge)


def tau_below_T(p: dict) -> bool:
    """Precondition ``tau < T`` (more than one document law; SPEC §4.2). Dirichlet priors pass."""
    return p.get("prior", "uniform-tau") == "dirichlet" or p["tau"] < p["T"]


def p_c_positive(p: dict) -> bool:
    """Precondition ``p_c > 0`` (some masked tokens are kept as themselves; SPEC §4.3)."""
    return p["p_c"] > 0


def masking_grid_params(
    *, step: float = 0.05, min_p_m: float = 0.05, max_p_m: float = 1.0, min_a: float = 0.05
) -> st.SearchStrategy[dict]:
    """Strategy for masking dicts ``{"p_m", "p_c", "p_r"}`` on a grid of spacing ``step`` (SPEC §2.2).

    Every probability is ``k / round(1 / step)`` (``p_c != p_r`` allowed; ``p_c + p_r <= 1``), so a
    probability is either 0 or at least ``step``: for claims whose statement degenerates as a
    probability tends to 0 (a loss that becomes flat in a parameter, exact rationals of short
    decimals), where :func:`masking_params` may draw e.g. a subnormal ``p_c``. Draws with
    ``a = 1 - p_m (1 - p_c) < min_a`` are rejected. Shrinks towards the smallest ``p_m`` and
    ``p_c = p_r = 0``.

    Examples
    --------
    >>> masking_grid_params(step=0.1).example()  # doctest: +SKIP
    {'p_m': 0.3, 'p_c': 0.0, 'p_r': 0.5}
    """
    if not (isinstance(step, (int, float)) and 0 < step <= 0.5):
        raise ValueError(f"step must be in (0, 0.5], got {step!r}")
    n = round(1.0 / step)
    min_p_m, max_p_m = check_prob("min_p_m", min_p_m), check_prob("max_p_m", max_p_m)
    _order("min_p_m", min_p_m, "max_p_m", max_p_m)
    lo, hi = max(1, math.ceil(min_p_m * n - 1e-9)), math.floor(max_p_m * n + 1e-9)
    if lo > hi:
        raise ValueError(f"no grid value of step {step} in [min_p_m, max_p_m] = [{min_p_m}, {max_p_m}]")

    @st.composite
    def build(draw):
        m = draw(st.integers(lo, hi))
        c = draw(st.integers(0, n))
        r = draw(st.integers(0, n - c))
        out = {"p_m": m / n, "p_c": c / n, "p_r": r / n}
        assume(Masking(**out).a >= min_a)
        return out

    return build()
