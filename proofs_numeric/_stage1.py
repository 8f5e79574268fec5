"""Shared helpers of the stage-1 claims (not a claim module: the name starts with ``_``)."""

from __future__ import annotations

import numpy as np

from theorycheck import Masking, TopicModel
from theorycheck._threads import numba_threads

SPEC_MASKING = dict(p_m=0.15, p_c=0.1, p_r=0.1)


def models(params: dict) -> tuple[TopicModel, Masking]:
    """``(TopicModel, Masking)`` from a claim parameter dict."""
    if params.get("prior", "uniform-tau") == "dirichlet":
        tm = TopicModel(T=params["T"], v=params["v"], prior="dirichlet", alpha=params["alpha"])
    else:
        tm = TopicModel(T=params["T"], v=params["v"], tau=params["tau"])
    return tm, Masking(params["p_m"], params["p_c"], params["p_r"])


def entry_classes(W: np.ndarray, tm: TopicModel) -> dict:
    """Entries of a ``(V1, V1)`` matrix by class: same-topic words, different-topic words, mask column, row 0."""
    topics = tm.token_topics()[1:]
    same = topics[:, None] == topics[None, :]
    words = W[1:, 1:]
    return {"same": words[same], "diff": words[~same], "mask_col": W[1:, 0], "row0": W[0, :]}


def spread(x: np.ndarray) -> float:
    """``max - min`` (0 for an empty array)."""
    return float(x.max() - x.min()) if x.size else 0.0


def single_numba_thread():
    """Numba kernels on one thread inside the block: the stage-1 descent calls a parallel kernel
    hundreds of times on a small matrix, where thread start-up dominates."""
    return numba_threads(1)
