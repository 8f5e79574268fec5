"""Writing a real-data result: ``results.json`` and ``figures/*.png``, atomically (SPEC §5.4-5.5)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._io import atomic_directory, write_json
from .._mpl import mpl
from . import plots
from .theory import format_theory_table

if TYPE_CHECKING:  # annotation only (pipeline imports this module)
    from .pipeline import RealDataResult

__all__ = ["write_realdata"]


def _check_serialisable(x):
    """``TypeError`` for any object that is not a number, string, bool, ``None``, numpy value or container."""
    if isinstance(x, dict):
        for v in x.values():
            _check_serialisable(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _check_serialisable(v)
    elif not (x is None or isinstance(x, (bool, int, float, str, np.generic, np.ndarray))):
        raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


def write_realdata(
    result: RealDataResult, out, *, figures: bool = True, force: bool = False, command: str = "theorycheck realdata"
) -> Path:
    """Write ``results.json``, ``figures/*.png`` and ``theory_gap.md`` (the theory-vs-MiniLM table of
    :mod:`.theory`) into ``out`` atomically (temporary folder, rename).

    If anything fails, the temporary folder is removed and an existing ``out`` is left untouched.
    ``results.json`` follows the package JSON policy (non-finite floats, e.g. an empty pair
    class, are ``null``). ``out`` is replaced only if it is new, empty or theorycheck's own;
    ``force`` writes into it keeping other files (``theorycheck._io.atomic_directory``).
    """
    _check_serialisable(result.summary)
    out = Path(os.fspath(out)).expanduser().resolve()
    with atomic_directory(out, force=force, command=command) as tmp:
        names = []
        if figures:
            plt = mpl("matplotlib.pyplot")
            (tmp / "figures").mkdir()
            att = result.attention
            figs = {
                "attention_gap": plots.attention_gap_heatmap(att.gap, att.gap_ci),
                "attention_classes": plots.attention_class_lines(att.mean_lift, att.classes),
                "embedding_cosine": plots.similarity_distributions(
                    result.values["embedding"]["cosine"], metric="cosine", exclude=("same_token",)
                ),
                "embedding_dot": plots.similarity_distributions(
                    result.values["embedding"]["dot"], metric="dot product"
                ),
            }
            if result.summary.get("specificity"):
                figs["embedding_specificity"] = plots.specificity_gap(result.summary["specificity"])
            if "theory" in result.values:
                figs["theory_similarity"] = plots.theory_similarity(
                    result.values["theory"], result.summary["theory"]["table"]
                )
            if result.summary.get("theory", {}).get("attention"):
                figs["theory_attention"] = plots.attention_theory_heads(result.summary["theory"]["attention"])
            for name, fig in figs.items():
                fig.savefig(tmp / "figures" / f"{name}.png", dpi=110, bbox_inches="tight")
                plt.close(fig)
                names.append(f"figures/{name}.png")
        tables = []
        if result.summary.get("theory"):
            (tmp / "theory_gap.md").write_text(format_theory_table(result.summary["theory"]))
            tables.append("theory_gap.md")
        write_json(tmp / "results.json", dict(result.summary, figures=names, tables=tables))
    return out
