"""The shared vocabulary of every ``theorycheck`` subcommand: its flags, the model they build, its errors.

One definition per flag, used by every subcommand that has the concept:

- the topic model and masking ``--T --v --tau --prior --alpha --p-m --p-c --p-r`` (SPEC §1, §2.1) and a
  general topic-word matrix ``--model SPEC`` / ``--topic-word FILE.npy`` (SPEC §11): :func:`add_model_flags`,
  built by :func:`models`;
- ``--out`` and ``--force`` (:func:`add_out_flags`), ``--quiet``, ``--no-figures``, ``--threads``,
  ``--seed``, ``--scheduler``, ``--jobs``, ``--json``;
- errors: a ``ValueError`` or ``TypeError`` raised by the library or by a subcommand is printed as one
  line ``theorycheck <command>: error: <message>`` and the exit code is 2 (:func:`run_command`).

``--model`` forms (with ``--T``, ``--v`` and the document law ``--prior``/``--tau``/``--alpha``)::

    paper                    the paper's model through the general path (GeneralTopicModel.from_topic_model)
    overlapping:eps=0.2      each topic mixed with the uniform word law
    overlapping:n_shared=2   each topic also uniform over the first 2 words of the next topic
    zipf:s=1.1               Zipfian words inside each topic
    unequal:sizes=3,4,5      disjoint topics of 3, 4 and 5 words (--T, --v not used)

``--topic-word FILE.npy``: a ``(T, n_words)`` row-stochastic array saved with ``numpy.save``
(``--T``, ``--v`` not used). Errors name the flag.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys

import numpy as np

from .. import _memory, _progress, _threads
from .._interrupt import exit_code, redeliver_swallowed_ctrl_c
from .._io import claim_output, distinct_outputs, prepare_output_dir, write_json
from .._validate import MissingExtra
from ..models import GeneralTopicModel, Masking, TopicModel
from ..models.layout import MAX_ENUMERATED_SETS

__all__ = [
    "add_model_flags",
    "models",
    "wants_general",
    "parse_model_spec",
    "general_models",
    "model_flags",
    "require_enumerable_sets",
    "model_summary",
    "add_out_flags",
    "add_force_flag",
    "add_quiet_flag",
    "add_no_figures_flag",
    "add_threads_flag",
    "add_seed_flag",
    "add_scheduler_flag",
    "add_jobs_flag",
    "add_json_flag",
    "json_path",
    "write_json_summary",
    "command",
    "error",
    "run_command",
    "OneLineParser",
    "claim_outputs",
    "OUTPUT_FLAGS",
    "leaf_parsers",
]


# ----------------------------------------------------------------------------- the topic model and masking
def add_model_flags(p) -> None:
    """The topic-model and masking flags, identical for every command that builds a model."""
    g = p.add_argument_group("topic model (SPEC §1) and masking (SPEC §2.1)")
    g.add_argument("--T", type=int, default=10, help="number of topics (default: %(default)s)")
    g.add_argument("--v", type=int, default=10, help="words per topic (default: %(default)s)")
    g.add_argument("--tau", type=int, default=None, help="topics per document, prior uniform-tau (default: 3)")
    g.add_argument(
        "--prior", choices=("uniform-tau", "dirichlet"), default="uniform-tau", help="document prior (SPEC §1.2)"
    )
    g.add_argument("--alpha", type=float, default=None, help="Dirichlet concentration (prior dirichlet)")
    g.add_argument("--p-m", type=float, default=0.15, help="selection probability (default: %(default)s)")
    g.add_argument("--p-c", type=float, default=0.1, help="keep probability (default: %(default)s)")
    g.add_argument("--p-r", type=float, default=0.1, help="random-word probability (default: %(default)s)")
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
    """Whether ``--model`` or ``--topic-word`` was given (a general topic-word matrix, SPEC §11)."""
    return getattr(args, "topic_word", None) is not None or getattr(args, "model_spec", None) is not None


def models(args) -> tuple[GeneralTopicModel, Masking]:
    """``(model, Masking)`` from the shared flags, validated by their constructors: the paper's
    :class:`TopicModel`, or a :class:`GeneralTopicModel` with ``--model``/``--topic-word``."""
    if wants_general(args):
        return general_models(args)
    tau = 3 if args.tau is None and args.prior == "uniform-tau" else args.tau
    tm = TopicModel(T=args.T, v=args.v, tau=tau, prior=args.prior, alpha=args.alpha)
    return tm, Masking(p_m=args.p_m, p_c=args.p_c, p_r=args.p_r)


_KEYS = {"paper": (), "overlapping": ("eps", "n_shared"), "zipf": ("s",), "unequal": ("sizes",)}


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


def parse_model_spec(text: str, *, T: int, v: int, law: dict) -> GeneralTopicModel:
    """The general model of a ``--model`` string (module docstring)."""
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


_NPY_MAGIC = b"\x93NUMPY"
_SAVE_HINT = "save the matrix with numpy.save('phi.npy', phi) (phi a float array of shape (T, n_words))"


def _load_phi(path: str) -> np.ndarray:
    """The array of a ``.npy`` file; a text table, a ``.npz`` or a pickle is refused with the way to convert it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
    except OSError as exc:
        raise ValueError(f"--topic-word {path!r}: cannot read it ({exc.strerror or exc})") from None
    if head.startswith(b"PK"):
        raise ValueError(f"--topic-word {path!r} is a .npz archive, not a .npy array; {_SAVE_HINT}")
    if head != _NPY_MAGIC:
        raise ValueError(
            f"--topic-word {path!r} is not a .npy file (no NumPy header; a text table?); {_SAVE_HINT}, e.g. "
            f"numpy.save('phi.npy', numpy.loadtxt({path!r})) for a whitespace-separated text table"
        )
    _check_npy_header(path)
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ValueError(
                f"--topic-word {path!r} holds Python objects, not numbers; {_SAVE_HINT} from a float array"
            ) from None
        raise ValueError(f"--topic-word {path!r}: cannot read the .npy array ({exc})") from None
    except OSError as exc:
        raise ValueError(f"--topic-word {path!r}: cannot read the .npy array ({exc})") from None


