"""LDA topics and the paper's word-to-topic assignment (SPEC §5.4).

:func:`fit_lda` fits a seeded LDA (scikit-learn's variational batch LDA, or gensim's
``LdaModel``) to tokenised documents and returns the topic-word matrix ``phi`` (rows sum to 1).
:func:`assign_topics` turns it into a word -> set-of-topics map, with the two rules of the
official code:

* ``"top_fraction"``: for every topic, drop stop words and keep the ``top_fraction`` most probable
  words; a word's topics are the topics whose kept lists contain it (zero, one or several);
* ``"threshold"``: normalise a word's topic weights ``phi[:, w] / sum_t phi[t, w]`` (gensim's
  ``get_term_topics`` normalised), keep topics whose weight is ``>= threshold``, at most
  ``topics_per_word`` of them (the most likely first). Words with no such topic get none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix

from .._validate import check_choice, check_int, check_real
from ._deps import require
from .config import BACKENDS, METHODS

__all__ = ["TopicFit", "WordTopics", "fit_lda", "assign_topics"]


@dataclass(frozen=True)
class TopicFit:
    """A fitted topic model.

    Attributes
    ----------
    vocab : tuple of str, length V
    phi : ndarray, shape (K, V)
        Topic-word probabilities ``p(w | t)``; rows sum to 1.
    backend : str
    seed : int
    """

    vocab: tuple
    phi: np.ndarray
    backend: str
    seed: int

    @property
    def n_topics(self) -> int:
        return self.phi.shape[0]

    def top_words(self, t: int, n: int = 10) -> list[str]:
        """The ``n`` most probable words of topic ``t``."""
        t = check_int("t", t, low=0, high=self.n_topics - 1)
        order = np.argsort(-self.phi[t], kind="stable")[:n]
        return [self.vocab[i] for i in order]


@dataclass(frozen=True)
class WordTopics:
    """Word -> topics map.

    Attributes
    ----------
    words : tuple of str, length n
        Words that carry at least one topic.
    membership : ndarray of bool, shape (n, K)
        ``membership[i, t]`` iff word ``words[i]`` belongs to topic ``t``.
    """

    words: tuple
    membership: np.ndarray
    _index: dict[str, int] = field(init=False, repr=False, compare=False)  # word -> row, set by __post_init__

    def __post_init__(self):
        m = np.asarray(self.membership, dtype=bool)
        if m.ndim != 2 or m.shape[0] != len(self.words):
            raise ValueError(f"membership must have shape ({len(self.words)}, K), got {m.shape}")
        if len(set(self.words)) != len(self.words):
            raise ValueError("words must be distinct")
        object.__setattr__(self, "membership", m)
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.words)})

    @property
    def n_topics(self) -> int:
        return self.membership.shape[1]

    def topics(self, word: str) -> frozenset:
        """Topics of ``word`` (empty if it has none)."""
        i = self._index.get(word)
        return frozenset() if i is None else frozenset(np.flatnonzero(self.membership[i]).tolist())

    def __contains__(self, word) -> bool:
        return word in self._index


def fit_lda(
    docs,
    n_topics: int,
    *,
    seed: int = 0,
    backend: str = "sklearn",
    min_df: int = 2,
    max_df: float = 0.5,
    max_iter: int = 30,
    passes: int = 5,
) -> TopicFit:
    """Fit LDA with a fixed seed to tokenised documents.

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents (e.g. :func:`theorycheck.realdata.corpus.content_words`).
    n_topics : int
        ``K >= 2``.
    seed : int
        Same seed, same topics (bit-identical for the sklearn backend).
    backend : {"sklearn", "gensim"}
        ``"sklearn"``: ``LatentDirichletAllocation(learning_method="batch")``, ``phi`` = normalised
        ``components_``. ``"gensim"``: ``LdaModel`` (bag of words), ``phi = get_topics()``.
    min_df, max_df
        Keep words in at least ``min_df`` documents and at most a ``max_df`` fraction of them.
    max_iter, passes
        Iterations (sklearn) / passes (gensim).

    Returns
    -------
    TopicFit
    """
    n_topics = check_int("n_topics", n_topics, low=2)
    seed = check_int("seed", seed, low=0)
    check_choice("backend", backend, BACKENDS)
    min_df = check_int("min_df", min_df, low=1)
    max_df = check_real("max_df", max_df, low=0.0, high=1.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, low=1)
    passes = check_int("passes", passes, low=1)
    docs = [list(d) for d in docs]
    if not docs:
        raise ValueError("docs must hold at least one document")
    if not all(isinstance(w, str) for d in docs for w in d):
        raise TypeError("docs must be a sequence of sequences of str")
    vocab = _vocabulary(docs, min_df, max_df)
    if len(vocab) < n_topics:
        raise ValueError(
            f"only {len(vocab)} words pass min_df={min_df}, max_df={max_df}; need at least n_topics={n_topics}"
        )
    if backend == "sklearn":
        phi = _fit_sklearn(docs, vocab, n_topics, seed, max_iter)
    else:
        phi = _fit_gensim(docs, vocab, n_topics, seed, passes)
    if not np.all(np.isfinite(phi)):
        raise RuntimeError("LDA returned non-finite topic-word probabilities")
    return TopicFit(tuple(vocab), np.ascontiguousarray(phi, dtype=np.float64), backend, seed)


def _vocabulary(docs, min_df: int, max_df: float) -> list[str]:
    """Sorted words found in at least ``min_df`` documents and at most a ``max_df`` fraction of them."""
    df: dict[str, int] = {}
    for d in docs:
        for w in set(d):
            df[w] = df.get(w, 0) + 1
    hi = max_df * len(docs)
    return sorted(w for w, c in df.items() if min_df <= c <= hi)


def _fit_sklearn(docs, vocab, n_topics: int, seed: int, max_iter: int) -> np.ndarray:
    """``phi`` from sklearn's batch variational LDA (normalised ``components_``)."""
    sk = require("sklearn.decomposition", "LDA topic fitting")
    index = {w: i for i, w in enumerate(vocab)}
    rows, cols = [], []
    for r, d in enumerate(docs):
        for w in d:
            j = index.get(w)
            if j is not None:
                rows.append(r)
                cols.append(j)
    X = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(docs), len(vocab)))
    X.sum_duplicates()
    lda = sk.LatentDirichletAllocation(
        n_components=n_topics, learning_method="batch", max_iter=max_iter, random_state=seed
    )
    lda.fit(X)
    return lda.components_ / lda.components_.sum(axis=1, keepdims=True)


