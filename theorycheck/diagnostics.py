"""Diagnostics for users and tests: a directional finite-difference gradient checker.

:func:`check_gradient` compares an analytic gradient ``g`` of a scalar function ``f`` with
central differences along random unit directions ``D``:

.. math:: \\frac{f(x + hD) - f(x - hD)}{2h} \\approx \\langle g, D \\rangle ,

and runs a Taylor-slope test: the first-order remainder
``r(h) = |f(x + hD) - f(x) - h <g, D>|`` must shrink like ``h^2`` (slope 2 on a log-log plot)
wherever it is above rounding level. A gradient that is wrong by a term of size ``c`` gives
``r(h) ~ c h`` (slope 1), so the slope test catches errors too small for the difference test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validate import check_int, check_real, check_rng

__all__ = ["GradientCheck", "check_gradient"]


@dataclass
class GradientCheck:
    """Result of :func:`check_gradient`.

    Parameters
    ----------
    passed : bool
        Every direction's difference within ``rtol * (|fd| + |<g, D>|) + atol`` and, where measurable,
        a Taylor slope of at least ``1.8``.
    errors : list of float
        ``|fd - <g, D>|`` per direction.
    fd, analytic : list of float
        The central difference and ``<g, D>`` per direction.
    slopes : list of float
        Taylor slope per direction (``nan`` where the remainder stays at rounding level, e.g. when
        ``f`` is linear along ``D``).
    message : str
        One line per direction with the two derivatives, the error and the slope (the text of
        :meth:`assert_ok`'s ``AssertionError``).

    See Also
    --------
    check_gradient : Computes it.
    theorycheck.population.attention_loss_grad : An analytic gradient checked this way in the tests.

    References
    ----------
    The Taylor-remainder test of this module's docstring (a first-order remainder ``O(h^2)``).

    Examples
    --------
    A gradient off by a factor 2 fails both tests: the Taylor slope drops to 1:

    >>> from theorycheck.diagnostics import GradientCheck, check_gradient
    >>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> res = check_gradient(lambda x: x @ A @ x, np.ones(2), A @ np.ones(2))
    >>> isinstance(res, GradientCheck), res.passed, [round(s, 2) for s in res.slopes]
    (True, False, [1.0, 1.0, 1.0])
    >>> res.assert_ok()
    Traceback (most recent call last):
    ...
    AssertionError: gradient check FAILED: dir 0: ...
    """

    passed: bool
    errors: list = field(default_factory=list)
    fd: list = field(default_factory=list)
    analytic: list = field(default_factory=list)
    slopes: list = field(default_factory=list)
    message: str = ""

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the per-direction numbers if the check failed.

        Raises
        ------
        AssertionError
            ``passed`` is False; the message is ``message``.
        """
        if not self.passed:
            raise AssertionError(self.message)


def _flatten(x):
    if isinstance(x, dict):
        keys = sorted(x)
        shapes = [np.shape(x[k]) for k in keys]
        flat = np.concatenate([np.asarray(x[k], dtype=float).ravel() for k in keys])

        def unflatten(v):
            out, i = {}, 0
            for k, s in zip(keys, shapes):
                n = int(np.prod(s))
                out[k] = v[i : i + n].reshape(s)
                i += n
            return out

        return flat, unflatten
    arr = np.asarray(x, dtype=float)
    return arr.ravel().copy(), lambda v: v.reshape(arr.shape)


def check_gradient(
    f, x, grad, *, n_directions: int = 3, h: float = 1e-5, rtol: float = 1e-6, atol: float = 1e-9, seed=0, rng=None
) -> GradientCheck:
    """Check ``grad`` (the analytic gradient of ``f`` at ``x``) by directional finite differences.

    Parameters
    ----------
    f : callable
        ``f(x) -> float``; ``x`` is an array, or a dict of named arrays (then ``grad`` is a dict
        with the same keys and shapes, e.g. a model's parameters and their gradients).
    x : ndarray or dict of ndarray
        The point (finite).
    grad : ndarray or dict of ndarray
        The analytic gradient at ``x``, with ``x``'s entries (same keys and shapes for a dict).
    n_directions : int, n_directions >= 1, default 3
        Random unit directions (Frobenius norm over all entries) to test.
    h : float, h > 0, default 1e-5
        Step of the central difference; the slope test uses ``h, h/2, ..., h/32``.
    rtol, atol : float
        ``|fd - <g, D>| <= rtol * (|fd| + |<g, D>|) + atol`` must hold in every direction (defaults
        ``1e-6`` and ``1e-9``).
    seed : int, default 0
        Seed of the directions (used when ``rng`` is ``None``).
    rng : numpy.random.Generator, optional
        The generator of the directions, instead of ``seed``.

    Returns
    -------
    GradientCheck
        ``passed``, and per direction the central difference, ``<g, D>``, their error and the Taylor
        slope (``nan`` where the remainder is at rounding level).

    Raises
    ------
    ValueError
        ``n_directions < 1``, ``h <= 0``, or ``grad`` with a different number of entries than ``x``.

    See Also
    --------
    GradientCheck : The result; :meth:`GradientCheck.assert_ok` raises with the numbers.
    theorycheck.population.attention_loss_grad : An analytic gradient of the attention loss.

    References
    ----------
    The central difference and the Taylor-remainder slope of this module's docstring.

    Examples
    --------
    The gradient ``2 A x`` of ``x^T A x`` (``A`` symmetric) passes with Taylor slope 2:

    >>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> from theorycheck.diagnostics import check_gradient
    >>> res = check_gradient(lambda x: x @ A @ x, np.ones(2), 2 * A @ np.ones(2))
    >>> res.passed, [round(s, 2) for s in res.slopes]
    (True, [2.0, 2.0, 2.0])

    Named parameters as a dict (``f = ||W||_F^2 + ||b||^2``, gradient ``(2 W, 2 b)``):

    >>> p = {"W": np.eye(2), "b": np.ones(3)}
    >>> g = {"W": 2 * np.eye(2), "b": 2 * np.ones(3)}
    >>> check_gradient(lambda q: float(np.sum(q["W"] ** 2) + q["b"] @ q["b"]), p, g, n_directions=2).passed
    True
    """
    n_directions = check_int("n_directions", n_directions, low=1)
    h = check_real("h", h, low=0.0, low_open=True)
    rng = check_rng(rng, None if rng is not None else seed)
    x0, unflat = _flatten(x)
    g, _ = _flatten(grad)
    if g.shape != x0.shape:
        raise ValueError(f"grad has {g.size} entries but x has {x0.size}")
    fx = float(f(unflat(x0)))
    res = GradientCheck(passed=True)
    for _ in range(n_directions):
        D = rng.standard_normal(x0.size)
        D /= np.linalg.norm(D)
        gd = float(g @ D)
        fd = (float(f(unflat(x0 + h * D))) - float(f(unflat(x0 - h * D)))) / (2 * h)
        err = abs(fd - gd)
        res.fd.append(fd)
        res.analytic.append(gd)
        res.errors.append(err)
        if not err <= rtol * (abs(fd) + abs(gd)) + atol:
            res.passed = False
        res.slopes.append(_taylor_slope(f, unflat, x0, D, gd, fx, h))
        if res.slopes[-1] < 1.8:
            res.passed = False
    res.message = f"gradient check {'passed' if res.passed else 'FAILED'}: " + "; ".join(
        f"dir {i}: fd {a:.10g} vs analytic {b:.10g} (err {e:.3g}, Taylor slope {s:.2f})"
        for i, (a, b, e, s) in enumerate(zip(res.fd, res.analytic, res.errors, res.slopes))
    )
    return res


def _taylor_slope(f, unflat, x0, D, gd, fx, h) -> float:
    """Median log2 ratio of successive first-order remainders above rounding level (nan if none)."""
    hs = h * 2.0 ** -np.arange(6)
    r = np.array([abs(float(f(unflat(x0 + t * D))) - fx - t * gd) for t in hs])
    floor = 1e3 * np.finfo(float).eps * max(abs(fx), 1e-300)
    ok = (r[:-1] > floor) & (r[1:] > floor)
    if not ok.any():
        return float("nan")
    return float(np.median(np.log2(r[:-1][ok] / r[1:][ok])))
