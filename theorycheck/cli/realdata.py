"""``theorycheck realdata``: pretrained MiniLM embeddings and attention against LDA topics on real text
(SPEC §5.4-5.5), fully offline; needs the optional ``nlp`` extra (:mod:`theorycheck.realdata._deps`)."""

from __future__ import annotations

from .._io import prepare_output_dir
from ..realdata import _deps
from ..realdata.pipeline import RealDataConfig, run_realdata, write_realdata
from .common import (
    command,
    error,
    json_path,
    write_json_summary,
)


def run(args) -> int:
    """The experiment; ``--threads`` (default 1) sets the BLAS threads during the run."""
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
        attention_laws=args.attention_laws,
        seed=args.seed,
        **({} if args.threads is None else {"blas_threads": args.threads}),
    )
    absent = _deps.missing()
    if absent:
        return error(
            args, f"missing optional packages {', '.join(absent)}. Install the 'nlp' extra with: {_deps.INSTALL_HINT}"
        )
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    json_file = json_path(args)
    try:
        res = run_realdata(cfg, progress=not args.quiet)
    except _deps.MissingExtraError as exc:
        return error(args, str(exc))
    out = write_realdata(res, out, figures=not args.no_figures, force=args.force, command=command(args))
    _print_summary(res.summary)
    print(f"written to {out}")
    write_json_summary(json_file, res.summary)
    return 0


def _print_summary(s: dict) -> None:
    """The console summary of ``theorycheck realdata`` (statistics of SPEC §5.4-5.5)."""
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
    for r in s.get("theory", {}).get("table", []):
        print(
            f"same-minus-different topic gap, {r['source']:6s}: "
            + "  ".join(
                f"{m} {r[m]['gap']:.4g} [{r[m]['ci_low']:.4g}, {r[m]['ci_high']:.4g}]" for m in ("dot", "cosine")
            )
        )
    at = s.get("theory", {}).get("attention")
    if at:
        _print_attention(at)
    t = s["timing"]
    print(
        f"encoder: {t['encoder_tokens']} tokens at {t['encoder_tokens_per_s']:.0f} tokens/s; theory route "
        f"{t.get('theory_s', float('nan')):.1f} s wall, {t.get('theory_cpu_s', float('nan')):.1f} s CPU; "
        f"total {t['total_s']:.1f} s"
    )


def _print_attention(at: dict) -> None:
    """The theory-vs-MiniLM attention lines of the console summary (SPEC §11.9)."""
    o, th, c = at["optimum"], at["theory"], at["counts"]
    for r in at.get("comparison", []):
        t, m = r["theory"], r["minilm"]
        print(
            f"lift ratio same/different topic, {r['definition']:8s} {r['class_set']:10s}: theory {t['ratio']:.4g} "
            f"[{t['ratio_ci'][0]:.4g}, {t['ratio_ci'][1]:.4g}] (own-word share {t['own_word']:.3g})"
            + ("" if m is None else f"; MiniLM head mean {m['mean_ratio']:.4g} [{m['mean_ratio_ci'][0]:.4g}, "
               f"{m['mean_ratio_ci'][1]:.4g}] (own word {m['own_word']:.3g}, own position {m['own_position']:.3g})")
        )  # fmt: skip
    print(
        f"theory attention (label family, {o['n_laws']} laws): alpha* {o['alpha']:.4g} ± {_se(o['alpha_se'])}, "
        f"beta* {o['beta']:.4g} ± {_se(o['beta_se'])}; {at.get('heads_definition', 'all_keys')} lift same "
        f"{th['same_topic']:.4g}, different "
        f"{th['different_topic']:.4g}, gap {th['gap']:.4g} [{th['gap_ci'][0]:.4g}, {th['gap_ci'][1]:.4g}], "
        f"ratio {th['ratio']:.4g} [{th['ratio_ci'][0]:.4g}, {th['ratio_ci'][1]:.4g}]"
    )
    print(
        f"MiniLM heads vs the theory's interval: gap above {c['gap']['above']} / overlapping "
        f"{c['gap']['overlaps']} / below {c['gap']['below']}; ratio above {c['ratio']['above']} / overlapping "
        f"{c['ratio']['overlaps']} / below {c['ratio']['below']} (head-mean gap {at['minilm_mean_gap']:.4g}, "
        f"ratio {at['minilm_mean_ratio']:.4g}; per head: theory_gap.md)"
    )


def _se(x) -> str:
    return "n/a" if x is None else f"{x:.2g}"
