"""Public hypothesis strategies for property tests of the theory (users' and ours).

Keyword-only ``min_``/``max_`` pairs (``None``: a derived default); small sizes by default, so exact
enumeration stays cheap; bad arguments raise ``ValueError`` at once, naming the argument. Claim domains
(``Claim.domain``, explored by ``theorycheck verify --explore``) are strategies of parameter *dicts*
(:func:`model_params`, :func:`masking_params`, :func:`seeds`, :func:`choices`) merged by :func:`params`,
with preconditions as predicates of the dicts (:func:`tau_below_T`, :func:`p_c_positive`):

>>> from hypothesis import given
>>> from theorycheck.strategies import masking_params, maskings, model_params, params, topic_models
>>> @given(topic_models(max_T=6), maskings())
... def test_something(tm, mk): ...
>>> domain = params(model_params(max_T=8, max_v=4), masking_params(), n_minimisers=2)
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
    """Strategy for :class:`~theorycheck.models.TopicModel` (SPEC §1.1; the Dirichlet prior of §1.2).

    Draws ``T``, ``v`` and ``tau`` (or, for a Dirichlet prior, ``alpha`` in ``[0.05, 5]``) within the bounds;
    shrinks towards the smallest ``T``, ``v`` and ``tau`` (``alpha`` towards 1).

    Parameters
    ----------
    min_T, max_T : int, optional
        Bounds on the number of topics, ``1 <= min_T <= max_T`` (defaults 2 and ``min_T + 6``).
    min_v, max_v : int, optional
        Bounds on the words per topic, ``1 <= min_v <= max_v`` (defaults 1 and ``min_v + 5``).
    min_tau, max_tau : int, optional
        Bounds on the topics per document, ``1 <= min_tau <= max_T``, ``min_tau <= max_tau`` (defaults 1
        and ``T``: every draw has ``tau <= T``).
    prior : {"uniform-tau", "dirichlet"}, default "uniform-tau"
        The document prior; ``min_tau`` and ``max_tau`` only apply to ``"uniform-tau"``.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of TopicModel
        Draws valid topic models within the bounds.

    Raises
    ------
    ValueError
        A bound is below 1, a ``min_`` exceeds its ``max_``, ``min_tau > max_T``, or ``prior`` is
        neither allowed value (raised at once, not when drawing).

    See Also
    --------
    model_params : The same draws as parameter dicts, for claim domains.
    maskings : The masking drawn beside a topic model.
    theorycheck.models.TopicModel : The object drawn.

    References
    ----------
    SPEC §1.1 (the topic model), §1.2 (the Dirichlet prior).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import topic_models
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(topic_models(max_T=4), lambda tm: True, settings=quiet)  # the simplest draw
    TopicModel(T=2, v=1, tau=1, prior='uniform-tau', alpha=None)
    >>> find(topic_models(max_T=4), lambda tm: tm.tau >= 3, settings=quiet)  # tau >= 3 needs T >= 3
    TopicModel(T=3, v=1, tau=3, prior='uniform-tau', alpha=None)
    >>> find(topic_models(max_T=4, prior="dirichlet"), lambda tm: True, settings=quiet)
    TopicModel(T=2, v=1, tau=None, prior='dirichlet', alpha=1.0)
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
    """Strategy for :class:`~theorycheck.models.Masking` with ``p_m`` in ``[min_p_m, max_p_m]`` (SPEC §2.1).

    Draws ``p_c`` in ``[0, cap]``, then ``p_r`` in ``[0, cap - p_c]`` (``cap = 1``, or ``0.95`` without
    ``allow_no_mask_token``; not uniform on the triangle) and rejects ``a = 1 - p_m (1 - p_c) < 0.05`` (no
    visible document at all), which no loss of the paper is about. ``p_c`` and ``p_r`` shrink towards 0;
    ``p_m`` the way hypothesis shrinks floats, towards simple values (1, 1/2, 1/4, ...), not ``min_p_m``.

    Parameters
    ----------
    min_p_m, max_p_m : float, optional
        Bounds on the selection probability, ``0 <= min_p_m <= max_p_m <= 1`` (defaults 0.01 and 1).
    allow_no_mask_token : bool, default True
        If False, keep ``p_c + p_r <= 0.95`` so that ``q = p_m (1 - p_c - p_r) > 0`` (some selected
        tokens become [MASK]).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of Masking
        Draws maskings with ``min_p_m <= p_m <= max_p_m`` and ``a >= 0.05``.

    Raises
    ------
    ValueError
        A bound is not a probability or ``min_p_m > max_p_m``.

    See Also
    --------
    masking_params : The same draws as parameter dicts.
    masking_grid_params : Masking dicts on a grid (no probability between 0 and ``step``).
    theorycheck.models.Masking : The object drawn, with ``a``, ``r`` and ``q``.

    References
    ----------
    SPEC §2.1 (the masking and the constants ``a``, ``r``, ``q``).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from hypothesis.errors import NoSuchExample
    >>> from theorycheck.strategies import maskings
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(maskings(max_p_m=0.5), lambda mk: True, settings=quiet)
    Masking(p_m=0.5, p_c=0.0, p_r=0.0)
    >>> try:  # the documented bound: 50 draws, none with a < 0.05
    ...     find(maskings(), lambda mk: mk.a < 0.05, settings=quiet)
    ... except NoSuchExample:
    ...     print("no draw with a < 0.05")
    no draw with a < 0.05
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

    ``default_rng(seed).uniform(-scale, scale, (n, n))`` for a drawn ``seed`` (then ``(M + M^T) / 2`` if
    ``symmetric``): large matrices stay cheap to draw and shrink well, towards the matrix of seed 0.

    Parameters
    ----------
    n : int
        Side, ``n >= 1``.
    scale : float, default 1.0
        Bound on the entries, ``scale > 0``.
    symmetric : bool, default False
        Draw symmetric matrices.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of ndarray
        Draws float64 arrays of shape ``(n, n)``.

    Raises
    ------
    ValueError
        ``n < 1`` or ``scale <= 0``.

    See Also
    --------
    score_matrices : Attention score matrices with a drawn scale up to 1e4.
    value_matrices : Value matrices ``W`` of shape ``(V1, V1)``.

    References
    ----------
    SPEC §4.0 (the matrices of the core reduction), §4.3 (scores and values).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import matrices
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> M = find(matrices(4, scale=2.0, symmetric=True), lambda M: True, settings=quiet)
    >>> M.shape, bool(np.array_equal(M, M.T)), bool(np.abs(M).max() <= 2.0)
    ((4, 4), True, True)
    >>> M0 = np.random.default_rng(0).uniform(-2.0, 2.0, size=(4, 4))
    >>> bool(np.array_equal(M, (M0 + M0.T) / 2))  # the shrunk draw is seed 0's
    True
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
    """Strategy for topic-model parameter dicts ``{"T", "v", "tau"}`` (SPEC §1.1), for claim domains.

    Draws with :func:`topic_models` under the same bounds, and shrinks the same way.

    Parameters
    ----------
    min_T, max_T : int, optional
        Bounds on the number of topics, ``1 <= min_T <= max_T`` (defaults 2 and 8).
    min_v, max_v : int, optional
        Bounds on the words per topic, ``1 <= min_v <= max_v`` (defaults 1 and 4).
    min_tau, max_tau : int, optional
        Bounds on the topics per document, ``1 <= min_tau <= max_T`` (defaults 1 and ``T``).
    dirichlet : bool, default False
        Also draw Dirichlet-prior models (``min_tau`` and ``max_tau`` do not apply to them).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws ``{"T": int, "v": int, "tau": int}`` or ``{"T", "v", "prior": "dirichlet", "alpha": float}``.

    Raises
    ------
    ValueError
        As :func:`topic_models` (a bound below 1 or out of order).

    See Also
    --------
    topic_models : The same draws as :class:`~theorycheck.models.TopicModel` objects.
    params : Merges this with other dict strategies into a claim domain.
    tau_below_T : A precondition on the drawn dicts.

    References
    ----------
    SPEC §1.1 (the topic model), §1.2 (the Dirichlet prior), §6 (the checkable claims and their domains).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import model_params
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(model_params(max_T=4), lambda p: True, settings=quiet)
    {'T': 2, 'v': 1, 'tau': 1}
    >>> find(model_params(max_T=4, dirichlet=True), lambda p: "alpha" in p, settings=quiet)
    {'T': 2, 'v': 1, 'prior': 'dirichlet', 'alpha': 1.0}
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
    """Strategy for masking parameter dicts ``{"p_m", "p_c", "p_r"}`` (SPEC §2.1), ``p_c != p_r`` allowed.

    Drawn by :func:`maskings` (``a = 1 - p_m (1 - p_c) >= 0.05``), with its bounds and shrinking.

    Parameters
    ----------
    min_p_m, max_p_m : float, optional
        Bounds on the selection probability, ``0 <= min_p_m <= max_p_m <= 1`` (defaults 0.01 and 1).
    allow_no_mask_token : bool, default True
        If False, keep ``p_c + p_r <= 0.95`` (so ``q > 0``).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws ``{"p_m": float, "p_c": float, "p_r": float}``, the keyword arguments of
        :class:`~theorycheck.models.Masking`.

    Raises
    ------
    ValueError
        A bound is not a probability or ``min_p_m > max_p_m``.

    See Also
    --------
    maskings : The same draws as :class:`~theorycheck.models.Masking` objects.
    masking_grid_params : Masking dicts on a grid, for claims that degenerate as a probability tends to 0.
    params : Merges this with other dict strategies into a claim domain.

    References
    ----------
    SPEC §2.1 (the masking), §6 (the checkable claims and their domains).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import masking_params
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(masking_params(max_p_m=0.5), lambda p: True, settings=quiet)
    {'p_m': 0.5, 'p_c': 0.0, 'p_r': 0.0}
    """
    inner = maskings(min_p_m=min_p_m, max_p_m=max_p_m, allow_no_mask_token=allow_no_mask_token)
    return inner.map(lambda mk: {"p_m": mk.p_m, "p_c": mk.p_c, "p_r": mk.p_r})


