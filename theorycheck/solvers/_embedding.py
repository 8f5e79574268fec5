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
violation), never trusting a backend.
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from .._validate import check_array, check_choice, check_int, check_real, warn_ignored
from ..config import Masking, TopicModel, check_models
from ..population._embedding_loss import _kernel_threads, embedding_loss_grad
from ..population._moments import moments
from ..population._value_loss import value_loss, value_loss_grad
from ._result import SolveResult
from ._symmetric import TokenMatrixShape

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

METHODS = ("closed-form", "schur", "cvxpy", "factorized")
SOLVERS = ("CLARABEL", "SCS")
#: Largest V1 for which dense checks (value_loss on a materialised Gram) are run.
DENSE_CHECK_MAX_V1 = 2001
#: Tolerance on the loss gap ``L(G) - L*`` for status 0 (dense methods).
LOSS_TOL = 1e-8


# ----------------------------------------------------------------------------- structured Gram
@dataclass(frozen=True)
class BlockGram(TokenMatrixShape):
    """Block-constant Gram matrix over the tokens, ``(V1, V1)``, stored as two scalars.

    ``G[i, j] = x`` if words i, j share a topic (``i = j`` included), ``y`` if they do not, and
    row/column 0 ([MASK]) are zero. Use ``np.asarray(G)`` or :meth:`toarray` for the dense matrix
    (only for moderate V1: ``T = 1000, v = 100`` would need 80 GB).

    Attributes
    ----------
    T, v : int
    x, y : float
        Same-topic and different-topic inner products.
    """

    T: int
    v: int
    x: float
    y: float

    @property
    def trace(self) -> float:
        """``tr G = T v x`` (= ``||W^E||_F^2`` of any embedding with this Gram)."""
        return self.T * self.v * self.x

    def eigenvalues(self) -> dict:
        """Non-trivial eigenvalues with multiplicities.

        ``v (x - y)`` on the ``T - 1`` topic contrasts, ``v (x - y) + T v y`` on ``1_W`` and 0 on the
        remaining ``T (v - 1) + 1`` directions (within-topic zero-mean vectors and ``e_0``).
        """
        return {
            "topic_contrast": (self.v * (self.x - self.y), self.T - 1),
            "ones": (self.v * (self.x - self.y) + self.T * self.v * self.y, 1),
            "zero": (0.0, self.T * (self.v - 1) + 1),
        }

    def rank(self, tol: float | None = None) -> int:
        """Number of eigenvalues above ``tol`` (default ``1e-12 * max(1, |eig|_max)``)."""
        ev = self.eigenvalues()
        lam_c, m_c = ev["topic_contrast"]
        lam_1, _ = ev["ones"]
        if tol is None:
            tol = 1e-12 * max(1.0, abs(lam_c), abs(lam_1))
        return (m_c if abs(lam_c) > tol else 0) + (1 if abs(lam_1) > tol else 0)

    def min_eigenvalue(self) -> float:
        ev = self.eigenvalues()
        vals = [ev["ones"][0], 0.0] + ([ev["topic_contrast"][0]] if self.T > 1 else [])
        return float(min(vals))

    def toarray(self) -> np.ndarray:
        """Dense ``(V1, V1)`` matrix (refuses above ``V1 = 20001``)."""
        if self.V1 > 20_001:
            raise ValueError(f"BlockGram.toarray materialises a V1 x V1 matrix; V1={self.V1} exceeds 20001")
        topics = np.arange(self.T * self.v) // self.v
        G = np.zeros((self.V1, self.V1))
        G[1:, 1:] = np.where(topics[:, None] == topics[None, :], self.x, self.y)
        return G

    def __array__(self, dtype=None, copy=None):
        G = self.toarray()
        return G if dtype is None else G.astype(dtype)

    def matvec(self, z) -> np.ndarray:
        """``G z`` in ``O(V1)`` for a vector ``z`` of length V1."""
        z = np.asarray(z, dtype=float)
        out = np.zeros(self.V1)
        ts = z[1:].reshape(self.T, self.v).sum(axis=1)
        out[1:] = np.repeat((self.x - self.y) * ts + self.y * ts.sum(), self.v)
        return out


# ----------------------------------------------------------------------------- validation helpers
def _check_models(tm, mk, where):
    check_models(tm, mk)
    mk.require_informative(where)


def _single_law(tm: TopicModel) -> bool:
    """True iff every document has the same topic law (``tau = T`` or ``T = 1``)."""
    return tm.T == 1 or (tm.prior == "uniform-tau" and tm.tau == tm.T)


def _L_star(tm: TopicModel) -> float:
    return tm.min_value_loss()


