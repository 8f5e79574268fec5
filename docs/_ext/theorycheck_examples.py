"""Sphinx extension: the site's examples run, and the outputs they show are checked, when the site is built.

- **Docstring examples.** Every ``>>>`` example of every object the API reference documents
  (:func:`theorycheck_api.documented_objects`) runs as a doctest, each object's examples in a fresh
  temporary folder with ``np`` (numpy) imported.
- **Guide examples.** The ``python`` code blocks of each page of the site run in order in one namespace, in a fresh
  temporary folder. A block followed (after at most one blank line) by a ``text`` code block captioned "Output"
  must print it; a block that prints without an Output block, or an Output block under a block that prints
  nothing, fails too.

Outputs are compared by :class:`FloatChecker`: every number equal within 1e-9 relative / 1e-12 absolute, the rest
exactly (runs of whitespace equal, ``...`` matching anything), so a stated value that drifts fails.

Each failure is a Sphinx warning at the example's file and line: the build (``-W``) fails. The checks run in a child
process (``python theorycheck_examples.py``, a JSON report on stdout) started when the html builder starts and
awaited when the build finishes: they overlap the reading of the sources and the tutorials' execution (one kernel at a
time), and the examples' files, working folder and global state stay out of the Sphinx process. ``-D
theorycheck_check_examples=0`` turns them off (a quick local build; CI never does).

``tests/test_docstrings.py`` and ``tests/test_readme.py`` run the same functions under pytest, one test per object or
page: the quick check while editing, and the README's examples (the README is not a page of the site).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from theorycheck_api import documented_objects

try:  # Sphinx only at build time: the tests import this module without it
    from sphinx.util import logging as _sphinx_logging
except ImportError:  # pragma: no cover - the docs extra is not installed
    _sphinx_logging = None

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_EXAMPLE = re.compile(
    r"^```python\n(?P<code>.*?)^```[ \t]*\n"
    r"(?:\n?```\{code-block\} text\n:caption: Output\n\n(?P<want>.*?)^```[ \t]*$)?",
    re.S | re.M,
)
#: Flags of every comparison (docstrings and pages).
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class FloatChecker(doctest.OutputChecker):
    """Output equal up to floats: every number within rtol 1e-9, atol 1e-12, the rest exact."""

    def check_output(self, want: str, got: str, optionflags: int = FLAGS) -> bool:
        if super().check_output(want, got, optionflags):
            return True
        w, g = _NUMBER.findall(want), _NUMBER.findall(got)
        if len(w) != len(g) or not super().check_output(_NUMBER.sub("0", want), _NUMBER.sub("0", got), optionflags):
            return False
        return bool(np.allclose(np.array(w, float), np.array(g, float), rtol=1e-9, atol=1e-12))


@contextlib.contextmanager
def _in_temporary_folder():
    """Run in a fresh temporary folder (an example that writes files writes them there), then come back."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tc-example-") as folder:
        os.chdir(folder)
        try:
            yield
        finally:
            os.chdir(here)


# ------------------------------------------------------------------------------------------------ docstrings
def docstring_tests(skip: frozenset[str] = frozenset()) -> list[tuple[str, doctest.DocTest]]:
    """(qualified name, doctest) of every public object with ``>>>`` examples, except the names in ``skip``."""
    finder = doctest.DocTestFinder(recurse=False)
    out = []
    for qualname, obj in documented_objects():
        for test in finder.find(obj, qualname, globs={}):
            if test.examples and qualname not in skip:
                out.append((qualname, test))
    return out


def run_docstring(test: doctest.DocTest) -> list[str]:
    """Run one object's examples in a fresh temporary folder; the runner's reports of the failing examples."""
    report: list[str] = []
    runner = doctest.DocTestRunner(checker=FloatChecker(), optionflags=FLAGS)
    test.globs = {"np": np}  # as in numpy's and scipy's docs; everything else is imported by the example
    with _in_temporary_folder():
        runner.run(test, out=report.append)
    return report


def _location(test: doctest.DocTest, report: str) -> str:
    """``file:line`` of the first failing example named in a doctest report."""
    m = re.search(r'File "([^"]+)", line (\d+)', report)
    if m:
        return f"{m[1]}:{m[2]}"
    return f"{test.filename}:{(test.lineno or 0) + 1}"


# ------------------------------------------------------------------------------------------------ pages
class Example(NamedTuple):
    """A page's ``python`` block: its first line's number, its code, and the output the page shows (or None)."""

    line: int
    code: str
    want: str | None


def page_examples(page: Path) -> list[Example]:
    """The ``python`` blocks of a Markdown page, in order."""
    text = page.read_text(encoding="utf-8")
    return [Example(text.count("\n", 0, m.start()) + 2, m["code"], m["want"]) for m in _EXAMPLE.finditer(text)]


