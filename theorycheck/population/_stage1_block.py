"""The stage-1 block constants of the paper's model and the block-matrix assembler (SPEC §4.2, §4.3).

``(A, B0, gamma)`` of the minimum-norm stage-1 value matrix ``C Sigma^+`` (:func:`stage1_block_constants`), the
degenerate constant-context case, and :func:`block_token_matrix`, the one assembler of dense block-constant
``(V1, V1)`` token matrices; used by the (alpha, beta) family (:mod:`._alpha_beta`) and the solvers' block forms.
"""

from __future__ import annotations

import numpy as np

from .._memory import check_alloc
from ..models import Masking, TopicModel, check_models, require_symmetric, token_topic

__all__ = ["stage1_constant_context", "stage1_block_constants", "block_token_matrix"]


def stage1_constant_context(tm: TopicModel, mk: Masking) -> bool:
    """True when ``m_S`` is the same vector for every document (SPEC §4.2, degenerate cases).

    That is ``tau = T`` (uniform-tau prior), ``T = 1`` or ``a = 0``: the context then carries no
    information about the topics and the minimum-norm ``W^V`` is the rank-one ``u mu^T / ||mu||^2``.
    """
    if mk.a <= 0.0 or tm.T == 1:
        return True
    return tm.prior == "uniform-tau" and tm.tau == tm.T


def stage1_block_constants(tm: TopicModel, mk: Masking) -> tuple[float, float, float]:
    """``(A, B0, gamma)`` of the minimum-norm stage-1 value matrix ``C Sigma^+`` (SPEC §4.2, DER).

    The single home of these constants: the stage-1 solver, the (alpha, beta) family and the
    trainer's reference all call this function.

    Informative context (``a > 0``, ``T >= 2``, and ``tau < T`` or the Dirichlet prior), with ``n = T v``:

    .. math::
        B_0 = -\\frac{r (a + r) + n q^2}{a n [(a + r)^2 + n q^2]},\\quad
        A = B_0 + \\frac{1}{a v},\\quad
        \\gamma = \\frac{q (n B_0 + 1/a)}{a + r}

    (independent of ``tau`` and of the Dirichlet ``alpha``; ``gamma = 0`` when ``q = 0``).

    Constant context (``stage1_constant_context``: ``tau = T``, ``T = 1`` or ``a = 0``):
    ``Sigma = mu mu^T`` with ``mu = (a + r) u + q e_0``, the minimum-norm minimiser is
    ``u mu^T / ||mu||^2`` and, with ``||mu||^2 = (a + r)^2 / n + q^2``,

    .. math::
        A = B_0 = \\frac{a + r}{n^2 \\|\\mu\\|^2}, \\qquad \\gamma = \\frac{q}{n \\|\\mu\\|^2}.

    With ``T = 1`` there are no cross-topic entries and ``B0`` is reported as 0.
    Needs ``p_m > 0``; any prior.

    Parameters
    ----------
    tm : TopicModel
        The paper's symmetric model, any prior.
    mk : Masking
        ``mk.p_m > 0``.

    Returns
    -------
    A : float
        The same-topic entry ``W_{ww'}``, ``t(w) = t(w')`` (including ``w = w'``).
    B0 : float
        The different-topic entry (0 when ``T = 1``).
    gamma : float
        The [MASK] column ``W_{w0}`` (row 0 of ``W`` is zero). In the informative case
        ``A - B0 = 1/(a v)``.

    Raises
    ------
    ValueError
        If ``mk.p_m = 0`` (no selected positions).
    TypeError
        If ``tm`` is a :class:`~theorycheck.models.GeneralTopicModel` (use
        :func:`theorycheck.solvers.stage1_value_matrix`) or the arguments are not a model and a masking.

    See Also
    --------
    alpha_beta_value_matrix : The dense ``(V1, V1)`` matrix with these constants.
    value_loss : The loss these constants minimise (with minimum norm).
    theorycheck.solvers.optimal_value_matrix : The certified stage-1 solver, built on these constants.
    alpha_beta_loss : The stage-2 loss with this ``W^V`` frozen.

    References
    ----------
    SPEC §4.2 (the stage-1 optimum and its degenerate cases); Li, Li and Risteski, *How Do Transformers
    Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 2.

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import stage1_block_constants
    >>> tm, mk = TopicModel(T=10, v=10, tau=3), Masking()
    >>> A, B0, gamma = stage1_block_constants(tm, mk)
    >>> round(A, 10), round(B0, 10), round(gamma, 10)
    (0.1080202312, -0.0075867052, 0.0541907514)
    >>> round(A - B0, 12), round(1 / (mk.a * tm.v), 12)  # A - B0 = 1/(a v)
    (0.115606936416, 0.115606936416)

    Every topic in the document (``tau = T``): a constant context, ``A = B0``:

    >>> A, B0, gamma = stage1_block_constants(TopicModel(T=3, v=2, tau=3), mk)
    >>> A == B0
    True
    """
    require_symmetric(
        tm,
        "stage1_block_constants",
        "solvers.optimal_value_matrix(g, mk) (a LowRankMatrix) or solvers.stage1_value_matrix(g, mk)",
    )
    check_models(tm, mk)
    mk.require_masked_positions("the stage-1 value problem")
    return _stage1_constants(tm, mk)


def _stage1_constants(tm: TopicModel, mk: Masking) -> tuple[float, float, float]:
    """The body of :func:`stage1_block_constants` (arguments trusted: the paper's model, ``p_m > 0``)."""
    a, r, q = mk.a, mk.r, mk.q
    T, v = tm.T, tm.v
    n = T * v
    if stage1_constant_context(tm, mk):
        mu2 = (a + r) ** 2 / n + q * q
        A = (a + r) / (n * n * mu2)
        return A, (A if T > 1 else 0.0), q / (n * mu2)
    B0 = -(r * (a + r) + n * q * q) / (a * n * ((a + r) ** 2 + n * q * q))
    A = B0 + 1.0 / (a * v)
    gamma = q * (n * B0 + 1.0 / a) / (a + r)
    return A, B0, gamma


def block_token_matrix(
    T: int,
    v: int,
    same: float,
    other: float,
    *,
    mask_col: float = 0.0,
    diag: float | None = None,
    what: str = "block_token_matrix",
    alternative: str = "",
    max_bytes=None,
) -> np.ndarray:
    """The one assembler of dense block-constant ``(V1, V1)`` token matrices (``V1 = T v + 1``).

    ``M[i, j] = same`` for words of one topic, ``other`` for words of different topics,
    ``M[i, i] = diag`` on the word diagonal when ``diag`` is given, ``M[i, 0] = mask_col`` for
    words ``i``, row 0 zero. Used by :func:`alpha_beta_value_matrix` (SPEC §4.2 ``W^V``),
    :func:`alpha_beta_score_matrix` (SPEC §4.3 scores), ``BlockValueMatrix.toarray`` and
    ``BlockGram.toarray`` (SPEC §4.1). The size is checked by
    ``theorycheck._memory.check_alloc`` before anything is allocated (``ValueError`` naming
    ``alternative`` above ``max_bytes``).
    """
    V1 = int(T) * int(v) + 1
    check_alloc(what, (V1, V1), max_bytes=max_bytes, alternative=alternative)
    topics = token_topic(np.arange(1, V1), v)
    M = np.zeros((V1, V1))
    M[1:, 1:] = np.where(topics[:, None] == topics[None, :], same, other)
    if diag is not None:
        idx = np.arange(1, V1)
        M[idx, idx] = diag
    M[1:, 0] = mask_col
    return M
