"""The transformer: embedding -> ``n_layers`` attention layers -> decoder, with its losses.

Column convention of the paper (SPEC §3.1): token embeddings ``Z = W^E X`` (``d x N``),

.. math::
    A(Z) = \\mathrm{softmax}_{col}\\big( c\\,(W^K Z)^T (W^Q Z) \\big),\\qquad
    \\mathrm{Attn}(Z) = \\sum_h W^V_h Z A_h(Z),\\qquad
    f(X) = W^{dec}\\, \\mathrm{LN}(Z + \\mathrm{Attn}(Z)) + b^{dec} 1^T,

entry ``(j, i)`` of ``A`` is the weight of key position ``j`` for query position ``i``;
``W^K_h, W^Q_h`` are ``d_a x d``, ``W^V_h`` is ``d x d``, ``W^dec`` is ``V1 x d``. The residual
``Z +`` and the layer norm ``LN`` are optional (both off in the paper's analysed model), and
``c = 1/sqrt(d_a)`` by default (``scale="none"`` gives ``c = 1``; it only rescales ``W^K^T W^Q``).

Design choices (documented deviations):

- **Multi-head = sum of heads**, each with its own ``d x d`` value matrix (with ``d x d`` value
  matrices the same function class as concatenation plus an output projection).
- **Layer norm** has no learnable gain/bias (the following linear map absorbs it);
  ``eps = 1e-5`` as in BERT, applied after the residual (post-LN).
- **No positional encodings** (as in the paper). The representation of a position depends only
  on its document and its token, at every layer, so a one-layer model is evaluated exactly over
  token counts (:class:`~theorycheck.nn.CountBatch`) and deeper models on one row per distinct
  token (:meth:`~theorycheck.nn.CountBatch.to_positions`); one row per position is the reference.
- ``mask_keys=True`` reproduces the official code: the batch builders drop selected positions
  from the keys.

Losses (SPEC §2.2) over the selected positions, each weighted: squared ``||o - e_x||^2`` over all
``V1`` output coordinates or cross-entropy ``-log softmax(o)_x``; plus ``reg * ||W||_F^2`` for every
trained matrix (not biases). The arithmetic lives in the pure functions of
:mod:`theorycheck.nn.layers` and :mod:`theorycheck.nn.rowwise` (loss heads); the layer objects are
in :mod:`theorycheck.nn.modules`.
"""

from __future__ import annotations

import numpy as np

from .._memory import check_alloc
from .._validate import check_rng
from ._factored_kernels import factored_loss_grad
from .batches import CountBatch, PositionBatch
from .config import ModelConfig
from .layers import attention_forward, key_distribution, log_weights
from .modules import AttentionLayer, Decoder, Embedding
from .rowwise import loss_head

__all__ = ["Transformer"]

#: the fused route falls back to the layer-by-layer one when a softmax normaliser is below this
_MIN_NORMALISER = 1e-280


def _packing(batch: PositionBatch):
    """``(rows, tokens, qrow)`` of the packed position path: the flat indices of the non-padding
    positions of ``batch.tokens`` (B, N), their tokens, and the packed row of every loss entry."""
    flat = batch.tokens.ravel()
    rows = np.flatnonzero(flat >= 0)
    where = np.full(flat.size, -1, dtype=np.int64)
    where[rows] = np.arange(rows.size)
    return rows, flat[rows], where[batch.qdoc * batch.tokens.shape[1] + batch.qpos]


def check_model_memory(what: str, cfg: ModelConfig, optimizer_states: int = 0) -> None:
    """The memory guard on a model of configuration ``cfg`` (:meth:`ModelConfig.memory_entries`), before any
    parameter is allocated: a ``ValueError`` with the estimate and the limit."""
    shape = f"V1={cfg.V1}, d={cfg.d}, d_a={cfg.d_a}, {cfg.n_layers} layer(s) of {cfg.n_heads} head(s)"
    check_alloc(
        f"{what}({shape}): parameters, gradients{' and optimizer state' if optimizer_states else ''}",
        (cfg.memory_entries(optimizer_states),),
        alternative="a smaller model (fewer topics or words: V1 = T v + 1; or a trained embedding of width d < V1)",
    )


