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
    """Settings of :func:`run_realdata` (validated at construction).

    Attributes
    ----------
    corpus : str
        ``"wikipedia"`` (gensim's bundled fragment) or a folder of ``*.txt`` files.
    n_topics, lda_backend, lda_max_iter : LDA settings (:func:`fit_lda`).
    assign, top_fraction, threshold, topics_per_word : word-topic rule (:func:`assign_topics`).
    window : int
        Encoder window in WordPiece tokens, [CLS] and [SEP] included (``<= 512``).
    max_tokens : int
        Token budget of the attention pass (windows are drawn in a seeded random order).
    n_no_topic : int
        No-topic content tokens added to the embedding pool.
    n_cooccur : int
        Size ``N`` of the most-co-occurring pair set.
    n_boot : int
        Bootstrap replicates.
    seed : int
    synth_T, synth_v, synth_alpha, synth_docs : planted synthetic LDA corpus (N uniform in [100, 150]).
    blas_threads : int or None
        BLAS threads during the run (``threadpoolctl``); ``None`` leaves the library default.
        Default 1: on a shared 2-core machine, multi-threaded OpenBLAS under contention was
        measured 15x slower than one thread.
    specificity_fractions : tuple of float
        ``top_fraction`` values of the topic-specificity sweep (:func:`specificity_sweep`; smaller =
        only the most topic-specific words get a topic). Empty to skip.
    attention_laws : int
        Sampled document laws of the theory's optimal attention at the fitted topics, compared with
        MiniLM's heads (:mod:`.attention_theory`, SPEC §11.9); 0 skips that comparison.
    masked_fraction : float
        Fraction of each window's valid positions shown as [MASK] in a second encoder pass, whose masked
        positions are the queries of the masked-query lifts (:mod:`.lifts`, SPEC §11.9); 0 skips that pass.
    sensitivity_laws : int
        Sampled laws of each optimum of the sensitivity of the theory's lift to ``W^V`` and the score family
        (:func:`.attention_theory.sensitivity`: about 110 s CPU and a dense ``V1 x V1`` identity ``W^V`` at the
        default corpus); 0 skips it.
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