def _check_npy_header(path: str) -> None:
    """Read the ``.npy`` header only and check the array it announces against the memory guard (the array, its
    float64 copy and its renormalised copy alive at once) before anything is loaded: a header claiming ``10**12``
    entries is refused at once, not after numpy tried to allocate them."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--topic-word {path!r}: cannot read the .npy header ({exc})") from None
    if dtype.hasobject:
        return  # refused by np.load(allow_pickle=False) with its own hint
    entries = 1
    for s in shape:
        entries *= int(s)
    need, limit = entries * (dtype.itemsize + 16), _memory.resolve_max_bytes()
    if need > limit:
        raise ValueError(
            f"--topic-word {path!r}: its header announces a {' x '.join(f'{int(s):,}' for s in shape)} array; "
            f"loading and checking it needs {_memory.format_bytes(need)}, above the memory limit "
            f"{_memory.format_bytes(limit)} (${_memory.MAX_BYTES_ENV}; default half the available memory): "
            "give a smaller topic-word matrix"
        )


def general_models(args) -> tuple[GeneralTopicModel, Masking]:
    """``(GeneralTopicModel, Masking)`` from ``--topic-word`` or ``--model`` and the shared flags."""
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


def require_enumerable_sets(args, tm) -> None:
    """A ``ValueError`` naming ``--T``/``--tau`` when a general model's exact attention loss (SPEC §11.4) would
    average over more uniform-tau topic sets ``C(T, tau)`` than it enumerates (:data:`MAX_ENUMERATED_SETS`): the
    library samples sets then (``n_sets=``), which the commands do not offer. Checked before any work."""
    if not wants_general(args) or tm.prior != "uniform-tau" or tm.n_topic_sets <= MAX_ENUMERATED_SETS:
        return
    raise ValueError(
        f"--T {tm.T} --tau {tm.tau}: the exact attention loss of a general model averages over all C(T, tau) = "
        f"{tm.n_topic_sets:,} topic sets, at most {MAX_ENUMERATED_SETS:,}; choose a smaller --T or --tau, or "
        "--prior dirichlet (sampled document laws)"
    )


def model_flags(args) -> list[str]:
    """The model flags of a general-model command line (``[]`` without ``--model``/``--topic-word``), for
    the command that reproduces a run (``theorycheck train``'s resume command)."""
    if not wants_general(args):
        return []
    src = f"--model {args.model_spec}" if args.model_spec is not None else f"--topic-word {args.topic_word}"
    law = [f"--prior {args.prior}"] + [
        f"{flag} {val}"
        for flag, val in (("--T", args.T), ("--v", args.v), ("--tau", args.tau), ("--alpha", args.alpha))
    ]
    law = [x for x in law if not x.endswith(" None")]
    return [src, *law, f"--p-m {args.p_m}", f"--p-c {args.p_c}", f"--p-r {args.p_r}"]


@functools.singledispatch
def model_summary(tm: GeneralTopicModel) -> dict:
    """JSON record of a model: a general model's shape and document law (its phi is not written)."""
    alpha = None if tm.alpha is None else tm.alpha.tolist()
    return {"general": True, "T": tm.T, "n_words": tm.n_words, "prior": tm.prior, "tau": tm.tau, "alpha": alpha}


@model_summary.register
def _(tm: TopicModel) -> dict:
    """The paper's model: its parameters (``to_dict()``, O(1))."""
    return tm.to_dict()


# ----------------------------------------------------------------------------- outputs and run options
def add_out_flags(p, default: str | None, what: str = "output folder") -> None:
    """``--out DIR`` and ``--force`` for commands that write a folder."""
    shown = "%(default)s" if default is not None else "none"
    p.add_argument(
        "--out", default=default, help=f"{what}; replaced only if new, empty or theorycheck's (default: {shown})"
    )
    add_force_flag(p)


def add_force_flag(p) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a folder holding other files: only theorycheck's files are replaced, none deleted",
    )


