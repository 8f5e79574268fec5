"""Layer objects of the transformer: parameters, gradients and a cache around the pure functions
of :mod:`theorycheck.nn.layers` (embedding, attention) and :mod:`theorycheck.nn.rowwise` (layer norm,
decoder) (SPEC §3.1).

Every layer owns ``params`` and ``grads`` dicts with the same keys and a set ``trainable``;
``forward`` keeps what ``backward`` needs in ``cache``; ``backward`` *accumulates* (``+=``) into
the gradients of trainable parameters only; ``zero_grad`` is separate. Parameters are stored in
the paper's orientation (``W^E`` is ``d x V1``, ``W^K, W^Q`` are ``(H, d_a, d)``, ``W^V`` is
``(H, d, d)``, ``W^dec`` is ``V1 x d``).
"""

from __future__ import annotations

import numpy as np

from .config import ModelConfig
from .layers import (
    attention_backward,
    attention_forward,
    embedding_backward,
    embedding_forward,
    log_weights,
    uniform_attention_backward,
    uniform_attention_forward,
)
from .rowwise import decoder_backward, decoder_forward, layer_norm_backward, layer_norm_forward

__all__ = ["Layer", "Embedding", "AttentionLayer", "Decoder", "init_matrix"]


def _unpack(X, rows, B: int, N: int):
    """Packed rows ``X`` (R, d) at the flat positions ``rows`` of a zero ``(B, N, d)`` array."""
    out = np.zeros((B * N, X.shape[-1]))
    out[rows] = X
    return out.reshape(B, N, -1)


def init_matrix(rng, cfg: ModelConfig, shape, scale: float | None = None):
    """Initial entries: ``N(0, s^2)``, ``U(-s, s)`` or 0 (``cfg.init``), ``s = scale or cfg.init_scale``."""
    scale = cfg.init_scale if scale is None else scale
    if cfg.init == "zero" or scale == 0.0:
        return np.zeros(shape)
    if cfg.init == "normal":
        return rng.normal(0.0, scale, size=shape)
    return rng.uniform(-scale, scale, size=shape)


class Layer:
    """Base: ``params`` / ``grads`` dicts with the same keys, ``trainable`` names, ``zero_grad``."""

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

    def _accumulate(self, grads: dict):
        for k, g in grads.items():
            if k in self.trainable:
                self.grads[k] += g

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
            self._add_param("W_E", init_matrix(rng, cfg, (cfg.d, cfg.V1), cfg.init_scale_E), "W_E" in cfg.train)

    def table(self) -> np.ndarray:
        """``W^E`` (``d x V1``); the identity for one-hot embeddings."""
        return np.eye(self.V1) if self.one_hot else self.params["W_E"]

    @property
    def needs_grad(self) -> bool:
        """Whether ``dL/dW^E`` is wanted (a trained embedding)."""
        return "W_E" in self.trainable

    def forward(self, tokens):
        """Rows ``W^E e_t`` for ``tokens`` (B, N) with ``-1`` padding -> (B, N, d)."""
        return embedding_forward(self.table(), tokens)

    def backward(self, tokens, dX):
        """Accumulate ``dL/dW^E`` from the row gradients ``dX`` (B, N, d)."""
        if self.needs_grad:
            self.add_table_grad(embedding_backward(tokens, dX, self.V1))

    def add_table_grad(self, dtab):
        """Accumulate ``dL/dW^E`` (``d x V1``) if trained."""
        if self.needs_grad:
            self.grads["W_E"] += dtab


