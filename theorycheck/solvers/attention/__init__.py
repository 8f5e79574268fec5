"""The optimal attention scores for a frozen ``W^V`` (SPEC §4.3, §11.4).

One solver, :func:`optimal_attention`, with its routes and certificates side by side:

====================== =====================================================================================
module                 content
====================== =====================================================================================
``_solve``             the public solver: validation and the route registry
                       (``functools.singledispatch`` on the model type)
``_alpha_beta``        the paper model's route: the closed-form ``L(alpha, beta)`` on a
                       certified grid (SPEC §4.3)
``_family``            the generic route: score families / unrestricted ``S`` on the exact
                       population loss (SPEC §11.4); :func:`cotopic_matrix`, :func:`stage1_value_matrix`
``_structured``        the generic route's structured (alpha, beta) search on the family evaluator of
                       SPEC §11.8 (label and co-topic families, no ``V1 x V1`` array)
``_interval``          rigorous interval branch and bound on the (alpha, beta) loss
                       (:func:`interval_certificate` on a box, :func:`global_certificate` on the
                       whole domain, ``options.certify="interval"``)
``_interval_loss``     the (alpha, beta) loss written for interval arithmetic (shared by both engines)
``_identity_beta``     the certified ``beta*`` of the identity-``W^V`` optimum and its sign
                       (:func:`certified_beta_star`: whole-domain certificate, Krawczyk, monotonicity)
``_interval_vec``      the numpy interval engine
``_interval_general``  a general model's certificates (SPEC §7, §11.8): label family over ``R^2``,
                       co-topic family over the search box
``_interval_label``    the label family's loss on interval boxes (three key classes, compact chart)
``_interval_cotopic``  the co-topic family's loss on interval boxes (small models, every key weighed)
``_interval_scores``   the label family's loss in score coordinates ``(alpha + beta, beta)`` (the split
                       certificate's score box and the local certificate); its compiled per-(box, pair)
                       sums are in ``_interval_scores_kernel`` (numpy: the reference engine)
====================== =====================================================================================
"""

from .._options import AttentionOptions
from ._family import cotopic_matrix, stage1_value_matrix
from ._identity_beta import BetaStar, certified_beta_star
from ._interval import IntervalCertificate, global_certificate, interval_certificate, interval_loss
from ._solve import optimal_attention

__all__ = [
    "optimal_attention",
    "AttentionOptions",
    "cotopic_matrix",
    "stage1_value_matrix",
    "interval_certificate",
    "global_certificate",
    "interval_loss",
    "IntervalCertificate",
    "certified_beta_star",
    "BetaStar",
]
