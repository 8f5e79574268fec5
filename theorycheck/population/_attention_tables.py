"""Per-``beta`` query tables of the structured (alpha, beta) attention evaluator (SPEC §11.8).

For a score family ``S = alpha I_w + beta B`` (``B`` a symmetric word matrix, 0 in the [MASK] row and
column: the same-label indicator ``Z`` of the SPEC §11.6 labels, or the co-topic cosine ``G``) and the
pure-topic context densities ``m'_t`` (SPEC §11.5: ``m_theta = sum_t theta_t m'_t``), a word query ``x``
has the output numerator ``N_theta(x) = sum_t theta_t N[x, t] + g_theta(x) W e_x`` with

.. math::  N[x, t] = W (m'_t \\odot e^{\\beta B[x, :]}),\\qquad
           g_\\theta(x) = (e^\\alpha - 1)\\, e^{\\beta B_{xx}}\\, m_\\theta(x),

and the normaliser ``Z_theta(x) = sum_t theta_t s[x, t] + g_theta(x)``, ``s[x, t] = m'_t . e^{beta B[x, :]}``.
The loss of a document law then needs only inner products of the ``N[x, t]`` with each other, with
``W e_x``, ``e_x``, ``phi_s`` and the bias: the tables built here (and their ``beta``-derivatives), once
per ``beta``, never a ``V1 x V1`` array:

- :func:`label_tables`: ``B = Z``; ``N[x, t] = W m'_t + (e^beta - 1) W r_{t, z_x}`` with the restricted
  vectors ``r_{t l} = m'_t 1_l``; their images ``W r_{t l}`` are computed once per ``W`` (:class:`LabelBasis`,
  ``O(V1 T k)`` for a rank-``k`` factored ``W``, ``O(V1^2 T)`` for a dense one), then every ``beta`` costs
  ``O(V1 T + L T^2)``; the Gram tables are per label (``L`` labels).
- :func:`excluded_label_tables`: ``B = Z`` with each query's own word left out (``g = e^{alpha + beta}
  m_theta(x)``, no cancellation for ``alpha << 0 << beta``), per-word tables from :class:`ExcludedLabelBasis`.
- :func:`blocked_tables`: any ``B`` given by row blocks (the co-topic ``G`` is built block by block from
  ``phi``); ``K[x, t] = V^T (m'_t e^{beta B[x, :]})`` by one blocked product ``e^{beta B} [m'_t V]`` with the
  factors ``W = U V^T`` (``O(V1^2 T k)`` per ``beta``, memory ``O(V1 T k)`` plus one ``rows x V1`` block).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ValueOperator", "Static", "Tables", "LabelBasis", "ExcludedLabelBasis", "static_tables", "label_tables",
           "excluded_label_tables", "blocked_tables",
           "label_rows", "cotopic_rows", "context_rows"]  # fmt: skip

_BLOCK_BYTES = 32 * 2**20


class ValueOperator:
    """``W^V`` as an operator: dense ``(V1, V1)`` or factored ``U V^T`` (``U, V`` of shape ``(V1, k)``)."""

    def __init__(self, dense=None, left=None, right=None):
        self.dense = dense
        self.U, self.V = left, right
        self.V1 = dense.shape[0] if dense is not None else left.shape[0]
        self.Gu = np.zeros((0, 0)) if left is None else left.T @ left

    @property
    def factored(self) -> bool:
        return self.dense is None

    def _col_chunks(self, idx):
        step = max(1, _BLOCK_BYTES // (8 * self.V1))
        return [idx[i : i + step] for i in range(0, len(idx), step)]

    def apply(self, X):
        """``W X`` for ``X`` of shape ``(V1, m)``."""
        return self.dense @ X if self.dense is not None else self.U @ (self.V.T @ X)

    def apply_cols(self, idx, C):
        """``W[:, idx] C`` (``C``: ``(len(idx), m)``), in column blocks for a dense ``W``."""
        if self.dense is None:
            return self.U @ (self.V[idx].T @ C)
        out = np.zeros((self.V1, C.shape[1]))
        pos = 0
        for ch in self._col_chunks(idx):
            out += self.dense[:, ch] @ C[pos : pos + len(ch)]
            pos += len(ch)
        return out

    def rows_of_transpose(self, Y, idx):
        """``(W^T Y)[idx]`` for ``Y`` of shape ``(V1, m)``."""
        if self.dense is None:
            return self.V[idx] @ (self.U.T @ Y)
        return np.concatenate([self.dense[:, ch].T @ Y for ch in self._col_chunks(idx)], axis=0)

    def col_norm2(self):
        """``||W e_x||^2`` for every token ``x``."""
        if self.dense is None:
            return np.einsum("xi,ij,xj->x", self.V, self.Gu, self.V)
        return np.einsum("ij,ij->j", self.dense, self.dense)

    def diag(self):
        return np.einsum("xi,xi->x", self.U, self.V) if self.dense is None else np.diag(self.dense).copy()


@dataclass
class Static:
    """``beta``-independent quantities: contexts, target laws and ``W``/bias inner products (word rows)."""

    Mp: np.ndarray  # (T, V1) pure-topic context densities m'_t
    Phi: np.ndarray  # (T, V1) topic laws over tokens (column 0 = 0)
    mp: np.ndarray  # (n, T) m'_t(x) on words
    ph: np.ndarray  # (n, T) phi_t(x) on words
    w2: np.ndarray  # (n,) ||W e_x||^2
    wxx: np.ndarray  # (n,) W_xx
    bw: np.ndarray  # (n,) b . W e_x
    bx: np.ndarray  # (n,) b_x
    pw: np.ndarray  # (n, T) phi_s . W e_x
    WM: np.ndarray  # (V1, T) W m'_t
    Gm0: np.ndarray  # (T, T) (W m'_t).(W m'_s)
    Fm0: np.ndarray  # (T, T) phi_s . W m'_t  (index t, s)
    bm0: np.ndarray  # (T,) b . W m'_t
    pb: np.ndarray  # (T,) phi_t . b
    bn2: float  # ||b||^2
    bvec: np.ndarray  # (V1,) the bias (zeros without one)


@dataclass
class Tables:
    """Per-``beta`` tables, packed for the per-law kernel.

    ``word`` ``(7, n, T)``: ``m'_t(x)``, ``phi_t(x)``, ``c = N[x,t].W e_x``, ``d = N[x,t]_x``, ``phi_t . W e_x``,
    ``dc/dbeta``, ``dd/dbeta``; ``group`` ``(G, 4, T)``: ``s`` (normaliser parts), ``b . N[x,t]`` and their
    ``beta``-derivatives; ``quad`` ``(G, 4, T, T)``: ``N[x,t].N[x,s]``, ``phi_s . N[x,t]`` and their
    ``beta``-derivatives, for the group ``grp[x]`` of each word (labels, or one group per word);
    ``scal`` ``(6, n)``: ``e^{beta B_xx}``, its derivative, ``||W e_x||^2``, ``W_xx``, ``b . W e_x``, ``b_x``.
    ``diag_in``: 1 when ``N`` and ``s`` include the own word's weight ``e^{beta B_xx}`` (the label tables; then
    ``g = (e^alpha - 1) e^{beta B_xx} m_theta(x)``), 0 when they exclude it (the blocked tables; ``g =
    e^{alpha + beta B_xx} m_theta(x)``, no cancellation for ``alpha << 0 << beta``).
    """

    word: np.ndarray
    group: np.ndarray
    quad: np.ndarray
    grp: np.ndarray
    scal: np.ndarray
    diag_in: float  # 1: the tables include the own word's weight e^{beta B_xx} (label), 0: they exclude it


def _pack(st, grp, c, d, dc, dd, group, quad, ed, ded, diag_in) -> Tables:
    word = np.stack([st.mp, st.ph, c, d, st.pw, dc, dd])
    scal = np.stack([ed, ded, st.w2, st.wxx, st.bw, st.bx])
    grp = np.ascontiguousarray(grp, dtype=np.int64)
    return Tables(word=word, group=group, quad=quad, grp=grp, scal=scal, diag_in=diag_in)


def context_rows(g, mk, mask_keys):
    """``(Mp, Phi)``: ``m'_t = a phi_t + c`` (``phi_t`` with ``mask_keys``) and ``phi_t`` over tokens, ``(T, V1)``."""
    Phi = g.topic_token_matrix()
    if mask_keys:
        return Phi.copy(), Phi
    Mp = mk.a * Phi
    Mp[:, 1:] += mk.r / g.n_words
    Mp[:, 0] += mk.q
    return Mp, Phi


