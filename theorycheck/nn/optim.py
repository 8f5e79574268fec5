"""Optimizers of the trainer: plain/heavy-ball SGD and Adam, with state dicts for checkpoints."""

from __future__ import annotations

import numpy as np

from .config import OptimConfig

__all__ = ["SGD", "Adam", "make_optimizer"]


class SGD:
    """``p <- p - lr * m``, ``m <- momentum * m + g`` (plain gradient descent for momentum 0).

    Gradient descent from ``W = 0`` stays in the row space of the data, so on the stage-1
    population loss it converges to the minimum-norm minimizer (SPEC §6 item 9).

    Parameters
    ----------
    cfg : OptimConfig
        Its ``momentum`` (``0 <= momentum < 1``) is used; the learning rate is passed to :meth:`step`.

    See Also
    --------
    Adam : The other optimizer.
    make_optimizer : The optimizer of an :class:`OptimConfig`.
    OptimConfig : Its settings.

    References
    ----------
    SPEC §6 item 9 (gradient descent from 0 reaches the minimum-norm stage-1 optimum), §11.7 (stable
    learning rates).

    Examples
    --------
    On ``f(w) = ||w||^2 / 2`` (gradient ``w``) a step of rate 1/2 halves ``w``:

    >>> from theorycheck.nn import SGD, OptimConfig
    >>> params = {"w": np.array([1.0, -2.0])}
    >>> opt = SGD(OptimConfig(name="sgd", lr=0.5))
    >>> opt.step(params, {"w": params["w"].copy()}, lr=0.5)
    >>> params["w"], opt.state_dict()
    (array([ 0.5, -1. ]), {'t': 1})

    Heavy ball: the second step moves by ``lr (1 + momentum) g``:

    >>> params = {"w": np.zeros(2)}
    >>> opt = SGD(OptimConfig(name="sgd", lr=0.1, momentum=0.9))
    >>> for _ in range(2):
    ...     opt.step(params, {"w": np.ones(2)}, lr=0.1)
    >>> np.round(params["w"], 12), opt.state_dict()["m/w"]
    (array([-0.29, -0.29]), array([1.9, 1.9]))
    """

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.state: dict[str, np.ndarray] = {}
        self.t = 0
        self._scratch: dict[str, np.ndarray] = {}  # reused buffers for ``lr * m`` (not state)

    def step(self, params: dict, grads: dict, lr: float):
        """One update in place: ``lr * m`` goes through a reused buffer (no temporary per step;
        skipped for ``lr == 1``, where it is ``m`` exactly).

        Parameters
        ----------
        params, grads : dict of str to ndarray
            The parameters (updated in place) and their gradients, with the same keys and shapes.
        lr : float
            The learning rate of this step, ``lr > 0``.
        """
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

    Parameters
    ----------
    cfg : OptimConfig
        Its ``beta1``, ``beta2`` (each in ``[0, 1)``) and ``eps > 0`` are used; the learning rate is
        passed to :meth:`step`.

    See Also
    --------
    SGD : The other optimizer.
    make_optimizer : The optimizer of an :class:`OptimConfig`.

    References
    ----------
    Kingma and Ba, *Adam: A Method for Stochastic Optimization*, ICLR 2015, arXiv:1412.6980, Algorithm 1.
    SPEC §5.1 (Adam in the paper's experiments).

    Examples
    --------
    Bias correction makes the first step ``lr g / (|g| + eps)``: about ``lr`` in every coordinate,
    whatever the gradient's scale:

    >>> from theorycheck.nn import Adam, OptimConfig
    >>> params = {"w": np.ones(3)}
    >>> opt = Adam(OptimConfig(name="adam", lr=0.01))
    >>> opt.step(params, {"w": np.array([1e-3, 1.0, -1e3])}, lr=0.01)
    >>> np.round(1.0 - params["w"], 6)
    array([ 0.01,  0.01, -0.01])
    >>> sorted(opt.state_dict())
    ['m/w', 't', 'v/w']
    """

    def __init__(self, cfg: OptimConfig):
        self.cfg = cfg
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float):
        """One update in place.

        Parameters
        ----------
        params, grads : dict of str to ndarray
            The parameters (updated in place) and their gradients, with the same keys and shapes.
        lr : float
            The learning rate of this step, ``lr > 0``.
        """
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
    """:class:`SGD` or :class:`Adam` for ``cfg.name``.

    Parameters
    ----------
    cfg : OptimConfig
        The optimizer's settings.

    Returns
    -------
    SGD or Adam
        A fresh optimizer (no state, step counter 0).

    Raises
    ------
    TypeError
        ``cfg`` is not an :class:`OptimConfig`.

    See Also
    --------
    OptimConfig : The settings.
    SGD : Plain or heavy-ball gradient descent.
    Adam : Adam with bias correction.

    Examples
    --------
    >>> from theorycheck.nn import OptimConfig, make_optimizer
    >>> type(make_optimizer(OptimConfig(name="sgd", lr=0.5))).__name__, type(make_optimizer(OptimConfig())).__name__
    ('SGD', 'Adam')
    """
    if not isinstance(cfg, OptimConfig):
        raise TypeError(f"cfg must be an OptimConfig, got {type(cfg).__name__}")
    return SGD(cfg) if cfg.name == "sgd" else Adam(cfg)
