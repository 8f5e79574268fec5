"""Training presets (SPEC §5): the paper's and the official code's settings as :class:`TrainConfig` objects.

:func:`preset` returns a configuration (a list of ``(label, TrainConfig)`` for the grid presets
``ablation`` and ``compensation``); :func:`run_preset` runs one into a folder and returns a
JSON-able summary (also ``summary.json``; ``summary.md`` for grids) with exact references.
Every preset checkpoints (``checkpoint_every``) so long runs can be resumed. ``seeds=`` repeats
every run of a preset once per seed; the runs of a grid or of several seeds go to an ``executor``
or a Dask ``client`` (:mod:`theorycheck._dask`) when one is given, each run a pure function of its
configuration (same folders, same summary as the serial run apart from the ``seconds`` timings).
Figures are drawn by the caller (:func:`theorycheck.report.training.write_figures`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from .._dask import resolve_executor
from .._io import atomic_write_text, write_json
from .._validate import check_choice, check_int
from ..analysis.stats import relative_distance
from ..population import attention_loss
from ..solvers import optimal_attention, optimal_value_matrix
from .checkpoint import list_checkpoints
from .config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from .model import Transformer
from .probes import Probe
from .trainer import train

__all__ = ["PRESETS", "ABLATION_SETTINGS", "SUMMARY_COLUMNS", "preset", "run_preset"]


def _preset_official_demo() -> TrainConfig:
    """The released demo (SPEC §5.1): LDA alpha = 0.1, T = v = 10, N ~ U[100, 150],
    uniform attention frozen, one-hot embedding, identity decoder, W^V trained with CE, Adam
    lr 0.01, batch 40, 10k static-masked training documents, selected positions hidden from the
    keys (``mask_keys``), token-averaged loss, PyTorch-like init ``U(+-1/sqrt(d))``.

    The official value projection has a bias; with uniform attention (columns summing to 1) it
    passes straight to the output, so it is the decoder bias ``b_dec`` here (trained).
    Random replacement draws words only (the official code draws any of its 104 ids).
    """
    d = DataConfig(
        T=10,
        v=10,
        tau=None,
        prior="dirichlet",
        alpha=0.1,
        N=(100, 150),
        source="static",
        n_train=10_000,
        n_dev=10_000,
        average="token",
    )
    m = ModelConfig(
        V1=d.V1,
        attention="uniform",
        train=("W_V", "b_dec"),
        loss="ce",
        init="uniform",
        init_scale=1.0 / math.sqrt(d.V1),
        mask_keys=True,
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.01),
        steps=3000,
        batch_size=40,
        log_every=50,
        eval_every=250,
        checkpoint_every=500,
    )


def _preset_stage1_population() -> TrainConfig:
    """Exact population gradient descent on W^V from 0 (uniform attention, squared loss, T = v = 10,
    tau = 3): converges to the min-norm ``C Sigma^+`` (SPEC §4.2, §6 item 9).
    ``lr = 40`` is close to ``2/(lambda_min + lambda_max)`` of the Hessian ``2 Sigma`` on its range."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(V1=d.V1, attention="uniform", train=("W_V",), init_V="zero", loss="squared")
    return TrainConfig(
        data=d, model=m, optim=OptimConfig("sgd", lr=40.0), steps=300, log_every=5, eval_every=100, checkpoint_every=100
    )


