"""Attention loss landscapes: ``L(alpha, beta)`` and ``L(K)`` grids, asymptotic sweeps, finite N.

(SPEC §4.3, §6 items 15-19.) Everything here evaluates the closed forms of
:func:`theorycheck.population.alpha_beta_loss` (O(1) per point, vectorised) or calls the
certified solver :func:`theorycheck.solvers.optimal_attention`; the finite-document study calls
the Monte Carlo estimator :func:`theorycheck.sampling.montecarlo.mc_attention_loss` and the exact
N -> inf evaluator :func:`theorycheck.population.attention_loss`.

General topic-word matrices (SPEC §11.4): :func:`alpha_beta_grid`, :func:`landscape_data` and
:func:`finite_n_gap` also take a :class:`~theorycheck.models.GeneralTopicModel`. The family is
then ``S = alpha I_w + beta G`` (``G`` the co-topic word similarity,
:func:`theorycheck.solvers.cotopic_matrix`), each grid point the exact
:func:`theorycheck.population.attention_loss` (no closed form), the optimum
:func:`theorycheck.solvers.optimal_attention`'s family optimum; the files and the figure are those of
the symmetric landscape (one writer, one plotting function).

Sweeps take a :class:`concurrent.futures.Executor` (``executor.map`` is all that is used):
``None`` runs serially in this process; pass a ``ProcessPoolExecutor``, or a Dask
``distributed.Client`` / scheduler address (``client=``, or directly as ``executor``) to run on a
cluster (``theorycheck._dask``). Each task is a pure function of its arguments (seeds are
derived before submission), so every executor returns the serial result bit for bit.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from .._dask import resolve_executor
from .._validate import check_choice, check_int, check_loss, check_real
from ..models import GeneralTopicModel, Masking, TopicModel, check_models, require_symmetric
from ..population import attention_loss
from ..population._alpha_beta import VALUES, alpha_beta_loss, alpha_beta_loss_logK
from ..sampling import mc_attention_loss
from ..solvers import cotopic_matrix, optimal_attention, stage1_value_matrix

__all__ = [
    "LandscapeGrid",
    "alpha_beta_grid",
    "K_curve",
    "asymptotic_sweep",
    "DEFAULT_SWEEP",
    "GENERAL_N_GRID",
    "growth_configs",
    "finite_n_gap",
    "family_scores",
    "landscape_data",
]

#: (T, v, tau) rows of the SPEC §4.3 table.
DEFAULT_SWEEP = (
    (10, 10, 2),
    (10, 10, 3),
    (10, 10, 5),
    (100, 10, 3),
    (100, 10, 10),
    (1000, 10, 30),
    (1000, 50, 30),
    (10000, 10, 100),
    (100000, 10, 300),
)


#: Default grid points per axis of a general model's landscape (each point one exact attention_loss).
GENERAL_N_GRID = 31


class LandscapeGrid(NamedTuple):
    """``L[i, j] = L(alpha[i], beta[j])`` on a rectangular grid.

    Returned by :func:`alpha_beta_grid`.

    Parameters
    ----------
    alpha : ndarray, shape (n_alpha,)
        The ``alpha`` axis (same-word score).
    beta : ndarray, shape (n_beta,)
        The ``beta`` axis (same-topic score; a general model: the weight of the co-topic similarity).
    L : ndarray, shape (n_alpha, n_beta)
        The loss at each grid point.
    value : str
        The frozen value matrix, ``"block"`` or ``"identity"``.

    See Also
    --------
    alpha_beta_grid : Computes it.
    landscape_data : The grid with its certified optimum.

    References
    ----------
    SPEC §4.3 (the ``(alpha, beta)`` family and its closed-form loss).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> from theorycheck.analysis.landscape import LandscapeGrid, alpha_beta_grid
    >>> g = alpha_beta_grid(tm, mk, alpha=(-1.0, 1.0, 3), beta=(-1.0, 1.0, 5))
    >>> isinstance(g, LandscapeGrid), g.L.shape, g.value
    (True, (3, 5), 'block')
    """

    alpha: np.ndarray
    beta: np.ndarray
    L: np.ndarray
    value: str


def _axis(name, spec):
    if isinstance(spec, tuple) and len(spec) == 3:
        lo = check_real(f"{name}[0]", spec[0], low=-1e4, high=1e4)
        hi = check_real(f"{name}[1]", spec[1], low=-1e4, high=1e4)
        n = check_int(f"{name}[2]", spec[2], low=2, high=20000)
        if hi <= lo:
            raise ValueError(f"{name} must be (lo, hi, n) with lo < hi, got {spec!r}")
        return np.linspace(lo, hi, n)
    arr = np.asarray(spec, dtype=float)
    if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be (lo, hi, n) or a finite 1-d array of >= 2 points, got {spec!r}")
    return arr


def alpha_beta_grid(
    tm: TopicModel | GeneralTopicModel,
    mk: Masking,
    value: str = "block",
    *,
    alpha=(-5.0, 12.0, 201),
    beta=(-8.0, 8.0, 201),
    loss: str = "squared",
) -> LandscapeGrid:
    """Closed-form ``L(alpha, beta)`` of SPEC §4.3 on a grid (:func:`theorycheck.population.alpha_beta_loss`).

    ``alpha``/``beta``: ``(lo, hi, n)`` or arrays; ``loss``: ``"squared"`` or ``"ce"``. A general model:
    the exact loss of ``S = alpha I_w + beta G`` at every point (``general_grid``, SPEC §11.4).

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        The topic model (a general one: the exact loss per point, SPEC §11.4).
    mk : Masking
        Masking probabilities.
    value : {"block", "identity"}, default "block"
        The frozen value matrix: the stage-1 block optimum or the identity on the words.
    alpha : tuple or array_like, default (-5.0, 12.0, 201)
        ``(lo, hi, n)`` with ``-1e4 <= lo < hi <= 1e4`` and ``2 <= n <= 20000`` (``np.linspace``), or a
        finite 1-d array of ``>= 2`` points.
    beta : tuple or array_like, default (-8.0, 8.0, 201)
        As ``alpha``.
    loss : {"squared", "ce"}, default "squared"
        The loss function.

    Returns
    -------
    LandscapeGrid
        The axes and ``L[i, j] = L(alpha[i], beta[j])``.

    Raises
    ------
    ValueError
        An unknown ``value`` or ``loss``, or an axis that is not a valid ``(lo, hi, n)`` or array.

    See Also
    --------
    K_curve : The block-``W^V`` loss as a function of ``log K`` alone.
    landscape_data : The grid with the certified optimum and the figure's arguments.
    theorycheck.population.alpha_beta_loss : The closed form evaluated at each point.
    theorycheck.solvers.optimal_attention : The certified minimiser.

    References
    ----------
    SPEC §4.3 (the ``(alpha, beta)`` family), §11.4 (general topic-word matrices).

    Examples
    --------
    Uniform attention (``alpha = beta = 0``) gives the stage-1 loss ``1 - 1/(tau v)``; for ``v = 2`` the
    block loss depends on ``K = e^alpha + e^beta`` only, so the grid is symmetric:

    >>> from theorycheck import Masking, TopicModel
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> from theorycheck.analysis.landscape import alpha_beta_grid
    >>> g = alpha_beta_grid(tm, mk, alpha=(-1.0, 1.0, 3), beta=(-1.0, 1.0, 3))
    >>> round(float(g.L[1, 1]), 12), 1 - 1 / (tm.tau * tm.v)
    (0.75, 0.75)
    >>> np.round(g.L, 6)
    array([[0.780286, 0.760718, 0.740968],
           [0.760718, 0.75    , 0.738392],
           [0.740968, 0.738392, 0.735517]])
    """
    check_models(tm, mk, general=True)
    check_choice("value", value, VALUES)
    loss = check_loss(loss)
    return _grid(tm, mk, value, _axis("alpha", alpha), _axis("beta", beta), loss)


@functools.singledispatch
def _grid(tm: GeneralTopicModel, mk, value, A, B, loss) -> LandscapeGrid:
    """Generic route: the exact loss at every point (``general_grid``, SPEC §11.4)."""
    return general_grid(tm, mk, value, A, B, loss)


@_grid.register
def _(tm: TopicModel, mk, value, A, B, loss) -> LandscapeGrid:
    """The paper's model: the SPEC §4.3 closed form, vectorised over the grid."""
    L = np.asarray(alpha_beta_loss(A[:, None], B[None, :], tm, mk, value, loss=loss))
    return LandscapeGrid(A, B, L, value)


