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

Cost (the law is Dirichlet, so its expectation is a sample): a pilot on :data:`N_PILOT` laws with a
:data:`PILOT_GRID` x :data:`PILOT_GRID` grid finds the basin, the optimum on :data:`N_LAWS` laws starts from
the pilot's optimum (no grid), and its sampling covariance is the sandwich of
``theorycheck.solvers.attention._structured.optimum_covariance`` (reported as the standard errors of
``alpha*``, ``beta*``, and propagated into the lifts' intervals by the delta method). The lifts use
:data:`N_LIFT` further laws (own stream ``[seed, SEED_STREAM, 1]``), bootstrapped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix

from .._validate import check_int
from ..models import GeneralTopicModel, Masking
from ..solvers import optimal_attention
from . import stats as S
from .config import N_LAWS

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
    "attention_theory",
    "format_attention_table",
]

#: Offset of this comparison's random streams: laws ``[seed, SEED_STREAM, k]`` (issue #24).
SEED_STREAM = 24
#: Laws of the pilot solve (grid + L-BFGS-B) and of the lifts; those of the main solve (from the pilot's optimum),
#: :data:`N_LAWS`, are a setting of the experiment (``theorycheck.realdata.config``).
N_PILOT = 256
N_LIFT = 2048
#: Grid points per axis of the pilot (over ``theorycheck.solvers.attention._family.FAMILY_GRID``).
PILOT_GRID = 5
_LEVEL = 0.95
_Z = 1.959963984540054  # normal quantile of the 95% level


def _law_seed(seed: int, k: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, SEED_STREAM, k])


def label_optimum(g: GeneralTopicModel, mk: Masking, *, n_pilot: int = N_PILOT, n_laws: int = N_LAWS,
                  seed: int = 0):  # fmt: skip
    """``(pilot, main)``: the optimal label-family scores on ``n_pilot`` laws (grid + L-BFGS-B) and on ``n_laws``
    independent laws started at the pilot's optimum (:class:`~theorycheck.solvers.SolveResult` each; ``main.info``
    has ``x_stderr`` and ``x_cov``, the optimum's sampling covariance, SPEC §11.8).

    The laws are ``Dirichlet(g.alpha)`` samples of the streams ``[seed, SEED_STREAM, 2]`` (pilot) and
    ``[seed, SEED_STREAM, 3]`` (main); the frozen ``W^V`` is the minimum-norm stage-1 matrix (SPEC §11.5).
    """
    n_pilot = check_int("n_pilot", n_pilot, low=2)
    n_laws = check_int("n_laws", n_laws, low=2)
    seeds = [int(_law_seed(seed, k).generate_state(1)[0]) for k in (2, 3)]
    base = dict(family="label", n_grid=PILOT_GRID)
    pilot = optimal_attention(g, mk, value="stage1", options=dict(base, n_theta=n_pilot, seed=seeds[0]))
    main = optimal_attention(g, mk, value="stage1", options=dict(base, n_theta=n_laws, seed=seeds[1], x0=pilot.x))
    return pilot, main


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


def lift_terms(g: GeneralTopicModel, alpha: float, beta: float, rows, membership, theta) -> np.ndarray:
    """Per-law numerators and denominators of SPEC §11.9's lifts, shape ``(4, n_laws)``:
    ``[num_same, den_same, num_diff, den_diff]`` with ``lift_c = sum num_c / sum den_c``.

    ``rows``: LDA word index (``g.phi`` column) of each topic token; ``membership`` ``(n_tok, K)`` bool: the
    tokens' topic sets (the classes of the measurement); ``theta`` ``(n_laws, T)``. With ``p = p_theta`` on the
    tokens, ``D = 1 + (e^beta - 1) P(z_x) + e^beta (e^alpha - 1) p_x`` and the class sums ``a``, ``b`` of SPEC
    §11.9: ``num_c = sum_x p_x (a_x + (e^beta - 1) b_x) / D_x``, ``den_c = sum_x p_x a_x``.
    """
    cl = _classes(g, rows, membership)
    return _terms(_law_sums(g, cl, np.asarray(theta, dtype=np.float64)), alpha, beta)


def _law_sums(g, cl: _Classes, theta):
    """The ``(alpha, beta)``-free parts of SPEC §11.9 per law: ``p`` on the tokens, the label masses ``P(z_x)``
    over all words, and the class sums ``a``, ``b`` (same, different), each ``(n_laws, n_tok)``."""
    P = theta @ g.phi[:, cl.rows]  # (n, n_tok): p_theta on the tokens
    Lx = (theta @ cl.label_phi)[:, cl.labels]  # (n, n_tok): P_theta(z_x) over all words
    PA = (cl.A.T @ P.T).T  # (p A)_x = sum_y p_y A[y, x] (A symmetric)
    PAz = (cl.Az.T @ P.T).T
    Ltok = (P @ _one_hot(cl.labels, cl.n_labels))[:, cl.labels]  # label mass over the tokens
    return P, Lx, (PA - P, PAz - P), (P.sum(axis=1, keepdims=True) - PA, Ltok - PAz)