def seeds(*, max_seed: int = 2**16 - 1) -> st.SearchStrategy[dict]:
    """Strategy for ``{"seed": s}`` with ``0 <= s <= max_seed``, a claim domain's seed (SPEC §6); shrinks to 0.

    Parameters
    ----------
    max_seed : int, default 65535
        Largest seed, ``max_seed >= 0``.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws ``{"seed": int}``, merged into a claim domain by :func:`params`.

    Raises
    ------
    ValueError
        ``max_seed < 0``.

    See Also
    --------
    params : Merges this with other dict strategies into a claim domain.
    model_params : The topic model of the same domain.

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import seeds
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(seeds(max_seed=9), lambda p: True, settings=quiet)
    {'seed': 0}
    >>> find(seeds(max_seed=9), lambda p: p["seed"] >= 3, settings=quiet)  # the smallest such seed
    {'seed': 3}
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

    ``S[a, b]`` is the score of key token b for query token a. Entries ``default_rng(seed).uniform(-s, s)``
    for a drawn seed and scale ``s``; shrinks towards seed 0 and a simple scale (1 when allowed).

    Parameters
    ----------
    V1 : int
        Number of tokens including [MASK], ``V1 = T v + 1 >= 1``.
    max_scale : float, default 10.0
        Largest scale, ``0 < max_scale <= 1e4``.
    min_scale : float, optional
        Smallest scale, ``0 < min_scale <= max_scale`` (default ``max_scale / 100``).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of ndarray
        Draws float64 arrays of shape ``(V1, V1)`` with entries in ``[-max_scale, max_scale]``.

    Raises
    ------
    ValueError
        ``V1 < 1``, a scale outside ``(0, 1e4]``, or ``min_scale > max_scale``.

    See Also
    --------
    value_matrices : The value matrix ``W`` beside the scores.
    decoder_biases : The decoder bias beside them.
    matrices : Square matrices of a fixed scale.

    References
    ----------
    SPEC §4.3 (stage 2: attention given the value matrix, general scores).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import score_matrices
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> S = find(score_matrices(7, max_scale=1e4), lambda S: np.abs(S).max() > 100, settings=quiet)
    >>> S.shape, bool(100 < np.abs(S).max() <= 1e4)
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

    Entries are ``default_rng(seed).uniform(-scale, scale)`` for a drawn seed; shrinks to seed 0.

    Parameters
    ----------
    V1 : int
        Number of tokens including [MASK], ``V1 >= 1``.
    scale : float, default 1.0
        Bound on the entries, ``0 < scale <= 1e4``.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of ndarray
        Draws float64 arrays of shape ``(V1, V1)`` with entries in ``[-scale, scale]``.

    Raises
    ------
    ValueError
        ``V1 < 1`` or ``scale`` outside ``(0, 1e4]``.

    See Also
    --------
    score_matrices : The attention scores beside the value matrix.
    decoder_biases : The decoder bias beside them.
    matrices : Square matrices, optionally symmetric.

    References
    ----------
    SPEC §4.0 (the value matrix of the core reduction), §4.3 (stage 2 given ``W^V``).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import value_matrices
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> W = find(value_matrices(5, scale=0.5), lambda W: True, settings=quiet)
    >>> W.shape, bool(np.abs(W).max() <= 0.5)
    ((5, 5), True)
    """
    V1 = check_int("V1", V1, low=1)
    scale = _check_scale("scale", scale)
    return st.integers(0, 2**32 - 1).map(lambda seed: _seeded_uniform((V1, V1), scale, seed))


