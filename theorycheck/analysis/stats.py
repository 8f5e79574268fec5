"""Topic statistics of learned objects (embeddings, value matrices, attention).

Two blocks: embedding statistics (SPEC §4.1) and training statistics (attention classes,
two-stage detection; §4.5, §5.1-5.2). Statistics take arrays (and the token layout of a
:class:`~theorycheck.models.TopicModel`) and return small dataclasses or arrays. No optimisation
happens here. The block score / contrast and the effective ``K`` of a token matrix live, for any
topic labelling, in :mod:`theorycheck.analysis.topic_structure` (their one home); this module
lists them under their historical names ``stats.block_score``, ``stats.block_contrast``,
``stats.effective_K``. The embedding block is implemented in the private ``_embedding_stats`` and
re-exported here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from .._validate import check_int, check_real
from ..models import token_topic
from ._embedding_stats import EmbeddingTopicStats, embedding_topic_stats, own_minus_other_block_sums, topic_block_sums
from .topic_structure import block_contrast, block_score, effective_K

__all__: list[str] = []

# ============================================================================= embedding statistics
# (SPEC §4.1, §5.4, §6 items 11-14; issue #3): in the private ``_embedding_stats`` (the module line cap)
__all__ += ["EmbeddingTopicStats", "embedding_topic_stats", "topic_block_sums", "own_minus_other_block_sums"]


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
