"""Optimal token embeddings of the tied model (Theorem 1 setting; SPEC §4.1).

Tied decoder, no bias, uniform attention, ``W^V = I``, squared loss, N -> inf: the loss is
``L(G) = value_loss(G, tm, mk)`` with ``G = (W^E)^T W^E`` (PSD, rank <= d). Every PSD ``G``
with ``G m_S = p_S`` for all document laws attains ``L* = 1 - E||p||^2``; the
**minimum-norm** optimum (minimum ``||W^E||_F^2 = tr G``, the ``reg -> 0+`` limit of the
L2-regularised problem) is, for ``T >= 2`` and a document law whose topic mixtures affinely span
the simplex (``tau < T`` or the Dirichlet prior), the block-constant matrix (§4.1 D3)

.. math::
    G_{ij} = x\\ [t(i) = t(j)], \\quad G_{ij} = y\\ [t(i) \\ne t(j)], \\quad G_{0\\cdot} = G_{\\cdot 0} = 0,
    \\qquad x = \\frac{1}{a v}\\Big(1 - \\frac{r}{T(a+r)}\\Big), \\quad y = -\\frac{r}{a v T (a+r)},

with eigenvalues ``1/a`` (multiplicity ``T-1``, topic contrasts), ``1/(a+r)`` (on ``1_W``) and 0,
so its rank (the smallest embedding dimension attaining ``L*``) is ``T``. This holds for every
``q >= 0`` and ``r >= 0``. When there is a single document law (``tau = T``, or ``T = 1``) the
only optimality condition is ``G m = u`` and the min-norm optimum is the rank-one
``G = J_W / (T v (a + r))`` (``x = y``); see :func:`closed_form_gram` for the proof sketch.
With a free decoder bias (``bias=True``; not in SPEC's D3, derived here and certified by the
same solvers) the optimal bias is ``b = u`` and the min-norm Gram is ``x = (T-1)/(a v T)``,
``y = -1/(a v T)``, of rank ``T - 1`` (the values SPEC §4.1 reports from gradient descent).

Methods of :func:`optimal_embedding_gram`:

- ``"closed-form"``: the formula above as a structured :class:`BlockGram` (O(1) memory; any V1).
- ``"schur"``: dense numpy: ``M Sigma = C`` fixes ``G`` on ``range(Sigma)``; the PSD completion of
  least trace has the Schur-complement block ``B^T A^+ B`` (independent of the closed form).
- ``"cvxpy"``: semidefinite program (CLARABEL or SCS): ``min tr G`` s.t. ``G Sigma = C``,
  ``G >= 0`` (``reg = 0``), or ``min L(G) + reg tr G`` s.t. ``G >= 0`` (``reg > 0``).
- ``"factorized"``: scipy L-BFGS over ``W^E`` (``d x V1``) from a small random init.

Every result carries residuals recomputed by our own numpy code (loss gap, PSD-ness, minimiser
violation; :mod:`._residuals`), never trusting a backend, and is certified by the shared
:func:`theorycheck.solvers._certify.certify`. The block Gram and the closed form live in :mod:`._block`.
"""

from __future__ import annotations

import functools
import math
import time
import warnings

import numpy as np
from scipy.optimize import minimize

from ..._memory import check_alloc
from ..._threads import small_problem
from ..._validate import check_choice, check_int, check_real, warn_ignored
from ...models import GeneralTopicModel, Masking, TopicModel, check_models
from ...population._embedding_loss import _kernel_threads, embedding_loss_grad
from ...population._value_loss import value_loss
from .._certify import (
    ITERATION_LIMIT,
    NOT_CERTIFIED,
    SOLVER_FAILURE,
    SUCCESS,
    certify,
    check_contract,
    cvxpy_status,
)
from .._cvxpy import cvxpy
from .._options import GramOptions, coerce_options
from .._result import SolveResult
from ._block import (
    BlockGram,
    bias_const,
    block_closed_form_gram,
    block_gram_loss,
    closed_form_gram,
    embedding_from_gram,
    min_embedding_dim,
    optimal_bias,
    single_law,
)
from ._lowrank import general_optimal_embedding_gram
from ._rational import rational_embedding_result
from ._residuals import (
    dense_gram_residuals,
    embedding_minimiser_violation,
    gram_checks,
    identifiable_part,
    mean_density,
    mean_target,
    minimiser_residuals,
    range_split,
)

