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

Every result carries residuals recomputed by our own code: the stationarity norm
``||W (Sigma + reg I) - C||_F``, the loss and (``reg = 0``) the gap to the predicted minimum and the
component of the rows of ``W`` outside ``range(Sigma)`` (zero iff a minimiser is *the* minimum-norm
one). Dense answers are checked with the block-sum kernel of :func:`~theorycheck.population.value_loss_grad`;
block answers in the O(1) topic-symmetric algebra (:mod:`theorycheck.solvers._symmetric`).

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

import math
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validate import check_array, check_choice, check_real, warn_ignored
from ..config import Masking, TopicModel, check_models
from ..population._moments import moments
from ..population._value_loss import value_loss_grad
from ._result import STATUS_MESSAGES, SolveResult
from ._symmetric import TokenMatrixShape, TopicSym

__all__ = [
    "BlockValueMatrix",
    "optimal_value_matrix",
    "minimiser_violation",
    "MinimiserViolation",
    "value_block_constants",
    "VALUE_METHODS",
]

VALUE_METHODS = ("closed-form", "cvxpy", "lstsq")

#: ``dense=None`` returns a dense array up to this V1 (``V1^2`` doubles = 32 MB), a block object above.
DENSE_DEFAULT_MAX_V1 = 2001
#: Largest V1 for which a dense array is ever built (``toarray`` / ``dense=True``).
DENSE_MAX_V1 = 20001
#: Largest V1 for the dense methods ("lstsq", "cvxpy"): they need the dense moments.
GENERIC_MAX_V1 = 20001


# =============================================================================== block matrix
@dataclass(frozen=True)
class BlockValueMatrix(TokenMatrixShape):
    """A block-constant ``V1 x V1`` value matrix stored by its three entries.

    ``W[0, :] = 0``; for words ``w, w'``: ``W[w, w'] = A`` if ``t(w) = t(w')`` else ``B0``;
    ``W[w, 0] = gamma``. Supports ``W @ x`` for ``x`` of shape ``(V1,)`` or ``(V1, k)`` in
    ``O(V1 k)``, :meth:`toarray` (guarded) and :attr:`fro_norm`.
    """

    A: float
    B0: float
    gamma: float
    T: int
    v: int

    @property
    def fro_norm(self) -> float:
        """``||W||_F = sqrt(T v [v A^2 + (T-1) v B0^2 + gamma^2])``."""
        T, v = self.T, self.v
        return math.sqrt(T * v * (v * self.A**2 + (T - 1) * v * self.B0**2 + self.gamma**2))

    def toarray(self) -> np.ndarray:
        """The dense ``(V1, V1)`` array; raises ``ValueError`` above ``V1 = 20001``."""
        if self.V1 > DENSE_MAX_V1:
            raise ValueError(
                f"toarray would allocate a {self.V1} x {self.V1} array (V1 = T*v+1 = {self.V1} > {DENSE_MAX_V1}); "
                "use W @ x or the block entries A, B0, gamma"
            )
        topics = (np.arange(1, self.V1) - 1) // self.v
        W = np.zeros((self.V1, self.V1))
        W[1:, 1:] = np.where(topics[:, None] == topics[None, :], self.A, self.B0)
        W[1:, 0] = self.gamma
        return W

    def __array__(self, dtype=None, copy=None):
        arr = self.toarray()
        return arr if dtype is None else arr.astype(dtype)

    def __matmul__(self, x):
        x = np.asarray(x, dtype=float)
        if x.ndim not in (1, 2) or x.shape[0] != self.V1:
            raise ValueError(f"x must have shape (V1,) or (V1, k) with V1 = {self.V1}, got {x.shape}")
        words = x[1:]
        block = words.reshape((self.T, self.v) + x.shape[1:]).sum(axis=1)  # (T,) or (T, k)
        total = block.sum(axis=0)
        out = np.zeros_like(x)
        word_out = self.B0 * total + (self.A - self.B0) * block + self.gamma * x[0]
        out[1:] = np.repeat(word_out, self.v, axis=0)
        return out

    def __repr__(self) -> str:
        return (
            f"BlockValueMatrix(A={self.A:.6g}, B0={self.B0:.6g}, gamma={self.gamma:.6g}, "
            f"T={self.T}, v={self.v}, shape=({self.V1}, {self.V1}))"
        )