def add_quiet_flag(p) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_no_figures_flag(p) -> None:
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures")


def add_threads_flag(p) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="BLAS and Numba threads (default: $THEORYCHECK_THREADS, else 1 BLAS thread in loops, Numba all cores)",
    )


def add_seed_flag(p, default: int | None, what: str) -> None:
    """``--seed S``: ``what`` it seeds; ``default`` ``None`` leaves it to the command (say so in ``what``)."""
    p.add_argument(
        "--seed", type=int, default=default, help=what if default is None else f"{what} (default: {default})"
    )


def add_scheduler_flag(p, what: str) -> None:
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help=f"run {what} on a Dask cluster: a scheduler address such as tcp://127.0.0.1:8786 "
        "(needs the dask extra; results identical to a local run)",
    )


def add_jobs_flag(
    p, default: int | None = None, default_text: str = "the machine's cores; 1 = in this process"
) -> None:
    p.add_argument("--jobs", type=int, default=default, help=f"worker processes (default: {default_text})")


def add_json_flag(p, what: str) -> None:
    """``--json FILE``: the summary the command prints, also written to a JSON file (:func:`json_path`)."""
    p.add_argument("--json", default=None, metavar="FILE", help=f"write {what} to this JSON file")


def json_path(args):
    """The ``--json`` file, checked before any work (``None`` without ``--json``); an existing file is refused
    unless the command has ``--force`` and it was given."""
    if args.json is None:
        return None
    return prepare_output_dir(args.json, kind="file", force=bool(getattr(args, "force", False)), flag="--json")


def write_json_summary(path, summary: dict) -> None:
    """Write ``summary`` to the ``--json`` file ``path`` (from :func:`json_path`; nothing if ``None``) and say so."""
    if path is not None:
        print(f"written to {write_json(path, summary)}")


