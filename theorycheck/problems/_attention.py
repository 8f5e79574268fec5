"""Attention problems: the 2-d ``(alpha, beta)`` landscape and unrestricted scores ``S`` (SPEC §4.3).

``attention-ab/<value>``: ``min L(alpha, beta)``, the exact ``N -> inf`` MLM loss with scores
``S = alpha A + beta B`` (``A`` = same word, ``B`` = distinct words of one topic;
:func:`theorycheck.population.alpha_beta_score_matrix`) and the frozen value matrix ``block`` (the
stage-1 minimum-norm ``W^V``) or ``identity``. ``f`` is the O(1) closed form
(:func:`~theorycheck.population.alpha_beta_loss`); the gradient is computed by an independent route,
the exact dense ``dL/dS`` of :func:`~theorycheck.population.attention_loss_grad` contracted with
``A`` and ``B`` (``S`` is linear in ``(alpha, beta)``). Nonconvex. Certificate: interval branch and
bound on the squared loss (``solvers.optimal_attention(options={"certify": "interval"})``, rigorous, gap ~1e-14:
``lower`` the smaller of the final box's and the whole domain's lower bounds, so it bounds ``inf`` over ``R^2``);
for the cross-entropy loss the grid bound with an *estimated* Lipschitz constant (numerical, not
rigorous). Block ``W^V``: ``L`` depends on ``(alpha, beta)`` only through
``log K = log(e^alpha + (v-1) e^beta)``, the identifiable part; identity: ``(alpha, beta)``.

``attention-ab/cotopic``: the same landscape on a general topic model (SPEC §11.4), scores
``S = alpha I_w + beta G`` (``G`` the co-topic word similarity, :func:`solvers.cotopic_matrix`; on
the paper's model ``G = A + B`` and this is the ``(alpha, beta)`` family up to a change of
coordinates), frozen minimum-norm stage-1 ``W^V`` (:func:`solvers.stage1_value_matrix`), squared
loss; ``f`` and its gradient from the exact dense loss (:func:`~theorycheck.population.attention_loss_grad`
contracted with ``I_w`` and ``G``). **Its certificate is only numerical**: ``f*`` is the best value
of ``solvers.optimal_attention(g, mk)`` (a 7 x 7 grid of starts + L-BFGS-B on a box), with no proven
lower bound (``lower = upper``; a solver may find a lower value).

``attention-ab/label``: the same with the label family ``S = alpha I_w + beta Z`` (``Z`` the same-label indicator
of the SPEC §11.6 labels); ``f*`` **certified over all of** ``R^2`` by the general model's interval certificate
(``optimal_attention(g, mk, options={"family": "label", "certify": "interval"})``, SPEC §7, §11.8).

``attention-S/full``: ``min_S L(S)`` over all ``V1 x V1`` score matrices with the block ``W^V``
(:func:`~theorycheck.population.attention_loss` and its exact gradient). **Only an upper bound on
f* is known**: the certified optimum of the ``(alpha, beta)`` family; the lower bound is the trivial
0, and a solver may reach ``f < f*`` (negative suboptimality is then a finding, not an error).
"""

from __future__ import annotations

import math

import numpy as np

from ..population import (
    alpha_beta_loss,
    alpha_beta_score_matrix,
    alpha_beta_value_matrix,
    attention_loss,
    attention_loss_grad,
)
from ..solvers import cotopic_matrix, optimal_attention, stage1_value_matrix
from ._problem import Certificate, Problem

__all__ = ["AlphaBeta", "AlphaBetaIdentity", "AlphaBetaCE", "AlphaBetaCotopic", "AlphaBetaLabel", "AttentionS"]


