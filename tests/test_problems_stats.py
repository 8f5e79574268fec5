"""The benchmark statistics (theorycheck/problems/_stats.py) against hand-worked examples and against
independent brute-force implementations of the published definitions (written here with plain loops):
Dolan-More 2002 performance profiles, More-Wild 2009 data profiles, COCO's runtime ECDF and ERT
(Hansen et al. 2021), a simulated-restart bootstrap, quantile bands and the scaling-exponent fit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from theorycheck.problems import _stats as S

INF = math.inf
NAN = math.nan


# ----------------------------------------------------------------------------------- record builders
def pt(t, evals, sub, viol=0.0, f_star=1.0):
    return {
        "t": t,
        "evals": evals,
        "f": f_star + sub * abs(f_star),
        "subopt_rel": sub,
        "subopt_abs": NAN,
        "violation": viol,
    }


def rec(solver="A", problem="p:paper", size='{"T": 2}', repeat=0, status="ok", trace=(), sub=NAN, viol=0.0,
        answer_t=None, answer_evals=None, credited=None, n=3, f_star=1.0, f0=None, evals=None, wall=None,
        budget=10.0, family="fam"):  # fmt: skip
    credited = status in S.CREDITED if credited is None else credited
    tr = list(trace)
    if credited and answer_t is None:
        answer_t = tr[-1]["t"] if tr else 1.0
    if credited and answer_evals is None:
        answer_evals = tr[-1]["evals"] if tr else 1
    return {
        "problem": problem, "family": family, "model": "paper", "size": size, "n": n, "solver": solver,
        "repeat": repeat, "status": status, "credited": credited, "budget_seconds": budget, "max_evals": 10**6,
        "wall": (answer_t if answer_t is not None else NAN) if wall is None else wall,
        "evals": (answer_evals or (tr[-1]["evals"] if tr else 0)) if evals is None else evals,
        "f0": f_star + 10 * abs(f_star) if f0 is None else f0,
        "f": f_star + sub * abs(f_star), "subopt_rel": sub, "subopt_abs": NAN, "violation": viol,
        "f_star": f_star, "f_star_lower": f_star, "cert_gap": 0.0, "cert_kind": "certified",
        "answer_t": answer_t, "answer_evals": answer_evals, "trace": tr,
    }  # fmt: skip


def timed(solver, repeat, t, problem="p:paper", **kw):
    """A run with no trace whose answer (relative suboptimality 0) arrives at ``t`` seconds; ``t = inf``:
    an error record."""
    if math.isinf(t):
        return rec(solver, problem, repeat=repeat, status="error", **kw)
    return rec(solver, problem, repeat=repeat, sub=0.0, answer_t=t, answer_evals=max(1, int(10 * t)), **kw)


# ----------------------------------------------------------------------------------- brute force
def bf_hit(r, tol, measure):
    """RT(tol) from the module docstring's words, with plain loops (NaN compares False)."""
    ok = lambda s, v: s is not None and v is not None and s <= tol and v <= tol  # noqa: E731
    if not r["credited"] or not ok(r["subopt_rel"], r["violation"]):
        return INF
    best = float(r["answer_evals" if measure == "evals" else "answer_t"])
    for p in r["trace"]:
        if ok(p["subopt_rel"], p["violation"]):
            best = min(best, float(p[measure]))
    return best


def bf_instances(recs):
    return sorted({(r["problem"], r["size"], r["repeat"]) for r in recs})


def bf_lookup(recs):
    return {(r["solver"], r["problem"], r["size"], r["repeat"]): r for r in recs}


def bf_perf(recs, tol, measure, tau):
    """Dolan-More: rho_s(tau) = #{p: r_ps <= tau} / #instances, r_ps = t_ps / min_s t_ps, one denominator."""
    inst, solvers, look = bf_instances(recs), sorted({r["solver"] for r in recs}), bf_lookup(recs)
    floor = 1e-9 if measure == "t" else 1.0
    rho = {}
    for s in solvers:
        count = 0
        for p in inst:
            times = {}
            for s2 in solvers:
                r = look.get((s2, *p))
                t = INF if r is None or r["status"] == "not applicable" else bf_hit(r, tol, measure)
                times[s2] = max(t, floor)
            best = min(times.values())
            if times[s] < INF and times[s] / best <= tau:
                count += 1
        rho[s] = count / len(inst)
    return rho


def bf_reduction(r, tau):
    """More-Wild's test f <= f_L + tau (f0 - f_L), f_L = f_star, under the credit rule."""
    bound = r["f_star"] + tau * (r["f0"] - r["f_star"])
    ok = lambda f, v: f is not None and v is not None and f <= bound and v <= tau  # noqa: E731
    if not r["credited"] or not ok(r["f"], r["violation"]):
        return INF
    best = float(r["answer_evals"])
    for p in r["trace"]:
        if ok(p["f"], p["violation"]):
            best = min(best, float(p["evals"]))
    return best


