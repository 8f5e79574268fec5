"""Command line: ``theorycheck verify | solve value|embedding|attention | landscape | train | realdata | bench``.

The CLI parses, builds configurations, calls the library and writes files; no mathematics
lives here. Conventions shared by every command:

- the topic model and masking flags ``--T --v --tau --prior --alpha --p-m --p-c --p-r`` (SPEC §1, §2.1)
  are defined once (:func:`_add_model_flags`);
- ``--threads N`` (or ``THEORYCHECK_THREADS``) sets BLAS and Numba threads (:mod:`theorycheck._threads`);
- output paths are checked before any work (:func:`theorycheck._io.prepare_output_dir`): a folder is
  replaced only if it is new, empty or written by theorycheck; ``--force`` writes into a folder
  holding other files and never deletes them;
- a bad flag or value prints the library's own ``ValueError`` text and exits 2; a result that is
  not certified (or a failing claim) exits 1.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from ._cli_common import _add_model_flags, _add_out_flags, _add_threads_flag, _command, _models
from ._cli_explore import _add_explore_flags, _cmd_explore, _list_claims
from ._cli_model import general_flags, general_landscape_command, general_train_models, run_general_preset
from ._cli_solve import _add_solve, _add_solve_flags, _cmd_solve
from .models import is_general
from .problems import cli as _problems_cli

__all__ = ["main", "build_parser"]


# ----------------------------------------------------------------------------- verify
def _add_verify(sub):
    p = sub.add_parser("verify", help="run every registered claim and write the report")
    _add_out_flags(p, "theorycheck-report", "report folder")
    p.add_argument("--only", default=None, help="comma-separated globs/substrings of claim ids")
    p.add_argument("--list", action="store_true", help="list claim ids and exit")
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--full", action="store_true", help="also run the long and multi-seed checks (each claim's full_params)"
    )
    p.add_argument(
        "--jobs", type=int, default=None, help="worker processes (default: the machine's cores; 1 = in this process)"
    )
    p.add_argument("--no-cache", action="store_true", help="recompute every check (results are still stored)")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address: run the checks on that cluster")
    _add_explore_flags(p)
    p.set_defaults(func=_cmd_verify)


def _cmd_verify(args) -> int:
    from ._dask import scheduler_executor
    from ._io import prepare_output_dir
    from ._validate import check_int
    from .report import ResultCache, default_jobs, format_table, run_claims, select_claims, tier_summary, write_report
    from .report.discovery import collect

    registry = collect(args.claims)  # built-in, installed plugins (entry points), --claims PATH
    claims, skipped = select_claims(registry.claims, args.only), registry.skipped
    if args.list:
        return _list_claims(claims, registry)
    if args.explore is not None:
        return _cmd_explore(args, claims)
    jobs = default_jobs() if args.jobs is None else check_int("--jobs", args.jobs, low=1)
    out = prepare_output_dir(args.out, force=args.force, flag="--out")  # before any claim runs
    tier = "full" if args.full else "default"
    cache = ResultCache(read=not args.no_cache)
    with scheduler_executor(args.scheduler) as executor:
        rows = run_claims(claims, progress=not args.quiet, tier=tier, jobs=jobs, executor=executor, cache=cache)
    print(format_table(rows))
    tiers = tier_summary(rows, tier)
    print(
        f"tier: {tier} ({len(rows)} checks; the default tier holds {len(tiers['default'])}, --full adds "
        f"{len(tiers['full'])})"
    )
    for reason in skipped:
        print(f"note: {reason}")
    out = write_report(
        rows, out, figures=not args.no_figures, skipped=skipped, force=args.force, command=_command(args), tier=tier
    )
    n_bad = sum(r.verdict != "PASS" for r in rows)
    print(f"\n{len(rows) - n_bad}/{len(rows)} checks passed; report written to {out}")
    return 1 if n_bad else 0


# ----------------------------------------------------------------------------- train
def _add_train(sub):
    p = sub.add_parser("train", help="train the numpy transformer on a preset (see --list)")
    p.add_argument("--list", action="store_true", help="print the preset names, one per line, and exit")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--out", default=None, help="run folder (metrics.jsonl, checkpoints, params.npz, figures/)")
    p.add_argument("--steps", type=int, default=None, help="override the number of steps")
    p.add_argument("--seed", type=int, default=None, help="override the seed")
    p.add_argument(
        "--seeds", default=None, help="comma-separated seeds: every run once per seed, into <run>-seed<s> folders"
    )
    _add_scheduler_flag(p, "the runs of a grid preset or of --seeds (--out on a file system the workers share)")
    p.add_argument(
        "--checkpoint-every", type=int, default=None, help="checkpoint period in steps (0: none; default: the preset's)"
    )
    p.add_argument("--resume", action="store_true", help="continue from the run folder's newest checkpoint")
    p.add_argument("--force", action="store_true", help="write into a folder holding files theorycheck did not write")
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_model_flags(p)  # used with --model/--topic-word only: the preset's run on a general model (SPEC §11)
    p.set_defaults(func=_cmd_train)


def _train_command(args) -> str:
    """The command line that reproduces (with ``--resume``: continues) this train run."""
    parts = ["theorycheck train", f"--preset {args.preset}", f"--out {args.out}"]
    for flag, val in (
        ("--steps", args.steps),
        ("--seed", args.seed),
        ("--seeds", args.seeds),
        ("--checkpoint-every", args.checkpoint_every),
        ("--scheduler", args.scheduler),
    ):
        if val is not None:
            parts.append(f"{flag} {val}")
    return " ".join(parts + general_flags(args))


def _train_folder(args):
    """The run folder, checked before any work, and a function writing its marker at the end.

    Uses :func:`theorycheck._io.prepare_output_dir` (a fresh run refuses a folder holding files
    theorycheck did not write, unless ``--force``; those are never listed in the marker)."""
    from pathlib import Path

    from . import _io

    out = Path(args.out)
    if args.resume and not out.is_dir():
        raise ValueError(f"--resume: the run folder {args.out!r} does not exist; nothing to resume")
    if not args.resume:
        out = _io.prepare_output_dir(out, force=args.force, flag="--out")

    def files():
        return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {_io.MARKER}

    marker = _io.read_marker(out) if out.is_dir() else None
    foreign = set() if args.resume or not out.is_dir() else files() - set(marker["files"] if marker else ())

    def mark():
        if out.is_dir():
            _io.write_marker(out, command=_train_command(args), files=sorted(files() - foreign))

    return out, mark


def _parse_seeds(text):
    """``--seeds 0,1,2`` -> ``[0, 1, 2]`` (``None`` if not given)."""
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers >= 0 such as 0,1,2, got {text!r}") from None


def _cmd_train(args) -> int:
    """Run a preset (SPEC §5); exit 130 after SIGINT/SIGTERM with a checkpoint and the resume command."""
    from ._io import dumps_json
    from .nn import PRESETS, TrainingInterrupted, run_preset

    if args.list:
        print("\n".join(PRESETS))
        return 0
    if args.preset is None:
        raise ValueError(f"--preset is required (one of {', '.join(PRESETS)}); use --list to see them")
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {', '.join(PRESETS)}, got {args.preset!r}")
    if args.out is None:
        raise ValueError("--out is required (the run folder)")
    seeds = _parse_seeds(args.seeds)
    general = general_train_models(args, seeds)
    out, mark = _train_folder(args)
    try:
        kw = {"steps": args.steps, "seed": args.seed, "checkpoint_every": args.checkpoint_every}
        kw.update(progress=not args.quiet, resume=args.resume)
        if general:
            summary = run_general_preset(args.preset, out, *general, **kw)
        else:
            summary = run_preset(args.preset, out, seeds=seeds, client=args.scheduler, **kw)
    except (TrainingInterrupted, KeyboardInterrupt) as exc:
        mark()
        where = f"at step {exc.step}" if isinstance(exc, TrainingInterrupted) else "(no checkpoint written)"
        print(f"interrupted {where}; resume with: {_train_command(args)} --resume", file=sys.stderr)
        return 130
    if not args.no_figures:
        from .report.training import write_figures

        single = len(summary["runs"]) == 1 and summary["runs"][0]["run"] == args.preset
        for run in summary["runs"]:
            write_figures(out if single else out / run["run"])
    mark()
    print(dumps_json(summary, indent=2, sort_keys=True))
    return 0


# ----------------------------------------------------------------------------- realdata
def _add_realdata(sub):
    from .realdata.pipeline import RealDataConfig as _C

    d = _C()
    p = sub.add_parser(
        "realdata", help="pretrained MiniLM embeddings/attention vs LDA topics on real text (needs the nlp extra)"
    )
    _add_out_flags(p, "realdata-report")
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
    from ._io import prepare_output_dir
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
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    try:
        res = run_realdata(cfg, progress=not args.quiet)
    except _deps.MissingExtraError as exc:
        print(f"theorycheck realdata: error: {exc}", file=sys.stderr)
        return 2
    out = write_realdata(res, out, figures=not args.no_figures, force=args.force, command=_command(args))
    _print_realdata_summary(res.summary)
    print(f"written to {out}")
    return 0


def _print_realdata_summary(s: dict) -> None:
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
    t = s["timing"]
    print(
        f"encoder: {t['encoder_tokens']} tokens at {t['encoder_tokens_per_s']:.0f} tokens/s; total {t['total_s']:.1f} s"
    )


# ----------------------------------------------------------------------------- landscape
def _add_landscape(sub):
    p = sub.add_parser(
        "landscape", help="attention loss landscape L(alpha, beta), L(K) and the certified optimum (SPEC §4.3)"
    )
    _add_model_flags(p)
    p.add_argument("--value", choices=("block", "identity"), default="block", help="frozen W^V (default: %(default)s)")
    p.add_argument(
        "--loss",
        choices=("squared", "ce", "sq"),
        default="squared",
        help="squared loss or cross-entropy, SPEC §2.2 ('sq' is deprecated) (default: %(default)s)",
    )
    p.add_argument(
        "--n-grid", type=int, default=None, help="grid points per axis (default: 201; 31 for --model/--topic-word)"
    )
    p.add_argument(
        "--sweep",
        choices=("spec", "growth"),
        default=None,
        help="also write sweep.json: the certified optimum over the SPEC §4.3 table of (T, v, tau) ('spec') "
        "or over T growing to 1e5 ('growth'), with this masking and --value (default: none; 'spec' with --scheduler)",
    )
    _add_scheduler_flag(p, "the --sweep")
    _add_out_flags(p, "theorycheck-landscape")
    p.set_defaults(func=_cmd_landscape)


def _add_scheduler_flag(p, what: str) -> None:
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help=f"run {what} on a Dask cluster: a scheduler address such as tcp://127.0.0.1:8786 "
        "(needs the dask extra; results identical to a local run)",
    )


def _cmd_landscape(args) -> int:
    from ._dask import scheduler_executor
    from ._io import prepare_output_dir
    from ._validate import check_loss
    from .analysis.landscape import DEFAULT_SWEEP, asymptotic_sweep, growth_configs, write_landscape

    tm, mk = _models(args)
    loss = check_loss(args.loss)
    if is_general(tm):  # SPEC §11.4: the family S = alpha I_w + beta G (theorycheck._cli_model)
        return general_landscape_command(args, tm, mk, loss, _command(args))
    args.n_grid = 201 if args.n_grid is None else args.n_grid
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    kind = args.sweep or ("spec" if args.scheduler else None)
    rows = None
    if kind is not None:
        with scheduler_executor(args.scheduler) as ex:
            configs = DEFAULT_SWEEP if kind == "spec" else growth_configs(v=tm.v)
            rows = asymptotic_sweep(configs, mk, value=args.value, executor=ex)
    info = write_landscape(
        tm,
        mk,
        out,
        value=args.value,
        n_grid=args.n_grid,
        loss=loss,
        force=args.force,
        command=_command(args),
        sweep=rows,
    )
    print(
        f"W^V={args.value}, loss={loss}: alpha*={info['alpha']:.6g} beta*={info['beta']:.6g} K*={info['K']:.6g} "
        f"L*={info['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
    )
    print(f"written {out}/grid.npz, landscape.png, optimum.json" + (", sweep.json" if rows is not None else ""))
    return 0 if info["status"] == 0 or info.get("at_boundary") else 1


def _add_embedding(sub):
    p = sub.add_parser("embedding", help="deprecated alias of 'solve embedding' (removed in the next release)")
    _add_solve_flags(p, "embedding")
    p.set_defaults(func=_cmd_embedding)


def _cmd_embedding(args) -> int:
    print(
        "theorycheck embedding: deprecated, use 'theorycheck solve embedding' (same flags); "
        "the alias will be removed in the next release",
        file=sys.stderr,
    )
    return _cmd_solve(args)


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
    p.add_argument(
        "--out",
        default=None,
        help="folder for the JSON results, new, empty or theorycheck's (default: the benchmark folder's results/)",
    )
    p.add_argument("--extra", default="", help="extra arguments passed to each script, e.g. --extra=--quick")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    import os
    import subprocess
    import time

    from ._io import prepare_output_dir, read_marker, write_marker

    folder = _benchmarks_dir(args.dir)
    known = {f.stem[len("bench_") :]: f for f in sorted(folder.glob("bench_*.py"))}
    if args.list:
        for name in known:
            print(name)
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {', '.join(known)}")
    out = prepare_output_dir(args.out, flag="--out") if args.out is not None else None
    env = dict(os.environ, **({"THEORYCHECK_BENCH_OUT": str(out)} if out is not None else {}))
    start, code = time.time(), 0
    for name in args.names or list(known):
        print(f"==> bench {name}", flush=True)
        rc = subprocess.call([sys.executable, str(known[name]), *shlex.split(args.extra)], cwd=folder, env=env)
        if rc:
            print(f"bench {name} exited with code {rc}", file=sys.stderr)
            code = 1
    if out is not None and out.is_dir():
        marker = read_marker(out)
        new = {p.name for p in out.glob("*.json") if p.name != ".theorycheck.json" and p.stat().st_mtime >= start - 1}
        write_marker(out, command=_command(args), files=sorted(new | set(marker["files"] if marker else ())))
    return code


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="theorycheck",
        description="Exact, certified checks of 'How Do Transformers Learn Topic Structure' (ICML 2023).",
    )
    parser.add_argument("--version", action="version", version=f"theorycheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_verify(sub)
    solve_leaves = _add_solve(sub)
    _add_landscape(sub)
    _add_embedding(sub)
    _add_train(sub)
    _add_realdata(sub)
    _add_bench(sub)
    _problems_cli.add_parser(sub)
    for leaf in [p for name, p in sub.choices.items() if name != "solve"] + solve_leaves:
        _add_threads_flag(leaf)  # every command takes --threads
    return parser


def main(argv=None) -> int:
    from ._threads import configure

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        configure(args.threads)
        return int(args.func(args) or 0)
    except (ValueError, TypeError) as exc:
        print(f"theorycheck {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
