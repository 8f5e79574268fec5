"""Topic statistics of embeddings and attention on real text (SPEC §5.4, §5.5).

Pair classes (:func:`pair_classes`, the official ``inspect_result.py`` classes over token ids): same token,
same topic, different topic, no topic. Embeddings: exact class means over *all* pairs of a pool of tokens with a
bootstrap that resamples *tokens* (pairs sharing a token are dependent). Attention: the length-normalised weight
``n A[i, j]`` (1 under uniform attention) per layer and head, bootstrap over sequences. Co-occurrence: counts,
the most co-occurring pairs and the topic signal (observed over shuffled-corpus expectation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix, diags

from .._validate import check_array, check_int, check_rng

__all__ = [
    "CLASSES",
    "ATTN_CLASSES",
    "PairStats",
    "embedding_pair_stats",
    "pair_classes",
    "AttentionAccumulator",
    "AttentionStats",
    "cooccurrence_matrix",
    "top_cooccurring_pairs",
    "cooccurrence_lift",
    "pair_similarity",
    "bootstrap_weights",
    "percentile_ci",
]

CLASSES = ("same_token", "same_topic", "different_topic", "no_topic")
ATTN_CLASSES = CLASSES + ("top_cooccurring",)


@dataclass
class PairStats:
    """Mean, spread and bootstrap CI of a similarity over the pairs of one class.

    Parameters
    ----------
    n_pairs : int, >= 0
        Ordered pairs of the class (0: the other fields are NaN).
    mean : float
        Mean similarity over the class's pairs.
    std : float
        Standard deviation of the similarity over the pairs (for a gap: the bootstrap standard deviation).
    ci_low, ci_high : float
        Percentile bootstrap interval of the mean (:func:`percentile_ci`; NaN if no replicate drew a pair).

    See Also
    --------
    embedding_pair_stats : Returns one PairStats per class and metric.
    percentile_ci : The interval ``(ci_low, ci_high)``.

    Examples
    --------
    >>> from theorycheck.realdata.stats import PairStats
    >>> s = PairStats(n_pairs=6, mean=0.25, std=0.1, ci_low=0.2, ci_high=0.3)
    >>> s.to_dict()
    {'n_pairs': 6, 'mean': 0.25, 'std': 0.1, 'ci_low': 0.2, 'ci_high': 0.3}
    """

    n_pairs: int
    mean: float
    std: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("n_pairs", "mean", "std", "ci_low", "ci_high")}


def _check_membership(membership):
    M = np.asarray(membership)
    if M.ndim != 2 or M.dtype != bool:
        raise ValueError(f"membership must be a 2-d bool array (vocab_size, K), got dtype {M.dtype} shape {M.shape}")
    return M


def _check_ids(name, ids, V):
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{name} must be a 1-d integer array, got dtype {ids.dtype} shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise ValueError(f"{name} must lie in [0, {V - 1}], got range [{ids.min()}, {ids.max()}]")
    return ids.astype(np.int64)


def pair_classes(ids, membership) -> np.ndarray:
    """Class code of every ordered pair of positions (0..3 in :data:`CLASSES` order).

    Parameters
    ----------
    ids : ndarray of int, shape (n,)
        Token id at each position, ``0 <= ids < vocab_size``.
    membership : ndarray of bool, shape (vocab_size, K)
        ``membership[a, k]``: token ``a`` belongs to topic ``k`` (a row of zeros: no topic).

    Returns
    -------
    ndarray of int8, shape (n, n)
        Symmetric; ``0`` the same id (the diagonal included), ``1`` distinct ids whose topic sets intersect, ``2``
        distinct ids with topics and disjoint topic sets, ``3`` distinct ids, at least one without a topic.

    See Also
    --------
    theorycheck.realdata.lifts.cross_pair_classes : The same codes between query words and key tokens.
    AttentionAccumulator : Attention averaged per class.

    References
    ----------
    SPEC §5.4 (the four classes of the official ``inspect_result.py``).

    Examples
    --------
    >>> from theorycheck.realdata.stats import pair_classes
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)  # tokens 0, 1: topic 0; 2: topic 1; 3: none
    >>> pair_classes(np.array([0, 1, 2, 3, 0]), M)[0]  # the pairs of position 0 (token 0)
    array([0, 1, 2, 3, 0], dtype=int8)
    """
    M = membership[ids].astype(np.float64)
    has = M.any(axis=1)
    inter = (M @ M.T) > 0
    both = has[:, None] & has[None, :]
    same = ids[:, None] == ids[None, :]
    out = np.full((ids.size, ids.size), 3, dtype=np.int8)
    out[both & ~inter] = 2
    out[both & inter] = 1
    out[same] = 0
    return out


def bootstrap_weights(n: int, n_boot: int, rng) -> np.ndarray:
    """Multiplicities of ``n`` resampled units in ``n_boot`` bootstrap replicates.

    Parameters
    ----------
    n : int, >= 1
        Number of units.
    n_boot : int, >= 1
        Number of replicates.
    rng : numpy.random.Generator
        Source of the draws.

    Returns
    -------
    W : ndarray of float64, shape (n_boot, n)
        Each row a multinomial draw of ``n`` units with equal probabilities: a replicate's statistic weights unit
        ``i`` by ``W[b, i]`` (the bootstrap of every statistic here: tokens, sequences, windows or laws).

    See Also
    --------
    percentile_ci : The interval of the replicates' statistics.
    AttentionAccumulator.result : Resamples sequences with these weights.

    Examples
    --------
    >>> from theorycheck.realdata.stats import bootstrap_weights
    >>> W = bootstrap_weights(5, 3, np.random.default_rng(0))
    >>> W.shape, W.sum(axis=1)  # every replicate resamples 5 units
    ((3, 5), array([5., 5., 5.]))
    """
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)


def percentile_ci(values, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval ``(q_{(1-level)/2}, q_{(1+level)/2})`` of bootstrap replicates.

    Parameters
    ----------
    values : array_like of float
        Bootstrap replicates of a statistic (any shape; flattened by the quantiles).
    level : float, 0 < level < 1, default 0.95
        Confidence level.

    Returns
    -------
    lo, hi : float
        The ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of ``values`` (numpy's linear interpolation);
        ``(nan, nan)`` if ``values`` is empty.

    See Also
    --------
    bootstrap_weights : Draws the replicates.
    PairStats : Holds an interval as ``ci_low``, ``ci_high``.

    Examples
    --------
    >>> from theorycheck.realdata.stats import percentile_ci
    >>> lo, hi = percentile_ci(np.arange(101.0), level=0.9)  # the 5% and 95% quantiles of 0, 1, ..., 100
    >>> round(lo, 9), round(hi, 9)
    (5.0, 95.0)
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return float("nan"), float("nan")
    return _boot_ci(values, level)


def _boot_ci(values, level):
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _class_pair_stats(S, name: str, Y, W, level: float):
    """Mean of ``Y`` over the pairs ``S`` of one class, and its bootstrap replicates.

    ``W`` (``(B, n)``) holds each replicate's token multiplicities; a replicate's mean weights the
    pair ``(i, j)`` by ``W_i W_j`` (``same_token``: the diagonal, weight ``W_i``). Replicates that
    drew no pair of the class are NaN.
    """
    n = Y.shape[0]
    if name == "same_token":
        S = np.eye(n, dtype=bool)
    else:
        S = S.copy()
        np.fill_diagonal(S, False)
    cnt = int(S.sum())
    if cnt == 0:
        return PairStats(0, np.nan, np.nan, np.nan, np.nan), np.full(W.shape[0], np.nan)
    Sf = S.astype(np.float64)
    if name == "same_token":
        den, num = W.sum(axis=1), W @ np.diag(Y)
    else:
        den, num = np.einsum("bi,bi->b", W @ Sf, W), np.einsum("bi,bi->b", W @ (Y * Sf), W)
    with np.errstate(invalid="ignore", divide="ignore"):
        bm = num / den
    ok = bm[np.isfinite(bm)]
    lo, hi = _boot_ci(ok, level) if ok.size else (np.nan, np.nan)
    vals = Y[S]
    return PairStats(cnt, float(vals.mean()), float(vals.std()), lo, hi), bm


def embedding_pair_stats(E, membership, ids, *, n_boot: int = 200, level: float = 0.95, rng=None, seed=None) -> dict:
    """Dot products and cosine similarities of embedding rows, by pair class.

    .. math::

        \\bar s_c = \\frac{1}{|P_c|} \\sum_{(i, j) \\in P_c} s(E_i, E_j),\\qquad
        s \\in \\{\\langle E_i, E_j \\rangle,\\ \\cos(E_i, E_j)\\}

    over all ordered pairs ``P_c`` of class ``c`` among ``ids`` (``same_token`` = the diagonal).

    Parameters
    ----------
    E : ndarray, shape (vocab_size, d)
        Token-embedding matrix (row = token id).
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the tokens (:func:`pair_classes`).
    ids : ndarray of int, shape (n,)
        Distinct token ids forming the pool (topic and no-topic tokens), ``n >= 2``.
    n_boot : int, >= 10, default 200
        Bootstrap replicates (resampling tokens of the pool with replacement).
    level : float, 0 < level < 1, default 0.95
        Confidence level of the percentile intervals.
    rng, seed : numpy.random.Generator, int, optional
        Source of the bootstrap draws, or the seed of a new generator when ``rng`` is ``None``.

    Returns
    -------
    dict
        ``{"dot": {class: PairStats}, "cosine": {...}, "gap": {"dot": PairStats, "cosine": PairStats}}``
        where ``gap`` is ``same_topic - different_topic`` (its ``std`` is the bootstrap std, its replicates
        paired: the same token resampling for both classes).

    Raises
    ------
    ValueError
        If the shapes disagree, ``ids`` are not >= 2 distinct in-range ids, ``n_boot < 10``, or a row is zero.

    See Also
    --------
    pair_classes : The classes.
    bootstrap_weights : The token resampling.
    theorycheck.realdata.theory.compare_embeddings : This statistic for several matrices, paired.

    References
    ----------
    SPEC §5.4; Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245.

    Examples
    --------
    >>> from theorycheck.realdata.stats import embedding_pair_stats
    >>> E = np.array([[1.0, 0, 0], [1, 1, 0], [0, 0, 2], [0, 1, 1]])
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)  # tokens 0, 1: topic 0; 2: topic 1; 3: none
    >>> st = embedding_pair_stats(E, M, np.arange(4), n_boot=20, seed=0)
    >>> {c: (s.n_pairs, s.mean) for c, s in st["dot"].items()}  # same_token: the squared norms 1, 2, 4, 2
    {'same_token': (4, 2.25), 'same_topic': (2, 1.0), 'different_topic': (4, 0.0), 'no_topic': (6, 1.0)}
    >>> round(st["gap"]["cosine"].mean, 6), round(2**-0.5, 6)  # cos(E_0, E_1) - 0
    (0.707107, 0.707107)
    """
    E = check_array("E", E, ndim=2)
    M = _check_membership(membership)
    if M.shape[0] != E.shape[0]:
        raise ValueError(f"membership has {M.shape[0]} rows but E has {E.shape[0]}")
    ids = _check_ids("ids", ids, E.shape[0])
    if np.unique(ids).size != ids.size or ids.size < 2:
        raise ValueError(
            f"ids must hold at least 2 distinct token ids, got {ids.size} ids ({np.unique(ids).size} distinct)"
        )
    n_boot = check_int("n_boot", n_boot, low=10)
    rng = check_rng(rng, seed)
    X = E[ids]
    G = X @ X.T
    norms = np.sqrt(np.diag(G))
    if np.any(norms == 0):
        raise ValueError("cosine similarity is undefined: some embedding rows in ids are zero")
    Cos = G / np.outer(norms, norms)
    cls = pair_classes(ids, M)
    n = ids.size
    W = bootstrap_weights(n, n_boot, rng)  # (B, n) token weights
    out: dict[str, dict[str, PairStats]] = {"dot": {}, "cosine": {}}
    boot_means: dict[str, dict[str, np.ndarray]] = {"dot": {}, "cosine": {}}
    for c, name in enumerate(CLASSES):
        for metric, Y in (("dot", G), ("cosine", Cos)):
            out[metric][name], boot_means[metric][name] = _class_pair_stats(cls == c, name, Y, W, level)
    out["gap"] = {}
    for metric in ("dot", "cosine"):
        d = boot_means[metric]["same_topic"] - boot_means[metric]["different_topic"]  # paired replicates
        d = d[np.isfinite(d)]
        k = d.size
        point = out[metric]["same_topic"].mean - out[metric]["different_topic"].mean
        lo, hi = _boot_ci(d, level) if k else (np.nan, np.nan)
        out["gap"][metric] = PairStats(
            min(out[metric]["same_topic"].n_pairs, out[metric]["different_topic"].n_pairs),
            float(point),
            float(np.std(d)) if k else np.nan,
            lo,
            hi,
        )
    return out


def pair_similarity(E, pairs) -> dict:
    """Mean dot product and cosine of embedding rows over given id pairs: ``(1/m) sum_k s(E[a_k], E[b_k])``.

    Parameters
    ----------
    E : ndarray, shape (vocab_size, d)
        Token-embedding matrix (row = token id); the rows of the pairs must be non-zero for the cosine.
    pairs : array_like of int, shape (m, 2)
        Token-id pairs ``(a_k, b_k)`` (e.g. :func:`top_cooccurring_pairs`), ``0 <= a_k, b_k < vocab_size``.

    Returns
    -------
    dict
        ``{"n_pairs": m, "dot": float, "cosine": float}`` (NaN means when ``m = 0``). Memory is bounded: the pairs
        are processed in chunks.

    See Also
    --------
    top_cooccurring_pairs : The pairs compared with the same-topic pairs (SPEC §5.5).
    embedding_pair_stats : The same means by pair class, with bootstrap intervals.

    Examples
    --------
    >>> from theorycheck.realdata.stats import pair_similarity
    >>> out = pair_similarity(np.array([[1.0, 0, 0], [1, 1, 0], [0, 0, 2]]), [[0, 1], [0, 2]])  # cos: 1/sqrt(2), 0
    >>> out["n_pairs"], out["dot"], round(out["cosine"], 6), round(0.5 * 2**-0.5, 6)
    (2, 0.5, 0.353553, 0.353553)
    """
    E = check_array("E", E, ndim=2)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size == 0:
        return {"n_pairs": 0, "dot": float("nan"), "cosine": float("nan")}
    nrm = np.linalg.norm(E, axis=1)
    dot_sum = cos_sum = 0.0
    for s in range(0, len(pairs), 8192):  # chunks: bounded memory for millions of pairs
        p = pairs[s : s + 8192]
        dot = np.einsum("ij,ij->i", E[p[:, 0]], E[p[:, 1]])
        dot_sum += float(dot.sum())
        cos_sum += float((dot / (nrm[p[:, 0]] * nrm[p[:, 1]])).sum())
    return {"n_pairs": int(len(pairs)), "dot": dot_sum / len(pairs), "cosine": cos_sum / len(pairs)}


@dataclass
class AttentionStats:
    """Average attention by pair class, per layer and head.

    Parameters
    ----------
    classes : tuple of str
        :data:`ATTN_CLASSES` (``top_cooccurring`` overlaps the others).
    mean_lift : ndarray, shape (L, H, C)
        Mean of ``n A[i, j]`` (``n`` the sequence length) over the class's position pairs of all sequences
        (1 = uniform attention; NaN for an empty class).
    mean_raw : ndarray, shape (L, H, C)
        Mean of ``A[i, j]``.
    counts : ndarray of int64, shape (C,)
        Position pairs per class.
    n_sequences : int
        Sequences added.
    gap_ci : ndarray, shape (L, H, 2)
        Bootstrap-over-sequences CI of ``lift(same_topic) - lift(different_topic)``.
    mean_gap_ci : tuple of float
        ``(lo, hi)``: the same for the gap averaged over all layers and heads.
    ratio_ci : ndarray, shape (L, H, 2), or None
        Bootstrap-over-sequences CI of ``lift(same_topic) / lift(different_topic)`` (same replicates as ``gap_ci``;
        scale-free: attention to other positions, e.g. [CLS] and [SEP], scales both lifts alike).

    Attributes
    ----------
    gap : ndarray, shape (L, H)
        ``lift(same_topic) - lift(different_topic)``.
    ratio : ndarray, shape (L, H)
        ``lift(same_topic) / lift(different_topic)`` (NaN where a class is empty).

    See Also
    --------
    AttentionAccumulator : Builds it from attention matrices.
    theorycheck.realdata.lifts.LiftStats : The lifts under the theory comparison's definitions.

    Examples
    --------
    >>> from theorycheck.realdata.stats import AttentionAccumulator
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> acc = AttentionAccumulator(n_layers=1, n_heads=1, membership=M)
    >>> A = np.array([[0, 0.5, 0.5, 0], [0.5, 0, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    >>> acc.add(A[None, None], np.array([0, 1, 2, 3]), np.ones(4, dtype=bool))
    >>> st = acc.result(n_boot=10, seed=0)
    >>> st.counts  # same_token (the diagonal), same_topic, different_topic, no_topic, top_cooccurring
    array([4, 2, 4, 6, 0])
    >>> st.mean_lift[0, 0, :4], st.gap, st.ratio  # same topic: 4 * 0.5 twice; different: 2, 2, 0, 0
    (array([2., 2., 1., 0.]), array([[1.]]), array([[2.]]))
    """

    classes: tuple
    mean_lift: np.ndarray
    mean_raw: np.ndarray
    counts: np.ndarray
    n_sequences: int
    gap_ci: np.ndarray
    mean_gap_ci: tuple
    ratio_ci: np.ndarray | None = None

    @property
    def gap(self) -> np.ndarray:
        """``(L, H)`` same-topic minus different-topic mean lift."""
        i, j = self.classes.index("same_topic"), self.classes.index("different_topic")
        return self.mean_lift[..., i] - self.mean_lift[..., j]

    @property
    def ratio(self) -> np.ndarray:
        """``(L, H)`` same-topic over different-topic mean lift (NaN where a class is empty)."""
        i, j = self.classes.index("same_topic"), self.classes.index("different_topic")
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.mean_lift[..., i] / self.mean_lift[..., j]


@dataclass
class AttentionAccumulator:
    """Accumulates ``A[i, j]`` and ``n A[i, j]`` by pair class (:data:`ATTN_CLASSES`) over sequences (bootstrap-ready).

    Parameters
    ----------
    n_layers, n_heads : int, >= 1
        Layers ``L`` and heads per layer ``H`` of the attention tensors to be added.
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the tokens (the classes).
    pairs : ndarray of int, shape (m, 2), optional
        Unordered token-id pairs forming the ``top_cooccurring`` class (e.g. :func:`top_cooccurring_pairs`).

    Raises
    ------
    ValueError
        If ``n_layers < 1``, ``n_heads < 1``, ``membership`` is not 2-d bool or a pair id is out of range.

    See Also
    --------
    AttentionStats : The result.
    bootstrap_weights : The resampling of sequences.

    References
    ----------
    SPEC §5.4 (the attention statistic, skipping stop tokens and sub-word pieces).

    Examples
    --------
    >>> from theorycheck.realdata.stats import AttentionAccumulator
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> acc = AttentionAccumulator(n_layers=1, n_heads=2, membership=M, pairs=[[0, 2]])
    >>> rng = np.random.default_rng(0)
    >>> for _ in range(4):
    ...     A = np.full((1, 2, 6, 6), 1 / 6)  # head 0 uniform
    ...     A[0, 1] = rng.dirichlet(np.ones(6), size=6)  # head 1 random rows
    ...     acc.add(A, rng.integers(0, 4, size=6), np.ones(6, dtype=bool))
    >>> st = acc.result(n_boot=20, seed=0)
    >>> st.n_sequences, st.mean_lift[0, 0], st.gap_ci[0, 0]  # uniform attention: lift 1 in every class
    (4, array([1., 1., 1., 1., 1.]), array([0., 0.]))
    """

    n_layers: int
    n_heads: int
    membership: np.ndarray
    pairs: np.ndarray | None = None
    _lift: list = field(default_factory=list, init=False, repr=False)
    _raw: list = field(default_factory=list, init=False, repr=False)
    _cnt: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        self.n_layers = check_int("n_layers", self.n_layers, low=1)
        self.n_heads = check_int("n_heads", self.n_heads, low=1)
        self.membership = _check_membership(self.membership)
        V = self.membership.shape[0]
        if self.pairs is None or len(self.pairs) == 0:
            self._keys = np.zeros(0, dtype=np.int64)
        else:
            p = np.asarray(self.pairs, dtype=np.int64).reshape(-1, 2)
            _check_ids("pairs", p.ravel(), V)
            self._keys = np.unique(np.concatenate([p[:, 0] * V + p[:, 1], p[:, 1] * V + p[:, 0]]))

    def add(self, attentions, ids, valid) -> None:
        """Add one sequence.

        Parameters
        ----------
        attentions : ndarray, shape (L, H, n, n)
            Row ``i`` = query ``i`` (rows sum to 1).
        ids : ndarray of int, shape (n,)
        valid : ndarray of bool, shape (n,)
            Positions that take part (whole-word content tokens); others are skipped as both
            query and key (their attention mass still counts in the normalisation).
        """
        A = np.asarray(attentions)
        ids = _check_ids("ids", ids, self.membership.shape[0])
        n = ids.size
        if A.shape != (self.n_layers, self.n_heads, n, n):
            raise ValueError(f"attentions must have shape {(self.n_layers, self.n_heads, n, n)}, got {A.shape}")
        valid = np.asarray(valid, dtype=bool)
        if valid.shape != (n,):
            raise ValueError(f"valid must have shape ({n},), got {valid.shape}")
        cls = pair_classes(ids, self.membership)
        vv = valid[:, None] & valid[None, :]
        masks = np.zeros((len(ATTN_CLASSES), n, n), dtype=np.float64)
        for c in range(len(CLASSES)):
            masks[c] = vv & (cls == c)
        if self._keys.size:
            V = self.membership.shape[0]
            key = ids[:, None] * V + ids[None, :]
            pos = np.searchsorted(self._keys, key).clip(0, self._keys.size - 1)
            masks[-1] = vv & (self._keys[pos] == key) & ~np.eye(n, dtype=bool)
        Mflat = masks.reshape(len(ATTN_CLASSES), n * n).T
        raw = (A.reshape(self.n_layers * self.n_heads, n * n).astype(np.float64) @ Mflat).reshape(
            self.n_layers, self.n_heads, -1
        )
        self._raw.append(raw)
        self._lift.append(raw * n)
        self._cnt.append(masks.reshape(len(ATTN_CLASSES), -1).sum(axis=1))

    def result(self, *, n_boot: int = 200, level: float = 0.95, rng=None, seed=None) -> AttentionStats:
        """Class means and bootstrap (over sequences) CIs of the same-minus-different gap."""
        if not self._cnt:
            raise ValueError("no sequence was added")
        n_boot = check_int("n_boot", n_boot, low=10)
        rng = check_rng(rng, seed)
        lift = np.stack(self._lift)  # (S, L, H, C)
        raw = np.stack(self._raw)
        cnt = np.stack(self._cnt)  # (S, C)
        tot = cnt.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_lift = lift.sum(axis=0) / tot
            mean_raw = raw.sum(axis=0) / tot
        i, j = ATTN_CLASSES.index("same_topic"), ATTN_CLASSES.index("different_topic")
        S = cnt.shape[0]
        W = bootstrap_weights(S, n_boot, rng)  # (B, S) window weights
        with np.errstate(invalid="ignore", divide="ignore"):
            gi = np.einsum("bs,slh->blh", W, lift[..., i]) / (W @ cnt[:, i])[:, None, None]
            gj = np.einsum("bs,slh->blh", W, lift[..., j]) / (W @ cnt[:, j])[:, None, None]
            rt = gi / gj
        g = gi - gj
        ok = np.all(np.isfinite(g), axis=(1, 2))
        g, rt = g[ok], rt[ok]
        if g.shape[0]:
            q = np.quantile(g, [(1 - level) / 2, (1 + level) / 2], axis=0)
            gap_ci = np.stack([q[0], q[1]], axis=-1)
            mlo, mhi = _boot_ci(g.mean(axis=(1, 2)), level)
            qr = np.quantile(rt, [(1 - level) / 2, (1 + level) / 2], axis=0)
            ratio_ci = np.stack([qr[0], qr[1]], axis=-1)
        else:
            gap_ci = np.full(mean_lift.shape[:2] + (2,), np.nan)
            ratio_ci = gap_ci.copy()
            mlo = mhi = float("nan")
        return AttentionStats(ATTN_CLASSES, mean_lift, mean_raw, tot.astype(np.int64), S, gap_ci, (mlo, mhi), ratio_ci)


def cooccurrence_matrix(sequences, valid, vocab_size: int, *, keep=None):
    """Ordered position-pair co-occurrence counts within sequences.

    .. math:: X_{ab} = \\sum_{\\text{seq}} c_a c_b\\ (a \\ne b),\\qquad X_{aa} = \\sum c_a (c_a - 1)

    where ``c_a`` counts valid positions holding token ``a`` in the sequence.

    Parameters
    ----------
    sequences : sequence of ndarray of int
        Token ids of each sequence (1-d), ``0 <= id < vocab_size``.
    valid : sequence of ndarray of bool
        The positions counted in each sequence (same shapes as ``sequences``).
    vocab_size : int, >= 1
        ``V``, the number of token ids.
    keep : ndarray of bool, shape (vocab_size,), optional
        Store ``X`` only between kept tokens (memory: a whole-vocabulary ``X`` of a corpus has tens of millions
        of entries). ``counts`` and ``n_position_pairs`` always use every valid position.

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (V, V)
        The symmetric counts ``X_ab`` (explicit zeros removed).
    counts : ndarray of int64, shape (V,)
        Valid occurrences of each token.
    n_position_pairs : int
        ``sum_seq m (m - 1)`` with ``m`` valid positions per sequence (``= sum_ab X_ab`` without ``keep``).

    Raises
    ------
    ValueError
        If ``vocab_size < 1``, an id is out of range, or a ``valid`` mask or ``keep`` has the wrong shape.

    See Also
    --------
    top_cooccurring_pairs : The largest off-diagonal counts.
    cooccurrence_lift : Observed over expected counts by topic class.

    References
    ----------
    SPEC §5.5 (the co-occurrence comparison).

    Examples
    --------
    >>> from theorycheck.realdata.stats import cooccurrence_matrix
    >>> seqs = [np.array([0, 1, 0, 2]), np.array([2, 3, 1])]
    >>> valid = [np.ones(4, dtype=bool), np.array([True, True, False])]  # the last 1 is not counted
    >>> X, counts, P = cooccurrence_matrix(seqs, valid, vocab_size=4)
    >>> X.toarray()[0]  # X_00 = 2 * 1 (token 0 twice in sequence 0); X_01 = X_02 = 2 * 1
    array([2., 2., 2., 0.])
    >>> counts, P, int(X.sum()) == P  # P = 4 * 3 + 2 * 1
    (array([2, 1, 2, 1]), 14, True)
    """
    V = check_int("vocab_size", vocab_size, low=1)
    row_parts: list[np.ndarray] = []
    col_parts: list[np.ndarray] = []
    pp = 0
    for s, (ids, ok) in enumerate(zip(sequences, valid)):
        ids = _check_ids("sequence", ids, V)
        ok = np.asarray(ok, dtype=bool)
        if ok.shape != ids.shape:
            raise ValueError(f"valid mask of sequence {s} has shape {ok.shape}, ids have {ids.shape}")
        t = ids[ok]
        row_parts.append(np.full(t.size, s, dtype=np.int64))
        col_parts.append(t)
        pp += t.size * (t.size - 1)
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, np.int64)
    cols = np.concatenate(col_parts) if col_parts else np.zeros(0, np.int64)
    C = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(len(sequences), V))
    C.sum_duplicates()
    counts = np.asarray(C.sum(axis=0)).ravel().astype(np.int64)
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (V,):
            raise ValueError(f"keep must have shape ({V},), got {keep.shape}")
        C = (C @ _diag(keep.astype(np.float64))).tocsr()
        C.eliminate_zeros()
    X = (C.T @ C).tocsr()
    X.setdiag(X.diagonal() - (counts if keep is None else counts * keep))
    X.eliminate_zeros()
    return X, counts, int(pp)


def _diag(d):
    return diags(d, format="csr")


def top_cooccurring_pairs(X, eligible, n: int):
    """The ``n`` unordered pairs ``a < b`` of eligible tokens with the largest ``X_ab``.

    Ties are broken by ``(a, b)`` ascending; pairs with ``X_ab = 0`` are never returned.

    Parameters
    ----------
    X : scipy.sparse matrix, shape (V, V)
        Co-occurrence counts (:func:`cooccurrence_matrix`).
    eligible : array_like of bool, shape (V,)
        Tokens that may appear in a pair (e.g. the topic tokens).
    n : int, >= 1
        Maximum number of pairs.

    Returns
    -------
    pairs : ndarray of int64, shape (m, 2)
        The pairs ``(a, b)``, ``a < b``, by decreasing count, ``m <= n``.
    counts : ndarray, shape (m,)
        Their counts ``X_ab``.

    See Also
    --------
    cooccurrence_matrix : The counts.
    pair_similarity : Embedding similarity over these pairs.

    References
    ----------
    SPEC §5.5 (the most co-occurring word pairs beside the same-topic pairs).

    Examples
    --------
    >>> from theorycheck.realdata.stats import cooccurrence_matrix, top_cooccurring_pairs
    >>> seqs = [np.array([0, 1, 0, 2]), np.array([2, 3, 1])]
    >>> X, _, _ = cooccurrence_matrix(seqs, [np.ones(4, dtype=bool), np.ones(3, dtype=bool)], vocab_size=4)
    >>> pairs, counts = top_cooccurring_pairs(X, np.ones(4, dtype=bool), n=2)  # (0, 1) and (0, 2) tie at 2
    >>> pairs.tolist(), counts.tolist()
    ([[0, 1], [0, 2]], [2.0, 2.0])
    """
    n = check_int("n", n, low=1)
    eligible = np.asarray(eligible, dtype=bool)
    Xc = X.tocoo()
    keep = (Xc.row < Xc.col) & eligible[Xc.row] & eligible[Xc.col] & (Xc.data > 0)
    a, b, c = Xc.row[keep], Xc.col[keep], Xc.data[keep]
    order = np.lexsort((b, a, -c))[:n]
    return np.stack([a[order], b[order]], axis=1).astype(np.int64), c[order]


def cooccurrence_lift(X, counts, n_position_pairs: int, membership) -> dict:
    """Topic signal of co-occurrence: observed over expected co-occurrences per class.

    For topic tokens ``a != b`` the expected count if valid tokens were shuffled across all valid positions of
    the corpus is ``E_ab = P c_a c_b / (N (N - 1))`` (``P`` position pairs, ``N`` valid positions). For class ``c``
    in {same_topic, different_topic}:

    .. math:: \\mathrm{lift}_c = \\sum_{(a,b) \\in c} X_{ab} \\Big/ \\sum_{(a,b) \\in c} E_{ab}

    and ``signal = log(lift_same_topic / lift_different_topic)`` (0 without topic structure; ``inf`` if
    different-topic tokens never co-occur).

    Parameters
    ----------
    X : scipy.sparse matrix, shape (V, V)
        Co-occurrence counts (:func:`cooccurrence_matrix`), at least between the topic tokens.
    counts : array_like, shape (V,)
        Valid occurrences ``c_a`` of each token (``N = sum counts``).
    n_position_pairs : int
        ``P``, the ordered position pairs within sequences.
    membership : ndarray of bool, shape (V, K)
        Topic sets; the topic tokens are the rows with a topic.

    Returns
    -------
    dict
        ``{"same_topic": float, "different_topic": float, "signal": float}`` (NaN lift: no expected count).

    Raises
    ------
    ValueError
        If ``membership`` is not 2-d bool, or there are < 2 topic tokens or < 2 valid positions.

    See Also
    --------
    cooccurrence_matrix : ``X``, ``counts`` and ``P``.
    theorycheck.realdata.pipeline.synthetic_signal : The same signal on synthetic LDA data.

    References
    ----------
    SPEC §5.5 (the co-occurrence topic signal), §6 item 36.

    Examples
    --------
    >>> from theorycheck.realdata.stats import cooccurrence_lift, cooccurrence_matrix
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> seqs = [np.array([0, 1, 0, 2]), np.array([2, 3, 1])]
    >>> X, counts, P = cooccurrence_matrix(seqs, [np.ones(4, bool), np.array([1, 1, 0], bool)], 4)
    >>> out = cooccurrence_lift(X, counts, P, M)
    >>> round(out["same_topic"], 6), round(out["different_topic"], 6)  # observed 4 and 6 over expected 56/30 and 168/30
    (2.142857, 1.071429)
    >>> round(out["signal"], 6) == round(float(np.log(2)), 6)
    True
    """
    M = _check_membership(membership)
    counts = np.asarray(counts, dtype=np.float64)
    ids = np.flatnonzero(M.any(axis=1))
    N = counts.sum()
    if ids.size < 2 or N < 2:
        raise ValueError("cooccurrence_lift needs at least two topic tokens and two valid positions")
    Mi = M[ids].astype(np.float64)
    same = (Mi @ Mi.T) > 0
    np.fill_diagonal(same, False)
    diff = ~((Mi @ Mi.T) > 0)
    np.fill_diagonal(diff, False)
    Xs = np.asarray(X[ids][:, ids].todense(), dtype=np.float64)
    c = counts[ids]
    Eab = n_position_pairs * np.outer(c, c) / (N * (N - 1))
    out = {}
    for name, S in (("same_topic", same), ("different_topic", diff)):
        exp = float(Eab[S].sum())
        out[name] = float(Xs[S].sum() / exp) if exp > 0 else float("nan")
    s, d = out["same_topic"], out["different_topic"]
    out["signal"] = float(np.log(s / d)) if s > 0 and d > 0 else (math.inf if s > 0 else float("nan"))
    return out
