"""The transformer's loss and every parameter gradient against an independent automatic-
differentiation reference (HIPS autograd, tests only; the library stays autograd-free).

The reference below re-implements the forward pass of SPEC §3.1 in ``autograd.numpy`` with
different arithmetic from the library: attention weights as ``w_j e^{s_j - max} / sum`` (key
multiplicities multiplied in, no ``log w``), the squared loss summed over every target ``x``
explicitly, the cross-entropy as ``-log_softmax``, and the count path written per query group.
Covered: 1-2 layers, 1-2 heads, residual/LN on/off, one-hot/trained embeddings,
identity/trained/tied decoder, squared/ce, reg, mask_keys, uniform/softmax attention, on the
count path, the merged-token path and the position path.
"""

import autograd.numpy as anp
import numpy as np
from autograd import grad
from autograd.scipy.special import logsumexp
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.nn import ModelConfig, Transformer, count_batch, merged_batch, position_batch

EPS = 1e-5


def _weighted_softmax(logits, w):
    """``w_j exp(s_j) / sum_j w_j exp(s_j)`` per row (0 for rows without keys)."""
    e = w * anp.exp(logits - anp.max(logits, axis=-1, keepdims=True))
    s = anp.sum(e, axis=-1, keepdims=True)
    return e / anp.where(s > 0, s, 1.0)


def _ln(R):
    xc = R - anp.mean(R, axis=-1, keepdims=True)
    return xc / anp.sqrt(anp.mean(xc**2, axis=-1, keepdims=True) + EPS)


def _post(cfg, X, out):
    R = X + out if cfg.residual else out
    return _ln(R) if cfg.layer_norm else R


def _table(cfg, p):
    return anp.eye(cfg.V1) if cfg.embedding == "one-hot" else p["W_E"]


def _head_out(cfg, p, i, Xq, Xk, w, gather=None):
    """Sum over heads of ``A_h V_h`` with ``A_h`` the weighted softmax (or uniform) attention."""
    c = 1.0 / np.sqrt(cfg.d_a) if cfg.scale == "sqrt" else 1.0
    out = 0.0
    for h in range(cfg.n_heads):
        WQ, WK, WV = p[f"layers.{i}.W_Q"][h], p[f"layers.{i}.W_K"][h], p[f"layers.{i}.W_V"][h]
        Q, K, V = anp.dot(Xq, WQ.T), anp.dot(Xk, WK.T), anp.dot(Xk, WV.T)
        if gather is None:  # position path: Xq = Xk (B, N, d), w (B, N)
            logits = c * anp.einsum("bia,bja->bij", Q, K)
            A = _weighted_softmax(0.0 * logits if cfg.attention == "uniform" else logits, w[:, None, :])
            out = out + anp.einsum("bij,bjd->bid", A, V)
        else:  # count path: token rows (V1, d); group e attends with K[ctx[e]]
            qtok, ctx = gather
            S = c * anp.dot(Q, K.T)[qtok]
            A = _weighted_softmax(0.0 * S if cfg.attention == "uniform" else S, w[ctx])
            out = out + anp.dot(A, V)
    return out


def _decode(cfg, p, Yq):
    if cfg.decoder == "identity":
        return Yq + p["b_dec"]
    W = p["W_dec"] if cfg.decoder == "trained" else p["W_E"].T
    return anp.dot(Yq, W.T) + p["b_dec"]


def _loss(cfg, p, O, Y, trained):
    if cfg.loss == "squared":
        diff = O[:, None, :] - np.eye(cfg.V1)[None, :, :]  # (E, x, V1)
        val = anp.sum(Y * anp.sum(diff**2, axis=2))
    else:
        val = -anp.sum(Y * (O - logsumexp(O, axis=1, keepdims=True)))
    reg = sum(anp.sum(p[n] ** 2) for n in trained if not n.endswith("b_dec"))
    return val + cfg.reg * reg


