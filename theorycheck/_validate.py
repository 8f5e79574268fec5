"""Shared argument checkers.

Every public function validates its input *before* doing any work and raises a
``ValueError`` (wrong value, shape or range) or ``TypeError`` (wrong kind of object)
whose message names the parameter, the offending value and the allowed range.
Kernels never validate: they assume the wrapper already did.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

__all__ = [
    "TheorycheckWarning",
    "MissingExtra",
    "warn_ignored",
    "check_int",
    "check_real",
    "check_prob",
    "check_choice",
    "check_array",
    "as_array",
    "check_square",
    "check_rng",
]


class TheorycheckWarning(UserWarning):
    """Warning category of theorycheck: arguments accepted but ignored, soft numerical issues.

    A subclass of :class:`UserWarning`, so it can be filtered on its own
    (``warnings.simplefilter("error", TheorycheckWarning)`` turns every one into an exception).
    An argument that a method accepts but does not use is never dropped silently: it triggers
    this warning, scipy-style, pointing at the caller's line.

    See Also
    --------
    theorycheck.solvers.optimal_value_matrix : Warns when ``solver`` is passed to a method that does not use it.
    theorycheck.realdata.MissingExtraError : The error raised when an optional extra is missing.

    References
    ----------
    The design rule "arguments accepted but ignored emit a warning" follows scipy's
    ``minimize_scalar`` and ``linprog`` (the project's STYLE notes, pattern 6).

    Examples
    --------
    >>> import warnings
    >>> from theorycheck import Masking, TheorycheckWarning, TopicModel
    >>> from theorycheck.solvers import optimal_value_matrix
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     res = optimal_value_matrix(TopicModel(T=3, v=2, tau=1), Masking(), solver="SCS")
    >>> [(w.category.__name__, str(w.message)) for w in caught]
    [('TheorycheckWarning', "solver is ignored by method='closed-form'")]
    >>> issubclass(TheorycheckWarning, UserWarning)
    True
    """


class MissingExtra(ImportError):
    """An optional extra (``dask``, ``nlp``, ``certify``, ...) that a call needs is not installed; the message names
    what needs it and the install command. The command line reports it on one line, exit code 2
    (:func:`theorycheck.cli.common.run_command`)."""


def warn_ignored(names, method: str, *, stacklevel: int = 3) -> None:
    """Warn that the arguments ``names`` are ignored by ``method`` (scipy-style, never silent)."""
    names = [names] if isinstance(names, str) else list(names)
    if names:
        warnings.warn(
            f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} ignored by method={method!r}",
            TheorycheckWarning,
            stacklevel=stacklevel,
        )


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int`` after checking ``low <= value <= high``.

    Booleans and non-integral floats are rejected (``TypeError``); integral floats such
    as ``3.0`` are accepted.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float, np.floating)):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    ivalue = int(value)
    _check_range(name, ivalue, low, high)
    return ivalue


def check_real(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` inside the given (closed or open) interval."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    fvalue = float(value)
    if not math.isfinite(fvalue):
        raise ValueError(f"{name} must be finite, got {value!r}")
    lo_bad = low is not None and (fvalue <= low if low_open else fvalue < low)
    hi_bad = high is not None and (fvalue >= high if high_open else fvalue > high)
    if lo_bad or hi_bad:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise ValueError(f"{name} must lie in {lb}{lo}, {hi}{hb}, got {value!r}")
    return fvalue


def check_prob(name: str, value) -> float:
    """A probability: a finite real in [0, 1]."""
    return check_real(name, value, low=0.0, high=1.0)


def check_choice(name: str, value, choices) -> str:
    """``value`` must be one of ``choices`` (strings); an array or a container is a ``TypeError`` naming ``name``
    (never numpy's "truth value of an array is ambiguous")."""
    opts = ", ".join(repr(c) for c in choices)
    if not isinstance(value, str) and (hasattr(value, "shape") or isinstance(value, (list, tuple, dict, set))):
        shape = getattr(value, "shape", None)
        what = type(value).__name__ + (f" of shape {tuple(shape)}" if shape is not None else "")
        raise TypeError(f"{name} must be one of {opts}, got {what}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {opts}, got {value!r}")
    return value


def _check_range(name, value, low, high):
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {value!r}")


def as_array(name: str, value) -> np.ndarray:
    """``np.asarray(value)``; a ragged nested sequence (rows of different lengths) is a ``ValueError`` naming
    ``name`` instead of numpy's "inhomogeneous shape" message."""
    try:
        return np.asarray(value)
    except ValueError:
        lengths = [len(r) if hasattr(r, "__len__") else 1 for r in value] if isinstance(value, (list, tuple)) else []
        rows = f" (row lengths {lengths[:8]}{', ...' if len(lengths) > 8 else ''})" if lengths else ""
        raise ValueError(
            f"{name} must be a rectangular array, every row the same length; got a ragged sequence{rows}"
        ) from None


def check_array(
    name: str,
    value,
    *,
    shape: tuple | None = None,
    ndim: int | None = None,
    finite: bool = True,
) -> np.ndarray:
    """Convert to a C-contiguous float64 array and check ndim / shape / finiteness.

    ``shape`` entries equal to ``None`` are not checked.
    """
    value = as_array(name, value)
    if np.iscomplexobj(value) or isinstance(value, complex):
        raise TypeError(f"{name} must be a real array, got complex values (the imaginary part would be lost)")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real array, got {type(value).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values (found NaN or inf)")
    return np.ascontiguousarray(arr)


def check_square(name: str, value, n: int) -> np.ndarray:
    """A finite float64 ``(n, n)`` matrix."""
    return check_array(name, value, shape=(n, n))


def check_rng(rng=None, seed=None) -> np.random.Generator:
    """Resolve ``rng`` / ``seed`` into a ``numpy.random.Generator``.

    Exactly one source of randomness is used: ``rng`` if given, else
    ``numpy.random.default_rng(seed)``. Passing both is an error.
    """
    if rng is not None and seed is not None:
        raise ValueError("pass either rng or seed, not both")
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return rng
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.random.SeedSequence))
    ):
        raise TypeError(f"seed must be an int or a numpy.random.SeedSequence, got {seed!r}")
    if isinstance(seed, numbers.Integral) and seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    # numbers.Integral is wider than numpy's int stub; int() gives the same SeedSequence entropy
    return np.random.default_rng(int(seed) if isinstance(seed, numbers.Integral) else seed)


#: Loss names (SPEC §2.2): squared loss over all V1 output coordinates, or cross-entropy.
LOSS_NAMES = ("squared", "ce")


def check_loss(value, name: str = "loss") -> str:
    """The loss name, ``"squared"`` (SPEC §2.2, the theory) or ``"ce"`` (cross-entropy)."""
    return check_choice(name, value, LOSS_NAMES)
