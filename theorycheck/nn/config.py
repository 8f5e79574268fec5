"""Training configurations (SPEC §1, §2.1, §5): data, optimizer and run settings, validated on every change.

:class:`DataConfig`, :class:`OptimConfig` and :class:`TrainConfig` are dataclasses that validate
themselves at construction **and on every attribute assignment**: ``cfg.steps = -5`` or
``cfg.optim.lr = "big"`` raises a ``ValueError``/``TypeError`` naming the field at once, and the
object keeps its previous value. Cross-object constraints (``model.V1 == T v + 1`` after
``cfg.data.T = ...``) are re-checked by :meth:`TrainConfig.validate`, which
:class:`theorycheck.nn.Trainer` calls before any work. ``cfg.replace(steps=60)`` (or
``dataclasses.replace``) returns a validated copy.

:func:`config_hash` and :func:`config_diff` identify a configuration for safe resume.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from .._io import dumps_json
from .._validate import check_choice, check_int, check_real
from ..models import GeneralTopicModel, Masking, TopicModel, is_general
from .model_config import ModelConfig

__all__ = ["DataConfig", "OptimConfig", "TrainConfig", "config_hash", "config_diff"]


class _Validated:
    """Mixin: ``_validate()`` runs after ``__init__`` and after every assignment (rolled back on error)."""

    def __post_init__(self):
        self._validate()
        object.__setattr__(self, "_ready", True)

    def __setattr__(self, name, value):
        if not self.__dict__.get("_ready", False):
            object.__setattr__(self, name, value)
            return
        names = {f.name for f in fields(self)}
        if name not in names:
            raise AttributeError(f"{type(self).__name__} has no field {name!r} (fields: {', '.join(sorted(names))})")
        old = self.__dict__[name]
        object.__setattr__(self, name, value)
        try:
            self._validate()
        except Exception:
            object.__setattr__(self, name, old)
            raise

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    def replace(self, **changes):
        """A validated copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    def _validate(self):  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass
