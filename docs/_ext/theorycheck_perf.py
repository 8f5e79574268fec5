"""The performance page of the documentation site, generated from ``benchmarks/results/*.json`` at build time.

:func:`performance_page` turns the results files into Markdown a person reads:

- a **summary table**, one row per results file: what is measured (in words), the headline figures with their
  units and the date and load of the run. The words come from :data:`BENCHMARKS` (file name -> title, topic,
  one-line description, a headline template); every number comes from the JSON file, named by a path in the
  template (``{optimum/cpu}``: key ``cpu`` of the section ``optimum``; ``{rows/-1/ratio}``: the last row). A file
  the map does not know gets a row too (its own description if it has one, no headline);
- one **section per topic** with tables of human column names, numbers to 4 significant digits, no table wider
  than :data:`MAX_COLUMNS` columns (a wide table with few rows is transposed, one with many rows split);
- a **figure** of the speed-ups measured side by side (:func:`ratio_figure`, written into the build's
  ``_static`` folder when the build finishes), and the **roofline** of the hot kernels (:func:`roofline_figure`,
  in the section of ``roofline.json``);
- the **raw records**, each file in a collapsible ``<details>`` block.

Internal tracker references ("issue 25", "#37") are removed from every text shown (:func:`scrub`).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: No generated table has more columns than this (the page's content width holds about seven).
MAX_COLUMNS = 7
#: The figure's file name under the build's ``_static`` folder.
FIGURE = "performance_ratios.png"
#: The roofline figure's file name under the build's ``_static`` folder (:func:`roofline_figure`).
ROOFLINE_FIGURE = "performance_roofline.png"

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
#: A placeholder of a template: ``{path}`` or ``{path:unit}``; a unit scales the value (``ms``: x 10^3, ``us``:
#: x 10^6, ``ns``: x 10^9, ``pct``: x 100, ``gb``: x 10^-9).
_PLACEHOLDER = re.compile(r"\{([^{}:]+)(?::(\w+))?\}")
_UNITS = {"": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9, "pct": 100.0, "gb": 1e-9}
#: Characters of a text from a results file that Markdown (MyST, with dollar math) would read as markup.
_MARKUP = re.compile(r"([\\`*_\[\]<>|$])")
#: A command-line flag in a text (set as code, else the typography turns "--" into a dash).
_FLAG = re.compile(r"(?<![\w`-])(--[\w\\-]+)")
_ISSUE = [
    re.compile(r"\s*\((?:before |after |see )?issue[ -]?#?\d+[^)]*\)", re.I),  # "(issue 25 item 4)"
    re.compile(r"\bissue[ -]?#?\d+(?: items?(?: \d+(?:-\d+)?,?(?: and)?)+)?[,:;]?\s*", re.I),  # "Issue 25 item 6, "
    re.compile(r"\s*\(#\d+\)|#\d+\b\s*"),  # "(#37)", "#37"
]


# ------------------------------------------------------------------------------------------------ formatting
def fmt_number(x, digits: int = 3) -> str:
    """A number for a reader: integers with thousands separators, floats to ``digits`` significant digits
    (``60.35`` -> ``60.3``), whole below a million (``9390.7`` -> ``9,391``), with a power of ten outside
    [0.001, 10^6) (``8.9e8`` -> ``8.9 × 10⁸``, ``5.65e-14`` -> ``5.65 × 10⁻¹⁴``); booleans as yes/no."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if not isinstance(x, float):
        return str(x)
    if x == 0:
        return "0"
    if 1000 <= abs(x) < 1e6:  # a whole number: its units digit is about as precise as the significant digits
        return f"{round(x):,}"
    rounded = float(f"{x:.{digits}g}")
    if abs(rounded) >= 1e6:
        return _power(rounded, digits)
    if abs(rounded) >= 10 ** (digits - 1):  # no digits after the point
        return f"{round(rounded):,}"
    if abs(rounded) < 1e-3:
        return _power(rounded, digits)
    return f"{rounded:.{digits}g}"


def _power(x: float, digits: int) -> str:
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def _cell(x, digits: int = 4) -> str:
    """A table cell: :func:`fmt_number`, short lists of numbers in full, text escaped for a Markdown table."""
    if isinstance(x, list):
        if len(x) <= 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
            return ", ".join(fmt_number(v, digits) for v in x)
        return f"({len(x)} values)"
    if isinstance(x, dict):
        return f"({len(x)} entries)"
    if isinstance(x, str):
        text = _MARKUP.sub(r"\\\1", " ".join(scrub(x).split()))
        return _FLAG.sub(lambda m: "`" + m[1].replace("\\", "") + "`", text)  # "--preset" stays two hyphens
    return fmt_number(x, digits)


def scrub(text: str) -> str:
    """``text`` without references to the project's internal tracker ("issue 25 item 4", "#37")."""
    original = text
    for pattern in _ISSUE:
        text = pattern.sub(lambda m: " " if m[0][:1].isspace() and m[0][-1:].isspace() else "", text)
    if text == original:
        return text
    text = re.sub(r"  +", " ", text).strip()
    starts_sentence = original[:1].isupper() and not original.startswith(text[:12])
    return text[:1].upper() + text[1:] if starts_sentence else text


