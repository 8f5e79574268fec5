"""Figures of a training run, drawn from its run folder (the trainer itself draws nothing).

:func:`figures_from_run` reads ``config.json``, ``metrics.jsonl``, ``stages.json`` and
``params.npz`` of a finished run (see :mod:`theorycheck.nn.trainer`) and returns the figures;
:func:`write_figures` saves them as ``figures/<name>.png``. Figures: ``norms`` (training curves
with the stage boundaries, SPEC §5.2), ``W_V`` (layer 0, head 0), ``attention`` (row-softmax of
the score matrix over key tokens of equal counts, softmax models), ``gram`` (``W_E^T W_E``,
trained embeddings) and ``attention_heads`` (per-head same-topic : different-topic ratios).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from .._io import atomic_write_bytes
from ..nn import TrainConfig, Transformer, load_metrics
from . import plots

__all__ = ["figures_from_run", "write_figures"]


def _row_softmax(S):
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _load_model(run: Path, cfg):
    model = Transformer(cfg.model, seed=0)
    with np.load(run / "params.npz", allow_pickle=False) as z:
        model.load_state_dict({k[5:]: z[k] for k in z.files if k.startswith("full/")})
    return model


def figures_from_run(run) -> dict:
    """``{name: matplotlib Figure}`` of the finished run folder ``run``."""
    run = Path(run)
    for name in ("config.json", "metrics.jsonl", "params.npz"):
        if not (run / name).exists():
            raise ValueError(f"run must be a finished run folder; {run / name} does not exist")
    conf = json.loads((run / "config.json").read_text())
    cfg = TrainConfig.from_dict({k: v for k, v in conf.items() if k != "versions"})
    recs = load_metrics(run)
    stages = json.loads((run / "stages.json").read_text()) if (run / "stages.json").exists() else None
    model = _load_model(run, cfg)
    v, mc = cfg.data.v, cfg.model
    lay = model.layers[0]
    figs = {
        "norms": plots.training_curves(recs, stages=stages, v=v),
        "W_V": plots.heatmap(
            lay.params["W_V"][0],
            title="value matrix W^V (layer 0, head 0)",
            block=v,
            ax_labels=plots.VALUE_AXES,
            cbar_label="W^V entry",
        ),
    }
    if mc.attention == "softmax":
        figs["attention"] = plots.heatmap(
            _row_softmax(model.score_matrix()),
            title="attention softmax_b S[a, b], layer 0, head 0\n(query a, key b; key tokens in equal counts)",
            block=v,
            symmetric=False,
            cmap="viridis",
            ax_labels=plots.SCORE_AXES,
            cbar_label="attention weight (each row sums to 1)",
        )
    if not model.embedding.one_hot:
        tab = model.embedding.params["W_E"]
        figs["gram"] = plots.heatmap(
            tab.T @ tab,
            title="embedding Gram W_E^T W_E",
            block=v,
            ax_labels=plots.GRAM_AXES,
            cbar_label="Gram entry <W_E e_i, W_E e_j>",
        )
    if any(r.get("attn_topic_ratio_heads") for r in recs):
        figs["attention_heads"] = plots.attention_head_ratios(recs, mc.n_layers, mc.n_heads)
    return figs


def write_figures(run, *, dpi: int = 110) -> list[Path]:
    """Draw :func:`figures_from_run` into ``run/figures/<name>.png``; return the paths."""
    run = Path(run)
    figs = figures_from_run(run)
    figdir = run / "figures"
    figdir.mkdir(exist_ok=True)
    paths = []
    for name, fig in figs.items():
        buf = io.BytesIO()
        fig.savefig(buf, dpi=dpi, format="png")
        paths.append(atomic_write_bytes(figdir / f"{name}.png", buf.getvalue()))  # a file of the user's is refused
    return paths
