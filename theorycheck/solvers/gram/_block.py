"""The block-constant Gram of the tied embedding model (SPEC §4.1 D3) and embeddings from Grams.

:class:`BlockGram` stores ``G = (W^E)^T W^E`` by two scalars (same-topic ``x``, different-topic ``y``);
:func:`closed_form_gram` gives the minimum-norm optimum (derivation in :mod:`._solve` and in the
function's notes); :func:`embedding_from_gram` factors a Gram into a ``d x V1`` embedding;
:func:`min_embedding_dim` is the smallest ``d`` attaining ``L*``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..._memory import check_alloc
from ..._validate import check_array, check_int, check_real
from ...models import GeneralTopicModel, Masking, TopicModel, check_models, require_symmetric
from ...population._alpha_beta import block_token_matrix
from .._symmetric import TokenMatrixShape
from ._lowrank import general_closed_form_gram

__all__ = [
    "BlockGram",
    "closed_form_gram",
    "block_closed_form_gram",
    "optimal_bias",
    "embedding_from_gram",
    "min_embedding_dim",
    "single_law",
    "block_gram_loss",
    "bias_const",
    "check_embedding_models",
]

_GRAM_ALTERNATIVE = "the BlockGram itself (x, y, matvec, eigenvalues: O(1) storage)"


@dataclass(frozen=True)
class BlockGram(TokenMatrixShape):
    """Block-constant Gram matrix over the tokens, ``(V1, V1)``, stored as two scalars.

    ``G[i, j] = x`` if words i, j share a topic (``i = j`` included), ``y`` if they do not, and
    row/column 0 ([MASK]) are zero. Use ``np.asarray(G)`` or :meth:`toarray` for the dense matrix
    (only for moderate V1: ``T = 1000, v = 100`` would need 80 GB).

    Its eigenvalues are ``v (x - y)`` on the ``T - 1`` topic contrasts, ``v (x - y) + T v y`` on
    ``1_W`` and 0 elsewhere (:meth:`eigenvalues`); ``trace = T v x``.

    Parameters
    ----------
    T : int, T >= 1
        Number of topics.
    v : int, v >= 1
        Words per topic (``V1 = T v + 1``).
    x : float
        Same-topic inner product ``<E_i, E_j>``, ``t(i) = t(j)``.
    y : float
        Different-topic inner product.

    See Also
    --------
    closed_form_gram : The minimum-norm optimal BlockGram.
    embedding_from_gram : An embedding with this Gram.
    BlockValueMatrix : The analogous structured stage-1 ``W^V``.

    References
    ----------
    SPEC §4.1 D3 (the block form of the minimum-norm tied optimum).

    Examples
    --------
    >>> from theorycheck.solvers import BlockGram
    >>> G = BlockGram(T=2, v=2, x=1.0, y=0.25)
    >>> G.toarray()
    array([[0.  , 0.  , 0.  , 0.  , 0.  ],
           [0.  , 1.  , 1.  , 0.25, 0.25],
           [0.  , 1.  , 1.  , 0.25, 0.25],
           [0.  , 0.25, 0.25, 1.  , 1.  ],
           [0.  , 0.25, 0.25, 1.  , 1.  ]])
    >>> G.eigenvalues()["topic_contrast"], G.eigenvalues()["ones"], G.rank(), G.trace
    ((1.5, 1), (2.5, 1), 2, 4.0)
    >>> bool(np.allclose(np.linalg.eigvalsh(G.toarray())[-2:], [1.5, 2.5]))
    True
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

    def toarray(self, *, max_bytes=None) -> np.ndarray:
        """Dense ``(V1, V1)`` matrix (``theorycheck.population._alpha_beta.block_token_matrix``).

        Raises ``ValueError`` (before allocating) above ``max_bytes`` (default
        ``$THEORYCHECK_MAX_BYTES`` or half the available memory).
        """
        return block_token_matrix(
            self.T, self.v, self.x, self.y, what="BlockGram.toarray", alternative=_GRAM_ALTERNATIVE, max_bytes=max_bytes
        )

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


def check_embedding_models(tm, mk, where):
    """Validate the models of a tied-embedding computation (``p_m > 0`` and ``a > 0``)."""
    check_models(tm, mk)
    mk.require_informative(where)


def single_law(tm: TopicModel) -> bool:
    """True iff every document has the same topic law (``tau = T`` or ``T = 1``)."""
    return tm.T == 1 or (tm.prior == "uniform-tau" and tm.tau == tm.T)


