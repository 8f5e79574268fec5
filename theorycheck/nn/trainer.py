"""The training loop (SPEC §5): probes, run folder, safe resume, clean interruption.

Run folder (``out``): ``config.json`` (sorted keys, package versions), ``metrics.jsonl`` (one
strict-JSON object per logged step, written with :func:`theorycheck._io.dumps_json`, non-finite ->
``null``, flushed), ``checkpoint-<step>.npz/.json`` (every ``checkpoint_every`` steps and at the
end, the last two kept; :mod:`theorycheck.nn.checkpoint`), and at the end ``params.npz`` and
``stages.json``. Figures are drawn by the caller from the folder
(:func:`theorycheck.report.training.write_figures`).

Resume (``run(resume=True)``) restores parameters, optimizer state and step from the newest intact
checkpoint, refuses a different configuration, and truncates ``metrics.jsonl`` to the records
before the checkpoint's step: the finished folder equals an uninterrupted run's, bit for bit.
SIGINT/SIGTERM during :meth:`Trainer.run` finish the current step, write a checkpoint and raise
:class:`TrainingInterrupted` (a second SIGINT interrupts at once).
"""

from __future__ import annotations

import io
import json
import math
import os
import platform
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import scipy
from tqdm.auto import tqdm

from .._alloc import keep_large_allocations
from .._io import atomic_write_bytes, atomic_write_text, dumps_json, write_json
from .._threads import blas_threads
from .._version import __version__
from ..analysis.stats import detect_stages
from .checkpoint import list_checkpoints, load_checkpoint, remove_checkpoints, save_checkpoint
from .config import TrainConfig
from .data import DataStream
from .model import Transformer, check_model_memory
from .optim import make_optimizer
from .probes import DEFAULT_PROBES, Probe, ProbeContext, References

__all__ = [
    "Trainer",
    "TrainResult",
    "TrainingInterrupted",
    "TrainingDiverged",
    "check_train_memory",
    "train",
    "load_metrics",
    "run_stages",
    "stage_curves",
]


class TrainingInterrupted(Exception):
    """Raised by :meth:`Trainer.run` after SIGINT/SIGTERM, once the current step is finished and
    checkpointed. ``step``: steps completed; ``checkpoint``: the checkpoint written (or ``None``).

    A run folder interrupted this way continues with ``run(resume=True)`` and finishes equal, bit for
    bit, to an uninterrupted run.

    Parameters
    ----------
    step : int
        Steps completed when the run stopped, ``step >= 0``.
    signame : str
        The signal's name, ``"SIGINT"`` or ``"SIGTERM"``.
    checkpoint : path-like or None
        The checkpoint written at ``step``; ``None`` for a run without a folder (nothing saved).

    See Also
    --------
    Trainer : Its :meth:`Trainer.run` raises it.
    load_checkpoint : Reads the checkpoint a resumed run starts from.
    TrainingDiverged : The other way a run stops early.

    References
    ----------
    SPEC §5 (run folder and safe resume).

    Examples
    --------
    >>> from theorycheck.nn import TrainingInterrupted
    >>> exc = TrainingInterrupted(3, "SIGINT", "run/checkpoint-3.npz")
    >>> print(exc)
    interrupted by SIGINT at step 3; checkpoint run/checkpoint-3.npz
    >>> exc.step, exc.signame
    (3, 'SIGINT')
    """

    def __init__(self, step: int, signame: str, checkpoint=None):
        self.step, self.signame, self.checkpoint = step, signame, checkpoint
        where = f"; checkpoint {checkpoint}" if checkpoint else "; no run folder, nothing saved"
        super().__init__(f"interrupted by {signame} at step {step}{where}")