# ----------------------------------------------------------------------------- running a command
class OneLineParser(argparse.ArgumentParser):
    """``argparse`` with the command line's error convention: a bad flag, a missing or malformed value, an unknown
    choice is one line on stderr, ``theorycheck <command>: error: <message> (see ... --help)``, and exit code 2
    (argparse's own prints the whole usage first). Subparsers inherit the class."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def command(args) -> str:
    """The command line being run, for the output folder's marker."""
    return "theorycheck " + shlex.join(getattr(args, "argv", None) or [args.command])


def error(args, message: str) -> int:
    """Print ``theorycheck <command>: error: <message>`` on stderr; return the exit code 2."""
    print(f"theorycheck {args.command}: error: {message}", file=sys.stderr)
    return 2


#: The output flags of the commands: ``(attribute, flag, kind, suffix added)``; all are claimed as distinct paths
#: (:func:`theorycheck._io.claim_output`) before a command runs, so that a clash is refused before anything is made.
OUTPUT_FLAGS = (
    ("out", "--out", "dir", None),
    ("json", "--json", "file", None),
    ("npz", "--npz", "file", ".npz"),
    ("checkpoint", "--checkpoint", "file", None),
)


def claim_outputs(args) -> None:
    """Claim every output path given on the command line (:data:`OUTPUT_FLAGS`): a ``ValueError`` naming both flags
    if two are the same file or one lies inside the other's folder (``--npz x --json x.npz`` included)."""
    for attr, flag, kind, suffix in OUTPUT_FLAGS:
        path = getattr(args, attr, None)
        if isinstance(path, str) and path.strip():
            if suffix and not path.endswith(suffix):
                path += suffix
            claim_output(path, flag, kind)


def run_command(args) -> int:
    """Set the threads (``--threads``, :func:`theorycheck._threads.configure`) and run ``args.func(args)``.

    A ``ValueError`` or ``TypeError`` (a bad flag or value, named by the library's own message) is one line on
    stderr and exit code 2, and so are a missing optional extra (:class:`~theorycheck._validate.MissingExtra`) and
    an ``OSError`` (a file system failure: its message and the path). Ctrl-C that the command does not handle
    itself is one line and exit code 130, SIGTERM the same with exit code 143 (:mod:`theorycheck._interrupt`). No
    two outputs of the command may be the same file, or one inside the other (:func:`claim_outputs`)."""
    try:
        _threads.configure(args.threads)  # also checks $THEORYCHECK_THREADS
        _memory.check_env()  # a malformed $THEORYCHECK_MAX_BYTES: one error before any work
        # --quiet also silences the bars inside library routines (theorycheck._progress), in workers too
        quiet = _progress.quiet(bool(getattr(args, "quiet", False)) or _progress.is_quiet())
        with redeliver_swallowed_ctrl_c(), distinct_outputs(), quiet:  # no two outputs of one command the same file
            claim_outputs(args)
            return int(args.func(args) or 0)
    except (ValueError, TypeError, MissingExtra) as exc:  # a bad value, or an optional extra not installed
        return error(args, str(exc))
    except OSError as exc:  # a file system failure past the upfront checks (disk full, a folder removed meanwhile)
        where = " ".join(repr(str(f)) for f in (exc.filename, exc.filename2) if f is not None)
        return error(args, f"{exc.strerror or exc}{': ' + where if where else ''}")
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (theorycheck._interrupt.sigterm_as_ctrl_c): exit 130 or 143
        code = exit_code()
        print(f"theorycheck {args.command}: interrupted{' (SIGTERM)' if code != 130 else ''}", file=sys.stderr)
        return code


def leaf_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``{"verify": ..., "solve value": ..., ...}``: every parser that runs a command (no subcommands of its own)."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        return {"": parser}
    leaves = {}
    for name, sub in actions[0].choices.items():
        for rest, leaf in leaf_parsers(sub).items():
            leaves[f"{name} {rest}".strip()] = leaf
    return leaves
