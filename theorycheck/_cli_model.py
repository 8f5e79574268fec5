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
``theorycheck landscape`` (the exact loss over the family ``S = alpha I + beta G``, written by the
symmetric landscape's :func:`theorycheck.analysis.landscape.write_landscape`).
"""

from __future__ import annotations

import numpy as np

from .analysis.landscape import family_scores

__all__ = [
    "add_general_model_flags",
    "wants_general",
    "general_models",
    "parse_model_spec",
    "model_summary",
    "retarget_config",
    "sgd_curvature",
    "scale_preset_lr",
    "family_scores",
    "general_landscape_command",
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
    from .models import GeneralTopicModel, TopicModel

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
    from .models import GeneralTopicModel, Masking

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
    from .models import is_general

    if not is_general(tm):
        return tm.to_dict()
    alpha = None if tm.alpha is None else tm.alpha.tolist()
    return {"general": True, "T": tm.T, "n_words": tm.n_words, "prior": tm.prior, "tau": tm.tau, "alpha": alpha}


def retarget_config(cfg, tm, mk):
    """A preset's :class:`~theorycheck.nn.TrainConfig` with its data model replaced by ``tm`` (and masking
    ``mk``), the model's ``V1`` (and ``d``, ``d_a`` when they were ``V1``) set to ``tm.V1``."""
    from .nn.config import DataConfig, ModelConfig

    d = cfg.data
    keep = {k: getattr(d, k) for k in ("N", "source", "n_train", "n_dev", "average")}
    data = DataConfig.from_model(tm, mk, **keep)
    m = cfg.model.to_dict()
    old = m["V1"]
    m.update({k: tm.V1 for k in ("V1", "d", "d_a") if m.get(k) == old})
    return cfg.replace(data=data, model=ModelConfig.from_dict(m))


def sgd_curvature(tm, mk, model) -> tuple[float, str] | None:
    """Largest eigenvalue ``lambda_max(H)`` of the population Hessian that bounds plain SGD on ``model``
    (squared loss, SPEC §11.7), and what it is of; ``None`` where no bound is derived (cross-entropy,
    other trained parameters).

    - ``W^V`` trained (uniform attention: the stage-1 value model; softmax attention: its ``W^V`` block
      at a small-score init): ``L(W) = tr(W Sigma W^T) - 2 tr(W C^T) + 1 + reg ||W||^2`` has the
      Hessian ``2 (Sigma + reg I) (x) I``, so ``lambda_max(H) = 2 (lambda_max(Sigma) + reg)``
      (``Sigma`` from :func:`theorycheck.population.moments`).
    - ``W^E`` of the tied model with ``W^V = I``: ``L = E||W_E^T W_E m - e_x||^2``; at a Gram ``G`` the
      loss's second variation along ``delta`` is ``<dG, dG Sigma>`` with ``dG = W_E^T delta + delta^T W_E``,
      ``||dG||_F <= 2 sqrt(lambda_max(G)) ||delta||_F``: ``lambda_max(H) <= 8 lambda_max(Sigma) lambda_max(G*)``
      at the min-norm optimum ``G*`` (:func:`theorycheck.solvers.optimal_embedding_gram`).
    """
    from .population import moments
    from .solvers import optimal_embedding_gram

    if model.loss != "squared":
        return None
    train = set(model.train)
    if "W_V" not in train and not (train == {"W_E"} and model.decoder == "tied"):
        return None
    lam = float(np.linalg.eigvalsh(moments(tm, mk)[0])[-1])
    if "W_V" in train:
        return 2.0 * (lam + model.reg), "W_V"
    G = optimal_embedding_gram(tm, mk).x
    G = G.toarray() if hasattr(G, "toarray") else np.asarray(G)
    return 8.0 * lam * float(np.linalg.eigvalsh(G)[-1]) + 2.0 * model.reg, "W_E"