def bf_ecdf(recs, targets, x, per_dim):
    inst, solvers, look = bf_instances(recs), sorted({r["solver"] for r in recs}), bf_lookup(recs)
    out = {}
    for s in solvers:
        count = 0
        for p in inst:
            r = look.get((s, *p))
            if r is None or r["status"] == "not applicable":
                continue
            for tg in targets:
                rt = bf_hit(r, tg, "evals") / (r["n"] if per_dim else 1)
                count += rt < INF and rt <= x
        out[s] = count / (len(inst) * len(targets))
    return out


def bf_ert(recs, tol, measure):
    out = {}
    for key in sorted({(r["solver"], r["problem"], r["size"]) for r in recs if r["status"] != "not applicable"}):
        num, succ = 0.0, 0
        for r in recs:
            if (r["solver"], r["problem"], r["size"]) != key or r["status"] == "not applicable":
                continue
            h = bf_hit(r, tol, measure)
            if h < INF:
                num, succ = num + h, succ + 1
            elif measure == "evals":
                num += r["evals"]
            else:
                num += r["budget_seconds"] if math.isnan(r["wall"]) else min(r["wall"], r["budget_seconds"])
        out[key] = num / succ if succ else INF
    return out


SUBS = [1.0, 1e-2, 1e-4, 1e-6, 1e-9, 0.0, -1e-3, NAN]
VIOLS = [0.0, 0.0, 1e-7, 1e-3, NAN]


def random_records(seed):
    """A random record set: problems x sizes x repeats, solvers absent / not applicable / any status,
    random traces (possibly good points in uncredited runs), random answers."""
    g = np.random.default_rng(seed)
    probs = [f"p{i}:paper" for i in range(g.integers(1, 3))]
    sizes = [f'{{"T": {2 + i}}}' for i in range(g.integers(1, 3))]
    reps, solvers = range(g.integers(1, 4)), [f"s{i}" for i in range(g.integers(1, 4))]
    statuses = [s for s in S.STATUSES if s != "not applicable"]
    recs = []
    for p in probs:
        for z, size in enumerate(sizes):
            n = 2 + 3 * z
            f_star = float(g.choice([2.0, -3.0]))
            for k in reps:
                for s in solvers:
                    u = g.random()
                    if u < 0.15:
                        continue  # not run
                    if u < 0.3:
                        recs.append(rec(s, p, size, k, "not applicable", credited=False, n=n, f_star=f_star))
                        continue
                    status = statuses[g.integers(len(statuses))] if g.random() < 0.5 else "ok"
                    m = int(g.integers(0, 6))
                    ev = np.cumsum(g.integers(1, 5, m))
                    tt = np.cumsum(g.random(m) * 0.1)
                    tr = [
                        pt(float(t), int(e), float(g.choice(SUBS)), float(g.choice(VIOLS)), f_star)
                        for t, e in zip(tt, ev)
                    ]
                    credited = status in S.CREDITED and g.random() < 0.9
                    ae, at = (int(ev[-1]) if m else 0) + int(g.integers(0, 3)), (float(tt[-1]) if m else 0.0) + 0.01
                    recs.append(
                        rec(
                            s,
                            p,
                            size,
                            k,
                            status,
                            tr,
                            float(g.choice(SUBS)),
                            float(g.choice(VIOLS)),
                            answer_t=at if credited else None,
                            answer_evals=ae if credited else None,
                            credited=credited,
                            n=n,
                            f_star=f_star,
                            evals=ae + int(g.integers(0, 4)),
                            wall=at if g.random() < 0.7 else NAN,
                            budget=0.5,
                        )
                    )
    if not recs:
        recs.append(rec("s0", probs[0], sizes[0], 0, "error"))
    return recs


seeds = st.integers(0, 2**32 - 1)


# ----------------------------------------------------------------------------------- hitting time
def test_hitting_time_hand_worked():
    # trace (t, evals, subopt_rel, violation): the third point meets 1e-4 in f but violates by 3e-4,
    # the fourth meets everything down to 1e-9; the answer (1e-9, returned at t = 0.5, 9 evaluations).
    tr = [pt(0.1, 1, 1.0), pt(0.2, 3, 1e-3), pt(0.3, 5, 1e-5, 3e-4), pt(0.4, 8, 1e-9), pt(0.45, 9, 1e-9)]
    r = rec(trace=tr, sub=1e-9, answer_t=0.5, answer_evals=9)
    assert S.hitting_time(r, 1e-2, "evals") == 3 and S.hitting_time(r, 1e-2, "t") == 0.2  # 1e-3 <= 1e-2
    assert S.hitting_time(r, 1e-4, "evals") == 8  # point 3 fails on violation (3e-4 > 1e-4)
    assert S.hitting_time(r, 5e-4, "evals") == 5  # point 2 fails (1e-3 > 5e-4); point 3: 1e-5, 3e-4 <= 5e-4
    assert S.hitting_time(r, 1e-10, "evals") == INF  # the answer misses 1e-10
    np.testing.assert_array_equal(S.hitting_times(r, [1e-2, 1e-4, 1e-10], "evals"), [3, 8, INF])
    # the answer alone: no trace point meets 1e-4 but the answer does -> answer_evals
    r2 = rec(trace=[pt(0.1, 1, 1.0)], sub=1e-6, answer_t=0.7, answer_evals=12)
    assert S.hitting_time(r2, 1e-4, "evals") == 12 and S.hitting_time(r2, 1e-4, "t") == 0.7