def decoder_biases(V1: int, *, scale: float = 1.0, allow_none: bool = True) -> st.SearchStrategy:
    """Strategy for decoder biases ``b^dec``: ``None`` (no bias) or a float64 vector ``(V1,)`` (SPEC §3.1, §4.3).

    Entries ``default_rng(seed).uniform(-scale, scale)`` for a drawn seed; shrinks to ``None``, then seed 0.

    Parameters
    ----------
    V1 : int
        Number of tokens including [MASK], ``V1 >= 1``.
    scale : float, default 1.0
        Bound on the entries, ``0 < scale <= 1e4``.
    allow_none : bool, default True
        Also draw ``None``.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of ndarray or None
        Draws ``None`` or float64 arrays of shape ``(V1,)`` with entries in ``[-scale, scale]``.

    Raises
    ------
    ValueError
        ``V1 < 1`` or ``scale`` outside ``(0, 1e4]``.

    See Also
    --------
    score_matrices : The attention scores beside the bias.
    value_matrices : The value matrix beside it.

    References
    ----------
    SPEC §3.1 (the model and its decoder bias), §4.3 (stage 2 with a bias).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import decoder_biases
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> print(find(decoder_biases(5), lambda b: True, settings=quiet))  # shrinks to no bias
    None
    >>> b = find(decoder_biases(5, allow_none=False), lambda b: True, settings=quiet)
    >>> b.shape, bool(np.abs(b).max() <= 1.0)
    ((5,), True)
    """
    V1 = check_int("V1", V1, low=1)
    scale = _check_scale("scale", scale)
    vectors = st.integers(0, 2**32 - 1).map(lambda seed: _seeded_uniform((V1,), scale, seed))
    return st.one_of(st.none(), vectors) if allow_none else vectors


