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
    """Write ``results.json``, ``figures/*.png`` and ``theory_gap.md`` of a real-data result into ``out``, atomically.

    The files are written into a temporary folder that then becomes ``out`` (renamed); if anything fails, the
    temporary folder is removed and an existing ``out`` is left untouched. ``results.json`` is the summary plus
    the lists ``figures`` and ``tables`` of the files written, under the package JSON policy (non-finite floats,
    e.g. an empty pair class, are ``null``). ``theory_gap.md`` (the theory-vs-MiniLM table of :mod:`.theory`) is
    written when the summary has a ``theory`` part. ``out`` is replaced only if it is new, empty or theorycheck's
    own; ``force`` writes into it keeping other files (``theorycheck._io.atomic_directory``).

    Parameters
    ----------
    result : RealDataResult
        What :func:`~theorycheck.realdata.pipeline.run_realdata` measured.
    out : str or os.PathLike
        The output folder (``~`` expanded).
    figures : bool, default True
        Also draw and save the figures of :mod:`theorycheck.realdata.plots` (``figures/*.png``).
    force : bool, default False
        Write into an ``out`` that holds files theorycheck did not write (they are kept, never overwritten).
    command : str, default "theorycheck realdata"
        The command recorded in the folder's marker file.

    Returns
    -------
    pathlib.Path
        The absolute path of ``out``.

    Raises
    ------
    TypeError
        If the summary holds an object that is not a number, string, bool, ``None``, numpy value or container
        (checked before anything is written).
    ValueError
        If ``out`` holds files theorycheck did not write and ``force`` is False, or is not a usable folder path.

    See Also
    --------
    theorycheck.realdata.pipeline.run_realdata : Computes the result.
    theorycheck.realdata.plots.attention_gap_heatmap : One of the figures written.
    theorycheck.realdata.theory.format_theory_table : The text of ``theory_gap.md``.

    Examples
    --------
    A result built from synthetic attention (uniform, so its gap is 0), written without figures:

    >>> import json, os
    >>> from theorycheck.realdata.pipeline import RealDataConfig, RealDataResult, Window, attention_statistics
    >>> from theorycheck.realdata.output import write_realdata
    >>> M = np.zeros((6, 2), bool)
    >>> M[[1, 2], 0] = M[[3, 4], 1] = True
    >>> rng = np.random.default_rng(0)
    >>> encoded = [(Window(rng.integers(1, 6, size=8), np.ones(8, bool), d), np.full((1, 2, 8, 8), 1 / 8))
    ...            for d in range(4)]
    >>> att = attention_statistics(encoded, M, None, n_layers=1, n_heads=2, n_boot=10, rng=rng)
    >>> result = RealDataResult(RealDataConfig(), {"mean_gap": round(float(att.gap.mean()), 12),
    ...                                            "empty_class": float("nan")}, att)
    >>> out = write_realdata(result, "rd", figures=False)
    >>> out.name, sorted(os.listdir("rd"))
    ('rd', ['.theorycheck.json', 'results.json'])
    >>> with open("rd/results.json") as f:
    ...     json.load(f)
    {'mean_gap': 0.0, 'empty_class': None, 'figures': [], 'tables': []}

    A folder holding someone else's file is not replaced (``force=True`` writes beside it):

    >>> os.mkdir("mine")
    >>> with open("mine/notes.txt", "w") as f:
    ...     _ = f.write("my notes")
    >>> write_realdata(result, "mine", figures=False)
    Traceback (most recent call last):
    ...
    ValueError: --out folder '...mine' already holds files theorycheck did not write (notes.txt); ...
    >>> sorted(os.listdir(write_realdata(result, "mine", figures=False, force=True)))
    ['.theorycheck.json', 'notes.txt', 'results.json']
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
