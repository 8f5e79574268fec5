"""Provenance of ``theorycheck/problems/data/lda_wiki10.npy``: the fitted-LDA topic model of the problem library.

Not a benchmark: the script that made the package data file, kept so that it can be remade and
checked. It fits scikit-learn's batch variational LDA (``theorycheck.realdata.topics.fit_lda``,
``K = 10`` topics, seed 0, 30 iterations, words in >= 2 documents and <= half of them) to the 106
articles of the English Wikipedia fragment that ships with gensim's test data
(``theorycheck.realdata.corpus.wikipedia_fragment``, stop words and words under 3 letters removed),
and keeps, for every topic, its ``TOP`` most probable words: the union of those columns of ``phi``
(rows *not* renormalised; :mod:`theorycheck.problems._lda` renormalises after choosing the words of
a size) is saved as float64 ``.npy``, the words and the fit's settings as JSON beside it.

Needs the ``nlp`` extra (scikit-learn, gensim); the problem library itself reads only the two files.
Run: ``python benchmarks/make_lda_topics.py`` (rewrites both files; a remade file that differs means
the LDA fit is not reproducible in this environment).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import sklearn

from theorycheck.realdata.corpus import content_words, wikipedia_fragment
from theorycheck.realdata.topics import fit_lda

K, SEED, MAX_ITER, MIN_DF, MAX_DF, TOP = 10, 0, 30, 2, 0.5, 80
OUT = Path(__file__).resolve().parents[1] / "theorycheck" / "problems" / "data"


def main():
    corpus = wikipedia_fragment()
    docs = [content_words(t) for t in corpus.texts]
    fit = fit_lda(docs, K, seed=SEED, max_iter=MAX_ITER, min_df=MIN_DF, max_df=MAX_DF)
    keep = sorted({int(j) for t in range(K) for j in np.argsort(-fit.phi[t], kind="stable")[:TOP]})
    phi = np.ascontiguousarray(fit.phi[:, keep], dtype=np.float64)
    np.save(OUT / "lda_wiki10.npy", phi, allow_pickle=False)
    meta = {
        "what": "topic-word probabilities phi[t, j] of a fitted LDA, columns restricted to each topic's top words",
        "corpus": corpus.source,
        "documents": len(docs),
        "vocabulary": len(fit.vocab),
        "fit": {"backend": "sklearn", "sklearn": sklearn.__version__, "n_topics": K, "seed": SEED,
                "max_iter": MAX_ITER, "min_df": MIN_DF, "max_df": MAX_DF},
        "top_words_per_topic": TOP,
        "shape": list(phi.shape),
        "words": [fit.vocab[j] for j in keep],
        "script": "benchmarks/make_lda_topics.py",
    }  # fmt: skip
    (OUT / "lda_wiki10.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT / 'lda_wiki10.npy'} {phi.shape}")


if __name__ == "__main__":
    main()