__all__ = [
    "BlockGram",
    "closed_form_gram",
    "optimal_bias",
    "optimal_embedding_gram",
    "embedding_from_gram",
    "min_embedding_dim",
    "embedding_minimiser_violation",
    "minimiser_residuals",
    "identifiable_part",
]

METHODS = ("closed-form", "schur", "cvxpy", "factorized", "rational")
SOLVERS = ("CLARABEL", "SCS")
#: Largest V1 for the dense methods and the dense re-check of the closed form (O(V1^3) cost).
DENSE_CHECK_MAX_V1 = 2001
#: Default acceptance tolerance on the relative residuals (see ``._certify``).
DEFAULT_TOL = 1e-6
#: L-BFGS options of the factorized method (``options=`` overrides them).
LBFGS_OPTIONS = {"maxiter": 20_000, "maxfun": 40_000, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30}


# ----------------------------------------------------------------------------- validation
def _dense_need(method: str, V1: int, d) -> tuple:
    """Shape whose float64 size bounds the memory of a dense method (for :func:`check_alloc`)."""
    if method == "cvxpy":  # interior-point scaling block of the V1 x V1 PSD cone: (V1 (V1+1)/2)^2 entries
        k = V1 * (V1 + 1) // 2
        return (k, k)
    if method == "factorized":  # the dense checks, and W^E (d x V1) with L-BFGS's 2 x 10 history pairs and copies
        return (6 * V1 * V1 + _LBFGS_COPIES * d * V1,)
    return (6, V1, V1)  # Sigma, C, eigenvectors, G and work arrays


#: ``d x V1`` arrays the factorized method holds at once: the iterate, the gradient, scipy's L-BFGS history
#: (10 pairs) and its line-search copies.
_LBFGS_COPIES = 25


def _validate(tm, mk, method, reg, tol, solver, options, d, bias, seed, init_scale, maxiter, max_bytes):
    """All argument checks of the paper model's route, before any work (memory guard included)."""
    mk.require_informative("optimal_embedding_gram")
    check_choice("method", method, METHODS)
    reg = check_real("reg", reg, low=0.0)
    tol, options = check_contract(
        method,
        tol,
        solver,
        options,
        uses_solver=method == "cvxpy",
        uses_options=method in ("cvxpy", "factorized"),
        stacklevel=8,
    )
    if solver is not None:
        check_choice("solver", solver, SOLVERS)
    if d is not None:
        d = check_int("d", d, low=1)
    extras = {"seed": seed, "init_scale": init_scale, "maxiter": maxiter}
    if method != "factorized":
        warn_ignored([n for n, val in extras.items() if val is not None], method, stacklevel=7)
    seed = 0 if seed is None else int(seed)  # checked by GramOptions
    init_scale = 1e-2 if init_scale is None else float(init_scale)
    if maxiter is not None:
        maxiter = int(maxiter)
        options = {"maxiter": maxiter, "maxfun": 2 * maxiter, **options}
    if not isinstance(bias, (bool, np.bool_)):
        raise TypeError(f"bias must be a bool, got {bias!r}")
    rank = block_closed_form_gram(tm, mk, bool(bias)).rank()
    if d is not None and reg == 0.0 and d < rank:
        raise ValueError(
            f"d={d} is too small for the requested optimum: every minimiser G has rank >= {rank} "
            f"(= min_embedding_dim), so L* = {tm.min_value_loss():.6g} needs d >= {rank}"
        )
    if reg > 0 and method in ("closed-form", "schur", "rational"):
        raise ValueError(
            f"reg={reg!r}: method={method!r} gives the minimum-norm (reg -> 0+) optimum only; "
            "use method='cvxpy' or 'factorized' for reg > 0"
        )
    if method == "factorized" and d is None:
        raise ValueError(f"d is required for method='factorized' (an integer >= {max(rank, 1)} = min_embedding_dim)")
    if method not in ("closed-form", "rational"):
        check_alloc(
            f"optimal_embedding_gram(method={method!r}) with V1 = {tm.V1}",
            _dense_need(method, tm.V1, d),
            max_bytes=max_bytes,
            alternative="method='closed-form' (a BlockGram, O(1) storage, any V1)",
        )
        if tm.V1 > DENSE_CHECK_MAX_V1:
            raise ValueError(
                f"method={method!r} works with dense V1 x V1 matrices; V1={tm.V1} exceeds {DENSE_CHECK_MAX_V1}"
            )
    return reg, tol, options, d, bool(bias), seed, init_scale


