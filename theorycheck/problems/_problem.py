"""The :class:`Problem` contract and its :class:`Certificate` (SPEC §4.0-§4.3).

A problem is ``min f(x)`` over an array ``x`` of a fixed ``shape`` (plus, for the Gram SDP, the
constraint ``x`` symmetric positive semidefinite). Every problem knows

- ``f(x)``, ``grad(x)`` (same shape as ``x``) and, where natural, ``hvp(x, v)``;
- a documented, seeded starting point ``start(seed)`` (``x0 = start(0)``);
- its optimal value with a :class:`Certificate` ``lower <= f* <= upper`` (``f_star`` is ``upper``,
  the value of a feasible point, so ``suboptimality(x) >= -gap`` up to rounding);
- where the minimiser is unique up to a known null space, the identifiable part of the minimiser
  (:meth:`Problem.identifiable`) and :meth:`Problem.distance` to it.

The optimum is computed lazily (the first time ``certificate`` / ``minimiser`` is read), without the
library solvers' progress bars, and cached on the instance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._progress import quiet

__all__ = ["Certificate", "Problem", "project_psd", "project_capped_simplex"]


@dataclass(frozen=True)
class Certificate:
    """``lower <= f* <= upper``, and how that is known.

    ``kind`` is ``"certified"`` (both bounds proven: the interval encloses the exact optimum, by exact rational
    arithmetic rounded outward or by outward-rounded interval arithmetic, never a float used as both ends),
    ``"numerical"`` (a bound rests on an estimated constant or a float evaluation) or
    ``"upper-bound"`` (only ``upper`` is a value the problem attains; ``lower`` is a trivial bound,
    and a solver may legitimately reach ``f(x) < upper``: negative suboptimality).
    ``gap = upper - lower``; ``to_dict()`` gives the five fields as a dict.

    Parameters
    ----------
    method : str
        How the bounds were obtained (e.g. exact rationals, interval branch and bound, a duality gap).
    lower : float
        Lower bound on the optimal value ``f*``.
    upper : float
        Upper bound on ``f*``: the value of a feasible point (``Problem.f_star``).
    kind : {"certified", "numerical", "upper-bound"}, default "certified"
        How far the bounds are proven (above).

    See Also
    --------
    Problem : Every problem carries one (``Problem.certificate``).
    get : Builds a problem.
    theorycheck.solvers.SolveResult : The solvers' own certificates (``SolveResult.certificate``).

    References
    ----------
    SPEC §7 (how the certified numbers are produced: exact rationals, interval arithmetic).

    Examples
    --------
    >>> from theorycheck import problems
    >>> cert = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2).certificate
    >>> cert.kind, cert.lower, cert.upper, cert.gap  # exact optimum 1 - 1/(tau v)
    ('certified', 0.875, 0.875, 0.0)
    >>> problems.Certificate("a grid bound", lower=0.5, upper=0.75, kind="numerical").gap
    0.25
    """

    method: str
    lower: float
    upper: float
    kind: str = "certified"

    @property
    def gap(self) -> float:
        return float(self.upper - self.lower)

    def to_dict(self) -> dict:
        return {"method": self.method, "lower": self.lower, "upper": self.upper, "gap": self.gap, "kind": self.kind}


def project_capped_simplex(y, c: float | None = None) -> np.ndarray:
    """Euclidean projection of the vector ``y`` onto ``{l >= 0}`` or, with ``c``, ``{l >= 0, sum(l) <= c}``.

    If ``sum(max(y, 0)) <= c`` the answer is ``max(y, 0)``; otherwise it is ``max(y - theta, 0)`` with
    the threshold ``theta > 0`` that makes the sum ``c`` (sort-based, ``O(n log n)``; Held, Wolfe and
    Crowder 1974, Duchi et al. 2008).
    """
    y = np.asarray(y, dtype=float)
    clipped = np.maximum(y, 0.0)
    if c is None or clipped.sum() <= c:
        return clipped
    s = np.sort(y)[::-1]
    cs = np.cumsum(s) - c
    k = np.arange(1, s.size + 1)
    rho = int(np.nonzero(s - cs / k > 0)[0][-1])
    theta = cs[rho] / (rho + 1)
    return np.maximum(y - theta, 0.0)


def project_psd(x, trace_bound: float | None = None) -> np.ndarray:
    """Frobenius projection onto the symmetric PSD matrices (with ``trace_bound``: and ``tr <= c``).

    Both sets are symmetric and unitarily invariant, so the projection is that of the symmetric part
    ``S = (x + x^T)/2`` applied to its eigenvalues: ``U diag(P(lambda)) U^T`` with ``P`` the projection
    onto ``{l >= 0}`` (PSD) or onto the capped simplex ``{l >= 0, sum l <= c}``
    (:func:`project_capped_simplex`). ``O(V1^3)`` (one ``eigh``).
    """
    x = np.asarray(x, dtype=float)
    S = (x + x.T) / 2
    ev, U = np.linalg.eigh(S)
    lam = project_capped_simplex(ev, trace_bound)
    out = (U * lam) @ U.T
    return (out + out.T) / 2


class Problem:
    """One benchmark problem ``min_x f(x)`` (subclasses implement one family each).

    Build problems with :func:`get` (by name and size), not with the constructor. Each knows ``f(x)``,
    ``grad(x)`` (and ``hvp(x, v)`` where natural), the seeded starts ``start(seed)`` (``x0 = start(0)``),
    its :class:`Certificate` ``lower <= f* <= upper`` (``f_star = upper``), a ``minimiser`` where known,
    ``suboptimality(x) = f(x) - f*`` and ``distance(x)`` to the minimiser's identifiable part; the
    optimum is computed on first use and cached.

    Parameters
    ----------
    model : str
        The topic model's kind (a key of :data:`MODELS`).
    size : dict
        The size parameters (``T``, ``v``, ``tau`` and family extras).
    tm : TopicModel or GeneralTopicModel
        The topic model itself.
    mk : Masking
        The masking probabilities.

    Attributes
    ----------
    name : str
        ``"<family>:<model>"``, e.g. ``"stage1-value/lsq:paper"``.
    family : str
        E.g. ``"stage1-value/lsq"``, ``"gram/sdp"``, ``"attention-ab/block"``.
    model : str
        The topic model: ``"paper"`` (:class:`~theorycheck.models.TopicModel`) or a general one
        (``"zipf"``, ``"overlap"``).
    size : dict
        The size parameters (``T``, ``v``, ``tau``).
    shape : tuple
        Shape of the variable ``x``.
    constraint : str or None
        ``"psd"``: ``x`` must be symmetric positive semidefinite; ``None``: unconstrained.

    See Also
    --------
    get : The problem of a given name and size.
    list_problems : Every problem name with its size ladder.
    Certificate : The bounds on ``f*`` every problem carries.
    Oracle : The sealed view of a problem a benchmarked solver receives.

    References
    ----------
    SPEC §4.0-§4.3 (the objectives), §4.6 (the constrained and nonconvex families), §11 (general models).

    Examples
    --------
    The stage-1 least-squares problem: ``f(0) = 1``, ``f* = 1 - 1/(tau v)`` certified exactly, and the
    gradient vanishes at the minimiser:

    >>> from theorycheck import problems
    >>> p = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2)
    >>> p
    <Problem stage1-value/lsq:paper size={'T': 3, 'tau': 2, 'v': 4} shape=(13, 13)>
    >>> p.n, p.constraint, p.f(p.x0), p.f_star, p.certificate.gap
    (169, None, 1.0, 0.875, 0.0)
    >>> x = p.minimiser
    >>> p.suboptimality(x), float(np.abs(p.grad(x)).max()) < 1e-12, p.distance(x)
    (0.0, True, 0.0)
    """

    family: str = ""
    constraint: str | None = None
    #: one line: what ``start(seed)`` draws
    start_doc: str = ""

    def __init__(self, model: str, size: dict, tm, mk):
        self.model = model
        self.size = dict(size)
        self.tm, self.mk = tm, mk
        self.name = f"{self.family}:{model}"
        self._opt = None

    # -- to implement ---------------------------------------------------------------------------
    shape: tuple = ()

    def f(self, x) -> float:
        raise NotImplementedError

    def grad(self, x) -> np.ndarray:
        raise NotImplementedError

    def _optimum(self):
        """``(Certificate, minimiser or None)``."""
        raise NotImplementedError

    def start(self, seed: int = 0) -> np.ndarray:
        raise NotImplementedError

    def reference(self) -> np.ndarray:
        """The library's own solver for this problem (the ``closed-form`` built-in solver)."""
        raise NotImplementedError

    # -- optional -------------------------------------------------------------------------------
    hvp: Callable[[Any, Any], np.ndarray] | None = None  # ``hvp(x, v) -> H(x) v`` where natural

    def identifiable(self, x) -> np.ndarray:
        """The part of ``x`` fixed by optimality (default: ``x`` itself, unique minimiser)."""
        return np.asarray(x, dtype=float)

    def violation(self, x) -> float:
        """Constraint violation (0 for unconstrained problems)."""
        return 0.0

    def project(self, x) -> np.ndarray:
        """Euclidean (Frobenius) projection of ``x`` onto the feasible set: ``x`` itself when unconstrained.

        Constrained families override it (``"psd"``: ``project_psd``); the built-in first-order
        solvers call it after every step.
        """
        if self.constraint is None:
            return np.asarray(x, dtype=float)
        raise NotImplementedError(f"{self.name}: no projection onto the constraint {self.constraint!r}")

    # -- derived --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of variables."""
        return int(np.prod(self.shape))

    @property
    def V1(self) -> int:
        """Vocabulary size of the problem's topic model (``[MASK]`` included)."""
        return int(self.tm.V1)

    @property
    def x0(self) -> np.ndarray:
        """The documented starting point ``start(0)``."""
        return self.start(0)

    def _ensure(self):
        if self._opt is None:
            with quiet():  # the solvers' own progress bars are not the problem library's to show
                self._opt = self._optimum()
        return self._opt

    @property
    def certificate(self) -> Certificate:
        return self._ensure()[0]

    @property
    def f_star(self) -> float:
        """Best known optimal value: the certificate's ``upper`` (attained by a feasible point)."""
        return float(self.certificate.upper)

    @property
    def minimiser(self):
        """A minimiser (``None`` where unknown, e.g. unrestricted attention)."""
        return self._ensure()[1]

    def suboptimality(self, x) -> float:
        """``f(x) - f*`` (``f*`` known to within ``certificate.gap``)."""
        return float(self.f(x) - self.f_star)

    def distance(self, x) -> float:
        """``||identifiable(x) - identifiable(x*)||`` (Frobenius; NaN if no minimiser is known)."""
        xs = self.minimiser
        if xs is None:
            return math.nan
        return float(np.linalg.norm(self.identifiable(x) - self.identifiable(xs)))

    def describe(self) -> dict:
        c = self.certificate
        return {
            "name": self.name,
            "family": self.family,
            "model": self.model,
            "size": self.size,
            "shape": list(self.shape),
            "n": self.n,
            "constraint": self.constraint,
            "has_hvp": self.hvp is not None,
            "start": self.start_doc,
            "certificate": c.to_dict(),
            "doc": (type(self).__doc__ or "").strip().split("\n\n")[0],
        }

    def __repr__(self) -> str:
        return f"<Problem {self.name} size={self.size} shape={self.shape}>"