# =============================================================================== validation
def _check_models(tm, mk):
    check_models(tm, mk)
    mk.require_masked_positions("the stage-1 value problem")


def _constant_context(tm: TopicModel, mk: Masking) -> bool:
    """True when ``m_S`` is the same for every document (``tau = T``, ``T = 1`` or ``a = 0``)."""
    if mk.a <= 0.0 or tm.T == 1:
        return True
    return tm.prior == "uniform-tau" and tm.tau == tm.T


def predicted_min_loss(tm: TopicModel, mk: Masking) -> float:
    """Minimum of the unregularised loss: ``1 - E||p||^2``, or ``1 - 1/(T v)`` when ``a = 0``."""
    if mk.a <= 0.0:
        return 1.0 - 1.0 / tm.n_words
    return tm.min_value_loss()


# =============================================================================== closed forms
def value_block_constants(tm: TopicModel, mk: Masking, reg: float = 0.0) -> tuple[float, float, float, str]:
    """``(A, B0, gamma, case)`` of the optimal block-constant ``W^V`` (see the module docstring).

    ``case`` is ``"informative"``, ``"constant-context"`` (``reg = 0`` only) or ``"ridge"``.
    With ``T = 1`` there are no cross-topic entries and ``B0`` is reported as 0.
    """
    _check_models(tm, mk)
    reg = check_real("reg", reg, low=0.0)
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    n = T * v
    if reg > 0.0:
        A, B0, g = _ridge_constants(tm, mk, reg)
        return A, B0, g, "ridge"
    if _constant_context(tm, mk):
        mu2 = (a + r) ** 2 / n + q * q
        A = (a + r) / (n * n * mu2)
        return A, (A if T > 1 else 0.0), q / (n * mu2), "constant-context"
    B0 = -(r * (a + r) + n * q * q) / (a * n * ((a + r) ** 2 + n * q * q))
    A = B0 + 1.0 / (a * v)
    gamma = q * (n * B0 + 1.0 / a) / (a + r)
    return A, B0, gamma, "informative"


def _theta_spread(tm: TopicModel) -> float:
    """``c = E||theta||^2 - 1/T >= 0`` without cancellation: ``(T - tau)/(tau T)`` or ``(T-1)/(T (T alpha + 1))``."""
    T = tm.T
    if tm.prior == "uniform-tau":
        return (T - tm.tau) / (tm.tau * T)
    return (T - 1) / (T * (T * tm.alpha + 1.0))


def _ridge_constants(tm: TopicModel, mk: Masking, reg: float) -> tuple[float, float, float]:
    """Exact minimiser of the reduced ridge objective (module docstring), ``x = (A, B0, gamma)``.

    With ``beta = e_alpha + e_d / T`` and ``c = E||theta||^2 - 1/T`` the loss part of the reduced
    objective is ``v T (beta^T x)^2 + v c (e_d^T x)^2 - 2 (beta + c e_d)^T x + 1`` and the penalty is
    ``reg x^T D x`` with ``D = T v diag(v, (T-1) v, 1)`` (so ``x^T D x = ||W||_F^2``). In
    ``z = D^{1/2} x`` this is ``||F^T z||^2 - 2 (F w)^T z + reg ||z||^2`` with the 3 x 2 factor
    ``F = D^{-1/2} [sqrt(v T) beta, sqrt(v c) e_d]`` and ``w = (1/sqrt(v T), sqrt(c / v))``, whose
    minimiser is ``z = U diag(s / (s^2 + reg)) V^T w`` from the SVD ``F = U diag(s) V^T`` (zero
    singular values dropped: rank 1 in the constant-context case). Working with the factor rather
    than the 3 x 3 Hessian avoids squaring its condition number (large when ``tau`` is close to T),
    and the formula is continuous at ``reg = 0``, where it is the minimum-norm solution.
    """
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    c = _theta_spread(tm)
    e_d = np.array([a, -a, 0.0])
    e_al = np.array([r / T, a + r * (T - 1) / T, q])
    beta = e_al + e_d / T
    F = np.column_stack([math.sqrt(v * T) * beta, math.sqrt(v * c) * e_d])
    w = np.array([1.0 / math.sqrt(v * T), math.sqrt(c / v)])
    dvec = T * v * np.array([v, (T - 1) * v, 1.0])
    keep = [0, 1, 2] if T > 1 else [0, 2]  # T = 1: no cross-topic entries, B0 does not exist (reported as 0)
    dh = np.sqrt(dvec[keep])
    Ft = F[keep] / dh[:, None]
    U, sv, Vt = np.linalg.svd(Ft, full_matrices=False)
    ok = sv > 1e-13 * sv.max()
    z = U[:, ok] @ ((sv[ok] / (sv[ok] ** 2 + reg)) * (Vt[ok] @ w))
    x = np.zeros(3)
    x[keep] = z / dh
    return float(x[0]), float(x[1]), float(x[2])


