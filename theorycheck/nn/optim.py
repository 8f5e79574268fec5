"""Optimizers of the trainer: plain/heavy-ball SGD and Adam, with state dicts for checkpoints."""

from __future__ import annotations

import numpy as np

from .config import OptimConfig

__all__ = ["SGD", "Adam", "make_optimizer"]


class SGD:
    """``p <- p - lr * m``, ``m <- momentum * m + g`` (plain gradient descent for momentum 0).

    Gradient descent from ``W = 0`` stays in the row space of the data, so on the stage-1
    population loss it converges to the minimum-norm minimizer (SPEC §6 item 9).
    """

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.state: dict[str, np.ndarray] = {}
        self.t = 0
        self._scratch: dict[str, np.ndarray] = {}  # reused buffers for ``lr * m`` (not state)

    def step(self, params: dict, grads: dict, lr: float):
        """One update in place: ``lr * m`` goes through a reused buffer (no temporary per step;
        skipped for ``lr == 1``, where it is ``m`` exactly)."""
        mom = self.cfg.momentum
        self.t += 1
        for n, p in params.items():
            g = grads[n]
            if mom > 0:
                buf = self.state.setdefault(n, np.zeros_like(p))
                buf *= mom
                buf += g
                g = buf
            if lr != 1.0:
                tmp = self._scratch.get(n)
                if tmp is None or tmp.shape != g.shape:
                    tmp = self._scratch[n] = np.empty(g.shape)
                g = np.multiply(g, lr, out=tmp)
            p -= g

    def state_dict(self) -> dict:
        return {"t": self.t, **{f"m/{k}": v.copy() for k, v in self.state.items()}}

    def load_state_dict(self, st: dict):
        self.t = int(st["t"])
        self.state = {k[2:]: np.array(v) for k, v in st.items() if k.startswith("m/")}


class Adam:
    """Adam (Kingma & Ba) with bias correction; no weight decay (the L2 term is in the loss).

    ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``,
    ``p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``.
    """

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float):
        b1, b2, eps = self.cfg.beta1, self.cfg.beta2, self.cfg.eps
        self.t += 1
        c1 = 1.0 - b1**self.t
        c2 = 1.0 - b2**self.t
        for n, p in params.items():
            g = grads[n]
            m = self.m.setdefault(n, np.zeros_like(p))
            v = self.v.setdefault(n, np.zeros_like(p))
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + eps)

    def state_dict(self) -> dict:
        out: dict[str, int | np.ndarray] = {"t": self.t}
        out.update({f"m/{k}": a.copy() for k, a in self.m.items()})
        out.update({f"v/{k}": a.copy() for k, a in self.v.items()})
        return out

    def load_state_dict(self, st: dict):
        self.t = int(st["t"])
        self.m = {k[2:]: np.array(a) for k, a in st.items() if k.startswith("m/")}
        self.v = {k[2:]: np.array(a) for k, a in st.items() if k.startswith("v/")}


def make_optimizer(cfg: OptimConfig) -> SGD | Adam:
    """:class:`SGD` or :class:`Adam` for ``cfg.name``."""
    if not isinstance(cfg, OptimConfig):
        raise TypeError(f"cfg must be an OptimConfig, got {type(cfg).__name__}")
    return SGD(cfg) if cfg.name == "sgd" else Adam(cfg)