def family_scores(alpha: float, beta: float, G: np.ndarray) -> np.ndarray:
    """``S = alpha I_w + beta G`` (``I_w``: identity on the words, 0 for [MASK]), the default family of
    :func:`theorycheck.solvers.optimal_attention` for a general model (SPEC §11.4).

    Parameters
    ----------
    alpha : float
        The extra score of the same word.
    beta : float
        The weight of ``G``.
    G : ndarray, shape (V1, V1)
        A token similarity (the co-topic similarity :func:`theorycheck.solvers.cotopic_matrix`).

    Returns
    -------
    ndarray, shape (V1, V1)
        ``beta G + alpha diag(0, 1, ..., 1)`` (a new array).

    See Also
    --------
    theorycheck.solvers.cotopic_matrix : The default ``G``.
    alpha_beta_grid : The loss of this family on a grid.
    theorycheck.population.alpha_beta_score_matrix : The paper's family, ``G`` the same-topic indicator.

    References
    ----------
    SPEC §11.4 (the family for a general topic-word matrix), §4.3 (the paper's family).

    Examples
    --------
    >>> from theorycheck.analysis.landscape import family_scores
    >>> family_scores(1.0, 0.5, np.ones((3, 3)))  # [MASK] (row and column 0) gets no alpha
    array([[0.5, 0.5, 0.5],
           [0.5, 1.5, 0.5],
           [0.5, 0.5, 1.5]])
    """
    S = beta * np.asarray(G, dtype=float)
    idx = np.arange(1, S.shape[0])
    S[idx, idx] += alpha
    return S


