"""The optimal attention scores: one solver, two routes chosen by the model type (SPEC §4.3, §11.4).

:func:`optimal_attention` validates its arguments once and dispatches on the model
(``functools.singledispatch``):

- any :class:`~theorycheck.models.GeneralTopicModel` (the generic route, :mod:`._family`): the best
  scores in a linear family (default ``alpha I_w + beta G``, ``G`` the co-topic similarity) or
  unrestricted ``S``, on the exact population loss :func:`theorycheck.population.attention_loss`;
- the paper's :class:`~theorycheck.models.TopicModel` (the fast path, :mod:`._alpha_beta`): the
  closed-form loss ``L(alpha, beta)`` of SPEC §4.3 on a dense grid with a grid certificate, and
  optionally a rigorous interval bound (:mod:`._interval`).

For the paper's model ``G`` is the within-topic all-ones block, so the generic family is the
(alpha, beta) family reparametrised (``alpha_sym = alpha + beta``, ``beta_sym = beta``) and the two
routes reach the same optimum (tested in ``tests/test_solver_routes.py``).
"""

from __future__ import annotations

import functools

from ..._validate import check_loss, check_real
from ...models import GeneralTopicModel, Masking, TopicModel, check_models
from .._options import AttentionOptions, coerce_options
from .._result import SolveResult
from ._alpha_beta import DEFAULT_TOL, solve_alpha_beta
from ._family import solve_family

__all__ = ["optimal_attention"]