# ----------------------------------------------------------------------------- closed form
def closed_form_gram(tm: TopicModel, mk: Masking, *, bias: bool = False) -> BlockGram:
    """Minimum-norm optimal Gram of the tied model (SPEC §4.1 D3).

    Parameters
    ----------
    tm, mk : TopicModel, Masking
        ``p_m > 0`` and ``a = 1 - p_m (1 - p_c) > 0``; any ``q, r >= 0``; either prior.
    bias : bool
        With a free (unpenalised) decoder bias ``b``; its optimal value is then
        ``b = u - G mu = u`` (uniform over words, see :func:`optimal_bias`).

    Returns
    -------
    BlockGram
        Without bias, generic case (``T >= 2`` and ``tau < T`` or Dirichlet):
        ``x = (1/(a v)) (1 - r/(T (a+r)))``, ``y = -r/(a v T (a+r))`` (rank T).
        Single document law (``tau = T`` or ``T = 1``): ``x = y = 1/(T v (a + r))`` (rank 1).
        With bias, generic case: ``x = (T-1)/(a v T)``, ``y = -1/(a v T)`` (rank T - 1, eigenvalue
        0 on ``1_W``: the bias carries the mean prediction); single law: ``G = 0``.

    Notes
    -----
    Generic case: optimality is ``G 1_t = (1/a) 1_t + v g`` (all t) and
    ``q G e_0 = -(a+r) g - (r/(a v T)) 1_W`` (§4.1 D1). Symmetry makes
    ``gamma = sum_{i in t} g_i`` topic-independent, and
    ``tr G >= G_00 + sum_t 1_t^T G 1_t / v = (a+r) s/(q^2 v) + T/a + T gamma`` with
    ``s = (a+r) gamma + r/(a T) = q^2 v G_00/(a+r) >= 0``; the bound increases with ``gamma``, is
    smallest at ``s = 0`` (``E_0 = 0``) and is attained only by all-equal within-topic blocks.
    (For ``q = 0``, ``g`` is fixed and ``G_00`` is free; the minimum again has ``E_0 = 0``.)
    Single law: the only condition is ``G m = u`` with ``m = (a+r) u + q e_0``; for PSD ``G``,
    ``||u||^4 <= (u^T G u)(u^T G^+ u) <= tr G ||u||^2 m^T u`` forces ``tr G >= 1/(a+r)`` with
    equality only for ``G = u u^T / (m^T u)``.
    With bias the mask-column condition only fixes ``b``, so ``g`` is free: ``E_0 = 0`` and
    ``tr G >= T/a + T gamma`` with ``1_W^T G 1_W = T v (1/a + T gamma) >= 0``, i.e.
    ``gamma >= -1/(a T)``; equality gives the block form above.
    """
    _check_models(tm, mk, "closed_form_gram")
    a, r, T, v = mk.a, mk.r, tm.T, tm.v
    if bias:
        if _single_law(tm):
            return BlockGram(T, v, 0.0, 0.0)
        return BlockGram(T, v, (T - 1) / (a * v * T), -1.0 / (a * v * T))
    if _single_law(tm):
        x = 1.0 / (T * v * (a + r))
        return BlockGram(T, v, x, x)
    x = (1.0 / (a * v)) * (1.0 - r / (T * (a + r)))
    y = -r / (a * v * T * (a + r))
    return BlockGram(T, v, x, y)


def optimal_bias(G: BlockGram, tm: TopicModel, mk: Masking) -> np.ndarray:
    """Loss-minimising decoder bias for a given Gram, ``b = E[p] - G E[m] = u - G mu``, shape ``(V1,)``.

    (``mu = (a + r) u + q e_0``; for a :class:`BlockGram`, ``b = c 1_W`` with
    ``c = 1/(T v) - (a + r)((x - y)/T + y)``.)
    """
    c = _bias_const(G, tm, mk)
    b = np.full(tm.V1, c)
    b[0] = 0.0
    return b


def _bias_const(G: BlockGram, tm, mk) -> float:
    return 1.0 / tm.n_words - (mk.a + mk.r) * ((G.x - G.y) / tm.T + G.y)


def _block_gram_loss(G: BlockGram, tm: TopicModel, mk: Masking, b_const: float = 0.0) -> float:
    """Exact loss of a block-constant Gram and bias ``b = b_const 1_W`` in O(1) (for huge V1).

    ``G m_theta + b - p_theta = alpha sum_t theta_t 1_t + beta 1_W`` with
    ``alpha = a (x - y) - 1/v`` and ``beta = a y + r ((x - y)/T + y) + b_const``; hence
    ``L = alpha^2 v E[sum theta_t^2] + 2 alpha beta v + beta^2 T v + 1 - E||p||^2``.
    """
    a, r, T, v = mk.a, mk.r, tm.T, tm.v
    Ep2 = tm.expected_p_norm2()
    alpha = a * (G.x - G.y) - 1.0 / v
    beta = a * G.y + r * ((G.x - G.y) / T + G.y) + b_const
    return alpha * alpha * v * (v * Ep2) + 2 * alpha * beta * v + beta * beta * T * v + 1.0 - Ep2