class Transformer:
    """Embedding -> ``n_layers`` attention layers -> decoder, with losses (see module docstring).

    In the column convention of SPEC §3.1, with ``Z = W^E X`` (``d x N``):

    .. math::
        A(Z) = \\mathrm{softmax}_{col}\\big( c\\,(W^K Z)^T (W^Q Z) \\big),\\qquad
        \\mathrm{Attn}(Z) = \\sum_h W^V_h Z A_h(Z),\\qquad
        f(X) = W^{dec}\\, \\mathrm{LN}(Z + \\mathrm{Attn}(Z)) + b^{dec} 1^T

    (residual and LN optional), stacked ``n_layers`` times. The loss of a batch is
    ``sum_e sum_x Y[e, x] l(o_e, x) + reg sum ||W||_F^2`` over its loss entries ``e`` (SPEC §2.2), with
    ``l`` squared or cross-entropy. :meth:`loss_and_grad` accumulates the exact gradient of every trained
    parameter (hand-written backward pass, no autograd) into ``grads``.

    Parameters
    ----------
    cfg : ModelConfig
        Architecture, freeze switches, loss and initialisation.
    rng : numpy.random.Generator, optional
        Initialisation randomness.
    seed : int, optional
        Seed of the initialisation instead of ``rng`` (exactly one of ``rng`` / ``seed``, or neither
        for a fresh unseeded generator).

    Raises
    ------
    TypeError
        ``cfg`` is not a :class:`ModelConfig`.
    ValueError
        Both ``rng`` and ``seed`` given, or the parameters would exceed the memory guard (the message
        gives the estimate and a smaller alternative).

    See Also
    --------
    ModelConfig : The configuration of the model.
    population_batch : The exact N -> inf batch: its loss is the population loss.
    make_batch : The batch form a configuration asks for, from masked documents.
    Trainer : Trains a ``Transformer`` from a :class:`TrainConfig`.

    References
    ----------
    SPEC §3.1 (the model), §3.2 (variants and exact token merging), §2.2 (losses), §4.0 (under
    uniform attention the loss is a quadratic in ``W^V``).

    Examples
    --------
    Stage 1 of the paper's model (uniform attention, only ``W^V`` trained) on the exact population of
    ``T = 3`` topics of ``v = 2`` words: the loss is the closed form
    :func:`theorycheck.population.value_loss` of the value matrix.

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.nn import ModelConfig, Transformer, population_batch
    >>> from theorycheck.population import value_loss
    >>> tm, mk = TopicModel(T=3, v=2, tau=2), Masking()
    >>> model = Transformer(ModelConfig(V1=7, attention="uniform", train=("W_V",)), seed=0)
    >>> model.trainable_names()
    ['layers.0.W_V']
    >>> batch = population_batch(tm, mk)
    >>> W_V = model.get("layers.0.W_V")[0]
    >>> round(model.loss(batch), 10), round(value_loss(W_V, tm, mk), 10)
    (0.9972426133, 0.9972426133)

    With ``W^V = 0`` the output is 0 and the squared loss is the total target weight, 1:

    >>> W_V[...] = 0.0
    >>> model.zero_grad()
    >>> model.loss_and_grad(batch)
    1.0
    >>> model.grad("layers.0.W_V").shape  # (heads, d, d)
    (1, 7, 7)
    """

    #: what :meth:`forward` leaves for :meth:`backward`: ``("count", None)`` or
    #: ``("pos", (shape of the packed rows, their tokens, the row of each loss entry, distinct))``
    _cache: tuple[str, tuple[tuple[int, ...], np.ndarray, np.ndarray, bool] | None]

    #: take the fused route of :meth:`loss_and_grad` where it applies (``False``: always the
    #: layer-by-layer route, e.g. as the reference the fused route is tested against)
    fused: bool = True

    def __init__(self, cfg: ModelConfig, *, rng=None, seed=None):

        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg must be a ModelConfig, got {type(cfg).__name__}")
        rng = check_rng(rng, seed)
        check_model_memory("Transformer", cfg)
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
        the output cannot depend on the query token: uniform attention without residual).

        Parameters
        ----------
        batch : CountBatch or PositionBatch
            A batch of this model's vocabulary (a :class:`CountBatch` needs a one-layer model with
            ``count_based != "never"``).

        Returns
        -------
        ndarray, shape (E, V1) or (G, V1)
            The decoder outputs; what :meth:`backward` needs is kept on the model.
        """
        self._check_batch(batch)
        emb = self.embedding
        if isinstance(batch, CountBatch):
            Xtok = emb.table().T  # token rows (V1, d)
            Yq = self.layers[0].forward_counts(Xtok, batch, self._collapsed(batch), need_dX=emb.needs_grad)
            self._cache = ("count", None)
        else:
            rows, tok, qrow = _packing(batch)
            X = emb.forward(tok)  # packed rows (R, d): padding never enters a layer
            key_w = batch.key_w
            log_w = None if self.cfg.attention == "uniform" else log_weights(key_w)  # shared by the layers
            hint = dict(tokens=tok) if emb.one_hot else {}  # the first layer's rows are one-hot
            for lay in self.layers[:-1]:
                X = lay.forward(X, key_w, rows=rows, log_w=log_w, **hint)
                hint = {}
            last = self.layers[-1]
            if last.uniform:
                X = last.forward(X, key_w, rows=rows)
            else:  # the last layer computes only the rows the decoder reads
                uq, qrow = np.unique(qrow, return_inverse=True)
                X = last.forward(X, key_w, rows=rows, queries=uq, log_w=log_w, **hint)
            Yq = X[qrow]
            distinct = not last.uniform and uq.size == qrow.size  # each loss entry reads its own row
            self._cache = ("pos", (X.shape, tok, qrow, distinct))
        return self.decoder.forward(Yq, emb)

    def backward(self, dO):
        """Back-propagate ``dL/dO`` (E, V1) into every trained parameter's ``grads`` (``+=``)."""
        emb = self.embedding
        dYq = self.decoder.backward(dO, emb)
        kind, info = self._cache
        if kind == "count":
            dXtok = self.layers[0].backward_counts(dYq)
            if dXtok is not None:
                emb.add_table_grad(dXtok.T)
            return
        assert info is not None  # a "pos" forward left its packing
        shape, tok, qrow, distinct = info
        if distinct:  # every output row read by exactly one loss entry: a permutation of dYq
            dX = np.empty(shape)
            dX[qrow] = dYq
        else:
            dX = np.zeros(shape)
            np.add.at(dX, qrow, dYq)
        for i in reversed(range(len(self.layers))):
            # the first layer's input gradient is only needed for a trained embedding
            dX = self.layers[i].backward(dX, need_dX=i > 0 or emb.needs_grad)
        if dX is not None:
            emb.backward(tok, dX)

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
        """Weighted loss of ``batch`` plus the L2 term (no gradient).

        Parameters
        ----------
        batch : CountBatch or PositionBatch
            The batch (see :meth:`forward`).

        Returns
        -------
        float
            ``sum_e sum_x Y[e, x] l(o_e, x) + reg sum ||W||_F^2`` (SPEC §2.2).
        """
        O = self.forward(batch)
        Y, w = self._targets(batch)
        val, _ = loss_head(O, Y, w, self.cfg.loss)
        return val + self.reg_loss()

    def fused_route(self, batch) -> bool:
        """Whether :meth:`loss_and_grad` takes the fused route on ``batch``: a :class:`CountBatch` with
        key factors (e.g. the exact population), one layer and one softmax head, no residual or layer
        norm, the identity decoder, and :attr:`fused` on (see ``theorycheck.nn._factored_kernels``)."""
        c = self.cfg
        return (
            self.fused
            and isinstance(batch, CountBatch)
            and batch.factored
            and c.n_layers == 1
            and c.n_heads == 1
            and c.attention == "softmax"
            and not c.residual
            and not c.layer_norm
            and c.decoder == "identity"
        )

    def _fused_loss_and_grad(self, batch) -> float | None:
        """The fused route (the same loss and gradients as the layer-by-layer route, to rounding);
        ``None`` when a normaliser is not safely positive (the caller then takes the generic route)."""
        self._check_batch(batch)
        lay, emb = self.layers[0], self.embedding
        P = lay.params
        if emb.one_hot:  # the token tables W W^E are the matrices themselves
            Kt, Qt, Vt = P["W_K"][0], P["W_Q"][0], P["W_V"][0]
        else:
            tab = emb.table()
            Kt, Qt, Vt = P["W_K"][0] @ tab, P["W_Q"][0] @ tab, P["W_V"][0] @ tab
        S = lay.c * (Qt.T @ Kt)
        loss, dS, dVtT, db, zmin = factored_loss_grad(
            S, Vt.T, self.decoder.params["b_dec"], lay.c, batch.key_factors(), self.cfg.loss
        )
        if not zmin >= _MIN_NORMALISER:
            return None
        dVt, dQt, dKt = dVtT.T, Kt @ dS.T, Qt @ dS
        if emb.one_hot:
            grads = {"W_V": dVt[None], "W_Q": dQt[None], "W_K": dKt[None]}
        else:
            grads = {"W_V": (dVt @ tab.T)[None], "W_Q": (dQt @ tab.T)[None], "W_K": (dKt @ tab.T)[None]}
            emb.add_table_grad(P["W_V"][0].T @ dVt + P["W_Q"][0].T @ dQt + P["W_K"][0].T @ dKt)
        lay._accumulate(grads)
        self.decoder._accumulate({"b_dec": db})
        return loss

    def loss_and_grad(self, batch) -> float:
        """Loss (with L2 term); gradients are *accumulated* into ``grads`` (call ``zero_grad`` first).

        Batches with key factors go through the fused route when it applies (:meth:`fused_route`).

        Parameters
        ----------
        batch : CountBatch or PositionBatch
            The batch (see :meth:`forward`).

        Returns
        -------
        float
            The value of :meth:`loss`; its gradient with respect to every trained parameter is added
            to that parameter's ``grads`` entry (read it with ``grad(name)``).
        """
        val = self._fused_loss_and_grad(batch) if self.fused_route(batch) else None
        if val is not None:
            self._add_reg_grads()
            return val + self.reg_loss()
        O = self.forward(batch)
        Y, w = self._targets(batch)
        val, dO = loss_head(O, Y, w, self.cfg.loss)
        self.backward(dO)
        self._add_reg_grads()
        return val + self.reg_loss()

    def _add_reg_grads(self):
        if self.cfg.reg > 0.0:
            for _n, (m, k) in self.named_params().items():
                if k in m.trainable and k != "b_dec":
                    m.grads[k] += 2.0 * self.cfg.reg * m.params[k]

    # ------------------------------------------------------------------ inspection
    def score_matrix(self, layer: int = 0, head: int = 0) -> np.ndarray:
        """Token score matrix ``S[a, b] = c (W^Q W^E e_a)^T (W^K W^E e_b)`` (V1, V1) of one head.

        Meaningful as attention logits for the first layer (token embeddings as input).
        """
        lay = self.layers[layer]
        tab = self.embedding.table()
        Kt = lay.params["W_K"][head] @ tab
        Qt = lay.params["W_Q"][head] @ tab
        return lay.c * (Qt.T @ Kt)

    def _inputs(self, tokens, key_valid):
        toks = np.asarray(tokens, dtype=np.int64)
        kv = (toks >= 0) if key_valid is None else np.asarray(key_valid, dtype=bool)
        return toks, kv, self.embedding.forward(toks)

    def attention_maps(self, tokens, key_valid=None) -> np.ndarray:
        """Attention of every layer and head in one forward pass, shape ``(L, H, B, N, N)``
        (entry ``[l, h, b, i, j]``: query ``i`` on key ``j``); see :meth:`attention_weights`."""
        toks, kv, X = self._inputs(tokens, key_valid)
        B, N = toks.shape
        out = np.empty((self.cfg.n_layers, self.cfg.n_heads, B, N, N))
        for li, lay in enumerate(self.layers):
            X = lay.forward(X, kv)
            out[li] = lay.attention_maps()
        for lay in self.layers:
            lay.cache = {}
        return out

    def attention_weights(self, tokens, layer: int = 0, head: int = 0, key_valid=None) -> np.ndarray:
        """Attention ``A[b, i, j]`` (query ``i``, key ``j``) of one head on unmasked documents.

        ``tokens`` (B, N) with ``-1`` padding. Runs the position path up to ``layer``.
        """
        toks, kv, X = self._inputs(tokens, key_valid)
        for lay in self.layers[:layer]:
            X = lay.forward(X, kv)
        lay = self.layers[layer]
        key_w = kv.astype(np.float64)
        if lay.uniform:
            return np.array(np.broadcast_to(key_distribution(key_w)[:, None, :], toks.shape + (toks.shape[1],)))
        P, h = lay.params, slice(head, head + 1)
        _, att = attention_forward(X, log_weights(key_w), P["W_Q"][h], P["W_K"][h], P["W_V"][h], lay.c)
        return att["heads"][0][3]
