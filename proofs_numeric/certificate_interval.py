"""SPEC §4.3(a), (b) (DERIVED): rigorous enclosure of the stage-2 attention optimum.

Interval branch and bound (:func:`theorycheck.solvers.attention.interval_certificate`,
outward-rounded interval arithmetic: the vectorised numpy engine with a second-order bound at the float
minimiser; ``engine="mpmath"`` is the ``mpmath.iv`` reference) bounds ``min L`` over the search box of
``optimal_attention`` from below and above. The claim: the float optimum of the solver is not below the
certified ``lower`` (rigorous) and exceeds it by at most ``max_gap`` (the solver's optimum is
certified optimal to that accuracy); the certified gap ``upper - lower`` is at most ``max_gap``
(2e-9 for the block W^V at T = v = 10, tau = 2 and 3, branch-and-bound target 1e-9). For the identity W^V
(two variables, the default box ``alpha in [-10, 40], beta in [-40, 20]`` of ``optimal_attention``) the
same 2e-9 bounds hold.

Whole domain (issue #25 item 2, SPEC §7): :func:`theorycheck.solvers.attention.global_certificate`
bounds the infimum over all ``log K`` / all ``(alpha, beta)`` on a compact chart; its ``lower`` must also
be within ``max_gap`` of the solver's optimum, and at the default configurations every global minimiser
is finite (argmin off the chart's edges; the domain also holds flat losses and K* = inf). Independent
route (issue #25 item 5): at the default configurations the optimum of the SPEC
formulas retyped in mpmath (:mod:`._spec_route`, 40 digits, own optimiser) must lie in
``[lower, upper]`` of both certificates (up to 1e-15), in place of a comparison with the table the code printed.

The scalar ``mpmath`` engine and the interval AD (issue #25 item 6: one-line bugs there passed every claim):
at the default configurations (a) the gradient enclosed by forward-mode AD on intervals (``_Dual``) at rational
points of the compact chart (where the loss is rational: ``+ - * /`` only, quotients of two variable-dependent
terms included) must contain the Richardson-extrapolated central difference of the loss evaluated exactly in
``Fraction`` arithmetic, within ``|D(h) - D(h/2)| + h^3 (1 + |D|)``, ``h = 1/1000`` (the difference of the two
steps estimates the O(h^2) truncation error of either; SPEC §7 whole-domain certificate); (b) ``engine="mpmath"``
on a box around the solver's optimum and on a box beside it (where the loss is monotone along the first
variable and its minimum sits on a face) must give ``lower <= upper`` and a ``lower`` not above the float
loss (:mod:`theorycheck.population`, an independent evaluator) anywhere on a 101-point grid of the box nor above
the solver's ``L*``, up to the float evaluator's rounding ``16 eps``.

Found by ``verify --explore`` and fixed in ``interval_certificate`` (commit deeae47): at ``tau = T``
(constant context) the certificate used the informative-case stage-1 constants and bounded another
loss (T = 2, v = 1, tau = 2, p = 0.05/0.05/0: certified 0.475045 against the optimum 0.5). The domain
keeps ``tau = T`` so that this case stays explored.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from mpmath import iv

from theorycheck.population import alpha_beta_loss, alpha_beta_loss_logK
from theorycheck.report.claims import Claim, compare_all, compare_close, compare_greater
from theorycheck.solvers import optimal_attention
from theorycheck.solvers.attention import global_certificate, interval_certificate
from theorycheck.solvers.attention._interval_loss import _Dual, _evaluate, _iv, _setup
from theorycheck.strategies import masking_grid_params, model_params, params

from . import _spec_route
from ._stage1 import SPEC_MASKING, models

#: Finite-difference step of the AD sub-check (exact rational arithmetic: no cancellation error).
FD_STEP = Fraction(1, 1000)
#: Rational points of the compact charts (u,) / (u, w) at which the interval AD gradient is checked.
CHART_POINTS = {"block": ((Fraction(1, 3),), (Fraction(3, 4),)),
                "identity": ((Fraction(1, 3), Fraction(1, 4)), (Fraction(3, 5), Fraction(2, 3)))}  # fmt: skip
#: Rounding allowance of the float loss evaluator (a sum of O(1) terms of size <= 1): 16 ulps of 1.
FLOAT_ROUND = 16 * float(np.finfo(float).eps)


def check(params: dict, inject: dict | None = None):
    inject = inject or {}
    tm, mk = models(params)
    value = params["value"]
    box = params.get("box")
    cert = interval_certificate(
        tm, mk, value, box=box, tol=params["tol"], max_boxes=params["max_boxes"], offset=inject.get("offset", 0.0)
    )
    sol = optimal_attention(tm, mk, value=value, loss="squared", options={"check_general": False})
    parts = [
        # rigorous: no point of the box has a loss below `lower`, so the solver's value cannot be below it
        compare_greater(
            sol.fun,
            cert.lower,
            details={"lower": cert.lower, "solver_fun": sol.fun},
            label="solver L* > certified lower",
        ),
        # the solver's optimum is certified optimal to within max_gap
        compare_close(
            sol.fun - cert.lower,
            0.0,
            params["max_gap"],
            details={"solver_excess": sol.fun - cert.lower},
            label=f"solver L* - lower <= {params['max_gap']:g}",
        ),
        compare_close(
            cert.gap,
            0.0,
            params["max_gap"],
            details={"gap": cert.gap, "n_boxes": cert.n_boxes},
            label=f"certified gap upper - lower <= {params['max_gap']:g}",
        ),
    ]
    x_sol = (sol.info["logK"],) if value == "block" else (sol.alpha, sol.beta)
    g = global_certificate(tm, mk, value, tol=params["tol"], max_boxes=params["max_boxes"],
                           offset=inject.get("offset", 0.0), x0=x_sol)  # fmt: skip
    if g is not None:
        parts += [
            compare_close(sol.fun - g.lower, 0.0, params["max_gap"], details={"global_lower": g.lower,
                          "global_upper": g.upper, "global_n_boxes": g.n_boxes},
                          label=f"whole domain: solver L* - lower <= {params['max_gap']:g}"),
        ]  # fmt: skip
        if params.get("route"):  # the default configurations (the domain holds flat and K* = inf cases)
            parts.append(
                compare_close(
                    float(g.info["at_infinity"]),
                    0.0,
                    0.0,
                    label="whole domain: every global minimiser is finite",
                    details={"global_argmin": g.info["argmin_original"]},
                )
            )
    if params.get("route"):  # the independent mpmath route's optimum lies in both enclosures
        c = _spec_route.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)
        L_r = float(_spec_route.kstar(c)[1] if value == "block" else _spec_route.identity_optimum(c)[2])
        for name, ct in (("box", cert), ("whole domain", g)):
            if ct is not None:
                parts.append(compare_close(min(max(L_r, ct.lower), ct.upper), L_r, 1e-15, details={"L_route": L_r},
                                           label=f"independent route's L* in the {name} certificate"))  # fmt: skip
    if params.get("route"):  # the mpmath engine and the interval AD (module docstring), default configurations
        parts += _ad_parts(tm, mk, value) + _mpmath_engine_parts(tm, mk, value, sol, x_sol)
    res = compare_all(parts)
    res.details.update(lower=cert.lower, upper=cert.upper, gap=cert.gap, n_boxes=cert.n_boxes, argmin=cert.argmin)
    return res


def _ad_parts(tm, mk, value):
    """(a): interval AD gradient on the compact chart vs the extrapolated central difference of the exact loss."""
    chart = "block-u" if value == "block" else "identity-uw"
    cst_iv, cst_q = _setup(tm, mk, chart), _setup(tm, mk, chart, make=lambda x: x)
    if "k_in" not in cst_q:  # degenerate chart (the loss does not depend on the scores)
        return []
    worst: tuple[float, float, float, dict] = (-1.0, 0.0, 0.0, {})
    for pt in CHART_POINTS[value]:
        n = len(pt)
        F = _evaluate([_Dual(_iv(x), [int(i == j) for j in range(n)]) for i, x in enumerate(pt)], tm, cst_iv, chart)
        for i in range(n):
            d1, d2 = (_central(pt, i, h, tm, cst_q, chart) for h in (FD_STEP, FD_STEP / 2))
            d = float((4 * d2 - d1) / 3)
            tol = float(abs(d2 - d1)) + float(FD_STEP) ** 3 * (1 + abs(d))
            g = iv.mpf(F.der[i])
            dist = max(float(g.a) - d, d - float(g.b), 0.0)
            if dist / tol > worst[0]:
                worst = (dist / tol, dist, tol, {"ad_point": [str(x) for x in pt], "ad_coordinate": i, "fd": d,
                                                 "ad_lo": float(g.a), "ad_hi": float(g.b)})  # fmt: skip
    _, dist, tol, details = worst
    return [compare_close(dist, 0.0, tol, details=details, label="interval AD gradient (chart) = exact FD")]


def _central(pt, i, h, tm, cst, chart):
    """Central difference of the exact (``Fraction``) chart loss along coordinate ``i`` with step ``h``."""
    up = [x + (h if j == i else 0) for j, x in enumerate(pt)]
    dn = [x - (h if j == i else 0) for j, x in enumerate(pt)]
    return (_evaluate(up, tm, cst, chart) - _evaluate(dn, tm, cst, chart)) / (2 * h)


def _mpmath_engine_parts(tm, mk, value, sol, x_sol):
    """(b): the scalar mpmath engine on a box around the optimum and on one beside it (monotone along x_1)."""
    around = tuple((c - 1.0, c + 1.0) for c in x_sol)
    beside = ((x_sol[0] + 0.5, x_sol[0] + 2.0),) + around[1:]
    parts = []
    for name, box in (("around L*", around), ("beside L*", beside)):
        cert = interval_certificate(tm, mk, value, box=box, tol=1e-7, max_boxes=200, engine="mpmath")
        grid = [np.linspace(lo, hi, 101) for lo, hi in box]
        if value == "block":
            F = alpha_beta_loss_logK(grid[0], tm, mk, loss="squared")
        else:
            A, B = np.meshgrid(*grid)
            F = alpha_beta_loss(A, B, tm, mk, "identity", loss="squared")
        f_min = min(float(np.min(F)), sol.fun if name == "around L*" else np.inf)
        d = {f"mpmath_{name}_lower": cert.lower, f"mpmath_{name}_upper": cert.upper, f"float_{name}_min": f_min}
        parts += [
            compare_greater(cert.upper, cert.lower, details=d, label=f"mpmath engine {name}: lower <= upper"),
            compare_greater(f_min + FLOAT_ROUND, cert.lower, label=f"mpmath engine {name}: lower <= float loss"),
        ]
    return parts


def domain():
    """Block W^V (variable log K, the solver's search box), T <= 10, v <= 10, every tau, maskings on a
    0.05 grid (p_c != p_r), target gap 1e-9 within 2000 boxes: one branch and bound per draw."""
    fixed = dict(value="block", tol=1e-9, max_boxes=2000, max_gap=2e-9)
    return params(model_params(max_T=10, max_v=10), masking_grid_params(step=0.05), **fixed)


def falsify(params: dict) -> dict:
    """A loss offset that moves the certified enclosures just off the optimum (issue 25 item 6: sized so that a
    loosened tolerance lets it pass). With the independent route (the default configurations): a negative
    offset puts the smaller certified upper bound 3e-15 below the route's L* (3 x the 1e-15 of the membership
    check, a fixed number), i.e. ``-(min(upper) - L_route + 3e-15)``, computed here from one unperturbed
    certificate per domain; downwards, so that the solver's L* stays above the lower bounds (a tolerance-free
    check an upward offset would break as well). Without the route: 6e-9, 3 x the default ``max_gap`` 2e-9
    between the solver's L* and the lower bound. (An offset of 10 ``max_gap`` breaks the membership check by
    2e7 x.)"""
    if not params.get("route"):
        return {"offset": 6e-9}
    tm, mk = models(params)
    value, tol, n = params["value"], params["tol"], params["max_boxes"]
    uppers = [interval_certificate(tm, mk, value, box=params.get("box"), tol=tol, max_boxes=n).upper]
    sol = optimal_attention(tm, mk, value=value, loss="squared", options={"check_general": False})
    x_sol = (sol.info["logK"],) if value == "block" else (sol.alpha, sol.beta)
    g = global_certificate(tm, mk, value, tol=tol, max_boxes=n, x0=x_sol)
    if g is not None:
        uppers.append(g.upper)
    c = _spec_route.consts(tm.T, tm.v, tm.tau, mk.p_m, mk.p_c, mk.p_r)
    L_r = float(_spec_route.kstar(c)[1] if value == "block" else _spec_route.identity_optimum(c)[2])
    return {"offset": -(min(uppers) - L_r + 3e-15)}


CLAIM = Claim(
    id="certificate.interval",
    statement=(
        "Interval branch and bound bounds the (alpha, beta) attention optimum from below, on the search box and over"
        " the whole line / plane: the solver's L* is above both certified lower bounds by <= 2e-9 with every global"
        " minimiser finite; the independent mpmath route's L* lies in both enclosures (block and identity, T=v=10);"
        " the mpmath engine's lower bound is below the float loss and its interval AD gradient equals exact FD"
    ),
    source="DERIVED",
    spec="SPEC §4.3(a), §4.3(b), §7",
    check=check,
    default_params=(
        dict(T=10, v=10, tau=3, **SPEC_MASKING, value="block", tol=1e-9, max_boxes=2000, max_gap=2e-9, route=True),
        dict(T=10, v=10, tau=2, **SPEC_MASKING, value="block", tol=1e-9, max_boxes=2000, max_gap=2e-9, route=True),
        dict(
            T=10,
            v=10,
            tau=3,
            **SPEC_MASKING,
            value="identity",
            tol=1e-9,
            max_boxes=20000,
            max_gap=2e-9,
            route=True,
        ),
    ),
    falsify=falsify,
    domain=domain,
)