# ----------------------------------------------------------------------------- minimiser characterisation
def minimiser_residuals(M, tm: TopicModel, mk: Masking, b=None) -> dict:
    """Residuals of the characterisation of all minimisers ``(M, b)`` (SPEC §4.1 D1).

    Generic case (``T >= 2``, ``tau < T`` or Dirichlet): with the block sums ``Y = M [1_1 .. 1_T]``
    and ``g = mean_t (Y_{:,t} - 1_t / a) / v``,

    .. math::
        r_1 = \\max |Y - (1/a) [1_1 .. 1_T] - v g 1_T^T|, \\qquad
        r_2 = \\max | q M e_0 + b + (a + r) g + (r/(a v T)) 1_W |.

    Single document law: ``r_1 = max |M m + b - u|`` with ``m = (a+r) u + q e_0``, ``r_2 = 0``.
    No validation (see :func:`embedding_minimiser_violation`).
    """
    a, r, q, T, v, V1 = mk.a, mk.r, mk.q, tm.T, tm.v, tm.V1
    n = tm.n_words
    bb = np.zeros(V1) if b is None else b
    if _single_law(tm):
        m = np.full(V1, (a + r) / n)
        m[0] = q
        u = np.full(V1, 1.0 / n)
        u[0] = 0.0
        return {"block_sums": float(np.max(np.abs(M @ m + bb - u))), "mask_column": 0.0}
    Y = M[:, 1:].reshape(V1, T, v).sum(axis=2)
    Ind = tm.topic_indicator()
    R = Y - Ind / a
    g = R.mean(axis=1) / v
    r1 = float(np.max(np.abs(R - v * g[:, None])))
    oneW = np.ones(V1)
    oneW[0] = 0.0
    r2 = float(np.max(np.abs(q * M[:, 0] + bb + (a + r) * g + (r / (a * v * T)) * oneW)))
    return {"block_sums": r1, "mask_column": r2}


def embedding_minimiser_violation(W_E, tm: TopicModel, mk: Masking, *, W_dec=None, b=None, tied: bool = True) -> float:
    """How far an embedding model is from the set of ALL population minimisers (§4.1 D1/D2).

    ``(W_E, W_dec, b)`` minimises the population loss iff the effective map
    ``M = (W^E)^T W^E`` (tied) or ``W^dec W^E`` (untied) satisfies, for some vector g,

    .. math::
        M 1_t = \\tfrac1a 1_t + v g \\ (\\forall t), \\qquad
        q M e_0 + b = -(a+r) g - \\tfrac{r}{a v T} 1_W .

    For the tied model this gives, in every word row ``i`` and topic ``t' != t(i)``,
    ``sum_{j in t(i)} <E_i, E_j> - sum_{j in t'} <E_i, E_j> = 1/a`` (§4.1 D2).
    With a single document law (``tau = T`` or ``T = 1``) the only condition is
    ``M m + b = u``.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
    W_dec : array_like, shape (V1, d), optional (required iff ``tied=False``)
    b : array_like, shape (V1,), optional

    Returns
    -------
    float
        Max absolute violation of the identities (0 for an exact minimiser; the loss excess
        is quadratic in it).
    """
    from ..population._embedding_loss import _validate as _validate_loss

    _check_models(tm, mk, "embedding_minimiser_violation")
    W_E, W_dec, b, tied, _ = _validate_loss(W_E, tm, mk, W_dec, b, tied, 0.0)
    M = W_E.T @ W_E if tied else W_dec @ W_E
    res = minimiser_residuals(M, tm, mk, b)
    return max(res.values())


def identifiable_part(G, tm: TopicModel, mk: Masking, *, bias: bool = False) -> np.ndarray:
    """``G - P_perp G P_perp``: the part of a Gram fixed by optimality (dense, moderate V1).

    ``P_perp`` projects onto the orthogonal complement of ``span{m_S}`` (within-topic zero-mean
    vectors and the null direction ``1_W - ((a+r)/q) e_0``). Every minimiser satisfies
    ``G m_S = p_S``, which fixes ``G P`` and ``P G`` (``P = I - P_perp``) but leaves
    ``P_perp G P_perp`` free, so two minimisers have the same identifiable part.
    With ``bias=True`` the relevant span is that of the centred densities ``m_S - mu``
    (covariance ``Sigma - mu mu^T``).
    """
    _check_models(tm, mk, "identifiable_part")
    G = check_array("G", G, shape=(tm.V1, tm.V1))
    Sigma, _ = _moments_for(tm, mk, bias)
    lam, U = np.linalg.eigh(Sigma)
    Up = U[:, ~_range_mask(lam, tm, mk)]
    Pp = Up @ Up.T
    return G - Pp @ G @ Pp


