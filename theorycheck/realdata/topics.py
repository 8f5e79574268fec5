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
    """A fitted topic model: the vocabulary and the topic-word matrix ``phi`` (SPEC §5.4).

    Parameters
    ----------
    vocab : tuple of str, length V
        The words, in the column order of ``phi``.
    phi : ndarray, shape (K, V)
        Topic-word probabilities ``p(w | t)``; rows sum to 1.
    backend : str
        The LDA implementation that fitted it (``"sklearn"`` or ``"gensim"``).
    seed : int
        The seed it was fitted with.

    Attributes
    ----------
    n_topics : int
        ``K``, the number of rows of ``phi``.

    See Also
    --------
    fit_lda : Fits one.
    assign_topics : Turns ``phi`` into a word -> topics map.

    References
    ----------
    SPEC §5.4 (the topics of the offline Wikipedia analog).

    Examples
    --------
    >>> from theorycheck.realdata.topics import TopicFit
    >>> phi = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.2, 0.6]])
    >>> fit = TopicFit(("cat", "dog", "norm", "matrix"), phi, "sklearn", 0)
    >>> fit.n_topics, fit.top_words(0, 2), fit.top_words(1, 2)
    (2, ['cat', 'dog'], ['matrix', 'norm'])
    """

    vocab: tuple
    phi: np.ndarray
    backend: str
    seed: int

    @property
    def n_topics(self) -> int:
        return self.phi.shape[0]

    def top_words(self, t: int, n: int = 10) -> list[str]:
        """The ``n`` most probable words of topic ``t`` (ties in vocabulary order).

        Parameters
        ----------
        t : int
            Topic, ``0 <= t < n_topics``.
        n : int, default 10
            Number of words.

        Returns
        -------
        list of str
            The words by decreasing ``phi[t, w]``.

        Raises
        ------
        ValueError
            ``t`` is outside ``[0, n_topics)``.
        """
        t = check_int("t", t, low=0, high=self.n_topics - 1)
        order = np.argsort(-self.phi[t], kind="stable")[:n]
        return [self.vocab[i] for i in order]


