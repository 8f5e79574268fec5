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
    """Topic membership over the model's vocabulary.

    Attributes
    ----------
    vocab_membership : ndarray of bool, shape (vocab_size, K)
        Row ``i`` = topics of token id ``i`` (all False for tokens without topic).
    token_ids : ndarray of int64, shape (n,)
        Ids that carry a topic, ascending.
    words : tuple of str, length n
        ``words[k]`` is the word of ``token_ids[k]``.
    dropped : tuple of str
        Topic words the tokenizer splits into sub-word pieces (or changes); they get no id.
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
        return frozenset(np.flatnonzero(self.vocab_membership[int(i)]).tolist())

    def token_id(self, word: str) -> int:
        """Id of a topic word; ``KeyError`` naming the word if it has none."""
        try:
            k = self.words.index(word)
        except ValueError:
            raise KeyError(
                f"word {word!r} has no topic token (unknown to the topic model, stop word, or split into "
                f"sub-word pieces by the tokenizer)"
            ) from None
        return int(self.token_ids[k])


def map_to_tokens(word_topics: WordTopics, tokenizer) -> TokenTopics:
    """Look every topic word up in the tokenizer (see module docstring).

    Parameters
    ----------
    word_topics : WordTopics
    tokenizer : object with ``single_token_id(word) -> int | None`` and ``vocab_size``
        E.g. :class:`theorycheck.realdata.tokenizer.WordPieceTokenizer`.
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
