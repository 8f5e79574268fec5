"""Structured exact attention loss of the (alpha, beta) score families of a general topic model (SPEC §11.8).

For ``S = alpha I_w + beta B`` with ``B`` the same-label indicator ``Z`` (``family="label"``, the SPEC §11.6
labels) or the co-topic cosine ``G`` (``family="co-topic"``, :func:`theorycheck.solvers.cotopic_matrix`)
the exact loss of SPEC §11.4 is evaluated without any ``V1 x V1`` array: the context law is linear in
``theta`` (``m_theta = Phi~^T theta``, SPEC §11.5), so the ``V1``-sized work is done once per ``beta``
(:mod:`._attention_tables`) and a document law ``theta`` then costs

- squared loss, label family: ``O(V1 T + L T^2)``; co-topic family: ``O(V1 T^2)``, ``O(V1 tau^2)`` for a topic set
  on the pair-sum route of SPEC §11.8(a) (:mod:`._cotopic_pairs`, :mod:`._set_laws`: the stage-1 ``W``,
  ``O(V1^2 T^2 / 2)`` per ``beta``);
- cross-entropy (factored ``W`` only): ``O(V1^2 k)`` (every output coordinate of every query enters the
  log-sum-exp; ``k = rank W``), after ``O(V1^2 T k)`` per ``beta``.

With ``A = ||N_theta||^2``, ``B_q = b^T N_theta``, ``D = e_x^T N_theta``, ``F = p_theta^T N_theta`` and
``Z = Z_theta(x)`` (:mod:`._attention_tables`) the squared loss of a word query is

.. math::
    \\ell_x = \\omega (A/Z^2 + 2 B_q/Z + \\|b\\|^2) - 2 p_c p_\\theta(x) (D/Z + b_x)
             - \\tfrac{2 p_r}{n} (F/Z + p_\\theta^T b) + \\omega,\\qquad \\omega = p_c p_\\theta(x) + p_r/n,

the [MASK] query attends uniformly (``o = W m_theta + b``), and the gradient in ``(alpha, beta)`` follows
by the chain rule through ``Z, A, B_q, D, F`` (``d g / d alpha = e^alpha e^{beta B_xx} m_theta(x)``, the
``beta``-derivatives of the tables). Uniform-tau: exact over all ``C(T, tau)`` sets, evaluated in chunks
of sets, parallel over sets on ``--threads`` / ``THEORYCHECK_THREADS`` threads (default 1, the project's
policy for shared machines, :mod:`theorycheck._threads`); Dirichlet: over sampled ``theta`` with the standard error.
"""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, softmax

from .._memory import check_alloc, check_work, resolve_max_bytes
from .._threads import blas_threads, numba_threads, requested
from .._validate import check_array, check_choice, check_int, check_loss, check_real
from ..models import GeneralTopicModel, Masking, check_models
from ._attention_loss import DEFAULT_N_THETA, _check_n_sets, _thetas
from ._attention_tables import (
    ExcludedLabelBasis,
    LabelBasis,
    ValueOperator,
    blocked_tables,
    context_rows,
    cotopic_rows,
    excluded_label_tables,
    label_rows,
    label_tables,
    static_tables,
)
from ._cotopic_pairs import pair_basis, pair_tables
from ._set_laws import set_laws, sets_of

__all__ = [
    "family_attention_loss",
    "FamilyLoss",
    "FamilyEvaluator",
    "FAMILIES",
    "value_operator",
    "SCORE_MAX",
    "check_family_scores",
    "point_operations",
]

#: The structured score families: ``alpha I_w + beta Z`` (labels) and ``alpha I_w + beta G`` (co-topic).
FAMILIES = ("label", "co-topic")
_CHUNK_BYTES = 16 * 2**20
#: Largest ``|beta|``, ``alpha`` and ``alpha + beta`` the structured evaluator takes: its key weights enter
#: squared (``A / Z^2``), and ``e^{2 (alpha + beta)}`` overflows near 354; when every key of positive mass shares
#: the query's label, ``Z ~ e^beta`` and ``Z^2`` underflows near ``beta = -354``. ``alpha`` has no lower limit.
SCORE_MAX = 300.0


def check_family_scores(alpha: float, beta: float, where: str = "family_attention_loss") -> None:
    """``ValueError`` unless ``|beta|``, ``alpha`` and ``|alpha + beta|`` are at most :data:`SCORE_MAX`."""
    if max(alpha, abs(beta), abs(alpha + beta)) > SCORE_MAX:
        raise ValueError(
            f"{where}: the structured evaluator takes -{SCORE_MAX:g} <= beta <= {SCORE_MAX:g}, alpha <= {SCORE_MAX:g} "
            f"and -{SCORE_MAX:g} <= alpha + beta <= {SCORE_MAX:g} (its key weights enter squared and would overflow "
            f"or underflow beyond about 354), got alpha={alpha!r}, beta={beta!r}; the dense attention_loss takes any "
            "scores (small models)"
        )