#: Column names for a reader (keys not listed: underscores as spaces, unit suffixes spelled out).
HUMAN = {
    "T": "T",
    "tau": "τ",
    "words": "words",
    "V1": "V₁",
    "fun": "loss",
    "float_fun": "float loss",
    "float_cpu": "float solve CPU (s)",
    "cert_cpu": "certificate CPU (s)",
    "chart_cpu": "chart CPU (s)",
    "local_cpu": "local certificate CPU (s)",
    "ratio": "certificate / float",
    "chart_over_split": "chart / split",
    "lower": "lower bound",
    "upper": "upper bound",
    "kind": "result",
    "n_sets": "sets",
    "load_1min": "1-min load",
    "old_cpu_s": "before CPU (s)",
    "fused_cpu_s": "fused CPU (s)",
    "cpu_ratio": "CPU ratio",
    "old_wall_s": "before wall (s)",
    "fused_wall_s": "fused wall (s)",
    "wall_ratio": "wall ratio",
    "what": "what",
    "kernel_ms": "kernel (ms)",
    "W.sum_ms": "one pass W.sum (ms)",
    "kernel/pass": "kernel / pass",
    "ref/kernel": "reference / kernel",
    "kernel_GB/s": "kernel GB/s",
    "|kernel-ref|": "max abs. difference",
    "grad_us": "gradient (µs)",
    "own_ns": "oracle's own cost (ns)",
    "own / grad": "own / gradient",
    "cell": "cell (ms)",
    "sealed": "sealed (ms)",
    "n": "unknowns",
    "cpu_seconds": "CPU (s)",
    "wall_seconds": "wall (s)",
    "cpu_seconds_tree": "CPU, all processes (s)",
    "n_passed": "seeds passed",
    "power_at_30pct_seed_failure": "power at 30% seed failure",
    "runs/0/cpu_seconds_tree": "CPU, all processes (s)",
    "runs/0/wall_seconds": "wall (s)",
    "runs/0/cpu_seconds_by_process/command/0": "command's own CPU (s)",
    "runs/0/load_before/0": "1-min load",
    "label": "run",
    "flops_per_cpu_s": "flop per CPU second",
    "bytes_per_cpu_s": "bytes per CPU second",
    "ns_per_pair_cpu": "ns CPU per pair",
    "n_boxes": "boxes",
    "ns_per_box_pair_cpu": "ns CPU per pair",
    "over_stream_cpu": "over one streamed pass",
    "kernel_1_box_order1": "first order, one box",
    "kernel_1_box_order2": "second order, one box",
    "kernel_4_box_order2": "second order, four boxes",
    "regions_cpu": "CPU over the regions (s)",
    "label_pass": "label family, per-law pass",
    "cotopic_pass": "co-topic family, pass over the pairs",
    "cotopic_tables": "co-topic tables (pair sums)",
    "label_interval": "label certificate's interval loss",
    "train_step": "training step (fused squared loss)",
    "dgemm_flops_per_cpu_s_1t": "dgemm, 1 thread (flop/s)",
    "dgemm_flops_per_cpu_s_2t": "dgemm, 2 threads (flop/s per CPU s)",
    "triad_bytes_per_cpu_s": "stream triad, 1 thread (bytes/s)",
    "sum_bytes_per_cpu_s": "stream sum, 1 thread (bytes/s)",
    "triad_bytes_per_cpu_s_2t": "stream triad, 2 threads (bytes/s per CPU s)",
    "np_exp_per_cpu_s": "np.exp (per s)",
    "numba_exp_per_cpu_s": "compiled exp loop (per s)",
}
_SUFFIXES = [("_cpu_s", " CPU (s)"), ("_wall_s", " wall (s)"), ("_cpu", " CPU (s)"), ("_wall", " wall (s)")]


def human(key: str) -> str:
    """A column name for a reader (:data:`HUMAN`, else unit suffixes spelled out and underscores as spaces)."""
    if key in HUMAN:
        return HUMAN[key]
    for suffix, words in _SUFFIXES:
        if key.endswith(suffix):
            return (key[: -len(suffix)].replace("_", " ") + words).strip()
    if key in ("cpu", "wall"):
        return {"cpu": "CPU (s)", "wall": "wall (s)"}[key]
    return key.replace("_", " ")


_human = human


# ------------------------------------------------------------------------------------------------ templates
def resolve(data, path: str):
    """The value at ``path`` of a results file (keys and list indices joined by ``/``); ``KeyError`` if none."""
    value = data
    for part in path.split("/"):
        if isinstance(value, list):
            try:
                value = value[int(part)]
            except (ValueError, IndexError):
                raise KeyError(path) from None
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(path)
    return value


def fill(template: str, data, digits: int = 3) -> str:
    """``template`` with each ``{path}`` / ``{path:unit}`` replaced by that number of ``data`` (``KeyError`` if a
    path is missing or its value is not a number)."""

    def sub(m: re.Match) -> str:
        value = resolve(data, m[1])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KeyError(m[1])
        unit = m[2] or ""
        return fmt_number(value if unit == "" else float(value) * _UNITS[unit], digits)

    return _PLACEHOLDER.sub(sub, template)


def placeholders(template: str) -> list[tuple[str, str]]:
    """The ``(path, unit)`` of each placeholder of ``template``, in order."""
    return [(m[1], m[2] or "") for m in _PLACEHOLDER.finditer(template)]


# ------------------------------------------------------------------------------------------------ the map
@dataclass(frozen=True)
class Table:
    """A table of a results file: ``path`` to a list of records, to a mapping of records (its keys become the
    first column, named ``index``; only the entries that are records when ``index`` is given) or ``""`` for the
    file's ``headers``/``rows``; ``columns`` to show (all scalar columns when empty). With ``scalars``, the
    scalar entries of a mapping, one row each (those named in ``columns``). ``names``: column names of this table
    that differ from :func:`human`'s, as ``(key, name)`` pairs."""

    path: str
    caption: str
    columns: tuple[str, ...] = ()
    index: str = ""
    scalars: bool = False
    names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """What the page says about one results file (see the module docstring)."""

    title: str
    topic: str
    what: str
    headline: str
    load: tuple[str, ...] = ()
    date: str = ""
    facts: tuple[str, ...] = ()
    tables: tuple[Table, ...] = field(default_factory=tuple)
    figure: tuple[str, ...] = ()  # (file under _static, alt text): shown before the raw record


TOPICS = {
    "kernels": (
        "Closed forms and kernels",
        "The losses and their derivatives evaluated in closed form, against the route they replace.",
    ),
    "certificates": (
        "Certificates",
        "Interval-arithmetic certificates of the optima: the cost of a certified answer next to a float solve.",
    ),
    "training": ("Training", "Gradient descent on the transformer of the paper, and the calibration of its claims."),
    "harness": (
        "Verification runs and the benchmark harness",
        "`theorycheck verify` end to end, the cost of the harness itself, and mutation testing of the checks.",
    ),
    "corpus": (
        "Corpus scale",
        "The paper's models at the size of the vocabulary of a real corpus (a Wikipedia fragment's content words).",
    ),
    "other": ("Other results", "Results files the page's generator has no description for."),
}

_INTERVAL_COLUMNS = ("value", "engine", "lower", "upper", "gap", "boxes", "seconds")
_DYNAMICS_COLUMNS = ("what", "old_cpu_s", "fused_cpu_s", "cpu_ratio", "old_wall_s", "fused_wall_s", "wall_ratio")
_COMMAND, _LOAD = "runs/0/cpu_seconds_by_process/command/0", "runs/0/load_before/0"
_CERT_COLUMNS = ("T", "words", "tau", "float_cpu", "cert_cpu", "ratio", "gap")
_CORPUS_COLUMNS = ("T", "words", "tau", "radius", "kind", "fun", "lower", "upper", "gap", "n_boxes", "regions_cpu")

