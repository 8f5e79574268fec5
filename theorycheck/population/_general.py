"""Exact population objects of a :class:`~theorycheck.models.GeneralTopicModel` (SPEC §11.1-§11.2).

Any row-stochastic topic-word matrix ``phi`` (``Phi``: its ``(T, V1)`` token form, column 0 = 0) and
either document law. With ``mu = E[theta]``, ``M2 = E[theta theta^T]`` (closed forms,
:meth:`~theorycheck.models.GeneralTopicModel.theta_moments`) and ``c = r u + q e_0``
(``u = 1_W / n``), SPEC §11.2:

.. math::
    E[p] = \\Phi^T \\mu, \\quad E[p p^T] = \\Phi^T M_2 \\Phi, \\quad
    C = a E[pp^T] + E[p] c^T, \\quad \\Sigma = a^2 E[pp^T] + a (E[p] c^T + c E[p]^T) + c c^T.

The uniform-attention squared loss is evaluated from the rank-``rho`` factors of SPEC §11.5
(:func:`stage1_factors`: ``Sigma = X X^T``, ``C = Y X^T``, ``rho <= T``), in ``O(V1^2 T)`` with no
``V1 x V1`` moment matrix:

.. math::
    L(W, b) = \\|W X\\|_F^2 - 2 \\langle W X, Y \\rangle + 1 + 2 b^T W E[m] + \\|b\\|^2 - 2 b^T E[p]
              + \\lambda \\|W\\|_F^2 .

``moments(method="enumerate")`` averages over every ``tau``-subset (uniform-tau law), the
independent check of the closed form.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from .._memory import check_alloc, resolve_max_bytes
from .._validate import check_array, check_choice, check_int, check_real
from ..models import Masking

__all__ = [
    "general_topic_density",
    "general_masked_density",
    "general_topic_sets",
    "general_expected_pp",
    "general_moments",
    "general_value_loss",
    "general_value_loss_grad",
    "stage1_factors",
    "Stage1Factors",
    "min_value_loss",
]

#: Largest number of topic sets :func:`general_topic_sets` materialises by default.
MAX_ENUMERATED_SETS = 200_000

_ALTERNATIVE = (
    "value_loss / value_loss_grad (from the rank-T factors, no moment matrix) or "
    "optimal_value_matrix(method='closed-form') (a factored matrix)"
)


def _check_mk(mk, where: str) -> Masking:
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    mk.require_masked_positions(where)
    return mk


def _check_topic_set(g, topics) -> np.ndarray:
    S = np.asarray(topics)
    if S.ndim != 1 or S.size == 0:
        raise ValueError(f"topics must be a non-empty 1-d sequence of topic indices, got shape {S.shape}")
    if not np.issubdtype(S.dtype, np.integer):
        if not np.all(np.isfinite(S)) or np.any(S != np.round(S)):
            raise ValueError(f"topics must be integers in [0, {g.T - 1}], got {topics!r}")
        S = S.astype(np.int64)
    if S.min() < 0 or S.max() >= g.T:
        raise ValueError(f"topics must be integers in [0, {g.T - 1}], got {topics!r}")
    if np.unique(S).size != S.size:
        raise ValueError(f"topics must be distinct, got {topics!r}")
    if g.prior == "uniform-tau" and S.size != g.tau:
        raise ValueError(f"topics must contain exactly tau={g.tau} topics, got {S.size}")
    return S


def topic_mixture(model, topics=None, theta=None) -> np.ndarray:
    """The document's topic mixture, shape ``(T,)``: ``theta = 1_S / |S|`` for a topic set ``S``, or the given
    ``theta`` validated (non-negative, summing to 1); exactly one of the two (SPEC §1.1, §11.1).
    ``model``: a ``TopicModel`` or a ``GeneralTopicModel`` (only ``T``, ``tau`` and ``prior`` are read)."""
    if (topics is None) == (theta is None):
        raise ValueError("pass exactly one of topics (a topic set) or theta (a topic mixture)")
    if theta is None:
        S = _check_topic_set(model, topics)
        th = np.zeros(model.T)
        th[S] = 1.0 / S.size
        return th
    th = check_array("theta", theta, shape=(model.T,))
    if np.any(th < 0) or abs(th.sum() - 1.0) > 1e-9:
        raise ValueError("theta must be non-negative and sum to 1")
    return th


def general_topic_density(g, topics=None, *, theta=None) -> np.ndarray:
    """``p_theta = Phi^T theta``, shape ``(V1,)`` (SPEC §11.1); ``theta = 1_S / |S|`` for a topic set ``S``."""
    return g.word_density(topic_mixture(g, topics, theta))


def _c_vector(g, mk) -> np.ndarray:
    """``c = r u + q e_0`` with ``u = 1_W / n`` (SPEC §11.1)."""
    c = np.full(g.V1, mk.r / g.n_words)
    c[0] = mk.q
    return c


def general_masked_density(g, mk, topics=None, *, theta=None) -> np.ndarray:
    """``m_theta = a p_theta + r u + q e_0``, shape ``(V1,)`` (SPEC §11.1, §2.1)."""
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    return mk.a * general_topic_density(g, topics, theta=theta) + _c_vector(g, mk)


def general_topic_sets(g, *, max_sets: int = MAX_ENUMERATED_SETS) -> np.ndarray:
    """All ``tau``-subsets in lexicographic order, shape ``(C(T, tau), tau)`` (uniform-tau law only).

    ``g``: a ``GeneralTopicModel`` or a ``TopicModel`` (only ``T``, ``tau``, ``prior`` are read)."""
    if g.prior != "uniform-tau":
        raise ValueError("topic_sets needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)")
    max_sets = check_int("max_sets", max_sets, low=1)
    n = g.n_topic_sets
    if n > max_sets:
        raise ValueError(
            f"C(T={g.T}, tau={g.tau}) = {n} topic sets exceeds max_sets={max_sets}; "
            "use a closed form or sample topic sets"
        )
    return np.array(list(itertools.combinations(range(g.T), g.tau)), dtype=np.int64).reshape(n, g.tau)


def general_expected_pp(g, *, max_bytes=None) -> np.ndarray:
    """``E[p p^T] = Phi^T M2 Phi``, shape ``(V1, V1)`` (SPEC §11.2), O(T n^2)."""
    check_alloc("expected_pp", (g.V1, g.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    _, M2 = g.theta_moments()
    Phi = g.topic_token_matrix()
    return (Phi.T @ M2) @ Phi


def general_moments(g, mk, *, method: str = "closed-form", max_bytes=None):
    """Exact ``(Sigma, C) = (E[m m^T], E[p m^T])``, each ``(V1, V1)`` (SPEC §11.2).

    ``method="closed-form"``: the formulas of the module docstring from ``E[theta theta^T]``, as
    ``Sigma = Phi_tilde^T M2 Phi_tilde`` and ``C = Phi^T M2 Phi_tilde`` (``Phi_tilde = a Phi + 1 c^T``,
    SPEC §11.5; equal to the §11.2 form because ``1^T theta = 1``), O(T n^2). ``method="enumerate"``:
    the average of ``m_S m_S^T`` and ``p_S m_S^T`` over every ``tau``-subset ``S`` (uniform-tau law
    only), the independent check.
    """
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    check_choice("method", method, ("closed-form", "enumerate"))
    check_alloc("moments: Sigma and C", (2, g.V1, g.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
    a, c = mk.a, _c_vector(g, mk)
    if method == "enumerate":
        sets = general_topic_sets(g)
        check_alloc("moments(method='enumerate')", (2, len(sets), g.V1), max_bytes=max_bytes, alternative=_ALTERNATIVE)
        theta = np.zeros((len(sets), g.T))
        np.put_along_axis(theta, sets, 1.0 / g.tau, axis=1)
        P = g.word_density(theta)
        M = a * P + c
        return M.T @ M / len(sets), P.T @ M / len(sets)
    # the §11.2 formulas folded into two (V1 x T)(T x V1) products: since 1^T theta = 1,
    # m = Phi_tilde^T theta with Phi_tilde = a Phi + 1 c^T, so Sigma = Phi_tilde^T M2 Phi_tilde and
    # C = Phi^T M2 Phi_tilde (SPEC §11.5); no V1 x V1 temporaries
    _, M2 = g.theta_moments()
    Phi = g.topic_token_matrix()
    Phi_t = a * Phi + c[None, :]
    return (Phi_t.T @ M2) @ Phi_t, (Phi.T @ M2) @ Phi_t


class Stage1Factors(NamedTuple):
    """Rank-``rho`` factors of the moments (SPEC §11.5): ``Sigma = X X^T``, ``C = Y X^T``.

    Attributes
    ----------
    X, Y : ndarray, shape (V1, rho)
        ``X = Phi_tilde^T L``, ``Y = Phi^T L`` with ``M2 = L L^T`` (``Phi_tilde = a Phi + 1 c^T``).
    L : ndarray, shape (T, rho)
    Ep, Em : ndarray, shape (V1,)
        ``E[p]`` and ``E[m] = a E[p] + c``.
    """

    X: np.ndarray
    Y: np.ndarray
    L: np.ndarray
    Ep: np.ndarray
    Em: np.ndarray


#: Relative eigenvalue threshold of the rank-revealing factor of ``M2`` / ``Cov(theta)``.
RANK_RTOL = 1e-12


def _psd_factor(M: np.ndarray, ref: float = 0.0) -> np.ndarray:
    """``L`` with ``M = L L^T`` over the eigenvalues above ``RANK_RTOL * max(lambda_max(M), ref)``
    (rank-revealing). ``ref``: the scale of the arrays ``M`` was computed from, e.g. ``||M2||`` for
    ``Cov(theta) = M2 - mu mu^T``, whose round-off (``~ eps ||M2||``) is no direction of the data even
    when it is all there is (a single topic law: ``Cov(theta) = 0`` exactly)."""
    lam, U = np.linalg.eigh((M + M.T) / 2)
    top = max(float(lam.max()) if lam.size else 0.0, ref)
    keep = lam > RANK_RTOL * top if top > 0 else np.zeros(lam.shape, dtype=bool)
    return U[:, keep] * np.sqrt(lam[keep])


def stage1_factors(g, mk, *, centred: bool = False) -> Stage1Factors:
    """The factors of SPEC §11.5 in O(n T^2); ``centred=True`` factors ``Cov(theta)`` instead of ``M2``
    (then ``X X^T = Sigma - E[m] E[m]^T``, ``Y X^T = C - E[p] E[m]^T``, the free-bias problem)."""
    mu, M2 = g.theta_moments()
    L = _psd_factor(M2 - np.outer(mu, mu), ref=float(np.linalg.norm(M2, 2))) if centred else _psd_factor(M2)
    Phi = g.topic_token_matrix()
    Y = Phi.T @ L
    X = mk.a * Y + np.outer(_c_vector(g, mk), L.sum(axis=0))
    Ep = g.word_density(mu)
    return Stage1Factors(X, Y, L, Ep, mk.a * Ep + _c_vector(g, mk))


def min_value_loss(g, mk) -> float:
    """Minimum of the unregularised loss (SPEC §11.3, §11.5): ``1 - tr(Phi^T M2 Phi)`` for ``a > 0``,
    else ``1 - ||E[p]||^2`` (constant context ``m = c``)."""
    mu, M2 = g.theta_moments()
    if mk.a > 0.0:
        return 1.0 - float(np.sum(M2 * (g.phi @ g.phi.T)))
    Ep = g.phi.T @ mu
    return 1.0 - float(Ep @ Ep)


def _validate_value(W, g, mk, b, reg):
    _check_mk(mk, "value_loss")
    W = check_array("W", W, shape=(g.V1, g.V1))
    b = None if b is None else check_array("b", b, shape=(g.V1,))
    return W, b, check_real("reg", reg, low=0.0)


def _loss_from_products(WX, WEm, W_sq, F, b, reg) -> float:
    """The loss of the module docstring from ``W X``, ``W E[m]`` and ``||W||_F^2``."""
    loss = float(np.sum(WX * WX)) - 2.0 * float(np.sum(WX * F.Y)) + 1.0 + reg * W_sq
    if b is not None:
        loss += 2.0 * float(b @ WEm) + float(b @ b) - 2.0 * float(b @ F.Ep)
    return loss


def general_value_loss(W, g, mk, b=None, reg: float = 0.0) -> float:
    """Exact uniform-attention squared loss ``E ||W m + b - e_x||^2 + reg ||W||_F^2`` (SPEC §11.2, §11.5).

    O(V1^2 T) from the factors (module docstring); the minimum at ``reg = 0`` is
    :func:`min_value_loss`.
    """
    W, b, reg = _validate_value(W, g, mk, b, reg)
    F = stage1_factors(g, mk)
    return _loss_from_products(W @ F.X, W @ F.Em, float(np.sum(W * W)), F, b, reg)


def general_value_loss_grad(W, g, mk, b=None, reg: float = 0.0, *, max_bytes=None):
    """``(L, dL/dW, dL/db)`` of :func:`general_value_loss` (SPEC §11.5).

    ``dL/dW = 2 (W X - Y) X^T + 2 b E[m]^T + 2 reg W`` (``= 2 W Sigma - 2 C + 2 b mu^T + 2 reg W``),
    ``dL/db = 2 (W E[m] + b - E[p])``; ``dL/db`` at ``b = 0`` when ``b is None``.
    """
    W, b, reg = _validate_value(W, g, mk, b, reg)
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    check_alloc("value_loss_grad: dense gradient", (2, g.V1, g.V1), max_bytes=max_bytes,
                alternative="value_loss (no gradient) or optimal_value_matrix(method='closed-form')")  # fmt: skip
    F = stage1_factors(g, mk)
    WX, WEm = W @ F.X, W @ F.Em
    loss = _loss_from_products(WX, WEm, float(np.sum(W * W)), F, b, reg)
    bb = np.zeros(g.V1) if b is None else b
    dW = 2.0 * (WX - F.Y) @ F.X.T + 2.0 * np.outer(bb, F.Em) + 2.0 * reg * W
    return loss, dW, 2.0 * (WEm + bb - F.Ep)


def _value_loss_dense_ref(W, g, mk, b=None, reg: float = 0.0) -> float:
    """Dense reference from the moment matrices: ``tr(W Sigma W^T) - 2 <W, C> + ...``."""
    Sigma, C = general_moments(g, mk)
    W = np.asarray(W, dtype=float)
    loss = float(np.sum((W @ Sigma) * W) - 2.0 * np.sum(W * C) + 1.0 + reg * np.sum(W * W))
    if b is not None:
        F = stage1_factors(g, mk)
        loss += float(2.0 * b @ W @ F.Em + b @ b - 2.0 * b @ F.Ep)
    return loss
