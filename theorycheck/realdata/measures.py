"""The statistics of the real-data experiment on a prepared corpus (SPEC §5.4-5.5): embedding pair classes, the
topic-specificity sweep, co-occurrence, attention by pair class, and the co-occurrence signal of a planted corpus.

Part of the experiment of :mod:`.pipeline` (which builds the :class:`Prepared` inputs and re-exports every name here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models import TopicModel
from ..sampling import sample_documents
from . import stats as S
from .corpus import Corpus
from .encoder import NumpyBert
from .lifts import LiftAccumulator
from .mapping import TokenTopics, map_to_tokens
from .tokenizer import WordPieceTokenizer
from .topics import TopicFit, WordTopics, assign_topics

__all__ = [
    "Prepared",
    "embedding_statistics",
    "specificity_sweep",
    "cooccurrence_statistics",
    "attention_statistics",
    "synthetic_signal",
]


@dataclass
class Prepared:
    """Loaded and fitted inputs shared by the statistics (see :func:`~theorycheck.realdata.pipeline.prepare`).

    Parameters
    ----------
    corpus : Corpus
        The documents.
    docs_words : list of list of str
        Content words of each document (:func:`theorycheck.realdata.corpus.content_words`).
    stop : frozenset of str
        Stop words.
    fit : TopicFit
        The seeded LDA fit.
    word_topics : WordTopics
        Topics of the words (:func:`theorycheck.realdata.topics.assign_topics`).
    token_topics : TokenTopics
        The same on token ids (:func:`theorycheck.realdata.mapping.map_to_tokens`); ``vocab_membership`` is
        the bool ``(vocab_size, K)`` membership of the statistics.
    tokenizer : WordPieceTokenizer
        The model's tokenizer.
    model : NumpyBert
        The encoder.
    content_mask : ndarray of bool, shape (vocab_size,)
        :func:`~theorycheck.realdata.pipeline.content_token_mask`.
    windows : list of Window
        :func:`~theorycheck.realdata.pipeline.make_windows` of the corpus.
    timing : dict
        Wall-clock seconds ``corpus_s``, ``lda_s``, ``tokenize_s``.

    See Also
    --------
    theorycheck.realdata.pipeline.prepare : Builds it.
    embedding_statistics : Reads the model's embeddings and the content mask.
    cooccurrence_statistics : Reads the windows.

    References
    ----------
    SPEC §5.4 (corpus, LDA, word-topic rule, token mapping).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, prepare
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64,
    ...                      n_boot=10, seed=1)
    >>> prep = prepare(cfg, corpus=corpus)
    >>> len(prep.corpus), prep.fit.n_topics, prep.token_topics.token_ids.size, len(prep.windows)
    (9, 3, 12, 27)
    >>> sorted(prep.timing)
    ['corpus_s', 'lda_s', 'tokenize_s']
    """

    corpus: Corpus
    docs_words: list
    stop: frozenset
    fit: TopicFit
    word_topics: WordTopics
    token_topics: TokenTopics
    tokenizer: WordPieceTokenizer
    model: NumpyBert
    content_mask: np.ndarray
    windows: list
    timing: dict


def embedding_statistics(prep: Prepared, membership, *, n_no_topic: int, n_boot: int, rng, n_values: int = 20000):
    """Pair-class statistics of the input embeddings over the topic tokens and sampled no-topic tokens.

    The pool is every topic token plus ``n_no_topic`` content tokens without a topic drawn without replacement
    (all of them when there are fewer); :func:`theorycheck.realdata.stats.embedding_pair_stats` gives the mean
    dot product and cosine ``s(E_a, E_b)`` over the ordered pairs of each class, with a token bootstrap, and the
    headline gap ``mean(same_topic) - mean(different_topic)``. Also returns up to ``n_values`` class values per
    metric for the figures.

    Parameters
    ----------
    prep : Prepared
        Gives the model's word embeddings ``E`` (rows = token ids) and the content mask.
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the token ids (``prep.token_topics.vocab_membership``).
    n_no_topic : int, >= 0
        No-topic content tokens added to the pool.
    n_boot : int, >= 10
        Bootstrap replicates (tokens resampled).
    rng : numpy.random.Generator
        Draws the no-topic tokens, the bootstrap and the value subsample.
    n_values : int, default 20000
        Maximum values kept per class and metric for the figures (a seeded subsample).

    Returns
    -------
    stats : dict
        ``{"dot": {class: PairStats}, "cosine": {...}, "gap": {"dot": PairStats, "cosine": PairStats}}``
        (:func:`theorycheck.realdata.stats.embedding_pair_stats`).
    values : dict
        ``values[metric][class]``: 1-d array of the pair values (metric ``"cosine"`` or ``"dot"``; class
        ``same_token`` holds the pool's own similarities).
    n_picked : int
        The no-topic tokens actually added.

    See Also
    --------
    theorycheck.realdata.stats.embedding_pair_stats : The class statistics and their bootstrap.
    specificity_sweep : The same gap as fewer words get a topic.
    theorycheck.realdata.plots.similarity_distributions : Draws ``values``.

    References
    ----------
    SPEC §5.4 (embedding statistic: dot and cosine by pair class, headline same minus different topic).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, prepare
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64,
    ...                      n_boot=10, seed=1)
    >>> prep = prepare(cfg, corpus=corpus)
    >>> from theorycheck.realdata.pipeline import embedding_statistics
    >>> M = prep.token_topics.vocab_membership
    >>> stats, values, n_picked = embedding_statistics(prep, M, n_no_topic=5, n_boot=10, rng=np.random.default_rng(0))
    >>> n_picked, {c: s.n_pairs for c, s in stats["cosine"].items()}  # 17 tokens: 12 topic + 5 no-topic
    (5, {'same_token': 17, 'same_topic': 36, 'different_topic': 96, 'no_topic': 140})
    >>> bool(np.allclose(values["cosine"]["same_token"], 1.0)), stats["gap"]["cosine"].mean > 0
    (True, True)
    """
    has = membership.any(axis=1)
    topic_ids = np.flatnonzero(has)
    no_topic = np.flatnonzero(prep.content_mask & ~has)
    pick = rng.choice(no_topic, size=min(n_no_topic, no_topic.size), replace=False) if no_topic.size else no_topic
    pool = np.concatenate([topic_ids, np.sort(pick)])
    E = prep.model.word_embeddings.astype(np.float64)
    emb = S.embedding_pair_stats(E, membership, pool, n_boot=n_boot, rng=rng)
    X = E[pool]
    G = X @ X.T
    nrm = np.sqrt(np.diag(G))
    cos = G / np.outer(nrm, nrm)
    cls = S.pair_classes(pool, membership)
    np.fill_diagonal(cls, -1)
    values: dict[str, dict[str, np.ndarray]] = {"cosine": {}, "dot": {}}
    for c, name in enumerate(S.CLASSES):
        sel = np.argwhere(cls == c) if name != "same_token" else np.stack([np.arange(pool.size)] * 2, 1)
        if len(sel) > n_values:
            sel = sel[rng.choice(len(sel), n_values, replace=False)]
        values["cosine"][name] = cos[sel[:, 0], sel[:, 1]]
        values["dot"][name] = G[sel[:, 0], sel[:, 1]]
    return emb, values, int(pick.size)


def specificity_sweep(prep: Prepared, fractions, *, n_boot: int, rng, max_pool: int = 2000) -> list[dict]:
    """Embedding same-minus-different-topic gap as a function of how many words get a topic.

    For every fraction ``f``, only each topic's ``ceil(f V')`` most probable words get it (``"top_fraction"``
    rule); is the effect stronger for topic-specific words (SPEC §5.4)? Pool = the topic tokens only, a seeded
    random subset of ``max_pool`` of them when there are more (memory is quadratic in the pool).

    Parameters
    ----------
    prep : Prepared
        Gives the LDA fit, stop words, tokenizer and embeddings.
    fractions : sequence of float, each in (0, 1]
        The ``top_fraction`` values.
    n_boot : int, >= 10
        Bootstrap replicates.
    rng : numpy.random.Generator
        Draws the pool subsample and the bootstrap.
    max_pool : int, default 2000
        Largest pool of topic tokens.

    Returns
    -------
    list of dict
        One row per fraction: ``top_fraction``, ``topic_tokens`` and, when there are at least 2 topic tokens,
        ``dot`` and ``cosine``: ``{"gap", "ci_low", "ci_high", "same_topic", "different_topic"}`` with
        ``gap = same_topic - different_topic`` (mean over pairs) and its token-bootstrap CI;
        ``pool_subsampled_to`` when the pool was subsampled.

    See Also
    --------
    embedding_statistics : The gap at the configured rule.
    theorycheck.realdata.topics.assign_topics : The ``"top_fraction"`` rule.
    theorycheck.realdata.plots.specificity_gap : Draws the rows.

    References
    ----------
    SPEC §5.4 (qualitative claim: the gap is stronger for topic-specific words; the sweep 0.25% ... 5%).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, prepare
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64,
    ...                      n_boot=10, seed=1)
    >>> prep = prepare(cfg, corpus=corpus)
    >>> from theorycheck.realdata.pipeline import specificity_sweep
    >>> rows = specificity_sweep(prep, (0.1, 0.3), n_boot=10, rng=np.random.default_rng(0))
    >>> [(r["top_fraction"], r["topic_tokens"]) for r in rows]  # ceil(0.1 * 12) = 2 and 4 words per topic
    [(0.1, 6), (0.3, 12)]
    >>> c = rows[1]["cosine"]
    >>> round(c["gap"] - (c["same_topic"] - c["different_topic"]), 12), c["ci_low"] <= c["gap"] <= c["ci_high"]
    (0.0, True)
    """
    E = prep.model.word_embeddings.astype(np.float64)
    out = []
    for f in fractions:
        wt = assign_topics(prep.fit, method="top_fraction", top_fraction=f, stop=prep.stop)
        tt = map_to_tokens(wt, prep.tokenizer)
        row: dict[str, Any] = {"top_fraction": float(f), "topic_tokens": int(tt.token_ids.size)}
        if tt.token_ids.size >= 2:
            pool = tt.token_ids
            if pool.size > max_pool:
                pool = np.sort(rng.choice(pool, size=max_pool, replace=False))
                row["pool_subsampled_to"] = int(max_pool)
            emb = S.embedding_pair_stats(E, tt.vocab_membership, pool, n_boot=n_boot, rng=rng)
            for m in ("dot", "cosine"):
                g = emb["gap"][m]
                row[m] = {
                    "gap": g.mean,
                    "ci_low": g.ci_low,
                    "ci_high": g.ci_high,
                    "same_topic": emb[m]["same_topic"].mean,
                    "different_topic": emb[m]["different_topic"].mean,
                }
        out.append(row)
    return out


def cooccurrence_statistics(prep: Prepared, membership, *, n_cooccur: int):
    """Co-occurrence counts over all windows, the top topic-token pairs and the co-occurrence topic signal.

    ``X_ab`` counts the ordered pairs of valid positions holding ``a`` and ``b`` in the same window; the
    ``n_cooccur`` unordered topic-token pairs with the largest counts are returned with the fraction of them that
    share a topic, and :func:`theorycheck.realdata.stats.cooccurrence_lift` gives
    ``log(lift_same_topic / lift_different_topic)`` with ``lift_c`` observed over shuffled-corpus expected counts.

    Parameters
    ----------
    prep : Prepared
        Gives the windows and the vocabulary size.
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the token ids.
    n_cooccur : int, >= 1
        Size ``N`` of the most-co-occurring pair set.

    Returns
    -------
    pairs : ndarray of int64, shape (m, 2)
        The ``m <= n_cooccur`` most co-occurring topic-token pairs ``a < b``, most frequent first.
    summary : dict
        ``n_pairs`` (``m``), ``min_count`` (the smallest ``X_ab`` among them, NaN if none),
        ``fraction_same_topic`` (NaN if none) and ``lift_real`` (``same_topic``, ``different_topic``,
        ``signal``).

    Raises
    ------
    ValueError
        If fewer than two topic tokens or two valid positions occur (the signal is undefined).

    See Also
    --------
    theorycheck.realdata.stats.cooccurrence_matrix : The counts ``X``.
    theorycheck.realdata.stats.top_cooccurring_pairs : The top pairs.
    synthetic_signal : The same signal on planted LDA data.

    References
    ----------
    SPEC §5.5 (co-occurrence comparison and topic signal).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, prepare
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64,
    ...                      n_boot=10, seed=1)
    >>> prep = prepare(cfg, corpus=corpus)
    >>> from theorycheck.realdata.pipeline import cooccurrence_statistics
    >>> pairs, summary = cooccurrence_statistics(prep, prep.token_topics.vocab_membership, n_cooccur=5)
    >>> [[prep.tokenizer.id_to_token(i) for i in p] for p in pairs]
    [['car', 'ship'], ['pig', 'cow'], ['band', 'drum'], ['ship', 'van'], ['cat', 'pig']]
    >>> summary["fraction_same_topic"], summary["lift_real"]["different_topic"], summary["lift_real"]["signal"]
    (1.0, 0.0, inf)

    Each document uses one topic, so different-topic words never share a window: the signal is infinite.
    """
    W = prep.windows
    X, counts, pp = S.cooccurrence_matrix(
        [w.ids for w in W], [w.valid for w in W], prep.tokenizer.vocab_size, keep=membership.any(axis=1)
    )
    pairs, pair_counts = S.top_cooccurring_pairs(X, membership.any(axis=1), n_cooccur)
    if len(pairs):
        shared = (membership[pairs[:, 0]] & membership[pairs[:, 1]]).any(axis=1)
        frac_same = float(shared.mean())
    else:
        frac_same = float("nan")
    return pairs, {
        "n_pairs": int(len(pairs)),
        "min_count": float(pair_counts.min()) if len(pairs) else float("nan"),
        "fraction_same_topic": frac_same,
        "lift_real": S.cooccurrence_lift(X, counts, pp, membership),
    }


def attention_statistics(
    encoded, membership, pairs, *, n_layers: int, n_heads: int, n_boot: int, rng, lifts: LiftAccumulator | None = None
) -> S.AttentionStats:
    """Attention lift by pair class, per layer and head, over encoded windows.

    Accumulates :class:`theorycheck.realdata.stats.AttentionAccumulator` over ``(window, attentions)`` pairs: the
    mean of the length-normalised weight ``n A[i, j]`` (1 under uniform attention) over the valid position pairs
    of each class, with a bootstrap over windows of the same-minus-different-topic gap; given ``lifts``, it also
    receives every window (the text-pass lifts of :mod:`.lifts`).

    Parameters
    ----------
    encoded : iterable of (Window, ndarray)
        Windows and their attentions ``(L, H, n, n)`` (:func:`~theorycheck.realdata.pipeline.encode_windows`).
    membership : ndarray of bool, shape (vocab_size, K)
        Topic sets of the token ids.
    pairs : ndarray of int, shape (m, 2), or None
        Token-id pairs of the ``top_cooccurring`` class.
    n_layers : int, >= 1
        ``L``.
    n_heads : int, >= 1
        ``H``.
    n_boot : int, >= 10
        Bootstrap replicates (windows resampled).
    rng : numpy.random.Generator
        The bootstrap's generator.
    lifts : LiftAccumulator, optional
        Also fed each window.

    Returns
    -------
    AttentionStats
        ``mean_lift`` ``(L, H, C)`` per class of :data:`theorycheck.realdata.stats.ATTN_CLASSES`, ``counts``,
        ``gap`` and its CI ``gap_ci``.

    Raises
    ------
    ValueError
        If ``encoded`` is empty, or a window's attentions or ids do not match ``(n_layers, n_heads, n, n)`` and
        the vocabulary.

    See Also
    --------
    theorycheck.realdata.stats.AttentionAccumulator : The accumulation and bootstrap.
    theorycheck.realdata.pipeline.encode_windows : Gives ``encoded``.
    theorycheck.realdata.plots.attention_gap_heatmap : Draws the gap.

    References
    ----------
    SPEC §5.4 (attention statistic, length-normalised ``n A[i, j]``, window bootstrap).

    Examples
    --------
    Under uniform attention every non-empty class has lift exactly 1 (tokens 1, 2 share topic 0, tokens 3, 4
    topic 1, token 5 has none):

    >>> from theorycheck.realdata.pipeline import Window, attention_statistics
    >>> M = np.zeros((6, 2), bool)
    >>> M[[1, 2], 0] = M[[3, 4], 1] = True
    >>> rng = np.random.default_rng(0)
    >>> windows = [Window(rng.integers(1, 6, size=8), np.ones(8, bool), d) for d in range(4)]
    >>> encoded = [(w, np.full((1, 2, 8, 8), 1 / 8)) for w in windows]
    >>> att = attention_statistics(encoded, M, None, n_layers=1, n_heads=2, n_boot=10, rng=rng)
    >>> att.classes
    ('same_token', 'same_topic', 'different_topic', 'no_topic', 'top_cooccurring')
    >>> np.round(att.mean_lift[0, 0], 12), np.round(att.gap, 12)
    (array([ 1.,  1.,  1.,  1., nan]), array([[0., 0.]]))
    """
    acc = S.AttentionAccumulator(n_layers, n_heads, membership, pairs)
    for w, a in encoded:
        acc.add(a, w.ids, w.valid)
        if lifts is not None:
            lifts.add(a, w.ids, w.valid)
    return acc.result(n_boot=n_boot, rng=rng)


def synthetic_signal(T: int, v: int, alpha: float, n_docs: int, *, seed: int = 0) -> dict:
    """Co-occurrence topic signal (:func:`stats.cooccurrence_lift`) of a planted LDA corpus.

    Documents from :func:`theorycheck.sampling.sample_documents` (Dirichlet(alpha) prior,
    N uniform in [100, 150], SPEC §1.2); word ``w`` belongs to topic ``(w - 1) // v``. Every position is valid.

    Parameters
    ----------
    T : int, T >= 2
        Topics.
    v : int, v >= 1
        Words per topic (vocabulary ``T v`` + the mask token 0, never drawn).
    alpha : float, alpha > 0
        Dirichlet parameter of the topic proportions (small = few topics per document).
    n_docs : int, n_docs >= 1
        Documents.
    seed : int, default 0
        Seed of the corpus.

    Returns
    -------
    dict
        ``same_topic``, ``different_topic``: ``lift_c = sum_{(a,b) in c} X_ab / sum_{(a,b) in c} E_ab``,
        observed over expected co-occurrences with ``E_ab = P c_a c_b / (N (N - 1))`` (SPEC §5.5);
        ``signal = log(lift_same_topic / lift_different_topic)`` (0 without topic structure); and the
        arguments ``T``, ``v``, ``alpha``, ``n_docs``, ``seed``.

    Raises
    ------
    ValueError
        If ``T``, ``v``, ``alpha`` or ``n_docs`` is out of range (:class:`theorycheck.TopicModel`,
        :func:`theorycheck.sampling.sample_documents`).

    See Also
    --------
    cooccurrence_statistics : The same signal on the real corpus.
    theorycheck.realdata.stats.cooccurrence_lift : The signal's formula.
    theorycheck.sampling.sample_documents : The planted documents.

    References
    ----------
    SPEC §5.5 (co-occurrence topic signal, on Wikipedia and on planted synthetic LDA data), §1.2 (the
    document law).

    Examples
    --------
    Planted topics: same-topic words co-occur more than chance, different-topic words less, so the signal
    is positive:

    >>> from theorycheck.realdata.pipeline import synthetic_signal
    >>> s = synthetic_signal(3, 4, 0.1, 20, seed=0)
    >>> s["same_topic"] > 1 > s["different_topic"], round(s["signal"], 6)
    (True, 2.101117)
    >>> round(float(np.log(s["same_topic"] / s["different_topic"])) - s["signal"], 12)
    0.0
    """
    tm = TopicModel(T=T, v=v, prior="dirichlet", alpha=alpha)
    docs = sample_documents(tm, n_docs, (100, 150), seed=seed)
    seqs = [docs.tokens[i, : docs.lengths[i]] for i in range(n_docs)]
    valid = [np.ones(s.size, dtype=bool) for s in seqs]
    M = np.zeros((tm.V1, T), dtype=bool)
    w = np.arange(1, tm.V1)
    M[w, tm.topic_of(w)] = True
    X, counts, pp = S.cooccurrence_matrix(seqs, valid, tm.V1)
    out = S.cooccurrence_lift(X, counts, pp, M)
    out.update(T=T, v=v, alpha=alpha, n_docs=n_docs, seed=seed)
    return out