def choices(**options) -> st.SearchStrategy[dict]:
    """Strategy for dicts drawing each keyword's value from its sequence of options (claim domains, SPEC §6).

    For a claim subject's optional arguments (``loss``, ``mask_keys``, ...); shrinks to the first options.

    Parameters
    ----------
    **options : sequence
        ``key=options``: the drawn dict's ``key`` takes one of ``options`` (a non-empty sequence, not a
        string).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws ``{key: one of options}`` for every keyword.

    Raises
    ------
    ValueError
        An option list is empty, a string, or not a sequence (the message names its keyword).

    See Also
    --------
    params : Merges this with the model and masking dicts into a claim domain.
    model_params : The topic-model part of a domain.

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import choices
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> opts = choices(loss=("squared", "ce"), mask_keys=(False, True))
    >>> find(opts, lambda d: True, settings=quiet)  # the first option of each
    {'loss': 'squared', 'mask_keys': False}
    """
    parts = {}
    for key, opts in options.items():
        if isinstance(opts, (str, bytes)) or not hasattr(opts, "__len__") or len(opts) == 0:
            raise ValueError(f"choices: {key} must be a non-empty sequence of options, got {opts!r}")
        parts[key] = st.sampled_from(tuple(opts))
    return st.fixed_dictionaries(parts)


