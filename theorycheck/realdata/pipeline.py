"""The real-data experiment end to end (SPEC §5.4-5.5); the writer is :mod:`.output`.

corpus -> content words -> seeded LDA -> word topics -> token ids -> (embedding statistics,
attention statistics over windows of the corpus run through the numpy encoder, co-occurrence
comparison) + the same co-occurrence topic signal on a synthetic LDA corpus with planted topics
+ the exact embedding optimum at the fitted topics beside MiniLM (:mod:`.theory`, SPEC §11.5)
+ the theory's optimal attention there and the lifts it predicts beside MiniLM's heads, the same statistic on
both sides: every key, own position and own word excluded, masked queries (a second encoder pass)
(:mod:`.lifts`, :mod:`.theory_lifts`, :mod:`.attention_theory`, SPEC §11.9).

The steps live in :mod:`.windows` (encoder windows and passes) and :mod:`.measures` (the statistics); this module
re-exports them, prepares the inputs and runs the whole.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .._threads import blas_threads
from . import stats as S
from .config import RealDataConfig
from .corpus import Corpus, content_words, read_text_folder, stop_words, wikipedia_fragment
from .encoder import NumpyBert
from .lifts import LiftAccumulator
from .mapping import map_to_tokens
from .measures import (
    Prepared,
    attention_statistics,
    cooccurrence_statistics,
    embedding_statistics,
    specificity_sweep,
    synthetic_signal,
)
from .output import write_realdata
from .theory import label_membership, theory_comparison
from .tokenizer import WordPieceTokenizer
from .topics import assign_topics, fit_lda
from .windows import (
    Window,
    content_token_mask,
    encode_windows,
    make_windows,
    masked_lift_statistics,
    select_windows,
)

__all__ = [
    "RealDataConfig",
    "RealDataResult",
    "Window",
    "Prepared",
    "prepare",
    "make_windows",
    "content_token_mask",
    "embedding_statistics",
    "specificity_sweep",
    "cooccurrence_statistics",
    "select_windows",
    "encode_windows",
    "attention_statistics",
    "masked_lift_statistics",
    "run_realdata",
    "synthetic_signal",
    "write_realdata",
]


@dataclass
class RealDataResult:
    """Everything :func:`run_realdata` measured.

    ``summary`` is JSON-serialisable; ``attention`` and ``values`` hold arrays for figures.

    Parameters
    ----------
    config : RealDataConfig
        The settings of the run.
    summary : dict
        The JSON summary (``results.json`` of :func:`write_realdata`): ``corpus``, ``topics``, ``embedding``,
        ``embedding_pool``, ``attention``, ``attention_lifts``, ``cooccurrence``, ``specificity``, ``timing``,
        ``config``, ``theory``.
    attention : AttentionStats
        Attention lift ``n A[i, j]`` per layer, head and pair class (:func:`attention_statistics`).
    values : dict, optional
        Arrays for the figures: ``"embedding"`` (class values of :func:`embedding_statistics`) and ``"theory"``
        (the similarity matrices of :func:`theorycheck.realdata.theory.theory_comparison`).

    See Also
    --------
    run_realdata : Returns it.
    write_realdata : Writes it to a folder.
    theorycheck.realdata.stats.AttentionStats : The type of ``attention``.

    References
    ----------
    SPEC §5.4 (the quantities of the summary; its ``theory`` part: :mod:`.theory`, :mod:`.attention_theory`).

    Examples
    --------
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, run_realdata
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64, n_boot=10,
    ...                      seed=1, specificity_fractions=(), attention_laws=0, masked_fraction=0, sensitivity_laws=0)
    >>> res = run_realdata(cfg, corpus=corpus, progress=False)
    >>> res.config is cfg, res.attention.mean_lift.shape, sorted(res.values)  # 6 layers, 12 heads, 5 classes
    (True, (6, 12, 5), ['embedding', 'theory'])
    >>> res.summary["corpus"]
    {'source': 'planted', 'documents': 9, 'words': 360, 'windows': 27}
    """

    config: RealDataConfig
    summary: dict
    attention: S.AttentionStats
    values: dict = field(default_factory=dict)


def _load_corpus(spec: str) -> Corpus:
    if spec == "wikipedia":
        return wikipedia_fragment()
    return read_text_folder(spec)


def _stats_dict(d):
    if isinstance(d, S.PairStats):
        return d.to_dict()
    if isinstance(d, dict):
        return {k: _stats_dict(v) for k, v in d.items()}
    return d


def run_realdata(
    config: RealDataConfig | None = None,
    *,
    corpus: Corpus | None = None,
    model: NumpyBert | None = None,
    tokenizer: WordPieceTokenizer | None = None,
    progress: bool = True,
) -> RealDataResult:
    """Run the whole experiment (see the module docstring); no file is written.

    Parameters
    ----------
    config : RealDataConfig, optional
        Settings (default ``RealDataConfig()``: the Wikipedia fragment, 20 topics).
    corpus : Corpus, optional
        Documents to use; then overrides ``config.corpus``.
    model : NumpyBert, optional
        A loaded encoder to reuse (default: the bundled MiniLM).
    tokenizer : WordPieceTokenizer, optional
        A loaded tokenizer to reuse (default: the bundled one).
    progress : bool, default True
        Show progress bars of the encoder passes (the library's other bars, e.g. the theory's attention grid
        search, follow the ``THEORYCHECK_QUIET`` switch, ``--quiet`` on the command line).

    Returns
    -------
    RealDataResult
        The JSON ``summary`` of every statistic, the attention statistics and the arrays of the figures.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`RealDataConfig`.
    RuntimeError
        If fewer than 2 topic words are single tokens of the model's vocabulary (:func:`prepare`).
    MissingExtraError
        If the ``nlp`` extra is not installed.

    See Also
    --------
    prepare : Its first step.
    write_realdata : Writes the result (``results.json``, figures).
    RealDataConfig : The settings.

    References
    ----------
    SPEC §5.4 (the experiment; the co-occurrence comparison is :func:`cooccurrence_statistics`, the theory at the
    fitted topics :mod:`.theory` and :mod:`.attention_theory`).

    Examples
    --------
    A tiny planted corpus, the theory's attention solve and the masked pass skipped:

    >>> import os
    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, run_realdata
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64, n_boot=10,
    ...                      seed=1, specificity_fractions=(), attention_laws=0, masked_fraction=0, sensitivity_laws=0)
    >>> res = run_realdata(cfg, corpus=corpus, progress=False)
    >>> res.summary["topics"]["topic_tokens"], res.summary["cooccurrence"]["fraction_same_topic"]
    (12, 1.0)
    >>> res.summary["embedding"]["gap"]["cosine"]["mean"] > 0, os.listdir(".")
    (True, [])
    """
    cfg = config or RealDataConfig()
    if not isinstance(cfg, RealDataConfig):
        raise TypeError(f"config must be a RealDataConfig, got {type(cfg).__name__}")
    if cfg.blas_threads is None:
        return _run(cfg, corpus, model, tokenizer, progress)
    with blas_threads(cfg.blas_threads):
        return _run(cfg, corpus, model, tokenizer, progress)


def prepare(
    cfg: RealDataConfig,
    *,
    corpus: Corpus | None = None,
    model: NumpyBert | None = None,
    tokenizer: WordPieceTokenizer | None = None,
) -> Prepared:
    """Load the corpus, fit LDA, assign topics, map them to token ids, cut encoder windows.

    Parameters
    ----------
    cfg : RealDataConfig
        Settings: ``corpus``, ``n_topics``, ``seed``, ``lda_backend``, ``lda_max_iter``, the word-topic rule
        (``assign``, ``top_fraction``, ``threshold``, ``topics_per_word``) and ``window``.
    corpus : Corpus, optional
        Documents to use instead of loading ``cfg.corpus``.
    model : NumpyBert, optional
        Encoder (default: the bundled MiniLM, :meth:`NumpyBert.from_pretrained`).
    tokenizer : WordPieceTokenizer, optional
        Tokenizer (default: the bundled one).

    Returns
    -------
    Prepared
        The corpus, its content words, the stop words, the LDA fit, word and token topics, tokenizer,
        model, content mask, windows and the timing of each step.

    Raises
    ------
    RuntimeError
        If fewer than 2 topic words are single tokens of the model's vocabulary.
    ValueError
        From the LDA fit, e.g. fewer words pass its document-frequency filter than ``n_topics``.

    See Also
    --------
    Prepared : The result.
    run_realdata : Calls it, then computes every statistic.
    theorycheck.realdata.topics.fit_lda : The seeded LDA fit.
    theorycheck.realdata.mapping.map_to_tokens : Words to token ids.

    References
    ----------
    SPEC §5.4 (data, topics, word-topic rule (a), token mapping of the offline analog).

    Examples
    --------
    A planted corpus: each document uses the words of one of three topics; the LDA fit recovers them:

    >>> from theorycheck.realdata.corpus import Corpus
    >>> from theorycheck.realdata.pipeline import RealDataConfig, prepare
    >>> rng = np.random.default_rng(0)
    >>> planted = [["cat", "dog", "cow", "pig"], ["car", "bus", "van", "ship"], ["piano", "drum", "song", "band"]]
    >>> texts = tuple(" ".join(rng.choice(planted[d % 3], 40)) for d in range(9))
    >>> corpus = Corpus(tuple(f"doc{d}" for d in range(9)), texts, "planted")
    >>> cfg = RealDataConfig(corpus="planted", n_topics=3, top_fraction=0.3, window=16, max_tokens=64,
    ...                      n_boot=10, seed=1)
    >>> prep = prepare(cfg, corpus=corpus)
    >>> sorted(sorted(prep.fit.top_words(t, 4)) for t in range(3))
    [['band', 'drum', 'piano', 'song'], ['bus', 'car', 'ship', 'van'], ['cat', 'cow', 'dog', 'pig']]
    >>> prep.token_topics.vocab_membership.sum(axis=0)  # 4 topic tokens per topic
    array([4, 4, 4])
    """
    timing = {}
    t = time.perf_counter()
    corpus = corpus if corpus is not None else _load_corpus(cfg.corpus)
    stop = stop_words()
    docs_words = [content_words(x, stop=stop) for x in corpus.texts]
    timing["corpus_s"] = time.perf_counter() - t
    t = time.perf_counter()
    fit = fit_lda(docs_words, cfg.n_topics, seed=cfg.seed, backend=cfg.lda_backend, max_iter=cfg.lda_max_iter)
    wt = assign_topics(
        fit,
        method=cfg.assign,
        top_fraction=cfg.top_fraction,
        threshold=cfg.threshold,
        topics_per_word=cfg.topics_per_word,
        stop=stop,
    )
    timing["lda_s"] = time.perf_counter() - t
    t = time.perf_counter()
    tokenizer = tokenizer or WordPieceTokenizer()
    model = model or NumpyBert.from_pretrained()
    tt = map_to_tokens(wt, tokenizer)
    if tt.token_ids.size < 2:
        raise RuntimeError(
            f"only {tt.token_ids.size} topic words are single tokens of the model vocabulary; "
            "use more topics or a larger top_fraction"
        )
    cmask = content_token_mask(tokenizer, stop)
    windows = make_windows(corpus, tokenizer, cmask, window=cfg.window)
    timing["tokenize_s"] = time.perf_counter() - t
    return Prepared(corpus, docs_words, stop, fit, wt, tt, tokenizer, model, cmask, windows, timing)


def attention_summary(att: S.AttentionStats) -> dict:
    return {
        "classes": list(att.classes),
        "mean_lift": att.mean_lift.tolist(),
        "counts": att.counts.tolist(),
        "n_windows": att.n_sequences,
        "gap": att.gap.tolist(),
        "gap_ci": att.gap_ci.tolist(),
        "mean_gap": _nanmean(att.gap),
        "mean_gap_ci": list(att.mean_gap_ci),
        "heads_positive": int(np.sum(att.gap_ci[..., 0] > 0)),
        "heads_negative": int(np.sum(att.gap_ci[..., 1] < 0)),
    }


def _attention_passes(cfg, prep, M, pairs, rng, timing, progress):
    """The encoder passes: ``att`` (:func:`attention_statistics`) and MiniLM's ``lifts`` (text and masked,
    :mod:`.lifts`) over the seeded window sample, with their wall and CPU times in ``timing``."""
    t, tc = time.perf_counter(), time.process_time()
    chosen = select_windows(prep.windows, cfg.max_tokens, rng)
    c = prep.model.config
    memberships = {"topic_sets": M, "labels": label_membership(prep.fit, prep.token_topics, M.shape[0])}
    text_lifts = LiftAccumulator(c.num_hidden_layers, c.num_attention_heads, memberships)
    enc = encode_windows(prep.model, chosen, progress=progress, timing=timing)
    rng_lifts = copy.deepcopy(rng)  # the same window replicates as att's: identical all_keys intervals
    att = attention_statistics(
        enc, M, pairs, n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads, n_boot=cfg.n_boot, rng=rng,
        lifts=text_lifts,
    )  # fmt: skip
    lifts = {"text": text_lifts.result(n_boot=cfg.n_boot, rng=rng_lifts)}
    timing["attention_s"] = time.perf_counter() - t
    timing["attention_cpu_s"] = time.process_time() - tc
    if cfg.masked_fraction:
        t, tc = time.perf_counter(), time.process_time()
        lifts["masked"] = masked_lift_statistics(
            prep.model, chosen, memberships, mask_id=prep.tokenizer.mask_id, fraction=cfg.masked_fraction,
            n_boot=cfg.n_boot, seed=cfg.seed, progress=progress,
        )  # fmt: skip
        timing["masked_pass_s"] = time.perf_counter() - t
        timing["masked_pass_cpu_s"] = time.process_time() - tc
    return att, lifts


def _run(cfg, corpus, model, tokenizer, progress) -> RealDataResult:
    t0 = time.perf_counter()
    prep = prepare(cfg, corpus=corpus, model=model, tokenizer=tokenizer)
    timing = dict(prep.timing)
    tt = prep.token_topics
    M = tt.vocab_membership
    rng = np.random.default_rng(cfg.seed)

    t = time.perf_counter()
    emb, values, n_pick = embedding_statistics(prep, M, n_no_topic=cfg.n_no_topic, n_boot=cfg.n_boot, rng=rng)
    timing["embedding_s"] = time.perf_counter() - t

    t = time.perf_counter()
    pairs, cooc = cooccurrence_statistics(prep, M, n_cooccur=cfg.n_cooccur)
    timing["cooccurrence_s"] = time.perf_counter() - t

    t = time.perf_counter()
    sweep = specificity_sweep(prep, cfg.specificity_fractions, n_boot=cfg.n_boot, rng=rng)
    timing["specificity_s"] = time.perf_counter() - t

    att, lifts = _attention_passes(cfg, prep, M, pairs, rng, timing, progress)

    t = time.perf_counter()
    synth = synthetic_signal(cfg.synth_T, cfg.synth_v, cfg.synth_alpha, cfg.synth_docs, seed=cfg.seed)
    timing["synthetic_s"] = time.perf_counter() - t

    theory = theory_comparison(  # own random streams (SPEC §11.5, §11.9)
        prep, n_boot=cfg.n_boot, seed=cfg.seed, attention=att if cfg.attention_laws else None,
        attention_laws=cfg.attention_laws or None, lifts=lifts, sensitivity_laws=cfg.sensitivity_laws,
    )  # fmt: skip
    timing.update(theory.timing)
    timing["total_s"] = time.perf_counter() - t0

    E = prep.model.word_embeddings.astype(np.float64)
    same_ids = np.argwhere(np.triu(S.pair_classes(tt.token_ids, M) == 1, 1))
    same_pairs = tt.token_ids[same_ids] if len(same_ids) else np.zeros((0, 2), np.int64)
    ia, ib, ic = (S.ATTN_CLASSES.index(k) for k in ("same_topic", "different_topic", "top_cooccurring"))
    cooc.update(
        {
            "attention_lift_top_cooccurring": _nanmean(att.mean_lift[..., ic]),
            "attention_lift_same_topic": _nanmean(att.mean_lift[..., ia]),
            "attention_lift_different_topic": _nanmean(att.mean_lift[..., ib]),
            "embedding_top_cooccurring": S.pair_similarity(E, pairs),
            "embedding_same_topic": S.pair_similarity(E, same_pairs),
            "lift_synthetic": synth,
        }
    )
    summary = dict(_summary(cfg, prep, emb, n_pick, att, cooc, sweep, timing, lifts), theory=theory.summary)
    return RealDataResult(cfg, summary, att, {"embedding": values, "theory": theory.figure})


def _summary(cfg, prep, emb, n_pick, att, cooc, sweep, timing, lifts) -> dict:
    """The JSON summary of a run (``results.json``)."""
    tt = prep.token_topics
    fit, wt = prep.fit, prep.word_topics
    return {
        "corpus": {
            "source": prep.corpus.source,
            "documents": len(prep.corpus),
            "words": int(sum(map(len, prep.docs_words))),
            "windows": len(prep.windows),
        },
        "topics": {
            "n_topics": fit.n_topics,
            "vocabulary": len(fit.vocab),
            "topic_words": len(wt.words),
            "topic_tokens": int(tt.token_ids.size),
            "dropped_subword": len(tt.dropped),
            "top_words": {t: fit.top_words(t, 8) for t in range(fit.n_topics)},
        },
        "embedding": _stats_dict(emb),
        "embedding_pool": {"topic_tokens": int(tt.token_ids.size), "no_topic_tokens": n_pick},
        "attention": attention_summary(att),
        "attention_lifts": {k: v.summary() for k, v in lifts.items()},
        "cooccurrence": cooc,
        "specificity": sweep,
        "timing": timing,
        "config": asdict(cfg),
    }


def _nanmean(x) -> float:
    """Mean of the finite entries; NaN (no warning) if there are none (empty pair class)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")