def general_value_matrix(g, mk: Masking, value: str) -> np.ndarray:
    """Frozen ``W^V`` of a general landscape: ``"block"`` the min-norm stage-1 ``C Sigma^+`` (SPEC §11.3,
    :func:`theorycheck.solvers.stage1_value_matrix`), ``"identity"`` the identity on words (``W_00 = 0``)."""
    if value == "block":
        return stage1_value_matrix(g, mk)
    W = np.eye(g.V1)
    W[0, 0] = 0.0
    return W


def general_grid(g, mk: Masking, value: str, alpha, beta, loss: str = "squared") -> LandscapeGrid:
    """Exact ``L[i, j] = L(alpha[i] I_w + beta[j] G)`` for a general model (SPEC §11.4): ``G`` the co-topic
    similarity (:func:`theorycheck.solvers.cotopic_matrix`), ``W^V`` from :func:`general_value_matrix`,
    :func:`theorycheck.population.attention_loss` per point (Dirichlet: over one fixed sample of theta,
    seed 0, common to every point)."""
    W, G = general_value_matrix(g, mk, value), cotopic_matrix(g)
    kw = {"loss": loss} if g.prior == "uniform-tau" else {"loss": loss, "seed": 0}
    L = np.array([[attention_loss(family_scores(a, b, G), W, g, mk, **kw) for b in beta] for a in alpha])
    return LandscapeGrid(np.asarray(alpha, float), np.asarray(beta, float), L, value)


