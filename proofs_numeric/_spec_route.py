"""An independent route to the SPEC §4.3 numbers: the formulas of SPEC §2.1, §4.2 and §4.3 typed in
again with ``mpmath`` (40 digits), importing nothing from :mod:`theorycheck`.

Used by claims and tests (issue #25 item 5) in place of comparisons of the code with numbers it
generated: the §4.3 table (K*, L*, L(uniform)), the §4.2 stage-1 constants, the §4.3(b) identity
optimum and the §4.5 onset ``sigma_max``. It shares no code with the solvers (no closed form, no
interval engine, no optimiser of the package): the losses are the SPEC's query-class sums written
plainly, and the optima are found by an ``mpmath`` scan and ``findroot`` on the derivative
(``mpmath.diff``). The masking probabilities are read as exact decimals (``mpf("0.15")``).

Functions: :func:`consts` (a, r, q, rho, eta, A, B0, gamma), :func:`block_loss` (SPEC §4.3(a) at
``K``), :func:`identity_loss` (SPEC §4.3(b) at ``(alpha, beta)``; ``beta = -inf`` allowed),
:func:`kstar`, :func:`identity_optimum`, :func:`identity_optimum_beta_inf`, :func:`sigma_max`
(SPEC §4.5 item 3) and :func:`one_set_loss`, a third route: the SPEC §4.3 "exact population
loss for any scores" on one document (by symmetry every tau-set is alike), with numpy vectors of
size ``Tv + 1`` (small models only).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

DPS = 40


def _prec():
    """At least :data:`DPS` digits, never fewer than the caller's (``mpmath.diff`` raises the precision)."""
    return mp.workdps(max(DPS, mp.mp.dps))


def _mp(x):
    return mp.mpf(repr(x)) if isinstance(x, float) else mp.mpf(x)


def consts(T, v, tau, p_m, p_c, p_r):
    """SPEC §2.1 constants and the §4.2 minimum-norm stage-1 ``(A, B0, gamma)`` (constant context when
    ``tau = T``), as a dict of ``mpf``."""
    with _prec():
        p_m, p_c, p_r = _mp(p_m), _mp(p_c), _mp(p_r)
        a, r, q = 1 - p_m * (1 - p_c), p_m * p_r, p_m * (1 - p_c - p_r)
        Tv = T * v
        if tau < T and a > 0:
            B0 = -(r * (a + r) + Tv * q**2) / (a * v * T * ((a + r) ** 2 + Tv * q**2))
            A = B0 + 1 / (a * v)
            gamma = q * (Tv * B0 + 1 / a) / (a + r)
        else:
            mu2 = (a + r) ** 2 / Tv + q**2
            A = B0 = (a + r) / (Tv**2 * mu2)
            gamma = q / (Tv * mu2)
        rho, eta = a / (tau * v) + r / Tv, r / Tv
        return dict(T=T, v=v, tau=tau, p_c=p_c, p_r=p_r, a=a, r=r, q=q, rho=rho, eta=eta, A=A, B0=B0, gamma=gamma)


def _ell_block(c, H, h0, target_H):
    """``v sum_t (c0 + d H_t)^2 - 2 (c0 + d H_target) + 1``; ``H``: list of ``(count of topics, H_t)``."""
    c0 = c["B0"] * (1 - h0) + c["gamma"] * h0
    d = c["A"] - c["B0"]
    return c["v"] * sum(n * (c0 + d * Ht) ** 2 for n, Ht in H) - 2 * (c0 + d * target_H) + 1


def block_loss(K, c):
    """SPEC §4.3(a): the block-``W^V`` squared loss at the aggregate weight ``K`` (``c``: :func:`consts`)."""
    with _prec():
        K = _mp(K)
        T, v, tau, rho, eta, q = c["T"], c["v"], c["tau"], c["rho"], c["eta"], c["q"]
        Hs, Ho = c["a"] / tau + c["r"] / T, c["r"] / T
        L = (1 - c["p_c"] - c["p_r"]) * _ell_block(c, [(tau, Hs), (T - tau, Ho)], q, Hs)
        Z = 1 + rho * (K - v)
        H1, Hin, Hout = rho * K / Z, rho * v / Z, eta * v / Z
        H = [(1, H1), (tau - 1, Hin), (T - tau, Hout)]
        L += (c["p_c"] + c["p_r"] / T) * _ell_block(c, H, q / Z, H1)
        if tau > 1:
            L += c["p_r"] * (tau - 1) / T * _ell_block(c, H, q / Z, Hin)
        if tau < T:
            Zp = 1 + eta * (K - v)
            Hp = [(1, eta * K / Zp), (tau, rho * v / Zp), (T - tau - 1, eta * v / Zp)]
            L += c["p_r"] * (T - tau) / T * _ell_block(c, Hp, q / Zp, rho * v / Zp)
        return L