#: Laws per chunk and words per block of the squared-loss kernel (the GEMM output of a chunk x block stays in cache).
_LAW_CHUNK = 512
#: Largest estimated rounding error (relative to max(1, loss)) of the label tables before the tables that leave the
#: own word out (blocked for a factored W^V, excluded_label_tables for a dense one; SPEC §11.8, the own word)
CANCEL_TOL = 1e-13
EPS = float(np.finfo(float).eps)
_WORD_BLOCK = 256
_FACTORS_HINT = (
    "pass W^V factored as (left, right) with W = left @ right.T (e.g. optimal_value_matrix(g, mk).x, a "
    "LowRankMatrix), or use attention_loss for a small model"
)


class FamilyLoss(NamedTuple):
    """Loss of the family at ``(alpha, beta)`` with its error and (optionally) its gradient.

    ``value`` (exact when ``exact``), ``stderr`` (0 for the enumeration of the uniform-tau sets, else
    ``sd / sqrt(n)``), ``n`` document laws, ``dalpha``, ``dbeta`` (``None`` without ``grad``).

    Parameters
    ----------
    value : float
        The loss averaged over the document laws.
    stderr : float, stderr >= 0
        Its standard error, 0 when ``exact``.
    n : int, n >= 1
        Number of averaged document laws (topic sets or sampled ``theta``).
    exact : bool
        Whether every topic set was enumerated.
    dalpha : float or None
        ``dL/dalpha`` of the same average (``None`` unless ``grad=True``).
    dbeta : float or None
        ``dL/dbeta`` (``None`` unless ``grad=True``).

    See Also
    --------
    family_attention_loss : Returns it.
    LossEstimate : The same fields without the gradient, for any scores.
    alpha_beta_loss : The closed form on the paper's model.

    References
    ----------
    SPEC §11.8 (the structured loss of the families).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_value_matrix, family_attention_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> r = family_attention_loss(0.0, 0.0, alpha_beta_value_matrix(tm, mk), tm, mk)
    >>> r._fields
    ('value', 'stderr', 'n', 'exact', 'dalpha', 'dbeta')
    >>> round(r.value, 12), r.n, r.exact, r.dalpha is None
    (0.75, 3, True, True)
    """

    value: float
    stderr: float
    n: int
    exact: bool
    dalpha: float | None
    dbeta: float | None


def value_operator(W, V1: int, name: str = "W") -> ValueOperator:
    """A validated ``W^V``: a dense ``(V1, V1)`` array, a pair ``(left, right)`` or an object with ``left`` and
    ``right`` attributes (``W = left @ right.T``, both ``(V1, k)``)."""
    pair = (W.left, W.right) if hasattr(W, "left") and hasattr(W, "right") else None
    if pair is None and isinstance(W, tuple) and len(W) == 2:
        pair = W
    if pair is not None:
        U = check_array(f"{name}.left", pair[0])
        V = check_array(f"{name}.right", pair[1])
        if U.ndim != 2 or V.ndim != 2 or U.shape[0] != V1 or V.shape != U.shape:
            raise ValueError(f"{name}: factors must both have shape (V1={V1}, k), got {U.shape} and {V.shape}")
        return ValueOperator(left=U, right=V)
    return ValueOperator(dense=check_array(name, W, shape=(V1, V1)))