def optimal_attention(
    tm: GeneralTopicModel,
    mk: Masking,
    *,
    method: str = "grid",
    reg: float = 0.0,
    tol: float = DEFAULT_TOL,
    solver: str | None = None,
    options: AttentionOptions | dict | None = None,
    value="block",
    loss: str = "squared",
) -> SolveResult:
    """Optimal attention scores for a frozen ``W^V`` on the exact N -> inf MLM loss (SPEC §4.3, §11.4).

    Paper's model: the global minimiser of ``L(alpha, beta)`` (the (alpha, beta) score family,
    :func:`theorycheck.population.alpha_beta_loss`) with a grid certificate; for the block ``W^V`` it
    depends only on ``K = e^alpha + (v - 1) e^beta``. Any other topic model: the best scores of a
    linear family, or unrestricted scores (``._family.solve_family``).

    Parameters
    ----------
    tm : GeneralTopicModel or TopicModel
        The topic model (the paper's :class:`~theorycheck.TopicModel` or any
        :class:`~theorycheck.GeneralTopicModel`).
    mk : Masking
        The masking probabilities.
    method : str, default "grid"
        Paper's model: ``"grid"`` (dense grid, then bounded Brent over log K / L-BFGS-B and
        Nelder-Mead). General model: ``"family"`` (``"grid"`` is its alias) or ``"lbfgs"``
        (unrestricted ``S``).
    reg : float, default 0.0
        Must be 0: the score families are unregularised (accepted for the shared contract).
    tol : float, default 1e-6
        Acceptance threshold on the relative residuals (``theorycheck.solvers._certify``). Paper's
        model: the finite-difference derivative (``dL/dlog K`` or the gradient; scale 1, loss units),
        the grid consistency ``max(0, lower_bound - L*)`` (scale 1) and the general-evaluator
        difference (scale ``|L*|``). General model: the (projected) gradient max-norm.
    solver : None, optional
        No backend choice (a non-None value is ignored with a warning).
    options : AttentionOptions or dict, optional
        Everything else: grid size, search box, certificate mode, score family, refinement options
        (``solver_options``), ...; every field, its default and its meaning are documented in
        :class:`~theorycheck.solvers.AttentionOptions`.
    value : {"block", "identity"} or str or ndarray, default "block"
        For a general model also ``"stage1"`` or an array ``(V1, V1)``. Frozen ``W^V``: the
        minimum-norm stage-1 matrix (``"block"``; ``"stage1"`` is its alias for a general model), the
        identity on words, or a given matrix (general model).
    loss : {"squared", "ce"}, default "squared"
        Squared loss (the theory) or cross-entropy (the paper's experiments).

    Returns
    -------
    SolveResult
        Paper's model: ``x = [alpha, beta]``, ``fun = L*``; ``info`` (also attributes): ``alpha``,
        ``beta``, ``K``, ``logK``, ``loss``, ``loss_uniform`` (``L(0, 0)``), ``gap_to_uniform``,
        ``attention_ratio`` (per-word same-topic : different-topic weight ``K/v``),
        ``same_word_weight``, ``same_topic_weight``, ``flat_direction``, ``at_boundary``;
        ``certificate``: grid lower bound, Lipschitz estimate, tails, derivatives (and with
        ``certify="interval"``: ``lower``, ``upper``, ``gap``, ``method``, ``kind``, ``certified``,
        ``box``, ``boxes_tried``, ``argmin_interior``, ``interval``).
        Status: 0 certified; 1 local refinement hit its iteration limit; 3 minimiser on the search
        box (e.g. ``beta* -> -inf``, reported with the box value); 4 a residual check failed.
        With ``certify="interval"`` (SPEC §7, interval certificate) the box is enlarged until the
        certified argmin is interior (capped); the returned point always lies in
        ``certificate["box"]`` and ``lower <= fun <= upper`` always holds; status 0 iff
        ``certificate["kind"] == "certified optimum"``, status 3 is ``"bound on the box"`` (a lower
        bound on the box's minimum only, not a certified optimum).
        General model: see ``._family.solve_family``.

    Raises
    ------
    ValueError
        Bad arguments (before any work): ``reg != 0``, an unknown ``method``, ``value`` or ``loss``,
        options that do not apply to the model (e.g. a certificate for the cross-entropy), dense arrays
        above the memory limit.
    TypeError
        ``options`` neither None, a dict nor an :class:`AttentionOptions`, or a field of the wrong type.

    See Also
    --------
    theorycheck.population.alpha_beta_loss : The objective ``L(alpha, beta)`` of the paper's model.
    optimal_value_matrix : The frozen stage-1 ``W^V`` (``value="block"``).
    AttentionOptions : Grid, box, interval certificate and score family.
    cotopic_matrix : The default score family's similarity for a general model.

    References
    ----------
    SPEC §4.3 (the (alpha, beta) family, block and identity ``W^V``), §7 (grid and interval
    certificates), §11.4 and §11.8 (general models); Li, Li and Risteski, *How Do Transformers Learn
    Topic Structure?*, ICML 2023, arXiv:2303.04245, Theorem 3.

    Examples
    --------
    With the stage-1 block ``W^V`` the optimum beats uniform attention and puts more weight on the
    query's own topic (``K > v``); only ``K = e^alpha + (v-1) e^beta`` is determined, and the reported
    point is ``alpha = beta = log(K/v)``:

    >>> from theorycheck import TopicModel, Masking
    >>> from theorycheck.solvers import optimal_attention
    >>> tm = TopicModel(T=4, v=3, tau=2)
    >>> res = optimal_attention(tm, Masking(), options={"n_grid": 201})
    >>> res.status, round(res.fun, 9), round(res.loss_uniform, 9)
    (0, 0.822346946, 0.833333333)
    >>> round(res.K, 4), res.K > tm.v, bool(np.allclose(res.x, np.log(res.K / tm.v)))
    (12.1132, True, True)
    """
    check_models(tm, mk, general=True)
    opts = coerce_options(AttentionOptions, options)
    reg = check_real("reg", reg, low=0.0, high=0.0)
    loss = check_loss(loss)
    return _optimal_attention(tm, mk, method, reg, tol, solver, opts, value, loss)


@functools.singledispatch
def _optimal_attention(g: GeneralTopicModel, mk, method, reg, tol, solver, opts, value, loss) -> SolveResult:
    """Generic route (SPEC §11.4): a score family or unrestricted ``S`` on the exact population loss."""
    return solve_family(g, mk, method, reg, tol, solver, opts, value, loss)


@_optimal_attention.register
def _(tm: TopicModel, mk, method, reg, tol, solver, opts, value, loss) -> SolveResult:
    """Paper's model (SPEC §4.3): the closed-form ``L(alpha, beta)`` on a certified grid."""
    return solve_alpha_beta(tm, mk, method, reg, tol, solver, opts, value, loss)
