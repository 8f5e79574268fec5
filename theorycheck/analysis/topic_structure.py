"""Topic structure of a matrix over tokens and of attention scores, for ANY topic-word matrix (SPEC §11.6).

Words carry a topic label ``z_w`` (by default each word's dominant topic,
:meth:`~theorycheck.models.GeneralTopicModel.dominant_topic`). For a ``(V1, V1)`` matrix ``M``
over tokens (a value matrix ``W^V`` or an embedding Gram; only its word block ``M[1:, 1:]`` is used)
the statistics are, over the word pairs ``P`` (off-diagonal pairs ``w != w'`` by default, every pair
with ``include_diagonal=True``):

- ``gap = mean_{P, z_w = z_w'} M - mean_{P, z_w != z_w'} M`` (same-topic minus different-topic);
- ``correlation``: the Pearson correlation over ``P`` between ``M_{ww'}`` and the same-topic
  indicator, ``gap * sqrt(f (1 - f)) / sd(M)`` with ``f`` the same-topic fraction of ``P``
  (in [-1, 1]; 0 when ``M`` is constant on ``P``);
- ``energy``: the fraction of the centred energy ``sum_P (M - mean_P M)^2`` explained by the best
  constant-per-(topic, topic)-block approximation (the correlation ratio eta^2, in [0, 1]; 0 when
  ``M`` is constant on ``P``).

Attention (:func:`attention_preference`): for scores ``S`` and a document law ``theta`` the weight
of a key position showing token ``y`` for a query showing word ``x`` is, as ``N -> inf``,
``kappa(x, y) / N`` with ``kappa(x, y) = e^{S[x, y]} / sum_z m_theta(z) e^{S[x, z]}`` (``kappa = 1``
for uniform attention). The preference is the mean over (``theta``, word query ``x ~ omega_theta``)
of the context-weighted mean ``kappa`` over same-topic key words minus that over different-topic key
words (SPEC §11.6).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .._memory import check_alloc
from .._validate import check_array, check_int
from ..models import Masking, is_general

__all__ = [
    "TopicStructure",
    "word_topics",
    "topic_gap",
    "matrix_topic_stats",
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


class TopicStructure(NamedTuple):
    """Statistics of a matrix's word block over word pairs (module docstring, SPEC §11.6)."""

    gap: float
    correlation: float
    energy: float
    same_mean: float
    diff_mean: float
    include_diagonal: bool


def _check_model(g):
    if not is_general(g):
        raise TypeError(f"g must be a GeneralTopicModel, got {type(g).__name__}")


def word_topics(g, topics=None) -> np.ndarray:
    """The word labels ``z`` (shape ``(n_words,)``): ``topics`` validated, or ``g.dominant_topic()``."""
    _check_model(g)
    if topics is None:
        return np.asarray(g.dominant_topic(), dtype=np.int64)
    z = np.asarray(topics)
    if z.shape != (g.n_words,):
        raise ValueError(f"topics must have shape (n_words,) = ({g.n_words},), got {z.shape}")
    if not np.issubdtype(z.dtype, np.integer):
        if z.dtype == bool or not np.all(np.isfinite(z)) or np.any(z != np.round(z)):
            raise ValueError("topics must be integer topic labels")
        z = z.astype(np.int64)
    if z.min() < 0:
        raise ValueError(f"topics must be non-negative integer labels, got min {int(z.min())}")
    return z.astype(np.int64)


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


def matrix_topic_stats(M, g, *, topics=None, include_diagonal: bool = False) -> TopicStructure:
    """Same-topic vs different-topic structure of ``M``'s word block (SPEC §11.6).

    ``M``: ``(V1, V1)`` (its [MASK] row and column are dropped), ``(n_words, n_words)``, or a
    :class:`~theorycheck.solvers.LowRankMatrix`. Raises ValueError when ``P`` has no same-topic or
    no different-topic pair (a single label, or singleton topics without the diagonal).
    """
    z = word_topics(g, topics)
    B = _word_block(M, g)
    sums, counts, dsums, sizes = _block_sums(B, z)
    if not include_diagonal:
        sums = sums - np.diag(dsums)
        counts = counts - np.diag(sizes)
    n_same, n_all = float(np.trace(counts)), float(counts.sum())
    if n_same == 0 or n_same == n_all:
        raise ValueError(
            f"topics: the word pairs need both same-topic and different-topic pairs (labels {np.unique(z).tolist()}, "
            f"include_diagonal={include_diagonal}); pass topics= with >= 2 labels and a label on >= 2 words"
        )
    s_same = float(np.trace(sums))
    same_mean, diff_mean = s_same / n_same, (float(sums.sum()) - s_same) / (n_all - n_same)
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


def topic_gap(M, g, *, topics=None, include_diagonal: bool = False) -> float:
    """``mean_{same topic} M - mean_{different topics} M`` over word pairs (:func:`matrix_topic_stats`)."""
    return matrix_topic_stats(M, g, topics=topics, include_diagonal=include_diagonal).gap


# ----------------------------------------------------------------------------- attention
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
    """
    _check_model(g)
    if not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")
    if mk.p_c + mk.p_r <= 0:
        raise ValueError("mk: the attention preference needs word queries, p_c + p_r > 0")
    S = check_array("S", np.asarray(S, dtype=np.float64), shape=(g.V1, g.V1))
    z = word_topics(g, topics)
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


def attention_preference(S, g, mk: Masking, *, topics=None, include_self=True, mask_keys=False,
                         n_theta=None, seed=0) -> float:  # fmt: skip
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
    """
    W, D = attention_preference_terms(S, g, mk, topics=topics, include_self=include_self, mask_keys=mask_keys,
                                      n_theta=n_theta, seed=seed)  # fmt: skip
    tot = float(W.sum())
    if tot <= 0:
        raise ValueError("topics: no word query has both same-topic and different-topic context words")
    return float(np.sum(W * np.nan_to_num(D))) / tot
