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
    checkpointed. ``step``: steps completed; ``checkpoint``: the checkpoint written (or ``None``)."""

    def __init__(self, step: int, signame: str, checkpoint=None):
        self.step, self.signame, self.checkpoint = step, signame, checkpoint
        where = f"; checkpoint {checkpoint}" if checkpoint else "; no run folder, nothing saved"
        super().__init__(f"interrupted by {signame} at step {step}{where}")


class TrainingDiverged(FloatingPointError):
    """Raised by :meth:`Trainer.run` when the loss leaves the floats (a learning rate past the stable range, SPEC
    §11.7): a result of the run, not a bug. ``step``: the step whose loss was not finite; ``loss``: that value."""

    def __init__(self, step: int, loss: float):
        self.step, self.loss = step, loss
        super().__init__(f"the training diverged: non-finite loss {loss} at step {step} (a smaller learning rate?)")


@dataclass
class TrainResult:
    """Summary of a run: final metrics, best dev loss, stage boundaries, run folder, records."""

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
    general topic-word matrix ``cfg.data.phi`` is probed by dominant topics)."""

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
        docstring); it is an error without a run folder or without a checkpoint."""
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
    (``K_eff`` and the W^V block score) where every record has them (SPEC §5.2)."""
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
    """Read ``metrics.jsonl`` of a run folder."""
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
    """Run ``cfg`` (optionally writing the run folder ``out``); see :class:`Trainer`."""
    return Trainer(cfg, out, probes=probes, progress=progress).run(resume=resume)
