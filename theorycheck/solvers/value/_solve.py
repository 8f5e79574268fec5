"""Stage 1: the optimal value matrix ``W^V`` under frozen uniform attention (SPEC §4.0, §4.2).

With one-hot embeddings, ``W^dec = I`` and uniform attention, the N -> inf squared MLM loss is the
quadratic ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1`` (see :func:`theorycheck.population.value_loss`).
Its stationarity condition is ``W (Sigma + lambda I) = C``.

Three methods compute the optimum and are checked against each other:

``"closed-form"``
    The block-constant answer ``W_{w w'} = A`` (same topic), ``B0`` (different topics),
    ``W_{w 0} = gamma``, row 0 = 0. For ``reg = 0`` it is the minimum-norm minimiser (SPEC §4.2,
    re-derived below, including degenerate cases); for ``reg > 0`` the exact minimiser of the reduced
    three-parameter quadratic. O(1) cost; returned as a :class:`BlockValueMatrix` when ``V1`` is large.
``"lstsq"``
    Dense ``C pinv(Sigma)`` (``reg = 0``, computed as the minimum-norm least-squares solution of
    ``Sigma W^T = C^T``) or ``C (Sigma + reg I)^{-1}``. O(V1^3).
``"cvxpy"``
    The convex program: ``min ||W||_F^2 s.t. W Sigma = C`` (``reg = 0``) or
    ``min L(W) + reg ||W||_F^2`` (``reg > 0``), in an equivalent sparse form (see
    :func:`_solve_cvxpy`), with any installed cvxpy solver (default CLARABEL).

Every result carries residuals recomputed by our own code (:mod:`._residuals`) and is
certified by the shared :func:`theorycheck.solvers._certify.certify`. The block structure and the
(A, B0, gamma) constants live in :mod:`._block`; the minimum-norm constants themselves in
:func:`theorycheck.population.stage1_block_constants` (their single home).

Derivation of the closed form (our own, SPEC §4.2 [DER])
------------------------------------------------------------
Write ``m_S = a p_S + r u + q e_0`` and ``L(W) - L* = E ||W m_S - p_S||^2``. If the context carries
information about the topics (``a > 0`` and the topic mixtures affinely span more than one point:
``tau < T`` for the uniform-tau prior, ``T >= 2`` for the Dirichlet prior) the minimisers are exactly
the ``W`` with ``W m_S = p_S`` for every document; with ``Y_t = W 1_t`` and ``z = W e_0`` this is

.. math::
    Y_t = \\tfrac{1}{a} 1_t + v g \\ (\\forall t), \\qquad (a + r) g + \\tfrac{r}{a T v} 1_W + q z = 0,

``g`` free. The minimum-norm element spreads each block sum evenly (``W_{ij} = Y_{it}/v``), sets
row 0 to zero and minimises over the scalar ``g_i = B0`` of each word row
``v (1/(av) + g)^2 + (T-1) v g^2 + z^2``, giving

.. math::
    B_0 = -\\frac{r (a+r) + T v q^2}{a v T [(a+r)^2 + T v q^2]},\\quad A = B_0 + \\frac{1}{a v},\\quad
    \\gamma = \\frac{q (T v B_0 + 1/a)}{a + r}

(the last form stays valid for ``q = 0``, where ``gamma = 0``; it is equivalent to
``gamma = -[(a+r) B0 + r/(a T v)]/q`` when ``q > 0``). The predicted minimum is
``1 - E||p||^2``. The answer does not depend on ``tau`` or on the Dirichlet ``alpha``: the set of
minimisers does not.

*Constant context* (``tau = T``, or ``T = 1``, or ``a = 0``: ``m_S`` is the same vector
``mu = (a + r) u + q e_0`` for every document). Then ``Sigma = mu mu^T`` has rank one, the best the
model can do is ``W mu = E[p] = u``, the minimum loss is ``1 - ||u||^2 = 1 - 1/(T v)`` (equal to
``1 - E||p||^2`` when ``tau = T``; *larger* than it when ``a = 0``), and the minimum-norm solution is
``W = u mu^T / ||mu||^2``: ``A = B0 = (a+r)/((T v)^2 ||mu||^2)``, ``gamma = q/(T v ||mu||^2)``. Here
the general formula above is wrong (it has ``A - B0 = 1/(a v) != 0``).

*Ridge* (``reg = lambda > 0``). ``C (Sigma + lambda I)^{-1}`` commutes with topic and within-topic word
permutations and its rows lie in ``span{1_t, e_0}`` (an invariant subspace of ``Sigma`` holding the
rows of ``C``), so it is block-constant with row 0 = 0. With ``theta`` the topic mixture
(``E||theta||^2 = v E||p||^2``), ``d = a (A - B0)`` and ``alpha0 = a B0 + r (A + (T-1) B0)/T + q gamma``,
a word row outputs ``alpha0 + d theta_{t(w)}`` and

.. math::
    L = v (T \\alpha_0^2 + 2 \\alpha_0 d + E\\|\\theta\\|^2 d^2) - 2 (\\alpha_0 + E\\|\\theta\\|^2 d) + 1
        + \\lambda T v [v A^2 + (T-1) v B_0^2 + \\gamma^2],

a strictly convex quadratic in ``(A, B0, gamma)`` (SPEC §4.2 gives the uniform-tau case,
``E||theta||^2 = 1/tau``). It is solved exactly through the SVD of a 3 x 2 factor of its Hessian
in norm-weighted coordinates (see :func:`_ridge_constants`), which stays accurate as ``reg -> 0``
and returns the minimum-norm solution at ``reg = 0``.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..._memory import check_alloc
from ..._validate import check_choice, check_real
from ...models import GeneralTopicModel, Masking, TopicModel, check_models, token_topic
from ...population import moments
from .._certify import SOLVER_FAILURE, SUCCESS, certify, check_contract, cvxpy_status
from .._cvxpy import cvxpy
from .._options import ValueOptions, coerce_options
from .._result import SolveResult
from ._block import (
    BlockValueMatrix,
    block_constants,
    hat_moments,
    predicted_min_loss,
    structured_constants,
    value_block_constants,
)
from ._lowrank import general_optimal_value_matrix
from ._rational import rational_value_result
from ._residuals import MinimiserViolation, minimiser_violation, value_checks, value_residuals

__all__ = [
    "BlockValueMatrix",
    "optimal_value_matrix",
    "minimiser_violation",
    "MinimiserViolation",
    "value_block_constants",
    "structured_constants",
    "VALUE_METHODS",
]

VALUE_METHODS = ("closed-form", "cvxpy", "lstsq", "rational")

#: ``dense=None`` returns a dense array up to this V1 (``V1^2`` doubles = 32 MB), a block object above.
DENSE_DEFAULT_MAX_V1 = 2001
#: Largest V1 for the dense methods ("lstsq" is O(V1^3), "cvxpy" worse): a cost limit, not a memory one.
GENERIC_MAX_V1 = 20001
#: Default acceptance tolerance on the relative residuals (see :mod:`._certify`).
DEFAULT_TOL = 1e-6


def _solve_closed_form(tm, mk, reg, dense, max_bytes):
    A, B0, gamma, case = block_constants(tm, mk, reg)
    W = BlockValueMatrix(A, B0, gamma, tm.T, tm.v)
    info = {"A": A, "B0": B0, "gamma": gamma, "case": case, "a": mk.a, "r": mk.r, "q": mk.q}
    return (W.toarray(max_bytes=max_bytes) if dense else W), SUCCESS, "", 0, info


def _solve_lstsq(tm, mk, reg):
    Sigma, C = moments(tm, mk)
    if reg == 0.0:
        X, _, rank, _ = np.linalg.lstsq(Sigma, C.T, rcond=None)  # Sigma W^T = C^T, min-norm
        W = X.T
        info = {"rank": int(rank)}
    else:
        W = sla.solve(Sigma + reg * np.eye(tm.V1), C.T, assume_a="pos").T
        info = {}
    return np.ascontiguousarray(W), 0, "", 0, info


def _solve_cvxpy(tm, mk, reg, solver, options):
    """Convex program, in a sparse form equivalent to the textbook one.

    With ``U`` the ``V1 x (T+1)`` topic-indicator matrix ``[1_1 .. 1_T, e_0]`` (so ``W U`` are the
    block sums), ``Sigma = U S U^T`` and ``C = U S_C U^T`` with ``S = E[t t^T]``, ``m = U t``. Since
    ``U`` has full column rank, ``W Sigma = C`` iff ``(W U) S R = U S_C R`` where the columns of ``R``
    span ``range(S)`` (dropping the redundant equations along ``null(S)``); and
    ``L(W) = ||(W U) L_S||_F^2 - 2 <U^T W U, S_C> + 1`` with ``S = L_S L_S^T``. Only ``O(V1^2)``
    non-zeros, instead of the ``O(V1^3)`` of ``W Sigma`` with a dense ``Sigma``.
    """
    cp = cvxpy()
    T, v, V1 = tm.T, tm.v, tm.V1
    Sig_hat, C_hat = hat_moments(tm, mk)
    d_half = np.r_[np.full(T, math.sqrt(v)), 1.0]
    # back to the indicator basis: S = D^{-1/2} Sig_hat D^{-1/2}
    S = Sig_hat.toarray() / np.outer(d_half, d_half)
    S_C = C_hat.toarray() / np.outer(d_half, d_half)
    rows = np.arange(V1)
    cols = np.where(rows == 0, T, token_topic(rows, v))
    U = sp.csr_matrix((np.ones(V1), (rows, cols)), shape=(V1, T + 1))
    evals, evecs = np.linalg.eigh(S)
    keep = evals > 1e-10 * evals.max()
    Wv = cp.Variable((V1, V1))
    Y = Wv @ U
    if reg == 0.0:
        R = evecs[:, keep]
        rhs = U @ (S_C @ R)
        prob = cp.Problem(cp.Minimize(cp.sum_squares(Wv)), [Y @ (S @ R) == rhs])
    else:
        L_S = evecs[:, keep] * np.sqrt(evals[keep])
        obj = cp.sum_squares(Y @ L_S) - 2 * cp.sum(cp.multiply(U.T @ Wv @ U, S_C)) + 1 + reg * cp.sum_squares(Wv)
        prob = cp.Problem(cp.Minimize(obj))
    try:
        prob.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        return None, SOLVER_FAILURE, f"cvxpy solver {solver} failed: {exc}", 0, {"backend_status": "error"}
    bstat = str(prob.status)
    nit = 0
    stats = getattr(prob, "solver_stats", None)
    if stats is not None and getattr(stats, "num_iters", None) is not None:
        nit = int(stats.num_iters)
    info = {"backend_status": bstat, "backend_solver": solver}
    status = cvxpy_status(bstat)
    if Wv.value is None:
        return (
            None,
            SOLVER_FAILURE if status == SUCCESS else status,
            f"cvxpy returned no point (status {bstat})",
            nit,
            info,
        )
    return np.ascontiguousarray(Wv.value, dtype=float), status, f"backend status {bstat}", nit, info


def _validate(tm, mk, method, reg, tol, solver, options, dense, max_bytes):
    """All argument checks of the paper model's route, before any work (memory guard included)."""
    mk.require_masked_positions("the stage-1 value problem")
    reg = check_real("reg", reg, low=0.0)
    check_choice("method", method, VALUE_METHODS)
    tol, options = check_contract(
        method, tol, solver, options, uses_solver=method == "cvxpy", uses_options=method == "cvxpy", stacklevel=8
    )
    if dense is not None and not isinstance(dense, bool):
        raise TypeError(f"dense must be None, True or False, got {dense!r}")
    if method == "rational":
        if reg != 0.0:
            raise ValueError(f"reg={reg!r}: method='rational' computes the minimum-norm (reg = 0) optimum only")
        return reg, tol, options, True
    if method == "closed-form":
        dense = (tm.V1 <= DENSE_DEFAULT_MAX_V1) if dense is None else dense
        if dense:
            check_alloc(
                "optimal_value_matrix(options.dense=True): V1 x V1 W^V",
                (tm.V1, tm.V1),
                max_bytes=max_bytes,
                alternative="options={'dense': False} (a BlockValueMatrix, O(1) storage)",
            )
        return reg, tol, options, dense
    if dense is False:
        raise ValueError(f"options.dense=False is only available for method='closed-form' (method={method!r} is dense)")
    check_alloc(
        f"optimal_value_matrix(method={method!r}): Sigma, C and W, each V1 x V1",
        (3, tm.V1, tm.V1),
        max_bytes=max_bytes,
        alternative="method='closed-form' (O(1), returns a BlockValueMatrix)",
    )
    if tm.V1 > GENERIC_MAX_V1:
        raise ValueError(
            f"method={method!r} costs O(V1^3); V1 = {tm.V1} exceeds {GENERIC_MAX_V1}; use method='closed-form'"
        )
    if method == "cvxpy":
        cp = cvxpy()
        if solver is not None and solver not in cp.installed_solvers():
            raise ValueError(f"solver must be an installed cvxpy solver {cp.installed_solvers()}, got {solver!r}")
    return reg, tol, options, True


