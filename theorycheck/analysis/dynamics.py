"""Linearised two-stage dynamics: when and in which direction attention starts to learn.

SPEC §4.5 explains the two stages qualitatively: at a small init the scores are O(eps^2),
attention is uniform, and the K/Q gradients are O(eps ||W^V||), so W^V learns first. This module
makes the second half quantitative (DER, derived here and checked numerically in
``proofs_numeric/train_stage2_rate.py``).

Linearisation. With one-hot embeddings the score matrix is ``S = c W_Q^T W_K`` (``S[a, b]``:
query token ``a``, key token ``b``; ``c`` the score factor). Near ``W_K = W_Q = 0`` with ``W^V``
at its stage-1 value, write ``G = dL/dS`` at ``S = 0``. Gradient descent with step ``lr`` and the
L2 term ``reg (||W_K||^2 + ||W_Q||^2)`` is, to first order,

.. math::
    W_Q \\leftarrow W_Q - lr\\,(c\\, W_K G^T + 2\\,reg\\, W_Q),\\qquad
    W_K \\leftarrow W_K - lr\\,(c\\, W_Q G + 2\\,reg\\, W_K),

a linear map whose modes are the singular pairs ``(u_i, v_i, sigma_i)`` of ``G``: along
``(W_Q, W_K) ∝ (-u_i, v_i)`` both factors grow by ``1 + lr (c sigma_i - 2 reg)`` per step, so
``||W_K^T W_Q||_F`` grows by the factor

.. math:: g = \\big(1 + lr\\,(c\\,\\sigma_{max} - 2\\,reg)\\big)^2 \\ \\text{per step}

once the top mode dominates (continuous time: rate ``2 (c sigma_max - 2 reg)``). Stage 2 from a
small init therefore needs ``reg < c sigma_max / 2``.

Closed form at the block stage-1 optimum (squared loss, uniform-tau model). By the topic symmetry
and the softmax's shift invariance (every row of ``G`` sums to zero), the word block of ``G`` is
``-gamma (B - J/T)`` (``B`` the same-topic indicator, ``J`` all ones) and its [MASK] row and
column vanish; so ``G`` has rank ``T - 1``, its singular vectors are the *topic-contrast* vectors
(constant on each topic's words, summing to zero, zero on [MASK]) and ``sigma_max = gamma v``.
Matching the (alpha, beta) family at ``alpha = beta = 0`` (``dL/dalpha = trace G``) with the closed
form ``L(log K)`` of :func:`theorycheck.population.alpha_beta_loss_logK` gives

.. math:: \\sigma_{max} = -\\frac{1}{v\\,(T - 1)}\\,\\frac{dL}{d\\log K}\\Big|_{K = v}.

The first direction attention learns is therefore the topic pattern itself, with equal weight on
the same word and on the other words of the query's topic (``alpha = beta`` to first order), and
``sigma_max = 0`` when ``tau = 1`` (uniform attention is then already optimal, SPEC §6
item 16). At T = v = 10, tau = 3 and the default masking ``sigma_max = 4.964e-5``: 16 times smaller
than at T = 5, v = 4, tau = 2, which is why stage 2 takes far longer at the paper's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._validate import check_choice, check_loss, check_real
from ..models import Masking, TopicModel, check_models, require_symmetric
from ..population import attention_loss_grad
from ..population._alpha_beta import _block_loss_logK
from ..solvers import optimal_value_matrix

__all__ = ["Stage2Onset", "stage2_onset", "topic_contrast_basis"]

_ZERO_TOL = 1e-15


@dataclass
class Stage2Onset:
    """Result of :func:`stage2_onset`.

    Parameters
    ----------
    sigma_max : float
        Largest singular value of ``G = dL/dS`` at ``S = 0``.
    multiplicity : int
        Number of singular values within ``1e-9 sigma_max`` of it (``T - 1`` at the block optimum;
        0 when ``sigma_max = 0``; for ``"dense"`` a top singular value below
        ``1e-15 max(1, ||W_V||_F)`` counts as 0, and the count resolves a repeated value only when
        the SVD's round-off, ~1e-15, is below ``1e-9 sigma_max``, i.e. ``sigma_max >~ 1e-6``; the
        closed form's count is exact).
    score_factor, reg, lr : float
        The settings used (``lr`` may be ``None``): ``c > 0``, ``reg >= 0``, ``lr > 0``.
    rate : float
        Continuous-time growth rate of ``||W_K^T W_Q||``: ``2 (c sigma_max - 2 reg)`` (negative:
        the L2 term wins and stage 2 never starts from a small init).
    growth_per_step : float or None
        ``log`` of the per-step factor ``(1 + lr (c sigma_max - 2 reg))^2`` (needs ``lr``).
    reg_threshold : float
        ``c sigma_max / 2``: stage 2 happens from a small init only for ``reg`` below it.
    method : str
        ``"closed-form"`` or ``"dense"``.
    G, singular_values, U, Vt : ndarray or None
        The dense gradient and its SVD (``"dense"`` only).
    topic_alignment : float or None
        Fraction of the top singular subspace (left and right, averaged) inside the
        topic-contrast span (``"dense"`` only; 1 at the block optimum).

    See Also
    --------
    stage2_onset : Computes it.
    topic_contrast_basis : The span of the top singular vectors at the block optimum.
    theorycheck.analysis.stats.detect_stages : The stages read off a training run.

    References
    ----------
    SPEC §4.5 (the two stages; the linearisation in this module's docstring).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.dynamics import Stage2Onset, stage2_onset
    >>> on = stage2_onset(TopicModel(T=3, v=2, tau=2), Masking(), lr=0.1)
    >>> isinstance(on, Stage2Onset), on.multiplicity, round(on.rate, 12) == round(2 * on.sigma_max, 12)
    (True, 2, True)
    >>> round(on.steps_to_grow(10.0), 6)  # log(10) / (2 log(1 + lr sigma_max))
    1821.591453
    """

    sigma_max: float
    multiplicity: int
    score_factor: float
    reg: float
    lr: float | None
    rate: float
    growth_per_step: float | None
    reg_threshold: float
    method: str
    G: np.ndarray | None = field(default=None, repr=False)
    singular_values: np.ndarray | None = field(default=None, repr=False)
    U: np.ndarray | None = field(default=None, repr=False)
    Vt: np.ndarray | None = field(default=None, repr=False)
    topic_alignment: float | None = None

    def steps_to_grow(self, factor: float) -> float:
        """Steps for ``||W_K^T W_Q||`` to grow by ``factor`` once the top mode dominates
        (``inf`` if it does not grow).

        Parameters
        ----------
        factor : float, factor > 1
            The growth factor of ``||W_K^T W_Q||_F``.

        Returns
        -------
        float
            ``log(factor) / growth_per_step``, or ``inf`` when ``growth_per_step <= 0``.

        Raises
        ------
        ValueError
            ``factor <= 1``, or the result was computed without ``lr``.
        """
        factor = check_real("factor", factor, low=1.0, low_open=True)
        if self.growth_per_step is None:
            raise ValueError("steps_to_grow needs lr: call stage2_onset(..., lr=...)")
        return math.log(factor) / self.growth_per_step if self.growth_per_step > 0 else math.inf


def topic_contrast_basis(tm: TopicModel) -> np.ndarray:
    """Orthonormal basis (``V1 x (T-1)``) of the vectors constant on each topic's words, summing to
    zero, and zero on [MASK]: the directions in which attention first grows (module docstring).

    Parameters
    ----------
    tm : TopicModel
        The paper's topic model (``T`` topics of ``v`` words), ``T >= 2`` for a non-empty basis.

    Returns
    -------
    ndarray, shape (V1, T - 1)
        Orthonormal columns spanning ``{x : x_0 = 0, x constant on each topic's words, sum_w x_w = 0}``.

    Raises
    ------
    TypeError
        ``tm`` is a general topic model (use its dominant topics,
        :func:`~theorycheck.analysis.topic_structure.word_topics`).

    See Also
    --------
    stage2_onset : Its ``topic_alignment`` measures the top singular subspace against this span.
    Stage2Onset : The linearised growth whose top modes lie in this span.

    References
    ----------
    SPEC §4.5 (the two stages; the rank ``T - 1`` gradient in this module's docstring).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis.dynamics import topic_contrast_basis
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> P = topic_contrast_basis(tm)
    >>> P.shape, bool(np.allclose(P.T @ P, np.eye(2))), bool(np.allclose(P.sum(axis=0), 0))
    ((7, 2), True, True)
    >>> bool(np.all(P[0] == 0)), bool(np.allclose(P[1], P[2]))  # zero on [MASK], constant on topic 0
    (True, True)
    """
    require_symmetric(tm, "topic_contrast_basis", "analysis.topic_structure.word_topics(g) (dominant topics)")
    check_models(tm)
    B = np.zeros((tm.V1, tm.T))
    for t in range(tm.T):
        B[1 + t * tm.v : 1 + (t + 1) * tm.v, t] = 1.0
    B[1:] -= 1.0 / tm.T  # 1_t - (1/T) 1_words: sums to zero over the words
    U, _, _ = np.linalg.svd(B[1:], full_matrices=False)
    out = np.zeros((tm.V1, tm.T - 1))
    out[1:] = U[:, : tm.T - 1]
    return out


def _sigma_closed_form(tm, mk) -> float:
    """``sigma_max = -L'(log K = log v) / (v (T - 1))`` at the min-norm block ``W^V`` (module docstring)."""
    if tm.tau in (1, tm.T):
        # tau = T: one document law, the min-norm W^V is rank one and G = 0; tau = 1: L'(v) = 0
        # exactly (K* = v, SPEC §6 item 16), the formula leaves ~1e-17 of round-off.
        # "dense" confirms both (tests/test_dynamics.py).
        return 0.0
    _, dL = _block_loss_logK(np.float64(math.log(tm.v)), tm, mk, deriv=True)
    sigma = -float(dL) / (tm.v * (tm.T - 1))
    return sigma if sigma > 0 else 0.0


def _dense_modes(tm, mk, W_V, loss, mask_keys):
    """``G = dL/dS`` at ``S = 0`` (:func:`theorycheck.population.attention_loss_grad`) and its top modes.

    Returns ``(sigma_max, multiplicity, G, singular_values, U, Vt, topic_alignment)``.
    """
    if W_V is None:
        W_V = optimal_value_matrix(tm, mk).x
    W_V = np.asarray(W_V, dtype=float)
    if W_V.shape != (tm.V1, tm.V1):
        raise ValueError(f"W_V must have shape (V1, V1) = {(tm.V1, tm.V1)}, got {W_V.shape}")
    G = attention_loss_grad(np.zeros((tm.V1, tm.V1)), W_V, tm, mk, mask_keys=mask_keys, loss=loss).dS
    U, s, Vt = np.linalg.svd(G)
    # an exactly zero G (tau = 1, tau = T) comes out as round-off of size ~1e-18 ||W_V||
    sigma = float(s[0]) if s[0] > _ZERO_TOL * max(1.0, float(np.linalg.norm(W_V))) else 0.0
    mult = int(np.sum(s >= sigma * (1 - 1e-9))) if sigma > 0 else 0
    align = None
    if mult:
        P = topic_contrast_basis(tm)
        left = np.linalg.norm(P.T @ U[:, :mult]) ** 2 / mult
        right = np.linalg.norm(P.T @ Vt[:mult].T) ** 2 / mult
        align = float((left + right) / 2)
    return sigma, mult, G, s, U, Vt, align


def stage2_onset(
    tm: TopicModel,
    mk: Masking,
    *,
    lr: float | None = None,
    reg: float = 0.0,
    score_factor: float = 1.0,
    method: str = "closed-form",
    W_V=None,
    loss: str = "squared",
    mask_keys: bool = False,
) -> Stage2Onset:
    """Linearised growth of the attention scores at the end of stage 1 (module docstring).

    Parameters
    ----------
    tm, mk : TopicModel, Masking
        uniform-tau prior (the population is a finite mixture of topic sets).
    lr : float, optional
        SGD step; gives ``growth_per_step`` and :meth:`Stage2Onset.steps_to_grow`.
    reg : float
        L2 coefficient on ``||W_K||^2 + ||W_Q||^2``.
    score_factor : float
        ``c`` in ``S = c W_Q^T W_K`` (1 for ``ModelConfig(scale="none")``, ``1/sqrt(d_a)`` otherwise).
    method : {"closed-form", "dense"}
        ``"closed-form"``: ``sigma_max = -L'(log K = log v) / (v (T-1))`` at the min-norm block
        ``W^V``, O(1). ``"dense"``: ``G`` from :func:`theorycheck.population.attention_loss_grad`
        at ``S = 0`` and its SVD, O(C(T, tau) V1^3); any ``W_V`` and loss.
    W_V : ndarray (V1, V1), optional
        Value matrix for ``"dense"`` (default: the min-norm stage-1 ``C Sigma^+``).
    loss : {"squared", "ce"}
        ``"ce"`` only with ``"dense"`` (the closed form is the squared-loss theory).
    mask_keys : bool, default False
        Official-code key masking (``"dense"`` only).

    Returns
    -------
    Stage2Onset
        ``sigma_max``, its multiplicity, the growth ``rate = 2 (c sigma_max - 2 reg)``, the per-step
        ``log`` growth ``2 log(1 + lr (c sigma_max - 2 reg))`` (with ``lr``), the threshold
        ``reg_threshold = c sigma_max / 2``, and for ``"dense"`` the gradient, its SVD and the topic
        alignment.

    Raises
    ------
    ValueError
        A prior other than uniform-tau, ``T < 2``, ``lr <= 0``, ``reg < 0``, ``score_factor <= 0``, an
        unknown ``method`` or ``loss``, or ``W_V``, ``loss="ce"`` or ``mask_keys`` with
        ``"closed-form"``.
    TypeError
        ``tm`` is a general topic model (the message names the dense alternative).

    See Also
    --------
    Stage2Onset : The result.
    topic_contrast_basis : The directions of the top modes.
    theorycheck.population.attention_loss_grad : The gradient ``G`` of the ``"dense"`` method.
    theorycheck.population.alpha_beta_loss_logK : The closed form ``L(log K)`` behind ``sigma_max``.

    References
    ----------
    SPEC §4.5 (the two stages), §6 item 16 (``tau = 1``: uniform attention optimal); the derivation
    in this module's docstring (checked in ``proofs_numeric/train_stage2_rate.py``).

    Examples
    --------
    The closed form agrees with the SVD of the dense gradient, whose top ``T - 1`` singular vectors lie
    in the topic-contrast span:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.dynamics import stage2_onset
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> cf, dense = stage2_onset(tm, mk), stage2_onset(tm, mk, method="dense")
    >>> round(cf.sigma_max, 9), round(dense.sigma_max, 9), dense.multiplicity, round(dense.topic_alignment, 9)
    (0.006322254, 0.006322254, 2, 1.0)

    An L2 term above ``c sigma_max / 2`` stops stage 2; with ``tau = 1`` uniform attention is optimal:

    >>> stage2_onset(tm, mk, reg=cf.reg_threshold * 1.01).rate < 0
    True
    >>> stage2_onset(TopicModel(T=3, v=2, tau=1), mk).sigma_max
    0.0
    """
    require_symmetric(
        tm,
        "stage2_onset",
        "the SVD of population.attention_loss_grad(np.zeros((V1, V1)), solvers.stage1_value_matrix(g, mk), g, mk).dS",
    )
    check_models(tm, mk)
    check_choice("method", method, ("closed-form", "dense"))
    loss = check_loss(loss)
    if tm.prior != "uniform-tau":
        raise ValueError("stage2_onset needs prior='uniform-tau' (a finite mixture of topic sets)")
    if tm.T < 2:
        raise ValueError(f"stage2_onset needs T >= 2 topics, got T={tm.T}")
    lr = None if lr is None else check_real("lr", lr, low=0.0, low_open=True)
    reg = check_real("reg", reg, low=0.0)
    c = check_real("score_factor", score_factor, low=0.0, low_open=True)
    if method == "closed-form":
        if W_V is not None or loss != "squared" or mask_keys:
            raise ValueError(
                "method='closed-form' is the squared-loss block optimum: W_V, loss='ce' and "
                "mask_keys need method='dense'"
            )
        mk.require_informative("the (alpha, beta) attention loss")
        sigma = _sigma_closed_form(tm, mk)
        mult = tm.T - 1 if sigma > 0 else 0
        G = s = U = Vt = align = None
    else:
        sigma, mult, G, s, U, Vt, align = _dense_modes(tm, mk, W_V, loss, mask_keys)
    eff = c * sigma - 2.0 * reg
    growth = None
    if lr is not None:
        f = 1.0 + lr * eff
        growth = 2.0 * math.log(f) if f > 0 else -math.inf
    return Stage2Onset(
        sigma_max=sigma,
        multiplicity=mult,
        score_factor=c,
        reg=reg,
        lr=lr,
        rate=2.0 * eff,
        growth_per_step=growth,
        reg_threshold=c * sigma / 2.0,
        method=method,
        G=G,
        singular_values=s,
        U=U,
        Vt=Vt,
        topic_alignment=align,
    )
