"""The theory's optimal attention at the fitted Wikipedia topics, beside MiniLM's heads (SPEC §11.8, §11.9).

Route: the real-data LDA -> :func:`theorycheck.realdata.theory.theory_model` (the fit's Dirichlet law) -> the
optimal label-family scores ``S = alpha I_w + beta Z`` (``Z`` the same-dominant-topic indicator, SPEC §11.6)
for the minimum-norm stage-1 ``W^V`` on the exact population loss, evaluated by the structured route of SPEC
§11.8 (:func:`theorycheck.solvers.optimal_attention`, ``options.family="label"``, no ``V1 x V1`` array) ->
the attention lifts those scores give on unmasked text, in the classes of the MiniLM measurement (SPEC §11.9):

.. math::
    \\mathrm{lift}_c = \\frac{E_\\theta \\sum_{(x,y)\\in P_c} p_\\theta(x) p_\\theta(y) \\kappa_\\theta(x,y)}
                            {E_\\theta \\sum_{(x,y)\\in P_c} p_\\theta(x) p_\\theta(y)},\\qquad
    \\kappa_\\theta(x, y) = \\frac{e^{S[x,y]}}{\\sum_z p_\\theta(z) e^{S[x,z]}},

the limit of MiniLM's ``mean_lift`` (mean of ``n A[i, j]`` over the class's position pairs) for positions
drawn i.i.d. from ``p_theta``. Compared quantities: ``gap = lift_same - lift_diff`` and the scale-free
``ratio = lift_same / lift_diff``, per MiniLM layer and head with the window bootstrap of
:class:`theorycheck.realdata.stats.AttentionAccumulator`.

That ``all_keys`` lift keeps the other copies of the query's word in the normaliser, where the one-layer
optimum (no residual path, ``e^alpha*`` in the thousands at Wikipedia's topics) puts most of a query's
attention and a pretrained model very little, so it does not compare like with like (issue #36). With MiniLM's
lifts under the comparison's definitions (:mod:`theorycheck.realdata.lifts`) the summary compares the same
statistic on both sides (:func:`lift_comparison`, theory side :mod:`theorycheck.realdata.theory_lifts`):
``all_keys``, ``excl_own`` (own position and own word excluded, the per-head rows) and ``masked`` (the query
shown as [MASK]), each with both sides' own-word attention share, in the measurement's topic sets and in the
scores' own labels, and the sensitivity of the theory's lift to the frozen ``W^V`` and the score family
(:func:`sensitivity`). all-MiniLM-L6-v2 is a contrastively fine-tuned sentence encoder, not an MLM model
(:data:`MODEL_NOTE`).

Cost (the law is Dirichlet, so its expectation is a sample): a pilot on :data:`N_PILOT` laws with a
:data:`PILOT_GRID` x :data:`PILOT_GRID` grid finds the basin, the optimum on :data:`N_LAWS` laws starts from
the pilot's optimum (no grid), and its sampling covariance is the sandwich of
``theorycheck.solvers.attention._structured.optimum_covariance`` (reported as the standard errors of
``alpha*``, ``beta*``, and propagated into the lifts' intervals by the delta method). The lifts use
:data:`N_LIFT` further laws (own stream ``[seed, SEED_STREAM, 1]``), bootstrapped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .._validate import check_int
from ..models import GeneralTopicModel, Masking
from ..solvers import cotopic_matrix, optimal_attention
from . import stats as S
from .config import N_LAWS
from .lifts import LiftStats
from .theory_lifts import DEFINITIONS, dense_predicted_lifts, lift_terms, predicted_lifts, sub_model

__all__ = [
    "SEED_STREAM",
    "N_PILOT",
    "N_LAWS",
    "N_LIFT",
    "PILOT_GRID",
    "AttentionTheory",
    "label_optimum",
    "lift_terms",
    "predicted_lifts",
    "minilm_heads",
    "lift_heads",
    "lift_comparison",
    "sensitivity",
    "attention_theory",
    "format_comparison_table",
    "format_attention_table",
    "MODEL_NOTE",
]

#: Offset of this comparison's random streams: laws ``[seed, SEED_STREAM, k]`` (issue #24).
SEED_STREAM = 24
#: Laws of the pilot solve (grid + L-BFGS-B) and of the lifts; those of the main solve (from the pilot's optimum),
#: :data:`N_LAWS`, are a setting of the experiment (``theorycheck.realdata.config``).
N_PILOT = 256
N_LIFT = 2048
#: Grid points per axis of the pilot (over ``theorycheck.solvers.attention._family.FAMILY_GRID``).
PILOT_GRID = 5


def _law_seed(seed: int, k: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, SEED_STREAM, k])


def label_optimum(g: GeneralTopicModel, mk: Masking, *, n_pilot: int = N_PILOT, n_laws: int = N_LAWS,
                  seed: int = 0):  # fmt: skip
    """The optimal label-family scores ``S = alpha I_w + beta Z`` on a pilot set of laws and on a main set.

    The pilot solves on ``n_pilot`` laws (a :data:`PILOT_GRID` x :data:`PILOT_GRID` grid + L-BFGS-B); the main
    solve uses ``n_laws`` independent laws started at the pilot's optimum. The laws are ``Dirichlet(g.alpha)``
    samples of the streams ``[seed, SEED_STREAM, 2]`` (pilot) and ``[seed, SEED_STREAM, 3]`` (main); the frozen
    ``W^V`` is the minimum-norm stage-1 matrix (SPEC §11.5); the loss is the exact population loss (SPEC §11.8).

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (Dirichlet law).
    mk : Masking
        The masking of the MLM objective.
    n_pilot : int, >= 2, default N_PILOT
        Laws of the pilot solve.
    n_laws : int, >= 2, default N_LAWS
        Laws of the main solve.
    seed : int, default 0
        Seed of the law streams.

    Returns
    -------
    pilot, main : SolveResult
        The two optima (``x = (alpha, beta)``); ``main.info`` has ``x_stderr`` and ``x_cov`` (the optimum's
        sampling covariance), ``loss_stderr`` and ``loss_uniform``.

    Raises
    ------
    ValueError
        If ``n_pilot < 2`` or ``n_laws < 2``.

    See Also
    --------
    theorycheck.solvers.optimal_attention : The solver (``options.family="label"``).
    attention_theory : Uses the main optimum.

    References
    ----------
    SPEC §11.8 (the structured exact loss), §11.6 (the label family); Li, Li and Risteski, *How Do Transformers
    Learn Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 3.

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.realdata.attention_theory import label_optimum
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)
    >>> pilot, main = label_optimum(g, Masking(), n_pilot=8, n_laws=16, seed=0)
    >>> main.status, bool(main.fun < main.info["loss_uniform"])  # the optimum beats uniform attention
    (0, True)
    >>> bool(main.x[0] > 0), main.info["x_cov"].shape  # a positive own-word score
    (True, (2, 2))
    """
    n_pilot = check_int("n_pilot", n_pilot, low=2)
    n_laws = check_int("n_laws", n_laws, low=2)
    seeds = [int(_law_seed(seed, k).generate_state(1)[0]) for k in (2, 3)]
    base = dict(family="label", n_grid=PILOT_GRID)
    pilot = optimal_attention(g, mk, value="stage1", options=dict(base, n_theta=n_pilot, seed=seeds[0]))
    main = optimal_attention(g, mk, value="stage1", options=dict(base, n_theta=n_laws, seed=seeds[1], x0=pilot.x))
    return pilot, main


def minilm_heads(att: S.AttentionStats) -> list[dict]:
    """One row per layer and head of the measured lifts (``all_keys`` definition).

    Parameters
    ----------
    att : AttentionStats
        The measured attention (:meth:`theorycheck.realdata.stats.AttentionAccumulator.result`).

    Returns
    -------
    list of dict
        Rows with ``layer``, ``head``, ``same_topic``, ``different_topic``, ``gap``, ``gap_ci``, ``ratio``,
        ``ratio_ci`` (window bootstrap; NaN ratio intervals if ``att.ratio_ci`` is None), layer-major.

    See Also
    --------
    lift_heads : The same rows from a LiftStats.
    attention_theory : Sets these rows beside the theory's lift.

    Examples
    --------
    Uniform attention: lift 1 in both classes.

    >>> from theorycheck.realdata.attention_theory import minilm_heads
    >>> from theorycheck.realdata.stats import AttentionAccumulator
    >>> acc = AttentionAccumulator(n_layers=1, n_heads=1, membership=np.eye(2, dtype=bool)[[0, 0, 1, 1]])
    >>> acc.add(np.full((1, 1, 4, 4), 0.25), np.arange(4), np.ones(4, dtype=bool))
    >>> minilm_heads(acc.result(n_boot=10, seed=0))
    [{'layer': 0, 'head': 0, 'same_topic': 1.0, 'different_topic': 1.0, 'gap': 0.0, 'gap_ci': [0.0, 0.0],
      'ratio': 1.0, 'ratio_ci': [1.0, 1.0]}]
    """
    i, j = att.classes.index("same_topic"), att.classes.index("different_topic")
    ratio, rci = att.ratio, att.ratio_ci
    rows = []
    for (layer, head), gap in np.ndenumerate(att.gap):
        rows.append({
            "layer": int(layer), "head": int(head),
            "same_topic": float(att.mean_lift[layer, head, i]), "different_topic": float(att.mean_lift[layer, head, j]),
            "gap": float(gap), "gap_ci": [float(v) for v in att.gap_ci[layer, head]],
            "ratio": float(ratio[layer, head]),
            "ratio_ci": [float("nan")] * 2 if rci is None else [float(v) for v in rci[layer, head]],
        })  # fmt: skip
    return rows


def lift_heads(ls: LiftStats, class_set: str = "topic_sets", norm: str = "excl_own") -> list[dict]:
    """:func:`minilm_heads` rows from a :class:`~theorycheck.realdata.lifts.LiftStats` (one class set, one norm).

    Parameters
    ----------
    ls : LiftStats
        The measured lifts (:meth:`theorycheck.realdata.lifts.LiftAccumulator.result`).
    class_set : str, default "topic_sets"
        A key of ``ls.lifts``.
    norm : {"all_keys", "excl_own"}, default "excl_own"
        The normalisation.

    Returns
    -------
    list of dict
        Rows with ``layer``, ``head``, ``same_topic``, ``different_topic``, ``gap``, ``gap_ci``, ``ratio``,
        ``ratio_ci``, layer-major.

    See Also
    --------
    minilm_heads : The same rows from an AttentionStats.
    lift_comparison : The head means beside the theory.

    Examples
    --------
    Attention half on the own position, half uniform: ``all_keys`` lift 0.5, ``excl_own`` 1.

    >>> from theorycheck.realdata.attention_theory import lift_heads
    >>> from theorycheck.realdata.lifts import LiftAccumulator
    >>> acc = LiftAccumulator(n_layers=1, n_heads=1, memberships={"topic_sets": np.eye(2, dtype=bool)[[0, 0, 1, 1]]})
    >>> acc.add((0.5 * np.eye(4) + 0.125)[None, None], np.arange(4), np.ones(4, dtype=bool))
    >>> ls = acc.result(n_boot=10, seed=0)
    >>> [(r["same_topic"], r["ratio"]) for r in lift_heads(ls, norm="all_keys") + lift_heads(ls)]
    [(0.5, 1.0), (1.0, 1.0)]
    """
    d = ls.lifts[class_set][norm]
    rows = []
    for (layer, head), gap in np.ndenumerate(d["gap"]):
        rows.append({
            "layer": int(layer), "head": int(head), "same_topic": float(d["same_topic"][layer, head]),
            "different_topic": float(d["different_topic"][layer, head]), "gap": float(gap),
            "gap_ci": [float(v) for v in d["gap_ci"][layer, head]], "ratio": float(d["ratio"][layer, head]),
            "ratio_ci": [float(v) for v in d["ratio_ci"][layer, head]],
        })  # fmt: skip
    return rows


#: Definition -> (MiniLM pass, normalisation) of the like-for-like comparison (SPEC §11.9).
_MEASURED = {"all_keys": ("text", "all_keys"), "excl_own": ("text", "excl_own"), "masked": ("masked", "excl_own")}
_THEORY_KEYS = ("same_topic", "different_topic", "gap", "gap_ci", "ratio", "ratio_ci", "own_word")


def lift_comparison(g: GeneralTopicModel, alpha: float, beta: float, rows, memberships: dict, theta,
                    lifts: dict | None, *, n_boot: int = 200, seed: int = 0, cov=None) -> list[dict]:  # fmt: skip
    """The theory's lift at ``(alpha, beta)`` beside MiniLM's, per definition and class set (SPEC §11.9).

    One row per definition (:data:`theorycheck.realdata.theory_lifts.DEFINITIONS`) and class set: the same
    quantity on both sides. ``all_keys`` and ``excl_own`` compare with the text pass's normalisations, ``masked``
    with the masked pass's ``excl_own``.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model.
    alpha, beta : float
        The label family's scores (an optimum, :func:`label_optimum`).
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    memberships : dict of str to ndarray
        Class-set name -> ``(n_tok, K)`` bool topic sets of the tokens ``rows``.
    theta : array_like, shape (n_laws, T)
        Document laws of the theory's lifts.
    lifts : dict of str to LiftStats or None
        MiniLM's ``"text"`` (and optionally ``"masked"``) lifts, with the same class-set names.
    n_boot : int, >= 10, default 200
        Bootstrap replicates of the theory's lifts.
    seed : int, default 0
        Seed of the bootstrap streams ``[seed, SEED_STREAM, 10 + k]``.
    cov : array_like, shape (2, 2), optional
        The optimum's sampling covariance (widens the theory's intervals).

    Returns
    -------
    list of dict
        Rows with ``definition``, ``class_set``, ``theory`` (lifts, gap, ratio with 95% intervals, ``own_word``) and
        ``minilm`` (head-mean gap and ratio with window-bootstrap intervals, heads whose gap interval lies above /
        below 0, ``own_word`` and ``own_position`` head mean and maximum, ``n_queries``), or ``minilm: None``.

    See Also
    --------
    theorycheck.realdata.theory_lifts.predicted_lifts : The theory side.
    theorycheck.realdata.lifts.LiftAccumulator : The measured side.
    format_comparison_table : Markdown of these rows.

    References
    ----------
    SPEC §11.9 (three definitions of a pair's lift, the same on both sides).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel
    >>> from theorycheck.realdata.attention_theory import lift_comparison
    >>> from theorycheck.realdata.lifts import LiftAccumulator
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)
    >>> rows, M = np.array([0, 1, 4, 5]), np.eye(2, dtype=bool)[[0, 0, 1, 1]]
    >>> vocab_sets = np.zeros((6, 2), dtype=bool)
    >>> vocab_sets[rows] = M  # token id = word index
    >>> acc = LiftAccumulator(n_layers=1, n_heads=1, memberships={"topic_sets": vocab_sets})
    >>> acc.add(np.full((1, 1, 4, 4), 0.25), rows, np.ones(4, dtype=bool))  # a uniform "MiniLM"
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=40)
    >>> out = lift_comparison(g, 2.0, 0.5, rows, {"topic_sets": M}, theta, {"text": acc.result(n_boot=10, seed=0)})
    >>> [(r["definition"], round(r["theory"]["ratio"], 4), r["minilm"] and r["minilm"]["mean_ratio"]) for r in out]
    [('all_keys', 1.1998, 1.0), ('excl_own', 1.5098, 1.0), ('masked', 1.0, None)]
    """
    out = []
    for d in DEFINITIONS:
        for k, (name, M) in enumerate(memberships.items()):
            th = predicted_lifts(g, alpha, beta, rows, M, theta, n_boot=n_boot, definition=d, cov=cov,
                                 rng=np.random.default_rng(_law_seed(seed, 10 + k)))  # fmt: skip
            row = {"definition": d, "class_set": name, "theory": {key: th[key] for key in _THEORY_KEYS}}
            pas, norm = _MEASURED[d]
            ls = lifts.get(pas) if lifts else None
            if ls is None or name not in ls.lifts:
                row["minilm"] = None
            else:
                m = ls.lifts[name][norm]
                row["minilm"] = {
                    "mean_gap": m["mean_gap"], "mean_gap_ci": list(m["mean_gap_ci"]),
                    "mean_ratio": m["mean_ratio"], "mean_ratio_ci": list(m["mean_ratio_ci"]),
                    "heads_gap_above_0": int(np.sum(m["gap_ci"][..., 0] > 0)),
                    "heads_gap_below_0": int(np.sum(m["gap_ci"][..., 1] < 0)),
                    "own_word": float(np.mean(ls.own_word)), "own_word_max": float(np.max(ls.own_word)),
                    "own_position": float(np.mean(ls.own_position)), "n_queries": ls.n_queries,
                }  # fmt: skip
            out.append(row)
    return out


def sensitivity(g: GeneralTopicModel, mk: Masking, rows, membership, theta, *, main=None, n_laws: int = 256,
                per_topic: int = 8, full_identity: bool = True, n_boot: int = 200,
                seed: int = 0) -> list[dict]:  # fmt: skip
    """The theory's lift ratio for other frozen ``W^V`` and score families (SPEC §11.9, sensitivity).

    Full vocabulary: the label family with the stage-1 ``W^V`` (``main``, or solved here) and the identity ``W^V``
    (``full_identity``; a ``skipped`` row above the memory limit); on :func:`~.theory_lifts.sub_model` the label and
    co-topic families with each ``W^V`` (lifts by enumeration). Optima on ``n_laws`` laws of stream
    ``[seed, SEED_STREAM, 5]``; lifts under ``all_keys`` and ``excl_own`` in the topic-set classes.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model.
    mk : Masking
        The masking of the MLM objective.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        The tokens' topic sets.
    theta : array_like, shape (n_laws, T)
        Document laws of the lifts.
    main : SolveResult, optional
        The full-vocabulary label/stage-1 optimum if already solved (:func:`label_optimum`).
    n_laws : int, >= 2, default 256
        Laws of each optimum.
    per_topic : int, >= 1, default 8
        Topic tokens per topic in the sub-model.
    full_identity : bool, default True
        Also solve the label family with the identity ``W^V`` at the full vocabulary.
    n_boot : int, >= 10, default 200
        Bootstrap replicates of the lifts.
    seed : int, default 0
        Seed of the streams.

    Returns
    -------
    list of dict
        One row per case: ``model``, ``n_words``, ``family``, ``value``, ``alpha``, ``beta``, ``status``, and per
        definition (``all_keys``, ``excl_own``) ``gap``, ``ratio``, ``ratio_ci`` and ``own_word``.

    Raises
    ------
    ValueError
        If ``n_laws < 2`` or ``per_topic < 1``.

    See Also
    --------
    label_optimum : The full-vocabulary optimum.
    theorycheck.realdata.theory_lifts.dense_predicted_lifts : The sub-model's lifts.
    format_comparison_table : Shows these rows.

    References
    ----------
    SPEC §11.9 (Sensitivity).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.realdata.attention_theory import sensitivity
    >>> from theorycheck.solvers import SolveResult
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g, mk = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5), Masking()
    >>> rows, M = np.array([0, 1, 4, 5]), np.eye(2, dtype=bool)[[0, 0, 1, 1]]
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=40)
    >>> main = SolveResult(np.array([1.7984, 0.0136]), 0.7915, 0, "label_optimum")  # its optimum at n_laws=16
    >>> out = sensitivity(g, mk, rows, M, theta, main=main, n_laws=8, per_topic=2, full_identity=False, n_boot=10)
    >>> [(r["n_words"], r["family"], r["value"], r["status"]) for r in out]  # 3: infimum at beta -> -inf
    [(6, 'label', 'stage1', 0), (4, 'label', 'stage1', 3), (4, 'label', 'identity', 0),
     (4, 'co-topic', 'stage1', 0), (4, 'co-topic', 'identity', 0)]
    """
    n_laws = check_int("n_laws", n_laws, low=2)
    s_opt = int(_law_seed(seed, 5).generate_state(1)[0])
    rows_out = []

    def add(model, gm, fam, val, res, lifts_of):
        a, b = float(res.x[0]), float(res.x[1])
        row = {"model": model, "n_words": int(gm.n_words), "family": fam, "value": val, "alpha": a, "beta": b,
               "status": int(res.status)}  # fmt: skip
        for d in ("all_keys", "excl_own"):
            p = lifts_of(a, b, d)
            row[d] = {k: p[k] for k in ("gap", "ratio", "ratio_ci", "own_word")}
        rows_out.append(row)

    def label_lifts(a, b, d):
        return predicted_lifts(g, a, b, rows, membership, theta, n_boot=n_boot, definition=d,
                               rng=np.random.default_rng(_law_seed(seed, 6)))  # fmt: skip

    opts = dict(family="label", n_theta=n_laws, seed=s_opt)
    for val in ("stage1", "identity") if full_identity else ("stage1",):
        try:
            res = main if (val == "stage1" and main is not None) else optimal_attention(g, mk, value=val, options=opts)
        except ValueError as exc:  # the dense identity W^V above the memory limit (theorycheck._memory)
            if "memory limit" not in str(exc):
                raise
            rows_out.append({"model": "full", "n_words": int(g.n_words), "family": "label", "value": val,
                             "skipped": str(exc)})  # fmt: skip
            continue
        add("full", g, "label", val, res, label_lifts)
    gs, rs, Ms = sub_model(g, rows, membership, per_topic=per_topic)
    ths = np.random.default_rng(_law_seed(seed, 7)).dirichlet(gs.concentration, size=len(theta))
    z = gs.dominant_topic()
    bases = {"label": (z[:, None] == z[None, :]).astype(np.float64), "co-topic": cotopic_matrix(gs)[1:, 1:]}
    for fam, B in bases.items():
        for val in ("stage1", "identity"):
            res = optimal_attention(gs, mk, value=val, options=dict(opts, family=fam))

            def sub_lifts(a, b, d, B=B):
                Sc = a * np.eye(gs.n_words) + b * B
                return dense_predicted_lifts(gs, Sc, rs, Ms, ths, n_boot=n_boot, definition=d,
                                             rng=np.random.default_rng(_law_seed(seed, 8)))  # fmt: skip

            add(f"sub-model ({per_topic} topic tokens per topic)", gs, fam, val, res, sub_lifts)
    return rows_out


def _position(ci, band) -> str:
    """Where a head's interval lies relative to the theory's: ``above``, ``below`` or ``overlaps``."""
    if ci[0] > band[1]:
        return "above"
    if ci[1] < band[0]:
        return "below"
    return "overlaps"


@dataclass
class AttentionTheory:
    """The result of :func:`attention_theory`.

    Parameters
    ----------
    summary : dict
        JSON-ready: ``optimum`` (``alpha``, ``beta`` with standard errors, loss against uniform attention, status,
        the pilot's optimum), ``theory`` (:func:`predicted_lifts` under ``heads_definition``), ``heads`` (one row per
        measured layer and head), ``counts`` (heads whose interval lies above, overlaps or lies below the
        theory's, for the gap and the ratio), ``minilm_mean_gap``, ``minilm_mean_ratio``, ``minilm_mean_gap_ci``,
        and with MiniLM's lifts ``comparison`` and ``sensitivity``.
    timing : dict
        ``attention_theory_s`` wall, ``attention_theory_cpu_s`` process CPU, ``attention_optimum_s`` and, with
        lifts, ``attention_comparison_cpu_s`` and ``attention_sensitivity_cpu_s``.

    See Also
    --------
    attention_theory : Makes it.
    format_attention_table : Markdown of its ``summary``.

    Examples
    --------
    >>> from theorycheck.realdata.attention_theory import AttentionTheory
    >>> at = AttentionTheory(summary={"optimum": {"alpha": 1.8, "beta": 0.01}}, timing={})
    >>> at.summary["optimum"]["beta"]
    0.01
    """

    summary: dict
    timing: dict


def attention_theory(g: GeneralTopicModel, mk: Masking, rows, membership, att: S.AttentionStats, *,
                     n_pilot: int = N_PILOT, n_laws: int = N_LAWS, n_lift: int = N_LIFT, n_boot: int = 200,
                     seed: int = 0, lifts: dict | None = None, sensitivity_laws: int = 256,
                     full_identity: bool = True) -> AttentionTheory:  # fmt: skip
    """The theory's optimal label-family attention at ``g`` and its predicted lifts beside the measured ``att``.

    The optimum is :func:`label_optimum`'s main solve; the lifts (module docstring) use ``n_lift`` laws
    ``Dirichlet(g.alpha)`` of the stream ``[seed, SEED_STREAM, 1]`` and their bootstrap ``[seed, SEED_STREAM, 4]``.
    With MiniLM's ``lifts`` (``"text"``, optionally ``"masked"``) the summary also has ``comparison``
    (:func:`lift_comparison`, the topic sets and the score family's own labels) and ``sensitivity``
    (:func:`sensitivity`), and the per-head rows, the counts and ``theory`` use the like-for-like ``excl_own``
    definition (``heads_definition``); without them, ``all_keys`` and ``att``'s heads.

    Parameters
    ----------
    g : GeneralTopicModel
        The topic model (Dirichlet law).
    mk : Masking
        The masking of the MLM objective.
    rows : array_like of int, shape (n_tok,)
        LDA word index of each topic token.
    membership : array_like of bool, shape (n_tok, K)
        Their topic sets (the classes of ``att``).
    att : AttentionStats
        The measured attention (per layer and head).
    n_pilot, n_laws : int, >= 2
        Laws of the pilot and of the main solve (:func:`label_optimum`).
    n_lift : int, >= 2
        Laws of the predicted lifts.
    n_boot : int, >= 10, default 200
        Bootstrap replicates.
    seed : int, >= 0, default 0
        Seed of the streams.
    lifts : dict of str to LiftStats, optional
        MiniLM's lifts under the comparison's definitions.
    sensitivity_laws : int, >= 0, default 256
        Laws of each optimum of :func:`sensitivity` (0 skips it).
    full_identity : bool, default True
        Passed to :func:`sensitivity`.

    Returns
    -------
    AttentionTheory
        The summary and the timings.

    Raises
    ------
    ValueError
        If ``n_lift < 2``, ``seed < 0`` or a count of :func:`label_optimum` is below 2.
    TypeError
        If ``att`` is not an AttentionStats.

    See Also
    --------
    label_optimum : The optimum.
    theorycheck.realdata.theory_lifts.predicted_lifts : The lifts.
    theorycheck.realdata.theory.theory_comparison : Calls it on the pipeline's data.

    References
    ----------
    SPEC §11.8, §11.9; Li, Li and Risteski, *How Do Transformers Learn Topic Structure?*, ICML 2023,
    arXiv:2303.04245, Theorem 3.

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking
    >>> from theorycheck.realdata.attention_theory import attention_theory
    >>> from theorycheck.realdata.stats import AttentionAccumulator
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)
    >>> rows, M = np.array([0, 1, 4, 5]), np.eye(2, dtype=bool)[[0, 0, 1, 1]]
    >>> acc = AttentionAccumulator(n_layers=1, n_heads=1, membership=M)  # a uniform "MiniLM" on tokens 0..3
    >>> acc.add(np.full((1, 1, 4, 4), 0.25), np.arange(4), np.ones(4, dtype=bool))
    >>> att = acc.result(n_boot=10, seed=0)
    >>> out = attention_theory(g, Masking(), rows, M, att, n_pilot=8, n_laws=16, n_lift=40, n_boot=10)
    >>> s = out.summary
    >>> s["heads_definition"], s["optimum"]["status"], len(s["heads"]), s["minilm_mean_ratio"]
    ('all_keys', 0, 1, 1.0)
    >>> round(s["theory"]["weight_ratio"], 12) == round(float(np.exp(s["optimum"]["beta"])), 12)  # e^beta*
    True
    """
    n_lift = check_int("n_lift", n_lift, low=2)
    seed = check_int("seed", seed, low=0)
    if not isinstance(att, S.AttentionStats):
        raise TypeError(f"att must be an AttentionStats, got {type(att).__name__}")
    t0, c0 = time.perf_counter(), time.process_time()
    pilot, main = label_optimum(g, mk, n_pilot=n_pilot, n_laws=n_laws, seed=seed)
    a, b = float(main.x[0]), float(main.x[1])
    se = main.info.get("x_stderr")
    optimum = {
        "family": "alpha I_w + beta Z (dominant-topic labels)", "value": "min-norm stage-1 W^V",
        "alpha": a, "beta": b,
        "alpha_se": None if se is None else float(se[0]), "beta_se": None if se is None else float(se[1]),
        "loss": float(main.fun), "loss_stderr": float(main.info["loss_stderr"]),
        "loss_uniform": float(main.info["loss_uniform"]), "status": int(main.status), "n_laws": n_laws,
        "pilot": {"alpha": float(pilot.x[0]), "beta": float(pilot.x[1]), "n_laws": n_pilot, "grid": PILOT_GRID,
                  "status": int(pilot.status)},
        "gradient_norm": float(main.residuals["gradient_norm"]),
    }  # fmt: skip
    t_opt = time.perf_counter() - t0
    theta = np.random.default_rng(_law_seed(seed, 1)).dirichlet(g.concentration, size=n_lift)
    text = None if not lifts else lifts.get("text")
    definition = "all_keys" if text is None else "excl_own"
    theory = predicted_lifts(g, a, b, rows, membership, theta, n_boot=n_boot, definition=definition,
                             rng=np.random.default_rng(_law_seed(seed, 4)), cov=main.info.get("x_cov"))  # fmt: skip
    heads = minilm_heads(att) if text is None else lift_heads(text, "topic_sets", "excl_own")
    counts = {k: {p: sum(_position(h[f"{k}_ci"], theory[f"{k}_ci"]) == p for h in heads)
                  for p in ("above", "overlaps", "below")} for k in ("gap", "ratio")}  # fmt: skip
    summary = {"optimum": optimum, "theory": theory, "heads": heads, "counts": counts, "heads_definition": definition,
               "minilm_mean_gap": float(np.nanmean([h["gap"] for h in heads])),
               "minilm_mean_ratio": float(np.nanmean([h["ratio"] for h in heads]))}  # fmt: skip
    summary["minilm_mean_gap_ci"] = (
        list(att.mean_gap_ci) if text is None else list(text.lifts["topic_sets"]["excl_own"]["mean_gap_ci"])
    )
    timing = {}
    if text is not None:
        z = g.dominant_topic()[np.asarray(rows)]
        labels = np.zeros((z.size, g.T), dtype=bool)
        labels[np.arange(z.size), z] = True
        ms = {"topic_sets": np.asarray(membership, dtype=bool), "labels": labels}
        c1 = time.process_time()
        summary["comparison"] = lift_comparison(g, a, b, rows, ms, theta, lifts, n_boot=n_boot, seed=seed,
                                                cov=main.info.get("x_cov"))  # fmt: skip
        timing["attention_comparison_cpu_s"] = time.process_time() - c1
        if sensitivity_laws:
            c1 = time.process_time()
            summary["sensitivity"] = sensitivity(g, mk, rows, membership, theta, main=main, n_laws=sensitivity_laws,
                                                 full_identity=full_identity, n_boot=n_boot, seed=seed)  # fmt: skip
            timing["attention_sensitivity_cpu_s"] = time.process_time() - c1
    timing.update(attention_theory_s=time.perf_counter() - t0, attention_optimum_s=t_opt,
                  attention_theory_cpu_s=time.process_time() - c0)  # fmt: skip
    return AttentionTheory(summary, timing)


def _f(x) -> str:
    return "nan" if x is None or not np.isfinite(x) else f"{x:.4g}"


#: What the measured model is (said wherever it is compared with the MLM theory).
MODEL_NOTE = (
    "MiniLM here is sentence-transformers' all-MiniLM-L6-v2: a 6-layer MiniLM distilled from a BERT-family model "
    "and then fine-tuned contrastively on sentence pairs as a sentence encoder, not a masked-language model; no "
    "small MLM checkpoint that installs offline from a package was found to compare with instead."
)
_DEFINITION_TEXT = {
    "all_keys": "all keys (n·A, own position and other copies of the query's word in the normaliser)",
    "excl_own": "own position and own word excluded (n'·A / r over the other keys)",
    "masked": "masked query (the query shown as [MASK]; keys as in excl_own)",
}


def _ci(x) -> str:
    return f"[{_f(x[0])}, {_f(x[1])}]"


def format_comparison_table(summary: dict) -> str:
    """Markdown of the like-for-like comparison and the sensitivity rows of :func:`attention_theory`'s ``summary``.

    Parameters
    ----------
    summary : dict
        ``AttentionTheory.summary``; its ``comparison`` rows (:func:`lift_comparison`) and, optionally,
        ``sensitivity`` rows (:func:`sensitivity`).

    Returns
    -------
    str
        A paragraph, one table row per definition and class set (theory gap and ratio with 95% intervals and
        own-word share; MiniLM head means, or ``-`` without a measurement), the definitions, and the sensitivity
        table; the empty string if the summary has no ``comparison``.

    See Also
    --------
    format_attention_table : The whole attention report (includes this).
    lift_comparison : The rows.

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel
    >>> from theorycheck.realdata.attention_theory import format_comparison_table, lift_comparison
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)
    >>> rows, M = np.array([0, 1, 4, 5]), np.eye(2, dtype=bool)[[0, 0, 1, 1]]
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=40)
    >>> rows_out = lift_comparison(g, 2.0, 0.5, rows, {"topic_sets": M}, theta, lifts=None, n_boot=10)
    >>> table = format_comparison_table({"comparison": rows_out}).splitlines()
    >>> print(next(line for line in table if line.startswith("| masked"))[:38])  # lift 1, gap 0 exactly
    | masked | topic_sets | 0 | [0, 0] | 1
    >>> format_comparison_table({})
    ''
    """
    rows = summary.get("comparison")
    if not rows:
        return ""
    out = [
        "Like-for-like lifts (SPEC §11.9): the same statistic on both sides, per definition of the query's keys and "
        "per class set (topic_sets: the measurement's top-fraction topic sets; labels: the dominant-topic labels z "
        "that define the theory's scores). Theory: 95% law bootstrap ⊕ optimum SE; MiniLM: mean over its heads, "
        "95% window bootstrap. own word: attention of a topic-token query on other copies of its word (the mass "
        "excl_own removes); own pos.: on its own position (0 in the theory's N -> inf limit).\n",
        "| definition | classes | theory gap | 95% CI | theory ratio | 95% CI | theory own word | MiniLM gap | 95% CI "
        "| MiniLM ratio | 95% CI | heads gap > 0 / < 0 | MiniLM own word (max head) | MiniLM own pos. |",
        "|" + "---|" * 14,
    ]
    for r in rows:
        t, m = r["theory"], r["minilm"]
        line = (f"| {r['definition']} | {r['class_set']} | {_f(t['gap'])} | {_ci(t['gap_ci'])} | {_f(t['ratio'])} "
                f"| {_ci(t['ratio_ci'])} | {_f(t['own_word'])} ")  # fmt: skip
        if m is None:
            line += "| - | - | - | - | - | - | - |"
        else:
            line += (f"| {_f(m['mean_gap'])} | {_ci(m['mean_gap_ci'])} | {_f(m['mean_ratio'])} "
                     f"| {_ci(m['mean_ratio_ci'])} | {m['heads_gap_above_0']} / {m['heads_gap_below_0']} "
                     f"| {_f(m['own_word'])} ({_f(m['own_word_max'])}) | {_f(m['own_position'])} |")  # fmt: skip
        out.append(line)
    out.append("\nDefinitions: " + "; ".join(f"{k}: {v}" for k, v in _DEFINITION_TEXT.items()) + ".")
    sens = summary.get("sensitivity")
    if sens:
        out += [
            "\nSensitivity of the theory's lift (topic-set classes) to the frozen W^V and the score family (optimum "
            "of each on its own sampled laws; sub-model: each topic's most probable topic tokens, phi renormalised):\n",
            "| model | words | family | W^V | alpha* | beta* | status | ratio all_keys | ratio excl_own | 95% CI "
            "| own word |",
            "|" + "---|" * 11,
        ]
        for r in sens:
            if "skipped" in r:
                out.append(f"| {r['model']} | {r['n_words']} | {r['family']} | {r['value']} | {r['skipped']} |")
                continue
            a, e = r["all_keys"], r["excl_own"]
            out.append(f"| {r['model']} | {r['n_words']} | {r['family']} | {r['value']} | {_f(r['alpha'])} "
                       f"| {_f(r['beta'])} | {r['status']} | {_f(a['ratio'])} | {_f(e['ratio'])} "
                       f"| {_ci(e['ratio_ci'])} | {_f(a['own_word'])} |")  # fmt: skip
    return "\n".join(out) + "\n\n"


def format_attention_table(summary: dict) -> str:
    """Markdown of :func:`attention_theory`'s ``summary``.

    The optimum, :data:`MODEL_NOTE`, :func:`format_comparison_table`, the predicted lift and one row per head.

    Parameters
    ----------
    summary : dict
        ``AttentionTheory.summary`` (keys ``optimum``, ``theory``, ``counts``, ``heads``, optionally
        ``heads_definition``, ``comparison``, ``sensitivity``).

    Returns
    -------
    str
        The Markdown report (paragraphs, then a table: the theory's row and one row per head).

    See Also
    --------
    format_comparison_table : The comparison part.
    theorycheck.realdata.theory.format_theory_table : Appends this table.

    Examples
    --------
    A summary built by hand around a real lift (``alpha = beta = 0``: uniform attention, lift 1):

    >>> from theorycheck import GeneralTopicModel
    >>> from theorycheck.realdata.attention_theory import format_attention_table
    >>> from theorycheck.realdata.theory_lifts import predicted_lifts
    >>> phi = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]])
    >>> g = GeneralTopicModel(phi, prior="dirichlet", alpha=0.5)
    >>> theta = np.random.default_rng(0).dirichlet(g.concentration, size=40)
    >>> th = predicted_lifts(g, 0.0, 0.0, [0, 1, 4, 5], np.eye(2, dtype=bool)[[0, 0, 1, 1]], theta, n_boot=10,
    ...                      rng=np.random.default_rng(1))
    >>> opt = dict(alpha=0.0, alpha_se=0.0, beta=0.0, beta_se=0.0, loss=0.8, loss_stderr=0.0, loss_uniform=0.8,
    ...            status=0, n_laws=40, pilot=dict(alpha=0.0, beta=0.0, n_laws=8, grid=5))
    >>> n = {"above": 0, "overlaps": 0, "below": 0}
    >>> text = format_attention_table({"optimum": opt, "theory": th, "counts": {"gap": n, "ratio": n}, "heads": []})
    >>> print(text.splitlines()[-1])
    | theory | - | - | 1 | 1 | 0 | [0, 0] | 1 | [1, 1] |
    """
    o, t, c = summary["optimum"], summary["theory"], summary["counts"]
    d = summary.get("heads_definition", "all_keys")
    head = (
        "Optimal attention of the theory (label family alpha I_w + beta Z, min-norm stage-1 W^V, exact population "
        f"loss, SPEC §11.8) at the fitted topics, {o['n_laws']} sampled laws (warm start from a {o['pilot']['grid']}"
        f"x{o['pilot']['grid']} grid on {o['pilot']['n_laws']} laws): alpha* = {_f(o['alpha'])} ± {_f(o['alpha_se'])}, "
        f"beta* = {_f(o['beta'])} ± {_f(o['beta_se'])} (sampling SE of the optimum; the pilot's optimum on its "
        f"{o['pilot']['n_laws']} laws: {_f(o['pilot']['alpha'])}, {_f(o['pilot']['beta'])}), loss {o['loss']:.7f} "
        f"± {o['loss_stderr']:.1e} vs {o['loss_uniform']:.7f} uniform, status {o['status']}.\n\n"
        f"{MODEL_NOTE}\n\n"
        + format_comparison_table(summary)
        + f"Per head, definition {d} ({_DEFINITION_TEXT[d]}), topic-set classes (same topic = distinct topic tokens "
        f"with intersecting topic sets, as measured): theory, {t['n_laws']} laws: same topic {_f(t['same_topic'])}, "
        f"different topic {_f(t['different_topic'])}, gap {_f(t['gap'])} {_ci(t['gap_ci'])}, ratio {_f(t['ratio'])} "
        f"{_ci(t['ratio_ci'])} (95%: law bootstrap ⊕ optimum SE); per-word weight ratio e^beta* = "
        f"{_f(t['weight_ratio'])}.\n\n"
        f"MiniLM heads (window bootstrap, 95%) against the theory's interval: gap above {c['gap']['above']}, "
        f"overlapping {c['gap']['overlaps']}, below {c['gap']['below']}; ratio above {c['ratio']['above']}, "
        f"overlapping {c['ratio']['overlaps']}, below {c['ratio']['below']}.\n\n"
    )
    lines = ["| source | layer | head | same topic | different topic | gap | 95% CI | ratio | 95% CI |",
             "|" + "---|" * 9]  # fmt: skip
    lines.append(
        f"| theory | - | - | {_f(t['same_topic'])} | {_f(t['different_topic'])} | {_f(t['gap'])} "
        f"| {_ci(t['gap_ci'])} | {_f(t['ratio'])} | {_ci(t['ratio_ci'])} |"
    )
    for h in summary["heads"]:
        lines.append(
            f"| MiniLM | {h['layer']} | {h['head']} | {_f(h['same_topic'])} | {_f(h['different_topic'])} "
            f"| {_f(h['gap'])} | {_ci(h['gap_ci'])} | {_f(h['ratio'])} | {_ci(h['ratio_ci'])} |"
        )
    return head + "\n".join(lines) + "\n"
