"""Where the identity-``W^V`` optimum has ``beta* <= 0`` (SPEC §4.3(b), the phase diagram of §6 item 18).

With the identity ``W^V`` (diagonal on words, ``W_00 = 0``) the optimal (alpha, beta) scores of the
paper's model (:func:`theorycheck.solvers.optimal_attention` with ``value="identity"``) put no extra
weight on the other words of the query's topic (``beta* <= 0``) only when there are enough topics
outside the document. For fixed masking ``(p_m, p_c, p_r)``, ``v`` and ``tau``, the sign of ``beta*``
changes once along ``T = tau, tau + 1, ...`` (at every point of the SPEC §4.3(b) scan), so the region is
``T >= T0(p_c, p_r, v, tau)``:

- :func:`identity_beta_star`: ``beta*`` at one point (``-inf`` when the infimum is the limit
  ``beta -> -inf``, e.g. ``p_r = 0``);
- :func:`beta_boundary`: ``T0``, the smallest ``T`` in ``[tau, T_max]`` with ``beta* <= 0``, by
  bisection on the integers (``T_max + 1`` if none);
- :func:`identity_phase_diagram`: ``T0`` over a grid of ``p_c x p_r x v x tau``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from .._validate import check_int
from ..models import Masking, TopicModel
from ..solvers import optimal_attention

__all__ = ["IdentityPhase", "identity_beta_star", "beta_boundary", "identity_phase_diagram"]

#: ``beta*`` at or below this counts as ``<= 0`` (the solver's optimum is accurate to ~1e-8 in beta).
BETA_ZERO = 1e-12


class IdentityPhase(NamedTuple):
    """``T0[i, j, k, l]`` is :func:`beta_boundary` at ``p_c[i], p_r[j], v[k], tau[l]`` (masking ``p_m``)."""

    p_c: np.ndarray
    p_r: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    p_m: float
    T_max: int
    T0: np.ndarray


def identity_beta_star(T: int, v: int, tau: int, mk: Masking) -> float:
    """``beta*`` of the identity-``W^V`` optimum of the paper's model (``-inf`` for the limit ``beta -> -inf``)."""
    r = optimal_attention(TopicModel(T=T, v=v, tau=tau), mk, value="identity", options={"check_general": False})
    return -math.inf if r.info.get("beta_to_minus_inf") else float(r.beta)


def beta_boundary(v: int, tau: int, mk: Masking, *, T_max: int = 4096) -> int:
    """``T0``: the smallest ``T`` in ``[tau, T_max]`` with ``beta*(T) <= 0`` (``T_max + 1`` if none).

    Integer bisection on ``beta*(T) <= BETA_ZERO``, which assumes the sign changes once along ``T``
    (true at every point of the SPEC §4.3(b) diagram; ``attention.identity-optimum`` checks the
    drawn ``T`` of ``verify --explore`` against it). About ``log2(T_max)`` solves.
    """
    v = check_int("v", v, low=2, high=10_000)
    tau = check_int("tau", tau, low=1, high=10_000)
    T_max = check_int("T_max", T_max, low=tau, high=1_000_000)

    def nonpositive(T: int) -> bool:
        return identity_beta_star(T, v, tau, mk) <= BETA_ZERO

    if nonpositive(tau):
        return tau
    if not nonpositive(T_max):
        return T_max + 1
    lo, hi = tau, T_max  # beta*(lo) > 0 >= beta*(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if nonpositive(mid):
            hi = mid
        else:
            lo = mid
    return hi


def identity_phase_diagram(p_c: ArrayLike, p_r: ArrayLike, v: ArrayLike, tau: ArrayLike, *, p_m: float = 0.15,
                           T_max: int = 4096, progress: bool = False) -> IdentityPhase:  # fmt: skip
    """:func:`beta_boundary` over the grid ``p_c x p_r x v x tau`` (pairs with ``p_c + p_r > 1`` or
    ``p_c == p_r == 0`` are NaN); ``progress`` shows a tqdm bar."""
    pc, pr = np.atleast_1d(np.asarray(p_c, float)), np.atleast_1d(np.asarray(p_r, float))
    vs, taus = np.atleast_1d(np.asarray(v, int)), np.atleast_1d(np.asarray(tau, int))
    out = np.full((pc.size, pr.size, vs.size, taus.size), math.nan)
    cells = [(i, j, k, m) for i in range(pc.size) for j in range(pr.size) for k in range(vs.size)
             for m in range(taus.size)]  # fmt: skip
    for i, j, k, m in tqdm(cells, disable=not progress, desc="identity beta* boundary"):
        if pc[i] + pr[j] > 1 or pc[i] + pr[j] == 0:
            continue
        out[i, j, k, m] = beta_boundary(int(vs[k]), int(taus[m]), Masking(p_m, pc[i], pr[j]), T_max=T_max)
    return IdentityPhase(pc, pr, vs, taus, float(p_m), int(T_max), out)
