"""Every public entry point called with a huge size (issue #38 item 7): the table, and a runner for a child process.

Each entry is ``name -> (expect, call)``: ``call()`` makes one public call whose *arguments are small* but whose
size arguments (a model's ``T`` and ``v``, an embedding dimension ``d``, a vocabulary ``V1``, a document count or
length) ask for something huge. ``expect`` is

- ``"refuse"``: a ``ValueError`` naming the memory limit (or a documented cap) before any allocation;
- ``"fast"``: an O(1) (or O(T)) structured route that returns at once whatever the size.

``python tests/_huge_sizes.py OUT.json [NAME ...]`` runs the entries in this process, each under a CPU-time alarm
(:data:`SECONDS`), and writes ``{name: [outcome, message, cpu seconds]}``; outcome is ``"refused"`` (a
``ValueError``/``TypeError``), ``"returned"``, ``"timeout"`` or the exception's type (``MemoryError``...). The test
(``tests/test_faults_sizes.py``) runs it in a child with ``THEORYCHECK_MAX_BYTES`` at 1 GiB and an address-space
limit (``RLIMIT_AS``), so that a path that skips the guard fails fast with a ``MemoryError`` instead of taking the
machine's memory.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

#: CPU seconds an entry may take before it counts as "runs on unbounded".
SECONDS = 60

#: A model whose dense vectors over tokens are 8 GB (V1 = 10**9 + 1) and whose dense matrices are 8 EB.
HUGE = {"T": 10**5, "v": 10**4, "tau": 3}


def _tc():
    import theorycheck as tc

    return tc


def _huge():
    tc = _tc()
    return tc.TopicModel(**HUGE), tc.Masking()


def _small():
    tc = _tc()
    return tc.TopicModel(T=4, v=3, tau=2), tc.Masking()


def _pop(name, *args, **kw):
    def call():
        tm, mk = _huge()
        fn = getattr(_tc().population, name)
        return fn(*[tm if a == "tm" else mk if a == "mk" else a for a in args], **kw)

    return call


def _solver(name, *args, small=False, **kw):
    def call():
        tm, mk = _small() if small else _huge()
        fn = getattr(_tc().solvers, name)
        return fn(*[tm if a == "tm" else mk if a == "mk" else a for a in args], **kw)

    return call


def _wide():
    """A general model with 2,000,000 words (phi 32 MB): its V1 x V1 matrices are 32 TB."""
    tc = _tc()
    return tc.GeneralTopicModel.unequal([10**6, 10**6], tau=1), tc.Masking()


def _general(kind):
    def call():
        tc = _tc()
        if kind == "overlapping":
            return tc.GeneralTopicModel.overlapping(HUGE["T"], HUGE["v"], 0.1, tau=3)
        if kind == "zipf":
            return tc.GeneralTopicModel.zipf(HUGE["T"], HUGE["v"], 1.0, tau=3)
        if kind == "unequal":
            return tc.GeneralTopicModel.unequal([10**9] * 3, tau=1)
        if kind == "from_topic_model":
            return tc.GeneralTopicModel.from_topic_model(_huge()[0])
        return tc.GeneralTopicModel(np.ones((1, 10**10)), tau=1)  # not reached: numpy refuses the input first

    return call


def _nn(kind):
    def call():
        from theorycheck import nn

        tm, mk = _huge()
        if kind == "transformer":
            return nn.Transformer(nn.ModelConfig(V1=10**9))
        if kind == "transformer-d":
            return nn.Transformer(nn.ModelConfig(V1=101, d=10**9))
        if kind == "population_batch":
            return nn.population_batch(tm, mk)
        if kind == "stage1_reference":
            return nn.stage1_reference(tm, mk)
        if kind == "count_batch":
            inputs = np.ones((2, 3), dtype=np.int64)
            return nn.count_batch(inputs, inputs > 0, inputs, 10**10)
        if kind == "position_batch":
            inputs = np.ones((2, 3), dtype=np.int64)
            return nn.position_batch(inputs, inputs > 0, inputs, 10**10)
        if kind == "merged_batch":
            inputs = np.ones((2, 3), dtype=np.int64)
            return nn.merged_batch(inputs, inputs > 0, inputs, 10**10)
        if kind == "datastream":
            cfg = nn.preset("official-demo")
            data = nn.DataConfig(T=HUGE["T"], v=HUGE["v"], tau=3)
            model = nn.ModelConfig.from_dict({**cfg.model.to_dict(), "V1": 10**9 + 1, "d": None, "d_a": None})
            return nn.DataStream(cfg.replace(data=data, model=model))
        if kind == "trainer":
            cfg = nn.preset("official-demo")
            data = nn.DataConfig(T=3000, v=300, tau=3)
            model = nn.ModelConfig.from_dict({**cfg.model.to_dict(), "V1": 900_001, "d": None, "d_a": None})
            return nn.Trainer(cfg.replace(data=data, model=model), progress=False)
        raise AssertionError(kind)

    return call


def _sampling(kind):
    def call():
        from theorycheck import sampling

        tm, mk = _huge()
        if kind == "sample_documents":
            return sampling.sample_documents(tm, 10**9, 100, seed=0)
        if kind == "sample_documents-N":
            return sampling.sample_documents(tm, 2, 10**11, seed=0)
        if kind == "token_counts":
            return sampling.token_counts(np.ones((4, 3), dtype=np.int64), 10**10)
        if kind == "exact_finite_loss":
            return sampling.exact_finite_loss(np.zeros((3, 3)), np.zeros((3, 3)), tm, mk, 10**6)
        raise AssertionError(kind)

    return call


def _analysis(kind):
    def call():
        from theorycheck import analysis

        if kind == "phase_diagram":
            return analysis.phase_diagram("overlap", [0.1, 0.2], T=HUGE["T"], v=HUGE["v"], taus=[3])
        if kind == "find_boundary":
            return analysis.find_boundary("zipf", "value_gap", 0.5, 1.5, T=HUGE["T"], v=HUGE["v"], tau=3)
        raise AssertionError(kind)

    return call


def _problem():
    from theorycheck import problems

    return problems.get("stage1-value/lsq:paper", **HUGE)


ENTRIES = {
    # population (SPEC §1-§4): densities and moments over V1 = 10**9 + 1 tokens
    "population.masked_density": ("refuse", _pop("masked_density", "tm", "mk", [0, 1, 2])),
    "population.topic_density": ("refuse", _pop("topic_density", "tm", [0, 1, 2])),
    "population.topic_sets": ("refuse", _pop("topic_sets", "tm")),
    "population.expected_pp": ("refuse", _pop("expected_pp", "tm")),
    "population.moments": ("refuse", _pop("moments", "tm", "mk")),
    "population.population_contexts": ("refuse", _pop("population_contexts", "tm", "mk")),
    "population.alpha_beta_score_matrix": ("refuse", _pop("alpha_beta_score_matrix", 0.0, 0.0, "tm")),
    "population.alpha_beta_value_matrix": ("refuse", _pop("alpha_beta_value_matrix", "tm", "mk")),
    "population.alpha_beta_loss": ("fast", _pop("alpha_beta_loss", 1.0, 0.5, "tm", "mk")),
    "population.alpha_beta_loss_logK": ("fast", _pop("alpha_beta_loss_logK", 1.0, "tm", "mk")),
    "population.alpha_beta_symmetric_loss": ("refuse", _pop("alpha_beta_symmetric_loss", 1.0, 0.5, "tm", "mk")),
    "population.alpha_beta_ce_loss": ("refuse", _pop("alpha_beta_ce_loss", 1.0, 0.5, "tm", "mk")),
    "population.symmetric_attention_loss": (
        "refuse",
        _pop("symmetric_attention_loss", lambda x: np.zeros(1), lambda h: h, "tm", "mk"),
    ),
    "population.stage1_block_constants": ("fast", _pop("stage1_block_constants", "tm", "mk")),
    # solvers (SPEC §4): closed forms are O(1); dense methods and dense outputs are refused
    "solvers.optimal_value_matrix": ("fast", _solver("optimal_value_matrix", "tm", "mk")),
    "solvers.optimal_value_matrix-lstsq": ("refuse", _solver("optimal_value_matrix", "tm", "mk", method="lstsq")),
    "solvers.optimal_embedding_gram": ("fast", _solver("optimal_embedding_gram", "tm", "mk")),
    "solvers.optimal_embedding_gram-factorized": (
        "refuse",
        _solver("optimal_embedding_gram", "tm", "mk", small=True, method="factorized", d=10**9),
    ),
    "solvers.optimal_embedding_gram-cvxpy": ("refuse", _solver("optimal_embedding_gram", "tm", "mk", method="cvxpy")),
    "solvers.optimal_attention": ("fast", _solver("optimal_attention", "tm", "mk")),
    "solvers.closed_form_gram": ("fast", _solver("closed_form_gram", "tm", "mk")),
    "solvers.min_embedding_dim": ("fast", _solver("min_embedding_dim", "tm", "mk")),
    "solvers.value_block_constants": ("fast", _solver("value_block_constants", "tm", "mk")),
    "solvers.cotopic_matrix": ("refuse", lambda: _tc().solvers.cotopic_matrix(_wide()[0])),
    "solvers.stage1_value_matrix": ("refuse", lambda: _tc().solvers.stage1_value_matrix(*_wide())),
    "solvers.embedding_from_gram": (
        "refuse",
        lambda: _tc().solvers.embedding_from_gram(_tc().solvers.closed_form_gram(*_huge()), 10),
    ),
    "solvers.embedding_from_gram-d": (
        "refuse",
        lambda: _tc().solvers.embedding_from_gram(_tc().solvers.closed_form_gram(*_small()), 10**9),
    ),
    "solvers.minimiser_violation": (
        "refuse",
        lambda: _tc().solvers.minimiser_violation(_tc().solvers.optimal_value_matrix(*_huge()).x, *_huge()),
    ),
    # models (SPEC §11): a general model stores phi dense
    "models.GeneralTopicModel.overlapping": ("refuse", _general("overlapping")),
    "models.GeneralTopicModel.zipf": ("refuse", _general("zipf")),
    "models.GeneralTopicModel.unequal": ("refuse", _general("unequal")),
    "models.GeneralTopicModel.from_topic_model": ("refuse", _general("from_topic_model")),
    # sampling (SPEC §2): documents and counts
    "sampling.sample_documents": ("refuse", _sampling("sample_documents")),
    "sampling.sample_documents-N": ("refuse", _sampling("sample_documents-N")),
    "sampling.token_counts": ("refuse", _sampling("token_counts")),
    "sampling.exact_finite_loss": ("refuse", _sampling("exact_finite_loss")),
    # nn (SPEC §5): the model's parameters, batches over V1, the trainer's data model
    "nn.Transformer": ("refuse", _nn("transformer")),
    "nn.Transformer-d": ("refuse", _nn("transformer-d")),
    "nn.population_batch": ("refuse", _nn("population_batch")),
    "nn.stage1_reference": ("refuse", _nn("stage1_reference")),
    "nn.count_batch": ("refuse", _nn("count_batch")),
    "nn.position_batch": ("refuse", _nn("position_batch")),
    "nn.merged_batch": ("refuse", _nn("merged_batch")),
    "nn.Trainer": ("refuse", _nn("trainer")),
    "nn.DataStream": ("fast", _nn("datastream")),  # lazy: its batches are built (and checked) per step
    # analysis (SPEC §4.4): diagrams on the closed forms
    "analysis.phase_diagram": ("refuse", _analysis("phase_diagram")),
    "analysis.find_boundary": ("refuse", _analysis("find_boundary")),
    # problems: a problem's size
    "problems.get": ("refuse", _problem),
}


def _cli(*argv):
    """A command line: its exit code 2 and one line on stderr are a refusal (``ValueError`` of that line)."""

    def call():
        import contextlib
        import io
        import tempfile

        from theorycheck.cli import main

        with tempfile.TemporaryDirectory() as tmp:
            args = [a.replace("{tmp}", tmp) for a in argv]
            if "{phi}" in " ".join(argv):
                phi = np.zeros((2, 2_000_000))
                phi[0, :1_000_000] = phi[1, 1_000_000:] = 1e-6
                np.save(f"{tmp}/phi.npy", phi)
                args = [a.replace("{phi}", f"{tmp}/phi.npy") for a in args]
            if "{header}" in " ".join(argv):
                with open(f"{tmp}/header.npy", "wb") as fh:  # a header claiming 10**12 entries, no data
                    fmt = {"descr": "<f8", "fortran_order": False, "shape": (2, 5 * 10**11)}
                    np.lib.format.write_array_header_1_0(fh, fmt)
                args = [a.replace("{header}", f"{tmp}/header.npy") for a in args]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(args)
        lines = err.getvalue().strip().splitlines()
        if code == 2 and len(lines) == 1 and "Traceback" not in lines[0]:
            raise ValueError(lines[0])
        if code in (0, 1) and "Traceback" not in err.getvalue():  # a result (1: not certified)
            return code
        raise AssertionError(f"exit {code}, stderr {err.getvalue()[-500:]!r}")

    return call


_HUGE_FLAGS = ["--T", str(HUGE["T"]), "--v", str(HUGE["v"]), "--tau", "3"]

CLI_ENTRIES = {
    "cli: solve value --T 100000 --v 10000 --method lstsq": _cli("solve", "value", *_HUGE_FLAGS, "--method", "lstsq"),
    "cli: solve value --T 100000 --v 10000 --npz": _cli("solve", "value", *_HUGE_FLAGS, "--npz", "{tmp}/x"),
    "cli: solve embedding --d 1000000000": _cli("solve", "embedding", "--method", "factorized", "--d", "1000000000"),
    "cli: solve embedding --T 100000 --v 10000 --npz": _cli(
        "solve", "embedding", *_HUGE_FLAGS, "--method", "factorized", "--d", "10"
    ),
    "cli: solve attention --T 100000 --v 10000": _cli("solve", "attention", *_HUGE_FLAGS, "--json", "{tmp}/a.json"),
    "cli: solve value --topic-word (2, 2e6) --method lstsq": _cli(
        "solve", "value", "--topic-word", "{phi}", "--tau", "1", "--method", "lstsq"
    ),
    "cli: solve value --topic-word header of 1e12": _cli("solve", "value", "--topic-word", "{header}", "--tau", "1"),
    "cli: solve value --model unequal:sizes=1e9,1e9": _cli(
        "solve", "value", "--model", "unequal:sizes=1000000000,1000000000"
    ),
    "cli: landscape --T 100000 --v 10000": _cli("landscape", *_HUGE_FLAGS, "--out", "{tmp}/l", "--quiet"),
    "cli: landscape --topic-word (2, 2e6)": _cli(
        "landscape", "--topic-word", "{phi}", "--tau", "1", "--out", "{tmp}/l"
    ),
    "cli: train --topic-word (2, 2e6)": _cli(
        "train", "--preset", "official-demo", "--topic-word", "{phi}", "--tau", "1", "--out", "{tmp}/r", "--quiet"
    ),
    "cli: train --model paper --T 300 --v 30": _cli(
        "train", "--preset", "official-demo", "--model", "paper", "--T", "300", "--v", "30", "--out", "{tmp}/r"
    ),
    "cli: train --model zipf:s=1 --T 100000 --v 10000": _cli(
        "train", "--preset", "official-demo", "--model", "zipf:s=1", *_HUGE_FLAGS, "--out", "{tmp}/r"
    ),
}
#: The command lines that answer at once from the paper's closed forms, whatever the size.
CLI_FAST = {
    "cli: solve value --T 100000 --v 10000 --npz",
    "cli: solve attention --T 100000 --v 10000",
    "cli: landscape --T 100000 --v 10000",
}
ENTRIES.update({name: ("fast" if name in CLI_FAST else "refuse", call) for name, call in CLI_ENTRIES.items()})


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run(names, out_path) -> None:
    """Run the entries ``names`` (all if empty) and write their outcomes to ``out_path`` (JSON)."""
    results = {}
    signal.signal(signal.SIGXCPU, _alarm)
    signal.signal(signal.SIGALRM, _alarm)
    _tc()  # the imports, outside every entry's clock
    for name in names or ENTRIES:
        _expect, call = ENTRIES[name]
        t0 = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, SECONDS)  # CPU time of this process (all threads)
        try:
            call()
            outcome, message = "returned", ""
        except _Timeout:
            outcome, message = "timeout", f"still running after {SECONDS} s of CPU time"
        except (ValueError, TypeError) as exc:
            outcome, message = "refused", str(exc)
        except BaseException as exc:  # MemoryError and any other: what the test reports
            outcome, message = type(exc).__name__, str(exc)[:500]
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        results[name] = [outcome, message, round(time.process_time() - t0, 3)]
        with open(out_path, "w") as fh:  # after every entry: a crash still leaves the ones before
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    signal.signal(signal.SIGPROF, _alarm)
    run(sys.argv[2:], sys.argv[1])
    os._exit(0)  # no teardown (Numba's and BLAS's threads): the results are written