def reference_loss(cfg, p, batch, trained):
    """Independent forward of SPEC §3.1 and the weighted loss of SPEC §2.2 (L2 on the ``trained``
    matrices), in autograd.numpy."""
    tab = _table(cfg, p)
    if hasattr(batch, "K"):  # CountBatch
        Xtok = tab.T
        out = _head_out(cfg, p, 0, Xtok, Xtok, batch.K, gather=(batch.qtok, batch.ctx))
        Yq = _post(cfg, Xtok[batch.qtok], out)
    else:
        toks = batch.tokens
        X = tab.T[np.maximum(toks, 0)] * (toks >= 0)[:, :, None]
        w = batch.key_w
        for i in range(cfg.n_layers):
            X = _post(cfg, X, _head_out(cfg, p, i, X, X, w))
        Yq = X[batch.qdoc, batch.qpos]
    return _loss(cfg, p, _decode(cfg, p, Yq), batch.Y, trained)


@st.composite
def setups(draw):
    V1 = draw(st.integers(3, 6))
    embedding = draw(st.sampled_from(["one-hot", "trained"]))
    decoder = draw(
        st.sampled_from(["identity", "trained", "tied"] if embedding == "trained" else ["identity", "trained"])
    )
    d = V1 if (embedding == "one-hot" or decoder == "identity") else draw(st.integers(2, 5))
    attention = draw(st.sampled_from(["softmax", "uniform"]))
    train = ["W_V", "b_dec"] + (["W_K", "W_Q"] if attention == "softmax" else [])
    train += (["W_E"] if embedding == "trained" else []) + (["W_dec"] if decoder == "trained" else [])
    n_layers = draw(st.integers(1, 2))
    cfg = ModelConfig(
        V1=V1,
        d=d,
        d_a=draw(st.integers(1, 3)),
        n_layers=n_layers,
        n_heads=draw(st.integers(1, 2)),
        embedding=embedding,
        decoder=decoder,
        attention=attention,
        scale=draw(st.sampled_from(["sqrt", "none"])),
        residual=draw(st.booleans()),
        layer_norm=draw(st.booleans()),
        mask_keys=draw(st.booleans()),
        loss=draw(st.sampled_from(["squared", "ce"])),
        reg=draw(st.sampled_from([0.0, 0.1])),
        train=tuple(train),
    )
    path = draw(st.sampled_from(["count", "merged", "position"] if n_layers == 1 else ["merged", "position"]))
    return cfg, path, draw(st.integers(0, 2**31))


def _batch(cfg, path, rng):
    B, N = 3, 6
    inputs = rng.integers(0, 3, size=(B, N))  # repeated tokens, so merged rows carry counts > 1
    inputs[:, 0] = rng.integers(0, cfg.V1, size=B)
    inputs[2, 4:] = -1
    selected = (rng.random((B, N)) < 0.5) & (inputs >= 0)
    selected[:, 0] = True
    targets = np.where(inputs >= 0, rng.integers(1, cfg.V1, size=(B, N)), -1)
    build = {"count": count_batch, "merged": merged_batch, "position": position_batch}[path]
    return build(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys)


@settings(max_examples=60, deadline=None)
@given(setups())
def test_loss_and_every_gradient_equal_the_autograd_reference(setup):
    cfg, path, seed = setup
    rng = np.random.default_rng(seed)
    model = Transformer(cfg, seed=seed)
    for _name, (mod, k) in model.named_params().items():
        if not (k in ("W_K", "W_Q") and cfg.attention == "uniform"):
            mod.params[k][...] = rng.normal(scale=0.8, size=mod.params[k].shape)
    batch = _batch(cfg, path, rng)
    model.zero_grad()
    loss = model.loss_and_grad(batch)
    names = model.trainable_names()
    params = model.state_dict()
    ref = float(reference_loss(cfg, params, batch, names))
    assert abs(loss - ref) <= 1e-11 * (1 + abs(ref)), f"loss {loss!r} vs autograd {ref!r} ({path}, {cfg})"
    g_ref = grad(lambda p: reference_loss(cfg, p, batch, names))(params)
    for n in names:
        G, R = model.grad(n), g_ref[n]
        err = np.max(np.abs(G - R))
        assert err <= 1e-9 * max(1.0, np.max(np.abs(R))), f"d loss / d {n}: differs by {err:.3g} ({path}, {cfg})"