def _fit_gensim(docs, vocab, n_topics: int, seed: int, passes: int) -> np.ndarray:
    """``phi`` from gensim's ``LdaModel`` on bags of words (``get_topics()``, renormalised)."""
    gm = require("gensim.models", "LDA topic fitting")
    index = {w: i for i, w in enumerate(vocab)}
    bows = []
    for d in docs:
        counts: dict[int, int] = {}
        for w in d:
            j = index.get(w)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        bows.append(sorted(counts.items()))
    lda = gm.LdaModel(
        corpus=bows,
        id2word=dict(enumerate(vocab)),
        num_topics=n_topics,
        passes=passes,
        random_state=seed,
        update_every=1,
    )
    phi = np.asarray(lda.get_topics(), dtype=np.float64)
    return phi / phi.sum(axis=1, keepdims=True)


def assign_topics(
    fit: TopicFit,
    *,
    method: str = "top_fraction",
    top_fraction: float = 0.01,
    threshold: float = 0.5,
    topics_per_word: int = 1,
    stop=frozenset(),
) -> WordTopics:
    """Assign topics to words (SPEC §5.4, both rules of the official code).

    Parameters
    ----------
    fit : TopicFit
    method : {"top_fraction", "threshold"}
    top_fraction : float in (0, 1]
        ``"top_fraction"``: each topic keeps its ``ceil(top_fraction * V')`` most probable words,
        ``V'`` = vocabulary size without stop words.
    threshold : float in (0, 1]
        ``"threshold"``: minimum normalised weight ``phi[t, w] / sum_s phi[s, w]``.
    topics_per_word : int >= 1
        ``"threshold"``: keep at most this many topics per word (most likely first).
    stop : collection of str
        Words never assigned a topic.

    Returns
    -------
    WordTopics
        Only words with at least one topic, in vocabulary order.
    """
    if not isinstance(fit, TopicFit):
        raise TypeError(f"fit must be a TopicFit, got {type(fit).__name__}")
    check_choice("method", method, METHODS)
    top_fraction = check_real("top_fraction", top_fraction, low=0.0, high=1.0, low_open=True)
    threshold = check_real("threshold", threshold, low=0.0, high=1.0, low_open=True)
    topics_per_word = check_int("topics_per_word", topics_per_word, low=1)
    stop = frozenset(stop)
    keep = np.array([w not in stop for w in fit.vocab], dtype=bool)
    K, V = fit.phi.shape
    member = np.zeros((K, V), dtype=bool)
    if method == "top_fraction":
        n_keep = max(1, math.ceil(top_fraction * int(keep.sum())))
        phi = np.where(keep[None, :], fit.phi, -np.inf)
        top = np.argsort(-phi, axis=1, kind="stable")[:, :n_keep]
        member[np.arange(K)[:, None], top] = True
        member &= keep[None, :]
    else:
        norm = fit.phi / fit.phi.sum(axis=0, keepdims=True)
        order = np.argsort(-norm, axis=0, kind="stable")[:topics_per_word]  # (k, V)
        cols = np.broadcast_to(np.arange(V), order.shape)
        ok = norm[order, cols] >= threshold
        member[order[ok], cols[ok]] = True
        member &= keep[None, :]
    has = np.asarray(member.any(axis=0))
    words = tuple(w for w, h in zip(fit.vocab, has) if h)
    return WordTopics(words, member[:, has].T.copy())
