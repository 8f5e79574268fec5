"""Hypothesis strategies of :class:`~theorycheck.models.GeneralTopicModel` shared by the
``tests/test_general_*.py`` files (SPEC §11.1): random topic-word rows and the constructors
(overlapping by eps or by shared words, Zipfian, unequal topic sizes).

The draw order of each strategy is fixed: with the derandomized ``ci`` profile the same examples run.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import theorycheck as tc
from theorycheck.models import GeneralTopicModel as G
from theorycheck.models import Masking

__all__ = ["general_models", "constructed_model", "CONSTRUCTORS", "INTERVAL_MASKINGS", "label_box_cases"]

#: the kinds :func:`constructed_model` builds
CONSTRUCTORS = ("eps", "shared", "zipf", "unequal")


def constructed_model(draw, kind: str, T: int, v: int, law: dict, *, max_size: int = 3) -> G:
    """A constructor's model with drawn parameters: ``eps`` (mixed with the uniform word law, eps in [0, 1]),
    ``shared`` (0..v words shared by every topic), ``zipf`` (exponent in [0, 2]), ``unequal`` (topic sizes
    1..max_size); ``law``: the document-law keywords (``tau`` or ``prior``/``alpha``)."""
    if kind == "eps":
        return G.overlapping(T, v, eps=draw(st.floats(0.0, 1.0)), **law)
    if kind == "shared":
        return G.overlapping(T, v, n_shared=draw(st.integers(0, v)), **law)
    if kind == "zipf":
        return G.zipf(T, v, draw(st.floats(0.0, 2.0)), **law)
    if kind == "unequal":
        return G.unequal(draw(st.lists(st.integers(1, max_size), min_size=T, max_size=T)), **law)
    raise ValueError(f"kind must be one of {CONSTRUCTORS}, got {kind!r}")


@st.composite
def general_models(draw, max_T=4, max_v=3, prior="uniform-tau", paper=False):
    """Random Dirichlet rows, overlapping (eps / shared words), Zipfian and unequal topics; with ``paper`` also
    the paper's model as a general one. T in 2..max_T, v in 1..max_v; ``prior="dirichlet"``: per-topic alpha
    in [0.2, 3]."""
    T = draw(st.integers(2, max_T))
    v = draw(st.integers(1, max_v))
    law = dict(tau=draw(st.integers(1, T))) if prior == "uniform-tau" else dict(prior="dirichlet")
    if prior == "dirichlet":
        law["alpha"] = draw(st.lists(st.floats(0.2, 3.0), min_size=T, max_size=T))
    kind = draw(st.sampled_from(["random", *CONSTRUCTORS] + (["paper"] if paper else [])))
    if kind == "random":
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        return G(rng.dirichlet(np.full(T * v, 0.7), size=T), **law)
    if kind == "paper":
        return G.from_topic_model(tc.TopicModel(T=T, v=v, **law))
    return constructed_model(draw, kind, T, v, law)


#: Maskings of the interval-certificate tests: the default, heavy random replacement, and [MASK] queries only
#: (the loss then does not depend on the scores).
INTERVAL_MASKINGS = st.sampled_from([Masking(), Masking(p_m=0.3, p_c=0.2, p_r=0.3), Masking(p_m=0.5, p_c=0.0, p_r=0.0)])


def label_box_cases(*, centre=((-6.0, 6.0), (-6.0, 6.0)), width=(0.0, 3.0), frac=(0.0, 1.0), n_points=2) -> dict:
    """The ``@given`` keywords of the label family's enclosure tests (drawn in this order): a small general model
    (the paper's included), a masking, ``mask_keys``, the ``W^V`` kind, a box (centre and side widths) and
    ``n_points`` points of it as fractions of its sides."""
    side = st.tuples(st.floats(*frac), st.floats(*frac))
    return dict(
        g=general_models(max_T=4, max_v=3, paper=True),
        mk=INTERVAL_MASKINGS,
        mask_keys=st.booleans(),
        kind=st.sampled_from(["stage1", "identity"]),
        centre=st.tuples(st.floats(*centre[0]), st.floats(*centre[1])),
        width=st.tuples(st.floats(*width), st.floats(*width)),
        frac=st.lists(side, min_size=n_points, max_size=n_points),
    )
