"""Topic structure of a matrix over tokens and of attention scores, for ANY topic labelling (SPEC §4.2, §4.3, §11.6).

The one home of the topic statistics used by the probes, the analysis, the claims and the real-data
pipeline. Words carry a topic label: the paper's topics (``(w - 1) // v``), or a general model's
dominant topics (:meth:`~theorycheck.models.GeneralTopicModel.token_topics`, SPEC §11.1), or any
labels the caller passes. Every statistic reads only the word block ``M[1:, 1:]`` of a ``(V1, V1)``
token matrix (a value matrix ``W^V``, an embedding Gram ``W_E^T W_E``, a score matrix ``S``).

Matrices (over the word pairs ``P``: off-diagonal pairs ``w != w'`` by default, every pair with
``include_diagonal=True``):

- ``gap = mean_{P, z_w = z_w'} M - mean_{P, z_w != z_w'} M`` (same-topic minus different-topic,
  :func:`topic_gap`; :func:`block_contrast` is the gap over every pair, diagonal included);
- ``correlation``: the Pearson correlation over ``P`` between ``M_{ww'}`` and the same-topic
  indicator, ``gap * sqrt(f (1 - f)) / sd(M)`` with ``f`` the same-topic fraction of ``P``
  (in [-1, 1]; 0 when ``M`` is constant on ``P``);
- ``energy``: the fraction of the centred energy ``sum_P (M - mean_P M)^2`` explained by the best
  constant-per-(topic, topic)-block approximation (the correlation ratio eta^2, in [0, 1]; 0 when
  ``M`` is constant on ``P``);
- :func:`block_score`: the ``R^2`` of the two-valued (same topic / different topic) pattern over
  every pair.

Attention scores: :func:`effective_K` (the paper's ``K = e^alpha + (v - 1) e^beta`` read off any
score matrix, SPEC §4.3) and its per-topic-size normalisation :func:`topic_attention_ratio`; and,
for a document law, :func:`attention_preference`: the weight of a key position showing token ``y``
for a query showing word ``x`` is, as ``N -> inf``, ``kappa(x, y) / N`` with
``kappa(x, y) = e^{S[x, y]} / sum_z m_theta(z) e^{S[x, z]}`` (``kappa = 1`` for uniform attention).
The preference is the mean over (``theta``, word query ``x ~ omega_theta``) of the context-weighted
mean ``kappa`` over same-topic key words minus that over different-topic key words (SPEC §11.6).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from .._memory import check_alloc
from .._validate import check_array, check_int
from ..models import GeneralTopicModel, Masking, check_models
from ._topic_labels import _token_word_block, _word_topics, token_labels, word_topics  # the labels (re-exported)

__all__ = [
    "SupportsToArray",
    "TopicStructure",
    "word_topics",
    "token_labels",
    "topic_gap",
    "matrix_topic_stats",
    "block_contrast",
    "block_score",
    "effective_K",
    "topic_attention_ratio",
    "attention_preference",
    "attention_preference_terms",
    "DEFAULT_N_THETA",
]

#: Sampled topic mixtures for the Dirichlet law in :func:`attention_preference`.
DEFAULT_N_THETA = 2048
#: ``M`` counts as constant on the pairs (no structure: correlation = energy = 0) when
#: ``sd(M) <= FLAT_RTOL * max|M|`` (round-off of a structureless matrix is ~1e-16 relative).
FLAT_RTOL = 1e-10
#: Largest number of enumerated topic sets (uniform-tau law).
MAX_SETS = 20_000


class SupportsToArray(Protocol):  # a Protocol has no constructor to document: numpydoc ignore=PR01
    """A structured token matrix that densifies: any object with a ``toarray()`` method.

    The matrices :func:`matrix_topic_stats` and :func:`topic_gap` accept besides arrays: the solvers'
    :class:`~theorycheck.solvers.LowRankMatrix`, :class:`~theorycheck.solvers.BlockGram` and
    :class:`~theorycheck.solvers.BlockValueMatrix`, or a ``scipy.sparse`` matrix. A structural type
    (:class:`typing.Protocol`): nothing to subclass.

    See Also
    --------
    matrix_topic_stats : Accepts it.
    topic_gap : Accepts it.

    References
    ----------
    SPEC §11.6 (the topic-structure statistics).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis import topic_gap
    >>> from theorycheck.solvers import closed_form_gram
    >>> tm = TopicModel(T=3, v=2, tau=2)
    >>> G = closed_form_gram(tm, Masking())  # a BlockGram: O(1) storage, densified by toarray()
    >>> G.toarray().shape, round(topic_gap(G, tm), 12) == round(topic_gap(G.toarray(), tm), 12)
    ((7, 7), True)
    """

    def toarray(self) -> np.ndarray: ...


class TopicStructure(NamedTuple):
    """Statistics of a matrix's word block over word pairs (module docstring, SPEC §11.6).

    Returned by :func:`matrix_topic_stats`.

    Parameters
    ----------
    gap : float
        ``same_mean - diff_mean``.
    correlation : float
        Pearson correlation over the pairs of ``M_{ww'}`` with the same-topic indicator, in ``[-1, 1]``
        (0 when ``M`` is constant on the pairs).
    energy : float
        Fraction of the centred energy explained by the best constant-per-(topic, topic)-block
        approximation (eta^2), in ``[0, 1]`` (0 when ``M`` is constant on the pairs).
    same_mean : float
        Mean of ``M`` over the same-topic pairs.
    diff_mean : float
        Mean of ``M`` over the different-topic pairs.
    include_diagonal : bool
        Whether the pairs include ``w = w'``.

    See Also
    --------
    matrix_topic_stats : Computes it.
    topic_gap : The ``gap`` alone.

    References
    ----------
    SPEC §11.6 (matrix statistics).

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis import TopicStructure, matrix_topic_stats
    >>> st = matrix_topic_stats(np.eye(13), TopicModel(T=3, v=4, tau=2), include_diagonal=True)
    >>> isinstance(st, TopicStructure), st.gap, st.same_mean, st.diff_mean  # the diagonal is same-topic
    (True, 0.25, 0.25, 0.0)
    """

    gap: float
    correlation: float
    energy: float
    same_mean: float
    diff_mean: float
    include_diagonal: bool


# ----------------------------------------------------------------------------- matrices
def _word_block(M, g) -> np.ndarray:
    if hasattr(M, "toarray") and not isinstance(M, np.ndarray):
        M = M.toarray()
    arr = np.asarray(M)
    if arr.shape == (g.V1, g.V1):
        arr = arr[1:, 1:]
    elif arr.shape != (g.n_words, g.n_words):
        raise ValueError(f"M must have shape (V1, V1) = ({g.V1}, {g.V1}) or (n_words, n_words), got {arr.shape}")
    return check_array("M", arr, shape=(g.n_words, g.n_words))


def _block_sums(B, z):
    """Per-(label, label) sums of ``B``, pair counts, and the diagonal's per-label sums and counts."""
    labels, zi = np.unique(z, return_inverse=True)
    Z = np.zeros((z.size, labels.size))
    Z[np.arange(z.size), zi] = 1.0
    sizes = Z.sum(axis=0)
    return Z.T @ B @ Z, np.outer(sizes, sizes), Z.T @ np.diag(B), sizes


def _class_sums(B, z, include_diagonal: bool):
    """The one computation of the same-minus-different gap: per-(label, label) sums and counts over
    the pairs ``P`` and ``(n_same, n_all, same_mean, diff_mean)``; ``n_same`` is 0 or ``n_all`` when a
    class is empty (the means are then not computed: ``nan``)."""
    sums, counts, dsums, sizes = _block_sums(B, z)
    if not include_diagonal:
        sums = sums - np.diag(dsums)
        counts = counts - np.diag(sizes)
    n_same, n_all = float(np.trace(counts)), float(counts.sum())
    if n_same == 0 or n_same == n_all:
        return sums, counts, n_same, n_all, math.nan, math.nan
    s_same = float(np.trace(sums))
    same_mean, diff_mean = s_same / n_same, (float(sums.sum()) - s_same) / (n_all - n_same)
    return sums, counts, n_same, n_all, same_mean, diff_mean


def matrix_topic_stats(
    M: ArrayLike | SupportsToArray,
    g: GeneralTopicModel,
    *,
    topics: ArrayLike | None = None,
    include_diagonal: bool = False,
) -> TopicStructure:
    """Same-topic vs different-topic structure of ``M``'s word block (module docstring, SPEC §11.6).

    ``g``: any topic model (labels: ``topics``, default its dominant topics, :func:`word_topics`).
    ``M``: ``(V1, V1)`` (its [MASK] row and column are dropped), ``(n_words, n_words)``, or a
    :class:`~theorycheck.solvers.LowRankMatrix`. Raises ValueError when ``P`` has no same-topic or
    no different-topic pair (a single label, or singleton topics without the diagonal).

    Parameters
    ----------
    M : array_like or structured matrix
        ``(V1, V1)`` or ``(n_words, n_words)``, finite; or any object with ``toarray()``
        (:class:`~theorycheck.solvers.LowRankMatrix`, :class:`~theorycheck.solvers.BlockGram`,
        :class:`~theorycheck.solvers.BlockValueMatrix`).
    g : TopicModel or GeneralTopicModel
        The topic model (its vocabulary and default labels).
    topics : array_like of int, shape (n_words,), optional
        Non-negative integer word labels; default ``g``'s dominant topics (the paper's topics
        ``(w - 1) // v``).
    include_diagonal : bool, default False
        Count the pairs ``w = w'`` (as same-topic pairs).

    Returns
    -------
    TopicStructure
        ``gap = mean_{P, same} M - mean_{P, diff} M``, ``correlation = gap sqrt(f (1 - f)) / sd_P(M)``,
        ``energy`` (eta^2), the two class means and ``include_diagonal``.

    Raises
    ------
    ValueError
        ``M`` of the wrong shape or not finite, labels of the wrong shape or not non-negative integers,
        or pairs without both classes.

    See Also
    --------
    topic_gap : The ``gap`` alone.
    attention_preference : The corresponding statistic of attention scores.
    phase_diagram : These statistics of the exact optima over a sweep of models.
    theorycheck.solvers.optimal_value_matrix : The stage-1 optimum these statistics describe.

    References
    ----------
    SPEC §11.6 (matrix statistics); SPEC §4.2 (paper's model: ``gap = A - B0 = 1/(a v)``,
    correlation = energy = 1).

    Examples
    --------
    The paper's stage-1 optimum: ``gap = 1/(a v)``, correlation = energy = 1:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.analysis import matrix_topic_stats
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> tm, mk = TopicModel(T=3, v=4, tau=2), Masking()
    >>> st = matrix_topic_stats(optimal_value_matrix(tm, mk).x, tm)
    >>> round(st.gap, 12) == round(1 / (mk.a * tm.v), 12), st.correlation, st.energy
    (True, 1.0, 1.0)

    A matrix without topic structure on the off-diagonal pairs scores 0:

    >>> matrix_topic_stats(np.eye(tm.V1), tm)
    TopicStructure(gap=0.0, correlation=0.0, energy=0.0, same_mean=0.0, diff_mean=0.0, include_diagonal=False)
    """
    z = word_topics(g, topics)  # validates g
    B = _word_block(M, g)
    sums, counts, n_same, n_all, same_mean, diff_mean = _class_sums(B, z, include_diagonal)
    if n_same == 0 or n_same == n_all:
        raise ValueError(
            f"topics: the word pairs need both same-topic and different-topic pairs (labels {np.unique(z).tolist()}, "
            f"include_diagonal={include_diagonal}); pass topics= with >= 2 labels and a label on >= 2 words"
        )
    mean = float(sums.sum()) / n_all
    dev = B - mean  # direct centred sum of squares (no cancellation)
    sq = float(np.sum(dev * dev)) - (0.0 if include_diagonal else float(np.sum(np.diag(dev) ** 2)))
    var_tot = max(sq / n_all, 0.0)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    var_between = float(np.sum(counts * (means - mean) ** 2)) / n_all
    scale = max(float(np.max(np.abs(B))), 1e-300)
    flat = var_tot <= (FLAT_RTOL * scale) ** 2
    gap = same_mean - diff_mean
    frac = n_same / n_all
    corr = 0.0 if flat else float(np.clip(gap * math.sqrt(frac * (1 - frac)) / math.sqrt(var_tot), -1.0, 1.0))
    energy = 0.0 if flat else float(np.clip(var_between / var_tot, 0.0, 1.0))
    return TopicStructure(gap, corr, energy, same_mean, diff_mean, bool(include_diagonal))


def topic_gap(
    M: ArrayLike | SupportsToArray,
    g: GeneralTopicModel,
    *,
    topics: ArrayLike | None = None,
    include_diagonal: bool = False,
) -> float:
    """``mean_{same topic} M - mean_{different topics} M`` over word pairs (:func:`matrix_topic_stats`).

    Parameters
    ----------
    M : array_like or structured matrix
        ``(V1, V1)`` or ``(n_words, n_words)``, finite; or any object with ``toarray()``.
    g : TopicModel or GeneralTopicModel
        The topic model (its vocabulary and default labels).
    topics : array_like of int, shape (n_words,), optional
        Non-negative integer word labels; default ``g``'s dominant topics.
    include_diagonal : bool, default False
        Count the pairs ``w = w'`` (as same-topic pairs).

    Returns
    -------
    float
        The gap ``matrix_topic_stats(...).gap``.

    Raises
    ------
    ValueError
        As :func:`matrix_topic_stats`.

    See Also
    --------
    matrix_topic_stats : The gap with the correlation and energy scores.
    attention_preference : The attention analogue.

    References
    ----------
    SPEC §11.6 (the gap); SPEC §4.1 D3, §4.2 (its value at the paper's optima).

    Examples
    --------
    The minimum-norm tied Gram's gap is ``x - y = 1/(a v)`` (SPEC §4.1 D3):

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.analysis import topic_gap
    >>> from theorycheck.solvers import closed_form_gram
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> G = closed_form_gram(tm, mk)
    >>> round(topic_gap(G, tm), 12), round(G.x - G.y, 12), round(1 / (mk.a * tm.v), 12)
    (0.578034682081, 0.578034682081, 0.578034682081)
    >>> topic_gap(np.ones((tm.V1, tm.V1)), tm)
    0.0
    """
    return matrix_topic_stats(M, g, topics=topics, include_diagonal=include_diagonal).gap


def block_contrast(M, topics) -> float:
    """Mean same-topic minus mean different-topic entry of the word-word block of ``M``, every pair.

    The gap of :func:`topic_gap` with ``include_diagonal=True`` (the same computation), without
    validation of the entries (a diverged training run gives ``NaN``). ``M``: a token-indexed
    ``(V1, V1)`` matrix (``W^V``, an embedding Gram ``W_E^T W_E``, a score matrix); row/column 0
    ([MASK]) are ignored. ``topics``: ``v`` or token labels (:func:`token_labels`). The stage-1
    optimum has contrast ``A - B0 = 1/(a v)`` (SPEC §4.2). ``NaN`` if there is a single topic.

    Parameters
    ----------
    M : array_like, shape (V1, V1)
        A square token matrix, ``V1 >= 2``; its entries are not validated.
    topics : int or array_like, shape (V1,)
        ``v`` (words per topic) or the token labels (:func:`token_labels`).

    Returns
    -------
    float
        ``mean_{z_w = z_w'} M[w, w'] - mean_{z_w != z_w'} M[w, w']`` over every word pair ``(w, w')``,
        ``w = w'`` included; ``NaN`` with a single topic.

    Raises
    ------
    ValueError
        ``M`` not square with ``V1 >= 2``, or bad ``topics`` (:func:`token_labels`).

    See Also
    --------
    topic_gap : The same gap, validated, off-diagonal pairs by default.
    block_score : How much of the variance the two-valued pattern explains.
    theorycheck.solvers.optimal_value_matrix : The stage-1 optimum with contrast ``1/(a v)``.

    References
    ----------
    SPEC §4.2 (the stage-1 optimum's ``A - B0 = 1/(a v)``), §11.6 (the gap).

    Examples
    --------
    The stage-1 optimum's contrast is ``A - B0 = 1/(a v)``:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.topic_structure import block_contrast
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> W = optimal_value_matrix(tm, mk).x
    >>> round(block_contrast(W, tm.v), 12), round(1 / (mk.a * tm.v), 12)
    (0.578034682081, 0.578034682081)
    >>> block_contrast(np.eye(tm.V1), tm.v)  # the diagonal counts as same-topic: 1/v - 0
    0.5
    """
    Wd, _, lab = _token_word_block(M, topics)
    *_, same_mean, diff_mean = _class_sums(Wd, lab, True)
    return float(same_mean - diff_mean)


def block_score(M, topics) -> float:
    """Fraction of the variance of the word-word block explained by a two-valued block pattern.

    .. math:: R^2 = 1 - \\frac{\\| M_W - P(M_W) \\|_F^2}{\\| M_W - \\bar m \\|_F^2},

    ``P`` replaces every entry by the mean of its class (same topic / different topic, every pair).
    1 for an exactly block-constant matrix (e.g. the min-norm stage-1 ``W^V``, SPEC §4.2), about 0
    without topic structure. ``topics``: ``v`` or token labels (:func:`token_labels`). ``NaN`` for a
    single topic or a constant block.

    Parameters
    ----------
    M : array_like, shape (V1, V1)
        A square token matrix, ``V1 >= 2``.
    topics : int or array_like, shape (V1,)
        ``v`` (words per topic) or the token labels (:func:`token_labels`).

    Returns
    -------
    float
        ``R^2`` in ``[0, 1]`` over every word pair (diagonal included); ``NaN`` for a single topic or a
        constant word block.

    Raises
    ------
    ValueError
        ``M`` not square with ``V1 >= 2``, or bad ``topics`` (:func:`token_labels`).

    See Also
    --------
    block_contrast : The difference of the two class means.
    matrix_topic_stats : The correlation and per-block energy scores of the same structure.

    References
    ----------
    SPEC §4.2 (the block-constant stage-1 optimum), §11.6 (topic-structure statistics).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis.topic_structure import block_score
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> W = optimal_value_matrix(tm, Masking()).x
    >>> round(block_score(W, tm.v), 12)  # exactly block-constant
    1.0
    >>> noisy = W + 0.1 * np.random.default_rng(0).standard_normal(W.shape)
    >>> 0.5 < block_score(noisy, tm.v) < 1.0
    True
    >>> block_score(np.ones((tm.V1, tm.V1)), tm.v)  # constant: nothing to explain
    nan
    """
    Wd, same, _ = _token_word_block(M, topics)
    if same.all():
        return float("nan")
    P = np.where(same, Wd[same].mean(), Wd[~same].mean())
    tot = float(np.sum((Wd - Wd.mean()) ** 2))
    if tot == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((Wd - P) ** 2)) / tot