class FamilyEvaluator:
    """The structured loss of one family for fixed ``(model, masking, W, b, mask_keys, loss, document laws)``;
    the ``beta``-tables are cached for the last ``beta`` (a grid over ``alpha`` reuses them).

    The co-topic family with the squared loss and a ``W`` whose right factor is linear in the key features (the
    stage-1 ``W^V``) builds its tables from pair sums (SPEC §11.8(a), :mod:`._cotopic_pairs`; ``route ==
    "pairs"``, ``pair_info`` the checks), else by the blocked product (``route == "blocked"``; ``pairs=False``
    forces it). Over uniform-tau sets such an evaluator reads each (query, set) pair in ``O(tau^2)``
    (:mod:`._set_laws`), and :meth:`alpha_scan` evaluates several ``alpha`` with their first two derivatives in one
    pass at the same tables (``alpha_cheap``)."""

    def __init__(self, g, mk, op: ValueOperator, family, b, mask_keys, loss, theta, sampled, pairs=None):
        self.g, self.mk, self.op, self.family, self.b, self.loss = g, mk, op, family, b, loss
        self.theta, self.sampled = theta, sampled
        Mp, Phi = context_rows(g, mk, mask_keys)
        self.st = static_tables(op, Mp, Phi, b)
        labels = g.dominant_topic()
        self.rows = label_rows(labels) if family == "label" else cotopic_rows(g.phi)
        self.lb = LabelBasis(op, self.st, labels, b) if (family == "label" and loss == "squared") else None
        self.pb, self.pair_info = None, {"applies": False}
        if family == "co-topic" and loss == "squared" and pairs is not False:
            self.pb, self.pair_info = pair_basis(op, self.st, g.phi, bool(mask_keys), mk.a, mk.r)
        self.route = "pairs" if self.pb is not None else ("label" if self.lb is not None else "blocked")
        self.sets = sets_of(theta, g.tau) if g.prior == "uniform-tau" else None
        self.alpha_cheap = self.pb is not None and self.sets is not None
        self._beta: float | None = None
        self._with_d = True
        self._blocked_label = self._tables_blocked = False
        self._tables: object = None
        self._xb: ExcludedLabelBasis | None = None

    def tables(self, beta, want_d=True):
        """The tables at ``beta`` (cached for the last ``beta``); ``want_d=False`` lets the pair-sum route skip the
        ``beta``-derivative tables (half its work)."""
        stale = self._beta != beta or self._blocked_label != self._tables_blocked or (want_d and not self._with_d)
        if stale:
            self._tables_blocked = self._blocked_label
            self._with_d = True
            if self.loss == "ce":
                self._tables = blocked_tables(self.op, self.st, self.rows, beta, self.b, want_K=True)
            elif self.pb is not None:  # its own thread settings (pair_sums, contract)
                self._tables = pair_tables(self.pb, self.st, self.op, beta, self.b, bool(want_d))
                self._with_d = bool(want_d)
            elif self.lb is not None and not self._blocked_label:
                self._tables = label_tables(self.lb, self.st, beta)
            elif self.lb is not None and not self.op.factored:  # the own word left out: exact for alpha << 0 << beta
                if self._xb is None:
                    self._xb = ExcludedLabelBasis(self.op, self.st, self.lb, self.b)
                self._tables = excluded_label_tables(self._xb, self.lb, self.st, beta)
            else:
                self._tables = blocked_tables(self.op, self.st, self.rows, beta, self.b)
            self._beta = beta
        return self._tables

    def alpha_scan(self, alphas, beta, want_beta=False):
        """``(n_alpha, 4)``: the loss, ``dL/dalpha``, ``d2L/dalpha2`` and (with ``want_beta``, else 0) ``dL/dbeta``
        at each ``alphas[i]`` and ``beta``, averaged over the laws; one pass over the (query, set) pairs at the same
        tables (needs ``alpha_cheap``)."""
        if not self.alpha_cheap:
            raise ValueError("alpha_scan needs the pair-sum route over uniform-tau sets (alpha_cheap)")
        for a in np.atleast_1d(alphas):
            check_family_scores(float(a), beta, "FamilyEvaluator.alpha_scan")
        tb = self.tables(beta, want_beta)
        out = set_laws(self.sets, self.theta, tb, self.st, self.mk, alphas, want_beta)
        return out.mean(axis=2)

    def per_law(self, alpha, beta, want_grad=False):
        """Per-law losses ``(n,)`` and, with ``want_grad``, their ``alpha``- and ``beta``-derivatives."""
        tb = self.tables(beta, want_grad)
        if self.alpha_cheap:
            out = set_laws(self.sets, self.theta, tb, self.st, self.mk, [alpha], want_grad)[0]
            return (out[0], out[1], out[3]) if want_grad else out[0]
        if self.pb is not None:  # pair-sum tables, dense laws: the word-major layout of _sq_laws
            tb = tb.as_tables()
        # --threads / THEORYCHECK_THREADS, else 1 (shared machines); the squared loss's products have inner dimension
        # T (tall and skinny): one BLAS thread is faster there and leaves the cores to the Numba kernel
        with blas_threads(None if self.loss == "ce" else 1), numba_threads():
            if self.loss == "ce":  # laws in parallel threads
                parts = [self.theta[i : i + 1] for i in range(len(self.theta))]
                work = functools.partial(_ce_chunk, st=self.st, tbK=tb, op=self.op, alpha=alpha, mk=self.mk,
                                         want_grad=want_grad)  # fmt: skip
                with ThreadPoolExecutor(min(len(parts), requested() or 1)) as ex:
                    res = list(ex.map(work, parts))
                out = [np.concatenate([r[i] for r in res]) for i in range(3 if want_grad else 1)]
            else:  # laws in parallel Numba threads
                lb = self.lb
                if (
                    tb.diag_in
                    and lb is not None
                    and 4.0 * EPS * _own_word_condition(lb, self.st, alpha, beta) > CANCEL_TOL
                ):
                    return self._exact_label(alpha, beta, want_grad)  # Z would cancel: the own word left out
                out = _sq_laws(self.theta, self.st, tb, alpha, self.mk, want_grad)
                # label tables carry e^beta on the own word and g subtracts it for alpha < 0: the error of
                # A / Z^2 is ~ eps x the size of its summands; beyond CANCEL_TOL use the exact tables
                err = 4.0 * EPS * float(np.max(out[3]))
                bad = not all(np.all(np.isfinite(o)) for o in out[:3])  # Z <= 0 by cancellation, weighted by 0
                if tb.diag_in and (bad or err > CANCEL_TOL * max(1.0, float(np.max(np.abs(out[0]))))):
                    return self._exact_label(alpha, beta, want_grad)
                out = out[:3]
        return tuple(out) if want_grad else out[0]

    def _exact_label(self, alpha, beta, want_grad):
        """The label family on tables that leave the own word out (``diag_in = 0``, no cancellation): the blocked
        tables for a factored ``W``, :func:`excluded_label_tables` for a dense one."""
        self._blocked_label = True
        return self.per_law(alpha, beta, want_grad)

    def __call__(self, alpha, beta, want_grad=False) -> FamilyLoss:
        check_family_scores(alpha, beta, "FamilyEvaluator")
        n = len(self.theta)
        if want_grad:
            per, da, db = self.per_law(alpha, beta, True)
            ga, gb = float(da.mean()), float(db.mean())
        else:
            per, ga, gb = self.per_law(alpha, beta, False), None, None
        if not all(math.isfinite(x) for x in (float(per.mean()), ga or 0.0, gb or 0.0)):
            raise FloatingPointError(
                f"FamilyEvaluator: non-finite loss or gradient at alpha={alpha!r}, beta={beta!r}: a query's key mass "
                "sits in a class whose weight is below the float range's square root (a weight e^(alpha + beta) or "
                "e^beta times tiny masses); the dense attention_loss (log-sum-exp) takes such scores"
            )
        se = float(per.std(ddof=1) / math.sqrt(n)) if self.sampled else 0.0
        return FamilyLoss(float(per.mean()), se, n, not self.sampled, ga, gb)


