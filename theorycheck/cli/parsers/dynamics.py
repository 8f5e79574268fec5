"""``theorycheck dynamics``: its parser (the command: :mod:`theorycheck.cli.dynamics`)."""

from __future__ import annotations

from ...nn.config import GRID_PRESET, MAX_GRID_STEPS
from ..common import (
    add_jobs_flag,
    add_json_flag,
    add_no_figures_flag,
    add_out_flags,
    add_quiet_flag,
    add_scheduler_flag,
    add_seed_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.dynamics"


DESCRIPTION = (
    "stage boundaries of the exact two-stage dynamics over a grid of learning rates and init scales (SPEC §5.2)"
)


#: the default grid: the preset's lr 30 and init 0.01 in the middle
DEFAULT_LRS = "10,20,30,40"


DEFAULT_SCALES = "0.003,0.01,0.03"


def add_parser(sub):
    p = sub.add_parser("dynamics", help=DESCRIPTION, description=DESCRIPTION)
    p.add_argument("--lr", default=DEFAULT_LRS, help="comma-separated SGD learning rates > 0 (default: %(default)s)")
    p.add_argument(
        "--init-scale",
        default=DEFAULT_SCALES,
        help="comma-separated init scales s > 0, entries N(0, s^2) (default: %(default)s)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"steps per cell, 1 to {MAX_GRID_STEPS:,} (default: the {GRID_PRESET} preset's 3000)",
    )
    add_seed_flag(p, None, f"the initialisation seed of every cell (default: the {GRID_PRESET} preset's)")
    add_jobs_flag(p, None, "1 = in this process; more: local worker processes")
    add_scheduler_flag(p, "the cells")
    add_out_flags(p, "theorycheck-dynamics", "output folder (stage_grid.md, stage_grid.json, figures/stage_grid.png)")
    add_no_figures_flag(p)
    add_quiet_flag(p)
    add_json_flag(p, "the grid rows")
    return p