# ----------------------------------------------------------------------------- attention scores
def _log_topic_weights(S, topics, where: str):
    """Per word ``a``: ``(log sum_{b in t(a)} e^{S[a,b]}, log |t(a)|, log mean_{b not in t(a), b != 0} e^{S[a,b]})``."""
    Wd, same, _ = _token_word_block(S, topics)
    if same.all():
        raise ValueError(f"{where} needs at least two topics")
    log_in = logsumexp(np.where(same, Wd, -np.inf), axis=1)
    log_out = logsumexp(np.where(~same, Wd, -np.inf), axis=1) - np.log((~same).sum(axis=1))
    return log_in, np.log(same.sum(axis=1)), log_out


def effective_K(S, topics) -> np.ndarray:
    """Per-word aggregate same-topic attention weight of a token score matrix ``S[a, b]``.

    .. math::
        K_{eff}(a) = \\frac{\\sum_{b \\in t(a)} e^{S[a,b]}}{\\mathrm{mean}_{b \\notin t(a), b \\ne 0}\\, e^{S[a,b]}},

    which equals ``K = e^alpha + (v-1) e^beta`` for the (alpha, beta) family of SPEC §4.3 (``v`` for
    uniform scores). ``topics``: ``v`` or token labels (:func:`token_labels`). One value per word
    ``a = 1 .. V1 - 1`` (log-sum-exp, so large scores stay finite; saturates at ``e^700``).

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Attention scores ``S[a, b]`` (query ``a``, key ``b``), ``V1 >= 2``.
    topics : int or array_like, shape (V1,)
        ``v`` (words per topic) or the token labels (:func:`token_labels`); at least two topics.

    Returns
    -------
    ndarray, shape (V1 - 1,)
        ``K_eff(a)`` for the words ``a = 1 .. V1 - 1``, in ``(0, e^700]``.

    Raises
    ------
    ValueError
        ``S`` not square with ``V1 >= 2``, bad ``topics``, or a single topic.

    See Also
    --------
    topic_attention_ratio : ``K_eff`` divided by the topic's size.
    attention_preference : The attention statistic under a document law.
    theorycheck.population.alpha_beta_score_matrix : The ``(alpha, beta)`` scores with ``K_eff = K``.

    References
    ----------
    SPEC §4.3 (``K = e^alpha + (v - 1) e^beta``); Li, Li and Risteski, *How Do Transformers Learn Topic
    Structure?*, ICML 2023, arXiv:2303.04245, Theorem 3.

    Examples
    --------
    The ``(alpha, beta)`` family gives ``K = e^alpha + (v - 1) e^beta``; uniform scores give ``v``:

    >>> import math
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis.topic_structure import effective_K
    >>> from theorycheck.population import alpha_beta_score_matrix
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> S = alpha_beta_score_matrix(1.0, 0.5, tm)
    >>> np.round(effective_K(S, tm.v), 9), round(math.exp(1.0) + (tm.v - 1) * math.exp(0.5), 9)
    (array([4.367003099, 4.367003099, 4.367003099, 4.367003099, 4.367003099, 4.367003099]), 4.367003099)
    >>> effective_K(np.zeros((tm.V1, tm.V1)), tm.v)
    array([2., 2., 2., 2., 2., 2.])
    """
    log_in, _, log_out = _log_topic_weights(S, topics, "effective_K")
    return np.exp(np.minimum(log_in - log_out, 700.0))  # saturate instead of overflowing


