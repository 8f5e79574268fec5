"""Phase diagrams: what the paper's conclusions become for overlapping and Zipfian topics (SPEC §11.6).

One point of a diagram is a :class:`~theorycheck.models.GeneralTopicModel` of ``T`` topics of
``v`` words with ``tau`` topics per document (uniform-tau law) built by

- ``kind="overlap"``: :meth:`GeneralTopicModel.overlapping` with mixing ``x = eps`` in [0, 1];
- ``kind="zipf"``: :meth:`GeneralTopicModel.zipf` with exponent ``x = s >= 0``;

with the word labels of the construction (word ``w`` in topic ``(w - 1) // v``; it is every word's
dominant topic except at ``eps = 1``, where the topics are identical and every word ties). At each
point (:func:`phase_point`) the exact objects are computed: the minimum-norm stage-1 ``W^V``
(:func:`theorycheck.solvers.optimal_value_matrix`), the minimum-norm tied Gram
(:func:`theorycheck.solvers.optimal_embedding_gram`), the optimal ``S = alpha I_w + beta G`` scores
(:func:`theorycheck.solvers.optimal_attention`) and their statistics
(:mod:`theorycheck.analysis.topic_structure`).

Sweeps take a :class:`concurrent.futures.Executor` or a Dask client (as
:func:`theorycheck.analysis.landscape.asymptotic_sweep`); each task is a pure function of its
arguments, so every executor returns the serial result bit for bit. :func:`find_boundary` bisects
on the exact objects for the ``x`` where a statistic crosses a level.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._validate import check_choice, check_int, check_real
from ..models import GeneralTopicModel, Masking
from ..solvers import optimal_attention, optimal_embedding_gram, optimal_value_matrix
from .landscape import _map
from .topic_structure import attention_preference, matrix_topic_stats

__all__ = [
    "PhaseDiagram",
    "KINDS",
    "STATISTICS",
    "phase_model",
    "phase_point",
    "phase_diagram",
    "find_boundary",
    "diagram_boundaries",
]

#: Model families of a phase diagram: overlapping topics (``eps``) and Zipfian word laws (``s``).
KINDS = ("overlap", "zipf")
#: Statistic names of a point: value / gram ``gap``, ``correlation``, ``energy``; attention.
MATRIX_STATISTICS = tuple(f"{o}_{s}" for o in ("value", "gram") for s in ("gap", "correlation", "energy"))
ATTENTION_STATISTICS = ("attention_preference", "attention_alpha", "attention_beta")
#: Every statistic of a phase-diagram point (matrix statistics, then attention statistics).
STATISTICS = MATRIX_STATISTICS + ATTENTION_STATISTICS


class PhaseDiagram(NamedTuple):
    """``data[name][i, j]`` is statistic ``name`` at ``x = values[i]``, ``tau = taus[j]``.

    Returned by :func:`phase_diagram`.

    Parameters
    ----------
    kind : {"overlap", "zipf"}
        The model family (module docstring).
    values : ndarray, shape (n_values,)
        The family parameter ``x`` (``eps`` in ``[0, 1]`` or the Zipf exponent ``s`` in ``[0, 50]``).
    taus : ndarray of int, shape (n_taus,)
        Topics per document, each in ``[1, T]``.
    T : int
        Number of topics.
    v : int
        Words per topic.
    masking : dict
        The masking probabilities (``Masking.to_dict()``).
    data : dict of str to ndarray
        Each statistic of :data:`STATISTICS` (and ``attention_status``, -1 when not computed), shape
        ``(n_values, n_taus)``; attention statistics are NaN when not computed.

    See Also
    --------
    phase_diagram : Computes it.
    diagram_boundaries : The crossing points of one statistic, per ``tau``.

    References
    ----------
    SPEC §11.6 (phase diagrams).

    Examples
    --------
    >>> from theorycheck.analysis import phase_diagram
    >>> d = phase_diagram("overlap", [0.0, 1.0], T=3, v=2, taus=[2], attention=False)
    >>> d.kind, d.values, d.taus, d.data["value_gap"].shape
    ('overlap', array([0., 1.]), array([2]), (2, 1))
    """

    kind: str
    values: np.ndarray
    taus: np.ndarray
    T: int
    v: int
    masking: dict
    data: dict


def _check_kind_x(kind, x):
    check_choice("kind", kind, KINDS)
    return check_real("eps" if kind == "overlap" else "s", x, low=0.0, high=1.0 if kind == "overlap" else 50.0)


def phase_model(kind: str, x: float, T: int, v: int, tau: int) -> tuple[GeneralTopicModel, np.ndarray]:
    """``(g, labels)``: the model at ``x`` (module docstring) and the construction's word labels.

    Parameters
    ----------
    kind : {"overlap", "zipf"}
        The model family: :meth:`~theorycheck.models.GeneralTopicModel.overlapping` (``x = eps``) or
        :meth:`~theorycheck.models.GeneralTopicModel.zipf` (``x = s``).
    x : float
        ``eps`` in ``[0, 1]`` (``"overlap"``) or ``s`` in ``[0, 50]`` (``"zipf"``).
    T : int
        Number of topics.
    v : int
        Words per topic.
    tau : int, 1 <= tau <= T
        Topics per document (uniform-tau law).

    Returns
    -------
    g : GeneralTopicModel
        The model at ``x``.
    labels : ndarray of int, shape (T v,)
        The construction's word labels ``(w - 1) // v``.

    Raises
    ------
    ValueError
        An unknown ``kind``, ``x`` out of its range, or a model the constructors reject.

    See Also
    --------
    phase_point : The statistics of this model.
    phase_diagram : A sweep of these models over ``x`` and ``tau``.
    theorycheck.models.GeneralTopicModel : The model class.

    References
    ----------
    SPEC §11.6 (phase diagrams), §11.1 (general topic-word matrices).

    Examples
    --------
    ``eps = 0`` is the paper's model (disjoint topics of ``v`` equally likely words); Zipf ``s = 1``
    weighs a topic's words ``1, 1/2``:

    >>> from theorycheck.analysis.phase import phase_model
    >>> g, z = phase_model("overlap", 0.0, 3, 2, 1)
    >>> g.phi
    array([[0.5, 0.5, 0. , 0. , 0. , 0. ],
           [0. , 0. , 0.5, 0.5, 0. , 0. ],
           [0. , 0. , 0. , 0. , 0.5, 0.5]])
    >>> z
    array([0, 0, 1, 1, 2, 2])
    >>> np.round(phase_model("zipf", 1.0, 3, 2, 2)[0].phi[0], 4)
    array([0.6667, 0.3333, 0.    , 0.    , 0.    , 0.    ])
    """
    x = _check_kind_x(kind, x)
    g = (
        GeneralTopicModel.overlapping(T, v, eps=x, tau=tau)
        if kind == "overlap"
        else GeneralTopicModel.zipf(T, v, x, tau=tau)
    )
    return g, np.repeat(np.arange(T), v)


def phase_point(job) -> dict:
    """All statistics at one point; ``job = (kind, x, T, v, tau, masking dict, attention: bool)``.

    Attention statistics are NaN when ``attention`` is False. Also ``attention_status``.

    Parameters
    ----------
    job : tuple
        ``(kind, x, T, v, tau, masking, attention)``: the arguments of :func:`phase_model`, the
        :class:`~theorycheck.models.Masking` as a dict (``Masking.to_dict()``), and whether to solve for
        the optimal attention (the costly step).

    Returns
    -------
    dict
        The :data:`STATISTICS` (``value_*`` of the minimum-norm stage-1 ``W^V``, ``gram_*`` of the
        minimum-norm tied Gram: ``gap``, ``correlation``, ``energy``; ``attention_preference``,
        ``attention_alpha``, ``attention_beta``) and ``attention_status`` (the solver's status, ``-1``
        without attention).

    Raises
    ------
    ValueError
        As :func:`phase_model`, or a masking the solvers reject.

    See Also
    --------
    phase_model : The model at the point.
    phase_diagram : The statistics over a grid of points.
    theorycheck.analysis.matrix_topic_stats : The matrix statistics.

    References
    ----------
    SPEC §11.6 (phase diagrams), §4.2 (the paper's ``gap = 1/(a v)``).

    Examples
    --------
    At ``eps = 0`` (the paper's model) the stage-1 gap is ``1/(a v)``; at ``eps = 1`` the topics are
    identical and no structure is left:

    >>> from theorycheck import Masking
    >>> from theorycheck.analysis.phase import phase_point
    >>> mk = Masking()
    >>> r = phase_point(("overlap", 0.0, 3, 2, 2, mk.to_dict(), False))
    >>> round(r["value_gap"], 12) == round(1 / (mk.a * 2), 12), r["value_energy"], r["gram_correlation"]
    (True, 1.0, 1.0)
    >>> r["attention_status"], r["attention_preference"]  # attention not solved
    (-1, nan)
    >>> phase_point(("overlap", 1.0, 3, 2, 2, mk.to_dict(), False))["value_gap"]
    0.0
    """
    kind, x, T, v, tau, mkd, attention = job
    g, z = phase_model(kind, x, T, v, tau)
    mk = Masking(**mkd)
    out = {}
    for name, M in (
        ("value", optimal_value_matrix(g, mk, method="closed-form").x),
        ("gram", optimal_embedding_gram(g, mk, method="closed-form").x),
    ):
        st = matrix_topic_stats(M, g, topics=z)
        out.update({f"{name}_gap": st.gap, f"{name}_correlation": st.correlation, f"{name}_energy": st.energy})
    out.update({k: math.nan for k in ATTENTION_STATISTICS}, attention_status=-1)
    if attention:
        r = optimal_attention(g, mk)
        out.update(
            attention_preference=attention_preference(r.info["S"], g, mk, topics=z),
            attention_alpha=float(r.info["alpha"]),
            attention_beta=float(r.info["beta"]),
            attention_status=int(r.status),
        )
    return out


def _validate(kind, values, T, v, taus, mk) -> tuple[np.ndarray, int, int, np.ndarray, Masking]:
    check_choice("kind", kind, KINDS)
    T = check_int("T", T, low=2, high=12)
    v = check_int("v", v, low=2, high=50)
    vals = np.asarray(values, dtype=float)
    if vals.ndim != 1 or vals.size < 1:
        raise ValueError(f"values must be a non-empty 1-d sequence, got shape {vals.shape}")
    for x in vals:
        _check_kind_x(kind, x)
    taus = np.arange(1, T + 1) if taus is None else np.asarray(taus)
    for t in np.atleast_1d(taus).tolist():
        check_int("taus[]", t, low=1, high=T)
    mk = Masking() if mk is None else mk
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    mk.require_masked_positions("phase_diagram")
    return vals, T, v, np.atleast_1d(taus).astype(np.int64), mk


def phase_diagram(kind: str, values: ArrayLike, *, T: int = 4, v: int = 3, taus: ArrayLike | None = None,
                  mk: Masking | None = None, attention: bool = True, executor: Executor | None = None,
                  client: Any = None, progress: bool = False) -> PhaseDiagram:  # fmt: skip
    """Every statistic over ``values x taus`` (default ``taus = 1..T``); SPEC §11.6.

    ``T`` in [2, 12] and ``v`` in [2, 50] (the attention optimum enumerates ``C(T, tau)`` sets of
    ``V1 x V1`` arrays per loss evaluation). ``executor``/``client`` as in
    :func:`theorycheck.analysis.landscape.asymptotic_sweep`; ``progress`` shows a tqdm bar.

    Parameters
    ----------
    kind : {"overlap", "zipf"}
        The model family: :meth:`~theorycheck.GeneralTopicModel.overlapping` (``x = eps``) or
        :meth:`~theorycheck.GeneralTopicModel.zipf` (``x = s``).
    values : array_like, shape (n_values,)
        Non-empty; each ``eps`` in ``[0, 1]`` (overlap) or ``s`` in ``[0, 50]`` (zipf).
    T : int, default 4
        Number of topics, ``2 <= T <= 12``.
    v : int, default 3
        Words per topic, ``2 <= v <= 50``.
    taus : array_like of int, optional
        Topics per document, each ``1 <= tau <= T`` (default ``1..T``).
    mk : Masking, optional
        Masking probabilities, ``p_m > 0`` (default ``Masking()``).
    attention : bool, default True
        Also compute the optimal ``alpha I_w + beta G`` scores and their preference (the costly part).
    executor : concurrent.futures.Executor, optional
        Runs the points concurrently (results identical to the serial ones).
    client : distributed.Client or str, optional
        A Dask client or scheduler address, instead of ``executor``.
    progress : bool, default False
        Show a progress bar.

    Returns
    -------
    PhaseDiagram
        The statistics at every ``(values[i], taus[j])``: the value and Gram ``gap``, ``correlation``,
        ``energy`` (:func:`matrix_topic_stats` of the exact optima, with the construction's labels) and
        the attention preference and coefficients.

    Raises
    ------
    ValueError
        An unknown ``kind``, ``values`` empty or out of range, ``T``, ``v`` or ``taus`` out of range,
        ``p_m = 0``.
    TypeError
        ``mk`` not a :class:`~theorycheck.Masking`.

    See Also
    --------
    PhaseDiagram : The returned table.
    diagram_boundaries : Where a statistic crosses a level, per ``tau``.
    find_boundary : The crossing point by bisection on the exact objects.
    matrix_topic_stats : The matrix statistics.

    References
    ----------
    SPEC §11.6 (phase diagrams; overlap by mixing: ``gap = 1/(a v)`` for every ``eps < 1``).

    Examples
    --------
    Overlapping topics keep the stage-1 gap ``1/(a v)`` for every ``eps < 1`` and lose it at
    ``eps = 1`` (identical topics); Zipfian word laws shrink it:

    >>> from theorycheck import Masking
    >>> from theorycheck.analysis import phase_diagram
    >>> d = phase_diagram("overlap", [0.0, 0.5, 0.9, 1.0], T=3, v=2, taus=[1, 2], attention=False)
    >>> np.round(d.data["value_gap"] * Masking().a * 2, 9) + 0.0
    array([[1., 1.],
           [1., 1.],
           [1., 1.],
           [0., 0.]])
    >>> z = phase_diagram("zipf", [0.0, 1.0, 2.0], T=3, v=2, taus=[2], attention=False)
    >>> np.round(z.data["value_gap"][:, 0], 6)
    array([0.578035, 0.464726, 0.277097])
    """
    vals, T, v, taus, mk = _validate(kind, values, T, v, taus, mk)
    jobs = [(kind, float(x), T, v, int(t), mk.to_dict(), bool(attention)) for x in vals for t in taus]
    rows = _map(phase_point, jobs, executor, client, f"phase[{kind}]" if progress else None)
    names = list(rows[0])
    data = {n: np.array([r[n] for r in rows], dtype=float).reshape(vals.size, taus.size) for n in names}
    return PhaseDiagram(kind, vals, taus, T, v, mk.to_dict(), data)


def _stat(kind, x, T, v, tau, mk, stat):
    attention = stat in ATTENTION_STATISTICS
    return phase_point((kind, float(x), T, v, tau, mk.to_dict(), attention))[stat]


def find_boundary(kind: str, stat: str, lo: float, hi: float, *, T: int, v: int, tau: int,
                  mk: Masking | None = None, level: float = 0.0, xtol: float = 1e-4,
                  max_iter: int = 60) -> tuple[float, tuple[float, float]]:  # fmt: skip
    """The ``x`` in ``[lo, hi]`` where ``stat - level`` changes sign, by bisection on the exact objects.

    Returns ``(x_star, (f(lo), f(hi)))`` with ``x_star`` the midpoint of the final bracket (width
    ``<= xtol``), or ``nan`` when ``f(lo)`` and ``f(hi)`` lie on the same side of ``level`` (no
    crossing detected; a crossing pair inside is not excluded). ``f(x) - level == 0`` exactly
    counts as the side of ``hi``.

    Parameters
    ----------
    kind : {"overlap", "zipf"}
        The model family (as in :func:`phase_diagram`).
    stat : str
        One of :data:`STATISTICS` (e.g. ``"value_gap"``, ``"attention_preference"``).
    lo : float
        Left end of the bracket (``eps`` in ``[0, 1]`` or ``s`` in ``[0, 50]``).
    hi : float
        Right end, ``hi > lo``.
    T : int
        Number of topics, ``2 <= T <= 12``.
    v : int
        Words per topic, ``2 <= v <= 50``.
    tau : int
        Topics per document, ``1 <= tau <= T``.
    mk : Masking, optional
        Masking probabilities, ``p_m > 0`` (default ``Masking()``).
    level : float, default 0.0
        The level the statistic crosses.
    xtol : float, default 1e-4
        Final bracket width, ``>= 1e-12``.
    max_iter : int, default 60
        Bisection steps at most, ``>= 1``.

    Returns
    -------
    x_star : float
        Midpoint of the final bracket, or NaN without a sign change between ``lo`` and ``hi``.
    ends : tuple of float
        ``(f(lo), f(hi))``, the statistic at the two ends.

    Raises
    ------
    ValueError
        An unknown ``kind`` or ``stat``, ``lo >= hi``, a parameter out of its range.

    See Also
    --------
    diagram_boundaries : Brackets the crossings on a diagram's grid, then calls this.
    phase_diagram : The statistics on a grid.

    References
    ----------
    SPEC §11.6 (crossing points located by bisection on the exact objects).

    Examples
    --------
    Where the Zipf exponent brings the stage-1 gap down to 0.4:

    >>> from theorycheck.analysis import find_boundary
    >>> x, (f_lo, f_hi) = find_boundary("zipf", "value_gap", 1.0, 2.0, T=3, v=2, tau=2, level=0.4, xtol=1e-6)
    >>> round(x, 4), round(f_lo, 6), round(f_hi, 6)
    (1.3322, 0.464726, 0.277097)
    >>> find_boundary("overlap", "value_gap", 0.0, 0.5, T=3, v=2, tau=2, level=0.4)[0]  # no crossing
    nan
    """
    check_choice("stat", stat, STATISTICS)
    lo, hi = _check_kind_x(kind, lo), _check_kind_x(kind, hi)
    if not lo < hi:
        raise ValueError(f"lo must be < hi, got lo={lo}, hi={hi}")
    xtol = check_real("xtol", xtol, low=1e-12)
    max_iter = check_int("max_iter", max_iter, low=1)
    level = check_real("level", level)
    _validate(kind, [lo, hi], T, v, [tau], mk)
    mk = Masking() if mk is None else mk
    f_lo, f_hi = (_stat(kind, x, T, v, tau, mk, stat) - level for x in (lo, hi))
    if (f_lo >= 0) == (f_hi >= 0):
        return math.nan, (f_lo + level, f_hi + level)
    a, b, fa = lo, hi, f_lo
    for _ in range(max_iter):
        if b - a <= xtol:
            break
        mid = 0.5 * (a + b)
        fm = _stat(kind, mid, T, v, tau, mk, stat) - level
        if (fm >= 0) == (fa >= 0):
            a, fa = mid, fm
        else:
            b = mid
    return 0.5 * (a + b), (f_lo + level, f_hi + level)


def diagram_boundaries(diagram: PhaseDiagram, stat: str, *, level: float = 0.0, xtol: float = 1e-3,
                       refine: bool = True) -> np.ndarray:  # fmt: skip
    """Per ``tau``: the first ``x`` where ``stat - level`` changes sign along ``values`` (NaN if none).

    The crossing is bracketed by consecutive grid points and refined by :func:`find_boundary`
    (``refine=False``: the bracket's midpoint).

    Parameters
    ----------
    diagram : PhaseDiagram
        A diagram from :func:`phase_diagram`.
    stat : str
        One of :data:`STATISTICS`.
    level : float, default 0.0
        The level the statistic crosses (``stat - level == 0`` counts as above it).
    xtol : float, default 1e-3
        Final bracket width of the refinement.
    refine : bool, default True
        Bisect on the exact objects (else: the midpoint of the grid bracket).

    Returns
    -------
    ndarray, shape (n_taus,)
        The first crossing along ``values`` for each ``tau`` (NaN where the statistic does not cross the
        level, or has a NaN on that column).

    Raises
    ------
    ValueError
        An unknown ``stat``.

    See Also
    --------
    find_boundary : The bisection.
    phase_diagram : The diagram.

    References
    ----------
    SPEC §11.6 (phase diagrams and their boundaries).

    Examples
    --------
    >>> from theorycheck.analysis import diagram_boundaries, phase_diagram
    >>> d = phase_diagram("zipf", [0.0, 1.0, 2.0], T=3, v=2, taus=[1, 2], attention=False)
    >>> diagram_boundaries(d, "value_gap", level=0.4, refine=False)  # bracket [1, 2]: its midpoint
    array([1.5, 1.5])
    >>> np.round(diagram_boundaries(d, "value_gap", level=0.4, xtol=1e-6), 4)
    array([1.3322, 1.3322])
    """
    check_choice("stat", stat, STATISTICS)
    F = diagram.data[stat] - level
    mk = Masking(**diagram.masking)
    out = np.full(diagram.taus.size, math.nan)
    for j, tau in enumerate(diagram.taus):
        side = F[:, j] >= 0
        flips = np.flatnonzero(side[1:] != side[:-1])
        if flips.size == 0 or np.isnan(F[:, j]).any():
            continue
        i = int(flips[0])
        a, b = float(diagram.values[i]), float(diagram.values[i + 1])
        if refine:
            out[j] = find_boundary(diagram.kind, stat, a, b, T=diagram.T, v=diagram.v, tau=int(tau), mk=mk,
                                   level=level, xtol=xtol)[0]  # fmt: skip
        else:
            out[j] = 0.5 * (a + b)
    return out