def _own_word_condition(lb: LabelBasis, st, alpha: float, beta: float) -> float:
    """Bound on the condition number ``(s_theta + |g|) / Z_theta(x)`` of the label tables' normaliser over every law
    and word query (a ratio of positive linear forms in ``theta`` is at most the largest ratio of coefficients):
    ``s = M_o + e^beta M_l`` holds the own word's ``e^beta m'_t(x)``, which ``g`` takes back for ``alpha < 0``; the
    true ``Z`` has ``M_o + e^beta (M_l - m'_t(x)) + e^{alpha + beta} m'_t(x)``. 1 for ``alpha >= 0``."""
    if alpha >= 0.0:
        return 1.0
    eB, mp = math.exp(beta), st.mp
    Mo, Ml = lb.Mo[lb.grp], lb.Mlab[lb.grp]
    num = Mo + eB * Ml - math.expm1(alpha) * eB * mp
    den = Mo + eB * np.maximum(Ml - mp, 0.0) + math.exp(alpha + beta) * mp
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(num > 0.0, num / den, 1.0)
    return float(np.max(ratio, initial=1.0))


def _sq_laws(theta, st, tb, alpha, mk, want_grad):
    """Squared loss per law (module docstring) and its ``(alpha, beta)``-derivatives.

    Blocked for the cache: per chunk of laws and block of words one GEMM of the laws with the word-major tables
    (``theta . table[x]`` for every table), the group dots once per chunk (labels) or per block (one group per
    word), then the fused per-(law, word) kernel :func:`_sq_kernel` (parallel over laws).
    """
    nw_tab, ng_tab = (7, 4) if want_grad else (5, 2)
    _, n_w, T = tb.word.shape
    G = tb.group.shape[0]
    per_word = G == n_w and np.array_equal(tb.grp, np.arange(n_w))
    Wst = np.ascontiguousarray(tb.word[:nw_tab].transpose(1, 0, 2)).reshape(n_w * nw_tab, T).T  # word-major
    Gst = tb.group[:, :ng_tab].reshape(G * ng_tab, T).T
    Qst = tb.quad[:, :ng_tab].reshape(G * ng_tab, T * T).T
    chunk = max(1, min(len(theta), _LAW_CHUNK))
    ea = math.exp(alpha) if tb.diag_in == 0.0 else math.expm1(alpha)
    consts = np.array([ea, mk.p_c, mk.p_r / n_w, st.bn2, tb.diag_in])
    outs = [np.zeros(len(theta)) for _ in range(4)]
    for i0 in range(0, len(theta), chunk):
        Th = theta[i0 : i0 + chunk]
        nl = len(Th)
        TT = (Th[:, :, None] * Th[:, None, :]).reshape(nl, T * T)
        if not per_word:
            Dg = (Th @ Gst).reshape(nl, G, ng_tab)
            Dq = (TT @ Qst).reshape(nl, G, ng_tab)
        acc = np.zeros((4, nl))
        for x0 in range(0, n_w, _WORD_BLOCK):
            x1 = min(n_w, x0 + _WORD_BLOCK)
            Dw = (Th @ Wst[:, x0 * nw_tab : x1 * nw_tab]).reshape(nl, x1 - x0, nw_tab)
            if per_word:
                Dg = (Th @ Gst[:, x0 * ng_tab : x1 * ng_tab]).reshape(nl, x1 - x0, ng_tab)
                Dq = (TT @ Qst[:, x0 * ng_tab : x1 * ng_tab]).reshape(nl, x1 - x0, ng_tab)
                grp = np.arange(x1 - x0)
            else:
                grp = tb.grp[x0:x1]
            _sq_kernel(Dw, Dg, Dq, grp, tb.scal[:, x0:x1], Th @ st.pb, consts, want_grad, acc)
        pb = Th @ st.pb
        mask = TT @ st.Gm0.ravel() + 2.0 * (Th @ st.bm0) + st.bn2 - 2.0 * (TT @ st.Fm0.ravel() + pb)
        outs[0][i0 : i0 + nl] = acc[0] + mk.p_mask * (mask + 1.0)
        outs[1][i0 : i0 + nl], outs[2][i0 : i0 + nl] = acc[1], acc[2]
        outs[3][i0 : i0 + nl] = acc[3]
    return outs


