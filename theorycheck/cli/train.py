"""``theorycheck train``: train the numpy transformer on a preset (SPEC §5), resumable, optionally per seed or on
a Dask cluster; with ``--model``/``--topic-word`` one run of the preset with its data model replaced by a
general topic-word matrix (SPEC §11.7: the preset's SGD rate scaled to the new model's curvature).
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import numpy as np

from .. import _io
from .._interrupt import exit_code
from .._validate import check_int
from ..nn import (
    PRESETS,
    DataConfig,
    ModelConfig,
    TrainingDiverged,
    TrainingInterrupted,
    preset,
    run_preset,
    stage_curves,
    train,
)
from ..nn.checkpoint import list_checkpoints
from ..nn.trainer import check_train_memory
from ..population import moments
from ..report.training import write_figures
from ..solvers import optimal_embedding_gram
from .common import (
    general_models,
    json_path,
    model_flags,
    model_summary,
    wants_general,
    write_json_summary,
)
from .parsers.train import _MODEL_DEFAULTS, _MODEL_ONLY, MAX_STEPS

__all__ = ["retarget_config", "sgd_curvature", "scale_preset_lr", "run_general_preset"]


def _check_model_flags(args) -> None:
    """Refuse the model flags without ``--model``/``--topic-word`` (naming them); with a general model, fill in
    the usual defaults of the flags not given."""
    given = [flag for dest, flag in _MODEL_ONLY.items() if getattr(args, dest, None) is not None]
    if not wants_general(args):
        if given:
            raise ValueError(
                f"{', '.join(given)}: only used with --model/--topic-word (a preset has its own model; "
                f"choose a preset with --list, or give --model to train the preset on another model)"
            )
        return
    for dest, default in _MODEL_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


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
    return " ".join(parts + model_flags(args))


def _train_folder(args):
    """The run folder, checked before any work, and a function writing its marker at the end.

    Uses :func:`theorycheck._io.prepare_output_dir` (a fresh run refuses a folder holding files
    theorycheck did not write, unless ``--force``; those are never listed in the marker)."""
    out = Path(args.out)
    if args.resume and not out.is_dir():
        raise ValueError(f"--resume: the run folder {args.out!r} does not exist; nothing to resume")
    if not args.resume:
        unfinished = _unfinished_run(out)
        if unfinished is not None:  # a run killed before it wrote its marker: its files are not the user's
            raise ValueError(
                f"--out folder {args.out!r} holds a train run that did not finish (newest checkpoint {unfinished}); "
                "continue it with --resume (same flags), or choose a new --out folder (delete this one to start over)"
            )
        out = _io.prepare_output_dir(out, force=args.force, flag="--out")

    def files():
        return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {_io.MARKER}

    marker = _io.read_marker(out) if out.is_dir() else None
    owned = set(marker["files"]) if marker else set()
    # the user's files: those found now that the marker does not list; on --resume a file under a name the run
    # writes is the interrupted run's own (killed before its marker was written)
    found = files() - owned if out.is_dir() else set()
    foreign = {f for f in found if not (args.resume and _TRAIN_OUTPUT.fullmatch(f))}
    clash = sorted(f for f in foreign if _TRAIN_OUTPUT.fullmatch(f))
    if clash:  # --force: a file of the user's under a name the run writes is refused now, before any work
        raise ValueError(
            f"--out folder {str(out)!r} holds files theorycheck did not write under names a train run writes "
            f"({', '.join(clash[:5])}{', ...' if len(clash) > 5 else ''}); --force never replaces them: move them "
            "away or choose a new --out folder"
        )

    def mark():  # exactly the files theorycheck wrote: listed before, or under a name a run writes (not the user's)
        if out.is_dir():
            ours = {f for f in files() - foreign if f in owned or _TRAIN_OUTPUT.fullmatch(f)}
            _io.write_marker(out, command=_train_command(args), files=sorted(ours))

    return out, mark


#: The names a train run writes in its folder, or in a run folder just under it (a grid, ``--seeds``).
_TRAIN_OUTPUT = re.compile(
    r"([^/]+/)?(config\.json|metrics\.jsonl|params\.npz|stages\.json|summary\.json|summary\.md"
    r"|checkpoint-\d+\.(json|npz)|figures/[^/]+\.png)"
)


def _unfinished_run(out: Path) -> str | None:
    """``"checkpoint-40.json, step 40"``: the newest checkpoint of a train run in ``out`` (or in a run folder just
    under it, for a grid or ``--seeds``) that the folder's marker does not list, i.e. of a run killed before its
    end; ``None`` if there is none."""
    if not out.is_dir():
        return None
    marker = _io.read_marker(out)
    owned = set(marker["files"]) if marker else set()
    found = []
    for folder in [out, *sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())]:
        for step, js in list_checkpoints(folder):
            if js.relative_to(out).as_posix() in owned:
                continue
            try:
                meta = json.loads(js.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and "config_hash" in meta:  # written by theorycheck's trainer
                found.append((step, js.relative_to(out).as_posix()))
                break
    if not found:
        return None
    step, name = max(found)
    return f"{name}, step {step}"


def _has_checkpoint(out: Path) -> bool:
    """Whether ``out`` (or a run folder just under it) holds a checkpoint ``--resume`` can continue from."""
    if not out.is_dir():
        return False
    folders = [out, *(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())]
    return any(list_checkpoints(folder) for folder in folders)


def _parse_seeds(text):
    """``--seeds 0,1,2`` -> ``[0, 1, 2]`` (``None`` if not given)."""
    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers >= 0 such as 0,1,2, got {text!r}") from None


def _general_train_models(args, seeds) -> tuple:
    """``()`` for a preset's own model; ``(tm, mk)`` with ``--model``/``--topic-word``."""
    if not wants_general(args):
        return ()
    if seeds is not None or args.scheduler is not None:
        raise ValueError("--seeds and --scheduler are not available with --model/--topic-word (one run per call)")
    return general_models(args)


