"""The one place theorycheck imports matplotlib.

matplotlib is a required dependency, imported lazily: ``import theorycheck`` neither imports it
nor selects a backend. Every figure module (:mod:`theorycheck.report.plots` and its helpers,
the verification report's figures, :mod:`theorycheck.realdata.plots`) asks for the matplotlib
module it uses through :func:`mpl`, which selects the Agg backend (files only, no display) first.
"""

from __future__ import annotations

import importlib

__all__ = ["mpl"]


def mpl(module: str = "matplotlib"):
    """Import and return ``module`` (``"matplotlib"`` or a submodule, e.g. ``"matplotlib.ticker"``,
    ``"matplotlib.pyplot"``) with the Agg backend selected."""
    importlib.import_module("matplotlib").use("Agg", force=False)
    return importlib.import_module(module)