def _range_mask(lam, tm, mk):
    """Eigenvalues of (centred) Sigma counted as non-zero: relative to ``||mu||^2`` (the scale of
    the uncentred moment), so that an all-zero centred Sigma (single document law) has empty range."""
    mu = _mu(tm, mk)
    return lam > 1e-12 * max(float(lam.max()), float(mu @ mu))


def _mu(tm, mk):
    mu = np.full(tm.V1, (mk.a + mk.r) / tm.n_words)
    mu[0] = mk.q
    return mu


def _moments_for(tm, mk, bias):
    """``(Sigma, C)``, centred (``Sigma - mu mu^T``, ``C - u mu^T``) when the bias is free.

    With a free bias the optimal ``b = u - G mu`` and ``L = tr(G Sigma_c G) - 2 <G, C_c> + 1 - ||u||^2``.
    """
    Sigma, C = moments(tm, mk)
    if bias:
        mu = _mu(tm, mk)
        u = np.full(tm.V1, 1.0 / tm.n_words)
        u[0] = 0.0
        Sigma = Sigma - np.outer(mu, mu)
        C = C - np.outer(u, mu)
    return Sigma, C


# ----------------------------------------------------------------------------- embeddings from Grams
def embedding_from_gram(G, d: int, *, tol: float | None = None) -> np.ndarray:
    """An embedding ``W^E`` (``d x V1``) with ``(W^E)^T W^E = G``, by eigendecomposition.

    Parameters
    ----------
    G : array_like, shape (V1, V1), or BlockGram
        Symmetric PSD (tiny negative eigenvalues above ``-tol`` are clipped to 0).
    d : int
        Embedding dimension, ``d >= rank(G)``; rows beyond the rank are zero.
    tol : float, optional
        Eigenvalue tolerance, default ``1e-9 * max(1, |G|_max) * V1``.

    Returns
    -------
    ndarray, shape (d, V1)
        ``W^E = diag(sqrt(lambda)) U^T`` over the ``rank(G)`` largest eigenpairs; for a
        :class:`BlockGram` every word of a topic gets the same embedding and ``E_0 = 0``.

    Raises
    ------
    ValueError
        If ``G`` is not square, symmetric or PSD, has non-finite entries, or ``d < rank(G)``.
    """
    d = check_int("d", d, low=1)
    if isinstance(G, BlockGram):
        H = (G.x - G.y) * np.eye(G.T) + G.y * np.ones((G.T, G.T))  # Gram of the topic vectors
        lam, U = _psd_eig(H, tol, "G")
        rank = int(np.sum(lam > 0))
        _check_rank(rank, d)
        F = np.zeros((d, G.T))
        F[:rank] = (U[:, -rank:] * np.sqrt(lam[-rank:])).T if rank else 0.0
        W = np.zeros((d, G.V1))
        W[:, 1:] = np.repeat(F, G.v, axis=1)
        return W
    G = check_array("G", G, ndim=2)
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"G must be a square (V1, V1) matrix, got shape {G.shape}")
    lam, U = _psd_eig(G, tol, "G")
    rank = int(np.sum(lam > 0))
    _check_rank(rank, d)
    W = np.zeros((d, G.shape[0]))
    if rank:
        W[:rank] = (U[:, -rank:] * np.sqrt(lam[-rank:])).T
    return W


def _psd_eig(G, tol, name):
    scale = max(1.0, float(np.max(np.abs(G))) if G.size else 1.0)
    if tol is None:
        tol = 1e-9 * scale * G.shape[0]
    tol = check_real("tol", tol, low=0.0)
    asym = float(np.max(np.abs(G - G.T))) if G.size else 0.0
    if asym > tol:
        raise ValueError(f"{name} must be symmetric; max |G - G^T| = {asym:.3g} > tol = {tol:.3g}")
    lam, U = np.linalg.eigh((G + G.T) / 2)
    if lam[0] < -tol:
        raise ValueError(f"{name} must be positive semidefinite; smallest eigenvalue {lam[0]:.3g} < -tol = {-tol:.3g}")
    lam = np.where(lam > tol, lam, 0.0)
    return lam, U


def _check_rank(rank, d):
    if d < rank:
        raise ValueError(
            f"d={d} is too small: the Gram matrix has rank {rank}, so no d x V1 embedding reproduces it; "
            f"use d >= {rank}"
        )