def topic_attention_ratio(S, topics) -> np.ndarray:
    """Per word ``a``: ``mean_{b in t(a)} e^{S[a,b]} / mean_{b not in t(a), b != 0} e^{S[a,b]}``.

    :func:`effective_K` divided by the size ``|t(a)|`` of the word's topic (1 for uniform scores;
    ``K / v`` for the paper's (alpha, beta) family, SPEC §4.3), for topics of unequal sizes (a general
    model's dominant topics). ``topics``: ``v`` or token labels (:func:`token_labels`).

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Attention scores ``S[a, b]`` (query ``a``, key ``b``), ``V1 >= 2``.
    topics : int or array_like, shape (V1,)
        ``v`` (words per topic) or the token labels (:func:`token_labels`); at least two topics.

    Returns
    -------
    ndarray, shape (V1 - 1,)
        The ratio for the words ``a = 1 .. V1 - 1``, ``> 0`` (1 when same-topic keys get no extra weight).

    Raises
    ------
    ValueError
        ``S`` not square with ``V1 >= 2``, bad ``topics``, or a single topic.

    See Also
    --------
    effective_K : The unnormalised aggregate weight.
    attention_preference : The attention statistic under a document law.

    References
    ----------
    SPEC §4.3 (``K / v`` for the ``(alpha, beta)`` family), §11.6 (unequal topic sizes).

    Examples
    --------
    >>> import math
    >>> from theorycheck import TopicModel
    >>> from theorycheck.analysis.topic_structure import topic_attention_ratio
    >>> from theorycheck.population import alpha_beta_score_matrix
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> r = topic_attention_ratio(alpha_beta_score_matrix(1.0, 0.5, tm), tm.v)
    >>> round(float(r[0]), 9), round((math.exp(1.0) + math.exp(0.5)) / tm.v, 9)  # K / v
    (2.18350155, 2.18350155)

    Unequal topic sizes (labels 0, 0, 0, 0, 1, 1): uniform scores give 1 for every word:

    >>> topic_attention_ratio(np.zeros((7, 7)), [-1, 0, 0, 0, 0, 1, 1])
    array([1., 1., 1., 1., 1., 1.])
    """
    log_in, log_size, log_out = _log_topic_weights(S, topics, "topic_attention_ratio")
    return np.exp(np.minimum(log_in - log_size - log_out, 700.0))


