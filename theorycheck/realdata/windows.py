"""Encoder windows of the real-data experiment (SPEC §5.4, §11.9): cutting a corpus into windows, drawing a seeded
sample of them, running the encoder on them, and the masked-query pass.

Part of the experiment of :mod:`.pipeline` (which re-exports every name here).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from .._validate import check_int
from .corpus import Corpus
from .encoder import NumpyBert
from .lifts import LiftAccumulator, LiftStats, mask_positions

__all__ = [
    "Window",
    "content_token_mask",
    "make_windows",
    "select_windows",
    "encode_windows",
    "masked_lift_statistics",
]


@dataclass
class Window:
    """One encoder input of :func:`make_windows`: token ids with [CLS]/[SEP], the valid positions, the document.

    Parameters
    ----------
    ids : ndarray of int64, shape (n,)
        WordPiece ids ``[CLS] t_1 ... t_{n-2} [SEP]``, ``n <= window``.
    valid : ndarray of bool, shape (n,)
        Positions that take part in the statistics: whole-word content tokens (never [CLS]/[SEP]).
    doc : int, >= 0
        Index of the source document in the corpus.

    See Also
    --------
    make_windows : Cuts a corpus into windows.
    select_windows : Draws a seeded sample of windows up to a token budget.
    encode_windows : Runs the encoder on windows.

    References
    ----------
    SPEC §5.4 (attention statistic: stop tokens and sub-word pieces skipped).

    Examples
    --------
    >>> from theorycheck.realdata.pipeline import Window
    >>> w = Window(ids=np.array([101, 4937, 2938, 102]), valid=np.array([False, True, True, False]), doc=0)
    >>> w.ids.size, int(w.valid.sum()), w.doc
    (4, 2, 0)
    """

    ids: np.ndarray
    valid: np.ndarray
    doc: int


def content_token_mask(tokenizer, stop, *, min_len: int = 3) -> np.ndarray:
    """Bool ``(vocab_size,)``: the token is a lower-case alphabetic word of ``>= min_len`` letters, not a stop word.

    So no special token, no ``##`` piece, no punctuation or number: the tokens that may carry a topic or be a
    position of the attention statistics (SPEC §5.4).

    Parameters
    ----------
    tokenizer : WordPieceTokenizer
        Any object with ``vocab_size`` and ``vocab`` (token strings indexed by id).
    stop : collection of str
        Stop words (e.g. :func:`theorycheck.realdata.corpus.stop_words`).
    min_len : int, default 3
        Minimum length in letters.

    Returns
    -------
    mask : ndarray of bool, shape (vocab_size,)
        ``mask[i]`` is True iff token ``i`` is ASCII, alphabetic, lower-case, of ``>= min_len`` letters and not
        in ``stop``.

    See Also
    --------
    make_windows : Valid positions are whole words that pass this mask.
    theorycheck.realdata.corpus.stop_words : The stop-word list of the pipeline.
    theorycheck.realdata.tokenizer.WordPieceTokenizer : The vocabulary scanned.

    References
    ----------
    SPEC §5.4 (tokens of the statistics: stop tokens and sub-word pieces skipped).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import stop_words
    >>> from theorycheck.realdata.pipeline import content_token_mask
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tok = WordPieceTokenizer()
    >>> mask = content_token_mask(tok, stop_words())
    >>> mask.shape == (tok.vocab_size,)
    True
    >>> {t: bool(mask[tok.token_to_id(t)]) for t in ("cat", "the", "an", "##ing", "[CLS]", "1990")}
    {'cat': True, 'the': False, 'an': False, '##ing': False, '[CLS]': False, '1990': False}
    """
    out = np.zeros(tokenizer.vocab_size, dtype=bool)
    for i, t in enumerate(tokenizer.vocab):
        out[i] = len(t) >= min_len and t.isascii() and t.isalpha() and t.islower() and t not in stop
    return out


def make_windows(corpus: Corpus, tokenizer, content_mask, *, window: int = 128) -> list[Window]:
    """Tokenise every document and cut it into windows of ``window - 2`` tokens + [CLS], [SEP].

    A position is *valid* iff its token is a whole word (not a sub-word piece, SPEC §5.4)
    and a content token (``content_mask``). Validity is decided on the whole document, so a
    word cut by a window boundary is still recognised as split.

    Parameters
    ----------
    corpus : Corpus
        The documents (:class:`theorycheck.realdata.corpus.Corpus`).
    tokenizer : WordPieceTokenizer
        Gives ``encode`` (ids and whole-word flags), ``cls_id`` and ``sep_id``.
    content_mask : ndarray of bool, shape (vocab_size,)
        Tokens that may be valid (:func:`content_token_mask`).
    window : int, window >= 3, default 128
        Window length in tokens, [CLS] and [SEP] included.

    Returns
    -------
    list of Window
        In document order, then position order; every window but each document's last has ``window`` tokens.

    Raises
    ------
    ValueError
        If ``window < 3``.

    See Also
    --------
    content_token_mask : The ``content_mask`` of the pipeline.
    select_windows : A seeded sample of the windows up to a token budget.
    encode_windows : Runs the encoder on the windows.

    References
    ----------
    SPEC §5.4 (attention statistic on windows of the corpus, sub-word pieces skipped).

    Examples
    --------
    ``unbelievably`` is split into pieces, so none of them is valid; ``the``, ``on``, ``an`` are stop words:

    >>> from theorycheck.realdata.corpus import Corpus, stop_words
    >>> from theorycheck.realdata.pipeline import content_token_mask, make_windows
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tok = WordPieceTokenizer()
    >>> corpus = Corpus(("a",), ("The cat sat on an unbelievably soft mat.",), "one sentence")
    >>> windows = make_windows(corpus, tok, content_token_mask(tok, stop_words()), window=8)
    >>> for w in windows:
    ...     print([tok.id_to_token(i) for i in w.ids], w.valid.astype(int))
    ['[CLS]', 'the', 'cat', 'sat', 'on', 'an', 'un', '[SEP]'] [0 0 1 1 0 0 0 0]
    ['[CLS]', '##bel', '##ie', '##va', '##bly', 'soft', 'mat', '[SEP]'] [0 0 0 0 0 1 1 0]
    ['[CLS]', '.', '[SEP]'] [0 0 0]
    """
    window = check_int("window", window, low=3)
    body = window - 2
    out = []
    for d, text in enumerate(corpus.texts):
        enc = tokenizer.encode(text)
        valid = enc.whole_word & content_mask[enc.ids]
        for s in range(0, enc.ids.size, body):
            ids = np.concatenate([[tokenizer.cls_id], enc.ids[s : s + body], [tokenizer.sep_id]]).astype(np.int64)
            ok = np.concatenate([[False], valid[s : s + body], [False]])
            out.append(Window(ids, ok, d))
    return out


def select_windows(windows: list, max_tokens: int, rng) -> list:
    """Windows in a seeded random order until ``max_tokens`` tokens are reached.

    A window is added while the tokens chosen so far are fewer than ``max_tokens``, so the total exceeds the
    budget by less than one window; all windows when they hold fewer tokens.

    Parameters
    ----------
    windows : list of Window
        Candidates (:func:`make_windows`).
    max_tokens : int
        Token budget ([CLS] and [SEP] counted).
    rng : numpy.random.Generator
        Draws the order (``rng.permutation``).

    Returns
    -------
    list of Window
        The chosen windows, in the drawn order.

    See Also
    --------
    make_windows : The candidates.
    encode_windows : Runs the encoder on the chosen windows.
    theorycheck.realdata.pipeline.RealDataConfig : ``max_tokens`` of the attention pass.

    References
    ----------
    SPEC §5.4 (attention statistic over a seeded sample of windows).

    Examples
    --------
    >>> from theorycheck.realdata.pipeline import Window, select_windows
    >>> windows = [Window(np.zeros(n, np.int64), np.ones(n, bool), d) for d, n in enumerate([5, 8, 3, 8])]
    >>> chosen = select_windows(windows, 10, np.random.default_rng(0))
    >>> [w.doc for w in chosen], sum(w.ids.size for w in chosen)  # 3 + 5 < 10: one more window
    ([2, 0, 1], 16)
    >>> len(select_windows(windows, 100, np.random.default_rng(0)))  # budget above the 24 tokens: all
    4
    """
    chosen, budget = [], 0
    for k in rng.permutation(len(windows)):
        if budget >= max_tokens:
            break
        chosen.append(windows[k])
        budget += windows[k].ids.size
    return chosen


def encode_windows(
    model: NumpyBert, windows: list, *, batch: int = 8, progress: bool = False, timing: dict | None = None
):
    """Run the encoder on windows and yield each with its attention probabilities; equal-length windows are batched.

    Parameters
    ----------
    model : NumpyBert
        The encoder.
    windows : list of Window
        Windows to encode (their ``ids``).
    batch : int, default 8
        Windows per forward pass (of one length).
    progress : bool, default False
        Show a progress bar (``tqdm``).
    timing : dict, optional
        Updated after each batch with ``encoder_tokens`` (tokens encoded so far) and ``encoder_tokens_per_s``.

    Yields
    ------
    window : Window
        The encoded window (windows come grouped by length, shortest first).
    attentions : ndarray, shape (L, H, n, n)
        ``attentions[l, h, i, j]``: weight of key ``j`` for query ``i`` (rows sum to 1), ``n = window.ids.size``.

    See Also
    --------
    theorycheck.realdata.encoder.NumpyBert.forward : The forward pass (``keep_hidden=False``).
    theorycheck.realdata.pipeline.attention_statistics : Accumulates the yielded attentions.
    select_windows : The windows of the attention pass.

    References
    ----------
    SPEC §5.4 (attention statistic of the pretrained model on windows of the corpus).

    Examples
    --------
    >>> from theorycheck.realdata.encoder import NumpyBert
    >>> from theorycheck.realdata.pipeline import Window, encode_windows
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tok, model = WordPieceTokenizer(), NumpyBert.from_pretrained()
    >>> def window(text):
    ...     ids = np.array([tok.cls_id, *tok.encode(text).ids, tok.sep_id])
    ...     return Window(ids, np.r_[False, np.ones(ids.size - 2, bool), False], 0)
    >>> timing = {}
    >>> for w, a in encode_windows(model, [window("cats and dogs play"), window("the dog ran")], timing=timing):
    ...     print(w.ids.size, a.shape, bool(np.allclose(a.sum(axis=-1), 1.0, atol=1e-5)))
    5 (6, 12, 5, 5) True
    6 (6, 12, 6, 6) True
    >>> timing["encoder_tokens"]
    11
    """
    by_len: dict[int, list] = {}
    for w in windows:
        by_len.setdefault(w.ids.size, []).append(w)
    jobs = [grp[i : i + batch] for _, grp in sorted(by_len.items()) for i in range(0, len(grp), batch)]
    n_tok, t_enc = 0, 0.0
    for grp in tqdm(jobs, desc="encoder", unit="batch", disable=not progress):
        te = time.perf_counter()
        out = model.forward(np.stack([w.ids for w in grp]), keep_hidden=False)
        t_enc += time.perf_counter() - te
        n_tok += sum(w.ids.size for w in grp)
        if timing is not None:
            timing["encoder_tokens"] = n_tok
            timing["encoder_tokens_per_s"] = n_tok / t_enc if t_enc > 0 else float("nan")
        for b, w in enumerate(grp):
            yield w, out.attentions[:, b]


#: Offset of the masked pass's random streams: masks ``[seed, MASK_STREAM, 0]``, bootstrap ``[seed, MASK_STREAM, 1]``.
MASK_STREAM = 36


def masked_lift_statistics(
    model: NumpyBert, windows: list, memberships: dict, *, mask_id: int, fraction: float, n_boot: int, seed: int,
    progress: bool = False,
) -> LiftStats:  # fmt: skip
    """The masked-query lifts (:mod:`.lifts`): each window re-encoded with a seeded fraction of its words masked.

    In each window a seeded ``fraction`` of the valid positions is shown as ``mask_id``
    (:func:`.lifts.mask_positions`, stream ``[seed, MASK_STREAM, 0]``); the windows are encoded and the masked
    positions are the queries, their classes taken from the hidden words. The lifts are pooled over windows with a
    window bootstrap from ``[seed, MASK_STREAM, 1]``.

    Parameters
    ----------
    model : NumpyBert
        The encoder.
    windows : list of Window
        Windows to mask and encode.
    memberships : dict of str to ndarray of bool, shape (vocab_size, K)
        The class sets (e.g. ``"topic_sets"``, ``"labels"``); all give topics to the same tokens.
    mask_id : int
        The [MASK] token id.
    fraction : float, 0 < fraction <= 1
        Fraction of each window's valid positions masked (rounded, at least one).
    n_boot : int, >= 10
        Bootstrap replicates.
    seed : int, >= 0
        Seed of the masks and the bootstrap.
    progress : bool, default False
        Show a progress bar.

    Returns
    -------
    LiftStats
        Lifts per class set and definition (``all_keys``, ``excl_own``), pair counts, own-word and
        own-position shares, ``n_queries`` (masked topic-token queries), ``n_windows``.

    Raises
    ------
    ValueError
        If ``fraction`` is outside (0, 1] or the memberships disagree.

    See Also
    --------
    theorycheck.realdata.lifts.LiftAccumulator : The accumulation.
    theorycheck.realdata.lifts.mask_positions : The masked positions.
    theorycheck.realdata.pipeline.attention_statistics : The text pass.

    References
    ----------
    SPEC §11.9 (the ``masked`` definition of the lift; the theory's lift there is exactly 1).

    Examples
    --------
    >>> from theorycheck.realdata.encoder import NumpyBert
    >>> from theorycheck.realdata.pipeline import Window, masked_lift_statistics
    >>> from theorycheck.realdata.tokenizer import WordPieceTokenizer
    >>> tok, model = WordPieceTokenizer(), NumpyBert.from_pretrained()
    >>> M = np.zeros((tok.vocab_size, 2), bool)
    >>> M[[tok.token_to_id(w) for w in ("cat", "dog", "cow")], 0] = True
    >>> M[[tok.token_to_id(w) for w in ("car", "bus", "van")], 1] = True
    >>> windows = []
    >>> for d, text in enumerate(["cat dog car cow bus", "van bus dog car cat"]):
    ...     ids = np.array([tok.cls_id, *tok.encode(text).ids, tok.sep_id])
    ...     windows.append(Window(ids, np.r_[False, np.ones(5, bool), False], d))
    >>> kw = dict(mask_id=tok.mask_id, fraction=0.4, n_boot=10, seed=0)
    >>> res = masked_lift_statistics(model, windows, {"topic_sets": M}, **kw)
    >>> res.n_windows, res.n_queries, sorted(res.lifts["topic_sets"])  # 2 masked words per window
    (2, 4, ['all_keys', 'excl_own'])
    >>> again = masked_lift_statistics(model, windows, {"topic_sets": M}, **kw)  # same seed, same result
    >>> a, b = (r.lifts["topic_sets"]["excl_own"]["gap"] for r in (res, again))
    >>> bool(np.array_equal(a, b, equal_nan=True))
    True
    """
    rng = np.random.default_rng([seed, MASK_STREAM, 0])
    masked = []
    for w in windows:
        m = mask_positions(w.valid, fraction, rng)
        masked.append((Window(np.where(m, mask_id, w.ids), w.valid, w.doc), m, w.ids))
    c = model.config
    acc = LiftAccumulator(c.num_hidden_layers, c.num_attention_heads, memberships)
    hidden = {id(mw): (m, ids) for mw, m, ids in masked}
    for mw, a in encode_windows(model, [mw for mw, _, _ in masked], progress=progress):
        m, ids = hidden[id(mw)]
        acc.add(a, mw.ids, mw.valid, masked=m, hidden_ids=ids)
    return acc.result(n_boot=n_boot, rng=np.random.default_rng([seed, MASK_STREAM, 1]))