@numba.njit(cache=True, parallel=True, fastmath=False)
def _sq_kernel(Dw, Dg, Dq, grp, scal, pb, consts, want_grad, out):  # pragma: no cover - compiled
    """Adds to ``out[:, i]`` the sum over a block of word queries of ``ell_x`` and its derivatives (module
    docstring) for every law ``i``.

    ``Dw[i, x, j]`` = ``theta_i . word[j, x]``, ``Dg[i, g, j]`` = ``theta_i . group[g, j]``, ``Dq[i, g, j]`` =
    ``theta_i^T quad[g, j] theta_i`` (the tables of :class:`._attention_tables.Tables`).
    """
    nl, n_w, _ = Dw.shape
    ea, p_c, prn, bn2, c0 = consts[0], consts[1], consts[2], consts[3], consts[4]
    for i in numba.prange(nl):
        acc, acc_a, acc_b = 0.0, 0.0, 0.0
        pbi = pb[i]
        for x in range(n_w):
            gi = grp[x]
            mx, px, thc, thd, thpw = Dw[i, x, 0], Dw[i, x, 1], Dw[i, x, 2], Dw[i, x, 3], Dw[i, x, 4]
            ths, thbb = Dg[i, gi, 0], Dg[i, gi, 1]
            qG, qF = Dq[i, gi, 0], Dq[i, gi, 1]
            ed, w2, wxx, bw, bx = scal[0, x], scal[2, x], scal[3, x], scal[4, x], scal[5, x]
            g = ea * ed * mx
            Z = ths + g
            A = qG + 2.0 * g * thc + g * g * w2
            Bq = thbb + g * bw
            D = thd + g * wxx
            F = qF + g * thpw
            om = p_c * px + prn
            iz = 1.0 / Z
            acc += om * (A * iz * iz + 2.0 * Bq * iz + bn2) - 2.0 * p_c * px * (D * iz + bx)
            acc += om - 2.0 * prn * (F * iz + pbi)
            out[3, i] += om * (qG + 2.0 * abs(g * thc) + g * g * w2) * iz * iz  # size of the summands of A/Z^2
            if want_grad:
                lA, lB, lD, lF = om * iz * iz, 2.0 * om * iz, -2.0 * p_c * px * iz, -2.0 * prn * iz
                lZ = (-2.0 * om * A * iz - 2.0 * om * Bq + 2.0 * p_c * px * D + 2.0 * prn * F) * iz * iz
                ga = (ea + c0) * ed * mx
                acc_a += ga * (lZ + 2.0 * lA * (thc + g * w2) + lB * bw + lD * wxx + lF * thpw)
                gb = ea * scal[1, x] * mx
                dZ = Dg[i, gi, 2] + gb
                dA = Dq[i, gi, 2] + 2.0 * gb * thc + 2.0 * g * Dw[i, x, 5] + 2.0 * g * gb * w2
                dB = Dg[i, gi, 3] + gb * bw
                dD = Dw[i, x, 6] + gb * wxx
                dF = Dq[i, gi, 3] + gb * thpw
                acc_b += lZ * dZ + lA * dA + lB * dB + lD * dD + lF * dF
        out[0, i] += acc
        out[1, i] += acc_a
        out[2, i] += acc_b


