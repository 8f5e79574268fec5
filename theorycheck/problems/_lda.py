"""The fitted-LDA topic model of the problem library (model ``lda``; SPEC §11.1, §5.4).

Package data ``data/lda_wiki10.npy``: the topic-word probabilities of a 10-topic LDA fitted once
with scikit-learn to the Wikipedia fragment that ships with gensim's test data, restricted to the
union of every topic's 80 most probable words (``10 x 633``); ``data/lda_wiki10.json`` holds the
words and the fit's settings, ``benchmarks/make_lda_topics.py`` remakes both. Nothing is fitted,
downloaded or imported from the ``nlp`` extra at run time.

The model of size ``(T, v, tau)`` (``T <= 10``): topics ``0 .. T-1``; words chosen round-robin --
topic 0, 1, ..., T-1 in turn takes its most probable word not yet taken -- until each topic has
taken ``v`` (``T v`` words, ``V1 = T v + 1`` as for the other models); ``phi`` restricted to those
words and each row renormalised. A fitted LDA's topics put positive mass on every word, so the
topics overlap (a dense ``phi``), unlike the disjoint models. Document law: uniform-tau, as for the
other variants.
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

from ..models import GeneralTopicModel

__all__ = ["lda_phi", "lda_words", "lda_model", "LDA_FILE"]

LDA_FILE = "lda_wiki10.npy"


@functools.lru_cache(maxsize=1)
def lda_phi() -> np.ndarray:
    """The shipped ``(10, 633)`` topic-word matrix (rows restricted to the kept words, not renormalised)."""
    with resources.files(__package__).joinpath("data", LDA_FILE).open("rb") as fh:
        phi = np.load(fh, allow_pickle=False)
    phi.setflags(write=False)
    return phi


def lda_words(T: int, v: int) -> list[int]:
    """The ``T v`` columns of :func:`lda_phi` (sorted) of the size ``(T, v)``: round-robin, topic ``t`` takes its
    most probable word not yet taken. Every topic's ``v`` most probable words are among them."""
    full = lda_phi()
    order = [np.argsort(-full[t], kind="stable") for t in range(T)]
    pos, taken = [0] * T, set()
    for _ in range(v):
        for t in range(T):
            while int(order[t][pos[t]]) in taken:
                pos[t] += 1
            taken.add(int(order[t][pos[t]]))
    return sorted(taken)


def lda_model(T: int, v: int, tau: int) -> GeneralTopicModel:
    """The fitted-LDA model of size ``(T, v, tau)`` (module docstring); ``T`` at most the fitted 10 topics."""
    full = lda_phi()
    if not 1 <= T <= full.shape[0] or not 1 <= v or T * v > full.shape[1]:
        raise ValueError(
            f"the fitted LDA model has {full.shape[0]} topics over {full.shape[1]} words: "
            f"T must be in [1, {full.shape[0]}] and T v <= {full.shape[1]}, got T={T}, v={v}"
        )
    cols = lda_words(T, v)
    phi = full[:T, cols]
    return GeneralTopicModel(phi / phi.sum(axis=1, keepdims=True), tau=tau)