def _preset_stage2_population() -> TrainConfig:
    """W^V frozen at the stage-1 optimum; W^K, W^Q (d_a = V1) trained on the exact population with
    the squared loss from a small random init (Adam lr 0.05). Compare ``K_eff`` with
    ``optimal_attention(tm, mk).K`` (SPEC §4.3)."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(V1=d.V1, attention="softmax", train=("W_K", "W_Q"), init="normal", init_scale=0.1, loss="squared")
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.05),
        steps=400,
        log_every=10,
        eval_every=100,
        checkpoint_every=100,
        init_W_V="stage1-optimum",
    )


def _preset_two_stage() -> TrainConfig:
    """Joint W^K, W^Q, W^V training from a small init (N(0, 0.01^2)) by exact population gradient
    descent at the paper's size (squared loss, T = v = 10, tau = 3, SGD lr 30, ``scale="none"``):
    ||W^V|| plateaus first (stage 1 ends near step 20), then the topic part of the scores grows
    at the rate predicted by :func:`theorycheck.analysis.dynamics.stage2_onset` and attention turns
    topic-aware (SPEC §4.5, §5.2). lr 30 keeps the loss decreasing at every logged step
    (at lr 40 stage 2 comes ~25% sooner but the loss spikes once attention sharpens)."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(
        V1=d.V1,
        attention="softmax",
        train=("W_K", "W_Q", "W_V"),
        init="normal",
        init_scale=0.01,
        loss="squared",
        scale="none",
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=30.0),
        steps=3000,
        log_every=10,
        eval_every=500,
        checkpoint_every=500,
    )


