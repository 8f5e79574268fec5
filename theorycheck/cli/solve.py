"""The ``theorycheck solve value|embedding|attention`` command: one flag set and one JSON shape for three optima.

The three problems (SPEC §4.2 stage-1 value matrix, SPEC §4.1 tied embedding Gram, SPEC §4.3
stage-2 attention) are solved by :mod:`theorycheck.solvers`, always called with keyword
arguments. The summary has the same keys for all three::

    problem, model, masking, method, status, success, message, fun, nit,
    residuals, certificate, info, optimum

``optimum`` holds the optimum's scalars: ``A, B0, gamma`` (value), ``same_topic, different_topic,
rank`` (embedding), ``K, L, alpha, beta`` (attention). No mathematics lives here.
"""

from __future__ import annotations

import functools
import inspect
import io
import math
import sys
from typing import Any

import numpy as np

from .. import solvers
from .._dask import scheduler_executor
from .._io import atomic_directory, atomic_write_bytes, prepare_output_dir, write_json
from .._memory import check_grid
from .._validate import check_loss
from ..analysis.stats import embedding_topic_stats
from ..models import GeneralTopicModel, TopicModel
from .common import (
    command,
    json_path,
    model_summary,
    models,
    require_enumerable_sets,
    wants_general,
    write_json_summary,
)

__all__ = ["PROBLEMS", "run_solve", "solve_summary", "format_summary", "npz_payload"]


#: Problem name -> (solver function name in :mod:`theorycheck.solvers`, SPEC section).
PROBLEMS = {
    "value": ("optimal_value_matrix", "SPEC §4.2"),
    "embedding": ("optimal_embedding_gram", "SPEC §4.1"),
    "attention": ("optimal_attention", "SPEC §4.3"),
}


def _solver(problem: str):
    return getattr(solvers, PROBLEMS[problem][0])


def _solver_kwargs(fn, problem: str, given: dict) -> dict:
    """Keyword arguments for ``fn`` from ``{flag: (name, value)}``; flags left at ``None`` are omitted.

    A flag the solver does not take is a ``ValueError`` naming the flag, before any work.
    """
    params = inspect.signature(fn).parameters
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {}
    for flag, (name, value) in given.items():
        if value is None or value is False:
            continue
        if name not in params and not open_kw:
            raise ValueError(f"solve {problem}: {flag} does not apply to this problem (its solver has no {name!r})")
        kwargs[name] = value
    return kwargs


def run_solve(problem: str, tm, mk, given: dict):
    """Call the solver of ``problem`` with keyword arguments only; return its ``SolveResult``."""
    fn = _solver(problem)
    return fn(tm, mk, **_solver_kwargs(fn, problem, given))


def _scalar(v):
    if isinstance(v, (bool, np.bool_, int, np.integer, str)) or v is None:
        return v.item() if isinstance(v, np.generic) else v
    if isinstance(v, (float, np.floating)):
        return float(v)
    return None


def _scalars(d: dict, skip=()) -> dict:
    return {k: _scalar(v) for k, v in d.items() if k not in skip and _scalar(v) is not None}


def _value_optimum(res, tm, mk) -> dict:
    opt = _scalars(res.info, skip=("tol", "relative_residuals"))
    x = res.x
    if x is not None:
        fro = getattr(x, "fro_norm", None)  # BlockValueMatrix: property (or method), O(1)
        fro = fro() if callable(fro) else fro
        opt["fro_norm"] = float(fro) if fro is not None else float(np.linalg.norm(np.asarray(x)))
        for k in ("A", "B0", "gamma"):
            if hasattr(x, k) and k not in opt:
                opt[k] = float(getattr(x, k))
    return opt


def _embedding_optimum(res, tm, mk, bias: bool) -> dict:
    opt = _scalars(res.info, skip=("tol", "relative_residuals", "b"))
    return opt | _embedding_extras(tm, mk, res, bias)


