"""PyTorch CPU reference implementations of :class:`theorycheck.nn.Transformer` (benchmarks only).

The model is the one of SPEC §3.1 / §3.2 in the paper's column convention, computed the way the
paper's (HuggingFace BERT) code does it: one row per position, the full ``N x N`` score matrix of
every head, a key mask, a softmax over the keys and ``A @ V``. Row-wise (``X`` = ``Z^T``, one row
per position), layer ``l`` maps ``X`` to

.. math::
    S_h = c\\,(X W_{Q,h}^T)(X W_{K,h}^T)^T + \\mathrm{mask},\\qquad
    A_h = \\mathrm{softmax}_{keys}(S_h),\\qquad
    R = [X +]\\ \\sum_h A_h X W_{V,h}^T,\\qquad X' = [\\mathrm{LN}](R),

which is ``Attn(Z) = sum_h W^V_h Z A_h(Z)`` transposed. ``c = 1/sqrt(d_a)`` or 1 (``scale``);
the mask is ``-inf`` on padding and, with ``mask_keys``, on selected positions (official code);
LN is post-LN without gain or bias, ``eps = 1e-5``. The decoder is ``o = W^dec y + b^dec``
(identity, trained or tied ``(W^E)^T``). The loss over the selected positions (SPEC §2.2) is the
squared ``||o - e_x||^2`` or the cross-entropy ``-log softmax(o)_x``, averaged per document then
over documents (``average="document"``) or over all selected positions (``"token"``), plus
``reg * ||W||_F^2`` on every trained matrix (biases excluded).

Parameters carry the names and shapes of :meth:`theorycheck.nn.Transformer.named_params`
(``layers.i.W_K`` is ``(H, d_a, d)``, ``layers.i.W_V`` is ``(H, d, d)``, ``W_dec`` ``(V1, d)``,
``b_dec`` ``(V1,)``, ``W_E`` ``(d, V1)``), so a numpy model's ``state_dict()`` loads directly and the
gradients compare name by name (:func:`compare_with_numpy`).

torch is the optional ``bench`` extra (``torch==2.13.0``); this module imports it lazily.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["TorchTransformer", "compare_with_numpy", "numpy_loss_and_grads"]

LN_EPS = 1e-5
_DTYPES = ("float32", "float64")


def _torch():
    import torch

    return torch


class TorchTransformer:
    """The model of ``cfg`` (a :class:`theorycheck.nn.ModelConfig`) in PyTorch, position form.

    Parameters
    ----------
    cfg : ModelConfig
    state : dict of name -> ndarray
        Initial parameters, e.g. ``Transformer(cfg, seed=0).state_dict()``.
    optim : OptimConfig, optional
        ``"adam"`` -> ``torch.optim.Adam(lr, betas=(beta1, beta2), eps)``; ``"sgd"`` ->
        ``torch.optim.SGD(lr, momentum)``, the update rules of :mod:`theorycheck.nn.optim`.
        Needed only for :meth:`step`.
    average : {"document", "token"}
    dtype : {"float32", "float64"}
    """

    def __init__(self, cfg, state: dict, *, optim=None, average: str = "document", dtype: str = "float64"):
        torch = _torch()
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        if average not in ("document", "token"):
            raise ValueError(f"average must be 'document' or 'token', got {average!r}")
        self.cfg, self.average = cfg, average
        self.dtype = getattr(torch, dtype)
        self.trainable = self._trainable_names(state)
        self.params = {}
        for name, value in state.items():
            t = torch.tensor(np.asarray(value), dtype=self.dtype)
            self.params[name] = t.requires_grad_(name in self.trainable)
        self.eye = torch.eye(cfg.V1, dtype=self.dtype)
        self.opt = None if optim is None else self._optimizer(optim)

    def _trainable_names(self, state: dict) -> set:
        train = set(self.cfg.train)
        if self.cfg.attention == "uniform":
            train -= {"W_K", "W_Q"}
        names = {n for n in state if n.rsplit(".", 1)[-1] in train}
        missing = [n for n in self._expected_names() if n not in state]
        if missing:
            raise ValueError(f"state is missing parameters {missing}")
        return names

    def _expected_names(self) -> list:
        cfg = self.cfg
        names = [f"layers.{i}.{k}" for i in range(cfg.n_layers) for k in ("W_K", "W_Q", "W_V")] + ["b_dec"]
        if cfg.embedding == "trained":
            names.append("W_E")
        if cfg.decoder == "trained":
            names.append("W_dec")
        return names

    def _optimizer(self, optim):
        torch = _torch()
        ps = [self.params[n] for n in sorted(self.trainable)]
        if optim.name == "adam":
            return torch.optim.Adam(ps, lr=optim.lr, betas=(optim.beta1, optim.beta2), eps=optim.eps)
        return torch.optim.SGD(ps, lr=optim.lr, momentum=optim.momentum)

    # ------------------------------------------------------------------ batch
    def prepare(self, inputs, selected, targets) -> dict:
        """Tensors of one masked batch (token arrays as :func:`theorycheck.sampling.mask_documents`):
        token ids, the key mask ``(B, N)``, the selected ``(doc, pos)`` indices, their targets and
        loss weights (per-document mean then mean over documents, or mean over all selected)."""
        torch = _torch()
        tok = torch.from_numpy(np.asarray(inputs, dtype=np.int64))
        sel = torch.from_numpy(np.asarray(selected, dtype=bool))
        tgt = torch.from_numpy(np.asarray(targets, dtype=np.int64))
        valid = tok >= 0
        keys = valid & ~sel if self.cfg.mask_keys else valid
        if not bool(keys.any(dim=1).all()):
            raise ValueError("every document needs at least one key position (got a document without keys)")
        qdoc, qpos = torch.nonzero(sel, as_tuple=True)
        n_sel = sel.sum(dim=1).to(self.dtype)
        if self.average == "document":
            docs_with = int((n_sel > 0).sum())
            w_doc = torch.where(n_sel > 0, 1.0 / n_sel.clamp(min=1), torch.zeros_like(n_sel)) / max(docs_with, 1)
            weight = w_doc[qdoc]
        else:
            weight = torch.full((qdoc.numel(),), 1.0 / max(qdoc.numel(), 1), dtype=self.dtype)
        return dict(tok=tok.clamp(min=0), valid=valid, keys=keys, qdoc=qdoc, qpos=qpos, tgt=tgt[qdoc, qpos], w=weight)

    # ------------------------------------------------------------------ forward
    def _embed(self, b):
        """Row-wise embeddings ``(B, N, d)``: columns of ``W^E`` (or one-hot rows), 0 on padding."""
        table = self.eye if self.cfg.embedding == "one-hot" else self.params["W_E"].T
        X = table[b["tok"]]
        return X * b["valid"].unsqueeze(-1).to(self.dtype)

    def _layer(self, i: int, X, key_mask):
        """One layer: all heads at once (BERT layout ``(B, H, N, N)``), summed, then residual / LN.

        Uniform attention is the same computation with the frozen ``W^K = W^Q = 0`` of the state
        (zero scores, softmax over the unmasked keys), as the official code runs it."""
        torch, cfg, P = _torch(), self.cfg, self.params
        B, N, d = X.shape
        H, da = cfg.n_heads, cfg.d_a
        Vx = (X @ P[f"layers.{i}.W_V"].reshape(H * d, d).T).view(B, N, H, d).transpose(1, 2)  # (B, H, N, d)
        Kx = (X @ P[f"layers.{i}.W_K"].reshape(H * da, d).T).view(B, N, H, da).transpose(1, 2)
        Qx = (X @ P[f"layers.{i}.W_Q"].reshape(H * da, d).T).view(B, N, H, da).transpose(1, 2)
        S = (Qx @ Kx.transpose(-1, -2)) * cfg.score_factor  # (B, H, Nq, Nk)
        S = S.masked_fill(~key_mask[:, None, None, :], -math.inf)
        out = (torch.softmax(S, dim=-1) @ Vx).sum(dim=1)
        R = X + out if cfg.residual else out
        if cfg.layer_norm:
            mu = R.mean(dim=-1, keepdim=True)
            xc = R - mu
            R = xc / (xc.pow(2).mean(dim=-1, keepdim=True) + LN_EPS).sqrt()
        return R

    def outputs(self, b):
        """Decoder outputs ``o`` (E, V1) at the selected positions of a prepared batch."""
        X = self._embed(b)
        for i in range(self.cfg.n_layers):
            X = self._layer(i, X, b["keys"])
        Yq = X[b["qdoc"], b["qpos"]]
        if self.cfg.decoder == "trained":
            Yq = Yq @ self.params["W_dec"].T
        elif self.cfg.decoder == "tied":
            Yq = Yq @ self.params["W_E"]
        return Yq + self.params["b_dec"]

    def loss(self, b):
        """Weighted loss of a prepared batch plus the L2 term (a 0-d tensor)."""
        torch = _torch()
        O = self.outputs(b)
        if self.cfg.loss == "ce":
            per = torch.nn.functional.cross_entropy(O, b["tgt"], reduction="none")
        else:
            per = (O - self.eye[b["tgt"]]).pow(2).sum(dim=1)
        val = (b["w"] * per).sum()
        if self.cfg.reg > 0.0:
            val = val + self.cfg.reg * sum(self.params[n].pow(2).sum() for n in self.trainable if n != "b_dec")
        return val

    # ------------------------------------------------------------------ training
    def loss_and_grads(self, inputs, selected, targets):
        """``(loss, {name: gradient ndarray})`` of one batch (gradients of the trained parameters)."""
        for n in self.trainable:
            self.params[n].grad = None
        val = self.loss(self.prepare(inputs, selected, targets))
        val.backward()
        return float(val.detach()), {n: self.params[n].grad.detach().numpy().copy() for n in self.trainable}

    def step(self, inputs, selected, targets) -> float:
        """One training step: batch preparation + forward + backward + optimizer update; the loss."""
        if self.opt is None:
            raise ValueError("step needs an optimizer: pass optim= to TorchTransformer")
        self.opt.zero_grad(set_to_none=True)
        val = self.loss(self.prepare(inputs, selected, targets))
        val.backward()
        self.opt.step()
        return float(val.detach())


def numpy_loss_and_grads(model, cfg, inputs, selected, targets, *, average: str = "document"):
    """``(loss, {name: gradient})`` of our numpy ``model`` on one batch, in the batch form of ``cfg``
    (count, merged or position; :func:`theorycheck.nn.make_batch`)."""
    from theorycheck.nn import make_batch

    b = make_batch(cfg, inputs, selected, targets, average=average)
    model.zero_grad()
    loss = model.loss_and_grad(b)
    return loss, {n: model.grad(n).copy() for n in model.trainable_names()}


def compare_with_numpy(cfg, inputs, selected, targets, *, average: str = "document", seed: int = 0) -> dict:
    """Loss and gradients of the numpy model (batch form of ``cfg``) and the float64 torch model
    from the same initial parameters on one batch.

    Returns ``{"loss": rel, name: rel, ...}`` with ``rel = max|torch - numpy| / max|numpy|`` per
    parameter (the loss: ``|torch - numpy| / |numpy|``); ``"max"`` is the largest of them.
    """
    from theorycheck.nn import Transformer

    model = Transformer(cfg, seed=seed)
    loss_np, g_np = numpy_loss_and_grads(model, cfg, inputs, selected, targets, average=average)
    tmodel = TorchTransformer(cfg, model.state_dict(), average=average, dtype="float64")
    loss_t, g_t = tmodel.loss_and_grads(inputs, selected, targets)
    if set(g_t) != set(g_np):
        raise AssertionError(f"trained parameters differ: torch {sorted(g_t)} vs numpy {sorted(g_np)}")
    out = {"loss": abs(loss_t - loss_np) / abs(loss_np)}
    for n, g in g_np.items():
        scale = float(np.max(np.abs(g)))
        out[n] = float(np.max(np.abs(g_t[n] - g))) / (scale if scale > 0 else 1.0)
    out["max"] = max(out.values())
    return out