def min_embedding_dim(tm: TopicModel, mk: Masking, *, bias: bool = False) -> int:
    """Smallest embedding dimension ``d`` for which the tied model attains ``L* = 1 - E||p||^2``.

    Equals ``rank`` of the min-norm Gram (:func:`closed_form_gram`): ``T`` in the generic case
    (eigenvalues ``1/a`` x (T-1) and ``1/(a+r)``), 1 with a single document law. It is also a
    lower bound for every minimiser: ``G m_t = p_t`` for the ``T`` linearly independent vertex
    densities ``p_t = 1_t / v`` forces ``rank G >= T``. With a free bias (``bias=True``): ``T - 1``
    (``G (m_t - m_s) = p_t - p_s`` for ``T - 1`` independent differences), and 0 with a single
    document law (the bias alone is optimal).
    """
    return closed_form_gram(tm, mk, bias=bias).rank()


# ----------------------------------------------------------------------------- solvers
def optimal_embedding_gram(
    tm: TopicModel,
    mk: Masking,
    method: str = "closed-form",
    *,
    d: int | None = None,
    reg: float = 0.0,
    solver: str = "CLARABEL",
    seed: int = 0,
    init_scale: float = 1e-2,
    maxiter: int = 20_000,
    bias: bool = False,
) -> SolveResult:
    """Optimal Gram ``G = (W^E)^T W^E`` of the tied embedding model (§4.1), without or with a bias.

    Parameters
    ----------
    tm, mk : TopicModel, Masking
        ``p_m > 0`` and ``a > 0`` (some original words visible).
    method : {"closed-form", "schur", "cvxpy", "factorized"}
        See the module docstring. ``"closed-form"`` returns a :class:`BlockGram` (any V1, O(1));
        the others a dense ``(V1, V1)`` array (moderate V1 only).
    d : int, optional
        Embedding dimension; required for ``"factorized"`` (must be >= :func:`min_embedding_dim`
        when ``reg = 0``), ignored otherwise except that ``d < rank`` raises.
    reg : float
        ``reg = 0``: the minimum-norm minimiser (``"closed-form"``, ``"schur"``, ``"cvxpy"``) or the
        minimiser L-BFGS reaches from ``init_scale``-small init (``"factorized"``: equal to the min-norm
        one on the identifiable part, see :func:`identifiable_part`). ``reg > 0`` (``"cvxpy"``,
        ``"factorized"`` only): minimiser of ``L(G) + reg tr G`` (= ``reg ||W^E||_F^2``).
    solver : {"CLARABEL", "SCS"}
        cvxpy backend.
    seed : int
        Seed of the factorized initialisation.
    init_scale : float
        Standard deviation of the factorized initialisation.
    maxiter : int
        L-BFGS iteration limit.
    bias : bool
        Free (unpenalised) decoder bias ``b``; ``info["b"]`` holds its optimal value. The
        ``"factorized"`` method then trains ``(W^E, b)`` jointly; the others use ``b = u - G mu``
        and the centred moments.

    Returns
    -------
    SolveResult
        ``x`` the Gram (BlockGram or ndarray), ``fun`` its loss recomputed by our code.
        ``residuals``: ``loss_gap = fun - L*`` (reg = 0), ``min_eig`` (PSD check),
        ``minimiser_violation`` (§4.1 D1), ``dist_closed_form`` (max abs difference to the closed
        form; identifiable part only for ``"factorized"``), and for cvxpy ``duality_gap`` and
        ``dual_infeasibility`` recomputed from the returned multipliers; for ``reg > 0`` the KKT
        residuals ``kkt_dual_infeasibility`` (``sym(dL/dG) + reg I >= 0``) and
        ``kkt_complementarity``. Status (table in :mod:`theorycheck.solvers._result`): 0 iff the loss gap
        <= 1e-8 (reg = 0) or the KKT residuals <= 1e-5 (reg > 0) and the Gram is PSD within
        1e-6; 1 L-BFGS iteration limit; 2 cvxpy failure; 3 residual check failed; 4 non-finite.

    Raises
    ------
    ValueError
        Unknown method/solver, ``reg != 0`` with a min-norm-only method, ``d`` missing or too
        small for ``"factorized"``, ``d < 1``.
    """
    _check_models(tm, mk, "optimal_embedding_gram")
    check_choice("method", method, METHODS)
    check_choice("solver", solver, SOLVERS)
    reg = check_real("reg", reg, low=0.0)
    if d is not None:
        d = check_int("d", d, low=1)
    seed = check_int("seed", seed, low=0)
    init_scale = check_real("init_scale", init_scale, low=0.0, low_open=True)
    maxiter = check_int("maxiter", maxiter, low=1)
    if not isinstance(bias, (bool, np.bool_)):
        raise TypeError(f"bias must be a bool, got {bias!r}")
    bias = bool(bias)
    ignored = []
    if method != "cvxpy" and solver != "CLARABEL":
        ignored.append("solver")
    if method != "factorized":
        ignored += [
            n
            for n, used in (("seed", seed != 0), ("init_scale", init_scale != 1e-2), ("maxiter", maxiter != 20_000))
            if used
        ]
    warn_ignored(ignored, method)
    rank = min_embedding_dim(tm, mk, bias=bias)
    if d is not None and reg == 0.0 and d < rank:
        raise ValueError(
            f"d={d} is too small for the requested optimum: every minimiser G has rank >= {rank} "
            f"(= min_embedding_dim), so L* = {_L_star(tm):.6g} needs d >= {rank}"
        )
    if reg > 0 and method in ("closed-form", "schur"):
        raise ValueError(
            f"reg={reg!r}: method={method!r} gives the minimum-norm (reg -> 0+) optimum only; "
            "use method='cvxpy' or 'factorized' for reg > 0"
        )
    if method == "factorized" and d is None:
        raise ValueError(f"d is required for method='factorized' (an integer >= {max(rank, 1)} = min_embedding_dim)")
    if method in ("schur", "cvxpy", "factorized") and tm.V1 > DENSE_CHECK_MAX_V1:
        raise ValueError(
            f"method={method!r} works with dense V1 x V1 matrices; V1={tm.V1} exceeds {DENSE_CHECK_MAX_V1}"
        )
    t0 = time.perf_counter()
    if method == "closed-form":
        res = _solve_closed_form(tm, mk, bias)
    elif method == "schur":
        res = _solve_schur(tm, mk, bias)
    elif method == "cvxpy":
        res = _solve_cvxpy(tm, mk, reg, solver, bias)
    else:
        res = _solve_factorized(tm, mk, d, reg, seed, init_scale, maxiter, bias)
    res.time = time.perf_counter() - t0
    return res