@pytest.mark.parametrize("status", ["over budget", "killed", "error", "nan", "wrong-shape"])
def test_uncredited_record_earns_nothing_from_a_perfect_trace(status):
    r = rec(status=status, trace=[pt(0.1, 1, 0.0), pt(0.2, 2, 0.0)], sub=0.0)
    assert not r["credited"]
    assert S.hitting_time(r, 1e-4) == INF
    assert np.all(np.isinf(S.hitting_times(r, S.COCO_TARGETS)))


def test_answer_missing_the_target_earns_nothing_from_a_good_trace():
    r = rec(trace=[pt(0.1, 1, 1e-12)], sub=1e-2)  # visited 1e-12, returned 1e-2
    assert S.hitting_time(r, 1e-4) == INF and S.hitting_time(r, 1e-1) == 1
    r_budget = rec(status="budget", trace=[pt(0.1, 1, 1e-12)], sub=1e-2)
    assert S.hitting_time(r_budget, 1e-4) == INF


@given(seeds)
def test_hitting_times_match_brute_force(seed):
    tols = np.logspace(1, -10, 23)
    for r in random_records(seed):
        for measure in S.MEASURES:
            got = S.hitting_times(r, tols, measure)
            want = [bf_hit(r, t, measure) for t in tols]
            np.testing.assert_array_equal(got, want)
            assert np.all(got[1:] >= got[:-1])  # a harder target is never reached sooner


