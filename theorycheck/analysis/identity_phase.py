"""Where the identity-``W^V`` optimum has ``beta* <= 0`` (SPEC §4.3(b), the phase diagram of §6 item 18).

With the identity ``W^V`` (diagonal on words, ``W_00 = 0``) the optimal (alpha, beta) scores of the
paper's model put no extra weight on the other words of the query's topic (``beta* <= 0``) only when there are
enough topics outside the document. Every ``beta*`` here is the **certified** one
(:func:`theorycheck.solvers.attention.certified_beta_star`: the whole-domain interval certificate, then Krawczyk's
test for the unique critical point, or a monotonicity proof for the limit ``beta -> -inf``; issue 36 item 4), never
the float solver's: that one reported ``beta* = -inf`` at ``T = 14, v = 10, tau = 5, p = 0.15/0.2/0.05``, where the
optimum is finite (``beta* = -2.1998``, 1.1e-7 below the limit).

- :func:`identity_beta`: the certified :class:`~theorycheck.solvers.attention.BetaStar` at one point (cached);
- :func:`identity_beta_star`: its value (``-inf`` for the limits, NaN when not decided);
- :func:`beta_nonpositive`: ``beta* <= BETA_ZERO``, from the certified enclosure (``ArithmeticError`` when the
  enclosure straddles ``BETA_ZERO``);
- :func:`beta_boundary`: ``T0``, the smallest ``T >= tau`` with ``beta* <= 0``, by a **consecutive** scan
  ``T = tau, tau + 1, ...`` that continues ``confirm`` values past ``T0`` (a second sign change there raises);
- :func:`identity_phase_diagram`: ``T0`` over a grid of ``p_c x p_r x v x tau``.

Resolution. The certified enclosure of a finite ``beta*`` is about 1e-12 wide; ``BETA_ZERO = 1e-9`` is the
threshold the comparisons use (``beta* <= BETA_ZERO`` counts as ``<= 0``): a thousand times the enclosure, so a
decision is never made on rounding, and far below every ``|beta*|`` met in the SPEC's scans (the smallest,
``+1.8e-4``).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from .._validate import check_int
from ..models import Masking, TopicModel
from ..solvers.attention import BetaStar, certified_beta_star

__all__ = [
    "IdentityPhase",
    "BETA_ZERO",
    "identity_beta",
    "identity_beta_star",
    "beta_nonpositive",
    "beta_boundary",
    "identity_phase_diagram",
]

#: ``beta*`` at or below this counts as ``<= 0`` (the certified enclosure is ~1e-12 wide; module docstring).
BETA_ZERO = 1e-9


class IdentityPhase(NamedTuple):
    """``T0[i, j, k, l]`` is :func:`beta_boundary` at ``p_c[i], p_r[j], v[k], tau[l]`` (masking ``p_m``)."""

    p_c: np.ndarray
    p_r: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    p_m: float
    T_max: int
    T0: np.ndarray


@functools.lru_cache(maxsize=4096)
def identity_beta(T: int, v: int, tau: int, mk: Masking) -> BetaStar:
    """The certified ``beta*`` of the identity-``W^V`` optimum of the paper's model (SPEC §4.3(b); cached)."""
    return certified_beta_star(TopicModel(T=T, v=v, tau=tau), mk)


def identity_beta_star(T: int, v: int, tau: int, mk: Masking) -> float:
    """``beta*`` (certified): the enclosure's midpoint, ``-+inf`` for the limits ``beta -> -+inf`` (``-inf`` also,
    by convention, for ``alpha -> +inf``, where ``beta`` has no effect), NaN when the certificate does not decide
    it."""
    return identity_beta(T, v, tau, mk).beta


def beta_nonpositive(T: int, v: int, tau: int, mk: Masking) -> bool:
    """``beta* <= BETA_ZERO``, decided by the certified enclosure (a limit counts as ``-inf``); ``ArithmeticError``
    when the certificate does not decide it."""
    b = identity_beta(T, v, tau, mk)
    if b.kind in ("minus-infinity", "alpha-infinity"):
        return True
    if b.kind == "plus-infinity":
        return False
    if b.kind == "finite" and b.upper <= BETA_ZERO:
        return True
    if b.kind == "finite" and b.lower > BETA_ZERO:
        return False
    if b.kind == "sign only" and b.sign != 0:
        return b.sign < 0
    raise ArithmeticError(f"the sign of beta* at T={T}, v={v}, tau={tau}, {mk} is not decided by the certified "
                          f"route ({b.kind}: {b.proof}; enclosure [{b.lower!r}, {b.upper!r}])")  # fmt: skip


@functools.lru_cache(maxsize=1024)
def beta_boundary(v: int, tau: int, mk: Masking, *, T_max: int = 4096, confirm: int = 3) -> int:
    """``T0``: the smallest ``T`` in ``[tau, T_max]`` with ``beta*(T) <= 0`` (``T_max + 1`` if none), by a
    consecutive scan of ``T = tau, tau + 1, ...`` on the certified route (:func:`beta_nonpositive`).

    The scan goes on ``confirm`` values past ``T0`` (within ``T_max``) and raises ``ArithmeticError`` if ``beta*``
    turns positive again there (a second sign change: the region would not be ``T >= T0``). Cached; each ``T`` is
    one certified solve (about half a second).
    """
    v = check_int("v", v, low=2, high=10_000)
    tau = check_int("tau", tau, low=1, high=10_000)
    T_max = check_int("T_max", T_max, low=tau, high=1_000_000)
    confirm = check_int("confirm", confirm, low=0, high=1000)
    T0 = next((T for T in range(tau, T_max + 1) if beta_nonpositive(T, v, tau, mk)), T_max + 1)
    for T in range(T0 + 1, min(T0 + confirm, T_max) + 1):
        if not beta_nonpositive(T, v, tau, mk):
            raise ArithmeticError(f"beta* changes sign twice along T (v={v}, tau={tau}, {mk}): <= 0 at T0={T0}, "
                                  f"> 0 again at T={T}")  # fmt: skip
    return T0


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
