"""``theorycheck landscape``: its parser (the command: :mod:`theorycheck.cli.landscape`)."""

from __future__ import annotations

from ..common import (
    add_json_flag,
    add_model_flags,
    add_no_figures_flag,
    add_out_flags,
    add_quiet_flag,
    add_scheduler_flag,
)

#: The module with ``run(args)``, imported when the command runs.
IMPLEMENTATION = "theorycheck.cli.landscape"


#: Allowed ``--n-grid`` (points per axis of the 2-D grid): the paper's model (closed-form points, about
#: 250 bytes each alive at once) and a general model (each point an exact loss evaluation). The grid's arrays
#: are also checked against the memory guard (``THEORYCHECK_MAX_BYTES``) before any work.
N_GRID_RANGE = (2, 2001)


GENERAL_N_GRID_RANGE = (2, 101)


DESCRIPTION = "attention loss landscape L(alpha, beta), L(K) and the certified optimum (SPEC §4.3)"


def add_parser(sub):
    p = sub.add_parser("landscape", help=DESCRIPTION, description=DESCRIPTION)
    add_model_flags(p)
    p.add_argument("--value", choices=("block", "identity"), default="block", help="frozen W^V (default: %(default)s)")
    p.add_argument(
        "--loss",
        choices=("squared", "ce"),
        default="squared",
        help="squared loss or cross-entropy, SPEC §2.2 (default: %(default)s)",
    )
    p.add_argument(
        "--n-grid",
        type=int,
        default=None,
        help=f"grid points per axis, in [{N_GRID_RANGE[0]}, {N_GRID_RANGE[1]}] (default: 201); "
        f"with --model/--topic-word in [{GENERAL_N_GRID_RANGE[0]}, {GENERAL_N_GRID_RANGE[1]}] (default: 31)",
    )
    p.add_argument(
        "--sweep",
        choices=("spec", "growth"),
        default=None,
        help="also write sweep.json: the certified optimum over the SPEC §4.3 table of (T, v, tau) ('spec') "
        "or over T growing to 1e5 ('growth'), with this masking and --value (default: none; 'spec' with --scheduler)",
    )
    add_scheduler_flag(p, "the --sweep")
    add_out_flags(p, "theorycheck-landscape")
    add_no_figures_flag(p)
    add_quiet_flag(p)
    add_json_flag(p, "the optimum record (as optimum.json)")
    return p
