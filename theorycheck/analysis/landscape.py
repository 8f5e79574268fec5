"""Attention loss landscapes: ``L(alpha, beta)`` and ``L(K)`` grids, asymptotic sweeps, finite N.

(SPEC §4.3, §6 items 15-19.) Everything here evaluates the closed forms of
:func:`theorycheck.population.alpha_beta_loss` (O(1) per point, vectorised) or calls the
certified solver :func:`theorycheck.solvers.optimal_attention`; the finite-document study calls
the Monte Carlo estimator :func:`theorycheck.montecarlo.mc_attention_loss` and the exact
N -> inf evaluator :func:`theorycheck.population.attention_loss`.

Sweeps take a :class:`concurrent.futures.Executor` (``executor.map`` is all that is used):
``None`` runs serially in this process; pass a ``ProcessPoolExecutor``, or a Dask
``distributed.Client`` / scheduler address (``client=``, or directly as ``executor``) to run on a
cluster (:mod:`theorycheck._dask`). Each task is a pure function of its arguments (seeds are
derived before submission), so every executor returns the serial result bit for bit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._validate import check_choice, check_int, check_loss, check_real
from ..config import Masking, TopicModel
from ..population._alpha_beta import VALUES, alpha_beta_loss, alpha_beta_loss_logK

__all__ = [
    "LandscapeGrid",
    "alpha_beta_grid",
    "K_curve",
    "asymptotic_sweep",
    "DEFAULT_SWEEP",
    "growth_configs",
    "finite_n_gap",
    "write_landscape",
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


class LandscapeGrid(NamedTuple):
    """``L[i, j] = L(alpha[i], beta[j])`` on a rectangular grid."""

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
    tm: TopicModel,
    mk: Masking,
    value: str = "block",
    *,
    alpha=(-5.0, 12.0, 201),
    beta=(-8.0, 8.0, 201),
    loss: str = "squared",
) -> LandscapeGrid:
    """Closed-form ``L(alpha, beta)`` of SPEC §4.3 on a grid (:func:`theorycheck.population.alpha_beta_loss`).

    ``alpha``/``beta``: ``(lo, hi, n)`` or arrays; ``loss``: ``"squared"`` or ``"ce"``.
    """
    check_choice("value", value, VALUES)
    loss = check_loss(loss)
    A = _axis("alpha", alpha)
    B = _axis("beta", beta)
    L = np.asarray(alpha_beta_loss(A[:, None], B[None, :], tm, mk, value, loss=loss))
    return LandscapeGrid(A, B, L, value)


def K_curve(tm: TopicModel, mk: Masking, *, logK=(-3.0, 14.0, 2001), loss: str = "squared"):
    """Block-``W^V`` loss along ``log K`` (SPEC §4.3, ``K = e^alpha + (v - 1) e^beta``): ``(logK, L)`` arrays."""
    loss = check_loss(loss)
    x = _axis("logK", logK)
    return x, np.asarray(alpha_beta_loss_logK(x, tm, mk, loss=loss))


def growth_configs(*, v: int = 10, T_max: int = 100000, ratio: int = 10):
    """Configurations with T growing geometrically to ``T_max`` and ``tau = max(2, T // ratio)``,
    plus ``tau = round(sqrt(T))`` (so both fixed and growing ``T / tau`` are covered)."""
    T_max = check_int("T_max", T_max, low=10)
    Ts = sorted({int(round(10**e)) for e in np.arange(1.0, math.log10(T_max) + 1e-9, 0.5)})
    out = []
    for T in Ts:
        out.append((T, v, max(2, T // ratio)))
        out.append((T, v, max(2, int(round(math.sqrt(T))))))
    return tuple(dict.fromkeys(out))


def _sweep_one(job):
    from ..solvers._attention import optimal_attention

    (T, v, tau), mkd, value = job
    tm = TopicModel(T=T, v=v, tau=tau)
    mk = Masking(**mkd)
    r = optimal_attention(tm, mk, value=value, check_general=False)
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
    ``distributed.Client`` or a scheduler address (:func:`theorycheck._dask.resolve_executor`).
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
    from .._dask import resolve_executor

    with resolve_executor(executor, client) as ex:
        it = map(fn, jobs) if ex is None else ex.map(fn, jobs)
        if desc is not None:
            from tqdm.auto import tqdm

            it = tqdm(it, total=len(jobs), desc=desc)
        return list(it)


def _gap_one(job):
    from ..montecarlo import mc_attention_loss

    S, W, tmd, mkd, N, n_docs, seed, mask_keys = job
    tm, mk = TopicModel(**tmd), Masking(**mkd)
    est = mc_attention_loss(S, W, tm, mk, N=N, n_docs=n_docs, seed=seed, mask_keys=mask_keys)
    return est.mean, est.stderr


def finite_n_gap(
    S,
    W,
    tm: TopicModel,
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
    :func:`asymptotic_sweep`.
    """
    from ..population._attention_loss import attention_loss

    Ns = [check_int("N", n, low=2) for n in Ns]
    n_docs = check_int("n_docs", n_docs, low=2)
    exact = attention_loss(S, W, tm, mk, mask_keys=mask_keys)
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


def write_landscape(
    tm: TopicModel,
    mk: Masking,
    out,
    *,
    value: str = "block",
    n_grid: int = 201,
    alpha=None,
    beta=None,
    loss: str = "squared",
    force: bool = False,
    command: str = "theorycheck landscape",
    sweep: list | None = None,
) -> dict:
    """Write ``grid.npz`` (alpha, beta, L, and for block W^V the log K curve), ``landscape.png`` and ``optimum.json``.

    ``sweep``: rows of :func:`asymptotic_sweep`, written as ``sweep.json`` (``{"rows": [...]}``).

    ``L(alpha, beta)`` and ``L(K)`` are the SPEC §4.3 closed forms; the optimum is the certified
    :func:`theorycheck.solvers.optimal_attention`. The folder ``out`` is written atomically and
    replaced only if it is new, empty or theorycheck's own (``force``: written into, other files
    kept; :func:`theorycheck._io.atomic_directory`). ``optimum.json`` follows the package JSON
    policy (non-finite -> ``null``). Returns the optimum dict.
    """
    from .._io import atomic_directory, prepare_output_dir, write_json
    from ..report import plots
    from ..solvers._attention import optimal_attention

    n_grid = check_int("n_grid", n_grid, low=2, high=5000)
    prepare_output_dir(out, force=force)  # before any work
    opt = optimal_attention(tm, mk, value=value, loss=loss)
    a0 = opt.alpha if math.isfinite(opt.alpha) else 0.0
    alpha = alpha or (min(-5.0, a0 - 5.0), max(12.0, a0 + 5.0), n_grid)
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
    with atomic_directory(out, force=force, command=command) as tmp:
        np.savez(tmp / "grid.npz", alpha=g.alpha, beta=g.beta, L=g.L, **(dict(logK=lk, L_K=Lk) if block else {}))
        fig = plots.attention_landscape(
            g.alpha,
            g.beta,
            g.L,
            optimum=(opt.alpha, opt.beta),
            value=value,
            logK=lk if block else None,
            L_K=Lk if block else None,
            K_star=opt.K if block else None,
            title=f"T={tm.T}, v={tm.v}, tau={tm.tau}, W^V={value}, loss={loss}",
        )
        fig.savefig(tmp / "landscape.png", dpi=110, format="png")
        write_json(tmp / "optimum.json", info, sort_keys=True)
        if sweep is not None:
            write_json(tmp / "sweep.json", {"value": value, "mk": mk.to_dict(), "rows": list(sweep)}, sort_keys=True)
    return info
