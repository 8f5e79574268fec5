"""Optimal attention scores for ANY topic-word matrix (SPEC §11.4), on the exact population loss.

Two searches, both minimising :func:`theorycheck.population.attention_loss` of a
:class:`~theorycheck.models.GeneralTopicModel` with a frozen value matrix ``W^V``:

- ``method="family"`` (default): the best scores in a linear family ``S(c) = sum_k c_k B_k`` the
  user gives, by default ``S = alpha I_w + beta G`` with ``I_w`` the identity on words (0 on
  [MASK]) and ``G`` the co-topic word similarity (:func:`cotopic_matrix`). The gradient is the
  chain rule ``dL/dc_k = <dL/dS, B_k>`` on :func:`theorycheck.population.attention_loss_grad`;
  a coarse grid over the first two coefficients, then L-BFGS-B in the box.
- ``method="lbfgs"``: unrestricted ``S`` (``V1^2`` numbers) by L-BFGS on the exact loss and its
  gradient, started at the family optimum (small sizes: ``O(C(T, tau) V1^3)`` per evaluation).

The label family ``alpha I_w + beta Z`` (``options.family="label"``, ``Z`` the same-label indicator of the
SPEC §11.6 labels) and the co-topic family with the stage-1 ``W^V`` run on the structured evaluator of SPEC
§11.8 (:mod:`._structured`: no ``V1 x V1`` array, corpus-sized vocabularies; the co-topic family by pair sums and
a profile search over ``beta``, SPEC §11.8(a), :mod:`._profile`); everything else on the dense evaluator, whose
arrays are checked against the memory limit before any work.

For the paper's model ``G`` is the within-topic all-ones block, so the family is the (alpha, beta)
family of SPEC §4.3 reparametrised (``alpha_sym = alpha + beta``, ``beta_sym = beta``) and its
optimum equals :func:`theorycheck.solvers.optimal_attention`'s.

The stage-1 ``W^V`` (``value="stage1"``; ``"block"`` is its alias) is the minimum-norm minimiser
``C Sigma^+`` of the uniform-attention loss (SPEC §11.2, §11.3), from
:func:`theorycheck.solvers.optimal_value_matrix` (closed form).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from scipy import optimize

from ..._memory import check_alloc
from ..._validate import check_array, check_choice
from ...models import Masking, check_models
from ...population import attention_loss, attention_loss_grad
from ...population._attention_dense import _DENSE_ARRAYS
from ...population._attention_structured import check_family_scores
from .._certify import ITERATION_LIMIT, ON_BOUNDARY, SUCCESS, check_contract
from .._certify import certify as certify_residuals
from .._options import ValueOptions
from .._result import SolveResult
from ..value._solve import DEFAULT_TOL as VALUE_TOL
from ..value._solve import _optimal_value_matrix
from ._interval_general import attach_general_interval, check_general_certify
from ._structured import project_gradient, settle_at_infinity, structured_family, structured_solve

__all__ = [
    "solve_family",
    "cotopic_matrix",
    "stage1_value_matrix",
    "GENERAL_ATTENTION_METHODS",
]

GENERAL_ATTENTION_METHODS = ("family", "lbfgs", "grid")
DEFAULT_TOL = 1e-6
#: Bounds of every family coefficient, and the default coarse grid over the first two.
FAMILY_BOX = (-60.0, 60.0)
FAMILY_GRID = ((-10.0, 30.0), (-20.0, 20.0))
_N_GRID = 7
_N_STARTS = 3


# ----------------------------------------------------------------------------- matrices
def cotopic_matrix(g) -> np.ndarray:
    """Co-topic word similarity ``G``, shape ``(V1, V1)`` (SPEC §11.4).

    ``G_{ww'} = (phi^T phi)_{ww'} / sqrt((phi^T phi)_{ww} (phi^T phi)_{w'w'})`` on words (unit
    diagonal), 0 in the [MASK] row and column. For the paper's model: 1 within a topic, 0 across.
    Any topic model (the paper's materialises its ``phi``).

    Parameters
    ----------
    g : GeneralTopicModel or TopicModel
        The topic model (its topic-word matrix ``phi``, shape ``(T, n_words)``).

    Returns
    -------
    ndarray, shape (V1, V1)
        The cosine similarity of the words' topic profiles (columns of ``phi``), symmetric, in
        ``[0, 1]``, 0 on [MASK].

    Raises
    ------
    ValueError
        The ``(V1, V1)`` arrays exceed the memory limit.

    See Also
    --------
    optimal_attention : Uses ``alpha I_w + beta G`` as the default score family of a general model.
    stage1_value_matrix : The frozen ``W^V`` of that search.

    References
    ----------
    SPEC §11.4 (the co-topic family), §11.8(a) (its structured evaluator).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, TopicModel
    >>> from theorycheck.solvers import cotopic_matrix
    >>> cotopic_matrix(TopicModel(T=2, v=2, tau=1))
    array([[0., 0., 0., 0., 0.],
           [0., 1., 1., 0., 0.],
           [0., 1., 1., 0., 0.],
           [0., 0., 0., 1., 1.],
           [0., 0., 0., 1., 1.]])
    >>> G = cotopic_matrix(GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, tau=2))
    >>> np.round(G[1, 1:], 4), bool(np.allclose(G, G.T))  # overlapping topics: cross-topic similarity > 0
    (array([1.    , 1.    , 0.1579, 0.1579, 0.1579, 0.1579]), True)
    """
    check_models(g, general=True)
    return _cotopic(g)


def _cotopic(g) -> np.ndarray:
    check_alloc("cotopic_matrix", (3, g.V1, g.V1), alternative="a smaller vocabulary")
    P = g.phi.T @ g.phi
    d = np.sqrt(np.diag(P))
    G = np.zeros((g.V1, g.V1))
    G[1:, 1:] = P / np.outer(d, d)
    return G


def stage1_value_matrix(g, mk: Masking, *, max_bytes=None) -> np.ndarray:
    """Minimum-norm stage-1 ``W^V = C Sigma^+`` of the uniform-attention loss, dense (SPEC §11.2, §11.3).

    From :func:`theorycheck.solvers.optimal_value_matrix` (``method="closed-form"``, the general
    model's low-rank closed form ``W° Pi``; the block closed form of SPEC §4.2 for the paper's model).

    Parameters
    ----------
    g : GeneralTopicModel or TopicModel
        The topic model.
    mk : Masking
        Masking probabilities, ``mk.p_m > 0``.
    max_bytes : int, optional
        Memory limit of the dense ``(V1, V1)`` array (default ``$THEORYCHECK_MAX_BYTES`` or half the
        available memory).

    Returns
    -------
    ndarray, shape (V1, V1)
        The dense ``W^V = C Sigma^+``.

    Raises
    ------
    ValueError
        ``mk.p_m = 0`` or the array exceeds ``max_bytes``.

    See Also
    --------
    optimal_value_matrix : The certified solve (structured results, residuals, other methods).
    optimal_attention : Freezes this ``W^V`` (``value="stage1"``).
    cotopic_matrix : The default attention score family's similarity.

    References
    ----------
    SPEC §4.2 (the paper's model), §11.2, §11.3 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.solvers import optimal_value_matrix, stage1_value_matrix
    >>> g, mk = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, tau=2), Masking()
    >>> W = stage1_value_matrix(g, mk)
    >>> W.shape, bool(np.allclose(W, optimal_value_matrix(g, mk).x)), int(np.linalg.matrix_rank(W))
    ((7, 7), True, 3)
    """
    check_models(g, mk, general=True)
    return _stage1_dense(g, mk, max_bytes)


def _stage1_dense(g, mk, max_bytes):
    res = _optimal_value_matrix(
        g, mk, "closed-form", 0.0, VALUE_TOL, None, ValueOptions(dense=True, max_bytes=max_bytes)
    )
    return np.asarray(res.x, dtype=np.float64)


def _value(g, mk, value):
    if isinstance(value, str):
        check_choice("value", value, ("stage1", "block", "identity"))
        if value == "identity":
            W = np.eye(g.V1)
            W[0, 0] = 0.0
            return W, "identity"
        return _stage1_dense(g, mk, None), "stage1"
    return check_array("value", value, shape=(g.V1, g.V1)), "given"


def _basis(g, family):
    """Family basis ``[B_1, ..., B_k]``, each ``(V1, V1)``, and its name."""
    I_w = np.eye(g.V1)
    I_w[0, 0] = 0.0
    if family is None or (isinstance(family, str) and family == "co-topic"):
        return [I_w, _cotopic(g)], "alpha I_w + beta G (co-topic)"
    if isinstance(family, str) and family == "label":
        z = g.dominant_topic()
        Z = np.zeros((g.V1, g.V1))
        Z[1:, 1:] = z[:, None] == z[None, :]
        return [I_w, Z], "alpha I_w + beta Z (labels)"
    if isinstance(family, str):
        raise ValueError(
            f"family must be 'co-topic', 'label', a word-similarity matrix or a list of basis matrices, got {family!r}"
        )
    if isinstance(family, (list, tuple)):
        if not family:
            raise ValueError("family: a list of basis matrices needs at least one matrix")
        return [check_array(f"family[{i}]", B, shape=(g.V1, g.V1)) for i, B in enumerate(family)], "sum_k c_k B_k"
    arr = np.asarray(family)
    if arr.shape == (g.n_words, g.n_words):
        G = np.zeros((g.V1, g.V1))
        G[1:, 1:] = check_array("family", arr, shape=(g.n_words, g.n_words))
        return [I_w, G], "alpha I_w + beta G (given)"
    return [I_w, check_array("family", family, shape=(g.V1, g.V1))], "alpha I_w + beta G (given)"


def _check_box(box, k):
    if box is None:
        return [FAMILY_BOX] * k
    arr = np.asarray(box, dtype=float)
    if arr.shape != (k, 2) or not np.all(np.isfinite(arr)) or not np.all(arr[:, 0] < arr[:, 1]):
        raise ValueError(
            f"box must be {k} finite (lo, hi) pairs with lo < hi (one per family coefficient), got {box!r}"
        )
    return [tuple(map(float, r)) for r in arr]


def _check_structured_box(box):
    """:func:`_check_box` for the structured route, whose evaluator takes scores in the range of
    :func:`theorycheck.population._attention_structured.check_family_scores` (checked at the box's corners, which
    hold the extremes of ``beta``, ``alpha`` and ``alpha + beta``)."""
    box = _check_box(box, 2)
    for a, b in itertools.product(*box):
        check_family_scores(a, b, "optimal_attention: options.box")
    return box


# ----------------------------------------------------------------------------- objective
class _Objective:
    """``S -> (L(S), dL/dS)`` on the exact population loss with frozen ``W``; counts evaluations."""

    def __init__(self, g, mk, W, loss, mask_keys, n_theta, seed):
        self.args = (W, g, mk)
        self.kw = dict(mask_keys=mask_keys, loss=loss)
        if g.prior == "dirichlet":  # common random numbers: one fixed sample of theta
            self.kw.update(n_theta=n_theta, seed=seed)
        self.nfev = 0

    def __call__(self, S):
        self.nfev += 1
        W, g, mk = self.args
        r = attention_loss_grad(S, W, g, mk, **self.kw)
        return float(r.loss), r.dS  # type: ignore[arg-type]  # kw has no n_sets: the loss is a float

    def loss(self, S):
        """The loss alone (no gradient: a third of the work)."""
        self.nfev += 1
        W, g, mk = self.args
        return float(attention_loss(S, W, g, mk, **self.kw))  # type: ignore[arg-type]  # kw has no n_sets: a float


def _family_starts(obj, basis, n_grid):
    """Starting points: the :data:`_N_STARTS` best points of a coarse grid over the first two coefficients."""
    k = len(basis)
    if k < 2 or n_grid < 2:
        return [np.zeros(k)]
    pts: list[tuple[float, int, np.ndarray]] = []
    for a in np.linspace(*FAMILY_GRID[0], n_grid):
        for b in np.linspace(*FAMILY_GRID[1], n_grid):
            c = np.zeros(k)
            c[:2] = a, b
            pts.append((obj.loss(_combine(c, basis)), len(pts), c))
    return [c for _, _, c in sorted(pts, key=lambda t: t[:2])[:_N_STARTS]]


def _combine(c, basis):
    return sum(ck * B for ck, B in zip(c, basis))


def _check_start(x0, box):
    """``options.x0`` of the family method: one start per coefficient, inside the box (``None`` stays ``None``)."""
    if x0 is None:
        return None
    c = check_array("x0", x0, shape=(len(box),))
    lo, hi = np.array(box).T
    if np.any(c < lo) or np.any(c > hi):
        raise ValueError(f"x0 must lie in the box {box}, got {c.tolist()}")
    return c


def _solve_family(obj, basis, box, n_grid, options, x0=None):
    def fg(c):
        L, dS = obj(_combine(c, basis))
        return L, np.array([float(np.vdot(dS, B)) for B in basis])

    opts = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 1000, **options}
    runs = [optimize.minimize(fg, c0, jac=True, method="L-BFGS-B", bounds=box, options=opts)
            for c0 in ([x0] if x0 is not None else _family_starts(obj, basis, n_grid))]  # fmt: skip
    r = min(runs, key=lambda rr: rr.fun)
    c = np.asarray(r.x, dtype=float)
    L, grad = fg(c)
    proj, at_boundary = project_gradient(c, grad, box)  # KKT: outward gradient allowed
    ray = None
    if len(basis) == 2 and not at_boundary:  # a plateau towards a limit at infinity (SPEC §11.8)
        ray = settle_at_infinity(lambda x: obj.loss(_combine(x, basis)), c, L, box)
    return c, L, proj, at_boundary or ray is not None, r, ray


def _solve_free(obj, S0, options):
    V1 = S0.shape[0]

    def fg(x):
        L, dS = obj(x.reshape(V1, V1))
        return L, dS.ravel()

    opts = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 500, **options}
    r = optimize.minimize(fg, S0.ravel(), jac=True, method="L-BFGS-B", options=opts)
    S = np.asarray(r.x, dtype=float).reshape(V1, V1)
    L, dS = obj(S)
    return S, L, dS, r


def _certify(gnorm, tol, backend, ray):
    """``(status, message, relative residuals)`` of a family result: the gradient residual, the backend's status and,
    for a limit at infinity found by :func:`._structured.settle_at_infinity`, the ray in the message."""
    return certify_residuals({"gradient": (gnorm, 1.0)}, tol, backend=backend, detail=_ray_detail(ray))


def _ray_detail(ray) -> str:
    """The status message's detail for a limit at infinity (``""`` without one)."""
    if ray is None:
        return ""
    a, b = ray["from"]
    return (
        f"the infimum is a limit at infinity along (alpha, beta) + t {tuple(ray['direction'])}, t -> inf: the loss "
        f"falls towards the solver's point x = ({a:.6g}, {b:.6g}) and does not rise beyond it to the search box: x is "
        "a point of a plateau within float resolution of the infimum, not an attained optimum"
    )