@functools.singledispatch
def _embedding_extras(tm: GeneralTopicModel, mk, res, bias: bool) -> dict:
    """Quantities of the optimum beyond the solver's own scalars: none for a general model (SPEC §11.5: no
    block constants, no topic-pair classes of equal size)."""
    return {}


@_embedding_extras.register
def _(tm: TopicModel, mk, res, bias: bool) -> dict:
    """The paper's model (SPEC §4.1): the minimum loss ``L*``, the minimum embedding dimension and, for a
    moderate vocabulary, the same/different-topic dot products and cosines of an embedding of the optimum."""
    opt = dict(L_star=tm.min_value_loss(), min_embedding_dim=solvers.min_embedding_dim(tm, mk, bias=bias))
    x = res.x
    if x is None or tm.T < 2 or tm.v < 2 or tm.V1 > 2001:
        return opt
    W = res.W_E if "W_E" in res.info else solvers.embedding_from_gram(x, tm.V1)
    if np.all(np.linalg.norm(W[:, 1:], axis=0) > 0):
        st = embedding_topic_stats(W, tm)
        opt.update(
            same_topic_dot=st.same_topic_dot,
            diff_topic_dot=st.diff_topic_dot,
            same_topic_cos=st.same_topic_cos,
            diff_topic_cos=st.diff_topic_cos,
        )
    return opt


def _attention_optimum(res) -> dict:
    opt = _scalars(res.info, skip=("certificate", "relative_residuals", "flat_direction"))
    opt["L"] = opt.get("loss", res.fun)
    return {k: opt.get(k, math.nan) for k in ("K", "L", "alpha", "beta")} | opt


def solve_summary(problem: str, res, tm, mk, *, bias: bool = False) -> dict:
    """The common summary dict of a ``SolveResult`` (module docstring); JSON-ready via :mod:`theorycheck._io`."""
    if problem == "value":
        optimum = _value_optimum(res, tm, mk)
    elif problem == "embedding":
        optimum = _embedding_optimum(res, tm, mk, bias)
    else:
        optimum = _attention_optimum(res)
    info = _scalars(res.info, skip=("certificate",))
    for k in ("flat_direction",):
        if k in res.info:
            info[k] = str(res.info[k])
    return {
        "problem": problem,
        "spec": PROBLEMS[problem][1],
        "model": model_summary(tm),
        "masking": mk.to_dict(),
        "method": res.method,
        "status": int(res.status),
        "success": bool(res.success),
        "message": res.message,
        "fun": float(res.fun),
        "nit": int(res.nit),
        "residuals": {k: float(v) for k, v in res.residuals.items()},
        "certificate": res.certificate if res.certificate is not None else res.info.get("certificate"),
        "info": info,
        "optimum": optimum,
    }


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else str(v)
    return str(v)


def format_summary(summary: dict) -> str:
    """Aligned ``key  value`` lines: status, the optimum's scalars, residuals and the certificate."""
    rows = [(k, summary[k]) for k in ("problem", "method", "status", "success", "message", "fun")]
    rows += list(summary["optimum"].items())
    rows += [("resid." + k, v) for k, v in summary["residuals"].items()]
    cert = summary.get("certificate")
    if isinstance(cert, dict):
        rows += [("cert." + k, v) for k, v in cert.items() if not isinstance(v, (list, dict))]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {_fmt(v)}" for k, v in rows)


#: Largest V1 for which a structured optimum is also written dense in the ``.npz`` (as for a ``BlockGram``).
NPZ_DENSE_MAX_V1 = 2001


def _matrix(name: str, x) -> dict:
    """A matrix for the ``.npz``: dense as ``name``; a low-rank one (a general model's ``LowRankMatrix``, SPEC
    §11.5) also as its factors ``name_left``, ``name_right`` (``name = left @ right.T``) and dense only up to
    :data:`NPZ_DENSE_MAX_V1`: never densified beyond, whatever V1."""
    if hasattr(x, "left") and hasattr(x, "right"):
        out = {f"{name}_left": np.asarray(x.left), f"{name}_right": np.asarray(x.right), "low_rank": True}
        return out | ({name: x.toarray()} if x.shape[0] <= NPZ_DENSE_MAX_V1 else {})
    return {name: x.toarray() if hasattr(x, "toarray") else np.asarray(x)}


