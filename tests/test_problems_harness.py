"""The benchmark harness: failures recorded, budgets, resume, output-folder rules, CLI (issue #23)."""

import importlib.metadata
import json
import textwrap
import time

import numpy as np
import pytest

from theorycheck import problems
from theorycheck._mpl import mpl
from theorycheck.cli import main
from theorycheck.cli.benchmark import _levels
from theorycheck.problems import _solvers, load_solver
from theorycheck.problems._harness import Cell, run_cell
from theorycheck.problems._report import size_text
from theorycheck.problems._run import DEFAULT, default_levels, plan, run_benchmark

AB = "attention-ab/block:paper"
USER = textwrap.dedent(
    """
    import time
    import numpy as np

    def boom(problem, budget, callback):
        raise RuntimeError("solver exploded")

    def nan(problem, budget, callback):
        return np.full(problem.shape, np.nan)

    def badshape(problem, budget, callback):
        return np.zeros(3)

    def forever(problem, budget, callback):
        x = problem.x0
        while True:
            problem.f(x)
            callback(x)

    def sleepy(problem, budget, callback):
        time.sleep(1.4)
        return problem.x0

    def hang(problem, budget, callback):
        time.sleep(10**6)

    def ignores_budget(problem, budget, callback):
        x = problem.x0
        t = time.perf_counter()
        while time.perf_counter() - t < 4 * budget.max_seconds + 2.0:
            try:
                problem.f(x)  # refused once the budget is spent: the solver swallows that and goes on
            except Exception:
                pass
        return x

    def dies(problem, budget, callback):
        import os
        os._exit(3)

    def good(problem, budget, callback):
        x = problem.x0
        for _ in range(200):
            x = x - 0.5 * problem.grad(x)
            callback(x)
        return x
    """
)


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "mysolvers.py"
    path.write_text(USER)
    return str(path)


def test_failures_are_recorded_and_the_run_goes_on(user_file, tmp_path):
    solvers = [f"{user_file}:{f}" for f in ("boom", "nan", "badshape", "good")] + ["L-BFGS-B"]
    records, summary = run_benchmark(tmp_path / "out", problems=[AB], solvers=solvers, levels=[0], budget=1.0,
                                     progress=False)  # fmt: skip
    status = {r["solver"].rsplit(":", 1)[-1]: r for r in records}
    assert status["boom"]["status"] == "error" and "solver exploded" in status["boom"]["message"]
    assert status["nan"]["status"] == "nan"
    assert status["badshape"]["status"] == "wrong-shape" and "(3,)" in status["badshape"]["message"]
    assert status["good"]["status"] == "ok" and status["good"]["ngev"] == 200
    assert status["L-BFGS-B"]["status"] == "ok" and status["L-BFGS-B"]["subopt_rel"] <= 1e-8
    assert status["L-BFGS-B"]["time_to_1e-08"] is not None
    assert len(records) == 5


def test_budget_exhaustion_and_late_answers(user_file):
    forever = run_cell(Cell(AB, {"T": 3, "v": 4, "tau": 2}, f"{user_file}:forever", 0), 0.3, 50)
    # the oracle allows exactly max_evals evaluations and refuses the next one: stopped by the budget
    assert forever["status"] == "budget" and forever["nfev"] == 50 and np.isfinite(forever["f"])
    t = time.perf_counter()
    sleepy = run_cell(Cell(AB, {"T": 3, "v": 4, "tau": 2}, f"{user_file}:sleepy", 0), 0.2, 10)
    # answered after 1.4 s on a 0.2 s budget: recorded, never credited
    assert time.perf_counter() - t >= 1.4 and sleepy["status"] == "over budget" and not sleepy["credited"]
    assert np.isfinite(sleepy["f"]) and sleepy["time_to_0.0001"] is None and sleepy["answer_t"] is None


