"""Training loop for :mod:`theorycheck.nn._model`: configs, SGD/Adam, data streams, run folders, resume.

Data sources (``DataConfig.source``):

- ``"fresh"``: new documents and new masks every step (``theorycheck.sampling``);
- ``"static"``: the official code's setting, a fixed training set masked once, visited in
  epochs (a shuffled order per epoch), plus a dev set masked once;
- ``"population"``: the exact infinite-document population (every ``tau``-subset as one weighted
  context, :func:`theorycheck.nn._model.population_batch`), i.e. exact population gradient flow
  (discretised) for the one-layer count-based model.

Randomness: the batch of step ``s`` is drawn from ``default_rng([seed, 1, s])`` (fresh) or from the
epoch permutation ``default_rng([seed, 1, epoch])`` (static), the initialisation from
``default_rng([seed, 0])`` and the fixed evaluation documents from ``default_rng([seed, 2])``.
The data stream is therefore a pure function of ``(seed, step)``: the RNG state to restore on
resume *is* the step counter, which the checkpoint stores together with the parameters and the
optimizer state; a resumed run is bit-identical to an uninterrupted one.

Run folder: ``config.json`` (sorted keys, with package versions and the seed),
``metrics.jsonl`` (one JSON object per logged step, flushed), ``checkpoint.npz`` +
``checkpoint.json`` (every ``checkpoint_every`` steps, written atomically), ``params.npz`` and
``figures/*.png`` at the end.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._validate import check_choice, check_int, check_real
from ..config import Masking, TopicModel
from ._model import ModelConfig, Transformer, make_batch, population_batch

__all__ = [
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
    "SGD",
    "Adam",
    "make_optimizer",
    "Trainer",
    "TrainResult",
    "train",
    "load_metrics",
    "stage1_reference",
]


# ============================================================================ configs
@dataclass
class DataConfig:
    """Topic model, masking, document length and data source (SPEC §1, §2.1).

    ``N`` is an int or an inclusive ``[lo, hi]`` range. ``average`` is how the loss averages over
    selected positions: ``"document"`` (per document, then over documents; theory) or ``"token"``
    (over all selected tokens of the batch; official code).
    """

    T: int = 10
    v: int = 10
    tau: int | None = 3
    prior: str = "uniform-tau"
    alpha: float | None = None
    p_m: float = 0.15
    p_c: float = 0.1
    p_r: float = 0.1
    N: object = (100, 150)
    source: str = "fresh"
    n_train: int = 10_000
    n_dev: int = 1_000
    average: str = "document"

    def __post_init__(self):
        check_choice("source", self.source, ("fresh", "static", "population"))
        check_choice("average", self.average, ("document", "token"))
        self.n_train = check_int("n_train", self.n_train, low=1)
        self.n_dev = check_int("n_dev", self.n_dev, low=0)
        if isinstance(self.N, (list, tuple)):
            if len(self.N) != 2:
                raise ValueError(f"N must be an int or a [lo, hi] pair, got {self.N!r}")
            lo, hi = check_int("N[0]", self.N[0], low=1), check_int("N[1]", self.N[1], low=1)
            if hi < lo:
                raise ValueError(f"N = [lo, hi] needs lo <= hi, got {self.N!r}")
            self.N = (lo, hi)
        else:
            self.N = check_int("N", self.N, low=1)
        self.topic_model()  # validates T, v, tau, prior, alpha
        mk = self.masking()
        mk.require_masked_positions("training")
        if self.source == "population" and self.prior != "uniform-tau":
            raise ValueError(
                "source='population' needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)"
            )

    def topic_model(self) -> TopicModel:
        return TopicModel(T=self.T, v=self.v, tau=self.tau, prior=self.prior, alpha=self.alpha)

    def masking(self) -> Masking:
        return Masking(p_m=self.p_m, p_c=self.p_c, p_r=self.p_r)

    @property
    def V1(self) -> int:
        return self.T * self.v + 1

    @property
    def N_max(self) -> int:
        return self.N[1] if isinstance(self.N, tuple) else self.N


@dataclass
class OptimConfig:
    """Optimizer: ``"sgd"`` (optional heavy-ball ``momentum``) or ``"adam"`` (``beta1, beta2, eps``)."""

    name: str = "adam"
    lr: float = 0.01
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self):
        check_choice("name", self.name, ("sgd", "adam"))
        self.lr = check_real("lr", self.lr, low=0.0, low_open=True)
        self.momentum = check_real("momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        self.beta1 = check_real("beta1", self.beta1, low=0.0, high=1.0, high_open=True)
        self.beta2 = check_real("beta2", self.beta2, low=0.0, high=1.0, high_open=True)
        self.eps = check_real("eps", self.eps, low=0.0, low_open=True)


@dataclass
class TrainConfig:
    """Everything a run needs; written to ``config.json``.

    Parameters
    ----------
    steps : int
        Optimizer steps.
    batch_size : int
        Documents per step (ignored for ``source="population"``).
    seed : int
    log_every : int
        A metrics line every ``log_every`` steps (and at the first and last step).
    eval_every : int
        Dev loss and attention statistics every ``eval_every`` steps (0: only at the end).
    checkpoint_every : int
        Checkpoint period (0: no checkpoints).
    eval_docs : int
        Unmasked documents for the attention statistics.
    init_W_V : {"config", "stage1-optimum"}
        ``"stage1-optimum"`` sets every ``W^V`` head to ``C Sigma^+`` (needs one-hot, V1 = T v + 1).
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig | None = None
    optim: OptimConfig = field(default_factory=OptimConfig)
    steps: int = 1000
    batch_size: int = 40
    seed: int = 0
    log_every: int = 10
    eval_every: int = 100
    checkpoint_every: int = 0
    eval_docs: int = 8
    init_W_V: str = "config"

    def __post_init__(self):
        if isinstance(self.data, dict):
            self.data = DataConfig(**self.data)
        if isinstance(self.optim, dict):
            self.optim = OptimConfig(**self.optim)
        if self.model is None:
            self.model = ModelConfig(V1=self.data.V1)
        elif isinstance(self.model, dict):
            self.model = ModelConfig.from_dict(self.model)
        if not isinstance(self.data, DataConfig):
            raise TypeError(f"data must be a DataConfig, got {type(self.data).__name__}")
        if not isinstance(self.model, ModelConfig):
            raise TypeError(f"model must be a ModelConfig, got {type(self.model).__name__}")
        if not isinstance(self.optim, OptimConfig):
            raise TypeError(f"optim must be an OptimConfig, got {type(self.optim).__name__}")
        if self.model.V1 != self.data.V1:
            raise ValueError(f"model.V1 must equal T*v+1 = {self.data.V1}, got model.V1={self.model.V1}")
        self.steps = check_int("steps", self.steps, low=0)
        self.batch_size = check_int("batch_size", self.batch_size, low=1)
        self.seed = check_int("seed", self.seed, low=0)
        self.log_every = check_int("log_every", self.log_every, low=1)
        self.eval_every = check_int("eval_every", self.eval_every, low=0)
        self.checkpoint_every = check_int("checkpoint_every", self.checkpoint_every, low=0)
        self.eval_docs = check_int("eval_docs", self.eval_docs, low=0)
        check_choice("init_W_V", self.init_W_V, ("config", "stage1-optimum"))
        if self.data.source == "population" and self.model.batch_form == "position":
            raise ValueError(
                "source='population' needs merged tokens (count_based='auto' or 'always'): infinite "
                f"documents have no positions, got count_based={self.model.count_based!r}"
            )
        if self.init_W_V == "stage1-optimum" and self.model.embedding != "one-hot":
            raise ValueError("init_W_V='stage1-optimum' needs embedding='one-hot'")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        d["data"]["N"] = list(self.data.N) if isinstance(self.data.N, tuple) else self.data.N
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        d = dict(d)
        data = dict(d.pop("data"))
        if isinstance(data.get("N"), list):
            data["N"] = tuple(data["N"])
        return cls(
            data=DataConfig(**data),
            model=ModelConfig.from_dict(d.pop("model")),
            optim=OptimConfig(**d.pop("optim")),
            **d,
        )


