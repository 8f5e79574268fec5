"""``theorycheck landscape``: the attention loss landscape ``L(alpha, beta)``, ``L(K)`` and the certified optimum
(SPEC §4.3), written by :func:`theorycheck.report.landscape.write_landscape`; for a general model
(``--model``/``--topic-word``) the exact loss over the family ``S = alpha I + beta G`` (SPEC §11.4).
"""

from __future__ import annotations

from typing import cast

from .._dask import scheduler_executor
from .._io import prepare_output_dir
from .._memory import check_grid
from .._validate import check_loss
from ..analysis.landscape import DEFAULT_SWEEP, asymptotic_sweep, growth_configs
from ..models import TopicModel, require_symmetric
from ..report.landscape import write_landscape
from .common import (
    command,
    json_path,
    models,
    require_enumerable_sets,
    wants_general,
    write_json_summary,
)
from .parsers.landscape import GENERAL_N_GRID_RANGE, N_GRID_RANGE

_BYTES_PER_POINT = 512


def run(args) -> int:
    tm, mk = models(args)
    require_enumerable_sets(args, tm)
    loss = check_loss(args.loss)
    if args.n_grid is not None:
        general = wants_general(args)
        low, high = GENERAL_N_GRID_RANGE if general else N_GRID_RANGE
        where = "with --model/--topic-word (each point an exact evaluation)" if general else "for the paper's model"
        check_grid("--n-grid", args.n_grid, low=low, high=high, dims=2, bytes_per_point=_BYTES_PER_POINT, where=where)
    kind = args.sweep or ("spec" if args.scheduler else None)
    if kind is not None:  # the sweep's table is of the paper's models (T, v, tau)
        flag = "--sweep" if args.sweep else "--scheduler (it runs the --sweep)"
        require_symmetric(tm, flag, "landscape without --sweep and --scheduler")
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    json_file = json_path(args)
    rows = None
    if kind is not None:
        with scheduler_executor(args.scheduler) as ex:
            v = cast(TopicModel, tm).v  # require_symmetric above
            configs = DEFAULT_SWEEP if kind == "spec" else growth_configs(v=v)
            rows = asymptotic_sweep(configs, mk, value=args.value, executor=ex, progress=not args.quiet)
    kw = {"value": args.value, "n_grid": args.n_grid, "loss": loss, "force": args.force, "command": command(args)}
    info = write_landscape(tm, mk, out, sweep=rows, figures=not args.no_figures, **kw)
    print(_optimum_line(info, args.value, loss))
    names = ["grid.npz", *([] if args.no_figures else ["landscape.png"]), "optimum.json"]
    print(f"written {out}/{', '.join(names)}" + (", sweep.json" if rows is not None else ""))
    write_json_summary(json_file, info)
    return 0 if info["status"] == 0 or (info.get("at_boundary") and "solver" not in info) else 1


def _optimum_line(info: dict, value: str, loss: str) -> str:
    """The console line of the optimum record. A record with a ``solver`` entry (a general model, SPEC §11.4)
    holds the grid argmin at its top level and the solver's optimum over the family under ``solver``; the
    record of the paper's model is the certified optimum itself (SPEC §4.3), with ``K``."""
    if "solver" in info:
        sol = info["solver"]
        return (
            f"general model, W^V={value}, loss={loss}, S = alpha I + beta G: grid alpha={info['alpha']:.6g} "
            f"beta={info['beta']:.6g} L={info['loss']:.8f}; solver alpha*={sol['alpha']:.6g} beta*={sol['beta']:.6g} "
            f"L*={sol['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
        )
    return (
        f"W^V={value}, loss={loss}: alpha*={info['alpha']:.6g} beta*={info['beta']:.6g} K*={info['K']:.6g} "
        f"L*={info['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
    )