def K_curve(tm: TopicModel, mk: Masking, *, logK=(-3.0, 14.0, 2001), loss: str = "squared"):
    """Block-``W^V`` loss along ``log K`` (SPEC §4.3, ``K = e^alpha + (v - 1) e^beta``): ``(logK, L)`` arrays.

    Parameters
    ----------
    tm : TopicModel
        The paper's topic model.
    mk : Masking
        Masking probabilities.
    logK : tuple or array_like, default (-3.0, 14.0, 2001)
        ``(lo, hi, n)`` with ``-1e4 <= lo < hi <= 1e4`` and ``2 <= n <= 20000``, or a finite 1-d array of
        ``>= 2`` points.
    loss : {"squared", "ce"}, default "squared"
        The loss function.

    Returns
    -------
    logK : ndarray, shape (n,)
        The ``log K`` axis.
    L : ndarray, shape (n,)
        The loss ``L(log K)`` of the block stage-1 ``W^V``.

    Raises
    ------
    ValueError
        An unknown ``loss`` or a bad ``logK`` axis.
    TypeError
        ``tm`` is a general topic model (the message names :func:`alpha_beta_grid` instead).

    See Also
    --------
    alpha_beta_grid : The loss over both parameters.
    theorycheck.population.alpha_beta_loss_logK : The closed form evaluated here.
    theorycheck.solvers.optimal_attention : Its minimiser ``K*``.

    References
    ----------
    SPEC §4.3 (the block loss depends on ``(alpha, beta)`` only through ``K``).

    Examples
    --------
    ``log K = log v`` is uniform attention; ``(alpha, beta) = (1, 0)`` has ``K = e + 1``:

    >>> import math
    >>> from theorycheck import Masking, TopicModel
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> from theorycheck.analysis.landscape import K_curve
    >>> from theorycheck.population import alpha_beta_loss
    >>> x, L = K_curve(tm, mk, logK=np.log([2.0, math.e + 1]))
    >>> np.round(L, 9).tolist(), round(float(alpha_beta_loss(1.0, 0.0, tm, mk)), 9)
    ([0.75, 0.738391627], 0.738391627)
    """
    require_symmetric(tm, "K_curve", "analysis.landscape.alpha_beta_grid(g, mk) or solvers.optimal_attention(g, mk)")
    loss = check_loss(loss)
    x = _axis("logK", logK)
    return x, np.asarray(alpha_beta_loss_logK(x, tm, mk, loss=loss))


