"""Attention lifts of a pretrained model under the definitions the theory is compared with (SPEC §11.9).

A query position ``i`` showing (or, masked, hiding) word ``x_i`` and a key position ``j`` showing ``y_j`` in a
window of ``n`` tokens with attention row ``A[i, :]`` (summing to 1). Two normalisations of the lift of the pair:

* ``all_keys`` (the package's definition until issue #36, :class:`.stats.AttentionAccumulator`):
  ``n A[i, j]``, every key counted, the query's own position and the other copies of its word included;
* ``excl_own``: the query's own position and every key showing the query's word are removed and the rest
  renormalised, ``n'_i A[i, j] / r_i`` with ``K_i = {k != i : y_k != x_i}``, ``n'_i = |K_i|`` and
  ``r_i = sum_{k in K_i} A[i, k]`` (1 under uniform attention over ``K_i``).

Windows can be given twice: as text (queries = the valid positions) and with a subset of valid positions
replaced by [MASK] (queries = the masked positions, their class taken from the hidden word, keys showing
their text; ``K_i`` then excludes the unmasked copies of the hidden word). The pair classes are those of
:func:`.stats.pair_classes` between the query's word and the key's shown token, for each named class set
(e.g. the top-fraction topic sets, and the dominant-topic labels); ``same_topic`` and ``different_topic``
pairs are pairs of distinct words, so the own word never enters a class, only the normaliser.

Beside the lifts, the attention a topic-token query spends on other copies of its own word (``own_word``)
and on its own position (``own_position``): the mass ``excl_own`` removes. Everything is pooled over windows
(sums of pair lifts over sums of pair counts, as :class:`.stats.AttentionAccumulator`) with a percentile
bootstrap over windows; gap and ratio from the same replicates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validate import check_int, check_real, check_rng
from . import stats as S

__all__ = [
    "NORMALISATIONS",
    "cross_pair_classes",
    "window_lift_sums",
    "LiftAccumulator",
    "LiftStats",
    "mask_positions",
]

#: The two normalisations of a pair's lift (module docstring).
NORMALISATIONS = ("all_keys", "excl_own")
_SAME, _DIFF = 1, 2  # class codes of stats.pair_classes


def cross_pair_classes(query_ids, key_ids, membership) -> np.ndarray:
    """Class code (0..3 in :data:`.stats.CLASSES` order) of every (query word, key token) pair.

    Parameters
    ----------
    query_ids : ndarray of int, shape (n_q,)
        The queries' words (token ids, ``0 <= id < vocab_size``).
    key_ids : ndarray of int, shape (n_k,)
        The keys' shown tokens.
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the tokens.

    Returns
    -------
    ndarray of int8, shape (n_q, n_k)
        0 the same id, 1 distinct ids with intersecting topic sets, 2 distinct ids with topics and disjoint sets,
        3 otherwise; ``cross_pair_classes(ids, ids, M) == stats.pair_classes(ids, M)``.

    See Also
    --------
    theorycheck.realdata.stats.pair_classes : The square case.
    window_lift_sums : Uses these classes for the lifts.

    References
    ----------
    SPEC §5.4 (the classes), §11.9 (masked queries: the class of the hidden word).

    Examples
    --------
    >>> from theorycheck.realdata.lifts import cross_pair_classes
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)  # tokens 0, 1: topic 0; 2: topic 1; 3: none
    >>> cross_pair_classes(np.array([0, 2]), np.arange(4), M)
    array([[0, 1, 2, 3],
           [2, 2, 0, 3]], dtype=int8)
    """
    Mq = membership[query_ids].astype(np.float64)
    Mk = membership[key_ids].astype(np.float64)
    hq, hk = Mq.any(axis=1), Mk.any(axis=1)
    inter = (Mq @ Mk.T) > 0
    both = hq[:, None] & hk[None, :]
    out = np.full((len(query_ids), len(key_ids)), 3, dtype=np.int8)
    out[both & ~inter] = 2
    out[both & inter] = 1
    out[np.asarray(query_ids)[:, None] == np.asarray(key_ids)[None, :]] = 0
    return out


def window_lift_sums(A, key_ids, query_ids, queries, keys, memberships, topic):
    """One window's sums of pair lifts under both normalisations, pair counts and own-word / own-position attention.

    For a query position ``i`` (word ``x_i``) and a class key ``j`` of class ``c`` (same or different topic), the
    window adds ``n A[i, j]`` (``all_keys``) and ``n'_i A[i, j] / r_i`` (``excl_own``: ``K_i = {k != i : y_k != x_i}``,
    ``n'_i = |K_i|``, ``r_i = sum_{k in K_i} A[i, k]``) to the class's sum (module docstring).

    Parameters
    ----------
    A : ndarray, shape (LH, n, n)
        Attention of every layer and head (row = query, rows sum to 1).
    key_ids : ndarray of int, shape (n,)
        The shown tokens.
    query_ids : ndarray of int, shape (n,)
        The queries' words (the same as ``key_ids`` unless masked: the hidden words).
    queries, keys : ndarray of bool, shape (n,)
        The positions taking part as query, and as class key (every position counts in the normalisers).
    memberships : dict of str to ndarray
        Class-set name -> topic sets ``(vocab_size, K)`` (bool).
    topic : ndarray of bool, shape (vocab_size,)
        The topic tokens (whose queries count in the shares).

    Returns
    -------
    num : dict of str to ndarray
        ``num[s]``, shape ``(2, LH, 2)``: normalisation (``all_keys``, ``excl_own``) x head x [same, different].
    cnt : dict of str to ndarray
        ``cnt[s]``, shape ``(2,)``: the [same, different] pair counts.
    share : ndarray, shape (LH, 2)
        Summed ``[own_word, own_position]`` attention of the topic-token queries.
    n_topic_queries : int
        Their number.

    See Also
    --------
    LiftAccumulator : Accumulates these sums over windows.
    cross_pair_classes : The classes.

    References
    ----------
    SPEC §11.9 (the three definitions of a pair's lift).

    Examples
    --------
    Under uniform attention both normalisations give lift 1 (sums equal to the counts):

    >>> from theorycheck.realdata.lifts import window_lift_sums
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> ids, every = np.array([0, 1, 0, 2, 3]), np.ones(5, dtype=bool)
    >>> num, cnt, share, nq = window_lift_sums(np.full((1, 5, 5), 0.2), ids, ids, every, every, {"s": M}, M.any(1))
    >>> num["s"][:, 0], cnt["s"]
    (array([[4., 6.],
           [4., 6.]]), array([4., 6.]))
    >>> share, nq  # own word: positions 0 and 2 see each other (0.2 each); own position: 0.2 per topic query
    (array([[0.4, 0.8]]), 4)
    """
    LH, n, _ = A.shape
    q = np.flatnonzero(queries)
    Aq = A[:, q, :].astype(np.float64)  # (LH, nq, n)
    own = key_ids[None, :] == query_ids[q][:, None]  # keys showing the query's word, own position included
    own_pos = np.zeros((q.size, n), dtype=bool)
    own_pos[np.arange(q.size), q] = True
    own_other = own & ~own_pos
    allowed = ~(own | own_pos)
    r = np.einsum("hqk,qk->hq", Aq, allowed)  # attention on K_i
    n_prime = allowed.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale_ex = np.where(r > 0, n_prime[None, :] / r, 0.0)  # (LH, nq)
    num, cnt = {}, {}
    for name, M in memberships.items():
        cls = cross_pair_classes(query_ids[q], key_ids, M)
        kk = keys[None, :] & ~own_pos  # classes 1, 2 exclude own-word keys by definition
        masks = np.stack([(cls == _SAME) & kk, (cls == _DIFF) & kk]).astype(np.float64)  # (2, nq, n)
        row = np.einsum("hqk,cqk->hqc", Aq, masks)  # (LH, nq, 2)
        out = np.empty((2, LH, 2))
        out[0] = n * row.sum(axis=1)
        out[1] = np.einsum("hq,hqc->hc", scale_ex, row)
        num[name], cnt[name] = out, masks.sum(axis=(1, 2))
    tq = topic[query_ids[q]]
    share = np.stack(
        [np.einsum("hqk,qk->hq", Aq, own_other)[:, tq].sum(axis=1), Aq[:, np.arange(q.size), q][:, tq].sum(axis=1)],
        axis=1,
    )
    return num, cnt, share, int(tq.sum())


def mask_positions(valid, fraction: float, rng) -> np.ndarray:
    """A seeded ``fraction`` of the ``valid`` positions, to be shown as [MASK].

    Parameters
    ----------
    valid : array_like of bool, shape (n,)
        The positions that may be masked.
    fraction : float, 0 < fraction <= 1
        Fraction of the valid positions to mask (``round(fraction m)`` of ``m`` valid ones, at least one if any).
    rng : numpy.random.Generator
        Source of the draw (without replacement).

    Returns
    -------
    ndarray of bool, shape (n,)
        The masked positions (a subset of ``valid``).

    Raises
    ------
    ValueError
        If ``fraction`` is not in ``(0, 1]``.

    See Also
    --------
    LiftAccumulator.add : The masked pass takes these positions.
    theorycheck.realdata.pipeline.masked_lift_statistics : Masks 15% of each window.

    References
    ----------
    SPEC §11.9 (the ``masked`` definition).

    Examples
    --------
    >>> from theorycheck.realdata.lifts import mask_positions
    >>> valid = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    >>> m = mask_positions(valid, 0.5, np.random.default_rng(0))
    >>> int(m.sum()), bool(np.all(valid[m]))  # half of the 6 valid positions, all valid
    (3, True)
    """
    fraction = check_real("fraction", fraction, low=0.0, high=1.0, low_open=True)
    idx = np.flatnonzero(valid)
    out = np.zeros(len(valid), dtype=bool)
    if idx.size:
        k = max(1, int(round(fraction * idx.size)))
        out[rng.choice(idx, size=k, replace=False)] = True
    return out


@dataclass
class LiftStats:
    """Pooled lifts of one pass (text or masked queries), per class set and normalisation.

    Parameters
    ----------
    lifts : dict
        ``lifts[set][norm]`` (``norm`` in :data:`NORMALISATIONS`) is a dict of ``(L, H)`` arrays ``same_topic``,
        ``different_topic``, ``gap``, ``ratio``, ``(L, H, 2)`` ``gap_ci``, ``ratio_ci``, and head means
        ``mean_gap``, ``mean_ratio`` with ``mean_gap_ci``, ``mean_ratio_ci`` (bootstrap over windows).
    counts : dict
        ``counts[set]``: the ``[same, different]`` pair counts.
    own_word : ndarray, shape (L, H)
        Mean attention of a topic-token query on the other copies of its word.
    own_position : ndarray, shape (L, H)
        Mean attention of a topic-token query on its own position.
    n_queries : int
        The topic-token queries.
    n_windows : int
        The windows added.

    See Also
    --------
    LiftAccumulator : Makes it.
    theorycheck.realdata.attention_theory.lift_comparison : Compares it with the theory's lifts.
    theorycheck.realdata.stats.AttentionStats : The ``all_keys`` lift by pair class.

    References
    ----------
    SPEC §11.9.

    Examples
    --------
    Attention half on the own position, half uniform: ``all_keys`` lifts are 0.5, ``excl_own`` renormalises to 1:

    >>> from theorycheck.realdata.lifts import LiftAccumulator
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> acc = LiftAccumulator(n_layers=1, n_heads=1, memberships={"topic_sets": M})
    >>> A = 0.5 * np.eye(6) + 0.5 / 6
    >>> acc.add(A[None, None], np.array([0, 1, 2, 3, 0, 2]), np.ones(6, dtype=bool))
    >>> ls = acc.result(n_boot=10, seed=0)
    >>> d = ls.lifts["topic_sets"]
    >>> d["all_keys"]["same_topic"], d["excl_own"]["same_topic"], d["excl_own"]["ratio"]
    (array([[0.5]]), array([[1.]]), array([[1.]]))
    >>> round(float(ls.own_position[0, 0]), 6), round(0.5 + 0.5 / 6, 6)
    (0.583333, 0.583333)
    >>> sorted(ls.summary())
    ['counts', 'lifts', 'n_queries', 'n_windows', 'own_position', 'own_word']
    """

    lifts: dict
    counts: dict
    own_word: np.ndarray
    own_position: np.ndarray
    n_queries: int
    n_windows: int

    def summary(self) -> dict:
        """JSON-ready: every array as nested lists, plus the head mean and maximum of the shares."""
        out: dict = {"n_windows": self.n_windows, "n_queries": self.n_queries,
                     "counts": {k: [int(c) for c in v] for k, v in self.counts.items()}}  # fmt: skip
        for key, arr in (("own_word", self.own_word), ("own_position", self.own_position)):
            out[key] = {"heads": arr.tolist(), "mean": float(np.mean(arr)), "max": float(np.max(arr))}
        out["lifts"] = {
            s: {m: {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()} for m, d in per.items()}
            for s, per in self.lifts.items()
        }
        return out


@dataclass
class LiftAccumulator:
    """Accumulates :func:`window_lift_sums` over windows (bootstrap-ready).

    :meth:`add` takes one window (text, or with masked queries); :meth:`result` pools the sums over windows (sums
    of pair lifts over sums of pair counts) with a percentile bootstrap over windows, gap and ratio from the same
    replicates.

    Parameters
    ----------
    n_layers, n_heads : int, >= 1
        Layers ``L`` and heads per layer ``H`` of the attention tensors to be added.
    memberships : dict of str to ndarray
        Class-set name -> topic sets ``(vocab_size, K)`` (bool); all must give topics to the same tokens (the topic
        tokens).

    Raises
    ------
    ValueError
        If ``n_layers < 1``, ``n_heads < 1``, ``memberships`` is empty or not a dict, or its class sets give topics
        to different tokens; :meth:`add` if the shapes disagree or a masked position is not valid.

    See Also
    --------
    LiftStats : The result.
    theorycheck.realdata.stats.AttentionAccumulator : The ``all_keys`` statistic with the no-topic and
        top-co-occurring classes.
    theorycheck.realdata.theory_lifts.sampled_window_lifts : Applies it to the theory's own attention.

    References
    ----------
    SPEC §11.9 (the definitions ``all_keys``, ``excl_own``, ``masked``).

    Examples
    --------
    A masked pass: the query at position 0 hides word 0 (shown as token 3, no topic); uniform attention gives
    lift 1:

    >>> from theorycheck.realdata.lifts import LiftAccumulator
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    >>> acc = LiftAccumulator(n_layers=1, n_heads=1, memberships={"topic_sets": M})
    >>> words, masked = np.array([0, 1, 2, 3, 0, 2]), np.array([1, 0, 0, 0, 0, 0], dtype=bool)
    >>> shown = np.where(masked, 3, words)
    >>> acc.add(np.full((1, 1, 6, 6), 1 / 6), shown, np.ones(6, dtype=bool), masked=masked, hidden_ids=words)
    >>> ls = acc.result(n_boot=10, seed=0)
    >>> ls.counts["topic_sets"], ls.lifts["topic_sets"]["excl_own"]["same_topic"]  # keys: 1 same, 2 different
    (array([1., 2.]), array([[1.]]))
    """

    n_layers: int
    n_heads: int
    memberships: dict
    _num: dict = field(default_factory=dict, init=False, repr=False)
    _cnt: dict = field(default_factory=dict, init=False, repr=False)
    _share: list = field(default_factory=list, init=False, repr=False)
    _nq: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        self.n_layers = check_int("n_layers", self.n_layers, low=1)
        self.n_heads = check_int("n_heads", self.n_heads, low=1)
        if not isinstance(self.memberships, dict) or not self.memberships:
            raise ValueError("memberships must be a non-empty dict of name -> (vocab_size, K) bool arrays")
        Ms = {k: S._check_membership(v) for k, v in self.memberships.items()}
        first = next(iter(Ms.values()))
        self._topic = first.any(axis=1)
        for k, M in Ms.items():
            if M.shape[0] != first.shape[0] or not np.array_equal(M.any(axis=1), self._topic):
                raise ValueError(f"memberships[{k!r}] must give topics to the same tokens as the first class set")
        self.memberships = Ms
        self._num = {k: [] for k in Ms}
        self._cnt = {k: [] for k in Ms}

    def add(self, attentions, ids, valid, *, masked=None, hidden_ids=None) -> None:
        """Add one window: ``attentions`` ``(L, H, n, n)``, the shown ``ids`` and the ``valid`` positions (as
        :meth:`.stats.AttentionAccumulator.add`). Text: queries and class keys are the valid positions. Masked
        pass: ``masked`` bool ``(n,)`` the positions shown as [MASK] (the queries) and ``hidden_ids`` the words
        they hide; class keys are the valid unmasked positions."""
        V = self._topic.size
        ids = S._check_ids("ids", ids, V)
        n = ids.size
        A = np.asarray(attentions)
        if A.shape != (self.n_layers, self.n_heads, n, n):
            raise ValueError(f"attentions must have shape {(self.n_layers, self.n_heads, n, n)}, got {A.shape}")
        valid = np.asarray(valid, dtype=bool)
        if valid.shape != (n,):
            raise ValueError(f"valid must have shape ({n},), got {valid.shape}")
        if masked is None:
            queries, keys, qids = valid, valid, ids
        else:
            masked = np.asarray(masked, dtype=bool)
            qids = S._check_ids("hidden_ids", hidden_ids, V)
            if masked.shape != (n,) or qids.shape != (n,):
                raise ValueError(f"masked and hidden_ids must have shape ({n},), got {masked.shape}, {qids.shape}")
            if np.any(masked & ~valid):
                raise ValueError("masked positions must be valid positions")
            queries, keys = masked, valid & ~masked
            qids = np.where(masked, qids, ids)
        num, cnt, share, nq = window_lift_sums(
            A.reshape(self.n_layers * self.n_heads, n, n), ids, qids, queries, keys, self.memberships, self._topic
        )
        for k in self.memberships:
            self._num[k].append(num[k])
            self._cnt[k].append(cnt[k])
        self._share.append(share)
        self._nq.append(nq)

    def result(self, *, n_boot: int = 200, level: float = 0.95, rng=None, seed=None) -> LiftStats:
        """Pooled lifts, gaps, ratios and shares with percentile bootstrap intervals over windows."""
        if not self._share:
            raise ValueError("no window was added")
        n_boot = check_int("n_boot", n_boot, low=10)
        rng = check_rng(rng, seed)
        L, H = self.n_layers, self.n_heads
        W = S.bootstrap_weights(len(self._share), n_boot, rng)  # one set of replicates for every statistic
        lifts, counts = {}, {}
        for k in self.memberships:
            num = np.stack(self._num[k])  # (S, 2, LH, 2)
            cnt = np.stack(self._cnt[k])  # (S, 2)
            counts[k] = cnt.sum(axis=0)
            lifts[k] = {m: _pooled(num[:, j], cnt, W, level, (L, H)) for j, m in enumerate(NORMALISATIONS)}
        sh = np.stack(self._share).sum(axis=0)  # (LH, 2)
        nq = int(sum(self._nq))
        with np.errstate(invalid="ignore", divide="ignore"):
            own_word, own_pos = (sh[:, 0] / nq).reshape(L, H), (sh[:, 1] / nq).reshape(L, H)
        return LiftStats(lifts, counts, own_word, own_pos, nq, len(self._share))


def _pooled(num, cnt, W, level, shape) -> dict:
    """``num`` ``(S, LH, 2)``, ``cnt`` ``(S, 2)`` -> lifts, gap, ratio and their window-bootstrap intervals."""
    with np.errstate(invalid="ignore", divide="ignore"):
        lift = num.sum(axis=0) / cnt.sum(axis=0)  # (LH, 2)
        b = np.einsum("bs,shc->bhc", W, num) / (W @ cnt)[:, None, :]  # (B, LH, 2)
    same, diff = lift[:, 0], lift[:, 1]
    bg, br = b[..., 0] - b[..., 1], b[..., 0] / b[..., 1]
    ok = np.all(np.isfinite(bg) & np.isfinite(br), axis=1)
    bg, br = bg[ok], br[ok]
    lo, hi = (1 - level) / 2, (1 + level) / 2
    if bg.shape[0]:
        gq, rq = np.quantile(bg, [lo, hi], axis=0), np.quantile(br, [lo, hi], axis=0)
        mg, mr = S.percentile_ci(bg.mean(axis=1), level), S.percentile_ci(br.mean(axis=1), level)
    else:
        gq = rq = np.full((2, same.size), np.nan)
        mg = mr = (float("nan"), float("nan"))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = same / diff
    return {
        "same_topic": same.reshape(shape), "different_topic": diff.reshape(shape),
        "gap": (same - diff).reshape(shape), "ratio": ratio.reshape(shape),
        "gap_ci": np.stack(gq, axis=-1).reshape(shape + (2,)), "ratio_ci": np.stack(rq, axis=-1).reshape(shape + (2,)),
        "mean_gap": float(np.mean(same - diff)), "mean_gap_ci": list(mg),
        "mean_ratio": float(np.mean(ratio)), "mean_ratio_ci": list(mr),
    }  # fmt: skip