def npz_payload(problem: str, res, tm, summary: dict) -> bytes:
    """``.npz`` bytes: the optimum (``W`` or ``A, B0, gamma``; ``G`` or ``x, y``; ``x = [alpha, beta]``; a low-rank
    ``W`` or ``G`` as ``W_left, W_right`` / ``G_left, G_right``), ``status``, ``method``, ``fun``, ``T``, ``v`` and
    ``resid_<name>`` for every residual."""
    payload: dict[str, Any] = {f"resid_{k}": np.float64(v) for k, v in summary["residuals"].items()}
    payload.update(status=np.int64(res.status), method=np.str_(res.method), fun=np.float64(res.fun))
    payload.update(problem=np.str_(problem), T=np.float64(tm.T), v=np.float64(getattr(tm, "v", np.nan)))
    payload.update({k: np.float64(v) for k, v in summary["optimum"].items() if isinstance(v, float)})
    x = res.x
    if problem == "value":
        payload["reg"] = np.float64(res.info.get("reg", 0.0))
        if x is not None and hasattr(x, "A") and not isinstance(x, np.ndarray):
            payload.update(A=x.A, B0=x.B0, gamma=x.gamma, structured=True)
        elif x is not None:
            payload.update(_matrix("W", x), structured=False)
    elif problem == "embedding" and x is not None:
        if hasattr(x, "toarray") and hasattr(x, "y"):
            payload.update(x=np.float64(x.x), y=np.float64(x.y), structured=True)
            if tm.V1 <= NPZ_DENSE_MAX_V1:
                payload["G"] = x.toarray()
        else:  # a dense Gram, or a general model's LowRankMatrix (SPEC §11.5)
            payload.update(_matrix("G", x), structured=False)
        if "W_E" in res.info:
            payload["W_E"] = np.asarray(res.info["W_E"])
    elif x is not None:
        payload["x"] = np.asarray(x, dtype=float)
    buf = io.BytesIO()
    np.savez(buf, **payload)
    return buf.getvalue()


#: Allowed ``solve attention --n-grid`` per route: ``(low, high, grid dimensions, bytes a point, route)``.
#: The paper's model: a 1-D grid over log K (``--value block``, default 20001) or a 2-D grid over
#: (alpha, beta) (``--value identity``, default 401); a general model: the 2-D coarse grid of starts, each
#: an exact loss evaluation (default 7). The grid's arrays are also checked against the memory guard.
N_GRID_RANGES = {
    "block": (11, 1_000_000, 1, 512, "for the paper's model with --value block (a 1-D grid over log K)"),
    "identity": (11, 2001, 2, 256, "for the paper's model with --value identity (a 2-D grid)"),
    "general": (1, 25, 2, 64, "with --model/--topic-word (each point an exact loss evaluation)"),
}


def _n_grid_option(args) -> dict | None:
    """``{"n_grid": n}`` for ``solve attention --n-grid n`` after its range and memory checks (before any work)."""
    if args.n_grid is None:
        return None
    low, high, dims, per_point, where = N_GRID_RANGES["general" if wants_general(args) else args.value]
    n = check_grid("--n-grid", args.n_grid, low=low, high=high, dims=dims, bytes_per_point=per_point, where=where)
    return {"n_grid": n}


#: ``solve attention`` flags that fill ``certify_options`` (they need ``--certify interval``).
_CERTIFY_FLAGS = {"--certify-scope": "scope", "--max-pairs": "max_pairs", "--checkpoint": "checkpoint"}