# ----------------------------------------------------------------------------- public solver
def optimal_embedding_gram(
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    method: str = "closed-form",
    reg: float = 0.0,
    tol: float = DEFAULT_TOL,
    solver: str | None = None,
    options: GramOptions | dict | None = None,
    d: int | None = None,
    bias: bool = False,
) -> SolveResult:
    """Optimal Gram ``G = (W^E)^T W^E`` of the tied embedding model (SPEC §4.1), without or with a bias.

    Minimises ``L(G) + reg tr G`` over PSD ``G`` (``L`` the exact uniform-attention squared loss,
    ``tr G = ||W^E||_F^2``); at ``reg = 0`` the minimum-norm minimiser, the block-constant
    ``x = (1/(a v))(1 - r/(T(a+r)))``, ``y = -r/(a v T (a+r))`` of SPEC §4.1 D3.

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model (the paper's :class:`~theorycheck.TopicModel` or any
        :class:`~theorycheck.GeneralTopicModel`).
    mk : Masking
        ``p_m > 0`` and ``a > 0`` (some original words visible). The route is chosen by the model
        type: the methods below for the paper's model; ``G* = Y (X^T Y)^+ Y^T`` (``"closed-form"``) or
        the SDP (``"cvxpy"``), ``reg = 0``, for any other (SPEC §11.5; ``._lowrank``).
    method : {"closed-form", "schur", "cvxpy", "factorized", "rational"}, default "closed-form"
        See the module docstring. ``"closed-form"`` returns a :class:`BlockGram` (any V1, O(1));
        the others a dense ``(V1, V1)`` array (moderate V1 only). ``"rational"``: the minimum-trace
        optimal Gram in exact rational arithmetic (small sizes, ``reg = 0``), its optimality
        conditions verified exactly (``theorycheck.solvers._rational``).
    reg : float, default 0.0
        ``reg >= 0``. ``reg = 0``: the minimum-norm minimiser (``"closed-form"``, ``"schur"``, ``"cvxpy"``) or the
        minimiser L-BFGS reaches from ``init_scale``-small init (``"factorized"``: equal to the min-norm
        one on the identifiable part, see :func:`identifiable_part`). ``reg > 0`` (``"cvxpy"``,
        ``"factorized"`` only): minimiser of ``L(G) + reg tr G``.
    tol : float, default 1e-6
        Acceptance threshold on the relative residuals (``theorycheck.solvers._certify``): PSD
        violation and asymmetry relative to ``||G||_F``; loss gap ``L(G) - L*`` (``reg = 0``) and KKT
        residuals (``reg > 0``) relative to 1 (the loss of ``G = 0``).
    solver : {"CLARABEL", "SCS"}, optional
        cvxpy backend (``method="cvxpy"`` only; default CLARABEL).
    options : GramOptions or dict, optional
        ``seed``, ``init_scale``, ``maxiter`` (``"factorized"`` only), ``max_bytes`` and the backend's
        ``solver_options`` (passed to ``cvxpy.Problem.solve``, or merged into the L-BFGS-B options
        ``LBFGS_OPTIONS``); every field is documented in :class:`GramOptions`.
    d : int, optional
        Embedding dimension ``d >= 1``; required for ``"factorized"`` (``>= min_embedding_dim`` when
        ``reg = 0``); for the other methods ``d < rank`` raises.
    bias : bool, default False
        Free (unpenalised) decoder bias ``b``; ``info["b"]`` holds its optimal value.

    Returns
    -------
    SolveResult
        ``x`` the Gram (BlockGram or ndarray), ``fun`` its objective recomputed by our code;
        ``residuals``: ``loss_gap``, ``min_eig``, ``minimiser_violation`` (§4.1 D1),
        ``dist_closed_form`` and, for ``reg > 0``, ``kkt_dual_infeasibility``,
        ``kkt_complementarity``; ``certificate`` (cvxpy, ``reg = 0``): the duality gap and dual
        infeasibility recomputed from cvxpy's multipliers. Status: table of ``._certify``.

    Raises
    ------
    ValueError
        Bad arguments (before any work): ``p_m = 0`` or ``a = 0``, ``reg < 0``, an unknown ``method`` or
        ``solver``, ``reg > 0`` with a minimum-norm-only method, a missing or too small ``d``, a dense
        method above ``max_bytes``.
    TypeError
        ``options`` neither None, a dict nor a :class:`GramOptions`, a field of the wrong type, or ``bias``
        not a bool.

    See Also
    --------
    closed_form_gram : The SPEC §4.1 D3 closed form alone (a :class:`BlockGram`).
    embedding_from_gram : An embedding ``W^E`` with ``(W^E)^T W^E = G``.
    min_embedding_dim : The smallest ``d`` that attains the minimum.
    theorycheck.population.embedding_loss : The loss of an embedding ``W^E``.

    References
    ----------
    SPEC §4.1 D1-D4 (all minimisers, the tied and minimum-norm optima, the bias), §11.5 (general
    models); Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023,
    arXiv:2303.04245, Theorem 1.

    Examples
    --------
    The minimum is ``L* = 1 - 1/(tau v)``; the optimum's eigenvalues are ``1/a`` (topic contrasts)
    and ``1/(a+r)`` (on ``1_W``), so its rank is ``T``:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import optimal_embedding_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> res = optimal_embedding_gram(tm, mk)
    >>> res.status, round(res.fun, 12), res.rank
    (0, 0.75, 3)
    >>> round(res.eig_topic_contrast * mk.a, 12), round(res.eig_ones * (mk.a + mk.r), 12)
    (1.0, 1.0)

    The dense Schur-complement route (independent of the closed form) finds the same matrix:

    >>> schur = optimal_embedding_gram(tm, mk, method="schur")
    >>> schur.status, bool(np.allclose(schur.x, res.x.toarray(), atol=1e-12))
    (0, True)
    """
    check_models(tm, mk, general=True)
    return _optimal_embedding_gram(tm, mk, method, reg, tol, solver, coerce_options(GramOptions, options), d, bias)


