"""The problem registry: names, families, topic models and size ladders; ``list()`` and ``get()``.

A problem's name is ``"<family>:<model>"``. Sizes are keyword arguments ``T``, ``v``, ``tau`` (the
topic model, SPEC §1.1) plus family extras (``reg`` for ridge, ``d`` for the factorization), or
``level=k``, the k-th rung of the family's documented ladder. Topic models (masking: the default
``Masking()``, SPEC §2.1):

- ``paper``: ``TopicModel(T, v, tau)`` (uniform-tau prior);
- ``zipf``: ``GeneralTopicModel.zipf(T, v, 1.0, tau=tau)`` (disjoint topics, Zipfian words, §11.1);
- ``overlap``: ``GeneralTopicModel.overlapping(T, v, 0.2, tau=tau)`` (topics share words, §11.1);
- ``unequal``: ``GeneralTopicModel.unequal([v, v + 1, v + 2, v, ...], tau=tau)`` (topic ``t`` has
  ``v + t mod 3`` words, §11.1);
- ``lda``: a fitted LDA's topics (shipped package data, :mod:`._lda`; ``T <= 10``, overlapping dense
  topics, §11.1).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools

from ..models import GeneralTopicModel, Masking, TopicModel
from ._attention import AlphaBeta, AlphaBetaCE, AlphaBetaCotopic, AlphaBetaIdentity, AlphaBetaLabel, AttentionS
from ._gram import GramFactor, GramSDP
from ._gram_rank1 import GramRank1
from ._gram_structured import GramFactorStructured
from ._gram_trace import GramTrace
from ._lda import lda_model
from ._value import ValueLSQ, ValueRidge
from ._value_block import ValueBlock, ValueBlockRidge

__all__ = ["list_problems", "get", "LADDERS", "MODELS", "FAMILIES", "MAX_DENSE_V1", "match"]

#: dense ``V1 x V1`` variables above this are refused before any work
MAX_DENSE_V1 = 4000

_STAGE1 = [dict(T=3, v=4, tau=2), dict(T=4, v=8, tau=2), dict(T=6, v=16, tau=3), dict(T=8, v=32, tau=3),
           dict(T=10, v=40, tau=3)]  # fmt: skip
_SMALL = _STAGE1[:3]
#: the structured block form (3 variables, O(1) per evaluation): up to V1 = 100,001
_BLOCK = [dict(T=3, v=4, tau=2), dict(T=10, v=10, tau=3), dict(T=100, v=10, tau=3), dict(T=300, v=33, tau=3),
          dict(T=1000, v=100, tau=3)]  # fmt: skip
_TINY = [dict(T=3, v=4, tau=2), dict(T=4, v=5, tau=2), dict(T=5, v=6, tau=2)]
#: the one-dimensional embedding: T + 1 = 3, 4, 5 variables (SPEC §4.6(b))
_RANK1 = [dict(T=2, v=2, tau=1), dict(T=3, v=2, tau=1), dict(T=4, v=2, tau=1)]
#: the structured factorisation, d = T: n = d V1 = 39 ... 1,000,010 variables (SPEC §4.6(c))
_FACTOR_LARGE = [dict(T=3, v=4, tau=2), dict(T=10, v=10, tau=3), dict(T=10, v=100, tau=3), dict(T=10, v=1000, tau=3),
                 dict(T=10, v=10000, tau=3)]  # fmt: skip

#: size ladders by family (V1 = T v + 1 for the paper's and the Zipf model)
LADDERS = {
    "stage1-value/lsq": _STAGE1,
    "stage1-value/ridge": _STAGE1,
    "stage1-value/block": _BLOCK,
    "stage1-value/block-ridge": _BLOCK,
    "gram/sdp": _SMALL,
    "gram/factor": _STAGE1[:4],
    "gram/trace": _STAGE1[:4],
    "gram/rank1": _RANK1,
    "gram/factor-structured": _FACTOR_LARGE,
    "attention-ab/block": _SMALL,
    "attention-ab/identity": _SMALL,
    "attention-ab/block-ce": _SMALL,
    "attention-ab/cotopic": _TINY,
    "attention-ab/label": _TINY,
    "attention-S/full": _TINY,
}

#: Problem family name -> (problem class, model kinds it is defined on).
FAMILIES = {
    "stage1-value/lsq": (ValueLSQ, ("paper", "zipf", "overlap", "unequal", "lda")),
    "stage1-value/ridge": (ValueRidge, ("paper", "zipf", "overlap", "lda")),
    "stage1-value/block": (ValueBlock, ("paper",)),
    "stage1-value/block-ridge": (ValueBlockRidge, ("paper",)),
    "gram/sdp": (GramSDP, ("paper", "zipf", "overlap", "unequal", "lda")),
    "gram/factor": (GramFactor, ("paper", "zipf", "overlap", "unequal", "lda")),
    "gram/trace": (GramTrace, ("paper",)),
    "gram/rank1": (GramRank1, ("paper",)),
    "gram/factor-structured": (GramFactorStructured, ("paper", "zipf", "overlap", "unequal")),
    "attention-ab/block": (AlphaBeta, ("paper",)),
    "attention-ab/identity": (AlphaBetaIdentity, ("paper",)),
    "attention-ab/block-ce": (AlphaBetaCE, ("paper",)),
    "attention-ab/cotopic": (AlphaBetaCotopic, ("zipf", "overlap", "unequal", "lda")),
    "attention-ab/label": (AlphaBetaLabel, ("zipf", "overlap", "unequal", "lda")),
    "attention-S/full": (AttentionS, ("paper",)),
}

#: Model kind name -> constructor ``(T, v, tau) -> model`` of the problem ladders.
MODELS = {
    "paper": lambda T, v, tau: TopicModel(T, v, tau),
    "zipf": lambda T, v, tau: GeneralTopicModel.zipf(T, v, 1.0, tau=tau),
    "overlap": lambda T, v, tau: GeneralTopicModel.overlapping(T, v, 0.2, tau=tau),
    "unequal": lambda T, v, tau: GeneralTopicModel.unequal([v + t % 3 for t in range(T)], tau=tau),
    "lda": lda_model,
}

_EXTRA = {
    "stage1-value/ridge": ("reg",),
    "stage1-value/block-ridge": ("reg",),
    "gram/factor": ("d",),
    "gram/trace": ("frac",),
    "gram/rank1": ("p_m", "p_c", "p_r", "reg"),
    "gram/factor-structured": ("d",),
}


def _names() -> list[str]:
    return [f"{fam}:{m}" for fam, (_, models) in FAMILIES.items() for m in models]


def list_problems() -> list[dict]:
    """Every problem: ``{"name", "family", "model", "sizes"}`` (``sizes``: the ladder, smallest first).

    Returns
    -------
    list of dict
        One dict per problem name ``"<family>:<model>"``, in the order of :data:`FAMILIES`; ``sizes`` is
        the family's ladder (:data:`LADDERS`), whose rung ``k`` is ``get(name, level=k)``.

    See Also
    --------
    get : Builds one problem.
    match : Problem names matching glob patterns.

    References
    ----------
    SPEC §4.0-§4.3, §4.6 (the families), §11.1 (the general topic models).

    Examples
    --------
    >>> from theorycheck import problems
    >>> entries = problems.list()
    >>> entries[0]["name"], entries[0]["sizes"][0]
    ('stage1-value/lsq:paper', {'T': 3, 'v': 4, 'tau': 2})
    >>> sorted({e["model"] for e in entries})
    ['lda', 'overlap', 'paper', 'unequal', 'zipf']
    """
    return [
        {"name": f"{fam}:{m}", "family": fam, "model": m, "sizes": [dict(s) for s in LADDERS[fam]]}
        for fam, (_, models) in FAMILIES.items()
        for m in models
    ]


def _closest(name: str, names) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.0)
    return ", ".join(repr(c) for c in close)


def _split(name: str) -> tuple[str, str]:
    if not isinstance(name, str) or name not in _names():
        raise ValueError(f"unknown problem {name!r}; closest: {_closest(str(name), _names())} (see problems.list())")
    fam, model = name.rsplit(":", 1)
    return fam, model


def match(patterns) -> list[str]:
    """Problem names matching any of the glob ``patterns`` (``None``: all). No match is a ValueError.

    Parameters
    ----------
    patterns : sequence of str or None
        ``fnmatch`` globs over the names ``"<family>:<model>"``; a pattern without the model part
        matches every model of its family. ``None`` or empty: every problem.

    Returns
    -------
    list of str
        The matching names, in registry order.

    Raises
    ------
    ValueError
        No name matches (the message names the closest ones).

    See Also
    --------
    list_problems : Every problem with its size ladder.
    get : Builds one problem.

    References
    ----------
    SPEC §4.0-§4.3, §4.6 (the families).

    Examples
    --------
    >>> from theorycheck import problems
    >>> problems.match(["attention-ab/*:paper"])
    ['attention-ab/block:paper', 'attention-ab/identity:paper', 'attention-ab/block-ce:paper']
    >>> problems.match(["gram/sdp"])
    ['gram/sdp:paper', 'gram/sdp:zipf', 'gram/sdp:overlap', 'gram/sdp:unequal', 'gram/sdp:lda']
    >>> problems.match(["nope"])
    Traceback (most recent call last):
    ...
    ValueError: no problem matches 'nope'; closest: ...
    """
    names = _names()
    if not patterns:
        return names
    out = [n for n in names if any(fnmatch.fnmatchcase(n, p) or fnmatch.fnmatchcase(n, p + ":*") for p in patterns)]
    if not out:
        close = _closest(patterns[0], names)
        raise ValueError(f"no problem matches {', '.join(map(repr, patterns))}; closest: {close}")
    return out


def resolve_size(name: str, size: dict) -> dict:
    """The full size dict of ``name`` from ``size`` (``level=k`` or keyword overrides of rung 0)."""
    fam, _ = _split(name)
    size = dict(size)
    ladder = LADDERS[fam]
    level = size.pop("level", 0)
    if not isinstance(level, int) or not 0 <= level < len(ladder):
        raise ValueError(f"{name}: level must be an integer in [0, {len(ladder) - 1}], got {level!r}")
    allowed = ("T", "v", "tau", *_EXTRA.get(fam, ()))
    bad = [k for k in size if k not in allowed]
    if bad:
        raise ValueError(f"{name}: unknown size parameter(s) {bad}; allowed: {', '.join(allowed)}, level")
    return {**ladder[level], **size}


@functools.lru_cache(maxsize=256)
def _get(name: str, items: tuple):
    fam, model = _split(name)
    size = dict(items)
    T, v, tau = (int(size[k]) for k in ("T", "v", "tau"))
    cls, _ = FAMILIES[fam]
    if getattr(cls, "dense", True) and T * v + 1 > MAX_DENSE_V1:
        raise ValueError(f"{name}: V1 = {T * v + 1} > {MAX_DENSE_V1}; the dense variable is refused before any work")
    tm = MODELS[model](T, v, tau)
    if getattr(cls, "dense", True) and tm.V1 > MAX_DENSE_V1:
        raise ValueError(f"{name}: V1 = {tm.V1} > {MAX_DENSE_V1}; the dense variable is refused before any work")
    return cls(model, size, tm, Masking())


def get(name: str, **size):
    """The problem ``name`` (``"<family>:<model>"``) at ``size`` (``level=k`` or ``T=, v=, tau=`` ...).

    Unknown names raise ``ValueError`` naming the closest names. Instances are cached (the certified
    optimum is computed once per process).

    Parameters
    ----------
    name : str
        ``"<family>:<model>"``, one of the names of :func:`list`.
    **size
        ``level=k`` (``0 <= k < len(LADDERS[family])``, default 0: the ladder's rung ``k``) and/or
        overrides of its ``T``, ``v``, ``tau`` (positive ints, ``1 <= tau <= T``) and of the family's
        extras (``reg`` for ridge, ``d`` for the factorizations, ``frac`` for ``gram/trace``, masking
        and ``reg`` for ``gram/rank1``).

    Returns
    -------
    Problem
        The problem instance (shared by equal arguments).

    Raises
    ------
    ValueError
        An unknown name (naming the closest), a ``level`` out of range, an unknown size parameter, or a
        dense variable with ``V1 > MAX_DENSE_V1`` (4000), before any work.

    See Also
    --------
    list_problems : Every name and its size ladder (``problems.list``).
    match : Names matching glob patterns.
    Problem : The returned object.

    References
    ----------
    SPEC §1.1 (the topic models), §2.1 (the default masking), §4.0-§4.3, §4.6, §11.1.

    Examples
    --------
    >>> from theorycheck import problems
    >>> p = problems.get("attention-ab/block:paper", level=0)
    >>> p.shape, p.x0, p.certificate.kind
    ((2,), array([0., 0.]), 'certified')
    >>> p.certificate.gap < 1e-12, p.f_star < p.f(p.x0)  # attention beats uniform (alpha = beta = 0)
    (True, True)
    >>> problems.get("stage1-value/lsq:papr")
    Traceback (most recent call last):
    ...
    ValueError: unknown problem 'stage1-value/lsq:papr'; closest: 'stage1-value/lsq:paper', ...
    """
    full = resolve_size(name, size)
    return _get(name, tuple(sorted(full.items())))
