"""WordPiece tokenisation with word bookkeeping (SPEC §5.4).

Wraps the bundled ``tokenizer.json`` (HuggingFace ``tokenizers``) with padding and truncation
turned off (the file ships with fixed padding to 128), and tells for every token whether it is
a *whole word* (its pre-tokenised word is exactly one vocabulary token) or a sub-word piece.
Only whole-word tokens can carry a topic: a word split into pieces has no single token id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._deps import require
from .encoder import model_dir

__all__ = ["WordPieceTokenizer", "TokenizedText"]


@dataclass
class TokenizedText:
    """Tokens of one text (no special tokens), with the word each token belongs to (SPEC §5.4).

    Parameters
    ----------
    ids : ndarray of int64, shape (n,)
        Token ids, in ``[0, vocab_size)``.
    whole_word : ndarray of bool, shape (n,)
        True where the token is the only token of its pre-tokenised word (only such tokens can carry a
        topic).
    word_index : ndarray of int64, shape (n,)
        Index of the pre-tokenised word each token belongs to (non-decreasing; equal for the pieces of
        one word).

    See Also
    --------
    WordPieceTokenizer : Its ``encode`` returns one.
    theorycheck.realdata.mapping.map_to_tokens : Which whole-word tokens carry a topic.

    References
    ----------
    SPEC §5.4 (only whole-word tokens get a topic; sub-word pieces are skipped).

    Examples
    --------
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tk = WordPieceTokenizer()
    >>> tt = tk.encode("Topics of tokenization")
    >>> [tk.id_to_token(i) for i in tt.ids]
    ['topics', 'of', 'token', '##ization']
    >>> tt.whole_word, tt.word_index  # "tokenization" is two pieces of word 2
    (array([ True,  True, False, False]), array([0, 1, 2, 2]))
    """

    ids: np.ndarray
    whole_word: np.ndarray
    word_index: np.ndarray


class WordPieceTokenizer:
    """The bundled BERT WordPiece tokenizer (lower-casing, no padding, no truncation).

    Wraps the checkpoint's ``tokenizer.json`` (HuggingFace ``tokenizers``; the file ships with fixed
    padding to 128, turned off here) and tells for every token whether it is a whole word or a sub-word
    piece (:class:`TokenizedText`).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Folder holding ``tokenizer.json`` (default: the bundled checkpoint's folder,
        :func:`~theorycheck.realdata.encoder.model_dir`).

    Attributes
    ----------
    vocab_size : int
        ``1 +`` the largest token id (30522 for the bundled vocabulary).
    cls_id, sep_id, mask_id : int
        Ids of ``[CLS]``, ``[SEP]`` and ``[MASK]``.

    Raises
    ------
    MissingExtraError
        ``tokenizers`` or the model package (the ``nlp`` extra) is not installed.

    See Also
    --------
    TokenizedText : What :meth:`encode` returns.
    theorycheck.realdata.encoder.NumpyBert : The encoder the token ids are fed to.
    theorycheck.realdata.mapping.map_to_tokens : Looks topic words up with :meth:`single_token_id`.

    References
    ----------
    SPEC §5.4 (token mapping: words are looked up in the tokenizer's own vocabulary).

    Examples
    --------
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tk = WordPieceTokenizer()
    >>> tk.vocab_size, tk.cls_id, tk.sep_id, tk.mask_id
    (30522, 101, 102, 103)
    >>> i = tk.single_token_id("topic")
    >>> i, tk.id_to_token(i), tk.token_to_id("topic") == i  # the lookup checks both ways
    (8476, 'topic', True)
    >>> tk.single_token_id("tokenization"), tk.single_token_id("Topic")  # two pieces; lower-cased to another
    (None, None)
    """

    def __init__(self, path=None):
        tk = require("tokenizers", "the WordPiece tokenizer")
        path = (model_dir() if path is None else Path(path)) / "tokenizer.json"
        self._tok = tk.Tokenizer.from_file(str(path))
        self._tok.no_padding()
        self._tok.no_truncation()
        vocab = self._tok.get_vocab(with_added_tokens=True)
        self.vocab_size = max(vocab.values()) + 1
        self._id_to_token = [""] * self.vocab_size
        for t, i in vocab.items():
            self._id_to_token[i] = t
        self._token_to_id = vocab
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.mask_id = vocab["[MASK]"]

    def token_to_id(self, token: str) -> int | None:
        """Id of a vocabulary entry, ``None`` if absent.

        Parameters
        ----------
        token : str
            A vocabulary entry (``"topic"``, ``"##ization"``, ``"[MASK]"``).

        Returns
        -------
        int or None
            Its id.
        """
        return self._token_to_id.get(token)

    def id_to_token(self, i: int) -> str:
        """The vocabulary entry of id ``i``.

        Parameters
        ----------
        i : int
            Token id, ``0 <= i < vocab_size``.

        Returns
        -------
        str
            The token string.

        Raises
        ------
        ValueError
            ``i`` is outside ``[0, vocab_size)``.
        """
        if not 0 <= int(i) < self.vocab_size:
            raise ValueError(f"token id must lie in [0, {self.vocab_size - 1}], got {i}")
        return self._id_to_token[int(i)]

    @property
    def vocab(self) -> list[str]:
        """Token strings indexed by id."""
        return list(self._id_to_token)

    def encode(self, text: str) -> TokenizedText:
        """Tokenise ``text`` without special tokens.

        Parameters
        ----------
        text : str
            Any text (lower-cased by the tokenizer).

        Returns
        -------
        TokenizedText
            The ids, whether each is a whole word, and the index of its word (empty arrays for an empty text).
        """
        enc = self._tok.encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int64)
        widx = np.asarray([-1 if w is None else w for w in enc.word_ids], dtype=np.int64)
        if ids.size:
            counts = np.bincount(widx - widx.min())
            whole = counts[widx - widx.min()] == 1
        else:
            whole = np.zeros(0, dtype=bool)
        return TokenizedText(ids, whole, widx)

    def single_token_id(self, word: str) -> int | None:
        """The id of ``word`` if the tokenizer keeps it as one token equal to itself, else ``None``.

        Parameters
        ----------
        word : str
            A word (lower case: the tokenizer lower-cases, so ``"Topic"`` is not kept as itself).

        Returns
        -------
        int or None
            The id, or ``None`` when ``word`` is split into pieces or changed.
        """
        ids = self._tok.encode(word, add_special_tokens=False).ids
        if len(ids) == 1 and self._id_to_token[ids[0]] == word:
            return int(ids[0])
        return None