@functools.singledispatch
def _optimal_embedding_gram(g: GeneralTopicModel, mk, method, reg, tol, solver, opts, d, bias) -> SolveResult:
    """Generic route, any topic-word matrix (SPEC §11.5): ``G* = Y (X^T Y)^+ Y^T`` or the SDP."""
    return general_optimal_embedding_gram(g, mk, method, reg, tol, solver, opts, d, bias)


@_optimal_embedding_gram.register
def _(tm: TopicModel, mk, method, reg, tol, solver, opts, d, bias) -> SolveResult:
    """Paper's model (SPEC §4.1): block closed form, Schur completion, SDP, factorized L-BFGS, exact rationals."""
    seed, init_scale, maxiter, max_bytes = opts.seed, opts.init_scale, opts.maxiter, opts.max_bytes
    reg, tol, options, d, bias, seed, init_scale = _validate(
        tm, mk, method, reg, tol, solver, opts.solver_options, d, bias, seed, init_scale, maxiter, max_bytes
    )
    t0 = time.perf_counter()
    if method == "rational":
        res = rational_embedding_result(tm, mk, bias=bias)
    elif method == "closed-form":
        res = _solve_closed_form(tm, mk, bias, tol, max_bytes)
    elif method == "schur":
        res = _solve_schur(tm, mk, bias, tol)
    elif method == "cvxpy":
        res = _solve_cvxpy(tm, mk, reg, solver or "CLARABEL", options, bias, tol)
    else:
        res = _solve_factorized(tm, mk, d, reg, seed, init_scale, {**LBFGS_OPTIONS, **options}, bias, tol)
    res.time = time.perf_counter() - t0
    return res