def _terms(parts, alpha, beta):
    P, Lx, (a_s, b_s), (a_d, b_d) = parts
    eb = math.expm1(beta)
    q = P / (1.0 + eb * Lx + math.exp(beta) * math.expm1(alpha) * P)
    return np.stack([
        np.sum(q * (a_s + eb * b_s), axis=1), np.sum(P * a_s, axis=1),
        np.sum(q * (a_d + eb * b_d), axis=1), np.sum(P * a_d, axis=1),
    ])  # fmt: skip


def _lifts(t):
    same, diff = t[0].sum() / t[1].sum(), t[2].sum() / t[3].sum()
    return float(same), float(diff)


def predicted_lifts(g: GeneralTopicModel, alpha: float, beta: float, rows, membership, theta, *, n_boot: int = 200,
                    rng=None, cov=None) -> dict:  # fmt: skip
    """The theory's same-topic and different-topic lifts at ``(alpha, beta)`` (SPEC §11.9), their gap and ratio.

    Intervals: percentile bootstrap over the laws ``theta`` (``n_boot`` replicates from ``rng``); with the
    optimum's covariance ``cov`` (2 x 2) the gap's and the ratio's intervals are widened in quadrature by
    ``1.96 sqrt(d^T cov d)``, ``d`` their central-difference derivative in ``(alpha, beta)``
    (``gap_se_optimum``, ``ratio_se_optimum``). Returns ``same_topic``, ``different_topic``, ``gap``,
    ``gap_ci``, ``ratio``, ``ratio_ci``, ``gap_ci_laws``, ``ratio_ci_laws``, ``n_laws``, ``weight_ratio``
    (``e^beta``, the per-word same-label : different-label weight of a query).
    """
    n_boot = check_int("n_boot", n_boot, low=10)
    theta = np.asarray(theta, dtype=np.float64)
    parts = _law_sums(g, _classes(g, rows, membership), theta)
    t = _terms(parts, alpha, beta)
    same, diff = _lifts(t)
    W = S.bootstrap_weights(len(theta), n_boot, rng)
    bs, bd = (W @ t[0]) / (W @ t[1]), (W @ t[2]) / (W @ t[3])
    out = {"same_topic": same, "different_topic": diff, "gap": same - diff, "ratio": same / diff,
           "gap_ci_laws": S.percentile_ci(bs - bd, _LEVEL), "ratio_ci_laws": S.percentile_ci(bs / bd, _LEVEL),
           "n_laws": int(len(theta)), "weight_ratio": math.exp(beta), "alpha": float(alpha),
           "beta": float(beta)}  # fmt: skip
    se = {"gap": 0.0, "ratio": 0.0}
    if cov is not None:
        d = np.zeros((2, 2))  # rows: gap, ratio; columns: alpha, beta
        for j in range(2):
            h = 1e-4 * max(1.0, abs((alpha, beta)[j]))
            up, dn = [alpha, beta], [alpha, beta]
            up[j] += h
            dn[j] -= h
            (su, du), (sd, dd) = _lifts(_terms(parts, *up)), _lifts(_terms(parts, *dn))
            d[:, j] = np.array([(su - du) - (sd - dd), su / du - sd / dd]) / (2 * h)
        cov = np.asarray(cov, dtype=np.float64)
        se = {"gap": float(np.sqrt(d[0] @ cov @ d[0])), "ratio": float(np.sqrt(d[1] @ cov @ d[1]))}
    for name in ("gap", "ratio"):
        lo, hi = out[f"{name}_ci_laws"]
        p, e = out[name], _Z * se[name]
        out[f"{name}_ci"] = (p - math.hypot(p - lo, e), p + math.hypot(hi - p, e))
        out[f"{name}_se_optimum"] = se[name]
    return out


def minilm_heads(att: S.AttentionStats) -> list[dict]:
    """One row per layer and head of the measured lifts: ``layer``, ``head``, ``same_topic``,
    ``different_topic``, ``gap``, ``gap_ci``, ``ratio``, ``ratio_ci`` (window bootstrap)."""
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


def _position(ci, band) -> str:
    """Where a head's interval lies relative to the theory's: ``above``, ``below`` or ``overlaps``."""
    if ci[0] > band[1]:
        return "above"
    if ci[1] < band[0]:
        return "below"
    return "overlaps"


@dataclass
class AttentionTheory:
    """``summary`` (JSON-ready: ``optimum``, ``theory`` lifts, ``heads`` rows, ``counts``) and ``timing``
    (``attention_theory_s`` wall, ``attention_theory_cpu_s`` process CPU)."""

    summary: dict
    timing: dict