# ============================================================================ optimizers
class SGD:
    """``p <- p - lr * m``, ``m <- momentum * m + g`` (plain gradient descent for momentum 0).

    Gradient descent from ``W = 0`` stays in the row space of the data, so on the stage-1
    population loss it converges to the minimum-norm minimizer (SPEC §6 item 9).
    """

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.state: dict[str, np.ndarray] = {}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float):
        mom = self.cfg.momentum
        self.t += 1
        for n, p in params.items():
            g = grads[n]
            if mom > 0:
                buf = self.state.setdefault(n, np.zeros_like(p))
                buf *= mom
                buf += g
                g = buf
            p -= lr * g

    def state_dict(self) -> dict:
        return {"t": self.t, **{f"m/{k}": v.copy() for k, v in self.state.items()}}

    def load_state_dict(self, st: dict):
        self.t = int(st["t"])
        self.state = {k[2:]: np.array(v) for k, v in st.items() if k.startswith("m/")}


class Adam:
    """Adam (Kingma & Ba) with bias correction; no weight decay (the L2 term is in the loss)."""

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float):
        b1, b2, eps = self.cfg.beta1, self.cfg.beta2, self.cfg.eps
        self.t += 1
        c1 = 1.0 - b1**self.t
        c2 = 1.0 - b2**self.t
        for n, p in params.items():
            g = grads[n]
            m = self.m.setdefault(n, np.zeros_like(p))
            v = self.v.setdefault(n, np.zeros_like(p))
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + eps)

    def state_dict(self) -> dict:
        out = {"t": self.t}
        out.update({f"m/{k}": a.copy() for k, a in self.m.items()})
        out.update({f"v/{k}": a.copy() for k, a in self.v.items()})
        return out

    def load_state_dict(self, st: dict):
        self.t = int(st["t"])
        self.m = {k[2:]: np.array(a) for k, a in st.items() if k.startswith("m/")}
        self.v = {k[2:]: np.array(a) for k, a in st.items() if k.startswith("v/")}


def make_optimizer(cfg: OptimConfig):
    return SGD(cfg) if cfg.name == "sgd" else Adam(cfg)


# ============================================================================ references
def stage1_reference(tm: TopicModel, mk: Masking) -> np.ndarray:
    """Min-norm stage-1 ``W^V = C Sigma^+`` from the exact moments (independent of the solvers)."""
    from ..population import moments

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


# ============================================================================ trainer
@dataclass
class TrainResult:
    """Summary of a run: final metrics, best dev loss, stage boundaries, run folder."""

    steps: int
    final: dict
    best_dev_loss: float | None
    stages: dict | None
    out: str | None
    seconds: float
    model: Transformer = field(repr=False, default=None)