def _dense_residuals(G, tm, mk, reg, *, b=None, identifiable=False) -> dict:
    """Our own checks of a dense Gram (and bias): loss gap, PSD, minimiser violation, distance to closed form."""
    res = {}
    bias = b is not None
    with _kernel_threads(tm.V1):
        loss = value_loss(G, tm, mk, b=b)
    res["loss_gap"] = loss - _L_star(tm)
    res["min_eig"] = float(np.linalg.eigvalsh((G + G.T) / 2)[0])
    res["asymmetry"] = float(np.max(np.abs(G - G.T)))
    res["minimiser_violation"] = max(minimiser_residuals(G, tm, mk, b).values())
    if reg > 0.0:
        # KKT of min L(G, b) + reg tr G over G >= 0: Z = sym(dL/dG) + reg I >= 0, <Z, G> = 0 (and dL/db = 0)
        with _kernel_threads(tm.V1):
            _, D, db = value_loss_grad(G, tm, mk, b=b)
        if bias:
            res["bias_stationarity"] = float(np.max(np.abs(db)))
        Z = (D + D.T) / 2 + reg * np.eye(tm.V1)
        res["kkt_dual_infeasibility"] = max(0.0, -float(np.linalg.eigvalsh(Z)[0]))
        res["kkt_complementarity"] = abs(float(np.sum(Z * G)))
    if reg == 0.0:
        Gc = closed_form_gram(tm, mk, bias=bias).toarray()
        if identifiable:
            idp = identifiable_part(G, tm, mk, bias=bias) - identifiable_part(Gc, tm, mk, bias=bias)
            res["dist_closed_form"] = float(np.max(np.abs(idp)))
        else:
            res["dist_closed_form"] = float(np.max(np.abs(G - Gc)))
    return res, loss


def _status_from(res, reg, backend_ok=True) -> int:
    if not all(math.isfinite(v) for v in res.values()):
        return 4
    bad = res["min_eig"] < -1e-6 or res.get("asymmetry", 0.0) > 1e-8
    if reg == 0.0:
        bad = bad or res["loss_gap"] > LOSS_TOL
    else:
        bad = bad or res.get("kkt_dual_infeasibility", 0.0) > 1e-5 or res.get("kkt_complementarity", 0.0) > 1e-5
        bad = bad or res.get("bias_stationarity", 0.0) > 1e-5
    if not backend_ok:
        return 2
    return 3 if bad else 0