class TrainingDiverged(FloatingPointError):
    """Raised by :meth:`Trainer.run` when the loss leaves the floats (a learning rate past the stable range, SPEC
    §11.7): a result of the run, not a bug. ``step``: the step whose loss was not finite; ``loss``: that value.

    A subclass of :class:`FloatingPointError`. The stage grid (:func:`stage_grid`) records it as the
    cell's ``diverged`` step.

    Parameters
    ----------
    step : int
        The step whose loss was not finite (no update was applied at it).
    loss : float
        That loss (``inf`` or ``nan``).

    See Also
    --------
    Trainer : Its :meth:`Trainer.run` raises it.
    stage_grid : Records divergence per (learning rate, init scale) cell.
    TrainingInterrupted : The other way a run stops early.

    References
    ----------
    SPEC §11.7 (the stable SGD learning rates of the population presets).

    Examples
    --------
    Plain SGD on the exact stage-1 population loss (a quadratic in ``W^V``) with a learning rate far
    past its stable range:

    >>> from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, TrainingDiverged, train
    >>> cfg = TrainConfig(
    ...     data=DataConfig(T=3, v=2, tau=2, source="population"),
    ...     model=ModelConfig(V1=7, attention="uniform", train=("W_V",)),
    ...     optim=OptimConfig(name="sgd", lr=1e3), steps=200, log_every=50, seed=0,
    ... )
    >>> try:
    ...     with np.errstate(over="ignore", invalid="ignore"):
    ...         train(cfg, progress=False)
    ... except TrainingDiverged as exc:
    ...     print(exc.step, exc.loss)
    63 inf
    """

    def __init__(self, step: int, loss: float):
        self.step, self.loss = step, loss
        super().__init__(f"the training diverged: non-finite loss {loss} at step {step} (a smaller learning rate?)")


@dataclass
class TrainResult:
    """Summary of a run: final metrics, best dev loss, stage boundaries, run folder, records.

    Parameters
    ----------
    steps : int
        Steps completed (``cfg.steps`` unless the run was stopped by ``stop_at``).
    final : dict
        The last metrics record (``{}`` without records).
    best_dev_loss : float or None
        The smallest ``dev_loss`` logged (``None``: none logged, e.g. ``n_dev=0``).
    stages : dict or None
        The stage boundaries (:func:`run_stages`) of a finished run with a folder, else ``None``.
    out : str or None
        The run folder, or ``None``.
    seconds : float
        Wall-clock duration of the run.
    model : Transformer or None
        The trained model (not in the repr).
    history : list of dict
        Every metrics record of the run (not in the repr).

    See Also
    --------
    train : Returns a ``TrainResult``.
    load_metrics : The records of a run folder.

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=5, batch_size=8, log_every=2, seed=0)
    >>> res = train(cfg, progress=False)
    >>> res.steps, [r["step"] for r in res.history], res.final is res.history[-1]
    (5, [0, 2, 4], True)
    >>> res.out, res.stages, res.model.trainable_names()
    (None, None, ['layers.0.W_K', 'layers.0.W_Q', 'layers.0.W_V'])
    """

    steps: int
    final: dict
    best_dev_loss: float | None
    stages: dict | None
    out: str | None
    seconds: float
    model: Transformer | None = field(repr=False, default=None)
    history: list = field(repr=False, default_factory=list)


class _SignalGuard:
    """Within ``with``: SIGINT/SIGTERM only set ``self.signame`` (main thread only; a second SIGINT
    raises ``KeyboardInterrupt``). Previous handlers are restored on exit."""

    def __init__(self):
        self.signame = None
        self._old = {}

    def _handler(self, signum, frame):
        if self.signame is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signame = signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)
        return False


def check_train_memory(cfg: TrainConfig) -> None:
    """The memory guard on a training run of ``cfg`` before any data or parameter is built: the model, its
    gradients and the optimizer's state (Adam: 2 entries per trained entry; SGD with momentum: 1)."""
    states = {"adam": 2, "sgd": int(cfg.optim.momentum > 0)}[cfg.optim.name]
    check_model_memory("Trainer: model", cfg.model, states)