class Trainer:
    """Runs a :class:`TrainConfig`; see the module docstring for the run folder."""

    def __init__(self, cfg: TrainConfig, out=None, *, progress: bool = True, figures: bool = True):
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.out = None if out is None else Path(out)
        self.progress = progress
        self.figures = figures
        self.tm = cfg.data.topic_model()
        self.mk = cfg.data.masking()
        self.model = Transformer(cfg.model, rng=np.random.default_rng([cfg.seed, 0]))
        mc = cfg.model
        self.ref_W_V = None
        if cfg.init_W_V == "stage1-optimum" or _is_stage1_model(mc):
            if self.tm.prior == "uniform-tau" or cfg.init_W_V == "stage1-optimum":
                self.ref_W_V = stage1_reference(self.tm, self.mk)
        if cfg.init_W_V == "stage1-optimum":
            for lay in self.model.layers:
                lay.params["W_V"][...] = self.ref_W_V[None]
        self.opt = make_optimizer(cfg.optim)
        self.step = 0
        self._pop = None
        self._train_set = None
        self._dev = None
        self._eval_tokens = None
        self._ref_gram = None
        #: every metrics record logged by :meth:`run` in this process (also without a run folder)
        self.history: list[dict] = []

    # ------------------------------------------------------------------ data
    def _make_batch(self, masked):
        d, mc = self.cfg.data, self.cfg.model
        return make_batch(mc, masked.inputs, masked.selected, masked.targets, average=d.average)

    def _static_sets(self):
        if self._train_set is None:
            from ..sampling import mask_documents, sample_documents

            d = self.cfg.data
            rng = np.random.default_rng([self.cfg.seed, 3])
            docs = sample_documents(self.tm, d.n_train, d.N, rng=rng)
            self._train_set = mask_documents(docs, self.tm, self.mk, rng=rng)
            if d.n_dev:
                dev = sample_documents(self.tm, d.n_dev, d.N, rng=rng)
                self._dev = mask_documents(dev, self.tm, self.mk, rng=rng)
        return self._train_set

    def batch_at(self, step: int):
        """The training batch of step ``step`` (a pure function of seed and step)."""
        d = self.cfg.data
        if d.source == "population":
            if self._pop is None:
                self._pop = population_batch(self.tm, self.mk, mask_keys=self.cfg.model.mask_keys)
                if self.cfg.model.batch_form == "merged":
                    self._pop = self._pop.to_positions()
            return self._pop
        from ..sampling import MaskedBatch, mask_documents, sample_documents

        bs = self.cfg.batch_size
        if d.source == "fresh":
            rng = np.random.default_rng([self.cfg.seed, 1, step])
            docs = sample_documents(self.tm, bs, d.N, rng=rng)
            return self._make_batch(mask_documents(docs, self.tm, self.mk, rng=rng))
        ts = self._static_sets()
        per_epoch = max(d.n_train // bs, 1)
        epoch, k = divmod(step, per_epoch)
        perm = np.random.default_rng([self.cfg.seed, 1, epoch]).permutation(d.n_train)
        idx = perm[k * bs : (k + 1) * bs]
        sub = MaskedBatch(ts.inputs[idx], ts.selected[idx], ts.targets[idx], ts.lengths[idx])
        return self._make_batch(sub)

    def eval_tokens(self):
        """Fixed unmasked evaluation documents for attention statistics."""
        if self._eval_tokens is None and self.cfg.eval_docs:
            from ..sampling import sample_documents

            d = self.cfg.data
            docs = sample_documents(self.tm, self.cfg.eval_docs, d.N, rng=np.random.default_rng([self.cfg.seed, 2]))
            self._eval_tokens = docs.tokens
        return self._eval_tokens

    def dev_loss(self, chunk: int = 1000) -> float | None:
        """Loss on the dev set (static source; token- or document-averaged as configured)."""
        d = self.cfg.data
        if d.source != "static" or not d.n_dev:
            return None
        self._static_sets()
        dev = self._dev
        from ..sampling import MaskedBatch

        n = dev.inputs.shape[0]
        tot = 0.0
        n_sel_all = dev.selected.sum()
        for s in range(0, n, chunk):
            sl = slice(s, min(s + chunk, n))
            sub = MaskedBatch(dev.inputs[sl], dev.selected[sl], dev.targets[sl], dev.lengths[sl])
            b = self._make_batch(sub)
            # re-weight chunk averages into the full-set average
            if d.average == "token":
                w = sub.selected.sum() / n_sel_all
            else:
                w = (sl.stop - sl.start) / n
            tot += w * (self.model.loss(b) - self.model.reg_loss())
        return float(tot)

    # ------------------------------------------------------------------ metrics
    def metrics(self, step: int, loss: float, lr: float, full: bool) -> dict:
        """One metrics record. Norms are over all heads of layer 0 (``norm_KQ`` is
        ``c ||sum_h W_K,h^T W_Q,h||_F``), with per-layer lists ``norm_W_V_layers`` etc. for deeper
        models; block scores, ``K_eff`` and attention statistics are of
        layer 0, head 0; ``full`` adds the attention class averages on the fixed evaluation
        documents (length-normalised: 1 = uniform attention, see
        :func:`theorycheck.analysis.stats.attention_class_averages`), for multi-layer/multi-head models the
        same-topic : different-topic ratio of every head (``attn_topic_ratio_heads``, layer-major),
        and the dev loss."""
        from ..analysis import stats

        m = self.model
        lay = m.layers[0]
        rec = {"step": int(step), "loss": float(loss), "lr": float(lr)}
        rec["norm_W_V"] = float(np.linalg.norm(lay.params["W_V"]))
        rec["norm_W_K"] = float(np.linalg.norm(lay.params["W_K"]))
        rec["norm_W_Q"] = float(np.linalg.norm(lay.params["W_Q"]))
        rec["norm_KQ"] = _kq_norm(lay)
        if len(m.layers) > 1:
            for key in ("W_V", "W_K", "W_Q"):
                rec[f"norm_{key}_layers"] = [float(np.linalg.norm(la.params[key])) for la in m.layers]
            rec["norm_KQ_layers"] = [_kq_norm(la) for la in m.layers]
        if not m.embedding.one_hot:
            rec["norm_W_E"] = float(np.linalg.norm(m.embedding.params["W_E"]))
        for n in m.trainable_names():
            rec["gradnorm_" + n.replace("layers.0.", "")] = float(np.linalg.norm(m.grad(n)))
        V = lay.params["W_V"][0]
        v = self.cfg.data.v
        if self.cfg.model.embedding == "one-hot" and self.cfg.data.T > 1:
            rec["block_score_W_V"] = stats.block_score(V, v)
            rec["block_contrast_W_V"] = stats.block_contrast(V, v)
        if not m.embedding.one_hot and self.cfg.data.T > 1:
            G = m.embedding.params["W_E"].T @ m.embedding.params["W_E"]
            rec["block_score_gram"] = stats.block_score(G, v)
            rec["block_contrast_gram"] = stats.block_contrast(G, v)
            ref = self._gram_reference()
            if ref is not None:
                rec["dist_gram_opt"] = stats.relative_distance(G, ref)
                # up to the loss's flat directions (SPEC §4.1): compare identifiable parts
                from ..solvers import identifiable_part

                rec["dist_gram_opt_identifiable"] = stats.relative_distance(
                    identifiable_part(G, self.tm, self.mk), identifiable_part(ref, self.tm, self.mk)
                )
        if self.ref_W_V is not None and "W_V" in self.cfg.model.train:
            rec["dist_W_V_opt"] = stats.relative_distance(V, self.ref_W_V)
        if self.cfg.model.attention == "softmax" and self.cfg.data.T > 1:
            rec["K_eff_median"] = float(np.median(stats.effective_K(m.score_matrix(), v)))
            K_star = self._K_star()
            if K_star is not None:
                rec["rel_dist_K_eff_opt"] = abs(rec["K_eff_median"] - K_star) / K_star
        if full:
            toks = self.eval_tokens()
            if toks is not None:
                maps = m.attention_maps(toks)
                st = stats.attention_class_averages(maps[0, 0], toks, v, normalise=True)
                rec.update({f"attn_{k}": st[k] for k in ("same_word", "same_topic", "diff_topic")})
                mc = self.cfg.model
                if mc.attention == "softmax" and (mc.n_layers > 1 or mc.n_heads > 1):
                    # every layer and head (pairs classified by the input tokens at the two
                    # positions, as in the official inspect_result.py): same-topic : different-topic
                    ratios = []
                    for li in range(mc.n_layers):
                        for hi in range(mc.n_heads):
                            sh = (
                                st
                                if (li, hi) == (0, 0)
                                else stats.attention_class_averages(maps[li, hi], toks, v, normalise=True)
                            )
                            ratios.append(sh["same_topic"] / sh["diff_topic"] if sh["diff_topic"] > 0 else float("nan"))
                    rec["attn_topic_ratio_heads"] = ratios
                    rec["attn_topic_ratio_max"] = float(np.nanmax(ratios))
            dl = self.dev_loss()
            if dl is not None:
                rec["dev_loss"] = dl
        return {k: (None if isinstance(x, float) and not math.isfinite(x) else x) for k, x in rec.items()}

    def _K_star(self):
        """``K*`` of ``optimal_attention`` when W^V is frozen at the stage-1 optimum (squared loss)."""
        if not hasattr(self, "_K_star_cache"):
            self._K_star_cache = None
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
                from .. import solvers

                if hasattr(solvers, "optimal_attention"):
                    self._K_star_cache = float(solvers.optimal_attention(self.tm, self.mk, value="block").K)
        return self._K_star_cache

    def _gram_reference(self):
        """Min-norm tied-embedding Gram for the embedding setting, if the solver is available."""
        mc = self.cfg.model
        if self._ref_gram is None:
            self._ref_gram = False
            if (
                mc.decoder == "tied"
                and mc.attention == "uniform"
                and mc.loss == "squared"
                and self.tm.prior == "uniform-tau"
                and "b_dec" not in mc.train
            ):
                from .. import solvers

                if hasattr(solvers, "optimal_embedding_gram"):
                    self._ref_gram = np.asarray(solvers.optimal_embedding_gram(self.tm, self.mk).x)
        return self._ref_gram if self._ref_gram is not False else None

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self):
        if self.out is None:
            return
        arrays = {f"param/{k}": v for k, v in self.model.state_dict().items()}
        ost = self.opt.state_dict()
        arrays.update({f"opt/{k}": v for k, v in ost.items() if k != "t"})
        meta = {
            "step": self.step,
            "opt_t": ost["t"],
            "seed": self.cfg.seed,
            "rng": "batch of step s drawn from default_rng([seed, 1, s]); init default_rng([seed, 0])",
        }
        tmp = self.out / "checkpoint.tmp.npz"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, self.out / "checkpoint.npz")
        tmpj = self.out / "checkpoint.tmp.json"
        tmpj.write_text(json.dumps(meta, sort_keys=True))
        os.replace(tmpj, self.out / "checkpoint.json")

    def load_checkpoint(self) -> bool:
        if self.out is None or not (self.out / "checkpoint.json").exists():
            return False
        meta = json.loads((self.out / "checkpoint.json").read_text())
        with np.load(self.out / "checkpoint.npz") as z:
            params = {k[6:]: z[k] for k in z.files if k.startswith("param/")}
            ost = {k[4:]: z[k] for k in z.files if k.startswith("opt/")}
        self.model.load_state_dict(params)
        ost["t"] = meta["opt_t"]
        self.opt.load_state_dict(ost)
        self.step = int(meta["step"])
        return True

    # ------------------------------------------------------------------ loop
    def _write_config(self):
        import numba
        import scipy

        from .. import __version__

        cfg = self.cfg.to_dict()
        cfg["versions"] = {
            "theorycheck": __version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "numba": numba.__version__,
            "python": platform.python_version(),
        }
        (self.out / "config.json").write_text(json.dumps(cfg, sort_keys=True, indent=2))

    def run(self, *, resume: bool = False, stop_at: int | None = None) -> TrainResult:
        """Train until ``cfg.steps`` (or ``stop_at``, which simulates an interruption).

        With ``resume=True`` the run continues from ``checkpoint.npz`` of the run folder and
        drops metric lines logged after the checkpoint.
        """
        cfg = self.cfg
        t0 = time.perf_counter()
        log = None
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            resumed = resume and self.load_checkpoint()
            if resumed:
                lines = []
                mpath = self.out / "metrics.jsonl"
                if mpath.exists():
                    lines = [
                        ln for ln in mpath.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] < self.step
                    ]
                mpath.write_text("".join(ln + "\n" for ln in lines))
            else:
                self._write_config()
                (self.out / "metrics.jsonl").write_text("")
            log = open(self.out / "metrics.jsonl", "a")
        end = cfg.steps if stop_at is None else min(cfg.steps, stop_at)
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.steps, initial=self.step, desc="train", unit="step", leave=False)
        params = {}
        grads = {}
        for n in self.model.trainable_names():
            mod, k = self.model.named_params()[n]
            params[n] = mod.params[k]
            grads[n] = mod.grads[k]
        last = None
        best_dev = None
        try:
            while self.step < end:
                s = self.step
                batch = self.batch_at(s)
                self.model.zero_grad()
                loss = self.model.loss_and_grad(batch)
                if not math.isfinite(loss):
                    raise FloatingPointError(f"non-finite loss {loss} at step {s}")
                lr = cfg.optim.lr
                if s % cfg.log_every == 0 or s == cfg.steps - 1:
                    full = (cfg.eval_every > 0 and s % cfg.eval_every == 0) or s == cfg.steps - 1
                    last = self.metrics(s, loss, lr, full)
                    self.history.append(last)
                    if last.get("dev_loss") is not None:
                        best_dev = last["dev_loss"] if best_dev is None else min(best_dev, last["dev_loss"])
                    if log is not None:
                        log.write(json.dumps(last, sort_keys=True) + "\n")
                        log.flush()
                self.opt.step(params, grads, lr)
                self.step += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
                if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
            if log is not None:
                log.close()
        stages = None
        if self.out is not None and self.step >= cfg.steps:
            recs = load_metrics(self.out)
            if best_dev is None or resume:
                devs = [r["dev_loss"] for r in recs if r.get("dev_loss") is not None]
                best_dev = min(devs) if devs else None
            stages = self._finish(recs)
        return TrainResult(
            steps=self.step,
            final=last or {},
            best_dev_loss=best_dev,
            stages=stages,
            out=None if self.out is None else str(self.out),
            seconds=time.perf_counter() - t0,
            model=self.model,
        )

    def _finish(self, recs):
        """Write ``params.npz``, stage boundaries and figures."""
        from ..analysis import stats
        from ..report import plots

        m = self.model
        lay = m.layers[0]
        tab = np.eye(self.cfg.data.V1) if m.embedding.one_hot else m.embedding.params["W_E"]
        arrays = {
            "W_V": lay.params["W_V"][0],
            "W_K": lay.params["W_K"][0],
            "W_Q": lay.params["W_Q"][0],
            "W_E": tab,
            "b_dec": m.decoder.params["b_dec"],
        }
        if "W_dec" in m.decoder.params:
            arrays["W_dec"] = m.decoder.params["W_dec"]
        arrays.update({f"full/{k}": v for k, v in m.state_dict().items()})
        np.savez(self.out / "params.npz", **arrays)
        stages = None
        if recs:
            steps = [r["step"] for r in recs]
            Ke = [r.get("K_eff_median") for r in recs]
            has_K = all(k is not None for k in Ke)
            bs = [r.get("block_score_W_V") for r in recs]
            has_bs = has_K and all(b is not None for b in bs)
            nV, nKQ = stage_curves(recs)
            st = stats.detect_stages(
                steps, nV, nKQ, K_eff=Ke if has_K else None, v=self.cfg.data.v, block_score=bs if has_bs else None
            )
            stages = st.to_dict()
            (self.out / "stages.json").write_text(json.dumps(stages, sort_keys=True, indent=2))
        if not self.figures:
            return stages
        figdir = self.out / "figures"
        figdir.mkdir(exist_ok=True)
        v = self.cfg.data.v
        figs = {
            "norms": plots.training_curves(recs, stages=stages, v=v),
            "W_V": plots.heatmap(lay.params["W_V"][0], title="W^V (layer 0, head 0)", block=v),
        }
        if lay.cfg.attention == "softmax":
            S = m.score_matrix()
            figs["attention"] = plots.heatmap(
                _row_softmax(S),
                title="attention over key tokens (equal counts)",
                block=v,
                symmetric=False,
                cmap="viridis",
            )
        if not m.embedding.one_hot:
            figs["gram"] = plots.heatmap(tab.T @ tab, title="embedding Gram W_E^T W_E", block=v)
        if any(r.get("attn_topic_ratio_heads") for r in recs):
            figs["attention_heads"] = plots.attention_head_ratios(recs, self.cfg.model.n_layers, self.cfg.model.n_heads)
        for name, fig in figs.items():
            fig.savefig(figdir / f"{name}.png", dpi=110)
        return stages


