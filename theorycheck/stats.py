"""Topic statistics of learned objects (embeddings, value matrices, attention).

Each block of functions below belongs to one object and is self-contained (its own imports and
``__all__ +=`` line), so blocks from different contributors can simply be concatenated.
Statistics take arrays (and the token layout of a :class:`~theorycheck.config.TopicModel`) and
return small dataclasses or arrays. No optimisation happens here.
"""

from __future__ import annotations

__all__: list[str] = []


# ============================================================================ training statistics
# (attention class averages, block scores, two-stage detection; PAPER_SPEC §4.5, §5.1-5.2; issue #5)
from dataclasses import asdict, dataclass  # noqa: E402

import numpy as np  # noqa: E402

from ._validate import check_int, check_real  # noqa: E402

__all__ += [
    "attention_class_averages",
    "block_contrast",
    "block_score",
    "relative_distance",
    "StageBoundaries",
    "detect_stages",
    "effective_K",
]


def attention_class_averages(A, tokens, v: int) -> dict:
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
    v : int
        Words per topic (``topic(w) = (w - 1) // v``).

    Returns
    -------
    dict
        ``same_word``, ``same_topic``, ``diff_topic``, ``no_topic`` (NaN if a class is empty),
        ``same_minus_diff`` = same_topic - diff_topic, and the pair counts ``n_*``.
        With uniform attention over ``N`` keys every class average is ``1/N``.
    """
    A = np.asarray(A, dtype=float)
    tok = np.asarray(tokens)
    v = check_int("v", v, low=1)
    if A.ndim != 3 or A.shape[:2] != tok.shape or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (B, N, N) matching tokens {tok.shape}, got {A.shape}")
    valid = tok >= 0
    word = tok >= 1
    top = np.where(word, (tok - 1) // v, -1)
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


def _word_blocks(M, v: int):
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or (M.shape[0] - 1) % v:
        raise ValueError(f"M must be a (T v + 1, T v + 1) token matrix with v={v}, got shape {M.shape}")
    Wd = M[1:, 1:]
    top = np.arange(Wd.shape[0]) // v
    same = top[:, None] == top[None, :]
    return Wd, same


def block_contrast(M, v: int) -> float:
    """Mean same-topic minus mean different-topic entry of the word-word block of ``M``.

    ``M`` is a token-indexed ``(V1, V1)`` matrix (``W^V``, an embedding Gram ``W_E^T W_E``,
    a score matrix); row/column 0 ([MASK]) are ignored. The stage-1 optimum has contrast
    ``A - B0 = 1/(a v)`` (PAPER_SPEC §4.2). ``NaN`` if there is a single topic.
    """
    Wd, same = _word_blocks(M, v)
    if same.all():
        return float("nan")
    return float(Wd[same].mean() - Wd[~same].mean())


def block_score(M, v: int) -> float:
    """Fraction of the variance of the word-word block explained by a two-valued block pattern.

    .. math:: R^2 = 1 - \\frac{\\| M_W - P(M_W) \\|_F^2}{\\| M_W - \\bar m \\|_F^2},

    ``P`` replaces every entry by the mean of its class (same topic / different topic).
    1 for an exactly block-constant matrix (e.g. the min-norm stage-1 ``W^V``), about 0 without
    topic structure. ``NaN`` for a constant block.
    """
    Wd, same = _word_blocks(M, v)
    if same.all():
        return float("nan")
    P = np.where(same, Wd[same].mean(), Wd[~same].mean())
    tot = float(np.sum((Wd - Wd.mean()) ** 2))
    if tot == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((Wd - P) ** 2)) / tot


def relative_distance(X, ref) -> float:
    """``||X - ref||_F / ||ref||_F`` (``||X||_F`` if ``ref = 0``)."""
    X = np.asarray(X, dtype=float)
    ref = np.asarray(ref, dtype=float)
    if X.shape != ref.shape:
        raise ValueError(f"X and ref must have the same shape, got {X.shape} and {ref.shape}")
    nr = float(np.linalg.norm(ref))
    d = float(np.linalg.norm(X - ref))
    return d / nr if nr > 0 else d


def effective_K(S, v: int) -> np.ndarray:
    """Per-word aggregate same-topic attention weight of a token score matrix ``S[a, b]``.

    .. math:: K_{eff}(a) = \\frac{\\sum_{b \\in t(a)} e^{S[a,b]}}{\\mathrm{mean}_{b \\notin t(a), b \\ne 0}\\, e^{S[a,b]}},

    which equals ``K = e^alpha + (v-1) e^beta`` for the (alpha, beta) family of PAPER_SPEC §4.3.
    Returns one value per word ``a = 1 .. T v`` (log-sum-exp, so large scores stay finite).
    """
    S = np.asarray(S, dtype=float)
    Wd, same = _word_blocks(S, v)
    if same.all():
        raise ValueError("effective_K needs at least two topics")
    from scipy.special import logsumexp

    log_in = logsumexp(np.where(same, Wd, -np.inf), axis=1)
    n_out = (~same).sum(axis=1)
    log_out = logsumexp(np.where(~same, Wd, -np.inf), axis=1) - np.log(n_out)
    return np.exp(np.minimum(log_in - log_out, 700.0))  # saturate instead of overflowing


@dataclass
class StageBoundaries:
    """Result of :func:`detect_stages` (steps, or ``None`` when not detected)."""

    stage1_end: int | None
    stage2_start: int | None
    plateau_V: float
    initial_KQ: float
    rule: str
    stage2_attention: int | None = None
    stage1_end_attention: int | None = None
    V_growth_before_attention: float | None = None

    @property
    def ordered(self) -> bool:
        """Both detected and stage 1 ends no later than stage 2 starts."""
        return self.stage1_end is not None and self.stage2_start is not None and self.stage1_end <= self.stage2_start

    def to_dict(self) -> dict:
        return asdict(self)


def detect_stages(steps, norm_V, norm_KQ, *, frac: float = 0.9, kq_factor: float = 10.0, K_eff=None,
                  v: int | None = None, attn_tol: float = 0.1) -> StageBoundaries:
    """Detect the two stages of joint training from logged norm curves (PAPER_SPEC §4.5, §5.2).

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
    steps, norm_V, norm_KQ : array_like, shape (n,)
        Logged steps (increasing) and the two norm curves.
    frac : float in (0, 1]
    kq_factor : float > 1
    K_eff, v, attn_tol : optional
        A curve of the median effective same-topic weight :func:`effective_K` and the words per
        topic ``v``: ``stage2_attention`` is then the first step with ``K_eff >= (1 + attn_tol) v``,
        i.e. when attention starts to favour the query's topic (a functional, init-scale-free
        definition of stage 2, reported next to the norm rule); ``stage1_end_attention`` applies
        the stage-1 rule with that boundary and ``V_growth_before_attention`` is
        ``||W^V||`` at ``stage2_attention`` over its initial value.
    """
    steps = np.asarray(steps)
    nV = np.asarray(norm_V, dtype=float)
    nKQ = np.asarray(norm_KQ, dtype=float)
    if steps.ndim != 1 or nV.shape != steps.shape or nKQ.shape != steps.shape or steps.size == 0:
        raise ValueError(f"steps, norm_V and norm_KQ must be 1-d of one non-zero length, got {steps.shape}, {nV.shape}, {nKQ.shape}")
    frac = check_real("frac", frac, low=0.0, high=1.0, low_open=True)
    kq_factor = check_real("kq_factor", kq_factor, low=1.0, low_open=True)
    k0 = float(nKQ[0])
    above = np.flatnonzero(nKQ > kq_factor * k0) if k0 > 0 else np.flatnonzero(nKQ > 0)
    s2 = int(steps[above[0]]) if above.size else None
    upto = above[0] + 1 if above.size else steps.size
    plateau = float(nV[:upto].max())
    reach = np.flatnonzero(nV[:upto] >= frac * plateau)
    s1 = int(steps[reach[0]]) if reach.size and plateau > 0 else None
    s2a = s1a = growth = None
    if K_eff is not None:
        if v is None:
            raise ValueError("v is required with K_eff (words per topic)")
        Ke = np.asarray(K_eff, dtype=float)
        if Ke.shape != steps.shape:
            raise ValueError(f"K_eff must have the shape of steps {steps.shape}, got {Ke.shape}")
        attn_tol = check_real("attn_tol", attn_tol, low=0.0, low_open=True)
        hit = np.flatnonzero(Ke >= (1.0 + attn_tol) * check_int("v", v, low=1))
        s2a = int(steps[hit[0]]) if hit.size else None
        upto_a = hit[0] + 1 if hit.size else steps.size
        plat_a = float(nV[:upto_a].max())
        reach_a = np.flatnonzero(nV[:upto_a] >= frac * plat_a)
        s1a = int(steps[reach_a[0]]) if reach_a.size and plat_a > 0 else None
        growth = float(nV[upto_a - 1] / nV[0]) if (nV[0] > 0 and hit.size) else None
    rule = (f"stage-1 end: first step with ||W_V|| >= {frac:g} x its maximum before stage 2; "
            f"stage-2 start: first step with ||W_K^T W_Q|| > {kq_factor:g} x its initial value")
    return StageBoundaries(stage1_end=s1, stage2_start=s2, plateau_V=plateau, initial_KQ=k0, rule=rule,
                           stage2_attention=s2a, stage1_end_attention=s1a, V_growth_before_attention=growth)


# ============================================================================ end training statistics