def _result(G, fun, res, reg, tol, method, *, backend=SUCCESS, detail="", nit=0, info=None, certificate=None):
    """Certify a candidate (shared :func:`certify`) and wrap it in a :class:`SolveResult`."""
    status, message, rel = certify(gram_checks(res, reg), tol, backend=backend, detail=detail)
    info = dict(info or {}, relative_residuals=rel, tol=tol)
    return SolveResult(G, fun, status, method, message, nit, 0.0, res, info, certificate)


# ----------------------------------------------------------------------------- methods
def _fits(shape, max_bytes) -> bool:
    try:
        check_alloc("dense re-check", shape, max_bytes=max_bytes)
    except ValueError:
        return False
    return True


def _solve_closed_form(tm, mk, bias, tol, max_bytes) -> SolveResult:
    G = block_closed_form_gram(tm, mk, bias)
    b = optimal_bias(G, tm, mk) if bias else None
    loss = block_gram_loss(G, tm, mk, bias_const(G, tm, mk) if bias else 0.0)
    ev = G.eigenvalues()
    res = {"loss_gap": loss - tm.min_value_loss(), "min_eig": G.min_eigenvalue()}
    res["gram_norm"] = float(np.sqrt(sum(lam * lam * m for lam, m in ev.values())))
    if tm.V1 <= DENSE_CHECK_MAX_V1 and _fits((2, tm.V1, tm.V1), max_bytes):  # independent dense recomputation
        Gd = G.toarray()
        with _kernel_threads(tm.V1):
            dense_loss = value_loss(Gd, tm, mk, b=b)
        res["loss_gap_dense"] = dense_loss - tm.min_value_loss()
        res["minimiser_violation"] = max(minimiser_residuals(Gd, tm, mk, b).values())
    info = {
        "same_topic": G.x,
        "different_topic": G.y,
        "rank": G.rank(),
        "eig_topic_contrast": ev["topic_contrast"][0],
        "eig_ones": ev["ones"][0],
        "trace": G.trace,
        "single_law": single_law(tm),
        "b": b,
    }
    return _result(G, loss, res, 0.0, tol, "closed-form", info=info)


def _solve_schur(tm, mk, bias, tol) -> SolveResult:
    Ur, Up, K, _, _ = range_split(tm, mk, bias)
    A = Ur.T @ K  # G on range(Sigma) x range(Sigma)
    asym = float(np.max(np.abs(A - A.T))) if A.size else 0.0
    A = (A + A.T) / 2
    Bt = Up.T @ K  # G on complement x range
    Dmin = Bt @ np.linalg.pinv(A, rcond=1e-12, hermitian=True) @ Bt.T  # least-trace PSD completion
    Q = np.hstack([Ur, Up])
    Gp = np.block([[A, Bt.T], [Bt, Dmin]])
    G = Q @ Gp @ Q.T
    G = (G + G.T) / 2
    b = mean_target(tm) - G @ mean_density(tm, mk) if bias else None
    res, loss = dense_gram_residuals(G, tm, mk, 0.0, b=b)
    res["schur_asymmetry"] = asym
    return _result(G, loss, res, 0.0, tol, "schur", info={"rank_sigma": Ur.shape[1], "b": b})