def _kq_norm(lay) -> float:
    """``c ||sum_h W_K,h^T W_Q,h||_F`` of one attention layer."""
    P = lay.params
    return float(np.linalg.norm(np.einsum("hak,haq->kq", P["W_K"], P["W_Q"]))) * lay.c


def stage_curves(recs) -> tuple[list, list]:
    """The two curves the norm rule of :func:`theorycheck.analysis.stats.detect_stages` reads.

    One layer: ``||W^V||_F`` and ``c ||sum_h W_K^T W_Q||_F`` (the score matrix, whose topic part
    grows at the rate of :func:`theorycheck.analysis.dynamics.stage2_onset`). Several layers: the norm of
    all value matrices together, ``sqrt(sum_l ||W^V_l||^2)``, and the largest growth factor of
    any layer's ``||W_K,l||_F ||W_Q,l||_F`` (initial value 1), i.e. stage 2 starts when the key
    and query norms of the first layer to move have grown ``sqrt(10)``-fold each. The norms
    themselves are used, as in the paper's figures, not the product matrix: from a random init
    ``||W_K^T W_Q||`` also grows by alignment alone (measured in ``deep-4x4``: 7.5x in the first
    100 steps while ``||W_K||``, ``||W_Q||`` grew 1.4x).
    """
    if recs and "norm_W_K_layers" in recs[0]:

        def kq(r):
            return np.asarray(r["norm_W_K_layers"], dtype=float) * np.asarray(r["norm_W_Q_layers"], dtype=float)

        k0 = kq(recs[0])
        k0 = np.where(k0 > 0, k0, np.finfo(float).tiny)
        nV = [float(np.sqrt(np.sum(np.square(r["norm_W_V_layers"])))) for r in recs]
        nKQ = [float(np.max(kq(r) / k0)) for r in recs]
        return nV, nKQ
    return [r["norm_W_V"] for r in recs], [r["norm_KQ"] for r in recs]