class Trainer:
    """Runs a :class:`TrainConfig` (validated again here, before any work).

    ``probes``: extra :mod:`theorycheck.nn.probes` callables ``(model, ctx) -> dict`` whose keys are
    logged next to the built-in :data:`~theorycheck.nn.probes.DEFAULT_PROBES` (any topic model: a
    general topic-word matrix ``cfg.data.phi`` is probed by dominant topics).

    Each step draws the batch of that step (:class:`DataStream`, a pure function of the seed and the
    step), computes the loss and its exact gradient (:meth:`Transformer.loss_and_grad`) and applies
    one optimizer update. The model is initialised from ``numpy.random.default_rng([seed, 0])``.
    :meth:`run` trains; the run folder and the resume rules are those of the module docstring.

    Parameters
    ----------
    cfg : TrainConfig
        The run.
    out : str or path-like, optional
        Run folder (``config.json``, ``metrics.jsonl``, checkpoints, ``params.npz``, ``stages.json``);
        ``None``: nothing written.
    probes : iterable of callable
        Extra probes ``(model, ctx: ProbeContext) -> dict``; their keys must not clash with the others'.
    progress : bool
        Show a progress bar.

    Raises
    ------
    TypeError
        ``cfg`` is not a :class:`TrainConfig`, or a probe is not callable.
    ValueError
        An invalid configuration (:meth:`TrainConfig.validate`) or a model or optimizer state beyond
        the memory guard, before any work.

    See Also
    --------
    train : ``Trainer(cfg, out, ...).run(resume=...)`` in one call.
    TrainConfig : What a ``Trainer`` runs.
    ProbeContext : What a probe is given besides the model.

    References
    ----------
    SPEC §5 (the experiments, probes and run folder), §5.2 (the stage boundaries of ``stages.json``).

    Examples
    --------
    On the exact population (``source="population"``, no sampling) the first logged loss is the
    closed-form stage-1 loss :func:`theorycheck.population.value_loss` of the initial ``W^V``:

    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.nn import DataConfig, ModelConfig, OptimConfig, TrainConfig, Trainer
    >>> from theorycheck.population import value_loss
    >>> cfg = TrainConfig(
    ...     data=DataConfig(T=3, v=2, tau=2, source="population"),
    ...     model=ModelConfig(V1=7, attention="uniform", train=("W_V",)),
    ...     optim=OptimConfig(name="sgd", lr=1.0), steps=4, log_every=1, seed=0,
    ... )
    >>> tr = Trainer(cfg, progress=False)
    >>> L0 = value_loss(tr.model.get("layers.0.W_V")[0], TopicModel(T=3, v=2, tau=2), Masking())
    >>> res = tr.run()
    >>> round(res.history[0]["loss"], 10) == round(L0, 10)
    True
    >>> [round(r["loss"], 6) for r in res.history]
    [0.997243, 0.906367, 0.856457, 0.827823]

    A run stopped at step 3 (``stop_at`` simulates a crash) and resumed from its checkpoint ends with
    the same records as an uninterrupted run:

    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=6, batch_size=8, log_every=1, checkpoint_every=2, seed=0)
    >>> whole = Trainer(cfg, "whole", progress=False).run()
    >>> Trainer(cfg, "crashed", progress=False).run(stop_at=3).steps
    3
    >>> resumed = Trainer(cfg, "crashed", progress=False).run(resume=True)
    >>> resumed.steps, resumed.history == whole.history
    (6, True)
    """

    def __init__(
        self,
        cfg: TrainConfig,
        out: str | os.PathLike | None = None,
        *,
        probes: Iterable[Probe] = (),
        progress: bool = True,
    ):
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
        cfg.validate()
        check_train_memory(cfg)
        probes = list(probes or ())
        for p in probes:
            if not callable(p):
                raise TypeError(f"probes must be callables (model, ctx) -> dict, got {p!r}")
        self.cfg = cfg
        self.out = None if out is None else Path(out)
        self.progress = progress
        self.stream = DataStream(cfg)
        self.tm, self.mk = self.stream.tm, self.stream.mk
        self.probes = [*DEFAULT_PROBES, *probes]
        self.model = Transformer(cfg.model, rng=np.random.default_rng([cfg.seed, 0]))
        self.refs = References(cfg, self.tm, self.mk)
        if cfg.init_W_V == "stage1-optimum":
            assert self.refs.W_V is not None  # References computes W_V for init_W_V="stage1-optimum"
            for lay in self.model.layers:
                lay.params["W_V"][...] = self.refs.W_V[None]
        self.opt = make_optimizer(cfg.optim)
        self.step = 0
        #: the metrics records of the run (on resume: those kept from the folder, then the new ones)
        self.history: list[dict] = []

    # ------------------------------------------------------------------ data (delegates)
    def batch_at(self, step: int):
        """The training batch of step ``step`` (:meth:`theorycheck.nn.data.DataStream.batch_at`)."""
        return self.stream.batch_at(step)

    def eval_tokens(self):
        return self.stream.eval_tokens()

    def dev_loss(self, chunk: int = 1000) -> float | None:
        return self.stream.dev_loss(self.model, chunk=chunk)

    # ------------------------------------------------------------------ metrics
    def metrics(self, step: int, loss: float, lr: float, full: bool) -> dict:
        """One metrics record: ``step``, ``loss``, ``lr`` and the keys of every probe
        (non-finite top-level floats become ``None``)."""
        ctx = ProbeContext(step, loss, lr, full, self.cfg, self.tm, self.mk, self.stream, self.refs)
        rec = {"step": int(step), "loss": float(loss), "lr": float(lr)}
        for probe in self.probes:
            out = probe(self.model, ctx)
            if not isinstance(out, dict):
                raise TypeError(f"probe {getattr(probe, '__name__', probe)!r} must return a dict, got {out!r}")
            clash = set(out) & set(rec)
            if clash:
                raise ValueError(f"probe {getattr(probe, '__name__', probe)!r} re-defines the keys {sorted(clash)}")
            rec.update(out)
        return {k: (None if isinstance(x, float) and not math.isfinite(x) else x) for k, x in rec.items()}

    # ------------------------------------------------------------------ run folder
    def _write_config(self):
        assert self.out is not None  # called only for a run with a folder (see run)
        cfg = self.cfg.to_dict()
        cfg["versions"] = {
            "theorycheck": __version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "numba": numba.__version__,
            "python": platform.python_version(),
        }
        write_json(self.out / "config.json", cfg, sort_keys=True, indent=2)

    def _open_folder(self, resume: bool):
        """Start a fresh folder or restore the newest checkpoint; return the metrics file, open for appending."""
        assert self.out is not None  # called only for a run with a folder (see run)
        self.out.mkdir(parents=True, exist_ok=True)
        mpath = self.out / "metrics.jsonl"
        if resume:
            ck = load_checkpoint(self.out, self.cfg, self.model)  # one that does not fit: skipped
            self.model.load_state_dict(ck.params)
            self.opt.load_state_dict(ck.opt)
            self.step = ck.step
            lines = mpath.read_text().splitlines() if mpath.exists() else []
            kept = [ln for ln in lines if ln.strip() and _json_step(ln) < self.step]
            atomic_write_text(mpath, "".join(ln + "\n" for ln in kept))
            self.history = [_loads(ln) for ln in kept]
        else:
            remove_checkpoints(self.out)
            self._write_config()
            atomic_write_text(mpath, "")
        return open(mpath, "a")

    def save_checkpoint(self):
        """Write a checkpoint of the current step into the run folder (no-op without one)."""
        if self.out is None:
            return None
        return save_checkpoint(self.out, self.step, self.model, self.opt, self.cfg)

    # ------------------------------------------------------------------ loop
    def run(self, *, resume: bool = False, stop_at: int | None = None) -> TrainResult:
        """Train until ``cfg.steps`` (or ``stop_at``, which simulates a crash: no final checkpoint).

        ``resume=True`` continues from the newest checkpoint of the run folder (see the module
        docstring); it is an error without a run folder or without a checkpoint.

        Parameters
        ----------
        resume : bool
            Continue from the newest intact checkpoint of the run folder.
        stop_at : int, optional
            Stop after this many steps (no final checkpoint, no ``params.npz``/``stages.json``).

        Returns
        -------
        TrainResult
            The summary of the run (with every record, the model and, for a finished run with a
            folder, the stage boundaries).

        Raises
        ------
        ValueError
            ``resume=True`` without a run folder, or without a checkpoint of this configuration.
        TrainingDiverged
            The loss was not finite at some step.
        TrainingInterrupted
            SIGINT/SIGTERM was received (after the current step and a checkpoint).
        """
        if resume and self.out is None:
            raise ValueError("resume=True needs a run folder (out)")
        t0 = time.perf_counter()
        keep_large_allocations()  # work arrays reused, not re-mapped each step (theorycheck._alloc)
        log = self._open_folder(resume) if self.out is not None else None
        end = self.cfg.steps if stop_at is None else min(self.cfg.steps, stop_at)
        bar = self._progress_bar()
        try:
            with _SignalGuard() as guard, blas_threads():
                self._loop(end, log, bar, guard)
        finally:
            if bar is not None:
                bar.close()
            if log is not None:
                log.close()
        return self._result(time.perf_counter() - t0, finished=stop_at is None or stop_at >= self.cfg.steps)

    def _progress_bar(self):
        if not self.progress:
            return None
        return tqdm(total=self.cfg.steps, initial=self.step, desc="train", unit="step", leave=False)

    def _loop(self, end, log, bar, guard):
        cfg = self.cfg
        params, grads = {}, {}
        for n in self.model.trainable_names():
            mod, k = self.model.named_params()[n]
            params[n], grads[n] = mod.params[k], mod.grads[k]
        while self.step < end:
            s = self.step
            batch = self.batch_at(s)
            self.model.zero_grad()
            loss = self.model.loss_and_grad(batch)
            if not math.isfinite(loss):
                raise TrainingDiverged(s, loss)
            lr = cfg.optim.lr
            if s % cfg.log_every == 0 or s == cfg.steps - 1:
                full = (cfg.eval_every > 0 and s % cfg.eval_every == 0) or s == cfg.steps - 1
                rec = self.metrics(s, loss, lr, full)
                self.history.append(rec)
                if log is not None:
                    log.write(dumps_json(rec, indent=None, sort_keys=True) + "\n")
                    log.flush()
            self.opt.step(params, grads, lr)
            self.step += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
            done = self.step == cfg.steps
            if cfg.checkpoint_every and (self.step % cfg.checkpoint_every == 0 or done):
                self.save_checkpoint()
            if guard.signame is not None:  # also on the last step: a Ctrl-C is never dropped
                if not (cfg.checkpoint_every and (self.step % cfg.checkpoint_every == 0 or done)):
                    self.save_checkpoint()
                ck = list_checkpoints(self.out)[0][1] if self.out is not None else None
                raise TrainingInterrupted(self.step, guard.signame, ck)

    def _result(self, seconds: float, finished: bool) -> TrainResult:
        devs = [r["dev_loss"] for r in self.history if r.get("dev_loss") is not None]
        stages = None
        if self.out is not None and finished and self.step >= self.cfg.steps:
            stages = self._finish()
        return TrainResult(
            steps=self.step,
            final=self.history[-1] if self.history else {},
            best_dev_loss=min(devs) if devs else None,
            stages=stages,
            out=None if self.out is None else str(self.out),
            seconds=seconds,
            model=self.model,
            history=self.history,
        )

    def _finish(self):
        """Write ``params.npz`` (layer 0, head 0 matrices, ``W_E``, ``b_dec``, ``W_dec`` and
        ``full/*`` = the whole state) and ``stages.json``; return the stage boundaries."""
        assert self.out is not None  # called only for a run with a folder (see run)
        m, recs = self.model, load_metrics(self.out)
        lay = m.layers[0]
        tab = np.eye(self.cfg.data.V1) if m.embedding.one_hot else m.embedding.params["W_E"]
        arrays = {k: lay.params[k][0] for k in ("W_V", "W_K", "W_Q")}
        arrays.update(W_E=tab, b_dec=m.decoder.params["b_dec"])
        if "W_dec" in m.decoder.params:
            arrays["W_dec"] = m.decoder.params["W_dec"]
        arrays.update({f"full/{k}": v for k, v in m.state_dict().items()})
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(self.out / "params.npz", buf.getvalue())
        stages = run_stages(self.cfg, recs)
        if stages is not None:
            write_json(self.out / "stages.json", stages, sort_keys=True, indent=2)
        return stages


