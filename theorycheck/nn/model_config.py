"""Architecture, freeze switches and loss of the transformer (SPEC §3.1, §2.2).

The model (column convention, SPEC §3.1): ``Z = W^E X``,
``A(Z) = softmax_col(c (W^K Z)^T (W^Q Z))``, ``Attn(Z) = sum_h W^V_h Z A_h(Z)``,
``f = W^dec LN(Z + Attn(Z)) + b^dec 1^T`` (residual and LN optional), stacked ``n_layers`` times.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .._validate import check_choice, check_int, check_loss, check_real

__all__ = ["ModelConfig", "PARAM_NAMES"]

#: Parameter names that can be listed in ``ModelConfig.train``.
PARAM_NAMES = ("W_E", "W_K", "W_Q", "W_V", "W_dec", "b_dec")


@dataclass
class ModelConfig:
    """Architecture, freeze switches and loss of :class:`Transformer`.

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
    reg : float
        L2 coefficient on ``||W||_F^2`` of every trained matrix.
    train : tuple of str
        Trained parameters, a subset of :data:`PARAM_NAMES`; everything else is frozen.
    init : {"normal", "uniform", "zero"}
        Entries of ``W^K, W^Q, W^V`` (and trained ``W^E``, ``W^dec``): ``N(0, init_scale^2)``,
        ``U(-init_scale, init_scale)`` (PyTorch's default with ``init_scale = 1/sqrt(d)``), or 0.
    init_scale : float
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

    @property
    def score_factor(self) -> float:
        """Score factor ``c`` of SPEC §3.1: ``1/sqrt(d_a)`` (``scale="sqrt"``) or 1."""
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