def _attention_options(args) -> dict | None:
    """``options`` of ``optimal_attention`` from ``--n-grid``, ``--family``, ``--mask-keys`` and the certificate
    flags, refusing before any work what does not apply (the solver checks the values)."""
    opts = _n_grid_option(args) or {}
    general = {"--family": args.family, "--mask-keys": args.mask_keys or None}
    for flag, value in general.items():
        if value is not None and not wants_general(args):
            raise ValueError(f"solve attention: {flag} applies to a general model (--model or --topic-word)")
    if args.family is not None:
        opts["family"] = args.family
    if args.mask_keys:
        opts["mask_keys"] = True
    copts = {key: getattr(args, flag[2:].replace("-", "_")) for flag, key in _CERTIFY_FLAGS.items()}
    copts = {k: v for k, v in copts.items() if v is not None}
    if copts and args.certify is None:
        named = ", ".join(f for f, k in _CERTIFY_FLAGS.items() if k in copts)
        raise ValueError(f"solve attention: {named} needs --certify interval")
    if args.certify is not None:
        opts["certify"] = args.certify
        opts["certify_options"] = copts or None
    return opts or None


def _flag_names(message: str) -> str:
    """A solver's message with its ``certify_options[...]`` keys named by the flags that set them."""
    for flag, key in (*_CERTIFY_FLAGS.items(), ("--scheduler", "executor")):
        message = message.replace(f"certify_options[{key!r}]", flag)
    return message


def _solve_given(args) -> dict:
    """``{flag: (solver keyword, value)}``; ``None`` values are left to the solver's defaults."""
    given = {
        "--method": ("method", args.method),
        "--reg": ("reg", args.reg),
        "--tol": ("tol", args.tol),
        "--solver": ("solver", args.solver),
    }
    if args.problem == "embedding":
        given.update({"--d": ("d", args.d), "--bias": ("bias", args.bias)})
    if args.problem == "attention":
        given.update(
            {
                "--value": ("value", args.value),
                "--loss": ("loss", check_loss(args.loss)),
                "--n-grid": ("options", _attention_options(args)),
            }
        )
    return given


def run(args) -> int:
    tm, mk = models(args)
    if args.problem == "attention":
        require_enumerable_sets(args, tm)
    given = _solve_given(args)
    if args.out is not None and str(args.out).endswith(".npz"):
        raise ValueError(
            f"--out {args.out!r}: --out is an output folder (summary.json, optimum.npz); "
            f"for a single .npz file use --npz {args.out}"
        )
    out = None if args.out is None else prepare_output_dir(args.out, force=args.force, flag="--out")
    json_file = json_path(args)
    npz_path = None
    if args.npz is not None:
        npz_path = prepare_output_dir(args.npz, kind="file", suffix=".npz", force=args.force, flag="--npz")
    scheduler = getattr(args, "scheduler", None)
    if scheduler is not None and getattr(args, "certify", None) is None:
        raise ValueError("solve attention: --scheduler needs --certify interval (it runs the certificate's regions)")
    with scheduler_executor(scheduler) as executor:  # a bad or unreachable --scheduler fails first, in seconds
        if executor is not None:
            opts = given["--n-grid"][1]
            opts["certify_options"] = {**(opts["certify_options"] or {}), "executor": executor}
        try:
            res = run_solve(args.problem, tm, mk, given)
        except ValueError as exc:  # the solver's refusal, in the command's words (its options are flags here)
            raise ValueError(_flag_names(str(exc))) from None
    summary = solve_summary(args.problem, res, tm, mk, bias=bool(getattr(args, "bias", False)))
    print(format_summary(summary))
    payload = npz_payload(args.problem, res, tm, summary) if out is not None or npz_path is not None else b""
    if out is not None:
        with atomic_directory(out, force=args.force, command=command(args)) as tmp:
            write_json(tmp / "summary.json", summary)
            atomic_write_bytes(tmp / "optimum.npz", payload)
        print(f"written {out}/summary.json, optimum.npz")
    write_json_summary(json_file, summary)
    if npz_path is not None:
        print(f"written to {atomic_write_bytes(npz_path, payload)}")
    if not res.success:
        print(f"theorycheck solve {args.problem}: not certified (status {res.status}): {res.message}", file=sys.stderr)
    return 0 if res.success else 1
