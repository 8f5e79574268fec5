"""The ``--topic-word FILE.npy`` / ``--model SPEC`` flags: a general topic-word matrix on the command line (SPEC §11).

``--model`` forms (with ``--T``, ``--v`` and the document law ``--prior``/``--tau``/``--alpha``)::

    paper                    the paper's model through the general path (GeneralTopicModel.from_topic_model)
    overlapping:eps=0.2      each topic mixed with the uniform word law
    overlapping:n_shared=2   each topic also uniform over the first 2 words of the next topic
    zipf:s=1.1               Zipfian words inside each topic
    unequal:sizes=3,4,5      disjoint topics of 3, 4 and 5 words (--T, --v not used)

``--topic-word FILE.npy``: a ``(T, n_words)`` row-stochastic array saved with ``numpy.save``
(``--T``, ``--v`` not used). Errors name the flag. Also here: the general-model path of
``theorycheck train`` (a preset's run with its data replaced by the general model) and of
``theorycheck landscape`` (the exact loss over the family ``S = alpha I + beta G``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "add_general_model_flags",
    "wants_general",
    "general_models",
    "parse_model_spec",
    "model_summary",
    "retarget_config",
    "family_scores",
    "general_landscape",
]

_KEYS = {"paper": (), "overlapping": ("eps", "n_shared"), "zipf": ("s",), "unequal": ("sizes",)}


def add_general_model_flags(g) -> None:
    """``--topic-word`` and ``--model`` (added to the shared model flags' group ``g``)."""
    g.add_argument(
        "--topic-word", dest="topic_word", default=None, metavar="FILE.npy",
        help="general topic-word matrix phi, shape (T, n_words), rows summing to 1 (SPEC §11)",
    )  # fmt: skip
    g.add_argument(
        "--model", dest="model_spec", default=None, metavar="SPEC",
        help="general model: paper | overlapping:eps=E | overlapping:n_shared=K | zipf:s=S | unequal:sizes=A,B,.. "
        "(with --T, --v, --prior, --tau, --alpha; SPEC §11)",
    )  # fmt: skip


def wants_general(args) -> bool:
    return getattr(args, "topic_word", None) is not None or getattr(args, "model_spec", None) is not None


def _law(args, T: int) -> dict:
    if args.prior == "dirichlet":
        if args.tau is not None:
            raise ValueError("--tau is not used with --prior dirichlet")
        if args.alpha is None:
            raise ValueError("--alpha is required with --prior dirichlet (a number > 0)")
        return {"prior": "dirichlet", "alpha": args.alpha}
    if args.alpha is not None:
        raise ValueError("--alpha is only used with --prior dirichlet")
    return {"prior": "uniform-tau", "tau": min(3, T) if args.tau is None else args.tau}


def _number(flag, key, text, kind):
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{flag}: {key} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None


def parse_model_spec(text: str, *, T: int, v: int, law: dict):
    """The general model of a ``--model`` string (module docstring)."""
    from .config import TopicModel
    from .general_model import GeneralTopicModel

    kind, _, rest = str(text).partition(":")
    if kind not in _KEYS:
        raise ValueError(f"--model must start with one of {', '.join(_KEYS)}, got {text!r}")
    params = {}
    for item in filter(None, rest.split(";")):
        key, eq, val = item.partition("=")
        if not eq or key not in _KEYS[kind]:
            allowed = ", ".join(f"{k}=..." for k in _KEYS[kind]) or "no parameters"
            raise ValueError(f"--model {kind}: takes {allowed}, got {item!r}")
        params[key] = val
    try:
        if kind == "paper":
            return GeneralTopicModel.from_topic_model(TopicModel(T=T, v=v, **law))
        if kind == "overlapping":
            if len(params) != 1:
                raise ValueError("give exactly one of eps=... or n_shared=...")
            key, val = next(iter(params.items()))
            num = _number("--model", key, val, float if key == "eps" else int)
            return GeneralTopicModel.overlapping(T, v, **{key: num}, **law)
        if kind == "zipf":
            if "s" not in params:
                raise ValueError("zipf needs s=... (the Zipf exponent, >= 0)")
            return GeneralTopicModel.zipf(T, v, _number("--model", "s", params["s"], float), **law)
        if "sizes" not in params:
            raise ValueError("unequal needs sizes=A,B,... (words per topic)")
        sizes = [_number("--model", "sizes", s, int) for s in params["sizes"].split(",")]
        return GeneralTopicModel.unequal(sizes, **law)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--model {text!r}: {exc}") from None


def _load_phi(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--topic-word {path!r}: cannot read a .npy array ({exc})") from None


def general_models(args):
    """``(GeneralTopicModel, Masking)`` from ``--topic-word`` or ``--model`` and the shared flags."""
    from .config import Masking
    from .general_model import GeneralTopicModel

    if args.topic_word is not None and args.model_spec is not None:
        raise ValueError("pass --topic-word or --model, not both")
    mk = Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)
    if args.model_spec is not None:
        T = args.T
        if args.model_spec.startswith("unequal:"):
            T = len(args.model_spec.split("sizes=", 1)[-1].split(","))
        return parse_model_spec(args.model_spec, T=args.T, v=args.v, law=_law(args, T)), mk
    phi = _load_phi(args.topic_word)
    T = phi.shape[0] if phi.ndim == 2 else 1
    try:
        return GeneralTopicModel(phi, **_law(args, T)), mk
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--topic-word {args.topic_word!r}: {exc}") from None


def model_summary(tm) -> dict:
    """JSON summary of a model: ``to_dict()`` of the paper's model; the shape and law of a general one."""
    from .general_model import is_general

    if not is_general(tm):
        return tm.to_dict()
    alpha = None if tm.alpha is None else tm.alpha.tolist()
    return {"general": True, "T": tm.T, "n_words": tm.n_words, "prior": tm.prior, "tau": tm.tau, "alpha": alpha}


def retarget_config(cfg, tm, mk):
    """A preset's :class:`~theorycheck.nn.TrainConfig` with its data model replaced by ``tm`` (and masking
    ``mk``), the model's ``V1`` (and ``d``, ``d_a`` when they were ``V1``) set to ``tm.V1``."""
    from .nn.config import DataConfig
    from .nn.model_config import ModelConfig

    d = cfg.data
    keep = {k: getattr(d, k) for k in ("N", "source", "n_train", "n_dev", "average")}
    data = DataConfig.from_model(tm, mk, **keep)
    m = cfg.model.to_dict()
    old = m["V1"]
    m.update({k: tm.V1 for k in ("V1", "d", "d_a") if m.get(k) == old})
    return cfg.replace(data=data, model=ModelConfig.from_dict(m))


def family_scores(alpha: float, beta: float, G: np.ndarray) -> np.ndarray:
    """``S = alpha I_W + beta G`` (``I_W``: identity on the words, 0 for [MASK]), the family of
    :func:`theorycheck.solvers.optimal_attention` for a general model (SPEC §11.4)."""
    S = beta * G
    idx = np.arange(1, G.shape[0])
    S[idx, idx] += alpha
    return S


def general_landscape(g, mk, *, value: str, loss: str, n_grid: int, alpha=(-5.0, 12.0), beta=(-8.0, 8.0), W=None):
    """Exact ``L(alpha, beta)`` of ``S = alpha I_W + beta G`` on a grid (SPEC §11.4), ``G`` the co-topic
    word similarity (unit diagonal) of ``optimal_attention``'s default family.

    ``W``: the frozen value matrix (default: ``value="block"`` the min-norm stage-1 ``C Sigma^+``
    of the general moments, SPEC §11.3; ``"identity"``: identity on the words). Dirichlet laws are
    averaged over sampled theta (seed 0) by :func:`theorycheck.population.attention_loss`.
    Returns ``(alphas, betas, L)`` with ``L[i, j] = L(alphas[i], betas[j])``.
    """
    from .population import attention_loss
    from .solvers._general_attention import cotopic_matrix, stage1_value_matrix

    if W is None:
        if value == "block":
            W = stage1_value_matrix(g, mk)
        else:
            W = np.eye(g.V1)
            W[0, 0] = 0.0
    G = cotopic_matrix(g)
    alphas, betas = np.linspace(*alpha, n_grid), np.linspace(*beta, n_grid)
    kw = {"loss": loss} if g.prior == "uniform-tau" else {"loss": loss, "seed": 0}
    L = np.array([[attention_loss(family_scores(a, b, G), W, g, mk, **kw) for b in betas] for a in alphas])
    return alphas, betas, L


def write_general_landscape(g, mk, out, *, value, loss, n_grid, command="theorycheck landscape") -> dict:
    """``grid.npz`` (alpha, beta, L, G) and ``optimum.json``: the grid argmin, the uniform-attention loss and
    :func:`theorycheck.solvers.optimal_attention`'s optimum in the same family."""
    import io

    from ._io import atomic_write_bytes, write_json, write_marker
    from .solvers import optimal_attention
    from .solvers._general_attention import cotopic_matrix

    out.mkdir(parents=True, exist_ok=True)
    alphas, betas, L = general_landscape(g, mk, value=value, loss=loss, n_grid=n_grid)
    i, j = np.unravel_index(int(np.nanargmin(L)), L.shape)
    buf = io.BytesIO()
    np.savez(buf, alpha=alphas, beta=betas, L=L, G=cotopic_matrix(g))
    atomic_write_bytes(out / "grid.npz", buf.getvalue())
    info = {
        "model": model_summary(g),
        "masking": mk.to_dict(),
        "family": "S = alpha I_w + beta G, G = co-topic cosine similarity of words (SPEC §11.4)",
        "value": value,
        "loss_kind": loss,
        "alpha": float(alphas[i]),
        "beta": float(betas[j]),
        "loss": float(L[i, j]),
        "loss_uniform": float(
            general_landscape(g, mk, value=value, loss=loss, n_grid=1, alpha=(0, 0), beta=(0, 0))[2][0, 0]
        ),
        "at_boundary": bool(i in (0, n_grid - 1) or j in (0, n_grid - 1)),
        "n_grid": n_grid,
    }
    res = optimal_attention(g, mk, value="stage1" if value == "block" else value, loss=loss)
    info["solver"] = {
        "alpha": float(res.x[0]),
        "beta": float(res.x[1]),
        "loss": float(res.fun),
        "status": int(res.status),
    }
    info["status"] = int(res.status)
    info["same_topic_preferred"] = bool(info["solver"]["beta"] > 0)
    write_json(out / "optimum.json", info)
    write_marker(out, command=command, files=["grid.npz", "optimum.json"])
    return info


def general_flags(args) -> list[str]:
    """The model flags of a general-model command line (for the resume command of ``train``)."""
    if not wants_general(args):
        return []
    src = f"--model {args.model_spec}" if args.model_spec is not None else f"--topic-word {args.topic_word}"
    law = [f"--prior {args.prior}"] + [
        f"{flag} {val}"
        for flag, val in (("--T", args.T), ("--v", args.v), ("--tau", args.tau), ("--alpha", args.alpha))
    ]
    law = [x for x in law if not x.endswith(" None")]
    return [src, *law, f"--p-m {args.p_m}", f"--p-c {args.p_c}", f"--p-r {args.p_r}"]


def run_general_preset(name, out, tm, mk, *, steps=None, seed=None, checkpoint_every=None, progress=True, resume=False):
    """Train one run of the preset ``name`` on the general model ``tm`` (masking ``mk``) into ``out``
    (:func:`retarget_config`); grid presets are refused. Returns a ``run_preset``-shaped summary."""
    from ._io import write_json
    from .nn import train
    from .nn.presets import preset
    from .nn.trainer import stage_curves

    cfg = preset(name)
    if isinstance(cfg, list):
        raise ValueError(f"--preset {name} is a grid of runs; with --model/--topic-word use a single-run preset")
    changes = {
        k: v for k, v in (("steps", steps), ("seed", seed), ("checkpoint_every", checkpoint_every)) if v is not None
    }
    cfg = retarget_config(cfg, tm, mk).replace(**changes)
    res = train(cfg, out, progress=progress, resume=resume)
    nV, nKQ = stage_curves(res.history) if res.history else ([], [])
    row = {"run": name, "steps": res.steps, "final": res.final, "stages": res.stages, "model": model_summary(tm)}
    row["norm_W_V_first_last"] = [nV[0], nV[-1]] if nV else None
    row["norm_KQ_first_last"] = [nKQ[0], nKQ[-1]] if nKQ else None
    summary = {"preset": name, "runs": [row]}
    write_json(out / "summary.json", summary, sort_keys=True, indent=2)
    return summary


def general_train_models(args, seeds) -> tuple:
    """``()`` for a preset's own model; ``(tm, mk)`` with ``--model``/``--topic-word`` (``theorycheck train``)."""
    if not wants_general(args):
        return ()
    if seeds is not None or args.scheduler is not None:
        raise ValueError("--seeds and --scheduler are not available with --model/--topic-word (one run per call)")
    return general_models(args)


def general_landscape_command(args, tm, mk, loss, command: str) -> int:
    """``theorycheck landscape`` for a general model: :func:`write_general_landscape` into ``--out``."""
    from ._io import prepare_output_dir
    from ._validate import check_int

    if args.sweep is not None:
        raise ValueError("--sweep is for the paper's model; drop it with --model/--topic-word")
    n_grid = check_int("--n-grid", 15 if args.n_grid is None else args.n_grid, low=1)
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    info = write_general_landscape(tm, mk, out, value=args.value, loss=loss, n_grid=n_grid, command=command)
    sol = info["solver"]
    print(
        f"general model, W^V={args.value}, loss={loss}, S = alpha I + beta G: grid alpha={info['alpha']:.6g} "
        f"beta={info['beta']:.6g} L={info['loss']:.8f}; solver alpha*={sol['alpha']:.6g} beta*={sol['beta']:.6g} "
        f"L*={sol['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
    )
    print(f"written {out}/grid.npz, optimum.json")
    return 0 if info["status"] == 0 else 1
