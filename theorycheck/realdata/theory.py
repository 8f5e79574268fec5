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
    """
    if not isinstance(fit, TopicFit):
        raise TypeError(f"fit must be a TopicFit, got {type(fit).__name__}")
    return 1.0 / fit.n_topics


def theory_model(fit: TopicFit, *, alpha: float | None = None) -> GeneralTopicModel:
    """``GeneralTopicModel.from_lda(fit, prior="dirichlet", alpha, floor=0)`` (module docstring).

    ``alpha`` defaults to :func:`pipeline_alpha`. Raises ``ValueError`` naming ``fit.phi`` if a word
    has zero weight in every topic (the floor-free model would not contain it).
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

    The general model's token for ``fit.vocab[w]`` is ``w + 1``. ``ValueError`` naming
    ``token_topics`` if a topic word is not in the LDA vocabulary.
    """
    if not isinstance(token_topics, TokenTopics):
        raise TypeError(f"token_topics must be a TokenTopics, got {type(token_topics).__name__}")
    index = {w: i for i, w in enumerate(fit.vocab)}
    missing = [w for w in token_topics.words if w not in index]
    if missing:
        raise ValueError(f"token_topics: words {missing[:5]} are not in the LDA vocabulary fit.vocab")
    return np.array([index[w] for w in token_topics.words], dtype=np.int64)


def label_membership(fit: TopicFit, token_topics: TokenTopics, vocab_size: int) -> np.ndarray:
    """Bool ``(vocab_size, n_topics)``: every topic token's dominant topic (SPEC §11.6, the labels ``z`` of the
    theory's label family ``alpha I_w + beta Z``, :meth:`GeneralTopicModel.dominant_topic` of
    :func:`theory_model`) as a one-element topic set; the class set that makes the comparison's classes the
    labels of the scores (SPEC §11.9)."""
    z = theory_model(fit).dominant_topic()[vocabulary_rows(fit, token_topics)]
    out = np.zeros((check_int("vocab_size", vocab_size, low=1), fit.n_topics), dtype=bool)
    out[token_topics.token_ids, z] = True
    return out


def optimal_word_embeddings(g: GeneralTopicModel, mk: Masking):
    """``(F, result)``: ``F`` (``(V1, rank)``) with ``F F^T`` the minimum-norm optimal tied Gram (SPEC §11.5).

    ``result`` is the certified :class:`~theorycheck.solvers.SolveResult` (``RuntimeError`` unless it
    succeeded).
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
    """One table row per named embedding matrix: same-topic / different-topic means and the gap with its
    bootstrap CI (:func:`stats.embedding_pair_stats`) over the SAME pool ``ids`` and classes.

    Every matrix gets a fresh ``default_rng([seed, SEED_STREAM])``: identical token resampling
    (paired intervals). ``gap_over_sd`` = gap / standard deviation of the different-topic similarity
    (scale-free, so the theory's and a network's dot products can be compared).
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
    """``summary`` (JSON-ready, deterministic: model and table rows, ``attention`` when measured attention was
    given), ``figure`` (arrays for
    :mod:`theorycheck.realdata.plots`), the compared topic tokens ``token_ids`` (ascending) and their
    LDA ``words``, and ``timing`` (``theory_s`` wall and ``theory_cpu_s`` process CPU in total,
    ``theory_model_s`` for the model and its optimum, ``attention_*`` for the attention part,
    ``theory_vocab_size``)."""

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

    Parameters
    ----------
    prep : :class:`theorycheck.realdata.pipeline.Prepared`
        Its LDA ``fit``, ``token_topics`` (the MiniLM route's topic tokens and classes) and ``model``.
    masking : Masking, optional
        Masking of the theory's MLM objective (default: BERT's 0.15 / 0.1 / 0.1, SPEC §2.1).
    alpha : float, optional
        Dirichlet concentration of the document law (default :func:`pipeline_alpha`).
    n_boot, seed : bootstrap replicates and seed (stream ``[seed, SEED_STREAM]``).
    max_figure_words : int
        Topic tokens in the figure's similarity matrices.
    attention : AttentionStats, optional
        MiniLM's measured attention over the same topic tokens and classes (the pipeline's); with it the
        theory's optimal attention and its predicted lifts are added
        (:func:`theorycheck.realdata.attention_theory.attention_theory`, ``summary["attention"]``).
    attention_laws : int, optional
        Sampled document laws of the attention optimum (default :data:`theorycheck.realdata.attention_theory.N_LAWS`).
    lifts : dict of str -> :class:`~theorycheck.realdata.lifts.LiftStats`, optional
        MiniLM's lifts under the comparison's definitions (``"text"`` and, optionally, ``"masked"``, class sets
        ``"topic_sets"`` and ``"labels"``), compared like for like with the theory's
        (:func:`theorycheck.realdata.attention_theory.lift_comparison`).
    sensitivity_laws : int
        Laws of each optimum of :func:`theorycheck.realdata.attention_theory.sensitivity` (0 skips it).
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
    """Markdown table of :func:`theory_comparison`'s ``summary`` (one row per metric and source), followed by
    the attention table (:func:`theorycheck.realdata.attention_theory.format_attention_table`) when the
    summary has one."""
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