# =============================================================================== structured moments
def _hat_moments(tm: TopicModel, mk: Masking) -> tuple[TopicSym, TopicSym]:
    """``(Sigma_hat, C_hat)`` with ``Sigma = Q Sigma_hat Q^T``, ``C = Q C_hat Q^T`` (see :mod:`._symmetric`).

    Built from ``E[theta theta^T]`` (``tm.pair_moments``); entries of ``S = E[tt^T]`` in the
    indicator basis are scaled by ``D^{1/2} = diag(sqrt v, ..., sqrt v, 1)``.
    """
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    n = T * v
    s_same, s_diff = tm.pair_moments()
    const = (2 * a * r + r * r) / (n * n)
    sv = math.sqrt(v)
    Sig = TopicSym.from_entries(
        T,
        v * (a * a * s_same + const),
        v * (a * a * s_diff + const),
        sv * q * (a + r) / n,
        sv * q * (a + r) / n,
        q * q,
    )
    Cm = TopicSym.from_entries(T, v * (a * s_same + r / (n * n)), v * (a * s_diff + r / (n * n)), sv * q / n, 0.0, 0.0)
    return Sig, Cm


def structured_constants(tm: TopicModel, mk: Masking, reg: float = 0.0) -> tuple[float, float, float]:
    """``(A, B0, gamma)`` of ``C (Sigma + reg I)^+`` computed numerically in the topic-symmetric algebra.

    An independent O(1) route to the optimum that uses no closed-form entry formula: with
    ``Sigma = Q Sigma_hat Q^T`` and ``C = Q C_hat Q^T`` (``Q`` orthonormal columns),
    ``C Sigma^+ = Q C_hat Sigma_hat^+ Q^T`` and ``C (Sigma + reg I)^{-1} = Q C_hat (Sigma_hat + reg I)^{-1} Q^T``,
    evaluated for ``reg < 1e-4 tr(Sigma)`` as ``C_hat Sigma_hat^+ [I - reg (Sigma_hat + reg I)^{-1}]``
    (the rows of ``C`` lie in ``range(Sigma)``), which stays accurate as ``reg -> 0``, and directly
    otherwise (``Sigma + reg I`` is then well conditioned, while the bracket would lose
    ``log10(reg / lambda_min)`` digits to cancellation).
    """
    _check_models(tm, mk)
    reg = check_real("reg", reg, low=0.0)
    Sig, Cm = _hat_moments(tm, mk)
    eye = TopicSym.identity(tm.T)
    if reg >= 1e-4 * Sig.trace():
        K = Cm @ (Sig + eye.scale(reg)).pinv(rcond=0.0)
    else:
        K = Cm @ Sig.pinv()
    if 0.0 < reg < 1e-4 * Sig.trace():
        # C (Sigma + reg I)^{-1} = C Sigma^+ Sigma (Sigma + reg I)^{-1} = C Sigma^+ [I - reg (Sigma + reg I)^{-1}]
        K = K @ (eye - (Sig + eye.scale(reg)).pinv(rcond=0.0).scale(reg))
    diag, off, col, _, _ = K.entries()
    A = diag / tm.v
    B0 = off / tm.v if tm.T > 1 else 0.0
    return float(A), float(B0), float(col / math.sqrt(tm.v))


def _block_hat(A: float, B0: float, gamma: float, T: int, v: int) -> TopicSym:
    """``K_hat`` with ``W = Q K_hat Q^T`` for the block matrix ``(A, B0, gamma)``."""
    return TopicSym.from_entries(T, v * A, v * B0, math.sqrt(v) * gamma, 0.0, 0.0)


def _c_fro(tm: TopicModel, mk: Masking) -> float:
    """``||C||_F`` (structured)."""
    return _hat_moments(tm, mk)[1].fro()


