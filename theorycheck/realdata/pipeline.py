"""The real-data experiment end to end (SPEC §5.4-5.5); the writer is :mod:`.output`.

corpus -> content words -> seeded LDA -> word topics -> token ids -> (embedding statistics,
attention statistics over windows of the corpus run through the numpy encoder, co-occurrence
comparison) + the same co-occurrence topic signal on a synthetic LDA corpus with planted topics
+ the exact embedding optimum at the fitted topics beside MiniLM (:mod:`.theory`, SPEC §11.5)
+ the theory's optimal attention there and the lifts it predicts beside MiniLM's heads, the same statistic on
both sides: every key, own position and own word excluded, masked queries (a second encoder pass)
(:mod:`.lifts`, :mod:`.theory_lifts`, :mod:`.attention_theory`, SPEC §11.9).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .._threads import blas_threads
from .._validate import check_int
from ..models import TopicModel
from ..sampling import sample_documents
from . import stats as S
from .config import RealDataConfig
from .corpus import Corpus, content_words, read_text_folder, stop_words, wikipedia_fragment
from .encoder import NumpyBert
from .lifts import LiftAccumulator, LiftStats, mask_positions
from .mapping import TokenTopics, map_to_tokens
from .output import write_realdata
from .theory import label_membership, theory_comparison
from .tokenizer import WordPieceTokenizer
from .topics import TopicFit, WordTopics, assign_topics, fit_lda

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
class Window:
    """One encoder input: ``ids`` with [CLS]/[SEP], ``valid`` content positions, source document."""

    ids: np.ndarray
    valid: np.ndarray
    doc: int


def content_token_mask(tokenizer, stop, *, min_len: int = 3) -> np.ndarray:
    """Bool ``(vocab_size,)``: the token is a lower-case alphabetic word of ``>= min_len`` letters,
    not a stop word (so no special token, no ``##`` piece, no punctuation or number)."""
    out = np.zeros(tokenizer.vocab_size, dtype=bool)
    for i, t in enumerate(tokenizer.vocab):
        out[i] = len(t) >= min_len and t.isascii() and t.isalpha() and t.islower() and t not in stop
    return out


def make_windows(corpus: Corpus, tokenizer, content_mask, *, window: int = 128) -> list[Window]:
    """Tokenise every document and cut it into windows of ``window - 2`` tokens + [CLS], [SEP].

    A position is *valid* iff its token is a whole word (not a sub-word piece, SPEC §5.4)
    and a content token (``content_mask``). Validity is decided on the whole document, so a
    word cut by a window boundary is still recognised as split.
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


def synthetic_signal(T: int, v: int, alpha: float, n_docs: int, *, seed: int = 0) -> dict:
    """Co-occurrence topic signal (:func:`stats.cooccurrence_lift`) of a planted LDA corpus.

    Documents from :func:`theorycheck.sampling.sample_documents` (Dirichlet(alpha) prior,
    N uniform in [100, 150], SPEC §1.2); word ``w`` belongs to topic ``(w - 1) // v``.
    """
    tm = TopicModel(T=T, v=v, prior="dirichlet", alpha=alpha)
    docs = sample_documents(tm, n_docs, (100, 150), seed=seed)
    seqs = [docs.tokens[i, : docs.lengths[i]] for i in range(n_docs)]
    valid = [np.ones(s.size, dtype=bool) for s in seqs]
    M = np.zeros((tm.V1, T), dtype=bool)
    w = np.arange(1, tm.V1)
    M[w, tm.topic_of(w)] = True
    X, counts, pp = S.cooccurrence_matrix(seqs, valid, tm.V1)
    out = S.cooccurrence_lift(X, counts, pp, M)
    out.update(T=T, v=v, alpha=alpha, n_docs=n_docs, seed=seed)
    return out


@dataclass
class RealDataResult:
    """Everything :func:`run_realdata` measured.

    ``summary`` is JSON-serialisable; ``attention`` and ``values`` hold arrays for figures.
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
    """Run the whole experiment (see module docstring); no file is written.

    ``corpus``, ``model``, ``tokenizer`` may be passed to reuse loaded objects (the corpus then
    overrides ``config.corpus``).
    """
    cfg = config or RealDataConfig()
    if not isinstance(cfg, RealDataConfig):
        raise TypeError(f"config must be a RealDataConfig, got {type(cfg).__name__}")
    if cfg.blas_threads is None:
        return _run(cfg, corpus, model, tokenizer, progress)
    with blas_threads(cfg.blas_threads):
        return _run(cfg, corpus, model, tokenizer, progress)


@dataclass
class Prepared:
    """Loaded and fitted inputs shared by the statistics (see :func:`prepare`)."""

    corpus: Corpus
    docs_words: list
    stop: frozenset
    fit: TopicFit
    word_topics: WordTopics
    token_topics: TokenTopics
    tokenizer: WordPieceTokenizer
    model: NumpyBert
    content_mask: np.ndarray
    windows: list
    timing: dict


def prepare(
    cfg: RealDataConfig,
    *,
    corpus: Corpus | None = None,
    model: NumpyBert | None = None,
    tokenizer: WordPieceTokenizer | None = None,
) -> Prepared:
    """Load the corpus, fit LDA, assign topics, map them to token ids, cut encoder windows."""
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


def embedding_statistics(prep: Prepared, membership, *, n_no_topic: int, n_boot: int, rng, n_values: int = 20000):
    """Pair-class statistics of the input embeddings over topic tokens + ``n_no_topic`` sampled
    no-topic content tokens; also returns up to ``n_values`` class values per metric for figures."""
    has = membership.any(axis=1)
    topic_ids = np.flatnonzero(has)
    no_topic = np.flatnonzero(prep.content_mask & ~has)
    pick = rng.choice(no_topic, size=min(n_no_topic, no_topic.size), replace=False) if no_topic.size else no_topic
    pool = np.concatenate([topic_ids, np.sort(pick)])
    E = prep.model.word_embeddings.astype(np.float64)
    emb = S.embedding_pair_stats(E, membership, pool, n_boot=n_boot, rng=rng)
    X = E[pool]
    G = X @ X.T
    nrm = np.sqrt(np.diag(G))
    cos = G / np.outer(nrm, nrm)
    cls = S.pair_classes(pool, membership)
    np.fill_diagonal(cls, -1)
    values: dict[str, dict[str, np.ndarray]] = {"cosine": {}, "dot": {}}
    for c, name in enumerate(S.CLASSES):
        sel = np.argwhere(cls == c) if name != "same_token" else np.stack([np.arange(pool.size)] * 2, 1)
        if len(sel) > n_values:
            sel = sel[rng.choice(len(sel), n_values, replace=False)]
        values["cosine"][name] = cos[sel[:, 0], sel[:, 1]]
        values["dot"][name] = G[sel[:, 0], sel[:, 1]]
    return emb, values, int(pick.size)


def specificity_sweep(prep: Prepared, fractions, *, n_boot: int, rng, max_pool: int = 2000) -> list[dict]:
    """Embedding same-minus-different-topic gap when only each topic's ``top_fraction`` most probable
    words get a topic (``"top_fraction"`` rule), for every fraction: is the effect stronger for
    topic-specific words (SPEC §5.4)? Pool = the topic tokens only, a seeded random subset of
    ``max_pool`` of them when there are more (memory is quadratic in the pool)."""
    E = prep.model.word_embeddings.astype(np.float64)
    out = []
    for f in fractions:
        wt = assign_topics(prep.fit, method="top_fraction", top_fraction=f, stop=prep.stop)
        tt = map_to_tokens(wt, prep.tokenizer)
        row: dict[str, Any] = {"top_fraction": float(f), "topic_tokens": int(tt.token_ids.size)}
        if tt.token_ids.size >= 2:
            pool = tt.token_ids
            if pool.size > max_pool:
                pool = np.sort(rng.choice(pool, size=max_pool, replace=False))
                row["pool_subsampled_to"] = int(max_pool)
            emb = S.embedding_pair_stats(E, tt.vocab_membership, pool, n_boot=n_boot, rng=rng)
            for m in ("dot", "cosine"):
                g = emb["gap"][m]
                row[m] = {
                    "gap": g.mean,
                    "ci_low": g.ci_low,
                    "ci_high": g.ci_high,
                    "same_topic": emb[m]["same_topic"].mean,
                    "different_topic": emb[m]["different_topic"].mean,
                }
        out.append(row)
    return out


def cooccurrence_statistics(prep: Prepared, membership, *, n_cooccur: int):
    """Co-occurrence counts over all windows, the ``n_cooccur`` top topic-token pairs, the fraction
    of them that share a topic, and the co-occurrence topic signal (:func:`stats.cooccurrence_lift`)."""
    W = prep.windows
    X, counts, pp = S.cooccurrence_matrix(
        [w.ids for w in W], [w.valid for w in W], prep.tokenizer.vocab_size, keep=membership.any(axis=1)
    )
    pairs, pair_counts = S.top_cooccurring_pairs(X, membership.any(axis=1), n_cooccur)
    if len(pairs):
        shared = (membership[pairs[:, 0]] & membership[pairs[:, 1]]).any(axis=1)
        frac_same = float(shared.mean())
    else:
        frac_same = float("nan")
    return pairs, {
        "n_pairs": int(len(pairs)),
        "min_count": float(pair_counts.min()) if len(pairs) else float("nan"),
        "fraction_same_topic": frac_same,
        "lift_real": S.cooccurrence_lift(X, counts, pp, membership),
    }


def select_windows(windows: list, max_tokens: int, rng) -> list:
    """Windows in a seeded random order until ``max_tokens`` tokens are reached."""
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
    """Yield ``(window, attentions (L, H, n, n))``; equal-length windows are batched together."""
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


def attention_statistics(
    encoded, membership, pairs, *, n_layers: int, n_heads: int, n_boot: int, rng, lifts: LiftAccumulator | None = None
) -> S.AttentionStats:
    """Accumulate :class:`stats.AttentionAccumulator` over ``(window, attentions)`` pairs (and, given, the
    text-pass lifts of ``lifts``, :mod:`.lifts`)."""
    acc = S.AttentionAccumulator(n_layers, n_heads, membership, pairs)
    for w, a in encoded:
        acc.add(a, w.ids, w.valid)
        if lifts is not None:
            lifts.add(a, w.ids, w.valid)
    return acc.result(n_boot=n_boot, rng=rng)


#: Offset of the masked pass's random streams: masks ``[seed, MASK_STREAM, 0]``, bootstrap ``[seed, MASK_STREAM, 1]``.
MASK_STREAM = 36


def masked_lift_statistics(
    model: NumpyBert, windows: list, memberships: dict, *, mask_id: int, fraction: float, n_boot: int, seed: int,
    progress: bool = False,
) -> LiftStats:  # fmt: skip
    """The masked-query lifts (:mod:`.lifts`): each window with a seeded ``fraction`` of its valid positions shown as
    ``mask_id`` (:func:`.lifts.mask_positions`, stream ``[seed, MASK_STREAM, 0]``), encoded, its masked positions
    the queries (classes from the hidden words); window bootstrap from ``[seed, MASK_STREAM, 1]``."""
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
