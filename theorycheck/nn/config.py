"""The training configuration (SPEC §1, §2.1, §3.1, §5): data, model, optimizer and run settings.

:class:`DataConfig` (topic model, masking, documents), :class:`ModelConfig` (architecture, freeze
switches and loss of the transformer, SPEC §3.1), :class:`OptimConfig` and :class:`TrainConfig`
(everything a run needs). :class:`ModelConfig` validates at construction;
:class:`DataConfig`, :class:`OptimConfig` and :class:`TrainConfig` are dataclasses that validate
themselves at construction **and on every attribute assignment**: ``cfg.steps = -5`` or
``cfg.optim.lr = "big"`` raises a ``ValueError``/``TypeError`` naming the field at once, and the
object keeps its previous value. Cross-object constraints (``model.V1 == T v + 1`` after
``cfg.data.T = ...``) are re-checked by :meth:`TrainConfig.validate`, which
:class:`theorycheck.nn.Trainer` calls before any work. ``cfg.replace(steps=60)`` (or
``dataclasses.replace``) returns a validated copy.

:func:`config_hash` and :func:`config_diff` identify a configuration for safe resume. :data:`GRID_PRESET`,
:data:`MAX_CELLS` and :data:`MAX_GRID_STEPS` bound a stage grid (:func:`theorycheck.nn.stage_grid`); they live here,
in a module without the trainer, so that the command line states them in its help without importing it.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Self

import numpy as np

from .._io import dumps_json
from .._validate import check_choice, check_int, check_loss, check_real
from ..models import GeneralTopicModel, Masking, TopicModel, check_models

__all__ = [
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
    "PARAM_NAMES",
    "config_hash",
    "config_diff",
    "GRID_PRESET",
    "MAX_CELLS",
    "MAX_GRID_STEPS",
]

#: Parameter names that can be listed in ``ModelConfig.train``.
PARAM_NAMES = ("W_E", "W_K", "W_Q", "W_V", "W_dec", "b_dec")

#: the preset every cell of a stage grid starts from (:func:`theorycheck.nn.stage_grid`)
GRID_PRESET = "two-stage"
#: the most cells and steps per cell a stage grid accepts (checked before any work)
MAX_CELLS = 400
MAX_GRID_STEPS = 100_000


class _Validated:
    """Mixin: ``_validate()`` runs after ``__init__`` and after every assignment (rolled back on error)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every subclass is a dataclass

    def __post_init__(self) -> None:
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

    def replace(self, **changes: Any) -> Self:
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

    The fields are validated at construction and again on every assignment (an invalid assignment
    raises and leaves the previous value).

    Parameters
    ----------
    T : int
        Number of topics, ``T >= 1`` (the row count of ``phi`` when given).
    v : int
        Words per topic, ``v >= 1`` (the paper's model; unused with ``phi``). The vocabulary is
        ``V1 = T v + 1`` tokens, token 0 being [MASK].
    tau : int or None
        Topics per document, ``1 <= tau <= T``, for ``prior="uniform-tau"``; ``None`` for the Dirichlet prior.
    prior : {"uniform-tau", "dirichlet"}
        Topic prior (SPEC §1.1, §1.2).
    alpha : float or None
        Dirichlet concentration ``alpha > 0`` (required iff ``prior="dirichlet"``; a vector of ``T``
        with ``phi``).
    p_m, p_c, p_r : float
        Masking probabilities in ``[0, 1]`` with ``p_c + p_r <= 1`` and at least one masked position
        possible (:class:`~theorycheck.models.Masking`, SPEC §2.1).
    N : int or (int, int)
        Document length ``N >= 1``, or an inclusive range ``[lo, hi]`` with ``1 <= lo <= hi``
        (each document draws its length uniformly).
    source : {"fresh", "static", "population"}
        Where training batches come from (see above).
    n_train : int
        Documents of the fixed training set of ``source="static"``, ``n_train >= 1``.
    n_dev : int
        Documents of the dev set (``dev_loss``), ``n_dev >= 0``.
    average : {"document", "token"}
        How the loss averages over the selected positions.
    phi : array_like of shape (T, n_words) or None
        A general row-stochastic topic-word matrix (SPEC §11); ``None``: the paper's disjoint topics.

    Raises
    ------
    ValueError
        A field out of its range or choices (the message names it), or ``source="population"`` with
        a prior other than ``"uniform-tau"`` (the Dirichlet prior has a continuum of mixtures).

    See Also
    --------
    TrainConfig : The whole run's configuration, which holds a ``DataConfig``.
    DataStream : The batches a ``DataConfig`` produces, step by step.
    theorycheck.models.TopicModel : The topic model :meth:`topic_model` builds.

    References
    ----------
    SPEC §1.1, §1.2 (topic models), §2.1 (masking), §4.0 (the N -> inf population), §11 (general ``phi``).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig
    >>> dc = DataConfig(T=3, v=2, tau=2, N=12)
    >>> dc.V1  # T v + 1 tokens, token 0 is [MASK]
    7
    >>> dc.topic_model().tau, dc.masking().p_m
    (2, 0.15)
    >>> dc.N = (5, 4)
    Traceback (most recent call last):
        ...
    ValueError: N = [lo, hi] needs lo <= hi, got (5, 4)
    >>> dc.N  # the invalid assignment was rolled back
    12
    """

    T: int = 10
    v: int = 10
    tau: int | None = 3
    prior: str = "uniform-tau"
    alpha: float | None = None
    p_m: float = 0.15
    p_c: float = 0.1
    p_r: float = 0.1
    N: int | tuple[int, int] | list[int] = (100, 150)
    source: str = "fresh"
    n_train: int = 10_000
    n_dev: int = 1_000
    average: str = "document"
    phi: Sequence[Sequence[float]] | np.ndarray | None = None

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

    def topic_model(self) -> GeneralTopicModel:
        """The paper's :class:`~theorycheck.models.TopicModel` (``phi`` not given) or the general model of ``phi``."""
        if self.phi is not None:
            return GeneralTopicModel(self.phi, prior=self.prior, tau=self.tau, alpha=self.alpha)
        return TopicModel(T=self.T, v=self.v, tau=self.tau, prior=self.prior, alpha=self.alpha)

    @classmethod
    def from_model(cls, tm, mk: Masking | None = None, **fields) -> DataConfig:
        """The data configuration of a ``TopicModel`` or ``GeneralTopicModel`` (and ``Masking``), other
        fields (``N``, ``source``, ...) as keywords."""
        check_models(tm, general=True)
        law = {"tau": tm.tau, "prior": tm.prior, "T": tm.T, **_model_law(tm)}
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


@functools.singledispatch
def _model_law(tm: GeneralTopicModel) -> dict:
    """The fields of :class:`DataConfig` that identify ``tm`` beyond ``T, tau, prior``: its topic-word
    matrix ``phi`` and ``alpha`` as a list (SPEC §11)."""
    return {"phi": tm.phi, "alpha": None if tm.alpha is None else np.asarray(tm.alpha).tolist()}


@_model_law.register
def _(tm: TopicModel) -> dict:
    """The paper's model (SPEC §1): ``v`` and the scalar ``alpha``; no ``phi`` (O(1) storage)."""
    return {"v": tm.v, "alpha": tm.alpha}


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
class ModelConfig:
    """Architecture, freeze switches and loss of :class:`~theorycheck.nn.Transformer` (SPEC §3.1, §2.2).

    The model (column convention, SPEC §3.1): ``Z = W^E X``,
    ``A(Z) = softmax_col(c (W^K Z)^T (W^Q Z))``, ``Attn(Z) = sum_h W^V_h Z A_h(Z)``,
    ``f = W^dec LN(Z + Attn(Z)) + b^dec 1^T`` (residual and LN optional), stacked ``n_layers`` times.

    Parameters
    ----------
    V1 : int
        Vocabulary size ``T v + 1`` (token 0 is [MASK]).
    d : int, optional
        Model width; default ``V1``. Must equal ``V1`` for one-hot embeddings or an identity decoder.
    d_a : int, optional
        Key/query width; default ``d``.
    n_layers, n_heads : int
        Depth ``L >= 1`` and heads per layer ``H >= 1`` (head outputs are summed).
    embedding : {"one-hot", "trained"}
        Frozen one-hot ``W^E = I`` or a trainable ``d x V1`` matrix.
    decoder : {"identity", "trained", "tied"}
        ``W^dec = I`` (frozen), a trainable ``V1 x d`` matrix, or ``(W^E)^T`` (tied).
    attention : {"softmax", "uniform"}
        ``"uniform"`` freezes uniform attention over the keys (``W^K``, ``W^Q`` unused).
    scale : {"sqrt", "none"}
        Score factor ``c = 1/sqrt(d_a)`` or ``c = 1``.
    residual, layer_norm : bool
        Optional ``Z + Attn(Z)`` and post-LN (off in the paper's model).
    mask_keys : bool
        Hide selected positions from the keys (official code). Used by the batch builders.
    loss : {"squared", "ce"}
        Squared loss ``||o - e_x||^2`` over all ``V1`` outputs or cross-entropy ``-log softmax(o)_x``
        (SPEC §2.2).
    reg : float
        L2 coefficient ``reg >= 0`` on ``||W||_F^2`` of every trained matrix (not biases).
    train : tuple of str
        Trained parameters, a subset of :data:`PARAM_NAMES`; everything else is frozen.
    init : {"normal", "uniform", "zero"}
        Entries of ``W^K, W^Q, W^V`` (and trained ``W^E``, ``W^dec``): ``N(0, init_scale^2)``,
        ``U(-init_scale, init_scale)`` (PyTorch's default with ``init_scale = 1/sqrt(d)``), or 0.
    init_scale : float
        Scale ``>= 0`` of the initial entries (see ``init``).
    init_scale_E : float, optional
        Override of ``init_scale`` for ``W^E`` (e.g. a frozen random embedding of unit-norm
        columns, ``1/sqrt(d)``, next to a small init of the other matrices).
    init_V : {"same", "zero", "identity"}
        Override for ``W^V`` (``"same"`` follows ``init``).
    count_based : {"auto", "always", "never"}
        Merge identical tokens of a document (exact: the model has no positional encoding).
        ``"auto"``/``"always"``: one layer uses :class:`CountBatch` (attention over token counts),
        deeper models a :class:`PositionBatch` with one row per distinct token
        (:meth:`CountBatch.to_positions`); ``"never"``: one row per position.

    Raises
    ------
    ValueError
        A field out of its range or choices (the message names it), or an inconsistent combination:
        ``d != V1`` with a one-hot embedding or an identity decoder, a tied decoder without a trained
        embedding, ``"W_E"``/``"W_dec"`` trained while frozen by ``embedding``/``decoder``, or
        ``"W_K"``/``"W_Q"`` trained with uniform attention.
    TypeError
        A non-bool switch, or ``train`` given as one string.

    See Also
    --------
    Transformer : The model a ``ModelConfig`` describes.
    TrainConfig : A run's configuration, which holds a ``ModelConfig``.
    make_batch : The batch form (:attr:`batch_form`) the configuration asks for.

    References
    ----------
    SPEC §3.1 (the model, column convention), §3.2 (this toolkit's variants), §2.2 (the losses).

    Examples
    --------
    >>> from theorycheck.nn import ModelConfig
    >>> cfg = ModelConfig(V1=7)  # T = 3 topics of v = 2 words, plus [MASK]
    >>> cfg.d, cfg.d_a, cfg.train
    (7, 7, ('W_K', 'W_Q', 'W_V'))
    >>> round(cfg.score_factor, 6)  # c = 1/sqrt(d_a)
    0.377964
    >>> cfg.batch_form, ModelConfig(V1=7, n_layers=2).batch_form
    ('count', 'merged')
    >>> cfg.param_shapes()["layers.0.W_V"]  # (heads, d, d)
    (1, 7, 7)
    >>> ModelConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> ModelConfig(V1=7, d=4)
    Traceback (most recent call last):
        ...
    ValueError: d must equal V1=7 for embedding='one-hot', got d=4
    """

    V1: int
    d: int | None = None
    d_a: int | None = None
    n_layers: int = 1
    n_heads: int = 1
    embedding: str = "one-hot"
    decoder: str = "identity"
    attention: str = "softmax"
    scale: str = "sqrt"
    residual: bool = False
    layer_norm: bool = False
    mask_keys: bool = False
    loss: str = "squared"
    reg: float = 0.0
    train: tuple = ("W_K", "W_Q", "W_V")
    init: str = "normal"
    init_scale: float = 0.02
    init_scale_E: float | None = None
    init_V: str = "same"
    count_based: str = "auto"

    def __post_init__(self):
        self.V1 = check_int("V1", self.V1, low=2)
        self.d = self.V1 if self.d is None else check_int("d", self.d, low=1)
        self.d_a = self.d if self.d_a is None else check_int("d_a", self.d_a, low=1)
        self.n_layers = check_int("n_layers", self.n_layers, low=1)
        self.n_heads = check_int("n_heads", self.n_heads, low=1)
        check_choice("embedding", self.embedding, ("one-hot", "trained"))
        check_choice("decoder", self.decoder, ("identity", "trained", "tied"))
        check_choice("attention", self.attention, ("softmax", "uniform"))
        check_choice("scale", self.scale, ("sqrt", "none"))
        self.loss = check_loss(self.loss)
        check_choice("init", self.init, ("normal", "uniform", "zero"))
        check_choice("init_V", self.init_V, ("same", "zero", "identity"))
        check_choice("count_based", self.count_based, ("auto", "always", "never"))
        for name in ("residual", "layer_norm", "mask_keys"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        self.reg = check_real("reg", self.reg, low=0.0)
        self.init_scale = check_real("init_scale", self.init_scale, low=0.0)
        if self.init_scale_E is not None:
            self.init_scale_E = check_real("init_scale_E", self.init_scale_E, low=0.0)
        if isinstance(self.train, str):
            raise TypeError(f"train must be a tuple of parameter names, got the string {self.train!r}")
        self.train = tuple(self.train)
        for p in self.train:
            check_choice("train", p, PARAM_NAMES)
        if self.embedding == "one-hot" and self.d != self.V1:
            raise ValueError(f"d must equal V1={self.V1} for embedding='one-hot', got d={self.d}")
        if self.decoder == "identity" and self.d != self.V1:
            raise ValueError(f"d must equal V1={self.V1} for decoder='identity', got d={self.d}")
        if self.decoder == "tied" and self.embedding != "trained":
            raise ValueError("decoder='tied' needs embedding='trained' (W^dec = (W^E)^T)")
        if "W_E" in self.train and self.embedding != "trained":
            raise ValueError("train contains 'W_E' but embedding='one-hot' is frozen; use embedding='trained'")
        if "W_dec" in self.train and self.decoder != "trained":
            raise ValueError(f"train contains 'W_dec' but decoder={self.decoder!r}; use decoder='trained'")
        if self.attention == "uniform" and ({"W_K", "W_Q"} & set(self.train)):
            raise ValueError("train contains 'W_K'/'W_Q' but attention='uniform' freezes them; drop them from train")

    @property
    def uses_counts(self) -> bool:
        """Whether the one-layer count-based (token-count) attention path is used."""
        return self.n_layers == 1 and self.count_based != "never"

    @property
    def batch_form(self) -> str:
        """``"count"`` (:class:`CountBatch`), ``"merged"`` (:class:`PositionBatch`, one row per
        distinct token of a document) or ``"position"`` (one row per position)."""
        if self.count_based == "never":
            return "position"
        return "count" if self.n_layers == 1 else "merged"

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of every parameter of the model (trained or frozen), by name (``layers.k.W_V`` per layer),
        from the configuration alone (Python ints: no overflow for any size)."""
        V1, d, da, H = self.V1, self.d, self.d_a, self.n_heads
        assert d is not None and da is not None  # set by __post_init__
        shapes: dict[str, tuple[int, ...]] = {}
        if self.embedding == "trained":
            shapes["W_E"] = (d, V1)
        for k in range(self.n_layers):
            shapes.update({f"layers.{k}.W_Q": (H, da, d), f"layers.{k}.W_K": (H, da, d), f"layers.{k}.W_V": (H, d, d)})
        if self.decoder == "trained":
            shapes["W_dec"] = (V1, d)
        shapes["b_dec"] = (V1,)
        return shapes

    def memory_entries(self, optimizer_states: int = 0) -> int:
        """float64 entries alive at once in a :class:`~theorycheck.nn.Transformer` of this configuration: every
        parameter and its gradient, ``optimizer_states`` more per trained parameter (Adam: 2), the largest
        parameter once more (its initial value before it is stored) and, for a one-hot embedding, the ``V1 x V1``
        identity table a forward pass builds. The memory guard's input (``theorycheck._memory.check_alloc``)."""
        sizes = {name: math.prod(shape) for name, shape in self.param_shapes().items()}
        trained = sum(n for name, n in sizes.items() if name.rsplit(".", 1)[-1] in self.train)
        total = 2 * sum(sizes.values()) + optimizer_states * trained + max(sizes.values())
        return total + (self.V1 * self.V1 if self.embedding == "one-hot" else 0)

    @property
    def score_factor(self) -> float:
        """Score factor ``c`` of SPEC §3.1: ``1/sqrt(d_a)`` (``scale="sqrt"``) or 1."""
        assert self.d_a is not None  # set by __post_init__
        return 1.0 / math.sqrt(self.d_a) if self.scale == "sqrt" else 1.0

    def to_dict(self) -> dict:
        """JSON-ready fields (``train`` as a list); inverse of :meth:`from_dict`."""
        d = asdict(self)
        d["train"] = list(self.train)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Validated config from :meth:`to_dict` output."""
        d = dict(d)
        d["train"] = tuple(d.get("train", ()))
        return cls(**d)


@dataclass
class OptimConfig(_Validated):
    """Optimizer: ``"sgd"`` (optional heavy-ball ``momentum``) or ``"adam"`` (``beta1, beta2, eps``).

    Validated at construction and on every assignment, like :class:`DataConfig`.

    Parameters
    ----------
    name : {"sgd", "adam"}
        The optimizer (:class:`~theorycheck.nn.SGD` or :class:`~theorycheck.nn.Adam`).
    lr : float
        Learning rate, ``lr > 0``.
    momentum : float
        SGD heavy-ball momentum, ``0 <= momentum < 1`` (0: plain SGD).
    beta1, beta2 : float
        Adam's moment decay rates, each in ``[0, 1)``.
    eps : float
        Adam's denominator offset, ``eps > 0``.

    Raises
    ------
    ValueError
        A field out of its range or an unknown ``name``.

    See Also
    --------
    make_optimizer : The optimizer object of an ``OptimConfig``.
    TrainConfig : A run's configuration, which holds an ``OptimConfig``.

    References
    ----------
    SPEC §5.1, §5.2 (the optimizers of the experiments).

    Examples
    --------
    >>> from theorycheck.nn import OptimConfig
    >>> oc = OptimConfig(name="sgd", lr=0.5)
    >>> oc.replace(momentum=0.9)
    OptimConfig(name='sgd', lr=0.5, momentum=0.9, beta1=0.9, beta2=0.999, eps=1e-08)
    >>> oc.lr = 0.0
    Traceback (most recent call last):
        ...
    ValueError: lr must lie in (0, inf], got 0.0
    >>> oc.lr
    0.5
    """

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

    Validated at construction and on every assignment (like :class:`DataConfig`); nested dicts are
    converted to their configuration classes. An in-place change of a nested configuration
    (``cfg.data.T = 4``) is re-checked against the others by :meth:`validate`, which the trainer calls
    before any work.

    Parameters
    ----------
    data : DataConfig or dict
        Topic model, masking, documents and data source.
    model : ModelConfig or dict or None
        The transformer; ``None``: ``ModelConfig(V1=data.V1)`` (the paper's one-layer model).
        ``model.V1`` must equal ``data.V1``.
    optim : OptimConfig or dict
        The optimizer.
    steps : int
        Optimizer steps, ``steps >= 0``.
    batch_size : int
        Documents per step, ``batch_size >= 1`` (ignored for ``source="population"``).
    seed : int
        Seed of the initialisation and of the data, ``seed >= 0``.
    log_every : int
        A metrics line every ``log_every >= 1`` steps (and at the last step).
    eval_every : int
        Full evaluations (dev loss, attention statistics) every ``eval_every`` steps (0: only at the end).
    checkpoint_every : int
        Checkpoint period (0: no checkpoints). The only field a resumed run may change.
    eval_docs : int
        Unmasked documents for the attention statistics, ``eval_docs >= 0``.
    init_W_V : {"config", "stage1-optimum"}
        ``"stage1-optimum"`` sets every ``W^V`` head to ``C Sigma^+`` (SPEC §4.2; needs one-hot).

    Raises
    ------
    ValueError
        A field out of its range or choices, ``model.V1 != data.V1``, ``source="population"`` with
        ``count_based="never"`` (infinite documents have no positions), or ``init_W_V="stage1-optimum"``
        without a one-hot embedding.
    TypeError
        ``data``, ``model`` or ``optim`` of the wrong type.

    See Also
    --------
    train : Run a ``TrainConfig``.
    preset : The named configurations of the paper's experiments.
    config_hash : The identity of a configuration (checked on resume).

    References
    ----------
    SPEC §5.1, §5.2 (the experiments these configurations reproduce), §4.2 (the stage-1 optimum).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, TrainConfig
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), steps=5, batch_size=8)
    >>> cfg.model.V1  # ModelConfig(V1 = T v + 1) by default
    7
    >>> TrainConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> cfg.replace(steps=-1)
    Traceback (most recent call last):
        ...
    ValueError: steps must lie in [0, inf], got -1
    >>> cfg.data.T = 4  # valid for the DataConfig alone, but the model no longer fits
    >>> cfg.validate()
    Traceback (most recent call last):
        ...
    ValueError: model.V1 must equal T*v+1 = 9, got model.V1=7
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = None  # type: ignore[assignment]  # None -> ModelConfig(V1=data.V1) in _validate
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
    """SHA-256 of the canonical JSON of the full configuration (sorted keys, no whitespace).

    Parameters
    ----------
    cfg : TrainConfig or dict
        A configuration, or its ``TrainConfig.to_dict()`` form (the same hash).

    Returns
    -------
    str
        64 hexadecimal digits; equal for equal configurations. Every checkpoint stores it, and a
        resumed run refuses a checkpoint of another hash.

    See Also
    --------
    config_diff : The fields in which two configurations differ.
    load_checkpoint : Where the hash is checked.

    References
    ----------
    SPEC §5 (safe resume of a run).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, TrainConfig, config_hash
    >>> a = TrainConfig(data=DataConfig(T=3, v=2, N=12), steps=5)
    >>> h = config_hash(a)
    >>> len(h), h == config_hash(a.to_dict()), h == config_hash(a.replace(steps=6))
    (64, True, False)
    """
    d = cfg.to_dict() if isinstance(cfg, TrainConfig) else cfg
    return hashlib.sha256(dumps_json(d, indent=None, sort_keys=True).encode()).hexdigest()


def config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The differing fields of two ``to_dict()`` configurations as ``"path: old -> new"`` lines.

    Parameters
    ----------
    old, new : dict
        Two configurations in ``TrainConfig.to_dict()`` form (nested dicts are compared field by field).
    prefix : str
        Prepended to every path (the recursion's ``"data."``, ``"model."``, ...).

    Returns
    -------
    list of str
        One ``"path: old -> new"`` line per differing leaf, in sorted key order; a field missing on
        one side shows as ``<missing>``, a long value (e.g. a matrix ``phi``) by its shape and a prefix.
        Empty for equal configurations.

    See Also
    --------
    config_hash : Whether two configurations are equal, in one string.
    load_checkpoint : Reports this diff when a checkpoint belongs to another configuration.

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, TrainConfig, config_diff
    >>> a = TrainConfig(data=DataConfig(T=3, v=2, N=12), steps=5)
    >>> b = a.replace(steps=6, data=a.data.replace(N=(10, 14)))
    >>> for line in config_diff(a.to_dict(), b.to_dict()):
    ...     print(line)
    data.N: 12 -> [10, 14]
    steps: 5 -> 6
    >>> config_diff(a.to_dict(), a.to_dict())
    []
    """
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k, "<missing>"), new.get(k, "<missing>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {_brief(a)} -> {_brief(b)}")
    return out


def _brief(x, limit: int = 80) -> str:
    """``repr(x)``, or for a long one (a topic-word matrix ``phi`` as nested lists) its shape and a prefix."""
    text = repr(x)
    if len(text) <= limit:
        return text
    if isinstance(x, list):
        shape = [len(x)]
        inner = x[0] if x else None
        while isinstance(inner, list):
            shape.append(len(inner))
            inner = inner[0] if inner else None
        return f"<{' x '.join(map(str, shape))} array {text[: limit // 2]}...>"
    return text[:limit] + "..."