def _loads(line: str) -> dict:
    return json.loads(line)


def _json_step(line: str) -> int:
    return int(_loads(line)["step"])


def stage_curves(recs: list[dict]) -> tuple[list, list]:
    """The two curves the norm rule of :func:`theorycheck.analysis.stats.detect_stages` reads (SPEC §5.2).

    One layer: ``||W^V||_F`` and ``c ||sum_h W_K^T W_Q||_F`` (the score matrix, whose topic part
    grows at the rate of :func:`theorycheck.analysis.dynamics.stage2_onset`). Several layers: the
    norm of all value matrices together, ``sqrt(sum_l ||W^V_l||^2)``, and the largest growth factor
    of any layer's ``||W_K,l||_F ||W_Q,l||_F`` (initial value 1), i.e. stage 2 starts when the key
    and query norms of the first layer to move have grown ``sqrt(10)``-fold each. The norms
    themselves are used, as in the paper's figures, not the product matrix: from a random init
    ``||W_K^T W_Q||`` also grows by alignment alone while ``||W_K||``, ``||W_Q||`` barely move.

    Parameters
    ----------
    recs : list of dict
        Metrics records of a run (:func:`load_metrics`, ``TrainResult.history``): with
        ``norm_W_V`` and ``norm_KQ`` (one layer) or the ``norm_W_*_layers`` lists (several layers).

    Returns
    -------
    nV, nKQ : list of float
        The value-norm curve and the key-query curve, one entry per record.

    See Also
    --------
    run_stages : The stage boundaries these curves give.
    theorycheck.analysis.stats.detect_stages : The rules applied to the curves.

    References
    ----------
    SPEC §5.2 (the two-stage experiment), §4.5 (the stage-2 onset).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, stage_curves, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=5, batch_size=8, log_every=1, seed=0)
    >>> nV, nKQ = stage_curves(train(cfg, progress=False).history)
    >>> [round(x, 4) for x in nV]  # stage 1: ||W^V|| grows
    [0.1373, 0.2552, 0.3411, 0.4528, 0.5419]
    >>> [round(x, 6) for x in nKQ]  # ... while the score matrix stays at its small init
    [0.002245, 0.002244, 0.002244, 0.002243, 0.002243]
    """
    if recs and "norm_W_K_layers" in recs[0]:

        def kq(r):
            return np.asarray(r["norm_W_K_layers"], dtype=float) * np.asarray(r["norm_W_Q_layers"], dtype=float)

        k0 = kq(recs[0])
        k0 = np.where(k0 > 0, k0, np.finfo(float).tiny)
        nV = [float(np.sqrt(np.sum(np.square(r["norm_W_V_layers"])))) for r in recs]
        nKQ = [float(np.max(kq(r) / k0)) for r in recs]
        return nV, nKQ
    return [r["norm_W_V"] for r in recs], [r["norm_KQ"] for r in recs]