# ----------------------------------------------------------------------------- public
def solve_family(g, mk: Masking, method, reg, tol, solver, opts, value, loss) -> SolveResult:
    """The generic route of :func:`theorycheck.solvers.optimal_attention` (SPEC §11.4), any topic model.

    ``method``: ``"family"`` (``"grid"`` is its alias): the best ``S = sum_k c_k B_k`` (default
    ``alpha I_w + beta G``), from the coarse grid or, given ``options.x0`` (one number per coefficient), from
    that start alone; ``"lbfgs"``: unrestricted ``S`` by L-BFGS, started at ``options.x0`` (``(V1, V1)``) or
    at the family optimum. ``value``: ``"stage1"`` (``"block"`` is its alias; the minimum-norm
    stage-1 ``C Sigma^+``, :func:`stage1_value_matrix`), ``"identity"`` (``W_00 = 0``) or a
    ``(V1, V1)`` matrix. The options read here (:class:`~theorycheck.solvers.AttentionOptions`):
    ``n_grid`` (default 7), ``box``, ``family``, ``mask_keys``, ``n_theta``, ``seed``, ``x0``,
    ``solver_options`` (L-BFGS-B), ``certify`` / ``certify_options`` (``tol``, ``max_boxes``: the interval
    certificate on the structured route, :mod:`._interval_general`: the label family over ``R^2``, the co-topic
    family over the search box (small models); refused, before any work, for given matrix families, the
    cross-entropy, the Dirichlet prior and ``method="lbfgs"``).

    Returns a :class:`SolveResult`: ``x`` the coefficients (family) or ``S`` (lbfgs); ``fun`` the
    exact loss; residual ``gradient_norm`` (projected on the box for the family); ``info``: ``S``,
    ``W``, ``coefficients``, ``alpha``, ``beta`` (family), ``loss_uniform`` (``S = 0``),
    ``loss_family``, ``family``, ``value_kind``, ``at_boundary``, ``nfev``; structured route with sampled laws:
    ``x_cov``, ``x_stderr`` (the optimum's sampling covariance, :func:`._structured.optimum_covariance`).
    ``limit_at_infinity``: ``None``, or (two coefficients) the ray found by :func:`._structured.settle_at_infinity`
    along which the loss falls to a limit at infinity from the point where L-BFGS-B stopped (its gradient, ``~ e^beta``
    on the label family's ``beta -> -inf`` plateau, below any tolerance at a finite, arbitrary point); ``x`` is then
    that point (within float resolution of the infimum, not an attained optimum), ``at_boundary`` True, the status 3.
    Status 0 / 1 (iteration limit) / 3 (a coefficient on the box, or an infimum at infinity: not attained) / 4
    (gradient above ``tol``).
    """
    mk.require_masked_positions("optimal_attention")
    check_choice("method", method, GENERAL_ATTENTION_METHODS)
    tol, options = check_contract(method, tol, solver, opts.solver_options, uses_solver=False, uses_options=True,
                                  stacklevel=8)  # fmt: skip
    n_grid = _N_GRID if opts.n_grid is None else opts.n_grid
    n_theta, seed, x0, mask_keys = opts.n_theta, (0 if opts.seed is None else opts.seed), opts.x0, opts.mask_keys
    box, family = opts.box, opts.family
    kind = "lbfgs" if method == "lbfgs" else "family"
    if isinstance(value, str):
        check_choice("value", value, ("stage1", "block", "identity"))
    t0 = time.perf_counter()
    fam = structured_family(family, value, loss) if kind == "family" else None
    copts = None if opts.certify is None else check_general_certify(g, opts, method, fam, value, loss)  # no work yet
    if fam is not None:  # SPEC §11.8: no V1 x V1 array on this route
        box = _check_structured_box(box)
        c, Lf, grad, at_boundary, r, info, W, ev = structured_solve(
            g, mk, fam, value, loss, mask_keys, n_theta, seed, box, n_grid, FAMILY_GRID, options, _check_start(x0, box)
        )
        info.update(coefficients=c.tolist(), loss_family=Lf, at_boundary=at_boundary, loss_kind=loss)
        info.update(alpha=float(c[0]), beta=float(c[1]))
        backend = ON_BOUNDARY if at_boundary else (ITERATION_LIMIT if r.status == 1 else SUCCESS)
        gnorm = float(np.max(np.abs(grad)))
        res = SolveResult(c, Lf, 0, "family (structured): grid + L-BFGS-B", nit=int(r.nit),
                          residuals={"gradient_norm": gnorm})  # fmt: skip
        res.status, res.message, rel = _certify(gnorm, tol, backend, info["limit_at_infinity"])
        info.update(loss=Lf, gap_to_uniform=info["loss_uniform"] - Lf, relative_residuals=rel, tol=tol)
        res.info = info
        if copts is not None:
            attach_general_interval(res, g, mk, W, mask_keys, copts, ev, fam, box)
        res.time = time.perf_counter() - t0
        return res
    check_alloc("optimal_attention (dense general route)", (_DENSE_ARRAYS, g.V1, g.V1),
                alternative="method='family' with options.family='label' or 'co-topic' and value='stage1' "
                "(the structured route, SPEC §11.8)")  # fmt: skip
    W, value_kind = _value(g, mk, value)
    basis, fam_name = _basis(g, family)
    box = _check_box(box, len(basis))
    obj = _Objective(g, mk, W, loss, bool(mask_keys), n_theta, seed)
    start = _check_start(x0, box) if kind == "family" else None
    c, Lf, grad, on_box, r, ray = _solve_family(obj, basis, box, n_grid, options if kind == "family" else {}, start)
    info = dict(coefficients=c.tolist(), loss_family=Lf, family=fam_name, value_kind=value_kind, W=W)
    info.update(loss_uniform=obj.loss(np.zeros((g.V1, g.V1))), at_boundary=on_box, loss_kind=loss)
    info.update(route="dense", limit_at_infinity=ray if kind == "family" else None)  # lbfgs: the unrestricted S
    if len(basis) == 2:
        info.update(alpha=float(c[0]), beta=float(c[1]))
    backend = ON_BOUNDARY if on_box else (ITERATION_LIMIT if r.status == 1 else SUCCESS)
    x, L, nit, meth = c, Lf, int(r.nit), "family: grid + L-BFGS-B"
    S = _combine(c, basis)
    if kind == "lbfgs":
        S0 = S if x0 is None else check_array("x0", x0, shape=(g.V1, g.V1))
        S, L, grad, r = _solve_free(obj, S0, options)
        x, nit, meth, backend = S, int(r.nit), "unrestricted: L-BFGS", (ITERATION_LIMIT if r.status == 1 else SUCCESS)
    gnorm = float(np.max(np.abs(grad)))
    res = SolveResult(x, L, 0, meth, nit=nit, residuals={"gradient_norm": gnorm})
    res.status, res.message, rel = _certify(gnorm, tol, backend, info["limit_at_infinity"])
    info.update(S=S, loss=L, gap_to_uniform=info["loss_uniform"] - L, nfev=obj.nfev, relative_residuals=rel, tol=tol)
    res.info = info
    res.time = time.perf_counter() - t0
    return res