def _solve_closed_form(tm, mk, bias=False) -> SolveResult:
    G = closed_form_gram(tm, mk, bias=bias)
    b = optimal_bias(G, tm, mk) if bias else None
    loss = _block_gram_loss(G, tm, mk, _bias_const(G, tm, mk) if bias else 0.0)
    res = {"loss_gap": loss - _L_star(tm), "min_eig": G.min_eigenvalue()}
    if tm.V1 <= DENSE_CHECK_MAX_V1:  # independent dense recomputation
        Gd = G.toarray()
        with _kernel_threads(tm.V1):
            dense_loss = value_loss(Gd, tm, mk, b=b)
        res["loss_gap_dense"] = dense_loss - _L_star(tm)
        res["minimiser_violation"] = max(minimiser_residuals(Gd, tm, mk, b).values())
    ev = G.eigenvalues()
    status = _status_from(res, 0.0)
    return SolveResult(
        x=G,
        fun=loss,
        status=status,
        method="closed-form",
        residuals=res,
        info={
            "same_topic": G.x,
            "different_topic": G.y,
            "rank": G.rank(),
            "eig_topic_contrast": ev["topic_contrast"][0],
            "eig_ones": ev["ones"][0],
            "trace": G.trace,
            "single_law": _single_law(tm),
            "b": b,
        },
    )


def _range_split(tm, mk, bias=False):
    """Orthonormal bases of range(Sigma) / its complement and ``K = C U_r Lambda_r^{-1}``.

    (Centred moments when the bias is free.)
    """
    Sigma, C = _moments_for(tm, mk, bias)
    lam, U = np.linalg.eigh(Sigma)
    keep = _range_mask(lam, tm, mk)
    Ur, Up = U[:, keep], U[:, ~keep]
    K = C @ Ur / lam[keep]  # G Ur = K  <=>  G Sigma = C
    return Ur, Up, K, Sigma, C


def _solve_schur(tm, mk, bias=False) -> SolveResult:
    Ur, Up, K, _, _ = _range_split(tm, mk, bias)
    A = Ur.T @ K  # G on range(Sigma) x range(Sigma)
    asym = float(np.max(np.abs(A - A.T))) if A.size else 0.0
    A = (A + A.T) / 2
    Bt = Up.T @ K  # G on complement x range
    Dmin = Bt @ np.linalg.pinv(A, rcond=1e-12, hermitian=True) @ Bt.T  # least-trace PSD completion
    Q = np.hstack([Ur, Up])
    Gp = np.block([[A, Bt.T], [Bt, Dmin]])
    G = Q @ Gp @ Q.T
    G = (G + G.T) / 2
    b = _u(tm) - G @ _mu(tm, mk) if bias else None
    res, loss = _dense_residuals(G, tm, mk, 0.0, b=b)
    res["schur_asymmetry"] = asym
    return SolveResult(
        x=G,
        fun=loss,
        status=_status_from(res, 0.0),
        method="schur",
        residuals=res,
        info={"rank_sigma": Ur.shape[1], "b": b},
    )


def _u(tm):
    u = np.full(tm.V1, 1.0 / tm.n_words)
    u[0] = 0.0
    return u


def _solve_cvxpy(tm, mk, reg, solver, bias=False) -> SolveResult:
    import cvxpy as cp

    Ur, Up, K, Sigma, C = _range_split(tm, mk, bias)
    n, k = tm.V1, Ur.shape[1]
    Q = np.hstack([Ur, Up])
    Gp = cp.Variable((n, n), PSD=True)  # G in the basis Q: G = Q Gp Q^T
    info = {"solver": solver}
    if reg == 0.0 and k == 0:  # no optimality constraint at all (bias alone is optimal): G = 0
        G = np.zeros((n, n))
        b = _u(tm) if bias else None
        res, loss = _dense_residuals(G, tm, mk, reg, b=b)
        res.update(dual_infeasibility=0.0, duality_gap=0.0)
        return SolveResult(
            x=G,
            fun=loss,
            status=_status_from(res, reg),
            method="cvxpy",
            residuals=res,
            message="trivial problem (no constraints): G = 0, solver not called",
            info={**info, "b": b},
        )
    if reg == 0.0:
        A = Ur.T @ K
        A = (A + A.T) / 2
        target_full = np.vstack([A, Up.T @ K])  # first k columns of Gp
        rows, cols = np.nonzero(np.tril(np.ones((n, n)))[:, :k])  # each symmetric entry once
        idx = cols * n + rows
        target = target_full[rows, cols]
        cons = [cp.vec(Gp, order="F")[idx] == target]
        prob = cp.Problem(cp.Minimize(cp.trace(Gp)), cons)
    else:
        lam, U = np.linalg.eigh(Sigma)
        Sh = U * np.sqrt(np.clip(lam, 0, None))
        ShQ = Q.T @ Sh
        CQ = Q.T @ C @ Q
        const = 1.0 - (1.0 / tm.n_words if bias else 0.0)  # 1 - ||u||^2 with the optimal bias
        obj = cp.sum_squares(Gp @ ShQ) - 2 * cp.sum(cp.multiply(CQ, Gp)) + const + reg * cp.trace(Gp)
        prob = cp.Problem(cp.Minimize(obj))
        cons = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError as exc:
            return SolveResult(
                x=None, fun=math.nan, status=2, method="cvxpy", message=f"cvxpy SolverError: {exc}", info=info
            )
    info["backend_status"] = prob.status
    stats = prob.solver_stats
    info["solve_time"] = stats.solve_time
    nit = int(stats.num_iters or 0)
    if Gp.value is None:
        return SolveResult(
            x=None, fun=math.nan, status=2, method="cvxpy", nit=nit, message=f"cvxpy status {prob.status!r}", info=info
        )
    G = Q @ Gp.value @ Q.T
    G = (G + G.T) / 2
    b = _u(tm) - G @ _mu(tm, mk) if bias else None
    info["b"] = b
    res, loss = _dense_residuals(G, tm, mk, reg, b=b)
    if reg == 0.0:
        # Dual of min tr(Gp) s.t. Gp[i,j] = target_k: max <lam, target> s.t. Z = I - sum lam_k E_k >= 0,
        # E_k = (e_i e_j^T + e_j e_i^T)/2. cvxpy returns y = -lam for `expr == target` constraints
        # (checked on 2x2 problems with known multipliers); Z and the gap are recomputed here.
        lamv = -np.asarray(cons[0].dual_value, dtype=float).reshape(-1)
        S = np.zeros((n, n))
        np.add.at(S, (rows, cols), lamv / 2)
        np.add.at(S, (cols, rows), lamv / 2)
        zmin = float(np.linalg.eigvalsh(np.eye(n) - S)[0])
        dual_obj = float(lamv @ target)
        res["dual_infeasibility"] = max(0.0, -zmin)
        res["duality_gap"] = float(np.trace(G) - dual_obj)
        info["dual_objective"] = dual_obj
    info["primal_objective"] = float(prob.value)
    backend_ok = prob.status in ("optimal", "optimal_inaccurate")
    status = _status_from(res, reg, backend_ok)
    msg = ""
    if status == 3:
        msg = f"cvxpy reported {prob.status!r} but our residual check failed: {res}"
    return SolveResult(
        x=G,
        fun=loss + reg * float(np.trace(G)),
        status=status,
        method="cvxpy",
        message=msg,
        nit=nit,
        residuals=res,
        info=info,
    )