class AlphaBeta(Problem):
    """``(alpha, beta)`` attention landscape, block ``W^V``, squared loss (SPEC §4.3); nonconvex, 2-d."""

    family = "attention-ab/block"
    value = "block"
    loss = "squared"
    start_doc = "seed 0: (0, 0) (uniform attention); seed k > 0: uniform on [-5, 10]^2 from default_rng(k)"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.shape = (2,)
        self._W = alpha_beta_value_matrix(tm, mk, self.value)
        self._A = alpha_beta_score_matrix(1.0, 0.0, tm)
        self._B = alpha_beta_score_matrix(0.0, 1.0, tm)

    def f(self, x) -> float:
        a, b = np.asarray(x, dtype=float)
        return float(alpha_beta_loss(a, b, self.tm, self.mk, self.value, loss=self.loss))

    def grad(self, x) -> np.ndarray:
        a, b = np.asarray(x, dtype=float)
        S = a * self._A + b * self._B
        dS = attention_loss_grad(S, self._W, self.tm, self.mk, loss=self.loss).dS
        return np.array([np.sum(dS * self._A), np.sum(dS * self._B)])

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(2)
        return np.random.default_rng(seed).uniform(-5.0, 10.0, size=2)

    def reference(self) -> np.ndarray:
        return np.asarray(optimal_attention(self.tm, self.mk, value=self.value, loss=self.loss).x, dtype=float)

    def _optimum(self):
        rigorous = self.loss == "squared"
        res = optimal_attention(
            self.tm, self.mk, value=self.value, loss=self.loss, options={"certify": "interval" if rigorous else None}
        )
        x = np.asarray(res.x, dtype=float)
        c = res.certificate or {}
        if rigorous and c.get("certified", False):  # the box's lower bound and the whole domain's (issue 36 item 1)
            lower = min(c["lower"], c["global_lower"])
            return Certificate("interval branch and bound (SPEC §4.3, §7), rigorous over R^2", lower, c["upper"]), x
        if rigorous:  # the interval bounds hold on the search box only (SPEC §7): f* <= upper, lower trivial
            method = f"interval branch and bound (SPEC §4.3): {c.get('kind', 'not certified')}, an upper bound only"
            return Certificate(method, 0.0, float(c["upper"]), kind="upper-bound"), x
        lower = min(float(c["grid_lower_bound"]), float(res.fun))
        method = "grid + estimated Lipschitz constant (SPEC §4.3), numerical, not rigorous"
        return Certificate(method, lower, float(res.fun), kind="numerical"), x

    def identifiable(self, x) -> np.ndarray:
        a, b = np.asarray(x, dtype=float)
        v = self.tm.v
        return np.array([a if v == 1 else np.logaddexp(a, math.log(v - 1) + b)])


class AlphaBetaIdentity(AlphaBeta):
    """``(alpha, beta)`` attention landscape, identity ``W^V``, squared loss (SPEC §4.3); nonconvex, 2-d."""

    family = "attention-ab/identity"
    value = "identity"

    def identifiable(self, x) -> np.ndarray:
        return np.asarray(x, dtype=float)


class AlphaBetaCE(AlphaBeta):
    """``(alpha, beta)`` attention landscape, block ``W^V``, cross-entropy loss (SPEC §4.3); 2-d."""

    family = "attention-ab/block-ce"
    loss = "ce"


class AlphaBetaCotopic(Problem):
    """``(alpha, beta)`` scores ``alpha I_w + beta G`` on a general topic model, stage-1 ``W^V``, squared loss
    (SPEC §11.4); nonconvex, 2-d; f* numerical (best value found, no proven lower bound)."""

    family = "attention-ab/cotopic"
    start_doc = "seed 0: (0, 0) (uniform attention); seed k > 0: uniform on [-5, 10]^2 from default_rng(k)"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.shape = (2,)
        self._W = stage1_value_matrix(tm, mk)
        self._I = np.eye(tm.V1)
        self._I[0, 0] = 0.0
        self._G = cotopic_matrix(tm)

    def _S(self, x):
        a, b = np.asarray(x, dtype=float)
        return a * self._I + b * self._G

    def f(self, x) -> float:
        return float(attention_loss(self._S(x), self._W, self.tm, self.mk))

    def grad(self, x) -> np.ndarray:
        dS = attention_loss_grad(self._S(x), self._W, self.tm, self.mk).dS
        return np.array([np.sum(dS * self._I), np.sum(dS * self._G)])

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(2)
        return np.random.default_rng(seed).uniform(-5.0, 10.0, size=2)

    def reference(self) -> np.ndarray:
        """The library's generic solver, run afresh (the ``closed-form`` built-in times it)."""
        return np.asarray(optimal_attention(self.tm, self.mk, value="stage1").x, dtype=float)

    def _optimum(self):
        x = self.reference()
        fx = self.f(x)
        method = "numerical only: best of a 7 x 7 grid of starts + L-BFGS-B (SPEC §11.4), no proven lower bound"
        return Certificate(method, fx, fx, kind="numerical"), x


