"""The theory's attention lift at a corpus under each definition of the comparison (SPEC §11.9).

For scores ``S`` on words and positions i.i.d. from the context law ``p = p_theta`` (``N -> inf``), a query
showing word ``x`` gives a key showing ``y`` the length-normalised weight

.. math::
    \\kappa^{\\rm all}_\\theta(x, y) = \\frac{e^{S[x,y]}}{\\sum_z p(z) e^{S[x,z]}},\\qquad
    \\kappa^{\\rm excl}_\\theta(x, y) = \\frac{(1 - p(x))\\, e^{S[x,y]}}{\\sum_{z \\ne x} p(z) e^{S[x,z]}},

``all_keys`` (every key; the own position has weight ``-> 0``, the other copies of ``x`` keep ``e^{S[x,x]}``)
and ``excl_own`` (keys showing ``x`` removed and the rest renormalised: the limit of
:mod:`theorycheck.realdata.lifts`' ``n'_i A[i, j] / r_i``). A query shown as [MASK] (``masked``) has score 0
for every key (SPEC §11.8), so ``kappa = 1``: lift 1 in every class, whatever the scores. The pooled lift of
class ``c`` (ordered pairs of distinct topic tokens) is

.. math:: \\mathrm{lift}_c = \\frac{E_\\theta \\sum_{(x,y)\\in P_c} p(x) p(y) \\kappa_\\theta(x, y)}
                                  {E_\\theta \\sum_{(x,y)\\in P_c} p(x) p(y)}.

Label family ``S = alpha I_w + beta Z`` (sparse class sums, a law costs ``O(nnz(A) + n_tok)``): with
``P(l)`` the label mass over all words,
``sum_z p_z e^{S[x,z]} = (1 - P(z_x)) + e^beta (P(z_x) - p_x) + e^{alpha + beta} p_x`` and the ``excl_own`` sum
drops the last term, so ``alpha`` leaves the ``excl_own`` lift. Any score matrix on a small vocabulary
(:func:`dense_lift_terms`, e.g. the co-topic family) by direct enumeration.

The **own-word share**: the attention a topic-token query spends on the other copies of its word,
``e^{S[x,x]} p(x) / sum_z p(z) e^{S[x,z]}`` (``all_keys``; it is the mass ``excl_own`` removes), ``p(x)`` for a
masked query (uniform), pooled with weights ``p(x)`` over the topic tokens and laws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from .._validate import check_choice, check_int, check_rng
from ..models import GeneralTopicModel
from . import stats as S
from .lifts import LiftAccumulator, LiftStats

__all__ = [
    "DEFINITIONS",
    "lift_terms",
    "own_word_terms",
    "dense_lift_terms",
    "predicted_lifts",
    "dense_predicted_lifts",
    "sub_model",
    "sampled_window_lifts",
]

#: ``all_keys`` (the package's definition before issue #36), ``excl_own`` (own position and word removed),
#: ``masked`` (the query shown as [MASK]).
DEFINITIONS = ("all_keys", "excl_own", "masked")
_LEVEL = 0.95
_Z = 1.959963984540054  # normal quantile of the 95% level


@dataclass(frozen=True)
class _Classes:
    """Token-side data of SPEC §11.9: LDA word rows, labels, and the sparse same-class matrices ``A``, ``A_z``."""

    rows: np.ndarray
    labels: np.ndarray
    A: csr_matrix
    Az: csr_matrix
    label_phi: np.ndarray  # (T, L): topic t's mass on the words of label l (all words of the model)
    n_labels: int


def _classes(g: GeneralTopicModel, rows, membership) -> _Classes:
    z = g.dominant_topic()
    M = np.asarray(membership, dtype=np.float64)
    A = csr_matrix(M) @ csr_matrix(M.T)
    A.data[:] = 1.0
    lab = z[rows]
    Ac = A.tocoo()
    keep = lab[Ac.row] == lab[Ac.col]
    Az = csr_matrix((Ac.data[keep], (Ac.row[keep], Ac.col[keep])), shape=A.shape)
    L = int(z.max()) + 1
    label_phi = g.phi @ _one_hot(z, L)
    return _Classes(np.asarray(rows), lab, A.tocsr(), Az, label_phi, L)


def _one_hot(labels, L):
    out = np.zeros((labels.size, L))
    out[np.arange(labels.size), labels] = 1.0
    return out


def lift_terms(g: GeneralTopicModel, alpha: float, beta: float, rows, membership, theta,
               definition: str = "all_keys") -> np.ndarray:  # fmt: skip
    """Per-law numerators and denominators of the label family's lifts, ``[num_same, den_same, num_diff, den_diff]``.

    With ``p = p_theta`` on the tokens and the class sums ``a``, ``b`` of SPEC §11.9:
    ``num_c = sum_x p_x w_x (a_x + (e^beta - 1) b_x) / D_x``, ``den_c = sum_x p_x a_x``; ``all_keys``: ``w = 1``,
    ``D = 1 + (e^beta - 1) P(z_x) + e^beta (e^alpha - 1) p_x``; ``excl_own``: ``w = 1 - p_x``,
    ``D = (1 - P(z_x)) + e^beta (P(z_x) - p_x)``; ``masked``: ``num = den``.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    alpha, beta : float
        The scores ``S = alpha I_w + beta Z`` (own word, same label).
    rows : array_like of int, shape (n_tok,)
        LDA word index (``g.phi`` column) of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets (the classes of the measurement).
    theta : array_like, shape (n_laws, T)
        Document laws (topic proportions).
    definition : {"all_keys", "excl_own", "masked"}, default "all_keys"
        The lift's definition (:data:`DEFINITIONS`).

    Returns
    -------
    ndarray, shape (4, n_laws)
        ``[num_same, den_same, num_diff, den_diff]``; ``lift_c = sum num_c / sum den_c``. A law costs
        ``O(nnz(A) + n_tok)`` (sparse class sums).

    Raises
    ------
    ValueError
        If ``definition`` is not one of :data:`DEFINITIONS`.

    See Also
    --------
    predicted_lifts : The lifts with intervals.
    dense_lift_terms : The same terms by direct enumeration, for any scores.
    own_word_terms : The own-word share's terms.

    References
    ----------
    SPEC §11.9 (the lift of the label family); §11.6 (dominant-topic labels).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import dense_lift_terms, lift_terms
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> t = lift_terms(g, 2.0, 0.5, rows, M, theta)
    >>> round(float(t[0].sum() / t[1].sum()), 6), round(float(t[2].sum() / t[3].sum()), 6)  # same, different
    (0.426573, 0.352156)
    >>> z = g.dominant_topic()
    >>> S = 2.0 * np.eye(6) + 0.5 * (z[:, None] == z[None, :])  # the same scores, enumerated
    >>> bool(np.allclose(dense_lift_terms(g, S, rows, M, theta)[0], t))
    True
    >>> t0 = lift_terms(g, 0.0, 0.0, rows, M, theta)  # uniform attention: numerators = denominators
    >>> bool(np.allclose(t0[0], t0[1]) and np.allclose(t0[2], t0[3]))
    True
    """
    definition = check_choice("definition", definition, DEFINITIONS)
    cl = _classes(g, rows, membership)
    return _terms(_law_sums(g, cl, np.asarray(theta, dtype=np.float64)), alpha, beta, definition)


def _law_sums(g, cl: _Classes, theta):
    """The ``(alpha, beta)``-free parts of SPEC §11.9 per law: ``p`` on the tokens, the label masses ``P(z_x)``
    over all words, and the class sums ``a``, ``b`` (same, different), each ``(n_laws, n_tok)``."""
    P = theta @ g.phi[:, cl.rows]  # (n, n_tok): p_theta on the tokens
    Lx = (theta @ cl.label_phi)[:, cl.labels]  # (n, n_tok): P_theta(z_x) over all words
    PA = (cl.A.T @ P.T).T  # (p A)_x = sum_y p_y A[y, x] (A symmetric)
    PAz = (cl.Az.T @ P.T).T
    Ltok = (P @ _one_hot(cl.labels, cl.n_labels))[:, cl.labels]  # label mass over the tokens
    return P, Lx, (PA - P, PAz - P), (P.sum(axis=1, keepdims=True) - PA, Ltok - PAz)


def _weights(P, Lx, alpha, beta, definition):
    """``(q, e^beta - 1)``: the per-token factor ``p_x w_x / D_x`` and the same-label excess weight."""
    eb = math.expm1(beta)
    if definition == "all_keys":
        return P / (1.0 + eb * Lx + math.exp(beta) * math.expm1(alpha) * P), eb
    if definition == "excl_own":  # sum of non-negative parts: no cancellation as beta -> -inf
        return P * (1.0 - P) / ((1.0 - Lx) + math.exp(beta) * (Lx - P)), eb
    return P, 0.0  # masked: uniform attention


def _terms(parts, alpha, beta, definition="all_keys"):
    P, Lx, (a_s, b_s), (a_d, b_d) = parts
    if definition == "masked":  # kappa = 1: the numerators are the denominators, exactly
        den_s, den_d = np.sum(P * a_s, axis=1), np.sum(P * a_d, axis=1)
        return np.stack([den_s, den_s, den_d, den_d])
    q, eb = _weights(P, Lx, alpha, beta, definition)
    return np.stack([
        np.sum(q * (a_s + eb * b_s), axis=1), np.sum(P * a_s, axis=1),
        np.sum(q * (a_d + eb * b_d), axis=1), np.sum(P * a_d, axis=1),
    ])  # fmt: skip


def own_word_terms(g: GeneralTopicModel, alpha: float, beta: float, rows, theta,
                   definition: str = "all_keys") -> np.ndarray:  # fmt: skip
    """Per-law terms of the pooled own-word share: ``[sum_x p_x share_x, sum_x p_x]`` over the topic tokens.

    ``share_x = e^{alpha + beta} p_x / sum_z p_z e^{S[x, z]}`` (the attention a query showing ``x`` spends on the
    other copies of ``x``; for ``excl_own`` it is the mass that definition removes) and ``share_x = p_x`` for a
    masked query (uniform attention); the pooled share is ``sum(terms[0]) / sum(terms[1])``.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    alpha, beta : float
        The scores ``S = alpha I_w + beta Z``.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    theta : array_like, shape (n_laws, T)
        Document laws.
    definition : {"all_keys", "excl_own", "masked"}, default "all_keys"
        The lift's definition.

    Returns
    -------
    ndarray, shape (2, n_laws)
        ``[sum_x p_x share_x, sum_x p_x]`` per law.

    Raises
    ------
    ValueError
        If ``definition`` is not one of :data:`DEFINITIONS`.

    See Also
    --------
    lift_terms : The class lifts' terms.
    predicted_lifts : Reports the pooled share as ``own_word``.

    References
    ----------
    SPEC §11.9 (the own-word share).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import own_word_terms
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> o = own_word_terms(g, 0.0, 0.0, rows, theta)  # uniform attention: share_x = p_x
    >>> P = theta @ phi[:, rows]
    >>> bool(np.allclose(o, [(P * P).sum(axis=1), P.sum(axis=1)]))
    True
    >>> o2 = own_word_terms(g, 2.0, 0.5, rows, theta)  # a large own-word score takes most of the attention
    >>> round(float(o2[0].sum() / o2[1].sum()), 6)
    0.696901
    """
    definition = check_choice("definition", definition, DEFINITIONS)
    M = np.ones((len(rows), 1), dtype=bool)
    cl = _classes(g, rows, M)
    P, Lx, *_ = _law_sums(g, cl, np.asarray(theta, dtype=np.float64))
    return _own_word(P, Lx, alpha, beta, definition)


def _own_word(P, Lx, alpha, beta, definition):
    if definition == "masked":
        share = P
    else:
        own = math.exp(alpha + beta) * P
        share = own / ((1.0 - Lx) + math.exp(beta) * (Lx - P) + own)
    return np.stack([np.sum(P * share, axis=1), np.sum(P, axis=1)])


def dense_lift_terms(g: GeneralTopicModel, scores, rows, membership, theta, definition: str = "all_keys"):
    """The terms of :func:`lift_terms` and :func:`own_word_terms` for ANY word score matrix, by direct enumeration.

    ``kappa_theta(x, y)`` (module docstring) is enumerated over the topic tokens for each law, so a law costs
    ``O(n_tok n_words)``: small vocabularies (e.g. the co-topic family on :func:`sub_model`).

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    scores : array_like, shape (n_words, n_words)
        Word scores ``S[x, y]`` (query word ``x``, key word ``y``).
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets.
    theta : array_like, shape (n_laws, T)
        Document laws.
    definition : {"all_keys", "excl_own", "masked"}, default "all_keys"
        The lift's definition.

    Returns
    -------
    terms : ndarray, shape (4, n_laws)
        ``[num_same, den_same, num_diff, den_diff]`` as in :func:`lift_terms`.
    own : ndarray, shape (2, n_laws)
        ``[sum_x p_x share_x, sum_x p_x]`` as in :func:`own_word_terms`.

    Raises
    ------
    ValueError
        If ``scores`` does not have shape ``(n_words, n_words)`` or ``definition`` is unknown.

    See Also
    --------
    lift_terms : The label family's closed form.
    dense_predicted_lifts : The lifts with intervals.

    References
    ----------
    SPEC §11.9 (the sensitivity to the score family).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import dense_lift_terms, own_word_terms
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> z = g.dominant_topic()
    >>> S = 2.0 * np.eye(6) + 0.5 * (z[:, None] == z[None, :])  # the label family, as a matrix
    >>> t, own = dense_lift_terms(g, S, rows, M, theta)
    >>> round(float(t[0].sum() / t[1].sum()), 6), bool(np.allclose(own, own_word_terms(g, 2.0, 0.5, rows, theta)))
    (0.426573, True)
    """
    definition = check_choice("definition", definition, DEFINITIONS)
    Sw = np.asarray(scores, dtype=np.float64)
    if Sw.shape != (g.n_words, g.n_words):
        raise ValueError(f"scores must have shape ({g.n_words}, {g.n_words}), got {Sw.shape}")
    rows = np.asarray(rows)
    n_tok = rows.size
    V = np.zeros((n_tok, np.asarray(membership).shape[1]), dtype=bool)
    V[:] = membership
    cls = S.pair_classes(np.arange(n_tok), V)
    masks = [(cls == 1).astype(np.float64), (cls == 2).astype(np.float64)]
    E = np.exp(Sw[rows] - Sw[rows].max(axis=1, keepdims=True))  # (n_tok, n_words)
    Eown = E[np.arange(n_tok), rows]
    theta = np.asarray(theta, dtype=np.float64)
    terms, own = np.zeros((4, len(theta))), np.zeros((2, len(theta)))
    for k, th in enumerate(theta):
        p = th @ g.phi
        px = p[rows]
        tot = E @ p
        if definition == "all_keys":
            kap = E[:, rows] / tot[:, None]
        elif definition == "excl_own":
            kap = E[:, rows] * ((1.0 - px) / (tot - Eown * px))[:, None]
        else:
            kap = np.ones((n_tok, n_tok))
        w = np.outer(px, px)
        for c, m in enumerate(masks):
            terms[2 * c, k], terms[2 * c + 1, k] = np.sum(w * kap * m), np.sum(w * m)
        share = px if definition == "masked" else Eown * px / tot
        own[:, k] = np.sum(px * share), np.sum(px)
    return terms, own


def _lifts(t):
    same, diff = t[0].sum() / t[1].sum(), t[2].sum() / t[3].sum()
    return float(same), float(diff)


def _summary(t, own, W, alpha, beta, n_laws) -> dict:
    same, diff = _lifts(t)
    bs, bd = (W @ t[0]) / (W @ t[1]), (W @ t[2]) / (W @ t[3])
    return {"same_topic": same, "different_topic": diff, "gap": same - diff, "ratio": same / diff,
            "gap_ci_laws": S.percentile_ci(bs - bd, _LEVEL), "ratio_ci_laws": S.percentile_ci(bs / bd, _LEVEL),
            "own_word": float(own[0].sum() / own[1].sum()),
            "n_laws": int(n_laws), "weight_ratio": math.exp(beta), "alpha": float(alpha),
            "beta": float(beta)}  # fmt: skip


def predicted_lifts(g: GeneralTopicModel, alpha: float, beta: float, rows, membership, theta, *, n_boot: int = 200,
                    rng=None, cov=None, definition: str = "all_keys") -> dict:  # fmt: skip
    """The label family's same-topic and different-topic lifts at ``(alpha, beta)``, their gap and ratio.

    ``lift_c = sum num_c / sum den_c`` over the laws (:func:`lift_terms`, module docstring). Intervals: percentile
    bootstrap over the laws ``theta`` (``n_boot`` replicates from ``rng``); with the optimum's covariance ``cov``
    the gap's and the ratio's intervals are widened in quadrature by ``1.96 sqrt(d^T cov d)``, ``d`` their
    central-difference derivative in ``(alpha, beta)``.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    alpha, beta : float
        The scores ``S = alpha I_w + beta Z``.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets.
    theta : array_like, shape (n_laws, T)
        Document laws.
    n_boot : int, >= 10, default 200
        Bootstrap replicates over the laws.
    rng : numpy.random.Generator, optional
        Source of the bootstrap (default: a fresh unseeded generator; the point values do not depend on it).
    cov : array_like, shape (2, 2), optional
        Sampling covariance of ``(alpha, beta)`` (an optimum's ``info["x_cov"]``).
    definition : {"all_keys", "excl_own", "masked"}, default "all_keys"
        The lift's definition.

    Returns
    -------
    dict
        Keys ``same_topic``, ``different_topic``, ``gap``, ``gap_ci``, ``ratio``, ``ratio_ci`` (95%),
        ``gap_ci_laws``, ``ratio_ci_laws`` (the law bootstrap alone), ``gap_se_optimum``, ``ratio_se_optimum``,
        ``own_word`` (pooled :func:`own_word_terms`), ``n_laws``, ``weight_ratio`` (``e^beta``, the per-word
        same-label : different-label weight of a query), ``alpha``, ``beta``, ``definition``.

    Raises
    ------
    ValueError
        If ``n_boot < 10`` or ``definition`` is unknown.

    See Also
    --------
    lift_terms : The per-law terms.
    dense_predicted_lifts : The same for any score matrix.
    sampled_window_lifts : An independent Monte Carlo evaluation on sampled windows.
    theorycheck.realdata.attention_theory.lift_comparison : Sets it beside the measured lifts.

    References
    ----------
    SPEC §11.9; Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245,
    Theorem 3 (the optimal attention prefers same-topic words).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import predicted_lifts
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> rng = np.random.default_rng(1)
    >>> p = predicted_lifts(g, 2.0, 0.5, rows, M, theta, n_boot=20, rng=rng)
    >>> round(p["ratio"], 6), round(p["weight_ratio"], 6), p["n_laws"]  # ratio > 1: same-topic keys preferred
    (1.211316, 1.648721, 50)
    >>> lo, hi = p["ratio_ci"]
    >>> bool(lo < p["ratio"] < hi)
    True

    ``alpha`` leaves the ``excl_own`` lift; a masked query's lift is 1:

    >>> [round(predicted_lifts(g, a, 0.5, rows, M, theta, rng=rng, definition="excl_own")["ratio"], 6) for a in (0, 5)]
    [1.513057, 1.513057]
    >>> m = predicted_lifts(g, 2.0, 0.5, rows, M, theta, rng=rng, definition="masked")
    >>> m["same_topic"], m["different_topic"]
    (1.0, 1.0)
    """
    n_boot = check_int("n_boot", n_boot, low=10)
    definition = check_choice("definition", definition, DEFINITIONS)
    theta = np.asarray(theta, dtype=np.float64)
    parts = _law_sums(g, _classes(g, rows, membership), theta)
    t = _terms(parts, alpha, beta, definition)
    W = S.bootstrap_weights(len(theta), n_boot, check_rng(rng))
    out = _summary(t, _own_word(parts[0], parts[1], alpha, beta, definition), W, alpha, beta, len(theta))
    out["definition"] = definition
    se = {"gap": 0.0, "ratio": 0.0}
    if cov is not None:
        d = np.zeros((2, 2))  # rows: gap, ratio; columns: alpha, beta
        for j in range(2):
            h = 1e-4 * max(1.0, abs((alpha, beta)[j]))
            up, dn = [alpha, beta], [alpha, beta]
            up[j] += h
            dn[j] -= h
            (su, du) = _lifts(_terms(parts, up[0], up[1], definition))
            (sd, dd) = _lifts(_terms(parts, dn[0], dn[1], definition))
            d[:, j] = np.array([(su - du) - (sd - dd), su / du - sd / dd]) / (2 * h)
        cov = np.asarray(cov, dtype=np.float64)
        se = {"gap": float(np.sqrt(d[0] @ cov @ d[0])), "ratio": float(np.sqrt(d[1] @ cov @ d[1]))}
    _widen(out, se)
    return out


def _widen(out, se):
    for name in ("gap", "ratio"):
        lo, hi = out[f"{name}_ci_laws"]
        p, e = out[name], _Z * se[name]
        out[f"{name}_ci"] = (p - math.hypot(p - lo, e), p + math.hypot(hi - p, e))
        out[f"{name}_se_optimum"] = se[name]


def dense_predicted_lifts(g: GeneralTopicModel, scores, rows, membership, theta, *, n_boot: int = 200, rng=None,
                          definition: str = "all_keys") -> dict:  # fmt: skip
    """:func:`predicted_lifts` for any word score matrix (:func:`dense_lift_terms`; law bootstrap only).

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    scores : array_like, shape (n_words, n_words)
        Word scores ``S[x, y]``.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets.
    theta : array_like, shape (n_laws, T)
        Document laws.
    n_boot : int, >= 10, default 200
        Bootstrap replicates over the laws.
    rng : numpy.random.Generator, optional
        Source of the bootstrap (default: a fresh unseeded generator; the point values do not depend on it).
    definition : {"all_keys", "excl_own", "masked"}, default "all_keys"
        The lift's definition.

    Returns
    -------
    dict
        The keys of :func:`predicted_lifts` except ``weight_ratio``, ``alpha`` and ``beta`` (the optimum's
        standard errors are 0).

    Raises
    ------
    ValueError
        If ``n_boot < 10``, ``scores`` has the wrong shape or ``definition`` is unknown.

    See Also
    --------
    predicted_lifts : The label family's closed form.
    sub_model : A vocabulary small enough for the enumeration.

    References
    ----------
    SPEC §11.9 (sensitivity to the score family).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import dense_predicted_lifts, predicted_lifts
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> z = g.dominant_topic()
    >>> S = 2.0 * np.eye(6) + 0.5 * (z[:, None] == z[None, :])
    >>> rng = np.random.default_rng(1)
    >>> d = dense_predicted_lifts(g, S, rows, M, theta, n_boot=20, rng=rng)
    >>> round(d["ratio"], 9) == round(predicted_lifts(g, 2.0, 0.5, rows, M, theta, rng=rng)["ratio"], 9)
    True
    >>> d0 = dense_predicted_lifts(g, np.zeros((6, 6)), rows, M, theta, n_boot=20, rng=rng)
    >>> round(d0["same_topic"], 12), round(d0["different_topic"], 12)  # S = 0: uniform attention
    (1.0, 1.0)
    """
    n_boot = check_int("n_boot", n_boot, low=10)
    theta = np.asarray(theta, dtype=np.float64)
    t, own = dense_lift_terms(g, scores, rows, membership, theta, definition)
    out = _summary(t, own, S.bootstrap_weights(len(theta), n_boot, check_rng(rng)), float("nan"), 0.0, len(theta))
    del out["weight_ratio"], out["alpha"], out["beta"]
    out["definition"] = definition
    _widen(out, {"gap": 0.0, "ratio": 0.0})
    return out


def sub_model(g: GeneralTopicModel, rows, membership, *, per_topic: int = 8):
    """The topic model restricted to the ``per_topic`` most probable topic tokens of each topic.

    The kept words are the union over topics (ascending LDA index); each topic's row of ``phi`` is renormalised over
    them and the Dirichlet law is the same; the tokens keep their topic sets. A small model on which any score
    family can be solved (the co-topic family's dense route) with the measurement's classes.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets.
    per_topic : int, >= 1, default 8
        Topic tokens kept per topic.

    Returns
    -------
    g_sub : GeneralTopicModel
        The restricted model (``n_words`` = the kept tokens).
    rows_sub : ndarray of int, shape (n_sub,)
        ``0, ..., n_sub - 1``: every word of ``g_sub`` is a topic token.
    membership_sub : ndarray of bool, shape (n_sub, K)
        The kept tokens' topic sets.

    Raises
    ------
    ValueError
        If ``per_topic < 1``.

    See Also
    --------
    dense_predicted_lifts : Lifts of any scores on the sub-model.
    theorycheck.realdata.attention_theory.sensitivity : Solves the label and co-topic families on it.

    References
    ----------
    SPEC §11.9 (the sensitivity's sub-model).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import sub_model
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> gs, rs, Ms = sub_model(g, rows, M, per_topic=1)  # words 0 (topic 0's top token) and 4 (topic 1's)
    >>> np.round(gs.phi, 6), rs  # 0.3 / (0.3 + 0.05) and 0.05 / 0.35
    (array([[0.857143, 0.142857],
           [0.142857, 0.857143]]), array([0, 1]))
    >>> Ms.astype(int)
    array([[1, 0],
           [0, 1]])
    """
    per_topic = check_int("per_topic", per_topic, low=1)
    rows = np.asarray(rows)
    pick = np.argsort(-g.phi[:, rows], axis=1, kind="stable")[:, :per_topic]
    keep = np.unique(pick.ravel())  # indices into rows
    words = rows[keep]
    order = np.argsort(words, kind="stable")
    words, keep = words[order], keep[order]
    phi = g.phi[:, words]
    phi = phi / phi.sum(axis=1, keepdims=True)
    gs = GeneralTopicModel(phi, prior="dirichlet", alpha=g.concentration)
    return gs, np.arange(words.size), np.asarray(membership)[keep]


def sampled_window_lifts(g: GeneralTopicModel, alpha: float, beta: float, rows, memberships: dict, *,
                         n_windows: int, length: int, n_boot: int = 200, seed: int = 0) -> LiftStats:  # fmt: skip
    """An independent evaluation of the label family's lifts: the measurement applied to the theory's own attention.

    Window ``k``: ``theta ~ Dirichlet(g.concentration)``, ``length`` words i.i.d. from ``p_theta`` (stream
    ``[seed, k]``), scores ``S[i, j] = alpha 1[w_i = w_j] + beta 1[z_{w_i} = z_{w_j}]`` between positions (the own
    position included, as in the one-layer model), attention ``softmax_j S[i, j]``; a position is valid if its word
    is a topic token; the windows go through :class:`~theorycheck.realdata.lifts.LiftAccumulator` (one layer,
    one head; word ``w`` of the model is token id ``w``). As ``length`` and ``n_windows`` grow, the ``excl_own``
    lift tends to :func:`predicted_lifts`' ``excl_own`` (the ``all_keys`` lift of a finite window also counts the
    own position, weight ``e^{alpha + beta}``, which the ``N -> inf`` limit drops).

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (its ``dominant_topic`` labels ``z`` define the label family).
    alpha, beta : float
        The scores ``S = alpha I_w + beta Z``.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    memberships : dict of str to array_like
        Class-set name -> ``(n_tok, K)`` bool topic sets of ``rows``.
    n_windows : int, >= 2
        Sampled windows.
    length : int, >= 2
        Words per window.
    n_boot : int, >= 10, default 200
        Bootstrap replicates over windows.
    seed : int, default 0
        Seed of the windows (``[seed, k]``) and of the bootstrap (``[seed, n_windows]``).

    Returns
    -------
    LiftStats
        The lifts of the sampled windows, one layer and one head.

    Raises
    ------
    ValueError
        If ``n_windows < 2``, ``length < 2`` or ``n_boot < 10``.

    See Also
    --------
    predicted_lifts : The closed form it checks.
    theorycheck.realdata.lifts.LiftAccumulator : The measurement.

    References
    ----------
    SPEC §11.9, §6 item 37 (claim ``realdata.theory-lift-windows``).

    Examples
    --------
    >>> from theorycheck.realdata.theory_lifts import predicted_lifts, sampled_window_lifts
    >>> from theorycheck import GeneralTopicModel
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)  # labels z = 0, 0, 0, 1, 1, 1
    >>> rows, M = np.array([0, 1, 4, 5]), np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=50)  # 50 document laws
    >>> ls = sampled_window_lifts(g, 2.0, 0.5, rows, {"topic_sets": M}, n_windows=20, length=30, n_boot=20)
    >>> lo, hi = ls.lifts["topic_sets"]["excl_own"]["ratio_ci"][0, 0]
    >>> rng = np.random.default_rng(1)
    >>> limit = predicted_lifts(g, 2.0, 0.5, rows, M, theta, rng=rng, definition="excl_own")["ratio"]
    >>> round(limit, 6), bool(lo < limit < hi)  # the closed form lies in the windows' bootstrap interval
    (1.513057, True)
    """
    n_windows = check_int("n_windows", n_windows, low=2)
    length = check_int("length", length, low=2)
    rows = np.asarray(rows)
    z = g.dominant_topic()
    Ms = {}
    for name, M in memberships.items():
        full = np.zeros((g.n_words, np.asarray(M).shape[1]), dtype=bool)
        full[rows] = M
        Ms[name] = full
    acc = LiftAccumulator(1, 1, Ms)
    topic = np.asarray(next(iter(Ms.values())).any(axis=1), dtype=bool)
    for k in range(n_windows):
        rng = np.random.default_rng([seed, k])
        p = rng.dirichlet(g.concentration) @ g.phi
        w = rng.choice(g.n_words, size=length, p=p / p.sum())
        Sc = alpha * (w[:, None] == w[None, :]) + beta * (z[w][:, None] == z[w][None, :])
        A = np.exp(Sc - Sc.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        acc.add(A[None, None], w, topic[w])
    return acc.result(n_boot=n_boot, rng=np.random.default_rng([seed, n_windows]))
