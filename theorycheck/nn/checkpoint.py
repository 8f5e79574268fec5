"""Checkpoints of a run folder: atomic, self-checking, tied to the exact configuration.

Each checkpoint is a pair ``checkpoint-<step>.npz`` (parameters ``param/*`` and optimizer state
``opt/*``; plain arrays, loaded with ``allow_pickle=False``) and ``checkpoint-<step>.json`` (step,
optimizer step count, the full configuration and its SHA-256 (:func:`theorycheck.nn.config.config_hash`),
the package version and the SHA-256 of the ``.npz`` bytes). Both are written with
:func:`theorycheck._io.atomic_write_bytes`, the ``.npz`` first: the ``.json`` is the commit mark.
The last ``KEEP`` checkpoints are kept.

:func:`load_checkpoint` takes the newest checkpoint whose files are intact; a corrupted one
(truncated, random bytes, missing ``.npz``, hash mismatch) is named in a warning and the previous
one is used. It refuses a checkpoint written under a different configuration with a
``ValueError`` listing the differing fields (``checkpoint_every`` may differ).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import atomic_write_bytes, atomic_write_text, dumps_json, remove_file
from .._validate import TheorycheckWarning
from .._version import __version__
from .config import TrainConfig, config_diff, config_hash
from .model import Transformer
from .optim import SGD, Adam

__all__ = ["KEEP", "Checkpoint", "save_checkpoint", "load_checkpoint", "list_checkpoints", "remove_checkpoints"]

#: number of checkpoints kept in a run folder
KEEP = 2
_NAME = re.compile(r"^checkpoint-(\d+)\.json$")
#: fields a resumed run may change (they do not change the numbers)
_MAY_DIFFER = ("checkpoint_every",)


@dataclass
class Checkpoint:
    """A loaded checkpoint: ``step``, model ``params``, optimizer state ``opt`` and the file it came from.

    Parameters
    ----------
    step : int
        Steps completed when it was written.
    params : dict of str to ndarray
        Every model parameter by name (:meth:`Transformer.state_dict`).
    opt : dict
        The optimizer's state (``SGD.state_dict()``, ``Adam.state_dict()``), with its step count ``"t"``.
    path : pathlib.Path
        The ``.npz`` file.

    See Also
    --------
    load_checkpoint : Returns a ``Checkpoint``.
    save_checkpoint : Writes one.

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, load_checkpoint, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=4, batch_size=8, checkpoint_every=2, seed=0)
    >>> res = train(cfg, "run", progress=False)
    >>> ck = load_checkpoint("run", cfg)
    >>> ck.step, ck.opt, ck.path.name, sorted(ck.params)
    (4, {'t': 4}, 'checkpoint-4.npz', ['b_dec', 'layers.0.W_K', 'layers.0.W_Q', 'layers.0.W_V'])
    >>> all(np.array_equal(ck.params[k], v) for k, v in res.model.state_dict().items())
    True
    """

    step: int
    params: dict
    opt: dict
    path: Path


def list_checkpoints(out) -> list[tuple[int, Path]]:
    """``(step, json path)`` of the checkpoints in ``out``, newest first."""
    out = Path(out)
    if not out.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in out.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found, reverse=True)


def remove_checkpoints(out, keep: int = 0) -> None:
    """Delete all but the newest ``keep`` checkpoints of ``out``."""
    for _, js in list_checkpoints(out)[keep:]:
        remove_file(js)  # a file of the user's is refused, never deleted (theorycheck._io.check_not_foreign)
        remove_file(js.with_suffix(".npz"))


def save_checkpoint(out: str | os.PathLike, step: int, model: Transformer, opt: SGD | Adam, cfg: TrainConfig) -> Path:
    """Write ``checkpoint-<step>.npz/.json`` atomically and prune to the last ``KEEP``.

    Parameters
    ----------
    out : str or path-like
        The run folder (it must exist).
    step : int
        Steps completed, ``step >= 0``.
    model : Transformer
        The model whose parameters are saved.
    opt : SGD or Adam
        The optimizer whose state is saved.
    cfg : TrainConfig
        The run's configuration (saved with its :func:`config_hash`).

    Returns
    -------
    pathlib.Path
        The ``checkpoint-<step>.json`` written (the commit mark, written after the ``.npz``).

    See Also
    --------
    load_checkpoint : Reads the newest intact checkpoint back.
    Trainer : Saves a checkpoint every ``checkpoint_every`` steps.

    References
    ----------
    SPEC §5 (safe resume of a run).

    Examples
    --------
    >>> import os
    >>> from theorycheck.nn import DataConfig, TrainConfig, Trainer, load_checkpoint, save_checkpoint
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), steps=4, batch_size=8, seed=0)
    >>> tr = Trainer(cfg, progress=False)
    >>> os.mkdir("run")
    >>> for step in (1, 2, 3):
    ...     path = save_checkpoint("run", step, tr.model, tr.opt, cfg)
    >>> path.name, sorted(os.listdir("run"))  # the last KEEP = 2 are kept
    ('checkpoint-3.json', ['checkpoint-2.json', 'checkpoint-2.npz', 'checkpoint-3.json', 'checkpoint-3.npz'])
    >>> load_checkpoint("run", cfg, tr.model).step
    3
    """
    out = Path(out)
    arrays = {f"param/{k}": v for k, v in model.state_dict().items()}
    ost = opt.state_dict()
    arrays.update({f"opt/{k}": v for k, v in ost.items() if k != "t"})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    npz = out / f"checkpoint-{step}.npz"
    atomic_write_bytes(npz, data)
    meta = {
        "step": int(step),
        "opt_t": int(ost["t"]),
        "seed": cfg.seed,
        "config": cfg.to_dict(),
        "config_hash": config_hash(cfg),
        "theorycheck_version": __version__,
        "npz": npz.name,
        "npz_sha256": hashlib.sha256(data).hexdigest(),
        "rng": "batch of step s drawn from default_rng([seed, 1, s]); init default_rng([seed, 0])",
    }
    js = out / f"checkpoint-{step}.json"
    atomic_write_text(js, dumps_json(meta, sort_keys=True) + "\n")
    remove_checkpoints(out, keep=KEEP)
    return js


def _read(js: Path) -> tuple[dict, Checkpoint]:
    """Read and verify one checkpoint; raises ``ValueError`` describing the damage."""
    try:
        meta = json.loads(js.read_text())
        npz = js.with_name(meta["npz"])
        want = meta["npz_sha256"]
        step, opt_t = int(meta["step"]), int(meta["opt_t"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{js.name} is unreadable ({type(exc).__name__}: {exc})") from None
    try:
        data = npz.read_bytes()
    except OSError as exc:
        raise ValueError(f"{npz.name} is missing or unreadable ({exc})") from None
    if hashlib.sha256(data).hexdigest() != want:
        raise ValueError(f"{npz.name} is corrupted (SHA-256 differs from the one recorded in {js.name})")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            params = {k[6:]: z[k] for k in z.files if k.startswith("param/")}
            ost = {k[4:]: z[k] for k in z.files if k.startswith("opt/")}
    except Exception as exc:
        raise ValueError(f"{npz.name} cannot be decoded ({type(exc).__name__}: {exc})") from None
    ost["t"] = opt_t
    return meta, Checkpoint(step=step, params=params, opt=ost, path=npz)


def load_checkpoint(out: str | os.PathLike, cfg: TrainConfig, model: Transformer | None = None) -> Checkpoint:
    """The newest intact checkpoint of ``out`` for ``cfg`` (see the module docstring).

    With ``model``, a checkpoint whose arrays do not fit it (a parameter missing, or of another shape) is
    treated like a damaged one: named in a warning and skipped for the previous checkpoint.

    Raises ``ValueError`` if ``out`` holds no checkpoint, if every checkpoint is damaged, or if the
    checkpoint's configuration differs from ``cfg`` (the message lists the fields).

    Parameters
    ----------
    out : str or path-like
        The run folder.
    cfg : TrainConfig
        The configuration of the run to resume (only ``checkpoint_every`` may differ from the checkpoint's).
    model : Transformer, optional
        Skip checkpoints whose parameters do not fit this model.

    Returns
    -------
    Checkpoint
        The newest checkpoint whose files are intact (SHA-256 checked) and that fits.

    Raises
    ------
    ValueError
        No checkpoint, every checkpoint damaged, or a checkpoint of another configuration.

    Warns
    -----
    TheorycheckWarning
        A damaged newer checkpoint was skipped, or the checkpoint was written by another version.

    See Also
    --------
    save_checkpoint : Writes the checkpoints.
    config_diff : The differing fields listed in the error.
    Trainer : ``run(resume=True)`` resumes from this checkpoint.

    References
    ----------
    SPEC §5 (safe resume of a run).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, OptimConfig, TrainConfig, load_checkpoint, train
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), optim=OptimConfig(name="sgd", lr=0.5),
    ...                   steps=4, batch_size=8, checkpoint_every=2, seed=0)
    >>> _ = train(cfg, "run", progress=False)
    >>> load_checkpoint("run", cfg.replace(checkpoint_every=1)).step  # the period may change
    4
    >>> load_checkpoint("run", cfg.replace(seed=1))
    Traceback (most recent call last):
        ...
    ValueError: resume: the configuration differs from the one of checkpoint-4.json: seed: 0 -> 1. ...
    """
    found = list_checkpoints(out)
    if not found:
        raise ValueError(
            f"resume: {out} holds no checkpoint (checkpoint-<step>.json/.npz); nothing to resume. "
            "Run without resume to start afresh, with checkpoint_every > 0 (--checkpoint-every K) to make it resumable"
        )
    damaged = []
    for _step, js in found:
        try:
            meta, ck = _read(js)
        except ValueError as exc:
            damaged.append(str(exc))
            continue
        _check_same_config(meta, cfg, js)
        if model is not None:
            try:
                _check_fits(ck, model)
            except ValueError as exc:
                damaged.append(str(exc))
                continue
        if damaged:
            warnings.warn(
                f"resume: {'; '.join(damaged)}; using the previous checkpoint {js.name} (step {ck.step})",
                TheorycheckWarning,
                stacklevel=3,
            )
        return ck
    raise ValueError(f"resume: every checkpoint in {out} is damaged: {'; '.join(damaged)}")


def _check_fits(ck: Checkpoint, model: Transformer) -> None:
    """A ``ValueError`` naming the checkpoint's file unless its parameters fit ``model`` (names and shapes)."""
    for name, (mod, key) in model.named_params().items():
        want = mod.params[key].shape
        if name not in ck.params:
            raise ValueError(f"{ck.path.name} does not fit the model (no parameter {name!r})")
        if ck.params[name].shape != want:
            raise ValueError(
                f"{ck.path.name} does not fit the model (parameter {name!r} has shape {ck.params[name].shape}, "
                f"the model's is {want})"
            )


def _check_same_config(meta: dict, cfg: TrainConfig, js: Path) -> None:
    new = cfg.to_dict()
    if meta.get("config_hash") != config_hash(new):
        old = json.loads(dumps_json(meta.get("config", {})))
        new_j = json.loads(dumps_json(new))
        diff = [ln for ln in config_diff(old, new_j) if ln.split(":")[0] not in _MAY_DIFFER]
        if diff:
            raise ValueError(
                f"resume: the configuration differs from the one of {js.name}: "
                + "; ".join(diff)
                + ". Resume with the original settings, or start a new run folder"
            )
    version = meta.get("theorycheck_version")
    if version != __version__:
        warnings.warn(
            f"resume: {js.name} was written by theorycheck {version}, this is {__version__}",
            TheorycheckWarning,
            stacklevel=4,
        )
