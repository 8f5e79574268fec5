"""A small transparent transformer in numpy with a hand-written backward pass (no autograd).

Column convention of the paper (SPEC §3.1): token embeddings ``Z = W^E X`` (``d x N``),

.. math::
    A(Z) = \\mathrm{softmax}_{col}\\big( c\\,(W^K Z)^T (W^Q Z) \\big),\\qquad
    \\mathrm{Attn}(Z) = \\sum_h W^V_h Z A_h(Z),\\qquad
    f(X) = W^{dec}\\, \\mathrm{LN}(Z + \\mathrm{Attn}(Z)) + b^{dec} 1^T,

entry ``(j, i)`` of ``A`` is the weight of key position ``j`` for query position ``i``;
``W^K_h, W^Q_h`` are ``d_a x d``, ``W^V_h`` is ``d x d``, ``W^dec`` is ``V1 x d``. The residual
``Z +`` and the layer norm ``LN`` are optional (both off in the paper's analysed model), and
``c = 1/sqrt(d_a)`` by default (``scale="none"`` gives ``c = 1``; the paper's use of the factor is
[UNREC], it only rescales ``W^K^T W^Q``). Layers are stacked ``n_layers`` times.

Design choices (documented deviations):

- **Multi-head = sum of heads.** Each head has its own ``d x d`` value matrix and the head
  outputs are summed. Concatenation followed by an output projection is not part of the paper's
  model (and with ``d x d`` value matrices the sum is the same function class).
- **Layer norm** has no learnable gain/bias (the following linear map absorbs an affine
  transform); ``eps = 1e-5`` as in BERT, applied after the residual (post-LN).
- **No positional encodings** (the paper's model has none). Consequently the representation of a
  position depends only on its document and its token, at every layer. A one-layer model is
  therefore evaluated *exactly* over token counts (see :class:`CountBatch`): all queries with the
  same input token share one attention distribution over the distinct key tokens weighted by
  their counts, ``O(E V1)`` for ``E`` (document, query token) groups instead of ``O(N^2)`` per
  document. Deeper models run the position path (:class:`PositionBatch`) on one row per
  distinct token, the count entering each key's logit as ``+ log count``
  (:meth:`CountBatch.to_positions`, :func:`merged_batch`); one row per position
  (:func:`position_batch`) is the reference.
- ``mask_keys=True`` reproduces the official code: the batch builders drop selected positions
  from the keys (queries at those positions attend only to unselected tokens).

Internally activations are stored row-wise (one row per position, i.e. ``Z^T``); parameters are
stored in the paper's orientation. Every layer owns ``params`` and ``grads`` dicts with the same
keys; ``forward`` caches what ``backward`` needs; ``backward`` accumulates with ``+=``;
``zero_grad`` is separate.

Losses (SPEC §2.2), over the selected positions of a batch, each weighted:
squared ``||o - e_x||^2`` over all ``V1`` output coordinates, or cross-entropy
``-log softmax(o)_x``; plus ``reg * ||W||_F^2`` for every trained matrix (not biases).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sp

from .._validate import check_choice, check_int, check_real
from ._kernels import gather_softmax, softmax_bwd
from ._kernels import softmax_bwd_ref as _softmax_bwd  # any ndim (position path)

__all__ = [
    "ModelConfig",
    "Transformer",
    "CountBatch",
    "PositionBatch",
    "count_batch",
    "merged_batch",
    "make_batch",
    "position_batch",
    "population_batch",
    "PARAM_NAMES",
]

#: Parameter names that can be listed in ``ModelConfig.train``.
PARAM_NAMES = ("W_E", "W_K", "W_Q", "W_V", "W_dec", "b_dec")
LN_EPS = 1e-5


# ============================================================================ config
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
        check_choice("loss", self.loss, ("squared", "ce"))
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
        return 1.0 / math.sqrt(self.d_a) if self.scale == "sqrt" else 1.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["train"] = list(self.train)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        d = dict(d)
        d["train"] = tuple(d.get("train", ()))
        return cls(**d)


# ============================================================================ batches
@dataclass
class CountBatch:
    """A batch in token-count form (exact for position-free one-layer models).

    ``G`` contexts (documents, or topic sets for the population) and ``E`` query groups.

    Attributes
    ----------
    K : ndarray, shape (G, V1)
        Key weights per context: counts of each key token (or its N -> inf density).
    ctx : ndarray of int, shape (E,)
        Context of each query group (sorted).
    qtok : ndarray of int, shape (E,)
        Input token of the query.
    weight : ndarray, shape (E,)
        Total loss weight of the group (``sum(Y[e])``).
    Y : ndarray, shape (E, V1)
        Weighted target counts: the loss is ``sum_e sum_x Y[e, x] l(o_e, x)``.
    """

    K: np.ndarray
    ctx: np.ndarray
    qtok: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    _P_ctx: object = field(default=None, repr=False)
    _P_q: object = field(default=None, repr=False)

    def __post_init__(self):
        G, V1 = self.K.shape
        E = self.ctx.shape[0]
        ones = np.ones(E)
        self._P_ctx = sp.csr_matrix((ones, (self.ctx, np.arange(E))), shape=(G, E))
        self._P_q = sp.csr_matrix((ones, (self.qtok, np.arange(E))), shape=(V1, E))
        self._collapsed = None

    def to_positions(self) -> PositionBatch:
        """The same batch as a :class:`PositionBatch` with one row per distinct token of a context.

        Row ``(g, j)`` holds a token ``t`` that is a key of context ``g`` (``K[g, t] > 0``) or a
        query of it; its key weight is ``K[g, t]``. Without positional encodings every position
        holding ``t`` in ``g`` has the representation of that row at every layer, so the loss and
        all gradients equal those of the position batch exactly, at any depth. The cost per
        context is ``O(U^2)`` for ``U`` distinct tokens instead of ``O(N^2)``.
        """
        G, V1 = self.K.shape
        present = self.K > 0
        present[self.ctx, self.qtok] = True
        g_idx, tok = np.nonzero(present)  # row-major: sorted by context, then token
        U = present.sum(axis=1)
        start = np.concatenate(([0], np.cumsum(U)[:-1]))
        pos = np.arange(g_idx.size) - start[g_idx]
        width = int(U.max()) if G else 0
        tokens = np.full((G, width), -1, dtype=np.int64)
        tokens[g_idx, pos] = tok
        key_weight = np.zeros((G, width))
        key_weight[g_idx, pos] = self.K[g_idx, tok]
        row = np.full((G, V1), -1, dtype=np.int64)
        row[g_idx, tok] = pos
        return PositionBatch(
            tokens=tokens,
            key_valid=key_weight > 0,
            qdoc=self.ctx.copy(),
            qpos=row[self.ctx, self.qtok],
            weight=self.weight,
            Y=self.Y,
            key_weight=key_weight,
        )

    def per_context(self):
        """``(Y_g, w_g)`` summed over the query groups of each context, shapes (G, V1), (G,).

        Used when the output does not depend on the query token (uniform attention, no residual):
        the loss is linear in the targets, so groups of one context merge exactly.
        """
        if self._collapsed is None:
            self._collapsed = (np.asarray(self._P_ctx @ self.Y), np.asarray(self._P_ctx @ self.weight))
        return self._collapsed


@dataclass
class PositionBatch:
    """A batch in position form (general path, any depth).

    A row usually is one position of a document. Rows may also stand for several identical
    positions (``key_weight`` > 1, see :meth:`CountBatch.to_positions`): without positional
    encodings identical tokens of one document have identical representations at every layer,
    so merging them is exact.

    Attributes
    ----------
    tokens : ndarray of int, shape (B, N)
        Input tokens (masked documents), ``-1`` for padding.
    key_valid : ndarray of bool, shape (B, N)
        Which positions may be attended to (not padding; not selected if ``mask_keys``).
    qdoc, qpos : ndarray of int, shape (E,)
        Document and position of each loss entry.
    weight : ndarray, shape (E,)
    Y : ndarray, shape (E, V1)
        Weighted targets as in :class:`CountBatch`.
    key_weight : ndarray, shape (B, N), optional
        Multiplicity of each row as a key (default: ``key_valid`` as 0/1).
    """

    tokens: np.ndarray
    key_valid: np.ndarray
    qdoc: np.ndarray
    qpos: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    key_weight: np.ndarray | None = None

    @property
    def key_w(self) -> np.ndarray:
        """Key multiplicities (B, N) as floats: ``key_weight`` if given, else ``key_valid`` as 0/1.

        A row of weight ``k`` acts exactly as ``k`` identical key positions: its softmax logit
        gets ``+ log k`` (weight 0: not a key)."""
        if self.key_weight is not None:
            return self.key_weight
        return self.key_valid.astype(np.float64)


def _entry_weights(selected, average):
    """Per-selected-position weight: per-document mean then batch mean, or token mean."""
    B = selected.shape[0]
    n_sel = selected.sum(axis=1)
    if average == "document":
        docs_with = np.count_nonzero(n_sel)
        w_doc = np.where(n_sel > 0, 1.0 / np.maximum(n_sel, 1), 0.0) / max(docs_with, 1)
        return w_doc
    if average == "token":
        return np.full(B, 1.0 / max(int(n_sel.sum()), 1))
    raise ValueError(f"average must be 'document' or 'token', got {average!r}")


def _check_masked(inputs, selected, targets, V1):
    inputs = np.asarray(inputs)
    selected = np.asarray(selected, dtype=bool)
    targets = np.asarray(targets)
    if inputs.ndim != 2 or selected.shape != inputs.shape or targets.shape != inputs.shape:
        raise ValueError(
            f"inputs, selected and targets must be 2-d arrays of one shape, got {inputs.shape}, "
            f"{selected.shape}, {targets.shape}"
        )
    if inputs.size and (inputs.max() >= V1 or inputs.min() < -1):
        raise ValueError(f"inputs must be tokens in [0, {V1 - 1}] or -1 (padding)")
    if np.any(selected & (inputs < 0)):
        raise ValueError("selected marks a padding position (inputs == -1)")
    tsel = targets[selected]
    if tsel.size and (tsel.min() < 1 or tsel.max() >= V1):
        raise ValueError(f"targets at selected positions must be words in [1, {V1 - 1}]")
    return inputs.astype(np.int64), selected, targets.astype(np.int64)


def count_batch(inputs, selected, targets, V1: int, *, mask_keys: bool = False, average: str = "document"):
    """Token-count form of a masked batch (see :class:`CountBatch`).

    Parameters
    ----------
    inputs : int array (B, N)
        Masked input tokens (0 = [MASK]), ``-1`` padding.
    selected : bool array (B, N)
        Positions in the loss.
    targets : int array (B, N)
        Original tokens (used at selected positions).
    mask_keys : bool
        Count only unselected positions as keys (official code).
    average : {"document", "token"}
        ``"document"``: mean over the selected positions of each document, then over documents
        (theory); ``"token"``: mean over all selected positions of the batch (official code).
    """
    check_choice("average", average, ("document", "token"))
    inputs, selected, targets = _check_masked(inputs, selected, targets, V1)
    B, N = inputs.shape
    keys = (inputs >= 0) & (~selected if mask_keys else True)
    K = np.zeros((B, V1))
    rows = np.broadcast_to(np.arange(B)[:, None], inputs.shape)
    np.add.at(K, (rows[keys], inputs[keys]), 1.0)
    w_doc = _entry_weights(selected, average)
    d_idx, p_idx = np.nonzero(selected)
    q = inputs[d_idx, p_idx]
    tg = targets[d_idx, p_idx]
    code = d_idx * V1 + q
    uniq, inv = np.unique(code, return_inverse=True)
    E = uniq.size
    Y = np.zeros((E, V1))
    np.add.at(Y, (inv, tg), w_doc[d_idx])
    return CountBatch(
        K=K, ctx=(uniq // V1).astype(np.int64), qtok=(uniq % V1).astype(np.int64), weight=Y.sum(axis=1), Y=Y
    )


def merged_batch(inputs, selected, targets, V1: int, *, mask_keys: bool = False, average: str = "document"):
    """:class:`PositionBatch` with one row per distinct token of each document (key weight =
    its count as a key); exact for any depth. Arguments as :func:`count_batch`."""
    return count_batch(inputs, selected, targets, V1, mask_keys=mask_keys, average=average).to_positions()


def make_batch(cfg: ModelConfig, inputs, selected, targets, *, average: str = "document"):
    """The batch form ``cfg.batch_form`` asks for (``mask_keys`` from ``cfg``)."""
    build = {"count": count_batch, "merged": merged_batch, "position": position_batch}[cfg.batch_form]
    return build(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys, average=average)


def position_batch(inputs, selected, targets, V1: int, *, mask_keys: bool = False, average: str = "document"):
    """Position form of a masked batch (see :class:`PositionBatch`); arguments as :func:`count_batch`."""
    check_choice("average", average, ("document", "token"))
    inputs, selected, targets = _check_masked(inputs, selected, targets, V1)
    key_valid = (inputs >= 0) & (~selected if mask_keys else True)
    w_doc = _entry_weights(selected, average)
    d_idx, p_idx = np.nonzero(selected)
    E = d_idx.size
    Y = np.zeros((E, V1))
    Y[np.arange(E), targets[d_idx, p_idx]] = w_doc[d_idx]
    return PositionBatch(
        tokens=inputs,
        key_valid=key_valid,
        qdoc=d_idx.astype(np.int64),
        qpos=p_idx.astype(np.int64),
        weight=Y.sum(axis=1),
        Y=Y,
    )


def population_batch(tm, mk, *, mask_keys: bool = False):
    """Exact infinite-document population (N -> inf) as a weighted :class:`CountBatch`.

    Every ``tau``-subset ``S`` is one context with key density ``m_S = a p_S + r u + q e_0``
    (``p_S`` if ``mask_keys``: the context then holds only unselected, i.e. original, words).
    A selected position with target ``x ~ p_S`` shows [MASK] w.p. ``1 - p_c - p_r``, ``x`` w.p.
    ``p_c`` and a uniform random word w.p. ``p_r`` (SPEC §2.1), so the query groups of ``S``
    are ``[MASK]`` with targets ``(1-p_c-p_r) p_S`` and every word ``w`` with targets
    ``(p_r/(T v)) p_S + p_c p_S(w) e_w``; everything is divided by ``C(T, tau)``. The loss of a
    one-layer model on this batch is its exact population MLM loss (for uniform attention,
    :func:`theorycheck.population.value_loss`).
    """
    from ..config import check_models
    from ..population import masked_density, topic_density, topic_sets

    check_models(tm, mk)
    mk.require_masked_positions("population_batch")
    sets = topic_sets(tm)
    n, V1, nw = len(sets), tm.V1, tm.n_words
    P = np.stack([topic_density(tm, S) for S in sets])
    K = P.copy() if mask_keys else np.stack([masked_density(tm, mk, S) for S in sets])
    Y = np.zeros((n, V1, V1))
    Y[:, 0, :] = mk.p_mask * P
    Y[:, 1:, :] = (mk.p_r / nw) * P[:, None, :]
    idx = np.arange(1, V1)
    Y[:, idx, idx] += mk.p_c * P[:, 1:]
    Y = Y.reshape(n * V1, V1) / n
    ctx = np.repeat(np.arange(n), V1)
    qtok = np.tile(np.arange(V1), n)
    w = Y.sum(axis=1)
    keep = w > 0
    return CountBatch(K=K, ctx=ctx[keep], qtok=qtok[keep], weight=w[keep], Y=np.ascontiguousarray(Y[keep]))


# ============================================================================ pure maths
def _softmax_rows(logits):
    """Row softmax; rows that are entirely ``-inf`` (no key) give all zeros."""
    m = logits.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(logits - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0)


def _log_weights(w):
    """``log w`` with ``-inf`` where ``w == 0`` (softmax bias of key multiplicities)."""
    out = np.full(w.shape, -np.inf)
    np.log(w, out=out, where=w > 0)
    return out


def _key_distribution(w):
    """Rows of ``w`` normalised to sum 1 (uniform attention over weighted keys; empty rows 0)."""
    s = w.sum(axis=-1, keepdims=True)
    return w / np.where(s > 0, s, 1.0)


def _ln_fwd(R):
    mu = R.mean(axis=-1, keepdims=True)
    xc = R - mu
    inv = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + LN_EPS)
    return xc * inv, inv


def _ln_bwd(Yn, inv, dY):
    return inv * (dY - dY.mean(axis=-1, keepdims=True) - Yn * np.mean(dY * Yn, axis=-1, keepdims=True))


def _loss_head(O, Y, weight, kind):
    """``sum_e sum_x Y[e,x] l(o_e, x)`` and its gradient with respect to ``O`` (E, V1)."""
    if kind == "squared":
        loss = float(np.sum(weight * (np.sum(O * O, axis=1) + 1.0)) - 2.0 * np.sum(O * Y))
        return loss, 2.0 * weight[:, None] * O - 2.0 * Y
    m = O.max(axis=1, keepdims=True)
    e = np.exp(O - m)
    s = e.sum(axis=1, keepdims=True)
    lse = (m + np.log(s))[:, 0]
    loss = float(np.sum(weight * lse) - np.sum(O * Y))
    return loss, weight[:, None] * (e / s) - Y


# ============================================================================ layers
class Layer:
    """Base: ``params`` / ``grads`` dicts with the same keys, ``zero_grad``."""

    def __init__(self):
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self.trainable: set[str] = set()
        self.cache: dict = {}

    def zero_grad(self):
        for k in self.grads:
            self.grads[k][...] = 0.0

    def _add_param(self, name, value, trainable):
        self.params[name] = np.ascontiguousarray(value, dtype=np.float64)
        self.grads[name] = np.zeros_like(self.params[name])
        if trainable:
            self.trainable.add(name)

    def __repr__(self):
        shapes = ", ".join(
            f"{k}{tuple(v.shape)}{'' if k in self.trainable else ' frozen'}" for k, v in self.params.items()
        )
        return f"{type(self).__name__}({shapes})"


class Embedding(Layer):
    """``Z = W^E X``: token lookup (``d x V1``), or frozen one-hot (``W^E = I``, no parameter)."""

    def __init__(self, cfg: ModelConfig, rng):
        super().__init__()
        self.one_hot = cfg.embedding == "one-hot"
        self.V1, self.d = cfg.V1, cfg.d
        if not self.one_hot:
            self._add_param("W_E", _init_matrix(rng, cfg, (cfg.d, cfg.V1), cfg.init_scale_E), "W_E" in cfg.train)

    def table(self) -> np.ndarray:
        """``W^E`` (``d x V1``); the identity for one-hot embeddings."""
        return np.eye(self.V1) if self.one_hot else self.params["W_E"]

    def add_table_grad(self, dtab):
        """Accumulate ``dL/dW^E`` (``d x V1``) if trained."""
        if "W_E" in self.trainable:
            self.grads["W_E"] += dtab


class AttentionLayer(Layer):
    """One layer of ``H`` summed heads, optional residual and post-LN.

    ``params``: ``W_K``, ``W_Q`` of shape ``(H, d_a, d)`` and ``W_V`` of shape ``(H, d, d)``
    (each head in the paper's orientation).
    """

    def __init__(self, cfg: ModelConfig, rng):
        super().__init__()
        self.cfg = cfg
        H, d, da = cfg.n_heads, cfg.d, cfg.d_a
        self.uniform = cfg.attention == "uniform"
        if self.uniform:
            self._add_param("W_K", np.zeros((H, da, d)), False)
            self._add_param("W_Q", np.zeros((H, da, d)), False)
        else:
            self._add_param("W_K", _init_matrix(rng, cfg, (H, da, d)), "W_K" in cfg.train)
            self._add_param("W_Q", _init_matrix(rng, cfg, (H, da, d)), "W_Q" in cfg.train)
        if cfg.init_V == "identity":
            WV = np.broadcast_to(np.eye(d), (H, d, d)).copy()
        elif cfg.init_V == "zero":
            WV = np.zeros((H, d, d))
        else:
            WV = _init_matrix(rng, cfg, (H, d, d))
        self._add_param("W_V", WV, "W_V" in cfg.train)
        self.c = cfg.score_factor

    # ---------------------------------------------------------------- position path
    def forward(self, X, key_w):
        """``X`` (B, N, d) row-wise embeddings -> (B, N, d).

        ``key_w`` (B, N): key multiplicity of each row (bool ``key_valid`` or float weights, see
        :class:`PositionBatch`); the logit of key ``j`` gets ``+ log key_w[j]``."""
        cfg, c = self.cfg, self.c
        P = self.params
        H = cfg.n_heads
        key_w = np.asarray(key_w, dtype=np.float64)
        out = np.zeros_like(X)
        heads = []
        if self.uniform:
            hbar = _key_distribution(key_w)  # (B, N)
            Xbar = np.einsum("bj,bjd->bd", hbar, X)  # mean key embedding
            Vsum = P["W_V"].sum(axis=0)
            out += (Xbar @ Vsum.T)[:, None, :]
            heads = Xbar
        else:
            neg = _log_weights(key_w)[:, None, :]
            for h in range(H):
                Kx = X @ P["W_K"][h].T
                Qx = X @ P["W_Q"][h].T
                Vx = X @ P["W_V"][h].T
                A = _softmax_rows(c * (Qx @ Kx.transpose(0, 2, 1)) + neg)  # (B, Nq, Nk)
                out += A @ Vx
                heads.append((Kx, Qx, Vx, A))
        R = X + out if cfg.residual else out
        if cfg.layer_norm:
            Yn, inv = _ln_fwd(R)
        else:
            Yn, inv = R, None
        self.cache = dict(X=X, heads=heads, Yn=Yn, inv=inv, key_w=key_w)
        return Yn

    def backward(self, dY):
        """Accumulate parameter gradients; return ``dL/dX`` (B, N, d)."""
        cfg, c, P = self.cfg, self.c, self.params
        X, heads = self.cache["X"], self.cache["heads"]
        if cfg.layer_norm:
            dR = _ln_bwd(self.cache["Yn"], self.cache["inv"], dY)
        else:
            dR = dY
        dX = dR.copy() if cfg.residual else np.zeros_like(X)
        d = X.shape[-1]
        Xf = X.reshape(-1, d)
        if self.uniform:
            Xbar = heads
            hbar = _key_distribution(self.cache["key_w"])
            dOut = dR.sum(axis=1)  # (B, d): every query gets the same output
            Vsum = P["W_V"].sum(axis=0)
            if "W_V" in self.trainable:
                gV = dOut.T @ Xbar
                self.grads["W_V"] += gV[None, :, :]
            dXbar = dOut @ Vsum
            dX += hbar[:, :, None] * dXbar[:, None, :]
            return dX
        for h, (Kx, Qx, Vx, A) in enumerate(heads):
            dVx = A.transpose(0, 2, 1) @ dR
            dA = dR @ Vx.transpose(0, 2, 1)
            dS = c * _softmax_bwd(A, dA)
            dQx = dS @ Kx
            dKx = dS.transpose(0, 2, 1) @ Qx
            if "W_V" in self.trainable:
                self.grads["W_V"][h] += dVx.reshape(-1, d).T @ Xf
            if "W_Q" in self.trainable:
                self.grads["W_Q"][h] += dQx.reshape(-1, dQx.shape[-1]).T @ Xf
            if "W_K" in self.trainable:
                self.grads["W_K"][h] += dKx.reshape(-1, dKx.shape[-1]).T @ Xf
            dX += dVx @ P["W_V"][h] + dQx @ P["W_Q"][h] + dKx @ P["W_K"][h]
        return dX

    # ---------------------------------------------------------------- count path
    def forward_counts(self, tab, batch: CountBatch, collapsed: bool = False):
        """Count-based forward for a one-layer model. ``tab`` = ``W^E`` (d, V1) -> (E, d).

        With token tables ``K_t = W^K W^E``, ``Q_t = W^Q W^E``, ``V_t = W^V W^E`` the score of key
        token ``b`` for query token ``a`` is ``S[a, b] = c (Q_t^T K_t)[a, b]``; a query group
        ``(g, a)`` attends with weights ``softmax_b(S[a, b] + log K[g, b])`` (zero-count keys get
        weight 0), i.e. exactly the position softmax with identical keys merged. With
        ``collapsed=True`` (uniform attention, no residual) one row per context is returned (G, d).
        """
        cfg, c, P = self.cfg, self.c, self.params
        one_hot = tab is None
        logK = _log_weights(batch.K)
        heads = []
        Vt_all = [P["W_V"][h] if one_hot else P["W_V"][h] @ tab for h in range(cfg.n_heads)]
        if self.uniform:
            Hc = _key_distribution(batch.K)  # (G, V1)
            Vsum = sum(Vt_all)
            U = Hc @ Vsum.T
            if not collapsed:
                U = U[batch.ctx]
            heads = Hc
        else:
            U = 0.0
            for h in range(cfg.n_heads):
                Kt = P["W_K"][h] if one_hot else P["W_K"][h] @ tab
                Qt = P["W_Q"][h] if one_hot else P["W_Q"][h] @ tab
                S = c * (Qt.T @ Kt)  # (V1, V1) [query token, key token]
                A = gather_softmax(S, logK, batch.qtok, batch.ctx)  # fused Numba kernel
                U = U + A @ Vt_all[h].T
                heads.append((Kt, Qt, A))
        X0 = (np.eye(cfg.V1) if one_hot else tab)[:, batch.qtok].T if cfg.residual else None
        R = U + X0 if cfg.residual else U
        if cfg.layer_norm:
            Yn, inv = _ln_fwd(R)
        else:
            Yn, inv = R, None
        self.cache = dict(tab=tab, heads=heads, Vt=Vt_all, Yn=Yn, inv=inv, batch=batch, collapsed=collapsed)
        return Yn

    def backward_counts(self, dY):
        """Accumulate parameter gradients; return ``dL/dW^E`` (d, V1) or ``None`` (one-hot)."""
        cfg, c, P = self.cfg, self.c, self.params
        tab, heads, Vt_all, batch = self.cache["tab"], self.cache["heads"], self.cache["Vt"], self.cache["batch"]
        one_hot = tab is None
        dR = _ln_bwd(self.cache["Yn"], self.cache["inv"], dY) if cfg.layer_norm else dY
        dtab = None if one_hot else np.zeros_like(tab)
        if self.uniform:
            Hc = heads
            dUc = dR if self.cache["collapsed"] else batch._P_ctx @ dR  # (G, d)
            dVt = dUc.T @ Hc  # (d, V1), the same for every head
            for h in range(cfg.n_heads):
                if "W_V" in self.trainable:
                    self.grads["W_V"][h] += dVt if one_hot else dVt @ tab.T
                if not one_hot:
                    dtab += P["W_V"][h].T @ dVt
        else:
            for h, (Kt, Qt, A) in enumerate(heads):
                dVt = dR.T @ A  # (d, V1)
                dA = dR @ Vt_all[h]  # (E, V1)
                dS = c * (batch._P_q @ softmax_bwd(A, dA, out=dA))  # (V1, V1)
                dQt = Kt @ dS.T
                dKt = Qt @ dS
                if one_hot:
                    if "W_V" in self.trainable:
                        self.grads["W_V"][h] += dVt
                    if "W_Q" in self.trainable:
                        self.grads["W_Q"][h] += dQt
                    if "W_K" in self.trainable:
                        self.grads["W_K"][h] += dKt
                else:
                    if "W_V" in self.trainable:
                        self.grads["W_V"][h] += dVt @ tab.T
                    if "W_Q" in self.trainable:
                        self.grads["W_Q"][h] += dQt @ tab.T
                    if "W_K" in self.trainable:
                        self.grads["W_K"][h] += dKt @ tab.T
                    dtab += P["W_V"][h].T @ dVt + P["W_Q"][h].T @ dQt + P["W_K"][h].T @ dKt
        if cfg.residual and not one_hot:
            dtab += (batch._P_q @ dR).T
        return dtab


class Decoder(Layer):
    """``o = W^dec y + b^dec``: ``W^dec`` identity (frozen), trained (``V1 x d``) or tied ``(W^E)^T``."""

    def __init__(self, cfg: ModelConfig, rng):
        super().__init__()
        self.kind = cfg.decoder
        if self.kind == "trained":
            self._add_param("W_dec", _init_matrix(rng, cfg, (cfg.V1, cfg.d)), "W_dec" in cfg.train)
        self._add_param("b_dec", np.zeros(cfg.V1), "b_dec" in cfg.train)

    def forward(self, Yq, emb: Embedding):
        """``Yq`` (E, d) -> logits / outputs (E, V1)."""
        self.cache = dict(Yq=Yq)
        b = self.params["b_dec"]
        if self.kind == "identity":
            return Yq + b
        if self.kind == "trained":
            return Yq @ self.params["W_dec"].T + b
        return Yq @ emb.params["W_E"] + b

    def backward(self, dO, emb: Embedding):
        """Accumulate ``dW^dec``, ``db^dec`` (and the tied part of ``dW^E``); return ``dL/dYq``."""
        Yq = self.cache["Yq"]
        if "b_dec" in self.trainable:
            self.grads["b_dec"] += dO.sum(axis=0)
        if self.kind == "identity":
            return dO
        if self.kind == "trained":
            if "W_dec" in self.trainable:
                self.grads["W_dec"] += dO.T @ Yq
            return dO @ self.params["W_dec"]
        emb.add_table_grad(Yq.T @ dO)
        return dO @ emb.params["W_E"].T


def _init_matrix(rng, cfg: ModelConfig, shape, scale: float | None = None):
    scale = cfg.init_scale if scale is None else scale
    if cfg.init == "zero" or scale == 0.0:
        return np.zeros(shape)
    if cfg.init == "normal":
        return rng.normal(0.0, scale, size=shape)
    return rng.uniform(-scale, scale, size=shape)


# ============================================================================ model
class Transformer:
    """Embedding -> ``n_layers`` attention layers -> decoder, with losses (see module docstring).

    Parameters
    ----------
    cfg : ModelConfig
    rng : numpy.random.Generator, optional
    seed : int, optional
        Initialisation randomness (exactly one of ``rng`` / ``seed``, or neither for seed None).

    Examples
    --------
    >>> cfg = ModelConfig(V1=11, attention="uniform", train=("W_V",), loss="squared")
    >>> model = Transformer(cfg, seed=0)
    >>> model.trainable_names()
    ['layers.0.W_V']
    """

    def __init__(self, cfg: ModelConfig, *, rng=None, seed=None):
        from .._validate import check_rng

        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg must be a ModelConfig, got {type(cfg).__name__}")
        rng = check_rng(rng, seed)
        self.cfg = cfg
        self.embedding = Embedding(cfg, rng)
        self.layers = [AttentionLayer(cfg, rng) for _ in range(cfg.n_layers)]
        self.decoder = Decoder(cfg, rng)

    # ------------------------------------------------------------------ bookkeeping
    def modules(self):
        return (
            [("", self.embedding)] + [(f"layers.{i}.", lay) for i, lay in enumerate(self.layers)] + [("", self.decoder)]
        )

    def named_params(self) -> dict:
        """``{name: (layer, key)}`` for every parameter; layer ``i``'s keys are ``layers.i.W_V`` etc."""
        out = {}
        for prefix, mod in self.modules():
            for k in mod.params:
                out[prefix + k] = (mod, k)
        return out

    def trainable_names(self) -> list[str]:
        return [n for n, (m, k) in self.named_params().items() if k in m.trainable]

    def get(self, name):
        m, k = self.named_params()[name]
        return m.params[k]

    def grad(self, name):
        m, k = self.named_params()[name]
        return m.grads[k]

    def state_dict(self) -> dict:
        """Copies of all parameters by name."""
        return {n: m.params[k].copy() for n, (m, k) in self.named_params().items()}

    def load_state_dict(self, state: dict):
        for n, (m, k) in self.named_params().items():
            if n not in state:
                raise ValueError(f"state is missing parameter {n!r}")
            arr = np.asarray(state[n], dtype=np.float64)
            if arr.shape != m.params[k].shape:
                raise ValueError(f"parameter {n!r} must have shape {m.params[k].shape}, got {arr.shape}")
            m.params[k][...] = arr

    def zero_grad(self):
        for _, m in self.modules():
            m.zero_grad()

    def __repr__(self):
        body = "\n  ".join(repr(m) for _, m in self.modules())
        return f"Transformer(\n  {body}\n)"

    # ------------------------------------------------------------------ forward / backward
    def _check_batch(self, batch):
        V1 = self.cfg.V1
        if isinstance(batch, CountBatch):
            if not self.cfg.uses_counts:
                raise ValueError(
                    f"a CountBatch needs a one-layer model with count_based != 'never' "
                    f"(n_layers={self.cfg.n_layers}, count_based={self.cfg.count_based!r})"
                )
            if batch.K.shape[1] != V1 or batch.Y.shape[1] != V1:
                raise ValueError(f"batch vocabulary size must be V1={V1}, got {batch.K.shape[1]}")
        elif isinstance(batch, PositionBatch):
            if batch.Y.shape[1] != V1:
                raise ValueError(f"batch vocabulary size must be V1={V1}, got {batch.Y.shape[1]}")
        else:
            raise TypeError(f"batch must be a CountBatch or PositionBatch, got {type(batch).__name__}")

    def forward(self, batch):
        """Outputs ``o_e`` (E, V1) at the loss entries of ``batch`` (per context, (G, V1), when
        the output cannot depend on the query token: uniform attention without residual)."""
        self._check_batch(batch)
        emb = self.embedding
        tab = None if emb.one_hot else emb.params["W_E"]
        if isinstance(batch, CountBatch):
            Yq = self.layers[0].forward_counts(tab, batch, self._collapsed(batch))
            self._cache = ("count", None)
        else:
            toks = batch.tokens
            table = np.eye(self.cfg.V1) if tab is None else tab
            X = np.where((toks >= 0)[:, :, None], table.T[np.maximum(toks, 0)], 0.0)
            key_w = batch.key_w
            for lay in self.layers:
                X = lay.forward(X, key_w)
            Yq = X[batch.qdoc, batch.qpos]
            self._cache = ("pos", (X.shape, batch))
        return self.decoder.forward(Yq, emb)

    def backward(self, dO):
        """Back-propagate ``dL/dO`` (E, V1) into every trained parameter's ``grads`` (``+=``)."""
        emb = self.embedding
        dYq = self.decoder.backward(dO, emb)
        kind, info = self._cache
        if kind == "count":
            dtab = self.layers[0].backward_counts(dYq)
            if dtab is not None:
                emb.add_table_grad(dtab)
            return
        shape, batch = info
        dX = np.zeros(shape)
        np.add.at(dX, (batch.qdoc, batch.qpos), dYq)
        for lay in reversed(self.layers):
            dX = lay.backward(dX)
        if not emb.one_hot and "W_E" in emb.trainable:
            toks = batch.tokens
            ok = toks >= 0
            dtabT = np.zeros((self.cfg.V1, self.cfg.d))
            np.add.at(dtabT, toks[ok], dX[ok])
            emb.add_table_grad(dtabT.T)

    def _collapsed(self, batch) -> bool:
        return isinstance(batch, CountBatch) and self.cfg.attention == "uniform" and not self.cfg.residual

    def _targets(self, batch):
        return batch.per_context() if self._collapsed(batch) else (batch.Y, batch.weight)

    def reg_loss(self) -> float:
        """``reg * sum ||W||_F^2`` over trained matrices (biases excluded)."""
        if self.cfg.reg == 0.0:
            return 0.0
        tot = 0.0
        for _n, (m, k) in self.named_params().items():
            if k in m.trainable and k != "b_dec":
                tot += float(np.sum(m.params[k] ** 2))
        return self.cfg.reg * tot

    def loss(self, batch) -> float:
        """Weighted loss of ``batch`` plus the L2 term (no gradient)."""
        O = self.forward(batch)
        Y, w = self._targets(batch)
        val, _ = _loss_head(O, Y, w, self.cfg.loss)
        return val + self.reg_loss()

    def loss_and_grad(self, batch) -> float:
        """Loss (with L2 term); gradients are *accumulated* into ``grads`` (call ``zero_grad`` first)."""
        O = self.forward(batch)
        Y, w = self._targets(batch)
        val, dO = _loss_head(O, Y, w, self.cfg.loss)
        self.backward(dO)
        if self.cfg.reg > 0.0:
            for _n, (m, k) in self.named_params().items():
                if k in m.trainable and k != "b_dec":
                    m.grads[k] += 2.0 * self.cfg.reg * m.params[k]
        return val + self.reg_loss()

    # ------------------------------------------------------------------ inspection
    def score_matrix(self, layer: int = 0, head: int = 0) -> np.ndarray:
        """Token score matrix ``S[a, b] = c (W^Q W^E e_a)^T (W^K W^E e_b)`` (V1, V1) of one head.

        Meaningful as attention logits for the first layer (token embeddings as input).
        """
        lay = self.layers[layer]
        tab = np.eye(self.cfg.V1) if self.embedding.one_hot else self.embedding.params["W_E"]
        Kt = lay.params["W_K"][head] @ tab
        Qt = lay.params["W_Q"][head] @ tab
        return lay.c * (Qt.T @ Kt)

    def attention_maps(self, tokens, key_valid=None) -> np.ndarray:
        """Attention of every layer and head in one forward pass, shape ``(L, H, B, N, N)``
        (entry ``[l, h, b, i, j]``: query ``i`` on key ``j``); see :meth:`attention_weights`."""
        toks = np.asarray(tokens, dtype=np.int64)
        kv = (toks >= 0) if key_valid is None else np.asarray(key_valid, dtype=bool)
        tab = np.eye(self.cfg.V1) if self.embedding.one_hot else self.embedding.params["W_E"]
        X = np.where((toks >= 0)[:, :, None], tab.T[np.maximum(toks, 0)], 0.0)
        B, N = toks.shape
        out = np.empty((self.cfg.n_layers, self.cfg.n_heads, B, N, N))
        for li, lay in enumerate(self.layers):
            X = lay.forward(X, kv)
            if lay.uniform:
                out[li] = _key_distribution(kv.astype(np.float64))[None, :, None, :]
            else:
                for h, (_, _, _, A) in enumerate(lay.cache["heads"]):
                    out[li, h] = A
        for lay in self.layers:
            lay.cache = {}
        return out

    def attention_weights(self, tokens, layer: int = 0, head: int = 0, key_valid=None) -> np.ndarray:
        """Attention ``A[b, i, j]`` (query ``i``, key ``j``) of one head on unmasked documents.

        ``tokens`` (B, N) with ``-1`` padding. Runs the position path up to ``layer``.
        """
        toks = np.asarray(tokens, dtype=np.int64)
        kv = (toks >= 0) if key_valid is None else np.asarray(key_valid, dtype=bool)
        tab = np.eye(self.cfg.V1) if self.embedding.one_hot else self.embedding.params["W_E"]
        X = np.where((toks >= 0)[:, :, None], tab.T[np.maximum(toks, 0)], 0.0)
        for lay in self.layers[:layer]:
            X = lay.forward(X, kv)
        lay = self.layers[layer]
        if lay.uniform:
            A = np.broadcast_to(_key_distribution(kv.astype(np.float64))[:, None, :], toks.shape + (toks.shape[1],))
            return np.array(A)
        Kx = X @ lay.params["W_K"][head].T
        Qx = X @ lay.params["W_Q"][head].T
        neg = _log_weights(kv.astype(np.float64))[:, None, :]
        return _softmax_rows(lay.c * (Qx @ Kx.transpose(0, 2, 1)) + neg)