class AttentionLayer(Layer):
    """One layer of ``H`` summed heads, optional residual and post-LN (SPEC §3.1).

    ``params``: ``W_K``, ``W_Q`` of shape ``(H, d_a, d)`` and ``W_V`` of shape ``(H, d, d)``, views of
    one stacked ``(H (2 d_a + d), d)`` array ``[W_Q; W_K; W_V]`` (update them in place).
    """

    def __init__(self, cfg: ModelConfig, rng):
        super().__init__()
        self.cfg = cfg
        H, d, da = cfg.n_heads, cfg.d, cfg.d_a
        assert d is not None and da is not None  # set by ModelConfig.__post_init__
        self.uniform = cfg.attention == "uniform"
        for name in ("W_K", "W_Q"):
            value = np.zeros((H, da, d)) if self.uniform else init_matrix(rng, cfg, (H, da, d))
            self._add_param(name, value, name in cfg.train and not self.uniform)
        if cfg.init_V == "identity":
            WV = np.broadcast_to(np.eye(d), (H, d, d)).copy()
        elif cfg.init_V == "zero":
            WV = np.zeros((H, d, d))
        else:
            WV = init_matrix(rng, cfg, (H, d, d))
        self._add_param("W_V", WV, "W_V" in cfg.train)
        self._share_buffer()
        self.c = cfg.score_factor

    def _share_buffer(self):
        """Store ``W_Q, W_K, W_V`` as consecutive views of one ``(H (2 d_a + d), d)`` array ``_cat``,
        the stacked ``W_cat`` of the position path (given to
        :func:`~theorycheck.nn.layers.attention_forward`, which then makes no copy). The values do
        not change; updates must stay in place (a replaced array is noticed: then ``W_cat`` is not
        passed)."""
        P = self.params
        d = P["W_V"].shape[-1]
        blocks = [P[k].reshape(-1, d) for k in ("W_Q", "W_K", "W_V")]
        cat = np.concatenate(blocks)
        r0 = 0
        for k, b in zip(("W_Q", "W_K", "W_V"), blocks):
            P[k] = cat[r0 : r0 + b.shape[0]].reshape(P[k].shape)
            r0 += b.shape[0]
        self._cat = cat

    def __setstate__(self, state):
        """Copies (``copy.deepcopy``, ``pickle``) share one stacked buffer again (:meth:`_share_buffer`)."""
        self.__dict__.update(state)
        self._share_buffer()

    def _stacked(self):
        """``[W_Q; W_K; W_V]`` as one array if the parameters are still the views of ``_cat``, else ``None``."""
        P, cat = self.params, self._cat
        return cat if P["W_Q"].base is cat and P["W_K"].base is cat and P["W_V"].base is cat else None

    def _post(self, R):
        """Optional post-LN of the residual stream ``R``."""
        return layer_norm_forward(R) if self.cfg.layer_norm else (R, None)

    def _pre_backward(self, dY):
        return layer_norm_backward(self.cache["Yn"], self.cache["inv"], dY) if self.cfg.layer_norm else dY

    # ---------------------------------------------------------------- position path
    def forward(self, X, key_w, rows=None, queries=None, log_w=None, tokens=None):
        """``X`` (B, N, d) rows -> (B, N, d); ``key_w`` (B, N) key multiplicities (bool or float).

        Packed rows: with ``rows`` (R,) (sorted flat indices into ``(B, N)``, e.g. the non-padding
        positions), ``X`` and the output are ``(R, d)``; rows left out must have key weight 0.
        ``queries`` (sorted indices into the rows of ``X``, softmax attention only): only those rows
        are computed (output ``(len(queries), d)``), e.g. the last layer's rows read by the decoder.
        ``log_w``: ``log_weights(key_w)`` if the caller has it (one array for all layers of a pass);
        ``tokens``: the rows of ``X`` are one-hot ``e_{tokens[r]}`` (see ``attention_forward``)."""
        P = self.params
        key_w = np.asarray(key_w, dtype=np.float64)
        if self.uniform:
            if queries is not None:
                raise ValueError("queries= needs softmax attention")
            B, N = key_w.shape
            Xp = X if rows is None else _unpack(X, rows, B, N)
            Uc, att = uniform_attention_forward(Xp, key_w, P["W_V"])
            out = np.broadcast_to(Uc[:, None, :], Xp.shape) if rows is None else Uc[rows // N]
        else:
            W = (P["W_Q"], P["W_K"], P["W_V"])
            log_w = log_weights(key_w) if log_w is None else log_w
            out, att = attention_forward(
                X, log_w, *W, self.c, rows=rows, queries=queries, tokens=tokens, W_cat=self._stacked()
            )
        Xq = X if queries is None else X[queries]
        if not self.cfg.residual:
            R = np.ascontiguousarray(out)
        elif self.uniform:
            R = Xq + out
        else:  # a fresh array from attention_forward: the residual is added in place
            R = out
            R += Xq
        Yn, inv = self._post(R)
        self.cache = dict(att=att, Yn=Yn, inv=inv, X=X, rows=rows, queries=queries)
        return Yn

    def backward(self, dY, need_dX: bool = True):
        """Accumulate parameter gradients; return ``dL/dX`` (the shape of the forward's ``X``), or
        ``None`` when ``need_dX`` is False (the first layer under a frozen embedding: saves the
        ``dP W_cat`` product)."""
        dR = self._pre_backward(dY)
        rows, queries = self.cache["rows"], self.cache["queries"]
        res = dR if need_dX and self.cfg.residual else None  # the residual branch's dL/dX (read only)
        if self.uniform:
            dX, grads = self._uniform_backward(dR, rows, need_dX, res)
        else:
            dX, grads = attention_backward(dR, self.cache["att"], need_dX=need_dX, dX_in=res, dX_in_rows=queries)
        self._accumulate(grads)
        return dX

    def _uniform_backward(self, dR, rows, need_dX, res):
        if rows is None:
            return uniform_attention_backward(dR.sum(axis=1), self.cache["att"], need_dX=need_dX, dX_in=res)
        B, N = self.cache["att"]["hbar"].shape
        dUc = np.zeros((B, dR.shape[-1]))
        np.add.at(dUc, rows // N, dR)
        dXp, grads = uniform_attention_backward(dUc, self.cache["att"], need_dX=need_dX)
        if not need_dX:
            return None, grads
        dX = dXp.reshape(B * N, -1)[rows]
        if res is not None:
            dX += res
        return dX, grads

    def attention_maps(self):
        """Attention ``(H, B, Nq, Nk)`` of the last position-path forward."""
        if self.uniform:
            hbar = self.cache["att"]["hbar"]
            shape = (self.cfg.n_heads, hbar.shape[0], hbar.shape[1], hbar.shape[1])
            return np.broadcast_to(hbar[None, :, None, :], shape)
        return np.stack([A for (_, _, _, A) in self.cache["att"]["heads"]])

    # ---------------------------------------------------------------- count path
    def forward_counts(self, Xtok, batch, collapsed: bool = False, need_dX: bool = True):
        """Count-path forward of a one-layer model: ``Xtok = (W^E)^T`` (V1, d) -> rows (E, d).

        Query group ``(g, a)`` attends with ``softmax_b(S[a, b] + log K[g, b])``, i.e. exactly the
        position softmax with identical keys merged. With ``collapsed=True`` (uniform attention,
        no residual) one row per context is returned (G, d).
        """
        P = self.params
        if self.uniform:
            Uc, att = uniform_attention_forward(Xtok, batch.K, P["W_V"])
            U = Uc if collapsed else Uc[batch.ctx]
        else:
            U, att = attention_forward(
                Xtok, log_weights(batch.K), P["W_Q"], P["W_K"], P["W_V"], self.c, groups=batch.groups
            )
        R = U + Xtok[batch.qtok] if self.cfg.residual else U
        Yn, inv = self._post(R)
        self.cache = dict(att=att, Yn=Yn, inv=inv, batch=batch, collapsed=collapsed, need_dX=need_dX)
        return Yn

    def backward_counts(self, dY):
        """Accumulate parameter gradients; return ``dL/dXtok`` (V1, d), or ``None`` if not needed."""
        dR = self._pre_backward(dY)
        batch, need = self.cache["batch"], self.cache["need_dX"]
        if self.uniform:
            dUc = dR if self.cache["collapsed"] else batch.context_sum(dR)
            dX, grads = uniform_attention_backward(dUc, self.cache["att"], need_dX=need)
        else:
            dX, grads = attention_backward(dR, self.cache["att"], need_dX=need)
        self._accumulate(grads)
        if need and self.cfg.residual:
            dX += batch.token_sum(dR)
        return dX


class Decoder(Layer):
    """``o = W^dec y + b^dec``: ``W^dec`` identity (frozen), trained (``V1 x d``) or tied ``(W^E)^T``."""

    def __init__(self, cfg: ModelConfig, rng):
        super().__init__()
        self.kind = cfg.decoder
        if self.kind == "trained":
            self._add_param("W_dec", init_matrix(rng, cfg, (cfg.V1, cfg.d)), "W_dec" in cfg.train)
        self._add_param("b_dec", np.zeros(cfg.V1), "b_dec" in cfg.train)

    def _matrix(self, emb: Embedding):
        if self.kind == "identity":
            return None
        return self.params["W_dec"] if self.kind == "trained" else emb.params["W_E"].T

    def forward(self, Yq, emb: Embedding):
        """``Yq`` (E, d) -> outputs (E, V1)."""
        self.cache = dict(Yq=Yq)
        return decoder_forward(Yq, self._matrix(emb), self.params["b_dec"])

    def backward(self, dO, emb: Embedding):
        """Accumulate ``dW^dec``, ``db^dec`` (the tied part into ``dW^E``); return ``dL/dYq``."""
        tied = self.kind == "tied"
        dY, dW, db = decoder_backward(dO, self.cache["Yq"], self._matrix(emb), tied=tied)
        self._accumulate({"b_dec": db} if dW is None or tied else {"b_dec": db, "W_dec": dW})
        if tied:
            emb.add_table_grad(dW)
        return dY