def _cvxpy_problem(cp, split, tm, reg, bias):
    """``(Gp, prob, Q, dual)``: the SDP in the basis ``Q = [range(Sigma), null(Sigma)]`` (``G = Q Gp Q^T``).

    ``reg = 0``: ``min tr Gp`` s.t. the first ``k = rank(Sigma)`` columns of ``Gp`` equal those fixed by
    ``G Sigma = C``; ``dual = (constraint, rows, cols, target)``. ``reg > 0``:
    ``min ||Gp Q^T Sigma^{1/2}||_F^2 - 2 <Q^T C Q, Gp> + const + reg tr Gp``; ``dual = None``.
    """
    Ur, Up, K, Sigma, C = split
    n, k = tm.V1, Ur.shape[1]
    Q = np.hstack([Ur, Up])
    Gp = cp.Variable((n, n), PSD=True)
    if reg == 0.0:
        A = Ur.T @ K
        target_full = np.vstack([(A + A.T) / 2, Up.T @ K])  # first k columns of Gp
        rows, cols = np.nonzero(np.tril(np.ones((n, n)))[:, :k])  # each symmetric entry once
        target = target_full[rows, cols]
        cons = cp.vec(Gp, order="F")[cols * n + rows] == target
        return Gp, cp.Problem(cp.Minimize(cp.trace(Gp)), [cons]), Q, (cons, rows, cols, target)
    lam, U = np.linalg.eigh(Sigma)
    ShQ = Q.T @ (U * np.sqrt(np.clip(lam, 0, None)))
    const = 1.0 - (1.0 / tm.n_words if bias else 0.0)  # 1 - ||u||^2 with the optimal bias
    obj = cp.sum_squares(Gp @ ShQ) - 2 * cp.sum(cp.multiply(Q.T @ C @ Q, Gp)) + const + reg * cp.trace(Gp)
    return Gp, cp.Problem(cp.Minimize(obj)), Q, None


def _dual_certificate(dual, G, n) -> dict:
    """Duality gap and dual infeasibility of ``min tr Gp s.t. Gp[i, j] = target`` recomputed by us.

    Dual: ``max <lam, target>`` s.t. ``Z = I - sum lam_k E_k >= 0``, ``E_k = (e_i e_j^T + e_j e_i^T)/2``.
    cvxpy returns ``y = -lam`` for ``expr == target`` constraints (checked on 2 x 2 problems with
    known multipliers); ``Z`` and the gap are recomputed here.
    """
    cons, rows, cols, target = dual
    lamv = -np.asarray(cons.dual_value, dtype=float).reshape(-1)
    S = np.zeros((n, n))
    np.add.at(S, (rows, cols), lamv / 2)
    np.add.at(S, (cols, rows), lamv / 2)
    dual_obj = float(lamv @ target)
    return {
        "dual_infeasibility": max(0.0, -float(np.linalg.eigvalsh(np.eye(n) - S)[0])),
        "duality_gap": float(np.trace(G) - dual_obj),
        "dual_objective": dual_obj,
    }