def optimal_value_matrix(
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    method: str = "closed-form",
    reg: float = 0.0,
    tol: float = DEFAULT_TOL,
    solver: str | None = None,
    options: ValueOptions | dict | None = None,
) -> SolveResult:
    """Optimal stage-1 value matrix under uniform attention (SPEC §4.2).

    Minimises ``L(W) + reg ||W||_F^2`` with ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1`` the exact
    N -> inf squared MLM loss (:func:`theorycheck.population.value_loss`); for ``reg = 0`` returns the
    *minimum-norm* minimiser ``C Sigma^+`` (the limit ``reg -> 0+`` and the point gradient descent
    from ``W = 0`` reaches), block-constant with the constants of
    :func:`theorycheck.population.stage1_block_constants`.

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model (the paper's :class:`~theorycheck.TopicModel` or any
        :class:`~theorycheck.GeneralTopicModel`).
    mk : Masking
        The masking probabilities, ``mk.p_m > 0``. Any prior; degenerate cases (``tau = T``, ``T = 1``, ``a = 0``,
        ``q = 0``, ``v = 1``) are handled exactly (module docstring). The route is chosen by the
        model type: the block closed form for the paper's model, the low-rank formulas of SPEC
        §11.3 (methods ``"closed-form"``, ``"lstsq"``, ``"cvxpy"``; ``._lowrank``) for any other.
    method : {"closed-form", "cvxpy", "lstsq", "rational"}, default "closed-form"
        The route (module docstring). ``"rational"``: exact rational arithmetic (small sizes,
        ``reg = 0``; masking probabilities read
        as exact decimals): ``W = C Sigma^+`` with ``W Sigma = C`` and ``W (I - Sigma Sigma^+) = 0``
        verified exactly; ``info["x_exact"]`` and ``info["loss_exact"]`` hold the exact values
        (``theorycheck.solvers._rational``).
    reg : float, default 0.0
        Ridge weight ``lambda >= 0``.
    tol : float, default 1e-6
        Acceptance threshold on the relative residuals (``theorycheck.solvers._certify``):
        ``||W(Sigma + reg I) - C||_F / ||C||_F`` and, for ``reg = 0``, ``|L(W) - L*|`` (scale 1, the
        loss of ``W = 0``) and the out-of-range norm ``||W - W P||_F / ||W||_F``.
    solver : str, optional
        cvxpy solver (``method="cvxpy"`` only; default ``"CLARABEL"``), e.g. ``"SCS"``, ``"OSQP"``.
    options : ValueOptions or dict, optional
        ``dense``, ``max_bytes`` and the backend's ``solver_options`` (:class:`ValueOptions`, where
        every field is documented).

    Returns
    -------
    SolveResult
        ``x``: the matrix (ndarray or :class:`BlockValueMatrix`); ``fun``: regularised objective;
        ``residuals``: ``stationarity``, ``stationarity_rel``, ``loss``, ``objective`` and, for
        ``reg > 0``, ``error_bound``; for ``reg = 0``, ``loss_gap``, ``range_violation``,
        ``range_violation_rel``; ``certificate`` (``reg > 0``): ``{"error_bound": ...}``, a certified
        bound on ``||W - W_opt||_F``; ``info``: block constants (closed form), backend status (cvxpy),
        ``relative_residuals``. Status codes: the table of ``theorycheck.solvers._certify``.

    Raises
    ------
    ValueError
        Bad arguments (before any work): ``mk.p_m = 0``, ``reg < 0``, an unknown ``method``, ``reg > 0``
        with ``method="rational"``, ``options.dense=False`` with a dense method, a dense array above
        ``max_bytes``, ``V1 > 20001`` for ``"lstsq"``/``"cvxpy"``, a cvxpy solver that is not installed.
    TypeError
        ``options`` neither None, a dict nor a :class:`ValueOptions`, or a field of the wrong type.

    See Also
    --------
    BlockValueMatrix : The structured ``x`` of the paper's model (``options={"dense": False}``).
    value_block_constants : The constants ``(A, B0, gamma)`` alone, for any ``reg >= 0``.
    minimiser_violation : Distance of any candidate from the whole set of minimisers.
    theorycheck.population.value_loss : The objective ``L(W)`` itself.

    Notes
    -----
    Cost: closed form O(1) (plus O(V1^2) to fill a dense array); lstsq O(V1^3); cvxpy grows faster
    (see ``benchmarks/bench_stage1.py``). For tiny ``reg > 0`` the dense methods lose accuracy along
    ``null(Sigma)`` (round-off divided by ``reg``) while the stationarity residual cannot see it; the
    ``error_bound`` says how much is certified. The closed form stays accurate for every ``reg >= 0``.

    References
    ----------
    SPEC §4.0 (the loss), §4.2 (the block closed form), §11.3 (general topic-word matrices); Li, Li and
    Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 2.

    Examples
    --------
    The minimum of the loss is ``1 - E||p||^2 = 1 - 1/(tau v)``, and ``A - B0 = 1/(a v)``:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> tm, mk = TopicModel(T=3, v=4, tau=2), Masking()
    >>> res = optimal_value_matrix(tm, mk)
    >>> res.status, res.x.shape, round(res.fun, 12), round(1 - 1 / (tm.tau * tm.v), 12)
    (0, (13, 13), 0.875, 0.875)
    >>> round(res.A - res.B0, 12) == round(1 / (mk.a * tm.v), 12)
    True

    The dense least-squares route ``C Sigma^+`` agrees with the closed form, and ridge is certified:

    >>> lsq = optimal_value_matrix(tm, mk, method="lstsq")
    >>> bool(np.allclose(lsq.x, res.x, atol=1e-12))
    True
    >>> ridge = optimal_value_matrix(tm, mk, reg=0.1)
    >>> ridge.success, ridge.certificate["error_bound"] < 1e-12
    (True, True)
    """
    check_models(tm, mk, general=True)
    return _optimal_value_matrix(tm, mk, method, reg, tol, solver, coerce_options(ValueOptions, options))