BENCHMARKS: dict[str, Benchmark] = {
    "value_loss.json": Benchmark(
        "Value-loss kernel",
        "kernels",
        "The stage-1 value loss by its Numba kernel, against the NumPy reference and one pass over the weights.",
        "at V₁ = {rows/2/0}: {rows/2/1} ms wall, {rows/2/4}x faster than the reference (difference {rows/2/6})",
        tables=(
            Table(
                "",
                "Wall-clock time per call, best of the rounds; the reference is not run at the largest size.",
                ("V1", "kernel_ms", "W.sum_ms", "kernel/pass", "ref/kernel", "kernel_GB/s", "|kernel-ref|"),
            ),
        ),
    ),
    "structured_attention.json": Benchmark(
        "Structured attention loss",
        "kernels",
        "The attention loss of the label and co-topic families by their structure, against the dense tensor.",
        "per set at V₁ = {rows_V1/1/V1}: label {rows_V1/1/label_per_set_cpu_s:us} µs, co-topic "
        "{rows_V1/1/co-topic_per_set_cpu_s:us} µs, dense {rows_V1/1/dense_per_set_cpu_s:ms} ms CPU",
        load=("rows_V1/0/load_1min", "rows_T/-1/load_1min"),
        facts=(
            "Cost per set grows as V₁ to the power {exponents/label_per_set_vs_V1} (label), "
            "{exponents/co_topic_per_set_vs_V1} (co-topic) and {exponents/dense_per_set_vs_V1} (dense).",
        ),
        tables=(
            Table(
                "rows_V1",
                "Against the vocabulary size (CPU seconds per set; – where a route exceeds the time budget).",
                ("V1", "T", "label_per_set_cpu_s", "co-topic_per_set_cpu_s", "dense_per_set_cpu_s", "n_sets"),
            ),
            Table(
                "rows_T",
                "Against the number of topics.",
                ("T", "V1", "label_per_set_cpu_s", "co-topic_per_set_cpu_s", "dense_per_set_cpu_s", "n_sets"),
            ),
        ),
    ),
    "interval.json": Benchmark(
        "Interval certificate, paper configuration",
        "certificates",
        "Certified bounds on the stage-1 value optimum of the paper's configuration, by two interval engines.",
        "block value: gap {rows/1/gap} in {rows/1/seconds} s (NumPy engine), {rows/0/gap} in {rows/0/seconds} s "
        "(mpmath)",
        tables=(
            Table("rows", "Each value and engine.", ("value", "engine", "lower", "upper", "gap", "boxes", "seconds")),
        ),
    ),
    "interval_cotopic.json": Benchmark(
        "Co-topic certificate",
        "certificates",
        "The certified optimum of the co-topic attention family, against the float solve of the same problem.",
        "{rows/0/ratio}x the float solve at {rows/0/T} x {rows/0/words}, {rows/-1/ratio}x at {rows/-1/T} x "
        "{rows/-1/words} ({rows/-1/cert_cpu} s CPU)",
        load=("load_average_start/0",),
        facts=(
            "At V₁ = {big/0/V1} ({big/0/T} topics, tau = {big/0/tau}, {big/0/pairs} (set, word) pairs) on the box of "
            "half-width {big/0/radius} around the float optimum: status {big/0/status}, gap {big/0/gap} after "
            "{big/0/boxes} boxes, {big/0/cert_cpu} s CPU ({big/0/cert_wall} s wall).",
            "One set of tables at V₁ = {tables/0/V1}: compiled {tables/0/box_order2/compiled_cpu} s against NumPy "
            "{tables/0/box_order2/numpy_cpu} s CPU (a beta interval, with two derivatives).",
        ),
        tables=(
            Table("rows", "CPU seconds; gap: upper minus lower bound.", _CERT_COLUMNS),
            Table(
                "big",
                "The largest size, on a stated box around the float optimum (CPU and wall seconds).",
                ("T", "V1", "tau", "radius", "status", "boxes", "gap", "cert_cpu", "cert_wall", "cpu_per_box"),
            ),
        ),
    ),
    "interval_label.json": Benchmark(
        "Label-family certificate",
        "certificates",
        "The certified optimum of the label attention family: small sizes against the float solve, and the "
        "corpus size.",
        "{rows/0/ratio}–{rows/-1/ratio}x the float solve up to {rows/-1/T} x {rows/-1/words}; at {corpus/T} x "
        "{corpus/words}: certified, gap {corpus/gap}, {corpus/regions_cpu} s CPU",
        facts=(
            "At {corpus/T} x {corpus/words} ({big/pairs} word pairs): the float solve takes {big/float_cpu} s "
            "CPU; the certificate covers {corpus/n_boxes} boxes over the search region in {corpus/regions_cpu} s "
            "CPU ({corpus/regions_wall} s wall), gap {corpus/gap}.",
            "The route by charts takes {rows/0/chart_over_split}x (at {rows/0/T} x {rows/0/words}) to "
            "{rows/-1/chart_over_split}x (at {rows/-1/T} x {rows/-1/words}) the CPU of the route by splits.",
        ),
        tables=(
            Table("rows", "Small sizes (CPU seconds).", _CERT_COLUMNS),
            Table("corpus", "Corpus size.", _CORPUS_COLUMNS, index="quantity", scalars=True),
        ),
    ),
    "interval_scores.json": Benchmark(
        "Interval score kernels",
        "certificates",
        "The interval bounds of the attention scores by the Numba kernels against NumPy, same boxes, same widths.",
        "label certificate at {small/T} x {small/words}: {small/certificate/ratio_numpy_over_numba}x faster; "
        "score bounds at {big/T} x {big/words}: {big/ratio_numpy_over_numba}x",
        load=("load_before/0", "load_after/0"),
        facts=(
            "Certificate at {small/T} x {small/words}: NumPy {small/certificate/numpy/cpu} s, Numba "
            "{small/certificate/numba/cpu} s CPU, both {small/certificate/numba/boxes} boxes.",
            "At {big/T} x {big/words}: NumPy {big/numpy/cpu} s, Numba {big/numba/cpu} s CPU.",
        ),
    ),
    "dynamics.json": Benchmark(
        "Training step",
        "training",
        "Gradient descent on the paper's transformer: the fused loss-and-gradient route against the one before.",
        "one step {rows/0/6}x less CPU; the whole `train --preset two-stage` command {rows/3/6}x",
        load=("load_average/start", "load_average/end"),
        facts=("The trajectories of both routes agree to {trajectory_max_rel_diff} (largest relative difference).",),
        tables=(
            Table(
                "", "", ("what", "old_cpu_s", "fused_cpu_s", "cpu_ratio", "old_wall_s", "fused_wall_s", "wall_ratio")
            ),
        ),
    ),
    "calibration.json": Benchmark(
        "Calibration of the empirical claims",
        "training",
        "The thresholds of the EMPIRICAL claims, calibrated on seeds kept apart from the checks (not timings).",
        "calibration seeds {calibration_seeds/0}–{calibration_seeds/-1}",
        tables=(Table("results", "", ("claim", "tier", "all_seeds_pass", "seconds")),),
    ),
    "problems_harness.json": Benchmark(
        "Harness overhead",
        "harness",
        "The sealed oracle's own cost per evaluation, against the cost of the gradient it wraps.",
        "own cost {rows/0/3} ns per evaluation against a {rows/0/2} µs gradient ({rows/0/4:pct} %; goal: below "
        "{goal:pct} %)",
        tables=(Table("", "", ("problem", "n", "grad_us", "own_ns", "own / grad", "cell", "sealed")),),
    ),
    "cold_start.json": Benchmark(
        "Cold start of verify",
        "harness",
        "`theorycheck verify` from empty caches (Numba and results), as a new user runs it first.",
        "{records/-1/runs/0/checks} checks: {records/-1/runs/0/cpu_seconds_tree} s CPU, "
        "{records/-1/runs/0/wall_seconds} s wall; the command's own CPU "
        "{records/-2/runs/0/cpu_seconds_by_process/command/0} s before, "
        "{records/-1/runs/0/cpu_seconds_by_process/command/0} s after",
        load=("records/-1/runs/0/load_before/0", "records/-1/runs/0/load_after/0"),
        date="records/-1/date",
        tables=(
            Table(
                "records",
                "Each run, oldest first (the command's own CPU: the main process, without the workers).",
                ("date", "label", *(f"runs/0/{k}" for k in ("cpu_seconds_tree", "wall_seconds")), _COMMAND, _LOAD),
            ),
        ),
    ),
    "verify_full.json": Benchmark(
        "Full verification tier",
        "harness",
        "Every check of `theorycheck verify --full`, from empty caches, with its seeds, power and CPU.",
        "{totals_by_tier/full/checks} full-tier checks, {totals_by_tier/full/failed} failed, "
        "{totals_by_tier/full/cpu} s CPU; default tier {totals_by_tier/default/checks} checks in "
        "{totals_by_tier/default/cpu} s CPU",
        date="date",
        tables=(
            Table(
                "full_checks",
                "",
                ("claim", "passed", "rule", "n_passed", "power_at_30pct_seed_failure", "cpu_seconds", "wall_seconds"),
            ),
        ),
    ),
    "mutation.json": Benchmark(
        "Mutation testing",
        "harness",
        "Deliberate errors put into the code one at a time: do `verify` and the tests catch each?",
        "{summary/mutants} mutants: verify caught {summary/verify_caught_numerical} of the "
        "{summary/numerical} numerical ones, the tests all {summary/tests_caught_numerical} and "
        "{summary/tests_caught_non_numerical} non-numerical",
        load=("load_1min_range/0", "load_1min_range/1"),
        date="note",
        tables=(Table("mutants", "", ("name", "what", "numerical", "verify", "tests")),),
    ),
    "corpus_scale.json": Benchmark(
        "Attention at corpus size, end to end",
        "corpus",
        "The default family's optimum and the label family's whole-domain certificate at 20 topics x 13,586 "
        "words, one after the other in one run, as seconds and as multiples of a reference workload.",
        "optimum {optimum/wall} s wall ({optimum/cpu} s CPU); certificate {certificate/wall} s wall "
        "({certificate/cpu} s CPU, {certificate/n_boxes} boxes, gap {certificate/gap})",
        load=("load_start/0", "load_end/0"),
        facts=(
            "Reference workload: {machine_probes/reference_cpu} s CPU; the optimum is "
            "{optimum/cpu_over_reference}x it, the certificate {certificate/cpu_over_reference}x.",
            "The goals (on an idle machine of {machine/cpus} cores): the optimum within {goals/optimum_wall} s, "
            "the certificate within {goals/certificate_wall} s of wall time.",
            "On a Dask LocalCluster of {certificate_distributed/workers} single-threaded workers: "
            "{certificate_distributed/wall} s wall ({certificate_distributed/wall_over_serial}x the serial run); "
            "whether its certified result is the serial run's bit for bit is the table's same_as_serial.",
        ),
        tables=(
            Table(
                "optimum",
                "The co-topic optimum.",
                ("cpu", "wall", "fun", "status", "gradient_norm"),
                scalars=True,
                index="quantity",
            ),
            Table(
                "certificate",
                "The label certificate.",
                ("cpu", "wall", "n_boxes", "lower", "upper", "gap", "status"),
                scalars=True,
                index="quantity",
            ),
            Table(
                "certificate_distributed",
                "The label certificate on Dask workers, against the serial run.",
                ("workers", "cpu", "wall", "wall_over_serial", "same_as_serial", "n_boxes", "status"),
                scalars=True,
                index="quantity",
            ),
        ),
    ),
    "cotopic_corpus.json": Benchmark(
        "Co-topic optimum at corpus size",
        "corpus",
        "The optimal attention of the co-topic family by the profile search over pair sums, against the route before.",
        "at {optimum/T} x {optimum/words}: {optimum/cpu} s CPU; {compare/old_over_new_cpu}x faster than the "
        "previous route at {optimum/T} x {compare/words}",
        load=("load_start/0", "load_end/0"),
        facts=(
            "Same optimum by both routes at {optimum/T} x {compare/words}: loss difference {compare/loss_difference}; "
            "{compare/old_cpu} s CPU before, {compare/new_cpu} s now.",
            "With the LDA topics of a Wikipedia fragment instead of Dirichlet ones: {optimum_lda/cpu} s CPU.",
            "One pass over the {pieces/pass_1_alpha/pairs} word pairs: {pieces/pass_1_alpha/ns_per_pair_cpu} ns CPU "
            "per pair, {pieces/pass_1_alpha/fraction_of_dgemm:pct} % of the machine's dgemm rate.",
        ),
        tables=(
            Table(
                "pieces",
                "The pieces of one evaluation (CPU seconds; rates per CPU second).",
                ("cpu", "wall", "flops_per_cpu_s", "bytes_per_cpu_s", "ns_per_pair_cpu"),
                index="piece",
            ),
        ),
    ),
    "interval_distributed.json": Benchmark(
        "Label certificate on workers",
        "certificates",
        "The whole-domain label certificate on a Dask scheduler and workers started as separate processes, its "
        "regions and their sub-boxes as tasks, against the serial run; every run gives the same certificate, bit "
        "for bit.",
        "at {T} topics x {words} words: serial {runs/serial/wall} s wall, one worker {runs/sep1/wall} s, two workers "
        "{runs/sep2/wall} s ({runs/sep2/n_tasks} tasks; {runs/sep2-regions/wall} s with the "
        "{runs/sep2-regions/n_tasks} regions as tasks)",
        load=("load_before/0", "load_after/0"),
        facts=(
            "Speed model (a list schedule on the measured task times): two workers predicted "
            "{runs/sep2/model_from_sep1} s from the one-worker run's tasks, {runs/sep2/model_own_tasks} s from its "
            "own (measured {runs/sep2/wall} s); with the measured dispatch latency added to each task "
            "{runs/sep2/model_from_sep1_latency} s and {runs/sep2/model_own_tasks_latency} s.",
            "Two workers against one: {speedup_2_over_1_workers}x; the one-worker run predicted from its own tasks "
            "{runs/sep1/model_own_tasks_latency} s with the latency (measured {runs/sep1/wall} s).",
            "Projected from the one-worker run's task times: sixteen workers {projection/sub_box_tasks/16} s and "
            "sixty-four {projection/sub_box_tasks/64} s with sub-box tasks (longest chain of tasks {longest_chain} s), "
            "against {projection/whole_regions/16} s with whole regions; on the tasks' CPU times (a core per "
            "worker) {projection_cpu/sub_box_tasks/16} s and {projection_cpu/sub_box_tasks/64} s, against "
            "{projection_cpu/whole_regions/16} s.",
        ),
        tables=(
            Table(
                "runs",
                "Each run: wall and CPU seconds (this process, and its tasks in the workers), the tasks, the start-up "
                "of the processes before the clock, and the model's wall from the run's own task times.",
                ("wall", "cpu", "tasks_cpu", "n_tasks", "startup", "model_own_tasks"),
                index="run",
            ),
        ),
    ),
    "interval_label_kernel.json": Benchmark(
        "Vectorised label interval kernel",
        "certificates",
        "The label certificate's interval sums by the vectorised Numba kernel against the per-pair kernel and NumPy "
        "(same formulas; enclosures no wider), per (box, pair) and for the whole certificate.",
        "certificate at {certificate_T8_2000_tau2/T} x {certificate_T8_2000_tau2/words}: "
        "{certificate_T8_2000_tau2/cpu_ratio_pairs_over_new}x less CPU than the per-pair kernel, "
        "{certificate_T8_2000_tau2/numba/boxes} boxes each; second-order box at {T20_2000_tau3/T} x "
        "{T20_2000_tau3/words}: "
        "{T20_2000_tau3/rows/8_box_order2/numba/ns_cpu} ns CPU per (box, pair)",
        load=("load_start/0", "load_end/0"),
        facts=(
            "Certificate at {certificate_T8_2000_tau2/T} x {certificate_T8_2000_tau2/words}: new "
            "{certificate_T8_2000_tau2/numba/cpu} s CPU / "
            "{certificate_T8_2000_tau2/numba/wall} s wall, per-pair kernel "
            "{certificate_T8_2000_tau2/numba-pairs/cpu} s / {certificate_T8_2000_tau2/numba-pairs/wall} s.",
            "Whole-domain certificate at {corpus/run/T} x {corpus/run/words} (tau = {corpus/run/tau}): status "
            "{corpus/run/status}, gap {corpus/run/gap}, {corpus/run/n_boxes} boxes; regions {corpus/cpu_new} s CPU "
            "against {corpus/cpu_before} s before ({corpus/cpu_ratio_before_over_new}x less), whole run "
            "{corpus/run/cpu_this_run} s CPU / {corpus/run/wall_this_run} s wall at load {corpus/load_end/0}.",
        ),
    ),
    "interval_label_profile.json": Benchmark(
        "One box of the label certificate",
        "corpus",
        "The cost of bounding one box of the corpus-size label certificate, against streaming the packed pairs "
        "once (the bandwidth bound).",
        "second-order box: {corpus/kernel_1_box_order2/ns_per_box_pair_cpu} ns CPU per pair, "
        "{corpus/kernel_1_box_order2/over_stream_cpu}x one streamed pass over {corpus/pairs} pairs",
        load=("load_start/0", "load_end/0"),
        facts=(
            "Packing the pairs once: {corpus/pack_cpu} s CPU ({corpus/packed_bytes:gb} GB); one streamed pass "
            "over them: {corpus/stream_cpu} s CPU.",
        ),
        tables=(
            Table(
                "corpus",
                "Each kernel on one box (or four), against one streamed pass over the packed pairs.",
                ("cpu", "wall", "ns_per_box_pair_cpu", "over_stream_cpu"),
                index="kernel",
            ),
        ),
    ),
    "roofline.json": Benchmark(
        "Roofline of the hot kernels",
        "kernels",
        "Each hot kernel's flop rate against the machine's roofline (dgemm peak, streaming bandwidth, exponentials "
        "per second), all measured in the same run on one thread.",
        "bound / achieved: co-topic tables {kernels/cotopic_tables/ratio}x, co-topic pass "
        "{kernels/cotopic_pass/ratio}x, label pass {kernels/label_pass/ratio}x, training step "
        "{kernels/train_step/ratio}x, label interval loss {kernels/label_interval/ratio}x; dgemm "
        "{peaks/flops} flop/s, bandwidth {peaks/bandwidth:gb} GB/s per CPU second",
        load=("load_before/0", "load_after/0"),
        date="date",
        facts=(
            "The outward roundings (nextafter) take {kernels/label_interval/nextafter_fraction:pct} % of the label "
            "interval loss's time (measured by replacing them with the identity).",
            "Exponentials: np.exp {peaks/np_exp_per_cpu_s} and a compiled loop {peaks/numba_exp_per_cpu_s} per CPU "
            "second; at those rates the co-topic tables' exponentials (numpy's) take "
            "{kernels/cotopic_tables/exp_share:pct} % of their time, the training step's (compiled) "
            "{kernels/train_step/exp_share:pct} %.",
        ),
        tables=(
            Table(
                "kernels",
                "Each kernel on one thread (CPU seconds, best of several calls); flop rates per CPU second; bound: the "
                "lowest ceiling at the kernel's arithmetic intensity.",
                ("size_text", "time", "AI", "achieved", "bound", "ratio"),
                index="kernel",
                names=(
                    ("size_text", "size"),
                    ("time", "CPU (s)"),
                    ("AI", "flop / byte"),
                    ("achieved", "flop/s"),
                    ("bound", "bound (flop/s)"),
                    ("ratio", "bound / achieved"),
                ),  # fmt: skip
            ),
            Table(
                "kernels",
                "The cost model of each call and the ceiling that binds.",
                ("flops", "exps", "bytes", "achieved_bytes_per_s", "binding"),
                index="kernel",
                names=(("exps", "exponentials"), ("achieved_bytes_per_s", "bytes/s"), ("binding", "binding ceiling")),
            ),
            Table("kernels", "Kernels beyond ten times below their bound, and why.", ("reason",), index="kernel"),
            Table(
                "peaks",
                "The machine's ceilings, measured at the start of the run (per CPU second unless wall).",
                (
                    "dgemm_flops_per_cpu_s_1t",
                    "dgemm_flops_per_cpu_s_2t",
                    "triad_bytes_per_cpu_s",
                    "sum_bytes_per_cpu_s",
                    "triad_bytes_per_cpu_s_2t",
                    "np_exp_per_cpu_s",
                    "numba_exp_per_cpu_s",
                ),
                index="ceiling",
                scalars=True,
            ),  # fmt: skip
        ),
        figure=(
            ROOFLINE_FIGURE,
            "Roofline: flop rate against arithmetic intensity on log scales, the dgemm and bandwidth ceilings as "
            "lines and one point per kernel, joined to its bound.",
        ),
    ),
}