def _ell_id(groups, target):
    """``sum_y h_y^2 - 2 h_target + 1``; ``groups``: list of ``(count, h)``."""
    return sum(n * h**2 for n, h in groups) - 2 * target + 1


def identity_loss(alpha, beta, c):
    """SPEC §4.3(b): the identity-``W^V`` squared loss at ``(alpha, beta)`` (``beta = -inf``: ``e^beta = 0``)."""
    with _prec():
        T, v, tau, rho, eta = c["T"], c["v"], c["tau"], c["rho"], c["eta"]
        ea = mp.exp(_mp(alpha))
        eb = mp.mpf(0) if beta == -mp.inf or beta == float("-inf") else mp.exp(_mp(beta))
        K = ea + (v - 1) * eb
        Z = 1 + rho * (K - v)
        g = [(1, rho * ea / Z), (v - 1, rho * eb / Z), ((tau - 1) * v, rho / Z), ((T - tau) * v, eta / Z)]
        L = (c["p_c"] + c["p_r"] / (T * v)) * _ell_id(g, rho * ea / Z)
        L += c["p_r"] * (v - 1) / (T * v) * _ell_id(g, rho * eb / Z)
        L += c["p_r"] * (tau - 1) / T * _ell_id(g, rho / Z)
        if tau < T:
            Zp = 1 + eta * (K - v)
            gp = [(1, eta * ea / Zp), (v - 1, eta * eb / Zp), (tau * v, rho / Zp), ((T - tau - 1) * v, eta / Zp)]
            L += c["p_r"] * (T - tau) / T * _ell_id(gp, rho / Zp)
        L += (1 - c["p_c"] - c["p_r"]) * _ell_id([(tau * v, rho), ((T - tau) * v, eta)], rho)
        return L


def _argmin_1d(f, lo, hi, n=400):
    """``mpmath`` scan of ``f`` on ``[lo, hi]``, then ``findroot`` of ``f'`` from the best point."""
    with _prec():
        xs = [lo + (hi - lo) * mp.mpf(i) / n for i in range(n + 1)]
        x0 = min(xs, key=f)
        try:
            x = mp.findroot(lambda t: mp.diff(f, t), x0, verify=False)
        except (ValueError, ZeroDivisionError):  # e.g. a minimum at the scan's edge (a falsified model)
            x = x0
        x = x if lo <= x <= hi and f(x) <= f(x0) else x0
        return x, f(x)


def kstar(c, lo=-5, hi=20):
    """``(K*, L*)``: the block-``W^V`` optimum over ``log K in [lo, hi]`` (SPEC §4.3(a))."""
    with _prec():
        t, L = _argmin_1d(lambda t: block_loss(mp.exp(t), c), mp.mpf(lo), mp.mpf(hi))
        return mp.exp(t), L


def sigma_max(c):
    """SPEC §4.5 item 3: ``sigma_max = -L'(log K)|_{K=v} / (v (T - 1))``."""
    with _prec():
        return -mp.diff(lambda t: block_loss(mp.exp(t), c), mp.log(c["v"])) / (c["v"] * (c["T"] - 1))


