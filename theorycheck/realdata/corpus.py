"""Plain-text corpora for the real-data experiments (SPEC §5.4).

Two sources: the English Wikipedia XML fragment that ships with gensim's test data (about
100 articles after dropping redirects and stubs, ~3 MB of text), and any folder of UTF-8
plain-text files chosen by the user. Both give a :class:`Corpus` of raw document texts; the
word-level view used for topic fitting is :func:`words` + :func:`content_words`.
"""

from __future__ import annotations

import bz2
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._validate import check_int
from ._deps import require

__all__ = [
    "Corpus",
    "wikipedia_fragment",
    "wikipedia_fragment_path",
    "read_text_folder",
    "words",
    "content_words",
    "stop_words",
]

WIKI_FRAGMENT = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_WORD_RE = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Corpus:
    """A list of documents.

    Attributes
    ----------
    titles : tuple of str
    texts : tuple of str
        Raw document texts (markup already removed), one per title.
    source : str
        Where the documents came from (a path or a description).
    """

    titles: tuple
    texts: tuple
    source: str

    def __post_init__(self):
        if len(self.titles) != len(self.texts):
            raise ValueError(
                f"titles and texts must have the same length, got {len(self.titles)} and {len(self.texts)}"
            )

    def __len__(self) -> int:
        return len(self.texts)

    def head(self, n: int) -> Corpus:
        """The first ``n`` documents."""
        n = check_int("n", n, low=1)
        return Corpus(self.titles[:n], self.texts[:n], self.source)


def words(text: str) -> list[str]:
    """Lower-cased alphabetic words of ``text`` (``[a-z]+`` after lower-casing).

    Digits and punctuation split words; accents are not folded (an accented letter splits the
    word), which only drops rare words and never invents one.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _WORD_RE.findall(text.lower())


def stop_words() -> frozenset:
    """English stop words (scikit-learn's list of 318 words)."""
    feat = require("sklearn.feature_extraction.text", "stop-word filtering")
    return frozenset(feat.ENGLISH_STOP_WORDS)


def content_words(text: str, *, stop=None, min_len: int = 3) -> list[str]:
    """:func:`words` without stop words and without words shorter than ``min_len``."""
    stop = stop_words() if stop is None else stop
    min_len = check_int("min_len", min_len, low=1)
    return [w for w in words(text) if len(w) >= min_len and w not in stop]


def wikipedia_fragment_path() -> Path:
    """Path of gensim's bundled English Wikipedia dump fragment (bz2 XML)."""
    gensim = require("gensim", "the bundled Wikipedia corpus")
    path = Path(gensim.__file__).resolve().parent / "test" / "test_data" / WIKI_FRAGMENT
    if not path.is_file():
        raise FileNotFoundError(f"gensim is installed but its test data file {path} is missing; reinstall gensim")
    return path


def wikipedia_fragment(*, min_words: int = 50, max_docs: int | None = None) -> Corpus:
    """Articles of the Wikipedia fragment shipped with gensim (main namespace, no redirects).

    Markup is removed with gensim's ``filter_wiki``. Articles with fewer than ``min_words``
    words (:func:`words`) are dropped, like gensim's ``WikiCorpus`` (default 50).

    Parameters
    ----------
    min_words : int
    max_docs : int, optional
        Keep only the first ``max_docs`` articles (in file order).
    """
    min_words = check_int("min_words", min_words, low=0)
    if max_docs is not None:
        max_docs = check_int("max_docs", max_docs, low=1)
    wc = require("gensim.corpora.wikicorpus", "the bundled Wikipedia corpus")
    path = wikipedia_fragment_path()
    titles, texts = [], []
    with bz2.BZ2File(path) as fh:
        for page in wc.extract_pages(fh, filter_namespaces=("0",)):
            title, raw = page[0], page[1]
            if raw.lstrip().lower().startswith("#redirect"):
                continue
            text = wc.filter_wiki(raw)
            if len(words(text)) < min_words:
                continue
            titles.append(title)
            texts.append(text)
            if max_docs is not None and len(texts) >= max_docs:
                break
    return Corpus(tuple(titles), tuple(texts), f"gensim test data: {path.name}")


def read_text_folder(path, *, pattern: str = "*.txt", encoding: str = "utf-8") -> Corpus:
    """Every file matching ``pattern`` in folder ``path`` (sorted by name) as one document.

    Raises
    ------
    ValueError
        ``path`` is not a readable folder, holds no matching non-empty file, or a file cannot
        be decoded with ``encoding`` (the message names the file).
    """
    folder = Path(os.fspath(path))
    if not folder.is_dir():
        raise ValueError(f"corpus path must be an existing folder of text files, got {str(folder)!r}")
    files = sorted(p for p in folder.glob(pattern) if p.is_file())
    if not files:
        raise ValueError(f"corpus folder {str(folder)!r} holds no file matching {pattern!r}")
    titles, texts = [], []
    for f in files:
        try:
            text = f.read_text(encoding=encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(f"corpus file {str(f)!r} is not valid {encoding} text: {exc}") from exc
        except OSError as exc:
            raise ValueError(f"corpus file {str(f)!r} cannot be read: {exc}") from exc
        if words(text):
            titles.append(f.stem)
            texts.append(text)
    if not texts:
        raise ValueError(f"corpus folder {str(folder)!r}: every file matching {pattern!r} is empty (no words)")
    return Corpus(tuple(titles), tuple(texts), str(folder))