def static_tables(op: ValueOperator, Mp, Phi, b) -> Static:
    """The ``beta``-independent inner products (``O(V1 T k)`` factored, ``O(V1^2 T)`` dense)."""
    V1 = op.V1
    words = np.arange(1, V1)
    bvec = np.zeros(V1) if b is None else b
    WM = op.apply(Mp.T)
    Wtb = op.rows_of_transpose(bvec[:, None], words)[:, 0]
    return Static(
        Mp=Mp,
        Phi=Phi,
        mp=np.ascontiguousarray(Mp[:, 1:].T),
        ph=np.ascontiguousarray(Phi[:, 1:].T),
        w2=op.col_norm2()[1:],
        wxx=op.diag()[1:],
        bw=Wtb,
        bx=bvec[1:].copy(),
        pw=op.rows_of_transpose(Phi.T, words),
        WM=WM,
        Gm0=WM.T @ WM,
        Fm0=WM.T @ Phi.T,
        bm0=WM.T @ bvec,
        pb=Phi @ bvec,
        bn2=float(bvec @ bvec),
        bvec=bvec,
    )


class LabelBasis:
    """The ``beta``-independent pieces of the label family: per label ``l`` the images ``W r_{t l}`` of the
    label's keys and ``W o_{t l}`` of all other keys (``m'_t = r_{t l} + o_{t l}``), reduced to Gram/inner-product
    tables (SPEC §11.8), computed once per ``(W, b, mask_keys)``. The other keys' tables are built from their own
    columns, not as ``m'_t - r_{t l}``: when a label holds nearly all of a law's mass that difference cancels,
    and the weighted sum ``o + e^beta r`` of the tables (:func:`label_tables`) would lose ``eps / (o + e^beta r)``
    of relative accuracy (NaN at ``beta = -38`` on such a model)."""

    def __init__(self, op: ValueOperator, st: Static, labels, b):
        V1 = op.V1
        T = st.Mp.shape[0]
        n = V1 - 1
        bvec = np.zeros(V1) if b is None else b
        labels = np.asarray(labels)
        present = np.unique(labels)
        self.grp = np.searchsorted(present, labels)  # (n,) group index of each word
        L = len(present)
        self.Mlab, self.Mo = np.zeros((L, T)), np.zeros((L, T))  # key mass in the label, outside it
        self.Gor = np.zeros((L, T, T))  # (W r_{t l}).(W o_{s l})
        self.Grr = np.zeros((L, T, T))  # (W r_{t l}).(W r_{s l})
        self.Goo = np.zeros((L, T, T))  # (W o_{t l}).(W o_{s l})
        self.Fr, self.Fo = np.zeros((L, T, T)), np.zeros((L, T, T))  # phi_s . W r_{t l}, phi_s . W o_{t l}
        self.Br, self.Bo = np.zeros((L, T)), np.zeros((L, T))  # b . W r_{t l}, b . W o_{t l}
        self.C1, self.Co = np.zeros((n, T)), np.zeros((n, T))  # (W^T W r_{t, z_x})_x, (W^T W o_{t, z_x})_x
        self.D1, self.Do = np.zeros((n, T)), np.zeros((n, T))  # (W r_{t, z_x})_x, (W o_{t, z_x})_x
        order = np.argsort(self.grp, kind="stable")
        bounds = np.searchsorted(self.grp[order], np.arange(L + 1))
        for li in range(L):
            widx = order[bounds[li] : bounds[li + 1]]  # word rows of label li
            tok = widx + 1
            rest = np.setdiff1d(np.arange(V1), tok)  # every other key token ([MASK] included)
            Cl, Co = st.Mp[:, tok].T, st.Mp[:, rest].T  # (|l|, T), (V1 - |l|, T)
            WR, WO = op.apply_cols(tok, Cl), op.apply_cols(rest, Co)  # (V1, T) each
            self.Mlab[li], self.Mo[li] = Cl.sum(axis=0), Co.sum(axis=0)
            self.Gor[li] = WR.T @ WO
            self.Grr[li] = WR.T @ WR
            self.Goo[li] = WO.T @ WO
            self.Fr[li], self.Fo[li] = WR.T @ st.Phi.T, WO.T @ st.Phi.T
            self.Br[li], self.Bo[li] = WR.T @ bvec, WO.T @ bvec
            self.C1[widx], self.Co[widx] = op.rows_of_transpose(WR, tok), op.rows_of_transpose(WO, tok)
            self.D1[widx], self.Do[widx] = WR[tok], WO[tok]