@functools.singledispatch
def _optimal_value_matrix(g: GeneralTopicModel, mk, method, reg, tol, solver, opts) -> SolveResult:
    """Generic route, any topic-word matrix (SPEC §11.3, §11.5): low-rank factors ``Sigma = X X^T``."""
    return general_optimal_value_matrix(g, mk, method, reg, tol, solver, opts)


@_optimal_value_matrix.register
def _(tm: TopicModel, mk, method, reg, tol, solver, opts) -> SolveResult:
    """Paper's model (SPEC §4.2): block-constant closed form, dense, convex program or exact rationals."""
    dense, max_bytes = opts.dense, opts.max_bytes
    reg, tol, options, dense = _validate(tm, mk, method, reg, tol, solver, opts.solver_options, dense, max_bytes)
    t0 = time.perf_counter()
    if method == "rational":
        res = rational_value_result(tm, mk)
        res.time = time.perf_counter() - t0
        return res
    if method == "closed-form":
        W, backend, msg, nit, info = _solve_closed_form(tm, mk, reg, dense, max_bytes)
    elif method == "lstsq":
        W, backend, msg, nit, info = _solve_lstsq(tm, mk, reg)
    else:
        W, backend, msg, nit, info = _solve_cvxpy(tm, mk, reg, solver or "CLARABEL", options)
    elapsed = time.perf_counter() - t0
    if W is None:
        status, message, _ = certify({}, tol, backend=backend, detail=msg)
        return SolveResult(None, math.nan, status, method, message, nit, elapsed, {}, info)
    if isinstance(W, np.ndarray) and not np.all(np.isfinite(W)):
        status, message, _ = certify({"W": (math.nan, 1.0)}, tol, backend=backend, detail=msg)
        return SolveResult(W, math.nan, status, method, message, nit, elapsed, {}, info)
    residuals = value_residuals(W, tm, mk, reg)
    status, message, rel = certify(value_checks(residuals), tol, backend=backend, detail=msg)
    info.update({"reg": reg, "predicted_min_loss": predicted_min_loss(tm, mk), "tol": tol, "relative_residuals": rel})
    cert = {"error_bound": residuals["error_bound"]} if reg > 0.0 else None
    return SolveResult(W, residuals["objective"], status, method, message, nit, elapsed, residuals, info, cert)