def closed_form_gram(tm: TopicModel, mk: Masking, *, bias: bool = False) -> BlockGram:
    """Minimum-norm optimal Gram of the tied model (SPEC §4.1 D3).

    Parameters
    ----------
    tm : TopicModel
        The paper's model, either prior (a :class:`~theorycheck.GeneralTopicModel` is refused: use
        :func:`optimal_embedding_gram`).
    mk : Masking
        ``p_m > 0`` and ``a = 1 - p_m (1 - p_c) > 0``; any ``q, r >= 0``.
    bias : bool, default False
        With a free (unpenalised) decoder bias ``b``; its optimal value is then
        ``b = u - G mu = u`` (uniform over words, see ``optimal_bias``).

    Returns
    -------
    BlockGram
        Without bias, generic case (``T >= 2`` and ``tau < T`` or Dirichlet):
        ``x = (1/(a v)) (1 - r/(T (a+r)))``, ``y = -r/(a v T (a+r))`` (rank T).
        Single document law (``tau = T`` or ``T = 1``): ``x = y = 1/(T v (a + r))`` (rank 1).
        With bias, generic case: ``x = (T-1)/(a v T)``, ``y = -1/(a v T)`` (rank T - 1, eigenvalue
        0 on ``1_W``: the bias carries the mean prediction); single law: ``G = 0``.

    Raises
    ------
    ValueError
        ``p_m = 0`` or ``a = 0`` (no original word visible), or ``tm`` not the paper's symmetric model.

    See Also
    --------
    optimal_embedding_gram : The certified solve (residuals, status; dense and SDP routes).
    BlockGram : The returned structure.
    min_embedding_dim : Its rank, the smallest embedding dimension.

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

    References
    ----------
    SPEC §4.1 D3 (minimum-norm tied optimum), D4 (free decoder bias); Li, Li and Risteski, *How Do
    Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 1.

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import closed_form_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> G = closed_form_gram(tm, mk)
    >>> a, r, T, v = mk.a, mk.r, tm.T, tm.v
    >>> round(G.x, 12) == round((1 - r / (T * (a + r))) / (a * v), 12), G.y < 0 < G.x
    (True, True)

    With a single document law (``tau = T``) the optimum is rank one, ``x = y = 1/(T v (a+r))``:

    >>> G1 = closed_form_gram(TopicModel(T=3, v=2, tau=3), mk)
    >>> G1.x == G1.y, round(G1.x * T * v * (a + r), 12), G1.rank()
    (True, 1.0, 1)

    With a free bias: ``x = (T-1)/(a v T)``, ``y = -1/(a v T)``, rank ``T - 1``:

    >>> Gb = closed_form_gram(tm, mk, bias=True)
    >>> round(Gb.x * a * v * T, 12), round(Gb.y * a * v * T, 12), Gb.rank()
    (2.0, -1.0, 2)
    """
    require_symmetric(
        tm, "closed_form_gram", "solvers.optimal_embedding_gram(g, mk) (the min-norm Gram as a LowRankMatrix)"
    )
    check_embedding_models(tm, mk, "closed_form_gram")
    return block_closed_form_gram(tm, mk, bool(bias))


def block_closed_form_gram(tm: TopicModel, mk: Masking, bias: bool) -> BlockGram:
    """:func:`closed_form_gram` on trusted arguments (the solvers' internal path; SPEC §4.1 D3, D4)."""
    a, r, T, v = mk.a, mk.r, tm.T, tm.v
    if bias:
        if single_law(tm):
            return BlockGram(T, v, 0.0, 0.0)
        return BlockGram(T, v, (T - 1) / (a * v * T), -1.0 / (a * v * T))
    if single_law(tm):
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
    c = bias_const(G, tm, mk)
    b = np.full(tm.V1, c)
    b[0] = 0.0
    return b


def bias_const(G: BlockGram, tm, mk) -> float:
    return 1.0 / tm.n_words - (mk.a + mk.r) * ((G.x - G.y) / tm.T + G.y)


def block_gram_loss(G: BlockGram, tm: TopicModel, mk: Masking, b_const: float = 0.0) -> float:
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