def run_stages(cfg: TrainConfig, recs: list[dict]) -> dict | None:
    """The stage boundaries of a run (``stages.json``; ``None`` without records): the rules of
    :func:`theorycheck.analysis.stats.detect_stages` on :func:`stage_curves`, with the structural rule
    (``K_eff`` and the W^V block score) where every record has them (SPEC §5.2).

    Parameters
    ----------
    cfg : TrainConfig
        The run's configuration (its ``data.v`` sets the structural rule's scale).
    recs : list of dict
        The run's metrics records.

    Returns
    -------
    dict or None
        ``StageBoundaries.to_dict()`` (:mod:`theorycheck.analysis.stats`) of the detected stages: ``stage1_end``,
        ``stage2_start`` (``None`` when not reached), the rule's text, the structural boundaries, ...;
        ``None`` for no records.

    See Also
    --------
    stage_curves : The curves the norm rule reads.
    stage_grid : The boundaries over a grid of learning rates and init scales.
    theorycheck.analysis.stats.detect_stages : The rules.

    References
    ----------
    SPEC §5.2 (the two-stage experiment and its stage boundaries).

    Examples
    --------
    Five steps are stage 1 only: ``W^V`` grows, attention does not move yet.

    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, run_stages, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=5, batch_size=8, log_every=1, seed=0)
    >>> st = run_stages(cfg, train(cfg, progress=False).history)
    >>> st["stage1_end"], st["stage2_start"], st["structural_two_stage"]
    (4, None, False)
    >>> run_stages(cfg, []) is None
    True
    """
    if not recs:
        return None
    Ke = [r.get("K_eff_median") for r in recs]
    has_K = all(k is not None for k in Ke)
    bs = [r.get("block_score_W_V") for r in recs]
    has_bs = has_K and all(b is not None for b in bs)
    nV, nKQ = stage_curves(recs)
    st = detect_stages(
        [r["step"] for r in recs],
        nV,
        nKQ,
        K_eff=Ke if has_K else None,
        v=cfg.data.v,
        block_score=bs if has_bs else None,
    )
    return st.to_dict()


