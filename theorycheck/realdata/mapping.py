"""Words with topics -> model token ids (SPEC §5.4, §3.2).

The official code maps the synthetic words '0'..'99' to ids 4..103 by a fixed offset and
hard-codes topic blocks on ids; an off-by-offset there silently scrambles the topics. Here a
word's id is looked up in the tokenizer's own vocabulary, a word is kept only if the tokenizer
keeps it as that single token, and the result is checkable both ways:
``tokenizer.id_to_token(token_id(word)) == word`` and ``topics_of_id(token_id(word)) == topics(word)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .topics import WordTopics

__all__ = ["TokenTopics", "map_to_tokens"]


@dataclass(frozen=True)
class TokenTopics:
    """Topic membership over the model's vocabulary: which topics each token id carries (SPEC §5.4).

    Parameters
    ----------
    vocab_membership : ndarray of bool, shape (vocab_size, K)
        Row ``i`` = topics of token id ``i`` (all False for tokens without topic).
    token_ids : ndarray of int64, shape (n,)
        Ids that carry a topic, ascending.
    words : tuple of str, length n
        ``words[k]`` is the word of ``token_ids[k]``.
    dropped : tuple of str
        Topic words the tokenizer splits into sub-word pieces (or changes); they get no id.

    Attributes
    ----------
    n_topics : int
        ``K``.
    has_topic : ndarray of bool, shape (vocab_size,)
        The token carries at least one topic.

    See Also
    --------
    map_to_tokens : Builds one.
    theorycheck.realdata.topics.WordTopics : The word-level map it comes from.
    theorycheck.realdata.stats.embedding_pair_stats : Pair classes of token ids from ``vocab_membership``.

    References
    ----------
    SPEC §5.4 (token mapping: a lookup in the tokenizer's vocabulary instead of the official code's fixed id offset).

    Examples
    --------
    >>> from theorycheck.realdata.mapping import TokenTopics
    >>> M = np.zeros((6, 2), dtype=bool)
    >>> M[2, 0] = M[4, 1] = M[5, 0] = M[5, 1] = True
    >>> tt = TokenTopics(M, np.array([2, 4, 5]), ("cat", "norm", "set"), ("tokenization",))
    >>> tt.n_topics, tt.token_id("set"), sorted(tt.topics_of_id(5)), np.flatnonzero(tt.has_topic)
    (2, 5, [0, 1], array([2, 4, 5]))
    >>> tt.token_id("tokenization")
    Traceback (most recent call last):
        ...
    KeyError: "word 'tokenization' has no topic token (unknown to the topic model, stop word, or split ...)"
    """

    vocab_membership: np.ndarray
    token_ids: np.ndarray
    words: tuple
    dropped: tuple

    @property
    def n_topics(self) -> int:
        return self.vocab_membership.shape[1]

    @property
    def has_topic(self) -> np.ndarray:
        """Bool ``(vocab_size,)``: the token carries at least one topic."""
        return np.asarray(self.vocab_membership.any(axis=1))

    def topics_of_id(self, i: int) -> frozenset:
        """Topics of token id ``i``.

        Parameters
        ----------
        i : int
            Token id, ``0 <= i < vocab_size``.

        Returns
        -------
        frozenset of int
            The topics of row ``i`` of ``vocab_membership`` (empty for a token without topic).
        """
        return frozenset(np.flatnonzero(self.vocab_membership[int(i)]).tolist())

    def token_id(self, word: str) -> int:
        """Id of a topic word; ``KeyError`` naming the word if it has none.

        Parameters
        ----------
        word : str
            A word of ``words``.

        Returns
        -------
        int
            Its token id.

        Raises
        ------
        KeyError
            ``word`` has no topic token (unknown, a stop word, or dropped).
        """
        try:
            k = self.words.index(word)
        except ValueError:
            raise KeyError(
                f"word {word!r} has no topic token (unknown to the topic model, stop word, or split into "
                f"sub-word pieces by the tokenizer)"
            ) from None
        return int(self.token_ids[k])


def map_to_tokens(word_topics: WordTopics, tokenizer) -> TokenTopics:
    """Look every topic word up in the tokenizer: words with topics -> model token ids (SPEC §5.4).

    A word's id is looked up in the tokenizer's own vocabulary and the word is kept only if the
    tokenizer keeps it as that single token, so the result is checkable both ways:
    ``tokenizer.id_to_token(token_id(word)) == word`` and ``topics_of_id(token_id(word)) == topics(word)``.

    Parameters
    ----------
    word_topics : WordTopics
        The words and their topics.
    tokenizer : object with ``single_token_id(word) -> int | None`` and ``vocab_size``
        E.g. :class:`theorycheck.realdata.tokenizer.WordPieceTokenizer`.

    Returns
    -------
    TokenTopics
        Membership over all ``vocab_size`` ids; the words split into pieces are in ``dropped``.

    Raises
    ------
    TypeError
        ``word_topics`` is not a :class:`~theorycheck.realdata.topics.WordTopics`.
    RuntimeError
        Two topic words map to one token id (their topics would merge silently).

    See Also
    --------
    TokenTopics : The result.
    theorycheck.realdata.topics.assign_topics : Gives the word topics.
    theorycheck.realdata.tokenizer.WordPieceTokenizer : The tokenizer of the bundled model.

    References
    ----------
    SPEC §5.4 (only whole-word tokens get a topic; the official code maps its synthetic words to ids by a
    fixed offset instead, where an off-by-offset silently scrambles the topics).

    Examples
    --------
    >>> from theorycheck.realdata.mapping import map_to_tokens
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> from theorycheck.realdata.topics import WordTopics
    >>> tk = WordPieceTokenizer()
    >>> wt = WordTopics(("cat", "tokenization", "topic"), [[True, False], [False, True], [False, True]])
    >>> tt = map_to_tokens(wt, tk)
    >>> tt.words, tt.dropped, tt.vocab_membership.shape  # "tokenization" is two pieces: no id
    (('cat', 'topic'), ('tokenization',), (30522, 2))
    >>> [(tk.id_to_token(tt.token_id(w)), tt.topics_of_id(tt.token_id(w)) == wt.topics(w)) for w in tt.words]
    [('cat', True), ('topic', True)]
    """
    if not isinstance(word_topics, WordTopics):
        raise TypeError(f"word_topics must be a WordTopics, got {type(word_topics).__name__}")
    V = int(tokenizer.vocab_size)
    M = np.zeros((V, word_topics.n_topics), dtype=bool)
    ids, words, dropped = [], [], []
    for k, w in enumerate(word_topics.words):
        i = tokenizer.single_token_id(w)
        if i is None:
            dropped.append(w)
            continue
        if M[i].any():  # two words on one id would merge their topics silently
            raise RuntimeError(f"two topic words map to token id {i} (second: {w!r})")
        M[i] = word_topics.membership[k]
        ids.append(i)
        words.append(w)
    order = np.argsort(ids, kind="stable")
    return TokenTopics(M, np.asarray(ids, dtype=np.int64)[order], tuple(words[j] for j in order), tuple(dropped))