def attention_theory(g: GeneralTopicModel, mk: Masking, rows, membership, att: S.AttentionStats, *,
                     n_pilot: int = N_PILOT, n_laws: int = N_LAWS, n_lift: int = N_LIFT, n_boot: int = 200,
                     seed: int = 0) -> AttentionTheory:  # fmt: skip
    """The theory's optimal label-family attention at ``g`` and its predicted lifts (module docstring) beside the
    measured ``att`` (per layer and head).

    ``rows``: LDA word index of each topic token; ``membership`` ``(n_tok, K)``: their topic sets (the classes
    of ``att``). The laws of the lifts are ``Dirichlet(g.alpha)`` from ``[seed, SEED_STREAM, 1]``; their
    bootstrap from ``[seed, SEED_STREAM, 4]``.
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
    theory = predicted_lifts(g, a, b, rows, membership, theta, n_boot=n_boot,
                             rng=np.random.default_rng(_law_seed(seed, 4)), cov=main.info.get("x_cov"))  # fmt: skip
    heads = minilm_heads(att)
    counts = {k: {p: sum(_position(h[f"{k}_ci"], theory[f"{k}_ci"]) == p for h in heads)
                  for p in ("above", "overlaps", "below")} for k in ("gap", "ratio")}  # fmt: skip
    summary = {"optimum": optimum, "theory": theory, "heads": heads, "counts": counts,
               "minilm_mean_gap": float(np.nanmean(att.gap)), "minilm_mean_gap_ci": list(att.mean_gap_ci),
               "minilm_mean_ratio": float(np.nanmean(att.ratio))}  # fmt: skip
    timing = {"attention_theory_s": time.perf_counter() - t0, "attention_optimum_s": t_opt,
              "attention_theory_cpu_s": time.process_time() - c0}  # fmt: skip
    return AttentionTheory(summary, timing)


def _f(x) -> str:
    return "nan" if x is None or not np.isfinite(x) else f"{x:.4g}"


def format_attention_table(summary: dict) -> str:
    """Markdown of :func:`attention_theory`'s ``summary``: the optimum, the predicted lifts, one row per head."""
    o, t, c = summary["optimum"], summary["theory"], summary["counts"]
    head = (
        "Optimal attention of the theory (label family alpha I_w + beta Z, min-norm stage-1 W^V, exact population "
        f"loss, SPEC §11.8) at the fitted topics, {o['n_laws']} sampled laws (warm start from a {o['pilot']['grid']}"
        f"x{o['pilot']['grid']} grid on {o['pilot']['n_laws']} laws): alpha* = {_f(o['alpha'])} ± {_f(o['alpha_se'])}, "
        f"beta* = {_f(o['beta'])} ± {_f(o['beta_se'])} (sampling SE of the optimum; the pilot's optimum on its "
        f"{o['pilot']['n_laws']} laws: {_f(o['pilot']['alpha'])}, {_f(o['pilot']['beta'])}), loss {o['loss']:.7f} "
        f"± {o['loss_stderr']:.1e} vs {o['loss_uniform']:.7f} uniform, status {o['status']}.\n\n"
        "Predicted lift n·A on unmasked text (SPEC §11.9; same topic = distinct topic tokens with intersecting "
        f"topic sets, as measured), {t['n_laws']} laws: same topic {_f(t['same_topic'])}, different topic "
        f"{_f(t['different_topic'])}, gap {_f(t['gap'])} [{_f(t['gap_ci'][0])}, {_f(t['gap_ci'][1])}], ratio "
        f"{_f(t['ratio'])} [{_f(t['ratio_ci'][0])}, {_f(t['ratio_ci'][1])}] (95%: law bootstrap ⊕ optimum SE); "
        f"per-word weight ratio e^beta* = {_f(t['weight_ratio'])}.\n\n"
        f"MiniLM heads (window bootstrap, 95%) against the theory's interval: gap above {c['gap']['above']}, "
        f"overlapping {c['gap']['overlaps']}, below {c['gap']['below']}; ratio above {c['ratio']['above']}, "
        f"overlapping {c['ratio']['overlaps']}, below {c['ratio']['below']}.\n\n"
    )
    lines = ["| source | layer | head | same topic | different topic | gap | 95% CI | ratio | 95% CI |",
             "|" + "---|" * 9]  # fmt: skip
    lines.append(
        f"| theory | - | - | {_f(t['same_topic'])} | {_f(t['different_topic'])} | {_f(t['gap'])} "
        f"| [{_f(t['gap_ci'][0])}, {_f(t['gap_ci'][1])}] | {_f(t['ratio'])} "
        f"| [{_f(t['ratio_ci'][0])}, {_f(t['ratio_ci'][1])}] |"
    )
    for h in summary["heads"]:
        lines.append(
            f"| MiniLM | {h['layer']} | {h['head']} | {_f(h['same_topic'])} | {_f(h['different_topic'])} "
            f"| {_f(h['gap'])} | [{_f(h['gap_ci'][0])}, {_f(h['gap_ci'][1])}] | {_f(h['ratio'])} "
            f"| [{_f(h['ratio_ci'][0])}, {_f(h['ratio_ci'][1])}] |"
        )
    return head + "\n".join(lines) + "\n"