class AlphaBetaLabel(AlphaBetaCotopic):
    """``(alpha, beta)`` scores ``alpha I_w + beta Z`` on a general topic model (``Z`` the same-label indicator of
    the SPEC §11.6 labels, diagonal 1), stage-1 ``W^V``, squared loss (SPEC §11.4, §11.8); nonconvex, 2-d; f*
    certified over all of ``R^2`` by the split-domain interval branch and bound (SPEC §7)."""

    family = "attention-ab/label"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        z = np.asarray(tm.dominant_topic())
        self._G = np.zeros((tm.V1, tm.V1))  # the family's second basis matrix: Z
        self._G[1:, 1:] = z[:, None] == z[None, :]

    def reference(self) -> np.ndarray:
        return np.asarray(optimal_attention(self.tm, self.mk, options={"family": "label"}).x, dtype=float)

    def _optimum(self):
        res = optimal_attention(self.tm, self.mk, options={"family": "label", "certify": "interval"})
        c, x = res.certificate, np.asarray(res.x, dtype=float)
        assert c is not None  # certify="interval" always attaches one
        if c["certified"]:
            method = "interval branch and bound over R^2 (SPEC §7, §11.8; score box + chart), rigorous"
            return Certificate(method, c["lower"], c["upper"]), x
        method = f"interval branch and bound over R^2 (SPEC §7, §11.8): {c['kind']}, an upper bound only"
        return Certificate(method, 0.0, float(c["upper"]), kind="upper-bound"), None


class AttentionS(Problem):
    """Unrestricted attention scores ``S`` (``V1 x V1``), block ``W^V``, squared loss (SPEC §4.3).

    f* is only an upper bound (the certified ``(alpha, beta)`` optimum).
    """

    family = "attention-S/full"
    start_doc = "seed 0: S = 0 (uniform attention); seed k > 0: S_ij ~ 0.1 N(0, 1) from default_rng(k)"

    def __init__(self, model, size, tm, mk):
        super().__init__(model, size, tm, mk)
        self.shape = (tm.V1, tm.V1)
        self._W = alpha_beta_value_matrix(tm, mk, "block")
        self._ab = AlphaBeta(model, size, tm, mk)

    def f(self, x) -> float:
        return float(attention_loss(x, self._W, self.tm, self.mk))

    def grad(self, x) -> np.ndarray:
        return np.asarray(attention_loss_grad(x, self._W, self.tm, self.mk).dS)

    def start(self, seed: int = 0) -> np.ndarray:
        if seed == 0:
            return np.zeros(self.shape)
        return 0.1 * np.random.default_rng(seed).standard_normal(self.shape)

    def reference(self) -> np.ndarray:
        a, b = self._ab.reference()
        return alpha_beta_score_matrix(a, b, self.tm)

    def _optimum(self):
        c = self._ab.certificate
        method = "upper bound only: the certified (alpha, beta) optimum; lower bound 0 is trivial"
        return Certificate(method, 0.0, c.upper, kind="upper-bound"), None

    def identifiable(self, x) -> np.ndarray:
        return np.asarray(x, dtype=float)