def scale_preset_lr(preset_cfg, cfg):
    """``cfg`` (the preset ``preset_cfg`` retargeted to a general model) with its SGD learning rate scaled
    so that ``lr * lambda_max(H)`` keeps the preset's value (SPEC §11.7; :func:`sgd_curvature`), and a
    record of the rule. The presets' rates are tuned at the paper's size (``V1 = 101``), where
    ``lr * lambda_max(H) / 2`` is 0.89 (stage-1 SGD, lr 40 against ``2/lambda_max(H) = 45.2``); a small
    general model has a larger ``lambda_max(Sigma)`` and the preset's rate would diverge.

    The stage-1 value model alone (``W^V`` the only trained matrix, uniform attention: ``H`` is the
    whole, constant Hessian) is scaled by the curvature ratio both ways; otherwise the bound holds
    near the init or the optimum only and the rate is only lowered (``min(1, ratio)``). Adam and the
    cross-entropy presets keep their rate (Adam's step does not scale with the curvature).
    """
    lr = float(cfg.optim.lr)
    rec = {"preset_lr": lr, "lr": lr, "rule": "unchanged (no SGD squared-loss curvature bound; SPEC §11.7)"}
    if cfg.optim.name != "sgd":
        return cfg, rec
    ours = sgd_curvature(cfg.data.topic_model(), cfg.data.masking(), cfg.model)
    if ours is None:
        return cfg, rec
    ref = sgd_curvature(preset_cfg.data.topic_model(), preset_cfg.data.masking(), preset_cfg.model)
    ratio = ref[0] / ours[0]
    exact = set(cfg.model.train) == {"W_V"} and cfg.model.attention == "uniform"
    factor = ratio if exact else min(1.0, ratio)
    rec.update(
        lr=lr * factor,
        stable_lr=2.0 / ours[0],
        preset_stable_lr=2.0 / ref[0],
        rule=f"lr x lambda_max(H) of {ours[1]} kept at the preset's value"
        + ("" if exact else ", never raised")
        + " (SPEC §11.7)",
    )
    return cfg.replace(optim=cfg.optim.replace(lr=rec["lr"])), rec


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
    (:func:`retarget_config`; an SGD rate scaled by :func:`scale_preset_lr`, recorded as the run's ``lr``);
    grid presets are refused. Returns a ``run_preset``-shaped summary."""
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
    run_cfg, lr = scale_preset_lr(cfg, retarget_config(cfg, tm, mk).replace(**changes))
    res = train(run_cfg, out, progress=progress, resume=resume)
    nV, nKQ = stage_curves(res.history) if res.history else ([], [])
    row = {"run": name, "steps": res.steps, "final": res.final, "stages": res.stages, "model": model_summary(tm)}
    row["lr"] = lr
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
    """``theorycheck landscape`` for a general model: the shared
    :func:`theorycheck.analysis.landscape.write_landscape` (grid.npz, landscape.png, optimum.json) into ``--out``."""
    from ._io import prepare_output_dir
    from ._validate import check_int
    from .analysis.landscape import GENERAL_N_GRID, write_landscape

    if args.sweep is not None:
        raise ValueError("--sweep is for the paper's model; drop it with --model/--topic-word")
    n_grid = check_int("--n-grid", GENERAL_N_GRID if args.n_grid is None else args.n_grid, low=2, high=5000)
    out = prepare_output_dir(args.out, force=args.force, flag="--out")
    info = write_landscape(
        tm, mk, out, value=args.value, n_grid=n_grid, loss=loss, force=args.force, command=command
    )  # fmt: skip
    sol = info["solver"]
    print(
        f"general model, W^V={args.value}, loss={loss}, S = alpha I + beta G: grid alpha={info['alpha']:.6g} "
        f"beta={info['beta']:.6g} L={info['loss']:.8f}; solver alpha*={sol['alpha']:.6g} beta*={sol['beta']:.6g} "
        f"L*={sol['loss']:.8f} L(uniform)={info['loss_uniform']:.8f} status={info['status']}"
    )
    print(f"written {out}/grid.npz, landscape.png, optimum.json")
    return 0 if info["status"] == 0 else 1