def params(*parts: st.SearchStrategy[dict], **fixed) -> st.SearchStrategy[dict]:
    """Merge strategies of dicts (later keys win) and the fixed entries ``fixed`` into one dict strategy.

    The result is a claim's domain (``Claim.domain``, SPEC §6): each draw is one parameter dict.

    Parameters
    ----------
    *parts : hypothesis.strategies.SearchStrategy
        Strategies of dicts (e.g. :func:`model_params`, :func:`masking_params`, :func:`seeds`,
        :func:`choices`), merged in order.
    **fixed
        Entries added to every draw (they win over the parts' keys).

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws the merged dict.

    Raises
    ------
    TypeError
        A part is not a hypothesis strategy (the message gives its position).

    See Also
    --------
    model_params : The topic-model part.
    masking_params : The masking part.
    seeds : A seed part.
    choices : Optional arguments of a claim's subject.

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import masking_grid_params, model_params, params, seeds
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> domain = params(model_params(max_T=4), masking_grid_params(step=0.25), seeds(), n_minimisers=2)
    >>> find(domain, lambda p: True, settings=quiet)
    {'T': 2, 'v': 1, 'tau': 1, 'p_m': 0.25, 'p_c': 0.0, 'p_r': 0.0, 'seed': 0, 'n_minimisers': 2}
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
    """Precondition ``tau < T`` (more than one document law; SPEC §4.2). Dirichlet priors pass.

    Parameters
    ----------
    p : dict
        A drawn parameter dict with ``"T"`` and ``"tau"`` (or ``"prior": "dirichlet"``).

    Returns
    -------
    bool
        ``p["tau"] < p["T"]``, or True for a Dirichlet prior.

    See Also
    --------
    p_c_positive : The other precondition of the claims.
    model_params : Draws the dicts it tests.

    Examples
    --------
    >>> from theorycheck.strategies import tau_below_T
    >>> [tau_below_T(p) for p in ({"T": 3, "tau": 2}, {"T": 3, "tau": 3}, {"T": 3, "prior": "dirichlet"})]
    [True, False, True]
    """
    return p.get("prior", "uniform-tau") == "dirichlet" or p["tau"] < p["T"]


def p_c_positive(p: dict) -> bool:
    """Precondition ``p_c > 0`` (some masked tokens are kept as themselves; SPEC §4.3).

    Parameters
    ----------
    p : dict
        A drawn parameter dict with ``"p_c"``.

    Returns
    -------
    bool
        ``p["p_c"] > 0``.

    See Also
    --------
    tau_below_T : The other precondition of the claims.
    masking_params : Draws the dicts it tests.

    Examples
    --------
    >>> from theorycheck.strategies import p_c_positive
    >>> p_c_positive({"p_m": 0.15, "p_c": 0.1, "p_r": 0.1}), p_c_positive({"p_m": 0.15, "p_c": 0.0, "p_r": 0.1})
    (True, False)
    """
    return p["p_c"] > 0


def masking_grid_params(
    *, step: float = 0.05, min_p_m: float = 0.05, max_p_m: float = 1.0, min_a: float = 0.05
) -> st.SearchStrategy[dict]:
    """Strategy for masking dicts ``{"p_m", "p_c", "p_r"}`` on a grid of spacing ``step`` (SPEC §2.1).

    Every probability is ``k / n``, ``n = round(1 / step)``, hence 0 or at least ``1 / n``: for claims that
    degenerate as a probability tends to 0 (a flat loss, exact rationals of short decimals), where
    :func:`masking_params` may draw e.g. a subnormal ``p_c``. Draws with ``a = 1 - p_m (1 - p_c) < min_a``
    are rejected. Shrinks towards the smallest ``p_m`` and ``p_c = p_r = 0``.

    Parameters
    ----------
    step : float, default 0.05
        Grid spacing, ``0 < step <= 0.5``.
    min_p_m, max_p_m : float, optional
        Bounds on the selection probability, ``0 <= min_p_m <= max_p_m <= 1`` (defaults 0.05 and 1;
        ``p_m >= 1 / n`` in any case).
    min_a : float, default 0.05
        Smallest visible fraction ``a`` kept.

    Returns
    -------
    strategy : hypothesis.strategies.SearchStrategy of dict
        Draws ``{"p_m": m / n, "p_c": c / n, "p_r": r / n}`` with integers ``m >= 1``, ``c + r <= n``.

    Raises
    ------
    ValueError
        ``step`` outside ``(0, 0.5]``, a bound not a probability, ``min_p_m > max_p_m``, or no grid
        value in ``[min_p_m, max_p_m]``.

    See Also
    --------
    masking_params : Masking dicts with continuous probabilities.
    maskings : :class:`~theorycheck.models.Masking` objects.
    params : Merges this with other dict strategies into a claim domain.

    References
    ----------
    SPEC §2.1 (the masking), §6 (the checkable claims and their domains).

    Examples
    --------
    >>> from hypothesis import find, settings
    >>> from theorycheck.strategies import masking_grid_params
    >>> quiet = settings(database=None, derandomize=True, max_examples=50)  # deterministic draws
    >>> find(masking_grid_params(step=0.1), lambda p: True, settings=quiet)  # the smallest p_m
    {'p_m': 0.1, 'p_c': 0.0, 'p_r': 0.0}
    >>> find(masking_grid_params(step=0.1), lambda p: p["p_c"] > 0, settings=quiet)  # no p_c in (0, 0.1)
    {'p_m': 0.1, 'p_c': 0.1, 'p_r': 0.0}
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
