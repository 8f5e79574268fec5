"""The solvers' option objects: everything that is not the problem, in one documented place.

Every solver has the contract ``(model, mk, *, method, reg, tol, solver, options)`` plus at most a
few problem-defining keywords (``value=``, ``loss=`` for attention; ``d=``, ``bias=`` for the Gram).
``options`` is a frozen dataclass of the solver (:class:`ValueOptions`, :class:`GramOptions`,
:class:`AttentionOptions`), or a plain ``dict`` of its fields, validated into it (an unknown key is a
``ValueError`` naming it and the allowed ones). The backend's own options (cvxpy ``Problem.solve``
keywords, scipy ``minimize`` options) are the field ``solver_options`` of each object (before
theorycheck 0.3 they were the ``options=`` dict itself).

Fields whose meaning depends on the model or on ``value=`` (search boxes, the score family,
``x0``) are type-checked here and checked against the problem by the solver's route, once.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from .._validate import check_choice, check_int, check_real

__all__ = ["ValueOptions", "GramOptions", "AttentionOptions", "coerce_options"]


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"options.{name} must be a bool, got {value!r}")


def _check_dict(name, value):
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"options.{name} must be None or a dict, got {type(value).__name__}")


def _check_opt_int(name, value, low):
    if value is not None:
        check_int(f"options.{name}", value, low=low)


@dataclass(frozen=True)
class ValueOptions:
    """Options of :func:`theorycheck.solvers.optimal_value_matrix` (SPEC §4.2, §11.3).

    Parameters
    ----------
    dense : bool or None, default None
        ``method="closed-form"`` only: a dense ``(V1, V1)`` array (``True``) or the structured matrix
        (``False``: a :class:`BlockValueMatrix` for the paper's model, a :class:`LowRankMatrix` for a
        general one); ``None``: dense when ``V1 <= 2001``.
    max_bytes : int or None, default None
        Memory limit of the dense arrays (``theorycheck._memory.check_alloc``); default
        ``$THEORYCHECK_MAX_BYTES`` or half the available memory.
    solver_options : dict or None, default None
        Passed to ``cvxpy.Problem.solve`` (``method="cvxpy"`` only), e.g. ``{"max_iters": 50}``.

    See Also
    --------
    optimal_value_matrix : The solver these options configure.
    GramOptions : The options of the Gram solver.
    AttentionOptions : The options of the attention solver.

    References
    ----------
    SPEC §4.2, §11.3 (the problem the options leave unchanged).

    Examples
    --------
    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import ValueOptions, optimal_value_matrix
    >>> opts = ValueOptions(dense=False)
    >>> optimal_value_matrix(TopicModel(T=3, v=4, tau=2), Masking(), options=opts).x
    BlockValueMatrix(A=0.270099, B0=-0.0189179, gamma=0.126689, T=3, v=4, shape=(13, 13))
    >>> ValueOptions(dense="yes")
    Traceback (most recent call last):
    ...
    TypeError: options.dense must be None, True or False, got 'yes'
    """

    dense: bool | None = None
    max_bytes: int | None = None
    solver_options: dict | None = None

    def __post_init__(self):
        if self.dense is not None and not isinstance(self.dense, bool):
            raise TypeError(f"options.dense must be None, True or False, got {self.dense!r}")
        _check_opt_int("max_bytes", self.max_bytes, 1)
        _check_dict("solver_options", self.solver_options)


@dataclass(frozen=True)
class GramOptions:
    """Options of :func:`theorycheck.solvers.optimal_embedding_gram` (SPEC §4.1, §11.5).

    Parameters
    ----------
    seed : int or None, default None
        ``method="factorized"`` only: seed of the initial ``W^E`` (``None``: 0).
    init_scale : float or None, default None
        ``method="factorized"`` only: standard deviation of the initial entries (``None``: 1e-2).
    maxiter : int or None, default None
        ``method="factorized"`` only: L-BFGS iteration limit (``None``: 20000; the same as
        ``solver_options={"maxiter": ..., "maxfun": 2 * ...}``).
    max_bytes : int or None, default None
        Memory limit of the dense methods (``theorycheck._memory.check_alloc``).
    solver_options : dict or None, default None
        Backend options: passed to ``cvxpy.Problem.solve`` (cvxpy) or merged into the L-BFGS-B options
        (factorized), e.g. ``{"maxiter": 5}``.

    See Also
    --------
    optimal_embedding_gram : The solver these options configure.
    ValueOptions : The options of the stage-1 solver.
    AttentionOptions : The options of the attention solver.

    References
    ----------
    SPEC §4.1, §11.5 (the problem the options leave unchanged).

    Examples
    --------
    >>> from theorycheck.solvers import GramOptions
    >>> GramOptions(seed=1, maxiter=50)
    GramOptions(seed=1, init_scale=None, maxiter=50, max_bytes=None, solver_options=None)
    >>> GramOptions(init_scale=0.0)
    Traceback (most recent call last):
    ...
    ValueError: ...init_scale...
    """

    seed: int | None = None
    init_scale: float | None = None
    maxiter: int | None = None
    max_bytes: int | None = None
    solver_options: dict | None = None

    def __post_init__(self):
        _check_opt_int("seed", self.seed, 0)
        if self.init_scale is not None:
            check_real("options.init_scale", self.init_scale, low=0.0, low_open=True)
        _check_opt_int("maxiter", self.maxiter, 1)
        _check_opt_int("max_bytes", self.max_bytes, 1)
        _check_dict("solver_options", self.solver_options)


@dataclass(frozen=True)
class AttentionOptions:
    """Options of :func:`theorycheck.solvers.optimal_attention` (SPEC §4.3, §11.4).

    Parameters
    ----------
    n_grid : int or None, default None
        Grid points per axis. Paper's model: 20001 over ``log K`` (``value="block"``), 401 per axis
        (``"identity"``); at least 11. General model: coarse grid over the first two family
        coefficients, default 7 (L-BFGS-B from the 3 best points; 1 starts at 0).
    box : sequence or None, default None
        Search box. Paper's model: ``(lo, hi)`` over ``log K`` (block; default ``(-30, 60)``) or
        ``((alpha_lo, alpha_hi), (beta_lo, beta_hi))`` (identity; default grid ``(-10, 40) x (-40, 20)``,
        refinement in ``(-60, 60)^2``). General model: one ``(lo, hi)`` per family coefficient
        (default ``(-60, 60)`` each).
    check_general : bool, default True
        Paper's model: recompute the loss at the optimum with the general evaluator
        :func:`theorycheck.population.attention_loss` when affordable.
    certify : {None, "interval"}, default None
        Paper's model, squared loss: ``"interval"`` adds rigorous bounds ``lower <= min L <= upper`` over
        the search box by interval branch and bound (``theorycheck.solvers.attention.interval_certificate``),
        enlarging the box until the certified argmin is interior (at most 4 rounds, ``|coordinate| <= 200``);
        status 0 (``certificate["kind"] = "certified optimum"``) needs an interior argmin,
        ``L* - lower <= certify_options["tol"]`` (default 1e-9) and the whole-domain certificate
        (``certificate["global"]``: every global minimiser finite, ``L* - global_lower <= tol``); an
        argmin on the box is status 3 (``"bound on the box"``); otherwise 4. The returned point lies in
        ``certificate["box"]`` and ``lower <= L* <= upper`` always (SPEC §7, interval certificate).
        General model, ``family="label"``, squared loss, uniform-tau: rigorous bounds over all of
        ``(alpha, beta) in R^2`` on the structured loss (compact chart; ``certificate["domain"] = "R^2"``):
        status 0 certified optimum, 3 ``"bound (infimum at infinity)"``, 4 not certified. ``family="co-topic"``
        (the default family, ``value="stage1"``), ``V1 <= 5000`` and ``C(T, tau) n <= 250000`` (each box costs
        ``O(n V1 T k)`` for its tables; at ``V1 = 2000`` pass a ``box`` around the optimum): rigorous
        bounds over the search ``box`` only (``certificate["domain"] = "box"``; the co-topic scores have no finite
        chart of ``R^2``): status 0 ``"certified optimum on the box"`` (gap closed, argmin interior,
        ``L* - lower <= tol``), 3 ``"bound on the box"`` (argmin touches the box), 4 not certified. Given matrix
        families, the cross-entropy, the Dirichlet prior and ``method="lbfgs"`` are refused before any work
        (SPEC §7, §11.8).
    certify_options : dict or None, default None
        Passed to ``interval_certificate`` and ``global_certificate`` (``tol``, ``max_boxes``); needs
        ``certify="interval"``. ``"recheck": True`` adds the Arb re-check (needs python-flint, the
        ``certify`` extra) as ``certificate["recheck"]`` (paper's model only). General model, label family:
        ``scope`` (``"global"``, the whole-domain certificate, or ``"local"``), ``radius``, ``max_pairs``, and
        ``checkpoint`` (a file path: each finished region of the whole-domain certificate is appended there, and
        a later call on the same problem replays them and continues; for hours-long corpus-size certificates).
    family : None, "co-topic", "label", array or list of arrays, default None
        General model: the score family ``alpha I_w + beta G`` (default ``G`` the co-topic similarity,
        :func:`theorycheck.solvers.cotopic_matrix`), ``"label"`` (``alpha I_w + beta Z``, ``Z`` the same-label
        indicator of the SPEC §11.6 labels), a word-similarity ``G`` (``(n_words, n_words)``
        or ``(V1, V1)``) or a list of ``(V1, V1)`` basis matrices ``B_k`` of ``sum_k c_k B_k``.
        ``"co-topic"`` and ``"label"`` with ``method="family"`` and the stage-1 ``W^V`` (or ``"label"``, squared
        loss, any ``W^V``) use the structured evaluator of SPEC §11.8 (no ``V1 x V1`` array; the co-topic
        family costs ``O(V1^2 T^2 / 2)`` per ``beta`` by pair sums and is searched over its profile in ``beta``, SPEC
        §11.8(a); the label family ``O(V1 T)`` per document law); the others
        the dense evaluator, refused before any work when its arrays do not fit.
    mask_keys : bool, default False
        General model: hide selected positions as keys (the official code's convention), as in
        :func:`theorycheck.population.attention_loss`.
    n_theta : int or None, default None
        General model, Dirichlet prior: the loss is the average over one fixed sample of ``n_theta``
        topic proportions (common random numbers; :func:`theorycheck.population.attention_loss_estimate`).
    seed : int or None, default None
        General model, Dirichlet prior: seed of that sample (``None``: 0).
    x0 : array or None, default None
        General model, ``method="lbfgs"``: starting scores ``(V1, V1)`` (default: the family optimum);
        ``method="family"``: starting coefficients (one per family coefficient, inside the box), replacing the
        coarse grid (a warm start, e.g. the optimum on fewer sampled laws).
    solver_options : dict or None, default None
        Options of the local refinement: ``scipy.optimize.minimize_scalar`` (bounded; paper's model,
        block) or L-BFGS-B (identity; general model), e.g. ``{"maxiter": 1}``; reaching its iteration
        limit gives status 1.

    See Also
    --------
    optimal_attention : The solver these options configure.
    ValueOptions : The options of the stage-1 solver.
    GramOptions : The options of the Gram solver.

    References
    ----------
    SPEC §4.3 (the paper's model), §11.4 and §11.8 (the general model), §7 (the interval certificate).

    Examples
    --------
    A dict of fields is validated into the object; an unknown key names the allowed ones:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import AttentionOptions, optimal_attention
    >>> AttentionOptions(n_grid=101).n_grid
    101
    >>> optimal_attention(TopicModel(T=3, v=2, tau=1), Masking(), options={"grid": 101})
    Traceback (most recent call last):
    ...
    ValueError: options: unknown field(s) grid for AttentionOptions; allowed: n_grid, box, ...
    """

    n_grid: int | None = None
    box: object = None
    check_general: bool = True
    certify: str | None = None
    certify_options: dict | None = None
    family: object = None
    mask_keys: bool = False
    n_theta: int | None = None
    seed: int | None = None
    x0: object = None
    solver_options: dict | None = None

    def __post_init__(self):
        _check_opt_int("n_grid", self.n_grid, 1)
        _check_bool("check_general", self.check_general)
        if self.certify is not None:
            check_choice("options.certify", self.certify, ("interval",))
        _check_dict("certify_options", self.certify_options)
        if self.certify_options is not None and self.certify is None:
            raise ValueError("options.certify_options needs options.certify='interval'")
        _check_bool("mask_keys", self.mask_keys)
        _check_opt_int("n_theta", self.n_theta, 2)
        _check_opt_int("seed", self.seed, 0)
        _check_dict("solver_options", self.solver_options)


@functools.cache
def _defaults(cls):
    """The default options of ``cls`` (one shared instance: the objects are frozen)."""
    return cls()


def coerce_options(cls, options):
    """``options`` as a ``cls`` instance: ``None`` -> defaults, a ``cls`` as is, a dict of fields validated.

    Raises ``ValueError`` for unknown keys (naming them and the allowed fields) and ``TypeError`` for
    any other type.
    """
    if options is None:
        return _defaults(cls)
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in options if k not in allowed)
        if unknown:
            hint = " (backend options go in options={'solver_options': {...}})" if "solver_options" in allowed else ""
            names = ", ".join(unknown)
            raise ValueError(
                f"options: unknown field(s) {names} for {cls.__name__}; allowed: {', '.join(allowed)}{hint}"
            )
        return cls(**options)
    raise TypeError(f"options must be None, a dict or a {cls.__name__}, got {type(options).__name__}")