def _block_residuals(W: BlockValueMatrix, tm: TopicModel, mk: Masking, reg: float) -> dict:
    """Loss and residuals of a block matrix, computed in the topic-symmetric algebra (O(1))."""
    Sig, Cm = _hat_moments(tm, mk)
    K = _block_hat(W.A, W.B0, W.gamma, tm.T, tm.v)
    loss = (K @ Sig @ K.t).trace() - 2.0 * (K @ Cm.t).trace() + 1.0
    R = K @ Sig - Cm + K.scale(reg)
    P = Sig @ Sig.pinv()
    out_of_range = (K - K @ P).fro()
    return _assemble(loss, W.fro_norm, R.fro(), out_of_range, Cm.fro(), tm, mk, reg)


def _dense_residuals(W: np.ndarray, tm: TopicModel, mk: Masking, reg: float) -> dict:
    """Loss and residuals of a dense matrix: loss and gradient from the block-sum kernel."""
    loss, dW, _ = value_loss_grad(W, tm, mk, reg=0.0)
    # gradient of the regularised objective is dW + 2 reg W; stationarity = half its norm
    stat = float(np.linalg.norm(0.5 * dW + reg * W))
    # component of the rows of W outside range(Sigma): W - W Q Pi Q^T
    Sig, Cm = _hat_moments(tm, mk)
    Pi = (Sig @ Sig.pinv()).toarray()
    T, v = tm.T, tm.v
    WQ = np.empty((tm.V1, T + 1))
    WQ[:, :T] = W[:, 1:].reshape(tm.V1, T, v).sum(axis=2) / math.sqrt(v)
    WQ[:, T] = W[:, 0]
    Z = WQ @ Pi
    proj = np.empty_like(W)
    proj[:, 1:] = np.repeat(Z[:, :T] / math.sqrt(v), v, axis=1)
    proj[:, 0] = Z[:, T]
    out_of_range = float(np.linalg.norm(W - proj))
    return _assemble(loss, float(np.linalg.norm(W)), stat, out_of_range, Cm.fro(), tm, mk, reg)


def _assemble(loss, fro, stat, out_of_range, c_fro, tm, mk, reg) -> dict:
    res = {
        "stationarity": float(stat),
        "stationarity_rel": float(stat) / c_fro if c_fro > 0 else float(stat),
        "loss": float(loss),
        "objective": float(loss) + reg * fro * fro,
    }
    if reg > 0.0:
        # strong convexity (Hessian 2 (Sigma + reg I) >= 2 reg I): ||W - W_opt||_F <= stationarity / reg
        res["error_bound"] = float(stat) / reg
    if reg == 0.0:
        res["loss_gap"] = float(loss) - predicted_min_loss(tm, mk)
        res["range_violation"] = float(out_of_range)
        res["range_violation_rel"] = float(out_of_range) / fro if fro > 0 else float(out_of_range)
    return res


def _residuals(W, tm, mk, reg) -> dict:
    if isinstance(W, BlockValueMatrix):
        return _block_residuals(W, tm, mk, reg)
    return _dense_residuals(W, tm, mk, reg)


def _judge(residuals: dict, tol: float) -> tuple[bool, str]:
    """Our own acceptance test: relative stationarity, loss gap and range violation within ``tol``."""
    vals = list(residuals.values())
    if not all(math.isfinite(x) for x in vals):
        return False, "non-finite residual"
    bad = []
    if residuals["stationarity_rel"] > tol:
        bad.append(f"stationarity_rel={residuals['stationarity_rel']:.3g}")
    if "loss_gap" in residuals and abs(residuals["loss_gap"]) > tol:
        bad.append(f"loss_gap={residuals['loss_gap']:.3g}")
    if "range_violation_rel" in residuals and residuals["range_violation_rel"] > tol:
        bad.append(f"range_violation_rel={residuals['range_violation_rel']:.3g}")
    return not bad, ", ".join(bad)


# =============================================================================== methods
def _solve_closed_form(tm, mk, reg, dense):
    A, B0, gamma, case = value_block_constants(tm, mk, reg)
    W = BlockValueMatrix(A, B0, gamma, tm.T, tm.v)
    info = {"A": A, "B0": B0, "gamma": gamma, "case": case, "a": mk.a, "r": mk.r, "q": mk.q}
    return (W.toarray() if dense else W), 0, "", 0, info


