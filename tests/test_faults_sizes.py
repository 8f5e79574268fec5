"""Fault injection, sizes bounded before work (issue #38 item 7; README: "a ValueError ... before any work").

Every public function and every command is called with a huge size (``tests/_huge_sizes.py``: a model with
``V1 = 10**9 + 1`` tokens, an embedding dimension of ``10**9``, a 2,000,000-word topic-word matrix, a ``.npy``
header announcing ``10**12`` entries, ...). Each must refuse with its estimate and the limit, or answer at once from
a closed form. The calls run in a child process under ``THEORYCHECK_MAX_BYTES=1G`` and an address-space limit
(``RLIMIT_AS``), so that a path that skipped the guard ends in a ``MemoryError`` (reported as such) instead of
taking the machine's memory, and under a CPU-time alarm, so that one that runs on unbounded is reported too.
The completeness test holds the table to the public API: a new public function is added to it, or exempted here
with the reason its size is bounded.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import _huge_sizes
import pytest

from theorycheck import _memory
from theorycheck.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: Public modules whose callables the table must cover.
MODULES = [
    "theorycheck",
    "theorycheck.population",
    "theorycheck.solvers",
    "theorycheck.sampling",
    "theorycheck.nn",
    "theorycheck.analysis",
    "theorycheck.models",
    "theorycheck.problems",
    "theorycheck.diagnostics",
]

_INPUTS = "bounded by its inputs: the dense arrays over the tokens are the caller's (their shape is checked)"
_TYPE = "a result, option or exception type: allocates nothing by size"
_CONFIG = "a configuration or registry object: O(1), validated; what it sizes is guarded where it is built"

#: Public callables not in the table, and why their size is bounded anyway.
EXEMPT = {
    **dict.fromkeys(
        [
            "population.value_loss", "population.value_loss_grad", "population.attention_loss",
            "population.attention_loss_grad", "population.attention_loss_estimate", "population.embedding_loss",
            "population.embedding_loss_grad", "solvers.embedding_minimiser_violation", "solvers.identifiable_part",
            "sampling.mask_documents", "sampling.mc_attention_loss", "sampling.doc_losses",
            "analysis.matrix_topic_stats", "analysis.topic_gap", "analysis.attention_preference",
            "analysis.diagram_boundaries", "models.token_topic", "nn.save_checkpoint", "nn.stage_curves",
            "nn.run_stages", "nn.config_diff", "nn.config_hash", "nn.load_metrics", "diagnostics.check_gradient",
            "models.GeneralTopicModel", "nn.SGD", "nn.Adam",
        ],
        _INPUTS,
    ),
    **dict.fromkeys(
        [
            "TheorycheckWarning", "population.AttentionLossGrad", "population.SetSampledLoss",
            "population.LossEstimate", "population.FamilyLoss", "population.EmbeddingLossGrad",
            "population.PopulationContexts", "solvers.SolveResult", "solvers.AttentionOptions", "solvers.GramOptions",
            "solvers.ValueOptions", "solvers.BlockGram", "solvers.BlockValueMatrix", "solvers.LowRankMatrix",
            "solvers.MinimiserViolation", "sampling.Documents", "sampling.MaskedBatch", "sampling.MCEstimate",
            "nn.CountBatch", "nn.PositionBatch", "nn.TrainResult", "nn.TrainingInterrupted", "nn.TrainingDiverged",
            "nn.ProbeContext", "nn.Checkpoint", "analysis.PhaseDiagram", "analysis.TopicStructure",
            "problems.Certificate", "problems.Budget", "problems.BudgetExhausted", "diagnostics.GradientCheck",
            "problems.Oracle", "problems.ProblemInfo", "nn.Groups",
        ],
        _TYPE,
    ),
    **dict.fromkeys(
        [
            "TopicModel", "Masking", "GeneralTopicModel", "models.TopicModel", "models.Masking",
            "models.check_models", "models.require_symmetric", "nn.ModelConfig", "nn.DataConfig", "nn.OptimConfig",
            "nn.TrainConfig", "nn.make_optimizer", "nn.preset", "problems.Problem", "problems.list",
            "problems.list_problems", "problems.match", "problems.solver_names", "problems.load_solver",
            "sampling.check_sample_size",
        ],
        _CONFIG,
    ),
    "population.family_attention_loss": "a general model (its phi is guarded at construction); memory and time of "
    "its tables are estimated before any work (make_evaluator: check_structured, check_work)",
    "nn.make_batch": "one of count_batch / merged_batch / position_batch (each in the table)",
    "nn.train": "a Trainer (in the table) run",
    "nn.References": "built by a Trainer (in the table) after its memory check: W_V is V1 x V1, as the model's own "
    "matrices; K_star and gram are the paper's model's closed forms (O(1) storage)",
    "nn.run_preset": "the presets' own sizes; --steps and --seeds capped (test_cli_flags_bounded)",
    "nn.stage_grid": "MAX_CELLS cells of the two-stage preset, MAX_GRID_STEPS steps each (checked before work)",
    "nn.load_checkpoint": "builds the Transformer of a TrainConfig (in the table) and reads the user's file",
}  # fmt: skip


def _public() -> set[str]:
    names = set()
    for module in MODULES:
        mod = importlib.import_module(module)
        prefix = "" if module == "theorycheck" else module.split(".")[-1] + "."
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                names.add(prefix + name)
    return names


def test_the_table_covers_every_public_function():
    tabled = {name.split("-")[0] for name in _huge_sizes.ENTRIES if not name.startswith("cli:")}
    tabled |= {"models.GeneralTopicModel.overlapping"}
    missing = sorted(_public() - tabled - set(EXEMPT))
    assert not missing, f"public functions with no huge-size entry and no reason given: {missing}"
    stale = sorted(set(EXEMPT) - _public())
    assert not stale, f"exemptions for names that are not public: {stale}"


# ----------------------------------------------------------------------------- the walk (a child process)
#: The child's address-space limit: a path that skips the guard fails with MemoryError instead of allocating.
RLIMIT_BYTES = 12 * 2**30


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    out = tmp_path_factory.mktemp("huge") / "outcomes.json"
    env = dict(os.environ, THEORYCHECK_MAX_BYTES="1G", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    env.pop(_memory.MAX_SECONDS_ENV, None)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (RLIMIT_BYTES, RLIMIT_BYTES))

    res = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "_huge_sizes.py"), str(out)],
        env=env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert out.exists(), f"the child wrote nothing: exit {res.returncode}\n{res.stderr[-3000:]}"
    return json.loads(out.read_text())


#: What a refusal names: the estimate against a limit, or a documented cap on the size.
_REFUSAL = re.compile(
    r"needs .* above the memory limit|above the time limit|must lie in|exceeds|refused before any work|"
    r"too small|must equal|must have shape"
)


@pytest.mark.parametrize("name", list(_huge_sizes.ENTRIES))
def test_a_huge_size_is_refused_before_any_work(name, outcomes):
    expect, _call = _huge_sizes.ENTRIES[name]
    outcome, message, cpu = outcomes[name]
    if expect == "fast":
        assert outcome == "returned", (outcome, message)
        return
    assert outcome == "refused", (outcome, message)  # not MemoryError, not "timeout" (unbounded), not a return
    assert _REFUSAL.search(message), message
    assert "Traceback" not in message and "\n" not in message


# ----------------------------------------------------------------------------- the limits themselves
@pytest.mark.parametrize("value", ["1e30", "1E", "inf", "-5", "0", "lots"])
def test_max_bytes_is_validated(value, monkeypatch, capsys):
    """A limit above the machine's memory would switch the guard off: refused like a malformed one."""
    monkeypatch.setenv(_memory.MAX_BYTES_ENV, value)
    assert main(["solve", "value", "--T", "3", "--v", "2", "--tau", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and _memory.MAX_BYTES_ENV in err[0], err


def test_max_bytes_within_the_machine_is_accepted(monkeypatch):
    monkeypatch.setenv(_memory.MAX_BYTES_ENV, "512M")
    assert _memory.default_max_bytes() == 512 * 2**20


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf"])
def test_max_seconds_is_validated(value, monkeypatch, capsys):
    monkeypatch.setenv(_memory.MAX_SECONDS_ENV, value)
    assert main(["spec"]) == 2
    assert _memory.MAX_SECONDS_ENV in capsys.readouterr().err


def test_check_work_compares_the_estimate_with_the_limit(monkeypatch):
    """The estimate is operations / OPS_PER_SECOND; refused strictly above the limit, with both in the message."""
    monkeypatch.setenv(_memory.MAX_SECONDS_ENV, "3600")
    ops = 3600 * _memory.OPS_PER_SECOND
    assert _memory.check_work("x", ops) == 3600.0
    with pytest.raises(ValueError, match=r"x: about 3.6e\+12 operations, an estimated 1 hour .* above the time "
                                         r"limit 1 hour \(\$THEORYCHECK_MAX_SECONDS\)\. Use y instead"):  # fmt: skip
        _memory.check_work("x", ops * 1.0001, alternative="y")


def test_the_default_limit_honours_ulimit_v(tmp_path):
    """``train --model paper --T 300 --v 30`` under ``ulimit -v 6000000`` (KiB): refused with the estimate and the
    limit derived from the address-space headroom (no $THEORYCHECK_MAX_BYTES), not a MemoryError after work."""
    env = {k: v for k, v in os.environ.items() if k != _memory.MAX_BYTES_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024, 6_000_000 * 1024))

    argv = ["train", "--preset", "official-demo", "--model", "paper", "--T", "300", "--v", "30"]
    res = subprocess.run(
        [sys.executable, str(ROOT / "_theorycheck_cli.py"), *argv, "--out", str(tmp_path / "r"), "--quiet"],
        env=env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    assert "Trainer: model(V1=9001" in line and "needs 6.0 GiB, above the memory limit" in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("route", ["value closed form", "attention co-topic grid", "family loss"])
def test_the_time_guard_is_wired_before_any_work(route, monkeypatch):
    """With ``THEORYCHECK_MAX_SECONDS`` tiny, each long route refuses with its estimate (the same calls run in
    well under a second without the variable: the guard, not the work, decides)."""
    import theorycheck as tc
    from theorycheck.population import family_attention_loss
    from theorycheck.solvers import stage1_value_matrix

    g, mk = tc.GeneralTopicModel.zipf(4, 3, 1.0, tau=2), tc.Masking()
    W = stage1_value_matrix(g, mk)  # before the limit is set
    calls = {
        "value closed form": lambda: tc.solvers.optimal_value_matrix(g, mk),
        "attention co-topic grid": lambda: tc.solvers.optimal_attention(g, mk, options={"family": "co-topic"}),
        "family loss": lambda: family_attention_loss(0.5, 0.2, W, g, mk, family="label"),
    }
    # the co-topic grid (~1e5 operations here) runs after the stage-1 W^V (~3e3): a limit between the two
    monkeypatch.setenv(_memory.MAX_SECONDS_ENV, "2e-5" if route == "attention co-topic grid" else "1e-9")
    names = {"value closed form": "optimal_value_matrix", "attention co-topic grid": "optimal_attention",
             "family loss": "family_attention_loss"}  # fmt: skip
    with pytest.raises(ValueError, match=rf"({names[route]}).* operations, an estimated .* above the time limit"):
        calls[route]()
    monkeypatch.delenv(_memory.MAX_SECONDS_ENV)
    calls[route]()
