"""Stage-1 block structure (SPEC §4.2): the block value matrix and its (A, B0, gamma) constants.

:class:`BlockValueMatrix` stores a block-constant ``V1 x V1`` value matrix by three numbers.
:func:`value_block_constants` returns the optimal constants for every ``reg >= 0``: at
``reg = 0`` it calls :func:`theorycheck.population.stage1_block_constants` (the single home of the
minimum-norm formulas, SPEC §4.2); for ``reg > 0`` it minimises the reduced three-parameter
ridge quadratic exactly (``_ridge_constants``, derivation in :mod:`._solve`).
:func:`structured_constants` is an independent O(1) numerical route, ``C_hat (Sigma_hat + reg I)^+``
in the topic-symmetric algebra of :mod:`._symmetric`, used to test the formulas at any size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._validate import check_real
from ...models import Masking, TopicModel, check_models, require_symmetric
from ...population._alpha_beta import block_token_matrix, stage1_block_constants, stage1_constant_context
from .._symmetric import TokenMatrixShape, TopicSym

__all__ = [
    "BlockValueMatrix",
    "value_block_constants",
    "structured_constants",
    "predicted_min_loss",
    "check_stage1_models",
    "block_constants",
    "hat_moments",
    "block_hat",
]

_DENSE_ALTERNATIVE = "W @ x or the block entries A, B0, gamma (BlockValueMatrix, O(1) storage)"


@dataclass(frozen=True)
class BlockValueMatrix(TokenMatrixShape):
    """A block-constant ``V1 x V1`` value matrix stored by its three entries (SPEC §4.2).

    ``W[0, :] = 0``; for words ``w, w'``: ``W[w, w'] = A`` if ``t(w) = t(w')`` else ``B0``;
    ``W[w, 0] = gamma``. Supports ``W @ x`` for ``x`` of shape ``(V1,)`` or ``(V1, k)`` in
    ``O(V1 k)``, :meth:`toarray` (guarded) and :attr:`fro_norm`
    ``= sqrt(T v [v A^2 + (T-1) v B0^2 + gamma^2])``.

    Parameters
    ----------
    A : float
        Same-topic word-word entry.
    B0 : float
        Different-topic word-word entry.
    gamma : float
        Word rows' entry in the mask column 0.
    T : int, T >= 1
        Number of topics.
    v : int, v >= 1
        Words per topic (``V1 = T v + 1``).

    See Also
    --------
    optimal_value_matrix : Returns one with ``options={"dense": False}``.
    value_block_constants : The optimal ``(A, B0, gamma)``.
    LowRankMatrix : The structured optimum of a general topic model.

    References
    ----------
    SPEC §4.2 (the block form of the stage-1 optimum).

    Examples
    --------
    >>> from theorycheck.solvers import BlockValueMatrix
    >>> W = BlockValueMatrix(A=1.0, B0=0.0, gamma=0.5, T=2, v=2)
    >>> W
    BlockValueMatrix(A=1, B0=0, gamma=0.5, T=2, v=2, shape=(5, 5))
    >>> W.toarray()
    array([[0. , 0. , 0. , 0. , 0. ],
           [0.5, 1. , 1. , 0. , 0. ],
           [0.5, 1. , 1. , 0. , 0. ],
           [0.5, 0. , 0. , 1. , 1. ],
           [0.5, 0. , 0. , 1. , 1. ]])
    >>> W @ np.ones(5), W.fro_norm  # O(V1) product; ||W||_F = sqrt(4 (2 + 0.25))
    (array([0. , 2.5, 2.5, 2.5, 2.5]), 3.0)
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

    def toarray(self, *, max_bytes=None) -> np.ndarray:
        """The dense ``(V1, V1)`` array (``theorycheck.population._alpha_beta.block_token_matrix``).

        Raises ``ValueError`` (before allocating) when it would exceed ``max_bytes``
        (default ``$THEORYCHECK_MAX_BYTES`` or half the available memory).
        """
        return block_token_matrix(
            self.T,
            self.v,
            self.A,
            self.B0,
            mask_col=self.gamma,
            what="BlockValueMatrix.toarray",
            alternative=_DENSE_ALTERNATIVE,
            max_bytes=max_bytes,
        )

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


def check_stage1_models(tm, mk):
    """Validate the models of the stage-1 value problem (``p_m > 0``; any prior)."""
    check_models(tm, mk)
    mk.require_masked_positions("the stage-1 value problem")


def predicted_min_loss(tm: TopicModel, mk: Masking) -> float:
    """Minimum of the unregularised loss: ``1 - E||p||^2``, or ``1 - 1/(T v)`` when ``a = 0`` (SPEC §4.0)."""
    if mk.a <= 0.0:
        return 1.0 - 1.0 / tm.n_words
    return tm.min_value_loss()


def value_block_constants(tm: TopicModel, mk: Masking, reg: float = 0.0) -> tuple[float, float, float, str]:
    """``(A, B0, gamma, case)`` of the optimal block-constant ``W^V`` for ``L(W) + reg ||W||_F^2`` (SPEC §4.2).

    ``reg = 0``: :func:`theorycheck.population.stage1_block_constants` (minimum-norm ``C Sigma^+``);
    ``case`` is ``"informative"`` or ``"constant-context"``. ``reg > 0``: the exact minimiser of the
    reduced ridge quadratic (``_ridge_constants``), ``case = "ridge"``.
    With ``T = 1`` there are no cross-topic entries and ``B0`` is reported as 0.

    Parameters
    ----------
    tm : TopicModel
        The paper's topic model (a :class:`~theorycheck.GeneralTopicModel` is refused: use
        :func:`optimal_value_matrix`).
    mk : Masking
        Masking probabilities, ``mk.p_m > 0``.
    reg : float, default 0.0
        Ridge weight ``lambda >= 0``.

    Returns
    -------
    A, B0, gamma : float
        Same-topic, different-topic and mask-column entries. Informative case (``reg = 0``):
        ``B0 = -[r (a+r) + T v q^2] / (a v T [(a+r)^2 + T v q^2])``, ``A = B0 + 1/(a v)``,
        ``gamma = q (T v B0 + 1/a) / (a + r)``; constant context: ``A = B0 = (a+r)/((T v)^2 ||mu||^2)``,
        ``gamma = q/(T v ||mu||^2)``.
    case : {"informative", "constant-context", "ridge"}
        Which formula applies.

    Raises
    ------
    ValueError
        ``reg < 0``, ``mk.p_m = 0``, or ``tm`` not the paper's symmetric model.

    See Also
    --------
    optimal_value_matrix : The whole certified solve (the matrix, residuals, status).
    BlockValueMatrix : The matrix these constants define.
    theorycheck.population.stage1_block_constants : The single home of the ``reg = 0`` formulas.

    References
    ----------
    SPEC §4.2 (minimum-norm minimiser, degenerate cases, ridge); Li, Li and Risteski, *How Do
    Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 2.

    Examples
    --------
    The SPEC §4.2 table (``T = 5``, ``v = 3``, ``tau = 2``) and its ridge example (``lambda = 0.1``):

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import value_block_constants
    >>> tm, mk = TopicModel(T=5, v=3, tau=2), Masking()
    >>> A, B0, gamma, case = value_block_constants(tm, mk)
    >>> round(A, 6), round(B0, 6), round(gamma, 6), case
    (0.36752, -0.017836, 0.121163, 'informative')
    >>> round(A - B0, 12) == round(1 / (mk.a * tm.v), 12)
    True
    >>> [round(c, 6) for c in value_block_constants(tm, mk, reg=0.1)[:3]]
    [0.072137, 0.011412, 0.048185]
    >>> value_block_constants(TopicModel(T=5, v=3, tau=5), mk)[3]  # tau = T: no topic information
    'constant-context'
    """
    require_symmetric(
        tm,
        "value_block_constants",
        "solvers.optimal_value_matrix(g, mk) (a LowRankMatrix) or solvers.stage1_value_matrix(g, mk)",
    )
    check_stage1_models(tm, mk)
    return block_constants(tm, mk, check_real("reg", reg, low=0.0))


def block_constants(tm: TopicModel, mk: Masking, reg: float) -> tuple[float, float, float, str]:
    """:func:`value_block_constants` on trusted arguments (the solvers' internal path)."""
    if reg > 0.0:
        A, B0, g = _ridge_constants(tm, mk, reg)
        return A, B0, g, "ridge"
    A, B0, g = stage1_block_constants(tm, mk)
    return A, B0, g, ("constant-context" if stage1_constant_context(tm, mk) else "informative")


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


def hat_moments(tm: TopicModel, mk: Masking) -> tuple[TopicSym, TopicSym]:
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
    check_stage1_models(tm, mk)
    reg = check_real("reg", reg, low=0.0)
    Sig, Cm = hat_moments(tm, mk)
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


def block_hat(A: float, B0: float, gamma: float, T: int, v: int) -> TopicSym:
    """``K_hat`` with ``W = Q K_hat Q^T`` for the block matrix ``(A, B0, gamma)``."""
    return TopicSym.from_entries(T, v * A, v * B0, math.sqrt(v) * gamma, 0.0, 0.0)
