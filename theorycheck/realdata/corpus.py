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
    """A list of documents: titles and raw texts, with where they came from (SPEC §5.4).

    Parameters
    ----------
    titles : tuple of str
        Document titles (article titles, or file stems for a folder), one per text.
    texts : tuple of str
        Raw document texts (markup already removed), one per title.
    source : str
        Where the documents came from (a path or a description).

    Raises
    ------
    ValueError
        ``titles`` and ``texts`` differ in length.

    See Also
    --------
    wikipedia_fragment : The bundled Wikipedia articles as a Corpus.
    read_text_folder : A folder of text files as a Corpus.
    content_words : The word-level view of a text used for topic fitting.

    References
    ----------
    SPEC §5.4 (the offline Wikipedia analog and its corpus).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> c = Corpus(("a", "b", "c"), ("One text.", "Another text.", "A third."), "an example")
    >>> len(c), c.head(2).titles, c.head(2).source
    (3, ('a', 'b'), 'an example')
    >>> Corpus(("a",), (), "mismatched")
    Traceback (most recent call last):
        ...
    ValueError: titles and texts must have the same length, got 1 and 0
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
        """The first ``n`` documents.

        Parameters
        ----------
        n : int
            Number of documents kept, ``n >= 1`` (all of them if ``n >= len(self)``).

        Returns
        -------
        Corpus
            The first ``n`` titles and texts, with the same ``source``.
        """
        n = check_int("n", n, low=1)
        return Corpus(self.titles[:n], self.texts[:n], self.source)


def words(text: str) -> list[str]:
    """Lower-cased alphabetic words of ``text`` (``[a-z]+`` after lower-casing).

    Digits and punctuation split words; accents are not folded (an accented letter splits the
    word), which only drops rare words and never invents one.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of str
        The maximal runs of ``a``-``z`` in ``text.lower()``, in order (repeats kept).

    Raises
    ------
    TypeError
        ``text`` is not a str.

    See Also
    --------
    content_words : The same words without stop words and short words.
    stop_words : The stop-word list.

    References
    ----------
    SPEC §5.4 (the word-level view of the corpus used for topic fitting).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import words
    >>> words("Topic-models, 2nd ed.: LDA's phi!")
    ['topic', 'models', 'nd', 'ed', 'lda', 's', 'phi']
    >>> words("Café au lait")  # the accented letter splits the word
    ['caf', 'au', 'lait']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _WORD_RE.findall(text.lower())


def stop_words() -> frozenset:
    """English stop words (scikit-learn's list of 318 words).

    Returns
    -------
    frozenset of str
        ``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``, lower case.

    Raises
    ------
    MissingExtraError
        scikit-learn (the ``nlp`` extra) is not installed.

    See Also
    --------
    content_words : Drops these words (by default).
    theorycheck.realdata.topics.assign_topics : Never assigns a topic to the words of its ``stop``.

    References
    ----------
    SPEC §5.4 (the official rules drop stop tokens; the paper's list is unrecoverable, this is ours).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import stop_words
    >>> stop = stop_words()
    >>> len(stop), "the" in stop, "topic" in stop
    (318, True, False)
    """
    feat = require("sklearn.feature_extraction.text", "stop-word filtering")
    return frozenset(feat.ENGLISH_STOP_WORDS)


def content_words(text: str, *, stop=None, min_len: int = 3) -> list[str]:
    """:func:`words` without stop words and without words shorter than ``min_len``.

    Parameters
    ----------
    text : str
        Any text.
    stop : collection of str, optional
        Words to drop (default :func:`stop_words`, which needs scikit-learn).
    min_len : int, default 3
        Shortest word kept, ``min_len >= 1``.

    Returns
    -------
    list of str
        ``[w for w in words(text) if len(w) >= min_len and w not in stop]``, in order.

    Raises
    ------
    ValueError
        ``min_len < 1``.

    See Also
    --------
    words : All the words of a text.
    stop_words : The default stop words.
    theorycheck.realdata.topics.fit_lda : Fits topics to documents given as such word lists.

    References
    ----------
    SPEC §5.4 (the documents LDA is fitted to).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import content_words
    >>> text = "The topics of a document are drawn from a prior."
    >>> content_words(text)
    ['topics', 'document', 'drawn', 'prior']
    >>> content_words(text, stop=frozenset({"the", "of"}), min_len=2)
    ['topics', 'document', 'are', 'drawn', 'from', 'prior']
    """
    stop = stop_words() if stop is None else stop
    min_len = check_int("min_len", min_len, low=1)
    return [w for w in words(text) if len(w) >= min_len and w not in stop]