def identity_optimum(c, alpha_range=(-5, 15), beta_range=(-15, 5), n=40):
    """``(alpha*, beta*, L*)``: a scan of the identity loss, then ``findroot`` of its gradient (SPEC §4.3(b))."""
    with _prec():
        (a0, a1), (b0, b1) = alpha_range, beta_range
        grid = [(a0 + (a1 - a0) * i / n, b0 + (b1 - b0) * j / n) for i in range(n + 1) for j in range(n + 1)]
        x0 = min(grid, key=lambda p: identity_loss(p[0], p[1], c))
        f = lambda a, b: identity_loss(a, b, c)  # noqa: E731
        x = mp.matrix([_mp(x0[0]), _mp(x0[1])])
        for _ in range(200):  # damped Newton on the gradient, derivatives by mpmath.diff
            d = lambda i, j, x=x: mp.diff(f, (x[0], x[1]), (i, j))  # noqa: E731
            g, H = mp.matrix([d(1, 0), d(0, 1)]), mp.matrix([[d(2, 0), d(1, 1)], [d(1, 1), d(0, 2)]])
            pd = H[0, 0] > 0 and H[0, 0] * H[1, 1] - H[0, 1] ** 2 > 0
            step = mp.lu_solve(H, g) if pd else g / max(mp.norm(g), mp.mpf(1))
            f0 = f(x[0], x[1])
            while f(x[0] - step[0], x[1] - step[1]) > f0 and mp.norm(step) > mp.mpf(10) ** (-DPS):
                step = step / 2  # backtracking: a descent step
            x -= step
            if pd and mp.norm(step) < mp.mpf(10) ** (-DPS // 2):
                break
        return x[0], x[1], f(x[0], x[1])


def identity_optimum_beta_inf(c, lo=-5, hi=20):
    """``(alpha*, L*)`` on the edge ``beta = -inf`` (SPEC §4.3(b), T = 100: ``beta* -> -inf``)."""
    return _argmin_1d(lambda a: identity_loss(a, -mp.inf, c), mp.mpf(lo), mp.mpf(hi))


def one_set_loss(scores, W, c):
    """SPEC §4.3 "exact population loss for any scores", squared, on the document ``S`` = the first tau
    topics (every tau-set is alike under the uniform-tau prior), in float64 numpy.

    ``scores(x, y)``: the score of query token ``x`` on key ``y`` (0 = [MASK], words ``1..Tv`` with
    topic ``(y-1)//v``) as an array function; ``W``: ``(V1, V1)`` value matrix. Returns
    ``sum_x [omega(x) ||o(x)||^2 - 2 (omega t)(x) . o(x) + omega(x)]`` with ``o(x) = W h(x)``,
    ``h(x)_y ∝ m(y) e^{S[x, y]}`` over the theory keys ``m = a p_S + r u + q e_0``.
    """
    T, v, tau = c["T"], c["v"], c["tau"]
    a, r, q, p_c, p_r = (float(c[k]) for k in ("a", "r", "q", "p_c", "p_r"))
    V1 = T * v + 1
    topic = np.r_[-1, np.arange(T * v) // v]
    pS = np.where((topic >= 0) & (topic < tau), 1.0 / (tau * v), 0.0)
    m = a * pS + r * np.r_[0.0, np.full(T * v, 1.0 / (T * v))] + q * np.eye(V1)[0]
    X, Y = np.meshgrid(np.arange(V1), np.arange(V1), indexing="ij")
    S = scores(X, Y)
    S = np.where((X == 0) | (Y == 0), 0.0, S)
    E = m[None, :] * np.exp(S - S.max(axis=1, keepdims=True))
    H = E / E.sum(axis=1, keepdims=True)  # row x: attention of query x
    O = H @ W.T  # row x: output o(x)
    L = 0.0
    omega0 = 1 - p_c - p_r
    L += omega0 * (O[0] @ O[0]) - 2 * omega0 * (pS @ O[0]) + omega0
    for x in range(1, V1):
        om = p_c * pS[x] + p_r / (T * v)
        t = p_c * pS[x] * np.eye(V1)[x] + p_r / (T * v) * pS
        L += om * (O[x] @ O[x]) - 2 * (t @ O[x]) + om
    return L


def block_value_matrix(c):
    """The SPEC §4.2 block ``W^V`` (``A`` same topic, ``B0`` other topic, ``gamma`` on [MASK], row 0 zero)."""
    T, v = c["T"], c["v"]
    topic = np.r_[-1, np.arange(T * v) // v]
    W = np.where(topic[:, None] == topic[None, :], float(c["A"]), float(c["B0"]))
    W[:, 0] = float(c["gamma"])
    W[0, :] = 0.0
    return W


def family_scores(alpha, beta, v):
    """The (alpha, beta) family's score function for :func:`one_set_loss` (SPEC §4.3)."""

    def scores(X, Y):
        same = (X - 1) // v == (Y - 1) // v
        return np.where(X == Y, alpha, np.where(same, beta, 0.0))

    return scores


def route_kstar(T, v, tau, p_m, p_c, p_r, constants=None):
    """``(K*, L*)`` as floats for a block ``W^V`` with the §4.2 constants or ``constants = (A, B0, gamma)``."""
    c = consts(T, v, tau, p_m, p_c, p_r)
    if constants is not None:
        c.update(A=_mp(float(constants[0])), B0=_mp(float(constants[1])), gamma=_mp(float(constants[2])))
    K, L = kstar(c, hi=14)
    return float(K), float(L)


def printed_as(x, printed, decimals=None) -> bool:
    """``x`` rounds to ``printed`` at the printed precision: ``decimals`` if given (trailing zeros, e.g.
    the 6 decimals of L*), else the decimals of ``printed``, or 4 significant digits for an
    integer-looking value of 4+ digits (the SPEC tables' K*)."""
    if decimals is not None:
        return round(float(x), decimals) == float(printed)
    s = repr(float(printed))
    if s.endswith(".0") and abs(printed) >= 1000:
        return float(f"{float(x):.4g}") == float(printed)
    return round(float(x), len(s.split(".")[1])) == float(printed)