def _row_softmax(S):
    e = np.exp(S - S.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def load_metrics(out) -> list[dict]:
    """Read ``metrics.jsonl`` of a run folder."""
    path = Path(out) / "metrics.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def train(
    cfg: TrainConfig, out=None, *, progress: bool = True, resume: bool = False, figures: bool = True
) -> TrainResult:
    """Run ``cfg`` (optionally writing the run folder ``out``); see :class:`Trainer`."""
    return Trainer(cfg, out, progress=progress, figures=figures).run(resume=resume)


# ============================================================================ presets
def _preset_official_demo() -> TrainConfig:
    """The released demo (SPEC §5.1): LDA alpha = 0.1, T = v = 10, N ~ U[100, 150],
    uniform attention frozen, one-hot embedding, identity decoder, W^V trained with CE, Adam
    lr 0.01, batch 40, 10k static-masked training documents, selected positions hidden from the
    keys (``mask_keys``), token-averaged loss, PyTorch-like init ``U(+-1/sqrt(d))``.

    The official value projection has a bias; with uniform attention (columns summing to 1) it
    passes straight to the output, so it is the decoder bias ``b_dec`` here (trained).
    Random replacement draws words only (the official code draws any of its 104 ids).
    """
    d = DataConfig(
        T=10,
        v=10,
        tau=None,
        prior="dirichlet",
        alpha=0.1,
        N=(100, 150),
        source="static",
        n_train=10_000,
        n_dev=10_000,
        average="token",
    )
    m = ModelConfig(
        V1=d.V1,
        attention="uniform",
        train=("W_V", "b_dec"),
        loss="ce",
        init="uniform",
        init_scale=1.0 / math.sqrt(d.V1),
        mask_keys=True,
    )
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.01),
        steps=3000,
        batch_size=40,
        log_every=50,
        eval_every=250,
        checkpoint_every=500,
    )


