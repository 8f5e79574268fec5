"""Probes: named measurements logged into ``metrics.jsonl`` at every evaluation of a training run.

A probe is a callable ``probe(model, ctx) -> dict[str, float]`` (values may also be lists of
floats or ``None``). ``ctx`` is a :class:`ProbeContext`: the step, the loss and learning rate of
that step, whether it is a full evaluation (``ctx.full``), the configuration, the topic model and
masking, the :class:`theorycheck.nn.data.DataStream` (evaluation documents, dev loss) and the
exact references (:class:`References`). Probes run after the step's forward/backward pass and
before the optimizer update, so ``model.grad(name)`` holds the gradient of the logged loss.

:data:`DEFAULT_PROBES` are the built-in metrics, in order; ``Trainer(cfg, out, probes=[...])``
appends user probes to them. A key may be produced by one probe only.

The probes run on any topic model: a word's topic is its label in ``ctx.tm.token_topics()`` (the
paper's topics ``(w - 1) // v``, or a general model's dominant topic ``argmax_t phi[t, w]``,
SPEC §11.1), and the statistics are those of :mod:`theorycheck.analysis.topic_structure` (their one
home). What only the paper's model has (the (alpha, beta) family's ``K*``, the min-norm Gram and its
flat directions, SPEC §4.1, §4.3) is a reference registered for :class:`TopicModel`; for a general
model the attention scores are summarised by ``topic_attention_ratio_median`` (median over words of
``K_eff / |t(a)|``, 1 for uniform scores) instead of ``K_eff_median``, and ``dist_W_V_opt`` is
against ``C Sigma^+`` of the general moments (SPEC §11.3).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..analysis import stats, topic_structure
from ..models import GeneralTopicModel, Masking, TopicModel
from ..population import moments
from ..solvers import identifiable_part, optimal_attention, optimal_embedding_gram
from .config import ModelConfig, TrainConfig
from .data import DataStream
from .model import Transformer

__all__ = [
    "ProbeContext",
    "References",
    "stage1_reference",
    "norms",
    "grad_norms",
    "value_structure",
    "embedding_structure",
    "value_distance",
    "effective_K",
    "attention_classes",
    "dev_loss",
    "DEFAULT_PROBES",
    "kq_norm",
]


def stage1_reference(tm: GeneralTopicModel, mk: Masking) -> np.ndarray:
    """Min-norm stage-1 value matrix ``W^V = C Sigma^+`` from the exact moments (SPEC §4.2, §11.3).

    Deliberately dense ``pinv`` and independent of :mod:`theorycheck.solvers` (whose closed form
    it cross-checks in ``run_preset``'s ``dist_W_V_solver``).

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        The topic model.
    mk : Masking
        The masking.

    Returns
    -------
    ndarray, shape (V1, V1)
        ``C Sigma^+`` with ``Sigma = E[m m^T]``, ``C = E[e_x m^T]`` the exact moments
        (:func:`theorycheck.population.moments`): the minimum-norm minimiser of the stage-1 population
        loss, whose value there is ``1 - E||p||^2`` (the paper's model: ``1 - 1/(tau v)``).

    See Also
    --------
    theorycheck.solvers.stage1_value_matrix : The structured closed form it cross-checks.
    theorycheck.population.value_loss : The stage-1 loss it minimises.
    Trainer : Logs the distance ``dist_W_V_opt`` of a stage-1 run's ``W^V`` to it.

    References
    ----------
    SPEC §4.2 (Theorem 2: the stage-1 optimum), §11.3 (any topic-word matrix).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.nn import stage1_reference
    >>> from theorycheck.population import value_loss
    >>> from theorycheck.solvers import stage1_value_matrix
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> W = stage1_reference(tm, mk)
    >>> np.round(W, 4)  # row 0 ([MASK] as output) is 0; words map to their topic's words
    array([[ 0.    ,  0.    ,  0.    ,  0.    ,  0.    ,  0.    ,  0.    ],
           [ 0.1394,  0.5557,  0.5557, -0.0223, -0.0223, -0.0223, -0.0223],
           [ 0.1394,  0.5557,  0.5557, -0.0223, -0.0223, -0.0223, -0.0223],
           [ 0.1394, -0.0223, -0.0223,  0.5557,  0.5557, -0.0223, -0.0223],
           [ 0.1394, -0.0223, -0.0223,  0.5557,  0.5557, -0.0223, -0.0223],
           [ 0.1394, -0.0223, -0.0223, -0.0223, -0.0223,  0.5557,  0.5557],
           [ 0.1394, -0.0223, -0.0223, -0.0223, -0.0223,  0.5557,  0.5557]])
    >>> round(value_loss(W, tm, mk), 12), np.allclose(W, stage1_value_matrix(tm, mk), atol=1e-12)  # 1 - 1/(tau v)
    (0.75, True)
    """
    Sigma, C = moments(tm, mk)
    return C @ np.linalg.pinv(Sigma, rcond=1e-12, hermitian=True)


def _is_stage1_model(mc: ModelConfig) -> bool:
    return (
        mc.embedding == "one-hot"
        and mc.decoder == "identity"
        and mc.attention == "uniform"
        and mc.loss == "squared"
        and mc.n_heads == 1
        and mc.n_layers == 1
        and not mc.residual
        and not mc.layer_norm
        and not mc.mask_keys
        and mc.reg == 0.0
        and "b_dec" not in mc.train
    )


@functools.singledispatch
def _k_star(tm: GeneralTopicModel, mk: Masking) -> float | None:
    """``K*`` of the (alpha, beta) family with the block ``W^V`` (SPEC §4.3): the paper's model only."""
    return None


@_k_star.register
def _(tm: TopicModel, mk: Masking) -> float | None:
    return float(optimal_attention(tm, mk, value="block").K)


@functools.singledispatch
def _gram_reference(tm: GeneralTopicModel, mk: Masking) -> np.ndarray | None:
    """The min-norm Gram ``optimal_embedding_gram`` (SPEC §4.1), compared up to its flat directions
    (``identifiable_part``): the paper's model only."""
    return None


@_gram_reference.register
def _(tm: TopicModel, mk: Masking) -> np.ndarray | None:
    return np.asarray(optimal_embedding_gram(tm, mk).x)


class References:
    """Exact optima a run is compared with, computed once and only where they apply.

    ``W_V``: ``C Sigma^+`` (:func:`stage1_reference`, SPEC §4.2 and §11.3) for stage-1 models with the
    uniform-tau prior or ``init_W_V="stage1-optimum"``; :meth:`K_star`: ``optimal_attention(...).K``
    (SPEC §4.3) when W^V is frozen at that optimum; :meth:`gram`: ``optimal_embedding_gram`` (SPEC
    §4.1) for the tied embedding setting. ``K_star`` and ``gram`` exist for the paper's model only
    (``None`` for a general model). A probe reads them as ``ctx.refs`` (:class:`ProbeContext`).

    Parameters
    ----------
    cfg : TrainConfig
        The run's configuration (which references apply).
    tm : GeneralTopicModel
        The run's topic model.
    mk : Masking
        The run's masking.

    See Also
    --------
    stage1_reference : ``W_V``.
    ProbeContext : Carries them to the probes.
    theorycheck.solvers.optimal_attention : ``K_star``.
    theorycheck.solvers.optimal_embedding_gram : ``gram``.

    References
    ----------
    SPEC §4.1, §4.2, §4.3, §11.3.

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, DataStream, ModelConfig, References, TrainConfig
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, tau=2, source="population"), init_W_V="stage1-optimum",
    ...                   model=ModelConfig(V1=7, d=7, d_a=7, train=("W_K", "W_Q")))
    >>> data = DataStream(cfg)
    >>> refs = References(cfg, data.tm, data.mk)
    >>> refs.W_V[1:, 1:].round(3)  # block-wise: one value on the same-topic blocks, one off them
    array([[ 0.556,  0.556, -0.022, -0.022, -0.022, -0.022],
           [ 0.556,  0.556, -0.022, -0.022, -0.022, -0.022],
           [-0.022, -0.022,  0.556,  0.556, -0.022, -0.022],
           [-0.022, -0.022,  0.556,  0.556, -0.022, -0.022],
           [-0.022, -0.022, -0.022, -0.022,  0.556,  0.556],
           [-0.022, -0.022, -0.022, -0.022,  0.556,  0.556]])
    >>> round(refs.K_star(), 9), refs.gram()  # W^V frozen at its optimum: K*; no tied embedding: no gram
    (6.862533295, None)
    """

    def __init__(self, cfg: TrainConfig, tm: GeneralTopicModel, mk: Masking):
        self.cfg, self.tm, self.mk = cfg, tm, mk
        self.W_V: np.ndarray | None = None
        if cfg.init_W_V == "stage1-optimum" or (_is_stage1_model(cfg.model) and tm.prior == "uniform-tau"):
            self.W_V = stage1_reference(tm, mk)
        self._K_star: float | None = None
        self._gram: np.ndarray | None = None
        self._done: set[str] = set()  # the lazy references already computed

    def K_star(self) -> float | None:
        """``optimal_attention(tm, mk).K`` (SPEC §4.3) when ``W^V`` is frozen at its stage-1 optimum in the
        paper's setting (one layer and head, squared loss, uniform-tau prior), else ``None``; computed once."""
        if "K_star" not in self._done:
            self._done.add("K_star")
            mc = self.cfg.model
            if (
                self.cfg.init_W_V == "stage1-optimum"
                and "W_V" not in mc.train
                and mc.loss == "squared"
                and not mc.mask_keys
                and self.tm.prior == "uniform-tau"
                and mc.n_layers == 1
                and mc.n_heads == 1
            ):
                self._K_star = _k_star(self.tm, self.mk)
        return self._K_star

    def gram(self) -> np.ndarray | None:
        """``optimal_embedding_gram(tm, mk)`` (SPEC §4.1) in the tied-embedding setting (tied decoder,
        uniform attention, squared loss, uniform-tau prior, ``b_dec`` frozen), else ``None``; computed once."""
        if "gram" not in self._done:
            self._done.add("gram")
            mc = self.cfg.model
            if (
                mc.decoder == "tied"
                and mc.attention == "uniform"
                and mc.loss == "squared"
                and self.tm.prior == "uniform-tau"
                and "b_dec" not in mc.train
            ):
                self._gram = _gram_reference(self.tm, self.mk)
        return self._gram


@dataclass
class ProbeContext:
    """What a probe may read besides the model (see the module docstring).

    A probe is a callable ``probe(model, ctx) -> dict``; it runs after the step's forward and backward
    pass and before the optimizer update (``model.grad(name)`` is the gradient of ``ctx.loss``).

    Parameters
    ----------
    step : int
        The step being logged.
    loss : float
        The training loss of that step (with the L2 term).
    lr : float
        The learning rate of that step.
    full : bool
        Whether this is a full evaluation (every ``eval_every`` steps and the last step).
    cfg : TrainConfig
        The run's configuration.
    tm : TopicModel or GeneralTopicModel
        The run's topic model.
    mk : Masking
        The run's masking.
    stream : DataStream
        The run's data (evaluation documents, dev loss).
    refs : References
        The exact optima the run is compared with (``refs.W_V``: :func:`stage1_reference` where it applies).

    See Also
    --------
    Trainer : Runs the probes (its ``probes`` argument).
    train : Its ``probes`` argument.
    DataStream : ``ctx.stream``.

    References
    ----------
    SPEC §5 (the measurements of the experiments).

    Examples
    --------
    A probe logging the excess of the exact stage-1 loss over its minimum ``1 - 1/(tau v)``:

    >>> from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, train
    >>> def excess(model, ctx):
    ...     return {"excess": ctx.loss - (1 - 1 / (ctx.tm.tau * ctx.tm.v))}
    >>> cfg = TrainConfig(
    ...     data=DataConfig(T=3, v=2, tau=2, source="population"),
    ...     model=ModelConfig(V1=7, attention="uniform", train=("W_V",), init_V="zero"),
    ...     optim=OptimConfig(name="sgd", lr=1.0), steps=4, log_every=1, seed=0,
    ... )
    >>> res = train(cfg, probes=[excess], progress=False)
    >>> [round(r["excess"], 6) for r in res.history]  # W^V = 0 first: loss 1, excess 1/4
    [0.25, 0.158009, 0.107503, 0.078541]
    """

    step: int
    loss: float
    lr: float
    full: bool
    cfg: TrainConfig
    tm: GeneralTopicModel
    mk: Masking
    stream: DataStream
    refs: References


#: A probe: ``(model, ctx) -> dict`` of metrics logged at every metrics step.
Probe = Callable[[Transformer, ProbeContext], dict]


def kq_norm(lay) -> float:
    """``c ||sum_h W_K,h^T W_Q,h||_F`` of one attention layer."""
    P = lay.params
    return float(np.linalg.norm(np.einsum("hak,haq->kq", P["W_K"], P["W_Q"]))) * lay.c


def norms(model, ctx) -> dict:
    """Frobenius norms over all heads of layer 0 (``norm_KQ`` = :func:`kq_norm`), per-layer lists
    ``norm_*_layers`` for deeper models, and ``norm_W_E`` for a trained embedding."""
    lay = model.layers[0]
    rec: dict[str, float | list[float]] = {}
    rec.update({f"norm_{k}": float(np.linalg.norm(lay.params[k])) for k in ("W_V", "W_K", "W_Q")})
    rec["norm_KQ"] = kq_norm(lay)
    if len(model.layers) > 1:
        for key in ("W_V", "W_K", "W_Q"):
            rec[f"norm_{key}_layers"] = [float(np.linalg.norm(la.params[key])) for la in model.layers]
        rec["norm_KQ_layers"] = [kq_norm(la) for la in model.layers]
    if not model.embedding.one_hot:
        rec["norm_W_E"] = float(np.linalg.norm(model.embedding.params["W_E"]))
    return rec


def grad_norms(model, ctx) -> dict:
    """``gradnorm_<name>``: Frobenius norm of the gradient of every trained parameter (``layers.0.`` dropped)."""
    return {
        "gradnorm_" + n.replace("layers.0.", ""): float(np.linalg.norm(model.grad(n))) for n in model.trainable_names()
    }


def value_structure(model, ctx) -> dict:
    """Block score and contrast of ``W^V`` (layer 0, head 0; one-hot, T > 1), SPEC §4.2, topics from
    ``ctx.tm.token_topics()`` (:func:`theorycheck.analysis.topic_structure.block_score`)."""
    if ctx.cfg.model.embedding != "one-hot" or ctx.tm.T <= 1:
        return {}
    V, labels = model.layers[0].params["W_V"][0], ctx.tm.token_topics()
    return {
        "block_score_W_V": topic_structure.block_score(V, labels),
        "block_contrast_W_V": topic_structure.block_contrast(V, labels),
    }


def embedding_structure(model, ctx) -> dict:
    """Block score/contrast of the Gram ``W_E^T W_E`` (topics from ``ctx.tm.token_topics()``) and,
    where the min-norm Gram applies (:meth:`References.gram`), its distance to it, whole and up to the
    loss's flat directions (``identifiable_part``, SPEC §4.1)."""
    if model.embedding.one_hot or ctx.tm.T <= 1:
        return {}
    W_E, labels = model.embedding.params["W_E"], ctx.tm.token_topics()
    G = W_E.T @ W_E
    rec = {
        "block_score_gram": topic_structure.block_score(G, labels),
        "block_contrast_gram": topic_structure.block_contrast(G, labels),
    }
    ref = ctx.refs.gram()
    if ref is not None:
        rec["dist_gram_opt"] = stats.relative_distance(G, ref)
        rec["dist_gram_opt_identifiable"] = stats.relative_distance(
            identifiable_part(G, ctx.tm, ctx.mk), identifiable_part(ref, ctx.tm, ctx.mk)
        )
    return rec


def value_distance(model, ctx) -> dict:
    """``dist_W_V_opt``: relative distance of the trained ``W^V`` to ``C Sigma^+`` (SPEC §4.2)."""
    if ctx.refs.W_V is None or "W_V" not in ctx.cfg.model.train:
        return {}
    return {"dist_W_V_opt": stats.relative_distance(model.layers[0].params["W_V"][0], ctx.refs.W_V)}


@functools.singledispatch
def _score_summary(tm: GeneralTopicModel, S, labels, refs) -> dict:
    """``topic_attention_ratio_median``: median over words of ``K_eff(a) / |t(a)|`` (1 for uniform
    scores), for topics of unequal sizes (SPEC §11.1)."""
    return {"topic_attention_ratio_median": float(np.median(topic_structure.topic_attention_ratio(S, labels)))}


@_score_summary.register
def _(tm: TopicModel, S, labels, refs) -> dict:
    """``K_eff_median`` and, where ``K*`` applies, ``rel_dist_K_eff_opt`` (SPEC §4.3)."""
    rec = {"K_eff_median": float(np.median(topic_structure.effective_K(S, labels)))}
    K_star = refs.K_star()
    if K_star is not None:
        rec["rel_dist_K_eff_opt"] = abs(rec["K_eff_median"] - K_star) / K_star
    return rec


def effective_K(model, ctx) -> dict:
    """Topic preference of the score matrix (layer 0, head 0; softmax, T > 1): for the paper's model
    the median effective ``K`` and its distance to ``K*`` (SPEC §4.3), for a general model the median
    :func:`~theorycheck.analysis.topic_structure.topic_attention_ratio` (:func:`_score_summary`)."""
    if ctx.cfg.model.attention != "softmax" or ctx.tm.T <= 1:
        return {}
    return _score_summary(ctx.tm, model.score_matrix(), ctx.tm.token_topics(), ctx.refs)


def attention_classes(model, ctx) -> dict:
    """Full evaluations: length-normalised attention class averages of layer 0, head 0 on the fixed
    evaluation documents (1 = uniform; :func:`theorycheck.analysis.stats.attention_class_averages`,
    topics from ``ctx.tm.token_topics()``); multi-layer/multi-head softmax models add the same-topic
    : different-topic ratio of every head (``attn_topic_ratio_heads``, layer-major, pairs classified
    by input tokens as in the official ``inspect_result.py``) and its maximum."""
    toks = ctx.stream.eval_tokens() if ctx.full else None
    if toks is None:
        return {}
    labels, mc = ctx.tm.token_topics(), ctx.cfg.model
    maps = model.attention_maps(toks)
    st = stats.attention_class_averages(maps[0, 0], toks, normalise=True, labels=labels)
    rec = {f"attn_{k}": st[k] for k in ("same_word", "same_topic", "diff_topic")}
    if mc.attention == "softmax" and (mc.n_layers > 1 or mc.n_heads > 1):
        ratios = []
        for li in range(mc.n_layers):
            for hi in range(mc.n_heads):
                sh = (
                    st
                    if (li, hi) == (0, 0)
                    else stats.attention_class_averages(maps[li, hi], toks, normalise=True, labels=labels)
                )
                ratios.append(sh["same_topic"] / sh["diff_topic"] if sh["diff_topic"] > 0 else float("nan"))
        rec["attn_topic_ratio_heads"] = ratios
        rec["attn_topic_ratio_max"] = float(np.nanmax(ratios))
    return rec


def dev_loss(model, ctx) -> dict:
    """Full evaluations of static runs: the dev-set loss without the L2 term."""
    if not ctx.full:
        return {}
    dl = ctx.stream.dev_loss(model)
    return {} if dl is None else {"dev_loss": dl}


#: the built-in probes, in the order their keys are produced
DEFAULT_PROBES = (
    norms,
    grad_norms,
    value_structure,
    embedding_structure,
    value_distance,
    effective_K,
    attention_classes,
    dev_loss,
)
