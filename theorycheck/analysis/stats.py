"""Topic statistics of learned objects (embeddings, value matrices, attention).

Two blocks: embedding statistics (SPEC §4.1) and training statistics (attention classes,
two-stage detection; §4.5, §5.1-5.2). Statistics take arrays (and the token layout of a
:class:`~theorycheck.models.TopicModel`) and return small dataclasses or arrays. No optimisation
happens here. The block score / contrast and the effective ``K`` of a token matrix live, for any
topic labelling, in :mod:`theorycheck.analysis.topic_structure` (their one home); this module
lists them under their historical names ``stats.block_score``, ``stats.block_contrast``,
``stats.effective_K``.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from .._validate import check_array, check_int, check_real
from ..models import GeneralTopicModel, TopicModel, check_models, token_topic
from .topic_structure import block_contrast, block_score, effective_K

__all__: list[str] = []


# ============================================================================= embedding statistics
# (SPEC §4.1, §5.4, §6 items 11-14; issue #3). Pair classes follow the paper's code
# (``inspect_result.py``): same token, same topic (distinct tokens), different topic; the
# [MASK] token (index 0) is excluded from every class. A word's topic is its topic in the paper's
# model and its dominant topic in a general model (``dominant_topic()``, SPEC §11.1); the per-topic
# sums of embedding columns are the one model-specific step (:func:`_topic_sums`).
__all__ += ["EmbeddingTopicStats", "embedding_topic_stats", "topic_block_sums", "own_minus_other_block_sums"]


@dataclass(frozen=True)
class EmbeddingTopicStats:
    """Mean inner products / cosine similarities of word embeddings by pair class.

    Means are over ordered pairs ``(i, j)`` of words (``1 .. T v``; [MASK] excluded):
    ``same_token`` (``i = j``), ``same_topic`` (``i != j``, ``t(i) = t(j)``), ``diff_topic``
    (``t(i) != t(j)``). ``gap_dot = same_topic_dot - diff_topic_dot`` and
    ``gap_cos = same_topic_cos - diff_topic_cos`` are the paper's headline quantities (§5.4).
    ``n_same_token, n_same_topic, n_diff_topic`` are the pair counts.

    Parameters
    ----------
    same_token_dot : float
        ``mean_i ||E_i||^2`` over the words.
    same_topic_dot, diff_topic_dot : float
        Mean ``<E_i, E_j>`` over the same-topic (``i != j``) and the different-topic pairs.
    same_topic_cos, diff_topic_cos : float
        The same means of the cosine similarity, each in ``[-1, 1]``.
    gap_dot : float
        ``same_topic_dot - diff_topic_dot``.
    gap_cos : float
        ``same_topic_cos - diff_topic_cos``, in ``[-2, 2]``.
    n_same_token, n_same_topic, n_diff_topic : int
        The pair counts: ``n``, ``sum_t n_t (n_t - 1)`` and ``n^2 - sum_t n_t^2`` (``n`` words, ``n_t`` in
        topic ``t``).

    See Also
    --------
    embedding_topic_stats : Computes it.
    theorycheck.analysis.matrix_topic_stats : The same gap for any token matrix (here the Gram ``W_E^T W_E``).

    References
    ----------
    SPEC §4.1 (embedding optima), §5.4 (the paper's embedding statistics).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import EmbeddingTopicStats, embedding_topic_stats
    >>> st = embedding_topic_stats(W_E, tm)
    >>> isinstance(st, EmbeddingTopicStats), st.gap_dot, st.gap_cos, st.n_same_topic, st.n_diff_topic
    (True, 1.0, 1.0, 6, 24)
    >>> sorted(st.to_dict())[:3]
    ['diff_topic_cos', 'diff_topic_dot', 'gap_cos']
    """

    same_token_dot: float
    same_topic_dot: float
    diff_topic_dot: float
    same_topic_cos: float
    diff_topic_cos: float
    gap_dot: float
    gap_cos: float
    n_same_token: int
    n_same_topic: int
    n_diff_topic: int

    def to_dict(self) -> dict:
        """The fields as a plain dict (JSON-ready)."""
        return asdict(self)


def _check_embedding(W_E, tm):
    check_models(tm, general=True)
    W_E = check_array("W_E", W_E, ndim=2)
    if W_E.shape[1] != tm.V1 or W_E.shape[0] < 1:
        raise ValueError(f"W_E must have shape (d, V1) = (d >= 1, {tm.V1}), got {W_E.shape}")
    return W_E


@functools.singledispatch
def _topic_sums(tm: GeneralTopicModel, X) -> np.ndarray:
    """``(d, T)``: column ``t`` is the sum of the word columns of ``X`` whose dominant topic is ``t``
    (generic route, SPEC §11.1)."""
    Z = np.zeros((tm.n_words, tm.T))
    Z[np.arange(tm.n_words), tm.dominant_topic()] = 1.0
    return X[:, 1:] @ Z


@_topic_sums.register
def _(tm: TopicModel, X) -> np.ndarray:
    """The paper's layout: topic ``t`` is the words ``1 + t v .. (t + 1) v`` (a reshape, O(d V1))."""
    return X[:, 1:].reshape(X.shape[0], tm.T, tm.v).sum(axis=2)


def _class_sums(X, tm):
    """Sums of <X_i, X_j> over same-token, same-topic (incl. i = j) and all ordered word pairs."""
    words = X[:, 1:]
    same_token = float(np.sum(words * words))
    topic_sums = _topic_sums(tm, X)  # (d, T)
    same_topic_incl = float(np.sum(topic_sums * topic_sums))
    tot = topic_sums.sum(axis=1)
    all_pairs = float(tot @ tot)
    return same_token, same_topic_incl, all_pairs


def embedding_topic_stats(W_E, tm: GeneralTopicModel) -> EmbeddingTopicStats:
    """Same-topic vs different-topic mean inner product and cosine similarity of embeddings.

    .. math::
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{same}} =
        \\frac{\\sum_t \\|\\sum_{i\\in t} E_i\\|^2 - \\sum_i \\|E_i\\|^2}{\\sum_t n_t (n_t - 1)},\\qquad
        \\overline{\\langle E_i, E_j\\rangle}_{\\text{diff}} =
        \\frac{\\|\\sum_i E_i\\|^2 - \\sum_t \\|\\sum_{i\\in t} E_i\\|^2}{n^2 - \\sum_t n_t^2},

    (``n_t`` words in topic ``t``, ``n`` words; ``T v (v-1)`` and ``T (T-1) v^2`` for the paper's
    model), and the same with unit-normalised embeddings for the cosine. Cost ``O(d V1)`` for the
    paper's model, ``O(d V1 T)`` for a general one (topics: dominant topics, SPEC §11.1). Equals
    :func:`theorycheck.analysis.topic_structure.matrix_topic_stats` of the Gram ``W_E^T W_E``
    (off-diagonal pairs) without forming it.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i`` (column 0, [MASK], is ignored).
    tm : GeneralTopicModel
        Any topic model (the paper's: T topics of v words; a general one: dominant topics).

    Returns
    -------
    EmbeddingTopicStats
        The class means above (inner product and cosine), their gaps and the pair counts.

    Raises
    ------
    ValueError
        A pair class is empty (the paper's model: ``T < 2`` or ``v < 2``), a zero word embedding
        (cosine undefined), wrong shape or non-finite entries.

    See Also
    --------
    topic_block_sums : The per-word, per-topic sums of inner products.
    own_minus_other_block_sums : The block-sum identity of the tied optima (SPEC §4.1 D2).
    theorycheck.analysis.matrix_topic_stats : The same gap from the Gram matrix.

    References
    ----------
    SPEC §4.1 (embedding optima), §5.4 (the paper's pair classes, official ``inspect_result.py``),
    §11.1 (dominant topics).

    Examples
    --------
    Topic-indicator embeddings: same-topic words coincide (dot 1, cosine 1), different topics are
    orthogonal:

    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import embedding_topic_stats
    >>> st = embedding_topic_stats(W_E, tm)
    >>> st.same_topic_dot, st.diff_topic_dot, st.same_topic_cos, st.diff_topic_cos, st.gap_dot
    (1.0, 0.0, 1.0, 0.0, 1.0)

    The gap equals that of the Gram ``W_E^T W_E`` over off-diagonal pairs:

    >>> from theorycheck.analysis import topic_gap
    >>> E = np.random.default_rng(0).standard_normal((4, tm.V1))
    >>> round(embedding_topic_stats(E, tm).gap_dot, 12) == round(topic_gap(E.T @ E, tm), 12)
    True
    """
    W_E = _check_embedding(W_E, tm)
    sizes = np.bincount(tm.dominant_topic(), minlength=tm.T).astype(np.int64)
    n_tok = tm.n_words
    n_same, n_diff = int(np.sum(sizes * (sizes - 1))), int(n_tok * n_tok - np.sum(sizes * sizes))
    if n_same == 0 or n_diff == 0:
        raise ValueError(
            f"embedding_topic_stats needs T >= 2 and v >= 2 (two topics, a topic of two words; otherwise the "
            f"different-topic or the same-topic distinct-token class is empty), got T={tm.T}, "
            f"topic sizes {sizes.tolist()}"
        )
    norms = np.linalg.norm(W_E[:, 1:], axis=0)
    if np.any(norms == 0):
        i = int(np.argmax(norms == 0)) + 1
        raise ValueError(f"W_E has a zero embedding for word {i}; cosine similarity is undefined")
    st, si, al = _class_sums(W_E, tm)
    U = W_E.copy()
    U[:, 1:] /= norms
    cst, csi, cal = _class_sums(U, tm)
    same_dot, diff_dot = (si - st) / n_same, (al - si) / n_diff
    same_cos, diff_cos = (csi - cst) / n_same, (cal - csi) / n_diff
    return EmbeddingTopicStats(
        same_token_dot=st / n_tok,
        same_topic_dot=same_dot,
        diff_topic_dot=diff_dot,
        same_topic_cos=same_cos,
        diff_topic_cos=diff_cos,
        gap_dot=same_dot - diff_dot,
        gap_cos=same_cos - diff_cos,
        n_same_token=n_tok,
        n_same_topic=n_same,
        n_diff_topic=n_diff,
    )


def topic_block_sums(W_E, tm: GeneralTopicModel) -> np.ndarray:
    """Block sums ``Y[i, t] = sum_{j in topic t} <E_i, E_j>``, shape ``(V1, T)`` (row 0 = [MASK]).

    Computed as ``W_E^T (W_E [1_1 .. 1_T])`` in ``O(d V1 T)`` without forming the Gram matrix. Any
    topic model (a general one: dominant topics, SPEC §11.1).

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i``, finite, ``d >= 1``.
    tm : GeneralTopicModel
        Any topic model (the paper's: T topics of v words; a general one: dominant topics).

    Returns
    -------
    ndarray, shape (V1, T)
        ``Y[i, t] = sum_{j in topic t} <E_i, E_j>`` (row 0 is [MASK]'s).

    Raises
    ------
    ValueError
        ``W_E`` not of shape ``(d, V1)`` with ``d >= 1``, or non-finite entries.

    See Also
    --------
    own_minus_other_block_sums : Own-topic minus other-topic block sums.
    embedding_topic_stats : The pair-class means.

    References
    ----------
    SPEC §4.1 D1/D2 (block-sum identities of the optima), §11.1 (dominant topics).

    Examples
    --------
    Topic-indicator embeddings: each word's own topic sums to ``v``, the others to 0:

    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W_E = np.zeros((tm.T, tm.V1))  # word w embedded as the indicator of its topic; [MASK] = 0
    >>> W_E[tm.token_topics()[1:], np.arange(1, tm.V1)] = 1.0
    >>> from theorycheck.analysis.stats import topic_block_sums
    >>> topic_block_sums(W_E, tm)
    array([[0., 0., 0.],
           [2., 0., 0.],
           [2., 0., 0.],
           [0., 2., 0.],
           [0., 2., 0.],
           [0., 0., 2.],
           [0., 0., 2.]])
    """
    return _topic_block_sums(_check_embedding(W_E, tm), tm)


def _topic_block_sums(W_E, tm):
    return W_E.T @ _topic_sums(tm, W_E)


def own_minus_other_block_sums(W_E, tm: GeneralTopicModel) -> np.ndarray:
    """Per word ``i`` and other topic ``t' != t(i)``: ``sum_{j in t(i)} <E_i,E_j> - sum_{j in t'} <E_i,E_j>``.

    Parameters
    ----------
    W_E : array_like, shape (d, V1)
        Column ``i`` is the embedding of token ``i``, finite, ``d >= 1``.
    tm : GeneralTopicModel
        Any topic model with ``T >= 2``.

    Returns
    -------
    ndarray, shape (T v, T - 1)
        Row ``i - 1`` is word ``i``; columns are the other topics in increasing order. For every
        tied population minimiser of the paper's model all entries equal ``1/a`` (SPEC §4.1 D2).
        Any topic model (a general one: a word's own topic is its dominant topic, SPEC §11.1).

    Raises
    ------
    ValueError
        ``T < 2`` (no other topic), wrong shape or non-finite entries.

    See Also
    --------
    topic_block_sums : The block sums themselves.
    theorycheck.solvers.closed_form_gram : The minimum-norm tied optimum (SPEC §4.1 D3).

    References
    ----------
    SPEC §4.1 D2 (own minus other block sum ``= 1/a`` at every tied minimiser), §11.1.

    Examples
    --------
    Factor the minimum-norm tied optimum ``G = W_E^T W_E``: every entry is ``1/a``:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.stats import own_minus_other_block_sums
    >>> from theorycheck.solvers import closed_form_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> lam, U = np.linalg.eigh(closed_form_gram(tm, mk).toarray())
    >>> W_E = (U * np.sqrt(np.clip(lam, 0, None))).T
    >>> D = own_minus_other_block_sums(W_E, tm)
    >>> D.shape, bool(np.allclose(D, 1 / mk.a, rtol=1e-12))
    ((6, 2), True)
    """
    W_E = _check_embedding(W_E, tm)
    if tm.T < 2:
        raise ValueError(f"own_minus_other_block_sums needs T >= 2 (an other topic), got T={tm.T}")
    Y = _topic_block_sums(W_E, tm)[1:]  # (Tv, T)
    own_topic = tm.dominant_topic()
    own = Y[np.arange(tm.n_words), own_topic]
    mask = np.ones_like(Y, dtype=bool)
    mask[np.arange(tm.n_words), own_topic] = False
    other = Y[mask].reshape(tm.n_words, tm.T - 1)
    return own[:, None] - other


# ============================================================================ training statistics
# (attention class averages, block scores, two-stage detection; SPEC §4.5, §5.1-5.2; issue #5)
__all__ += [
    "attention_class_averages",
    "block_contrast",
    "block_score",
    "relative_distance",
    "PowerLawFit",
    "power_law_fit",
    "StageBoundaries",
    "detect_stages",
    "effective_K",
]


def attention_class_averages(A, tokens, v: int | None = None, *, normalise: bool = False, labels=None) -> dict:
    """Average attention over ordered position pairs in three classes (official ``inspect_result.py``).

    For every document ``b`` and every pair (query ``i``, key ``j``) of non-padding positions the
    pair is *same word* if ``i = j`` or the tokens are identical, *same topic* if the tokens are
    different words of one topic, *different topic* if they are words of different topics; pairs
    involving [MASK] (token 0) are *no topic*. Each class average is
    ``sum A[b, i, j] / #pairs`` pooled over the batch.

    Parameters
    ----------
    A : array_like, shape (B, N, N)
        Attention of query ``i`` (axis 1) on key ``j`` (axis 2); rows sum to 1 over valid keys.
    tokens : int array_like, shape (B, N)
        Tokens, ``-1`` for padding.
    v : int, optional
        Words per topic (``topic(w) = (w - 1) // v``, the paper's layout).
    normalise : bool, default False
        Length-normalise: use ``n_b A[b, i, j]`` with ``n_b`` the number of non-padding positions
        of document ``b`` (every position a key), so uniform attention gives 1 in every class
        whatever the document lengths (the official code's rescaling by the length, and the
        convention of :mod:`theorycheck.realdata`). Without it, documents of different lengths
        mix ``1/N`` scales and the class averages differ even under uniform attention.
    labels : int array_like, shape (V1,), optional
        Instead of ``v``: the topic of word ``w`` is ``labels[w]`` (a general model's
        ``token_topics()``, SPEC §11.1). Exactly one of ``v`` and ``labels``.

    Returns
    -------
    dict
        ``same_word``, ``same_topic``, ``diff_topic``, ``no_topic`` (NaN if a class is empty),
        ``same_minus_diff`` = same_topic - diff_topic, and the pair counts ``n_*``.
        With uniform attention over ``N`` keys every class average is ``1/N`` (1 if ``normalise``).

    Raises
    ------
    ValueError
        Both or neither of ``v`` and ``labels``, ``A`` not of shape ``(B, N, N)`` matching ``tokens``,
        ``v < 1``, or ``labels`` not 1-d with an entry for every token.

    See Also
    --------
    theorycheck.analysis.topic_structure.effective_K : The same-topic weight of a score matrix.
    theorycheck.analysis.attention_preference : The population analogue under a document law.

    References
    ----------
    SPEC §5.1 (attention classes, the official ``inspect_result.py``), §11.1 (general labels).

    Examples
    --------
    One document ``[1, 2, 3, MASK]`` (``v = 2``: words 1, 2 share topic 0): uniform attention gives
    ``1/N`` in every class:

    >>> from theorycheck.analysis.stats import attention_class_averages
    >>> A = np.full((1, 4, 4), 0.25)
    >>> out = attention_class_averages(A, [[1, 2, 3, 0]], v=2)
    >>> [out[k] for k in ("same_word", "same_topic", "diff_topic", "no_topic", "same_minus_diff")]
    [0.25, 0.25, 0.25, 0.25, 0.0]
    >>> [out[k] for k in ("n_same_word", "n_same_topic", "n_diff_topic", "n_no_topic")]
    [4, 2, 4, 6]

    Attention concentrated on same-topic keys (``normalise``: uniform would be 1):

    >>> B = np.array([[[0.5, 0.5, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.25] * 4]])
    >>> out = attention_class_averages(B, [[1, 2, 3, 0]], v=2, normalise=True)
    >>> out["same_topic"], out["diff_topic"], out["same_minus_diff"]
    (2.0, 0.0, 2.0)
    """
    A = np.asarray(A, dtype=float)
    tok = np.asarray(tokens)
    if (v is None) == (labels is None):
        raise ValueError("pass exactly one of v (words per topic) or labels (the topic of each token)")
    if A.ndim != 3 or A.shape[:2] != tok.shape or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (B, N, N) matching tokens {tok.shape}, got {A.shape}")
    valid = tok >= 0
    if normalise:
        A = A * valid.sum(axis=1)[:, None, None]
    word = tok >= 1
    if labels is None:
        top = np.where(word, token_topic(tok, check_int("v", v, low=1)), -1)
    else:
        lab = np.asarray(labels)
        if lab.ndim != 1 or (tok.size and lab.size <= tok.max()):
            raise ValueError(f"labels must be 1-d with an entry for every token (up to {tok.max()}), got {lab.shape}")
        top = np.where(word, lab[np.where(valid, tok, 0)], -1)
    pair_valid = valid[:, :, None] & valid[:, None, :]
    both_words = word[:, :, None] & word[:, None, :]
    same_tok = (tok[:, :, None] == tok[:, None, :]) | np.eye(tok.shape[1], dtype=bool)[None]
    same_top = top[:, :, None] == top[:, None, :]
    classes = {
        "same_word": pair_valid & same_tok,
        "same_topic": pair_valid & both_words & same_top & ~same_tok,
        "diff_topic": pair_valid & both_words & ~same_top,
    }
    classes["no_topic"] = pair_valid & ~both_words & ~classes["same_word"]
    out = {}
    for k, m in classes.items():
        n = int(m.sum())
        out[k] = float(A[m].sum() / n) if n else float("nan")
        out["n_" + k] = n
    out["same_minus_diff"] = out["same_topic"] - out["diff_topic"]
    return out


class PowerLawFit(NamedTuple):
    """``y ~ exp(intercept) x^slope``; ``slope_stderr`` from the weights; ``n``: points used.

    Returned by :func:`power_law_fit` (NaN fields when fewer than two points are usable).

    Parameters
    ----------
    slope : float
        The exponent ``s`` of ``y ~ e^c x^s``.
    slope_stderr : float
        Its standard error ``(sum_i w_i (log x_i - mean_w log x)^2)^{-1/2}``, ``> 0``.
    intercept : float
        ``c``, the fitted ``log y`` at ``x = 1``.
    n : int
        The number of points used (finite, ``x > 0``, ``y > 0``, ``stderr > 0``).

    See Also
    --------
    power_law_fit : Computes it.
    relative_distance : Another summary statistic of a convergence study.

    References
    ----------
    SPEC §1.1 (the ``O(1/N)`` finite-document gap this fit tests).

    Examples
    --------
    >>> from theorycheck.analysis.stats import PowerLawFit, power_law_fit
    >>> fit = power_law_fit([10.0, 100.0, 1000.0], [0.2, 0.02, 0.002])
    >>> isinstance(fit, PowerLawFit), round(fit.slope, 12), round(float(np.exp(fit.intercept)), 12), fit.n
    (True, -1.0, 2.0, 3)
    """

    slope: float
    slope_stderr: float
    intercept: float
    n: int


def power_law_fit(x, y, stderr=None) -> PowerLawFit:
    """Weighted least-squares line through ``(log x, log y)`` over the points with ``y > 0``.

    .. math:: \\log y_i = c + s \\log x_i, \\qquad w_i = (y_i / \\sigma_i)^2

    (``sigma_i / y_i`` is the standard error of ``log y_i``; unit weights without ``stderr``),
    with ``se(s) = (\\sum_i w_i (\\log x_i - \\bar u_w)^2)^{-1/2}`` (``\\bar u_w`` the weighted mean of
    ``log x_i``). E.g. the finite-document gap ``L_MC(N) - L(N = inf)`` against ``N``: slope -1 for the
    O(1/N) law (SPEC §1.1). NaN fields when fewer than two points are positive.

    Parameters
    ----------
    x : array_like, shape (n,)
        The abscissae; points with ``x <= 0`` or non-finite are dropped.
    y : array_like, shape (n,)
        The ordinates; points with ``y <= 0`` or non-finite are dropped.
    stderr : array_like, shape (n,), optional
        Standard errors ``sigma_i`` of ``y_i`` (points with ``sigma_i <= 0`` dropped); default unit
        weights.

    Returns
    -------
    PowerLawFit
        ``(slope, slope_stderr, intercept, n)``; NaN fields (and ``n < 2``) when fewer than two points
        are usable.

    Raises
    ------
    ValueError
        ``x`` and ``y`` not 1-d of the same shape.

    See Also
    --------
    PowerLawFit : The result.
    relative_distance : Distance of an estimate to a reference.

    References
    ----------
    SPEC §1.1 (the ``O(1/N)`` finite-document gap).

    Examples
    --------
    An exact power law ``y = 3 x^0.5`` is recovered; 10% relative errors give ``se(s)`` of a unit-weight
    fit divided by 10:

    >>> from theorycheck.analysis.stats import power_law_fit
    >>> x = np.array([10.0, 100.0, 1000.0])
    >>> fit = power_law_fit(x, 3 * x**0.5, stderr=0.3 * x**0.5)
    >>> round(fit.slope, 12), round(float(np.exp(fit.intercept)), 12), round(fit.slope_stderr, 12)
    (0.5, 3.0, 0.030709257319)
    >>> round(power_law_fit(x, 3 * x**0.5).slope_stderr, 12)
    0.307092573186
    >>> power_law_fit([1.0, 2.0], [1.0, -1.0]).n  # one usable point: NaN fit
    1
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-d of the same shape, got {x.shape} and {y.shape}")
    s = np.ones_like(y) if stderr is None else np.asarray(stderr, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0) & np.isfinite(s) & (s > 0)
    if np.count_nonzero(ok) < 2:
        return PowerLawFit(np.nan, np.nan, np.nan, int(np.count_nonzero(ok)))
    u, t = np.log(x[ok]), np.log(y[ok])
    w = np.ones_like(u) if stderr is None else (y[ok] / s[ok]) ** 2
    ub, tb = np.average(u, weights=w), np.average(t, weights=w)
    sxx = float(np.sum(w * (u - ub) ** 2))
    slope = float(np.sum(w * (u - ub) * (t - tb)) / sxx)
    return PowerLawFit(slope, float(sxx**-0.5), float(tb - slope * ub), int(u.size))


def relative_distance(X, ref) -> float:
    """``||X - ref||_F / ||ref||_F`` (``||X||_F`` if ``ref = 0``).

    Parameters
    ----------
    X : array_like
        The estimate.
    ref : array_like
        The reference, of ``X``'s shape.

    Returns
    -------
    float
        The relative Frobenius distance, ``>= 0`` (the absolute one ``||X||_F`` when ``ref = 0``).

    Raises
    ------
    ValueError
        ``X`` and ``ref`` of different shapes.

    See Also
    --------
    power_law_fit : Fits the decay of such distances.
    theorycheck.analysis.topic_structure.block_contrast : A structural summary of a token matrix.

    References
    ----------
    SPEC §4.5 (distance of a trained matrix to the optimum).

    Examples
    --------
    >>> from theorycheck.analysis.stats import relative_distance
    >>> round(relative_distance([1.1, 1.1, 1.1], [1.0, 1.0, 1.0]), 12)
    0.1
    >>> relative_distance([3.0, 4.0], [0.0, 0.0])  # ref = 0: ||X||_F
    5.0
    """
    X = np.asarray(X, dtype=float)
    ref = np.asarray(ref, dtype=float)
    if X.shape != ref.shape:
        raise ValueError(f"X and ref must have the same shape, got {X.shape} and {ref.shape}")
    nr = float(np.linalg.norm(ref))
    d = float(np.linalg.norm(X - ref))
    return d / nr if nr > 0 else d


@dataclass
class StageBoundaries:
    """Result of :func:`detect_stages` (steps, or ``None`` when not detected).

    Parameters
    ----------
    stage1_end : int or None
        First step with ``||W^V||_F >= frac`` x its maximum before stage 2.
    stage2_start : int or None
        First step with ``||W^K^T W^Q||_F > kq_factor`` x its initial value.
    plateau_V : float
        The maximum of ``||W^V||_F`` before stage 2 (the whole run without stage 2).
    initial_KQ : float
        ``||W^K^T W^Q||_F`` at the first logged step.
    rule : str
        The detection rule, stated with its thresholds.
    stage2_attention : int or None, optional
        First step with ``K_eff >= (1 + attn_tol) v`` (only with ``K_eff``).
    stage1_end_attention : int or None, optional
        The stage-1 rule with ``stage2_attention`` as the stage-2 boundary.
    V_growth_before_attention : float or None, optional
        ``||W^V||_F`` at ``stage2_attention`` over its initial value.
    stage1_end_structure : int or None, optional
        First step with the block score of ``W^V`` at ``frac`` x its maximum before ``stage2_attention``.
    block_score_at_stage2 : float or None, optional
        The block score at ``stage2_attention``.

    See Also
    --------
    detect_stages : Computes it.
    theorycheck.analysis.dynamics.stage2_onset : The stage-2 onset from the topic contrast of the scores.

    References
    ----------
    SPEC §4.5, §5.2 (the two stages of joint training).

    Examples
    --------
    >>> from theorycheck.analysis.stats import StageBoundaries, detect_stages
    >>> sb = detect_stages([0, 10, 20, 30], [0.1, 0.95, 1.0, 1.0], [0.1, 0.1, 0.5, 2.0])
    >>> isinstance(sb, StageBoundaries), sb.stage1_end, sb.stage2_start, sb.ordered, sb.structural_two_stage
    (True, 10, 30, True, False)
    >>> sb.to_dict()["structural_two_stage"]
    False
    """

    stage1_end: int | None
    stage2_start: int | None
    plateau_V: float
    initial_KQ: float
    rule: str
    stage2_attention: int | None = None
    stage1_end_attention: int | None = None
    V_growth_before_attention: float | None = None
    stage1_end_structure: int | None = None
    block_score_at_stage2: float | None = None

    @property
    def ordered(self) -> bool:
        """Both detected and stage 1 ends no later than stage 2 starts."""
        return self.stage1_end is not None and self.stage2_start is not None and self.stage1_end <= self.stage2_start

    @property
    def structural_two_stage(self) -> bool:
        """The structural rule found two stages: W^V's block pattern formed strictly before
        attention turned topic-aware (``stage1_end_structure < stage2_attention``)."""
        return (
            self.stage1_end_structure is not None
            and self.stage2_attention is not None
            and self.stage1_end_structure < self.stage2_attention
        )

    def to_dict(self) -> dict:
        """The fields and ``structural_two_stage`` as a plain dict (JSON-ready)."""
        return {**asdict(self), "structural_two_stage": self.structural_two_stage}


def detect_stages(
    steps,
    norm_V,
    norm_KQ,
    *,
    frac: float = 0.9,
    kq_factor: float = 10.0,
    K_eff=None,
    v: int | None = None,
    attn_tol: float = 0.1,
    block_score=None,
) -> StageBoundaries:
    """Detect the two stages of joint training from logged norm curves (SPEC §4.5, §5.2).

    Rule (stated, fixed):

    - **stage-1 end** = first logged step at which ``||W^V||_F`` reaches ``frac`` (default 90%) of
      its plateau, the plateau being the largest ``||W^V||_F`` logged *before stage 2 starts*
      (over the whole run if stage 2 is never detected);
    - **stage-2 start** = first logged step at which ``||W^K^T W^Q||_F`` exceeds ``kq_factor``
      times its initial value.

    ``stage1_end <= stage2_start`` is then automatic; what is *not* automatic (and what the
    two-stage claim tests) is that ``||W^V||`` has already grown from its small initial value to
    most of its size while the score matrix has not yet moved.

    Parameters
    ----------
    steps : array_like of int, shape (n,)
        Logged steps (increasing), ``n >= 1``.
    norm_V : array_like, shape (n,)
        ``||W^V||_F`` at those steps.
    norm_KQ : array_like, shape (n,)
        ``||W^K^T W^Q||_F`` at those steps.
    frac : float, 0 < frac <= 1, default 0.9
        The fraction of the plateau (or of the block score's maximum) that ends stage 1.
    kq_factor : float, kq_factor > 1, default 10
        The growth of ``||W^K^T W^Q||_F`` over its initial value that starts stage 2.
    K_eff : array_like, shape (n,), optional
        A curve of the median effective same-topic weight :func:`effective_K` and the words per
        topic ``v``: ``stage2_attention`` is then the first step with ``K_eff >= (1 + attn_tol) v``,
        i.e. when attention starts to favour the query's topic (a functional, init-scale-free
        definition of stage 2, reported next to the norm rule); ``stage1_end_attention`` applies
        the stage-1 rule with that boundary and ``V_growth_before_attention`` is
        ``||W^V||`` at ``stage2_attention`` over its initial value.
    v : int, optional
        Words per topic, ``>= 1``; required with ``K_eff``.
    attn_tol : float, attn_tol > 0, default 0.1
        The relative excess of ``K_eff`` over ``v`` that marks attention favouring the query's topic.
    block_score : array_like, shape (n,), optional
        The curve :func:`block_score` of ``W^V`` (needs ``K_eff``). The **structural rule**, which
        does not rely on norms (Adam moves every coordinate at a rate ~ ``lr`` from the first step,
        and with cross-entropy ``||W^V||`` never plateaus): ``stage1_end_structure`` is the first
        logged step at which the block score reaches ``frac`` of its maximum before
        ``stage2_attention`` (W^V has its topic pattern); stage 2 is ``stage2_attention`` (attention
        favours the query's topic); ``block_score_at_stage2`` is the block score there. Two stages
        in this sense: :attr:`StageBoundaries.structural_two_stage`.

    Returns
    -------
    StageBoundaries
        The boundaries (steps, ``None`` when not detected), the plateau, the initial score norm and the
        rule; the attention and structural fields only with ``K_eff`` (and ``block_score``).

    Raises
    ------
    ValueError
        Curves not 1-d of one non-zero length, ``frac`` outside ``(0, 1]``, ``kq_factor <= 1``,
        ``attn_tol <= 0``, ``block_score`` without ``K_eff``, or ``K_eff`` without ``v``.

    See Also
    --------
    StageBoundaries : The result.
    theorycheck.analysis.dynamics.stage2_onset : Stage 2 from the topic contrast of the scores.
    theorycheck.analysis.topic_structure.effective_K : The ``K_eff`` curve's values.
    theorycheck.analysis.topic_structure.block_score : The ``block_score`` curve's values.

    References
    ----------
    SPEC §4.5, §5.2 (the two stages); Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*,
    ICML 2023, arXiv:2303.04245, Section 5.

    Examples
    --------
    ``||W^V||`` reaches 90% of its plateau at step 20; ``||W^K^T W^Q||`` passes 10 x its initial 0.1 at
    step 70, when ``K_eff`` also passes ``1.1 v``; the block score reached 90% at step 30:

    >>> from theorycheck.analysis.stats import detect_stages
    >>> steps = np.arange(0, 100, 10)
    >>> nV = [0.01, 0.5, 0.9, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    >>> nKQ = [0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.5, 2.0, 3.0, 4.0]
    >>> K_eff = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.1, 2.5, 3.0, 4.0]
    >>> bs = [0.0, 0.3, 0.8, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    >>> sb = detect_stages(steps, nV, nKQ, K_eff=K_eff, v=2, block_score=bs)
    >>> sb.stage1_end, sb.stage2_start, sb.stage2_attention, sb.stage1_end_structure
    (20, 70, 70, 30)
    >>> sb.V_growth_before_attention, sb.structural_two_stage
    (100.0, True)
    """
    steps = np.asarray(steps)
    nV = np.asarray(norm_V, dtype=float)
    nKQ = np.asarray(norm_KQ, dtype=float)
    if steps.ndim != 1 or nV.shape != steps.shape or nKQ.shape != steps.shape or steps.size == 0:
        raise ValueError(
            f"steps, norm_V and norm_KQ must be 1-d of one non-zero length, got {steps.shape}, {nV.shape}, {nKQ.shape}"
        )
    frac = check_real("frac", frac, low=0.0, high=1.0, low_open=True)
    kq_factor = check_real("kq_factor", kq_factor, low=1.0, low_open=True)
    k0 = float(nKQ[0])
    above = np.flatnonzero(nKQ > kq_factor * k0) if k0 > 0 else np.flatnonzero(nKQ > 0)
    s2 = int(steps[above[0]]) if above.size else None
    upto = above[0] + 1 if above.size else steps.size
    plateau = float(nV[:upto].max())
    reach = np.flatnonzero(nV[:upto] >= frac * plateau)
    s1 = int(steps[reach[0]]) if reach.size and plateau > 0 else None
    attention = {}
    if block_score is not None and K_eff is None:
        raise ValueError("block_score needs K_eff (the structural rule's stage 2 is the attention boundary)")
    if K_eff is not None:
        attention = _attention_stages(steps, nV, K_eff, v, attn_tol, block_score, frac)
    rule = (
        f"stage-1 end: first step with ||W_V|| >= {frac:g} x its maximum before stage 2; "
        f"stage-2 start: first step with ||W_K^T W_Q|| > {kq_factor:g} x its initial value"
    )
    return StageBoundaries(
        stage1_end=s1,
        stage2_start=s2,
        plateau_V=plateau,
        initial_KQ=k0,
        rule=rule,
        **attention,
    )


def _first_reach(steps, curve, frac: float):
    """First step at which ``curve`` reaches ``frac`` of its maximum (``None`` if the maximum is <= 0)."""
    top = float(curve.max())
    hit = np.flatnonzero(curve >= frac * top)
    return (int(steps[hit[0]]) if hit.size and top > 0 else None), top


def _attention_stages(steps, nV, K_eff, v, attn_tol, block_score, frac) -> dict:
    """The attention-based and structural boundaries of :func:`detect_stages` (its docstring)."""
    if v is None:
        raise ValueError("v is required with K_eff (words per topic)")
    Ke = np.asarray(K_eff, dtype=float)
    if Ke.shape != steps.shape:
        raise ValueError(f"K_eff must have the shape of steps {steps.shape}, got {Ke.shape}")
    attn_tol = check_real("attn_tol", attn_tol, low=0.0, low_open=True)
    hit = np.flatnonzero(Ke >= (1.0 + attn_tol) * check_int("v", v, low=1))
    upto = hit[0] + 1 if hit.size else steps.size
    out = {
        "stage2_attention": int(steps[hit[0]]) if hit.size else None,
        "stage1_end_attention": _first_reach(steps[:upto], nV[:upto], frac)[0],
        "V_growth_before_attention": float(nV[upto - 1] / nV[0]) if (nV[0] > 0 and hit.size) else None,
        "stage1_end_structure": None,
        "block_score_at_stage2": None,
    }
    if block_score is not None:
        bs = np.asarray(block_score, dtype=float)
        if bs.shape != steps.shape:
            raise ValueError(f"block_score must have the shape of steps {steps.shape}, got {bs.shape}")
        best = np.nanmax(bs[:upto]) if np.isfinite(bs[:upto]).any() else np.nan
        if np.isfinite(best) and best > 0:
            out["stage1_end_structure"] = int(steps[np.flatnonzero(bs[:upto] >= frac * best)[0]])
        if hit.size and np.isfinite(bs[hit[0]]):
            out["block_score_at_stage2"] = float(bs[hit[0]])
    return out