def _preset_embedding() -> TrainConfig:
    """Trained embedding with tied decoder, W^V = I frozen, uniform attention, squared loss, exact
    population, from N(0, 0.01^2): the Gram ``W_E^T W_E`` approaches the min-norm Gram
    (``optimal_embedding_gram``) up to the rotation invariance of ``W_E`` and the loss's flat
    directions (SPEC §4.1): ``dist_gram_opt_identifiable`` compares the identifiable parts,
    ``dist_gram_opt`` the whole Grams (the flat part keeps its O(init^2) start value)."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(
        V1=d.V1,
        d=d.V1,
        embedding="trained",
        decoder="tied",
        attention="uniform",
        train=("W_E",),
        init="normal",
        init_scale=0.01,
        init_V="identity",
        loss="squared",
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=5.0),
        steps=3000,
        log_every=20,
        eval_every=500,
        checkpoint_every=500,
    )


def _preset_deep() -> TrainConfig:
    """4 layers x 4 heads (summed), one-hot embedding, residual + layer norm, trained decoder,
    CE, plain SGD (lr 1; lr 2, 3 and 10 diverged from an N(0, 0.01^2) init) from a small init
    (N(0, 0.003^2)), score factor 1, fresh LDA documents (SPEC §5.3; the paper's exact
    settings for its Figure 5 are [UNREC]). SGD, not Adam: Adam moves every coordinate at a rate
    ~ lr from the first step, which hides the stages in the norms (see the ``ablation`` preset).
    Stages are read from all layers (:func:`stage_curves`); ``figures/norms.png`` shows
    ``||W^V_l||`` and ``||W_K,l^T W_Q,l||`` per layer, ``figures/attention_heads.png`` the
    same-topic : different-topic attention ratio of every head. Identical tokens of a document
    share one row (exact, :meth:`theorycheck.nn.CountBatch.to_positions`)."""
    d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
    m = ModelConfig(
        V1=d.V1,
        n_layers=4,
        n_heads=4,
        d_a=16,
        residual=True,
        layer_norm=True,
        decoder="trained",
        train=("W_K", "W_Q", "W_V", "W_dec", "b_dec"),
        init="normal",
        init_scale=0.003,
        loss="ce",
        scale="none",
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("sgd", lr=1.0),
        steps=1500,
        batch_size=16,
        log_every=10,
        eval_every=250,
        checkpoint_every=250,
    )


#: (optimizer, loss) -> (learning rate, steps) of the ablation grid; each lr is the largest of a
#: x3 ladder that trained stably at T = v = 10 (SGD + CE at lr 10 diverged; see the README).
ABLATION_SETTINGS = {
    ("sgd", "squared"): (40.0, 3000),
    ("sgd", "ce"): (3.0, 2500),
    ("adam", "squared"): (1e-3, 1000),
    ("adam", "ce"): (1e-3, 1000),
}


def _ablation_grid() -> list[tuple[str, TrainConfig]]:
    """SGD/Adam x squared/CE x (reg 0 / 1e-6), joint W^K, W^Q, W^V training from N(0, 0.01^2) on
    the paper's synthetic data (LDA alpha = 0.1, T = v = 10, N ~ U[100, 150], fresh minibatches of
    40 documents; SPEC §5.2, §6 item 23). Stages are read with the structural rule of
    :func:`theorycheck.analysis.stats.detect_stages` (W^V block score, then ``K_eff``): under Adam every
    coordinate moves at a rate ~ lr from the first step, so norms alone cannot show the stages.

    The L2 level 1e-6 is chosen below the stage-2 threshold ``reg < sigma_max / 2`` of
    :func:`theorycheck.analysis.dynamics.stage2_onset` (2.5e-5 for the squared loss at T = v = 10,
    tau = 3): with 1e-5 or 1e-4 the squared-loss runs stay in stage 1 for their whole budget."""
    out = []
    for (opt, loss), (lr, steps) in ABLATION_SETTINGS.items():
        for reg in (0.0, 1e-6):
            d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
            m = ModelConfig(
                V1=d.V1,
                attention="softmax",
                train=("W_K", "W_Q", "W_V"),
                init="normal",
                init_scale=0.01,
                loss=loss,
                reg=reg,
                scale="none",
            )
            cfg = TrainConfig(
                data=d,
                model=m,
                optim=OptimConfig(opt, lr=lr),
                steps=steps,
                batch_size=40,
                log_every=20,
                eval_every=500,
                checkpoint_every=500,
            )
            out.append((f"{opt}-{loss}-reg{reg:g}", cfg))
    return out


def _compensation_grid() -> list[tuple[str, TrainConfig]]:
    """Embedding and attention compensate for each other (SPEC, overview: "if one is
    handicapped the other still encodes topics"). One layer, one head, trained embedding tied to
    the decoder (``W^dec = (W^E)^T``), W^V from the identity, CE, Adam lr 3e-3, 1000 steps on the
    paper's LDA data (T = v = 10, fresh minibatches of 40), three runs:

    - ``both``: W^E, W^K, W^Q, W^V trained from N(0, 0.01^2);
    - ``frozen-embedding``: W^E frozen at a random N(0, 1/d) matrix (unit-norm columns, no topic
      structure: Gram block score ~0.05), W^K, W^Q, W^V trained: attention takes over the topics;
    - ``frozen-attention``: attention frozen uniform, W^E and W^V trained: the embedding Gram takes
      the block pattern.

    ``summary.md`` lists the Gram block score and the same-topic : different-topic attention ratio
    (length-normalised, 1 = uniform) of each run."""
    d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
    common: dict[str, Any] = dict(
        V1=d.V1,
        embedding="trained",
        decoder="tied",
        init="normal",
        init_scale=0.01,
        init_V="identity",
        loss="ce",
        scale="none",
    )
    models = {
        "both": ModelConfig(**common, train=("W_E", "W_K", "W_Q", "W_V")),
        "frozen-embedding": ModelConfig(**common, train=("W_K", "W_Q", "W_V"), init_scale_E=1.0 / math.sqrt(d.V1)),
        "frozen-attention": ModelConfig(**common, attention="uniform", train=("W_E", "W_V")),
    }
    return [
        (
            label,
            TrainConfig(
                data=d,
                model=m,
                optim=OptimConfig("adam", lr=3e-3),
                steps=1000,
                batch_size=40,
                log_every=20,
                eval_every=200,
                checkpoint_every=200,
            ),
        )
        for label, m in models.items()
    ]


#: Preset name -> function returning its :class:`TrainConfig` (or a grid of labelled configurations).
PRESETS: dict[str, Callable[[], TrainConfig | list[tuple[str, TrainConfig]]]] = {
    "official-demo": _preset_official_demo,
    "stage1-population": _preset_stage1_population,
    "stage2-population": _preset_stage2_population,
    "two-stage": _preset_two_stage,
    "embedding": _preset_embedding,
    "deep-4x4": _preset_deep,
    "ablation": _ablation_grid,
    "compensation": _compensation_grid,
}


def preset(name: str) -> TrainConfig | list[tuple[str, TrainConfig]]:
    """The :class:`TrainConfig` of a preset (a list of ``(label, TrainConfig)`` for ``"ablation"``).

    Parameters
    ----------
    name : str
        A key of :data:`PRESETS`: ``"official-demo"``, ``"stage1-population"``, ``"stage2-population"``,
        ``"two-stage"``, ``"embedding"``, ``"deep-4x4"``, or the grids ``"ablation"`` and ``"compensation"``.

    Returns
    -------
    TrainConfig or list of (str, TrainConfig)
        A fresh configuration (edit it freely), or the labelled runs of a grid preset.

    Raises
    ------
    ValueError
        An unknown ``name`` (the message lists the presets).

    See Also
    --------
    run_preset : Run a preset into a folder, with its exact references.
    TrainConfig : What a preset returns.
    stage_grid : The ``two-stage`` preset over learning rates and init scales.

    References
    ----------
    SPEC §5.1 (the official demo), §5.2 (the two-stage experiment), §4.2, §4.3 (the stage-1 and
    stage-2 optima the population presets reach).

    Examples
    --------
    >>> from theorycheck.nn import preset
    >>> cfg = preset("stage1-population")  # exact gradient descent on W^V from 0 (SPEC §4.2)
    >>> cfg.data.T, cfg.data.v, cfg.data.tau, cfg.data.source, cfg.model.train, cfg.optim.name, cfg.optim.lr
    (10, 10, 3, 'population', ('W_V',), 'sgd', 40.0)
    >>> [label for label, _ in preset("ablation")][:2]
    ['sgd-squared-reg0', ...]
    """
    check_choice("preset", name, tuple(PRESETS))
    return PRESETS[name]()


def run_preset(
    name: str,
    out: str | os.PathLike,
    *,
    steps: int | None = None,
    seed: int | None = None,
    seeds: Sequence[int] | None = None,
    checkpoint_every: int | None = None,
    progress: bool = True,
    resume: bool = False,
    probes: Iterable[Probe] = (),
    executor: Executor | None = None,
    client: Any = None,
) -> dict:
    """Run a preset into the folder ``out`` and return a JSON-able summary (also ``summary.json``).

    ``steps``, ``seed``, ``checkpoint_every`` override the preset's values (validated before any
    work). ``seeds``: a sequence of distinct seeds; every run of the preset is repeated once per
    seed into ``<label>-seed<s>`` (``seed<s>`` for a single-run preset). ``resume=True`` continues
    every run from its checkpoint; in a grid, runs that had not started yet (no folder) start
    afresh. ``executor`` (a :class:`concurrent.futures.Executor`) or ``client`` (a
    ``distributed.Client`` or a scheduler address; ``out`` must then be on a file system the
    workers share) runs the runs concurrently, without per-run progress bars. Interruptions
    propagate as :class:`theorycheck.nn.TrainingInterrupted`.

    Parameters
    ----------
    name : str
        A preset (:func:`preset`).
    out : str or path-like
        The folder: a run folder (single-run preset) or one subfolder per run, plus ``summary.json``.
    steps : int, optional
        Steps of every run, ``steps >= 1``.
    seed : int, optional
        Seed of every run, ``seed >= 0`` (not with ``seeds``).
    seeds : sequence of int, optional
        Distinct seeds ``>= 0``: every run once per seed.
    checkpoint_every : int, optional
        Checkpoint period, ``>= 0``.
    progress : bool
        Progress bars (serial runs only).
    resume : bool
        Continue every run from its newest checkpoint.
    probes : iterable of callable
        Extra probes ``(model, ctx) -> dict``.
    executor : concurrent.futures.Executor, optional
        Runs the runs concurrently.
    client : distributed.Client or str, optional
        A Dask client or scheduler address, instead of ``executor``.

    Returns
    -------
    dict
        ``{"preset": name, "runs": [row, ...]}``: per run its steps, seconds, final loss, stage
        boundaries, final probe values and the exact references of the preset (``dist_W_V_solver``:
        relative distance of the trained ``W^V`` to the solvers' stage-1 closed form;
        ``K_star``, ``loss_star_alpha_beta``, ``attention_loss_exact`` for ``stage2-population``).

    Raises
    ------
    ValueError
        An unknown preset, an override out of range, both ``seed`` and ``seeds``, or repeated seeds
        (before any work).

    See Also
    --------
    preset : The configurations.
    train : One run.
    stage_grid : The ``two-stage`` preset over a grid.

    References
    ----------
    SPEC §5.1, §5.2 (the experiments), §4.2, §4.3 (the exact references).

    Examples
    --------
    Two steps of exact gradient descent from ``W^V = 0`` (the ``stage1-population`` preset, T = v = 10):

    >>> import os
    >>> from theorycheck.nn import run_preset
    >>> summary = run_preset("stage1-population", "run", steps=2, progress=False)
    >>> row = summary["runs"][0]
    >>> row["steps"], row["trained"], round(row["final_loss"], 6), round(row["dist_W_V_solver"], 6)
    (2, 'W_V', 0.989272, 0.709767)
    >>> sorted(os.listdir("run"))
    ['checkpoint-2.json', 'checkpoint-2.npz', 'config.json', 'metrics.jsonl', 'params.npz', 'stages.json',
     'summary.json']
    """
    runs = _configs(name, steps=steps, seed=seed, seeds=seeds, checkpoint_every=checkpoint_every)
    out = Path(out)
    grid = len(runs) > 1 or runs[0][0] != ""
    jobs = []
    for label, cfg in runs:
        folder = out / label if label else out
        again = resume and (not grid or bool(list_checkpoints(folder)) or (folder / "metrics.jsonl").exists())
        jobs.append((name, label, cfg, folder, again, probes, progress))
    with resolve_executor(executor, client) as ex:
        if ex is None:
            rows = [_run_one(job) for job in jobs]
        else:
            # absolute folders: a worker's working directory is not ours
            rows = list(ex.map(_run_one, [(*job[:3], job[3].absolute(), job[4], job[5], False) for job in jobs]))
    summary = {"preset": name, "runs": rows}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary, sort_keys=True, indent=2)
    if grid:
        cols = SUMMARY_COLUMNS.get(name, SUMMARY_COLUMNS["ablation"])
        atomic_write_text(out / "summary.md", _summary_table(rows, cols))
    return summary


def _run_one(job) -> dict:
    """Train one run of a preset into its folder and return its summary row (runs on a worker too)."""
    name, label, cfg, folder, again, probes, progress = job
    res = train(cfg, folder, progress=progress, resume=again, probes=probes)
    return _summary_row(name, label, cfg, res)


def _check_seeds(seeds, seed) -> list[int] | None:
    if seeds is None:
        return None
    if seed is not None:
        raise ValueError(f"pass seed or seeds, not both (got seed={seed!r}, seeds={seeds!r})")
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers >= 0, got {type(seeds).__name__}")
    out = [check_int("seeds[]", s, low=0) for s in seeds]
    if not out or len(set(out)) != len(out):
        raise ValueError(f"seeds must be a non-empty sequence of distinct integers >= 0, got {list(seeds)!r}")
    return out


def _configs(name, *, steps, seed, checkpoint_every, seeds=None) -> list[tuple[str, TrainConfig]]:
    """The preset's runs with the overrides applied (validated copies), once per seed of ``seeds``."""
    cfgs = preset(name)
    runs = cfgs if isinstance(cfgs, list) else [("", cfgs)]
    seeds = _check_seeds(seeds, seed)
    changes = {}
    if steps is not None:
        changes["steps"] = check_int("steps", steps, low=1)
    if seed is not None:
        changes["seed"] = check_int("seed", seed, low=0)
    if checkpoint_every is not None:
        changes["checkpoint_every"] = check_int("checkpoint_every", checkpoint_every, low=0)
    if seeds is None:
        return [(label, cfg.replace(**changes)) for label, cfg in runs]
    return [
        (f"{label}-seed{s}" if label else f"seed{s}", cfg.replace(**changes, seed=s))
        for label, cfg in runs
        for s in seeds
    ]


