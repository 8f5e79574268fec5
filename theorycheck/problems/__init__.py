"""Certified benchmark problems for optimum solvers, a solver protocol and a harness (SPEC §4.0-§4.3).

>>> from theorycheck import problems
>>> p = problems.get("stage1-value/lsq:paper", T=3, v=4, tau=2)      # doctest: +SKIP
>>> p.f(p.x0) - p.f_star, p.certificate.gap                          # doctest: +SKIP

==========================  ===============================================================  ====================
family                      problem                                                          module
==========================  ===============================================================  ====================
``stage1-value/lsq``        ``min_W L(W)`` (SPEC §4.0, §4.2, §11.3), convex quadratic        ``_value``
``stage1-value/ridge``      ``+ reg ||W||^2``, strongly convex                               ``_value``
``gram/sdp``                ``min L(G)``, ``G`` PSD (SPEC §4.1, §11.5)                       ``_gram``
``gram/factor``             ``min L(W_E^T W_E)``, nonconvex                                  ``_gram``
``gram/trace``              ``min L(G)``, ``G`` PSD, ``tr G <= c`` binds (SPEC §4.6(a))      ``_gram_trace``
``gram/rank1``              ``d = 1`` embedding + weight decay, multimodal (SPEC §4.6(b))    ``_gram_rank1``
``gram/factor-structured``  ``gram/factor`` via rank-T factors, to 10^6 variables (§4.6(c))  ``_gram_structured``
``attention-ab/*``          ``min L(alpha, beta)`` (SPEC §4.3), nonconvex, 2-d               ``_attention``
``attention-S/full``        ``min_S L(S)``, ``V1 x V1``; f* only an upper bound              ``_attention``
==========================  ===============================================================  ====================

The solver protocol (``solver(oracle, budget, callback) -> x``; the sealed oracle in ``._oracle``) and the
built-in solvers are in ``._solvers``; one run in ``._execute``, its sealed process in ``._zygote``, records
and keys in ``._harness``, the benchmark in ``._run``, the report in ``._report``.
"""

from ._oracle import Budget, BudgetExhausted, Oracle, ProblemInfo
from ._problem import Certificate, Problem
from ._registry import FAMILIES, LADDERS, MODELS, get, list_problems, match
from ._solvers import SOLVERS, load_solver, solver_names

#: ``problems.list()``, as issue #23 names it (shadows the builtin inside this module only)
list = list_problems

__all__ = [
    "Problem",
    "Certificate",
    "get",
    "list",
    "list_problems",
    "match",
    "FAMILIES",
    "LADDERS",
    "MODELS",
    "Budget",
    "Oracle",
    "ProblemInfo",
    "BudgetExhausted",
    "SOLVERS",
    "load_solver",
    "solver_names",
]
