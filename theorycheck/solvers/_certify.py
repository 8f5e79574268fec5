"""The one certification step shared by every solver: status table, cvxpy status map, ``tol``.

Status codes (shared by all solvers; ``SolveResult.success`` is ``status == 0``):

==== =================== ===================================================================
code name                meaning
==== =================== ===================================================================
0    SUCCESS             converged, and every independent residual check passed
1    ITERATION_LIMIT     iteration or time limit reached before convergence
2    SOLVER_FAILURE      the backend reported failure (infeasible, unbounded, error, no point)
3    ON_BOUNDARY         the minimiser lies on the boundary of the search box (the optimum is
                         at or beyond the box, e.g. ``beta* -> -inf`` in SPEC §4.3(b))
4    NOT_CERTIFIED       the backend claimed success but a residual check failed, or a
                         residual is not finite
==== =================== ===================================================================

Meaning of ``tol`` (the same in every solver): each solver computes named *absolute* residuals
with our own numpy code and states a *scale* for each (the size of the quantity it is measured
against: ``||C||_F`` for a stationarity residual, the loss at zero for a loss gap, ``||x||`` for
a component of ``x``, ...). The status is ``SUCCESS`` iff every relative residual
``|residual| / scale`` is finite and ``<= tol``; the relative values are returned in
``info["relative_residuals"]``. No threshold other than ``tol`` decides a status.
"""

from __future__ import annotations

import math

from .._validate import check_real, warn_ignored

__all__ = [
    "SUCCESS",
    "ITERATION_LIMIT",
    "SOLVER_FAILURE",
    "ON_BOUNDARY",
    "NOT_CERTIFIED",
    "STATUS_MESSAGES",
    "CVXPY_STATUS",
    "cvxpy_status",
    "certify",
    "check_contract",
    "MAX_TOL",
]

SUCCESS, ITERATION_LIMIT, SOLVER_FAILURE, ON_BOUNDARY, NOT_CERTIFIED = 0, 1, 2, 3, 4

#: Status code -> message of every :class:`SolveResult` (0 success, 1 iteration limit, 2 solver failure,
#: 3 on the search box's boundary, 4 not certified): the one status table of the solvers.
STATUS_MESSAGES = {
    SUCCESS: "Optimisation terminated successfully; every residual within tol (relative to its scale).",
    ITERATION_LIMIT: "Iteration or time limit reached before convergence.",
    SOLVER_FAILURE: "The backend solver reported failure (infeasible, unbounded or error).",
    ON_BOUNDARY: "The minimiser lies on the boundary of the search box (the optimum is at or beyond the box).",
    NOT_CERTIFIED: "Not certified: an independent residual check failed or a residual is not finite.",
}

#: cvxpy ``Problem.status`` -> our status (anything unknown is a solver failure).
CVXPY_STATUS = {
    "optimal": SUCCESS,
    "optimal_inaccurate": SUCCESS,  # accepted only if our residual check passes
    "user_limit": ITERATION_LIMIT,
    "infeasible": SOLVER_FAILURE,
    "unbounded": SOLVER_FAILURE,
    "infeasible_inaccurate": SOLVER_FAILURE,
    "unbounded_inaccurate": SOLVER_FAILURE,
    "infeasible_or_unbounded": SOLVER_FAILURE,
}


def cvxpy_status(name) -> int:
    """Our status code for a cvxpy problem status (``SOLVER_FAILURE`` if unknown or ``None``)."""
    return CVXPY_STATUS.get(str(name), SOLVER_FAILURE)


def _relative(value: float, scale: float) -> float:
    value = abs(float(value))
    return value / scale if scale > 0 else value


def certify(checks: dict, tol: float, *, backend: int = SUCCESS, detail: str = "") -> tuple[int, str, dict]:
    """Status, message and relative residuals of a candidate optimum.

    Parameters
    ----------
    checks : dict
        ``{name: (residual, scale)}``; relative residual ``|residual| / scale`` (``|residual|`` if
        ``scale <= 0``).
    tol : float
        Acceptance threshold on every relative residual.
    backend : int
        The backend's own status (already mapped to the table); a non-zero backend status wins.
    detail : str
        Backend message appended in parentheses.

    Returns
    -------
    (status, message, relative) : (int, str, dict)
    """
    rel = {name: _relative(v, s) for name, (v, s) in checks.items()}
    # non-finite: a NaN / inf residual or scale; a finite residual over a tiny scale whose quotient
    # overflows to inf is a failed residual check (inf > tol), not a non-finite residual
    nonfinite = [n for n, (v, s) in checks.items() if not (math.isfinite(float(v)) and math.isfinite(float(s)))]
    nonfinite += [n for n, r in rel.items() if math.isnan(r) and n not in nonfinite]
    failed = [n for n, r in rel.items() if n not in nonfinite and r > tol]
    if backend != SUCCESS:
        status = backend
    else:
        status = NOT_CERTIFIED if (nonfinite or failed) else SUCCESS
    message = STATUS_MESSAGES[status]
    if detail:
        message += f" ({detail})"
    if nonfinite:
        message += f" Non-finite residual: {', '.join(nonfinite)}."
    if failed:
        message += f" Residual check (tol={tol:g}) failed: " + ", ".join(f"{n}={rel[n]:.3g}" for n in failed) + "."
    return status, message, rel


#: The largest ``tol`` accepted: the residuals are relative (or in loss units of scale 1), so a tolerance above 1
#: would certify any answer, however wrong.
MAX_TOL = 1.0


def check_contract(
    method: str, tol, solver, options, *, uses_solver: bool, uses_options: bool, stacklevel: int = 5
) -> tuple[float, dict]:
    """Validate the shared arguments ``tol``, ``solver`` and the backend options (before any work).

    ``solver`` must be ``None`` or a string, ``options`` (the ``solver_options`` field of the
    solver's options object) ``None`` or a dict; an argument the
    method does not use triggers :func:`theorycheck._validate.warn_ignored` when it is not
    ``None`` (never by comparing with a copied default); ``stacklevel`` points the warning at the
    user's call. Returns ``(tol, options)`` with
    ``options`` a (possibly empty) dict.
    """
    tol = check_real("tol", tol, low=0.0, low_open=True, high=MAX_TOL)  # above 1 any answer would pass
    if solver is not None and not isinstance(solver, str):
        raise TypeError(f"solver must be None or a string (a backend name), got {solver!r}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"solver_options must be None or a dict of backend options, got {type(options).__name__}")
    pairs = (("solver", solver, uses_solver), ("solver_options", options, uses_options))
    warn_ignored([n for n, val, used in pairs if val is not None and not used], method, stacklevel=stacklevel)
    return tol, dict(options or {})