def growth_configs(*, v: int = 10, T_max: int = 100000, ratio: int = 10):
    """Configurations with T growing geometrically to ``T_max`` and ``tau = max(2, T // ratio)``,
    plus ``tau = round(sqrt(T))`` (so both fixed and growing ``T / tau`` are covered).

    Parameters
    ----------
    v : int, default 10
        Words per topic of every configuration.
    T_max : int, T_max >= 10, default 100000
        The largest ``T``; ``T`` runs over ``round(10^e)`` for ``e = 1, 1.5, ..., log10(T_max)``.
    ratio : int, default 10
        ``T / tau`` of the first family.

    Returns
    -------
    tuple of (int, int, int)
        The ``(T, v, tau)`` configurations, duplicates removed, in order.

    Raises
    ------
    ValueError
        ``T_max < 10``.

    See Also
    --------
    asymptotic_sweep : Solves each configuration.
    DEFAULT_SWEEP : The SPEC §4.3 table's configurations.

    References
    ----------
    SPEC §4.3 (asymptotics of the optimum), §6 items 15-19.

    Examples
    --------
    >>> from theorycheck.analysis.landscape import growth_configs
    >>> growth_configs(T_max=100)  # (T, v, T // 10) and (T, v, round(sqrt(T))), at least 2
    ((10, 10, 2), (10, 10, 3), (32, 10, 3), (32, 10, 6), (100, 10, 10))
    """
    T_max = check_int("T_max", T_max, low=10)
    Ts = sorted({int(round(10**e)) for e in np.arange(1.0, math.log10(T_max) + 1e-9, 0.5)})
    out = []
    for T in Ts:
        out.append((T, v, max(2, T // ratio)))
        out.append((T, v, max(2, int(round(math.sqrt(T))))))
    return tuple(dict.fromkeys(out))


def _sweep_one(job):
    (T, v, tau), mkd, value = job
    tm = TopicModel(T=T, v=v, tau=tau)
    mk = Masking(**mkd)
    r = optimal_attention(tm, mk, value=value, options={"check_general": False})
    return dict(
        T=T,
        v=v,
        tau=tau,
        value=value,
        status=r.status,
        alpha=r.alpha,
        beta=r.beta,
        K=r.K,
        K_over_v=r.K / v,
        K_over_vtau=r.K / (v * tau),
        loss=r.loss,
        loss_uniform=r.loss_uniform,
        gap_to_uniform=r.gap_to_uniform,
        attention_ratio=r.attention_ratio,
        same_word_weight=r.same_word_weight,
        same_topic_weight=r.same_topic_weight,
        beta_to_minus_inf=bool(r.info.get("beta_to_minus_inf", False)),
    )


def asymptotic_sweep(
    configs=DEFAULT_SWEEP,
    mk: Masking | None = None,
    *,
    value: str = "block",
    executor=None,
    client=None,
    progress: bool = False,
) -> list[dict]:
    """Certified optimum for each ``(T, v, tau)`` in ``configs``; one dict per configuration.

    Keys: ``T, v, tau, status, alpha, beta, K, K_over_v, K_over_vtau, loss, loss_uniform,
    gap_to_uniform, attention_ratio, same_word_weight, same_topic_weight, beta_to_minus_inf``.
    ``executor``: any ``concurrent.futures.Executor`` (``None``: serial); ``client``: a
    ``distributed.Client`` or a scheduler address (``theorycheck._dask.resolve_executor``).

    Parameters
    ----------
    configs : sequence of (int, int, int), default DEFAULT_SWEEP
        ``(T, v, tau)`` triples, each a valid :class:`~theorycheck.models.TopicModel` (``1 <= tau <= T``).
    mk : Masking, optional
        Masking probabilities; default ``Masking()``.
    value : {"block", "identity"}, default "block"
        The frozen value matrix.
    executor : concurrent.futures.Executor, optional
        Runs the tasks with ``executor.map``; default ``None``: serially in this process.
    client : distributed.Client or str, optional
        A Dask client or scheduler address instead of ``executor`` (``theorycheck._dask``).
    progress : bool, default False
        Show a progress bar.

    Returns
    -------
    list of dict
        One record per configuration, in order, with the keys above (``K_over_v = K / v``,
        ``K_over_vtau = K / (v tau)``).

    Raises
    ------
    ValueError
        An unknown ``value``, or a configuration that is not a valid ``(T, v, tau)`` (checked before
        any work).
    TypeError
        ``mk`` is not a :class:`~theorycheck.models.Masking`.

    See Also
    --------
    growth_configs : Configurations growing to large ``T``.
    theorycheck.solvers.optimal_attention : The certified optimum of each configuration.
    landscape_data : The whole landscape of one configuration.

    References
    ----------
    SPEC §4.3 (the asymptotic table), §6 items 15-19.

    Examples
    --------
    >>> from theorycheck.analysis.landscape import asymptotic_sweep
    >>> rows = asymptotic_sweep([(3, 2, 2), (4, 2, 2)])
    >>> [(r["T"], r["status"], round(r["K_over_v"], 6), r["loss"] < r["loss_uniform"]) for r in rows]
    [(3, 0, 3.431267, True), (4, 0, 4.050603, True)]
    """
    check_choice("value", value, VALUES)
    mk = Masking() if mk is None else mk
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    jobs = []
    for c in configs:
        if len(c) != 3:
            raise ValueError(f"configs entries must be (T, v, tau), got {c!r}")
        TopicModel(T=c[0], v=c[1], tau=c[2])  # validate before any work
        jobs.append(((int(c[0]), int(c[1]), int(c[2])), mk.to_dict(), value))
    return _map(_sweep_one, jobs, executor, client, f"sweep[{value}]" if progress else None)


def _map(fn, jobs, executor, client, desc) -> list:
    """``[fn(j) for j in jobs]`` in order, on ``executor``/``client`` (serial if both are ``None``);
    a progress bar named ``desc`` unless it is ``None``."""
    with resolve_executor(executor, client) as ex:
        it = map(fn, jobs) if ex is None else ex.map(fn, jobs)
        if desc is not None:
            it = tqdm(it, total=len(jobs), desc=desc)
        return list(it)


def _gap_one(job):
    S, W, tmd, mkd, N, n_docs, seed, mask_keys = job
    tm = GeneralTopicModel.from_dict(tmd) if "phi" in tmd else TopicModel(**tmd)
    mk = Masking(**mkd)
    est = mc_attention_loss(S, W, tm, mk, N=N, n_docs=n_docs, seed=seed, mask_keys=mask_keys)
    return est.mean, est.stderr


def finite_n_gap(
    S,
    W,
    tm: TopicModel | GeneralTopicModel,
    mk: Masking,
    Ns,
    *,
    n_docs: int = 4000,
    seed: int = 0,
    mask_keys: bool = False,
    executor=None,
    client=None,
    progress: bool = False,
) -> dict:
    """Monte Carlo loss at finite document length N versus the exact N -> inf loss.

    Returns a dict with arrays ``N``, ``mc`` (mean), ``stderr``, ``gap = mc - exact`` and the
    scalar ``exact`` (:func:`theorycheck.population.attention_loss`). Each N uses an
    independent child seed of ``seed``. The gap is expected to be ``O(1/N)`` (the query's own
    token among the keys, the fluctuation of the empirical context around ``m_S``, and the
    conditioning on at least one selected position). ``executor``/``client`` as in
    :func:`asymptotic_sweep`. A general model (SPEC §11.4): the exact loss of the general path
    (Dirichlet: over sampled theta, seed ``seed``) and documents from its ``phi``.

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Attention scores.
    W : array_like, shape (V1, V1)
        The value matrix ``W^V``.
    tm : TopicModel or GeneralTopicModel
        The topic model.
    mk : Masking
        Masking probabilities.
    Ns : sequence of int
        Document lengths, each ``>= 2``.
    n_docs : int, default 4000
        Monte Carlo documents per length, ``>= 2``.
    seed : int, default 0
        Root seed (each ``N`` gets a child seed).
    mask_keys : bool, default False
        Official-code key masking.
    executor : concurrent.futures.Executor, optional
        Runs the tasks with ``executor.map``; default ``None``: serially in this process.
    client : distributed.Client or str, optional
        A Dask client or scheduler address instead of ``executor`` (``theorycheck._dask``).
    progress : bool, default False
        Show a progress bar.

    Returns
    -------
    dict
        ``N``, ``mc``, ``stderr`` and ``gap = mc - exact`` (arrays over ``Ns``) and the scalar ``exact``.

    Raises
    ------
    ValueError
        An ``N < 2``, ``n_docs < 2``, or arguments the loss evaluators reject.

    See Also
    --------
    theorycheck.sampling.mc_attention_loss : The Monte Carlo estimator at each ``N``.
    theorycheck.population.attention_loss : The exact ``N -> inf`` loss.
    theorycheck.analysis.stats.power_law_fit : Fits the ``O(1/N)`` decay of the gap.

    References
    ----------
    SPEC §1.1 (the population loss as the ``N -> inf`` limit), §4.3, §11.4.

    Examples
    --------
    The gap shrinks with ``N`` (here roughly as ``1/N``):

    >>> from theorycheck import Masking, TopicModel
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> from theorycheck.analysis.landscape import finite_n_gap
    >>> from theorycheck.population import alpha_beta_score_matrix, alpha_beta_value_matrix, attention_loss
    >>> S, W = alpha_beta_score_matrix(1.0, 0.0, tm), alpha_beta_value_matrix(tm, mk)
    >>> d = finite_n_gap(S, W, tm, mk, [4, 16, 64], n_docs=2000)
    >>> d["N"], round(d["exact"], 12) == round(attention_loss(S, W, tm, mk), 12)
    (array([ 4, 16, 64]), True)
    >>> bool(np.all(np.diff(np.abs(d["gap"])) < 0)), bool(np.all(d["stderr"] > 0))
    (True, True)
    """
    check_models(tm, mk, general=True)
    Ns = [check_int("N", n, low=2) for n in Ns]
    n_docs = check_int("n_docs", n_docs, low=2)
    exact = _exact_loss(tm, S, W, mk, mask_keys, seed)
    seeds = np.random.SeedSequence(seed).spawn(len(Ns))
    S = np.asarray(S, float)
    W = np.asarray(W, float)
    jobs = [
        (S, W, tm.to_dict(), mk.to_dict(), N, n_docs, int(s.generate_state(1)[0]), mask_keys) for N, s in zip(Ns, seeds)
    ]
    res = _map(_gap_one, jobs, executor, client, "finite N" if progress else None)
    mc = np.array([r[0] for r in res])
    se = np.array([r[1] for r in res])
    return dict(N=np.array(Ns), mc=mc, stderr=se, gap=mc - exact, exact=exact)


@functools.singledispatch
def _exact_loss(tm: GeneralTopicModel, S, W, mk, mask_keys, seed) -> float:
    """The N -> inf loss of :func:`finite_n_gap`: the general path (Dirichlet: over theta sampled with ``seed``)."""
    kw = {"seed": seed} if tm.prior == "dirichlet" else {}
    return attention_loss(S, W, tm, mk, mask_keys=mask_keys, **kw)


@_exact_loss.register
def _(tm: TopicModel, S, W, mk, mask_keys, seed) -> float:
    """The paper's model: exact for either prior (no sampling)."""
    return attention_loss(S, W, tm, mk, mask_keys=mask_keys)


def landscape_data(
    tm: TopicModel | GeneralTopicModel,
    mk: Masking,
    *,
    value: str = "block",
    n_grid: int | None = None,
    alpha=None,
    beta=None,
    loss: str = "squared",
) -> tuple[dict, dict, dict]:
    """The exact landscape ``L(alpha, beta)`` and its certified optimum: ``(arrays, figure arguments, optimum)``.

    ``L(alpha, beta)`` and ``L(K)`` are the SPEC §4.3 closed forms; the optimum is the certified
    :func:`theorycheck.solvers.optimal_attention`. ``n_grid`` points per axis (default 201; for a
    general model, whose points are exact evaluations, :data:`GENERAL_N_GRID`). ``arrays`` holds
    alpha, beta, L and, for block W^V, the log K curve (``logK``, ``L_K``).

    A general model (SPEC §11.4; ``_general_landscape``): ``arrays`` holds alpha, beta, L and
    ``G``; the optimum record the grid argmin (``alpha, beta, loss``), ``loss_uniform``,
    ``at_boundary`` (grid argmin on the grid's edge) and the solver's family optimum under
    ``solver``. The files are written by ``theorycheck.report.landscape.write_landscape``.

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        The topic model.
    mk : Masking
        Masking probabilities.
    value : {"block", "identity"}, default "block"
        The frozen value matrix.
    n_grid : int, optional
        Points per axis, ``2 <= n_grid <= 5000`` (default 201; a general model :data:`GENERAL_N_GRID`).
    alpha : tuple or array_like, optional
        The ``alpha`` axis as in :func:`alpha_beta_grid`; default ``(-5, 12)`` widened to hold the optimum.
    beta : tuple or array_like, optional
        The ``beta`` axis; default ``(-8, 8)`` (a general model: widened to hold the optimum).
    loss : {"squared", "ce"}, default "squared"
        The loss function.

    Returns
    -------
    arrays : dict
        ``alpha``, ``beta``, ``L`` (and ``logK``, ``L_K`` for block ``W^V``; ``G`` for a general model).
    figure : dict
        The keyword arguments of the landscape figure.
    optimum : dict
        The certified optimum's record (``alpha``, ``beta``, ``K``, ``loss``, ``loss_uniform``,
        ``status``, the models, ...).

    Raises
    ------
    ValueError
        ``n_grid`` out of range, or a bad ``value``, ``loss`` or axis.

    See Also
    --------
    alpha_beta_grid : The grid alone.
    K_curve : The ``log K`` curve.
    theorycheck.solvers.optimal_attention : The certified optimum.

    References
    ----------
    SPEC §4.3 (the landscape), §11.4 (general topic-word matrices).

    Examples
    --------
    No grid point is below the certified optimum:

    >>> from theorycheck import Masking, TopicModel
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> from theorycheck.analysis.landscape import landscape_data
    >>> arrays, figure, optimum = landscape_data(tm, mk, n_grid=11)
    >>> arrays["L"].shape, optimum["status"], round(optimum["K"], 6)
    ((11, 11), 0, 6.862533)
    >>> bool(arrays["L"].min() >= optimum["loss"]), optimum["loss"] < optimum["loss_uniform"]
    (True, True)
    """
    check_models(tm, mk, general=True)
    build, default_n_grid = _landscape_route(tm)
    n_grid = check_int("n_grid", default_n_grid if n_grid is None else n_grid, low=2, high=5000)
    return build(tm, mk, value, n_grid, alpha, beta, loss)


def is_general_landscape(tm) -> bool:
    """Whether :func:`landscape_data` takes the general-model route for ``tm`` (exact points, no sweep)."""
    return _landscape_route(tm)[0] is _general_landscape


def _grid_axes(a0, b0, n_grid, alpha, beta):
    """Default axes: alpha over (-5, 12), beta over (-8, 8), widened to hold the optimum ``(a0, b0)``."""
    a0 = a0 if math.isfinite(a0) else 0.0
    b0 = b0 if math.isfinite(b0) else 0.0
    alpha = alpha or (min(-5.0, a0 - 5.0), max(12.0, a0 + 5.0), n_grid)
    beta = beta or (min(-8.0, b0 - 4.0), max(8.0, b0 + 4.0), n_grid)
    return alpha, beta


def _symmetric_landscape(tm, mk, value, n_grid, alpha, beta, loss):
    """Arrays, figure arguments and optimum record of the paper's model (SPEC §4.3 closed forms)."""
    opt = optimal_attention(tm, mk, value=value, loss=loss)
    alpha = alpha or _grid_axes(opt.alpha, 0.0, n_grid, None, None)[0]
    beta = beta or (-8.0, 8.0, n_grid)
    g = alpha_beta_grid(tm, mk, value, alpha=alpha, beta=beta, loss=loss)
    lk, Lk = K_curve(
        tm, mk, logK=(-3.0, max(14.0, math.log(opt.K) + 4.0) if math.isfinite(opt.K) else 14.0, 2001), loss=loss
    )
    block = value == "block"
    info = dict(opt.info)
    info.update(
        status=opt.status,
        message=opt.message,
        residuals=opt.residuals,
        method=opt.method,
        tm=tm.to_dict(),
        mk=mk.to_dict(),
        value=value,
        loss_function=loss,
    )
    arrays = dict(alpha=g.alpha, beta=g.beta, L=g.L, **(dict(logK=lk, L_K=Lk) if block else {}))
    fig_kw = dict(
        alpha=g.alpha,
        beta=g.beta,
        L=g.L,
        optimum=(opt.alpha, opt.beta),
        value=value,
        logK=lk if block else None,
        L_K=Lk if block else None,
        K_star=opt.K if block else None,
        title=f"T={tm.T}, v={tm.v}, tau={tm.tau}, W^V={value}, loss={loss}",
    )
    return arrays, fig_kw, info


def _general_landscape(g, mk, value, n_grid, alpha, beta, loss):
    """Arrays, figure arguments and optimum record of a general model (SPEC §11.4; :func:`landscape_data`)."""
    res = optimal_attention(g, mk, value="stage1" if value == "block" else value, loss=loss)
    sol = {"alpha": float(res.x[0]), "beta": float(res.x[1]), "loss": float(res.fun), "status": int(res.status)}
    alpha, beta = _grid_axes(sol["alpha"], sol["beta"], n_grid, alpha, beta)
    grid = alpha_beta_grid(g, mk, value, alpha=alpha, beta=beta, loss=loss)
    i, j = np.unravel_index(int(np.nanargmin(grid.L)), grid.L.shape)
    info = {
        "model": {
            "general": True,
            "T": g.T,
            "n_words": g.n_words,
            "prior": g.prior,
            "tau": g.tau,
            "alpha": None if g.alpha is None else g.alpha.tolist(),
        },  # fmt: skip
        "masking": mk.to_dict(),
        "family": "S = alpha I_w + beta G, G = co-topic cosine similarity of words (SPEC §11.4)",
        "value": value,
        "loss_kind": loss,
        "alpha": float(grid.alpha[i]),
        "beta": float(grid.beta[j]),
        "loss": float(grid.L[i, j]),
        "loss_uniform": float(res.info["loss_uniform"]),
        "at_boundary": bool(i in (0, grid.L.shape[0] - 1) or j in (0, grid.L.shape[1] - 1)),
        "n_grid": int(max(grid.L.shape)),
        "solver": sol,
        "status": sol["status"],
        "same_topic_preferred": bool(sol["beta"] > 0),
    }
    arrays = dict(alpha=grid.alpha, beta=grid.beta, L=grid.L, G=cotopic_matrix(g))
    law = f"tau={g.tau}" if g.prior == "uniform-tau" else "Dirichlet"
    fig_kw = dict(
        alpha=grid.alpha,
        beta=grid.beta,
        L=grid.L,
        optimum=(sol["alpha"], sol["beta"]),
        value=value,
        title=f"general phi: T={g.T}, n_words={g.n_words}, {law}, W^V={value}, loss={loss}\nS = alpha I + beta G",
        xlabel="beta (co-topic similarity G)",
    )
    return arrays, fig_kw, info


@functools.singledispatch
def _landscape_route(tm: GeneralTopicModel):
    """``(builder, default points per axis)`` of :func:`landscape_data`: exact evaluations per point."""
    return _general_landscape, GENERAL_N_GRID


@_landscape_route.register
def _(tm: TopicModel):
    """The paper's model: the SPEC §4.3 closed forms (and the log K curve)."""
    return _symmetric_landscape, 201
