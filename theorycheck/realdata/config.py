"""Settings of the real-data experiment (SPEC §5.4-5.5): :class:`RealDataConfig` and the choices it is
validated against.

A module of its own that imports neither the ``nlp`` extra nor scipy: the command line builds the
``theorycheck realdata`` parser from these defaults (``--help`` shows them) without loading the experiment.
:mod:`.pipeline` runs it; :mod:`.topics` and :mod:`.attention_theory` take their choices and defaults from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import check_choice, check_int, check_real

__all__ = ["RealDataConfig", "BACKENDS", "METHODS", "N_LAWS"]

#: LDA libraries of :func:`theorycheck.realdata.topics.fit_lda`.
BACKENDS = ("sklearn", "gensim")
#: Word-to-topic rules of :func:`theorycheck.realdata.topics.assign_topics`.
METHODS = ("top_fraction", "threshold")
#: Sampled document laws of the main solve of the theory's optimal attention at the fitted topics
#: (:mod:`theorycheck.realdata.attention_theory`, SPEC §11.9).
N_LAWS = 2048


@dataclass(frozen=True)
class RealDataConfig:
    """Settings of :func:`~theorycheck.realdata.pipeline.run_realdata` (SPEC §5.4), validated at construction.

    Parameters
    ----------
    corpus : str, default "wikipedia"
        ``"wikipedia"`` (gensim's bundled fragment) or a folder of ``*.txt`` files; only a label when
        :func:`~theorycheck.realdata.pipeline.run_realdata` is given a ``corpus`` object.
    n_topics : int, n_topics >= 2, default 20
        LDA topics ``K`` (:func:`~theorycheck.realdata.topics.fit_lda`).
    lda_backend : {"sklearn", "gensim"}, default "sklearn"
        LDA library.
    lda_max_iter : int, >= 1, default 30
        LDA iterations (sklearn's ``max_iter``).
    assign : {"top_fraction", "threshold"}, default "top_fraction"
        Word-topic rule of :func:`~theorycheck.realdata.topics.assign_topics`.
    top_fraction : float, 0 < top_fraction <= 1, default 0.01
        ``"top_fraction"`` rule: each topic keeps its ``ceil(top_fraction V')`` most probable words.
    threshold : float, 0 < threshold <= 1, default 0.5
        ``"threshold"`` rule: minimum normalised topic weight of a word.
    topics_per_word : int, >= 1, default 1
        ``"threshold"`` rule: at most this many topics per word.
    window : int, 8 <= window <= 512, default 128
        Encoder window in WordPiece tokens, [CLS] and [SEP] included.
    max_tokens : int, max_tokens >= window, default 32768
        Token budget of the attention pass (windows are drawn in a seeded random order).
    n_no_topic : int, >= 0, default 1000
        No-topic content tokens added to the embedding pool.
    n_cooccur : int, >= 1, default 200
        Size ``N`` of the most-co-occurring pair set (the co-occurrence comparison).
    n_boot : int, >= 10, default 200
        Bootstrap replicates.
    seed : int, >= 0, default 0
        Seed of the LDA fit and of every random stream of the run.
    synth_T : int, >= 2, default 10
        Topics of the planted synthetic LDA corpus (:func:`~theorycheck.realdata.pipeline.synthetic_signal`).
    synth_v : int, >= 1, default 10
        Words per topic of the planted corpus.
    synth_alpha : float, > 0, default 0.1
        Dirichlet parameter of the planted corpus (documents of ``N`` uniform in [100, 150] words).
    synth_docs : int, >= 2, default 400
        Documents of the planted corpus.
    blas_threads : int or None, >= 1, default 1
        BLAS threads during the run (``threadpoolctl``); ``None`` leaves the library default.
        Default 1: on a shared 2-core machine, multi-threaded OpenBLAS under contention was
        measured 15x slower than one thread.
    specificity_fractions : tuple of float, each in (0, 1], default (0.0025, 0.005, 0.01, 0.02, 0.05)
        ``top_fraction`` values of the topic-specificity sweep
        (:func:`~theorycheck.realdata.pipeline.specificity_sweep`; smaller = only the most topic-specific words
        get a topic). Empty to skip. Stored as a tuple.
    attention_laws : int, 0 or >= 2, default 2048
        Sampled document laws of the theory's optimal attention at the fitted topics, compared with
        MiniLM's heads (:mod:`.attention_theory`, SPEC §11.9); 0 skips that comparison.
    masked_fraction : float, 0 or in (0, 1], default 0.15
        Fraction of each window's valid positions shown as [MASK] in a second encoder pass, whose masked
        positions are the queries of the masked-query lifts (:mod:`.lifts`, SPEC §11.9); 0 skips that pass.
    sensitivity_laws : int, 0 or >= 2, default 256
        Sampled laws of each optimum of the sensitivity of the theory's lift to ``W^V`` and the score family
        (:func:`.attention_theory.sensitivity`: about 110 s CPU and a dense ``V1 x V1`` identity ``W^V`` at the
        default corpus); 0 skips it.

    Raises
    ------
    ValueError
        A setting outside its range above (the message names it, its value and the range), a ``lda_backend`` or
        ``assign`` not in its choices, or ``attention_laws`` / ``sensitivity_laws`` equal to 1.
    TypeError
        ``corpus`` not a non-empty str, or an integer setting given as a non-integer.

    See Also
    --------
    theorycheck.realdata.pipeline.run_realdata : Runs the experiment these settings describe.
    theorycheck.realdata.pipeline.prepare : Uses the corpus, LDA, word-topic and window settings.
    theorycheck.realdata.topics.fit_lda : The LDA fit of ``n_topics``, ``lda_backend``, ``lda_max_iter``.

    References
    ----------
    SPEC §5.4 (the offline analog of the paper's Wikipedia experiment: its defaults), §11.9 (the theory's
    attention lift, the masked pass). Li, Li and Risteski, *How Do Transformers Learn Topic
    Structure?*, ICML 2023, arXiv:2303.04245, Section 5.

    Examples
    --------
    >>> from theorycheck.realdata.config import RealDataConfig
    >>> cfg = RealDataConfig(n_topics=5, window=16, max_tokens=64, specificity_fractions=[0.1, 0.2])
    >>> cfg.n_topics, cfg.window, cfg.specificity_fractions, cfg.seed
    (5, 16, (0.1, 0.2), 0)
    >>> RealDataConfig(window=16, max_tokens=8)
    Traceback (most recent call last):
    ...
    ValueError: max_tokens must lie in [16, inf], got 8
    >>> RealDataConfig(attention_laws=1)
    Traceback (most recent call last):
    ...
    ValueError: attention_laws must be 0 (skip) or at least 2, got 1
    """

    corpus: str = "wikipedia"
    n_topics: int = 20
    lda_backend: str = "sklearn"
    lda_max_iter: int = 30
    assign: str = "top_fraction"
    top_fraction: float = 0.01
    threshold: float = 0.5
    topics_per_word: int = 1
    window: int = 128
    max_tokens: int = 32768
    n_no_topic: int = 1000
    n_cooccur: int = 200
    n_boot: int = 200
    seed: int = 0
    synth_T: int = 10
    synth_v: int = 10
    synth_alpha: float = 0.1
    synth_docs: int = 400
    blas_threads: int | None = 1
    specificity_fractions: tuple = (0.0025, 0.005, 0.01, 0.02, 0.05)
    attention_laws: int = N_LAWS
    masked_fraction: float = 0.15
    sensitivity_laws: int = 256

    def __post_init__(self):
        if not isinstance(self.corpus, str) or not self.corpus:
            raise TypeError(f"corpus must be 'wikipedia' or a folder path (str), got {self.corpus!r}")
        check_int("n_topics", self.n_topics, low=2)
        check_choice("lda_backend", self.lda_backend, BACKENDS)
        check_int("lda_max_iter", self.lda_max_iter, low=1)
        check_choice("assign", self.assign, METHODS)
        check_real("top_fraction", self.top_fraction, low=0.0, high=1.0, low_open=True)
        check_real("threshold", self.threshold, low=0.0, high=1.0, low_open=True)
        check_int("topics_per_word", self.topics_per_word, low=1)
        check_int("window", self.window, low=8, high=512)
        check_int("max_tokens", self.max_tokens, low=self.window)
        check_int("n_no_topic", self.n_no_topic, low=0)
        check_int("n_cooccur", self.n_cooccur, low=1)
        check_int("n_boot", self.n_boot, low=10)
        check_int("seed", self.seed, low=0)
        check_int("synth_T", self.synth_T, low=2)
        check_int("synth_v", self.synth_v, low=1)
        check_real("synth_alpha", self.synth_alpha, low=0.0, low_open=True)
        check_int("synth_docs", self.synth_docs, low=2)
        if self.blas_threads is not None:
            check_int("blas_threads", self.blas_threads, low=1)
        fr = tuple(self.specificity_fractions)
        for f in fr:
            check_real("specificity_fractions[i]", f, low=0.0, high=1.0, low_open=True)
        object.__setattr__(self, "specificity_fractions", fr)
        if check_int("attention_laws", self.attention_laws, low=0) == 1:
            raise ValueError("attention_laws must be 0 (skip) or at least 2, got 1")
        if check_int("sensitivity_laws", self.sensitivity_laws, low=0) == 1:
            raise ValueError("sensitivity_laws must be 0 (skip) or at least 2, got 1")
        if self.masked_fraction != 0:
            check_real("masked_fraction", self.masked_fraction, low=0.0, high=1.0, low_open=True)