def _solve_lstsq(tm, mk, reg, dense):
    import scipy.linalg as sla

    Sigma, C = moments(tm, mk)
    if reg == 0.0:
        X, _, rank, _ = np.linalg.lstsq(Sigma, C.T, rcond=None)  # Sigma W^T = C^T, min-norm
        W = X.T
        info = {"rank": int(rank)}
    else:
        W = sla.solve(Sigma + reg * np.eye(tm.V1), C.T, assume_a="pos").T
        info = {}
    return np.ascontiguousarray(W), 0, "", 0, info


_CVXPY_STATUS = {
    "optimal": 0,
    "optimal_inaccurate": 0,
    "user_limit": 1,
    "infeasible": 2,
    "unbounded": 2,
    "infeasible_inaccurate": 2,
    "unbounded_inaccurate": 2,
    "infeasible_or_unbounded": 2,
}


def _solve_cvxpy(tm, mk, reg, dense, solver, solver_options):
    """Convex program, in a sparse form equivalent to the textbook one.

    With ``U`` the ``V1 x (T+1)`` topic-indicator matrix ``[1_1 .. 1_T, e_0]`` (so ``W U`` are the
    block sums), ``Sigma = U S U^T`` and ``C = U S_C U^T`` with ``S = E[t t^T]``, ``m = U t``. Since
    ``U`` has full column rank, ``W Sigma = C`` iff ``(W U) S R = U S_C R`` where the columns of ``R``
    span ``range(S)`` (dropping the redundant equations along ``null(S)``); and
    ``L(W) = ||(W U) L_S||_F^2 - 2 <U^T W U, S_C> + 1`` with ``S = L_S L_S^T``. Only ``O(V1^2)``
    non-zeros, instead of the ``O(V1^3)`` of ``W Sigma`` with a dense ``Sigma``.
    """
    import cvxpy as cp
    import scipy.sparse as sp

    T, v, V1 = tm.T, tm.v, tm.V1
    Sig_hat, C_hat = _hat_moments(tm, mk)
    d_half = np.r_[np.full(T, math.sqrt(v)), 1.0]
    # back to the indicator basis: S = D^{-1/2} Sig_hat D^{-1/2}
    S = Sig_hat.toarray() / np.outer(d_half, d_half)
    S_C = C_hat.toarray() / np.outer(d_half, d_half)
    rows = np.arange(V1)
    cols = np.where(rows == 0, T, (rows - 1) // v)
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
        prob.solve(solver=solver, **(solver_options or {}))
    except cp.error.SolverError as exc:
        return None, 2, f"cvxpy solver {solver} failed: {exc}", 0, {"backend_status": "error"}
    bstat = str(prob.status)
    nit = 0
    stats = getattr(prob, "solver_stats", None)
    if stats is not None and getattr(stats, "num_iters", None) is not None:
        nit = int(stats.num_iters)
    info = {"backend_status": bstat, "backend_solver": solver}
    status = _CVXPY_STATUS.get(bstat, 2)
    if Wv.value is None:
        return None, 2 if status == 0 else status, f"cvxpy returned no point (status {bstat})", nit, info
    return np.ascontiguousarray(Wv.value, dtype=float), status, f"backend status {bstat}", nit, info


# =============================================================================== public API
def optimal_value_matrix(
    tm: TopicModel,
    mk: Masking,
    reg: float = 0.0,
    method: str = "closed-form",
    *,
    solver: str = "CLARABEL",
    dense: bool | None = None,
    tol: float = 1e-6,
    solver_options: dict | None = None,
) -> SolveResult:
    """Optimal stage-1 value matrix under uniform attention (SPEC §4.2).

    Minimises ``L(W) + reg ||W||_F^2`` with ``L`` the exact N -> inf squared MLM loss
    (:func:`theorycheck.population.value_loss`); for ``reg = 0`` returns the *minimum-norm* minimiser
    ``C Sigma^+`` (the limit ``reg -> 0+`` and the point gradient descent from ``W = 0`` reaches).

    Parameters
    ----------
    tm, mk : TopicModel, Masking
        ``mk.p_m > 0``. Any prior; degenerate cases (``tau = T``, ``T = 1``, ``a = 0``,
        ``q = 0``, ``v = 1``) are handled exactly (module docstring).
    reg : float
        ``lambda >= 0``.
    method : {"closed-form", "cvxpy", "lstsq"}
    solver : str
        cvxpy solver name (``method="cvxpy"`` only), e.g. ``"CLARABEL"``, ``"SCS"``, ``"OSQP"``.
    dense : bool, optional
        ``"closed-form"`` only: return a dense ``(V1, V1)`` array (default when
        ``V1 <= 2001``) or a :class:`BlockValueMatrix` (``dense=False``, default above).
    tol : float
        Acceptance tolerance of our residual check (relative stationarity ``||W(Sigma + reg I) - C||_F / ||C||_F``,
        ``|loss - (1 - E||p||^2)|`` and relative out-of-range norm for ``reg = 0``).
    solver_options : dict, optional
        Passed to ``cvxpy.Problem.solve``.

    Returns
    -------
    SolveResult
        ``x``: the matrix (ndarray or :class:`BlockValueMatrix`); ``fun``: regularised objective;
        ``residuals``: ``stationarity``, ``stationarity_rel``, ``loss``, ``objective`` and, for
        ``reg > 0``, ``error_bound = stationarity / reg`` (a certified bound on ``||W - W_opt||_F``),
        for ``reg = 0``, ``loss_gap``, ``range_violation``, ``range_violation_rel``; ``info``: the block
        constants (closed form), backend status (cvxpy). Status codes: 0 success; 1 backend limit;
        2 backend failure; 3 backend claimed success but our residual check failed; 4 non-finite.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (before any work), including ``V1`` too large for a dense method.

    Notes
    -----
    Cost: closed form O(1) (plus O(V1^2) to fill a dense array); lstsq O(V1^3); cvxpy grows faster
    (see ``benchmarks/bench_stage1.py``). For tiny ``reg > 0`` the dense methods lose accuracy along
    ``null(Sigma)`` (round-off divided by ``reg``) while the stationarity residual cannot see it; the
    ``error_bound`` residual (``stationarity / reg``) says how much is certified. The closed form
    stays accurate for every ``reg >= 0``.
    """
    _check_models(tm, mk)
    reg = check_real("reg", reg, low=0.0)
    check_choice("method", method, VALUE_METHODS)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    if dense is not None and not isinstance(dense, bool):
        raise TypeError(f"dense must be None, True or False, got {dense!r}")
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a string (a cvxpy solver name), got {solver!r}")
    if method != "cvxpy":
        warn_ignored(
            [n for n, used in (("solver", solver != "CLARABEL"), ("solver_options", bool(solver_options))) if used],
            method,
        )
    if method == "closed-form":
        if dense is None:
            dense = tm.V1 <= DENSE_DEFAULT_MAX_V1
        if dense and tm.V1 > DENSE_MAX_V1:
            raise ValueError(f"dense=True needs V1 <= {DENSE_MAX_V1}, got V1 = {tm.V1}; use dense=False")
    else:
        if dense is False:
            raise ValueError(f"dense=False is only available for method='closed-form' (method={method!r} is dense)")
        if tm.V1 > GENERIC_MAX_V1:
            raise ValueError(
                f"method={method!r} materialises V1 x V1 matrices; V1 = {tm.V1} exceeds {GENERIC_MAX_V1}; "
                "use method='closed-form'"
            )
        if method == "cvxpy":
            import cvxpy as cp

            if solver not in cp.installed_solvers():
                raise ValueError(f"solver must be an installed cvxpy solver {cp.installed_solvers()}, got {solver!r}")

    t0 = time.perf_counter()
    if method == "closed-form":
        W, status, msg, nit, info = _solve_closed_form(tm, mk, reg, dense)
    elif method == "lstsq":
        W, status, msg, nit, info = _solve_lstsq(tm, mk, reg, dense)
    else:
        W, status, msg, nit, info = _solve_cvxpy(tm, mk, reg, dense, solver, solver_options)
    elapsed = time.perf_counter() - t0

    if W is None:
        return SolveResult(None, math.nan, status, method, STATUS_MESSAGES[status] + " " + msg, nit, elapsed, {}, info)
    if isinstance(W, np.ndarray) and not np.all(np.isfinite(W)):
        return SolveResult(W, math.nan, 4, method, STATUS_MESSAGES[4], nit, elapsed, {}, info)
    residuals = _residuals(W, tm, mk, reg)
    ok, why = _judge(residuals, tol)
    if status == 0 and not ok:
        status = 4 if why == "non-finite residual" else 3
    message = STATUS_MESSAGES[status]
    if msg:
        message += f" ({msg})"
    if not ok:
        message += f" Residual check (tol={tol:g}) failed: {why}."
    info.update({"reg": reg, "predicted_min_loss": predicted_min_loss(tm, mk), "tol": tol})
    return SolveResult(W, residuals["objective"], status, method, message, nit, elapsed, residuals, info)


# =============================================================================== minimiser set
class MinimiserViolation(NamedTuple):
    """Distance of ``(W, b)`` from the affine set of minimisers (see :func:`minimiser_violation`).

    Attributes
    ----------
    norm : float
        Euclidean norm of the violated linear conditions (0 iff ``(W, b)`` is a minimiser).
    g : ndarray of shape (V1,) or None
        Least-squares fitted ``g`` (``None`` in the constant-context case, where no ``g`` appears).
    """

    norm: float
    g: np.ndarray | None


def minimiser_violation(W, tm: TopicModel, mk: Masking, b=None) -> MinimiserViolation:
    """How far ``(W, b)`` is from the set of all minimisers of the uniform-attention loss (SPEC §4.0, §4.2).

    Informative context (``a > 0``, ``tau < T`` or Dirichlet with ``T >= 2``): ``(W, b)`` minimises iff
    some ``g`` satisfies, with ``Y_t = W 1_t`` and ``z = W e_0``,

    .. math::
        Y_t - \\tfrac{1}{a} 1_t - v g = 0 \\ (t = 1..T), \\qquad
        q z + b + (a + r) g + \\tfrac{r}{a T v} 1_W = 0.

    Row by row, ``g_i`` is fitted by least squares and ``norm`` is the Euclidean norm of all these
    residuals. Constant context (``tau = T``, ``T = 1`` or ``a = 0``): minimisers are exactly the
    ``W mu + b = u`` with ``mu = (a+r) u + q e_0``; ``norm = ||W mu + b - u||`` and ``g = None``.

    Parameters
    ----------
    W : array_like (V1, V1) or BlockValueMatrix
    b : array_like (V1,), optional
        Output bias (``0`` if omitted).
    """
    _check_models(tm, mk)
    T, v, V1, n = tm.T, tm.v, tm.V1, tm.n_words
    if isinstance(W, BlockValueMatrix):
        if (W.T, W.v) != (T, v):
            raise ValueError(f"W is a BlockValueMatrix for (T, v) = ({W.T}, {W.v}), expected ({T}, {v})")
        Y = np.zeros((V1, T))
        topics = (np.arange(1, V1) - 1) // v
        Y[1:] = v * W.B0
        Y[np.arange(1, V1), topics] = v * W.A
        z = np.r_[0.0, np.full(n, W.gamma)]
        if V1 * T > 5e7:
            raise ValueError(f"minimiser_violation of a BlockValueMatrix needs V1*T <= 5e7, got {V1 * T}")
    else:
        W = check_array("W", W, shape=(V1, V1))
        Y = W[:, 1:].reshape(V1, T, v).sum(axis=2)
        z = W[:, 0]
    bb = np.zeros(V1) if b is None else check_array("b", b, shape=(V1,))
    a, r, q = mk.a, mk.r, mk.q
    if _constant_context(tm, mk):
        u = np.r_[0.0, np.full(n, 1.0 / n)]
        resid = ((a + r) / n) * Y.sum(axis=1) + q * z + bb - u
        return MinimiserViolation(float(np.linalg.norm(resid)), None)
    E = Y.copy()
    topics = (np.arange(1, V1) - 1) // v
    E[np.arange(1, V1), topics] -= 1.0 / a
    f = q * z + bb
    f[1:] += r / (a * n)
    # minimise sum_t (E_it - v g)^2 + (f_i + (a + r) g)^2 over g
    g = (v * E.sum(axis=1) - (a + r) * f) / (T * v * v + (a + r) ** 2)
    res2 = np.sum((E - v * g[:, None]) ** 2, axis=1) + (f + (a + r) * g) ** 2
    return MinimiserViolation(float(math.sqrt(res2.sum())), g)