def _summary_row(name, label, cfg, res) -> dict:
    row = {
        "run": label or name,
        "steps": res.steps,
        "seconds": round(res.seconds, 3),
        "final_loss": res.final.get("loss"),
        "best_dev_loss": res.best_dev_loss,
    }
    if res.stages:
        row["stage1_end"] = res.stages["stage1_end"]
        row["stage2_start"] = res.stages["stage2_start"]
        for k in _STAGE_KEYS:
            row[k] = res.stages.get(k)
    for k in _FINAL_KEYS:
        if res.final.get(k) is not None:
            row[k] = res.final[k]
    if row.get("attn_same_topic") is not None and row.get("attn_diff_topic"):
        row["attn_topic_ratio"] = row["attn_same_topic"] / row["attn_diff_topic"]
    row["trained"] = ",".join(cfg.model.train)
    row.update(_exact_references(name, cfg, res.model))
    return row


_STAGE_KEYS = (
    "stage2_attention",
    "stage1_end_attention",
    "V_growth_before_attention",
    "stage1_end_structure",
    "block_score_at_stage2",
    "structural_two_stage",
)
_FINAL_KEYS = (
    "dist_W_V_opt",
    "dist_gram_opt",
    "dist_gram_opt_identifiable",
    "K_eff_median",
    "block_score_W_V",
    "block_score_gram",
    "attn_same_topic",
    "attn_diff_topic",
)


