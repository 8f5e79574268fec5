"""Probes and references of a training run on a general topic-word matrix (SPEC §11).

The built-in probes of :mod:`theorycheck.nn.probes` read topics as contiguous blocks of ``v``
words; a general model has no ``v``. Here every word's topic is its **dominant topic**
``argmax_t phi[t, w]`` (:meth:`GeneralTopicModel.token_topics`), and

- ``block_score_W_V``, ``block_contrast_W_V`` (and ``*_gram`` for a trained embedding): the block
  score / same-topic minus different-topic mean of the word-word block, with those labels;
- ``attn_same_word``, ``attn_same_topic``, ``attn_diff_topic``: length-normalised attention class
  averages on the evaluation documents (uniform attention gives 1 in every class);
- ``topic_attention_ratio_median``: median over words ``a`` of
  ``mean_{b in t(a)} e^{S[a,b]} / mean_{b not in t(a)} e^{S[a,b]}`` (1 for uniform scores; the
  normalised form of ``K_eff / |t(a)|``, SPEC §4.3).

For the paper's model passed as a general model the labels are ``(w - 1) // v`` and the block and
class statistics equal the built-in ones. The norms, gradient norms, ``dist_W_V_opt`` (against
``C Sigma^+`` of the general moments, SPEC §11.3) and the dev loss are the built-in probes.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ..analysis import stats
from .probes import References, dev_loss, grad_norms, norms, value_distance

__all__ = [
    "GeneralReferences",
    "GENERAL_PROBES",
    "label_block_stats",
    "label_class_averages",
    "topic_attention_ratio",
]


class GeneralReferences(References):
    """``W_V = C Sigma^+`` from the general moments (SPEC §11.3) where the built-in rule applies;
    no ``K*`` (the (alpha, beta) family is symmetric-only) and no Gram reference."""

    def K_star(self):
        return None

    def gram(self):
        return None


def label_block_stats(M, labels) -> tuple[float, float]:
    """``(block_score, block_contrast)`` of the word-word block of a ``(V1, V1)`` matrix, topics = ``labels[1:]``.

    Contrast: mean same-label entry minus mean different-label entry; score: ``R^2`` of the
    two-valued class-mean pattern (:func:`theorycheck.analysis.stats.block_score`). NaN if one class is empty.
    """
    M = np.asarray(M, dtype=float)
    Wd, lab = M[1:, 1:], np.asarray(labels)[1:]
    same = lab[:, None] == lab[None, :]
    if same.all() or not same.any():
        return float("nan"), float("nan")
    ms, md = Wd[same].mean(), Wd[~same].mean()
    tot = float(np.sum((Wd - Wd.mean()) ** 2))
    score = float("nan") if tot == 0.0 else 1.0 - float(np.sum((Wd - np.where(same, ms, md)) ** 2)) / tot
    return score, float(ms - md)


def label_class_averages(A, tokens, labels) -> dict:
    """Length-normalised attention class averages ``same_word``, ``same_topic``, ``diff_topic``
    (:func:`theorycheck.analysis.stats.attention_class_averages` with ``normalise=True``) with the topic of
    token ``w`` given by ``labels[w]``."""
    st = stats.attention_class_averages(A, tokens, normalise=True, labels=labels)
    return {k: st[k] for k in ("same_word", "same_topic", "diff_topic")}


def topic_attention_ratio(S, labels) -> np.ndarray:
    """Per word ``a``: ``mean_{b in t(a)} e^{S[a,b]} / mean_{b not in t(a), b != 0} e^{S[a,b]}`` (log-sum-exp)."""
    Wd, lab = np.asarray(S, dtype=float)[1:, 1:], np.asarray(labels)[1:]
    same = lab[:, None] == lab[None, :]
    n_in, n_out = same.sum(axis=1), (~same).sum(axis=1)
    log_in = logsumexp(np.where(same, Wd, -np.inf), axis=1) - np.log(n_in)
    log_out = logsumexp(np.where(~same, Wd, -np.inf), axis=1) - np.log(np.maximum(n_out, 1))
    return np.exp(np.minimum(log_in - log_out, 700.0))


def general_value_structure(model, ctx) -> dict:
    """Block score and contrast of ``W^V`` (layer 0, head 0; one-hot) with dominant-topic labels."""
    if ctx.cfg.model.embedding != "one-hot" or ctx.tm.T <= 1:
        return {}
    score, contrast = label_block_stats(model.layers[0].params["W_V"][0], ctx.tm.token_topics())
    return {"block_score_W_V": score, "block_contrast_W_V": contrast}


def general_embedding_structure(model, ctx) -> dict:
    """Block score and contrast of the Gram ``W_E^T W_E`` with dominant-topic labels."""
    if model.embedding.one_hot or ctx.tm.T <= 1:
        return {}
    W_E = model.embedding.params["W_E"]
    score, contrast = label_block_stats(W_E.T @ W_E, ctx.tm.token_topics())
    return {"block_score_gram": score, "block_contrast_gram": contrast}


def general_attention(model, ctx) -> dict:
    """``topic_attention_ratio_median`` (softmax) and, at full evaluations, the class averages of layer 0, head 0."""
    labels = ctx.tm.token_topics()
    rec = {}
    if ctx.cfg.model.attention == "softmax" and ctx.tm.T > 1:
        rec["topic_attention_ratio_median"] = float(np.median(topic_attention_ratio(model.score_matrix(), labels)))
    toks = ctx.stream.eval_tokens() if ctx.full else None
    if toks is not None:
        st = label_class_averages(model.attention_maps(toks)[0, 0], toks, labels)
        rec.update({f"attn_{k}": x for k, x in st.items()})
    return rec


#: the probes of a general-model run, in the order their keys are produced
GENERAL_PROBES = (
    norms,
    grad_norms,
    general_value_structure,
    general_embedding_structure,
    value_distance,
    general_attention,
    dev_loss,
)