def label_tables(lb: LabelBasis, st: Static, beta: float) -> Tables:
    """Tables of ``S = alpha I_w + beta Z`` at ``beta`` (``O(V1 T + L T^2)``): the keys of a query's label weigh
    ``e^beta``, the others 1, so each table is ``(other keys) + e^beta (label)``, a sum of non-cancelling parts
    (:class:`LabelBasis`); the own word is in its label (``diag_in = 1``)."""
    eB = np.exp(beta)
    Gor2 = lb.Gor + lb.Gor.transpose(0, 2, 1)
    group = np.stack([lb.Mo + eB * lb.Mlab, lb.Bo + eB * lb.Br, eB * lb.Mlab, eB * lb.Br], axis=1)
    quad = np.stack([lb.Goo + eB * Gor2 + (eB * eB) * lb.Grr, lb.Fo + eB * lb.Fr, eB * Gor2 + (2.0 * eB * eB) * lb.Grr,
                     eB * lb.Fr], axis=1)  # fmt: skip
    n = len(lb.grp)
    ed = np.full(n, eB)
    return _pack(st, lb.grp, lb.Co + eB * lb.C1, lb.Do + eB * lb.D1, eB * lb.C1, eB * lb.D1, group, quad, ed, ed, 1.0)


def blocked_tables(op: ValueOperator, st: Static, rows, beta: float, b, *, want_K=False):
    """Tables of ``S = alpha I_w + beta B`` for ``B`` given by ``rows(x0, x1)`` -> ``B[x0:x1, :]`` over tokens
    (word query rows ``x0..x1-1`` as token indices, shape ``(x1 - x0, V1)``, column 0 zero); factored ``W`` only.

    One product ``e^{beta B_block} [m'_t, m'_t V]`` per row block (``O(V1^2 T k)`` per ``beta``); with
    ``want_K`` also returns ``K[x, t] = V^T (m'_t e^{beta B[x, :]})`` and its derivative, ``(n, T, k)``.
    """
    U, V, Gu = op.U, op.V, op.Gu
    V1, k = V.shape
    T = st.Mp.shape[0]
    n = V1 - 1
    MpT = st.Mp.T  # (V1, T)
    RHS = np.concatenate([MpT, (MpT[:, :, None] * V[:, None, :]).reshape(V1, T * k)], axis=1)
    bvec = np.zeros(V1) if b is None else b
    Ub = U.T @ bvec
    PU = st.Phi @ U  # (T, k)
    group, quad = np.zeros((n, 4, T)), np.zeros((n, 4, T, T))
    cd = np.zeros((4, n, T))  # c, d, dc, dd
    ed, ded = np.zeros(n), np.zeros(n)
    Kall = np.zeros((n, T, k) if want_K else (0, T, k))
    dKall = np.zeros_like(Kall)
    step = max(1, _BLOCK_BYTES // (8 * 3 * V1))
    for x0 in range(1, V1, step):
        x1 = min(V1, x0 + step)
        r = slice(x0 - 1, x1 - 1)
        Bx = rows(x0, x1)
        E = np.exp(beta * Bx)
        dE = Bx * E
        nb = x1 - x0
        diag_idx = (np.arange(nb), np.arange(x0, x1))
        ed[r], ded[r] = E[diag_idx], dE[diag_idx]
        E[diag_idx] = 0.0  # the query's own word is carried by g (no cancellation, SPEC §11.8)
        dE[diag_idx] = 0.0
        R, dR = E @ RHS, dE @ RHS
        del E, dE, Bx
        K, dK = R[:, T:].reshape(nb, T, k), dR[:, T:].reshape(nb, T, k)
        KG, dKG = K @ Gu, dK @ Gu
        Vx, Ux = V[x0:x1], U[x0:x1]
        group[r, 0], group[r, 2] = R[:, :T], dR[:, :T]
        group[r, 1], group[r, 3] = K @ Ub, dK @ Ub
        quad[r, 0] = np.einsum("xtk,xsk->xts", KG, K)
        quad[r, 1], quad[r, 3] = K @ PU.T, dK @ PU.T
        quad[r, 2] = np.einsum("xtk,xsk->xts", dKG, K) + np.einsum("xtk,xsk->xts", KG, dK)
        cd[0, r], cd[2, r] = np.einsum("xtk,xk->xt", KG, Vx), np.einsum("xtk,xk->xt", dKG, Vx)
        cd[1, r], cd[3, r] = np.einsum("xtk,xk->xt", K, Ux), np.einsum("xtk,xk->xt", dK, Ux)
        if want_K:
            Kall[r], dKall[r] = K, dK
    tb = _pack(st, np.arange(n), cd[0], cd[1], cd[2], cd[3], group, quad, ed, ded, 0.0)
    return (tb, Kall, dKall) if want_K else tb


def label_rows(labels):
    """``rows(x0, x1)`` of the same-label indicator ``Z`` over tokens (for :func:`blocked_tables`)."""
    z = np.concatenate([[-1], np.asarray(labels)])

    def rows(x0, x1):
        out = (z[x0:x1, None] == z[None, :]).astype(np.float64)
        out[:, 0] = 0.0
        return out

    return rows


def cotopic_rows(phi):
    """``rows(x0, x1)`` of the co-topic cosine ``G`` (SPEC §11.4) over tokens, built from ``phi`` block by block."""
    d = np.sqrt(np.einsum("tw,tw->w", phi, phi))

    def rows(x0, x1):
        out = np.zeros((x1 - x0, phi.shape[1] + 1))
        out[:, 1:] = (phi[:, x0 - 1 : x1 - 1].T @ phi) / np.outer(d[x0 - 1 : x1 - 1], d)
        return out

    return rows


class ExcludedLabelBasis:
    """The label family's tables with each query's own word left out (``diag_in = 0``), for any ``W`` (SPEC §11.8).

    Per word ``x`` of label ``l``: ``q_{t}^{(x)} = r_{t l} - m'_t(x) e_x``, the label's other keys, built from their
    own columns (a copy of ``r_{t l}`` with the entry of ``x`` set to 0), never as a difference: when ``x`` carries
    most of its label's mass the difference cancels, and :func:`label_tables` (own word in, ``g = (e^alpha - 1)
    e^beta m_theta(x)``) loses ``e^beta / Z`` of relative accuracy for ``alpha << 0 << beta``. Stores the per-word
    images' tables ``(n, T)`` and ``(n, T, T)``: ``O(V1 T (|l| k + T))`` a word, once per ``(W, b, mask_keys)``."""

    def __init__(self, op: ValueOperator, st: Static, lb: LabelBasis, b):
        V1 = op.V1
        n, T = st.mp.shape
        bvec = np.zeros(V1) if b is None else b
        self.Mq, self.Bq, self.Cq, self.Dq = (np.zeros((n, T)) for _ in range(4))
        self.Goq, self.Gqq, self.Fq = (np.zeros((n, T, T)) for _ in range(3))  # (W o_t).(W q_s), (W q_t).(W q_s), ..
        L = int(lb.grp.max()) + 1 if n else 0
        for li in range(L):
            widx = np.flatnonzero(lb.grp == li)
            tok = widx + 1
            rest = np.setdiff1d(np.arange(V1), tok)
            WO = op.apply_cols(rest, st.Mp[:, rest].T)  # (V1, T): W o_{t l}
            for j, x in enumerate(widx):
                Q = st.Mp[:, tok].T.copy()
                Q[j] = 0.0  # the own word left out (no subtraction)
                WQ = op.apply_cols(tok, Q)  # (V1, T): W q_t^{(x)}
                We = op.apply_cols(tok[j : j + 1], np.ones((1, 1)))[:, 0]  # W e_x
                self.Mq[x], self.Bq[x], self.Cq[x], self.Dq[x] = Q.sum(axis=0), WQ.T @ bvec, WQ.T @ We, WQ[x + 1]
                self.Goq[x], self.Gqq[x], self.Fq[x] = WO.T @ WQ, WQ.T @ WQ, WQ.T @ st.Phi.T


def excluded_label_tables(xb: ExcludedLabelBasis, lb: LabelBasis, st: Static, beta: float) -> Tables:
    """Tables of ``S = alpha I_w + beta Z`` at ``beta`` with the own word left out (``diag_in = 0``, ``g =
    e^{alpha + beta} m_theta(x)``; one group per word, ``O(V1 T^2)``): each table is ``(other labels' keys) +
    e^beta (the label's other keys)``, sums of parts that do not cancel (:class:`ExcludedLabelBasis`)."""
    eB = np.exp(beta)
    G = lb.grp
    Goq2 = xb.Goq + xb.Goq.transpose(0, 2, 1)
    group = np.stack([lb.Mo[G] + eB * xb.Mq, lb.Bo[G] + eB * xb.Bq, eB * xb.Mq, eB * xb.Bq], axis=1)
    quad = np.stack([lb.Goo[G] + eB * Goq2 + (eB * eB) * xb.Gqq, lb.Fo[G] + eB * xb.Fq,
                     eB * Goq2 + (2.0 * eB * eB) * xb.Gqq, eB * xb.Fq], axis=1)  # fmt: skip
    n = len(G)
    ed = np.full(n, eB)
    return _pack(st, np.arange(n), lb.Co + eB * xb.Cq, lb.Do + eB * xb.Dq, eB * xb.Cq, eB * xb.Dq, group, quad, ed,
                 ed, 0.0)  # fmt: skip