def benchmark(path: Path, data) -> Benchmark:
    """The map's entry of a results file, or one made from the file itself (its description, if any)."""
    if path.name in BENCHMARKS:
        return BENCHMARKS[path.name]
    what = next((data[k] for k in ("what", "benchmark", "description") if isinstance(data.get(k), str)), "")
    title = path.stem.replace("_", " ").capitalize()
    return Benchmark(title, "other", scrub(what) or "No description in the docs generator's map.", "")


# ------------------------------------------------------------------------------------------------ summary
@dataclass
class Row:
    """One row of the summary table."""

    file: str
    title: str
    what: str
    headline: str
    date: str
    load: str


def _git_date(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"committed {out}" if out else ""


def load_text(bench: Benchmark, data) -> str:
    """The 1-minute load average at the start and end of the run (``–`` when the file records none)."""
    values = []
    for p in bench.load:
        try:
            values.append(fill("{" + p + "}", data, digits=3))
        except KeyError:
            pass
    if not values:
        return "–"
    return "load " + ("–".join(dict.fromkeys(values)))


def summary_row(path: Path, data) -> Row:
    bench = benchmark(path, data)
    try:
        headline = fill(bench.headline, data)
    except KeyError:
        headline = ""
    try:
        found = re.search(r"\d{4}-\d{2}-\d{2}", str(resolve(data, bench.date))) if bench.date else None
    except KeyError:
        found = None
    date = found[0] if found else ""
    return Row(path.name, bench.title, bench.what, headline, date or _git_date(path) or "–", load_text(bench, data))


def summary_rows(folder: Path) -> list[Row]:
    return [summary_row(p, json.loads(p.read_text())) for p in _files(folder)]


def _files(folder: Path) -> list[Path]:
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    return sorted(folder.glob("*.json"), key=lambda p: (order.get(p.name, len(order)), p.name))


def _anchor(name: str) -> str:
    return "perf-" + re.sub(r"[^a-z0-9]+", "-", Path(name).stem.lower()).strip("-")


def summary_table(rows: list[Row]) -> list[str]:
    out = ["| benchmark | what is measured | result | run |", "|---|---|---|---|"]
    for r in rows:
        result = r.headline or "see its section"
        run = r.date if r.load == "–" else f"{r.date}, {r.load}"
        out.append(f"| [{r.title}](#{_anchor(r.file)}) | {r.what} | {result} | {run} |")
    return out + [""]


# ------------------------------------------------------------------------------------------------ tables
def _records(data, table: Table) -> tuple[list[dict], tuple[str, ...]]:
    """The records of ``table`` in ``data`` and the columns to show."""
    if table.path == "":
        headers, rows = data.get("headers"), data.get("rows")
        if isinstance(headers, list) and isinstance(rows, list):
            return [dict(zip(headers, r)) for r in rows if isinstance(r, list)], table.columns
        return [], ()
    try:
        value = resolve(data, table.path)
    except KeyError:
        return [], ()
    if isinstance(value, list) and all(isinstance(r, dict) for r in value):
        return value, table.columns
    if isinstance(value, dict) and table.index and any(isinstance(r, dict) for r in value.values()):
        return [{table.index: human(k), **r} for k, r in value.items() if isinstance(r, dict)], table.columns
    if isinstance(value, dict) and value and all(isinstance(r, dict) for r in value.values()):
        return [{"": k, **r} for k, r in value.items()], table.columns
    if (
        isinstance(value, dict) and table.scalars
    ):  # a section of scalars: one row per quantity (those of ``columns`` if given)
        name = table.index or "quantity"
        keys = table.columns or [k for k, v in value.items() if not isinstance(v, (dict, list))]
        return [{name: human(k), "value": value[k]} for k in keys if k in value], (name, "value")
    return [], ()


def _scalar(v) -> bool:
    return not isinstance(v, (dict, list)) or (
        isinstance(v, list) and len(v) <= 3 and all(isinstance(x, (int, float)) for x in v)
    )


def markdown_table(records: list[dict], columns: tuple[str, ...] = (), index: str = "", names=()) -> list[str]:
    """Markdown of ``records`` (a list of dicts), human column names (``names``: ``(key, name)`` pairs first), at
    most :data:`MAX_COLUMNS` columns: a wide table of few rows is transposed, one of many rows is split (the first
    column repeated in each part)."""
    if not records:
        return []
    rename = dict(names)

    def human(key: str) -> str:
        return rename.get(key) or _human(key)

    records = [{k: _get(r, k) for k in columns} | r for r in records] if columns else records
    keys = list(columns)
    if index and index not in keys:
        keys.insert(0, index)
    if not columns:
        for r in records:
            keys += [k for k, v in r.items() if k not in keys and _scalar(v)]
    keys = [k for k in keys if any(r.get(k) is not None for r in records)]
    records = [r for r in records if any(r.get(k) is not None for k in keys[1:])]  # not a row of dashes
    if len(keys) > MAX_COLUMNS and len(records) < MAX_COLUMNS:
        heads = [_cell(r.get(keys[0])) for r in records]
        rows = [[human(k), *(_cell(r.get(k)) for r in records)] for k in keys[1:]]
        return _md([human(keys[0]), *heads], rows)
    out: list[str] = []
    step = MAX_COLUMNS - 1
    for start in range(1, max(len(keys), 2), step):
        part = [keys[0], *keys[start : start + step]]
        out += _md([human(k) for k in part], [[_cell(r.get(k)) for k in part] for r in records])
    return out


def _get(record: dict, key: str):
    """``record[key]``, or the value at the path ``key`` (``runs/0/wall_seconds``), or ``None``."""
    if key in record:
        return record[key]
    try:
        return resolve(record, key)
    except KeyError:
        return None


def _md(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(r) + " |" for r in rows] + [""]


def section(path: Path, data, depth: int = 3, anchor: bool = True) -> list[str]:
    """Markdown of one results file: title, description, machine and load, facts, tables, raw record; with
    ``anchor``, the label the summary table links to (one page only: labels are global to the site)."""
    bench = benchmark(path, data)
    row = summary_row(path, data)
    out = [f"({_anchor(path.name)})="] if anchor else []
    out += [f"{'#' * depth} {bench.title}", "", bench.what, ""]
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    run = [f"Run {row.date}" if row.date[:1].isdigit() else f"Results {row.date}"]
    if machine.get("cpus"):
        run.append(f"{machine['cpus']} CPUs")
    if row.load != "–":
        run.append(f"1-minute {row.load}")
    out += [", ".join(run) + ".", ""]
    facts = [row.headline[:1].upper() + row.headline[1:] + "."] if row.headline else []
    for template in bench.facts:
        try:
            facts.append(fill(template, data))
        except KeyError:
            pass
    out += [f"- {f}" for f in facts] + ([""] if facts else [])
    tables = bench.tables or ((Table("", ""),) if "headers" in data else ())
    for table in tables:
        records, columns = _records(data, table)
        md = markdown_table(records, columns, table.index, table.names)
        if md:
            out += ([table.caption, ""] if table.caption else []) + md
    if bench.figure:
        out += [
            f'<img src="_static/{bench.figure[0]}" alt="{bench.figure[1]}" style="width: 100%; max-width: 760px">',
            "",
        ]
    out += raw_record(path, data)
    return out


def raw_record(path: Path, data) -> list[str]:
    """The file's record in a collapsed ``<details>`` block (its texts scrubbed of tracker references)."""
    text = scrub_json(data)
    return [
        "<details>",
        f"<summary>Raw record: <code>benchmarks/results/{path.name}</code></summary>",
        "",
        "```json",
        json.dumps(text, indent=1, ensure_ascii=False),
        "```",
        "",
        "</details>",
        "",
    ]


def scrub_json(data):
    if isinstance(data, dict):
        return {k: scrub_json(v) for k, v in data.items()}
    if isinstance(data, list):
        return [scrub_json(v) for v in data]
    return scrub(data) if isinstance(data, str) else data


# ------------------------------------------------------------------------------------------------ figure
_SMALL_CERT = "small/certificate/ratio_numpy_over_numba"
#: Speed-ups measured side by side in one run: (label, results file, path of the ratio).
SPEEDUPS = [  # the labels are templates filled from the same file (no number typed by hand)
    ("value loss, kernel vs NumPy reference (V₁ = {rows/2/0}; wall)", "value_loss.json", "rows/2/4"),
    ("training step, fused vs before (CPU)", "dynamics.json", "rows/0/6"),
    ("train --preset two-stage, whole command (CPU)", "dynamics.json", "rows/3/6"),
    (
        "co-topic optimum, profile search vs before ({optimum/T} x {compare/words}; CPU)",
        "cotopic_corpus.json",
        "compare/old_over_new_cpu",
    ),
    (
        "interval score bounds, Numba vs NumPy ({big/T} x {big/words}; CPU)",
        "interval_scores.json",
        "big/ratio_numpy_over_numba",
    ),
    (
        "label certificate, Numba vs NumPy ({small/T} x {small/words}; CPU)",
        "interval_scores.json",
        "small/certificate/ratio_numpy_over_numba",
    ),
    (
        "label certificate, vectorised vs per-pair kernel ({certificate_T8_2000_tau2/T} x "
        "{certificate_T8_2000_tau2/words}; CPU)",
        "interval_label_kernel.json",
        "certificate_T8_2000_tau2/cpu_ratio_pairs_over_new",
    ),
]
#: Cost of a certificate over the float solve, by problem size: (label, file, list of rows).
CERT_COST = [("co-topic", "interval_cotopic.json", "rows"), ("label", "interval_label.json", "rows")]


def _read(folder: Path, name: str):
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else None


def ratio_figure(folder: Path, out: Path) -> bool:
    """Write the figure of the measured ratios to ``out`` (PNG): the speed-ups of :data:`SPEEDUPS` as bars and
    the certificate cost over the float solve against the vocabulary size. ``False`` if no data."""
    bars = []
    for label, name, p in SPEEDUPS:
        data = _read(folder, name)
        try:
            bars.append((fill(label, data), float(resolve(data, p))))
        except (KeyError, TypeError):
            continue
    lines = []
    for label, name, p in CERT_COST:
        data = _read(folder, name)
        try:
            rows = resolve(data, p)
            lines.append((label, [r["words"] for r in rows], [r["ratio"] for r in rows], [r["T"] for r in rows]))
        except (KeyError, TypeError):
            continue
    if not bars and not lines:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(8, 7.8), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.1, 1])  # each panel with its own margins
    a = top.subplots()
    b = bottom.subplots()
    labels, values = [x[0] for x in bars][::-1], [x[1] for x in bars][::-1]
    a.barh(range(len(values)), values, color="#3b6ea8")
    a.set_yticks(range(len(values)), labels, fontsize=9)
    a.set_xscale("log")
    a.set_xlabel("time of the slower route / time of the faster one (same run)")
    for i, v in enumerate(values):
        a.text(v * 1.08, i, f"{fmt_number(v)}x", va="center", fontsize=9)
    a.set_xlim(1, max(values, default=10) * 4)
    a.set_title("Speed-ups measured side by side", fontsize=11)
    for label, words, ratio, topics in lines:
        b.plot(words, ratio, "o-", label=label)
        for w, r, t in zip(words, ratio, topics):
            b.annotate(f"{t} x {w}", (w, r), textcoords="offset points", xytext=(4, -10), fontsize=7)
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("words (each point labelled topics x words)")
    b.set_ylabel("certificate CPU / float solve CPU")
    b.set_title("Cost of a certified optimum", fontsize=11)
    b.legend(title="attention family", fontsize=9)
    b.margins(x=0.12, y=0.15)
    for ax in (a, b):
        ax.grid(True, which="major", alpha=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def roofline_figure(folder: Path, out: Path) -> bool:
    """Write the roofline of ``roofline.json`` to ``out`` (PNG): flop/s against arithmetic intensity (flop per byte),
    log-log, the dgemm ceiling and the bandwidth ceiling measured in the run, the exponential ceiling of each kernel
    with exponentials where it lies on the chart, one point per kernel joined to its bound. ``False`` if no data."""
    data = _read(folder, "roofline.json")
    try:
        P, B = float(resolve(data, "peaks/flops")), float(resolve(data, "peaks/bandwidth"))
        kernels = resolve(data, "kernels")
        points = [(HUMAN.get(k, k), float(r["AI"]), float(r["achieved"]), float(r["bound"]), float(r["ratio"]),
                   r.get("ceilings", {}).get("exp")) for k, r in kernels.items()]  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ais = [p[1] for p in points]
    lo_x, hi_x = min(min(ais) / 4, P / B / 8), max(max(ais) * 4, P / B * 8)
    ys = [p[2] for p in points]
    lo_y, hi_y = min(ys) / 4, P * 4
    fig, ax = plt.subplots(figsize=(8, 6.2), layout="constrained")
    x = [lo_x * (hi_x / lo_x) ** (i / 200) for i in range(201)]
    ax.plot(x, [min(P, a * B) for a in x], "-", color="black", lw=2, label="roofline: min(dgemm peak, AI x bandwidth)")
    target = float(data.get("target_ratio", 10.0))
    ax.plot(x, [min(P, a * B) / target for a in x], "--", color="grey", lw=1,
            label=f"{fmt_number(target)}x below the roofline (the target)")  # fmt: skip
    ax.axhline(P, color="black", lw=0.6, ls=":")
    ax.text(hi_x / 1.1, P * 1.12, f"dgemm {fmt_number(P)} flop/s", ha="right", fontsize=8)
    colors = plt.get_cmap("tab10")
    for i, (name, ai, got, bound, ratio, exp_ceiling) in enumerate(points):
        c = colors(i)
        ax.plot([ai, ai], [got, bound], "-", color=c, lw=1, alpha=0.6)
        ax.plot(ai, got, "o", color=c, ms=8, label=f"{name}: {fmt_number(ratio)}x below its bound")
        if exp_ceiling is not None and exp_ceiling < hi_y:
            ax.plot([ai / 2.5, ai * 2.5], [exp_ceiling] * 2, "--", color=c, lw=1.2)
            ax.text(ai * 2.7, exp_ceiling, "exp ceiling", color=c, fontsize=7, va="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo_x, hi_x)
    ax.set_ylim(lo_y, hi_y)
    a_mem = lo_x * 1.6
    (x0, y0), (x1, y1) = ax.transData.transform([(a_mem, a_mem * B), (a_mem * 2, a_mem * 2 * B)])
    angle = math.degrees(math.atan2(y1 - y0, x1 - x0))
    ax.text(a_mem, a_mem * B * 1.3, f"bandwidth {fmt_number(B * 1e-9)} GB/s", rotation=angle, fontsize=8,
            rotation_mode="anchor")  # fmt: skip
    ax.set_xlabel("arithmetic intensity (flop per byte moved)")
    ax.set_ylabel("flop per CPU second (one thread)")
    ax.set_title("Roofline of the hot kernels (ceilings measured in the same run)", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------------ the page
def performance_page(folder: Path) -> str:
    """Markdown appended to ``performance.md``: summary, figure, one section per topic (see the module
    docstring)."""
    files = _files(folder)
    if not files:
        return "No benchmark results in `benchmarks/results/` at build time.\n"
    data = {p: json.loads(p.read_text()) for p in files}
    out = ["## Summary", ""]
    out += [
        "Each row is one results file; its section below has the tables and the raw record. Load is the "
        "machine's 1-minute load average at the start and end of the run where the file records it (the "
        "machine is shared: a load above its core count slows wall-clock times, which is why the figures are "
        "CPU seconds and ratios). A file that records no date shows the date of its last commit.",
        "",
    ]
    line = machine_line(data.values())
    out += [line, ""] if line else []
    out += summary_table([summary_row(p, d) for p, d in data.items()])
    out += [
        f'<img src="_static/{FIGURE}" alt="Top: the speed-ups measured side by side, as bars on a log scale. '
        'Bottom: the CPU time of a certified optimum over that of the float solve, against the number of words." '
        'style="width: 100%; max-width: 880px">',
        "",
    ]
    for topic, (heading, intro) in TOPICS.items():
        members = [p for p in files if benchmark(p, data[p]).topic == topic]
        if not members:
            continue
        out += [f"## {heading}", "", intro, ""]
        for p in members:
            out += section(p, data[p])
    return "\n".join(out) + "\n"


def machine_line(records) -> str:
    """ "Every run: ..." when the files that record their machine agree on each item they record (system,
    architecture, cores, Python and NumPy to the minor version), else ``""``."""
    seen: dict[str, set] = {k: set() for k in ("system", "arch", "cpus", "python", "numpy")}
    for d in records:
        m = d.get("machine") if isinstance(d, dict) else None
        if not isinstance(m, dict):
            continue
        platform = str(m.get("platform", ""))
        if platform:
            seen["system"].add(platform.split("-")[0])
            seen["arch"].add(next((a for a in ("x86_64", "aarch64", "arm64") if a in platform), "other"))
        for k in ("python", "numpy"):
            if k in m:
                seen[k].add(".".join(str(m[k]).split(".")[:2]))
        if "cpus" in m:
            seen["cpus"].add(m["cpus"])
    if not seen["system"] or any(len(v) > 1 for v in seen.values()):
        return ""
    one = {k: next(iter(v)) if v else None for k, v in seen.items()}
    parts = [f"{one['system']} {one['arch']}", f"{one['cpus']} shared CPU cores" if one["cpus"] else ""]
    parts += [f"Python {one['python']}" if one["python"] else "", f"NumPy {one['numpy']}" if one["numpy"] else ""]
    return "Every run: " + ", ".join(p for p in parts if p) + "."