def wikipedia_fragment_path() -> Path:
    """Path of gensim's bundled English Wikipedia dump fragment (bz2 XML).

    Returns
    -------
    pathlib.Path
        The file ``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`` of gensim's test
        data (installed with gensim: nothing is downloaded).

    Raises
    ------
    MissingExtraError
        gensim (the ``nlp`` extra) is not installed.
    FileNotFoundError
        gensim is installed without its test data.

    See Also
    --------
    wikipedia_fragment : The articles of this file as a :class:`Corpus`.
    theorycheck.realdata.available : Whether the ``nlp`` extra is installed.

    References
    ----------
    SPEC §5.4 (the offline Wikipedia analog).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import wikipedia_fragment_path
    >>> path = wikipedia_fragment_path()
    >>> path.suffix, path.is_file(), path.parent.name
    ('.bz2', True, 'test_data')
    """
    gensim = require("gensim", "the bundled Wikipedia corpus")
    path = Path(gensim.__file__).resolve().parent / "test" / "test_data" / WIKI_FRAGMENT
    if not path.is_file():
        raise FileNotFoundError(f"gensim is installed but its test data file {path} is missing; reinstall gensim")
    return path


def wikipedia_fragment(*, min_words: int = 50, max_docs: int | None = None) -> Corpus:
    """Articles of the Wikipedia fragment shipped with gensim (main namespace, no redirects).

    Markup is removed with gensim's ``filter_wiki``. Articles with fewer than ``min_words`` words
    (:func:`words`) are dropped, like gensim's ``WikiCorpus`` (default 50). All of it gives about 100
    articles (~3 MB of text); nothing is downloaded.

    Parameters
    ----------
    min_words : int, default 50
        Fewest words an article keeps, ``min_words >= 0``.
    max_docs : int, optional
        Keep only the first ``max_docs`` articles (in file order), ``max_docs >= 1``.

    Returns
    -------
    Corpus
        Titles and plain texts in file order; ``source`` names the file.

    Raises
    ------
    ValueError
        ``min_words < 0`` or ``max_docs < 1``.
    MissingExtraError
        gensim (the ``nlp`` extra) is not installed.

    See Also
    --------
    wikipedia_fragment_path : The file read.
    read_text_folder : A corpus of your own text files instead.
    content_words : The words of each text that topics are fitted to.

    References
    ----------
    SPEC §5.4 (the offline Wikipedia analog of the paper's experiment).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import wikipedia_fragment, words
    >>> corpus = wikipedia_fragment(max_docs=2)
    >>> corpus.titles, corpus.source.startswith("gensim test data: enwiki")
    (('Anarchism', 'Autism'), True)
    >>> all(len(words(text)) >= 50 for text in corpus.texts)
    True
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

    Files without any word (:func:`words`) are skipped; a document's title is its file's stem.

    Parameters
    ----------
    path : str or os.PathLike
        An existing folder.
    pattern : str, optional
        Glob pattern of the files read (default ``"*.txt"``; not recursive unless it says so, e.g.
        ``"**/*.txt"``).
    encoding : str, default "utf-8"
        Text encoding of the files.

    Returns
    -------
    Corpus
        One document per non-empty matching file, in file-name order; ``source`` is ``path``.

    Raises
    ------
    ValueError
        ``path`` is not a folder, holds no matching file, every matching file is empty, or a file cannot
        be read or decoded with ``encoding`` (the message names the file).

    See Also
    --------
    wikipedia_fragment : The bundled corpus.
    Corpus : The result.
    content_words : The words of each text that topics are fitted to.

    References
    ----------
    SPEC §5.4 (the real-data comparison on a corpus of your choice).

    Examples
    --------
    >>> from pathlib import Path
    >>> from theorycheck.realdata.corpus import read_text_folder
    >>> folder = Path("texts")
    >>> folder.mkdir()
    >>> _ = (folder / "b.txt").write_text("Second document.", encoding="utf-8")
    >>> _ = (folder / "a.txt").write_text("First document.", encoding="utf-8")
    >>> _ = (folder / "empty.txt").write_text("123 ...", encoding="utf-8")  # no words: skipped
    >>> corpus = read_text_folder("texts")
    >>> corpus.titles, corpus.texts, corpus.source
    (('a', 'b'), ('First document.', 'Second document.'), 'texts')
    >>> read_text_folder("texts", pattern="*.md")
    Traceback (most recent call last):
        ...
    ValueError: corpus folder 'texts' holds no file matching '*.md'
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