#: columns of ``summary.md`` for the grid presets
SUMMARY_COLUMNS = {
    "ablation": [
        "run",
        "final_loss",
        "stage1_end",
        "stage2_start",
        "stage1_end_structure",
        "stage2_attention",
        "block_score_at_stage2",
        "structural_two_stage",
        "seconds",
    ],
    "compensation": ["run", "trained", "final_loss", "block_score_gram", "attn_topic_ratio", "K_eff_median", "seconds"],
}


def _summary_table(rows, cols) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append(
            "| " + " | ".join(f"{r.get(c):.6g}" if isinstance(r.get(c), float) else str(r.get(c)) for c in cols) + " |"
        )
    return "\n".join(lines) + "\n"


def _exact_references(name, cfg: TrainConfig, model: Transformer) -> dict:
    """Cross-checks against the exact optima: ``K*`` and ``L*`` of ``optimal_attention`` and the exact
    population loss of the trained scores (SPEC §4.3) for ``stage2-population``; the distance of the
    trained W^V to the solvers' closed form (SPEC §4.2) for ``stage1-population``."""
    out = {}
    tm, mk = cfg.data.topic_model(), cfg.data.masking()
    W_V = model.layers[0].params["W_V"][0]
    if name == "stage2-population":
        r = optimal_attention(tm, mk, value="block")
        out["K_star"] = float(r.K)
        out["loss_star_alpha_beta"] = float(getattr(r, "loss", r.fun))
        out["attention_loss_exact"] = float(attention_loss(model.score_matrix(), W_V, tm, mk))
    if name == "stage1-population":
        ref = optimal_value_matrix(tm, mk, reg=0.0, method="closed-form").x
        ref = ref.toarray() if hasattr(ref, "toarray") else ref
        out["dist_W_V_solver"] = relative_distance(W_V, ref)
    return out