def run(args) -> int:
    """Run a preset (SPEC §5); exit 130 after SIGINT, 143 after SIGTERM, with a checkpoint and the resume command."""
    if args.list:
        print("\n".join(PRESETS))
        return 0
    if args.preset is None:
        raise ValueError(f"--preset is required (one of {', '.join(PRESETS)}); use --list to see them")
    if args.preset not in PRESETS:
        raise ValueError(f"--preset must be one of {', '.join(PRESETS)}, got {args.preset!r}")
    if args.out is None:
        raise ValueError("--out is required (the run folder)")
    _check_model_flags(args)
    if args.steps is not None:
        check_int("--steps", args.steps, low=0, high=MAX_STEPS)
    seeds = _parse_seeds(args.seeds)
    general = _general_train_models(args, seeds)
    json_file = json_path(args)
    out, mark = _train_folder(args)
    try:
        kw = {"steps": args.steps, "seed": args.seed, "checkpoint_every": args.checkpoint_every}
        kw.update(progress=not args.quiet, resume=args.resume)
        if general:
            summary = run_general_preset(args.preset, out, *general, **kw)
        else:
            summary = run_preset(args.preset, out, seeds=seeds, client=args.scheduler, **kw)
    except TrainingDiverged as exc:  # a result of the run (its metrics so far are written), not a traceback
        mark()
        print(f"theorycheck train: {exc}; the metrics up to then are in {out}", file=sys.stderr)
        return 1
    except (TrainingInterrupted, KeyboardInterrupt) as exc:
        mark()
        again = _train_command(args)
        code = 128 + signal.Signals[exc.signame] if isinstance(exc, TrainingInterrupted) else exit_code()
        if isinstance(exc, TrainingInterrupted):
            print(f"theorycheck train: interrupted at step {exc.step}; resume with: {again} --resume", file=sys.stderr)
        elif _has_checkpoint(out):
            print(f"theorycheck train: interrupted; resume with: {again} --resume", file=sys.stderr)
        else:
            again += " --force" if args.force else ""
            print(
                f"theorycheck train: interrupted before its first checkpoint; start again with: {again}",
                file=sys.stderr,
            )
        return code
    if not args.no_figures:
        single = len(summary["runs"]) == 1 and summary["runs"][0]["run"] == args.preset
        for r in summary["runs"]:
            write_figures(out if single else out / r["run"])
    mark()
    print(_io.dumps_json(summary, indent=2, sort_keys=True))
    write_json_summary(json_file, summary)
    return 0


# ----------------------------------------------------------------------------- a preset on a general model
def retarget_config(cfg, tm, mk):
    """A preset's :class:`~theorycheck.nn.TrainConfig` with its data model replaced by ``tm`` (and masking
    ``mk``), the model's ``V1`` (and ``d``, ``d_a`` when they were ``V1``) set to ``tm.V1``."""
    d = cfg.data
    keep = {k: getattr(d, k) for k in ("N", "source", "n_train", "n_dev", "average")}
    data = DataConfig.from_model(tm, mk, **keep)
    m = cfg.model.to_dict()
    old = m["V1"]
    m.update({k: tm.V1 for k in ("V1", "d", "d_a") if m.get(k) == old})
    return cfg.replace(data=data, model=ModelConfig.from_dict(m))