def test_a_hanging_or_overrunning_solver_is_killed_and_the_run_goes_on(user_file, tmp_path):
    """Enforced, not only flagged: each run is a process killed at 1.5 budget + 1 s, with what it started."""
    from theorycheck.problems._execute import hard_limit
    from theorycheck.problems._zygote import CAN_FORK, live_workers

    if not CAN_FORK:
        pytest.skip("no os.fork: late answers are only flagged when the solver returns")
    names = ("hang", "good", "ignores_budget", "dies")
    solvers = [f"{user_file}:{f}" for f in names] + ["L-BFGS-B"]
    budget = 0.2
    records, summary = run_benchmark(tmp_path / "out", problems=[AB], solvers=solvers, levels=[0], budget=budget,
                                     progress=False)  # fmt: skip
    status = {r["solver"].rsplit(":", 1)[-1]: r for r in records}
    assert len(records) == 5 and summary["run_now"] == 5
    for name in ("hang", "ignores_budget"):
        r = status[name]
        assert r["status"] == "killed", r
        assert r["message"].startswith("no answer after") and r["message"].endswith("killed"), r["message"]
        assert r["wall"] >= hard_limit(budget) and r["f"] is None and r["trace"] == [] and not r["credited"]
    assert status["dies"]["status"] == "error" and "exit code 3" in status["dies"]["message"]
    for name in ("good", "L-BFGS-B"):  # the runs after a killed one: answered
        assert status[name]["status"] in ("ok", "budget") and status[name]["f"] is not None, status[name]
    assert live_workers() == 0  # every process of the benchmark is gone at the end
    html = (tmp_path / "out" / "report.html").read_text()
    assert "killed" in html and "exit code 3" in html


def test_resume_skips_finished_cells(tmp_path):
    out = tmp_path / "out"
    kw = dict(problems=[AB], solvers=["L-BFGS-B", "Nelder-Mead"], levels=[0], repeats=2, budget=1.0, progress=False)
    records, s1 = run_benchmark(out, **kw)
    assert s1["run_now"] == 4 and s1["resumed"] == 0
    cells = sorted((out / "cells").glob("*.json"))
    assert len(cells) == 4
    first = {p.name: p.read_text() for p in cells}
    cells[0].unlink()  # a killed run: one cell missing
    _, s2 = run_benchmark(out, **kw)
    assert s2["run_now"] == 1 and s2["resumed"] == 3
    for p in cells[1:]:
        assert p.read_text() == first[p.name]  # finished cells are kept as they were
    _, s3 = run_benchmark(out, **{**kw, "repeats": 3})
    assert s3["run_now"] == 2 and s3["resumed"] == 4


def test_foreign_files_refused_and_never_deleted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    kw = dict(problems=[AB], solvers=["Nelder-Mead"], levels=[0], budget=1.0, progress=False)
    with pytest.raises(ValueError, match="--force"):
        run_benchmark(out, **kw)
    run_benchmark(out, force=True, **kw)
    assert (out / "notes.txt").read_text() == "mine"
    marker = json.loads((out / ".theorycheck.json").read_text())
    assert "notes.txt" not in marker["files"] and "results.csv" in marker["files"]


def test_unknown_solver_and_bad_file(tmp_path):
    with pytest.raises(ValueError, match="closest: 'L-BFGS-B'"):
        load_solver("L-BFGS")
    bad = tmp_path / "broken.py"
    bad.write_text("import not_a_module_xyz\n")
    with pytest.raises(ValueError, match=r"broken\.py.*ModuleNotFoundError"):
        load_solver(f"{bad}:solve")