@contextmanager
def _serial_blas(n_vars: int):
    """One BLAS thread for small L-BFGS problems (if ``threadpoolctl`` is installed).

    scipy's L-BFGS-B calls BLAS on vectors of length ``n_vars``; with several OpenBLAS threads on
    a loaded 2-core machine each call measured ~8 ms instead of ~1 ms at ``n_vars = 78``.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only a speed-up
        ctx = nullcontext()
    else:
        ctx = threadpool_limits(1, user_api="blas") if n_vars < 200_000 else nullcontext()
    with ctx:
        yield


def _solve_factorized(tm, mk, d, reg, seed, init_scale, maxiter, bias=False) -> SolveResult:
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    W0 = init_scale * rng.standard_normal((d, tm.V1))
    shape = W0.shape
    nW = W0.size
    z0 = np.r_[W0.ravel(), np.zeros(tm.V1)] if bias else W0.ravel()

    def fg(z):
        if bias:
            out = embedding_loss_grad(z[:nW].reshape(shape), tm, mk, b=z[nW:], reg=reg)
            return out.loss, np.r_[out.dW_E.ravel(), out.db]
        out = embedding_loss_grad(z.reshape(shape), tm, mk, reg=reg)
        return out.loss, out.dW_E.ravel()

    with _kernel_threads(tm.V1), _serial_blas(z0.size):
        opt = minimize(
            fg,
            z0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": maxiter, "maxfun": 2 * maxiter, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30},
        )
    W = opt.x[:nW].reshape(shape)
    b = opt.x[nW:].copy() if bias else None
    G = W.T @ W
    res, loss = _dense_residuals(G, tm, mk, reg, b=b, identifiable=True)
    res["grad_norm"] = float(np.linalg.norm(fg(opt.x)[1]))
    if tm.V1 <= DENSE_CHECK_MAX_V1:
        Gc = closed_form_gram(tm, mk, bias=bias).toarray()
        res["dist_closed_form_full"] = float(np.max(np.abs(G - Gc)))
    info = {
        "W_E": W,
        "b": b,
        "d": d,
        "mask_embedding_norm": float(np.linalg.norm(W[:, 0])),
        "scipy_message": str(opt.message),
    }
    status = _status_from({k: v for k, v in res.items()}, reg)
    if status == 3:
        status = 1 if opt.nit >= maxiter else 3
    msg = "" if status == 0 else f"L-BFGS: {opt.message}; residuals {res}"
    return SolveResult(
        x=G,
        fun=loss + reg * float(np.sum(W * W)),
        status=status,
        method="factorized",
        message=msg,
        nit=int(opt.nit),
        residuals=res,
        info=info,
    )