# ----------------------------------------------------------------------------- attention preference
def _thetas(g, n_theta, seed):
    if g.prior == "uniform-tau":
        if g.n_topic_sets > MAX_SETS:
            raise ValueError(f"C(T={g.T}, tau={g.tau}) = {g.n_topic_sets} topic sets exceeds {MAX_SETS}")
        sets = np.array(list(itertools.combinations(range(g.T), g.tau)), dtype=np.int64)
        theta = np.zeros((len(sets), g.T))
        theta[np.arange(len(sets))[:, None], sets] = 1.0 / g.tau
        return theta
    n_theta = DEFAULT_N_THETA if n_theta is None else check_int("n_theta", n_theta, low=1)
    return np.random.default_rng(check_int("seed", seed, low=0)).dirichlet(g.alpha, size=n_theta)


def attention_preference_terms(S, g, mk: Masking, *, topics=None, include_self=True, mask_keys=False,
                               n_theta=None, seed=0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per (theta, word query x): ``(weights, differences)``, each ``(n_theta_or_sets, n_words)``.

    ``differences[i, x-1] = mean_same kappa - mean_diff kappa`` (context-weighted by ``m_theta``;
    NaN where a class has no context mass) and ``weights[i, x-1] = omega_theta_i(x) / n_laws`` (0
    where the difference is NaN). :func:`attention_preference` is their weighted mean.

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Attention scores ``S[x, y]`` (query ``x``, key ``y``), finite.
    g : TopicModel or GeneralTopicModel
        The topic model (document law and vocabulary).
    mk : Masking
        Masking probabilities, ``p_c + p_r > 0`` (some word queries).
    topics : array_like of int, shape (n_words,), optional
        Non-negative integer word labels; default ``g``'s dominant topics.
    include_self : bool, default True
        Count the query's own word as a same-topic key.
    mask_keys : bool, default False
        Context law ``p_theta`` (the official code's key masking) instead of ``m_theta``.
    n_theta : int, optional
        Dirichlet prior only: the number of sampled mixtures, ``>= 1`` (default 2048).
    seed : int, default 0
        Dirichlet prior only: the seed of that sample, ``>= 0``.

    Returns
    -------
    weights : ndarray, shape (n_laws, n_words)
        ``omega_theta_i(x) / n_laws`` with ``omega_theta(x) = p_c p_theta(x) + p_r / n`` (0 where the
        difference is NaN); ``n_laws`` is ``C(T, tau)`` (uniform-tau) or ``n_theta`` (Dirichlet).
    differences : ndarray, shape (n_laws, n_words)
        ``kappa_same - kappa_diff`` per (mixture, word query), NaN where a class has no context mass.

    Raises
    ------
    ValueError
        ``S`` of the wrong shape or not finite, ``p_c + p_r = 0``, bad labels, or more than 20000 topic
        sets.

    See Also
    --------
    attention_preference : Their weighted mean.
    effective_K : The per-query aggregate same-topic weight of the scores alone.

    References
    ----------
    SPEC §11.6 (attention preference), §4.3 (the ``(alpha, beta)`` family).

    Examples
    --------
    With ``tau = 1`` there are ``C(3, 1) = 3`` laws; the weights sum to ``p_c + p_r`` and their weighted
    mean of the differences is the preference:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.analysis import attention_preference
    >>> from theorycheck.analysis.topic_structure import attention_preference_terms
    >>> from theorycheck.population import alpha_beta_score_matrix
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> S = alpha_beta_score_matrix(1.0, 0.5, tm)
    >>> W, D = attention_preference_terms(S, tm, mk)
    >>> W.shape, round(float(W.sum()), 12), round(mk.p_c + mk.p_r, 12)
    ((3, 6), 0.2, 0.2)
    >>> np.round(D[0], 4)  # law {topic 0}: queries of the present topic, then the absent ones
    array([0.5831, 0.5831, 1.1765, 1.1765, 1.1765, 1.1765])
    >>> round(float((W * D).sum() / W.sum()), 12) == round(attention_preference(S, tm, mk), 12)
    True
    """
    check_models(g, mk, general=True)
    if mk.p_c + mk.p_r <= 0:
        raise ValueError("mk: the attention preference needs word queries, p_c + p_r > 0")
    S = check_array("S", np.asarray(S, dtype=np.float64), shape=(g.V1, g.V1))
    z = _word_topics(g, topics)
    check_alloc("attention_preference", (4, g.n_words, g.V1))
    same = z[:, None] == z[None, :]
    if not include_self:
        np.fill_diagonal(same, False)
    diff = z[:, None] != z[None, :]
    theta = _thetas(g, n_theta, seed)
    p = g.word_density(theta)
    m = p.copy() if mask_keys else mk.a * p + np.concatenate([[mk.q], np.full(g.n_words, mk.r / g.n_words)])
    Sw = S[1:, :]  # word queries
    W, D = np.empty((len(theta), g.n_words)), np.empty((len(theta), g.n_words))
    for i, mi in enumerate(m):
        with np.errstate(divide="ignore"):
            logits = Sw + np.log(mi)[None, :]
        top = logits.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        km = np.exp(logits[:, 1:] - log_z[:, None])  # m(y) kappa(x, y) over word keys
        ms, md = same @ mi[1:], diff @ mi[1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            D[i] = (km * same).sum(axis=1) / ms - (km * diff).sum(axis=1) / md
        D[i][(ms <= 0) | (md <= 0)] = np.nan
        W[i] = (mk.p_c * p[i, 1:] + mk.p_r / g.n_words) / len(theta)
    W[np.isnan(D)] = 0.0
    return W, D


def attention_preference(S: ArrayLike, g: GeneralTopicModel, mk: Masking, *, topics: ArrayLike | None = None,
                         include_self: bool = True, mask_keys: bool = False, n_theta: int | None = None,
                         seed: int = 0) -> float:  # fmt: skip
    """Same-topic attention preference of scores ``S`` (SPEC §11.6).

    .. math:: \\mathrm{pref}(S) = \\frac{\\sum_{\\theta, x} \\omega_\\theta(x)\\,[\\bar\\kappa_{\\rm same}
              - \\bar\\kappa_{\\rm diff}](\\theta, x)}{\\sum_{\\theta, x} \\omega_\\theta(x)},\\qquad
              \\bar\\kappa_{\\rm same}(\\theta, x) = \\frac{\\sum_{y: z_y = z_x} m_\\theta(y)\\kappa(x, y)}
              {\\sum_{y: z_y = z_x} m_\\theta(y)}

    over word queries ``x`` (``omega_theta(x) = p_c p_theta(x) + p_r / n``) and word keys ``y``
    (``include_self``: the query's own word counts as same-topic, as in the paper's ``K/v``), with the
    context law ``m_theta`` (``p_theta`` with ``mask_keys=True``). Uniform-tau: exact over the
    ``C(T, tau)`` sets; Dirichlet: over ``n_theta`` mixtures drawn with ``seed``. ``pref = 0`` for
    uniform attention; for the paper's ``(alpha, beta)`` family it has the sign of ``K/v - 1``.

    Parameters
    ----------
    S : array_like, shape (V1, V1)
        Attention scores ``S[x, y]`` (query ``x``, key ``y``), finite.
    g : TopicModel or GeneralTopicModel
        The topic model (document law and vocabulary).
    mk : Masking
        Masking probabilities, ``p_c + p_r > 0`` (some word queries).
    topics : array_like of int, shape (n_words,), optional
        Non-negative integer word labels; default ``g``'s dominant topics.
    include_self : bool, default True
        Count the query's own word as a same-topic key.
    mask_keys : bool, default False
        Context law ``p_theta`` (the official code's key masking) instead of ``m_theta``.
    n_theta : int, optional
        Dirichlet prior only: the number of sampled mixtures, ``>= 1`` (default 2048).
    seed : int, default 0
        Dirichlet prior only: the seed of that sample, ``>= 0``.

    Returns
    -------
    float
        ``pref(S)``; for the ``(alpha, beta)`` family
        ``(K/v - 1) [(p_c + p_r tau/T)/Z + (p_r (T - tau)/T)/Z'] / (p_c + p_r)`` with
        ``Z = 1 + rho (K - v)``, ``Z' = 1 + eta (K - v)``, ``rho = a/(tau v) + r/(T v)``, ``eta = r/(T v)``.

    Raises
    ------
    ValueError
        ``S`` of the wrong shape or not finite, ``p_c + p_r = 0``, bad labels, more than 20000 topic
        sets, or no word query with both classes in its context.

    See Also
    --------
    matrix_topic_stats : The topic structure of a matrix.
    theorycheck.solvers.optimal_attention : The optimal scores whose preference the paper predicts.
    theorycheck.population.alpha_beta_score_matrix : The paper's ``(alpha, beta)`` scores.

    References
    ----------
    SPEC §11.6 (attention preference), §4.3 (the ``(alpha, beta)`` family, ``Z``, ``Z'``); Li, Li and
    Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 3.

    Examples
    --------
    Uniform attention has no preference; the ``(alpha, beta) = (1, 1)`` scores (``K/v = e``) match
    the closed form above, and their negatives give a negative preference:

    >>> import math
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.analysis import attention_preference
    >>> from theorycheck.population import alpha_beta_score_matrix
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> abs(attention_preference(np.zeros((tm.V1, tm.V1)), tm, mk)) < 1e-15
    True
    >>> S = alpha_beta_score_matrix(1.0, 1.0, tm)
    >>> K, T, v, tau = 2 * math.e, tm.T, tm.v, tm.tau
    >>> Z, Zp = 1 + (mk.a / (tau * v) + mk.r / (T * v)) * (K - v), 1 + mk.r / (T * v) * (K - v)
    >>> pref = (K / v - 1) * ((mk.p_c + mk.p_r * tau / T) / Z + mk.p_r * (T - tau) / T / Zp) / (mk.p_c + mk.p_r)
    >>> round(attention_preference(S, tm, mk), 12), round(pref, 12)
    (1.027025893821, 1.027025893821)
    >>> attention_preference(-S, tm, mk) < 0
    True
    """
    W, D = attention_preference_terms(S, g, mk, topics=topics, include_self=include_self, mask_keys=mask_keys,
                                      n_theta=n_theta, seed=seed)  # fmt: skip
    tot = float(W.sum())
    if tot <= 0:
        raise ValueError("topics: no word query has both same-topic and different-topic context words")
    return float(np.sum(W * np.nan_to_num(D))) / tot