def load_metrics(out: str | os.PathLike) -> list[dict]:
    """Read ``metrics.jsonl`` of a run folder.

    Parameters
    ----------
    out : str or path-like
        The run folder.

    Returns
    -------
    list of dict
        One record per logged step, in order: ``step``, ``loss``, ``lr`` and the probes' keys
        (non-finite values as ``None``).

    Raises
    ------
    FileNotFoundError
        The folder has no ``metrics.jsonl``.

    See Also
    --------
    train : Writes the run folder.
    stage_curves : Reads the records.

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, load_metrics, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=5, batch_size=8, log_every=2, seed=0)
    >>> res = train(cfg, "run", progress=False)
    >>> recs = load_metrics("run")
    >>> [r["step"] for r in recs], recs == res.history
    ([0, 2, 4], True)
    """
    path = Path(out) / "metrics.jsonl"
    return [_loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def train(
    cfg: TrainConfig,
    out: str | os.PathLike | None = None,
    *,
    probes: Iterable[Probe] = (),
    progress: bool = True,
    resume: bool = False,
) -> TrainResult:
    """Run ``cfg`` (optionally writing the run folder ``out``); see :class:`Trainer`.

    Parameters
    ----------
    cfg : TrainConfig
        The run.
    out : str or path-like, optional
        Run folder; ``None``: nothing written.
    probes : iterable of callable
        Extra probes ``(model, ctx) -> dict`` logged with the built-in ones.
    progress : bool
        Show a progress bar.
    resume : bool
        Continue from the newest checkpoint of ``out`` (which must hold one of this configuration).

    Returns
    -------
    TrainResult
        The summary of the run.

    Raises
    ------
    ValueError
        An invalid configuration, or ``resume=True`` without a run folder or a checkpoint.
    TrainingDiverged
        The loss was not finite at some step.
    TrainingInterrupted
        SIGINT/SIGTERM during the run (after a checkpoint).

    See Also
    --------
    Trainer : The same, step by step, with access to the model and the data stream.
    run_preset : Train a named preset.
    load_metrics : Read the records back from the run folder.

    References
    ----------
    SPEC §5.1, §5.2 (the experiments).

    Examples
    --------
    Three topics of two words, documents of 12 tokens, 5 SGD steps on fresh batches of 8 documents:

    >>> import os
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=5, batch_size=8, log_every=1, seed=0)
    >>> res = train(cfg, "run", progress=False)
    >>> [round(r["loss"], 4) for r in res.history]
    [1.0009, 0.9706, 0.9287, 0.9026, 0.8854]
    >>> sorted(os.listdir("run"))
    ['config.json', 'metrics.jsonl', 'params.npz', 'stages.json']
    """
    return Trainer(cfg, out, probes=probes, progress=progress).run(resume=resume)