def test_cli_benchmark_end_to_end(user_file, tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["benchmark", "--problems", "attention-ab/*", "--solvers", "Nelder-Mead,L-BFGS-B", "--sizes", "0",
            "--budget", "1", "--quiet", "--out", str(out), "--solver", f"{user_file}:boom"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "failed" in text and "fastest to 1e-8" in text
    for f in ("results.csv", "results.json", "report.html", "figures/profiles.png", "figures/ecdf.png"):
        assert (out / f).is_file(), f
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4 and "solver exploded" in html
    assert main(["benchmark", "--problems", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "closest" in capsys.readouterr().err


def test_parallel_jobs_give_the_same_records(user_file, tmp_path):
    # budget 10 s: Nelder-Mead converges in ~0.02 s, so that a loaded machine cannot stop one of the two runs early
    kw = dict(problems=[AB], solvers=["Nelder-Mead", f"{user_file}:boom"], levels=[0], budget=10.0, progress=False)
    serial, _ = run_benchmark(tmp_path / "a", **kw)
    parallel, _ = run_benchmark(tmp_path / "b", jobs=2, **kw)
    key = lambda r: (r["solver"], r["status"], r["f"] if r["status"] == "ok" else None)  # noqa: E731
    assert sorted(map(key, serial), key=str) == sorted(map(key, parallel), key=str)


def test_entry_point_solvers(monkeypatch):
    class EP:
        name = "my-ep-solver"

        def load(self):
            def solve(problem, budget, callback):
                return problem.x0

            return solve

    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: [EP()] if group == "theorycheck.solvers" else []
    )
    assert "my-ep-solver" in _solvers.solver_names()
    fn = load_solver("my-ep-solver")
    assert fn.applies(None) == (True, "")
    rec = run_cell(Cell(AB, {"T": 3, "v": 4, "tau": 2}, "my-ep-solver", 0), 1.0, 10)
    assert rec["status"] == "ok" and rec["nfev"] == 0


def test_nothing_applies_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="2-d problems only"):
        run_benchmark(tmp_path / "o", problems=["stage1-value/lsq:paper"], solvers=["Nelder-Mead"], progress=False)
    assert not (tmp_path / "o").exists()


def test_default_set_levels_and_budget():
    # the CLI's default set: levels 0-2 of the dense families, every level of the O(1) block form, 1 s
    assert _levels("") == "default" and _levels("all") is None and _levels("0,2") == [0, 2]
    assert DEFAULT == {"levels": [0, 1, 2], "budget": 1.0}
    assert default_levels("stage1-value/lsq") == [0, 1, 2] and default_levels("stage1-value/block") == [0, 1, 2, 3, 4]
    cells, _ = plan(["stage1-value/lsq:paper", "stage1-value/block:paper"], ["closed-form"], "default", 1)
    assert sorted(c.size["T"] for c in cells if c.problem.startswith("stage1-value/lsq")) == [3, 4, 6]
    assert max(c.size["T"] * c.size["v"] + 1 for c in cells) == 100_001


def test_generator_solvers_report_every_iterate():
    # a solver written as a generator: each yield is an iterate the harness records; the answer is the
    # last iterate (or the return value); an endless generator is stopped at the budget
    calls = []

    def gd_gen(problem, budget, callback):
        x = problem.x0
        for _ in range(40):
            x = x - 0.5 * problem.grad(x)
            yield x

    def endless(problem, budget, callback):
        x = problem.x0
        while True:
            calls.append(1)
            yield x

    def returns(problem, budget, callback):
        yield problem.x0
        return problem.x0 + 1.0

    for fn in (gd_gen, endless, returns):
        fn.applies = lambda p: (True, "")
    _solvers.SOLVERS.update({"gd-gen": gd_gen, "endless": endless, "returns": returns})
    try:
        cell = Cell("stage1-value/block:paper", {"T": 3, "v": 4, "tau": 2}, "gd-gen", 0)
        rec = run_cell(cell, 5.0, 10**6)
        p = problems.get("stage1-value/block:paper", T=3, v=4, tau=2)
        x = p.x0
        for _ in range(40):
            x = x - 0.5 * p.grad(x)
        assert rec["status"] == "ok" and rec["ngev"] == 40 and len(rec["trace"]) >= 40
        assert rec["f"] == p.f(x)  # the answer is the last iterate, evaluated once more
        t0 = time.perf_counter()
        rec = run_cell(Cell(cell.problem, cell.size, "endless", 0), 0.3, 10**6)
        # stopped by the harness at the budget: one status for "stopped by the budget", whoever noticed it
        assert rec["status"] == "budget" and 0.3 <= time.perf_counter() - t0 and len(calls) > 1
        rec = run_cell(Cell(cell.problem, cell.size, "returns", 0), 1.0, 10**6)
        assert rec["f"] == p.f(p.x0 + 1.0)
    finally:
        for k in ("gd-gen", "endless", "returns"):
            _solvers.SOLVERS.pop(k)


def test_scaling_uses_V1_where_the_number_of_variables_is_fixed():
    """The structured stage-1 form has n = 3 at every rung: its scaling figure is drawn against V1, and the
    exponent fitted to the medians over repeats recovers a known power."""
    from theorycheck.problems import _figures

    recs = []
    for V1 in (13, 101, 1001, 100_001):
        for rep in range(2):
            t = 1e-3 * V1**0.5 * (1 + 0.01 * rep)
            recs.append({"problem": "stage1-value/block:paper", "family": "stage1-value/block", "size": f"{V1}",
                         "n": 3, "V1": V1, "solver": "s", "repeat": rep, "status": "ok", "credited": True,
                         "subopt_rel": 0.0, "violation": 0.0, "answer_t": t, "answer_evals": 5,
                         "trace": []})  # fmt: skip
    plt = mpl("matplotlib.pyplot")
    before = {k: plt.rcParams[k] for k in _figures._RC}
    fig, fits = _figures.scaling(recs, "stage1-value/block", {"s": "s"}, _figures.styles(["s"]))
    # the figure has the report's style, and the caller's matplotlib settings are untouched (a global update once
    # changed every later figure of the process: a verify report drawn after a benchmark differed by jobs)
    assert fig.axes[0].xaxis.get_label().get_fontsize() == _figures._RC["font.size"]
    assert {k: plt.rcParams[k] for k in _figures._RC} == before != _figures._RC
    assert "V1" in fig.axes[0].get_xlabel() and fits["s"].low <= 0.5 <= fits["s"].high
    assert abs(fits["s"].slope - 0.5) < 1e-3
    mpl("matplotlib.pyplot").close(fig)


def test_size_text_reads_every_stored_form_of_a_size():
    """Figure titles name the size as ``T = 3, v = 4``: from the dict, its JSON (records) or its Python
    text (problem descriptions); other text is kept."""
    d = {"T": 3, "tau": 2, "v": 4, "p": 0.25}
    want = "T = 3, tau = 2, v = 4, p = 0.25"
    assert size_text(d) == want
    assert size_text(json.dumps(d)) == want
    assert size_text(str(d)) == want
    assert size_text("ladder 2") == "ladder 2"
    assert "{" not in size_text(json.dumps({"V1": 101})) and size_text(json.dumps({"V1": 101})) == "V1 = 101"


# ----------------------------------------------------------------------------- record fields, unit by unit
def test_thinning_keeps_the_first_point_and_every_multiple_of_the_stride():
    """Ticked at every evaluation (as if each were kept), the meter keeps exactly ``{1}`` and the multiples of its
    final stride: brute force from the rule, so the start's value (evaluation 1) survives every thinning."""
    from theorycheck.problems._oracle import Meter

    m = Meter(max_seconds=1e9, max_evals=10**9, n=3)
    n_ticks = 9 * m.keep + 5
    for k in range(1, n_ticks + 1):
        m.tick(k, "f", float(k), np.zeros(3))
    kept = [p[0] for p in m.points]
    assert m.stride > 1
    assert kept == [1] + [k for k in range(m.stride, n_ticks + 1, m.stride)], (m.stride, kept[:5])
    assert len(kept) < 2 * m.keep + 1


def test_cell_key_changes_with_every_setting_of_the_run():
    """A resumed benchmark must not reuse a record made under another time budget, evaluation budget, repeat or code."""
    from theorycheck.problems._harness import cell_key

    cell = Cell("stage1-value/block", {"T": 3, "v": 2, "tau": 1}, "gd", 0)
    base = cell_key(cell, 1.0, 1000, "s", "p")
    variants = [
        cell_key(cell, 2.0, 1000, "s", "p"),
        cell_key(cell, 1.0, 999, "s", "p"),
        cell_key(Cell("stage1-value/block", {"T": 3, "v": 2, "tau": 1}, "gd", 1), 1.0, 1000, "s", "p"),
        cell_key(cell, 1.0, 1000, "s2", "p"),
        cell_key(cell, 1.0, 1000, "s", "p2"),
    ]
    assert len({base, *variants}) == 6


def _head(f_star=0.5):
    return {"problem": "stage1-value/block", "size": "{}", "solver": "gd", "repeat": 0, "f_star": f_star,
            "f_star_lower": f_star - 1e-12, "cert_kind": "certified", "cert_gap": 1e-12}  # fmt: skip


def _outcome(f, *, nfev=3, ngev=4, nhev=2):
    return {"status": "ok", "message": "", "wall": 0.25, "nfev": nfev, "ngev": ngev, "nhev": nhev,
            "evals": nfev + ngev + nhev, "callbacks": 0, "output": "", "f0": 2.0, "trace": [],
            "answer": np.zeros(2), "answer_source": "return", "f": f, "violation": 0.0}  # fmt: skip


def test_the_answer_is_credited_at_all_evaluations_and_suboptimality_is_relative_to_f_star():
    """``answer_evals`` counts f, gradient and Hessian-vector evaluations (3 + 4 + 2 here), and the relative
    suboptimality is ``(f - f*) / |f*|``: with f* = 0.5 and f = 1 it is 1 (relative to f it would read 0.5)."""
    from theorycheck.problems._harness import finish_record

    rec = finish_record(_head(0.5), _outcome(1.0))
    assert rec["answer_evals"] == 9
    assert rec["subopt_rel"] == pytest.approx(1.0, rel=1e-15)
    assert rec["subopt_abs"] == pytest.approx(0.5, rel=1e-15)
    hit = finish_record(_head(0.5), _outcome(0.5 + 0.5e-8))  # within 1e-8 relative of f*: credited at 9 evaluations
    assert hit["evals_to_1e-08"] == 9 and hit["time_to_1e-08"] == pytest.approx(0.25)
