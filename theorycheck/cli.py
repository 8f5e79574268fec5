"""Command line: ``theorycheck verify|solve|landscape|embedding|train|realdata|bench``.

The CLI parses, builds configurations, calls the library and writes files; no mathematics
lives here. A bad flag or value prints the library's own ``ValueError`` text and exits 2.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


# ----------------------------------------------------------------------------- verify
def _add_verify(sub):
    p = sub.add_parser("verify", help="run every registered claim and write the report")
    p.add_argument("--out", default="theorycheck-report", help="output folder (default: %(default)s)")
    p.add_argument("--only", default=None, help="comma-separated globs/substrings of claim ids")
    p.add_argument("--list", action="store_true", help="list claim ids and exit")
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_verify)


def _cmd_verify(args) -> int:
    from proofs_numeric import CLAIMS, SKIPPED

    from .report import format_table, run_claims, select_claims, write_report

    claims = select_claims(CLAIMS, args.only)
    if args.list:
        for c in claims:
            print(f"{c.id}\t{c.source}\t{c.statement}")
        return 0
    rows = run_claims(claims, progress=not args.quiet)
    print(format_table(rows))
    for reason in SKIPPED:
        print(f"note: {reason}")
    out = write_report(rows, args.out, figures=not args.no_figures, skipped=SKIPPED)
    n_bad = sum(r.verdict != "PASS" for r in rows)
    print(f"\n{len(rows) - n_bad}/{len(rows)} checks passed; report written to {out}")
    return 1 if n_bad else 0


# ----------------------------------------------------------------------------- train
def _add_train(sub):
    p = sub.add_parser("train", help="train the numpy transformer on a preset (see --list)")
    p.add_argument("--list", action="store_true", help="print the preset names, one per line, and exit")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--out", default=None, help="run folder (metrics.jsonl, params.npz, figures/)")
    p.add_argument("--steps", type=int, default=None, help="override the number of steps")
    p.add_argument("--seed", type=int, default=None, help="override the seed")
    p.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train)


def _cmd_train(args) -> int:
    import json

    from .nn._train import PRESETS, run_preset

    if args.list:
        for name in PRESETS:
            print(name)
        return 0
    if args.preset is None:
        raise ValueError(f"--preset is required (one of {', '.join(PRESETS)}); use --list to see them")
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {', '.join(PRESETS)}, got {args.preset!r}")
    if args.out is None:
        raise ValueError("--out is required (the run folder)")
    summary = run_preset(
        args.preset, args.out, steps=args.steps, seed=args.seed, progress=not args.quiet, resume=args.resume
    )
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


# ----------------------------------------------------------------------------- realdata
def _add_realdata(sub):
    from .realdata.pipeline import RealDataConfig as _C

    d = _C()
    p = sub.add_parser(
        "realdata", help="pretrained MiniLM embeddings/attention vs LDA topics on real text (needs the nlp extra)"
    )
    p.add_argument("--out", default="realdata-report", help="output folder (default: %(default)s)")
    p.add_argument(
        "--corpus", default=d.corpus, help="'wikipedia' (gensim's bundled fragment) or a folder of *.txt files"
    )
    p.add_argument("--n-topics", type=int, default=d.n_topics)
    p.add_argument("--lda-backend", default=d.lda_backend, choices=("sklearn", "gensim"))
    p.add_argument("--assign", default=d.assign, choices=("top_fraction", "threshold"), help="word-to-topic rule")
    p.add_argument("--top-fraction", type=float, default=d.top_fraction)
    p.add_argument("--threshold", type=float, default=d.threshold)
    p.add_argument("--topics-per-word", type=int, default=d.topics_per_word)
    p.add_argument("--window", type=int, default=d.window, help="encoder window in tokens (default: %(default)s)")
    p.add_argument(
        "--max-tokens", type=int, default=d.max_tokens, help="token budget of the attention pass (default: %(default)s)"
    )
    p.add_argument("--n-no-topic", type=int, default=d.n_no_topic)
    p.add_argument(
        "--n-cooccur", type=int, default=d.n_cooccur, help="N most co-occurring pairs (default: %(default)s)"
    )
    p.add_argument("--n-boot", type=int, default=d.n_boot)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--blas-threads",
        type=int,
        default=d.blas_threads,
        help="BLAS threads, 0 = library default (default: %(default)s)",
    )
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_realdata)


def _cmd_realdata(args) -> int:
    from .realdata import _deps
    from .realdata.pipeline import RealDataConfig, run_realdata, write_realdata

    cfg = RealDataConfig(
        corpus=args.corpus,
        n_topics=args.n_topics,
        lda_backend=args.lda_backend,
        assign=args.assign,
        top_fraction=args.top_fraction,
        threshold=args.threshold,
        topics_per_word=args.topics_per_word,
        window=args.window,
        max_tokens=args.max_tokens,
        n_no_topic=args.n_no_topic,
        n_cooccur=args.n_cooccur,
        n_boot=args.n_boot,
        seed=args.seed,
        blas_threads=args.blas_threads or None,
    )
    absent = _deps.missing()
    if absent:
        print(
            f"theorycheck realdata: error: missing optional packages {', '.join(absent)}. "
            f"Install the 'nlp' extra with: {_deps.INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    try:
        res = run_realdata(cfg, progress=not args.quiet)
    except _deps.MissingExtraError as exc:
        print(f"theorycheck realdata: error: {exc}", file=sys.stderr)
        return 2
    out = write_realdata(res, args.out, figures=not args.no_figures)
    s = res.summary
    e, a, c = s["embedding"], s["attention"], s["cooccurrence"]
    print(
        f"corpus: {s['corpus']['documents']} documents, {s['corpus']['words']} content words; "
        f"{s['topics']['n_topics']} LDA topics, {s['topics']['topic_tokens']} topic tokens"
    )
    for m in ("dot", "cosine"):
        print(
            f"embedding {m:6s}: "
            + "  ".join(f"{k} {e[m][k]['mean']:.4f}" for k in e[m])
            + f"  | gap {e['gap'][m]['mean']:.4f} [{e['gap'][m]['ci_low']:.4f}, {e['gap'][m]['ci_high']:.4f}]"
        )
    print(
        f"attention lift same-minus-different topic (mean over heads): {a['mean_gap']:.4f} "
        f"[{a['mean_gap_ci'][0]:.4f}, {a['mean_gap_ci'][1]:.4f}]; "
        f"heads with CI > 0: {a['heads_positive']}, < 0: {a['heads_negative']}"
    )
    print(
        f"top-{c['n_pairs']} co-occurring pairs: {100 * c['fraction_same_topic']:.1f}% same topic; attention lift "
        f"{c['attention_lift_top_cooccurring']:.3f} vs same topic {c['attention_lift_same_topic']:.3f}; cosine "
        f"{c['embedding_top_cooccurring']['cosine']:.4f} vs {c['embedding_same_topic']['cosine']:.4f}"
    )
    print(
        f"co-occurrence topic signal log(lift same/different): real {c['lift_real']['signal']:.3f}, "
        f"synthetic LDA {c['lift_synthetic']['signal']:.3f}"
    )
    t = s["timing"]
    print(
        f"encoder: {t['encoder_tokens']} tokens at {t['encoder_tokens_per_s']:.0f} tokens/s; total {t['total_s']:.1f} s"
    )
    print(f"written to {out}")
    return 0


# ----------------------------------------------------------------------------- landscape
def _add_landscape(sub):
    p = sub.add_parser("landscape", help="attention loss landscape L(alpha, beta), L(K) and the certified optimum")
    p.add_argument("--T", type=int, default=10, help="topics (default: %(default)s)")
    p.add_argument("--v", type=int, default=10, help="words per topic (default: %(default)s)")
    p.add_argument("--tau", type=int, default=3, help="topics per document (default: %(default)s)")
    p.add_argument("--p-m", type=float, default=0.15, help="selection probability (default: %(default)s)")
    p.add_argument("--p-c", type=float, default=0.1, help="keep probability (default: %(default)s)")
    p.add_argument("--p-r", type=float, default=0.1, help="random-word probability (default: %(default)s)")
    p.add_argument("--value", choices=("block", "identity"), default="block", help="frozen W^V (default: %(default)s)")
    p.add_argument(
        "--loss", choices=("sq", "ce"), default="sq", help="squared loss or cross-entropy (default: %(default)s)"
    )
    p.add_argument("--n-grid", type=int, default=201, help="grid points per axis (default: %(default)s)")
    p.add_argument("--out", default="theorycheck-landscape", help="output folder (default: %(default)s)")
    p.set_defaults(func=_cmd_landscape)


def _cmd_landscape(args) -> int:
    from .analysis.landscape import write_landscape
    from .config import Masking, TopicModel

    tm = TopicModel(T=args.T, v=args.v, tau=args.tau)
    mk = Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)
    info = write_landscape(tm, mk, args.out, value=args.value, n_grid=args.n_grid, loss=args.loss)
    print(
        f"W^V={args.value}, loss={args.loss}: alpha*={info['alpha']:.6g} beta*={info['beta']:.6g} K*={info['K']:.6g} "
        f"L*={info['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
    )
    print(f"written {args.out}/grid.npz, landscape.png, optimum.json")
    return 0 if info["status"] in (0, 1) else 1


# ----------------------------------------------------------------------------- embedding
def _add_embedding(sub):
    p = sub.add_parser(
        "embedding",
        help="optimal tied token-embedding Gram (Theorem 1 setting): same/different-topic inner products, rank",
    )
    p.add_argument("--T", type=int, default=10, help="topics (default: %(default)s)")
    p.add_argument("--v", type=int, default=10, help="words per topic (default: %(default)s)")
    p.add_argument("--tau", type=int, default=3, help="topics per document (default: %(default)s)")
    p.add_argument("--p-m", type=float, default=0.15, dest="p_m")
    p.add_argument("--p-c", type=float, default=0.1, dest="p_c")
    p.add_argument("--p-r", type=float, default=0.1, dest="p_r")
    p.add_argument("--method", default="closed-form", help="closed-form | schur | cvxpy | factorized")
    p.add_argument("--d", type=int, default=None, help="embedding dimension (factorized)")
    p.add_argument("--bias", action="store_true", help="free decoder bias")
    p.add_argument("--json", default=None, help="also write the summary to this JSON file")
    p.set_defaults(func=_cmd_embedding)


def _cmd_embedding(args) -> int:
    import json

    import numpy as np

    from .analysis.stats import embedding_topic_stats
    from .config import Masking, TopicModel
    from .solvers import embedding_from_gram, min_embedding_dim, optimal_embedding_gram

    tm = TopicModel(T=args.T, v=args.v, tau=args.tau)
    mk = Masking(args.p_m, args.p_c, args.p_r)
    res = optimal_embedding_gram(tm, mk, args.method, d=args.d, bias=args.bias)
    summary = {
        "method": args.method,
        "status": res.status,
        "message": res.message,
        "loss": res.fun,
        "L_star": tm.min_value_loss(),
        "min_embedding_dim": min_embedding_dim(tm, mk, bias=args.bias),
        "residuals": {k: float(v) for k, v in res.residuals.items()},
    }
    if res.x is not None and tm.T >= 2 and tm.v >= 2 and tm.V1 <= 2001:
        W = embedding_from_gram(res.x, tm.V1) if args.method != "factorized" else res.W_E
        st = embedding_topic_stats(W, tm) if np.all(np.linalg.norm(W[:, 1:], axis=0) > 0) else None
        if st is not None:
            summary.update(
                same_topic_dot=st.same_topic_dot,
                diff_topic_dot=st.diff_topic_dot,
                same_topic_cos=st.same_topic_cos,
                diff_topic_cos=st.diff_topic_cos,
            )
    if args.method == "closed-form":
        summary.update(same_topic=res.x.x, different_topic=res.x.y, rank=res.x.rank())
    width = max([len(k) for k in summary] + [len("resid." + k) for k in summary["residuals"]])
    for k, v in summary.items():
        if k != "residuals":
            print(f"{k.ljust(width)}  {v:.6g}" if isinstance(v, float) else f"{k.ljust(width)}  {v}")
    for k, v in summary["residuals"].items():
        print(f"{('resid.' + k).ljust(width)}  {v:.3g}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=2)


# ----------------------------------------------------------------------------- solve
def _add_solve(sub):
    p = sub.add_parser("solve", help="compute a certified optimum")
    targets = p.add_subparsers(dest="target", required=True)
    v = targets.add_parser("value", help="stage-1 optimal value matrix W^V under uniform attention (SPEC §4.2)")
    v.add_argument("--T", type=int, required=True, help="number of topics")
    v.add_argument("--v", type=int, required=True, help="words per topic")
    v.add_argument("--tau", type=int, default=None, help="topics per document (uniform-tau prior)")
    v.add_argument("--prior", default="uniform-tau", help="uniform-tau (default) or dirichlet")
    v.add_argument("--alpha", type=float, default=None, help="Dirichlet concentration (prior=dirichlet)")
    v.add_argument("--p-m", type=float, default=0.15, help="selection probability (default %(default)s)")
    v.add_argument("--p-c", type=float, default=0.1, help="keep probability (default %(default)s)")
    v.add_argument("--p-r", type=float, default=0.1, help="random-word probability (default %(default)s)")
    v.add_argument("--reg", type=float, default=0.0, help="L2 coefficient lambda (default 0: minimum-norm)")
    v.add_argument("--method", default="closed-form", help="closed-form (default), lstsq or cvxpy")
    v.add_argument("--solver", default="CLARABEL", help="cvxpy solver (method=cvxpy)")
    v.add_argument("--out", default=None, help="write W and residuals to this .npz file")
    v.set_defaults(func=_cmd_solve_value)


def _cmd_solve_value(args) -> int:
    import numpy as np

    from .config import Masking, TopicModel
    from .solvers import BlockValueMatrix, optimal_value_matrix

    tm = TopicModel(T=args.T, v=args.v, tau=args.tau, prior=args.prior, alpha=args.alpha)
    mk = Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)
    kw = {"solver": args.solver} if args.method == "cvxpy" else {}
    res = optimal_value_matrix(tm, mk, reg=args.reg, method=args.method, **kw)
    print(res)
    if args.out:
        payload = {f"resid_{k}": np.float64(val) for k, val in res.residuals.items()}
        payload.update(status=np.int64(res.status), method=np.str_(res.method), fun=np.float64(res.fun))
        payload.update({k: np.float64(args_v) for k, args_v in (("T", tm.T), ("v", tm.v), ("reg", args.reg))})
        if isinstance(res.x, BlockValueMatrix):
            payload.update(A=res.x.A, B0=res.x.B0, gamma=res.x.gamma, structured=True)
        elif res.x is not None:
            payload.update(W=res.x, structured=False)
        np.savez(args.out, **payload)
        print(f"written to {args.out}")
    return 0 if res.success else 1


# ----------------------------------------------------------------------------- bench
def _benchmarks_dir(path):
    from pathlib import Path

    folder = Path(path) if path else Path(__file__).resolve().parent.parent / "benchmarks"
    if not folder.is_dir():
        raise ValueError(
            f"--dir: benchmark folder {str(folder)!r} not found; benchmarks live in a source checkout "
            "(git clone) under benchmarks/, pass --dir to point at it"
        )
    return folder


def _add_bench(sub):
    p = sub.add_parser("bench", help="run side-by-side ratio benchmarks (benchmarks/bench_*.py)")
    p.add_argument("names", nargs="*", help="benchmark names (e.g. stage1 attention); default: all")
    p.add_argument("--list", action="store_true", help="list benchmark names and exit")
    p.add_argument("--dir", default=None, help="benchmark folder (default: the checkout's benchmarks/)")
    p.add_argument("--extra", default="", help="extra arguments passed to each script, e.g. --extra=--quick")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    import shlex
    import subprocess

    folder = _benchmarks_dir(args.dir)
    known = {f.stem[len("bench_") :]: f for f in sorted(folder.glob("bench_*.py"))}
    if args.list:
        for name in known:
            print(name)
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {', '.join(known)}")
    code = 0
    for name in args.names or list(known):
        print(f"==> bench {name}", flush=True)
        rc = subprocess.call([sys.executable, str(known[name]), *shlex.split(args.extra)], cwd=folder)
        if rc:
            print(f"bench {name} exited with code {rc}", file=sys.stderr)
            code = 1
    return code


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="theorycheck",
        description="Exact, certified checks of 'How Do Transformers Learn Topic Structure' (ICML 2023).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_verify(sub)
    _add_solve(sub)
    _add_landscape(sub)
    _add_embedding(sub)
    _add_train(sub)
    _add_realdata(sub)
    _add_bench(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError) as exc:
        print(f"theorycheck {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