def sgd_curvature(tm, mk, model) -> tuple[float, str] | None:
    """Largest eigenvalue ``lambda_max(H)`` of the population Hessian that bounds plain SGD on ``model``
    (squared loss, SPEC §11.7), and what it is of; ``None`` where no bound is derived (cross-entropy,
    other trained parameters).

    - ``W^V`` trained (uniform attention: the stage-1 value model; softmax attention: its ``W^V`` block
      at a small-score init): ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1 + reg ||W||^2`` has the
      Hessian ``2 (Sigma + reg I) (x) I``, so ``lambda_max(H) = 2 (lambda_max(Sigma) + reg)``
      (``Sigma`` from :func:`theorycheck.population.moments`).
    - ``W^E`` of the tied model with ``W^V = I``: ``L = E||W_E^T W_E m - e_x||^2``; at a Gram ``G`` the
      loss's second variation along ``delta`` is ``<dG, dG Sigma>`` with ``dG = W_E^T delta + delta^T W_E``,
      ``||dG||_F <= 2 sqrt(lambda_max(G)) ||delta||_F``: ``lambda_max(H) <= 8 lambda_max(Sigma) lambda_max(G*)``
      at the min-norm optimum ``G*`` (:func:`theorycheck.solvers.optimal_embedding_gram`).
    """
    if model.loss != "squared":
        return None
    trained = set(model.train)
    if "W_V" not in trained and not (trained == {"W_E"} and model.decoder == "tied"):
        return None
    lam = float(np.linalg.eigvalsh(moments(tm, mk)[0])[-1])
    if "W_V" in trained:
        return 2.0 * (lam + model.reg), "W_V"
    G = optimal_embedding_gram(tm, mk).x
    G = G.toarray() if hasattr(G, "toarray") else np.asarray(G)
    return 8.0 * lam * float(np.linalg.eigvalsh(G)[-1]) + 2.0 * model.reg, "W_E"


def scale_preset_lr(preset_cfg, cfg):
    """``cfg`` (the preset ``preset_cfg`` retargeted to a general model) with its SGD learning rate scaled
    so that ``lr * lambda_max(H)`` keeps the preset's value (SPEC §11.7; :func:`sgd_curvature`), and a
    record of the rule. The presets' rates are tuned at the paper's size (``V1 = 101``), where
    ``lr * lambda_max(H) / 2`` is 0.89 (stage-1 SGD, lr 40 against ``2/lambda_max(H) = 45.2``); a small
    general model has a larger ``lambda_max(Sigma)`` and the preset's rate would diverge.

    The stage-1 value model alone (``W^V`` the only trained matrix, uniform attention: ``H`` is the
    whole, constant Hessian) is scaled by the curvature ratio both ways; otherwise the bound holds
    near the init or the optimum only and the rate is only lowered (``min(1, ratio)``). Adam and the
    cross-entropy presets keep their rate (Adam's step does not scale with the curvature).
    """
    lr = float(cfg.optim.lr)
    rec = {"preset_lr": lr, "lr": lr, "rule": "unchanged (no SGD squared-loss curvature bound; SPEC §11.7)"}
    if cfg.optim.name != "sgd":
        return cfg, rec
    ours = sgd_curvature(cfg.data.topic_model(), cfg.data.masking(), cfg.model)
    if ours is None:
        return cfg, rec
    ref = sgd_curvature(preset_cfg.data.topic_model(), preset_cfg.data.masking(), preset_cfg.model)
    assert ref is not None  # the bound depends on the model settings only, which cfg keeps from the preset
    ratio = ref[0] / ours[0]
    exact = set(cfg.model.train) == {"W_V"} and cfg.model.attention == "uniform"
    factor = ratio if exact else min(1.0, ratio)
    rec.update(
        lr=lr * factor,
        stable_lr=2.0 / ours[0],
        preset_stable_lr=2.0 / ref[0],
        rule=f"lr x lambda_max(H) of {ours[1]} kept at the preset's value"
        + ("" if exact else ", never raised")
        + " (SPEC §11.7)",
    )
    return cfg.replace(optim=cfg.optim.replace(lr=rec["lr"])), rec


def run_general_preset(name, out, tm, mk, *, steps=None, seed=None, checkpoint_every=None, progress=True, resume=False):
    """Train one run of the preset ``name`` on the general model ``tm`` (masking ``mk``) into ``out``
    (:func:`retarget_config`; an SGD rate scaled by :func:`scale_preset_lr`, recorded as the run's ``lr``);
    grid presets are refused. Returns a ``run_preset``-shaped summary."""
    cfg = preset(name)
    if isinstance(cfg, list):
        raise ValueError(f"--preset {name} is a grid of runs; with --model/--topic-word use a single-run preset")
    changes = {
        k: v for k, v in (("steps", steps), ("seed", seed), ("checkpoint_every", checkpoint_every)) if v is not None
    }
    retargeted = retarget_config(cfg, tm, mk).replace(**changes)
    check_train_memory(retargeted)  # the model on the new V1, before its curvature (dense moments) is computed
    run_cfg, lr = scale_preset_lr(cfg, retargeted)
    res = train(run_cfg, out, progress=progress, resume=resume)
    nV, nKQ = stage_curves(res.history) if res.history else ([], [])
    row = {"run": name, "steps": res.steps, "final": res.final, "stages": res.stages, "model": model_summary(tm)}
    row["lr"] = lr
    row["norm_W_V_first_last"] = [nV[0], nV[-1]] if nV else None
    row["norm_KQ_first_last"] = [nKQ[0], nKQ[-1]] if nKQ else None
    summary = {"preset": name, "runs": [row]}
    _io.write_json(Path(out) / "summary.json", summary, sort_keys=True, indent=2)
    return summary
