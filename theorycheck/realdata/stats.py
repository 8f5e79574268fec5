"""Topic statistics of embeddings and attention on real text (SPEC §5.4, §5.5).

Pair classes (the official ``inspect_result.py`` classes, computed over token ids):

* ``same_token``: the same id (for attention: identical tokens at two positions, or ``i = j``);
* ``same_topic``: different ids whose topic sets intersect;
* ``different_topic``: different ids, both with topics, disjoint topic sets;
* ``no_topic``: different ids, at least one without a topic.

Embeddings: exact means and standard deviations over *all* pairs of a pool of token ids, with
percentile bootstrap confidence intervals that resample *tokens* (pairs sharing a token are
dependent, so resampling pairs would understate the uncertainty). Attention: averages of the
length-normalised weight ``n A[i, j]`` (1 under uniform attention) per layer and head, with a
bootstrap over sequences. Co-occurrence: pair counts within sequences, the most co-occurring
pairs, and the topic signal of co-occurrence (observed over shuffled-corpus expectation).
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
    """Mean, spread and bootstrap CI of a similarity over the pairs of one class."""

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
    membership : ndarray of bool, shape (vocab_size, K)

    Returns
    -------
    ndarray of int8, shape (n, n)
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
    """``(n_boot, n)`` multiplicities of ``n`` resampled units (multinomial, equal probabilities): a
    replicate's statistic weights unit ``i`` by ``W[b, i]`` (the bootstrap of every statistic here)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)


def percentile_ci(values, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval ``(q_{(1-level)/2}, q_{(1+level)/2})`` of bootstrap replicates (NaN if none)."""
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
    ids : ndarray of int, shape (n,)
        Distinct token ids forming the pool (topic and no-topic tokens).
    n_boot : int
        Bootstrap replicates (resampling tokens of the pool with replacement).
    level : float
        Confidence level of the percentile intervals.

    Returns
    -------
    dict
        ``{"dot": {class: PairStats}, "cosine": {...}, "gap": {"dot": PairStats, "cosine": PairStats}}``
        where ``gap`` is ``same_topic - different_topic`` (its ``std`` is the bootstrap std).
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
    """Mean dot product and cosine of embedding rows over given id pairs ``(m, 2)``."""
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

    Attributes
    ----------
    classes : tuple of str
        :data:`ATTN_CLASSES` (``top_cooccurring`` overlaps the others).
    mean_lift : ndarray, shape (L, H, C)
        Mean of ``n A[i, j]`` over the class's position pairs (1 = uniform attention).
    mean_raw : ndarray, shape (L, H, C)
        Mean of ``A[i, j]``.
    counts : ndarray of int64, shape (C,)
        Position pairs per class.
    n_sequences : int
    gap_ci : ndarray, shape (L, H, 2)
        Bootstrap-over-sequences CI of ``lift(same_topic) - lift(different_topic)``.
    mean_gap_ci : (float, float)
        The same for the gap averaged over all layers and heads.
    ratio_ci : ndarray, shape (L, H, 2), or None
        Bootstrap-over-sequences CI of ``lift(same_topic) / lift(different_topic)`` (the same replicates as
        ``gap_ci``; scale-free: it does not change when attention to other positions, e.g. [CLS] and [SEP],
        scales both lifts alike).
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
    """Accumulates attention by pair class over many sequences (bootstrap-ready).

    Parameters
    ----------
    n_layers, n_heads : int
    membership : ndarray of bool, shape (vocab_size, K)
    pairs : ndarray of int, shape (m, 2), optional
        Unordered token-id pairs forming the ``top_cooccurring`` class.
    """

    n_layers: int
    n_heads: int
    membership: np.ndarray
    pairs: np.ndarray | None = None
    _lift: list = field(default_factory=list, repr=False)
    _raw: list = field(default_factory=list, repr=False)
    _cnt: list = field(default_factory=list, repr=False)

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
    sequences : sequence of 1-d int arrays
    valid : sequence of 1-d bool arrays (same shapes)
    vocab_size : int
    keep : ndarray of bool, shape (vocab_size,), optional
        Store ``X`` only between kept tokens (memory: a whole-vocabulary ``X`` of a corpus has
        tens of millions of entries). ``counts`` and ``n_position_pairs`` always use every valid
        position.

    Returns
    -------
    X : scipy.sparse.csr_matrix, shape (V, V)
    counts : ndarray of int64, shape (V,)
        Valid occurrences of each token.
    n_position_pairs : int
        ``sum_seq m (m - 1)`` with ``m`` valid positions per sequence.
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

    Ties are broken by ``(a, b)`` ascending. Returns ``(pairs (m, 2), counts (m,))``, ``m <= n``.
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

    For topic tokens ``a != b`` the expected count if valid tokens were shuffled across all
    valid positions of the corpus is ``E_ab = P c_a c_b / (N (N - 1))`` (``P`` position pairs,
    ``N`` valid positions). For class ``c`` in {same_topic, different_topic}:

    .. math:: \\mathrm{lift}_c = \\sum_{(a,b) \\in c} X_{ab} \\Big/ \\sum_{(a,b) \\in c} E_{ab}

    and ``signal = log(lift_same_topic / lift_different_topic)`` (0 without topic structure;
    ``inf`` if different-topic tokens never co-occur).
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
