"""``theorycheck train``: its parser (the command: :mod:`theorycheck.cli.train`)."""

from __future__ import annotations

from ..common import (
    add_force_flag,
    add_json_flag,
    add_model_flags,
    add_no_figures_flag,
    add_quiet_flag,
    add_scheduler_flag,
    add_seed_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.train"


#: The largest ``--steps`` accepted (checked before any work): the presets run 300 to 3,000 steps.
MAX_STEPS = 10_000_000


DESCRIPTION = "train the numpy transformer on a preset (see --list), resumable (SPEC §5)"


def add_parser(sub):
    p = sub.add_parser("train", help=DESCRIPTION, description=DESCRIPTION)
    p.add_argument("--list", action="store_true", help="print the preset names, one per line, and exit")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--out", default=None, help="run folder (metrics.jsonl, checkpoints, params.npz, figures/)")
    p.add_argument("--steps", type=int, default=None, help=f"override the number of steps (0 to {MAX_STEPS:,})")
    add_seed_flag(p, None, "override the preset's seed")
    p.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds: every run once per seed, into <run>-seed<s> folders (seed<s> for a "
        "single-run preset)",
    )
    add_scheduler_flag(p, "the runs of a grid preset or of --seeds (--out on a file system the workers share)")
    p.add_argument(
        "--checkpoint-every", type=int, default=None, help="checkpoint period in steps (0: none; default: the preset's)"
    )
    p.add_argument("--resume", action="store_true", help="continue from the run folder's newest checkpoint")
    add_force_flag(p)
    add_no_figures_flag(p)
    add_quiet_flag(p)
    add_json_flag(p, "the summary printed at the end")
    add_model_flags(p)  # used with --model/--topic-word only: the preset's run on a general model (SPEC §11)
    _model_flags_need_general(p)
    return p


# The model flags (dest -> flag) that act only with --model/--topic-word: a preset carries its own model
# (every preset's T, v, law and masking are part of its definition), so without --model/--topic-word they are
# refused by name rather than silently ignored. Their parser default is None (so that "given" is visible);
# the shared defaults are filled in by :func:`_fill_model_defaults` when a general model is built.
_MODEL_ONLY = {
    "T": "--T", "v": "--v", "tau": "--tau", "prior": "--prior", "alpha": "--alpha",
    "p_m": "--p-m", "p_c": "--p-c", "p_r": "--p-r",
}  # fmt: skip


_MODEL_DEFAULTS: dict = {}


def _model_flags_need_general(p) -> None:
    """Give the model flags a ``None`` default (their usual default named in the help) so that a flag the
    user gave is recognisable, and record the usual defaults in ``_MODEL_DEFAULTS``."""
    for action in p._actions:
        if action.dest in _MODEL_ONLY:
            _MODEL_DEFAULTS[action.dest] = action.default
            if action.help:
                action.help = action.help.replace("%(default)s", str(action.default))
                action.help += " (with --model/--topic-word only: a preset has its own model)"
            action.default = None