class DataConfig(_Validated):
    """Topic model, masking, document length and data source (SPEC §1, §2.1).

    ``N`` is an int or an inclusive ``[lo, hi]`` range. ``source`` is ``"fresh"`` (new documents
    every step), ``"static"`` (a fixed masked training set visited in epochs, plus a dev set) or
    ``"population"`` (the exact N -> inf population, SPEC §4.0). ``average`` is how the loss
    averages over selected positions: ``"document"`` (theory) or ``"token"`` (official code).

    ``phi``: a general topic-word matrix (SPEC §11), a ``(T, n_words)`` row-stochastic array (stored
    as nested lists, so the configuration stays JSON); then :meth:`topic_model` is a
    :class:`~theorycheck.models.GeneralTopicModel` with ``prior``, ``tau``, ``alpha`` (a number
    or a vector of ``T``), ``T`` must equal ``phi``'s row count, ``v`` is not used and
    ``V1 = n_words + 1``. :meth:`from_model` builds the configuration from a model.
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
    phi: object = None

    def _validate(self):
        check_choice("source", self.source, ("fresh", "static", "population"))
        check_choice("average", self.average, ("document", "token"))
        self._set("n_train", check_int("n_train", self.n_train, low=1))
        self._set("n_dev", check_int("n_dev", self.n_dev, low=0))
        self._set("N", _check_N(self.N))
        if self.phi is not None:
            self._set("phi", _check_phi(self.phi, self.T))
        self.topic_model()  # validates T, v, tau, prior, alpha (and phi)
        self.masking().require_masked_positions("training")
        if self.source == "population" and self.prior != "uniform-tau":
            raise ValueError(
                "source='population' needs prior='uniform-tau' (the Dirichlet prior has a continuum of mixtures)"
            )

    def topic_model(self) -> TopicModel:
        if self.phi is not None:
            return GeneralTopicModel(self.phi, prior=self.prior, tau=self.tau, alpha=self.alpha)
        return TopicModel(T=self.T, v=self.v, tau=self.tau, prior=self.prior, alpha=self.alpha)

    @classmethod
    def from_model(cls, tm, mk: Masking | None = None, **fields) -> DataConfig:
        """The data configuration of a ``TopicModel`` or ``GeneralTopicModel`` (and ``Masking``), other
        fields (``N``, ``source``, ...) as keywords."""
        law = {"tau": tm.tau, "prior": tm.prior, "T": tm.T}
        law["alpha"] = None if tm.alpha is None else (np.asarray(tm.alpha).tolist() if is_general(tm) else tm.alpha)
        if is_general(tm):
            law["phi"] = tm.phi
        elif isinstance(tm, TopicModel):
            law["v"] = tm.v
        else:
            raise TypeError(f"tm must be a TopicModel or a GeneralTopicModel, got {type(tm).__name__}")
        if mk is not None:
            law.update(p_m=mk.p_m, p_c=mk.p_c, p_r=mk.p_r)
        return cls(**law, **fields)

    def masking(self) -> Masking:
        return Masking(p_m=self.p_m, p_c=self.p_c, p_r=self.p_r)

    @property
    def V1(self) -> int:
        return self.T * self.v + 1 if self.phi is None else len(self.phi[0]) + 1


def _check_phi(phi, T) -> list:
    """``phi`` validated (:class:`GeneralTopicModel` rules) as nested lists of floats; rows == ``T``."""
    arr = GeneralTopicModel(phi, tau=1).phi  # validates shape, sign, row sums, unused words
    if arr.shape[0] != T:
        raise ValueError(f"T must equal the number of rows of phi ({arr.shape[0]}), got T={T}")
    return np.asarray(phi, dtype=np.float64).tolist()

    @property
    def N_max(self) -> int:
        return self.N[1] if isinstance(self.N, tuple) else self.N


def _check_N(N):
    if isinstance(N, (list, tuple)):
        if len(N) != 2:
            raise ValueError(f"N must be an int or a [lo, hi] pair, got {N!r}")
        lo, hi = check_int("N[0]", N[0], low=1), check_int("N[1]", N[1], low=1)
        if hi < lo:
            raise ValueError(f"N = [lo, hi] needs lo <= hi, got {N!r}")
        return (lo, hi)
    return check_int("N", N, low=1)


@dataclass
class OptimConfig(_Validated):
    """Optimizer: ``"sgd"`` (optional heavy-ball ``momentum``) or ``"adam"`` (``beta1, beta2, eps``)."""

    name: str = "adam"
    lr: float = 0.01
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def _validate(self):
        check_choice("name", self.name, ("sgd", "adam"))
        self._set("lr", check_real("lr", self.lr, low=0.0, low_open=True))
        self._set("momentum", check_real("momentum", self.momentum, low=0.0, high=1.0, high_open=True))
        self._set("beta1", check_real("beta1", self.beta1, low=0.0, high=1.0, high_open=True))
        self._set("beta2", check_real("beta2", self.beta2, low=0.0, high=1.0, high_open=True))
        self._set("eps", check_real("eps", self.eps, low=0.0, low_open=True))


@dataclass
class TrainConfig(_Validated):
    """Everything a run needs; written to ``config.json`` and hashed into every checkpoint.

    Parameters
    ----------
    steps : int
        Optimizer steps.
    batch_size : int
        Documents per step (ignored for ``source="population"``).
    seed : int
    log_every : int
        A metrics line every ``log_every`` steps (and at the last step).
    eval_every : int
        Full evaluations (dev loss, attention statistics) every ``eval_every`` steps (0: only at the end).
    checkpoint_every : int
        Checkpoint period (0: no checkpoints). The only field a resumed run may change.
    eval_docs : int
        Unmasked documents for the attention statistics.
    init_W_V : {"config", "stage1-optimum"}
        ``"stage1-optimum"`` sets every ``W^V`` head to ``C Sigma^+`` (SPEC §4.2; needs one-hot).
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

    def _validate(self):
        if isinstance(self.data, dict):
            self._set("data", DataConfig(**self.data))
        if isinstance(self.optim, dict):
            self._set("optim", OptimConfig(**self.optim))
        if self.model is None and isinstance(self.data, DataConfig):
            self._set("model", ModelConfig(V1=self.data.V1))
        elif isinstance(self.model, dict):
            self._set("model", ModelConfig.from_dict(self.model))
        for name, typ in (("data", DataConfig), ("model", ModelConfig), ("optim", OptimConfig)):
            if not isinstance(getattr(self, name), typ):
                raise TypeError(f"{name} must be a {typ.__name__}, got {type(getattr(self, name)).__name__}")
        for name, low in (("steps", 0), ("batch_size", 1), ("seed", 0), ("log_every", 1)):
            self._set(name, check_int(name, getattr(self, name), low=low))
        for name in ("eval_every", "checkpoint_every", "eval_docs"):
            self._set(name, check_int(name, getattr(self, name), low=0))
        check_choice("init_W_V", self.init_W_V, ("config", "stage1-optimum"))
        self._check_consistency()

    def _check_consistency(self):
        if self.model.V1 != self.data.V1:
            raise ValueError(f"model.V1 must equal T*v+1 = {self.data.V1}, got model.V1={self.model.V1}")
        if self.data.source == "population" and self.model.batch_form == "position":
            raise ValueError(
                "source='population' needs merged tokens (count_based='auto' or 'always'): infinite "
                f"documents have no positions, got count_based={self.model.count_based!r}"
            )
        if self.init_W_V == "stage1-optimum" and self.model.embedding != "one-hot":
            raise ValueError("init_W_V='stage1-optimum' needs embedding='one-hot'")

    def validate(self) -> TrainConfig:
        """Re-check every field, the nested configs (also after in-place changes of ``cfg.data.*``,
        ``cfg.model.*``) and their consistency; return ``self``. Called by the trainer before any work."""
        DataConfig(**asdict(self.data))
        OptimConfig(**asdict(self.optim))
        ModelConfig.from_dict(self.model.to_dict())
        self._validate()
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        d["data"]["N"] = list(self.data.N) if isinstance(self.data.N, tuple) else self.data.N
        if d["data"]["phi"] is None:  # symmetric runs keep the configuration (and hash) they had before phi
            del d["data"]["phi"]
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


def config_hash(cfg: TrainConfig | dict) -> str:
    """SHA-256 of the canonical JSON of the full configuration (sorted keys, no whitespace)."""
    d = cfg.to_dict() if isinstance(cfg, TrainConfig) else cfg
    return hashlib.sha256(dumps_json(d, indent=None, sort_keys=True).encode()).hexdigest()


def config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The differing fields of two ``to_dict()`` configurations as ``"path: old -> new"`` lines."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k, "<missing>"), new.get(k, "<missing>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} -> {b!r}")
    return out
