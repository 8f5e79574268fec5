"""Numpy MiniLM encoder throughput (corpus tokens per second) vs the GEMM bound, side by side.

Inputs are real 128-token windows of gensim's Wikipedia fragment, batches of 8. For each dtype
and BLAS thread count we time the encoder and one float GEMM doing the same number of
multiply-adds as the encoder's dense layers + attention products
(``L (24 n d^2 + 4 n^2 d)`` flops per sequence); the ratio says how close the numpy encoder is to
the machine's matrix-multiply throughput. Torch (``bench`` extra) is timed too when importable.
Needs the ``nlp`` extra. Run: ``python benchmarks/bench_realdata_encoder.py``.
"""

from __future__ import annotations

import numpy as np
from _common import best_time, print_table, write_json
from threadpoolctl import threadpool_limits

from theorycheck.realdata.corpus import stop_words, wikipedia_fragment
from theorycheck.realdata.encoder import NumpyBert
from theorycheck.realdata.pipeline import content_token_mask, make_windows
from theorycheck.realdata.tokenizer import WordPieceTokenizer


def main():
    tok = WordPieceTokenizer()
    wins = make_windows(wikipedia_fragment(max_docs=10), tok, content_token_mask(tok, stop_words()), window=128)
    full = [w.ids for w in wins if w.ids.size == 128][:8]
    ids = np.stack(full)
    B, n = ids.shape
    rows, out = [], []
    for dtype in (np.float32, np.float64):
        model = NumpyBert.from_pretrained(dtype=dtype)
        c = model.config
        d, L = c.hidden_size, c.num_hidden_layers
        flops = B * L * (24 * n * d * d + 4 * n * n * d)
        a = np.random.default_rng(0).standard_normal((B * n, d)).astype(dtype)
        w = np.random.default_rng(1).standard_normal((d, 4 * d)).astype(dtype)
        gemm_flops = 2 * a.shape[0] * d * 4 * d
        for threads in (1, 2):
            with threadpool_limits(limits=threads, user_api="blas"):
                t_enc = best_time(lambda: model.forward(ids), repeat=3, min_time=0.2)
                t_att = best_time(lambda: model.forward(ids, keep_hidden=False), repeat=3, min_time=0.2)
                t_gemm = best_time(lambda: a @ w, repeat=5) * flops / gemm_flops
            rows.append(
                [np.dtype(dtype).name, threads, B * n / t_enc, B * n / t_att, flops / t_enc / 1e9, t_enc / t_gemm]
            )
            out.append(
                dict(
                    dtype=np.dtype(dtype).name,
                    blas_threads=threads,
                    tokens_per_s=B * n / t_enc,
                    tokens_per_s_attentions_only=B * n / t_att,
                    gflops=flops / t_enc / 1e9,
                    ratio_to_gemm=t_enc / t_gemm,
                )
            )
    print(f"numpy MiniLM encoder, batch {B} x {n} tokens")
    print_table(
        ["dtype", "BLAS threads", "tokens/s", "tokens/s (attentions only)", "GFLOP/s", "time / same-flop GEMM"], rows
    )
    print("results:", write_json("realdata_encoder", {"batch": B, "n": n, "rows": out}))


if __name__ == "__main__":
    main()
