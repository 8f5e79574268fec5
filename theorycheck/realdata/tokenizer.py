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
    """Tokens of one text (no special tokens).

    Attributes
    ----------
    ids : ndarray of int64, shape (n,)
    whole_word : ndarray of bool, shape (n,)
        True where the token is the only token of its pre-tokenised word.
    word_index : ndarray of int64, shape (n,)
        Index of the pre-tokenised word each token belongs to.
    """

    ids: np.ndarray
    whole_word: np.ndarray
    word_index: np.ndarray


class WordPieceTokenizer:
    """The bundled BERT WordPiece tokenizer (lower-casing, no padding, no truncation)."""

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
        """Id of a vocabulary entry, ``None`` if absent."""
        return self._token_to_id.get(token)

    def id_to_token(self, i: int) -> str:
        if not 0 <= int(i) < self.vocab_size:
            raise ValueError(f"token id must lie in [0, {self.vocab_size - 1}], got {i}")
        return self._id_to_token[int(i)]

    @property
    def vocab(self) -> list[str]:
        """Token strings indexed by id."""
        return list(self._id_to_token)

    def encode(self, text: str) -> TokenizedText:
        """Tokenise ``text`` without special tokens."""
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
        """The id of ``word`` if the tokenizer keeps it as one token equal to itself, else ``None``."""
        ids = self._tok.encode(word, add_special_tokens=False).ids
        if len(ids) == 1 and self._id_to_token[ids[0]] == word:
            return int(ids[0])
        return None