def embedding_from_gram(
    G: ArrayLike | BlockGram, d: int, *, tol: float | None = None, max_bytes: int | None = None
) -> np.ndarray:
    """An embedding ``W^E`` (``d x V1``) with ``(W^E)^T W^E = G``, by eigendecomposition.

    Parameters
    ----------
    G : array_like, shape (V1, V1), or BlockGram
        Symmetric PSD (tiny negative eigenvalues above ``-tol`` are clipped to 0).
    d : int
        Embedding dimension, ``d >= rank(G)``; rows beyond the rank are zero.
    tol : float, optional
        Eigenvalue tolerance, default ``1e-9 * max(1, |G|_max) * V1``.
    max_bytes : int, optional
        Memory limit (``theorycheck._memory.check_alloc``) of the ``(d, V1)`` output and, for a
        :class:`BlockGram`, of its ``(T, T)`` topic Gram.

    Returns
    -------
    ndarray, shape (d, V1)
        ``W^E = diag(sqrt(lambda)) U^T`` over the ``rank(G)`` largest eigenpairs; for a
        :class:`BlockGram` every word of a topic gets the same embedding and ``E_0 = 0``.

    Raises
    ------
    ValueError
        If ``G`` is not square, symmetric or PSD, has non-finite entries, ``d < rank(G)``, ``d < 1``
        or ``tol < 0``, or the arrays exceed ``max_bytes``.

    See Also
    --------
    closed_form_gram : The optimal Gram whose embedding this recovers.
    min_embedding_dim : The smallest ``d`` that attains the optimum.
    embedding_minimiser_violation : Checks that an embedding is a population minimiser.

    References
    ----------
    SPEC §4.1 D2 (the tied model, ``G = (W^E)^T W^E``).

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import closed_form_gram, embedding_from_gram
    >>> G = closed_form_gram(TopicModel(T=3, v=2, tau=2), Masking())
    >>> W_E = embedding_from_gram(G, 3)
    >>> W_E.shape, bool(np.allclose(W_E.T @ W_E, G.toarray())), bool(np.all(W_E[:, 0] == 0))
    ((3, 7), True, True)
    >>> embedding_from_gram(G, 2)
    Traceback (most recent call last):
    ...
    ValueError: d=2 is too small: the Gram matrix has rank 3, so no d x V1 embedding reproduces it; use d >= 3
    """
    d = check_int("d", d, low=1)
    if isinstance(G, BlockGram):
        check_alloc(
            "embedding_from_gram: (d, V1) embedding and (T, T) topic Gram",
            (d * G.V1 + G.T * G.T,),
            max_bytes=max_bytes,
            alternative="the BlockGram's eigenvalues() and matvec (O(1)); every word of a topic shares one embedding",
        )
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
    check_alloc(
        "embedding_from_gram: eigendecomposition and (d, V1) embedding",
        (2 * G.shape[0] * G.shape[0] + d * G.shape[0],),
        max_bytes=max_bytes,
        alternative="a BlockGram (closed_form_gram) for block-constant Grams",
    )
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


def min_embedding_dim(tm: GeneralTopicModel, mk: Masking, *, bias: bool = False) -> int:
    """Smallest embedding dimension ``d`` for which the tied model attains ``L* = 1 - E||p||^2``.

    Equals ``rank`` of the min-norm Gram (:func:`closed_form_gram`): ``T`` in the generic case
    (eigenvalues ``1/a`` x (T-1) and ``1/(a+r)``), 1 with a single document law. It is also a
    lower bound for every minimiser: ``G m_t = p_t`` for the ``T`` linearly independent vertex
    densities ``p_t = 1_t / v`` forces ``rank G >= T``. With a free bias (``bias=True``): ``T - 1``
    (``G (m_t - m_s) = p_t - p_s`` for ``T - 1`` independent differences), and 0 with a single
    document law (the bias alone is optimal).

    A :class:`~theorycheck.models.GeneralTopicModel`: the rank of its min-norm Gram
    ``Y (X^T Y)^+ Y^T`` (SPEC §11.5), which equals ``rank span{p_theta}`` (every minimiser has
    ``G m_theta = p_theta``, and the min-norm Gram's range lies in that of ``Y``).

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        The topic model.
    mk : Masking
        ``p_m > 0`` and ``a > 0``.
    bias : bool, default False
        With a free decoder bias.

    Returns
    -------
    int
        ``T`` (``T - 1`` with a bias) in the generic case; 1 (0 with a bias) with a single document law.

    Raises
    ------
    ValueError
        ``p_m = 0`` or ``a = 0``.
    TypeError
        ``bias`` not a bool.

    See Also
    --------
    closed_form_gram : The min-norm Gram whose rank this is.
    embedding_from_gram : An embedding of that dimension.
    optimal_embedding_gram : The ``"factorized"`` method needs ``d >= min_embedding_dim``.

    References
    ----------
    SPEC §4.1 D2-D4, §11.5.

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import min_embedding_dim
    >>> tm, mk = TopicModel(T=4, v=3, tau=2), Masking()
    >>> min_embedding_dim(tm, mk), min_embedding_dim(tm, mk, bias=True)
    (4, 3)
    >>> min_embedding_dim(TopicModel(T=4, v=3, tau=4), mk)  # a single document law
    1
    """
    check_models(tm, mk, general=True)
    mk.require_informative("min_embedding_dim")
    if not isinstance(bias, bool | np.bool_):
        raise TypeError(f"bias must be a bool, got {bias!r}")
    return _min_embedding_dim(tm, mk, bool(bias))


@functools.singledispatch
def _min_embedding_dim(g: GeneralTopicModel, mk: Masking, bias: bool) -> int:
    """Generic route (SPEC §11.5): the rank of ``Y (X^T Y)^+ Y^T`` (``Pi_D / a`` with a bias)."""
    return int(general_closed_form_gram(g, mk, bias=bias)[0].rank)


@_min_embedding_dim.register
def _(tm: TopicModel, mk: Masking, bias: bool) -> int:
    """Paper's model (SPEC §4.1 D3/D4): ``T`` (``T - 1`` with a bias), 1 (0) with a single document law."""
    return block_closed_form_gram(tm, mk, bias).rank()
