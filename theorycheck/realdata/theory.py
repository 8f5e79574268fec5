"""The paper's embedding theory at the fitted Wikipedia topics, beside MiniLM (SPEC §11.5, §5.4).

Route: the seeded LDA of the real-data pipeline -> :meth:`GeneralTopicModel.from_lda` (Dirichlet
document law) -> the exact population optimum of the tied embedding model
(:func:`theorycheck.solvers.optimal_embedding_gram`, closed form: the minimum-norm Gram
``G* = Y (X^T Y)^+ Y^T = F F^T`` of SPEC §11.5) -> one embedding row per topic token
(``F[w + 1]`` for the LDA word ``fit.vocab[w]``; token 0 is [MASK]) -> the SAME pair-class statistics
as the MiniLM measurement (:func:`theorycheck.realdata.stats.embedding_pair_stats`): the same topic
tokens, the same word classes (``token_topics.vocab_membership``) and the same token bootstrap.

For the Dirichlet law ``M2`` has full rank ``T``, so SPEC §11.5 gives the word block in closed form,

.. math::  G^*_{w w'} = \\phi_{:,w}^\\top K^{-1} \\phi_{:,w'},\\qquad K = a\\,\\phi\\phi^\\top + (r/n)\\,1 1^\\top,

independent of ``alpha``: the theory's embedding of a word is its whitened topic profile.

Law and floor. The document law is Dirichlet with the pipeline's concentration
(:func:`pipeline_alpha`: ``1 / n_topics``, the default document-topic prior of both LDA backends).
No floor is added (``floor = 0``): both backends' topic-word posteriors include the positive
Dirichlet pseudo-count ``eta`` (``1 / n_topics`` by default), so every ``phi`` entry is already
positive and every word lies in some topic; a floor would only move probability to words the fit
did not give it. :func:`theory_model` refuses a fit with a word of zero weight in every topic.

Attention (issue #24, SPEC §11.8-§11.9). Given MiniLM's measured attention (``attention``, an
:class:`~theorycheck.realdata.stats.AttentionStats`), the comparison also holds the theory's optimal
label-family attention at the same model and the lifts it predicts in the same classes, beside every
MiniLM layer and head (:mod:`.attention_theory`); ``summary["attention"]`` and the second part of the
table.

Randomness. The bootstrap of this comparison draws from its own stream
``default_rng([seed, SEED_STREAM])`` (so the rest of a run keeps its numbers), and the theory and
MiniLM statistics use the SAME token resampling (two generators with that seed): the intervals
are paired.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_real
from ..models import GeneralTopicModel, Masking
from ..solvers import optimal_embedding_gram
from . import stats as S
from .attention_theory import N_LAWS, attention_theory, format_attention_table
from .mapping import TokenTopics
from .topics import TopicFit

__all__ = [
    "SEED_STREAM",
    "TheoryComparison",
    "pipeline_alpha",
    "theory_model",
    "vocabulary_rows",
    "label_membership",
    "optimal_word_embeddings",
    "compare_embeddings",
    "theory_comparison",
    "format_theory_table",
]

#: Offset of this comparison's random stream: ``default_rng([seed, SEED_STREAM])`` (issue #13).
SEED_STREAM = 13
#: Topic tokens shown in the similarity-matrix figure (a seeded subset when there are more).
MAX_FIGURE_WORDS = 600
METRICS = ("dot", "cosine")


def pipeline_alpha(fit: TopicFit) -> float:
    """The document-topic Dirichlet concentration of the pipeline's LDA: ``1 / n_topics``.

    scikit-learn's ``LatentDirichletAllocation(doc_topic_prior=None)`` and gensim's
    ``LdaModel(alpha="symmetric")``, as called by :func:`theorycheck.realdata.topics.fit_lda`, both
    use ``1 / n_topics``.

    Parameters
    ----------
    fit : TopicFit
        The fitted topics (``K = fit.n_topics``).

    Returns
    -------
    float
        ``1 / K``.

    Raises
    ------
    TypeError
        If ``fit`` is not a :class:`~theorycheck.realdata.topics.TopicFit`.

    See Also
    --------
    theory_model : Uses it as the default Dirichlet concentration.
    theorycheck.realdata.topics.fit_lda : The fit whose prior it is.

    References
    ----------
    SPEC §5.4 (the seeded LDA), §11.5 (the Dirichlet document law).

    Examples
    --------
    >>> from theorycheck.realdata.theory import pipeline_alpha
    >>> from theorycheck.realdata.topics import TopicFit
    >>> fit = TopicFit(("cat", "dog", "sun"), np.full((4, 3), 1 / 3), backend="sklearn", seed=0)
    >>> pipeline_alpha(fit)
    0.25
    """
    if not isinstance(fit, TopicFit):
        raise TypeError(f"fit must be a TopicFit, got {type(fit).__name__}")
    return 1.0 / fit.n_topics


def theory_model(fit: TopicFit, *, alpha: float | None = None) -> GeneralTopicModel:
    """The general topic model of an LDA fit: ``GeneralTopicModel.from_lda(fit, prior="dirichlet", alpha, floor=0)``.

    The topics are ``fit.phi`` (word ``fit.vocab[w]`` is token ``w + 1``; token 0 is [MASK]) and the document law
    is ``Dirichlet(alpha 1_K)``; no floor is added (module docstring).

    Parameters
    ----------
    fit : TopicFit
        The fitted topics; every word needs positive weight in some topic.
    alpha : float, > 0, optional
        Dirichlet concentration of the document law (default :func:`pipeline_alpha`, ``1 / K``).

    Returns
    -------
    GeneralTopicModel
        ``T = K`` topics over ``len(fit.vocab)`` words, ``prior = "dirichlet"``.

    Raises
    ------
    ValueError
        Naming ``fit.phi`` if a word has zero weight in every topic (the floor-free model would not contain it),
        or naming ``alpha`` if ``alpha <= 0``.

    See Also
    --------
    theorycheck.models.GeneralTopicModel.from_lda : The constructor it calls.
    optimal_word_embeddings : The theory's embeddings of this model.
    pipeline_alpha : The default ``alpha``.

    References
    ----------
    SPEC §1.2 (the LDA generalisation), §11.1 (the general model), §11.5.

    Examples
    --------
    >>> from theorycheck.realdata.theory import theory_model
    >>> from theorycheck.realdata.topics import TopicFit
    >>> phi = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> g = theory_model(TopicFit(("cat", "dog", "sun", "moon"), phi, backend="sklearn", seed=0))
    >>> g.T, g.n_words, g.V1, g.prior, g.alpha  # alpha = 1 / K
    (2, 4, 5, 'dirichlet', array([0.5, 0.5]))
    >>> bool(np.array_equal(g.phi, phi))
    True
    """
    a = pipeline_alpha(fit) if alpha is None else check_real("alpha", alpha, low=0.0, low_open=True)
    dead = np.flatnonzero(fit.phi.max(axis=0) <= 0)
    if dead.size:
        raise ValueError(
            f"fit.phi: words {[fit.vocab[i] for i in dead[:5]]} have zero weight in every topic; "
            "the theory route uses floor = 0 and needs every word in some topic"
        )
    return GeneralTopicModel.from_lda(fit, prior="dirichlet", alpha=a, floor=0.0)


def vocabulary_rows(fit: TopicFit, token_topics: TokenTopics) -> np.ndarray:
    """Index in ``fit.vocab`` of the word of every topic token, aligned with ``token_topics.token_ids``.

    The general model's token for ``fit.vocab[w]`` is ``w + 1`` (:func:`theory_model`).

    Parameters
    ----------
    fit : TopicFit
        The fitted topics.
    token_topics : TokenTopics
        The topic tokens of the pretrained model's vocabulary (their ``words`` must be LDA words).

    Returns
    -------
    ndarray of int64, shape (n_tok,)
        ``rows[k]``: the LDA index of ``token_topics.words[k]``.

    Raises
    ------
    ValueError
        Naming ``token_topics`` if a topic word is not in the LDA vocabulary.
    TypeError
        If ``token_topics`` is not a :class:`~theorycheck.realdata.mapping.TokenTopics`.

    See Also
    --------
    label_membership : The dominant-topic labels of these rows.
    theorycheck.realdata.mapping.map_to_tokens : Makes the TokenTopics.

    References
    ----------
    SPEC §5.4 (the token mapping), §11.9.

    Examples
    --------
    >>> from theorycheck.realdata.mapping import TokenTopics
    >>> from theorycheck.realdata.theory import vocabulary_rows
    >>> from theorycheck.realdata.topics import TopicFit
    >>> fit = TopicFit(("cat", "dog", "sun", "moon"), np.full((2, 4), 0.25), backend="sklearn", seed=0)
    >>> M = np.zeros((8, 2), dtype=bool)
    >>> M[[2, 3], 0] = M[[5, 6], 1] = True  # token ids 2, 3: topic 0; 5, 6: topic 1
    >>> tt = TokenTopics(M, np.array([2, 3, 5, 6]), ("dog", "cat", "sun", "moon"), dropped=())
    >>> vocabulary_rows(fit, tt)
    array([1, 0, 2, 3])
    """
    if not isinstance(token_topics, TokenTopics):
        raise TypeError(f"token_topics must be a TokenTopics, got {type(token_topics).__name__}")
    index = {w: i for i, w in enumerate(fit.vocab)}
    missing = [w for w in token_topics.words if w not in index]
    if missing:
        raise ValueError(f"token_topics: words {missing[:5]} are not in the LDA vocabulary fit.vocab")
    return np.array([index[w] for w in token_topics.words], dtype=np.int64)


def label_membership(fit: TopicFit, token_topics: TokenTopics, vocab_size: int) -> np.ndarray:
    """Every topic token's dominant topic as a one-element topic set: the class set of the theory's scores.

    The labels ``z`` of the theory's label family ``alpha I_w + beta Z`` (SPEC §11.6,
    :meth:`GeneralTopicModel.dominant_topic` of :func:`theory_model`); with them as classes, the comparison's
    classes are the labels of the scores (SPEC §11.9).

    Parameters
    ----------
    fit : TopicFit
        The fitted topics.
    token_topics : TokenTopics
        The topic tokens (rows set: ``token_topics.token_ids``).
    vocab_size : int, >= 1
        Rows of the result (the pretrained model's vocabulary size, above every token id).

    Returns
    -------
    ndarray of bool, shape (vocab_size, n_topics)
        ``out[token_ids[k], z_k]`` is True for the dominant topic ``z_k`` of topic token ``k``; other rows are False.

    Raises
    ------
    ValueError
        If ``vocab_size < 1`` or a topic word is not in the LDA vocabulary (:func:`vocabulary_rows`).

    See Also
    --------
    vocabulary_rows : The LDA rows of the topic tokens.
    theorycheck.realdata.attention_theory.lift_comparison : Compares the lifts in this class set and the topic sets.

    References
    ----------
    SPEC §11.6 (dominant-topic labels), §11.9 (the two class sets).

    Examples
    --------
    >>> from theorycheck.realdata.mapping import TokenTopics
    >>> from theorycheck.realdata.theory import label_membership
    >>> from theorycheck.realdata.topics import TopicFit
    >>> phi = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> fit = TopicFit(("cat", "dog", "sun", "moon"), phi, backend="sklearn", seed=0)
    >>> M = np.zeros((8, 2), dtype=bool)
    >>> M[[2, 3, 5], 0] = M[[5, 6], 1] = True  # "sun" (id 5) is in both topic sets
    >>> tt = TokenTopics(M, np.array([2, 3, 5, 6]), ("dog", "cat", "sun", "moon"), dropped=())
    >>> label_membership(fit, tt, 8)[[2, 3, 5, 6]].astype(int)  # "sun": its dominant topic 1 only
    array([[1, 0],
           [1, 0],
           [0, 1],
           [0, 1]])
    """
    z = theory_model(fit).dominant_topic()[vocabulary_rows(fit, token_topics)]
    out = np.zeros((check_int("vocab_size", vocab_size, low=1), fit.n_topics), dtype=bool)
    out[token_topics.token_ids, z] = True
    return out


def optimal_word_embeddings(g: GeneralTopicModel, mk: Masking):
    """Embeddings ``F`` whose Gram ``F F^T`` is the minimum-norm optimal tied Gram of a general model (SPEC §11.5).

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (e.g. :func:`theory_model`).
    mk : Masking
        The masking of the MLM objective.

    Returns
    -------
    F : ndarray, shape (V1, rank)
        Row ``w + 1`` is the theory's embedding of word ``w`` (row 0: [MASK]); ``F F^T = G*``, which for a
        Dirichlet law has the word block ``phi^T K^{-1} phi``, ``K = a phi phi^T + (r / n) 1 1^T``.
    result : SolveResult
        The certified result of :func:`theorycheck.solvers.optimal_embedding_gram` (``method="closed-form"``).

    Raises
    ------
    RuntimeError
        If the Gram was not certified (``result.success`` is False).

    See Also
    --------
    theorycheck.solvers.optimal_embedding_gram : The solver.
    compare_embeddings : Pair-class statistics of these embeddings beside a network's.

    References
    ----------
    SPEC §11.5 (the minimum-norm tied Gram), §4.1 D3 (the paper's model).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.realdata.theory import optimal_word_embeddings
    >>> phi = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> g, mk = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5), Masking()
    >>> F, res = optimal_word_embeddings(g, mk)
    >>> F.shape, res.success
    ((5, 2), True)
    >>> K = mk.a * phi @ phi.T + mk.r / 4 * np.ones((2, 2))  # the closed form of the word block
    >>> bool(np.allclose(F[1:] @ F[1:].T, phi.T @ np.linalg.solve(K, phi)))
    True
    >>> np.round(F[1:] @ F[1:].T, 4)  # same-topic words: larger inner products
    array([[ 0.5731,  0.5731, -0.0049, -0.0049],
           [ 0.5731,  0.5731, -0.0049, -0.0049],
           [-0.0049, -0.0049,  0.5731,  0.5731],
           [-0.0049, -0.0049,  0.5731,  0.5731]])
    """
    res = optimal_embedding_gram(g, mk, method="closed-form")
    if not res.success:
        raise RuntimeError(f"the optimal embedding Gram was not certified: {res.message}")
    return np.asarray(res.x.left), res


def _row(source, st, n_words):
    gap = st["gap"]
    out = {"source": source, "n_words": int(n_words)}
    for m in METRICS:
        s, d, g = st[m]["same_topic"], st[m]["different_topic"], gap[m]
        out[m] = {
            "same_topic": s.mean,
            "different_topic": d.mean,
            "gap": g.mean,
            "ci_low": g.ci_low,
            "ci_high": g.ci_high,
            "gap_over_sd": g.mean / d.std if d.std > 0 else float("nan"),
            "n_same_pairs": s.n_pairs,
            "n_different_pairs": d.n_pairs,
        }
    return out


def compare_embeddings(embeddings: dict, membership, ids, *, n_boot: int = 200, seed: int = 0) -> list[dict]:
    """One table row per named embedding matrix: same-topic and different-topic means and the gap with its CI.

    The statistics are those of :func:`theorycheck.realdata.stats.embedding_pair_stats` over the SAME pool ``ids``
    and classes. Every matrix gets a fresh ``default_rng([seed, SEED_STREAM])``: identical token resampling
    (paired intervals).

    Parameters
    ----------
    embeddings : dict of str to ndarray
        Source name -> embedding matrix ``(vocab_size, d)`` (row = token id).
    membership : ndarray of bool, shape (vocab_size, K)
        The topic sets of the tokens (the classes).
    ids : ndarray of int, shape (n,)
        The distinct token ids of the pool, ``n >= 2``.
    n_boot : int, >= 10, default 200
        Bootstrap replicates.
    seed : int, >= 0, default 0
        Seed of the bootstrap stream ``[seed, SEED_STREAM]``.

    Returns
    -------
    list of dict
        One row per source: ``source``, ``n_words`` and per metric (``"dot"``, ``"cosine"``) ``same_topic``,
        ``different_topic``, ``gap``, ``ci_low``, ``ci_high``, ``gap_over_sd`` (gap / standard deviation of the
        different-topic similarity: scale-free, so the theory's and a network's dot products can be compared; NaN if
        that deviation is 0), ``n_same_pairs``, ``n_different_pairs``.

    Raises
    ------
    ValueError
        If ``seed < 0`` or the inputs fail :func:`~theorycheck.realdata.stats.embedding_pair_stats`' checks.

    See Also
    --------
    theorycheck.realdata.stats.embedding_pair_stats : The statistics of one matrix.
    theory_comparison : Compares the theory's embeddings with MiniLM's this way.

    References
    ----------
    SPEC §5.4 (the embedding statistic), §11.5.

    Examples
    --------
    >>> from theorycheck.realdata.theory import compare_embeddings
    >>> M = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> E = np.array([[1.0, 0.1], [1.0, -0.1], [0.1, 1.0], [-0.1, 1.0]])  # aligned with the topics
    >>> rows = compare_embeddings({"aligned": E, "swapped": E[[0, 2, 1, 3]]}, M, np.arange(4), n_boot=20)
    >>> [(r["source"], round(r["dot"]["gap"], 6)) for r in rows]  # 0.99 - 0 and 0 - 0.495
    [('aligned', 0.99), ('swapped', -0.495)]
    """
    seed = check_int("seed", seed, low=0)
    rows = []
    for name, E in embeddings.items():
        st = S.embedding_pair_stats(E, membership, ids, n_boot=n_boot, rng=np.random.default_rng([seed, SEED_STREAM]))
        rows.append(_row(name, st, np.asarray(ids).size))
    return rows


def _figure_data(embeddings: dict, membership, ids, *, max_words: int, seed: int) -> dict:
    """Cosine matrices of a seeded subset of ``ids`` sorted by (first topic, id), and topic boundaries."""
    ids = np.asarray(ids)
    if ids.size > max_words:
        ids = np.sort(np.random.default_rng([seed, SEED_STREAM, 1]).choice(ids, size=max_words, replace=False))
    first = np.argmax(membership[ids], axis=1)
    order = np.lexsort((ids, first))
    ids, first = ids[order], first[order]
    cos = {}
    for name, E in embeddings.items():
        X = np.asarray(E, dtype=np.float64)[ids]
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        cos[name] = X @ X.T
    bounds = np.flatnonzero(np.diff(first)) + 1
    return {"cosine": cos, "topics": first, "boundaries": bounds, "n_words": int(ids.size)}


@dataclass
class TheoryComparison:
    """The result of :func:`theory_comparison`.

    Parameters
    ----------
    summary : dict
        JSON-ready and deterministic: ``model`` (the theory model and its optimum: ``n_topics``, ``lda_vocabulary``,
        ``alpha``, ``masking``, ``gram_rank``, ``loss``, ...), ``table`` (:func:`compare_embeddings` rows for
        ``"theory"`` and ``"MiniLM"``), ``figure_words``, and ``attention`` when measured attention was given.
    figure : dict
        Arrays for :mod:`theorycheck.realdata.plots`: ``cosine`` (source -> cosine matrix of a seeded subset of the
        topic tokens, sorted by first topic), ``topics``, ``boundaries``, ``n_words``.
    token_ids : ndarray of int64, shape (n_tok,)
        The compared topic tokens, ascending.
    words : tuple of str
        Their LDA words.
    timing : dict
        ``theory_s`` wall and ``theory_cpu_s`` process CPU in total, ``theory_model_s`` for the model and its
        optimum, ``attention_*`` for the attention part, ``theory_vocab_size``.

    See Also
    --------
    theory_comparison : Makes it.
    format_theory_table : Markdown of its ``summary``.

    References
    ----------
    SPEC §11.5, §11.9.

    Examples
    --------
    >>> from theorycheck.realdata.theory import TheoryComparison
    >>> tc = TheoryComparison({"model": {}, "table": []}, {}, np.array([2, 3]), ("cat", "dog"), {})
    >>> tc.words, tc.token_ids
    (('cat', 'dog'), array([2, 3]))
    """

    summary: dict
    figure: dict
    token_ids: np.ndarray
    words: tuple
    timing: dict


def _theory_matrix(prep_fit, tt, vocab_size, mk, alpha):
    """Theory embeddings over the model's vocabulary (zero rows for tokens without topic) and model info."""
    g = theory_model(prep_fit, alpha=alpha)
    F, res = optimal_word_embeddings(g, mk)
    rows = vocabulary_rows(prep_fit, tt)
    E = np.zeros((vocab_size, F.shape[1]))
    E[tt.token_ids] = F[rows + 1]
    info = {
        "n_topics": g.T,
        "lda_vocabulary": g.n_words,
        "prior": g.prior,
        "alpha": float(g.alpha[0]),
        "floor": 0.0,
        "min_phi": float(g.phi.min()),
        "masking": mk.to_dict(),
        "gram_rank": int(res.info["rank"]),
        "loss": float(res.fun),
        "loss_gap": float(res.residuals["loss_gap"]),
    }
    return E, info, rows, g


def theory_comparison(
    prep, *, masking: Masking | None = None, alpha: float | None = None, n_boot: int = 200, seed: int = 0,
    max_figure_words: int = MAX_FIGURE_WORDS, attention: S.AttentionStats | None = None,
    attention_laws: int | None = None, lifts: dict | None = None, sensitivity_laws: int = 256,
) -> TheoryComparison:  # fmt: skip
    """The theory at the fitted topics beside the pretrained embeddings (module docstring).

    The exact minimum-norm tied optimum of :func:`theory_model` (:func:`optimal_word_embeddings`) gives each topic
    token an embedding; :func:`compare_embeddings` compares it with the network's input embeddings over the same
    tokens, classes and token bootstrap.

    Parameters
    ----------
    prep : theorycheck.realdata.pipeline.Prepared
        Its LDA ``fit``, ``token_topics`` (the MiniLM route's topic tokens and classes) and ``model`` (its
        ``word_embeddings``, ``(vocab_size, d)``); any object with these attributes.
    masking : Masking, optional
        Masking of the theory's MLM objective (default: BERT's 0.15 / 0.1 / 0.1, SPEC §2.1).
    alpha : float, > 0, optional
        Dirichlet concentration of the document law (default :func:`pipeline_alpha`).
    n_boot : int, >= 10, default 200
        Bootstrap replicates.
    seed : int, >= 0, default 0
        Seed of the bootstrap stream ``[seed, SEED_STREAM]``.
    max_figure_words : int, >= 2
        Topic tokens in the figure's similarity matrices (a seeded subset when there are more).
    attention : AttentionStats, optional
        MiniLM's measured attention over the same topic tokens and classes (the pipeline's); with it the
        theory's optimal attention and its predicted lifts are added
        (:func:`theorycheck.realdata.attention_theory.attention_theory`, ``summary["attention"]``).
    attention_laws : int, >= 2, optional
        Sampled document laws of the attention optimum (default :data:`theorycheck.realdata.attention_theory.N_LAWS`).
    lifts : dict of str to LiftStats, optional
        MiniLM's lifts under the comparison's definitions (``"text"`` and, optionally, ``"masked"``, class sets
        ``"topic_sets"`` and ``"labels"``), compared like for like with the theory's
        (:func:`theorycheck.realdata.attention_theory.lift_comparison`).
    sensitivity_laws : int, >= 0
        Laws of each optimum of :func:`theorycheck.realdata.attention_theory.sensitivity` (0 skips it).

    Returns
    -------
    TheoryComparison
        The summary (JSON-ready), the figure's arrays, the compared tokens and the timings.

    Raises
    ------
    ValueError
        If ``n_boot < 10``, ``seed < 0``, ``max_figure_words < 2`` or ``alpha <= 0``, or the fit and the tokens
        disagree (:func:`theory_model`, :func:`vocabulary_rows`).
    TypeError
        If ``masking`` is not a Masking or ``attention`` not an AttentionStats.

    See Also
    --------
    theorycheck.realdata.pipeline.run_realdata : Runs it on the Wikipedia fragment.
    format_theory_table : Markdown of the summary.
    compare_embeddings : The table rows.

    References
    ----------
    SPEC §5.4 (the measurement), §11.5 (the theory's embeddings), §11.9 (the attention part); Li, Li and Risteski,
    *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 1.

    Examples
    --------
    A two-topic fit and random "network" embeddings; the theory's same-topic words have identical embeddings:

    >>> from types import SimpleNamespace
    >>> from theorycheck.realdata.mapping import TokenTopics
    >>> from theorycheck.realdata.theory import theory_comparison
    >>> from theorycheck.realdata.topics import TopicFit
    >>> phi = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> fit = TopicFit(("cat", "dog", "sun", "moon"), phi, backend="sklearn", seed=0)
    >>> M = np.zeros((6, 2), dtype=bool)
    >>> M[[1, 2], 0] = M[[3, 4], 1] = True  # token ids 1..4 are the four words
    >>> tt = TokenTopics(M, np.array([1, 2, 3, 4]), ("cat", "dog", "sun", "moon"), dropped=())
    >>> E = np.random.default_rng(0).normal(size=(6, 3))
    >>> prep = SimpleNamespace(fit=fit, token_topics=tt, model=SimpleNamespace(word_embeddings=E))
    >>> tc = theory_comparison(prep, n_boot=20)
    >>> tc.words, tc.summary["model"]["gram_rank"], tc.summary["model"]["loss_gap"]
    (('cat', 'dog', 'sun', 'moon'), 2, 0.0)
    >>> theory = tc.summary["table"][0]
    >>> theory["source"], theory["cosine"]["same_topic"]
    ('theory', 1.0)
    """
    mk = Masking() if masking is None else masking
    if not isinstance(mk, Masking):
        raise TypeError(f"masking must be a Masking, got {type(mk).__name__}")
    n_boot = check_int("n_boot", n_boot, low=10)
    seed = check_int("seed", seed, low=0)
    max_figure_words = check_int("max_figure_words", max_figure_words, low=2)
    if attention is not None and not isinstance(attention, S.AttentionStats):
        raise TypeError(f"attention must be an AttentionStats, got {type(attention).__name__}")
    t0, c0 = time.perf_counter(), time.process_time()
    tt = prep.token_topics
    M = tt.vocab_membership
    E_model = prep.model.word_embeddings
    E_theory, info, rows, g = _theory_matrix(prep.fit, tt, E_model.shape[0], mk, alpha)
    t_model = time.perf_counter() - t0
    embeddings = {"theory": E_theory, "MiniLM": E_model}
    table = compare_embeddings(embeddings, M, tt.token_ids, n_boot=n_boot, seed=seed)
    fig = _figure_data(embeddings, M, tt.token_ids, max_words=max_figure_words, seed=seed)
    summary = {"model": info, "table": table, "figure_words": fig["n_words"]}
    timing = {}
    if attention is not None:
        n_laws = N_LAWS if attention_laws is None else attention_laws
        at = attention_theory(g, mk, rows, M[tt.token_ids], attention, n_laws=n_laws, n_boot=n_boot, seed=seed,
                              lifts=lifts, sensitivity_laws=sensitivity_laws)  # fmt: skip
        summary["attention"] = at.summary
        timing.update(at.timing)
    words = tuple(prep.fit.vocab[i] for i in rows)
    timing.update(
        theory_s=time.perf_counter() - t0,
        theory_cpu_s=time.process_time() - c0,
        theory_model_s=t_model,
        theory_vocab_size=info["lda_vocabulary"],
    )
    return TheoryComparison(summary, fig, tt.token_ids.copy(), words, timing)


def format_theory_table(summary: dict) -> str:
    """Markdown table of :func:`theory_comparison`'s ``summary``.

    Parameters
    ----------
    summary : dict
        ``TheoryComparison.summary`` (keys ``model``, ``table``, optionally ``attention``).

    Returns
    -------
    str
        A paragraph naming the model, then one table row per metric and source (means, gap, its 95% CI, gap / sd),
        followed by the attention table (:func:`theorycheck.realdata.attention_theory.format_attention_table`) when
        the summary has one.

    See Also
    --------
    theory_comparison : Makes the summary.
    theorycheck.realdata.attention_theory.format_attention_table : The attention part.

    References
    ----------
    SPEC §11.5.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from theorycheck.realdata.mapping import TokenTopics
    >>> from theorycheck.realdata.theory import format_theory_table, theory_comparison
    >>> from theorycheck.realdata.topics import TopicFit
    >>> phi = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> fit = TopicFit(("cat", "dog", "sun", "moon"), phi, backend="sklearn", seed=0)
    >>> M = np.zeros((6, 2), dtype=bool)
    >>> M[[1, 2], 0] = M[[3, 4], 1] = True
    >>> tt = TokenTopics(M, np.array([1, 2, 3, 4]), ("cat", "dog", "sun", "moon"), dropped=())
    >>> E = np.random.default_rng(0).normal(size=(6, 3))  # stands for the network's embeddings
    >>> prep = SimpleNamespace(fit=fit, token_topics=tt, model=SimpleNamespace(word_embeddings=E))
    >>> print(format_theory_table(theory_comparison(prep, n_boot=20).summary).splitlines()[4])
    | dot | theory | 4 | 4 | 8 | 0.5731 | -0.004926 | 0.578 | [0.578, 0.578] | nan |
    """
    m = summary["model"]
    head = (
        f"Exact population optimum of the tied embedding model (min-norm Gram, SPEC §11.5) at the "
        f"{m['n_topics']} fitted LDA topics ({m['lda_vocabulary']} words, Dirichlet alpha = {m['alpha']:.4g}, "
        f"masking p_m = {m['masking']['p_m']}, p_c = {m['masking']['p_c']}, p_r = {m['masking']['p_r']}) "
        "beside the pretrained MiniLM input embeddings: same topic tokens, classes and token bootstrap.\n\n"
    )
    cols = "| metric | source | words | same-topic pairs | different-topic pairs | same topic | different topic "
    lines = [cols + "| gap | 95% CI | gap / sd |", "|" + "---|" * 10]
    for metric in METRICS:
        for r in summary["table"]:
            x = r[metric]
            lines.append(
                f"| {metric} | {r['source']} | {r['n_words']} | {x['n_same_pairs']} | {x['n_different_pairs']} "
                f"| {x['same_topic']:.4g} | {x['different_topic']:.4g} | {x['gap']:.4g} "
                f"| [{x['ci_low']:.4g}, {x['ci_high']:.4g}] | {x['gap_over_sd']:.3g} |"
            )
    out = head + "\n".join(lines) + "\n"
    if summary.get("attention"):
        out += "\n" + format_attention_table(summary["attention"])
    return out
