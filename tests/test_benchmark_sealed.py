"""Adversarial solvers against ``theorycheck benchmark`` (issue #35): none gets credit it did not earn, and the
benchmark always finishes with its report.

Each adversary is a user solver file run through the real harness (sealed run processes, :mod:`._zygote`).
What each may *legitimately* do is stated next to it; what it must not get is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from theorycheck.problems._run import run_benchmark
from theorycheck.problems._zygote import CAN_FORK, descendants, live_workers

pytestmark = pytest.mark.skipif(not CAN_FORK, reason="sealed run processes need os.fork")

AB = "attention-ab/block:paper"
ROOT = Path(__file__).resolve().parents[1]

ADVERSARIES = textwrap.dedent(
    '''
    import gc, os, sys, time
    import numpy as np
    import scipy.optimize

    ANSWER_NAMES = ("minimiser", "certificate", "reference", "f_star", "_p", "problem", "_problem", "_opt",
                    "tm", "mk", "_ensure", "suboptimality", "distance")


    def _objects_from(root, dunders):
        """Everything reachable from ``root`` by attribute access (names from dir(); dunders only if asked,
        never a module's globals), breadth first, depth <= 5."""
        from types import ModuleType
        leaves = (np.ndarray, np.generic, int, float, complex, str, bytes, bool, type(None), type)
        seen, out, frontier = set(), [], [root]
        for _ in range(5):
            nxt = []
            for obj in frontier:
                if isinstance(obj, leaves) or len(seen) > 20000:
                    continue
                for name in dir(obj):
                    if name.startswith("__") and not dunders:
                        continue
                    if name in ("__globals__", "__builtins__", "__subclasses__", "__class__", "__base__",
                                "__bases__", "__mro__", "__objclass__", "__module__", "__init_subclass__"):
                        continue
                    try:
                        v = getattr(obj, name)
                    except Exception:
                        continue
                    if isinstance(v, ModuleType) or id(v) in seen:
                        continue
                    seen.add(id(v))
                    out.append(v)
                    nxt.append(v)
                    if isinstance(v, tuple) and name == "__closure__":
                        for cell in v:
                            try:
                                c = cell.cell_contents
                            except ValueError:
                                continue
                            if id(c) not in seen:
                                seen.add(id(c))
                                out.append(c)
                                nxt.append(c)
            frontier = nxt
        return out


    def reader(oracle, budget, callback):
        """Tries every name an answer could hide under, walks every attribute it can reach, and scans the
        whole process (gc) for anything that knows the optimum; prints what it found; returns its start."""
        from theorycheck.problems._problem import Certificate, Problem
        got = [n for n in ANSWER_NAMES if hasattr(oracle, n)]
        plain = _objects_from(oracle, dunders=False)
        deep = _objects_from(oracle, dunders=True)
        every = gc.get_objects()
        known = [o for o in every if isinstance(o, Certificate)]
        solved = [o for o in every if isinstance(o, Problem) and getattr(o, "_opt", None) is not None]
        try:
            oracle.f_star = 0.0
            settable = True
        except AttributeError:
            settable = False
        print("REPORT " + repr({
            "answer_attrs": got,
            "plain_problems": sum(isinstance(o, Problem) for o in plain),
            "deep_certificates": sum(isinstance(o, Certificate) for o in deep),
            "gc_certificates": len(known),
            "gc_solved_problems": len(solved),
            "settable": settable,
        }), flush=True)
        return oracle.x0


    def unevaluated(oracle, budget, callback):
        """Computes the optimum (legitimately, with the library, inside its clock), reports it only to the
        callback, and returns its start."""
        from theorycheck import problems
        xs = problems.get(oracle.name, **oracle.size).reference()
        callback(xs)
        return oracle.x0


    def junk_after_good(oracle, budget, callback):
        """Converges (every point evaluated by the oracle), then returns a junk point."""
        res = scipy.optimize.minimize(oracle.f, oracle.x0, jac=oracle.grad, method="L-BFGS-B",
                                      options={"ftol": 1e-16, "gtol": 1e-13})
        callback(res.x)
        return res.x + 50.0


    def late(oracle, budget, callback):
        """Converges quickly, then sleeps past budget + grace before answering."""
        res = scipy.optimize.minimize(oracle.f, oracle.x0, jac=oracle.grad, method="L-BFGS-B",
                                      options={"ftol": 1e-16, "gtol": 1e-13})
        time.sleep(1.1 * budget.max_seconds + 0.6)  # past budget + grace, before the hard limit
        return res.x


    def nan_then_exhaust(oracle, budget, callback):
        """Reports a NaN iterate, then spends its whole budget; its answer (the last iterate) is NaN."""
        callback(np.full(oracle.shape, np.nan))
        while True:
            oracle.f(oracle.x0)


    def bad_shape_then_exhaust(oracle, budget, callback):
        callback(np.zeros(7))
        while True:
            oracle.grad(oracle.x0)


    def evaluates_nan(oracle, budget, callback):
        """Asks the oracle for f at NaN (the problem refuses or returns NaN), then answers its start."""
        try:
            oracle.f(np.full(oracle.shape, np.nan))
        except Exception:
            pass
        return oracle.x0


    def exits(oracle, budget, callback):
        sys.exit(3)


    def honest(oracle, budget, callback):
        res = scipy.optimize.minimize(oracle.f, oracle.x0, jac=oracle.grad, method="L-BFGS-B",
                                      options={"ftol": 1e-16, "gtol": 1e-13})
        return res.x
    '''
)

FORKER = textwrap.dedent(
    """
    import os, time

    PIDFILE = {pidfile!r}


    def forker(oracle, budget, callback):
        # a child that starts its own session and leaves a grandchild behind, writing to stdout forever
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                with open(PIDFILE, "w") as fh:
                    fh.write(str(os.getpid()))
                while True:
                    print("still here", flush=True)
                    time.sleep(0.05)
            os._exit(0)
        os.waitpid(pid, 0)
        while not os.path.exists(PIDFILE):
            time.sleep(0.01)
        return oracle.x0


    def hang(oracle, budget, callback):
        time.sleep(10**6)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def adversaries(tmp_path_factory):
    path = tmp_path_factory.mktemp("adv") / "adversaries.py"
    path.write_text(ADVERSARIES)
    return str(path)


@pytest.fixture(scope="module")
def bench(adversaries, tmp_path_factory):
    names = ["unevaluated", "junk_after_good", "late", "nan_then_exhaust", "bad_shape_then_exhaust",
             "evaluates_nan", "exits", "honest"]  # fmt: skip
    out = tmp_path_factory.mktemp("bench") / "out"
    records, summary = run_benchmark(out, problems=[AB], solvers=[f"{adversaries}:{n}" for n in names], levels=[0],
                                     budget=2.0, max_evals=5000, progress=False)  # fmt: skip
    return {r["solver_name"]: r for r in records}, summary, out


def test_the_benchmark_finishes_with_its_report(bench):
    recs, summary, out = bench
    assert len(recs) == 8 and summary["run_now"] == 8
    for f in ("report.html", "results.json", "results.csv"):
        assert (out / f).is_file()
    assert live_workers() == 0


def test_a_solver_can_reach_no_answer(adversaries, tmp_path):
    """No attribute of the oracle names an answer; nothing reachable from it by attribute access is a problem;
    even following closures and scanning the whole process, no certificate and no solved problem exists
    where the solver runs (although this test process computed them); the oracle cannot be written to."""
    from theorycheck import problems

    assert problems.get(AB, level=0).certificate.kind == "certified"  # known here, in the coordinator
    (rec,) = run_benchmark(tmp_path / "o", problems=[AB], solvers=[f"{adversaries}:reader"], levels=[0], budget=60,
                           progress=False)[0]  # fmt: skip
    assert rec["status"] == "ok", rec["message"]
    line = next(ln for ln in rec["output"].splitlines() if ln.startswith("REPORT "))
    report = eval(line[len("REPORT ") :])  # our own test solver's repr of a dict
    assert report == {"answer_attrs": [], "plain_problems": 0, "deep_certificates": 0, "gc_certificates": 0,
                      "gc_solved_problems": 0, "settable": False}, report  # fmt: skip


def test_callback_points_earn_nothing(bench):
    """The callback saw the exact optimum; the answer is the start: no credit at any target."""
    rec = bench[0]["unevaluated"]
    assert rec["status"] == "ok" and rec["subopt_rel"] > 1e-3
    assert rec["time_to_0.0001"] is None and rec["time_to_1e-08"] is None and rec["evals_to_1e-08"] is None
    assert all(row["subopt_rel"] > 1e-3 for row in rec["trace"])  # the only evaluated points are its own


def test_junk_after_good_iterates_earns_nothing(bench):
    rec = bench[0]["junk_after_good"]
    assert min(row["subopt_rel"] for row in rec["trace"]) <= 1e-8  # it did evaluate good points...
    assert rec["status"] == "ok" and rec["subopt_rel"] > 1e-3  # ...but answered junk
    assert rec["time_to_1e-08"] is None and rec["time_to_0.0001"] is None


def test_a_late_answer_is_over_budget_and_uncredited(bench):
    rec = bench[0]["late"]
    assert rec["status"] == "over budget" and not rec["credited"] and rec["wall"] > 2.0 * 1.1 + 0.05
    assert rec["subopt_rel"] <= 1e-8  # a good answer, but late: recorded, never credited
    assert rec["time_to_1e-08"] is None and rec["evals_to_1e-08"] is None


def test_bad_iterates_are_records(bench):
    recs = bench[0]
    assert recs["nan_then_exhaust"]["status"] == "nan" and recs["nan_then_exhaust"]["evals"] == 5000
    assert recs["bad_shape_then_exhaust"]["status"] == "wrong-shape"
    assert recs["evaluates_nan"]["status"] == "ok" and recs["evaluates_nan"]["time_to_1e-08"] is None
    assert recs["exits"]["status"] == "error" and "SystemExit" in recs["exits"]["message"]
    for name in ("nan_then_exhaust", "bad_shape_then_exhaust", "exits"):
        assert not recs[name]["credited"]


def test_an_honest_solver_is_credited_at_an_evaluated_point(bench):
    rec = bench[0]["honest"]
    t = rec["time_to_1e-08"]
    assert rec["status"] == "ok" and rec["credited"] and t is not None
    first = next(row for row in rec["trace"] if row["subopt_rel"] <= 1e-8)
    assert t == min(first["t"], rec["answer_t"]) and rec["evals_to_1e-08"] <= rec["evals"]


def test_resume_of_bad_cells_and_of_unchanged_code(bench, adversaries):
    """The same benchmark again: every cell (bad ones included) is served from its record, nothing crashes."""
    recs, _, out = bench
    names = sorted(r["solver"] for r in recs.values())
    again, summary = run_benchmark(out, problems=[AB], solvers=names, levels=[0], budget=2.0, max_evals=5000,
                                   progress=False)  # fmt: skip
    assert summary["resumed"] == 8 and summary["run_now"] == 0 and len(summary["resumed_cells"]) == 8


def test_a_changed_solver_is_rerun_and_rerun_forces(tmp_path):
    f = tmp_path / "s.py"
    f.write_text("def s(oracle, budget, callback):\n    return oracle.x0\n")
    kw = dict(problems=[AB], solvers=[f"{f}:s", "Nelder-Mead"], levels=[0], budget=0.5, progress=False)
    _, s1 = run_benchmark(tmp_path / "o", **kw)
    assert s1["run_now"] == 2
    f.write_text("def s(oracle, budget, callback):\n    return oracle.x0 + 1.0\n")  # the solver is fixed
    recs, s2 = run_benchmark(tmp_path / "o", **kw)
    assert s2["run_now"] == 1 and s2["resumed"] == 1  # its cell reruns; Nelder-Mead's is kept
    assert {r["solver_name"]: r for r in recs}["s"]["f0"] != {r["solver_name"]: r for r in recs}["s"]["f"]
    _, s3 = run_benchmark(tmp_path / "o", rerun=["Nelder*"], **kw)
    assert s3["run_now"] == 1 and s3["resumed_cells"][0]["solver"].endswith(":s")


def test_a_solver_raising_on_import_is_a_record(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("def s(oracle, budget, callback):\n    return oracle.x0\n\nraise RuntimeError('import boom')\n")
    recs, _ = run_benchmark(tmp_path / "o", problems=[AB], solvers=[f"{f}:s", "Nelder-Mead"], levels=[0],
                            budget=0.5, progress=False)  # fmt: skip
    by = {r["solver_name"]: r for r in recs}
    assert by["s"]["status"] == "error" and "import boom" in by["s"]["message"]
    assert by["Nelder-Mead"]["status"] == "ok" and (tmp_path / "o" / "report.html").is_file()


def test_grid_refine_stops_at_the_budget_with_its_own_answer(tmp_path):
    recs, _ = run_benchmark(tmp_path / "o", problems=[AB], solvers=["grid-refine"], levels=[0], budget=0.05,
                            progress=False)  # fmt: skip
    (rec,) = recs
    assert rec["status"] == "budget" and rec["answer_source"] in ("returned", "reported")
    assert rec["f"] < rec["f0"]  # the best grid point so far, not the start substituted


def test_a_forking_solver_leaves_nothing_behind_and_never_holds_the_pipe(tmp_path):
    """A grandchild in its own session writing to stdout forever: the benchmark's output pipe closes when the
    benchmark ends (``theorycheck benchmark ... | cat`` does not wait), and the grandchild is dead."""
    pidfile = tmp_path / "grandchild.pid"
    f = tmp_path / "forker.py"
    f.write_text(FORKER.format(pidfile=str(pidfile)))
    cmd = [sys.executable, "-m", "theorycheck.cli", "benchmark", "--problems", AB, "--sizes", "0", "--solvers",
           "Nelder-Mead", "--solver", f"{f}:forker", "--budget", "1", "--quiet",
           "--out", str(tmp_path / "o")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, capture_output=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"still here" not in proc.stdout
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    runs = json.loads((tmp_path / "o" / "results.json").read_text())["runs"]
    forker = next(r for r in runs if r["solver_name"] == "forker")
    assert forker["status"] == "ok" and "still here" in forker["output"]  # its output went to its record


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_benchmark_kills_every_run_process(tmp_path, sig):
    pidfile = tmp_path / "grandchild.pid"
    f = tmp_path / "forker.py"
    f.write_text(FORKER.format(pidfile=str(pidfile)) + "\n\ndef forker_hang(o, b, c):\n    forker(o, b, c)\n"
                 "    time.sleep(10**6)\n")  # fmt: skip
    cmd = [sys.executable, "-m", "theorycheck.cli", "benchmark", "--problems", AB, "--sizes", "0", "--solvers",
           f"{f}:forker_hang", "--budget", "60", "--quiet", "--out", str(tmp_path / "o")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert pidfile.exists(), proc.communicate()[1].decode()[-2000:]
        tree = descendants(proc.pid)
        assert tree  # the zygote and the run process
        grandchild = int(pidfile.read_text())
        t0 = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert time.monotonic() - t0 < 15
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in [*tree, grandchild]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in [*tree, grandchild] if _alive(p)]
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if pidfile.exists() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_oracle_contract_in_process():
    """The oracle's surface, as documented: exactly these public names, a copy for x0, counts at the source."""
    from theorycheck import problems
    from theorycheck.problems._oracle import Meter, make_oracle

    p = problems.get(AB, T=3, v=4, tau=2)
    m = Meter(10.0, 3, p.n)
    o = make_oracle(p, m, p.start(0))
    public = {n for n in dir(o) if not n.startswith("_")}
    assert public == {"f", "grad", "hvp", "start", "project", "violation", "shape", "n", "constraint", "name",
                      "family", "model", "V1", "has_hvp", "size", "x0", "evaluations"}  # fmt: skip
    x = o.x0
    x[0] = 99.0
    assert o.x0[0] == 0.0  # a copy each time
    o.f(o.x0), o.grad(o.x0), o.f(o.x0)
    assert o.evaluations == {"f": 2, "grad": 1, "hvp": 0, "total": 3}
    with pytest.raises(problems.BudgetExhausted, match="3 evaluations"):
        o.f(o.x0)  # the fourth evaluation of a 3-evaluation budget is refused
    with pytest.raises(AttributeError):
        o.shape = (3,)
    assert [k for k, *_ in m.points] == [1, 2, 3] and np.array_equal(m.points[0][4], p.start(0))


def test_certificates_print_nothing_in_library_use(capfd):
    """A problem's certificate (here one that runs the attention grid search) shows no progress bar of the
    library solvers it calls: in library use, and in a benchmark, the benchmark's own bar is the only one."""
    from theorycheck.models import Masking
    from theorycheck.problems._registry import FAMILIES, MODELS

    cls, _ = FAMILIES["attention-ab/cotopic"]
    p = cls("zipf", {"T": 3, "v": 4, "tau": 2}, MODELS["zipf"](3, 4, 2), Masking())
    capfd.readouterr()
    assert p.certificate.upper > 0
    err = capfd.readouterr().err
    assert "attention grid" not in err and err == ""
