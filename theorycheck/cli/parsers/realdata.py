"""``theorycheck realdata``: its parser (the command: :mod:`theorycheck.cli.realdata`); the defaults are
:class:`~theorycheck.realdata.config.RealDataConfig`'s, read without the ``nlp`` extra."""

from __future__ import annotations

from ...realdata.config import RealDataConfig
from ..common import (
    add_json_flag,
    add_no_figures_flag,
    add_out_flags,
    add_quiet_flag,
    add_seed_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.realdata"


DESCRIPTION = "pretrained MiniLM embeddings/attention vs LDA topics on real text (SPEC §5.4-5.5; needs the nlp extra)"


def add_parser(sub):
    d = RealDataConfig()
    p = sub.add_parser("realdata", help=DESCRIPTION, description=DESCRIPTION)
    add_out_flags(p, "realdata-report")
    p.add_argument(
        "--corpus", default=d.corpus, help="'wikipedia' (gensim's bundled fragment) or a folder of *.txt files"
    )
    p.add_argument("--n-topics", type=int, default=d.n_topics, help="LDA topics (default: %(default)s)")
    p.add_argument(
        "--lda-backend", default=d.lda_backend, choices=("sklearn", "gensim"), help="LDA library (default: %(default)s)"
    )
    p.add_argument(
        "--assign",
        default=d.assign,
        choices=("top_fraction", "threshold"),
        help="word-to-topic rule (default: %(default)s)",
    )
    p.add_argument(
        "--top-fraction",
        type=float,
        default=d.top_fraction,
        help="rule top_fraction: each topic keeps this fraction of the vocabulary, its most probable words "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=d.threshold,
        help="rule threshold: least normalised weight phi[t, w] / sum_s phi[s, w] of a word's topic "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--topics-per-word",
        type=int,
        default=d.topics_per_word,
        help="rule threshold: most topics per word (default: %(default)s)",
    )
    p.add_argument("--window", type=int, default=d.window, help="encoder window in tokens (default: %(default)s)")
    p.add_argument(
        "--max-tokens", type=int, default=d.max_tokens, help="token budget of the attention pass (default: %(default)s)"
    )
    p.add_argument(
        "--n-no-topic",
        type=int,
        default=d.n_no_topic,
        help="no-topic content tokens added to the embedding pool (default: %(default)s)",
    )
    p.add_argument(
        "--n-cooccur", type=int, default=d.n_cooccur, help="N most co-occurring pairs (default: %(default)s)"
    )
    p.add_argument("--n-boot", type=int, default=d.n_boot, help="bootstrap replicates (default: %(default)s)")
    _add_theory_flags(p, d)
    add_seed_flag(p, d.seed, "seed of LDA, the window order and the bootstrap")
    add_no_figures_flag(p)
    add_quiet_flag(p)
    add_json_flag(p, "the summary (summary.json of the report)")
    return p


def _add_theory_flags(p, d) -> None:
    p.add_argument(
        "--attention-laws",
        type=int,
        default=d.attention_laws,
        help="sampled document laws of the theory's optimal attention beside MiniLM's heads (SPEC §11.9); "
        "0 skips it (default: %(default)s)",
    )