def _ce_chunk(Th, st, tbK, op, alpha, mk, want_grad):
    """Cross-entropy per law (one law per call; ``O(V1^2 k)``), from the ``K`` tables of :func:`blocked_tables`."""
    tb, K, dK = tbK
    U, V = op.U, op.V
    n_w = K.shape[0]
    s_tab, ds_tab, ed, ded = tb.group[:, 0], tb.group[:, 2], tb.scal[0], tb.scal[1]
    V1 = U.shape[0]
    bvec = st.bvec
    p_c, p_r, p_mask = mk.p_c, mk.p_r, mk.p_mask
    pr_n = p_r / n_w
    ea = math.exp(alpha) if tb.diag_in == 0.0 else math.expm1(alpha)
    pers, das, dbs = [], [], []
    K0 = V.T @ st.Mp.T  # (k, T)
    step = max(1, _CHUNK_BYTES // (8 * 2 * V1))
    for th in Th:
        mx, px = st.mp @ th, st.ph @ th
        p = st.Phi.T @ th  # (V1,)
        g = ea * ed * mx
        Z = s_tab @ th + g
        Num = np.einsum("t,xtk->xk", th, K) + g[:, None] * V[1:]
        kap = Num / Z[:, None]
        Up = U.T @ p
        om = p_c * px + pr_n
        val = 0.0
        Gk = np.zeros_like(kap)
        for x0 in range(0, n_w, step):
            x1 = min(n_w, x0 + step)
            O = kap[x0:x1] @ U.T + bvec
            lse = logsumexp(O, axis=1)
            oxx = O[np.arange(x1 - x0), np.arange(x0 + 1, x1 + 1)]
            val += float(om[x0:x1] @ lse - p_c * px[x0:x1] @ oxx - pr_n * (O @ p).sum())
            if want_grad:
                Gk[x0:x1] = (om[x0:x1, None] * softmax(O, axis=1)) @ U - p_c * px[x0:x1, None] * U[x0 + 1 : x1 + 1]
                Gk[x0:x1] -= pr_n * Up[None, :]
        o0 = U @ (K0 @ th) + bvec
        val += p_mask * float(logsumexp(o0) - p @ o0)
        pers.append(val)
        if want_grad:
            ga = (ea + tb.diag_in) * ed * mx
            dka = (ga[:, None] * V[1:] - kap * ga[:, None]) / Z[:, None]
            gb = ea * ded * mx
            dZ = ds_tab @ th + gb
            dkb = (np.einsum("t,xtk->xk", th, dK) + gb[:, None] * V[1:] - kap * dZ[:, None]) / Z[:, None]
            das.append(float(np.sum(Gk * dka)))
            dbs.append(float(np.sum(Gk * dkb)))
    out = [np.array(pers)]
    return (out[0], np.array(das), np.array(dbs)) if want_grad else (out[0],)


def _counts(g, n_sets, n_theta):
    if g.prior == "uniform-tau":
        if n_theta is not None:
            raise ValueError("n_theta is for prior='dirichlet'; with prior='uniform-tau' pass n_sets to sample sets")
        return _check_n_sets(g, n_sets, "pass n_sets (and seed) to average over sampled topic sets"), None
    if n_sets is not None:
        raise ValueError("n_sets is for prior='uniform-tau'; with prior='dirichlet' pass n_theta")
    return None, DEFAULT_N_THETA if n_theta is None else check_int("n_theta", n_theta, low=2)


def check_structured(g, op: ValueOperator, family, loss, max_bytes):
    """Refuse, before any work, what the structured route cannot do or cannot fit (``ValueError``)."""
    family = check_choice("family", family, FAMILIES)
    if not op.factored and (family == "co-topic" or loss == "ce"):
        what = "the co-topic family" if family == "co-topic" else "loss='ce'"
        raise ValueError(f"family_attention_loss: {what} needs a factored W^V (a dense one costs O(V1^3) per "
                         f"beta); {_FACTORS_HINT}")  # fmt: skip
    V1, T = g.V1, g.T
    k = op.U.shape[1] if op.factored else T
    if family == "co-topic" or loss == "ce":  # tables (n, T, T) x 4 or K (n, T, k) x 2, the RHS and one block
        check_alloc("family_attention_loss: per-word tables", (V1, T, max(4 * T, 2 * k) + 2 * (k + 1) + 16),
                    max_bytes=max_bytes, alternative="family='label' (O(V1 T) tables) or a smaller model")  # fmt: skip
    else:
        check_alloc("family_attention_loss: label tables", (V1, 16 * T + 64), max_bytes=max_bytes,
                    alternative="a smaller model")  # fmt: skip
    return family


def point_operations(g, op: ValueOperator, family: str, loss: str, n_laws: int) -> tuple[int, int]:
    """Estimated floating-point operations ``(per beta, per point)`` of the structured loss: the ``beta``-tables
    (blocked co-topic or cross-entropy tables: ``E = e^{beta B}`` over ``V1 x V1`` keys and its products with the
    ``T (k + 1)`` right-hand sides; label tables: ``O(V1 T)``) and one ``(alpha, beta)`` point over ``n_laws`` laws
    (squared: ``O(V1 T)`` a law; cross-entropy: a log-sum-exp over ``V1 x V1`` outputs of rank ``k``). Python ints."""
    V1, T = g.V1, g.T
    k = op.U.shape[1] if op.factored else V1
    blocked = family == "co-topic" or loss == "ce"
    per_beta = V1 * V1 * (4 * T * (k + 1) + 10) if blocked else 16 * V1 * T + 64 * T * T
    per_point = n_laws * (2 * V1 * V1 * k if loss == "ce" else 8 * V1 * (T + 1))
    return per_beta, per_point


def make_evaluator(g, mk, W, family="label", b=None, mask_keys=False, loss="squared", *, n_sets=None,
                   n_theta=None, rng=None, seed=None, max_bytes=None, pairs=None) -> FamilyEvaluator:  # fmt: skip
    """A validated :class:`FamilyEvaluator` (the solver's entry; arguments as in :func:`family_attention_loss`;
    ``pairs=False`` keeps the co-topic family on the blocked tables, the route before SPEC §11.8(a))."""
    check_models(g, mk, general=True)
    mk.require_masked_positions("family_attention_loss")
    loss = check_loss(loss)
    if max_bytes is not None:
        resolve_max_bytes(max_bytes)
    if not isinstance(mask_keys, (bool, np.bool_)):
        raise TypeError(f"mask_keys must be a bool, got {mask_keys!r}")
    op = value_operator(W, g.V1)
    b = None if b is None else check_array("b", b, shape=(g.V1,))
    family = check_structured(g, op, family, loss, max_bytes)
    n_sets, n_theta = _counts(g, n_sets, n_theta)
    theta, sampled = _thetas(g, n_sets, n_theta, rng, seed, max_bytes)
    ev = FamilyEvaluator(g, mk, op, family, b, bool(mask_keys), loss, theta, sampled, pairs)
    if ev.route != "pairs":  # the pair route's cost is O(V1^2 (T + 1)^2) a beta (SPEC §11.8(a)), not this
        check_work(
            f"family_attention_loss ({family} family, {loss} loss, V1 = {g.V1}): one (alpha, beta) point",
            sum(point_operations(g, op, family, loss, len(theta))),
            alternative="family='label' with the squared loss (O(V1 T) a point) or a smaller model",
        )
    return ev


def family_attention_loss(
    alpha: float, beta: float, W, tm: GeneralTopicModel, mk: Masking, *, family: str = "label",
    b: ArrayLike | None = None, mask_keys: bool = False, loss: str = "squared", grad: bool = False,
    n_sets: int | None = None, n_theta: int | None = None, rng: np.random.Generator | None = None,
    seed: int | np.random.SeedSequence | None = None, max_bytes: int | None = None,
) -> FamilyLoss:  # fmt: skip
    """Exact loss (and gradient in ``(alpha, beta)``) of ``S = alpha I_w + beta B`` without a ``V1 x V1`` array
    (SPEC §11.8; the loss of SPEC §11.4).

    Parameters
    ----------
    alpha, beta : float
        Same-word and family scores; ``B`` is the same-label indicator ``Z`` (``family="label"``, SPEC §11.6
        labels, diagonal 1) or the co-topic cosine ``G`` (``family="co-topic"``), so the score of the query's
        own word is ``alpha + beta`` in both. ``alpha <= 300``, ``|beta| <= 300``, ``|alpha + beta| <= 300``
        (``SCORE_MAX``).
    W : array (V1, V1), or factors ``(left, right)`` / an object with ``left``, ``right`` (``W = left right^T``)
        Frozen ``W^V`` (e.g. :func:`theorycheck.solvers.optimal_value_matrix`'s ``LowRankMatrix``). The
        co-topic family and the cross-entropy need the factors.
    tm : GeneralTopicModel or TopicModel
        The topic model, any prior.
    mk : Masking
        ``mk.p_m > 0``.
    family : {"label", "co-topic"}
        The matrix ``B``: the same-label indicator or the co-topic cosine.
    b : array_like, shape (V1,), optional
        Decoder bias.
    mask_keys : bool, default False
        Context ``p_S`` (selected positions hidden as keys) instead of ``m_S``.
    loss : {"squared", "ce"}
        Squared loss or cross-entropy (factored ``W`` only).
    grad : bool, default False
        Also return ``dL/dalpha``, ``dL/dbeta`` (exact, of the same average).
    n_sets : int, n_sets >= 2, optional
        Uniform-tau: sampled topic sets instead of all ``C(T, tau)``.
    n_theta : int, n_theta >= 2, optional
        Dirichlet: number of sampled ``theta`` (default 4096).
    rng : numpy.random.Generator, optional
        Randomness of sampled laws (``rng`` or ``seed`` required for the Dirichlet law).
    seed : int or numpy.random.SeedSequence, optional
        Seed of a new generator, instead of ``rng``.
    max_bytes : int, optional
        Memory limit of the evaluator's tables.

    Returns
    -------
    FamilyLoss
        ``(value, stderr, n, exact, dalpha, dbeta)``.

    Raises
    ------
    ValueError
        If a score is out of range, ``family`` or ``loss`` is unknown, the co-topic family or the
        cross-entropy gets a dense ``W``, ``W`` has the wrong shape, the sampling arguments do not fit
        the prior, or the tables exceed ``max_bytes``.
    TypeError
        If ``tm`` or ``mk`` is not a topic model or a masking.

    See Also
    --------
    attention_loss : The dense exact loss of any scores (small models).
    alpha_beta_loss : The O(1) closed form on the paper's model (``alpha_beta_loss(alpha + beta, beta)``
        equals the label family's loss there).
    theorycheck.solvers.cotopic_matrix : The co-topic cosine ``G``.
    theorycheck.solvers.optimal_value_matrix : The factored stage-1 ``W^V`` of a general model.

    Notes
    -----
    Cost per ``beta``: label family, squared loss: ``O(V1 T k)`` once per ``W`` (dense ``W``: ``O(V1^2 T)``)
    and ``O(V1 T + L T^2)``; co-topic (and any cross-entropy): one blocked product ``O(V1^2 T k)``. Per
    document law: ``O(V1 T + L T^2)`` (label), ``O(V1 T^2)`` (co-topic), ``O(V1^2 k)`` (cross-entropy).
    Memory ``O(V1 T)`` (label) or ``O(V1 T max(T, k))`` plus one row block (co-topic, cross-entropy).

    References
    ----------
    SPEC §11.8 (the structured evaluation), §11.8(a) (the co-topic family by pair sums), §11.4 (the
    loss), §11.6 (the labels).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking, TopicModel
    >>> from theorycheck.population import alpha_beta_loss, alpha_beta_value_matrix, family_attention_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()

    On the paper's model the label family's own-word score is ``alpha + beta``, so it matches the
    closed form at ``(alpha + beta, beta)``:

    >>> r = family_attention_loss(0.5, 0.5, alpha_beta_value_matrix(tm, mk), tm, mk, grad=True)
    >>> round(r.value, 10), round(alpha_beta_loss(1.0, 0.5, tm, mk), 10)
    (0.736803582, 0.736803582)
    >>> r.dbeta < 0  # more same-topic attention still lowers the loss
    True

    A general model with its factored stage-1 ``W^V``; uniform attention gives the stage-1 minimum:

    >>> from theorycheck.solvers import optimal_value_matrix
    >>> g = GeneralTopicModel.overlapping(T=3, v=2, eps=0.2, tau=2)
    >>> Wg = optimal_value_matrix(g, mk, options={"dense": False}).x
    >>> round(family_attention_loss(0.0, 0.0, Wg, g, mk).value, 10)
    0.78
    """
    a = check_real("alpha", alpha)
    bt = check_real("beta", beta)
    check_family_scores(a, bt)
    ev = make_evaluator(tm, mk, W, family, b, mask_keys, loss, n_sets=n_sets, n_theta=n_theta, rng=rng,
                        seed=seed, max_bytes=max_bytes)  # fmt: skip
    return ev(a, bt, bool(grad))