def _solve_cvxpy(tm, mk, reg, solver, options, bias, tol) -> SolveResult:
    cp = cvxpy()
    info = {"solver": solver}
    split = range_split(tm, mk, bias)
    if reg == 0.0 and split[0].shape[1] == 0:
        # no optimality constraint at all (the bias alone is optimal): G = 0, solver not called
        G = np.zeros((tm.V1, tm.V1))
        b = mean_target(tm) if bias else None
        res, loss = dense_gram_residuals(G, tm, mk, reg, b=b)
        res.update(dual_infeasibility=0.0, duality_gap=0.0)
        return _result(G, loss, res, reg, tol, "cvxpy", detail="trivial problem: G = 0", info={**info, "b": b})
    Gp, prob, Q, dual = _cvxpy_problem(cp, split, tm, reg, bias)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            prob.solve(solver=solver, **options)
        except cp.error.SolverError as exc:
            status, message, _ = certify({}, tol, backend=SOLVER_FAILURE, detail=f"cvxpy SolverError: {exc}")
            return SolveResult(None, math.nan, status, "cvxpy", message, info=info)
    info.update(backend_status=prob.status, solve_time=prob.solver_stats.solve_time)
    nit = int(prob.solver_stats.num_iters or 0)
    backend = cvxpy_status(prob.status)
    if Gp.value is None:
        status, message, _ = certify({}, tol, backend=backend or SOLVER_FAILURE, detail=f"cvxpy status {prob.status!r}")
        return SolveResult(None, math.nan, status, "cvxpy", message, nit, info=info)
    G = Q @ Gp.value @ Q.T
    G = (G + G.T) / 2
    info["b"] = mean_target(tm) - G @ mean_density(tm, mk) if bias else None
    res, loss = dense_gram_residuals(G, tm, mk, reg, b=info["b"])
    cert = None
    if dual is not None:
        cert = _dual_certificate(dual, G, tm.V1)
        res.update(dual_infeasibility=cert["dual_infeasibility"], duality_gap=cert["duality_gap"])
        info["dual_objective"] = cert["dual_objective"]
    info["primal_objective"] = float(prob.value)
    fun = loss + reg * float(np.trace(G))
    return _result(G, fun, res, reg, tol, "cvxpy", backend=backend, nit=nit, info=info, certificate=cert)


def _serial_blas(n_vars: int):
    """One BLAS thread for L-BFGS on fewer than 200,000 variables (scipy's L-BFGS-B calls BLAS on
    vectors of length ``n_vars``; on small problems thread start-up costs more than it gains)."""
    return small_problem(n_vars, 200_000, blas=True)


def _lbfgs(tm, mk, W0, reg, bias, options):
    """L-BFGS-B over ``W^E`` (and ``b`` when ``bias``) on the exact population loss."""
    shape, nW = W0.shape, W0.size
    z0 = np.r_[W0.ravel(), np.zeros(tm.V1)] if bias else W0.ravel()

    def fg(z):
        if bias:
            out = embedding_loss_grad(z[:nW].reshape(shape), tm, mk, b=z[nW:], reg=reg)
            return out.loss, np.r_[out.dW_E.ravel(), out.db]
        out = embedding_loss_grad(z.reshape(shape), tm, mk, reg=reg)
        return out.loss, out.dW_E.ravel()

    with _kernel_threads(tm.V1), _serial_blas(z0.size):
        opt = minimize(fg, z0, jac=True, method="L-BFGS-B", options=options)
    return opt, opt.x[:nW].reshape(shape), (opt.x[nW:].copy() if bias else None), fg


def _solve_factorized(tm, mk, d, reg, seed, init_scale, options, bias, tol) -> SolveResult:
    rng = np.random.default_rng(seed)
    opt, W, b, fg = _lbfgs(tm, mk, init_scale * rng.standard_normal((d, tm.V1)), reg, bias, options)
    G = W.T @ W
    res, loss = dense_gram_residuals(G, tm, mk, reg, b=b, identifiable=True)
    res["grad_norm"] = float(np.linalg.norm(fg(opt.x)[1]))
    if tm.V1 <= DENSE_CHECK_MAX_V1:
        Gc = block_closed_form_gram(tm, mk, bool(bias)).toarray()
        res["dist_closed_form_full"] = float(np.max(np.abs(G - Gc)))
    info = {
        "W_E": W,
        "b": b,
        "d": d,
        "mask_embedding_norm": float(np.linalg.norm(W[:, 0])),
        "scipy_message": str(opt.message),
    }
    status, _, _ = certify(gram_checks(res, reg), tol)
    # an uncertified point at the iteration limit is reported as such (not as a wrong answer)
    backend = ITERATION_LIMIT if (status == NOT_CERTIFIED and opt.nit >= options["maxiter"]) else SUCCESS
    fun = loss + reg * float(np.sum(W * W))
    detail = "" if status == SUCCESS else f"L-BFGS: {opt.message}"
    return _result(G, fun, res, reg, tol, "factorized", backend=backend, detail=detail, nit=int(opt.nit), info=info)