@dataclass(frozen=True)
class WordTopics:
    """Word -> topics map: which topics each word belongs to (zero, one or several; SPEC §5.4).

    Parameters
    ----------
    words : tuple of str, length n
        Distinct words (those :func:`assign_topics` gave at least one topic).
    membership : array_like of bool, shape (n, K)
        ``membership[i, t]`` iff word ``words[i]`` belongs to topic ``t`` (stored as a bool array).

    Attributes
    ----------
    n_topics : int
        ``K``.

    Raises
    ------
    ValueError
        ``membership`` does not have shape ``(len(words), K)`` or the words are not distinct.

    See Also
    --------
    assign_topics : Builds one from a :class:`TopicFit`.
    theorycheck.realdata.mapping.map_to_tokens : Carries the topics over to token ids.

    References
    ----------
    SPEC §5.4 (the word-to-topic rules of the official code).

    Examples
    --------
    >>> from theorycheck.realdata.topics import WordTopics
    >>> wt = WordTopics(("cat", "norm", "set"), [[True, False], [False, True], [True, True]])
    >>> wt.n_topics, sorted(wt.topics("set")), sorted(wt.topics("cat")), wt.topics("dog")
    (2, [0, 1], [0], frozenset())
    >>> "cat" in wt, "dog" in wt
    (True, False)
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
        """Topics of ``word`` (empty if it has none).

        Parameters
        ----------
        word : str
            Any word.

        Returns
        -------
        frozenset of int
            The topics ``t`` with ``membership[i, t]`` for ``word = words[i]``; empty for a word not in ``words``.
        """
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
    """Fit LDA with a fixed seed to tokenised documents (SPEC §5.4).

    Words are first filtered by document frequency (``min_df <= df(w) <= max_df * len(docs)``), then
    the seeded LDA gives the topic-word matrix ``phi`` (rows sum to 1).

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents (e.g. :func:`theorycheck.realdata.corpus.content_words`), at least one.
    n_topics : int
        Number of topics ``K >= 2``.
    seed : int, default 0
        Seed, ``>= 0``: same seed, same topics (bit-identical for the sklearn backend).
    backend : {"sklearn", "gensim"}, default "sklearn"
        ``"sklearn"``: ``LatentDirichletAllocation(learning_method="batch")``, ``phi`` = normalised
        ``components_``. ``"gensim"``: ``LdaModel`` (bag of words), ``phi = get_topics()``.
    min_df : int, default 2
        Keep words in at least ``min_df >= 1`` documents.
    max_df : float, default 0.5
        Keep words in at most a ``max_df`` fraction of the documents, ``0 < max_df <= 1``.
    max_iter : int, default 30
        Iterations of the sklearn backend, ``>= 1``.
    passes : int, default 5
        Passes of the gensim backend, ``>= 1``.

    Returns
    -------
    TopicFit
        The vocabulary (sorted words that passed the filter) and ``phi``, shape ``(n_topics, V)``.

    Raises
    ------
    ValueError
        A parameter is out of range, ``docs`` is empty, or fewer than ``n_topics`` words pass the filter.
    TypeError
        ``docs`` is not a sequence of sequences of str.
    RuntimeError
        The backend returned non-finite probabilities.

    See Also
    --------
    assign_topics : Words -> topics from the fitted ``phi``.
    TopicFit : The result.
    theorycheck.realdata.corpus.content_words : Tokenises the documents.

    References
    ----------
    SPEC §5.4 (the official code fits gensim's ``LdaModel``; ours a seeded LDA, 20 topics by default);
    Blei, Ng and Jordan, *Latent Dirichlet Allocation*, JMLR 2003.

    Examples
    --------
    Two planted topics: each document draws its words from one of two disjoint vocabularies; "the"
    is in every document (more than ``max_df``) and is dropped.

    >>> from theorycheck.realdata.topics import fit_lda
    >>> animals, algebra = "cat dog bird horse cow sheep".split(), "matrix vector scalar tensor norm basis".split()
    >>> docs = [[w[(i + j) % 6] for j in range(4)] * 2 + ["the"] for i in range(6) for w in (animals, algebra)]
    >>> fit = fit_lda(docs, 2, seed=0)
    >>> fit.phi.shape, bool(np.allclose(fit.phi.sum(axis=1), 1.0)), "the" in fit.vocab
    ((2, 12), True, False)
    >>> sorted(sorted(fit.top_words(t, 6)) for t in range(2)) == sorted([sorted(animals), sorted(algebra)])
    True
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

    * ``"top_fraction"``: for every topic, drop stop words and keep the ``n = ceil(top_fraction V')``
      most probable words (``V'`` = vocabulary size without stop words); a word's topics are the topics
      whose kept lists contain it (zero, one or several);
    * ``"threshold"``: normalise a word's topic weights ``phi[t, w] / sum_s phi[s, w]`` (gensim's
      ``get_term_topics`` normalised), keep topics whose weight is ``>= threshold``, at most
      ``topics_per_word`` of them (the most likely first). Words with no such topic get none.

    Parameters
    ----------
    fit : TopicFit
        The fitted topics.
    method : {"top_fraction", "threshold"}, default "top_fraction"
        The rule.
    top_fraction : float, default 0.01
        ``"top_fraction"``: fraction of the vocabulary each topic keeps, ``0 < top_fraction <= 1``
        (at least one word).
    threshold : float, default 0.5
        ``"threshold"``: minimum normalised weight, ``0 < threshold <= 1``.
    topics_per_word : int, default 1
        ``"threshold"``: keep at most this many topics per word (most likely first), ``>= 1``.
    stop : collection of str, default frozenset()
        Words never assigned a topic.

    Returns
    -------
    WordTopics
        Only words with at least one topic, in vocabulary order.

    Raises
    ------
    TypeError
        ``fit`` is not a :class:`TopicFit`.
    ValueError
        ``method`` is unknown or a number is out of range.

    See Also
    --------
    fit_lda : Fits the topics.
    WordTopics : The result.
    theorycheck.realdata.mapping.map_to_tokens : Carries the topics over to token ids.

    References
    ----------
    SPEC §5.4 (the two rules (a) and (b) of the official code; the paper's values are unrecoverable).

    Examples
    --------
    >>> from theorycheck.realdata.topics import TopicFit, assign_topics
    >>> vocab = ("cat", "dog", "the", "norm", "matrix")
    >>> phi = np.array([[0.4, 0.3, 0.2, 0.05, 0.05], [0.05, 0.1, 0.2, 0.25, 0.4]])
    >>> fit = TopicFit(vocab, phi, "sklearn", 0)
    >>> wt = assign_topics(fit, top_fraction=0.5, stop={"the"})  # ceil(0.5 * 4) = 2 words per topic
    >>> {w: sorted(wt.topics(w)) for w in wt.words}
    {'cat': [0], 'dog': [0], 'norm': [1], 'matrix': [1]}
    >>> wt = assign_topics(fit, method="threshold", threshold=0.6)  # dog: 0.3 / 0.4 = 0.75; the: 0.5
    >>> {w: sorted(wt.topics(w)) for w in wt.words}
    {'cat': [0], 'dog': [0], 'norm': [1], 'matrix': [1]}
    >>> wt = assign_topics(fit, method="threshold", threshold=0.5, topics_per_word=2)  # "the": 0.5 each
    >>> sorted(wt.topics("the"))
    [0, 1]
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