# ----------------------------------------------------------------------------------- performance profile
def test_performance_profile_hand_worked():
    # times: p0: A 1, B 2; p1: A 2, B 1; p2: A fails, B 4.
    # ratios A: 1, 2, inf; B: 2, 1, 1  ->  rho_A(1) = 1/3, rho_A(2) = 2/3 = rho_A(inf);
    # rho_B(1) = 2/3 (p1, p2), rho_B(2) = 1.
    recs = [timed("A", 0, 1.0), timed("B", 0, 2.0), timed("A", 1, 2.0), timed("B", 1, 1.0)]
    recs += [timed("A", 2, INF), timed("B", 2, 4.0)]
    p = S.performance_profile(recs, 1e-8, "t", taus=[1.0, 1.5, 2.0, INF])
    np.testing.assert_allclose(p.fraction["A"], [1 / 3, 1 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(p.fraction["B"], [2 / 3, 2 / 3, 1.0, 1.0])
    np.testing.assert_array_equal(p.values["A"], [1.0, 2.0, INF])
    assert p.solved == {"A": 2 / 3, "B": 1.0} and p.denominator == 3


def test_partial_solver_never_exceeds_its_share():
    # issue: C applies to 2 of 6 instances and is the fastest on both; with one denominator
    # rho_C(tau) <= 2/6 for every tau (the old code divided by 2 and drew C at 1.0).
    recs = []
    for k in range(6):
        recs.append(timed("A", k, 1.0 + k))
        if k < 2:
            recs.append(timed("C", k, 0.1))
        else:
            recs.append(rec("C", repeat=k, status="not applicable", credited=False))
    p = S.performance_profile(recs, 1e-8, "t")
    assert p.denominator == 6
    assert np.max(p.fraction["C"]) == pytest.approx(2 / 6) and p.fraction["C"][0] == pytest.approx(2 / 6)
    assert p.solved["C"] == pytest.approx(2 / 6) and p.not_applicable == {"A": 0, "C": 4}
    assert p.not_run == {"A": 0, "C": 0}
    # not run at all on 4 instances: the same share, counted as "not run"
    p2 = S.performance_profile([r for r in recs if r["status"] != "not applicable"], 1e-8, "t")
    assert np.max(p2.fraction["C"]) == pytest.approx(2 / 6) and p2.not_run["C"] == 4


def test_instance_no_solver_solves_stays_in_the_denominator():
    recs = [timed("A", 0, 1.0), timed("B", 0, 3.0), timed("A", 1, INF), timed("B", 1, INF)]
    p = S.performance_profile(recs, 1e-8, "t")
    assert p.denominator == 2 and p.solved == {"A": 0.5, "B": 0.5}
    assert p.fraction["A"][-1] == 0.5 and p.fraction["B"][-1] == 0.5


def test_ratio_floor_keeps_ratios_finite():
    recs = [timed("A", 0, 0.0), timed("B", 0, 1e-3)]  # answer at t = 0
    p = S.performance_profile(recs, 1e-8, "t")
    assert p.values["A"][0] == 1.0 and p.values["B"][0] == pytest.approx(1e-3 / 1e-9)


@given(seeds)
def test_performance_profile_matches_brute_force(seed):
    recs = random_records(seed)
    for measure in S.MEASURES:
        p = S.performance_profile(recs, 1e-4, measure)
        for tau in [*p.x[:6], 1.0, 3.0, p.x[-1]]:
            want = bf_perf(recs, 1e-4, measure, tau)
            for s, y in want.items():
                assert np.sum(p.values[s] <= tau) / p.denominator == pytest.approx(y)
        for s, y in p.fraction.items():
            assert np.all(np.diff(y) >= 0) and y.min() >= 0 and y.max() <= 1
            assert y[-1] == pytest.approx(p.solved[s])  # the tail is rho(inf)
            want_solved = bf_perf(recs, 1e-4, measure, INF)[s]
            assert p.solved[s] == pytest.approx(want_solved)
        # the default abscissae: 1, every finite ratio, 2 x the largest
        finite = np.concatenate([v[np.isfinite(v)] for v in p.values.values()])
        assert p.x[0] == 1.0 and set(finite) <= set(p.x) and p.x[-1] == 2 * max([1.0, *finite])


@given(seeds)
def test_winner_at_tau_one(seed):
    """rho_s(1) is the share of instances s is fastest on (ties count for each): the solver winning
    most instances (counted here by brute force) has the largest rho(1)."""
    recs = random_records(seed)
    p = S.performance_profile(recs, 1e-2, "evals", taus=[1.0])
    look, inst = bf_lookup(recs), bf_instances(recs)
    wins = dict.fromkeys(p.fraction, 0)
    for q in inst:
        t = {}
        for s in wins:
            r = look.get((s, *q))
            t[s] = INF if r is None or r["status"] == "not applicable" else max(bf_hit(r, 1e-2, "evals"), 1.0)
        best = min(t.values())
        for s in wins:
            wins[s] += best < INF and t[s] == best
    top = max(wins, key=lambda s: wins[s])
    assert p.fraction[top][0] == max(y[0] for y in p.fraction.values())
    for s in wins:
        assert p.fraction[s][0] * len(inst) == pytest.approx(wins[s])


# ----------------------------------------------------------------------------------- data profile
def test_data_profile_hand_worked():
    # f* = 1, f0 = 11, tau = 0.1: the test is f <= 1 + 0.1 (11 - 1) = 2.
    # A: trace f = 5 (2 evals), 1.5 (4 evals), answer f = 1.2 -> t = 4, n = 3 -> kappa = 4 / (3 + 1) = 1.
    # B: answer f = 2.5 -> never. Two instances; B not run on the second; A on it: answer f = 1.0 at 8
    # evals, trace f = 1.9 at 6 -> kappa = 6 / 4 = 1.5.
    a0 = rec("A", trace=[pt(0.1, 2, 4.0), pt(0.2, 4, 0.5)], sub=0.2, answer_evals=5, answer_t=0.3)
    b0 = rec("B", trace=[pt(0.1, 2, 0.1)], sub=1.5, answer_evals=3)
    a1 = rec("A", repeat=1, trace=[pt(0.1, 6, 0.9)], sub=0.0, answer_evals=8, answer_t=0.2)
    assert S.reduction_hitting_time(a0, 0.1) == 4 and S.reduction_hitting_time(b0, 0.1) == INF
    d = S.data_profile([a0, b0, a1], 0.1, kappas=[0.5, 1.0, 1.5, 10.0])
    np.testing.assert_allclose(d.fraction["A"], [0, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(d.fraction["B"], [0, 0, 0, 0])
    np.testing.assert_array_equal(d.values["A"], [1.0, 1.5])
    assert d.not_run == {"A": 0, "B": 1} and d.kind == "data"


@given(seeds)
def test_data_profile_matches_brute_force(seed):
    recs = random_records(seed)
    for tau in (1e-1, 1e-3):
        d = S.data_profile(recs, tau)
        look, inst = bf_lookup(recs), bf_instances(recs)
        for s, y in d.fraction.items():
            for j, kappa in enumerate(d.x):
                cnt = 0
                for q in inst:
                    r = look.get((s, *q))
                    if r is not None and r["status"] != "not applicable":
                        k_ps = bf_reduction(r, tau) / (r["n"] + 1)
                        cnt += k_ps < INF and k_ps <= kappa
                assert y[j] == pytest.approx(cnt / len(inst))
            assert np.all(np.diff(y) >= 0) and y[-1] == pytest.approx(d.solved[s])


# ----------------------------------------------------------------------------------- runtime ECDF
def test_runtime_ecdf_hand_worked():
    # targets 1e-1, 1e-3; n = 2. Run 0 of A: 1e-1 at 2 evals, 1e-3 at 6 -> per-dim 1, 3.
    # Run 1 of A: 1e-1 at 4 evals (answer 1e-2 misses 1e-3) -> 2. B only on instance 0: 1e-1 at 2 -> 1.
    # One denominator: 2 instances x 2 targets = 4 for both.
    a0 = rec("A", trace=[pt(0.1, 2, 0.05), pt(0.2, 6, 1e-4)], sub=1e-4, n=2)
    a1 = rec("A", repeat=1, trace=[pt(0.1, 4, 1e-2)], sub=1e-2, n=2)
    b0 = rec("B", trace=[pt(0.1, 2, 0.05)], sub=0.05, n=2)
    e = S.runtime_ecdf([a0, a1, b0], targets=[1e-1, 1e-3])
    assert e.denominator == 4 and e.per_dim
    np.testing.assert_array_equal(e.runtimes["A"], [1, 2, 3])
    np.testing.assert_allclose(e.fraction("A", [0.5, 1, 2, 3, INF]), [0, 0.25, 0.5, 0.75, 0.75])
    np.testing.assert_allclose(e.fraction("B", [1, INF]), [0.25, 0.25])
    assert e.not_run == {"A": 0, "B": 1}
    e_raw = S.runtime_ecdf([a0, a1, b0], targets=[1e-1, 1e-3], per_dim=False)
    np.testing.assert_array_equal(e_raw.runtimes["A"], [2, 4, 6])


@given(seeds)
def test_runtime_ecdf_matches_brute_force(seed):
    recs = random_records(seed)
    targets = np.logspace(0, -8, 9)
    e = S.runtime_ecdf(recs, targets)
    for x in (0.2, 0.5, 1.0, 2.0, 5.0, INF):
        want = bf_ecdf(recs, targets, x, per_dim=True)
        for s in want:
            assert e.fraction(s, x) == pytest.approx(want[s])
    assert len(S.runtime_ecdf(recs).targets) == 51


# ----------------------------------------------------------------------------------- ERT
def test_ert_hand_worked():
    # three repeats: successes at 10 and 20 evaluations, a failure that spent 100 -> (10 + 20 + 100) / 2 = 65.
    # seconds: successes at 1 s and 2 s, the failure's wall unknown (killed) -> the budget 5 s -> (1 + 2 + 5) / 2 = 4.
    r0 = rec(repeat=0, sub=0.0, answer_t=1.0, answer_evals=10, budget=5.0)
    r1 = rec(repeat=1, sub=0.0, answer_t=2.0, answer_evals=20, budget=5.0)
    r2 = rec(repeat=2, status="killed", evals=100, wall=NAN, budget=5.0)
    key = ("A", "p:paper", '{"T": 2}')
    e = S.ert([r0, r1, r2], 1e-8)[key]
    assert e == S.ERT(65.0, 3, 2, 130.0)
    assert S.ert([r0, r1, r2], 1e-8, "t")[key].ert == 4.0
    assert S.ert([r2], 1e-8)[key].ert == INF
    # all successful: the ERT is the mean runtime
    assert S.ert([r0, r1], 1e-8)[key].ert == 15.0
    # a killed run's count is unknown (its process was killed): it is charged its whole max_evals (10**6)
    r3 = {**r2, "evals": None}
    assert S.ert([r0, r1, r3], 1e-8)[key].ert == (10 + 20 + 10**6) / 2


@given(seeds)
def test_ert_matches_brute_force(seed):
    recs = random_records(seed)
    for measure in S.MEASURES:
        got = S.ert(recs, 1e-4, measure)
        want = bf_ert(recs, 1e-4, measure)
        assert set(got) == set(want)
        for k in want:
            assert got[k].ert == pytest.approx(want[k])


def bf_restart(cost, success, g):
    """One simulated restarted run, literally: draw runs with replacement until a success."""
    total = 0.0
    while True:
        i = g.integers(len(cost))
        total += cost[i]
        if success[i]:
            return total


def _group(costs, successes):
    return [
        rec(repeat=k, sub=0.0, answer_evals=int(c), answer_t=1.0) if ok else rec(repeat=k, status="error", evals=int(c))
        for k, (c, ok) in enumerate(zip(costs, successes, strict=True))
    ]


def test_simulated_restarts_match_a_literal_sampler():
    # 2 successes (5, 7 evaluations) and 3 failures (40, 60, 200): ERT = (5 + 7 + 300) / 2 = 156.
    costs, succ = [5, 7, 40, 60, 200], [True, True, False, False, False]
    recs = _group(costs, succ)
    key = ("A", "p:paper", '{"T": 2}')
    n = 20000
    ours = S.simulated_restarts(recs, 1e-8, n=n, rng=1)[key]
    g = np.random.default_rng(2)
    lit = np.sort([bf_restart(np.array(costs, float), np.array(succ), g) for _ in range(n)])
    sd = lit.std()
    # both means estimate the ERT; 5 standard errors
    assert abs(ours.mean() - 156.0) < 5 * sd / math.sqrt(n) and abs(lit.mean() - 156.0) < 5 * sd / math.sqrt(n)
    # same distribution: two-sample Kolmogorov-Smirnov distance well inside its 1e-4 critical value
    ks = sps.ks_2samp(ours, lit)
    assert ks.pvalue > 1e-4, ks
    assert np.all(np.diff(ours) >= 0)


@given(seeds)
def test_ert_bootstrap_interval_contains_the_ert_and_is_seeded(seed):
    recs = random_records(seed)
    a = S.ert_bootstrap(recs, 1e-4, n_boot=400, confidence=0.9, rng=seed)
    b = S.ert_bootstrap(recs, 1e-4, n_boot=400, confidence=0.9, rng=seed)
    e = S.ert(recs, 1e-4)
    assert a == b and set(a) == set(e)
    for k, iv in a.items():
        assert iv.ert == e[k].ert
        assert iv.low <= iv.ert <= iv.high, (k, iv)


def test_ert_bootstrap_all_success_is_the_bootstrap_of_the_mean():
    # every run succeeds: a replicate is the mean of n draws with replacement (the plain bootstrap)
    costs = [3, 4, 10, 11, 30]
    recs = _group(costs, [True] * 5)
    key = ("A", "p:paper", '{"T": 2}')
    iv = S.ert_bootstrap(recs, 1e-8, n_boot=20000, confidence=0.9, rng=3)[key]
    assert iv.ert == np.mean(costs)
    g = np.random.default_rng(4)
    reps = np.array(costs, float)[g.integers(0, 5, size=(20000, 5))].mean(axis=1)
    lo, hi = np.quantile(reps, [0.05, 0.95])
    assert iv.low == pytest.approx(lo, abs=0.5) and iv.high == pytest.approx(hi, abs=0.5)


def test_ert_bootstrap_replicates_average_to_the_ert():
    """Monte Carlo: the percentile interval comes from replicates whose mean is the ERT (unbiased)."""
    costs, succ = [5, 7, 40, 60, 200], [True, True, False, False, False]
    cost, success = np.array(costs, float), np.array(succ)
    reps = S._restart_sums(cost, success, 40000, 2, np.random.default_rng(5)) / 2
    assert abs(reps.mean() - 156.0) < 5 * reps.std() / math.sqrt(reps.size)


def test_ert_bootstrap_interval_coverage():
    """Monte Carlo calibration: 15 runs, each succeeding w.p. 1/2 with runtime 10 + Exp(mean 20)
    evaluations, else spending 100; the true ERT is 30 + (1/2)/(1/2) 100 = 130. Over 400 samples the
    90% interval covers 130 in 0.90 +- 0.05 of them (about 3 binomial standard deviations, plus the
    bootstrap's known small-sample shortfall; measured 0.895). For contrast, measured on the same
    samples: the 5-95% spread of single restarted runs (cocopp's braces) covers 1.00, and one restart
    divided by n_s 0.13: neither is a confidence interval of the ERT."""
    g = np.random.default_rng(21)
    key = ("A", "p:paper", '{"T": 2}')
    hits = trials = 0
    for i in range(400):
        succ = g.random(15) < 0.5
        if not succ.any():
            continue
        cost = np.where(succ, 10 + np.round(g.exponential(20, 15)), 100)
        iv = S.ert_bootstrap(_group(cost, succ), 1e-8, n_boot=300, confidence=0.9, rng=i)[key]
        trials, hits = trials + 1, hits + (iv.low <= 130 <= iv.high)
    assert abs(hits / trials - 0.90) < 0.05, hits / trials


def test_ert_bootstrap_without_success():
    key = ("A", "p:paper", '{"T": 2}')
    iv = S.ert_bootstrap([rec(status="error", evals=5)], 1e-8)[key]
    assert (iv.ert, iv.low, iv.high, iv.n_success) == (INF, INF, INF, 0)


# ----------------------------------------------------------------------------------- quantile band
def test_quantile_band_hand_worked():
    # three repeats, levels (best so far) on the grid evals = 1, 2, 3, 4:
    #   r0: 1e-1 at 1, 1e-3 at 3 (answer 1e-3 at 3)  -> 1e-1, 1e-1, 1e-3, 1e-3
    #   r1: 1e-2 at 2, answer 1e-2 at 2              -> inf, 1e-2, 1e-2, 1e-2
    #   r2: error                                    -> inf everywhere (credit) / its trace (no credit)
    # median (linear, 3 runs: the middle one): 1: inf; 2: 1e-1; 3: 1e-2; 4: 1e-2
    # q = 0.25 (position 0.5): 1: inf (between inf and inf); 2: (1e-2 + 1e-1) / 2; 3: (1e-3 + 1e-2) / 2
    r0 = rec(repeat=0, trace=[pt(0.1, 1, 1e-1), pt(0.2, 3, 1e-3)], sub=1e-3)
    r1 = rec(repeat=1, trace=[pt(0.1, 2, 1e-2)], sub=1e-2)
    r2 = rec(repeat=2, status="error", trace=[pt(0.1, 1, 1e-9)])
    b = S.quantile_band([r0, r1, r2], "evals", grid=[1, 2, 3, 4], qs=(0.25, 0.5))
    np.testing.assert_allclose(b.quantiles[1], [INF, 1e-1, 1e-2, 1e-2])
    np.testing.assert_allclose(b.quantiles[0], [INF, 0.055, 0.0055, 0.0055])
    assert b.n_runs == 3 and b.n_credited == 2
    raw = S.quantile_band([r0, r1, r2], "evals", grid=[1, 2, 3, 4], qs=(0.5,), credit=False)
    np.testing.assert_allclose(raw.levels[2], [1e-9] * 4)  # the oracle did see 1e-9
    np.testing.assert_allclose(raw.quantiles[0], [1e-1, 1e-2, 1e-3, 1e-3])


@given(seeds)
def test_level_curve_agrees_with_hitting_times(seed):
    """level(x) <= tol exactly when x >= RT(tol): the band and the ECDF tell the same story."""
    for r in random_records(seed):
        if r["status"] == "not applicable":
            continue
        for measure in S.MEASURES:
            steps = [p[measure] for p in r["trace"]] + ([r[S._ANSWER[measure]]] if r["credited"] else [])
            grid = np.unique(np.array([0.0, *steps, 1e9], float))
            lev = S.level_curve(r, grid, measure)
            for tol in (1e-1, 1e-4, 1e-9):
                rt = bf_hit(r, tol, measure)
                np.testing.assert_array_equal(lev <= tol, grid >= rt)


@given(seeds)
def test_band_quantiles_match_numpy_where_finite(seed):
    recs = [r for r in random_records(seed) if r["status"] != "not applicable"]
    if not recs:
        return
    first = recs[0]
    key = (first["solver"], first["problem"], first["size"])
    group = [r for r in recs if (r["solver"], r["problem"], r["size"]) == key]
    qs = (0.1, 0.25, 0.5, 0.75, 0.9)
    for credit in (True, False):
        b = S.quantile_band(group, "t", qs=qs, credit=credit)
        for j in range(b.grid.size):
            col = b.levels[:, j]
            want = np.quantile(np.where(np.isinf(col), 1e305, col), qs)  # inf as a huge number:
            got = b.quantiles[:, j]  # any interpolation towards it (weight >= 0.1 here) exceeds 1e300
            fin = want < 1e300
            np.testing.assert_allclose(got[fin], want[fin], rtol=1e-12, atol=0)
            assert np.all(np.isinf(got[~fin]))
            assert np.all(got[1:] >= got[:-1])


# ----------------------------------------------------------------------------------- exponent
def test_fit_exponent_exact_power_law_and_median_over_repeats():
    n = np.array([10, 10, 10, 20, 20, 20, 40, 40, 40, 80, 80, 80], float)
    t = 0.5 * n**1.5
    t[1::3] *= 1000.0  # one slow repeat per size: the median ignores it
    e = S.fit_exponent(n, t)
    assert e.slope == pytest.approx(1.5, abs=1e-12) and e.low <= 1.5 <= e.high and e.high - e.low < 1e-9
    assert math.exp(e.intercept) == pytest.approx(0.5) and e.reason == ""
    np.testing.assert_array_equal(e.sizes, [10, 20, 40, 80])


def test_fit_exponent_refuses_two_sizes_and_drops_failed_sizes():
    e = S.fit_exponent([10, 20, 10, 20], [1.0, 2.0, 1.1, 2.1])
    assert math.isnan(e.slope) and "at least three distinct sizes" in e.reason and "got 2" in e.reason
    e2 = S.fit_exponent([10, 20, 40], [1.0, 2.0, INF])  # failed at the largest size
    assert math.isnan(e2.slope) and "40.0" in e2.reason


def test_fit_exponent_matches_scipy_linregress():
    g = np.random.default_rng(0)
    n = np.array([8, 16, 32, 64, 128], float)
    t = 3 * n**2.2 * np.exp(g.normal(0, 0.3, n.size))
    e = S.fit_exponent(n, t, confidence=0.9)
    lr = sps.linregress(np.log(n), np.log(t))
    half = sps.t.ppf(0.95, n.size - 2) * lr.stderr
    assert e.slope == pytest.approx(lr.slope, rel=1e-12)
    assert (e.low, e.high) == pytest.approx((lr.slope - half, lr.slope + half), rel=1e-10)


def test_fit_exponent_interval_coverage():
    """Monte Carlo over 2000 synthetic power laws (3 sizes, one repeat, log-normal noise): the 95%
    interval covers the true slope in 95% +- 1.5% of them (3 binomial standard deviations). A normal
    quantile in place of Student's t (1 degree of freedom) would cover about 60%."""
    g = np.random.default_rng(11)
    n = np.array([10.0, 30.0, 90.0])
    hits = 0
    for _ in range(2000):
        e = S.fit_exponent(n, 2 * n**1.3 * np.exp(g.normal(0, 0.2, 3)))
        hits += e.low <= 1.3 <= e.high
    assert abs(hits / 2000 - 0.95) < 0.015


def test_scaling_exponents_per_family_and_solver():
    recs = []
    for size in (4, 8, 16):
        for rep in range(3):
            t = 1e-3 * size**2.0 * (1 + 0.01 * rep)
            recs.append(rec("A", size=f'{{"T": {size}}}', repeat=rep, n=size, sub=0.0, answer_t=t))
            recs.append(rec("B", size=f'{{"T": {size}}}', repeat=rep, n=size, status="error"))
    ex = S.scaling_exponents(recs, 1e-8)
    assert ex[("fam", "A")].slope == pytest.approx(2.0, abs=1e-9)
    assert math.isnan(ex[("fam", "B")].slope) and ex[("fam", "B")].reason


# ----------------------------------------------------------------------------------- tables
def test_summary_table_hand_worked():
    # A: solved on 0 (t 1, 10 evals) and 1 (t 3, 30 evals), error on 2; B: not applicable on 0,
    # over budget on 1 (perfect trace: no credit), not run on 2.
    recs = [timed("A", 0, 1.0), timed("A", 1, 3.0), timed("A", 2, INF)]
    recs += [rec("B", repeat=0, status="not applicable", credited=False)]
    recs += [rec("B", repeat=1, status="over budget", trace=[pt(0.1, 1, 0.0)], sub=0.0)]
    rows = {r["solver"]: r for r in S.summary_table(recs, 1e-8)}
    a, b = rows["A"], rows["B"]
    assert (a["instances"], a["runs"], a["credited"], a["solved"], a["error"], a["ok"]) == (3, 3, 2, 2, 1, 2)
    assert a["median t"] == 2.0 and a["median evals"] == 20.0 and a["solved fraction"] == pytest.approx(2 / 3)
    assert (b["instances"], b["runs"], b["not applicable"], b["not run"], b["over budget"], b["solved"]) == (
        3, 1, 1, 1, 1, 0,
    )  # fmt: skip
    assert math.isnan(b["median t"])
    # fastest per family, one denominator: A's median over (1, 3, inf) = 3; B's = inf
    assert S.fastest(recs, 1e-8) == {"fam": ("A", 3.0)}


# ----------------------------------------------------------------------------------- bad input
GOOD = [timed("A", 0, 1.0)]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: S.performance_profile([], 1e-4), "records is empty"),
        (lambda: S.performance_profile(GOOD, 0.0), "tol must be a finite number > 0, got 0.0"),
        (lambda: S.performance_profile(GOOD, 1e-4, measure="wall"), "measure must be one of"),
        (lambda: S.performance_profile(GOOD, 1e-4, taus=[-1.0]), "taus must be"),
        (lambda: S.performance_profile(GOOD + GOOD, 1e-4), r"records\[1\] repeats the run of records\[0\]"),
        (lambda: S.performance_profile([{"solver": "A"}], 1e-4), "missing key"),
        (lambda: S.performance_profile([dict(GOOD[0], status="crashed")], 1e-4), "status must be one of"),
        (lambda: S.performance_profile([dict(GOOD[0], status="error")], 1e-4), "credited with status 'error'"),
        (lambda: S.hitting_times(GOOD[0], [1e-4, float("nan")]), "tols must be"),
        (lambda: S.data_profile([dict(GOOD[0], n=0)], 0.1), "n .* must be an integer >= 1"),
        (lambda: S.runtime_ecdf(GOOD, measure="t", per_dim=True), "per_dim=True divides evaluations"),
        (lambda: S.ert_bootstrap(GOOD, 1e-4, confidence=1.0), r"confidence must be a number in \(0, 1\)"),
        (lambda: S.ert_bootstrap(GOOD, 1e-4, n_boot=0), "n_boot must be an integer >= 1"),
        (lambda: S.quantile_band([*GOOD, timed("B", 0, 1.0)]), "one \\(solver, problem, size\\)"),
        (lambda: S.quantile_band(GOOD, qs=(0.5, 2.0)), r"qs must be quantile levels in \[0, 1\]"),
        (lambda: S.fit_exponent([1, 2, 3], [1.0, 2.0]), "t must be numbers"),
        (lambda: S.fit_exponent([0, 2, 3], [1.0, 2.0, 3.0]), "n must be"),
        (lambda: S.performance_profile(GOOD[0], 1e-4), "records must be a list of records"),
    ],
)
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=10)
@given(seeds)
def test_results_are_finite_where_they_should_be(seed):
    """No NaN in any fraction, ratio, runtime or ERT (inf only where the definition says so)."""
    recs = random_records(seed)
    p = S.performance_profile(recs, 1e-4)
    assert not any(np.isnan(v).any() for v in [*p.fraction.values(), *p.values.values()])
    e = S.runtime_ecdf(recs)
    assert all(np.isfinite(v).all() for v in e.runtimes.values())
    assert not any(math.isnan(v.ert) for v in S.ert(recs, 1e-4).values())