def run_page(page: Path, outputs_shown: bool = True) -> list[tuple[int, str]]:
    """Run a page's ``python`` blocks in order (one namespace, a fresh temporary folder): (line, message) of
    each block that fails or prints other than its Output block. After a block raises, the page stops there.
    ``outputs_shown=False``: a block may print without an Output block (the README)."""
    failures: list[tuple[int, str]] = []
    namespace: dict = {}
    checker = FloatChecker()
    with _in_temporary_folder():
        for i, ex in enumerate(page_examples(page)):
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(ex.code, f"{page.name} python block {i}", "exec"), namespace)
            except Exception as exc:  # the message names the block
                failures.append((ex.line, f"python block {i} raised {exc!r}"))
                break
            got = out.getvalue()
            if ex.want is None:
                if got and outputs_shown:
                    failures.append((ex.line, f"python block {i} prints but the page shows no Output block:\n{got}"))
            elif not got:
                failures.append((ex.line, f"python block {i} has an Output block but prints nothing"))
            elif not checker.check_output(ex.want, got):
                failures.append((ex.line, f"python block {i} printed\n{got}the page shows\n{ex.want}"))
    return failures


def site_pages() -> list[Path]:
    """The Markdown pages of the site (``docs/``, not the build output) that have ``python`` blocks."""
    pages = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "jupyter_execute" not in p.parts)
    return [p for p in pages if page_examples(p)]


# ------------------------------------------------------------------------------------------------ the check
def check_all() -> dict:
    """Every docstring's and every site page's examples: a JSON-ready report (failures with ``file:line``)."""
    start = time.process_time()
    failures = []
    tests = docstring_tests()
    for qualname, test in tests:
        report = run_docstring(test)
        if report:
            failures.append({"location": _location(test, report[0]), "message": f"{qualname}: " + "".join(report)})
    pages = site_pages()
    n_blocks = 0
    for page in pages:
        n_blocks += len(page_examples(page))
        for line, message in run_page(page):
            failures.append({"location": f"{page}:{line}", "message": message})
    return {
        "failures": failures,
        "docstrings": len(tests),
        "pages": len(pages),
        "blocks": n_blocks,
        "cpu_seconds": round(time.process_time() - start, 1),
    }


def main(argv: list[str]) -> None:
    """The child process: ``python theorycheck_examples.py REPORT.json`` writes the report (JSON) to that file."""
    (target,) = argv
    Path(target).write_text(json.dumps(check_all()), encoding="utf-8")


# ------------------------------------------------------------------------------------------------ Sphinx
#: The running check of this build (the child process, its temporary folder: the report and its output); not in
#: ``app.env``, which Sphinx pickles.
_CHILD: dict[int, tuple[subprocess.Popen, tempfile.TemporaryDirectory]] = {}


def _start(app) -> None:
    if not app.config.theorycheck_check_examples or app.builder.format != "html":
        return
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]  # the checkout first
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    folder = tempfile.TemporaryDirectory(prefix="tc-examples-")  # removed in _finish
    command = [sys.executable, str(Path(__file__).resolve()), str(Path(folder.name) / "report.json")]
    with open(Path(folder.name) / "output.log", "w") as log:  # the examples' own printing, shown if the check fails
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    _CHILD[id(app)] = (child, folder)


def _finish(app, exc) -> None:
    """Await the child; each failure is a warning at its file and line (``-W``: the build fails)."""
    if id(app) not in _CHILD:
        return
    child, folder = _CHILD.pop(id(app))
    with folder:
        if exc is not None:
            child.kill()
            child.wait()
            return
        child.wait()
        logger = _sphinx_logging.getLogger(__name__)
        report_path = Path(folder.name) / "report.json"
        if child.returncode != 0 or not report_path.is_file():
            output = (Path(folder.name) / "output.log").read_text(encoding="utf-8", errors="replace")
            tail = "\n".join(output.strip().splitlines()[-20:])
            logger.warning(
                "the examples' check failed to run (exit %s):\n%s", child.returncode, tail, type="theorycheck"
            )
            return
        report = json.loads(report_path.read_text(encoding="utf-8"))
    for failure in report["failures"]:
        logger.warning(failure["message"], location=failure["location"], type="theorycheck", subtype="example")
    logger.info(
        "examples checked: %d docstrings, %d python blocks on %d pages, %d failing (%.0f s CPU, in parallel)",
        report["docstrings"],
        report["blocks"],
        report["pages"],
        len(report["failures"]),
        report["cpu_seconds"],
    )


def setup(app) -> dict:
    app.add_config_value("theorycheck_check_examples", True, "", types=(bool, int))
    app.connect("builder-inited", _start)
    app.connect("build-finished", _finish, priority=100)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    main(sys.argv[1:])