def _preset_stage1_population() -> TrainConfig:
    """Exact population gradient descent on W^V from 0 (uniform attention, squared loss, T = v = 10,
    tau = 3): converges to the min-norm ``C Sigma^+`` (SPEC §4.2, §6 item 9).
    ``lr = 40`` is close to ``2/(lambda_min + lambda_max)`` of the Hessian ``2 Sigma`` on its range."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(V1=d.V1, attention="uniform", train=("W_V",), init_V="zero", loss="squared")
    return TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=40.0), steps=300, log_every=5, eval_every=100)


def _preset_stage2_population() -> TrainConfig:
    """W^V frozen at the stage-1 optimum; W^K, W^Q (d_a = V1) trained on the exact population with
    the squared loss from a small random init (Adam lr 0.05). Compare ``K_eff`` with
    ``optimal_attention(tm, mk).K`` (SPEC §4.3)."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(V1=d.V1, attention="softmax", train=("W_K", "W_Q"), init="normal", init_scale=0.1, loss="squared")
    return TrainConfig(
        data=d,
        model=m,
        optim=OptimConfig("adam", lr=0.05),
        steps=400,
        log_every=10,
        eval_every=100,
        init_W_V="stage1-optimum",
    )


def _preset_two_stage() -> TrainConfig:
    """Joint W^K, W^Q, W^V training from a small init (N(0, 0.01^2)) by exact population gradient
    descent at the paper's size (squared loss, T = v = 10, tau = 3, SGD lr 30, ``scale="none"``):
    ||W^V|| plateaus first (stage 1 ends near step 20), then the topic part of the scores grows
    at the rate predicted by :func:`theorycheck.analysis.dynamics.stage2_onset` and attention turns
    topic-aware (SPEC §4.5, §5.2). lr 30 keeps the loss decreasing at every logged step
    (at lr 40 stage 2 comes ~25% sooner but the loss spikes once attention sharpens). About
    45 ms per step on one core."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(
        V1=d.V1,
        attention="softmax",
        train=("W_K", "W_Q", "W_V"),
        init="normal",
        init_scale=0.01,
        loss="squared",
        scale="none",
    )
    return TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=30.0), steps=3000, log_every=10, eval_every=500)


def _preset_embedding() -> TrainConfig:
    """Trained embedding with tied decoder, W^V = I frozen, uniform attention, squared loss, exact
    population, from N(0, 0.01^2): the Gram ``W_E^T W_E`` approaches the min-norm Gram
    (``optimal_embedding_gram``) up to the rotation invariance of ``W_E`` and the loss's flat
    directions (SPEC §4.1): ``dist_gram_opt_identifiable`` compares the identifiable parts,
    ``dist_gram_opt`` the whole Grams (the flat part keeps its O(init^2) start value)."""
    d = DataConfig(T=10, v=10, tau=3, source="population")
    m = ModelConfig(
        V1=d.V1,
        d=d.V1,
        embedding="trained",
        decoder="tied",
        attention="uniform",
        train=("W_E",),
        init="normal",
        init_scale=0.01,
        init_V="identity",
        loss="squared",
    )
    return TrainConfig(data=d, model=m, optim=OptimConfig("sgd", lr=5.0), steps=3000, log_every=20, eval_every=500)


def _preset_deep() -> TrainConfig:
    """4 layers x 4 heads (summed), one-hot embedding, residual + layer norm, trained decoder,
    CE, plain SGD (lr 1; lr 2, 3 and 10 diverged from an N(0, 0.01^2) init) from a small init
    (N(0, 0.003^2)), score factor 1, fresh LDA documents (SPEC §5.3; the paper's exact
    settings for its Figure 5 are [UNREC]). SGD, not Adam: Adam moves every coordinate at a rate
    ~ lr from the first step, which hides the stages in the norms (see the ``ablation`` preset).
    Stages are read from all layers (:func:`stage_curves`); ``figures/norms.png`` shows
    ``||W^V_l||`` and ``||W_K,l^T W_Q,l||`` per layer, ``figures/attention_heads.png`` the
    same-topic : different-topic attention ratio of every head. Identical tokens of a document
    share one row (exact, :meth:`theorycheck.nn._model.CountBatch.to_positions`): about 0.1 s per step."""
    d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
    m = ModelConfig(
        V1=d.V1,
        n_layers=4,
        n_heads=4,
        d_a=16,
        residual=True,
        layer_norm=True,
        decoder="trained",
        train=("W_K", "W_Q", "W_V", "W_dec", "b_dec"),
        init="normal",
        init_scale=0.003,
        loss="ce",
        scale="none",
    )
    return TrainConfig(
        data=d, model=m, optim=OptimConfig("sgd", lr=1.0), steps=1500, batch_size=16, log_every=10, eval_every=250
    )


#: (optimizer, loss) -> (learning rate, steps) of the ablation grid; each lr is the largest of a
#: x3 ladder that trained stably at T = v = 10 (SGD + CE at lr 10 diverged; see the README).
ABLATION_SETTINGS = {
    ("sgd", "squared"): (40.0, 3000),
    ("sgd", "ce"): (3.0, 2500),
    ("adam", "squared"): (1e-3, 1000),
    ("adam", "ce"): (1e-3, 1000),
}


def _ablation_grid() -> list[tuple[str, TrainConfig]]:
    """SGD/Adam x squared/CE x (reg 0 / 1e-6), joint W^K, W^Q, W^V training from N(0, 0.01^2) on
    the paper's synthetic data (LDA alpha = 0.1, T = v = 10, N ~ U[100, 150], fresh minibatches of
    40 documents; SPEC §5.2, §6 item 23). Stages are read with the structural rule of
    :func:`theorycheck.analysis.stats.detect_stages` (W^V block score, then ``K_eff``): under Adam every
    coordinate moves at a rate ~ lr from the first step, so norms alone cannot show the stages.

    The L2 level 1e-6 is chosen below the stage-2 threshold ``reg < sigma_max / 2`` of
    :func:`theorycheck.analysis.dynamics.stage2_onset` (2.5e-5 for the squared loss at T = v = 10,
    tau = 3): with 1e-5 or 1e-4 the squared-loss runs stay in stage 1 for their whole budget."""
    out = []
    for (opt, loss), (lr, steps) in ABLATION_SETTINGS.items():
        for reg in (0.0, 1e-6):
            d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
            m = ModelConfig(
                V1=d.V1,
                attention="softmax",
                train=("W_K", "W_Q", "W_V"),
                init="normal",
                init_scale=0.01,
                loss=loss,
                reg=reg,
                scale="none",
            )
            cfg = TrainConfig(
                data=d, model=m, optim=OptimConfig(opt, lr=lr), steps=steps, batch_size=40, log_every=20, eval_every=500
            )
            out.append((f"{opt}-{loss}-reg{reg:g}", cfg))
    return out


def _compensation_grid() -> list[tuple[str, TrainConfig]]:
    """Embedding and attention compensate for each other (SPEC, overview: "if one is
    handicapped the other still encodes topics"). One layer, one head, trained embedding tied to
    the decoder (``W^dec = (W^E)^T``), W^V from the identity, CE, Adam lr 3e-3, 1000 steps on the
    paper's LDA data (T = v = 10, fresh minibatches of 40), three runs:

    - ``both``: W^E, W^K, W^Q, W^V trained from N(0, 0.01^2);
    - ``frozen-embedding``: W^E frozen at a random N(0, 1/d) matrix (unit-norm columns, no topic
      structure: Gram block score ~0.05), W^K, W^Q, W^V trained: attention takes over the topics;
    - ``frozen-attention``: attention frozen uniform, W^E and W^V trained: the embedding Gram takes
      the block pattern.

    ``summary.md`` lists the Gram block score and the same-topic : different-topic attention ratio
    (length-normalised, 1 = uniform) of each run."""
    d = DataConfig(T=10, v=10, tau=None, prior="dirichlet", alpha=0.1, N=(100, 150), source="fresh")
    common = dict(
        V1=d.V1,
        embedding="trained",
        decoder="tied",
        init="normal",
        init_scale=0.01,
        init_V="identity",
        loss="ce",
        scale="none",
    )
    models = {
        "both": ModelConfig(**common, train=("W_E", "W_K", "W_Q", "W_V")),
        "frozen-embedding": ModelConfig(**common, train=("W_K", "W_Q", "W_V"), init_scale_E=1.0 / math.sqrt(d.V1)),
        "frozen-attention": ModelConfig(**common, attention="uniform", train=("W_E", "W_V")),
    }
    return [
        (
            label,
            TrainConfig(
                data=d,
                model=m,
                optim=OptimConfig("adam", lr=3e-3),
                steps=1000,
                batch_size=40,
                log_every=20,
                eval_every=200,
            ),
        )
        for label, m in models.items()
    ]


PRESETS = {
    "official-demo": _preset_official_demo,
    "stage1-population": _preset_stage1_population,
    "stage2-population": _preset_stage2_population,
    "two-stage": _preset_two_stage,
    "embedding": _preset_embedding,
    "deep-4x4": _preset_deep,
    "ablation": _ablation_grid,
    "compensation": _compensation_grid,
}
__all__ += ["PRESETS", "preset", "run_preset", "stage_curves"]


def preset(name: str):
    """The :class:`TrainConfig` of a preset (a list of ``(label, TrainConfig)`` for ``"ablation"``)."""
    check_choice("preset", name, tuple(PRESETS))
    return PRESETS[name]()


def run_preset(
    name: str, out, *, steps: int | None = None, seed: int | None = None, progress: bool = True, resume: bool = False
) -> dict:
    """Run a preset into the folder ``out`` and return a JSON-able summary (also ``summary.json``)."""
    cfgs = preset(name)
    out = Path(out)
    grid = isinstance(cfgs, list)
    runs = cfgs if grid else [("", cfgs)]
    rows = []
    for label, cfg in runs:
        if steps is not None:
            cfg.steps = check_int("steps", steps, low=1)
        if seed is not None:
            cfg.seed = check_int("seed", seed, low=0)
        res = train(cfg, out / label if label else out, progress=progress, resume=resume)
        row = {
            "run": label or name,
            "steps": res.steps,
            "seconds": round(res.seconds, 3),
            "final_loss": res.final.get("loss"),
            "best_dev_loss": res.best_dev_loss,
        }
        if res.stages:
            row.update(
                stage1_end=res.stages["stage1_end"],
                stage2_start=res.stages["stage2_start"],
                stage2_attention=res.stages.get("stage2_attention"),
                stage1_end_attention=res.stages.get("stage1_end_attention"),
                V_growth_before_attention=res.stages.get("V_growth_before_attention"),
                stage1_end_structure=res.stages.get("stage1_end_structure"),
                block_score_at_stage2=res.stages.get("block_score_at_stage2"),
                structural_two_stage=res.stages.get("structural_two_stage"),
            )
        for k in (
            "dist_W_V_opt",
            "dist_gram_opt",
            "dist_gram_opt_identifiable",
            "K_eff_median",
            "block_score_W_V",
            "block_score_gram",
            "attn_same_topic",
            "attn_diff_topic",
        ):
            if res.final.get(k) is not None:
                row[k] = res.final[k]
        if row.get("attn_same_topic") is not None and row.get("attn_diff_topic"):
            row["attn_topic_ratio"] = row["attn_same_topic"] / row["attn_diff_topic"]
        row["trained"] = ",".join(cfg.model.train)
        row.update(_exact_references(name, cfg, res.model))
        rows.append(row)
    summary = {"preset": name, "runs": rows}
    (out).mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, sort_keys=True, indent=2))
    if grid:
        (out / "summary.md").write_text(_summary_table(rows, SUMMARY_COLUMNS.get(name, SUMMARY_COLUMNS["ablation"])))
    return summary


#: columns of ``summary.md`` for the grid presets
SUMMARY_COLUMNS = {
    "ablation": [
        "run",
        "final_loss",
        "stage1_end",
        "stage2_start",
        "stage1_end_structure",
        "stage2_attention",
        "block_score_at_stage2",
        "structural_two_stage",
        "seconds",
    ],
    "compensation": ["run", "trained", "final_loss", "block_score_gram", "attn_topic_ratio", "K_eff_median", "seconds"],
}


def _summary_table(rows, cols) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append(
            "| " + " | ".join(f"{r.get(c):.6g}" if isinstance(r.get(c), float) else str(r.get(c)) for c in cols) + " |"
        )
    return "\n".join(lines) + "\n"


def _exact_references(name, cfg: TrainConfig, model: Transformer) -> dict:
    """Cross-checks against the exact optima (solvers from other modules, when available)."""
    from .. import population, solvers

    out = {}
    tm, mk = cfg.data.topic_model(), cfg.data.masking()
    if name == "stage2-population":
        if hasattr(solvers, "optimal_attention"):
            r = solvers.optimal_attention(tm, mk, value="block")
            out["K_star"] = float(r.K)
            out["loss_star_alpha_beta"] = float(r.loss)
        if hasattr(population, "attention_loss"):
            S = model.score_matrix()
            out["attention_loss_exact"] = float(population.attention_loss(S, model.layers[0].params["W_V"][0], tm, mk))
    if name == "stage1-population" and hasattr(solvers, "optimal_value_matrix"):
        from ..analysis.stats import relative_distance

        ref = solvers.optimal_value_matrix(tm, mk, reg=0.0, method="closed-form").x
        out["dist_W_V_solver"] = relative_distance(model.layers[0].params["W_V"][0], ref)
    return out
