"""Landscape files (SPEC §4.3, §11.4): ``grid.npz``, ``landscape.png``, ``optimum.json`` and ``sweep.json``.

The numbers come from :func:`theorycheck.analysis.landscape.landscape_data`; this module writes them.
"""

from __future__ import annotations

import numpy as np

from .._io import atomic_directory, prepare_output_dir, write_json
from ..analysis.landscape import is_general_landscape, landscape_data
from ..models import GeneralTopicModel, Masking, TopicModel, check_models
from . import plots

__all__ = ["write_landscape"]


def write_landscape(
    tm: TopicModel | GeneralTopicModel,
    mk: Masking,
    out,
    *,
    value: str = "block",
    n_grid: int | None = None,
    alpha=None,
    beta=None,
    loss: str = "squared",
    force: bool = False,
    command: str = "theorycheck landscape",
    sweep: list | None = None,
    figures: bool = True,
) -> dict:
    """Write ``grid.npz`` (alpha, beta, L, and for block W^V the log K curve), ``landscape.png`` (unless
    ``figures=False``) and ``optimum.json``.

    The arrays and the certified optimum are :func:`~theorycheck.analysis.landscape.landscape_data`'s
    (SPEC §4.3; a general model: SPEC §11.4, ``grid.npz`` also holds ``G`` and the figure marks the
    solver's optimum). ``sweep``: rows of :func:`~theorycheck.analysis.landscape.asymptotic_sweep`,
    written as ``sweep.json`` (``{"rows": [...]}``; the paper's model only). The folder ``out`` is
    checked before any work, written atomically and replaced only if it is new, empty or
    theorycheck's own (``force``: written into, other files kept;
    :func:`theorycheck._io.atomic_directory`). ``optimum.json`` follows the package JSON policy
    (non-finite -> ``null``). Returns the optimum dict.
    """
    check_models(tm, mk, general=True)
    if sweep is not None and is_general_landscape(tm):
        raise ValueError("sweep is for the paper's model (TopicModel); drop it for a GeneralTopicModel")
    prepare_output_dir(out, force=force)  # before any work
    arrays, fig_kw, info = landscape_data(tm, mk, value=value, n_grid=n_grid, alpha=alpha, beta=beta, loss=loss)
    fig_kw = dict(fig_kw)
    xlabel = fig_kw.pop("xlabel", None)
    with atomic_directory(out, force=force, command=command) as tmp:
        np.savez(tmp / "grid.npz", **arrays)
        if figures:
            fig = plots.attention_landscape(**fig_kw)
            if xlabel is not None:
                fig.axes[0].set_xlabel(xlabel)
            fig.savefig(tmp / "landscape.png", dpi=110, format="png")
        write_json(tmp / "optimum.json", info, sort_keys=True)
        if sweep is not None:
            write_json(tmp / "sweep.json", {"value": value, "mk": mk.to_dict(), "rows": list(sweep)}, sort_keys=True)
    return info
